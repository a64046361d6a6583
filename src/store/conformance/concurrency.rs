//! Cases with several OS threads committing at once, each through its own handle
//! ([`StoreHandles::open_handle`]): on distinct threads, on one thread, and fenced writers
//! racing on one thread (SPEC §7.1).
//!
//! A store that is not safe to share can still run them through [`SharedStore`], which puts
//! one lock around it (that is how [`MemoryStore`](crate::MemoryStore) runs them).

use std::sync::{Arc, Mutex, MutexGuard};

use super::CaseResult;
use super::support::{accepted, all_events, commit, expect_eq, read, running, thread, user};
use crate::commit::{CommitError, CommitOperation, CommitReceipt, CommitRecord, ThreadCommit};
use crate::ids::{RunId, ThreadId};
use crate::message::Message;
use crate::resume::ResumeTicket;
use crate::run::RunRecord;
use crate::state::StateCommand;
use crate::store::claims::{Claim, ClaimRequest, DueWork};
use crate::store::{
    CheckpointReader, CommitLog, CommittedThreadView, EventRecord, EventScope, StoreError,
    StoreHandles, ThreadClaims, ThreadSummary,
};

/// Writers per case.
const WRITERS: usize = 4;
/// Commits per writer.
const COMMITS: usize = 25;

/// Runs `work(i, handle)` on `WRITERS` OS threads, each with its own handle, and collects the
/// first failure.
fn race<S, W>(store: &S, work: W) -> CaseResult
where
    S: StoreHandles,
    W: Fn(usize, &mut S) -> Result<(), String> + Sync,
{
    let mut handles = Vec::with_capacity(WRITERS);
    for i in 0..WRITERS {
        handles.push(read(
            &format!("open_handle for writer {i}"),
            store.open_handle(),
        )?);
    }
    let work = &work;
    let outcomes: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let running: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(i, mut handle)| scope.spawn(move || work(i, &mut handle)))
            .collect();
        running
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("a writer thread panicked".to_owned()))
            })
            .collect()
    });
    for outcome in outcomes {
        outcome?;
    }
    Ok(())
}

/// Writer `i` makes `COMMITS` plain commits of run `run-{i}` on thread `thread_of(i)`, each
/// with one user message `"{i}:{k}"`, all writers at once.
fn race_plain_commits<S: StoreHandles>(
    store: &S,
    thread_of: impl Fn(usize) -> String + Sync,
) -> CaseResult {
    race(store, |i, handle| {
        let thread_name = thread_of(i);
        for k in 0..COMMITS {
            let c = commit(
                &thread_name,
                running(&format!("run-{i}")),
                vec![user(&format!("{i}:{k}"))],
                vec![],
            );
            handle
                .commit(c)
                .map_err(|e| format!("writer {i}, commit {k}: {e}"))?;
        }
        Ok(())
    })
}

/// Checks the store-wide sequences after a race: `commits` commits with dense commit
/// sequences, and dense event sequences in commit order.
fn dense_after_race<S: CheckpointReader>(store: &S, commits: usize) -> CaseResult {
    let events = all_events(store, &EventScope::All)?;
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    expect_eq("event sequences after the race", &expected, &sequences)?;
    let mut commit_sequences: Vec<u64> = events.iter().map(|e| e.commit_sequence).collect();
    let sorted = {
        let mut s = commit_sequences.clone();
        s.sort_unstable();
        s
    };
    expect_eq(
        "commit sequences ascend with event sequences",
        &sorted,
        &commit_sequences,
    )?;
    commit_sequences.dedup();
    let expected: Vec<u64> = (1..=commits as u64).collect();
    expect_eq(
        "commit sequences after the race (every commit carries drafts)",
        &expected,
        &commit_sequences,
    )?;
    Ok(())
}

fn message_text(message: &Message) -> String {
    match message {
        Message::User(user) => user
            .content
            .iter()
            .filter_map(|block| match block {
                crate::message::ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect(),
        _ => String::new(),
    }
}

/// Several OS threads commit on distinct threads at once: every commit lands exactly once,
/// each thread holds its writer's messages in order, and sequences stay dense.
pub fn concurrent_commits_on_distinct_threads<S: StoreHandles>(store: &mut S) -> CaseResult {
    race_plain_commits(store, |i| format!("thread-{i}"))?;
    for i in 0..WRITERS {
        let t = thread(&format!("thread-{i}"));
        let texts: Vec<String> = read("committed_messages", store.committed_messages(&t))?
            .iter()
            .map(message_text)
            .collect();
        let expected: Vec<String> = (0..COMMITS).map(|k| format!("{i}:{k}")).collect();
        expect_eq(&format!("messages of thread-{i}"), &expected, &texts)?;
        expect_eq(
            &format!("thread_version(thread-{i})"),
            &(COMMITS as u64),
            &read("thread_version", store.thread_version(&t))?,
        )?;
    }
    dense_after_race(store, WRITERS * COMMITS)
}

/// Several OS threads commit on one thread at once (each its own run, plain `commit`): the
/// thread holds every message exactly once, each writer's in the order it wrote them, and
/// sequences stay dense.
pub fn concurrent_commits_on_one_thread<S: StoreHandles>(store: &mut S) -> CaseResult {
    race_plain_commits(store, |_| "shared".to_owned())?;
    let texts: Vec<String> = read(
        "committed_messages",
        store.committed_messages(&thread("shared")),
    )?
    .iter()
    .map(message_text)
    .collect();
    expect_eq(
        "messages on the shared thread",
        &(WRITERS * COMMITS),
        &texts.len(),
    )?;
    for i in 0..WRITERS {
        let prefix = format!("{i}:");
        let mine: Vec<&String> = texts.iter().filter(|t| t.starts_with(&prefix)).collect();
        let expected: Vec<String> = (0..COMMITS).map(|k| format!("{i}:{k}")).collect();
        let expected: Vec<&String> = expected.iter().collect();
        expect_eq(
            &format!("writer {i}'s messages, in its order"),
            &expected,
            &mine,
        )?;
    }
    expect_eq(
        "thread_version(shared)",
        &((WRITERS * COMMITS) as u64),
        &read("thread_version", store.thread_version(&thread("shared")))?,
    )?;
    dense_after_race(store, WRITERS * COMMITS)
}

/// Fenced writers race on one thread: each reads the version, commits an operation built on
/// it, and on `VersionConflict` reads again and retries. No two writers ever land on the same
/// version, so every operation lands exactly once and the thread's version equals the number
/// of commits.
pub fn concurrent_fenced_writers_on_one_thread<S: StoreHandles>(store: &mut S) -> CaseResult {
    let per_writer = 10usize;
    race(store, |i, handle| {
        let run_id = format!("fenced-{i}");
        for k in 0..per_writer {
            let mut attempts = 0u32;
            loop {
                attempts += 1;
                if attempts > 10_000 {
                    return Err(format!("writer {i}, commit {k}: never got through"));
                }
                let version = handle
                    .thread_version(&thread("fenced"))
                    .map_err(|e| format!("writer {i}: thread_version failed: {e}"))?;
                let op = CommitOperation::new(
                    commit(
                        "fenced",
                        running(&run_id),
                        vec![user(&format!("{i}:{k}"))],
                        vec![],
                    ),
                    k as u64,
                    version,
                );
                match handle.commit_operation(op) {
                    Ok(receipt) if !receipt.duplicate => break,
                    Ok(_) => return Err(format!("writer {i}, commit {k}: a duplicate receipt")),
                    Err(StoreError::Rejected(CommitError::VersionConflict { .. })) => continue,
                    Err(e) => return Err(format!("writer {i}, commit {k}: {e}")),
                }
            }
        }
        Ok(())
    })?;
    let total = WRITERS * per_writer;
    let texts: Vec<String> = read(
        "committed_messages",
        store.committed_messages(&thread("fenced")),
    )?
    .iter()
    .map(message_text)
    .collect();
    expect_eq("messages of the fenced thread", &total, &texts.len())?;
    let mut unique = texts.clone();
    unique.sort();
    unique.dedup();
    expect_eq("distinct messages (nothing doubled)", &total, &unique.len())?;
    expect_eq(
        "thread_version(fenced)",
        &(total as u64),
        &read("thread_version", store.thread_version(&thread("fenced")))?,
    )?;
    for i in 0..WRITERS {
        let record = read("run", store.run(&RunId::new(format!("fenced-{i}"))))?;
        expect_eq(
            &format!("commits of fenced-{i}"),
            &Some(per_writer as u64),
            &record.map(|r| r.commits),
        )?;
    }
    // One more operation on the final version goes through; one on a stale version does not.
    let stale = CommitOperation::new(
        commit("fenced", running("late"), vec![], vec![]),
        0,
        total as u64 - 1,
    );
    match store.commit_operation(stale) {
        Err(StoreError::Rejected(CommitError::VersionConflict { .. })) => {}
        other => {
            return Err(format!(
                "a stale operation after the race: expected VersionConflict, got {other:?}"
            )
            .into());
        }
    }
    accepted(
        "an operation on the final version",
        store.commit_operation(CommitOperation::new(
            commit("fenced", running("late"), vec![], vec![]),
            0,
            total as u64,
        )),
    )?;
    dense_after_race(store, total + 1)
}

/// Puts one lock around a store that cannot be shared, so it can run the concurrency cases:
/// every handle is a clone of one `Arc<Mutex<S>>`.
#[derive(Debug, Default)]
pub struct SharedStore<S>(Arc<Mutex<S>>);

impl<S> SharedStore<S> {
    /// Wraps `store`.
    pub fn new(store: S) -> Self {
        SharedStore(Arc::new(Mutex::new(store)))
    }

    /// The wrapped store (a poisoned lock is recovered: the suite reports the panic itself).
    pub fn lock(&self) -> MutexGuard<'_, S> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<S: CommitLog> CommitLog for SharedStore<S> {
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        self.lock().commit(commit)
    }

    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        self.lock().commit_operation(operation)
    }
}

impl<S: CommittedThreadView> CommittedThreadView for SharedStore<S> {
    fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError> {
        self.lock().committed_messages(thread)
    }
    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.lock().run(run)
    }
    fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError> {
        self.lock().latest_run(thread)
    }
    fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError> {
        self.lock().resume_ticket(run)
    }
    fn committed_state(&self, thread: &ThreadId) -> Result<Vec<StateCommand>, StoreError> {
        self.lock().committed_state(thread)
    }
    fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        self.lock().thread_version(thread)
    }
    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        self.lock().threads(after, limit)
    }
    fn pending_tickets(
        &self,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<Vec<ResumeTicket>, StoreError> {
        self.lock().pending_tickets(after, limit)
    }
    fn transcript_snapshot(
        &self,
        thread: &ThreadId,
    ) -> Result<crate::store::TranscriptSnapshotRef, StoreError> {
        self.lock().transcript_snapshot(thread)
    }
    fn verify_transcript_snapshot(
        &self,
        snapshot: &crate::store::TranscriptSnapshotRef,
    ) -> Result<(), StoreError> {
        self.lock().verify_transcript_snapshot(snapshot)
    }
    fn transcript_slice(
        &self,
        snapshot: &crate::store::TranscriptSnapshotRef,
        ranges: &[std::ops::Range<usize>],
    ) -> Result<Vec<Message>, StoreError> {
        self.lock().transcript_slice(snapshot, ranges)
    }
}

impl<S: CheckpointReader> CheckpointReader for SharedStore<S> {
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.lock().list_events(scope, from, limit)
    }
}

impl<S: ThreadClaims> ThreadClaims for SharedStore<S> {
    fn claim_thread(&mut self, request: &ClaimRequest, now_ms: u64) -> Result<Claim, StoreError> {
        self.lock().claim_thread(request, now_ms)
    }
    fn renew_claim(
        &mut self,
        claim: &Claim,
        lease_ms: u64,
        now_ms: u64,
    ) -> Result<Claim, StoreError> {
        self.lock().renew_claim(claim, lease_ms, now_ms)
    }
    fn release_claim(&mut self, claim: &Claim, now_ms: u64) -> Result<(), StoreError> {
        self.lock().release_claim(claim, now_ms)
    }
    fn thread_claim(&self, thread: &ThreadId, now_ms: u64) -> Result<Option<Claim>, StoreError> {
        self.lock().thread_claim(thread, now_ms)
    }
    fn due_work(&self, now_ms: u64, limit: usize) -> Result<Vec<DueWork>, StoreError> {
        self.lock().due_work(now_ms, limit)
    }
}

impl<S: CommitLog + CheckpointReader + ThreadClaims + Send> StoreHandles for SharedStore<S> {
    fn open_handle(&self) -> Result<Self, StoreError> {
        Ok(SharedStore(Arc::clone(&self.0)))
    }
}
