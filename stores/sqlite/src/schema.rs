//! The schema, its forward migrations, and what an existing database holds.
//!
//! `runcore_schema` holds one row: the schema version. Migrations run in order, each
//! exactly once, inside one `IMMEDIATE` transaction together with the version update, so a
//! store is always at one whole version (a crash during a migration leaves the old version).
//! A store newer than [`SCHEMA_VERSION`] is refused; an older one is migrated forward at open.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::OpenError;

/// One forward migration: the SQL that takes a store from `version - 1` to `version`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    /// The version this migration produces.
    pub version: u32,
    /// The statements.
    pub sql: &'static str,
}

/// The schema's history; the last entry's version is [`SCHEMA_VERSION`].
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: SCHEMA_V1,
    },
    Migration {
        version: 2,
        sql: SCHEMA_V2,
    },
    Migration {
        version: 3,
        sql: SCHEMA_V3,
    },
];

/// The schema version this build writes and the newest it reads.
pub const SCHEMA_VERSION: u32 = 3;

/// `PRAGMA application_id` of a runcore store ("RCOR"), so tools like `file(1)` can tell
/// what the file is. Identification at open goes by `runcore_schema`, not by this.
pub const APPLICATION_ID: i32 = 0x5243_4F52;

/// The tables every store at [`SCHEMA_VERSION`] has.
pub(crate) const TABLES: &[&str] = &[
    "runcore_schema",
    "commits",
    "threads",
    "runs",
    "messages",
    "state_commands",
    "events",
    "operations",
    "thread_claims",
];

const SCHEMA_V1: &str = "
CREATE TABLE runcore_schema (
    version INTEGER NOT NULL
);

-- One row per accepted commit. sequence is store-wide and dense from 1; it is allocated
-- inside the commit's transaction as max(sequence) + 1, so commit order is sequence order.
CREATE TABLE commits (
    sequence       INTEGER PRIMARY KEY,
    thread_id      TEXT NOT NULL,
    run_id         TEXT NOT NULL,
    thread_version INTEGER NOT NULL
);

-- The thread head and the counters a commit needs, so appending never scans history.
CREATE TABLE threads (
    thread_id     TEXT PRIMARY KEY NOT NULL,
    version       INTEGER NOT NULL,  -- commit count
    latest_run    TEXT NOT NULL,     -- the run of the latest commit
    message_count INTEGER NOT NULL,
    state_count   INTEGER NOT NULL,
    last_digest   TEXT NOT NULL      -- chained transcript digest of all its messages
) WITHOUT ROWID;

-- Every run: its latest state, its ticket (only while Awaiting) and its commit count.
-- Clustered by run id: a commit touches one page of it, not a row page and a key page.
CREATE TABLE runs (
    run_id    TEXT PRIMARY KEY NOT NULL,
    thread_id TEXT NOT NULL,
    state     TEXT NOT NULL,  -- RunState as JSON
    ticket    TEXT,           -- ResumeTicket as JSON while Awaiting, else NULL
    commits   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX runs_awaiting ON runs (run_id) WHERE ticket IS NOT NULL;

-- The transcripts. id is insertion order, so a thread's rows are read in position order
-- along ascending ids.
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    thread_id       TEXT NOT NULL,
    position        INTEGER NOT NULL,  -- index in the thread's transcript, from 0
    commit_sequence INTEGER NOT NULL,
    digest          TEXT NOT NULL,     -- chained digest of the transcript up to this message
    body            TEXT NOT NULL      -- Message as JSON
);
CREATE UNIQUE INDEX messages_by_thread ON messages (thread_id, position);

CREATE TABLE state_commands (
    id              INTEGER PRIMARY KEY,
    thread_id       TEXT NOT NULL,
    position        INTEGER NOT NULL,
    commit_sequence INTEGER NOT NULL,
    body            TEXT NOT NULL      -- StateCommand as JSON
);
CREATE UNIQUE INDEX state_commands_by_thread ON state_commands (thread_id, position);

-- Audit events. sequence is store-wide and dense from 1, in commit order then in-commit
-- order. Index entries are ordered by (key, rowid), and the rowid is the sequence, so both
-- indexes page in sequence order.
CREATE TABLE events (
    sequence        INTEGER PRIMARY KEY,
    commit_sequence INTEGER NOT NULL,
    thread_id       TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    kind            TEXT NOT NULL,
    payload         TEXT NOT NULL      -- JSON
);
CREATE INDEX events_by_thread ON events (thread_id);
CREATE INDEX events_by_run ON events (run_id);

-- Receipts of idempotent operations, by (run, ordinal).
CREATE TABLE operations (
    run_id          TEXT NOT NULL,
    ordinal         INTEGER NOT NULL,
    payload_hash    TEXT NOT NULL,
    commit_sequence INTEGER NOT NULL,
    thread_version  INTEGER NOT NULL,
    PRIMARY KEY (run_id, ordinal)
) WITHOUT ROWID;
";

/// Version 2: thread claims (SPEC §7.2) and indexed deadlines (§7.3). A version-1 store's
/// awaiting runs get their deadline from the ticket they hold.
const SCHEMA_V2: &str = "
-- Each claimed thread's latest grant, live or not. ends_at_ms is when it stops being live:
-- its expiry, or its release time once released (the orphan scan reads it).
CREATE TABLE thread_claims (
    thread_id      TEXT PRIMARY KEY NOT NULL,
    owner          TEXT NOT NULL,
    request_id     TEXT NOT NULL,
    epoch          INTEGER NOT NULL,
    expires_at_ms  INTEGER NOT NULL,
    released_at_ms INTEGER,
    ends_at_ms     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX thread_claims_by_end ON thread_claims (ends_at_ms);

-- The deadline of an awaiting run's ticket, indexed so due work never scans the runs.
ALTER TABLE runs ADD COLUMN deadline_ms INTEGER;
UPDATE runs SET deadline_ms = json_extract(ticket, '$.deadline_ms') WHERE ticket IS NOT NULL;
CREATE INDEX runs_by_deadline ON runs (deadline_ms) WHERE deadline_ms IS NOT NULL;
";

/// Version 3: due work (SPEC §7.3) that reads neither the runs table for a due deadline nor
/// every claim ever granted for an orphan: the deadline index covers the scan, and the orphan
/// scan starts from the few running runs.
const SCHEMA_V3: &str = "
DROP INDEX runs_by_deadline;
CREATE INDEX runs_by_deadline ON runs (deadline_ms, thread_id, run_id)
    WHERE deadline_ms IS NOT NULL;
CREATE INDEX runs_running ON runs (thread_id) WHERE state = '{\"type\":\"running\"}';
";

/// What a database holds, judged from its schema table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// No schema objects at all: a new store may be created in it.
    Empty,
    /// runcore's schema at this version.
    Runcore(i64),
    /// Schema objects, none of them runcore's: `type name` of the first few, and how many.
    Foreign(String),
}

/// Reads what the database holds.
pub(crate) fn inspect(conn: &Connection, path: &Path) -> Result<Found, OpenError> {
    let objects: Vec<(String, String)> = (|| {
        let mut statement = conn.prepare(
            "SELECT type, name FROM sqlite_schema \
             WHERE substr(name, 1, 7) <> 'sqlite_' ORDER BY type <> 'table', type, name",
        )?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect::<Result<Vec<_>, _>>()
    })()
    .map_err(|e| OpenError::sqlite(path, "read the schema table", e))?;
    if objects.is_empty() {
        return Ok(Found::Empty);
    }
    if !objects
        .iter()
        .any(|(kind, name)| kind == "table" && name == "runcore_schema")
    {
        let mut names: Vec<String> = objects
            .iter()
            .take(5)
            .map(|(kind, name)| format!("{kind} {name}"))
            .collect();
        if objects.len() > names.len() {
            names.push(format!("and {} more", objects.len() - names.len()));
        }
        return Ok(Found::Foreign(names.join(", ")));
    }
    let versions: Vec<Option<i64>> = (|| {
        let mut statement = conn.prepare("SELECT version FROM runcore_schema")?;
        let rows = statement.query_map([], |row| row.get::<_, Option<i64>>(0))?;
        rows.collect::<Result<Vec<_>, _>>()
    })()
    .map_err(|e| OpenError::sqlite(path, "read the schema version", e))?;
    match versions.as_slice() {
        [Some(version)] if *version >= 1 => Ok(Found::Runcore(*version)),
        other => Err(OpenError::Damaged {
            path: path.to_owned(),
            detail: format!(
                "runcore_schema should hold one version of at least 1, it holds {other:?}"
            ),
        }),
    }
}

/// Brings the database at `path` to the last version of `migrations`, in one `IMMEDIATE`
/// transaction that first re-reads what the database holds (another process may have created
/// or migrated it since this one looked). Returns the version it is at.
pub(crate) fn migrate(
    conn: &mut Connection,
    path: &Path,
    migrations: &[Migration],
) -> Result<u32, OpenError> {
    let target = migrations.last().map_or(0, |m| m.version);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| OpenError::sqlite(path, "start the migration transaction", e))?;
    let from = match inspect(&tx, path)? {
        Found::Empty => 0,
        Found::Runcore(version) if version > i64::from(target) => {
            return Err(OpenError::NewerSchema {
                path: path.to_owned(),
                found: version,
                supported: target,
            });
        }
        Found::Runcore(version) => u32::try_from(version).unwrap_or(0),
        Found::Foreign(found) => {
            return Err(OpenError::ForeignDatabase {
                path: path.to_owned(),
                found,
            });
        }
    };
    if from == target {
        return Ok(target);
    }
    for migration in migrations.iter().filter(|m| m.version > from) {
        tx.execute_batch(migration.sql).map_err(|e| {
            OpenError::sqlite(
                path,
                &format!("apply migration to schema version {}", migration.version),
                e,
            )
        })?;
    }
    let stored = if from == 0 {
        tx.execute(
            "INSERT INTO runcore_schema (version) VALUES (?1)",
            [i64::from(target)],
        )
        .and_then(|_| tx.pragma_update(None, "application_id", APPLICATION_ID))
    } else {
        tx.execute(
            "UPDATE runcore_schema SET version = ?1",
            [i64::from(target)],
        )
        .map(drop)
    };
    stored.map_err(|e| OpenError::sqlite(path, "record the schema version", e))?;
    tx.commit()
        .map_err(|e| OpenError::sqlite(path, "commit the migration", e))?;
    Ok(target)
}

/// Checks that every table of the current schema is there.
pub(crate) fn check_tables(conn: &Connection, path: &Path) -> Result<(), OpenError> {
    let mut missing = Vec::new();
    for table in TABLES {
        let present = conn
            .query_row(
                "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                [table],
                |_| Ok(()),
            )
            .optional()
            .map_err(|e| OpenError::sqlite(path, "read the schema table", e))?;
        if present.is_none() {
            missing.push(*table);
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(OpenError::Damaged {
            path: path.to_owned(),
            detail: format!(
                "schema version {SCHEMA_VERSION} has no table {}",
                missing.join(", ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory() -> Connection {
        Connection::open_in_memory().unwrap()
    }

    const NEXT: Migration = Migration {
        version: SCHEMA_VERSION + 1,
        sql: "CREATE TABLE extra (x INTEGER); INSERT INTO extra VALUES (42);",
    };

    #[test]
    fn the_last_migration_is_the_schema_version() {
        assert_eq!(MIGRATIONS.last().map(|m| m.version), Some(SCHEMA_VERSION));
        let versions: Vec<u32> = MIGRATIONS.iter().map(|m| m.version).collect();
        let expected: Vec<u32> = (1..=SCHEMA_VERSION).collect();
        assert_eq!(versions, expected, "one migration per version, in order");
    }

    #[test]
    fn a_new_database_gets_every_table_and_the_version() {
        let mut conn = memory();
        let path = Path::new(":memory:");
        assert_eq!(inspect(&conn, path).unwrap(), Found::Empty);
        assert_eq!(
            migrate(&mut conn, path, MIGRATIONS).unwrap(),
            SCHEMA_VERSION
        );
        check_tables(&conn, path).unwrap();
        assert_eq!(
            inspect(&conn, path).unwrap(),
            Found::Runcore(i64::from(SCHEMA_VERSION))
        );
        let id: i32 = conn
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .unwrap();
        assert_eq!(id, APPLICATION_ID);
        // Migrating again does nothing.
        assert_eq!(
            migrate(&mut conn, path, MIGRATIONS).unwrap(),
            SCHEMA_VERSION
        );
    }

    #[test]
    fn an_older_store_is_migrated_forward_once() {
        let mut conn = memory();
        let path = Path::new(":memory:");
        migrate(&mut conn, path, &MIGRATIONS[..1]).unwrap();
        let mut history = MIGRATIONS.to_vec();
        history.push(NEXT);
        let next = SCHEMA_VERSION + 1;
        assert_eq!(migrate(&mut conn, path, &history).unwrap(), next);
        assert_eq!(
            inspect(&conn, path).unwrap(),
            Found::Runcore(i64::from(next))
        );
        let x: i64 = conn
            .query_row("SELECT x FROM extra", [], |r| r.get(0))
            .unwrap();
        assert_eq!(x, 42);
        // A second open applies nothing twice.
        assert_eq!(migrate(&mut conn, path, &history).unwrap(), next);
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM extra", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
        // And this build's history refuses the newer store.
        assert!(matches!(
            migrate(&mut conn, path, MIGRATIONS),
            Err(OpenError::NewerSchema { found, .. }) if found == i64::from(next)
        ));
    }

    #[test]
    fn a_version_one_store_gets_its_deadlines_indexed() {
        let mut conn = memory();
        let path = Path::new(":memory:");
        migrate(&mut conn, path, &MIGRATIONS[..1]).unwrap();
        conn.execute_batch(
            "INSERT INTO runs (run_id, thread_id, state, ticket, commits) VALUES \
             ('r1', 't1', '{\"type\":\"awaiting\"}', '{\"deadline_ms\":1234}', 1), \
             ('r2', 't2', '{\"type\":\"running\"}', NULL, 1);",
        )
        .unwrap();
        assert_eq!(
            migrate(&mut conn, path, MIGRATIONS).unwrap(),
            SCHEMA_VERSION
        );
        let deadlines: Vec<(String, Option<i64>)> = conn
            .prepare("SELECT run_id, deadline_ms FROM runs ORDER BY run_id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            deadlines,
            vec![("r1".to_owned(), Some(1234)), ("r2".to_owned(), None)]
        );
        check_tables(&conn, path).unwrap();
    }

    #[test]
    fn a_failing_migration_leaves_the_old_version() {
        let mut conn = memory();
        let path = Path::new(":memory:");
        migrate(&mut conn, path, &MIGRATIONS[..1]).unwrap();
        let broken = Migration {
            version: 2,
            sql: "CREATE TABLE half (x INTEGER); THIS IS NOT SQL;",
        };
        assert!(migrate(&mut conn, path, &[MIGRATIONS[0], broken]).is_err());
        assert_eq!(inspect(&conn, path).unwrap(), Found::Runcore(1));
        let half: Option<i64> = conn
            .query_row("SELECT 1 FROM sqlite_schema WHERE name = 'half'", [], |r| {
                r.get(0)
            })
            .optional()
            .unwrap();
        assert_eq!(
            half, None,
            "the migration's first statement was rolled back"
        );
    }

    #[test]
    fn foreign_and_damaged_schemas_are_named() {
        let conn = memory();
        conn.execute_batch("CREATE TABLE customers (id); CREATE VIEW v AS SELECT 1;")
            .unwrap();
        let path = Path::new(":memory:");
        assert_eq!(
            inspect(&conn, path).unwrap(),
            Found::Foreign("table customers, view v".into())
        );
        let conn = memory();
        conn.execute_batch("CREATE TABLE runcore_schema (version INTEGER);")
            .unwrap();
        let error = inspect(&conn, path).unwrap_err();
        assert!(matches!(error, OpenError::Damaged { .. }), "{error}");
    }
}
