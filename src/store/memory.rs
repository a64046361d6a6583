//! [`MemoryStore`], the in-memory reference coordinator.
//!
//! Every lookup is indexed: runs by id, threads by id, events by sequence (a dense vector), and
//! each thread's and run's events by their sequence lists. A commit therefore costs
//! O(log(runs + threads) + size of the commit), never a scan of a thread's history, and a page
//! of `list_events` costs O(log n + limit).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{
    CheckpointReader, CommitLog, CommittedThreadView, EventRecord, EventScope, StoreError,
    ThreadSummary, TranscriptError, TranscriptSnapshotRef, chain_digest, check_ranges,
    slice_ranges,
};
use crate::commit::{
    CommitError, CommitOperation, CommitReceipt, CommitRecord, OperationId, ThreadCommit,
};
use crate::ids::{RunId, ThreadId};
use crate::message::Message;
use crate::resume::ResumeTicket;
use crate::run::{RunDisposition, RunRecord, RunState};
use crate::state::StateCommand;

/// The in-memory reference implementation of [`CommitLog`] and [`CheckpointReader`].
///
/// It serializes (for tests that prove a rejected commit leaves the store byte-identical) and
/// is deterministic: no hashing containers, no clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryStore {
    last_sequence: u64,
    events: Vec<EventRecord>,
    threads: BTreeMap<ThreadId, ThreadEntry>,
    runs: BTreeMap<RunId, RunEntry>,
    /// run → ordinal → receipt.
    operations: BTreeMap<RunId, BTreeMap<u64, CommitReceipt>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct ThreadEntry {
    messages: Vec<Message>,
    /// `digests[i]` is the chained digest of `messages[..=i]`.
    digests: Vec<String>,
    state: Vec<StateCommand>,
    latest_run: Option<RunId>,
    version: u64,
    event_sequences: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RunEntry {
    record: RunRecord,
    ticket: Option<ResumeTicket>,
    commits: u64,
    event_sequences: Vec<u64>,
}

fn overflow(counter: &str) -> CommitError {
    CommitError::CounterOverflow {
        counter: counter.to_owned(),
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The sequence of the latest accepted commit (0 when empty).
    pub fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// The number of committed events.
    pub fn event_count(&self) -> usize {
        self.events.len()
    }

    /// The thread's commit count (its version), 0 for an unknown thread.
    fn version_of(&self, thread: &ThreadId) -> u64 {
        self.threads.get(thread).map_or(0, |t| t.version)
    }

    /// How many commits the run has, 0 for an unknown run.
    pub fn run_commit_count(&self, run: &RunId) -> u64 {
        self.runs.get(run).map_or(0, |r| r.commits)
    }

    /// The thread's committed message count.
    pub fn message_count(&self, thread: &ThreadId) -> usize {
        self.threads.get(thread).map_or(0, |t| t.messages.len())
    }

    /// Borrows the thread's committed messages (no copy).
    pub fn messages(&self, thread: &ThreadId) -> &[Message] {
        self.threads.get(thread).map_or(&[], |t| &t.messages)
    }

    /// Checks every rule that can reject `commit`, without changing anything.
    fn check(&self, commit: &ThreadCommit) -> Result<(), CommitError> {
        commit.validate()?;
        let run_id = commit.run_id();
        if let Some(entry) = self.runs.get(run_id) {
            if let RunState::Ended(cause) = &entry.record.state {
                return Err(CommitError::AlreadyTerminal {
                    run_id: run_id.clone(),
                    cause: cause.clone(),
                });
            }
            if entry.record.thread_id != commit.thread_id {
                return Err(CommitError::RunOnOtherThread {
                    run_id: run_id.clone(),
                    existing_thread: entry.record.thread_id.clone(),
                    commit_thread: commit.thread_id.clone(),
                });
            }
        }
        // Every counter this commit advances must have room, so the append cannot fail halfway.
        let events = commit.events.len() as u64;
        self.last_sequence
            .checked_add(1)
            .ok_or_else(|| overflow("commit sequence"))?;
        (self.events.len() as u64)
            .checked_add(events)
            .ok_or_else(|| overflow("event sequence"))?;
        self.version_of(&commit.thread_id)
            .checked_add(1)
            .ok_or_else(|| overflow("thread version"))?;
        self.run_commit_count(run_id)
            .checked_add(1)
            .ok_or_else(|| overflow("run commit count"))?;
        Ok(())
    }

    /// Appends a checked commit. Counters were checked by [`Self::check`].
    fn append(&mut self, commit: ThreadCommit) -> CommitRecord {
        let sequence = self.last_sequence.saturating_add(1);
        self.last_sequence = sequence;
        let run_id = commit.run_id().clone();
        let state = commit.run.state();
        let ticket = match &commit.run {
            RunDisposition::Awaiting(ticket) => Some((**ticket).clone()),
            _ => None,
        };
        let thread = self.threads.entry(commit.thread_id.clone()).or_default();
        let run = self.runs.entry(run_id.clone()).or_insert_with(|| RunEntry {
            record: RunRecord {
                id: run_id.clone(),
                thread_id: commit.thread_id.clone(),
                state: state.clone(),
                commits: 0,
            },
            ticket: None,
            commits: 0,
            event_sequences: Vec::new(),
        });
        for message in commit.messages {
            let digest = chain_digest(thread.digests.last().map_or("", String::as_str), &message);
            thread.digests.push(digest);
            thread.messages.push(message);
        }
        thread.state.extend(commit.state);
        for draft in commit.events {
            let event_sequence = (self.events.len() as u64).saturating_add(1);
            thread.event_sequences.push(event_sequence);
            run.event_sequences.push(event_sequence);
            self.events.push(EventRecord {
                sequence: event_sequence,
                commit_sequence: sequence,
                thread_id: commit.thread_id.clone(),
                run_id: run_id.clone(),
                kind: draft.kind().to_owned(),
                payload: draft.payload(),
            });
        }
        run.record.state = state;
        run.ticket = ticket;
        run.commits = run.commits.saturating_add(1);
        run.record.commits = run.commits;
        thread.latest_run = Some(run_id);
        thread.version = thread.version.saturating_add(1);
        CommitRecord {
            sequence,
            thread_version: thread.version,
        }
    }
}

impl CommitLog for MemoryStore {
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        self.check(&commit)?;
        Ok(self.append(commit))
    }

    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        Ok(self.apply_operation(operation)?)
    }
}

impl MemoryStore {
    fn apply_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, CommitError> {
        operation.commit.validate()?;
        let OperationId { run_id, ordinal } = &operation.operation_id;
        if run_id != operation.commit.run_id() {
            return Err(CommitError::OperationRunMismatch {
                operation_run: run_id.clone(),
                commit_run: operation.commit.run_id().clone(),
            });
        }
        if let Some(stored) = self.operations.get(run_id).and_then(|ops| ops.get(ordinal)) {
            if stored.payload_hash == operation.payload_hash {
                return Ok(CommitReceipt {
                    duplicate: true,
                    ..stored.clone()
                });
            }
            return Err(CommitError::PayloadMismatch {
                run_id: run_id.clone(),
                ordinal: *ordinal,
                stored: stored.payload_hash.clone(),
                got: operation.payload_hash,
            });
        }
        let version = self.version_of(&operation.commit.thread_id);
        if operation.expected_thread_version != version {
            return Err(CommitError::VersionConflict {
                expected: operation.expected_thread_version,
                actual: version,
            });
        }
        let committed = self.run_commit_count(run_id);
        if *ordinal != committed {
            return Err(CommitError::OrdinalConflict {
                expected: committed,
                got: *ordinal,
            });
        }
        self.check(&operation.commit)?;
        let record = self.append(operation.commit);
        let receipt = CommitReceipt {
            operation_id: operation.operation_id,
            payload_hash: operation.payload_hash,
            record,
            duplicate: false,
        };
        self.operations
            .entry(receipt.operation_id.run_id.clone())
            .or_default()
            .insert(receipt.operation_id.ordinal, receipt.clone());
        Ok(receipt)
    }
}

impl CommittedThreadView for MemoryStore {
    fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError> {
        Ok(self.messages(thread).to_vec())
    }

    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.runs.get(run).map(|entry| entry.record.clone()))
    }

    fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.latest_record(thread).cloned())
    }

    fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError> {
        Ok(self
            .runs
            .get(run)
            .and_then(RunEntry::pending_ticket)
            .cloned())
    }

    fn committed_state(&self, thread: &ThreadId) -> Result<Vec<StateCommand>, StoreError> {
        Ok(self
            .threads
            .get(thread)
            .map(|t| t.state.clone())
            .unwrap_or_default())
    }

    fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        Ok(self.version_of(thread))
    }

    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        Ok(after_key(&self.threads, after)
            .take(limit)
            .map(|(id, entry)| ThreadSummary {
                thread_id: id.clone(),
                version: entry.version,
                latest_run: self.latest_record(id).cloned(),
            })
            .collect())
    }

    fn pending_tickets(
        &self,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<Vec<ResumeTicket>, StoreError> {
        Ok(after_key(&self.runs, after)
            .filter_map(|(_, entry)| entry.pending_ticket())
            .take(limit)
            .cloned()
            .collect())
    }

    fn transcript_snapshot(&self, thread: &ThreadId) -> Result<TranscriptSnapshotRef, StoreError> {
        let entry = self.threads.get(thread);
        Ok(TranscriptSnapshotRef {
            thread_id: thread.clone(),
            end: entry.map_or(0, |t| t.messages.len()),
            digest: entry
                .and_then(|t| t.digests.last().cloned())
                .unwrap_or_default(),
        })
    }

    fn verify_transcript_snapshot(
        &self,
        snapshot: &TranscriptSnapshotRef,
    ) -> Result<(), StoreError> {
        let entry = self.threads.get(&snapshot.thread_id);
        let committed = entry.map_or(0, |t| t.messages.len());
        if snapshot.end > committed {
            return Err(TranscriptError::SnapshotUnavailable {
                thread_id: snapshot.thread_id.clone(),
                end: snapshot.end,
                committed,
            }
            .into());
        }
        let digest = match snapshot.end.checked_sub(1) {
            None => "",
            Some(last) => entry
                .and_then(|t| t.digests.get(last))
                .map_or("", String::as_str),
        };
        if digest != snapshot.digest {
            return Err(TranscriptError::SnapshotMismatch {
                thread_id: snapshot.thread_id.clone(),
            }
            .into());
        }
        Ok(())
    }

    fn transcript_slice(
        &self,
        snapshot: &TranscriptSnapshotRef,
        ranges: &[Range<usize>],
    ) -> Result<Vec<Message>, StoreError> {
        check_ranges(ranges, snapshot.end)?;
        self.verify_transcript_snapshot(snapshot)?;
        let messages = self.messages(&snapshot.thread_id);
        Ok(slice_ranges(messages, ranges))
    }
}

/// The entries of `map` whose key comes after `after` (exclusive), or all of them.
fn after_key<'a, K: Ord, V>(
    map: &'a BTreeMap<K, V>,
    after: Option<&K>,
) -> std::collections::btree_map::Range<'a, K, V> {
    match after {
        Some(after) => map.range((Bound::Excluded(after), Bound::Unbounded)),
        None => map.range::<K, _>(..),
    }
}

impl RunEntry {
    /// The ticket, only while the run is Awaiting.
    fn pending_ticket(&self) -> Option<&ResumeTicket> {
        match self.record.state {
            RunState::Awaiting => self.ticket.as_ref(),
            _ => None,
        }
    }
}

impl MemoryStore {
    fn latest_record(&self, thread: &ThreadId) -> Option<&RunRecord> {
        let run_id = self.threads.get(thread)?.latest_run.as_ref()?;
        self.runs.get(run_id).map(|entry| &entry.record)
    }
}

impl CheckpointReader for MemoryStore {
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let from = from.unwrap_or(0);
        let by_sequences = |sequences: &[u64]| -> Vec<EventRecord> {
            let start = sequences.partition_point(|&s| s <= from);
            sequences
                .get(start..)
                .unwrap_or_default()
                .iter()
                .take(limit)
                .filter_map(|&s| self.events.get(usize::try_from(s).ok()?.checked_sub(1)?))
                .cloned()
                .collect()
        };
        Ok(match scope {
            EventScope::All => {
                let start = usize::try_from(from).unwrap_or(usize::MAX);
                self.events
                    .get(start.min(self.events.len())..)
                    .unwrap_or_default()
                    .iter()
                    .take(limit)
                    .cloned()
                    .collect()
            }
            EventScope::Thread(thread) => self
                .threads
                .get(thread)
                .map(|t| by_sequences(&t.event_sequences))
                .unwrap_or_default(),
            EventScope::Run(run) => self
                .runs
                .get(run)
                .map(|r| by_sequences(&r.event_sequences))
                .unwrap_or_default(),
        })
    }
}
