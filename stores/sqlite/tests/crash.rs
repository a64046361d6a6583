//! Real crash tests: a child process drives the scripted agent session against a SQLite file
//! and is killed with SIGKILL at pseudo-random points (see `runcore_store_testkit::crash`).
//! After every kill the store is reopened and checked: every commit whose `commit_operation`
//! had returned is there, nothing is half-written, sequences are dense; after one to three
//! kills on a file, `Agent::recover` (Replay) finishes the session and it must end with the
//! uncrashed session's transcript and end causes.
//!
//! Cycles alternate between `synchronous = FULL` and `NORMAL` (both must survive a process
//! crash; they differ only on power loss). A long run:
//! `RUNCORE_CRASH_KILLS=200 cargo test -p runcore-sqlite --release --test crash -- --nocapture`.
#![cfg(unix)]

use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use runcore_store_testkit::crash::{CrashTest, child_main};
use tempfile::TempDir;

/// The synchronous level a location asks for (its file name says).
fn options_for(location: &str) -> SqliteOptions {
    let synchronous = if location.ends_with(".normal.sqlite") {
        Synchronous::Normal
    } else {
        Synchronous::Full
    };
    SqliteOptions::default().with_synchronous(synchronous)
}

fn open(location: &str) -> Result<SqliteStore, runcore_sqlite::OpenError> {
    SqliteStore::open(location, options_for(location))
}

/// The child process of `commits_survive_sigkill`; it does nothing unless that test started
/// it.
#[test]
#[ignore = "the child process of commits_survive_sigkill; only that test runs it"]
fn crash_child() {
    child_main(open);
}

#[test]
fn commits_survive_sigkill() {
    let dir = TempDir::with_prefix_in("sqlite-crash-", env!("CARGO_TARGET_TMPDIR"))
        .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"));
    let report = CrashTest::new("crash_child")
        .run(
            |cycle| {
                let level = if cycle % 2 == 0 { "normal" } else { "full" };
                dir.path()
                    .join(format!("cycle-{cycle}.{level}.sqlite"))
                    .display()
                    .to_string()
            },
            open,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.kills >= 20 || std::env::var("RUNCORE_CRASH_KILLS").is_ok());
    assert!(report.acknowledged > 0, "{report}");
}
