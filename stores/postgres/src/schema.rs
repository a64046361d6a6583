//! The tables, their version, and forward migrations.
//!
//! The schema's version lives in a one-row table, `runcore_schema`. Opening a store brings the
//! schema up to [`SCHEMA_VERSION`] by running every migration above the stored version, in
//! order, in one transaction, under a transaction-scoped advisory lock: processes that open the
//! same fresh database at once queue on the lock, and the second finds the work done. A schema
//! newer than this build knows is refused with [`SchemaTooNew`], before anything is changed.
//!
//! # Layout (version 1)
//!
//! Ids, event kinds and payload hashes are `bytea` (the UTF-8 bytes of the string): PostgreSQL
//! `text` cannot hold a NUL character, which a Rust `String` (and so `MemoryStore`) can, and
//! `bytea` compares byte by byte, which is exactly how the core orders ids (`String`'s `Ord`),
//! whatever the database's collation. Messages, state commands, run states, tickets and event
//! payloads are the core's own serde JSON, stored as `text` so they read back byte for byte.
//!
//! | table                | one row per                                                   |
//! |----------------------|---------------------------------------------------------------|
//! | `runcore_counters`   | the store (one row): the last commit and event sequences      |
//! | `runcore_threads`    | thread: version, message and state counts, head run, digest   |
//! | `runcore_runs`       | run: thread, state, commit count, ticket (only while Awaiting)|
//! | `runcore_messages`   | committed message: position, JSON, chained transcript digest  |
//! | `runcore_state`      | committed state command: position, JSON                       |
//! | `runcore_events`     | audit event, by store-wide sequence                           |
//! | `runcore_operations` | applied commit operation: (run, ordinal) → hash and receipt   |

use std::fmt;

use postgres::Client;
use runcore::StoreError;

use crate::codec::{db_error, quote_identifier, stable_key};

/// The schema version this build writes, and the newest it opens.
pub const SCHEMA_VERSION: i64 = 2;

/// Forward migrations: `(version it brings the schema to, SQL)`, ascending from 1.
const MIGRATIONS: &[(i64, &str)] = &[(1, V1), (2, CLAIMS)];

/// Thread claims (SPEC §7.2) and indexed deadlines (§7.3).
const CLAIMS: &str = "
-- Each thread's claim row: its latest grant (epoch 0: created to be locked, never granted).
-- ends_at_ms is when the grant stops being live: its expiry, or its release.
CREATE TABLE runcore_claims (
    thread_id      bytea PRIMARY KEY,
    owner          text NOT NULL,
    request_id     text NOT NULL,
    epoch          bigint NOT NULL,
    expires_at_ms  bigint NOT NULL,
    released_at_ms bigint,
    ends_at_ms     bigint NOT NULL
);
CREATE INDEX runcore_claims_by_end ON runcore_claims (ends_at_ms) WHERE epoch > 0;

-- A ticket's deadline, read from the ticket itself, so the deadline index needs no column
-- the commit writes. jsonb cannot hold \\u0000, which a ticket's strings may contain: the
-- six characters become \\u0001 first, which keeps the text valid JSON of the same shape
-- whether they were an escape or followed an escaped backslash, and leaves the number alone.
CREATE FUNCTION runcore_deadline(ticket text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (replace(ticket, '\\u0000', '\\u0001')::jsonb ->> 'deadline_ms')::bigint $$;
CREATE INDEX runcore_runs_by_deadline ON runcore_runs (runcore_deadline(ticket))
    WHERE ticket IS NOT NULL;
";

const V1: &str = "
CREATE TABLE runcore_counters (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last_commit bigint NOT NULL,
    last_event  bigint NOT NULL
);
INSERT INTO runcore_counters (last_commit, last_event) VALUES (0, 0);

CREATE TABLE runcore_threads (
    thread_id         bytea PRIMARY KEY,
    version           bigint NOT NULL,
    message_count     bigint NOT NULL,
    state_count       bigint NOT NULL,
    latest_run        bytea,
    transcript_digest text NOT NULL
);

CREATE TABLE runcore_runs (
    run_id    bytea PRIMARY KEY,
    thread_id bytea NOT NULL,
    state     text NOT NULL,
    commits   bigint NOT NULL,
    ticket    text
);
CREATE INDEX runcore_runs_pending ON runcore_runs (run_id) WHERE ticket IS NOT NULL;

CREATE TABLE runcore_messages (
    thread_id bytea NOT NULL,
    position  bigint NOT NULL,
    message   text NOT NULL,
    digest    text NOT NULL,
    PRIMARY KEY (thread_id, position)
);

CREATE TABLE runcore_state (
    thread_id bytea NOT NULL,
    position  bigint NOT NULL,
    command   text NOT NULL,
    PRIMARY KEY (thread_id, position)
);

CREATE TABLE runcore_events (
    sequence        bigint PRIMARY KEY,
    commit_sequence bigint NOT NULL,
    thread_id       bytea NOT NULL,
    run_id          bytea NOT NULL,
    kind            bytea NOT NULL,
    payload         text NOT NULL
);
CREATE INDEX runcore_events_thread ON runcore_events (thread_id, sequence);
CREATE INDEX runcore_events_run ON runcore_events (run_id, sequence);

-- Fails the statement that calls it (plain SQL has no way to raise an error on purpose).
CREATE FUNCTION runcore_fail(message text) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $fail$
BEGIN
    RAISE EXCEPTION USING MESSAGE = message, ERRCODE = 'data_corrupted';
END
$fail$;

CREATE TABLE runcore_operations (
    run_id         bytea NOT NULL,
    ordinal        bigint NOT NULL,
    payload_hash   bytea NOT NULL,
    sequence       bigint NOT NULL,
    thread_version bigint NOT NULL,
    PRIMARY KEY (run_id, ordinal)
);
";

/// The store's schema is newer than this build of `runcore-postgres` knows: it was written by
/// a newer version, and this one refuses to guess at it. Found as the `source` of the
/// [`StoreError::Unavailable`] that opening returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaTooNew {
    /// The version found in `runcore_schema`.
    pub found: i64,
    /// The newest version this build opens ([`SCHEMA_VERSION`]).
    pub supported: i64,
}

impl fmt::Display for SchemaTooNew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the store's schema is at version {}, newer than version {}, the newest this build \
             of runcore-postgres opens; upgrade runcore-postgres to open it",
            self.found, self.supported
        )
    }
}

impl std::error::Error for SchemaTooNew {}

/// Brings the schema of the connection's `search_path` (or of `schema`, created if missing
/// and then put on the `search_path`) up to [`SCHEMA_VERSION`].
pub(crate) fn prepare(client: &mut Client, schema: Option<&str>) -> Result<(), StoreError> {
    if let Some(schema) = schema {
        client
            .batch_execute(&format!("SET search_path TO {}", quote_identifier(schema)))
            .map_err(|e| db_error(&format!("set search_path to schema {schema:?}"), e))?;
    }
    let mut tx = client
        .transaction()
        .map_err(|e| db_error("begin the schema check", e))?;
    // One key for every runcore schema in the database: creating a schema and migrating are
    // rare and short, and a shared key keeps `CREATE SCHEMA IF NOT EXISTS` from racing too.
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&stable_key(b"runcore-postgres: schema migrations")],
    )
    .map_err(|e| db_error("lock the schema for migration", e))?;
    if let Some(schema) = schema {
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {}",
            quote_identifier(schema)
        ))
        .map_err(|e| db_error(&format!("create schema {schema:?}"), e))?;
    }
    let current: Option<String> = tx
        .query_one("SELECT current_schema()::text", &[])
        .and_then(|row| row.try_get(0))
        .map_err(|e| db_error("read the current schema", e))?;
    let Some(current) = current else {
        return Err(StoreError::unavailable(
            "no schema on the connection's search_path exists, so there is nowhere to create \
             runcore's tables (create one, or pass a schema to PostgresStore::connect_in_schema)",
        ));
    };
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS runcore_schema (
             only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
             version  bigint NOT NULL
         )",
    )
    .map_err(|e| db_error(&format!("create runcore_schema in schema {current:?}"), e))?;
    let found: Option<i64> = tx
        .query_opt("SELECT version FROM runcore_schema", &[])
        .and_then(|row| row.map(|row| row.try_get(0)).transpose())
        .map_err(|e| db_error("read the schema version", e))?;
    let found = found.unwrap_or(0);
    if found > SCHEMA_VERSION {
        let too_new = SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        };
        return Err(StoreError::Unavailable {
            message: format!("schema {current:?}: {too_new}"),
            source: Some(Box::new(too_new)),
        });
    }
    if found < 0 {
        return Err(StoreError::unavailable(format!(
            "schema {current:?}: runcore_schema holds version {found}, which no runcore-postgres \
             ever wrote"
        )));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        tx.batch_execute(sql).map_err(|e| {
            db_error(
                &format!("migrate schema {current:?} to version {version}"),
                e,
            )
        })?;
    }
    if found < SCHEMA_VERSION {
        tx.execute(
            "INSERT INTO runcore_schema (version) VALUES ($1)
             ON CONFLICT (only_row) DO UPDATE SET version = EXCLUDED.version",
            &[&SCHEMA_VERSION],
        )
        .map_err(|e| db_error("record the schema version", e))?;
    }
    tx.commit()
        .map_err(|e| db_error("commit the schema migration", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_ascend_from_one_to_the_current_version() {
        let versions: Vec<i64> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
        let expected: Vec<i64> = (1..=SCHEMA_VERSION).collect();
        assert_eq!(versions, expected);
    }

    #[test]
    fn too_new_names_both_versions() {
        let text = SchemaTooNew {
            found: 7,
            supported: 1,
        }
        .to_string();
        assert!(text.contains("version 7"), "{text}");
        assert!(text.contains("version 1"), "{text}");
    }
}
