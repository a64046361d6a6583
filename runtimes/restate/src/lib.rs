//! # runcore-restate — runcore inside Restate
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod host;
mod object;
pub mod script;
mod store;
mod wire;

pub use host::{Model, ModelCall, StepError, StepFuture, ThreadStore, Tools};
pub use object::{ThreadHost, ThreadObject};
pub use store::{OpenStoreError, SharedStore, open_store, shared};
pub use wire::{ResumeRequest, RunEnd, ThreadView, agent_error_body};
