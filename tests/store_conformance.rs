//! T4: the SPEC §7 conformance suite against the reference `MemoryStore`, plus what only the
//! reference store can show: byte-identical state after rejections, counters that reject
//! instead of overflowing, long paging, and proof that the suite catches broken backends.

mod common;

use std::ops::Range;

use proptest::prelude::*;
use runcore::conformance;
use runcore::store::{
    CheckpointReader, Claim, ClaimRequest, CommitLog, CommittedThreadView, DueWork, EventRecord,
    EventScope, MemoryStore, StoreError, ThreadClaims, ThreadSummary, TranscriptError,
    TranscriptSnapshotRef,
};
use runcore::store::{Intercept, Intercepted, SharedStore};
use runcore::{
    AuditDraft, CommitError, CommitOperation, CommitReceipt, CommitRecord, EndCause, MergePolicy,
    Message, PauseReason, ResumeTicket, RunDisposition, RunId, RunRecord, StateCommand, StateScope,
    ThreadCommit, ThreadId, WaitIdentity,
};
use serde_json::{Value, json};

runcore::conformance_tests!(|| SharedStore::new(MemoryStore::new()));

fn running_commit(thread: &str, run: &str, drafts: usize) -> ThreadCommit {
    ThreadCommit::assemble(
        ThreadId::new(thread),
        RunDisposition::Running {
            run_id: RunId::new(run),
        },
        false,
        vec![Message::user(format!("{run} says hi"))],
        vec![],
        (0..drafts)
            .map(|i| AuditDraft::new("progress", json!({ "i": i })))
            .collect(),
    )
}

fn ended_commit(thread: &str, run: &str) -> ThreadCommit {
    ThreadCommit::assemble(
        ThreadId::new(thread),
        RunDisposition::Ended {
            run_id: RunId::new(run),
            cause: EndCause::NaturalEnd,
        },
        true,
        vec![],
        vec![],
        vec![],
    )
}

fn pause(thread: &str, run: &str, correlation: &str) -> ThreadCommit {
    let ticket = ResumeTicket::pause(
        WaitIdentity {
            correlation_id: correlation.into(),
            run_id: run.into(),
            thread_id: thread.into(),
            snapshot_id: "s".into(),
            catalog_fingerprint: "f".into(),
        },
        PauseReason::Manual,
        None,
    );
    ThreadCommit::assemble(
        ThreadId::new(thread),
        RunDisposition::Awaiting(Box::new(ticket)),
        true,
        vec![],
        vec![],
        vec![],
    )
}

fn json_of(store: &MemoryStore) -> String {
    serde_json::to_string(store).expect("MemoryStore serializes")
}

#[test]
fn run_all_reports_every_case_as_passing() {
    let results = conformance::run_all(|| SharedStore::new(MemoryStore::new()));
    let names: Vec<&str> = results.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, conformance::CASES);
    for (name, result) in results {
        assert_eq!(result, Ok(()), "{name}");
    }
}

#[test]
fn paging_ten_thousand_events_in_pages_of_seven_returns_each_once_in_order() {
    let mut store = MemoryStore::new();
    // 1,000 commits × 10 drafts over 3 threads and 30 runs.
    for i in 0..1_000usize {
        let thread = format!("t{}", i % 3);
        let run = format!("{thread}/r{}", i % 30);
        store
            .commit(running_commit(&thread, &run, 10))
            .expect("a progress commit is accepted");
    }
    assert_eq!(store.event_count(), 10_000);
    let scopes = [
        EventScope::All,
        EventScope::Thread(ThreadId::new("t1")),
        EventScope::Run(RunId::new("t2/r5")),
    ];
    for scope in scopes {
        let everything = store.list_events(&scope, None, usize::MAX).unwrap();
        let mut paged: Vec<EventRecord> = Vec::new();
        let mut from = None;
        let mut pages = 0usize;
        loop {
            let page = store.list_events(&scope, from, 7).unwrap();
            assert!(page.len() <= 7);
            let Some(last) = page.last() else { break };
            from = Some(last.sequence);
            paged.extend(page);
            pages += 1;
            assert!(pages <= 10_000 / 7 + 2, "paging {scope:?} does not end");
        }
        assert_eq!(pages, everything.len().div_ceil(7), "{scope:?}");
        assert_eq!(paged, everything, "{scope:?}");
        let sequences: Vec<u64> = paged.iter().map(|e| e.sequence).collect();
        assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{scope:?}");
        match &scope {
            EventScope::All => {
                assert_eq!(sequences, (1..=10_000).collect::<Vec<u64>>());
            }
            EventScope::Thread(thread) => {
                assert_eq!(paged.len(), 334 * 10 - 10);
                assert!(paged.iter().all(|e| &e.thread_id == thread));
            }
            EventScope::Run(run) => {
                assert_eq!(paged.len(), (1_000 / 30 + 1) * 10);
                assert!(paged.iter().all(|e| &e.run_id == run));
            }
        }
    }
}

/// A store with history on two threads: an ended run, an awaiting run, a running run, and an
/// operation receipt.
fn store_with_history() -> MemoryStore {
    let mut store = MemoryStore::new();
    store
        .commit_operation(CommitOperation::new(running_commit("t1", "r0", 2), 0, 0))
        .unwrap();
    store.commit(ended_commit("t1", "r0")).unwrap();
    store.commit(pause("t1", "r1", "r1:wait-1")).unwrap();
    store.commit(running_commit("t2", "r2", 1)).unwrap();
    store
}

#[test]
fn rejected_commits_and_operations_leave_the_store_byte_identical() {
    let mut store = store_with_history();
    let before = json_of(&store);
    let exclusive =
        StateCommand::set(StateScope::Thread, "k", json!(1)).with_merge(MergePolicy::Exclusive);
    let mut exclusive_twice = running_commit("t1", "r1", 1);
    exclusive_twice.state = vec![exclusive.clone(), exclusive];
    let mut newer = running_commit("t1", "r1", 1);
    newer.schema_version += 1;
    let commits: Vec<(ThreadCommit, &str)> = vec![
        (running_commit("", "r1", 1), "empty_thread_id"),
        (running_commit("t1", "", 1), "empty_run_id"),
        (pause("t1", "r1", ""), "empty_correlation_id"),
        (newer, "unsupported_schema_version"),
        (exclusive_twice, "exclusive_conflict"),
        (running_commit("t1", "r0", 1), "already_terminal"),
        (ended_commit("t1", "r0"), "already_terminal"),
        (running_commit("t2", "r1", 1), "run_on_other_thread"),
    ];
    for (commit, code) in commits {
        let error = store.commit(commit).unwrap_err();
        assert_eq!(error.code(), code);
        assert_eq!(json_of(&store), before, "{code} changed the store");
    }
    let mut reused = CommitOperation::new(running_commit("t1", "r0", 2), 0, 0);
    reused.payload_hash = "0".repeat(64);
    let mut foreign = CommitOperation::new(running_commit("t1", "r1", 0), 1, 3);
    foreign.operation_id.run_id = RunId::new("r2");
    let operations: Vec<(CommitOperation, &str)> = vec![
        (reused, "payload_mismatch"),
        (foreign, "operation_run_mismatch"),
        (
            CommitOperation::new(running_commit("t1", "r1", 0), 1, 2),
            "version_conflict",
        ),
        (
            CommitOperation::new(running_commit("t1", "r1", 0), 0, 3),
            "ordinal_conflict",
        ),
        (
            CommitOperation::new(running_commit("t1", "r0", 0), 2, 3),
            "already_terminal",
        ),
        (
            CommitOperation::new(running_commit("t2", "r1", 0), 1, 1),
            "run_on_other_thread",
        ),
    ];
    for (operation, code) in operations {
        let error = store.commit_operation(operation).unwrap_err();
        assert_eq!(error.code(), code);
        assert_eq!(json_of(&store), before, "{code} changed the store");
    }
    // A duplicate is accepted but also appends nothing.
    let duplicate = store
        .commit_operation(CommitOperation::new(running_commit("t1", "r0", 2), 0, 0))
        .unwrap();
    assert!(duplicate.duplicate);
    assert_eq!(json_of(&store), before);
}

/// Rewrites one field of a serialized store, to reach counter values no test could commit its
/// way to.
fn store_with(mut edit: impl FnMut(&mut Value)) -> MemoryStore {
    let mut value = serde_json::to_value(store_with_history()).unwrap();
    edit(&mut value);
    serde_json::from_value(value).expect("the edited store deserializes")
}

#[test]
fn counters_at_their_limit_reject_instead_of_overflowing() {
    let cases: Vec<(MemoryStore, ThreadCommit, &str)> = vec![
        (
            store_with(|v| v["last_sequence"] = json!(u64::MAX)),
            running_commit("t3", "r3", 0),
            "commit sequence",
        ),
        (
            store_with(|v| v["threads"]["t2"]["version"] = json!(u64::MAX)),
            running_commit("t2", "r3", 0),
            "thread version",
        ),
        (
            store_with(|v| v["runs"]["r2"]["commits"] = json!(u64::MAX)),
            running_commit("t2", "r2", 0),
            "run commit count",
        ),
    ];
    for (mut store, commit, counter) in cases {
        let before = json_of(&store);
        let expected = CommitError::CounterOverflow {
            counter: counter.to_owned(),
        };
        assert_eq!(store.commit(commit.clone()), Err(expected.clone().into()));
        assert_eq!(json_of(&store), before, "{counter}");
        // Through an operation whose version and ordinal match the saturated counters.
        let version = store.thread_version(&commit.thread_id).unwrap();
        let ordinal = store.run_commit_count(commit.run_id());
        let operation = CommitOperation::new(commit, ordinal, version);
        assert_eq!(store.commit_operation(operation), Err(expected.into()));
        assert_eq!(json_of(&store), before, "{counter}");
    }
    let store = store_with(|v| v["last_sequence"] = json!(u64::MAX));
    for scope in [EventScope::All, EventScope::Thread(ThreadId::new("t1"))] {
        assert!(
            store
                .list_events(&scope, Some(u64::MAX), usize::MAX)
                .unwrap()
                .is_empty()
        );
    }
}

/// One step of the random commit stream for the property below.
#[derive(Debug, Clone)]
enum Step {
    Progress {
        thread: usize,
        run: usize,
        drafts: usize,
    },
    Pause {
        thread: usize,
        run: usize,
    },
    End {
        thread: usize,
        run: usize,
    },
    Operation {
        thread: usize,
        run: usize,
        ordinal: u64,
        version: u64,
    },
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let ids = (0..3usize, 0..4usize);
    prop_oneof![
        4 => (ids.clone(), 0..3usize)
            .prop_map(|((thread, run), drafts)| Step::Progress { thread, run, drafts }),
        1 => ids.clone().prop_map(|(thread, run)| Step::Pause { thread, run }),
        1 => ids.clone().prop_map(|(thread, run)| Step::End { thread, run }),
        2 => (ids, 0..4u64, 0..6u64).prop_map(|((thread, run), ordinal, version)| {
            Step::Operation { thread, run, ordinal, version }
        }),
    ]
}

/// A deliberately naive model of what a commit does to the counters and the transcript.
#[derive(Default)]
struct Model {
    sequence: u64,
    events: u64,
    /// (thread, version, messages)
    threads: Vec<(String, u64, usize)>,
    /// (run, thread, commits, ended)
    runs: Vec<(String, String, u64, bool)>,
    /// (run, ordinal, payload hash, record) of accepted operations.
    operations: Vec<(String, u64, String, CommitRecord)>,
}

impl Model {
    fn thread_mut(&mut self, thread: &str) -> &mut (String, u64, usize) {
        if !self.threads.iter().any(|t| t.0 == thread) {
            self.threads.push((thread.to_owned(), 0, 0));
        }
        self.threads.iter_mut().find(|t| t.0 == thread).unwrap()
    }

    fn predicts(&self, commit: &ThreadCommit) -> Result<(), &'static str> {
        match self.runs.iter().find(|r| r.0 == commit.run_id().as_str()) {
            Some((_, _, _, true)) => Err("already_terminal"),
            Some((_, thread, _, _)) if thread != commit.thread_id.as_str() => {
                Err("run_on_other_thread")
            }
            _ => Ok(()),
        }
    }

    fn stored_operation(
        &self,
        run: &str,
        ordinal: u64,
    ) -> Option<&(String, u64, String, CommitRecord)> {
        self.operations
            .iter()
            .find(|o| o.0 == run && o.1 == ordinal)
    }

    fn apply(&mut self, commit: &ThreadCommit) -> CommitRecord {
        self.sequence += 1;
        self.events += commit.events.len() as u64;
        let messages = commit.messages.len();
        let thread = self.thread_mut(commit.thread_id.as_str());
        thread.1 += 1;
        thread.2 += messages;
        let ended = commit.run.state().is_terminal();
        let run = commit.run_id().as_str();
        match self.runs.iter_mut().find(|r| r.0 == run) {
            Some(entry) => {
                entry.2 += 1;
                entry.3 = ended;
            }
            None => self.runs.push((
                run.to_owned(),
                commit.thread_id.as_str().to_owned(),
                1,
                ended,
            )),
        }
        CommitRecord {
            sequence: self.sequence,
            thread_version: self.version(commit.thread_id.as_str()),
        }
    }

    fn version(&self, thread: &str) -> u64 {
        self.threads
            .iter()
            .find(|t| t.0 == thread)
            .map_or(0, |t| t.1)
    }

    fn run_commits(&self, run: &str) -> u64 {
        self.runs.iter().find(|r| r.0 == run).map_or(0, |r| r.2)
    }
}

proptest! {
    #![proptest_config(common::proptest_config("proptest-regressions/store_conformance.txt", 64))]

    /// Against a naive model: every accepted commit advances the sequence by exactly one and
    /// the thread version by one, every rejection is the predicted one and leaves the store
    /// byte-identical.
    #[test]
    fn random_commit_streams_match_a_naive_model(steps in prop::collection::vec(step_strategy(), 1..40)) {
        let mut store = MemoryStore::new();
        let mut model = Model::default();
        let mut waits = 0u32;
        for step in steps {
            let before = json_of(&store);
            let (commit, operation) = match step {
                Step::Progress { thread, run, drafts } => {
                    (running_commit(&format!("t{thread}"), &format!("r{run}"), drafts), None)
                }
                Step::Pause { thread, run } => {
                    waits += 1;
                    (pause(&format!("t{thread}"), &format!("r{run}"), &format!("w{waits}")), None)
                }
                Step::End { thread, run } => (ended_commit(&format!("t{thread}"), &format!("r{run}")), None),
                Step::Operation { thread, run, ordinal, version } => (
                    running_commit(&format!("t{thread}"), &format!("r{run}"), 1),
                    Some((ordinal, version)),
                ),
            };
            let result: Result<CommitRecord, StoreError> = match operation {
                None => store.commit(commit.clone()),
                Some((ordinal, version)) => store
                    .commit_operation(CommitOperation::new(commit.clone(), ordinal, version))
                    .map(|receipt: CommitReceipt| receipt.record),
            };
            let run = commit.run_id().as_str().to_owned();
            let hash = commit.payload_hash();
            // Ok(Some(record)): a duplicate answered from the stored receipt.
            let expected: Result<Option<CommitRecord>, &str> = match operation {
                Some((ordinal, _)) if model.stored_operation(&run, ordinal).is_some() => {
                    match model.stored_operation(&run, ordinal) {
                        Some((_, _, stored, record)) if *stored == hash => Ok(Some(*record)),
                        _ => Err("payload_mismatch"),
                    }
                }
                Some((_, version)) if version != model.version(commit.thread_id.as_str()) => {
                    Err("version_conflict")
                }
                Some((ordinal, _)) if ordinal != model.run_commits(&run) => Err("ordinal_conflict"),
                _ => model.predicts(&commit).map(|()| None),
            };
            match (expected, result) {
                (Ok(None), Ok(record)) => {
                    let predicted = model.apply(&commit);
                    prop_assert_eq!(record, predicted);
                    if let Some((ordinal, _)) = operation {
                        model.operations.push((run, ordinal, hash, record));
                    }
                }
                (Ok(Some(stored)), Ok(record)) => {
                    prop_assert_eq!(record, stored);
                    prop_assert_eq!(json_of(&store), before);
                }
                (Err(code), Err(error)) => {
                    prop_assert_eq!(error.code(), code);
                    prop_assert_eq!(json_of(&store), before);
                }
                (expected, result) => {
                    prop_assert!(false, "model predicted {:?}, store answered {:?}", expected, result);
                }
            }
            prop_assert_eq!(store.last_sequence(), model.sequence);
            prop_assert_eq!(store.event_count() as u64, model.events);
            for (thread, version, messages) in &model.threads {
                let id = ThreadId::new(thread.as_str());
                prop_assert_eq!(store.thread_version(&id).unwrap(), *version);
                prop_assert_eq!(store.committed_messages(&id).unwrap().len(), *messages);
            }
        }
    }
}

/// A backend with one deliberate bug, to show the suite catches it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bug {
    /// Keeps serving a run's ticket after the run moved on.
    StaleTicket,
    /// Lists events newest first.
    DescendingEvents,
    /// Treats `from` as inclusive.
    InclusiveFrom,
    /// Treats `limit = 0` as "no limit".
    ZeroLimitUnbounded,
    /// Reports the thread's first run as its head.
    HeadIsFirstRun,
    /// Records the messages of a rejected commit.
    LeaksRejectedMessages,
    /// Does not flag duplicates.
    DuplicateNotFlagged,
    /// Accepts a reused operation id with another hash as a duplicate.
    IgnoresPayloadHash,
    /// Accepts any run id on any thread (answers reads from the first thread only).
    ForgetsRunOnOtherThread,
    /// Pins transcripts with another digest.
    OwnDigest,
    /// Returns slices without checking ranges.
    UncheckedRanges,
    /// Drops the state commands of Ended commits.
    DropsStateOfEndedCommits,
    /// Accepts commits to ended runs (without writing them).
    NoFence,
    /// Numbers commits with gaps.
    SparseSequences,
    /// Ignores `expected_thread_version` (every writer builds on the current version).
    NoVersionFence,
    /// Lists threads newest id first.
    ThreadsNewestFirst,
    /// Keeps listing a ticket after its run moved on.
    PendingKeepsResumed,
    /// Ignores claims when committing (no token needed, any token accepted).
    UnfencedClaims,
    /// Grants a claim over a live one (a second owner).
    DoubleGrant,
    /// Lists no orphans in due work.
    NoOrphans,
}

struct Mutant {
    inner: MemoryStore,
    bug: Bug,
    tickets: Vec<(RunId, ResumeTicket)>,
    leaked: Vec<(ThreadId, Message)>,
}

impl Mutant {
    fn new(bug: Bug) -> Self {
        Mutant {
            inner: MemoryStore::new(),
            bug,
            tickets: Vec::new(),
            leaked: Vec::new(),
        }
    }

    fn before_commit(&mut self, commit: &mut ThreadCommit) {
        if self.bug == Bug::DropsStateOfEndedCommits && commit.run.state().is_terminal() {
            commit.state.clear();
        }
    }

    fn after_commit<T>(&mut self, commit: &ThreadCommit, result: &Result<T, StoreError>) {
        if let (Bug::StaleTicket | Bug::PendingKeepsResumed, Some(ticket), Ok(_)) =
            (self.bug, commit.run.ticket(), result)
        {
            self.tickets.push((ticket.run_id.clone(), ticket.clone()));
        }
        if self.bug == Bug::LeaksRejectedMessages && result.is_err() {
            for message in &commit.messages {
                self.leaked
                    .push((commit.thread_id.clone(), message.clone()));
            }
        }
    }

    fn version(&self, thread: &ThreadId) -> u64 {
        self.inner.thread_version(thread).unwrap()
    }
}

impl Intercept for Mutant {
    type Inner = MemoryStore;
    fn inner(&self) -> &MemoryStore {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut MemoryStore {
        &mut self.inner
    }

    fn commit(&mut self, mut commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        let original = commit.clone();
        self.before_commit(&mut commit);
        let result = match self.inner.commit(commit.clone()) {
            Err(StoreError::Rejected(CommitError::RunOnOtherThread { .. }))
                if self.bug == Bug::ForgetsRunOnOtherThread =>
            {
                Ok(CommitRecord {
                    sequence: self.inner.last_sequence(),
                    thread_version: self.version(&commit.thread_id),
                })
            }
            Err(StoreError::Rejected(CommitError::AlreadyTerminal { .. }))
                if self.bug == Bug::NoFence =>
            {
                Ok(CommitRecord {
                    sequence: self.inner.last_sequence(),
                    thread_version: self.version(&commit.thread_id),
                })
            }
            Ok(record) if self.bug == Bug::SparseSequences => Ok(CommitRecord {
                sequence: record.sequence * 2,
                ..record
            }),
            other => other,
        };
        self.after_commit(&original, &result);
        result
    }

    fn commit_operation(
        &mut self,
        mut operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        let original = operation.commit.clone();
        self.before_commit(&mut operation.commit);
        if self.bug == Bug::NoVersionFence {
            operation.expected_thread_version = self.version(&operation.commit.thread_id);
        }
        if self.bug == Bug::UnfencedClaims {
            let now_ms = operation.now_ms.unwrap_or(0);
            if let Ok(Some(live)) = self.inner.thread_claim(&operation.commit.thread_id, now_ms) {
                self.inner.release_claim(&live, now_ms)?;
            }
            operation.claim = None;
        }
        let retry = operation.clone();
        let result = match (self.bug, self.inner.commit_operation(operation)) {
            (Bug::DuplicateNotFlagged, Ok(receipt)) => Ok(CommitReceipt {
                duplicate: false,
                ..receipt
            }),
            (
                Bug::IgnoresPayloadHash,
                Err(StoreError::Rejected(CommitError::PayloadMismatch { stored, .. })),
            ) => {
                let mut same = retry;
                same.payload_hash = stored;
                self.inner.commit_operation(same)
            }
            (
                Bug::ForgetsRunOnOtherThread,
                Err(StoreError::Rejected(CommitError::RunOnOtherThread { .. })),
            ) => Ok(CommitReceipt {
                operation_id: retry.operation_id,
                payload_hash: retry.payload_hash,
                record: CommitRecord {
                    sequence: self.inner.last_sequence(),
                    thread_version: 0,
                },
                duplicate: false,
            }),
            (_, other) => other,
        };
        self.after_commit(&original, &result);
        result
    }

    fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError> {
        let mut messages = self.inner.committed_messages(thread)?;
        messages.extend(
            self.leaked
                .iter()
                .filter(|(t, _)| t == thread)
                .map(|(_, m)| m.clone()),
        );
        Ok(messages)
    }

    fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError> {
        if self.bug == Bug::HeadIsFirstRun {
            let first = self
                .inner
                .list_events(&EventScope::Thread(thread.clone()), None, 1)?;
            if let Some(event) = first.first() {
                return self.inner.run(&event.run_id);
            }
        }
        self.inner.latest_run(thread)
    }

    fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError> {
        match self.tickets.iter().rev().find(|(r, _)| r == run) {
            Some((_, ticket)) if self.bug == Bug::StaleTicket => Ok(Some(ticket.clone())),
            _ => self.inner.resume_ticket(run),
        }
    }

    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        let mut page = self.inner.threads(after, limit)?;
        if self.bug == Bug::ThreadsNewestFirst {
            page.reverse();
        }
        Ok(page)
    }

    fn pending_tickets(
        &self,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<Vec<ResumeTicket>, StoreError> {
        if self.bug == Bug::PendingKeepsResumed {
            let mut all: Vec<ResumeTicket> = self.inner.pending_tickets(None, usize::MAX)?;
            for (run, ticket) in &self.tickets {
                if !all.iter().any(|t| &t.run_id == run) {
                    all.push(ticket.clone());
                }
            }
            all.sort_by(|a, b| a.run_id.cmp(&b.run_id));
            all.retain(|t| after.is_none_or(|a| &t.run_id > a));
            all.truncate(limit);
            return Ok(all);
        }
        self.inner.pending_tickets(after, limit)
    }

    fn transcript_snapshot(&self, thread: &ThreadId) -> Result<TranscriptSnapshotRef, StoreError> {
        let mut pin = self.inner.transcript_snapshot(thread)?;
        if self.bug == Bug::OwnDigest {
            pin.digest = format!("{}-mine", pin.digest);
        }
        Ok(pin)
    }

    fn verify_transcript_snapshot(
        &self,
        snapshot: &TranscriptSnapshotRef,
    ) -> Result<(), StoreError> {
        if self.bug == Bug::OwnDigest {
            let own = self.transcript_snapshot(&snapshot.thread_id)?;
            return if own.digest == snapshot.digest {
                Ok(())
            } else {
                Err(TranscriptError::SnapshotMismatch {
                    thread_id: snapshot.thread_id.clone(),
                }
                .into())
            };
        }
        self.inner.verify_transcript_snapshot(snapshot)
    }

    fn transcript_slice(
        &self,
        snapshot: &TranscriptSnapshotRef,
        ranges: &[Range<usize>],
    ) -> Result<Vec<Message>, StoreError> {
        if self.bug == Bug::UncheckedRanges {
            let messages = self.inner.committed_messages(&snapshot.thread_id)?;
            return Ok(ranges
                .iter()
                .flat_map(|r| messages.get(r.clone()).unwrap_or_default().to_vec())
                .collect());
        }
        self.inner.transcript_slice(snapshot, ranges)
    }

    fn claim_thread(&mut self, request: &ClaimRequest, now_ms: u64) -> Result<Claim, StoreError> {
        if self.bug == Bug::DoubleGrant
            && let Some(live) = self.inner.thread_claim(&request.thread_id, now_ms)?
        {
            self.inner.release_claim(&live, now_ms)?;
        }
        self.inner.claim_thread(request, now_ms)
    }
    fn due_work(&self, now_ms: u64, limit: usize) -> Result<Vec<DueWork>, StoreError> {
        let mut due = self.inner.due_work(now_ms, limit)?;
        if self.bug == Bug::NoOrphans {
            due.retain(|item| item.reason.kind() != "orphaned");
        }
        Ok(due)
    }

    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        match self.bug {
            Bug::DescendingEvents => {
                let mut all = self.inner.list_events(scope, None, usize::MAX)?;
                all.reverse();
                all.retain(|e| e.sequence > from.unwrap_or(0));
                all.truncate(limit);
                Ok(all)
            }
            Bug::InclusiveFrom => {
                self.inner
                    .list_events(scope, from.map(|f| f.saturating_sub(1)), limit)
            }
            Bug::ZeroLimitUnbounded if limit == 0 => {
                self.inner.list_events(scope, from, usize::MAX)
            }
            _ => self.inner.list_events(scope, from, limit),
        }
    }
}

#[test]
fn the_suite_catches_each_deliberate_bug() {
    let expectations: [(Bug, &[&str]); 20] = [
        (
            Bug::StaleTicket,
            &["ticket_appears_with_awaiting_and_disappears_with_next_commit"],
        ),
        (Bug::DescendingEvents, &["events_ordered_and_paged"]),
        (Bug::InclusiveFrom, &["events_ordered_and_paged"]),
        (Bug::ZeroLimitUnbounded, &["events_ordered_and_paged"]),
        (
            Bug::HeadIsFirstRun,
            &["commits_accumulate_and_latest_run_follows"],
        ),
        (
            Bug::LeaksRejectedMessages,
            &[
                "terminal_run_is_fenced",
                "rejected_commits_change_no_read_result",
            ],
        ),
        (
            Bug::DuplicateNotFlagged,
            &["operation_duplicate_returns_stored_receipt"],
        ),
        (
            Bug::IgnoresPayloadHash,
            &["operation_payload_reuse_is_rejected"],
        ),
        (
            Bug::ForgetsRunOnOtherThread,
            &["run_id_reused_on_another_thread_is_rejected"],
        ),
        (Bug::OwnDigest, &["transcript_snapshots"]),
        (Bug::UncheckedRanges, &["transcript_snapshots"]),
        (Bug::DropsStateOfEndedCommits, &["committed_state_replays"]),
        (
            Bug::NoFence,
            &["terminal_run_is_fenced", "run_may_be_born_in_any_state"],
        ),
        (
            Bug::SparseSequences,
            &["sequences_are_dense_and_distinct", "commit_then_read"],
        ),
        (
            Bug::NoVersionFence,
            &[
                "operation_version_conflict_is_rejected",
                "two_writers_from_one_version",
            ],
        ),
        (Bug::ThreadsNewestFirst, &["threads_listed_and_paged"]),
        (
            Bug::PendingKeepsResumed,
            &["pending_tickets_listed_and_paged"],
        ),
        (Bug::UnfencedClaims, &["claimed_commits_are_fenced"]),
        (
            Bug::DoubleGrant,
            &[
                "claims_are_granted_and_refused",
                "racing_owners_get_one_claim",
            ],
        ),
        (Bug::NoOrphans, &["due_work_lists_deadlines_and_orphans"]),
    ];
    for (bug, must_fail) in expectations {
        let results = conformance::run_all(|| SharedStore::new(Intercepted(Mutant::new(bug))));
        for case in must_fail {
            let result = results
                .iter()
                .find(|(name, _)| name == case)
                .map(|(_, result)| result.clone())
                .unwrap_or_else(|| panic!("no case named {case}"));
            assert!(result.is_err(), "{bug:?} went unnoticed by {case}");
        }
    }
}

#[test]
fn failure_messages_say_what_was_expected_and_what_arrived() {
    let mut store = Intercepted(Mutant::new(Bug::StaleTicket));
    let message =
        conformance::ticket_appears_with_awaiting_and_disappears_with_next_commit(&mut store)
            .unwrap_err()
            .0;
    common::snapshot!("stale_ticket_failure", message);
}
