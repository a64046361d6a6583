//! The write side: one `IMMEDIATE` transaction per commit, with the same checks in the same
//! order as the reference `MemoryStore`.
//!
//! `BEGIN IMMEDIATE` takes SQLite's write lock before the first read, so every check reads
//! what the append will build on, sequences are allocated inside the transaction, and two
//! writers (threads or processes) are serialized by SQLite (the second waits up to the busy
//! timeout). A rejected or failed commit rolls the transaction back: nothing of it remains.

use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};

use runcore::{
    CommitError, CommitOperation, CommitReceipt, CommitRecord, OperationId, RunDisposition, RunId,
    RunState, StoreError, ThreadCommit, ThreadId, chain_digest,
};

use crate::SqliteStore;
use crate::codec::{count, decode, encode, int, next};
use crate::error::backend;

/// A thread's head and counters (all zero for a new thread).
#[derive(Debug, Default)]
struct ThreadHead {
    version: u64,
    message_count: u64,
    state_count: u64,
    last_digest: String,
}

/// What a commit builds on, read inside its transaction.
#[derive(Debug)]
struct Checked {
    sequence: u64,
    first_event: u64,
    thread: ThreadHead,
}

fn load_thread(tx: &Transaction<'_>, thread: &ThreadId) -> Result<ThreadHead, StoreError> {
    let row = tx
        .prepare_cached(
            "SELECT version, message_count, state_count, last_digest FROM threads \
             WHERE thread_id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([thread.as_str()], |r| {
                Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
        })
        .map_err(|e| backend("read the thread head", e))?;
    match row {
        None => Ok(ThreadHead::default()),
        Some((version, messages, states, last_digest)) => Ok(ThreadHead {
            version: count(version, "thread version")?,
            message_count: count(messages, "message count")?,
            state_count: count(states, "state command count")?,
            last_digest,
        }),
    }
}

/// `(thread, state, commits)` of a run.
fn load_run(
    tx: &Transaction<'_>,
    run: &RunId,
) -> Result<Option<(ThreadId, RunState, u64)>, StoreError> {
    let row = tx
        .prepare_cached("SELECT thread_id, state, commits FROM runs WHERE run_id = ?1")
        .and_then(|mut s| {
            s.query_row([run.as_str()], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?))
            })
            .optional()
        })
        .map_err(|e| backend("read the run", e))?;
    let Some((thread, state, commits)) = row else {
        return Ok(None);
    };
    let state: RunState = decode(&state, || format!("a state of run {run}"))?;
    Ok(Some((
        ThreadId::new(thread),
        state,
        count(commits, "run commit count")?,
    )))
}

fn max_of(tx: &Transaction<'_>, sql: &str, what: &str) -> Result<u64, StoreError> {
    let value: Option<i64> = tx
        .prepare_cached(sql)
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(|e| backend(&format!("read the last {what}"), e))?;
    count(value.unwrap_or(0), what)
}

/// The commit's run and thread as stored (read once per commit).
struct Current {
    run: Option<(ThreadId, RunState, u64)>,
    thread: ThreadHead,
}

fn current(tx: &Transaction<'_>, commit: &ThreadCommit) -> Result<Current, StoreError> {
    Ok(Current {
        run: load_run(tx, commit.run_id())?,
        thread: load_thread(tx, &commit.thread_id)?,
    })
}

/// Every rule of SPEC §7 that can reject `commit`, in `MemoryStore`'s order: validate, the
/// terminal fence, the run on another thread, then room in every counter it advances.
fn check(
    tx: &Transaction<'_>,
    commit: &ThreadCommit,
    current: Current,
) -> Result<Checked, StoreError> {
    commit.validate()?;
    let run_id = commit.run_id();
    let Current { run, thread } = current;
    if let Some((thread, state, _)) = &run {
        if let RunState::Ended(cause) = state {
            return Err(CommitError::AlreadyTerminal {
                run_id: run_id.clone(),
                cause: cause.clone(),
            }
            .into());
        }
        if *thread != commit.thread_id {
            return Err(CommitError::RunOnOtherThread {
                run_id: run_id.clone(),
                existing_thread: thread.clone(),
                commit_thread: commit.thread_id.clone(),
            }
            .into());
        }
    }
    let last_sequence = max_of(tx, "SELECT max(sequence) FROM commits", "commit sequence")?;
    let sequence = next(last_sequence, 1, "commit sequence")?;
    let last_event = max_of(tx, "SELECT max(sequence) FROM events", "event sequence")?;
    next(last_event, commit.events.len() as u64, "event sequence")?;
    next(thread.version, 1, "thread version")?;
    let run_commits = run.as_ref().map_or(0, |(_, _, commits)| *commits);
    next(run_commits, 1, "run commit count")?;
    // Positions of the transcript and the state list (no MemoryStore counterpart: a Vec).
    next(
        thread.message_count,
        commit.messages.len() as u64,
        "message position",
    )?;
    next(
        thread.state_count,
        commit.state.len() as u64,
        "state position",
    )?;
    Ok(Checked {
        sequence,
        first_event: last_event.saturating_add(1),
        thread,
    })
}

/// Appends a checked commit: its row, messages (with their chained digests), state commands
/// and events; the run's state, ticket and commit count; the thread head.
fn append(
    tx: &Transaction<'_>,
    commit: &ThreadCommit,
    checked: Checked,
) -> Result<CommitRecord, StoreError> {
    let Checked {
        sequence,
        first_event,
        thread,
    } = checked;
    let thread_id = commit.thread_id.as_str();
    let run_id = commit.run_id().as_str();
    let version = thread.version.saturating_add(1);
    tx.prepare_cached(
        "INSERT INTO commits (sequence, thread_id, run_id, thread_version) \
         VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut s| s.execute(params![int(sequence), thread_id, run_id, int(version)]))
    .map_err(|e| backend("insert the commit", e))?;

    let mut digest = thread.last_digest;
    let mut position = thread.message_count;
    if !commit.messages.is_empty() {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO messages (thread_id, position, commit_sequence, digest, body) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(|e| backend("prepare the message insert", e))?;
        for message in &commit.messages {
            digest = chain_digest(&digest, message);
            let body = encode(message, "a message")?;
            insert
                .execute(params![
                    thread_id,
                    int(position),
                    int(sequence),
                    digest,
                    body
                ])
                .map_err(|e| backend("insert a message", e))?;
            position = position.saturating_add(1);
        }
    }

    let mut state_position = thread.state_count;
    if !commit.state.is_empty() {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO state_commands (thread_id, position, commit_sequence, body) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(|e| backend("prepare the state insert", e))?;
        for command in &commit.state {
            let body = encode(command, "a state command")?;
            insert
                .execute(params![thread_id, int(state_position), int(sequence), body])
                .map_err(|e| backend("insert a state command", e))?;
            state_position = state_position.saturating_add(1);
        }
    }

    if !commit.events.is_empty() {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO events (sequence, commit_sequence, thread_id, run_id, kind, payload) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(|e| backend("prepare the event insert", e))?;
        let mut event_sequence = first_event;
        for draft in &commit.events {
            let payload = encode(&draft.payload(), "an event payload")?;
            insert
                .execute(params![
                    int(event_sequence),
                    int(sequence),
                    thread_id,
                    run_id,
                    draft.kind(),
                    payload
                ])
                .map_err(|e| backend("insert an event", e))?;
            event_sequence = event_sequence.saturating_add(1);
        }
    }

    let state = encode(&commit.run.state(), "a run state")?;
    let ticket = match &commit.run {
        RunDisposition::Awaiting(ticket) => Some(encode(&**ticket, "a resume ticket")?),
        _ => None,
    };
    tx.prepare_cached(
        "INSERT INTO runs (run_id, thread_id, state, ticket, commits) VALUES (?1, ?2, ?3, ?4, 1) \
         ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, ticket = excluded.ticket, \
         commits = runs.commits + 1",
    )
    .and_then(|mut s| s.execute(params![run_id, thread_id, state, ticket]))
    .map_err(|e| backend("write the run", e))?;

    tx.prepare_cached(
        "INSERT INTO threads (thread_id, version, latest_run, message_count, state_count, \
         last_digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
         ON CONFLICT (thread_id) DO UPDATE SET version = excluded.version, \
         latest_run = excluded.latest_run, message_count = excluded.message_count, \
         state_count = excluded.state_count, last_digest = excluded.last_digest",
    )
    .and_then(|mut s| {
        s.execute(params![
            thread_id,
            int(version),
            run_id,
            int(position),
            int(state_position),
            digest
        ])
    })
    .map_err(|e| backend("write the thread head", e))?;
    Ok(CommitRecord {
        sequence,
        thread_version: version,
    })
}

/// The stored receipt of an operation: `(payload hash, record)`.
fn stored_operation(
    tx: &Transaction<'_>,
    id: &OperationId,
) -> Result<Option<(String, CommitRecord)>, StoreError> {
    // An ordinal past i64::MAX was never stored (the run commit count cannot get there).
    let Ok(ordinal) = i64::try_from(id.ordinal) else {
        return Ok(None);
    };
    let row = tx
        .prepare_cached(
            "SELECT payload_hash, commit_sequence, thread_version FROM operations \
             WHERE run_id = ?1 AND ordinal = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![id.run_id.as_str(), ordinal], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .optional()
        })
        .map_err(|e| backend("read the operation receipt", e))?;
    match row {
        None => Ok(None),
        Some((hash, sequence, version)) => Ok(Some((
            hash,
            CommitRecord {
                sequence: count(sequence, "operation commit sequence")?,
                thread_version: count(version, "operation thread version")?,
            },
        ))),
    }
}

impl SqliteStore {
    fn begin(&mut self) -> Result<Transaction<'_>, StoreError> {
        self.conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| backend("begin the commit transaction", e))
    }

    /// SPEC §7: one commit, in one transaction.
    pub(crate) fn commit_one(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        // Validation needs no database: reject malformed commits before taking the lock.
        commit.validate()?;
        let tx = self.begin()?;
        let current = current(&tx, &commit)?;
        let checked = check(&tx, &commit, current)?;
        let record = append(&tx, &commit, checked)?;
        tx.commit()
            .map_err(|e| backend("commit the transaction", e))?;
        Ok(record)
    }

    /// SPEC §7.1: an idempotent, fenced commit, checked in this order: validate; the same
    /// operation id with the same hash → the stored receipt (`duplicate`); the same id with
    /// another hash → `PayloadMismatch`; the expected thread version; the ordinal; then the
    /// rules of §7.
    pub(crate) fn apply_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        operation.commit.validate()?;
        let OperationId { run_id, ordinal } = &operation.operation_id;
        if run_id != operation.commit.run_id() {
            return Err(CommitError::OperationRunMismatch {
                operation_run: run_id.clone(),
                commit_run: operation.commit.run_id().clone(),
            }
            .into());
        }
        let tx = self.begin()?;
        if let Some((hash, record)) = stored_operation(&tx, &operation.operation_id)? {
            if hash == operation.payload_hash {
                return Ok(CommitReceipt {
                    operation_id: operation.operation_id,
                    payload_hash: hash,
                    record,
                    duplicate: true,
                });
            }
            return Err(CommitError::PayloadMismatch {
                run_id: run_id.clone(),
                ordinal: *ordinal,
                stored: hash,
                got: operation.payload_hash,
            }
            .into());
        }
        let current = current(&tx, &operation.commit)?;
        let version = current.thread.version;
        if operation.expected_thread_version != version {
            return Err(CommitError::VersionConflict {
                expected: operation.expected_thread_version,
                actual: version,
            }
            .into());
        }
        let committed = current.run.as_ref().map_or(0, |(_, _, commits)| *commits);
        if *ordinal != committed {
            return Err(CommitError::OrdinalConflict {
                expected: committed,
                got: *ordinal,
            }
            .into());
        }
        let checked = check(&tx, &operation.commit, current)?;
        let record = append(&tx, &operation.commit, checked)?;
        tx.prepare_cached(
            "INSERT INTO operations (run_id, ordinal, payload_hash, commit_sequence, \
             thread_version) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut s| {
            s.execute(params![
                run_id.as_str(),
                int(*ordinal),
                operation.payload_hash,
                int(record.sequence),
                int(record.thread_version)
            ])
        })
        .map_err(|e| backend("record the operation receipt", e))?;
        tx.commit()
            .map_err(|e| backend("commit the transaction", e))?;
        Ok(CommitReceipt {
            operation_id: operation.operation_id,
            payload_hash: operation.payload_hash,
            record,
            duplicate: false,
        })
    }
}
