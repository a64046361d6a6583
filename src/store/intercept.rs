//! A store that wraps another and changes a few of its answers: [`Intercept`] and
//! [`Intercepted`].
//!
//! A host that counts commits, logs slow reads or injects a failure in a test wants one or two
//! port methods of its own and the store's for the rest. Forwarding the other twenty by hand is
//! where such wrappers go wrong (a new port method forwarded nowhere, a read forwarded to the
//! wrong method); here every method forwards by default and a wrapper writes only what it
//! changes.
//!
//! ```
//! use runcore::{CommitOperation, CommitReceipt};
//! use runcore::store::{CommitLog, Intercept, Intercepted, MemoryStore, StoreError};
//!
//! /// Refuses every commit once `down` is set, as a store whose disk is gone would.
//! struct Flaky {
//!     store: MemoryStore,
//!     down: bool,
//! }
//!
//! impl Intercept for Flaky {
//!     type Inner = MemoryStore;
//!     fn inner(&self) -> &MemoryStore {
//!         &self.store
//!     }
//!     fn inner_mut(&mut self) -> &mut MemoryStore {
//!         &mut self.store
//!     }
//!     fn commit_operation(
//!         &mut self,
//!         operation: CommitOperation,
//!     ) -> Result<CommitReceipt, StoreError> {
//!         if self.down {
//!             return Err(StoreError::unavailable("the disk is gone"));
//!         }
//!         self.store.commit_operation(operation)
//!     }
//! }
//!
//! // `Intercepted(Flaky { .. })` is every port a `MemoryStore` is.
//! let store = Intercepted(Flaky { store: MemoryStore::new(), down: true });
//! let _ = store;
//! ```

use std::ops::Range;

use crate::store::ports::{
    CheckpointReader, CommitLog, CommittedThreadView, EventRecord, EventScope, StoreError,
    StoreHandles, ThreadAsOf, ThreadClaims, ThreadSummary, TranscriptSnapshotRef,
};
use crate::store::{Claim, ClaimRequest, DueWork};
use crate::{
    CommitOperation, CommitReceipt, CommitRecord, Message, ResumeTicket, RunId, RunRecord,
    RunState, StateCommand, ThreadCommit, ThreadId,
};

/// A wrapper around a store: every port method of [`Intercepted<Self>`] calls the method of the
/// same name here, which forwards to [`inner`](Intercept::inner) unless the wrapper overrides
/// it. A method is there when the inner store has its port.
pub trait Intercept {
    /// The wrapped store.
    type Inner: ?Sized;
    /// The wrapped store, for reads.
    fn inner(&self) -> &Self::Inner;
    /// The wrapped store, for writes.
    fn inner_mut(&mut self) -> &mut Self::Inner;

    /// [`CommitLog::commit`].
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError>
    where
        Self::Inner: CommitLog,
    {
        self.inner_mut().commit(commit)
    }
    /// [`CommitLog::commit_operation`].
    fn commit_operation(&mut self, operation: CommitOperation) -> Result<CommitReceipt, StoreError>
    where
        Self::Inner: CommitLog,
    {
        self.inner_mut().commit_operation(operation)
    }

    /// [`ThreadClaims::claim_thread`].
    fn claim_thread(&mut self, request: &ClaimRequest, now_ms: u64) -> Result<Claim, StoreError>
    where
        Self::Inner: ThreadClaims,
    {
        self.inner_mut().claim_thread(request, now_ms)
    }
    /// [`ThreadClaims::renew_claim`].
    fn renew_claim(
        &mut self,
        claim: &Claim,
        lease_ms: u64,
        now_ms: u64,
    ) -> Result<Claim, StoreError>
    where
        Self::Inner: ThreadClaims,
    {
        self.inner_mut().renew_claim(claim, lease_ms, now_ms)
    }
    /// [`ThreadClaims::release_claim`].
    fn release_claim(&mut self, claim: &Claim, now_ms: u64) -> Result<(), StoreError>
    where
        Self::Inner: ThreadClaims,
    {
        self.inner_mut().release_claim(claim, now_ms)
    }
    /// [`ThreadClaims::thread_claim`].
    fn thread_claim(&self, thread: &ThreadId, now_ms: u64) -> Result<Option<Claim>, StoreError>
    where
        Self::Inner: ThreadClaims,
    {
        self.inner().thread_claim(thread, now_ms)
    }
    /// [`ThreadClaims::due_work`].
    fn due_work(&self, now_ms: u64, limit: usize) -> Result<Vec<DueWork>, StoreError>
    where
        Self::Inner: ThreadClaims,
    {
        self.inner().due_work(now_ms, limit)
    }

    /// [`CommittedThreadView::committed_messages`].
    fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().committed_messages(thread)
    }
    /// [`CommittedThreadView::run`].
    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().run(run)
    }
    /// [`CommittedThreadView::latest_run`].
    fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().latest_run(thread)
    }
    /// [`CommittedThreadView::resume_ticket`].
    fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().resume_ticket(run)
    }
    /// [`CommittedThreadView::run_state`].
    fn run_state(&self, run: &RunId) -> Result<Option<RunState>, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().run_state(run)
    }
    /// [`CommittedThreadView::committed_state`].
    fn committed_state(&self, thread: &ThreadId) -> Result<Vec<StateCommand>, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().committed_state(thread)
    }
    /// [`CommittedThreadView::thread_version`].
    fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().thread_version(thread)
    }
    /// [`CommittedThreadView::thread_as_of`].
    fn thread_as_of(
        &self,
        thread: &ThreadId,
        version: u64,
    ) -> Result<Option<ThreadAsOf>, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().thread_as_of(thread, version)
    }
    /// [`CommittedThreadView::threads`].
    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().threads(after, limit)
    }
    /// [`CommittedThreadView::pending_tickets`].
    fn pending_tickets(
        &self,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<Vec<ResumeTicket>, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().pending_tickets(after, limit)
    }
    /// [`CommittedThreadView::transcript_snapshot`].
    fn transcript_snapshot(&self, thread: &ThreadId) -> Result<TranscriptSnapshotRef, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().transcript_snapshot(thread)
    }
    /// [`CommittedThreadView::verify_transcript_snapshot`].
    fn verify_transcript_snapshot(&self, snapshot: &TranscriptSnapshotRef) -> Result<(), StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().verify_transcript_snapshot(snapshot)
    }
    /// [`CommittedThreadView::transcript_slice`].
    fn transcript_slice(
        &self,
        snapshot: &TranscriptSnapshotRef,
        ranges: &[Range<usize>],
    ) -> Result<Vec<Message>, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.inner().transcript_slice(snapshot, ranges)
    }

    /// [`CheckpointReader::list_events`].
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError>
    where
        Self::Inner: CheckpointReader,
    {
        self.inner().list_events(scope, from, limit)
    }
}

/// The store an [`Intercept`] wrapper makes: every port its inner store has, each through the
/// wrapper's method of the same name.
#[derive(Debug, Default, Clone)]
pub struct Intercepted<W>(pub W);

impl<W: Intercept> CommitLog for Intercepted<W>
where
    W::Inner: CommitLog,
{
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        self.0.commit(commit)
    }
    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        self.0.commit_operation(operation)
    }
}

impl<W: Intercept> ThreadClaims for Intercepted<W>
where
    W::Inner: ThreadClaims,
{
    fn claim_thread(&mut self, request: &ClaimRequest, now_ms: u64) -> Result<Claim, StoreError> {
        self.0.claim_thread(request, now_ms)
    }
    fn renew_claim(
        &mut self,
        claim: &Claim,
        lease_ms: u64,
        now_ms: u64,
    ) -> Result<Claim, StoreError> {
        self.0.renew_claim(claim, lease_ms, now_ms)
    }
    fn release_claim(&mut self, claim: &Claim, now_ms: u64) -> Result<(), StoreError> {
        self.0.release_claim(claim, now_ms)
    }
    fn thread_claim(&self, thread: &ThreadId, now_ms: u64) -> Result<Option<Claim>, StoreError> {
        self.0.thread_claim(thread, now_ms)
    }
    fn due_work(&self, now_ms: u64, limit: usize) -> Result<Vec<DueWork>, StoreError> {
        self.0.due_work(now_ms, limit)
    }
}

impl<W: Intercept> CommittedThreadView for Intercepted<W>
where
    W::Inner: CommittedThreadView,
{
    fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError> {
        self.0.committed_messages(thread)
    }
    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.0.run(run)
    }
    fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError> {
        self.0.latest_run(thread)
    }
    fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError> {
        self.0.resume_ticket(run)
    }
    fn run_state(&self, run: &RunId) -> Result<Option<RunState>, StoreError> {
        self.0.run_state(run)
    }
    fn committed_state(&self, thread: &ThreadId) -> Result<Vec<StateCommand>, StoreError> {
        self.0.committed_state(thread)
    }
    fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        self.0.thread_version(thread)
    }
    fn thread_as_of(
        &self,
        thread: &ThreadId,
        version: u64,
    ) -> Result<Option<ThreadAsOf>, StoreError> {
        self.0.thread_as_of(thread, version)
    }
    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        self.0.threads(after, limit)
    }
    fn pending_tickets(
        &self,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<Vec<ResumeTicket>, StoreError> {
        self.0.pending_tickets(after, limit)
    }
    fn transcript_snapshot(&self, thread: &ThreadId) -> Result<TranscriptSnapshotRef, StoreError> {
        self.0.transcript_snapshot(thread)
    }
    fn verify_transcript_snapshot(
        &self,
        snapshot: &TranscriptSnapshotRef,
    ) -> Result<(), StoreError> {
        self.0.verify_transcript_snapshot(snapshot)
    }
    fn transcript_slice(
        &self,
        snapshot: &TranscriptSnapshotRef,
        ranges: &[Range<usize>],
    ) -> Result<Vec<Message>, StoreError> {
        self.0.transcript_slice(snapshot, ranges)
    }
}

impl<W: Intercept> CheckpointReader for Intercepted<W>
where
    W::Inner: CheckpointReader,
{
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.0.list_events(scope, from, limit)
    }
}

/// An [`Intercept`] wrapper that can open another handle onto its store's log (a new
/// connection under a wrapper of the same kind). With it, [`Intercepted<Self>`] is a
/// [`StoreHandles`] store, which the durable driver and the claims kit need for a second
/// writer, a sweep or a reader beside the owner.
pub trait InterceptHandles: Intercept + Sized {
    /// A wrapper like this one over another handle onto the same log; the inner store's
    /// [`StoreHandles::open_handle`] gives that handle.
    fn open_handle(&self) -> Result<Self, StoreError>;
}

impl<W> StoreHandles for Intercepted<W>
where
    W: InterceptHandles + Send,
    W::Inner: CommitLog + CheckpointReader + ThreadClaims,
{
    fn open_handle(&self) -> Result<Self, StoreError> {
        self.0.open_handle().map(Intercepted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunDisposition;
    use crate::store::MemoryStore;
    use std::cell::Cell;

    /// Counts reads of the run record, refuses commits on demand, forwards the rest.
    struct Probe {
        store: MemoryStore,
        refuse: bool,
        runs_read: Cell<usize>,
    }

    impl Intercept for Probe {
        type Inner = MemoryStore;
        fn inner(&self) -> &MemoryStore {
            &self.store
        }
        fn inner_mut(&mut self) -> &mut MemoryStore {
            &mut self.store
        }
        fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
            if self.refuse {
                return Err(StoreError::unavailable("refused"));
            }
            self.store.commit(commit)
        }
        fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
            self.runs_read.set(self.runs_read.get() + 1);
            self.store.run(run)
        }
    }

    fn commit(run: &str) -> ThreadCommit {
        ThreadCommit::assemble(
            ThreadId::new("t"),
            RunDisposition::Running {
                run_id: RunId::new(run),
            },
            true,
            vec![Message::user("hi")],
            Vec::new(),
            Vec::new(),
        )
    }

    #[test]
    fn overridden_methods_change_what_they_change_and_the_rest_forwards() {
        let mut store = Intercepted(Probe {
            store: MemoryStore::new(),
            refuse: true,
            runs_read: Cell::new(0),
        });
        assert!(matches!(
            store.commit(commit("t/run-1")),
            Err(StoreError::Unavailable { .. })
        ));
        assert_eq!(store.thread_version(&ThreadId::new("t")).unwrap(), 0);
        store.0.refuse = false;
        store.commit(commit("t/run-1")).unwrap();
        // Not overridden: forwarded.
        assert_eq!(store.thread_version(&ThreadId::new("t")).unwrap(), 1);
        assert_eq!(
            store.committed_messages(&ThreadId::new("t")).unwrap().len(),
            1
        );
        assert_eq!(
            store.latest_run(&ThreadId::new("t")).unwrap().map(|r| r.id),
            Some(RunId::new("t/run-1"))
        );
        assert_eq!(store.0.runs_read.get(), 0);
        // Overridden: counted, then forwarded.
        assert!(store.run(&RunId::new("t/run-1")).unwrap().is_some());
        assert_eq!(store.0.runs_read.get(), 1);
    }

    /// A wrapper that tags each handle with how many handles opened before it.
    struct Numbered {
        store: crate::store::SharedStore<MemoryStore>,
        number: usize,
        opened: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Intercept for Numbered {
        type Inner = crate::store::SharedStore<MemoryStore>;
        fn inner(&self) -> &Self::Inner {
            &self.store
        }
        fn inner_mut(&mut self) -> &mut Self::Inner {
            &mut self.store
        }
    }

    impl InterceptHandles for Numbered {
        fn open_handle(&self) -> Result<Self, StoreError> {
            let before = self
                .opened
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Numbered {
                store: self.store.open_handle()?,
                number: before + 1,
                opened: std::sync::Arc::clone(&self.opened),
            })
        }
    }

    #[test]
    fn a_wrapper_with_handles_opens_handles_onto_the_same_log() {
        let mut first = Intercepted(Numbered {
            store: crate::store::SharedStore::new(MemoryStore::new()),
            number: 0,
            opened: std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        });
        let second = first.open_handle().unwrap();
        assert_eq!(second.0.number, 1);
        first.commit(commit("t/run-1")).unwrap();
        // The second handle reads what the first committed: one log under both wrappers.
        assert_eq!(second.thread_version(&ThreadId::new("t")).unwrap(), 1);
        assert_eq!(first.open_handle().unwrap().0.number, 2);
    }
}
