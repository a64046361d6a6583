//! The read ports. Each answer comes from one SQLite snapshot: a single statement, or several
//! inside one read transaction (WAL readers never block writers and see only whole commits).
//! Every lookup goes through an index: a thread's messages, state and events by thread, a
//! run's events by run, pending tickets through a partial index of the Awaiting runs.

use std::ops::Range;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

use runcore::store::{
    CheckpointReader, CommitLog, CommittedThreadView, EventRecord, EventScope, StoreError,
    ThreadAsOf, ThreadSummary, TranscriptSnapshotRef, check_pin, check_ranges,
};
use runcore::{
    CommitOperation, CommitReceipt, CommitRecord, Message, ResumeTicket, RunId, RunRecord,
    RunState, StateCommand, ThreadCommit, ThreadId,
};

use crate::SqliteStore;
use crate::codec::{bound, count, decode, int, limit};
use crate::error::backend;

fn run_record(row: &Row<'_>, offset: usize) -> rusqlite::Result<(String, String, String, i64)> {
    Ok((
        row.get(offset)?,
        row.get(offset + 1)?,
        row.get(offset + 2)?,
        row.get(offset + 3)?,
    ))
}

fn to_record(
    (id, thread, state, commits): (String, String, String, i64),
) -> Result<RunRecord, StoreError> {
    let state: RunState = decode(&state, || format!("a state of run {id}"))?;
    Ok(RunRecord {
        commits: count(commits, "run commit count")?,
        id: RunId::new(id),
        thread_id: ThreadId::new(thread),
        state,
    })
}

fn read_run(conn: &Connection, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
    let row = conn
        .prepare_cached("SELECT run_id, thread_id, state, commits FROM runs WHERE run_id = ?1")
        .and_then(|mut s| s.query_row([run.as_str()], |r| run_record(r, 0)).optional())
        .map_err(|e| backend("read a run", e))?;
    row.map(to_record).transpose()
}

/// `(message_count, last_digest)` of a thread (0 and "" when unknown).
fn transcript_head(conn: &Connection, thread: &ThreadId) -> Result<(u64, String), StoreError> {
    let row = conn
        .prepare_cached("SELECT message_count, last_digest FROM threads WHERE thread_id = ?1")
        .and_then(|mut s| {
            s.query_row([thread.as_str()], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .optional()
        })
        .map_err(|e| backend("read the thread head", e))?;
    match row {
        None => Ok((0, String::new())),
        Some((messages, digest)) => Ok((count(messages, "message count")?, digest)),
    }
}

/// Messages of `thread` with `start <= position < end`, in order.
fn messages_between(
    conn: &Connection,
    thread: &ThreadId,
    start: u64,
    end: u64,
) -> Result<Vec<Message>, StoreError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT position, body FROM messages \
             WHERE thread_id = ?1 AND position >= ?2 AND position < ?3 ORDER BY position",
        )
        .map_err(|e| backend("prepare the message read", e))?;
    let rows = statement
        .query_map(params![thread.as_str(), bound(start), bound(end)], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(|e| backend("read messages", e))?;
    let mut messages = Vec::new();
    for row in rows {
        let (position, body) = row.map_err(|e| backend("read a message", e))?;
        messages.push(decode(&body, || {
            format!("message {position} of thread {thread}")
        })?);
    }
    Ok(messages)
}

/// Verifies a pin against what is committed (`SnapshotUnavailable`, `SnapshotMismatch`).
fn verify_pin(conn: &Connection, snapshot: &TranscriptSnapshotRef) -> Result<(), StoreError> {
    let (committed, _) = transcript_head(conn, &snapshot.thread_id)?;
    let committed = usize::try_from(committed).unwrap_or(usize::MAX);
    // The digest kept with the pin's last message (position end - 1); none for an empty pin
    // or past what is committed.
    let digest = match snapshot
        .end
        .checked_sub(1)
        .filter(|_| snapshot.end <= committed)
    {
        None => String::new(),
        Some(last) => conn
            .prepare_cached("SELECT digest FROM messages WHERE thread_id = ?1 AND position = ?2")
            .and_then(|mut s| {
                s.query_row(
                    params![snapshot.thread_id.as_str(), int(last as u64)],
                    |r| r.get::<_, String>(0),
                )
                .optional()
            })
            .map_err(|e| backend("read a message digest", e))?
            .unwrap_or_default(),
    };
    Ok(check_pin(snapshot, committed, &digest)?)
}

impl SqliteStore {
    /// Runs `read` inside one read transaction, so several statements see one snapshot.
    fn snapshot<T>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| backend("begin a read transaction", e))?;
        let value = read(&tx)?;
        tx.finish()
            .map_err(|e| backend("end the read transaction", e))?;
        Ok(value)
    }
}

impl CommitLog for SqliteStore {
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        self.commit_one(commit)
    }

    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        self.apply_operation(operation)
    }
}

impl CommittedThreadView for SqliteStore {
    fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError> {
        messages_between(&self.conn, thread, 0, u64::MAX)
    }

    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        read_run(&self.conn, run)
    }

    fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT r.run_id, r.thread_id, r.state, r.commits FROM threads t \
                 JOIN runs r ON r.run_id = t.latest_run WHERE t.thread_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([thread.as_str()], |r| run_record(r, 0))
                    .optional()
            })
            .map_err(|e| backend("read the latest run", e))?;
        row.map(to_record).transpose()
    }

    fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError> {
        let row: Option<Option<String>> = self
            .conn
            .prepare_cached("SELECT ticket FROM runs WHERE run_id = ?1")
            .and_then(|mut s| s.query_row([run.as_str()], |r| r.get(0)).optional())
            .map_err(|e| backend("read a ticket", e))?;
        row.flatten()
            .map(|text| decode(&text, || format!("the ticket of run {run}")))
            .transpose()
    }

    fn committed_state(&self, thread: &ThreadId) -> Result<Vec<StateCommand>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT position, body FROM state_commands WHERE thread_id = ?1 \
                 ORDER BY position",
            )
            .map_err(|e| backend("prepare the state read", e))?;
        let rows = statement
            .query_map([thread.as_str()], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| backend("read state commands", e))?;
        let mut commands = Vec::new();
        for row in rows {
            let (position, body) = row.map_err(|e| backend("read a state command", e))?;
            commands.push(decode(&body, || {
                format!("state command {position} of thread {thread}")
            })?);
        }
        Ok(commands)
    }

    fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        let version: Option<i64> = self
            .conn
            .prepare_cached("SELECT version FROM threads WHERE thread_id = ?1")
            .and_then(|mut s| s.query_row([thread.as_str()], |r| r.get(0)).optional())
            .map_err(|e| backend("read the thread version", e))?;
        count(version.unwrap_or(0), "thread version")
    }

    fn thread_as_of(
        &self,
        thread: &ThreadId,
        version: u64,
    ) -> Result<Option<ThreadAsOf>, StoreError> {
        if version == 0 {
            return Ok(None);
        }
        // A version's commits never change (the log is append-only), so the two reads agree
        // whatever commits in between.
        let sequence: Option<i64> = self
            .conn
            .prepare_cached(
                "SELECT sequence FROM commits WHERE thread_id = ?1 AND thread_version = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![thread.as_str(), bound(version)], |r| r.get(0))
                    .optional()
            })
            .map_err(|e| backend("read the commit of a version", e))?;
        let Some(sequence) = sequence else {
            return Ok(None);
        };
        let end: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM messages WHERE thread_id = ?1 AND commit_sequence <= ?2",
            )
            .and_then(|mut s| s.query_row(params![thread.as_str(), sequence], |r| r.get(0)))
            .map_err(|e| backend("count the messages of a version", e))?;
        Ok(Some(ThreadAsOf {
            thread_id: thread.clone(),
            version,
            commit_sequence: count(sequence, "commit sequence")?,
            messages: messages_between(&self.conn, thread, 0, count(end, "message count")?)?,
        }))
    }

    fn threads(
        &self,
        after: Option<&ThreadId>,
        page: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        // Two statements rather than `?1 IS NULL OR …`, so the `after` bound is an index seek.
        let sql = if after.is_some() {
            "SELECT t.thread_id, t.version, r.run_id, r.thread_id, r.state, r.commits \
             FROM threads t LEFT JOIN runs r ON r.run_id = t.latest_run \
             WHERE t.thread_id > ?1 ORDER BY t.thread_id LIMIT ?2"
        } else {
            "SELECT t.thread_id, t.version, r.run_id, r.thread_id, r.state, r.commits \
             FROM threads t LEFT JOIN runs r ON r.run_id = t.latest_run \
             WHERE ?1 IS NULL ORDER BY t.thread_id LIMIT ?2"
        };
        let mut statement = self
            .conn
            .prepare_cached(sql)
            .map_err(|e| backend("prepare the thread listing", e))?;
        let rows = statement
            .query_map(params![after.map(ThreadId::as_str), limit(page)], |r| {
                let run = match r.get::<_, Option<String>>(2)? {
                    Some(_) => Some(run_record(r, 2)?),
                    None => None,
                };
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, run))
            })
            .map_err(|e| backend("list threads", e))?;
        let mut summaries = Vec::new();
        for row in rows {
            let (thread, version, run) = row.map_err(|e| backend("list a thread", e))?;
            summaries.push(ThreadSummary {
                thread_id: ThreadId::new(thread),
                version: count(version, "thread version")?,
                latest_run: run.map(to_record).transpose()?,
            });
        }
        Ok(summaries)
    }

    fn pending_tickets(
        &self,
        after: Option<&RunId>,
        page: usize,
    ) -> Result<Vec<ResumeTicket>, StoreError> {
        let sql = if after.is_some() {
            "SELECT run_id, ticket FROM runs WHERE ticket IS NOT NULL AND run_id > ?1 \
             ORDER BY run_id LIMIT ?2"
        } else {
            "SELECT run_id, ticket FROM runs WHERE ticket IS NOT NULL AND ?1 IS NULL \
             ORDER BY run_id LIMIT ?2"
        };
        let mut statement = self
            .conn
            .prepare_cached(sql)
            .map_err(|e| backend("prepare the ticket listing", e))?;
        let rows = statement
            .query_map(params![after.map(RunId::as_str), limit(page)], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| backend("list pending tickets", e))?;
        let mut tickets = Vec::new();
        for row in rows {
            let (run, ticket) = row.map_err(|e| backend("list a pending ticket", e))?;
            tickets.push(decode(&ticket, || format!("the ticket of run {run}"))?);
        }
        Ok(tickets)
    }

    fn transcript_snapshot(&self, thread: &ThreadId) -> Result<TranscriptSnapshotRef, StoreError> {
        let (end, digest) = transcript_head(&self.conn, thread)?;
        Ok(TranscriptSnapshotRef {
            thread_id: thread.clone(),
            end: usize::try_from(end).map_err(|_| {
                StoreError::unavailable(format!(
                    "thread {thread} has {end} messages, more than this platform can index"
                ))
            })?,
            digest,
        })
    }

    fn verify_transcript_snapshot(
        &self,
        snapshot: &TranscriptSnapshotRef,
    ) -> Result<(), StoreError> {
        self.snapshot(|conn| verify_pin(conn, snapshot))
    }

    fn transcript_slice(
        &self,
        snapshot: &TranscriptSnapshotRef,
        ranges: &[Range<usize>],
    ) -> Result<Vec<Message>, StoreError> {
        check_ranges(ranges, snapshot.end)?;
        self.snapshot(|conn| {
            verify_pin(conn, snapshot)?;
            let mut messages = Vec::new();
            for range in ranges {
                messages.extend(messages_between(
                    conn,
                    &snapshot.thread_id,
                    range.start as u64,
                    range.end as u64,
                )?);
            }
            Ok(messages)
        })
    }
}

impl CheckpointReader for SqliteStore {
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        page: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        const COLUMNS: &str = "SELECT sequence, commit_sequence, thread_id, run_id, kind, payload \
                               FROM events";
        let from = bound(from.unwrap_or(0));
        let page = limit(page);
        let (sql, key) = match scope {
            EventScope::All => (
                format!("{COLUMNS} WHERE sequence > ?1 ORDER BY sequence LIMIT ?2"),
                None,
            ),
            EventScope::Thread(thread) => (
                format!(
                    "{COLUMNS} WHERE thread_id = ?3 AND sequence > ?1 ORDER BY sequence LIMIT ?2"
                ),
                Some(thread.as_str()),
            ),
            EventScope::Run(run) => (
                format!("{COLUMNS} WHERE run_id = ?3 AND sequence > ?1 ORDER BY sequence LIMIT ?2"),
                Some(run.as_str()),
            ),
        };
        let mut statement = self
            .conn
            .prepare_cached(&sql)
            .map_err(|e| backend("prepare the event listing", e))?;
        let map = |r: &Row<'_>| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
            ))
        };
        let rows = match key {
            None => statement.query_map(params![from, page], map),
            Some(key) => statement.query_map(params![from, page, key], map),
        }
        .map_err(|e| backend("list events", e))?;
        let mut events = Vec::new();
        for row in rows {
            let (sequence, commit_sequence, thread, run, kind, payload) =
                row.map_err(|e| backend("list an event", e))?;
            let payload: Value = decode(&payload, || format!("the payload of event {sequence}"))?;
            events.push(EventRecord {
                sequence: count(sequence, "event sequence")?,
                commit_sequence: count(commit_sequence, "commit sequence")?,
                thread_id: ThreadId::new(thread),
                run_id: RunId::new(run),
                kind,
                payload,
            });
        }
        Ok(events)
    }
}
