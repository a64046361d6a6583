//! Compaction on SQLite (SPEC §8.9): the `compacted` draft is stored and read back typed, and
//! an agent recovered from the file rebuilds the live agent's model context (the testkit's
//! [`runcore_store_testkit::compaction::check`]).

use runcore_sqlite::{SqliteOptions, SqliteStore};
use tempfile::TempDir;

#[test]
fn a_compacted_thread_recovers_its_model_context_from_the_file() {
    let dir = TempDir::with_prefix("sqlite-compaction-").unwrap();
    let path = dir.path().join("store.db");
    let mut store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    runcore_store_testkit::compaction::check(&mut store, &runcore::ThreadId::new("t"))
        .unwrap_or_else(|e| panic!("{e}"));
    // And from a second handle on the same file, as after a restart.
    drop(store);
    let store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    let config = runcore::AgentConfig::for_thread("t");
    let agent = runcore::Agent::recover(
        config,
        &store,
        &runcore::ThreadId::new("t"),
        runcore::RecoveryPolicy::Replay,
    )
    .unwrap();
    assert_eq!(agent.context_start(), 3);
}
