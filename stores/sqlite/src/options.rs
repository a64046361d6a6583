//! [`SqliteOptions`]: durability, lock waiting and how much is checked at open.

use std::time::Duration;

/// How much SQLite syncs to disk, i.e. what survives what once `commit` has returned
/// (the store always runs in WAL mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `PRAGMA synchronous = FULL`: the WAL is synced at every commit, so a commit that
    /// returned survives a process crash *and* a power loss or OS crash. The default.
    #[default]
    Full,
    /// `PRAGMA synchronous = NORMAL`: the WAL is synced only at checkpoints. A commit that
    /// returned survives a process crash (the data is in the OS's cache and the WAL), but the
    /// last commits before a power loss or OS crash may be rolled back — never torn: the
    /// database stays consistent. Several times faster.
    Normal,
}

impl Synchronous {
    /// The name hosts write for it (`"full"`, `"normal"`): in a store URL
    /// (`sqlite:PATH?synchronous=normal`) and the bindings' `synchronous` argument.
    pub fn as_str(self) -> &'static str {
        match self {
            Synchronous::Full => "full",
            Synchronous::Normal => "normal",
        }
    }

    /// The value of `PRAGMA synchronous`.
    pub fn pragma_value(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

impl std::str::FromStr for Synchronous {
    type Err = runcore::UnknownName;

    /// Reads the name [`Synchronous::as_str`] writes.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        [Synchronous::Full, Synchronous::Normal]
            .into_iter()
            .find(|s| s.as_str() == name)
            .ok_or_else(|| runcore::UnknownName {
                setting: "synchronous",
                expected: &["full", "normal"],
                got: name.to_owned(),
            })
    }
}

/// What [`SqliteStore::open`](crate::SqliteStore::open) checks in an existing database
/// before using it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenCheck {
    /// `PRAGMA quick_check`: reads every page and checks the structure of every table and
    /// index, so a corrupted file is refused at open with what SQLite found, rather than
    /// failing a read later. It costs a read of the whole file (tens of milliseconds for a
    /// store with 100,000 messages). The default.
    #[default]
    Quick,
    /// Only the header, the schema table and runcore's schema version: constant time. Damage
    /// inside the data then shows up as a [`StoreError::Unavailable`] from the read or commit
    /// that meets it.
    ///
    /// [`StoreError::Unavailable`]: runcore::store::StoreError::Unavailable
    SchemaOnly,
}

/// How a [`SqliteStore`](crate::SqliteStore) opens and writes.
///
/// ```
/// use runcore_sqlite::{SqliteOptions, Synchronous};
///
/// let fast = SqliteOptions::default().with_synchronous(Synchronous::Normal);
/// assert_eq!(fast.synchronous, Synchronous::Normal);
/// assert_eq!(SqliteOptions::default().synchronous, Synchronous::Full);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// Durability of a returned commit (default [`Synchronous::Full`]).
    pub synchronous: Synchronous,
    /// How long a commit waits for another connection's write transaction to finish before
    /// failing with [`StoreError::Unavailable`](runcore::store::StoreError::Unavailable)
    /// ("database is locked"). Default 5 s.
    pub busy_timeout: Duration,
    /// What is checked at open (default [`OpenCheck::Quick`]).
    pub check: OpenCheck,
    /// `PRAGMA wal_autocheckpoint`: after a commit leaves the WAL this many pages long, the
    /// WAL is copied back into the database file. Default 10,000 pages (about 40 MB of WAL).
    /// At NORMAL a checkpoint is the only time the files are synced (twice), so a short
    /// interval makes commits pay for syncs after all; SQLite's own default of 1,000 pages
    /// comes to a checkpoint about every hundred 1 KB commits. A crashed store replays its WAL
    /// when it is next opened, so a longer WAL costs that open a little more.
    pub checkpoint_pages: u32,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
            check: OpenCheck::Quick,
            checkpoint_pages: 10_000,
        }
    }
}

impl SqliteOptions {
    /// The same options with another synchronous level.
    pub fn with_synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// The same options with another busy timeout.
    pub fn with_busy_timeout(mut self, busy_timeout: Duration) -> Self {
        self.busy_timeout = busy_timeout;
        self
    }

    /// The same options with another open check.
    pub fn with_check(mut self, check: OpenCheck) -> Self {
        self.check = check;
        self
    }
}
