//! Every SQL statement the store runs, prepared once per connection.

use postgres::{Client, Statement};
use runcore::StoreError;

use crate::codec::db_error;

/// Declares the statements once, so the struct and its preparation cannot drift apart.
macro_rules! statements {
    ($($(#[$doc:meta])* $name:ident = $sql:expr;)*) => {
        /// The prepared statements of one connection.
        pub(crate) struct Statements {
            $($(#[$doc])* pub(crate) $name: Statement,)*
        }

        impl Statements {
            pub(crate) fn prepare(client: &mut Client) -> Result<Statements, StoreError> {
                Ok(Statements {
                    $($name: client
                        .prepare($sql)
                        .map_err(|e| db_error(concat!("prepare ", stringify!($name)), e))?,)*
                })
            }
        }
    };
}

statements! {
    // ---- the commit transaction, in the order it runs them ----

    /// Locks the thread's row: every commit on the thread queues here.
    thread_for_update = "SELECT version, message_count, state_count, transcript_digest
                         FROM runcore_threads WHERE thread_id = $1::bytea FOR UPDATE";
    /// Creates the row of a thread's first commit (rolled back with a rejected commit).
    thread_create = "INSERT INTO runcore_threads
                         (thread_id, version, message_count, state_count, latest_run,
                          transcript_digest)
                     VALUES ($1::bytea, 0, 0, 0, NULL, '')
                     ON CONFLICT (thread_id) DO NOTHING";
    /// The run and the operation `(run, ordinal)`, read in one snapshot.
    run_and_operation = "SELECT r.thread_id, r.state, r.commits,
                                o.payload_hash, o.sequence, o.thread_version
                         FROM (SELECT 1) AS one
                         LEFT JOIN runcore_runs r ON r.run_id = $1::bytea
                         LEFT JOIN runcore_operations o
                                ON o.run_id = $1::bytea AND o.ordinal = $2::bigint";
    /// The store's counters, read only to name the counter that would overflow.
    counters = "SELECT last_commit, last_event FROM runcore_counters";
    /// Every write of an accepted commit, in one round trip. It appends the messages and
    /// state commands at the positions given, inserts (`$18`) or updates the run and moves
    /// the thread's head; then it takes the next commit sequence and `$1` event sequences from
    /// the counter row (no row comes back if either would pass `bigint`'s maximum; the caller
    /// then rolls back), numbers and inserts the events, and records the operation's receipt
    /// when `$6`.
    ///
    /// "Then": the counter's `WHERE` counts the rows the other writes return, so PostgreSQL
    /// must finish them before it can decide to update (and so lock) the counter row. The
    /// row stays locked to the end of the transaction; this keeps that stretch to the events,
    /// the receipt and the `COMMIT`.
    ///
    /// The run is inserted with no `ON CONFLICT`: a concurrent first commit of the same run on
    /// another thread must fail here (and be retried, to be rejected), not overwrite it.
    write = "WITH new_messages AS (
                 INSERT INTO runcore_messages (thread_id, position, message, digest)
                 SELECT $2::bytea, m.position, m.message, m.digest
                 FROM unnest($10::bigint[], $11::text[], $12::text[])
                      AS m(position, message, digest)
                 RETURNING 1
             ), new_state AS (
                 INSERT INTO runcore_state (thread_id, position, command)
                 SELECT $2::bytea, s.position, s.command
                 FROM unnest($13::bigint[], $14::text[]) AS s(position, command)
                 RETURNING 1
             ), new_run AS (
                 INSERT INTO runcore_runs (run_id, thread_id, state, commits, ticket)
                 SELECT $3::bytea, $2::bytea, $15::text, $16::bigint, $17::text
                 WHERE $18::boolean
                 RETURNING 1
             ), old_run AS (
                 UPDATE runcore_runs
                 SET state = $15::text, commits = $16::bigint, ticket = $17::text
                 WHERE run_id = $3::bytea AND NOT $18::boolean
                 RETURNING 1
             ), head AS (
                 UPDATE runcore_threads
                 SET version = $9::bigint, message_count = $19::bigint,
                     state_count = $20::bigint, latest_run = $3::bytea,
                     transcript_digest = $21::text
                 WHERE thread_id = $2::bytea
                 RETURNING 1
             ), counter AS (
                 UPDATE runcore_counters
                 SET last_commit = last_commit + 1, last_event = last_event + $1::bigint
                 WHERE last_commit < 9223372036854775807
                   AND last_event <= 9223372036854775807 - $1::bigint
                   AND (SELECT count(*) FROM new_messages) + (SELECT count(*) FROM new_state)
                       + (SELECT count(*) FROM new_run) + (SELECT count(*) FROM old_run)
                       + (SELECT count(*) FROM head) >= 0
                 RETURNING last_commit, last_event
             ), new_events AS (
                 INSERT INTO runcore_events
                     (sequence, commit_sequence, thread_id, run_id, kind, payload)
                 SELECT counter.last_event - $1::bigint + drafts.n, counter.last_commit,
                        $2::bytea, $3::bytea, drafts.kind, drafts.payload
                 FROM counter,
                      unnest($4::bytea[], $5::text[]) WITH ORDINALITY AS drafts(kind, payload, n)
             ), new_operation AS (
                 INSERT INTO runcore_operations
                     (run_id, ordinal, payload_hash, sequence, thread_version)
                 SELECT $3::bytea, $7::bigint, $8::bytea, counter.last_commit, $9::bigint
                 FROM counter WHERE $6::boolean
             )
             SELECT last_commit FROM counter";

    // ---- reads, one statement each ----

    messages = "SELECT message FROM runcore_messages WHERE thread_id = $1::bytea
                ORDER BY position";
    run = "SELECT run_id, thread_id, state, commits FROM runcore_runs WHERE run_id = $1::bytea";
    latest_run = "SELECT r.run_id, r.thread_id, r.state, r.commits
                  FROM runcore_threads t JOIN runcore_runs r ON r.run_id = t.latest_run
                  WHERE t.thread_id = $1::bytea";
    ticket = "SELECT ticket FROM runcore_runs WHERE run_id = $1::bytea AND ticket IS NOT NULL";
    state = "SELECT command FROM runcore_state WHERE thread_id = $1::bytea ORDER BY position";
    thread_version = "SELECT version FROM runcore_threads WHERE thread_id = $1::bytea";
    /// Threads after `$1` (the empty id sorts before every stored one: ids are never blank).
    threads = "SELECT t.thread_id, t.version, r.run_id, r.thread_id, r.state, r.commits
               FROM runcore_threads t LEFT JOIN runcore_runs r ON r.run_id = t.latest_run
               WHERE t.thread_id > $1::bytea
               ORDER BY t.thread_id LIMIT $2::bigint";
    pending_tickets = "SELECT ticket FROM runcore_runs
                       WHERE ticket IS NOT NULL AND run_id > $1::bytea
                       ORDER BY run_id LIMIT $2::bigint";
    snapshot = "SELECT message_count, transcript_digest FROM runcore_threads
                WHERE thread_id = $1::bytea";
    /// The committed length and the chained digest at position `$2` (the pin's last message).
    verify = "SELECT t.message_count, m.digest
              FROM runcore_threads t
              LEFT JOIN runcore_messages m
                     ON m.thread_id = t.thread_id AND m.position = $2::bigint
              WHERE t.thread_id = $1::bytea";
    slice = "SELECT message FROM runcore_messages
             WHERE thread_id = $1::bytea AND position >= $2::bigint AND position < $3::bigint
             ORDER BY position";
    events_all = "SELECT sequence, commit_sequence, thread_id, run_id, kind, payload
                  FROM runcore_events WHERE sequence > $1::bigint
                  ORDER BY sequence LIMIT $2::bigint";
    events_of_thread = "SELECT sequence, commit_sequence, thread_id, run_id, kind, payload
                        FROM runcore_events WHERE thread_id = $1::bytea AND sequence > $2::bigint
                        ORDER BY sequence LIMIT $3::bigint";
    events_of_run = "SELECT sequence, commit_sequence, thread_id, run_id, kind, payload
                     FROM runcore_events WHERE run_id = $1::bytea AND sequence > $2::bigint
                     ORDER BY sequence LIMIT $3::bigint";
}
