//! The stateful-agent acceptance scenarios of SPEC §11 (A1–A11), plus the step budget (§8.4),
//! `length` and `aborted` stops (§8.2) and a sweep of the misuse errors of §10.
//!
//! Every scenario drives the public API through the harness (which checks the invariants after
//! every drained output), asserts the behaviour explicitly, and only then snapshots the rendered
//! trace, so a snapshot is a reviewed picture of behaviour that is already checked.
//!
//! - [`reducer`]: A1, A2, A5 — the reducer derives the state, ignores older runs, observers.
//! - [`runs`]: A3, A4, A6, A7, A8 — busy guard, runs started on `run_end`, no shared data,
//!   malformed output, aborts.
//! - [`queues`]: A9, A10, A11, the step budget and the `length` / `aborted` / `error` stops.
//! - [`misuse`]: the §10 misuse sweep and run ids.
//! - [`support`]: the helpers they share.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod misuse;
mod queues;
mod reducer;
mod runs;
