//! [`MemoryStore`], the in-memory reference coordinator.
//!
//! Every lookup is indexed: runs by id, threads by id, events by sequence (a dense vector), and
//! each thread's and run's events by their sequence lists. A commit therefore costs
//! O(log(runs + threads) + size of the commit), never a scan of a thread's history, and a page
//! of `list_events` costs O(log n + limit).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::admission::{
    Admission, AppendPlan, CommitHead, RunHead, StoreSequences, admit, admit_commit,
};
use super::claims::{
    Claim, ClaimGrant, ClaimRecord, ClaimRequest, DueReason, DueWork, decide_claim, decide_release,
    decide_renew, due_order,
};
use super::{
    CheckpointReader, CommitLog, CommittedThreadView, EventRecord, EventScope, StoreError,
    ThreadAsOf, ThreadClaims, ThreadSummary, TranscriptSnapshotRef, check_pin, check_ranges,
    slice_ranges,
};
use crate::commit::{CommitOperation, CommitReceipt, CommitRecord, OperationId, ThreadCommit};
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
    /// Each claimed thread's latest grant (SPEC §7.2).
    #[serde(default)]
    claims: BTreeMap<ThreadId, ClaimRecord>,
    /// Awaiting runs with a deadline, indexed by it: `(deadline_ms, run)` → thread (§7.3).
    /// Written as a list of entries: JSON object keys must be strings.
    #[serde(default, with = "entries")]
    deadlines: BTreeMap<(u64, RunId), ThreadId>,
    /// Store time: the latest `now_ms` any caller gave (it never goes back).
    #[serde(default)]
    clock: u64,
    /// The threads whose latest run is Running: where the orphan scan of `due_work` starts, so
    /// it never walks every claim ever granted (§7.3).
    #[serde(default)]
    running: BTreeSet<ThreadId>,
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
    /// Per commit of the thread (version `i + 1`): its store-wide sequence and the transcript's
    /// length after it, for reads as of a version (SPEC §8.10).
    #[serde(default)]
    commits: Vec<(u64, usize)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RunEntry {
    record: RunRecord,
    ticket: Option<ResumeTicket>,
    commits: u64,
    event_sequences: Vec<u64>,
}

impl RunEntry {
    /// The deadline index key of the run, while it awaits a ticket with a deadline.
    fn deadline_key(&self) -> Option<(u64, RunId)> {
        let deadline = self.pending_ticket()?.deadline_ms?;
        Some((deadline, self.record.id.clone()))
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

    /// What admission reads about `commit` (and, for an operation, its stored receipt).
    fn head(
        &self,
        commit: &ThreadCommit,
        operation: Option<&OperationId>,
        now_ms: u64,
    ) -> CommitHead {
        let thread = self.threads.get(&commit.thread_id);
        CommitHead {
            thread_version: thread.map_or(0, |t| t.version),
            message_count: thread.map_or(0, |t| t.messages.len() as u64),
            state_count: thread.map_or(0, |t| t.state.len() as u64),
            transcript_digest: thread
                .and_then(|t| t.digests.last().cloned())
                .unwrap_or_default(),
            run: self.runs.get(commit.run_id()).map(|entry| RunHead {
                thread_id: entry.record.thread_id.clone(),
                state: entry.record.state.clone(),
                commits: entry.commits,
            }),
            stored_operation: operation.and_then(|id| {
                self.operations
                    .get(&id.run_id)
                    .and_then(|ops| ops.get(&id.ordinal))
                    .cloned()
            }),
            sequences: Some(StoreSequences {
                last_commit: self.last_sequence,
                last_event: self.events.len() as u64,
            }),
            counter_limit: u64::MAX,
            claim: self.claims.get(&commit.thread_id).cloned(),
            now_ms,
        }
    }

    /// Advances store time to `now_ms` (if later) and returns it.
    fn tick(&mut self, now_ms: Option<u64>) -> u64 {
        self.clock = self.clock.max(now_ms.unwrap_or(0));
        self.clock
    }

    /// Writes an admitted commit as planned.
    fn append(&mut self, commit: ThreadCommit, plan: AppendPlan) -> CommitRecord {
        let sequence = plan.commit_sequence.unwrap_or_else(|| {
            debug_assert!(false, "MemoryStore's head always carries its sequences");
            self.last_sequence.saturating_add(1)
        });
        self.last_sequence = sequence;
        let run_id = commit.run_id().clone();
        let state = commit.run.state();
        let ticket = match &commit.run {
            RunDisposition::Awaiting(ticket) => Some((**ticket).clone()),
            _ => None,
        };
        if state == RunState::Running {
            self.running.insert(commit.thread_id.clone());
        } else {
            self.running.remove(&commit.thread_id);
        }
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
        if let Some(key) = run.deadline_key() {
            self.deadlines.remove(&key);
        }
        thread.digests.extend(plan.digests);
        thread.messages.extend(commit.messages);
        thread.commits.push((sequence, thread.messages.len()));
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
        run.commits = plan.run_commits;
        run.record.commits = plan.run_commits;
        if let Some(key) = run.deadline_key() {
            self.deadlines.insert(key, commit.thread_id.clone());
        }
        thread.latest_run = Some(run_id);
        thread.version = plan.thread_version;
        CommitRecord {
            sequence,
            thread_version: plan.thread_version,
        }
    }
}

impl CommitLog for MemoryStore {
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        let now_ms = self.clock;
        match admit_commit(&commit, &self.head(&commit, None, now_ms)) {
            Admission::Append(plan) => Ok(self.append(commit, plan)),
            Admission::Reject(error) => Err(error.into()),
            Admission::Duplicate(receipt) => {
                debug_assert!(false, "an unfenced commit is never a duplicate");
                Ok(receipt.record)
            }
        }
    }

    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        let now_ms = self.tick(operation.now_ms);
        let head = self.head(&operation.commit, Some(&operation.operation_id), now_ms);
        match admit(&operation, &head) {
            Admission::Duplicate(receipt) => Ok(receipt),
            Admission::Reject(error) => Err(error.into()),
            Admission::Append(plan) => {
                let CommitOperation {
                    operation_id,
                    payload_hash,
                    commit,
                    ..
                } = operation;
                let record = self.append(commit, plan);
                let receipt = CommitReceipt {
                    operation_id,
                    payload_hash,
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
    }
}

impl ThreadClaims for MemoryStore {
    fn claim_thread(&mut self, request: &ClaimRequest, now_ms: u64) -> Result<Claim, StoreError> {
        let now_ms = self.tick(Some(now_ms));
        match decide_claim(request, self.claims.get(&request.thread_id), now_ms)? {
            ClaimGrant::Same(claim) => Ok(claim),
            ClaimGrant::Granted(record) => {
                let claim = record.claim(&request.thread_id);
                self.claims.insert(request.thread_id.clone(), record);
                Ok(claim)
            }
        }
    }

    fn renew_claim(
        &mut self,
        claim: &Claim,
        lease_ms: u64,
        now_ms: u64,
    ) -> Result<Claim, StoreError> {
        let now_ms = self.tick(Some(now_ms));
        let record = decide_renew(claim, lease_ms, self.claims.get(&claim.thread_id), now_ms)?;
        let renewed = record.claim(&claim.thread_id);
        self.claims.insert(claim.thread_id.clone(), record);
        Ok(renewed)
    }

    fn release_claim(&mut self, claim: &Claim, now_ms: u64) -> Result<(), StoreError> {
        let now_ms = self.tick(Some(now_ms));
        if let Some(record) = decide_release(claim, self.claims.get(&claim.thread_id), now_ms) {
            self.claims.insert(claim.thread_id.clone(), record);
        }
        Ok(())
    }

    fn thread_claim(&self, thread: &ThreadId, now_ms: u64) -> Result<Option<Claim>, StoreError> {
        let now_ms = self.clock.max(now_ms);
        Ok(self
            .claims
            .get(thread)
            .filter(|record| record.is_live(now_ms))
            .map(|record| record.claim(thread)))
    }

    fn due_work(&self, now_ms: u64, limit: usize) -> Result<Vec<DueWork>, StoreError> {
        let now_ms = self.clock.max(now_ms);
        let mut due: Vec<DueWork> = self
            .deadlines
            .range(..(now_ms.saturating_add(1), RunId::new("")))
            .map(|((deadline_ms, run_id), thread_id)| DueWork {
                thread_id: thread_id.clone(),
                run_id: run_id.clone(),
                reason: DueReason::Deadline {
                    deadline_ms: *deadline_ms,
                },
            })
            .collect();
        for thread_id in &self.running {
            let Some(ended) = self
                .claims
                .get(thread_id)
                .and_then(|record| record.ended_at(now_ms))
            else {
                continue;
            };
            if let Some(run) = self.latest_record(thread_id)
                && run.state == RunState::Running
            {
                due.push(DueWork {
                    thread_id: thread_id.clone(),
                    run_id: run.id.clone(),
                    reason: DueReason::Orphaned {
                        claim_expired_at_ms: ended,
                    },
                });
            }
        }
        due.sort_by(due_order);
        due.truncate(limit);
        Ok(due)
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

    fn thread_as_of(
        &self,
        thread: &ThreadId,
        version: u64,
    ) -> Result<Option<ThreadAsOf>, StoreError> {
        let Some(entry) = self.threads.get(thread) else {
            return Ok(None);
        };
        let commit = usize::try_from(version)
            .ok()
            .and_then(|v| v.checked_sub(1))
            .and_then(|index| entry.commits.get(index));
        Ok(commit.map(|&(commit_sequence, len)| ThreadAsOf {
            thread_id: thread.clone(),
            version,
            commit_sequence,
            messages: entry.messages.get(..len).unwrap_or_default().to_vec(),
        }))
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
        let digest = match snapshot.end.checked_sub(1) {
            None => "",
            Some(last) => entry
                .and_then(|t| t.digests.get(last))
                .map_or("", String::as_str),
        };
        Ok(check_pin(snapshot, committed, digest)?)
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

/// A map whose keys are not strings, written as a list of `[key, value]` entries.
mod entries {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<K: Serialize, V: Serialize, S: Serializer>(
        map: &BTreeMap<K, V>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(map.iter())
    }

    pub(super) fn deserialize<'de, K, V, D>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(deserializer)?
            .into_iter()
            .collect())
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
