//! One store, several owners: [`SharedStore`].
//!
//! A host often needs one backend in two places at once: a language binding's store object and
//! the durable driver running on it, the console's request handlers, the conformance suite's
//! racing handles. Each of them used to write its own `Arc<Mutex<…>>` and forward every port
//! through it by hand; this is that handle, written once.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::store::ports::{
    CheckpointReader, CommitLog, CommittedThreadView, EventRecord, EventScope, Store, StoreError,
    StoreHandles, ThreadClaims, ThreadSummary, TranscriptSnapshotRef, forward_ports,
};
use crate::store::{Claim, ClaimRequest, DueWork};
use crate::{
    CommitOperation, CommitReceipt, CommitRecord, Message, ResumeTicket, RunId, RunRecord,
    RunState, StateCommand, ThreadCommit, ThreadId,
};
use std::ops::Range;

/// The message of a store whose lock was poisoned: a panic happened while it was held.
pub const POISONED: &str = "the store is unusable: a panic happened during an earlier call on it";

/// A handle onto one store that several owners share: a clone is another handle onto the same
/// store, and every port call takes the store's lock for the length of the call.
///
/// `SharedStore` is every port its store is, so it goes wherever a store goes
/// ([`DurableDriver`](crate::host::DurableDriver), [`Agent::recover`](crate::Agent::recover),
/// [`sweep`](crate::host::sweep)). The default parameter is the boxed store a host opens from
/// a URL.
///
/// A lock poisoned by a panic during an earlier call reads as an unavailable store
/// ([`StoreError::Unavailable`], message [`POISONED`]), never as a panic.
///
/// ```
/// use runcore::{ThreadId};
/// use runcore::store::{CommittedThreadView, MemoryStore, SharedStore};
///
/// let store = SharedStore::new(MemoryStore::new());
/// let other = store.clone(); // the same store
/// assert_eq!(other.thread_version(&ThreadId::new("t")).unwrap(), 0);
/// ```
#[derive(Debug)]
pub struct SharedStore<S: ?Sized = super::BoxedStore>(Arc<Mutex<S>>);

impl<S: ?Sized> Clone for SharedStore<S> {
    fn clone(&self) -> Self {
        SharedStore(Arc::clone(&self.0))
    }
}

impl<S: Default> Default for SharedStore<S> {
    fn default() -> Self {
        SharedStore::new(S::default())
    }
}

impl<S> SharedStore<S> {
    /// Shares `store`.
    pub fn new(store: S) -> Self {
        SharedStore(Arc::new(Mutex::new(store)))
    }
}

impl SharedStore {
    /// Shares any store as the boxed store ([`Store`] + `Send`).
    pub fn boxed(store: impl Store + Send + 'static) -> Self {
        SharedStore::new(Box::new(store))
    }
}

impl<S: ?Sized> SharedStore<S> {
    /// The store, locked until the guard drops; [`StoreError::Unavailable`] when a panic
    /// poisoned the lock.
    pub fn lock(&self) -> Result<MutexGuard<'_, S>, StoreError> {
        self.0.lock().map_err(|_| StoreError::unavailable(POISONED))
    }

    /// Runs `f` on the locked store.
    pub fn with<T>(
        &self,
        f: impl FnOnce(&mut S) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        f(&mut *self.lock()?)
    }

    /// Whether `self` and `other` are handles onto the same store.
    pub fn same_store(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

forward_ports!([S] SharedStore<S>, |s| s.lock()?);

impl<S: CommitLog + CheckpointReader + ThreadClaims + Send> StoreHandles for SharedStore<S> {
    fn open_handle(&self) -> Result<Self, StoreError> {
        Ok(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn a_clone_is_the_same_store_and_a_poisoned_lock_is_unavailable() {
        let store = SharedStore::boxed(MemoryStore::new());
        let other = store.clone();
        assert!(store.same_store(&other));
        assert!(!store.same_store(&SharedStore::boxed(MemoryStore::new())));
        let thread = ThreadId::new("t");
        assert_eq!(other.thread_version(&thread), Ok(0));

        let poisoner = store.clone();
        let panicked = std::panic::catch_unwind(move || {
            let _guard = poisoner.lock();
            panic!("a panic while the store is locked");
        });
        assert!(panicked.is_err());
        match other.thread_version(&thread) {
            Err(StoreError::Unavailable { message, .. }) => assert_eq!(message, POISONED),
            unexpected => panic!("a poisoned store must be unavailable: {unexpected:?}"),
        }
    }
}
