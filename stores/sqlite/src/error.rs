//! [`OpenError`]: why a path could not be opened as a runcore store, naming what was found.
//! Every refusal happens before anything at the path is created or changed.

use std::path::{Path, PathBuf};

use runcore::store::StoreError;

/// Why [`SqliteStore::open`](crate::SqliteStore::open) refused or failed. Each message names
/// the path and what was found there.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The file's directory does not exist (directories are never created).
    #[error(
        "cannot open {}: its directory {} does not exist (runcore does not create directories)",
        path.display(),
        directory.display()
    )]
    MissingDirectory {
        /// The path asked for.
        path: PathBuf,
        /// Its missing parent.
        directory: PathBuf,
    },
    /// Something that is not a directory stands where the file's directory should be.
    #[error("cannot open {}: {} is not a directory", path.display(), directory.display())]
    ParentNotDirectory {
        /// The path asked for.
        path: PathBuf,
        /// The parent that is not a directory.
        directory: PathBuf,
    },
    /// The path is a directory.
    #[error("cannot open {}: it is a directory, not a store file", path.display())]
    IsDirectory {
        /// The path asked for.
        path: PathBuf,
    },
    /// The file is not a SQLite database at all.
    #[error(
        "{} is not a SQLite database (it starts with {found}); refusing to use it as a runcore store",
        path.display()
    )]
    NotSqlite {
        /// The file.
        path: PathBuf,
        /// Its first bytes, as text or hex.
        found: String,
    },
    /// The file is a SQLite database, but damaged.
    #[error("{} is a corrupt SQLite database: {detail}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What SQLite reported.
        detail: String,
    },
    /// A SQLite database that has tables (or other schema objects) but not runcore's schema.
    #[error(
        "{} is a SQLite database without runcore's schema (it holds {found}); refusing to use it as a runcore store",
        path.display()
    )]
    ForeignDatabase {
        /// The file.
        path: PathBuf,
        /// The schema objects found, e.g. `table customers, table orders`.
        found: String,
    },
    /// A runcore store written by a newer runcore.
    #[error(
        "{} is a runcore store at schema version {found}, newer than version {supported} that this build reads; use a newer runcore",
        path.display()
    )]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// The store's schema version.
        found: i64,
        /// The newest this build reads.
        supported: u32,
    },
    /// A runcore store whose schema is incomplete or unreadable.
    #[error("{} is a damaged runcore store: {detail}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The file system refused (permissions, I/O).
    #[error("cannot open {}: {source}", path.display())]
    Io {
        /// The path asked for.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// SQLite failed (locked by another process for longer than the busy timeout, I/O).
    #[error("cannot open {}: SQLite failed to {action}: {source}", path.display())]
    Sqlite {
        /// The path asked for.
        path: PathBuf,
        /// What was being done.
        action: String,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
}

impl OpenError {
    /// A stable snake_case code for the kind of refusal or failure.
    pub fn code(&self) -> &'static str {
        match self {
            OpenError::MissingDirectory { .. } => "missing_directory",
            OpenError::ParentNotDirectory { .. } => "parent_not_directory",
            OpenError::IsDirectory { .. } => "is_directory",
            OpenError::NotSqlite { .. } => "not_sqlite",
            OpenError::Corrupt { .. } => "corrupt",
            OpenError::ForeignDatabase { .. } => "foreign_database",
            OpenError::NewerSchema { .. } => "newer_schema",
            OpenError::Damaged { .. } => "damaged",
            OpenError::Io { .. } => "io",
            OpenError::Sqlite { .. } => "sqlite",
        }
    }

    /// A SQLite failure while `action`; corruption is reported as [`OpenError::Corrupt`].
    pub(crate) fn sqlite(path: &Path, action: &str, source: rusqlite::Error) -> OpenError {
        if is_corruption(&source) {
            OpenError::Corrupt {
                path: path.to_owned(),
                detail: format!("SQLite could not {action}: {source}"),
            }
        } else {
            OpenError::Sqlite {
                path: path.to_owned(),
                action: action.to_owned(),
                source,
            }
        }
    }
}

/// SQLite's verdicts for a damaged file ("database disk image is malformed", "file is not a
/// database").
pub(crate) fn is_corruption(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

/// An open failure is a backend failure to the store ports (for hosts that hold a
/// [`StoreError`]).
impl From<OpenError> for StoreError {
    fn from(error: OpenError) -> Self {
        StoreError::backend(error.to_string(), error)
    }
}

/// A SQLite failure of a read or commit, naming what was being done.
pub(crate) fn backend(what: &str, error: rusqlite::Error) -> StoreError {
    let message = if is_corruption(&error) {
        format!("{what}: the database file is corrupt ({error})")
    } else {
        format!("{what}: {error}")
    };
    StoreError::backend(message, error)
}
