//! The server the tests run against, and fresh stores on it.
//!
//! `RUNCORE_PG_URL` names the server (`scripts/with-postgres.sh` starts a throwaway one and
//! sets it). Without it a test prints that it was skipped and returns — except under
//! `CI=true`, where a missing server is a failure: CI must never pass by testing nothing.
//!
//! Each [`Scratch`] store lives in a schema of its own, named uniquely and dropped when the
//! store and all its handles are, so tests run in parallel on one database without seeing each
//! other.

#![allow(dead_code)] // Each test crate uses a different part of this module.

use std::io::Write;
use std::ops::{Deref, DerefMut, Range};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::{SystemTime, UNIX_EPOCH};

use postgres::{Client, NoTls};
use runcore::{
    CheckpointReader, CommitLog, CommitOperation, CommitReceipt, CommitRecord, CommittedThreadView,
    EventRecord, EventScope, Message, ResumeTicket, RunId, RunRecord, StateCommand, StoreError,
    StoreHandles, ThreadCommit, ThreadId, ThreadSummary, TranscriptSnapshotRef,
};
use runcore_postgres::{PostgresStore, URL_ENV};

/// True when the environment says this is CI (`CI=true`, as CI services set it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The server, or `None` after printing that the test is skipped. Under CI a missing server
/// fails the test.
pub fn server() -> Option<Server> {
    match std::env::var(URL_ENV) {
        Ok(url) if !url.trim().is_empty() => Some(Server { url }),
        _ if in_ci() => panic!(
            "{URL_ENV} is not set and CI=true: the PostgreSQL tests must run in CI, against a \
             real server. Run them through scripts/with-postgres.sh, which starts one and sets \
             {URL_ENV} (e.g. `scripts/with-postgres.sh cargo test --workspace`)."
        ),
        _ => {
            static SAID: Once = Once::new();
            SAID.call_once(|| {
                // Straight to stderr, past the test harness's capture, so a person sees it.
                let _ = writeln!(
                    std::io::stderr(),
                    "skipped: {URL_ENV} is not set (the PostgreSQL tests need a server; \
                     scripts/with-postgres.sh starts one)"
                );
            });
            None
        }
    }
}

/// A PostgreSQL server to test against.
#[derive(Debug, Clone)]
pub struct Server {
    /// Its URL, from `RUNCORE_PG_URL`.
    pub url: String,
}

impl Server {
    /// A name no other test, process or run uses.
    pub fn unique_schema(&self, label: &str) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!(
            "runcore_test_{label}_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// A fresh, empty store in a schema of its own.
    pub fn scratch(&self) -> Scratch {
        self.scratch_named(&self.unique_schema("store"))
    }

    /// A fresh store in `schema` (created); the schema is dropped with the last handle.
    pub fn scratch_named(&self, schema: &str) -> Scratch {
        let store = PostgresStore::connect_in_schema(&self.url, schema)
            .unwrap_or_else(|e| panic!("cannot open a store at {URL_ENV}: {e}"));
        Scratch {
            store,
            _schema: Arc::new(SchemaGuard {
                url: self.url.clone(),
                schema: schema.to_owned(),
            }),
        }
    }

    /// The server's URL with one more query parameter (`key=value`).
    pub fn url_with(&self, parameter: &str) -> String {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{separator}{parameter}", self.url)
    }

    /// A plain client, for the tests' own SQL.
    pub fn client(&self) -> Client {
        Client::connect(&self.url, NoTls)
            .unwrap_or_else(|e| panic!("cannot connect to {URL_ENV}: {e}"))
    }

    /// A plain client whose `search_path` is `schema`.
    pub fn client_in(&self, schema: &str) -> Client {
        let mut client = self.client();
        client
            .batch_execute(&format!("SET search_path TO {}", quote(schema)))
            .unwrap_or_else(|e| panic!("cannot set the search_path: {e}"));
        client
    }
}

/// `name` as a quoted SQL identifier.
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Drops its schema when the last handle onto it is gone.
#[derive(Debug)]
struct SchemaGuard {
    url: String,
    schema: String,
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let dropped = Client::connect(&self.url, NoTls).and_then(|mut client| {
            client.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                quote(&self.schema)
            ))
        });
        if let Err(e) = dropped {
            let _ = writeln!(
                std::io::stderr(),
                "warning: could not drop test schema {}: {e}",
                self.schema
            );
        }
    }
}

/// A [`PostgresStore`] in a schema of its own, dropped with the last handle.
#[derive(Debug)]
pub struct Scratch {
    store: PostgresStore,
    _schema: Arc<SchemaGuard>,
}

impl Scratch {
    /// The schema the store lives in.
    pub fn schema(&self) -> &str {
        &self._schema.schema
    }
}

impl Deref for Scratch {
    type Target = PostgresStore;
    fn deref(&self) -> &PostgresStore {
        &self.store
    }
}

impl DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut PostgresStore {
        &mut self.store
    }
}

impl CommitLog for Scratch {
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        self.store.commit(commit)
    }
    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        self.store.commit_operation(operation)
    }
}

impl CommittedThreadView for Scratch {
    fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError> {
        self.store.committed_messages(thread)
    }
    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.store.run(run)
    }
    fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError> {
        self.store.latest_run(thread)
    }
    fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError> {
        self.store.resume_ticket(run)
    }
    fn committed_state(&self, thread: &ThreadId) -> Result<Vec<StateCommand>, StoreError> {
        self.store.committed_state(thread)
    }
    fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        self.store.thread_version(thread)
    }
    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        self.store.threads(after, limit)
    }
    fn pending_tickets(
        &self,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<Vec<ResumeTicket>, StoreError> {
        self.store.pending_tickets(after, limit)
    }
    fn transcript_snapshot(&self, thread: &ThreadId) -> Result<TranscriptSnapshotRef, StoreError> {
        self.store.transcript_snapshot(thread)
    }
    fn verify_transcript_snapshot(
        &self,
        snapshot: &TranscriptSnapshotRef,
    ) -> Result<(), StoreError> {
        self.store.verify_transcript_snapshot(snapshot)
    }
    fn transcript_slice(
        &self,
        snapshot: &TranscriptSnapshotRef,
        ranges: &[Range<usize>],
    ) -> Result<Vec<Message>, StoreError> {
        self.store.transcript_slice(snapshot, ranges)
    }
}

impl CheckpointReader for Scratch {
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.store.list_events(scope, from, limit)
    }
}

impl StoreHandles for Scratch {
    fn open_handle(&self) -> Result<Self, StoreError> {
        Ok(Scratch {
            store: self.store.open_handle()?,
            _schema: Arc::clone(&self._schema),
        })
    }
}
