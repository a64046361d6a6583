//! Opening the store a worker persists to, from a URL: `sqlite:PATH` (one machine; several
//! worker processes may share the file) or `postgres://…` / `postgresql://…` (a cluster).
//! As for `runcore drive --store`, a SQLite URL may end in `?synchronous=normal` (or `full`,
//! the default).

use std::sync::{Arc, Mutex};

use runcore_postgres::PostgresStore;
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};

use crate::host::ThreadStore;

/// A store shared by the handlers of one worker process. Each journaled step takes the lock
/// for one synchronous store call and never holds it across an `.await`.
pub type SharedStore = Arc<Mutex<Box<dyn ThreadStore>>>;

/// Why a store URL could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenStoreError {
    /// Neither `sqlite:` nor `postgres://` / `postgresql://`.
    #[error("unknown store URL {0:?}: expected sqlite:PATH or postgres://…")]
    UnknownScheme(String),
    /// A `?synchronous=` other than `full` or `normal`.
    #[error("store URL {0:?}: synchronous takes full or normal")]
    BadSynchronous(String),
    /// The SQLite file could not be opened as a runcore store.
    #[error("cannot open the SQLite store {path:?}: {source}")]
    Sqlite {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: Box<runcore_sqlite::OpenError>,
    },
    /// The PostgreSQL server refused or failed.
    #[error("cannot open the PostgreSQL store: {0}")]
    Postgres(#[source] runcore::StoreError),
}

/// Opens `url` as a [`SharedStore`].
pub fn open_store(url: &str) -> Result<SharedStore, OpenStoreError> {
    let store: Box<dyn ThreadStore> = if let Some(rest) = url.strip_prefix("sqlite:") {
        let (path, synchronous) = match rest.rsplit_once("?synchronous=") {
            Some((path, "full")) => (path, Synchronous::Full),
            Some((path, "normal")) => (path, Synchronous::Normal),
            Some(_) => return Err(OpenStoreError::BadSynchronous(url.to_owned())),
            None => (rest, Synchronous::Full),
        };
        let options = SqliteOptions::default().with_synchronous(synchronous);
        Box::new(
            SqliteStore::open(path, options).map_err(|source| OpenStoreError::Sqlite {
                path: path.to_owned(),
                source: Box::new(source),
            })?,
        )
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Box::new(PostgresStore::connect(url).map_err(OpenStoreError::Postgres)?)
    } else {
        return Err(OpenStoreError::UnknownScheme(url.to_owned()));
    };
    Ok(shared(store))
}

/// Wraps any store as a [`SharedStore`] (tests, an embedder's own backend).
pub fn shared(store: Box<dyn ThreadStore>) -> SharedStore {
    Arc::new(Mutex::new(store))
}
