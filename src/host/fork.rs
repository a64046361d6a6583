//! Forking a thread (SPEC §8.10, §12.6): try another path from a point in a thread without
//! losing the original.
//!
//! [`fork_thread`] reads the parent's committed facts as of a version
//! ([`ThreadFacts::read_as_of`], over [`CommittedThreadView::thread_as_of`]), builds the fork's first commit and commits it
//! fenced: an import of exactly the messages committed in versions `1..=at_version` (a run
//! `"{new_thread}/run-1"` that starts and ends in that commit, `Ended(Stopped("imported"))`)
//! with the audit drafts `imported {count}` and `forked_from {thread_id, version}`, and — when
//! the parent had compacted at or before that version — the latest such `compacted` draft,
//! so the fork's model context is the parent's at that version. The parent is only read: its
//! commits, head, tickets and claims are untouched, and nothing of them is copied but the
//! messages and the compaction. The commit expects thread version 0, so a fork onto a thread
//! that exists (or that another writer creates meanwhile) is refused and writes nothing.
//!
//! The same inputs given to the parent after `at_version` and to the fork produce the same
//! messages: an agent recovered on the fork has the parent's transcript and model context as
//! of that version.

use serde::{Deserialize, Serialize};

use crate::agent::history::{
    FORKED_FROM_KIND, ForkOrigin, IMPORTED, check_complete, imported_draft,
};
use crate::commit::{AuditDraft, CommitOperation, ThreadCommit};
use crate::error::AgentError;
use crate::facts::{CompactionFact, ThreadFacts};
use crate::ids::{RunId, ThreadId};
use crate::run::{EndCause, RunDisposition};
use crate::store::{CheckpointReader, CommitLog, EventScope, StoreError};

/// What [`fork_thread`] committed: the fork and its thread version after its first commit
/// (the line `runcore fork` prints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Forked {
    /// The new thread.
    pub thread_id: ThreadId,
    /// Its version after the fork's commit (1).
    pub version: u64,
    /// Where it came from.
    pub forked_from: ForkOrigin,
}

/// Why a fork was refused or failed. A refused fork writes nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// The request is wrong (SPEC §10 `invalid_input`): an unknown thread or version, a
    /// version whose transcript is incomplete (names the unanswered call), a new thread id
    /// that is blank, the parent's, or already used.
    #[error(transparent)]
    Invalid(AgentError),
    /// The store failed, or refused the commit (another writer created the thread meanwhile:
    /// `version_conflict`; a claim on the new thread id: `claim_held`).
    #[error(transparent)]
    Store(StoreError),
}

impl ForkError {
    /// The stable kind: `invalid_input`, or `store`.
    pub fn kind(&self) -> &'static str {
        match self {
            ForkError::Invalid(error) => error.kind(),
            ForkError::Store(_) => "store",
        }
    }
}

impl ForkError {
    /// The error as the driver's error lines write it (`kind`, `message` and, for a store
    /// error, `reason`: the store error's code, [`crate::driver::store_body`]).
    pub fn body(&self) -> crate::driver::ErrorBody {
        match self {
            ForkError::Invalid(error) => crate::driver::error_body(error),
            ForkError::Store(error) => crate::driver::store_body(error.code(), self.to_string()),
        }
    }
}

impl From<StoreError> for ForkError {
    fn from(error: StoreError) -> Self {
        ForkError::Store(error)
    }
}

fn invalid(message: String) -> ForkError {
    ForkError::Invalid(AgentError::invalid(message))
}

/// Forks `parent` as of `at_version` onto the unused thread `new_thread` (see the module
/// docs); `now_ms` is recorded in the fork's `imported` draft.
pub fn fork_thread<S: CommitLog + CheckpointReader + ?Sized>(
    store: &mut S,
    parent: &ThreadId,
    at_version: u64,
    new_thread: &ThreadId,
    now_ms: u64,
) -> Result<Forked, ForkError> {
    if parent.is_blank() || new_thread.is_blank() {
        return Err(invalid("fork: a thread id is empty".into()));
    }
    if parent == new_thread {
        return Err(invalid(format!(
            "fork: the new thread must differ from the parent {parent}"
        )));
    }
    let existing = store.thread_version(new_thread)?;
    if existing > 0 {
        return Err(invalid(format!(
            "fork: thread {new_thread} already exists (version {existing}); fork onto an unused \
             thread id"
        )));
    }
    let head = store.thread_version(parent)?;
    if head == 0 {
        return Err(invalid(format!("fork: thread {parent} has no commits")));
    }
    if at_version == 0 || at_version > head {
        return Err(invalid(format!(
            "fork: thread {parent} has versions 1 to {head}; version {at_version} is not one of \
             them"
        )));
    }
    // The parent as of the version, read once: its messages and the compaction in force then.
    let Some(at) = ThreadFacts::read_as_of(store, parent, at_version)? else {
        return Err(invalid(format!(
            "fork: thread {parent} has no version {at_version}"
        )));
    };
    if at.messages.is_empty() {
        return Err(invalid(format!(
            "fork: thread {parent} has no messages at version {at_version}; there is nothing to \
             fork"
        )));
    }
    check_complete(&at.messages, 0).map_err(|incomplete| {
        invalid(format!(
            "{} (at version {at_version} of {parent}: a batch in flight or an approval \
             pending); fork an earlier version",
            incomplete.describe("fork")
        ))
    })?;
    let compaction = at.latest_compaction().map(CompactionFact::draft);
    let run_id = RunId::new(format!("{new_thread}/run-1"));
    let mut drafts = vec![
        imported_draft(at.messages.len(), now_ms),
        AuditDraft::Custom {
            kind: FORKED_FROM_KIND.to_owned(),
            payload: serde_json::json!({ "thread_id": parent, "version": at_version }),
        },
    ];
    drafts.extend(compaction);
    let commit = ThreadCommit::assemble(
        new_thread.clone(),
        RunDisposition::Ended {
            run_id,
            cause: EndCause::Stopped(IMPORTED.to_owned()),
        },
        true,
        at.messages,
        Vec::new(),
        drafts,
    );
    let receipt = store.commit_operation(CommitOperation::new(commit, 0, 0))?;
    Ok(Forked {
        thread_id: new_thread.clone(),
        version: receipt.record.thread_version,
        forked_from: ForkOrigin {
            thread_id: parent.clone(),
            version: at_version,
        },
    })
}

/// The thread's origin when it was made by [`fork_thread`]: the `forked_from` draft of its
/// first commit. `None` for a thread that was not forked (or is unknown).
pub fn forked_from<S: CheckpointReader + ?Sized>(
    store: &S,
    thread: &ThreadId,
) -> Result<Option<ForkOrigin>, StoreError> {
    // The fork's first commit carries at most five drafts; the first page holds them, and
    // the origin is decoded as every reader of the thread decodes it (ThreadFacts).
    let events = store.list_events(&EventScope::Thread(thread.clone()), None, 8)?;
    let Some(first) = events.first().map(|event| event.commit_sequence) else {
        return Ok(None);
    };
    let first_commit = events
        .into_iter()
        .take_while(|event| event.commit_sequence == first);
    Ok(
        ThreadFacts::from_records(thread.clone(), 0, Vec::new(), None, None, first_commit)
            .forked_from,
    )
}
