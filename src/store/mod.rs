//! The commit log and its read ports (SPEC §7).
//!
//! A coordinator ([`CommitLog`]) accepts or rejects one
//! [`ThreadCommit`](crate::ThreadCommit) atomically; readers see committed facts only, through
//! [`CommittedThreadView`] and
//! [`CheckpointReader`]. The crate ships an in-memory reference
//! coordinator, [`MemoryStore`](crate::MemoryStore), and a backend-agnostic conformance suite
//! that any host backend can run against its own implementation.
//!
//! # Fallible reads and writes (SPEC §7.1)
//!
//! Every port returns `Result<_, StoreError>`. [`StoreError`] keeps apart
//! what the *contract* rejected (`Rejected` with a [`CommitError`](crate::CommitError),
//! `Transcript` with a [`TranscriptError`]) from what the *backend*
//! failed to do (`Unavailable`, with the backend's own error as its `source`). A host retries
//! or reconnects on `Unavailable`; it never retries a rejection. `MemoryStore` never fails.
//!
//! Transcript snapshots pin a committed prefix of a thread's append-only transcript. A pin
//! carries a chained digest of that prefix ([the transcript digest](crate::transcript_digest)),
//! so a backend can later prove the prefix is still there, unchanged, without keeping a copy.
//!
//! # Where the names live
//!
//! The ports, `MemoryStore`, `StoreError` and the rest are reached at the crate root only
//! (`runcore::CommitLog`, …). This module is public for one thing: the backend conformance
//! suite at `runcore::store::conformance`, which exists with the `conformance` feature (a
//! backend crate turns it on in its dev-dependencies). Without that feature the module is
//! private.

pub(crate) mod admission;
pub(crate) mod claims;
pub(crate) mod intercept;
pub(crate) mod memory;
pub(crate) mod ports;
pub(crate) mod shared;

#[cfg(feature = "conformance")]
pub mod conformance;

pub(crate) use ports::{
    CheckpointReader, CommitLog, CommittedThreadView, EventRecord, EventScope, StoreError,
    ThreadAsOf, ThreadClaims, ThreadSummary, TranscriptError, TranscriptSnapshotRef, check_ranges,
    slice_ranges,
};
#[cfg(feature = "conformance")]
use ports::{StoreHandles, transcript_digest};
