//! `runcore-postgres`: runcore's commit log and read ports in PostgreSQL (15 or newer), for
//! many processes on many machines.
//!
//! [`PostgresStore`] implements [`CommitLog`](runcore::store::CommitLog),
//! [`CommittedThreadView`](runcore::store::CommittedThreadView),
//! [`CheckpointReader`](runcore::store::CheckpointReader) and [`StoreHandles`](runcore::store::StoreHandles)
//! with the semantics of the reference [`MemoryStore`](runcore::store::MemoryStore) — the same checks
//! in the same order, the same answers — and passes runcore's whole conformance suite against a
//! real server.
//!
//! ```no_run
//! use runcore::{Message, RunDisposition, ThreadCommit, ThreadId};
//! use runcore::store::{CommitLog, CommittedThreadView};
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
//! # Ok::<(), runcore::store::StoreError>(())
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
//!    serialization as a version-conditional write under the thread's lock): the thread's head
//!    moves from that version to the next, and every other row of the commit is written with
//!    that move, so if another commit on the thread landed in between, nothing is written and
//!    the commit goes back to 1 and decides again on the newer state — a fenced writer then
//!    gets `VersionConflict`, exactly as if it had arrived second. Every commit on a thread
//!    moves its version, so an unchanged version means nothing the decision rested on changed.
//!    The one race the version cannot see, the same new run committed on two threads at once,
//!    ends on the run's (or its first operation's) primary key: the second write fails whole,
//!    goes back to 1, and is rejected (`RunOnOtherThread`), as the reference would reject it.
//!
//! The write is one call of a server-side function (`runcore_commit`, see below), so the
//! whole write is still one statement and one round trip.
//!
//! # Commits on distinct threads run side by side
//!
//! SPEC §7.1 (amended) asks for three things at once: commits on distinct threads do not
//! serialize on one shared row, or on a lock held through the commit's log flush; the
//! store-wide `sequence` is strictly increasing; and a reader paging with `from` never misses
//! an event that becomes visible later with a smaller sequence. The write does it so:
//!
//! 1. **The thread's lock** (`pg_advisory_xact_lock` on a key hashed from the schema and the
//!    thread id), held to the end of the transaction: commits on one thread queue here, and
//!    only they. Under it the thread's version is read again; if another commit on the thread
//!    landed since the decision, the write stops here, having taken no sequence, and the commit
//!    decides again.
//! 2. **The commit mutex** (a session-level `pg_advisory_lock` on a key hashed from the
//!    schema), held for three calls and no row: the transaction's id (`pg_current_xact_id()`,
//!    which assigns it: nothing before it in the transaction wrote or locked a row, so it had
//!    none), the commit sequence, and a contiguous block of event sequences (`nextval` of two
//!    `SEQUENCE`s, the block closed with `setval`). Then the mutex is released, before any row
//!    is written and long before the log flush. Transaction ids are handed out in increasing
//!    order, so **a commit's transaction id and its sequences are in the same order** as every
//!    other commit's.
//! 3. **The rows**, each event with its transaction's id (`xid`, an `xid8`).
//!
//! # Readers page behind a transaction-id horizon
//!
//! Commits still finish in any order: T1 takes sequence 5, T2 takes 6, T2's flush ends first.
//! A reader that saw 6 and paged on from 6 would never see 5. So `list_events` returns only
//! *settled* events: those whose transaction id is below its snapshot's horizon,
//! `pg_snapshot_xmin(pg_current_snapshot())` — every transaction with a smaller id has ended,
//! committed or not. Any commit still in flight, or not yet begun, has a transaction id at or
//! above the horizon, hence (2) sequences above every settled event's: it can only ever appear
//! *after* the reader's `from`. The horizon and the rows come from the same statement, so the
//! same snapshot. A page is the settled prefix of what the statement found (ids ascend with
//! sequences, so the unsettled rows are a suffix). When some rows found were not yet settled,
//! `list_events` looks again, a few milliseconds apart, until what it first found has settled
//! (at most 200 ms), so a host that just committed reads its own events at once.
//!
//! The horizon is the whole server's: **any transaction that holds a transaction id — on any
//! database of the server, runcore's or not — holds back which events `list_events` returns**
//! until it ends. Commits are one short statement each, so among themselves they hold it back
//! for about one commit; a long transaction elsewhere (a migration, a batch job, a session
//! left `idle in transaction`) holds it back for as long as it lasts, and meanwhile
//! `list_events` takes its 200 ms and returns what settled before it. Nothing is lost or
//! reordered; it appears late. Keep long write transactions off the server (or set
//! `idle_in_transaction_session_timeout`) where event readers need to keep up.
//!
//! The other reads are plain snapshots: `threads` and `pending_tickets` page by id, not by
//! sequence, so a commit that lands behind a page's cursor is found by the next listing from
//! the start, as with any keyset paging, and a commit in flight is invisible until it is
//! committed. So the thread and run rows may show a commit whose events `list_events` still
//! holds back for the horizon.
//!
//! # Gaps
//!
//! The sequences are strictly increasing but, across threads, not always dense (SPEC §7.1
//! amended allows it): a write that fails after taking its sequences — the same new run
//! committed on two threads at once (the loser's write fails on the run's primary key), a
//! connection lost mid-write, a server crash (a `SEQUENCE` may skip values after one) — leaves
//! its numbers unused. A rejected commit takes none (it is rejected before the write), and
//! neither does a commit that lost a race on its own thread. Within a thread, `thread_version`
//! is dense. A gap never blocks a reader: a rolled-back transaction has ended, so its id is
//! below the next snapshot's horizon like any other.
//!
//! # What it costs
//!
//! The commit mutex is the one store-wide critical section, and it holds no row and ends
//! before the commit's rows are written: commits on distinct threads share the log flush
//! (PostgreSQL's group commit) instead of queueing for one flush each, as the counter row of
//! schema version 1 made them do. `benches/commits.rs` measures it (1, 4, 8 and 16 writers,
//! with the share of time the writers' backends wait for a lock); `benches/RESULTS.md` has
//! the figures.
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
//! - Transaction ids are `xid8` (64-bit, never wrapping), so the horizon needs PostgreSQL 13
//!   or newer; the crate asks for 15.
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

pub use schema::{NotAStore, SCHEMA_VERSION, SchemaTooNew};
pub use store::{PostgresStore, URL_ENV};
