//! # runcore-sqlite — the embedded SQLite backend of runcore
//!
//! [`SqliteStore`] keeps runcore's commit log in one SQLite file (or in memory) and answers
//! the read ports from it: it implements [`CommitLog`](runcore::store::CommitLog),
//! [`CommittedThreadView`](runcore::store::CommittedThreadView),
//! [`CheckpointReader`](runcore::store::CheckpointReader) and [`StoreHandles`],
//! with exactly the semantics of the core's reference `MemoryStore`, and it runs the core's
//! whole conformance suite against a real file.
//!
//! ```
//! use runcore::{CommitOperation, Message, RunDisposition, ThreadCommit, ThreadId};
//! use runcore::store::{CommitLog, CommittedThreadView};
//! use runcore_sqlite::{SqliteOptions, SqliteStore};
//!
//! # let dir = std::env::temp_dir().join(format!("runcore-sqlite-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let mut store = SqliteStore::open(dir.join("agent.sqlite"), SqliteOptions::default())?;
//! let commit = ThreadCommit::assemble(
//!     ThreadId::new("t1"),
//!     RunDisposition::Running { run_id: "t1/run-1".into() },
//!     true,
//!     vec![Message::user("hello")],
//!     vec![],
//!     vec![],
//! );
//! // Fenced and idempotent: ordinal 0 of the run, built on thread version 0.
//! let receipt = store.commit_operation(CommitOperation::new(commit, 0, 0))?;
//! assert_eq!(receipt.record.sequence, 1);
//! assert_eq!(store.committed_messages(&ThreadId::new("t1"))?.len(), 1);
//! # drop(store);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Opening
//!
//! [`SqliteStore::open`] takes a path and [`SqliteOptions`]. A missing file is created (its
//! directory must exist: directories are never created); a 0-byte file or a SQLite database
//! without any tables becomes a new store; anything else that is not a runcore store this
//! build can read is refused with an [`OpenError`] that names what was found, and nothing at
//! the path is created or changed. [`SqliteStore::open_in_memory`] gives a private
//! in-memory store.
//!
//! | at the path | result |
//! |-------------|--------|
//! | nothing (directory exists) / a 0-byte file / SQLite without tables | a new store |
//! | directory missing / a directory | [`OpenError::MissingDirectory`] / [`OpenError::IsDirectory`] |
//! | not a SQLite file | [`OpenError::NotSqlite`] (names its first bytes) |
//! | a damaged SQLite file | [`OpenError::Corrupt`] (what SQLite or `quick_check` found) |
//! | SQLite with other tables | [`OpenError::ForeignDatabase`] (names them) |
//! | runcore store, newer schema | [`OpenError::NewerSchema`] (both versions) |
//! | runcore store, older schema | migrated forward in one transaction, then used |
//!
//! ## Durability and concurrency
//!
//! The file runs in WAL mode. Every commit is one `BEGIN IMMEDIATE` transaction: it takes the
//! write lock first, then checks (in `MemoryStore`'s order), allocates the store-wide commit
//! and event sequences as `max + 1` *inside* the transaction, appends, and commits. So a
//! commit is all or nothing (a crash at any point leaves either all of it or none of it),
//! sequences are dense and commit order is sequence order, and a reader paging events by
//! sequence never misses a commit that becomes visible later with a smaller sequence.
//! With [`Synchronous::Full`] (the default) a commit that returned survives a power loss;
//! with [`Synchronous::Normal`] it survives a process crash (the crash tests kill the writer
//! with `SIGKILL` at both levels) but the last commits may be lost to a power loss.
//!
//! Several handles ([`StoreHandles::open_handle`]: a
//! new connection) and several processes may use one file at once: writers are serialized
//! by SQLite's lock (a writer waits up to [`SqliteOptions::busy_timeout`]), readers never
//! wait, and the fences of SPEC §7.1 (`expected_thread_version`, ordinals) are checked
//! inside the writer's transaction. In-memory stores share one named database between the
//! handles of one process (SQLite's `memdb` VFS); use a file to share between processes.
//!
//! ## Schema (version 1)
//!
//! | table | one row per | holds |
//! |-------|-------------|-------|
//! | `runcore_schema` | store | the schema version |
//! | `commits` | accepted commit | `sequence` (store-wide, dense), thread, run, thread version |
//! | `threads` | thread | version (commit count), latest run, message and state counts, the digest of the whole transcript |
//! | `runs` | run | thread, state (JSON), ticket (JSON, only while Awaiting), commit count |
//! | `messages` | message | thread, position, commit sequence, chained digest, body (JSON) |
//! | `state_commands` | state command | thread, position, commit sequence, body (JSON) |
//! | `events` | audit event | `sequence` (store-wide, dense), commit sequence, thread, run, kind, payload (JSON) |
//! | `operations` | idempotent operation | (run, ordinal) → payload hash, commit sequence, thread version |
//!
//! Messages, tickets, states, state commands and payloads are the core's own serde JSON, so
//! nothing is mapped by hand and nothing can drift from the core's types. Each message row
//! carries the chained transcript digest up to it ([`runcore::store::chain_digest`]), so
//! pinning a transcript snapshot and verifying it are single-row reads, and a pin made by
//! this store verifies on any other backend. Indexes: messages and state commands by
//! (thread, position); events by thread and by run (ordered by sequence); Awaiting runs by
//! run id (a partial index for `pending_tickets`).
//!
//! Migrations are forward only: `runcore_schema` says which version a file is at, and opening
//! an older file applies the missing migrations and the new version in one transaction. A
//! file newer than [`SCHEMA_VERSION`] is refused rather than misread.
//!
//! ## Why these choices
//!
//! - **SQLite through `rusqlite` with `bundled`**: the embedded default must build on a fresh
//!   machine with only the Rust toolchain, and every machine then runs the same SQLite.
//! - **WAL**: readers and the writer do not block each other, and a commit appends to the
//!   log instead of rewriting pages in place twice.
//! - **`IMMEDIATE` transactions**: a deferred transaction that reads and then writes can fail
//!   with `SQLITE_BUSY` halfway when another writer got in between; taking the write lock
//!   first makes every check read what the append builds on.
//! - **A long checkpoint interval** ([`SqliteOptions::checkpoint_pages`], 10,000 pages): at
//!   NORMAL the only syncs are the two of each checkpoint, and with SQLite's default of 1,000
//!   pages they came every hundred or so commits and cost more than the commits themselves.
//! - **Counters in the thread row** (version, message and state counts, last digest): a commit
//!   costs O(size of the commit + log n), never a scan of the thread's history.
//! - **The checks are `MemoryStore`'s, in its order**, re-stated against SQL rows; the rules
//!   themselves (`ThreadCommit::validate`, the digest, the ranges check) are the core's
//!   functions, called, not copied.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use runcore::store::{StoreError, StoreHandles};
use rusqlite::Connection;

mod claims;
mod codec;
mod error;
mod open;
mod options;
mod read;
mod schema;
mod write;

pub use error::OpenError;
pub use options::{OpenCheck, SqliteOptions, Synchronous};
pub use schema::{APPLICATION_ID, SCHEMA_VERSION};

/// Where a store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Location {
    /// A file.
    File(PathBuf),
    /// A named in-memory database of this process.
    Memory(String),
}

/// A runcore commit log and its read ports in SQLite (see the crate docs).
///
/// One value is one connection: it is `Send` but not `Sync`. For several threads, give each
/// its own handle ([`StoreHandles::open_handle`]).
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    location: Location,
    options: SqliteOptions,
}

static MEMORY_STORES: AtomicU64 = AtomicU64::new(0);

impl SqliteStore {
    /// Opens the store file at `path`, creating it if it does not exist (its directory must),
    /// migrating an older schema forward, and refusing anything that is not a runcore store
    /// this build reads (see the crate docs for every case). On a refusal nothing at `path` is
    /// created or changed.
    pub fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteStore, OpenError> {
        let path = open::file_path(path.as_ref());
        let conn = open::open_file(&path, &options)?;
        Ok(SqliteStore {
            conn,
            location: Location::File(path),
            options,
        })
    }

    /// A new, empty in-memory store. Handles opened from it share it; it is gone when the
    /// last one is dropped.
    pub fn open_in_memory() -> Result<SqliteStore, OpenError> {
        Self::open_in_memory_with(SqliteOptions::default())
    }

    /// [`open_in_memory`](Self::open_in_memory) with options (only the busy timeout matters
    /// in memory).
    pub fn open_in_memory_with(options: SqliteOptions) -> Result<SqliteStore, OpenError> {
        let n = MEMORY_STORES.fetch_add(1, Ordering::Relaxed);
        let name = format!("runcore-memory-{}-{n}", std::process::id());
        let conn = open::open_memory(&name, &options)?;
        Ok(SqliteStore {
            conn,
            location: Location::Memory(name),
            options,
        })
    }

    /// The store's file, `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        match &self.location {
            Location::File(path) => Some(path),
            Location::Memory(_) => None,
        }
    }

    /// The options it was opened with.
    pub fn options(&self) -> &SqliteOptions {
        &self.options
    }

    /// Opens another connection onto the same store.
    fn reopen(&self) -> Result<SqliteStore, OpenError> {
        let conn = match &self.location {
            Location::File(path) => open::open_existing(path, &self.options)?,
            Location::Memory(name) => open::open_memory(name, &self.options)?,
        };
        Ok(SqliteStore {
            conn,
            location: self.location.clone(),
            options: self.options.clone(),
        })
    }
}

impl StoreHandles for SqliteStore {
    fn open_handle(&self) -> Result<Self, StoreError> {
        Ok(self.reopen()?)
    }
}
