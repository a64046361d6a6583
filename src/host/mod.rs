//! Host operations: what a host does with a store, written once here so every host (the
//! `runcore` binary, the console, the Python and Node packages, the Restate worker) does it
//! the same way.
//!
//! - [`ClaimedSession`]: claim a thread, recover it, commit under the claim, release (SPEC
//!   §7.2); a live claim of another owner is [`ClaimHeld`] everywhere.
//! - [`answer_permission`]: a person answers a pending approval (SPEC §12.5).
//! - [`sweep`] and [`act_under_claim`]: due work handled with no process holding the thread
//!   (SPEC §7.3, §12.4).
//! - [`DurableDriver`]: the JSON-lines driver persisting every commit before its line (SPEC
//!   §12.2).
//! - [`fork_thread`]: a new thread from another one's committed transcript as of a version
//!   (SPEC §8.10).
//! - [`script`]: the scripted host behind the tests, the demo and the benchmarks.
//!
//! Each takes the host's clock as an argument (`now_ms`); the core never reads one.

mod answer;
mod durable;
mod fork;
pub mod script;
mod session;
mod sweep;

pub use crate::agent::history::ForkOrigin;
pub use answer::{AnswerError, Answered, DECIDED_BY, answer_permission};
pub use durable::{
    DurableDriver, DurableLines, DurableOptions, DurableStartError, SessionEnded, store_error_line,
};
pub use fork::{ForkError, Forked, fork_thread, forked_from};
pub use session::{
    ClaimHeld, ClaimOptions, ClaimedAct, ClaimedSession, OpenError, commit_operation_for,
};
pub use sweep::{
    ActError, SEALED_REASON, SweepAction, SweepItem, SweepOptions, act_under_claim, sweep,
};
