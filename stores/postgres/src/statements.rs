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
    insert_messages = "INSERT INTO runcore_messages (thread_id, position, message, digest)
                       SELECT $1::bytea, u.position, u.message, u.digest
                       FROM unnest($2::bigint[], $3::text[], $4::text[])
                            AS u(position, message, digest)";
    insert_state = "INSERT INTO runcore_state (thread_id, position, command)
                    SELECT $1::bytea, u.position, u.command
                    FROM unnest($2::bigint[], $3::text[]) AS u(position, command)";
    /// A run's first commit. No `ON CONFLICT`: a concurrent first commit of the same run on
    /// another thread must fail here (and be retried, to be rejected), not overwrite it.
    insert_run = "INSERT INTO runcore_runs (run_id, thread_id, state, commits, ticket)
                  VALUES ($1::bytea, $2::bytea, $3::text, $4::bigint, $5::text)";
    update_run = "UPDATE runcore_runs SET state = $2::text, commits = $3::bigint, ticket = $4::text
                  WHERE run_id = $1::bytea";
    update_thread = "UPDATE runcore_threads
                     SET version = $2::bigint, message_count = $3::bigint,
                         state_count = $4::bigint, latest_run = $5::bytea,
                         transcript_digest = $6::text
                     WHERE thread_id = $1::bytea";
    /// The tail, under the counter row's lock until the transaction ends: takes the next
    /// commit sequence and `$1` event sequences (unless either would pass `bigint`'s maximum:
    /// then no row comes back), numbers and inserts the events, and records the operation's
    /// receipt when `$6`. One statement, so the lock is held for one round trip and the
    /// `COMMIT`.
    append = "WITH counter AS (
                  UPDATE runcore_counters
                  SET last_commit = last_commit + 1, last_event = last_event + $1::bigint
                  WHERE last_commit < 9223372036854775807
                    AND last_event <= 9223372036854775807 - $1::bigint
                  RETURNING last_commit, last_event
              ), events AS (
                  INSERT INTO runcore_events
                      (sequence, commit_sequence, thread_id, run_id, kind, payload)
                  SELECT counter.last_event - $1::bigint + drafts.n, counter.last_commit,
                         $2::bytea, $3::bytea, drafts.kind, drafts.payload
                  FROM counter,
                       unnest($4::bytea[], $5::text[]) WITH ORDINALITY AS drafts(kind, payload, n)
              ), operation AS (
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
