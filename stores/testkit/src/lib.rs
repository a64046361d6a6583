//! Test support shared by runcore's store backends (`runcore-sqlite`, `runcore-postgres`).
//!
//! - [`session`]: a deterministic scripted agent session (several prompts, multi-tool
//!   batches, text deltas, a steer, a follow-up, an approval allowed and one denied, a model
//!   failure, a run that spends its step budget) and the host loop [`session::drive`] that
//!   commits every agent commit with `commit_operation` before acting on what follows
//!   ([`session::commit_output`]).
//! - [`crash`] (Unix): real crash tests. A child process runs the session and is killed with
//!   `SIGKILL` at pseudo-random points; after every kill the parent checks the store
//!   ([`crash::verify_after_kill`]), and finally continues the session with
//!   `Agent::recover` and compares it with an uncrashed run ([`crash::finish_with_recover`]).
//! - [`compaction`]: a compacted thread written to the backend and recovered from it with the
//!   same model context (SPEC §8.9).
//! - [`Guarded`] (built by [`guarded`]): a store wrapper that keeps a guard (such as a `tempfile::TempDir`, removed
//!   on drop) alive for as long as any handle of the store lives (so
//!   `runcore::conformance_tests!` can run against a real file per case).
//!
//! # How a backend uses it
//!
//! Add it as a dev-dependency (`runcore-store-testkit = { path = "../testkit" }`, and
//! `tempfile` for the directories), then in `tests/crash.rs`:
//!
//! ```ignore
//! use runcore_store_testkit::crash::{CrashTest, child_main};
//! use tempfile::TempDir;
//!
//! /// The child process: does nothing unless the parent started it.
//! #[test]
//! #[ignore = "the child of `commits_survive_sigkill`; the parent starts it"]
//! fn crash_child() {
//!     child_main(|location| my_backend::Store::open(location));
//! }
//!
//! #[test]
//! fn commits_survive_sigkill() {
//!     let dir = TempDir::with_prefix("my-backend-crash-").unwrap();
//!     let report = CrashTest::new("crash_child")
//!         .run(
//!             |cycle| dir.path().join(format!("cycle-{cycle}.db")).display().to_string(),
//!             |location| my_backend::Store::open(location),
//!         )
//!         .unwrap_or_else(|e| panic!("{e}"));
//!     assert!(report.kills >= 20);
//! }
//! ```
//!
//! A location is any string the backend's `open` understands (a file path, a database or
//! schema name); the parent picks a fresh one per cycle and the child gets it through the
//! environment variable [`crash::CHILD_ENV`]. `RUNCORE_CRASH_KILLS=N` makes a long run;
//! `RUNCORE_CRASH_SEED=S` replays a seed the test printed.
//!
//! And in `tests/conformance.rs`, one store per case in its own temporary directory:
//!
//! ```ignore
//! use runcore_store_testkit::guarded;
//! use tempfile::TempDir;
//!
//! runcore::conformance_tests!(|| {
//!     let dir = TempDir::with_prefix("my-backend-conformance-").unwrap();
//!     let store = my_backend::Store::open(dir.path().join("store.db")).unwrap();
//!     guarded(store, dir)
//! });
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod compaction;
#[cfg(unix)]
pub mod crash;
mod guarded;
pub mod session;

pub use guarded::{Guarded, guarded};
pub use session::KitError;
