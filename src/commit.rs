//! [`ThreadCommit`], the one write unit (SPEC §6), its audit drafts, and idempotent
//! [`CommitOperation`]s (SPEC §7).
//!
//! A commit carries everything one transition wrote: its messages, its state commands, the
//! run's disposition and the audit drafts announcing it. Build commits with
//! [`ThreadCommit::assemble`], which binds `Run`-scoped state to the run and synthesizes the
//! lifecycle drafts in one place, in this order:
//! 1. `run_state_changed {state, await_reason?, await_target?}` when `state_changed`;
//! 2. `state_changed {commands: n}` when the commit carries state commands;
//! 3. `run_awaiting {run_id}` when the disposition is Awaiting — unless the caller's extra
//!    drafts hold an [`AuditDraft::RunAwaiting`] of that run, which is then moved to this place
//!    instead (the first such draft; the agent passes its own, which records where the run
//!    waits: [`AuditDraft::run_awaiting_at`]);
//! 4. the caller's extra drafts, in order.
//!
//! `state_changed` is true for the first commit of an attempt (nothing/Awaiting → Running) and
//! for every Awaiting or Ended commit; it is false for further Running progress commits.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::canonical_json_of;
use crate::hash::hash_canonical;
use crate::ids::{CallId, RunId, ThreadId};
use crate::message::{Message, UserMessage};
use crate::resume::{AwaitTarget, PermissionDecision};
use crate::run::{EndCause, RunDisposition, RunState};
use crate::state::{StateCommand, StateScope, exclusive_conflict};

/// The envelope version of [`ThreadCommit`] this crate writes and the newest it reads.
pub const COMMIT_SCHEMA_VERSION: u32 = 1;

/// An audit draft: an event the store will number and append with the commit.
///
/// The drafts the crate writes are typed: each kind holds exactly its fields, and a reader
/// (recovery, a host) matches on them instead of parsing JSON back by key name. A host's own
/// drafts are [`AuditDraft::Custom`]. On the wire (and in a store) every draft is
/// `{"kind": "<snake_case kind>", "payload": {…}}`, the payload's keys in sorted order; the
/// JSON is built when the commit is serialized, so a draft costs nothing until it is written.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AuditDraft {
    /// `run_state_changed {state, await_reason?, await_target?}` (see [`ThreadCommit::assemble`]).
    RunStateChanged {
        /// The run's new state.
        state: RunState,
        /// The ticket's target, when Awaiting.
        awaiting: Option<AwaitTarget>,
    },
    /// `state_changed {commands}`: the commit carries state commands.
    StateChanged {
        /// How many.
        commands: usize,
    },
    /// `run_awaiting {boundary?, run_id, step?}`: the run waits on a ticket. The agent's own
    /// drafts record where the run waits ([`AuditDraft::run_awaiting_at`]), so recovery reads
    /// that fact instead of inferring it; a host-built commit has `run_id` alone.
    RunAwaiting {
        /// The run.
        run_id: RunId,
        /// The run's step count when the wait opened: how many model calls it had handed out
        /// (each answered one committed its assistant message before the wait).
        step: Option<u32>,
        /// For a pause or remote-input wait, the loop boundary it interrupted (taken again
        /// when the wait is answered without input).
        boundary: Option<WaitBoundary>,
    },
    /// `permission_decided {call_id, decision, reason?, note?, step, now_ms?}`: a permission
    /// decision, committed before any call of its batch runs.
    PermissionDecided {
        /// The step whose batch holds the call.
        step: u32,
        /// The call.
        call_id: CallId,
        /// Allow (with its note) or deny (with its reason).
        decision: PermissionDecision,
        /// The agent's clock when it was decided.
        now_ms: Option<u64>,
    },
    /// `run_started {run_id, transcript_start, now_ms?}`: where a run's messages begin, written
    /// with its first commit.
    RunStarted {
        /// The run.
        run_id: RunId,
        /// The transcript length when the run started.
        transcript_start: usize,
        /// The agent's clock when it started.
        now_ms: Option<u64>,
    },
    /// `compacted {keep_from, transcript_len, summary, now_ms?}` (SPEC §8.9): from this commit
    /// on, the model context is `[summary] ++ transcript[keep_from..]`. Written with a Running
    /// commit of no messages; recovery, continue and snapshots rebuild the model context from
    /// the latest one of the thread.
    Compacted {
        /// Where the kept transcript begins.
        keep_from: usize,
        /// The transcript's length when the compaction was committed.
        transcript_len: usize,
        /// The summary that stands for `transcript[..keep_from]` (written as a user message,
        /// `"role":"user"`).
        summary: Arc<UserMessage>,
        /// The agent's clock when it compacted.
        now_ms: Option<u64>,
    },
    /// `commit_clock {now_ms, transcript_len}`: the agent's clock when it emitted the commit
    /// and the transcript's length after it. The agent writes one, last, in every commit it
    /// emits, so a trace (SPEC §14) can place each committed message and each state change in
    /// time. Commits written before this fact existed have none (absent means unchanged,
    /// SPEC §2.1); a reader then falls back to the other drafts' `now_ms`.
    CommitClock {
        /// The agent's clock (the latest `now_ms` it has seen) when the commit was emitted.
        now_ms: u64,
        /// The thread's committed transcript length once this commit is applied.
        transcript_len: usize,
    },
    /// A draft of any other kind (a host's own audit events).
    Custom {
        /// The kind, snake_case.
        kind: String,
        /// The payload.
        payload: Value,
    },
}

/// The loop boundary (SPEC §8.2) a pause or remote-input wait interrupted, as an agent's
/// `run_awaiting` draft records it: answering the wait without input takes that boundary
/// again, so a recovered run must know which one it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WaitBoundary {
    /// After a text answer (`text_stop`): follow-ups may be taken there.
    TextStop,
    /// After a tool batch's results (`after_tool_batch`): only steering is taken there.
    AfterToolBatch,
}

/// Audit kinds the crate writes.
pub(crate) mod kinds {
    pub(crate) const RUN_STATE_CHANGED: &str = "run_state_changed";
    pub(crate) const STATE_CHANGED: &str = "state_changed";
    pub(crate) const RUN_AWAITING: &str = "run_awaiting";
    pub(crate) const PERMISSION_DECIDED: &str = "permission_decided";
    pub(crate) const RUN_STARTED: &str = "run_started";
    pub(crate) const COMPACTED: &str = "compacted";
    pub(crate) const COMMIT_CLOCK: &str = "commit_clock";
}

impl AuditDraft {
    /// A draft of any kind ([`AuditDraft::Custom`]).
    pub fn new(kind: impl Into<String>, payload: Value) -> Self {
        AuditDraft::Custom {
            kind: kind.into(),
            payload,
        }
    }

    /// `run_state_changed` for `run`.
    pub fn run_state_changed(run: &RunDisposition) -> Self {
        AuditDraft::RunStateChanged {
            state: run.state(),
            awaiting: run.ticket().map(|ticket| ticket.target().clone()),
        }
    }

    /// `state_changed {commands: n}`.
    pub fn state_changed(commands: usize) -> Self {
        AuditDraft::StateChanged { commands }
    }

    /// `run_awaiting {run_id}`: what [`ThreadCommit::assemble`] synthesizes for an Awaiting
    /// commit.
    pub fn run_awaiting(run_id: &RunId) -> Self {
        AuditDraft::RunAwaiting {
            run_id: run_id.clone(),
            step: None,
            boundary: None,
        }
    }

    /// `run_awaiting {boundary?, run_id, step}`: the draft an agent's Awaiting commit carries,
    /// recording the run's step count when the wait opened and, for a pause or remote-input
    /// wait, the boundary it interrupted. Pass it in [`ThreadCommit::assemble`]'s extra drafts:
    /// it takes the place of the synthesized `run_awaiting {run_id}`.
    pub fn run_awaiting_at(run_id: &RunId, step: u32, boundary: Option<WaitBoundary>) -> Self {
        AuditDraft::RunAwaiting {
            run_id: run_id.clone(),
            step: Some(step),
            boundary,
        }
    }

    /// `permission_decided {call_id, decision, reason?, note?, step}`.
    pub fn permission_decided(step: u32, call_id: &CallId, decision: &PermissionDecision) -> Self {
        AuditDraft::PermissionDecided {
            step,
            call_id: call_id.clone(),
            decision: decision.clone(),
            now_ms: None,
        }
    }

    /// `run_started {run_id, transcript_start}`: where the run's messages begin.
    pub fn run_started(run_id: &RunId, transcript_start: usize) -> Self {
        AuditDraft::RunStarted {
            run_id: run_id.clone(),
            transcript_start,
            now_ms: None,
        }
    }

    /// `compacted {keep_from, transcript_len, summary}` (SPEC §8.9).
    pub fn compacted(keep_from: usize, transcript_len: usize, summary: Arc<UserMessage>) -> Self {
        AuditDraft::Compacted {
            keep_from,
            transcript_len,
            summary,
            now_ms: None,
        }
    }

    /// `commit_clock {now_ms, transcript_len}` (see [`AuditDraft::CommitClock`]).
    pub fn commit_clock(now_ms: u64, transcript_len: usize) -> Self {
        AuditDraft::CommitClock {
            now_ms,
            transcript_len,
        }
    }

    /// The same draft with `now_ms` recorded: the agent's clock when the fact was decided, so
    /// a recovered agent can restore its clock from committed facts. Only `run_started`,
    /// `permission_decided` and `compacted` record it; other drafts are returned unchanged.
    pub fn with_now_ms(mut self, now: u64) -> Self {
        match &mut self {
            AuditDraft::PermissionDecided { now_ms, .. }
            | AuditDraft::RunStarted { now_ms, .. }
            | AuditDraft::Compacted { now_ms, .. } => {
                *now_ms = Some(now);
            }
            _ => {}
        }
        self
    }

    /// The snake_case kind, as stored.
    pub fn kind(&self) -> &str {
        match self {
            AuditDraft::RunStateChanged { .. } => kinds::RUN_STATE_CHANGED,
            AuditDraft::StateChanged { .. } => kinds::STATE_CHANGED,
            AuditDraft::RunAwaiting { .. } => kinds::RUN_AWAITING,
            AuditDraft::PermissionDecided { .. } => kinds::PERMISSION_DECIDED,
            AuditDraft::RunStarted { .. } => kinds::RUN_STARTED,
            AuditDraft::Compacted { .. } => kinds::COMPACTED,
            AuditDraft::CommitClock { .. } => kinds::COMMIT_CLOCK,
            AuditDraft::Custom { kind, .. } => kind,
        }
    }

    /// The payload as stored: a JSON object with sorted keys (built on each call, from the
    /// same code that writes it when the draft is serialized).
    pub fn payload(&self) -> Value {
        match self {
            AuditDraft::Custom { payload, .. } => payload.clone(),
            draft => to_value_or_null(&Payload(draft)),
        }
    }

    /// Reads a stored draft back: the crate's own kinds become their typed variants when the
    /// payload has their exact shape; anything else is [`AuditDraft::Custom`].
    pub fn from_stored(kind: &str, payload: Value) -> Self {
        match typed_from_stored(kind, &payload) {
            Some(draft) => draft,
            None => AuditDraft::Custom {
                kind: kind.to_owned(),
                payload,
            },
        }
    }
}

/// The typed draft a stored `(kind, payload)` holds, if it has exactly that shape (it writes
/// back to the same JSON).
fn typed_from_stored(kind: &str, payload: &Value) -> Option<AuditDraft> {
    fn read<'a, T: Deserialize<'a>>(payload: &'a Value) -> Option<T> {
        T::deserialize(payload).ok()
    }
    let draft = match kind {
        kinds::RUN_STATE_CHANGED => read::<RunStateChangedPayload>(payload)?.into_draft()?,
        kinds::STATE_CHANGED => read::<StateChangedPayload>(payload)?.into_draft(),
        kinds::RUN_AWAITING => read::<RunAwaitingPayload>(payload)?.into_draft(),
        kinds::PERMISSION_DECIDED => read::<PermissionDecidedPayload>(payload)?.into_draft()?,
        kinds::RUN_STARTED => read::<RunStartedPayload>(payload)?.into_draft(),
        kinds::COMPACTED => read::<CompactedPayload>(payload)?.into_draft()?,
        kinds::COMMIT_CLOCK => read::<CommitClockPayload>(payload)?.into_draft(),
        _ => return None,
    };
    // Only a payload that reads back to exactly the same JSON is typed, so reading a stored
    // draft and writing it again never changes it.
    (draft.payload() == *payload).then_some(draft)
}

// ----- payloads: one serde-derived shape per kind ----------------------------------------------
//
// Each typed kind's payload is a private struct whose fields are declared in sorted key order
// (so serde writes them sorted, as a `Value` map keeps them), optional keys skipped when
// absent, and unknown keys refused (so a payload that is not exactly the shape stays
// `Custom`). Nested values that are objects are written through a `Value` ([`sorted`]), so
// their keys are sorted too. Written, a payload borrows from its draft (`Cow::Borrowed`);
// read, it owns what it read.

/// Writes `value` through a `serde_json::Value`, whose maps keep their keys sorted.
fn sorted<T: Serialize, S: serde::Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value)
        .map_err(serde::ser::Error::custom)?
        .serialize(serializer)
}

/// `run_state_changed {await_reason?, await_target?, state}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunStateChangedPayload<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    await_reason: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "sorted")]
    await_target: Option<Cow<'a, AwaitTarget>>,
    #[serde(serialize_with = "sorted")]
    state: Cow<'a, RunState>,
}

impl RunStateChangedPayload<'_> {
    /// The draft, when `await_reason` names the target's reason (and is there exactly when
    /// the target is).
    fn into_draft(self) -> Option<AuditDraft> {
        let awaiting = self.await_target.map(Cow::into_owned);
        let reason = awaiting.as_ref().map(AwaitTarget::reason_name);
        (self.await_reason.as_deref() == reason).then(|| AuditDraft::RunStateChanged {
            state: self.state.into_owned(),
            awaiting,
        })
    }
}

/// `state_changed {commands}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateChangedPayload {
    commands: usize,
}

impl StateChangedPayload {
    fn into_draft(self) -> AuditDraft {
        AuditDraft::StateChanged {
            commands: self.commands,
        }
    }
}

/// `run_awaiting {boundary?, run_id, step?}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunAwaitingPayload<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    boundary: Option<WaitBoundary>,
    run_id: Cow<'a, RunId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<u32>,
}

impl RunAwaitingPayload<'_> {
    fn into_draft(self) -> AuditDraft {
        AuditDraft::RunAwaiting {
            run_id: self.run_id.into_owned(),
            step: self.step,
            boundary: self.boundary,
        }
    }
}

/// A permission decision's name, as `permission_decided` writes it.
#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum DecisionName {
    Allow,
    Deny,
}

/// `permission_decided {call_id, decision, note?, now_ms?, reason?, step}`: `note` only with
/// `allow`, `reason` only with `deny`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PermissionDecidedPayload<'a> {
    call_id: Cow<'a, CallId>,
    decision: DecisionName,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    now_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<Cow<'a, str>>,
    step: u32,
}

impl PermissionDecidedPayload<'_> {
    /// The draft, unless a note comes with a denial or a reason with an approval.
    fn into_draft(self) -> Option<AuditDraft> {
        let decision = match (self.decision, self.note, self.reason) {
            (DecisionName::Allow, note, None) => PermissionDecision::Allow {
                note: note.map(Cow::into_owned),
            },
            (DecisionName::Deny, None, reason) => PermissionDecision::Deny {
                reason: reason.map(Cow::into_owned),
            },
            _ => return None,
        };
        Some(AuditDraft::PermissionDecided {
            step: self.step,
            call_id: self.call_id.into_owned(),
            decision,
            now_ms: self.now_ms,
        })
    }
}

/// `run_started {now_ms?, run_id, transcript_start}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunStartedPayload<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    now_ms: Option<u64>,
    run_id: Cow<'a, RunId>,
    transcript_start: usize,
}

impl RunStartedPayload<'_> {
    fn into_draft(self) -> AuditDraft {
        AuditDraft::RunStarted {
            run_id: self.run_id.into_owned(),
            transcript_start: self.transcript_start,
            now_ms: self.now_ms,
        }
    }
}

/// `compacted {keep_from, now_ms?, summary, transcript_len}`, the summary written as a user
/// message (`"role":"user"`).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactedPayload {
    keep_from: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    now_ms: Option<u64>,
    #[serde(serialize_with = "sorted")]
    summary: Message,
    transcript_len: usize,
}

impl CompactedPayload {
    /// The draft, when the summary is a user message.
    fn into_draft(self) -> Option<AuditDraft> {
        let Message::User(summary) = self.summary else {
            return None;
        };
        Some(AuditDraft::Compacted {
            keep_from: self.keep_from,
            transcript_len: self.transcript_len,
            summary,
            now_ms: self.now_ms,
        })
    }
}

/// `commit_clock {now_ms, transcript_len}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitClockPayload {
    now_ms: u64,
    transcript_len: usize,
}

impl CommitClockPayload {
    fn into_draft(self) -> AuditDraft {
        AuditDraft::CommitClock {
            now_ms: self.now_ms,
            transcript_len: self.transcript_len,
        }
    }
}

/// An audit draft: an event the store will number and append with the commit.
#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
struct AuditDraftRepr {
    /// The event kind, snake_case (`run_state_changed`, `permission_decided`, …).
    kind: String,
    /// The event's data.
    payload: Value,
}

impl Serialize for AuditDraft {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // `AuditDraftRepr`'s shape, written without building the payload as a `Value`.
        let mut draft = serializer.serialize_struct("AuditDraftRepr", 2)?;
        draft.serialize_field("kind", self.kind())?;
        draft.serialize_field("payload", &Payload(self))?;
        draft.end()
    }
}

/// A draft's payload, written as [`AuditDraft::payload`] builds it: its kind's payload shape
/// (borrowing from the draft), keys in sorted order; a custom draft's payload as it is.
struct Payload<'a>(&'a AuditDraft);

impl Serialize for Payload<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            AuditDraft::RunStateChanged { state, awaiting } => RunStateChangedPayload {
                await_reason: awaiting.as_ref().map(|t| Cow::Borrowed(t.reason_name())),
                await_target: awaiting.as_ref().map(Cow::Borrowed),
                state: Cow::Borrowed(state),
            }
            .serialize(serializer),
            AuditDraft::StateChanged { commands } => StateChangedPayload {
                commands: *commands,
            }
            .serialize(serializer),
            AuditDraft::RunAwaiting {
                run_id,
                step,
                boundary,
            } => RunAwaitingPayload {
                boundary: *boundary,
                run_id: Cow::Borrowed(run_id),
                step: *step,
            }
            .serialize(serializer),
            AuditDraft::PermissionDecided {
                step,
                call_id,
                decision,
                now_ms,
            } => {
                let (name, note, reason) = match decision {
                    PermissionDecision::Allow { note } => (DecisionName::Allow, note, &None),
                    PermissionDecision::Deny { reason } => (DecisionName::Deny, &None, reason),
                };
                PermissionDecidedPayload {
                    call_id: Cow::Borrowed(call_id),
                    decision: name,
                    note: note.as_deref().map(Cow::Borrowed),
                    now_ms: *now_ms,
                    reason: reason.as_deref().map(Cow::Borrowed),
                    step: *step,
                }
                .serialize(serializer)
            }
            AuditDraft::RunStarted {
                run_id,
                transcript_start,
                now_ms,
            } => RunStartedPayload {
                now_ms: *now_ms,
                run_id: Cow::Borrowed(run_id),
                transcript_start: *transcript_start,
            }
            .serialize(serializer),
            AuditDraft::Compacted {
                keep_from,
                transcript_len,
                summary,
                now_ms,
            } => CompactedPayload {
                keep_from: *keep_from,
                now_ms: *now_ms,
                summary: Message::User(Arc::clone(summary)),
                transcript_len: *transcript_len,
            }
            .serialize(serializer),
            AuditDraft::CommitClock {
                now_ms,
                transcript_len,
            } => CommitClockPayload {
                now_ms: *now_ms,
                transcript_len: *transcript_len,
            }
            .serialize(serializer),
            AuditDraft::Custom { payload, .. } => payload.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for AuditDraft {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let repr = AuditDraftRepr::deserialize(deserializer)?;
        Ok(AuditDraft::from_stored(&repr.kind, repr.payload))
    }
}

crate::schema_via::schema_via_repr!(AuditDraft => AuditDraftRepr, "AuditDraft");

fn to_value_or_null<T: Serialize>(value: &T) -> Value {
    // Serializing our own plain data types cannot fail; fall back to null rather than panic.
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The one write unit: messages, state commands, disposition and audit drafts of one
/// transition, accepted or rejected together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ThreadCommit {
    /// The envelope version ([`COMMIT_SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The thread written to.
    pub thread_id: ThreadId,
    /// What this commit says about its run.
    pub run: RunDisposition,
    /// Messages appended to the transcript, in order.
    pub messages: Vec<Message>,
    /// State commands, in order.
    pub state: Vec<StateCommand>,
    /// Audit drafts, in order.
    pub events: Vec<AuditDraft>,
}

/// Why a commit or commit operation was rejected. A rejected commit leaves no trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CommitError {
    /// The envelope is newer than this crate understands.
    #[error("commit schema_version {found} is newer than the supported {supported}")]
    UnsupportedSchemaVersion {
        /// The commit's version.
        found: u32,
        /// The newest this crate reads.
        supported: u32,
    },
    /// The commit names no thread.
    #[error("the commit's thread id is empty")]
    EmptyThreadId,
    /// The disposition names no run.
    #[error("the commit's run id is empty")]
    EmptyRunId,
    /// An Awaiting ticket with an empty correlation id.
    #[error("the awaiting ticket's correlation id is empty")]
    EmptyCorrelationId,
    /// An Awaiting ticket for another thread.
    #[error(
        "the awaiting ticket belongs to thread \"{ticket_thread}\", the commit to \"{commit_thread}\""
    )]
    TicketThreadMismatch {
        /// The commit's thread.
        commit_thread: ThreadId,
        /// The ticket's thread.
        ticket_thread: ThreadId,
    },
    /// An Awaiting ticket about a call with an empty call id.
    #[error("the awaiting ticket's call id is empty")]
    EmptyTicketCallId,
    /// A `Run`-scoped state command not bound to the commit's run (build commits with
    /// `ThreadCommit::assemble`, which binds them).
    #[error("run-scoped state key {key:?} is not bound to the commit's run \"{run_id}\"")]
    RunStateUnbound {
        /// The key.
        key: String,
        /// The commit's run.
        run_id: RunId,
    },
    /// Two `Set`s to one key in one commit where one is `Exclusive`.
    #[error("exclusive state key {key:?} (scope {}) is set twice in one commit", scope.as_str())]
    ExclusiveConflict {
        /// The key's scope.
        scope: StateScope,
        /// The key.
        key: String,
    },
    /// The run already ended; nothing moves it out of `Ended`.
    #[error("run \"{run_id}\" already ended ({cause}); no further commit is accepted")]
    AlreadyTerminal {
        /// The run.
        run_id: RunId,
        /// How it ended.
        cause: EndCause,
    },
    /// The run id is already committed on another thread.
    #[error("run \"{run_id}\" belongs to thread \"{existing_thread}\", not \"{commit_thread}\"")]
    RunOnOtherThread {
        /// The run.
        run_id: RunId,
        /// The thread it is committed on.
        existing_thread: ThreadId,
        /// The thread this commit names.
        commit_thread: ThreadId,
    },
    /// A sequence or version counter would overflow.
    #[error("the store's {counter} counter would overflow")]
    CounterOverflow {
        /// Which counter.
        counter: String,
    },
    /// The operation's run differs from the commit's run.
    #[error("operation names run \"{operation_run}\" but the commit is for run \"{commit_run}\"")]
    OperationRunMismatch {
        /// The operation's run.
        operation_run: RunId,
        /// The commit's run.
        commit_run: RunId,
    },
    /// The operation id was used before with another payload.
    #[error(
        "operation (\"{run_id}\", {ordinal}) was committed with payload hash {stored}, not {got}"
    )]
    PayloadMismatch {
        /// The operation's run.
        run_id: RunId,
        /// The operation's ordinal.
        ordinal: u64,
        /// The stored hash.
        stored: String,
        /// The incoming hash.
        got: String,
    },
    /// The thread moved on since the caller read it.
    #[error("expected thread version {expected}, the thread is at {actual}")]
    VersionConflict {
        /// The caller's expectation.
        expected: u64,
        /// The thread's commit count.
        actual: u64,
    },
    /// The operation is not the run's next commit.
    #[error("operation ordinal {got} is not the run's next commit ({expected})")]
    OrdinalConflict {
        /// The run's committed-commit count.
        expected: u64,
        /// The operation's ordinal.
        got: u64,
    },
    /// Another owner holds the thread's claim, live at store time (SPEC §7.2).
    #[error("the thread is claimed by {owner:?} until {expires_at_ms} (store time)")]
    ClaimHeld {
        /// Who holds it.
        owner: String,
        /// When that claim expires, in store time.
        expires_at_ms: u64,
    },
    /// The caller's claim is no longer the thread's current, unexpired claim: it expired, was
    /// released, or a newer one was granted. The caller must stop acting on the thread.
    #[error("the claim is no longer current (the thread's claim epoch is {current_epoch})")]
    ClaimLost {
        /// The thread's current claim epoch (0 when it was never claimed).
        current_epoch: u64,
    },
    /// A claim request or token is malformed (empty or oversized id, zero or too long lease,
    /// epoch 0).
    #[error("invalid claim: {reason}")]
    InvalidClaim {
        /// Which rule it breaks.
        reason: String,
    },
}

impl CommitError {
    /// The stable snake_case code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            CommitError::UnsupportedSchemaVersion { .. } => "unsupported_schema_version",
            CommitError::EmptyThreadId => "empty_thread_id",
            CommitError::EmptyRunId => "empty_run_id",
            CommitError::EmptyCorrelationId => "empty_correlation_id",
            CommitError::TicketThreadMismatch { .. } => "ticket_thread_mismatch",
            CommitError::ExclusiveConflict { .. } => "exclusive_conflict",
            CommitError::EmptyTicketCallId => "empty_ticket_call_id",
            CommitError::RunStateUnbound { .. } => "run_state_unbound",
            CommitError::AlreadyTerminal { .. } => "already_terminal",
            CommitError::RunOnOtherThread { .. } => "run_on_other_thread",
            CommitError::CounterOverflow { .. } => "counter_overflow",
            CommitError::OperationRunMismatch { .. } => "operation_run_mismatch",
            CommitError::PayloadMismatch { .. } => "payload_mismatch",
            CommitError::VersionConflict { .. } => "version_conflict",
            CommitError::OrdinalConflict { .. } => "ordinal_conflict",
            CommitError::ClaimHeld { .. } => "claim_held",
            CommitError::ClaimLost { .. } => "claim_lost",
            CommitError::InvalidClaim { .. } => "invalid_claim",
        }
    }
}

impl ThreadCommit {
    /// Builds a commit (see the module docs for the binding and draft rules).
    pub fn assemble(
        thread_id: ThreadId,
        run: RunDisposition,
        state_changed: bool,
        messages: Vec<Message>,
        mut state: Vec<StateCommand>,
        extra_events: Vec<AuditDraft>,
    ) -> ThreadCommit {
        for command in &mut state {
            if command.scope == StateScope::Run {
                command.run_id = Some(run.run_id().clone());
            }
        }
        // The caller's vector is reused, the lifecycle drafts put in front of its drafts, so a
        // commit costs one allocation for its drafts, not two.
        let awaiting = match &run {
            RunDisposition::Awaiting(ticket) => Some(&ticket.run_id),
            _ => None,
        };
        let mut events = extra_events;
        events.reserve(
            usize::from(state_changed)
                + usize::from(!state.is_empty())
                + usize::from(awaiting.is_some()),
        );
        if let Some(run_id) = awaiting {
            // The caller's own `run_awaiting` draft of this run (an agent's, recording where it
            // waits) takes the synthesized one's place; otherwise `{run_id}` is synthesized.
            let own = events.iter().position(
                |draft| matches!(draft, AuditDraft::RunAwaiting { run_id: own, .. } if own == run_id),
            );
            match own {
                Some(at) => {
                    if let Some(head) = events.get_mut(..=at) {
                        head.rotate_right(1);
                    }
                }
                None => events.insert(0, AuditDraft::run_awaiting(run_id)),
            }
        }
        if !state.is_empty() {
            events.insert(0, AuditDraft::state_changed(state.len()));
        }
        if state_changed {
            events.insert(0, AuditDraft::run_state_changed(&run));
        }
        ThreadCommit {
            schema_version: COMMIT_SCHEMA_VERSION,
            thread_id,
            run,
            messages,
            state,
            events,
        }
    }

    /// Rejects, before any write: a newer schema version, an empty thread or run id, an
    /// Awaiting ticket with an empty correlation id or call id or for another thread, a
    /// repeated `Exclusive` set, and a `Run`-scoped command not bound to the commit's run.
    pub fn validate(&self) -> Result<(), CommitError> {
        if self.schema_version > COMMIT_SCHEMA_VERSION {
            return Err(CommitError::UnsupportedSchemaVersion {
                found: self.schema_version,
                supported: COMMIT_SCHEMA_VERSION,
            });
        }
        if self.thread_id.is_blank() {
            return Err(CommitError::EmptyThreadId);
        }
        if self.run.run_id().is_blank() {
            return Err(CommitError::EmptyRunId);
        }
        if let Some(ticket) = self.run.ticket() {
            if ticket.correlation_id.trim().is_empty() {
                return Err(CommitError::EmptyCorrelationId);
            }
            if let Some(call_id) = ticket.target().call_id()
                && call_id.is_blank()
            {
                return Err(CommitError::EmptyTicketCallId);
            }
            if ticket.thread_id != self.thread_id {
                return Err(CommitError::TicketThreadMismatch {
                    commit_thread: self.thread_id.clone(),
                    ticket_thread: ticket.thread_id.clone(),
                });
            }
        }
        if let Some((scope, key)) = exclusive_conflict(&self.state) {
            return Err(CommitError::ExclusiveConflict { scope, key });
        }
        let run_id = self.run.run_id();
        if let Some(command) = self
            .state
            .iter()
            .find(|c| c.scope == StateScope::Run && c.run_id.as_ref() != Some(run_id))
        {
            return Err(CommitError::RunStateUnbound {
                key: command.key.clone(),
                run_id: run_id.clone(),
            });
        }
        Ok(())
    }

    /// The run this commit is about.
    pub fn run_id(&self) -> &RunId {
        self.run.run_id()
    }

    /// The payload hash (SPEC §7.1): SHA-256, lowercase hex, of the commit's canonical JSON
    /// (object key order does not matter).
    pub fn payload_hash(&self) -> String {
        self.payload_hash_with(&mut Vec::new())
    }

    /// [`payload_hash`](ThreadCommit::payload_hash), writing the canonical JSON into `scratch`
    /// (cleared first): a host that hashes many commits reuses one buffer, and once it has
    /// grown to fit, hashing a commit allocates only the hex string.
    pub fn payload_hash_with(&self, scratch: &mut Vec<u8>) -> String {
        hash_canonical(self, scratch).unwrap_or_else(|error| {
            // Every map key of a commit is a string and every number fits in 64 bits, so
            // writing it cannot fail.
            debug_assert!(false, "a commit failed to write as canonical JSON: {error}");
            crate::hash::sha256_hex(b"null")
        })
    }

    /// The commit as canonical JSON (keys sorted, no whitespace): the text
    /// [`payload_hash`](ThreadCommit::payload_hash) hashes. The same text as
    /// [`canonical_json`](crate::store::canonical_json) of the commit's `serde_json::Value`, written
    /// without building that value.
    pub fn canonical_json(&self) -> String {
        canonical_json_of(self).unwrap_or_else(|error| {
            debug_assert!(false, "a commit failed to write as canonical JSON: {error}");
            "null".to_owned()
        })
    }
}

/// Identifies one idempotent commit: the run and the commit's position within the run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OperationId {
    /// The run.
    pub run_id: RunId,
    /// The run's committed-commit count before this commit (0 for its first).
    pub ordinal: u64,
}

/// A commit with an idempotency key, an optimistic-concurrency version and a payload hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CommitOperation {
    /// The idempotency key.
    pub operation_id: OperationId,
    /// Must equal the thread's commit count.
    pub expected_thread_version: u64,
    /// The payload hash; a retry must carry the same one.
    pub payload_hash: String,
    /// The commit.
    pub commit: ThreadCommit,
    /// The thread claim the writer holds (SPEC §7.2), checked right after the duplicate
    /// check: with a token the thread's current claim must be this one and unexpired at store
    /// time (else `ClaimLost`); without one the thread must have no live claim (else
    /// `ClaimHeld`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimToken>,
    /// The writer's clock, for stores whose time is the caller's (`MemoryStore`, SQLite): the
    /// store time at which the claim check is made. PostgreSQL reads its own clock and
    /// ignores it. Without it, `MemoryStore` uses the latest time it was given, and SQLite
    /// the machine's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now_ms: Option<u64>,
}

impl CommitOperation {
    /// An operation for `commit`, hashing it with [`ThreadCommit::payload_hash`].
    pub fn new(commit: ThreadCommit, ordinal: u64, expected_thread_version: u64) -> Self {
        CommitOperation {
            operation_id: OperationId {
                run_id: commit.run_id().clone(),
                ordinal,
            },
            expected_thread_version,
            payload_hash: commit.payload_hash(),
            commit,
            claim: None,
            now_ms: None,
        }
    }

    /// The same operation under `claim`, checked at the writer's time `now_ms`.
    pub fn claimed(mut self, claim: ClaimToken, now_ms: u64) -> Self {
        self.claim = Some(claim);
        self.now_ms = Some(now_ms);
        self
    }
}

/// Where an accepted commit landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CommitRecord {
    /// Store-wide, dense from 1.
    pub sequence: u64,
    /// The thread's commit count after this commit.
    pub thread_version: u64,
}

/// The receipt of an operation: where it landed, and whether this call was a duplicate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CommitReceipt {
    /// The operation.
    pub operation_id: OperationId,
    /// Its payload hash.
    pub payload_hash: String,
    /// Where the commit landed (the first time).
    pub record: CommitRecord,
    /// True when this call found the operation already committed and appended nothing.
    pub duplicate: bool,
}

/// What a fenced commit carries to prove it comes from the thread's current owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimToken {
    /// The owner the claim was granted to.
    pub owner: String,
    /// The claim's epoch.
    pub epoch: u64,
}

#[cfg(test)]
mod tests;
