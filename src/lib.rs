//! runcore: the deterministic core of AI agent runs.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod commit;
pub mod error;
mod hash;
pub mod ids;
pub mod message;
pub mod resume;
pub mod run;
mod schema_via;
pub mod state;
pub mod store;

pub use commit::*;
pub use error::AgentError;
pub use hash::{canonical_json, sha256_hex};
pub use ids::*;
pub use message::*;
pub use resume::*;
pub use run::*;
pub use state::*;
pub use store::{
    CheckpointReader, CommitLog, CommittedThreadView, EventRecord, EventScope, MemoryStore,
    TranscriptError, TranscriptSnapshotRef,
};
pub mod agent;
pub use agent::*;
