//! `runcore-postgres`: runcore's commit log and read ports in PostgreSQL (15 or newer), for
//! many processes on many machines.
//!
//! [`PostgresStore`] implements [`CommitLog`](runcore::CommitLog),
//! [`CommittedThreadView`](runcore::CommittedThreadView),
//! [`CheckpointReader`](runcore::CheckpointReader) and [`StoreHandles`](runcore::StoreHandles)
//! with the semantics of the reference [`MemoryStore`](runcore::MemoryStore) — the same checks
//! in the same order, the same answers — and passes runcore's whole conformance suite against a
//! real server.
//!
//! ```no_run
//! use runcore::{CommitLog, CommittedThreadView, Message, RunDisposition, ThreadCommit, ThreadId};
//! use runcore_postgres::PostgresStore;
//!
//! let mut store = PostgresStore::connect("postgresql://app@127.0.0.1:5432/app")?;
//! let commit = ThreadCommit::assemble(
//!     ThreadId::new("t1"),
//!     RunDisposition::Running { run_id: "r1".into() },
//!     true,
//!     vec![Message::user("hello")],
//!     vec![],
//!     vec![],
//! );
//! let record = store.commit(commit)?;
//! assert_eq!(store.thread_version(&ThreadId::new("t1"))?, record.thread_version);
//! # Ok::<(), runcore::StoreError>(())
//! ```
//!
//! # One transaction per commit: read, decide, write
//!
//! A commit is two statements, and its write is one transaction — one statement, so there is
//! no `BEGIN` or `COMMIT` round trip:
//!
//! 1. **Read**, in one snapshot: the thread's head row (its version, counts and transcript
//!    digest), the run's row and the operation's stored receipt.
//! 2. **Decide**, in Rust, with `MemoryStore`'s checks in `MemoryStore`'s order (duplicate
//!    operation, payload reuse, version, ordinal, terminal fence, run on another thread,
//!    counters). A rejection or a duplicate is answered here and writes nothing.
//! 3. **Write**, conditionally on the thread's version read in 1 (SPEC §7.1's per-thread
//!    serialization as a version-conditional write): the thread's head moves from that version
//!    to the next, and every other row of the commit is written from that move, so if another
//!    commit on the thread landed in between, nothing is written and the commit goes back
//!    to 1 and decides again on the newer state — a fenced writer then gets `VersionConflict`,
//!    exactly as if it had arrived second. Every commit on a thread moves its version, so an
//!    unchanged version means nothing the decision rested on changed. The one race the version
//!    cannot see, the same new run committed on two threads at once, ends on the run's (or its
//!    first operation's) primary key: the second write fails whole, goes back to 1, and is
//!    rejected (`RunOnOtherThread`), as the reference would reject it.
//!
//! Inside the write, the store's **counter row is taken last**: the statement writes the
//! messages, state commands, run and thread rows, and only then — the counter update's `WHERE`
//! counts the rows those writes return, so they must be done before it can lock anything —
//! takes the next commit sequence and event sequences from the counter row, and writes the
//! events and the operation's receipt with them.
//!
//! # Why the sequences come from a locked row, inside the transaction
//!
//! `EventRecord::sequence` is store-wide, dense from 1, and in commit order (SPEC §7, §7.1),
//! and a reader pages with `from` = the last sequence it saw. A PostgreSQL `SEQUENCE` breaks
//! both promises: `nextval` is not transactional, so a rolled-back commit leaves a gap; and two
//! transactions can commit in the opposite order of the values they drew — T1 draws 5, T2
//! draws 6, T2 commits first, a reader sees 6 and pages on from 6, and never sees 5 when T1
//! commits a moment later.
//!
//! The counter row cannot do either. Its update rolls back with a rejected or failed commit, so
//! the sequences stay dense. And T2 cannot draw a number until T1's transaction has ended,
//! because T1 holds the row's lock until then; PostgreSQL makes a transaction visible before
//! it releases its locks, so by the time T2 draws 6, number 5 is visible to every new
//! snapshot. Whenever a reader sees sequence *s*, it can see every sequence below *s*: commit
//! order is sequence order, and paging from the last sequence seen misses nothing.
//!
//! # What it costs
//!
//! The counter row is a store-wide critical section: from the moment the write statement locks
//! it until the statement's transaction has committed — the events, the receipt and the commit
//! itself, all inside the server (no round trip to the client happens while it is held).
//! Everything else — the read, the decision, the messages, state, run and thread rows — runs
//! in parallel for commits on distinct threads. Two consequences, measured by
//! `benches/commits.rs` (1, 4 and 8 writers, with where the writers' backends wait):
//! - However many writers and cores there are, the store commits at most one critical section
//!   at a time.
//! - With `synchronous_commit = on` (the default, and what a durable deployment runs), the
//!   commit includes the write-ahead-log flush, so commits queue on the row one flush at a
//!   time instead of sharing flushes (group commit): the store's rate is bounded by about one
//!   commit per disk flush. A deployment that needs more can run the server with
//!   `synchronous_commit = off` (a server crash may then lose the last commits, but never
//!   reorders or half-writes one) — the price of one dense, commit-ordered sequence.
//!
//! # Reads
//!
//! Every read is one statement, so it sees one committed snapshot. Transcript snapshots use
//! the chained digest stored with each message, so pinning and verifying read one row.
//!
//! # Limits
//!
//! - Counters are `bigint`: the commit and event sequences, versions and counts stop at
//!   `i64::MAX` (a commit that would pass it is rejected with `CounterOverflow`), where
//!   `MemoryStore`'s stop at `u64::MAX`.
//! - Connections are not encrypted (no TLS connector is built in): use the store on loopback,
//!   a unix socket or a trusted network.
//!
//! # Tests
//!
//! The tests need a server: `scripts/with-postgres.sh cargo test -p runcore-postgres` starts a
//! throwaway one and sets `RUNCORE_PG_URL`. Without `RUNCORE_PG_URL` the tests say they were
//! skipped, except under `CI=true`, where they fail.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod claims;
mod codec;
mod read;
mod schema;
mod statements;
mod store;
mod write;

pub use schema::{SCHEMA_VERSION, SchemaTooNew};
pub use store::{PostgresStore, URL_ENV};
