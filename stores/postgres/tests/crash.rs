//! Real crash tests against a real server: a child process drives the scripted agent session
//! against a store in its own schema and is killed with SIGKILL at pseudo-random points (see
//! `runcore_store_testkit::crash`). After every kill the store is reopened and checked: every
//! commit whose `commit_operation` had returned is there, nothing is half-written, sequences
//! are dense; after one to three kills on a schema, `Agent::recover` (Replay) finishes the
//! session and it must end with the uncrashed session's transcript and end causes.
//!
//! The server outlives the child, so what is tested is what a client crash leaves: the
//! server rolls back the dead connection's open transaction, or — when the kill came while its
//! `COMMIT` was in flight — keeps all of it ("landed unacknowledged" in the report). Before
//! the parent reopens a schema it waits until the child's connection is gone on the server, so
//! that transaction has been decided by then.
//!
//! A long run: `RUNCORE_CRASH_KILLS=200 scripts/with-postgres.sh cargo test -p
//! runcore-postgres --release --test crash -- --nocapture`.
#![cfg(unix)]

mod support;

use std::time::{Duration, Instant};

use runcore::store::StoreError;
use runcore_postgres::{PostgresStore, URL_ENV};
use runcore_store_testkit::crash::{CrashTest, child_main};

fn url() -> Result<String, StoreError> {
    std::env::var(URL_ENV)
        .map_err(|_| StoreError::unavailable(format!("{URL_ENV} is not set in the crash child")))
}

/// The child's store: its connection is named after the schema (`application_name`), so the
/// parent can tell when it is gone. Schema names are short enough for both (63 bytes).
fn open_as_child(schema: &str) -> Result<PostgresStore, StoreError> {
    let base = url()?;
    let separator = if base.contains('?') { '&' } else { '?' };
    PostgresStore::connect_in_schema(
        &format!("{base}{separator}application_name={schema}"),
        schema,
    )
}

/// The parent's store, opened once the killed child's connection has left the server.
fn open_after_child(schema: &str) -> Result<PostgresStore, StoreError> {
    let url = url()?;
    let mut observer = postgres::Client::connect(&url, postgres::NoTls)
        .map_err(|e| StoreError::backend("connect to watch the child's connection", e))?;
    let start = Instant::now();
    loop {
        let left = observer
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&schema],
            )
            .and_then(|row| row.try_get::<_, i64>(0))
            .map_err(|e| StoreError::backend("watch the child's connection", e))?;
        if left == 0 {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            return Err(StoreError::unavailable(format!(
                "the killed child's connection to {schema} is still open after 30 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    PostgresStore::connect_in_schema(&url, schema)
}

/// The child process of `commits_survive_sigkill`; it does nothing unless that test started
/// it.
#[test]
#[ignore = "the child process of commits_survive_sigkill; only that test runs it"]
fn crash_child() {
    child_main(open_as_child);
}

#[test]
fn commits_survive_sigkill() {
    let Some(server) = support::server() else {
        return;
    };
    let mut schemas = Vec::new();
    let report = CrashTest::new("crash_child")
        .run(
            |cycle| {
                let schema = server.unique_schema(&format!("crash{cycle}"));
                schemas.push(server.schema_guard(&schema));
                schema
            },
            open_after_child,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    drop(schemas);
    assert!(report.kills >= 20 || std::env::var("RUNCORE_CRASH_KILLS").is_ok());
    assert!(report.acknowledged > 0, "{report}");
}
