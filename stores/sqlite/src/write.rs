//! The write side: one `IMMEDIATE` transaction per commit. It reads the commit's head
//! ([`CommitHead`]), lets the core's [`admit`] decide (the one admission order, shared with
//! `MemoryStore` and PostgreSQL), and writes the plan.
//!
//! `BEGIN IMMEDIATE` takes SQLite's write lock before the first read, so every check reads
//! what the append will build on, sequences are allocated inside the transaction, and two
//! writers (threads or processes) are serialized by SQLite (the second waits up to the busy
//! timeout). A rejected or failed commit rolls the transaction back: nothing of it remains.

use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};

use runcore::store::{
    Admission, AppendPlan, CommitHead, RunHead, StoreError, StoreSequences, admit, admit_commit,
};
use runcore::{
    CommitOperation, CommitReceipt, CommitRecord, OperationId, RunDisposition, RunId, RunState,
    ThreadCommit, ThreadId,
};

use crate::SqliteStore;
use crate::codec::{count, decode, encode, int};
use crate::error::backend;

/// The commit's head, read inside its transaction: the thread's counters and digest, the run,
/// the operation's stored receipt and the store-wide sequences.
fn read_head(
    tx: &Transaction<'_>,
    commit: &ThreadCommit,
    operation: Option<&OperationId>,
    now_ms: u64,
) -> Result<CommitHead, StoreError> {
    let mut head = CommitHead::empty(i64::MAX as u64);
    let thread = tx
        .prepare_cached(
            "SELECT version, message_count, state_count, last_digest FROM threads \
             WHERE thread_id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([commit.thread_id.as_str()], |r| {
                Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
        })
        .map_err(|e| backend("read the thread head", e))?;
    if let Some((version, messages, states, last_digest)) = thread {
        head.thread_version = count(version, "thread version")?;
        head.message_count = count(messages, "message count")?;
        head.state_count = count(states, "state command count")?;
        head.transcript_digest = last_digest;
    }
    head.run = load_run(tx, commit.run_id())?;
    if let Some(id) = operation {
        head.stored_operation = stored_operation(tx, id)?;
    }
    head.claim = crate::claims::load_claim(tx, &commit.thread_id)?;
    head.now_ms = now_ms;
    head.sequences = Some(StoreSequences {
        last_commit: max_of(tx, "SELECT max(sequence) FROM commits", "commit sequence")?,
        last_event: max_of(tx, "SELECT max(sequence) FROM events", "event sequence")?,
    });
    Ok(head)
}

/// A run as admission needs it.
fn load_run(tx: &Transaction<'_>, run: &RunId) -> Result<Option<RunHead>, StoreError> {
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
    Ok(Some(RunHead {
        thread_id: ThreadId::new(thread),
        state,
        commits: count(commits, "run commit count")?,
    }))
}

fn max_of(tx: &Transaction<'_>, sql: &str, what: &str) -> Result<u64, StoreError> {
    let value: Option<i64> = tx
        .prepare_cached(sql)
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(|e| backend(&format!("read the last {what}"), e))?;
    count(value.unwrap_or(0), what)
}

/// Writes an admitted commit as planned: its row, messages (with their chained digests), state
/// commands and events; the run's state, ticket and commit count; the thread head.
fn append(
    tx: &Transaction<'_>,
    commit: &ThreadCommit,
    head: &CommitHead,
    plan: &AppendPlan,
) -> Result<CommitRecord, StoreError> {
    let (Some(sequence), Some(first_event)) = (plan.commit_sequence, plan.first_event_sequence)
    else {
        return Err(StoreError::unavailable(
            "internal: the admission plan has no sequences although the head carried them",
        ));
    };
    let thread_id = commit.thread_id.as_str();
    let run_id = commit.run_id().as_str();
    let version = plan.thread_version;
    tx.prepare_cached(
        "INSERT INTO commits (sequence, thread_id, run_id, thread_version) \
         VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut s| s.execute(params![int(sequence), thread_id, run_id, int(version)]))
    .map_err(|e| backend("insert the commit", e))?;

    let mut position = plan.message_start;
    if !commit.messages.is_empty() {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO messages (thread_id, position, commit_sequence, digest, body) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(|e| backend("prepare the message insert", e))?;
        for (message, digest) in commit.messages.iter().zip(&plan.digests) {
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

    let mut state_position = plan.state_start;
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
    let (ticket, deadline) = match &commit.run {
        RunDisposition::Awaiting(ticket) => (
            Some(encode(&**ticket, "a resume ticket")?),
            ticket.deadline_ms.map(int),
        ),
        _ => (None, None),
    };
    tx.prepare_cached(
        "INSERT INTO runs (run_id, thread_id, state, ticket, commits, deadline_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
         ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, ticket = excluded.ticket, \
         commits = excluded.commits, deadline_ms = excluded.deadline_ms",
    )
    .and_then(|mut s| {
        s.execute(params![
            run_id,
            thread_id,
            state,
            ticket,
            int(plan.run_commits),
            deadline
        ])
    })
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
            plan.transcript_digest(&head.transcript_digest)
        ])
    })
    .map_err(|e| backend("write the thread head", e))?;
    Ok(CommitRecord {
        sequence,
        thread_version: version,
    })
}

/// The stored receipt of an operation.
fn stored_operation(
    tx: &Transaction<'_>,
    id: &OperationId,
) -> Result<Option<CommitReceipt>, StoreError> {
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
        Some((payload_hash, sequence, version)) => Ok(Some(CommitReceipt {
            operation_id: id.clone(),
            payload_hash,
            record: CommitRecord {
                sequence: count(sequence, "operation commit sequence")?,
                thread_version: count(version, "operation thread version")?,
            },
            duplicate: false,
        })),
    }
}

impl SqliteStore {
    pub(crate) fn begin(&mut self) -> Result<Transaction<'_>, StoreError> {
        self.conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| backend("begin the commit transaction", e))
    }

    /// SPEC §7: one commit, in one transaction.
    pub(crate) fn commit_one(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        // Validation needs no database: reject malformed commits before taking the lock.
        commit.validate()?;
        let tx = self.begin()?;
        let head = read_head(&tx, &commit, None, runcore_clock::wall_clock_ms())?;
        let plan = match admit_commit(&commit, &head) {
            Admission::Append(plan) => plan,
            Admission::Reject(error) => return Err(error.into()),
            Admission::Duplicate(receipt) => return Ok(receipt.record),
        };
        let record = append(&tx, &commit, &head, &plan)?;
        tx.commit()
            .map_err(|e| backend("commit the transaction", e))?;
        Ok(record)
    }

    /// SPEC §7.1: an idempotent, fenced commit, admitted by the core's [`admit`].
    pub(crate) fn apply_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        operation.commit.validate()?;
        let tx = self.begin()?;
        let now_ms = operation
            .now_ms
            .unwrap_or_else(runcore_clock::wall_clock_ms);
        let head = read_head(
            &tx,
            &operation.commit,
            Some(&operation.operation_id),
            now_ms,
        )?;
        let plan = match admit(&operation, &head) {
            Admission::Append(plan) => plan,
            Admission::Reject(error) => return Err(error.into()),
            Admission::Duplicate(receipt) => return Ok(receipt),
        };
        let record = append(&tx, &operation.commit, &head, &plan)?;
        let OperationId { run_id, ordinal } = &operation.operation_id;
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
