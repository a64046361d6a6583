//! Every SQL statement the store runs, prepared once per connection.

use postgres::{Client, Statement};
use runcore::store::StoreError;

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
                              o.payload_hash, o.sequence, o.thread_version,
                              c.owner, c.request_id, c.epoch, c.expires_at_ms, c.released_at_ms,
                              (extract(epoch FROM clock_timestamp()) * 1000)::bigint
                       FROM (SELECT 1) AS one
                       LEFT JOIN runcore_threads t ON t.thread_id = $1::bytea
                       LEFT JOIN runcore_runs r ON r.run_id = $2::bytea
                       LEFT JOIN runcore_operations o
                              ON o.run_id = $2::bytea AND o.ordinal = $3::bigint
                       LEFT JOIN runcore_claims c ON c.thread_id = $1::bytea";
    /// The store's last commit and event sequences, read only to name the counter that would
    /// overflow.
    counters = "SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END
                        FROM runcore_commit_sequence),
                       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END
                        FROM runcore_event_sequence)";
    /// Every write of an accepted commit: one call of `runcore_commit_claimed` (schema version
    /// 3: `runcore_commit` of version 2, then the claim checked again), see
    /// `schema.rs`), so one statement and one transaction, committed when it ends — no
    /// `BEGIN`, no `COMMIT` round trip. `$1`…`$23` as the function takes them, `$24` the
    /// thread's lock key, `$25` the store's commit mutex key, `$26`/`$27` the claim token's owner
    /// and epoch (NULL: no token). NULL when the thread had moved
    /// on since the decision (then nothing was written).
    write = "SELECT runcore_commit_claimed($1::bigint, $2::bytea, $3::bytea, $4::bytea[],
                                   $5::text[], $6::boolean, $7::bigint, $8::bytea, $9::bigint,
                                   $10::bigint[], $11::text[], $12::text[], $13::bigint[],
                                   $14::text[], $15::text, $16::bigint, $17::text,
                                   $18::boolean, $19::bigint, $20::bigint, $21::text,
                                   $22::boolean, $23::bigint, $24::bigint, $25::bigint,
                                   $26::text, $27::bigint)";
    /// After a failed write: the commit mutex, should the write have failed while holding it
    /// (a session-level lock outlives the transaction). The store takes no other session-level
    /// advisory lock.
    release_mutex = "SELECT pg_advisory_unlock_all()";

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
    /// The commit sequence of version `$2` and the transcript's length after it (schema v5);
    /// with the thread's current version, to tell a version never recorded from one past the
    /// head.
    version_at = "SELECT t.version, v.commit_sequence, v.message_count
                  FROM runcore_threads t
                  LEFT JOIN runcore_versions v
                         ON v.thread_id = t.thread_id AND v.version = $2::bigint
                  WHERE t.thread_id = $1::bytea";
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
    /// Events, with `settled`: the row's transaction is below the statement's snapshot horizon
    /// (`pg_snapshot_xmin`: every transaction id below it has ended), so no commit still in
    /// flight can show a smaller sequence (see the crate docs). The statement's own snapshot:
    /// the horizon and the rows are read at one instant.
    events_all = "SELECT sequence, commit_sequence, thread_id, run_id, kind, payload,
                         xid < (SELECT pg_snapshot_xmin(pg_current_snapshot()))
                  FROM runcore_events WHERE sequence > $1::bigint
                  ORDER BY sequence LIMIT $2::bigint";
    events_of_thread = "SELECT sequence, commit_sequence, thread_id, run_id, kind, payload,
                               xid < (SELECT pg_snapshot_xmin(pg_current_snapshot()))
                        FROM runcore_events WHERE thread_id = $1::bytea AND sequence > $2::bigint
                        ORDER BY sequence LIMIT $3::bigint";
    events_of_run = "SELECT sequence, commit_sequence, thread_id, run_id, kind, payload,
                            xid < (SELECT pg_snapshot_xmin(pg_current_snapshot()))
                     FROM runcore_events WHERE run_id = $1::bytea AND sequence > $2::bigint
                     ORDER BY sequence LIMIT $3::bigint";
}
