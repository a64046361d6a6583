//! Opening the store a worker persists to, from a URL: `sqlite:PATH` (one machine; several
//! worker processes may share the file) or `postgres://…` / `postgresql://…` (a cluster).
//! As for `runcore drive --store`, a SQLite URL may end in `?synchronous=normal` (or `full`,
//! the default).
//!
//! The handlers reach the store through [`SharedStore`], the workspace's one crossing from an
//! async host to a blocking port (`runcore-store-blocking`): every call runs on tokio's
//! blocking pool, never on the worker's async thread, and a panic in one is an error of that
//! invocation, not a poisoned lock for every other thread.

use runcore_store_blocking::Blocking;
use runcore_store_url::{Access, StoreUrl};

use runcore::store::BoxedStore;

/// A store shared by the handlers of one worker process. Each journaled step makes one
/// synchronous store call on the blocking pool ([`Blocking::call`]); a call that panics fails
/// its step (retried by Restate) and leaves the store usable.
pub type SharedStore = Blocking<BoxedStore>;

/// Why a store URL could not be opened: the registry's one-line message
/// (`runcore-store-url`), with any secret of the URL masked.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OpenStoreError(pub String);

/// Opens `url` as a [`SharedStore`] through the workspace's one backend registry
/// (`runcore-store-url`): the same URLs, checks and messages as `runcore drive --store`.
/// After a call panics, the handle is dropped and the next call opens the URL again.
pub fn open_store(url: &str) -> Result<SharedStore, OpenStoreError> {
    let url = StoreUrl::parse(url).map_err(OpenStoreError)?;
    let backend = runcore_store_url::open(&url, Access::Write).map_err(OpenStoreError)?;
    Ok(Blocking::reopening(backend, move || {
        runcore_store_url::open(&url, Access::Write)
            .map_err(runcore::store::StoreError::unavailable)
    }))
}

/// Wraps any store as a [`SharedStore`] (tests, an embedder's own backend). The same handle
/// is used again after a call panicked.
pub fn shared(store: BoxedStore) -> SharedStore {
    Blocking::new(store)
}
