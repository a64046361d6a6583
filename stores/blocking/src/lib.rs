//! `runcore-store-blocking`: where an async host meets runcore's blocking store ports — the
//! one crossing of the workspace (STYLE: "An async host meets a blocking port in one place").
//!
//! runcore's store ports are synchronous, and that is right for a sans-IO core. An async host
//! (the Restate worker, the operator console) must not call them on its async threads: a
//! blocking call stalls every task of that thread, and a backend whose client drives a runtime
//! of its own (the PostgreSQL client does) panics there with "Cannot start a runtime from
//! within a runtime". [`Blocking`] runs each call on tokio's blocking pool
//! ([`tokio::task::spawn_blocking`]), the way Apache `object_store`'s `maybe_spawn_blocking`
//! does for its local file system.
//!
//! A panic inside a call is caught on the blocking thread and comes back as
//! [`BlockingError::Panicked`]: the lock around the store is never poisoned, so the next call
//! (from any task) works. A store built with [`Blocking::reopening`] is also not trusted after
//! a panic: its handle is dropped and the next call opens a fresh one; if that fails, the call
//! answers the open's [`StoreError`] and the one after tries again.
//!
//! ```
//! use runcore::{ThreadId};
//! use runcore::store::{CommittedThreadView, MemoryStore};
//! use runcore_store_blocking::Blocking;
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! let store = Blocking::new(MemoryStore::new());
//! let version = runtime.block_on(store.call(|s| s.thread_version(&ThreadId::new("t1"))));
//! assert_eq!(version.unwrap().unwrap(), 0);
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::any::Any;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};

use runcore::store::StoreError;

/// Opens a fresh handle onto the same store (after a panic left the old one suspect).
type Reopen<S> = Box<dyn Fn() -> Result<S, StoreError> + Send + Sync>;

/// A blocking store shared by async tasks. Cloning is cheap (one `Arc`); every clone reaches
/// the same handle. Calls are serialized on the handle, one at a time, each on the blocking
/// pool; no lock is ever held across an `.await`.
pub struct Blocking<S> {
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    /// The handle; `None` after a panic when the store can be reopened.
    slot: Mutex<Option<S>>,
    reopen: Option<Reopen<S>>,
}

impl<S> Clone for Blocking<S> {
    fn clone(&self) -> Self {
        Blocking {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S> fmt::Debug for Blocking<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Blocking")
            .field("reopens", &self.inner.reopen.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a call on a [`Blocking`] store gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum BlockingError {
    /// The call panicked. Nothing is poisoned: the next call runs normally (on a reopened
    /// handle, for a store built with [`Blocking::reopening`]).
    #[error("a store call panicked: {0}")]
    Panicked(String),
    /// The store had to be reopened after an earlier panic, and opening it failed; the next
    /// call tries again.
    #[error("reopening the store after a failed call: {0}")]
    Reopen(#[source] StoreError),
    /// The blocking task was cancelled (the runtime is shutting down).
    #[error("a store call did not finish: the runtime is shutting down")]
    Cancelled,
    /// [`Blocking::call`] was awaited outside a tokio runtime (a synchronous caller wants
    /// [`Blocking::call_blocking`]).
    #[error("a store call was made outside a tokio runtime")]
    NoRuntime,
}

impl<S: Send + 'static> Blocking<S> {
    /// Shares `store`. After a panic the same handle is used again (the backends never leave
    /// a transaction open between calls; an unwinding transaction rolls back).
    pub fn new(store: S) -> Self {
        Blocking {
            inner: Arc::new(Inner {
                slot: Mutex::new(Some(store)),
                reopen: None,
            }),
        }
    }

    /// Shares `store`, and replaces it with `reopen()` after a call panicked, so a handle a
    /// panic may have left half-way is never used again.
    pub fn reopening(
        store: S,
        reopen: impl Fn() -> Result<S, StoreError> + Send + Sync + 'static,
    ) -> Self {
        Blocking {
            inner: Arc::new(Inner {
                slot: Mutex::new(Some(store)),
                reopen: Some(Box::new(reopen)),
            }),
        }
    }

    /// Runs `f` on the store on tokio's blocking pool and answers its result. It is the async
    /// host's crossing: outside a tokio runtime it answers [`BlockingError::NoRuntime`].
    pub async fn call<T, F>(&self, f: F) -> Result<T, BlockingError>
    where
        F: FnOnce(&mut S) -> T + Send + 'static,
        T: Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| BlockingError::NoRuntime)?;
        match runtime.spawn_blocking(move || inner.run(f)).await {
            Ok(answer) => answer,
            // `run` catches the panics of `f`; this is one of the reopen or of the lock's
            // own bookkeeping.
            Err(error) if error.is_panic() => {
                Err(BlockingError::Panicked(panic_text(&error.into_panic())))
            }
            Err(_) => Err(BlockingError::Cancelled),
        }
    }

    /// Runs `f` on the store on the calling thread (for a synchronous caller beside the async
    /// ones, such as a test reading what was committed). Never call it on an async thread.
    pub fn call_blocking<T>(&self, f: impl FnOnce(&mut S) -> T) -> Result<T, BlockingError> {
        self.inner.run(f)
    }

    /// Takes the store back when this is the last clone (to drop it outside a runtime: a
    /// backend whose client runs a runtime of its own may not be dropped inside one).
    pub fn into_inner(self) -> Option<S> {
        Arc::into_inner(self.inner).and_then(|inner| {
            inner
                .slot
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
        })
    }
}

impl<S> Inner<S> {
    fn run<T>(&self, f: impl FnOnce(&mut S) -> T) -> Result<T, BlockingError> {
        // The lock is never poisoned (a panic of `f` is caught below, with the guard held);
        // taking it over keeps that true even if a future change let one through.
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none()
            && let Some(reopen) = &self.reopen
        {
            *slot = Some(reopen().map_err(BlockingError::Reopen)?);
        }
        let Some(store) = slot.as_mut() else {
            // Only reachable without `reopen`, which never empties the slot.
            return Err(BlockingError::Panicked("the store is gone".to_owned()));
        };
        match catch_unwind(AssertUnwindSafe(|| f(store))) {
            Ok(answer) => Ok(answer),
            Err(payload) => {
                if self.reopen.is_some() {
                    // Not trusted after a panic: dropped now, reopened by the next call.
                    let suspect = slot.take();
                    // Dropping may panic too (a client in a bad state); that is not the call's
                    // answer.
                    let _ = catch_unwind(AssertUnwindSafe(move || drop(suspect)));
                }
                Err(BlockingError::Panicked(panic_text(&payload)))
            }
        }
    }
}

/// The text of a panic's payload (`panic!("…")` gives a `&str` or a `String`).
fn panic_text(payload: &Box<dyn Any + Send>) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    #[test]
    fn calls_run_off_the_async_thread() {
        let rt = runtime();
        let store = Blocking::new(0u32);
        let caller = std::thread::current().id();
        let ran_on = rt
            .block_on(store.call(|_| std::thread::current().id()))
            .unwrap();
        assert_ne!(ran_on, caller);
    }

    #[test]
    fn a_panic_is_an_error_and_the_next_call_works() {
        let rt = runtime();
        let store = Blocking::new(vec![1u32]);
        let error = rt
            .block_on(store.call(|s: &mut Vec<u32>| -> usize { panic!("boom {}", s.len()) }))
            .unwrap_err();
        assert!(
            matches!(&error, BlockingError::Panicked(text) if text == "boom 1"),
            "{error}"
        );
        let after = rt.block_on(store.call(|s| {
            s.push(2);
            s.clone()
        }));
        assert_eq!(after.unwrap(), vec![1, 2]);
        assert!(!store.inner.slot.is_poisoned());
    }

    #[test]
    fn a_reopening_store_is_replaced_after_a_panic_and_a_failed_reopen_is_retried() {
        let rt = runtime();
        let opened = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&opened);
        let store = Blocking::reopening(100usize, move || {
            match counter.fetch_add(1, Ordering::SeqCst) {
                0 => Err(StoreError::unavailable("the server is down")),
                n => Ok(n),
            }
        });
        let error = rt
            .block_on(store.call(|_| -> () { panic!("half-way") }))
            .unwrap_err();
        assert!(matches!(error, BlockingError::Panicked(_)), "{error}");
        let error = rt.block_on(store.call(|s| *s)).unwrap_err();
        assert!(
            matches!(&error, BlockingError::Reopen(_)) && error.to_string().contains("down"),
            "{error}"
        );
        assert_eq!(rt.block_on(store.call(|s| *s)).unwrap(), 1);
        assert_eq!(opened.load(Ordering::SeqCst), 2);
        assert_eq!(store.call_blocking(|s| *s).unwrap(), 1);
    }

    #[test]
    fn a_call_outside_a_runtime_is_an_error_not_a_panic() {
        let store = Blocking::new(1u8);
        // A future polled by hand, with no runtime around it.
        let waker = std::task::Waker::noop();
        let mut context = std::task::Context::from_waker(waker);
        let mut call = std::pin::pin!(store.call(|s| *s));
        match call.as_mut().poll(&mut context) {
            std::task::Poll::Ready(Err(BlockingError::NoRuntime)) => {}
            other => panic!("expected NoRuntime, got {other:?}"),
        }
    }

    #[test]
    fn the_last_clone_gives_the_store_back() {
        let store = Blocking::new(7u8);
        let other = store.clone();
        assert!(store.into_inner().is_none());
        assert_eq!(other.into_inner(), Some(7));
    }
}
