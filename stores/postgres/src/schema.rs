//! The tables, their version, and forward migrations.
//!
//! The schema's version lives in a one-row table, `runcore_schema`. Opening a store brings the
//! schema up to [`SCHEMA_VERSION`] by running every migration above the stored version, in
//! order, in one transaction, under a transaction-scoped advisory lock: processes that open the
//! same fresh database at once queue on the lock, and the second finds the work done. A schema
//! newer than this build knows is refused with [`SchemaTooNew`], before anything is changed.
//!
//! # Layout (version 3: version 2 plus `runcore_claims` and the deadline index)
//!
//! Ids, event kinds and payload hashes are `bytea` (the UTF-8 bytes of the string): PostgreSQL
//! `text` cannot hold a NUL character, which a Rust `String` (and so `MemoryStore`) can, and
//! `bytea` compares byte by byte, which is exactly how the core orders ids (`String`'s `Ord`),
//! whatever the database's collation. Messages, state commands, run states, tickets and event
//! payloads are the core's own serde JSON, stored as `text` so they read back byte for byte.
//!
//! | table                | one row per                                                   |
//! |----------------------|---------------------------------------------------------------|
//! | `runcore_commit_sequence`, `runcore_event_sequence` | (`SEQUENCE`s) the store-wide sequences |
//! | `runcore_threads`    | thread: version, message and state counts, head run, digest   |
//! | `runcore_runs`       | run: thread, state, commit count, ticket (only while Awaiting)|
//! | `runcore_messages`   | committed message: position, JSON, chained transcript digest  |
//! | `runcore_state`      | committed state command: position, JSON                       |
//! | `runcore_events`     | audit event, by store-wide sequence, with its transaction id  |
//! | `runcore_operations` | applied commit operation: (run, ordinal) → hash and receipt   |
//!
//! The function `runcore_commit` is a commit's whole write (see the [crate docs](crate) and
//! `V2` below): it takes the thread's lock, then the commit mutex, and writes every row.
//!
//! # Versions
//!
//! - **1**: the store-wide sequences in a one-row counter table, `runcore_counters`, updated by
//!   every commit (so held by every commit through its log flush).
//! - **2**: the counter row is gone: the sequences come from two PostgreSQL `SEQUENCE`s, set
//!   from the counter row by the migration so they go on where it stopped; every event row
//!   gains `xid`, the `xid8` of the transaction that wrote it (`0` for the rows of version 1,
//!   all committed before the migration, so below every reader's horizon); and the commit's
//!   write becomes the function `runcore_commit`. A process of a build that knows only version
//!   1 refuses the migrated store ([`SchemaTooNew`]); one still running against it when it is
//!   migrated fails its next commit (the counter row is gone), writing nothing.

use std::fmt;

use postgres::Client;
use runcore::store::StoreError;

use crate::codec::{db_error, quote_identifier, stable_key};

/// The schema version this build writes, and the newest it opens.
pub const SCHEMA_VERSION: i64 = 5;

/// Forward migrations: `(version it brings the schema to, SQL)`, ascending from 1.
const MIGRATIONS: &[(i64, &str)] = &[(1, V1), (2, V2), (3, CLAIMS), (4, DUE_WORK), (5, VERSIONS)];

/// Version 5: reads as of a version (SPEC §8.10). Each thread version's commit sequence and
/// the transcript's length after it, one row per commit, written by a trigger on the thread
/// head so the commit function is unchanged: the head moves to a new version exactly once per
/// accepted commit, inside the commit's transaction, after the commit's sequence was taken
/// (`currval` of the commit sequence is that commit's). Versions committed before this
/// migration have no row: `thread_as_of` answers them as not recorded.
const VERSIONS: &str = "
CREATE TABLE runcore_versions (
    thread_id       bytea NOT NULL,
    version         bigint NOT NULL,
    commit_sequence bigint NOT NULL,
    message_count   bigint NOT NULL,
    PRIMARY KEY (thread_id, version)
);

-- A head moved by anything but runcore's commit function (which takes the commit's sequence
-- first) in a session that never committed has no commit sequence: no row is recorded.
CREATE FUNCTION runcore_record_version() RETURNS trigger LANGUAGE plpgsql AS $version$
DECLARE
    v_commit bigint;
BEGIN
    BEGIN
        v_commit := currval('runcore_commit_sequence');
    EXCEPTION WHEN object_not_in_prerequisite_state THEN
        RETURN NULL;
    END;
    -- A version is recorded once: a head set back by hand and moved again keeps the row of
    -- the commit that first made that version.
    INSERT INTO runcore_versions (thread_id, version, commit_sequence, message_count)
    VALUES (NEW.thread_id, NEW.version, v_commit, NEW.message_count)
    ON CONFLICT (thread_id, version) DO NOTHING;
    RETURN NULL;
END
$version$;

CREATE TRIGGER runcore_versions_recorded
AFTER INSERT OR UPDATE OF version ON runcore_threads
FOR EACH ROW EXECUTE FUNCTION runcore_record_version();
";

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

-- The commit of version 2, then the thread's claim checked once more, at the server's time
-- and with the claim row locked (FOR SHARE): a grant, renew or release (FOR UPDATE) either
-- happened before — and this check sees it — or waits until this commit is done. Read before
-- the write, the claim could have changed since the decision; checked here, it cannot. A
-- failed check raises, so nothing of the commit is written (its sequences become a gap,
-- which §7.1 amended allows). $26/$27: the token's owner and epoch, NULL without a token.
CREATE FUNCTION runcore_commit_claimed(
    bigint, bytea, bytea, bytea[], text[], boolean, bigint, bytea, bigint, bigint[], text[],
    text[], bigint[], text[], text, bigint, text, boolean, bigint, bigint, text, boolean,
    bigint, bigint, bigint, text, bigint
) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $claimed$
DECLARE
    v_commit bigint;
    v_claim  runcore_claims%ROWTYPE;
    v_now    bigint;
BEGIN
    v_commit := runcore_commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                               $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25);
    IF v_commit IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_claim FROM runcore_claims WHERE thread_id = $2 FOR SHARE;
    v_now := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    IF $26 IS NOT NULL THEN
        IF v_claim.thread_id IS NULL OR v_claim.epoch <> $27 OR v_claim.owner <> $26
           OR v_claim.released_at_ms IS NOT NULL OR v_now >= v_claim.expires_at_ms THEN
            RAISE EXCEPTION USING ERRCODE = 'RCCL1',
                MESSAGE = 'runcore: the claim is no longer current',
                DETAIL = coalesce(v_claim.epoch, 0)::text;
        END IF;
    ELSIF v_claim.thread_id IS NOT NULL AND v_claim.epoch > 0
          AND v_claim.released_at_ms IS NULL AND v_now < v_claim.expires_at_ms THEN
        RAISE EXCEPTION USING ERRCODE = 'RCCL2',
            MESSAGE = 'runcore: the thread is claimed',
            DETAIL = v_claim.expires_at_ms::text, HINT = v_claim.owner;
    END IF;
    RETURN v_commit;
END
$claimed$;
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

/// Version 2: sequences from `SEQUENCE`s, the transaction id with every event, and the
/// commit's write as one server-side function (see the crate docs, "Commits on distinct threads
/// run side by side").
///
/// `runcore_commit($1 …)` takes the arguments the write statement of version 1 took (`$1` the
/// number of events … `$23` the version the decision read), and two lock keys: `$24` the
/// thread's, `$25` the store's commit mutex. In order:
/// 1. `pg_advisory_xact_lock($24)`: commits on one thread queue here, to the end of the
///    transaction; commits on distinct threads do not meet;
/// 2. the thread's version, read again under that lock: if another commit on the thread
///    landed since the decision, return NULL having taken no sequence (the caller decides
///    again), so racing on one thread leaves no gap;
/// 3. the commit mutex, session-level (`pg_advisory_lock($25)`), for three calls and no row:
///    the transaction's id (`pg_current_xact_id()`, its first: the function refuses, before
///    taking the mutex, to go on in a transaction that already has one), the commit sequence,
///    the block of event sequences (`nextval`, then `setval` to the block's end); released at
///    once (`pg_advisory_unlock`), long before the transaction's log flush. So transaction ids
///    and sequences are handed out in the same order;
/// 4. every row, as version 1's statement wrote them; the events carry the transaction id.
///
/// Past `bigint`'s end `nextval` or the block's addition fails the function while it holds the
/// mutex; the session-level lock outlives the failed transaction, so the caller releases it
/// (`pg_advisory_unlock_all()`) after any failed write.
const V2: &str = "
ALTER TABLE runcore_events ADD COLUMN xid xid8 NOT NULL DEFAULT '0';
ALTER TABLE runcore_events ALTER COLUMN xid DROP DEFAULT;

CREATE SEQUENCE runcore_commit_sequence AS bigint MINVALUE 1;
CREATE SEQUENCE runcore_event_sequence AS bigint MINVALUE 1;
SELECT setval('runcore_commit_sequence', greatest(last_commit, 1), last_commit > 0),
       setval('runcore_event_sequence', greatest(last_event, 1), last_event > 0)
FROM runcore_counters;
DROP TABLE runcore_counters;

CREATE FUNCTION runcore_commit(
    bigint, bytea, bytea, bytea[], text[], boolean, bigint, bytea, bigint, bigint[], text[],
    text[], bigint[], text[], text, bigint, text, boolean, bigint, bigint, text, boolean,
    bigint, bigint, bigint
) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $commit$
DECLARE
    v_version     bigint;
    v_xid         xid8;
    v_commit      bigint;
    v_first_event bigint;
    v_last_event  bigint;
    v_unlocked    boolean;
    v_moved       bigint;
BEGIN
    PERFORM pg_advisory_xact_lock($24);
    SELECT version INTO v_version FROM runcore_threads WHERE thread_id = $2;
    IF (v_version IS NULL) <> $22 OR (NOT $22 AND v_version <> $23) THEN
        RETURN NULL;
    END IF;
    -- The transaction id must be assigned under the mutex, below: nothing before it may have
    -- written or locked a row (a caller's open transaction, say).
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_transaction_state',
            MESSAGE = 'runcore_commit must run in a transaction that has no transaction id yet';
    END IF;

    -- Held for plain expressions only (PL/pgSQL evaluates them without the executor), so as
    -- short as it can be.
    PERFORM pg_advisory_lock($25);
    v_xid := pg_current_xact_id();
    v_commit := nextval('runcore_commit_sequence');
    IF $1 > 0 THEN
        v_first_event := nextval('runcore_event_sequence');
        IF $1 > 1 THEN
            v_last_event := setval('runcore_event_sequence', v_first_event + ($1 - 1));
        END IF;
    END IF;
    v_unlocked := pg_advisory_unlock($25);

    WITH moved_thread AS (
        UPDATE runcore_threads
        SET version = $9, message_count = $19, state_count = $20, latest_run = $3,
            transcript_digest = $21
        WHERE thread_id = $2 AND version = $23 AND NOT $22
        RETURNING 1 AS moved
    ), new_thread AS (
        INSERT INTO runcore_threads
            (thread_id, version, message_count, state_count, latest_run, transcript_digest)
        SELECT $2, $9, $19, $20, $3, $21
        WHERE $22
        ON CONFLICT (thread_id) DO NOTHING
        RETURNING 1 AS moved
    ), head AS (
        SELECT moved FROM moved_thread UNION ALL SELECT moved FROM new_thread
    ), new_messages AS (
        INSERT INTO runcore_messages (thread_id, position, message, digest)
        SELECT $2, m.position, m.message, m.digest
        FROM head, unnest($10, $11, $12) AS m(position, message, digest)
    ), new_state AS (
        INSERT INTO runcore_state (thread_id, position, command)
        SELECT $2, s.position, s.command
        FROM head, unnest($13, $14) AS s(position, command)
    ), new_run AS (
        INSERT INTO runcore_runs (run_id, thread_id, state, commits, ticket)
        SELECT $3, $2, $15, $16, $17
        FROM head WHERE $18
    ), old_run AS (
        UPDATE runcore_runs
        SET state = $15, commits = $16, ticket = $17
        WHERE run_id = $3 AND NOT $18 AND EXISTS (SELECT 1 FROM head)
    ), new_events AS (
        INSERT INTO runcore_events
            (sequence, commit_sequence, thread_id, run_id, kind, payload, xid)
        SELECT v_first_event + drafts.n - 1, v_commit, $2, $3, drafts.kind, drafts.payload,
               v_xid
        FROM head, unnest($4, $5) WITH ORDINALITY AS drafts(kind, payload, n)
    ), new_operation AS (
        INSERT INTO runcore_operations
            (run_id, ordinal, payload_hash, sequence, thread_version)
        SELECT $3, $7, $8, v_commit, $9
        FROM head WHERE $6
    )
    SELECT count(*) INTO v_moved FROM head;
    IF v_moved = 0 THEN
        RETURN NULL;
    END IF;
    RETURN v_commit;
END
$commit$;
";

/// Version 4: due work (SPEC §7.3) in a few index pages, whatever the store's size. A ticket's
/// deadline becomes a stored generated column (computed by the database from the ticket the
/// commit writes, so no write changes), indexed with the thread and run so the deadline scan
/// reads the index alone; and the orphan scan starts from the running runs (a partial index
/// holds only those) instead of from every claim that ever ended.
const DUE_WORK: &str = "
ALTER TABLE runcore_runs ADD COLUMN deadline_ms bigint
    GENERATED ALWAYS AS (runcore_deadline(ticket)) STORED;
DROP INDEX runcore_runs_by_deadline;
CREATE INDEX runcore_runs_by_deadline ON runcore_runs (deadline_ms, thread_id, run_id)
    WHERE deadline_ms IS NOT NULL;
CREATE INDEX runcore_runs_running ON runcore_runs (thread_id)
    WHERE state = '{\"type\":\"running\"}';
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

/// The database (or the schema asked for) holds no runcore store, and the store was opened
/// to look, not to create ([`PostgresStore::open_existing`](crate::PostgresStore::open_existing)):
/// nothing was created. Found as the `source` of the [`StoreError::Unavailable`] that opening
/// returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAStore {
    /// The schema looked in: the one asked for, or the first existing schema of the
    /// connection's `search_path` (`None` when no schema on it exists).
    pub schema: Option<String>,
}

impl fmt::Display for NotAStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.schema {
            Some(schema) => write!(
                f,
                "not a runcore store: schema {schema:?} holds no runcore tables (nothing was \
                 created)"
            ),
            None => f.write_str(
                "not a runcore store: no schema on the connection's search_path exists \
                 (nothing was created)",
            ),
        }
    }
}

impl std::error::Error for NotAStore {}

/// Checks, changing nothing, that the connection's schema (or `schema`) holds runcore's
/// tables; then brings them up to [`SCHEMA_VERSION`] as [`prepare`] does (an existing store
/// of an older version is migrated; nothing is created where there was no store).
pub(crate) fn prepare_existing(
    client: &mut Client,
    schema: Option<&str>,
) -> Result<String, StoreError> {
    let not_a_store = |schema: Option<String>| {
        let error = NotAStore { schema };
        StoreError::Unavailable {
            message: error.to_string(),
            source: Some(Box::new(error)),
        }
    };
    // One statement, one snapshot: the schema looked in, and whether it has runcore_schema.
    // A schema asked for is looked up by name (it is not created, so it may not exist).
    let row = client
        .query_opt(
            "SELECT s.name,
                    EXISTS (SELECT 1 FROM pg_catalog.pg_tables t
                            WHERE t.schemaname = s.name AND t.tablename = 'runcore_schema')
             FROM (SELECT coalesce($1::text, current_schema()::text) AS name) s
             WHERE $1::text IS NULL
                OR EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n WHERE n.nspname = $1::text)",
            &[&schema],
        )
        .map_err(|e| db_error("look for runcore's tables", e))?;
    // No row: the schema asked for does not exist.
    let Some(row) = row else {
        return Err(not_a_store(schema.map(str::to_owned)));
    };
    let found_schema: Option<String> = row
        .try_get(0)
        .map_err(|e| db_error("read the schema's name", e))?;
    let has_tables: bool = row
        .try_get(1)
        .map_err(|e| db_error("look for runcore's tables", e))?;
    match found_schema {
        Some(_) if has_tables => prepare(client, schema),
        other => Err(not_a_store(other)),
    }
}

/// Brings the schema of the connection's `search_path` (or of `schema`, created if missing
/// and then put on the `search_path`) up to [`SCHEMA_VERSION`]; returns the schema's name.
pub(crate) fn prepare(client: &mut Client, schema: Option<&str>) -> Result<String, StoreError> {
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
        .map_err(|e| db_error("commit the schema migration", e))?;
    Ok(current)
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
