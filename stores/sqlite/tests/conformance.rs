//! The core's whole conformance suite (SPEC §7, §7.1) against `SqliteStore`: once on a real
//! file (each case in its own temporary directory, removed when the case and every handle it
//! opened are done), once on an in-memory store.

use runcore::store::Intercepted;
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use runcore_store_testkit::{Guarded, guarded};
use tempfile::TempDir;

/// A fresh store file in a fresh directory under cargo's per-target temporary directory.
fn on_file(synchronous: Synchronous) -> Intercepted<Guarded<SqliteStore, TempDir>> {
    let dir = TempDir::with_prefix_in("sqlite-conformance-", env!("CARGO_TARGET_TMPDIR"))
        .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"));
    let options = SqliteOptions::default().with_synchronous(synchronous);
    let store = SqliteStore::open(dir.path().join("store.sqlite"), options)
        .unwrap_or_else(|e| panic!("cannot open a fresh store: {e}"));
    guarded(store, dir)
}

/// The suite on a file at the default durability (FULL).
mod file {
    runcore::conformance_tests!(|| super::on_file(runcore_sqlite::Synchronous::Full));
}

/// The suite on a file at NORMAL.
mod file_normal {
    runcore::conformance_tests!(|| super::on_file(runcore_sqlite::Synchronous::Normal));
}

/// The suite in memory (handles share one named in-memory database).
mod memory {
    runcore::conformance_tests!(|| runcore_sqlite::SqliteStore::open_in_memory()
        .unwrap_or_else(|e| panic!("cannot open an in-memory store: {e}")));
}
