//! Opening the store a worker persists to, from a URL: `sqlite:PATH` (one machine; several
//! worker processes may share the file) or `postgres://…` / `postgresql://…` (a cluster).
//! As for `runcore drive --store`, a SQLite URL may end in `?synchronous=normal` (or `full`,
//! the default).

use std::sync::{Arc, Mutex};

use runcore_store_url::{Access, StoreUrl};

use crate::host::ThreadStore;

/// A store shared by the handlers of one worker process. Each journaled step takes the lock
/// for one synchronous store call and never holds it across an `.await`.
pub type SharedStore = Arc<Mutex<Box<dyn ThreadStore>>>;

/// Why a store URL could not be opened: the registry's one-line message
/// (`runcore-store-url`), with any secret of the URL masked.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OpenStoreError(pub String);

/// Opens `url` as a [`SharedStore`] through the workspace's one backend registry
/// (`runcore-store-url`): the same URLs, checks and messages as `runcore drive --store`.
pub fn open_store(url: &str) -> Result<SharedStore, OpenStoreError> {
    let url = StoreUrl::parse(url).map_err(OpenStoreError)?;
    let backend = runcore_store_url::open(&url, Access::Write).map_err(OpenStoreError)?;
    Ok(shared(Box::new(backend)))
}

/// Wraps any store as a [`SharedStore`] (tests, an embedder's own backend).
pub fn shared(store: Box<dyn ThreadStore>) -> SharedStore {
    Arc::new(Mutex::new(store))
}
