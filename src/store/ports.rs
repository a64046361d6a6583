//! The ports themselves: [`CommitLog`], [`CommittedThreadView`], [`CheckpointReader`],
//! [`StoreHandles`], what they read and return, [`StoreError`], and the transcript digest.
//! Everything here is re-exported at the crate root, its one public path.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::canonical_json_bytes;
use crate::commit::{CommitError, CommitOperation, CommitReceipt, CommitRecord, ThreadCommit};
use crate::hash::sha256_hex_of_parts;
use crate::ids::{RunId, ThreadId};
use crate::message::Message;
use crate::resume::ResumeTicket;
use crate::run::{RunRecord, RunState};
use crate::state::StateCommand;
use crate::store::claims::{Claim, ClaimRequest, DueWork};

/// Why a store call failed: the contract rejected it, or the backend could not do it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The commit log's contract rejected the commit (SPEC §7, §7.1); nothing was written.
    #[error(transparent)]
    Rejected(#[from] CommitError),
    /// A transcript snapshot could not be sliced or verified.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// The backend failed (I/O, connection, corruption, a schema it cannot read). For a
    /// commit, nothing of it was written: a backend commits in one transaction.
    #[error("the store is unavailable: {message}")]
    Unavailable {
        /// What failed, for people.
        message: String,
        /// The backend's own error, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
}

impl StoreError {
    /// A backend failure with a message and no source.
    pub fn unavailable(message: impl Into<String>) -> Self {
        StoreError::Unavailable {
            message: message.into(),
            source: None,
        }
    }

    /// A backend failure wrapping the backend's error.
    pub fn backend(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Unavailable {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The contract rejection, when this is one.
    pub fn rejection(&self) -> Option<&CommitError> {
        match self {
            StoreError::Rejected(error) => Some(error),
            _ => None,
        }
    }

    /// A stable code: the [`CommitError::code`] of a rejection, `"transcript"` or
    /// `"unavailable"`.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Rejected(error) => error.code(),
            StoreError::Transcript(_) => "transcript",
            StoreError::Unavailable { .. } => "unavailable",
        }
    }
}

/// Rejections compare by value; backend failures compare by message (their sources are
/// opaque).
impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (StoreError::Rejected(a), StoreError::Rejected(b)) => a == b,
            (StoreError::Transcript(a), StoreError::Transcript(b)) => a == b,
            (
                StoreError::Unavailable { message: a, .. },
                StoreError::Unavailable { message: b, .. },
            ) => a == b,
            _ => false,
        }
    }
}

impl PartialEq<CommitError> for StoreError {
    fn eq(&self, other: &CommitError) -> bool {
        self.rejection() == Some(other)
    }
}

/// The write side: one commit, accepted or rejected atomically.
pub trait CommitLog {
    /// Validates and appends `commit` (SPEC §7 steps 1–5). A rejected commit leaves no trace.
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError>;

    /// An idempotent, fenced commit (SPEC §7.1): a retry of the same operation with the same
    /// payload hash returns the stored receipt with `duplicate = true` and appends nothing; a
    /// writer whose `expected_thread_version` is stale gets `VersionConflict` and writes
    /// nothing.
    fn commit_operation(&mut self, operation: CommitOperation)
    -> Result<CommitReceipt, StoreError>;
}

/// Thread claims and due work (SPEC §7.2, §7.3): who owns a thread, and what needs handling
/// with no process holding the thread. The decisions are the core's ([`decide_claim`],
/// [`decide_renew`], [`decide_release`]); a backend reads the thread's claim, decides, and
/// writes what the decision says, atomically.
///
/// `now_ms` is store time for stores whose time is the caller's (`MemoryStore`, SQLite);
/// PostgreSQL ignores it and reads its server's clock, so worker clocks never decide who owns
/// a thread.
///
/// [`decide_claim`]: crate::store::decide_claim
/// [`decide_renew`]: crate::store::decide_renew
/// [`decide_release`]: crate::store::decide_release
pub trait ThreadClaims {
    /// Claims the thread for `request.owner` (granted when no claim is live; a retry of the
    /// live claim's own request gets it again), else `ClaimHeld`.
    fn claim_thread(&mut self, request: &ClaimRequest, now_ms: u64) -> Result<Claim, StoreError>;
    /// Extends the current, unexpired claim to store time + `lease_ms`, else `ClaimLost`.
    fn renew_claim(
        &mut self,
        claim: &Claim,
        lease_ms: u64,
        now_ms: u64,
    ) -> Result<Claim, StoreError>;
    /// Ends the claim if it is the thread's current one; a no-op otherwise.
    fn release_claim(&mut self, claim: &Claim, now_ms: u64) -> Result<(), StoreError>;
    /// The thread's live claim at store time, if any.
    fn thread_claim(&self, thread: &ThreadId, now_ms: u64) -> Result<Option<Claim>, StoreError>;
    /// Due work at store time (passed deadlines, orphaned runs), in the order each became due
    /// ([`due_order`](crate::store::due_order)), at most `limit`.
    fn due_work(&self, now_ms: u64, limit: usize) -> Result<Vec<DueWork>, StoreError>;
}

/// A store that can open another handle onto the same committed log, so that several OS
/// threads (or processes) can commit concurrently, each through its own handle. The
/// conformance suite's concurrency cases need it.
pub trait StoreHandles: CommitLog + CheckpointReader + ThreadClaims + Send + Sized {
    /// Another handle onto the same log (a new connection, a clone of a shared handle).
    fn open_handle(&self) -> Result<Self, StoreError>;
}

/// One thread in a listing (SPEC §7.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ThreadSummary {
    /// The thread.
    pub thread_id: ThreadId,
    /// Its commit count.
    pub version: u64,
    /// The run of its latest commit.
    pub latest_run: Option<RunRecord>,
}

/// Which events to list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "type",
    content = "id",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum EventScope {
    /// Every event of the store.
    All,
    /// The events of one thread.
    Thread(ThreadId),
    /// The events of one run.
    Run(RunId),
}

/// A committed audit event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct EventRecord {
    /// Store-wide, dense from 1, in commit order then in-commit order.
    pub sequence: u64,
    /// The sequence of the commit that carried it.
    pub commit_sequence: u64,
    /// The commit's thread.
    pub thread_id: ThreadId,
    /// The commit's run.
    pub run_id: RunId,
    /// The draft's kind.
    pub kind: String,
    /// The draft's payload.
    pub payload: Value,
}

/// A pinned committed prefix of a thread's transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TranscriptSnapshotRef {
    /// The thread.
    pub thread_id: ThreadId,
    /// The prefix length: the committed message count when pinned.
    pub end: usize,
    /// The chained digest of the prefix ([`transcript_digest`]).
    pub digest: String,
}

/// Why a transcript snapshot could not be sliced or verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TranscriptError {
    /// A range that is reversed or reaches past the pinned prefix.
    #[error("range {start}..{end} is not within the pinned prefix 0..{limit}")]
    InvalidRange {
        /// The range start.
        start: usize,
        /// The range end (exclusive).
        end: usize,
        /// The pinned prefix length.
        limit: usize,
    },
    /// Ranges must be sorted and must not overlap.
    #[error("range {start}..{end} overlaps or precedes the range before it")]
    OverlappingRanges {
        /// The offending range start.
        start: usize,
        /// The offending range end.
        end: usize,
    },
    /// The pinned prefix is longer than what is committed.
    #[error("the snapshot pins {end} messages but thread {thread_id:?} has {committed}")]
    SnapshotUnavailable {
        /// The thread.
        thread_id: ThreadId,
        /// The pinned length.
        end: usize,
        /// The committed length.
        committed: usize,
    },
    /// The committed prefix is not the one pinned (another thread, or changed content).
    #[error("the pinned prefix of thread {thread_id:?} no longer matches what is committed")]
    SnapshotMismatch {
        /// The thread.
        thread_id: ThreadId,
    },
}

/// The chain step of the transcript digest: `sha256(previous || canonical_json(message))`.
/// The digest of the empty prefix is the empty string.
pub fn chain_digest(previous: &str, message: &Message) -> String {
    let canonical = canonical_json_bytes(message).unwrap_or_else(|error| {
        // A message's map keys are strings and its numbers fit in 64 bits: writing it cannot
        // fail.
        debug_assert!(
            false,
            "a message failed to write as canonical JSON: {error}"
        );
        b"null".to_vec()
    });
    sha256_hex_of_parts(previous.as_bytes(), &canonical)
}

/// The chained digest of a whole prefix.
pub fn transcript_digest(messages: &[Message]) -> String {
    messages.iter().fold(String::new(), |digest, message| {
        chain_digest(&digest, message)
    })
}

/// Checks `ranges` against a pinned prefix of length `limit` (sorted, non-overlapping,
/// half-open, within the prefix).
pub fn check_ranges(ranges: &[Range<usize>], limit: usize) -> Result<(), TranscriptError> {
    let mut previous_end = 0usize;
    for (i, range) in ranges.iter().enumerate() {
        if range.start > range.end || range.end > limit {
            return Err(TranscriptError::InvalidRange {
                start: range.start,
                end: range.end,
                limit,
            });
        }
        if i > 0 && range.start < previous_end {
            return Err(TranscriptError::OverlappingRanges {
                start: range.start,
                end: range.end,
            });
        }
        previous_end = range.end;
    }
    Ok(())
}

/// A thread as of one of its versions ([`CommittedThreadView::thread_as_of`], SPEC §8.10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadAsOf {
    /// The thread.
    pub thread_id: ThreadId,
    /// The version: how many of the thread's commits this view holds.
    pub version: u64,
    /// The store-wide sequence of the commit that made this version.
    pub commit_sequence: u64,
    /// The messages committed in versions `1..=version`, in commit order.
    pub messages: Vec<Message>,
}

/// One internally consistent view of committed facts.
///
/// The transcript-snapshot methods have default implementations in terms of
/// [`committed_messages`](Self::committed_messages) (linear in the transcript); a backend that
/// keeps per-message digests can answer them in constant time.
pub trait CommittedThreadView {
    /// The thread's messages, in commit order.
    fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError>;
    /// Any run, by id.
    fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError>;
    /// The thread head: the run of the thread's latest commit.
    fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError>;
    /// The run's ticket, only while it is Awaiting.
    fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError>;
    /// The run's latest committed state.
    fn run_state(&self, run: &RunId) -> Result<Option<RunState>, StoreError> {
        Ok(self.run(run)?.map(|record| record.state))
    }
    /// The thread's state commands, in commit order.
    fn committed_state(&self, thread: &ThreadId) -> Result<Vec<StateCommand>, StoreError>;
    /// The thread's commit count (0 for an unknown thread): the `expected_thread_version` of
    /// the next commit on it.
    fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError>;
    /// The thread as of `version` (SPEC §8.10): the messages its commits `1..=version`
    /// hold, and the store-wide sequence of commit `version` (audit events with a
    /// `commit_sequence` at most that one are the version's). `None` for version 0, a version
    /// past the thread's head, or an unknown thread.
    fn thread_as_of(
        &self,
        thread: &ThreadId,
        version: u64,
    ) -> Result<Option<ThreadAsOf>, StoreError>;
    /// Threads ordered by id, those after `after` (exclusive), at most `limit`.
    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError>;
    /// The ticket of every Awaiting run across threads, ordered by run id, those after
    /// `after` (exclusive), at most `limit`: what needs a person after a restart.
    fn pending_tickets(
        &self,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<Vec<ResumeTicket>, StoreError>;

    /// Pins the committed prefix of the thread's transcript.
    fn transcript_snapshot(&self, thread: &ThreadId) -> Result<TranscriptSnapshotRef, StoreError> {
        let messages = self.committed_messages(thread)?;
        Ok(TranscriptSnapshotRef {
            thread_id: thread.clone(),
            end: messages.len(),
            digest: transcript_digest(&messages),
        })
    }

    /// Checks that the pinned prefix is still committed, unchanged.
    fn verify_transcript_snapshot(
        &self,
        snapshot: &TranscriptSnapshotRef,
    ) -> Result<(), StoreError> {
        let messages = self.committed_messages(&snapshot.thread_id)?;
        Ok(verify_prefix(snapshot, &messages)?)
    }

    /// The messages of `ranges` (sorted, non-overlapping, half-open, within the pin).
    fn transcript_slice(
        &self,
        snapshot: &TranscriptSnapshotRef,
        ranges: &[Range<usize>],
    ) -> Result<Vec<Message>, StoreError> {
        check_ranges(ranges, snapshot.end)?;
        let messages = self.committed_messages(&snapshot.thread_id)?;
        verify_prefix(snapshot, &messages)?;
        Ok(slice_ranges(&messages, ranges))
    }
}

/// The messages of checked `ranges`, in order.
pub(crate) fn slice_ranges(messages: &[Message], ranges: &[Range<usize>]) -> Vec<Message> {
    ranges
        .iter()
        .flat_map(|range| {
            messages
                .get(range.clone())
                .unwrap_or_default()
                .iter()
                .cloned()
        })
        .collect()
}

fn verify_prefix(
    snapshot: &TranscriptSnapshotRef,
    messages: &[Message],
) -> Result<(), TranscriptError> {
    let digest = messages
        .get(..snapshot.end)
        .map(transcript_digest)
        .unwrap_or_default();
    check_pin(snapshot, messages.len(), &digest)
}

/// The pin check every backend makes (SPEC §7): `committed` is how many messages the thread
/// has now, `digest` the chained digest of its first `snapshot.end` messages (what the backend
/// keeps for the message at position `end - 1`; empty for an empty pin, or when there is no
/// such message). A pin longer than what is committed is
/// [`SnapshotUnavailable`](TranscriptError::SnapshotUnavailable); a digest that differs is
/// [`SnapshotMismatch`](TranscriptError::SnapshotMismatch).
pub fn check_pin(
    snapshot: &TranscriptSnapshotRef,
    committed: usize,
    digest: &str,
) -> Result<(), TranscriptError> {
    if snapshot.end > committed {
        return Err(TranscriptError::SnapshotUnavailable {
            thread_id: snapshot.thread_id.clone(),
            end: snapshot.end,
            committed,
        });
    }
    if digest != snapshot.digest {
        return Err(TranscriptError::SnapshotMismatch {
            thread_id: snapshot.thread_id.clone(),
        });
    }
    Ok(())
}

/// A view that can also page through committed audit events.
pub trait CheckpointReader: CommittedThreadView {
    /// Events of `scope` with `sequence > from` (`None` = from the start), ascending, at most
    /// `limit` (0 gives an empty page). The next page starts from the last returned sequence.
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError>;
}

/// Every port of a full store, as one trait object: what a host opens from a URL and hands to
/// the durable driver, recovery and the inspection commands (`Box<dyn Store + Send>`).
pub trait Store: CommitLog + CheckpointReader + ThreadClaims {}

impl<T: CommitLog + CheckpointReader + ThreadClaims + ?Sized> Store for T {}

/// Any store as one concrete type: what a URL opens (`runcore-store-url`), what the bindings
/// hold and share ([`SharedStore`](super::SharedStore)'s default). Every port is forwarded
/// through the box, so it is a [`Store`] itself.
pub type BoxedStore = Box<dyn Store + Send>;

/// Forwards every port through a pointer-like wrapper (`Box<T>`, `&mut T`), so a boxed or
/// borrowed store is a store, with no hand-written forwarding at each call site.
///
/// `forward_ports!([T] Box<T>, |s| **s)` implements every port of `Box<T>` for each port
/// `T` has, reaching the inner store through the expression after `|s|` (which may use `?` with
/// a [`StoreError`]).
macro_rules! forward_ports {
    ([$param:ident] $wrapper:ty, |$s:ident| $access:expr) => {
        impl<$param: CommitLog + ?Sized> CommitLog for $wrapper {
            fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
                let $s = self;
                ($access).commit(commit)
            }
            fn commit_operation(
                &mut self,
                operation: CommitOperation,
            ) -> Result<CommitReceipt, StoreError> {
                let $s = self;
                ($access).commit_operation(operation)
            }
        }

        impl<$param: ThreadClaims + ?Sized> ThreadClaims for $wrapper {
            fn claim_thread(
                &mut self,
                request: &ClaimRequest,
                now_ms: u64,
            ) -> Result<Claim, StoreError> {
                let $s = self;
                ($access).claim_thread(request, now_ms)
            }
            fn renew_claim(
                &mut self,
                claim: &Claim,
                lease_ms: u64,
                now_ms: u64,
            ) -> Result<Claim, StoreError> {
                let $s = self;
                ($access).renew_claim(claim, lease_ms, now_ms)
            }
            fn release_claim(&mut self, claim: &Claim, now_ms: u64) -> Result<(), StoreError> {
                let $s = self;
                ($access).release_claim(claim, now_ms)
            }
            fn thread_claim(
                &self,
                thread: &ThreadId,
                now_ms: u64,
            ) -> Result<Option<Claim>, StoreError> {
                let $s = self;
                ($access).thread_claim(thread, now_ms)
            }
            fn due_work(&self, now_ms: u64, limit: usize) -> Result<Vec<DueWork>, StoreError> {
                let $s = self;
                ($access).due_work(now_ms, limit)
            }
        }

        impl<$param: CommittedThreadView + ?Sized> CommittedThreadView for $wrapper {
            fn committed_messages(&self, thread: &ThreadId) -> Result<Vec<Message>, StoreError> {
                let $s = self;
                ($access).committed_messages(thread)
            }
            fn run(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
                let $s = self;
                ($access).run(run)
            }
            fn latest_run(&self, thread: &ThreadId) -> Result<Option<RunRecord>, StoreError> {
                let $s = self;
                ($access).latest_run(thread)
            }
            fn resume_ticket(&self, run: &RunId) -> Result<Option<ResumeTicket>, StoreError> {
                let $s = self;
                ($access).resume_ticket(run)
            }
            fn run_state(&self, run: &RunId) -> Result<Option<RunState>, StoreError> {
                let $s = self;
                ($access).run_state(run)
            }
            fn committed_state(&self, thread: &ThreadId) -> Result<Vec<StateCommand>, StoreError> {
                let $s = self;
                ($access).committed_state(thread)
            }
            fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError> {
                let $s = self;
                ($access).thread_version(thread)
            }

            fn thread_as_of(
                &self,
                thread: &ThreadId,
                version: u64,
            ) -> Result<Option<$crate::store::ThreadAsOf>, StoreError> {
                let $s = self;
                ($access).thread_as_of(thread, version)
            }
            fn threads(
                &self,
                after: Option<&ThreadId>,
                limit: usize,
            ) -> Result<Vec<ThreadSummary>, StoreError> {
                let $s = self;
                ($access).threads(after, limit)
            }
            fn pending_tickets(
                &self,
                after: Option<&RunId>,
                limit: usize,
            ) -> Result<Vec<ResumeTicket>, StoreError> {
                let $s = self;
                ($access).pending_tickets(after, limit)
            }
            fn transcript_snapshot(
                &self,
                thread: &ThreadId,
            ) -> Result<TranscriptSnapshotRef, StoreError> {
                let $s = self;
                ($access).transcript_snapshot(thread)
            }
            fn verify_transcript_snapshot(
                &self,
                snapshot: &TranscriptSnapshotRef,
            ) -> Result<(), StoreError> {
                let $s = self;
                ($access).verify_transcript_snapshot(snapshot)
            }
            fn transcript_slice(
                &self,
                snapshot: &TranscriptSnapshotRef,
                ranges: &[Range<usize>],
            ) -> Result<Vec<Message>, StoreError> {
                let $s = self;
                ($access).transcript_slice(snapshot, ranges)
            }
        }

        impl<$param: CheckpointReader + ?Sized> CheckpointReader for $wrapper {
            fn list_events(
                &self,
                scope: &EventScope,
                from: Option<u64>,
                limit: usize,
            ) -> Result<Vec<EventRecord>, StoreError> {
                let $s = self;
                ($access).list_events(scope, from, limit)
            }
        }
    };
}

forward_ports!([T] Box<T>, |s| **s);
forward_ports!([T] &mut T, |s| **s);

pub(crate) use forward_ports;
