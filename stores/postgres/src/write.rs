//! The commit transaction: [`CommitLog`] for [`PostgresStore`].
//!
//! Every check runs in the order `MemoryStore` runs it, on rows read inside the transaction
//! after the thread's row is locked, so the answer is the one the reference store would give
//! had the commits arrived in the order the database serialized them:
//! 1. (`commit_operation`) `validate`; the operation's run is the commit's; a stored operation
//!    with the same hash → its receipt, `duplicate = true`; with another hash → reject; the
//!    expected thread version; the ordinal;
//! 2. (`commit`) `validate`; then, for both, the terminal fence; the run on another thread;
//!    counters that would overflow;
//! 3. the writes, in one statement that also takes the counter row (see the crate docs).
//!
//! A rejection rolls the transaction back, so it leaves no trace, not even the thread row the
//! transaction created for a thread's first commit.

use postgres::Transaction;
use postgres::error::SqlState;
use runcore::store::chain_digest;
use runcore::{
    CommitError, CommitLog, CommitOperation, CommitReceipt, CommitRecord, OperationId,
    RunDisposition, RunState, StoreError, ThreadCommit, ThreadId,
};

use crate::codec::{bound, column, count, db_error, from_json, text_of, to_json};
use crate::store::{PostgresStore, Session};

/// How many times a transaction that the database aborted for a conflict (a concurrent first
/// commit of the same run on another thread) is tried again. The second try sees the other
/// commit and is decided on it; more is only insurance.
const ATTEMPTS: usize = 3;

/// The fencing half of a [`CommitOperation`].
struct Fence {
    operation_id: OperationId,
    expected_thread_version: u64,
    payload_hash: String,
}

/// What an accepted commit or operation produced.
enum Written {
    Record(CommitRecord),
    Receipt(CommitReceipt),
}

/// Why an attempt did not produce an answer.
enum Failure {
    /// `BEGIN` failed: nothing was sent that could commit, so a fresh connection may try again.
    Begin(StoreError),
    /// The database aborted the transaction over a conflict with a concurrent one (unique
    /// violation or deadlock); nothing was written, so the attempt may be repeated.
    Conflict(StoreError),
    /// Anything else: the answer.
    Store(StoreError),
}

/// Maps a statement's error: a conflict the database resolved by aborting is retryable.
fn step(what: &str) -> impl FnOnce(postgres::Error) -> Failure + '_ {
    move |error| {
        let conflict = matches!(
            error.code(),
            Some(&SqlState::UNIQUE_VIOLATION) | Some(&SqlState::T_R_DEADLOCK_DETECTED)
        );
        let error = db_error(what, error);
        if conflict {
            Failure::Conflict(error)
        } else {
            Failure::Store(error)
        }
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Failure::Store(error)
    }
}

/// The commit's values as column values, encoded once before any attempt.
struct Encoded {
    thread: Vec<u8>,
    run: Vec<u8>,
    messages: Vec<String>,
    state: Vec<String>,
    kinds: Vec<Vec<u8>>,
    payloads: Vec<String>,
    run_state: String,
    ticket: Option<String>,
}

impl Encoded {
    fn new(commit: &ThreadCommit) -> Result<Encoded, StoreError> {
        let ticket = match &commit.run {
            RunDisposition::Awaiting(ticket) => Some(to_json("the resume ticket", ticket)?),
            _ => None,
        };
        Ok(Encoded {
            thread: commit.thread_id.as_str().as_bytes().to_vec(),
            run: commit.run_id().as_str().as_bytes().to_vec(),
            messages: commit
                .messages
                .iter()
                .map(|m| to_json("a message", m))
                .collect::<Result<_, _>>()?,
            state: commit
                .state
                .iter()
                .map(|c| to_json("a state command", c))
                .collect::<Result<_, _>>()?,
            kinds: commit
                .events
                .iter()
                .map(|e| e.kind.as_bytes().to_vec())
                .collect(),
            payloads: commit
                .events
                .iter()
                .map(|e| to_json("an event payload", &e.payload))
                .collect::<Result<_, _>>()?,
            run_state: to_json("the run state", &commit.run.state())?,
            ticket,
        })
    }
}

/// The locked thread row.
struct ThreadRow {
    version: i64,
    message_count: i64,
    state_count: i64,
    digest: String,
}

/// The run's row and the operation's receipt, as one snapshot saw them.
struct RunRow {
    thread_id: Vec<u8>,
    state: RunState,
    commits: i64,
}

struct OperationRow {
    payload_hash: Vec<u8>,
    sequence: i64,
    thread_version: i64,
}

impl CommitLog for PostgresStore {
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        match self.write(commit, None)? {
            Written::Record(record) => Ok(record),
            Written::Receipt(receipt) => Ok(receipt.record),
        }
    }

    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        let CommitOperation {
            operation_id,
            expected_thread_version,
            payload_hash,
            commit,
        } = operation;
        let fence = Fence {
            operation_id,
            expected_thread_version,
            payload_hash,
        };
        match self.write(commit, Some(fence))? {
            Written::Receipt(receipt) => Ok(receipt),
            Written::Record(record) => Err(StoreError::unavailable(format!(
                "internal: an operation produced a bare record ({record:?})"
            ))),
        }
    }
}

impl PostgresStore {
    /// Validates, then runs the transaction, trying again on a fresh connection when `BEGIN`
    /// failed on a connection that had been closed, and on the same connection when the
    /// database aborted it over a conflict.
    fn write(&mut self, commit: ThreadCommit, fence: Option<Fence>) -> Result<Written, StoreError> {
        commit.validate()?;
        if let Some(fence) = &fence
            && fence.operation_id.run_id != *commit.run_id()
        {
            return Err(CommitError::OperationRunMismatch {
                operation_run: fence.operation_id.run_id.clone(),
                commit_run: commit.run_id().clone(),
            }
            .into());
        }
        let encoded = Encoded::new(&commit)?;
        let mut reconnected = false;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (session, fresh) = self.session_for_write()?;
            let failure = match attempt(session, &commit, &encoded, fence.as_ref()) {
                Ok(written) => return Ok(written),
                Err(failure) => failure,
            };
            let closed = session.client.is_closed();
            match failure {
                Failure::Begin(_) if closed && !fresh && !reconnected => {
                    // The connection died while idle (a server restart, an idle timeout): nothing
                    // of this commit was sent, so open a new one and start over.
                    reconnected = true;
                    self.drop_session();
                }
                Failure::Conflict(_) if !closed && attempts < ATTEMPTS => {}
                Failure::Begin(error) | Failure::Conflict(error) | Failure::Store(error) => {
                    if closed {
                        self.drop_session();
                    }
                    return Err(error);
                }
            }
        }
    }
}

/// One try of the commit transaction; a rejection is `Failure::Store(StoreError::Rejected)`.
fn attempt(
    session: &mut Session,
    commit: &ThreadCommit,
    encoded: &Encoded,
    fence: Option<&Fence>,
) -> Result<Written, Failure> {
    let sql = &session.sql;
    let mut tx = session
        .client
        .transaction()
        .map_err(|e| Failure::Begin(db_error("commit: begin the transaction", e)))?;
    match decide_and_write(&mut tx, sql, commit, encoded, fence)? {
        Decision::Rejected(rejection) => {
            // Rolling back is also what the server does if this fails (the connection is
            // then gone, and the next call opens a new one).
            let _ = tx.rollback();
            Err(Failure::Store(rejection.into()))
        }
        Decision::Duplicate(receipt) => {
            let _ = tx.rollback();
            Ok(Written::Receipt(receipt))
        }
        Decision::Written(written) => {
            tx.commit().map_err(|e| {
                Failure::Store(db_error(
                    "commit: COMMIT failed (if the connection was lost while it was in flight, \
                     the commit may have landed; retry the operation: a duplicate receipt says \
                     it did)",
                    e,
                ))
            })?;
            Ok(written)
        }
    }
}

enum Decision {
    Rejected(CommitError),
    Duplicate(CommitReceipt),
    Written(Written),
}

fn decide_and_write(
    tx: &mut Transaction<'_>,
    sql: &crate::statements::Statements,
    commit: &ThreadCommit,
    encoded: &Encoded,
    fence: Option<&Fence>,
) -> Result<Decision, Failure> {
    let thread = lock_thread(tx, sql, &encoded.thread)?;
    // An ordinal no stored operation can have (stored ordinals fit in bigint).
    let ordinal = fence
        .and_then(|f| bound(f.operation_id.ordinal))
        .unwrap_or(-1);
    let row = tx
        .query_one(&sql.run_and_operation, &[&encoded.run, &ordinal])
        .map_err(step("commit: read the run"))?;
    let run = match column::<Option<Vec<u8>>>(&row, 0, "the run's thread")? {
        None => None,
        Some(thread_id) => Some(RunRow {
            thread_id,
            state: from_json("run state", &column::<String>(&row, 1, "the run's state")?)?,
            commits: column(&row, 2, "the run's commits")?,
        }),
    };
    let operation = match column::<Option<Vec<u8>>>(&row, 3, "the operation's hash")? {
        None => None,
        Some(payload_hash) => Some(OperationRow {
            payload_hash,
            sequence: column(&row, 4, "the operation's sequence")?,
            thread_version: column(&row, 5, "the operation's thread version")?,
        }),
    };
    let thread_version = count("thread version", thread.version)?;
    let run_commits = match &run {
        Some(run) => count("run commit count", run.commits)?,
        None => 0,
    };

    if let Some(fence) = fence {
        if let Some(stored) = operation {
            let stored_hash = text_of("payload hash", stored.payload_hash)?;
            if stored_hash == fence.payload_hash {
                return Ok(Decision::Duplicate(CommitReceipt {
                    operation_id: fence.operation_id.clone(),
                    payload_hash: stored_hash,
                    record: CommitRecord {
                        sequence: count("commit sequence", stored.sequence)?,
                        thread_version: count("thread version", stored.thread_version)?,
                    },
                    duplicate: true,
                }));
            }
            return Ok(Decision::Rejected(CommitError::PayloadMismatch {
                run_id: fence.operation_id.run_id.clone(),
                ordinal: fence.operation_id.ordinal,
                stored: stored_hash,
                got: fence.payload_hash.clone(),
            }));
        }
        if fence.expected_thread_version != thread_version {
            return Ok(Decision::Rejected(CommitError::VersionConflict {
                expected: fence.expected_thread_version,
                actual: thread_version,
            }));
        }
        if fence.operation_id.ordinal != run_commits {
            return Ok(Decision::Rejected(CommitError::OrdinalConflict {
                expected: run_commits,
                got: fence.operation_id.ordinal,
            }));
        }
    }
    if let Some(run) = &run {
        if let RunState::Ended(cause) = &run.state {
            return Ok(Decision::Rejected(CommitError::AlreadyTerminal {
                run_id: commit.run_id().clone(),
                cause: cause.clone(),
            }));
        }
        if run.thread_id != encoded.thread {
            return Ok(Decision::Rejected(CommitError::RunOnOtherThread {
                run_id: commit.run_id().clone(),
                existing_thread: ThreadId::new(text_of("thread id", run.thread_id.clone())?),
                commit_thread: commit.thread_id.clone(),
            }));
        }
    }

    // The counters this commit advances. The store-wide ones are checked by the `write`
    // statement under their lock; a thread or run counter at its end is checked here, but
    // reported after the store-wide ones, in `MemoryStore`'s order.
    let events = i64::try_from(encoded.payloads.len()).unwrap_or(i64::MAX);
    let new_version = thread.version.checked_add(1);
    let new_run_commits = run.as_ref().map_or(0, |r| r.commits).checked_add(1);
    let message_end = i64::try_from(encoded.messages.len())
        .ok()
        .and_then(|n| thread.message_count.checked_add(n));
    let state_end = i64::try_from(encoded.state.len())
        .ok()
        .and_then(|n| thread.state_count.checked_add(n));
    let (new_version, new_run_commits, message_count, state_count) =
        match (new_version, new_run_commits, message_end, state_end) {
            (Some(version), Some(commits), Some(messages), Some(state)) => {
                (version, commits, messages, state)
            }
            (version, commits, messages, _) => {
                let local = if version.is_none() {
                    "thread version"
                } else if commits.is_none() {
                    "run commit count"
                } else if messages.is_none() {
                    "message position"
                } else {
                    "state position"
                };
                let counter = store_overflow(tx, sql, events)?.unwrap_or(local);
                return Ok(Decision::Rejected(CommitError::CounterOverflow {
                    counter: counter.to_owned(),
                }));
            }
        };

    // Everything is written by one statement (one round trip), which also takes the counter
    // row: see `Statements::write` and the crate docs.
    let mut digest = thread.digest;
    let digests: Vec<String> = commit
        .messages
        .iter()
        .map(|message| {
            digest = chain_digest(&digest, message);
            digest.clone()
        })
        .collect();
    let message_positions = positions(thread.message_count, message_count);
    let state_positions = positions(thread.state_count, state_count);
    let (is_operation, ordinal, hash) = match fence {
        Some(f) => (true, ordinal, f.payload_hash.as_bytes()),
        None => (false, 0, &[][..]),
    };
    let new_run = run.is_none();
    let appended = tx
        .query_opt(
            &sql.write,
            &[
                &events,
                &encoded.thread,
                &encoded.run,
                &encoded.kinds,
                &encoded.payloads,
                &is_operation,
                &ordinal,
                &hash,
                &new_version,
                &message_positions,
                &encoded.messages,
                &digests,
                &state_positions,
                &encoded.state,
                &encoded.run_state,
                &new_run_commits,
                &encoded.ticket,
                &new_run,
                &message_count,
                &state_count,
                &digest,
            ],
        )
        .map_err(step("commit: write"))?;
    let Some(appended) = appended else {
        let counter = store_overflow(tx, sql, events)?.unwrap_or("commit sequence");
        return Ok(Decision::Rejected(CommitError::CounterOverflow {
            counter: counter.to_owned(),
        }));
    };
    let record = CommitRecord {
        sequence: count(
            "commit sequence",
            column(&appended, 0, "the commit sequence")?,
        )?,
        thread_version: count("thread version", new_version)?,
    };
    Ok(Decision::Written(match fence {
        Some(fence) => Written::Receipt(CommitReceipt {
            operation_id: fence.operation_id.clone(),
            payload_hash: fence.payload_hash.clone(),
            record,
            duplicate: false,
        }),
        None => Written::Record(record),
    }))
}

/// The positions `start..end` (checked by the caller not to overflow).
fn positions(start: i64, end: i64) -> Vec<i64> {
    (start..end).collect()
}

/// Locks the thread's row, creating it first for the thread's first commit.
fn lock_thread(
    tx: &mut Transaction<'_>,
    sql: &crate::statements::Statements,
    thread: &Vec<u8>,
) -> Result<ThreadRow, Failure> {
    let mut row = tx
        .query_opt(&sql.thread_for_update, &[thread])
        .map_err(step("commit: lock the thread"))?;
    if row.is_none() {
        tx.execute(&sql.thread_create, &[thread])
            .map_err(step("commit: create the thread"))?;
        row = tx
            .query_opt(&sql.thread_for_update, &[thread])
            .map_err(step("commit: lock the new thread"))?;
    }
    let Some(row) = row else {
        return Err(Failure::Store(StoreError::unavailable(
            "commit: the thread's row vanished while it was being created",
        )));
    };
    Ok(ThreadRow {
        version: column(&row, 0, "the thread's version")?,
        message_count: column(&row, 1, "the thread's message count")?,
        state_count: column(&row, 2, "the thread's state count")?,
        digest: column(&row, 3, "the thread's transcript digest")?,
    })
}

/// The store-wide counter that `events` more events would overflow, if any.
fn store_overflow(
    tx: &mut Transaction<'_>,
    sql: &crate::statements::Statements,
    events: i64,
) -> Result<Option<&'static str>, Failure> {
    let row = tx
        .query_one(&sql.counters, &[])
        .map_err(step("commit: read the counters"))?;
    let last_commit: i64 = column(&row, 0, "the last commit sequence")?;
    let last_event: i64 = column(&row, 1, "the last event sequence")?;
    Ok(if last_commit.checked_add(1).is_none() {
        Some("commit sequence")
    } else if last_event.checked_add(events).is_none() {
        Some("event sequence")
    } else {
        None
    })
}
