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
//! # One transaction per commit
//!
//! A commit is one `READ COMMITTED` transaction; it writes all of the commit or, rejected or
//! failed, none of it. It takes at most three locks, always in this order, so two commits can
//! never wait on each other in a cycle:
//!
//! 1. **The thread's row** (`SELECT … FOR UPDATE`, its first statement): commits on one thread
//!    run one at a time. A writer that queued here reads the thread as the one before it left
//!    it, so a second writer from the same version gets `VersionConflict` and writes nothing
//!    (SPEC §7.1). Every check — duplicate operation, version, ordinal, terminal fence, run on
//!    another thread — is decided on rows that only commits holding this lock change. A row
//!    lock was chosen over a version-conditional `UPDATE` so that those checks are made on the
//!    state the commit builds on, before anything is written, in `MemoryStore`'s order.
//! 2. **A new run's key**: a run's first commit inserts the run's row with no `ON CONFLICT`, so
//!    if the same new run is committed on two threads at once, the second waits for the first
//!    and then fails on the key; it is tried again once, now sees the run, and is rejected
//!    (`RunOnOtherThread`), as the reference would.
//! 3. **The store's counter row**, last. After the checks, one statement does every write:
//!    the messages, state commands, run and thread rows first, then — its `WHERE` counts the
//!    rows those writes return, so they must be done before it can lock anything — it takes
//!    the next commit sequence and event sequences from the counter row, numbers and inserts
//!    the events and records the operation's receipt. Then `COMMIT`.
//!
//! So a commit is five round trips: `BEGIN`, lock the thread, read the run and operation,
//! write, `COMMIT` (seven for a thread's first commit, which creates the thread row).
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
//! The counter row is a store-wide critical section, from the moment the write statement
//! locks it to the end of `COMMIT`: the events, the receipt, the statement's answer to the
//! client and the `COMMIT` round trip. Everything before it — the thread lock, the checks, the
//! messages, state, run and thread rows — runs in parallel for commits on distinct threads;
//! that is why the counter is taken last. Two consequences, both measured by
//! `benches/commits.rs` (1, 4 and 8 writers, with the share of time the writers' backends wait
//! on each other's locks):
//! - The store's commit rate is bounded by one critical section per commit, however many
//!   writers and cores there are: on loopback with `synchronous_commit = off`, a few thousand
//!   commits per second.
//! - With `synchronous_commit = on` (the default, and what a durable deployment runs),
//!   `COMMIT` includes the write-ahead-log flush, so commits queue on the row one flush at a
//!   time instead of sharing flushes (group commit): the store's rate is about one commit per
//!   disk flush. A deployment that needs more can run the server with
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

mod codec;
mod read;
mod schema;
mod statements;
mod store;
mod write;

pub use schema::{SCHEMA_VERSION, SchemaTooNew};
pub use store::{PostgresStore, URL_ENV};
