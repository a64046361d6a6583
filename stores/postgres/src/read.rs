//! The read ports: [`CommittedThreadView`] and [`CheckpointReader`] for [`PostgresStore`].
//!
//! Each read is one statement, so it sees one committed snapshot. Transcript snapshots are
//! answered from the chained digest stored with every message (the same chain `MemoryStore`
//! keeps), so pinning and verifying cost one indexed row, not a read of the transcript.

use std::ops::Range;
use std::time::{Duration, Instant};

use postgres::Row;
use postgres::types::ToSql;
use runcore::store::{
    CheckpointReader, CommittedThreadView, EventRecord, EventScope, StoreError, ThreadAsOf,
    ThreadSummary, TranscriptSnapshotRef, check_pin, check_ranges,
};
use runcore::{Message, ResumeTicket, RunId, RunRecord, StateCommand, ThreadId};

use crate::codec::{bound, column, count, db_error, from_json, limit, text_of};
use crate::store::{PostgresStore, Session};

/// Runs a prepared statement (picked from the session's statements) and returns its rows.
fn query(
    session: &mut Session,
    what: &str,
    pick: impl Fn(&crate::statements::Statements) -> &postgres::Statement,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let statement = pick(&session.sql).clone();
    session
        .client
        .query(&statement, params)
        .map_err(|e| db_error(what, e))
}

/// A run record from columns `first..first + 4` (run id, thread id, state, commits), or
/// `None` when the run id is NULL (an outer join found no run).
fn run_record(row: &Row, first: usize) -> Result<Option<RunRecord>, StoreError> {
    let Some(id) = column::<Option<Vec<u8>>>(row, first, "the run id")? else {
        return Ok(None);
    };
    let thread_id: Vec<u8> = column(row, first + 1, "the run's thread")?;
    let state: String = column(row, first + 2, "the run's state")?;
    let commits: i64 = column(row, first + 3, "the run's commits")?;
    Ok(Some(RunRecord {
        id: RunId::new(text_of("run id", id)?),
        thread_id: ThreadId::new(text_of("thread id", thread_id)?),
        state: from_json("run state", &state)?,
        commits: count("run commit count", commits)?,
    }))
}

fn event_record(row: &Row) -> Result<EventRecord, StoreError> {
    let payload: String = column(row, 5, "the event payload")?;
    Ok(EventRecord {
        sequence: count("event sequence", column(row, 0, "the event sequence")?)?,
        commit_sequence: count("commit sequence", column(row, 1, "the commit sequence")?)?,
        thread_id: ThreadId::new(text_of("thread id", column(row, 2, "the event's thread")?)?),
        run_id: RunId::new(text_of("run id", column(row, 3, "the event's run")?)?),
        kind: text_of("event kind", column(row, 4, "the event kind")?)?,
        payload: from_json("event payload", &payload)?,
    })
}

fn messages(rows: &[Row]) -> Result<Vec<Message>, StoreError> {
    rows.iter()
        .map(|row| from_json("message", column::<&str>(row, 0, "the message")?))
        .collect()
}

impl CommittedThreadView for PostgresStore {
    fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError> {
        let id = thread.as_str().as_bytes();
        self.read(|s| messages(&query(s, "read the messages", |q| &q.messages, &[&id])?))
    }

    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        let id = run.as_str().as_bytes();
        self.read(
            |s| match query(s, "read the run", |q| &q.run, &[&id])?.first() {
                Some(row) => run_record(row, 0),
                None => Ok(None),
            },
        )
    }

    fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError> {
        let id = thread.as_str().as_bytes();
        self.read(
            |s| match query(s, "read the latest run", |q| &q.latest_run, &[&id])?.first() {
                Some(row) => run_record(row, 0),
                None => Ok(None),
            },
        )
    }

    fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError> {
        let id = run.as_str().as_bytes();
        self.read(
            |s| match query(s, "read the resume ticket", |q| &q.ticket, &[&id])?.first() {
                Some(row) => Ok(Some(from_json(
                    "resume ticket",
                    column::<&str>(row, 0, "the ticket")?,
                )?)),
                None => Ok(None),
            },
        )
    }

    fn committed_state(&self, thread: &ThreadId) -> Result<Vec<StateCommand>, StoreError> {
        let id = thread.as_str().as_bytes();
        self.read(|s| {
            query(s, "read the state commands", |q| &q.state, &[&id])?
                .iter()
                .map(|row| from_json("state command", column::<&str>(row, 0, "the command")?))
                .collect()
        })
    }

    fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        let id = thread.as_str().as_bytes();
        self.read(|s| {
            match query(s, "read the thread version", |q| &q.thread_version, &[&id])?.first() {
                Some(row) => count("thread version", column(row, 0, "the version")?),
                None => Ok(0),
            }
        })
    }

    fn thread_as_of(
        &self,
        thread: &ThreadId,
        version: u64,
    ) -> Result<Option<ThreadAsOf>, StoreError> {
        if version == 0 {
            return Ok(None);
        }
        let id = thread.as_str().as_bytes();
        let Some(at) = bound(version) else {
            return Ok(None);
        };
        self.read(|s| {
            let rows = query(s, "read a version", |q| &q.version_at, &[&id, &at])?;
            let Some(row) = rows.first() else {
                return Ok(None);
            };
            let head = count("thread version", column(row, 0, "the version")?)?;
            if version > head {
                return Ok(None);
            }
            let recorded: Option<i64> = column(row, 1, "the commit sequence")?;
            let (Some(sequence), Some(length)) = (
                recorded,
                column::<Option<i64>>(row, 2, "the message count")?,
            ) else {
                return Err(StoreError::unavailable(format!(
                    "thread {thread}: version {version} was committed before this store \
                     recorded versions (schema version 5), so it cannot be read as of that \
                     version"
                )));
            };
            let end = length;
            let start = 0i64;
            let messages = messages(&query(
                s,
                "read the messages of a version",
                |q| &q.slice,
                &[&id, &start, &end],
            )?)?;
            Ok(Some(ThreadAsOf {
                thread_id: thread.clone(),
                version,
                commit_sequence: count("commit sequence", sequence)?,
                messages,
            }))
        })
    }

    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit_to: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        let after = after.map_or(&[][..], |t| t.as_str().as_bytes());
        let limit_to = limit(limit_to);
        self.read(|s| {
            query(s, "list the threads", |q| &q.threads, &[&after, &limit_to])?
                .iter()
                .map(|row| {
                    let id: Vec<u8> = column(row, 0, "the thread id")?;
                    Ok(ThreadSummary {
                        thread_id: ThreadId::new(text_of("thread id", id)?),
                        version: count("thread version", column(row, 1, "the version")?)?,
                        latest_run: run_record(row, 2)?,
                    })
                })
                .collect()
        })
    }

    fn pending_tickets(
        &self,
        after: Option<&RunId>,
        limit_to: usize,
    ) -> Result<Vec<ResumeTicket>, StoreError> {
        let after = after.map_or(&[][..], |r| r.as_str().as_bytes());
        let limit_to = limit(limit_to);
        self.read(|s| {
            query(
                s,
                "list the pending tickets",
                |q| &q.pending_tickets,
                &[&after, &limit_to],
            )?
            .iter()
            .map(|row| from_json("resume ticket", column::<&str>(row, 0, "the ticket")?))
            .collect()
        })
    }

    fn transcript_snapshot(&self, thread: &ThreadId) -> Result<TranscriptSnapshotRef, StoreError> {
        let id = thread.as_str().as_bytes();
        let (end, digest) = self.read(|s| {
            match query(s, "pin the transcript", |q| &q.snapshot, &[&id])?.first() {
                Some(row) => Ok((
                    count("message count", column(row, 0, "the message count")?)?,
                    column::<String>(row, 1, "the transcript digest")?,
                )),
                None => Ok((0, String::new())),
            }
        })?;
        Ok(TranscriptSnapshotRef {
            thread_id: thread.clone(),
            end: usize::try_from(end).map_err(|e| {
                StoreError::backend(format!("{end} messages do not fit in memory"), e)
            })?,
            digest,
        })
    }

    fn verify_transcript_snapshot(
        &self,
        snapshot: &TranscriptSnapshotRef,
    ) -> Result<(), StoreError> {
        let id = snapshot.thread_id.as_str().as_bytes();
        // The digest of the pin's last message (position end - 1); none for an empty pin.
        let last = snapshot
            .end
            .checked_sub(1)
            .and_then(|last| i64::try_from(last).ok())
            .unwrap_or(-1);
        let (committed, digest) = self.read(|s| {
            match query(s, "verify the transcript", |q| &q.verify, &[&id, &last])?.first() {
                Some(row) => Ok((
                    count("message count", column(row, 0, "the message count")?)?,
                    column::<Option<String>>(row, 1, "the message digest")?.unwrap_or_default(),
                )),
                None => Ok((0, String::new())),
            }
        })?;
        let committed = usize::try_from(committed).unwrap_or(usize::MAX);
        Ok(check_pin(snapshot, committed, &digest)?)
    }

    fn transcript_slice(
        &self,
        snapshot: &TranscriptSnapshotRef,
        ranges: &[Range<usize>],
    ) -> Result<Vec<Message>, StoreError> {
        check_ranges(ranges, snapshot.end)?;
        self.verify_transcript_snapshot(snapshot)?;
        // Committed messages never change, so slicing after verifying reads the pinned ones.
        let id = snapshot.thread_id.as_str().as_bytes();
        let mut out = Vec::new();
        for range in ranges.iter().filter(|r| r.start < r.end) {
            let as_bound = |n: usize| u64::try_from(n).ok().and_then(bound);
            let (Some(start), Some(end)) = (as_bound(range.start), as_bound(range.end)) else {
                continue;
            };
            let rows = self.read(|s| {
                query(
                    s,
                    "slice the transcript",
                    |q| &q.slice,
                    &[&id, &start, &end],
                )
            })?;
            out.extend(messages(&rows)?);
        }
        Ok(out)
    }
}

/// How long [`list_events`](CheckpointReader::list_events) waits for the commits still in
/// flight below the events it found (see [`settled_page`]) before it answers with the part
/// it can vouch for.
const SETTLE_FOR: Duration = Duration::from_millis(200);

/// The longest pause between two looks while waiting to settle.
const SETTLE_PAUSE: Duration = Duration::from_millis(5);

impl CheckpointReader for PostgresStore {
    /// Events in sequence order, only those no commit still in flight could precede (see the
    /// crate docs, "Readers page behind a transaction-id horizon").
    ///
    /// A page whose rows are not all settled — a commit that began before one of them is
    /// still in flight — is read again, a few milliseconds apart, until what the first look
    /// found has settled (so a host reads its own commit at once, unless a transaction
    /// elsewhere holds the horizon back), for at most 200 ms; then the settled prefix
    /// is the answer, and the rest comes with a later page.
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit_to: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        // A `from` past every storable sequence leaves nothing to list.
        let Some(from) = bound(from.unwrap_or(0)) else {
            return Ok(Vec::new());
        };
        let limit_to = limit(limit_to);
        if limit_to == 0 {
            return Ok(Vec::new());
        }
        let started = Instant::now();
        let mut pause = Duration::from_micros(200);
        // The last sequence the first look found: the wait is for it to settle.
        let mut target: Option<i64> = None;
        loop {
            let rows = self.read(|s| match scope {
                EventScope::All => {
                    query(s, "list the events", |q| &q.events_all, &[&from, &limit_to])
                }
                EventScope::Thread(thread) => query(
                    s,
                    "list the thread's events",
                    |q| &q.events_of_thread,
                    &[&thread.as_str().as_bytes(), &from, &limit_to],
                ),
                EventScope::Run(run) => query(
                    s,
                    "list the run's events",
                    |q| &q.events_of_run,
                    &[&run.as_str().as_bytes(), &from, &limit_to],
                ),
            })?;
            let page = settled_page(&rows)?;
            let last_found = match rows.last() {
                Some(row) => Some(column::<i64>(row, 0, "the event sequence")?),
                None => None,
            };
            let target = *target.get_or_insert(last_found.unwrap_or(i64::MIN));
            let settled_to = match page.last() {
                Some(last) => bound(last.sequence).unwrap_or(i64::MAX),
                None => i64::MIN,
            };
            // Settled when every row is, or when everything up to what the first look found
            // is (later rows are for a later page).
            if page.len() == rows.len() || settled_to >= target || started.elapsed() >= SETTLE_FOR {
                return Ok(page);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(SETTLE_PAUSE);
        }
    }
}

/// The rows up to the first one not settled (column 6 false), as records. Transaction ids
/// ascend with sequences (see the crate docs), so the unsettled rows are a suffix.
fn settled_page(rows: &[Row]) -> Result<Vec<EventRecord>, StoreError> {
    let mut page = Vec::with_capacity(rows.len());
    for row in rows {
        if !column::<bool>(row, 6, "whether the event is settled")? {
            break;
        }
        page.push(event_record(row)?);
    }
    Ok(page)
}
