//! The commit log and its read ports (SPEC §7).
//!
//! A coordinator ([`CommitLog`]) accepts or rejects one
//! [`ThreadCommit`](crate::ThreadCommit) atomically; readers see committed facts only, through
//! [`CommittedThreadView`] and
//! [`CheckpointReader`]. The crate ships an in-memory reference
//! coordinator, [`MemoryStore`]; the backend-agnostic conformance suite that any host backend
//! can run against its own implementation is its own module, `runcore::conformance` (feature
//! `conformance`).
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
//! carries a chained digest of that prefix ([the transcript digest](transcript_digest)),
//! so a backend can later prove the prefix is still there, unchanged, without keeping a copy.
//!
//! # Who reads this module
//!
//! Backend authors: the ports a backend implements, the in-memory reference [`MemoryStore`],
//! the test seam [`Intercept`], the admission rule every backend applies ([`admit`] and its
//! types), the claim decisions ([`decide_claim`] and the checks beside it), the digests and
//! the payload hash ([`canonical_json`], [`sha256_hex`]). A host that only embeds the agent uses the ports
//! through a backend crate and the operations of [`crate::host`].

pub(crate) mod admission;
pub(crate) mod claims;
pub(crate) mod intercept;
pub(crate) mod memory;
pub(crate) mod ports;
pub(crate) mod shared;

pub use crate::canonical::canonical_json;
pub use crate::commit::ClaimToken;
pub use crate::hash::sha256_hex;
pub use admission::{
    Admission, AppendPlan, CommitHead, RunHead, StoreSequences, admit, admit_commit,
};
pub use claims::{
    Claim, ClaimGrant, ClaimRecord, ClaimRequest, DueReason, DueWork, MAX_CLAIM_ID_BYTES,
    MAX_LEASE_MS, check_claim_request, check_commit_claim, check_lease, check_token, decide_claim,
    decide_release, decide_renew, due_order,
};
pub use intercept::{Intercept, InterceptHandles, Intercepted};
pub use memory::MemoryStore;
pub(crate) use ports::slice_ranges;
pub use ports::{
    BoxedStore, CheckpointReader, CommitLog, CommittedThreadView, EventRecord, EventScope, Store,
    StoreError, StoreHandles, ThreadAsOf, ThreadClaims, ThreadSummary, TranscriptError,
    TranscriptSnapshotRef, chain_digest, check_pin, check_ranges, transcript_digest,
};
pub use shared::{POISONED, SharedStore};
