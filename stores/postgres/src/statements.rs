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
    // ---- a commit: read, decide (in Rust), write; each statement its own transaction ----

    /// The thread's head, the run and the operation `(run, $3)`, in one snapshot.
    read_for_commit = "SELECT t.version, t.message_count, t.state_count, t.transcript_digest,
                              r.thread_id, r.state, r.commits,
                              o.payload_hash, o.sequence, o.thread_version
                       FROM (SELECT 1) AS one
                       LEFT JOIN runcore_threads t ON t.thread_id = $1::bytea
                       LEFT JOIN runcore_runs r ON r.run_id = $2::bytea
                       LEFT JOIN runcore_operations o
                              ON o.run_id = $2::bytea AND o.ordinal = $3::bigint";
    /// The store's counters, read only to name the counter that would overflow.
    counters = "SELECT last_commit, last_event FROM runcore_counters";
    /// Every write of an accepted commit, as one statement (so one transaction, committed
    /// when it ends: no `BEGIN`, no `COMMIT` round trip).
    ///
    /// First the thread's head moves — `head` has one row if the thread is still at the
    /// version the decision was made on (`$23`; for a new thread, `$22`: the row is still
    /// absent), none otherwise. Everything else is written from `head`, so if the thread moved
    /// on meanwhile nothing is written and the first column comes back NULL. The messages and
    /// state commands go in at the positions given, the run is inserted (`$18`) or updated.
    /// Then the counter row — its `WHERE` counts the rows those writes return, so they must be
    /// done before it can lock the row — gives the commit sequence and `$1` event sequences
    /// (past `bigint`'s end the addition fails the statement), and the events and the
    /// operation's receipt (`$6`) are written with them. The counter row stays locked to the
    /// end of the statement's transaction: that stretch is the events, the receipt and the
    /// commit itself, all inside the server.
    ///
    /// The run is inserted with no `ON CONFLICT`: a concurrent first commit of the same run on
    /// another thread must fail here (and start over, to be rejected), not overwrite it. With
    /// the head moved, a missing counter row fails the statement rather than leave a commit
    /// without its sequence.
    write = "WITH moved_thread AS (
                 UPDATE runcore_threads
                 SET version = $9::bigint, message_count = $19::bigint,
                     state_count = $20::bigint, latest_run = $3::bytea,
                     transcript_digest = $21::text
                 WHERE thread_id = $2::bytea AND version = $23::bigint AND NOT $22::boolean
                 RETURNING 1 AS moved
             ), new_thread AS (
                 INSERT INTO runcore_threads
                     (thread_id, version, message_count, state_count, latest_run,
                      transcript_digest)
                 SELECT $2::bytea, $9::bigint, $19::bigint, $20::bigint, $3::bytea, $21::text
                 WHERE $22::boolean
                 ON CONFLICT (thread_id) DO NOTHING
                 RETURNING 1 AS moved
             ), head AS (
                 SELECT moved FROM moved_thread UNION ALL SELECT moved FROM new_thread
             ), new_messages AS (
                 INSERT INTO runcore_messages (thread_id, position, message, digest)
                 SELECT $2::bytea, m.position, m.message, m.digest
                 FROM head, unnest($10::bigint[], $11::text[], $12::text[])
                      AS m(position, message, digest)
                 RETURNING 1
             ), new_state AS (
                 INSERT INTO runcore_state (thread_id, position, command)
                 SELECT $2::bytea, s.position, s.command
                 FROM head, unnest($13::bigint[], $14::text[]) AS s(position, command)
                 RETURNING 1
             ), new_run AS (
                 INSERT INTO runcore_runs (run_id, thread_id, state, commits, ticket)
                 SELECT $3::bytea, $2::bytea, $15::text, $16::bigint, $17::text
                 FROM head WHERE $18::boolean
                 RETURNING 1
             ), old_run AS (
                 UPDATE runcore_runs
                 SET state = $15::text, commits = $16::bigint, ticket = $17::text
                 WHERE run_id = $3::bytea AND NOT $18::boolean AND EXISTS (SELECT 1 FROM head)
                 RETURNING 1
             ), counter AS (
                 UPDATE runcore_counters
                 SET last_commit = last_commit + 1, last_event = last_event + $1::bigint
                 WHERE EXISTS (SELECT 1 FROM head)
                   AND (SELECT count(*) FROM new_messages) + (SELECT count(*) FROM new_state)
                       + (SELECT count(*) FROM new_run) + (SELECT count(*) FROM old_run) >= 0
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
             SELECT CASE WHEN EXISTS (SELECT 1 FROM head)
                         THEN coalesce((SELECT last_commit FROM counter),
                                       runcore_fail('the store''s counter row is missing'))
                    END";

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
