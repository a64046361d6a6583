//! Opening a path: what is there decides between creating a store, using it, and refusing.
//!
//! | at the path | result |
//! |-------------|--------|
//! | nothing, directory exists | a new store (the file is created) |
//! | nothing, directory missing | [`OpenError::MissingDirectory`] (directories are never created) |
//! | a directory | [`OpenError::IsDirectory`] |
//! | a 0-byte file | a new store |
//! | a file without the SQLite header | [`OpenError::NotSqlite`] |
//! | a SQLite database SQLite calls malformed | [`OpenError::Corrupt`] |
//! | a SQLite database with no schema objects | a new store |
//! | a SQLite database with other tables | [`OpenError::ForeignDatabase`] |
//! | a runcore store, older schema | migrated forward, then used |
//! | a runcore store, this schema | used |
//! | a runcore store, newer schema | [`OpenError::NewerSchema`] |
//!
//! Every refusal is decided before anything is written: the header is read with plain file
//! I/O, and an existing database is only read (its schema table, `quick_check`) until it is
//! known to be a runcore store or empty. Only then is it switched to WAL and migrated.

use std::io::Read;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::error::OpenError;
use crate::options::{OpenCheck, SqliteOptions};
use crate::schema::{self, Found, MIGRATIONS};

/// The 16 bytes every SQLite database file starts with.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";
/// A SQLite database header is 100 bytes long.
const HEADER_LEN: u64 = 100;

/// What is at the path before SQLite touches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnDisk {
    /// Nothing: the file will be created.
    Missing,
    /// A 0-byte file.
    Empty,
    /// A file with the SQLite header.
    Sqlite,
}

/// Looks at the path with plain file I/O (nothing is created or changed).
pub(crate) fn look(path: &Path) -> Result<OnDisk, OpenError> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            check_parent(path)?;
            return Ok(OnDisk::Missing);
        }
        Err(e) => {
            check_parent(path)?;
            return Err(OpenError::Io {
                path: path.to_owned(),
                source: e,
            });
        }
    };
    if metadata.is_dir() {
        return Err(OpenError::IsDirectory {
            path: path.to_owned(),
        });
    }
    if metadata.len() == 0 {
        return Ok(OnDisk::Empty);
    }
    let mut head = Vec::with_capacity(64);
    std::fs::File::open(path)
        .and_then(|file| file.take(64).read_to_end(&mut head))
        .map_err(|e| OpenError::Io {
            path: path.to_owned(),
            source: e,
        })?;
    if !head.starts_with(SQLITE_HEADER) {
        return Err(OpenError::NotSqlite {
            path: path.to_owned(),
            found: describe_bytes(&head, metadata.len()),
        });
    }
    if metadata.len() < HEADER_LEN {
        return Err(OpenError::Corrupt {
            path: path.to_owned(),
            detail: format!(
                "the file is {} bytes, shorter than a SQLite header ({HEADER_LEN} bytes)",
                metadata.len()
            ),
        });
    }
    Ok(OnDisk::Sqlite)
}

fn check_parent(path: &Path) -> Result<(), OpenError> {
    let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) else {
        // A bare file name: the current directory, which exists.
        return Ok(());
    };
    match std::fs::metadata(parent) {
        Ok(metadata) if metadata.is_dir() => Ok(()),
        Ok(_) => Err(OpenError::ParentNotDirectory {
            path: path.to_owned(),
            directory: parent.to_owned(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(OpenError::MissingDirectory {
            path: path.to_owned(),
            directory: parent.to_owned(),
        }),
        Err(e) => Err(OpenError::Io {
            path: path.to_owned(),
            source: e,
        }),
    }
}

/// The first bytes of a file, for a person: quoted text when they are printable, else hex.
fn describe_bytes(head: &[u8], len: u64) -> String {
    let shown = head.get(..head.len().min(24)).unwrap_or_default();
    let printable = std::str::from_utf8(shown)
        .map(|text| {
            text.chars()
                .all(|c| !c.is_control() || c == '\n' || c == '\t')
        })
        .unwrap_or(false);
    let start = if printable {
        format!("the text {:?}", String::from_utf8_lossy(shown))
    } else {
        let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
        format!("the bytes {}", hex.join(" "))
    };
    format!("{start}, {len} bytes in all")
}

/// Sets what every connection needs: the busy timeout, the synchronous level and the
/// checkpoint interval. Nothing here writes to the file.
pub(crate) fn configure(
    conn: &Connection,
    path: &Path,
    options: &SqliteOptions,
) -> Result<(), OpenError> {
    conn.busy_timeout(options.busy_timeout)
        .map_err(|e| OpenError::sqlite(path, "set the busy timeout", e))?;
    conn.pragma_update(None, "synchronous", options.synchronous.pragma_value())
        .map_err(|e| OpenError::sqlite(path, "set the synchronous level", e))?;
    // Returns the new value as a row, hence the query form.
    let _: i64 = conn
        .pragma_update_and_check(None, "wal_autocheckpoint", options.checkpoint_pages, |r| {
            r.get(0)
        })
        .map_err(|e| OpenError::sqlite(path, "set the checkpoint interval", e))?;
    Ok(())
}

/// Runs `PRAGMA quick_check` and refuses a database it finds damaged.
fn quick_check(conn: &Connection, path: &Path) -> Result<(), OpenError> {
    let findings: Vec<String> = (|| {
        let mut statement = conn.prepare("PRAGMA quick_check(5)")?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        rows.collect::<Result<Vec<_>, _>>()
    })()
    .map_err(|e| OpenError::sqlite(path, "check the database (quick_check)", e))?;
    if findings.len() == 1 && findings.first().map(String::as_str) == Some("ok") {
        return Ok(());
    }
    Err(OpenError::Corrupt {
        path: path.to_owned(),
        detail: format!("quick_check found: {}", findings.join("; ")),
    })
}

/// The path SQLite gets: a bare file name becomes `./name`, because SQLite reads the names
/// `:memory:` and `""` as "no file" (an in-memory or private temporary database), while a
/// caller who passed a file name means a file in the current directory.
pub(crate) fn file_path(path: &Path) -> std::path::PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => path.to_owned(),
        _ => Path::new(".").join(path),
    }
}

/// Opens (creating or migrating as the table in the module docs says) the store file at
/// `path` (already passed through [`file_path`]).
pub(crate) fn open_file(path: &Path, options: &SqliteOptions) -> Result<Connection, OpenError> {
    let on_disk = look(path)?;
    debug_assert!(
        path.parent().is_some_and(|p| !p.as_os_str().is_empty()),
        "a bare name reaches SQLite, which reads \":memory:\" and \"\" as no file at all"
    );
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if on_disk == OnDisk::Missing {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    // No SQLITE_OPEN_URI: a path is a path, even one that starts with "file:".
    let mut conn = Connection::open_with_flags(path, flags)
        .map_err(|e| OpenError::sqlite(path, "open the file", e))?;
    configure(&conn, path, options)?;
    if on_disk == OnDisk::Sqlite && options.check == OpenCheck::Quick {
        quick_check(&conn, path)?;
    }
    match schema::inspect(&conn, path)? {
        Found::Foreign(found) => {
            return Err(OpenError::ForeignDatabase {
                path: path.to_owned(),
                found,
            });
        }
        Found::Runcore(version) if version > i64::from(schema::SCHEMA_VERSION) => {
            return Err(OpenError::NewerSchema {
                path: path.to_owned(),
                found: version,
                supported: schema::SCHEMA_VERSION,
            });
        }
        Found::Empty | Found::Runcore(_) => {}
    }
    // From here on the file is ours (empty, or a runcore store this build reads).
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(|e| OpenError::sqlite(path, "switch to WAL mode", e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(OpenError::Damaged {
            path: path.to_owned(),
            detail: format!("SQLite kept journal mode {mode:?} instead of WAL"),
        });
    }
    schema::migrate(&mut conn, path, MIGRATIONS)?;
    schema::check_tables(&conn, path)?;
    Ok(conn)
}

/// Opens another connection onto a store that is already open (no migration, no check of
/// the data: the first connection did both).
pub(crate) fn open_existing(path: &Path, options: &SqliteOptions) -> Result<Connection, OpenError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| OpenError::sqlite(path, "open another connection", e))?;
    configure(&conn, path, options)?;
    match schema::inspect(&conn, path)? {
        Found::Runcore(version) if version == i64::from(schema::SCHEMA_VERSION) => Ok(conn),
        other => Err(OpenError::Damaged {
            path: path.to_owned(),
            detail: format!("another connection found {other:?} instead of this store's schema"),
        }),
    }
}

/// Opens a connection onto a named in-memory database shared by every connection of this
/// process that opens the same name (SQLite's `memdb` VFS), creating the schema if new.
pub(crate) fn open_memory(name: &str, options: &SqliteOptions) -> Result<Connection, OpenError> {
    let uri = format!("file:/{name}?vfs=memdb");
    let path = Path::new(&uri);
    let mut conn = Connection::open_with_flags(
        &uri,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| OpenError::sqlite(path, "open the in-memory database", e))?;
    configure(&conn, path, options)?;
    schema::migrate(&mut conn, path, MIGRATIONS)?;
    schema::check_tables(&conn, path)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_described_as_text_or_hex() {
        assert_eq!(
            describe_bytes(b"{\"kind\":\"x\"}", 12),
            "the text \"{\\\"kind\\\":\\\"x\\\"}\", 12 bytes in all"
        );
        assert_eq!(
            describe_bytes(&[0, 159, 146, 150], 4),
            "the bytes 00 9f 92 96, 4 bytes in all"
        );
    }
}
