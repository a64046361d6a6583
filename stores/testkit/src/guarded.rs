//! [`Guarded`]: a store that keeps a resource alive (a temporary directory, a scratch
//! database) for as long as it or any handle opened from it lives.

use std::ops::Range;
use std::sync::Arc;

use runcore::{
    CheckpointReader, Claim, ClaimRequest, CommitLog, CommitOperation, CommitReceipt, CommitRecord,
    CommittedThreadView, DueWork, EventRecord, EventScope, Message, ResumeTicket, RunId, RunRecord,
    StateCommand, StoreError, StoreHandles, ThreadClaims, ThreadCommit, ThreadId, ThreadSummary,
    TranscriptSnapshotRef,
};

/// A store plus a guard that is dropped after the last handle: e.g.
/// `runcore::conformance_tests!(|| Guarded::new(open_in(&dir), dir))` keeps each case's
/// temporary directory until the case and every handle it opened are done, then removes it.
/// Every port is delegated unchanged.
#[derive(Debug)]
pub struct Guarded<S, G> {
    // Declared first so it is dropped first: the store closes before the guard goes.
    store: S,
    guard: Arc<G>,
}

impl<S, G> Guarded<S, G> {
    /// Wraps `store`, keeping `guard` alive with it.
    pub fn new(store: S, guard: G) -> Self {
        Guarded {
            store,
            guard: Arc::new(guard),
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The store, mutably.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// The guard.
    pub fn guard(&self) -> &G {
        &self.guard
    }
}

impl<S: CommitLog, G> CommitLog for Guarded<S, G> {
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        self.store.commit(commit)
    }

    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        self.store.commit_operation(operation)
    }
}

impl<S: ThreadClaims, G> ThreadClaims for Guarded<S, G> {
    fn claim_thread(&mut self, request: &ClaimRequest, now_ms: u64) -> Result<Claim, StoreError> {
        self.store.claim_thread(request, now_ms)
    }
    fn renew_claim(
        &mut self,
        claim: &Claim,
        lease_ms: u64,
        now_ms: u64,
    ) -> Result<Claim, StoreError> {
        self.store.renew_claim(claim, lease_ms, now_ms)
    }
    fn release_claim(&mut self, claim: &Claim, now_ms: u64) -> Result<(), StoreError> {
        self.store.release_claim(claim, now_ms)
    }
    fn thread_claim(&self, thread: &ThreadId, now_ms: u64) -> Result<Option<Claim>, StoreError> {
        self.store.thread_claim(thread, now_ms)
    }
    fn due_work(&self, now_ms: u64, limit: usize) -> Result<Vec<DueWork>, StoreError> {
        self.store.due_work(now_ms, limit)
    }
}

impl<S: CommittedThreadView, G> CommittedThreadView for Guarded<S, G> {
    fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError> {
        self.store.committed_messages(thread)
    }
    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.store.run(run)
    }
    fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError> {
        self.store.latest_run(thread)
    }
    fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError> {
        self.store.resume_ticket(run)
    }
    fn run_state(&self, run: &RunId) -> Result<Option<runcore::RunState>, StoreError> {
        self.store.run_state(run)
    }
    fn committed_state(&self, thread: &ThreadId) -> Result<Vec<StateCommand>, StoreError> {
        self.store.committed_state(thread)
    }
    fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        self.store.thread_version(thread)
    }
    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        self.store.threads(after, limit)
    }
    fn pending_tickets(
        &self,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<Vec<ResumeTicket>, StoreError> {
        self.store.pending_tickets(after, limit)
    }
    fn transcript_snapshot(&self, thread: &ThreadId) -> Result<TranscriptSnapshotRef, StoreError> {
        self.store.transcript_snapshot(thread)
    }
    fn verify_transcript_snapshot(
        &self,
        snapshot: &TranscriptSnapshotRef,
    ) -> Result<(), StoreError> {
        self.store.verify_transcript_snapshot(snapshot)
    }
    fn transcript_slice(
        &self,
        snapshot: &TranscriptSnapshotRef,
        ranges: &[Range<usize>],
    ) -> Result<Vec<Message>, StoreError> {
        self.store.transcript_slice(snapshot, ranges)
    }
}

impl<S: CheckpointReader, G> CheckpointReader for Guarded<S, G> {
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.store.list_events(scope, from, limit)
    }
}

impl<S: StoreHandles, G: Send + Sync> StoreHandles for Guarded<S, G> {
    fn open_handle(&self) -> Result<Self, StoreError> {
        Ok(Guarded {
            store: self.store.open_handle()?,
            guard: Arc::clone(&self.guard),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runcore::MemoryStore;
    use runcore::SharedStore;

    struct Flag(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn the_guard_outlives_every_handle_and_the_suite_passes_through() {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let store = Guarded::new(
            SharedStore::new(MemoryStore::new()),
            Flag(Arc::clone(&dropped)),
        );
        let handle = store.open_handle().unwrap();
        drop(store);
        assert!(!dropped.load(std::sync::atomic::Ordering::SeqCst));
        drop(handle);
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
        let results = runcore::store::conformance::run_all(|| {
            Guarded::new(SharedStore::new(MemoryStore::new()), ())
        });
        for (case, result) in results {
            assert_eq!(result, Ok(()), "{case}");
        }
    }
}
