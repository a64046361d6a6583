//! Awaiting and resume, the human in the loop (SPEC §4).
//!
//! A run that must wait commits a [`ResumeTicket`] inside `RunDisposition::Awaiting`. Whoever
//! answers builds a [`ResumeCommand`] from that committed ticket
//! ([`ResumeCommand::from_ticket`]), so the command's identity always comes from the ticket and
//! never from memory. [`validate_resume`] fails closed: the first failing check, in the order
//! below, is the error, and a rejected resume changes nothing.
//!
//! 1. no active ticket → `NotWaiting`
//! 2. correlation → 3. run → 4. thread → 5. snapshot → 6. catalog fingerprint
//! 7. deadline: `now_ms > deadline_ms` → `Expired` (equal is accepted; no deadline never expires)
//! 8. the result kind must fit the target (see [`AwaitTarget::accepts`])
//! 9. a `ToolResult` for a non-delegation tool wait must name the ticket's call id
//! 10. context messages: all `system` role, then each with non-empty content and a unique,
//!     non-blank id.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{CallId, RunId, ThreadId, ToolName};
use crate::message::{Message, Role, ToolOutput};
use crate::schema_via::schema_via_repr;

/// Why a run waits on a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ToolWaitReason {
    /// A person must allow or deny the call.
    Permission,
    /// The client executes the tool and reports its result.
    ClientExecution,
    /// The call is scheduled and must be confirmed.
    ScheduledAction,
    /// The call was delegated to another agent or person.
    Delegation,
}

/// Why a run waits on remote input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RemoteInputReason {
    /// A person must type something.
    UserInput,
    /// An external system must deliver an event.
    ExternalEvent,
}

/// Why a run is paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PauseReason {
    /// The host asked for a pause (`Agent::pause`).
    Manual,
    /// A provider rate limit.
    RateLimit,
    /// A budget was reached; only `Continue` resumes it.
    BudgetReached,
}

/// The tool a tool-call wait is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PendingTool {
    /// The tool's name.
    pub name: ToolName,
    /// The call's arguments.
    // Shared with the call.
    #[cfg_attr(feature = "schema", schemars(with = "Value"))]
    pub arguments: Arc<Value>,
}

/// What a run waits for. A pause carries no call payload; a remote input carries no tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "AwaitTargetRepr", from = "AwaitTargetRepr")]
pub enum AwaitTarget {
    /// A decision or result about one tool call.
    ToolCall {
        /// Why.
        reason: ToolWaitReason,
        /// The call.
        call_id: CallId,
        /// The tool and its arguments.
        tool: PendingTool,
    },
    /// Input from outside, tied to a call id.
    RemoteInput {
        /// Why.
        reason: RemoteInputReason,
        /// The call the input answers.
        call_id: CallId,
    },
    /// A pause.
    Pause(PauseReason),
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum AwaitTargetRepr {
    ToolCall {
        reason: ToolWaitReason,
        call_id: CallId,
        tool: PendingTool,
    },
    RemoteInput {
        reason: RemoteInputReason,
        call_id: CallId,
    },
    Pause {
        reason: PauseReason,
    },
}

impl From<AwaitTarget> for AwaitTargetRepr {
    fn from(t: AwaitTarget) -> Self {
        match t {
            AwaitTarget::ToolCall {
                reason,
                call_id,
                tool,
            } => AwaitTargetRepr::ToolCall {
                reason,
                call_id,
                tool,
            },
            AwaitTarget::RemoteInput { reason, call_id } => {
                AwaitTargetRepr::RemoteInput { reason, call_id }
            }
            AwaitTarget::Pause(reason) => AwaitTargetRepr::Pause { reason },
        }
    }
}

impl From<AwaitTargetRepr> for AwaitTarget {
    fn from(r: AwaitTargetRepr) -> Self {
        match r {
            AwaitTargetRepr::ToolCall {
                reason,
                call_id,
                tool,
            } => AwaitTarget::ToolCall {
                reason,
                call_id,
                tool,
            },
            AwaitTargetRepr::RemoteInput { reason, call_id } => {
                AwaitTarget::RemoteInput { reason, call_id }
            }
            AwaitTargetRepr::Pause { reason } => AwaitTarget::Pause(reason),
        }
    }
}

schema_via_repr!(AwaitTarget => AwaitTargetRepr, "AwaitTarget");

/// The kind of a [`ResumeResult`], for the result-kind matrix and error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ResultKind {
    /// `continue`
    Continue,
    /// `tool_result`
    ToolResult,
    /// `permission`
    Permission,
    /// `input`
    Input,
}

impl ResultKind {
    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultKind::Continue => "continue",
            ResultKind::ToolResult => "tool_result",
            ResultKind::Permission => "permission",
            ResultKind::Input => "input",
        }
    }
}

impl AwaitTarget {
    /// The result kinds this target accepts (SPEC §4 step 8).
    pub fn accepted_kinds(&self) -> &'static [ResultKind] {
        use ResultKind as K;
        match self {
            AwaitTarget::ToolCall { reason, .. } => match reason {
                ToolWaitReason::Permission | ToolWaitReason::ScheduledAction => &[K::Permission],
                ToolWaitReason::ClientExecution => &[K::ToolResult],
                ToolWaitReason::Delegation => &[K::Input, K::ToolResult, K::Permission],
            },
            AwaitTarget::RemoteInput { .. } => &[K::Input],
            AwaitTarget::Pause(PauseReason::Manual | PauseReason::RateLimit) => &[K::Input],
            AwaitTarget::Pause(PauseReason::BudgetReached) => &[K::Continue],
        }
    }

    /// Whether a result of `kind` fits this target.
    pub fn accepts(&self, kind: ResultKind) -> bool {
        self.accepted_kinds().contains(&kind)
    }

    /// The call id this wait is about (none for a pause).
    pub fn call_id(&self) -> Option<&CallId> {
        match self {
            AwaitTarget::ToolCall { call_id, .. } | AwaitTarget::RemoteInput { call_id, .. } => {
                Some(call_id)
            }
            AwaitTarget::Pause(_) => None,
        }
    }

    /// The reason as its snake_case name (`permission`, `user_input`, `manual`, …).
    pub fn reason_name(&self) -> &'static str {
        match self {
            AwaitTarget::ToolCall { reason, .. } => match reason {
                ToolWaitReason::Permission => "permission",
                ToolWaitReason::ClientExecution => "client_execution",
                ToolWaitReason::ScheduledAction => "scheduled_action",
                ToolWaitReason::Delegation => "delegation",
            },
            AwaitTarget::RemoteInput { reason, .. } => match reason {
                RemoteInputReason::UserInput => "user_input",
                RemoteInputReason::ExternalEvent => "external_event",
            },
            AwaitTarget::Pause(reason) => match reason {
                PauseReason::Manual => "manual",
                PauseReason::RateLimit => "rate_limit",
                PauseReason::BudgetReached => "budget_reached",
            },
        }
    }

    /// The target's tag (`tool_call`, `remote_input`, `pause`).
    pub fn kind_name(&self) -> &'static str {
        match self {
            AwaitTarget::ToolCall { .. } => "tool_call",
            AwaitTarget::RemoteInput { .. } => "remote_input",
            AwaitTarget::Pause(_) => "pause",
        }
    }
}

/// The identity fields every ticket and command share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WaitIdentity {
    /// Unique per wait (the agent mints `"{run_id}:wait-{n}"`).
    pub correlation_id: String,
    /// The waiting run.
    pub run_id: RunId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// The executable configuration the run resumes against.
    pub snapshot_id: String,
    /// The tool catalog the run resumes against.
    pub catalog_fingerprint: String,
}

/// A committed promise that a run waits, and for what.
///
/// The target is private and set only by the constructors, so a committed ticket cannot be
/// re-aimed; read it with [`ResumeTicket::target`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ResumeTicket {
    /// Unique per wait.
    pub correlation_id: String,
    /// The waiting run.
    pub run_id: RunId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// The executable configuration the run resumes against.
    pub snapshot_id: String,
    /// The tool catalog the run resumes against.
    pub catalog_fingerprint: String,
    target: AwaitTarget,
    /// After this instant (exclusive) the ticket is expired; `None` never expires.
    pub deadline_ms: Option<u64>,
}

impl ResumeTicket {
    /// A ticket for `target`.
    pub fn new(identity: WaitIdentity, target: AwaitTarget, deadline_ms: Option<u64>) -> Self {
        ResumeTicket {
            correlation_id: identity.correlation_id,
            run_id: identity.run_id,
            thread_id: identity.thread_id,
            snapshot_id: identity.snapshot_id,
            catalog_fingerprint: identity.catalog_fingerprint,
            target,
            deadline_ms,
        }
    }

    /// A wait on one tool call.
    pub fn tool_call(
        identity: WaitIdentity,
        reason: ToolWaitReason,
        call_id: CallId,
        tool: PendingTool,
        deadline_ms: Option<u64>,
    ) -> Self {
        Self::new(
            identity,
            AwaitTarget::ToolCall {
                reason,
                call_id,
                tool,
            },
            deadline_ms,
        )
    }

    /// A wait on remote input.
    pub fn remote_input(
        identity: WaitIdentity,
        reason: RemoteInputReason,
        call_id: CallId,
        deadline_ms: Option<u64>,
    ) -> Self {
        Self::new(
            identity,
            AwaitTarget::RemoteInput { reason, call_id },
            deadline_ms,
        )
    }

    /// A pause.
    pub fn pause(identity: WaitIdentity, reason: PauseReason, deadline_ms: Option<u64>) -> Self {
        Self::new(identity, AwaitTarget::Pause(reason), deadline_ms)
    }

    /// What the run waits for.
    pub fn target(&self) -> &AwaitTarget {
        &self.target
    }

    /// The identity fields.
    pub fn identity(&self) -> WaitIdentity {
        WaitIdentity {
            correlation_id: self.correlation_id.clone(),
            run_id: self.run_id.clone(),
            thread_id: self.thread_id.clone(),
            snapshot_id: self.snapshot_id.clone(),
            catalog_fingerprint: self.catalog_fingerprint.clone(),
        }
    }

    /// Whether the ticket is expired at `now_ms` (strictly after the deadline).
    pub fn is_expired_at(&self, now_ms: u64) -> bool {
        matches!(self.deadline_ms, Some(deadline) if now_ms > deadline)
    }
}

/// A permission answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum PermissionDecision {
    /// Run the call.
    Allow {
        /// An optional note for the audit trail.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Do not run the call; it gets a `denied` result.
    Deny {
        /// Why, shown to the model in the `denied` result.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl PermissionDecision {
    /// `allow` or `deny`.
    pub fn name(&self) -> &'static str {
        match self {
            PermissionDecision::Allow { .. } => "allow",
            PermissionDecision::Deny { .. } => "deny",
        }
    }
}

/// The answer a resume carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "ResumeResultRepr", from = "ResumeResultRepr")]
pub enum ResumeResult {
    /// Go on (a budget pause).
    Continue,
    /// The result of a tool the client executed.
    ToolResult(ToolOutput),
    /// A permission decision.
    Permission(PermissionDecision),
    /// Text input.
    Input(String),
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum ResumeResultRepr {
    Continue,
    ToolResult(ToolOutput),
    Permission(PermissionDecision),
    Input { text: String },
}

impl From<ResumeResult> for ResumeResultRepr {
    fn from(r: ResumeResult) -> Self {
        match r {
            ResumeResult::Continue => ResumeResultRepr::Continue,
            ResumeResult::ToolResult(o) => ResumeResultRepr::ToolResult(o),
            ResumeResult::Permission(p) => ResumeResultRepr::Permission(p),
            ResumeResult::Input(text) => ResumeResultRepr::Input { text },
        }
    }
}

impl From<ResumeResultRepr> for ResumeResult {
    fn from(r: ResumeResultRepr) -> Self {
        match r {
            ResumeResultRepr::Continue => ResumeResult::Continue,
            ResumeResultRepr::ToolResult(o) => ResumeResult::ToolResult(o),
            ResumeResultRepr::Permission(p) => ResumeResult::Permission(p),
            ResumeResultRepr::Input { text } => ResumeResult::Input(text),
        }
    }
}

schema_via_repr!(ResumeResult => ResumeResultRepr, "ResumeResult");

impl ResumeResult {
    /// The result's kind.
    pub fn kind(&self) -> ResultKind {
        match self {
            ResumeResult::Continue => ResultKind::Continue,
            ResumeResult::ToolResult(_) => ResultKind::ToolResult,
            ResumeResult::Permission(_) => ResultKind::Permission,
            ResumeResult::Input(_) => ResultKind::Input,
        }
    }

    /// Allow a permission wait.
    pub fn allow() -> Self {
        ResumeResult::Permission(PermissionDecision::Allow { note: None })
    }

    /// Deny a permission wait with a reason.
    pub fn deny(reason: impl Into<String>) -> Self {
        ResumeResult::Permission(PermissionDecision::Deny {
            reason: Some(reason.into()),
        })
    }
}

/// An answer to a wait. Build it with [`ResumeCommand::from_ticket`] so its identity is the
/// committed ticket's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ResumeCommand {
    /// Must equal the active ticket's.
    pub correlation_id: String,
    /// Must equal the active ticket's.
    pub run_id: RunId,
    /// Must equal the active ticket's.
    pub thread_id: ThreadId,
    /// Must equal the active ticket's.
    pub snapshot_id: String,
    /// Must equal the active ticket's.
    pub catalog_fingerprint: String,
    /// The answer.
    pub result: ResumeResult,
    /// System messages to append to the transcript with the resume (unique non-blank ids).
    #[serde(default)]
    pub context_messages: Vec<Message>,
    /// When the answer was given (checked against the deadline).
    pub now_ms: u64,
}

impl ResumeCommand {
    /// A command answering `ticket`, identity copied from it.
    pub fn from_ticket(ticket: &ResumeTicket, result: ResumeResult, now_ms: u64) -> Self {
        ResumeCommand {
            correlation_id: ticket.correlation_id.clone(),
            run_id: ticket.run_id.clone(),
            thread_id: ticket.thread_id.clone(),
            snapshot_id: ticket.snapshot_id.clone(),
            catalog_fingerprint: ticket.catalog_fingerprint.clone(),
            result,
            context_messages: Vec::new(),
            now_ms,
        }
    }

    /// Adds system context messages.
    pub fn with_context(mut self, messages: Vec<Message>) -> Self {
        self.context_messages = messages;
        self
    }
}

/// Why a resume was rejected. A rejected resume changes nothing; the ticket stays.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "resume_error", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResumeError {
    /// There is no active ticket.
    #[error("no run is waiting on a resume ticket")]
    NotWaiting,
    /// The command answers another wait.
    #[error(
        "correlation id mismatch: the active ticket is {expected:?}, the command names {got:?}"
    )]
    CorrelationMismatch {
        /// The ticket's.
        expected: String,
        /// The command's.
        got: String,
    },
    /// The command names another run.
    #[error("run mismatch: the ticket belongs to run \"{expected}\", the command names \"{got}\"")]
    RunMismatch {
        /// The ticket's.
        expected: RunId,
        /// The command's.
        got: RunId,
    },
    /// The command names another thread.
    #[error(
        "thread mismatch: the ticket belongs to thread \"{expected}\", the command names \"{got}\""
    )]
    ThreadMismatch {
        /// The ticket's.
        expected: ThreadId,
        /// The command's.
        got: ThreadId,
    },
    /// The command was built against another executable configuration.
    #[error(
        "snapshot mismatch: the ticket was issued under snapshot {expected:?}, the command names {got:?}"
    )]
    SnapshotMismatch {
        /// The ticket's.
        expected: String,
        /// The command's.
        got: String,
    },
    /// The command was built against another tool catalog.
    #[error("catalog fingerprint mismatch: the ticket has {expected:?}, the command names {got:?}")]
    FingerprintMismatch {
        /// The ticket's.
        expected: String,
        /// The command's.
        got: String,
    },
    /// The answer came after the deadline.
    #[error("the ticket expired: deadline {deadline_ms} ms, answer at {now_ms} ms")]
    Expired {
        /// The ticket's deadline.
        deadline_ms: u64,
        /// The command's time.
        now_ms: u64,
    },
    /// The answer's kind does not fit what the run waits for.
    #[error("a {target} wait accepts {} results, got {}", kinds_list(expected), got.as_str())]
    ResultKindMismatch {
        /// The target, as `kind/reason` (e.g. `tool_call/permission`).
        target: String,
        /// The kinds it accepts.
        expected: Vec<ResultKind>,
        /// The command's kind.
        got: ResultKind,
    },
    /// A tool result for another call.
    #[error("the tool result names call \"{got}\", the ticket waits on call \"{expected}\"")]
    ToolCallMismatch {
        /// The ticket's call.
        expected: CallId,
        /// The result's call.
        got: CallId,
    },
    /// A context message that is not a system message.
    #[error("context message {index} has role {}; only system messages are allowed", role.as_str())]
    InvalidContextRole {
        /// Its position in `context_messages`.
        index: usize,
        /// Its role.
        role: Role,
    },
    /// A context message with empty content or a missing, blank or repeated id.
    #[error("context message {index} is invalid: {reason}")]
    InvalidContextMessage {
        /// Its position in `context_messages`.
        index: usize,
        /// What is wrong.
        reason: String,
    },
}

impl ResumeError {
    /// The stable snake_case code (`not_waiting`, `correlation_mismatch`, …).
    pub fn code(&self) -> &'static str {
        match self {
            ResumeError::NotWaiting => "not_waiting",
            ResumeError::CorrelationMismatch { .. } => "correlation_mismatch",
            ResumeError::RunMismatch { .. } => "run_mismatch",
            ResumeError::ThreadMismatch { .. } => "thread_mismatch",
            ResumeError::SnapshotMismatch { .. } => "snapshot_mismatch",
            ResumeError::FingerprintMismatch { .. } => "fingerprint_mismatch",
            ResumeError::Expired { .. } => "expired",
            ResumeError::ResultKindMismatch { .. } => "result_kind_mismatch",
            ResumeError::ToolCallMismatch { .. } => "tool_call_mismatch",
            ResumeError::InvalidContextRole { .. } => "invalid_context_role",
            ResumeError::InvalidContextMessage { .. } => "invalid_context_message",
        }
    }
}

fn kinds_list(kinds: &[ResultKind]) -> String {
    kinds
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Checks `cmd` against the active ticket, in the order of SPEC §4; the first failure wins.
pub fn validate_resume(
    active_ticket: Option<&ResumeTicket>,
    cmd: &ResumeCommand,
) -> Result<(), ResumeError> {
    let ticket = active_ticket.ok_or(ResumeError::NotWaiting)?;
    if cmd.correlation_id != ticket.correlation_id {
        return Err(ResumeError::CorrelationMismatch {
            expected: ticket.correlation_id.clone(),
            got: cmd.correlation_id.clone(),
        });
    }
    if cmd.run_id != ticket.run_id {
        return Err(ResumeError::RunMismatch {
            expected: ticket.run_id.clone(),
            got: cmd.run_id.clone(),
        });
    }
    if cmd.thread_id != ticket.thread_id {
        return Err(ResumeError::ThreadMismatch {
            expected: ticket.thread_id.clone(),
            got: cmd.thread_id.clone(),
        });
    }
    if cmd.snapshot_id != ticket.snapshot_id {
        return Err(ResumeError::SnapshotMismatch {
            expected: ticket.snapshot_id.clone(),
            got: cmd.snapshot_id.clone(),
        });
    }
    if cmd.catalog_fingerprint != ticket.catalog_fingerprint {
        return Err(ResumeError::FingerprintMismatch {
            expected: ticket.catalog_fingerprint.clone(),
            got: cmd.catalog_fingerprint.clone(),
        });
    }
    if let Some(deadline_ms) = ticket.deadline_ms
        && cmd.now_ms > deadline_ms
    {
        return Err(ResumeError::Expired {
            deadline_ms,
            now_ms: cmd.now_ms,
        });
    }
    let target = ticket.target();
    let kind = cmd.result.kind();
    if !target.accepts(kind) {
        return Err(ResumeError::ResultKindMismatch {
            target: format!("{}/{}", target.kind_name(), target.reason_name()),
            expected: target.accepted_kinds().to_vec(),
            got: kind,
        });
    }
    if let (
        AwaitTarget::ToolCall {
            reason, call_id, ..
        },
        ResumeResult::ToolResult(output),
    ) = (target, &cmd.result)
        && *reason != ToolWaitReason::Delegation
        && output.call_id != *call_id
    {
        return Err(ResumeError::ToolCallMismatch {
            expected: call_id.clone(),
            got: output.call_id.clone(),
        });
    }
    validate_context_messages(&cmd.context_messages)
}

/// Step 10 of [`validate_resume`]: roles first (for every message), then content and ids.
pub(crate) fn validate_context_messages(messages: &[Message]) -> Result<(), ResumeError> {
    for (index, message) in messages.iter().enumerate() {
        if message.role() != Role::System {
            return Err(ResumeError::InvalidContextRole {
                index,
                role: message.role(),
            });
        }
    }
    let mut seen: Vec<&str> = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        if !message.has_content() {
            return Err(ResumeError::InvalidContextMessage {
                index,
                reason: "content is empty".into(),
            });
        }
        let id = match message.id() {
            Some(id) if !id.trim().is_empty() => id,
            _ => {
                return Err(ResumeError::InvalidContextMessage {
                    index,
                    reason: "a context message needs a non-blank id".into(),
                });
            }
        };
        if seen.contains(&id) {
            return Err(ResumeError::InvalidContextMessage {
                index,
                reason: format!("id {id:?} is used by an earlier context message"),
            });
        }
        seen.push(id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn identity() -> WaitIdentity {
        WaitIdentity {
            correlation_id: "r:wait-1".into(),
            run_id: "r".into(),
            thread_id: "t".into(),
            snapshot_id: "s".into(),
            catalog_fingerprint: "f".into(),
        }
    }

    #[test]
    fn mixed_target_fields_are_rejected() {
        let pause_with_call = json!({"type":"pause","reason":"manual","call_id":"c"});
        assert!(serde_json::from_value::<AwaitTarget>(pause_with_call).is_err());
        let remote_with_tool = json!({"type":"remote_input","reason":"user_input","call_id":"c",
                                      "tool":{"name":"x","arguments":{}}});
        assert!(serde_json::from_value::<AwaitTarget>(remote_with_tool).is_err());
    }

    #[test]
    fn resume_result_wire_shapes() {
        assert_eq!(
            serde_json::to_value(ResumeResult::allow()).unwrap(),
            json!({"type":"permission","decision":"allow"})
        );
        assert_eq!(
            serde_json::to_value(ResumeResult::Input("hi".into())).unwrap(),
            json!({"type":"input","text":"hi"})
        );
        let tool = ResumeResult::ToolResult(ToolOutput::text("c", "ok"));
        let v = serde_json::to_value(&tool).unwrap();
        assert_eq!(v["type"], "tool_result");
        assert_eq!(v["call_id"], "c");
        assert_eq!(serde_json::from_value::<ResumeResult>(v).unwrap(), tool);
    }

    #[test]
    fn a_valid_command_passes_and_a_missing_ticket_fails_first() {
        let ticket = ResumeTicket::pause(identity(), PauseReason::Manual, Some(10));
        let cmd = ResumeCommand::from_ticket(&ticket, ResumeResult::Input("go".into()), 10);
        assert_eq!(validate_resume(Some(&ticket), &cmd), Ok(()));
        assert_eq!(validate_resume(None, &cmd), Err(ResumeError::NotWaiting));
    }
}
