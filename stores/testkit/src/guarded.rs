//! [`Guarded`]: a store that keeps a resource alive (a temporary directory, a scratch
//! database) for as long as it or any handle opened from it lives.

use std::sync::Arc;

use runcore::store::{Intercept, InterceptHandles, Intercepted, StoreError, StoreHandles};

/// A store plus a guard that is dropped after the last handle: e.g.
/// `runcore::conformance_tests!(|| guarded(open_in(&dir), dir))` keeps each case's
/// temporary directory until the case and every handle it opened are done, then removes it.
///
/// It overrides nothing: as an [`Intercept`] wrapper, every port of [`Intercepted<Guarded>`]
/// is the store's, unchanged. [`guarded`] builds one.
#[derive(Debug)]
pub struct Guarded<S, G> {
    // Declared first so it is dropped first: the store closes before the guard goes.
    store: S,
    guard: Arc<G>,
}

/// Wraps `store`, keeping `guard` alive with it and with every handle opened from it.
pub fn guarded<S, G>(store: S, guard: G) -> Intercepted<Guarded<S, G>> {
    Intercepted(Guarded {
        store,
        guard: Arc::new(guard),
    })
}

impl<S, G> Guarded<S, G> {
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

impl<S, G> Intercept for Guarded<S, G> {
    type Inner = S;
    fn inner(&self) -> &S {
        &self.store
    }
    fn inner_mut(&mut self) -> &mut S {
        &mut self.store
    }
}

impl<S: StoreHandles, G: Send + Sync> InterceptHandles for Guarded<S, G> {
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
    use runcore::store::MemoryStore;
    use runcore::store::SharedStore;

    struct Flag(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn the_guard_outlives_every_handle_and_the_suite_passes_through() {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let store = guarded(
            SharedStore::new(MemoryStore::new()),
            Flag(Arc::clone(&dropped)),
        );
        let handle = store.open_handle().unwrap();
        drop(store);
        assert!(!dropped.load(std::sync::atomic::Ordering::SeqCst));
        drop(handle);
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
        let results =
            runcore::conformance::run_all(|| guarded(SharedStore::new(MemoryStore::new()), ()));
        for (case, result) in results {
            assert_eq!(result, Ok(()), "{case}");
        }
    }
}
