//! What the agent hands to the host: [`Output`]s, drained in the order they must be acted on.
//!
//! - [`Action`]: work for the host (call the model, execute tools). At most one is outstanding
//!   per run, and an outcome must name the run and step (or call) it answers.
//! - `Commit`: a [`ThreadCommit`] the host persists *before* acting on anything that follows,
//!   so a fact is always durable before anything acts on it.
//! - `Event`: an [`AgentEvent`] for UIs and the reducer (§9). For one input, its commits come
//!   first, then its events, then at most one action; `run_end` always follows the terminal
//!   commit.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::commit::{CommitOperation, OperationId, ThreadCommit};
use crate::ids::{CallId, RunId, Step, ToolName};
use crate::message::{AssistantMessage, ContentBlock, Message, ResultOutcome, ToolCall};
use crate::resume::{ResultKind, ResumeTicket};
use crate::run::EndCause;

/// Work the host must do and answer. Exhaustive on purpose: a new kind must break an
/// embedder's `match` loudly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    /// Call the model; read the request with [`Agent::model_request`](super::Agent::model_request)
    /// (system prompt, transcript, tools: borrowed, never copied per step). Answer with
    /// `model_delta`* then `model_done` or `model_failed` for this run and step.
    CallModel {
        /// The run.
        run_id: RunId,
        /// The step (model call number within the run, from 1).
        step: Step,
        /// True for the last call the step budget allows (a host may hide tools).
        final_step: bool,
    },
    /// Run these tools (concurrently if you like) and answer each with `tool_done`.
    ExecuteTools {
        /// The run.
        run_id: RunId,
        /// The step whose assistant message asked for them.
        step: Step,
        /// The calls, in call order.
        calls: Vec<ToolCall>,
    },
}

/// One output of the agent. Exhaustive on purpose (see [`Action`]).
///
/// In JSON the kind and the payload sit side by side, `{"type": "event", "value": {…}}`,
/// because [`Action`] and [`AgentEvent`] carry their own `type` tag: an internal tag would
/// write the `type` key twice, and such JSON does not read back (a snapshot holding unpolled
/// outputs could not be restored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Output {
    /// Work for the host.
    Action(Action),
    /// A durable fact to persist before acting on what follows, with its operation fields
    /// (SPEC §7.1): apply it with [`CommitLog::commit_operation`](crate::store::CommitLog) via
    /// [`AgentCommit::into_operation`]. Boxed, so that every output stays small to move (a
    /// commit is the largest and one of the rarest outputs).
    Commit(Box<AgentCommit>),
    /// A notification.
    Event(AgentEvent),
}

/// A commit the agent emitted, with the operation fields that fence it (SPEC §7.1).
///
/// The agent counts its own commits: `ordinal` is how many commits of this run it emitted
/// before (from 0, continuing from the store's count after recovery) and
/// `expected_thread_version` is the thread's commit count this commit builds on. A host
/// persists it with [`CommitLog::commit_operation`](crate::store::CommitLog::commit_operation) on
/// [`into_operation`](AgentCommit::into_operation), so a retry after a lost acknowledgement is a
/// harmless duplicate and a second writer on the same thread is fenced.
///
/// The payload hash is not stored here: hashing is SHA-256 over the commit's canonical JSON, a
/// cost a host that drops or batches commits should not pay per output. It is computed when
/// asked for ([`payload_hash`](AgentCommit::payload_hash), [`into_operation`](AgentCommit::into_operation)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AgentCommit {
    /// The commit.
    pub commit: ThreadCommit,
    /// Commits of this run emitted before this one (from 0).
    pub ordinal: u64,
    /// The thread's commit count this commit builds on.
    pub expected_thread_version: u64,
}

impl AgentCommit {
    /// The idempotency key: the run and `ordinal`.
    pub fn operation_id(&self) -> OperationId {
        OperationId {
            run_id: self.commit.run_id().clone(),
            ordinal: self.ordinal,
        }
    }

    /// SHA-256, lowercase hex, of the commit's canonical JSON (computed on each call).
    pub fn payload_hash(&self) -> String {
        self.commit.payload_hash()
    }

    /// The operation to apply with [`CommitLog::commit_operation`](crate::store::CommitLog::commit_operation).
    pub fn into_operation(self) -> CommitOperation {
        CommitOperation::new(self.commit, self.ordinal, self.expected_thread_version)
    }
}

/// Where an appended message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MessageOrigin {
    /// A steering message taken at a boundary.
    Steering,
    /// A follow-up taken after a natural stop.
    FollowUp,
    /// A tool result (appended in call order after the batch).
    ToolResult,
    /// A system context message that came with a resume.
    ResumeContext,
    /// The text of a resume `Input`.
    ResumeInput,
}

/// A notification about a run, for UIs and the reducer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// A run started with this user message (none for a continued run, SPEC §8.8).
    RunStart {
        /// The run.
        run_id: RunId,
        /// The prompt; absent when the run continues the transcript as it stands, or when
        /// the prompt has several messages.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<Message>,
        /// The prompt's messages when it has several (SPEC §8.10), in order; empty otherwise.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        messages: Vec<Message>,
    },
    /// Progress inside a run.
    Loop {
        /// The run.
        run_id: RunId,
        /// What happened.
        event: LoopEvent,
    },
    /// `clear_queues` withdrew these queued messages, which the run had not taken (SPEC §8.2;
    /// nothing committed changed). Possibly empty; while idle both are empty and there is no
    /// run.
    QueuesCleared {
        /// The active run whose queues were cleared; absent while idle.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<RunId>,
        /// The withdrawn steering messages, oldest first.
        steering: Vec<Message>,
        /// The withdrawn follow-ups, oldest first.
        follow_ups: Vec<Message>,
    },
    /// A run ended; always after its terminal commit.
    RunEnd {
        /// The run.
        run_id: RunId,
        /// How it ended.
        result: RunResult,
    },
}

impl AgentEvent {
    /// The run the event is about (none for `queues_cleared` while idle).
    pub fn run_id(&self) -> Option<&RunId> {
        match self {
            AgentEvent::RunStart { run_id, .. }
            | AgentEvent::Loop { run_id, .. }
            | AgentEvent::RunEnd { run_id, .. } => Some(run_id),
            AgentEvent::QueuesCleared { run_id, .. } => run_id.as_ref(),
        }
    }
}

/// How a run ended, with the input it never used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RunResult {
    /// The end cause (also in the terminal commit).
    pub cause: EndCause,
    /// Model calls made.
    pub steps: Step,
    /// Queued steering and follow-ups that never entered the transcript, steering first.
    /// They are returned here and injected nowhere.
    pub unconsumed: Vec<Message>,
}

/// Progress inside a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum LoopEvent {
    /// Streamed model text (live only; the assistant message is the record).
    TextDelta {
        /// The step.
        step: Step,
        /// The text piece.
        text: String,
    },
    /// Streamed model reasoning (live only, §2.1; the assistant message is the record).
    ThinkingDelta {
        /// The step.
        step: Step,
        /// The reasoning piece.
        text: String,
    },
    /// The model's answer, appended to the transcript.
    AssistantMessage {
        /// The step.
        step: Step,
        /// The answer, written with `"role":"assistant"` like every message on the wire.
        #[serde(with = "crate::message::assistant_with_role")]
        #[cfg_attr(
            feature = "schema",
            schemars(schema_with = "crate::message::assistant_with_role::schema")
        )]
        message: Arc<AssistantMessage>,
    },
    /// A message appended to the transcript (steering, follow-up, tool result, resume).
    MessageAppended {
        /// Why it was appended.
        origin: MessageOrigin,
        /// The message.
        message: Message,
    },
    /// A tool call is about to execute (call order).
    ToolStart {
        /// The step.
        step: Step,
        /// The call.
        call_id: CallId,
        /// The tool.
        name: ToolName,
        /// Its arguments.
        // Shared with the call.
        #[cfg_attr(feature = "schema", schemars(with = "Value"))]
        arguments: Arc<Value>,
    },
    /// Live tool progress (never committed).
    ToolProgress {
        /// The call.
        call_id: CallId,
        /// The progress content.
        content: Vec<ContentBlock>,
    },
    /// A tool call finished (completion order).
    ToolEnd {
        /// The call.
        call_id: CallId,
        /// The tool.
        tool_name: ToolName,
        /// Whether its result is an error.
        is_error: bool,
        /// `executed`, or `malformed` when the output was replaced.
        outcome: ResultOutcome,
    },
    /// The core wrote a result itself (skipped, denied, expired, truncated, interrupted).
    SyntheticResult {
        /// The call.
        call_id: CallId,
        /// The tool.
        tool_name: ToolName,
        /// What happened.
        outcome: ResultOutcome,
    },
    /// The run waits on this (committed) ticket.
    Awaiting {
        /// The ticket.
        // Boxed: a ticket is much larger than any other event.
        ticket: Box<ResumeTicket>,
    },
    /// A resume was accepted; the run is Running again.
    Resumed {
        /// The wait that was answered.
        correlation_id: String,
        /// The kind of answer.
        result: ResultKind,
    },
    /// The run's input closed: `steer` and `follow_up` are rejected from here on.
    InputClosed,
    /// The thread was compacted (SPEC §8.9; committed just before): the model context is now
    /// the summary followed by the transcript from `keep_from` on. The transcript itself is
    /// unchanged.
    Compacted {
        /// Where the model context's transcript part now begins.
        keep_from: usize,
        /// Transcript messages that left the model context with this compaction (`keep_from`
        /// minus the previous context start).
        removed: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_read_back_from_their_json() {
        let outputs = [
            Output::Action(Action::CallModel {
                run_id: "r".into(),
                step: 1,
                final_step: false,
            }),
            Output::Event(AgentEvent::Loop {
                run_id: "r".into(),
                event: LoopEvent::InputClosed,
            }),
        ];
        for output in outputs {
            let json = serde_json::to_string(&output).unwrap();
            let value: Value = serde_json::from_str(&json).unwrap();
            assert!(value["value"]["type"].is_string(), "{json}");
            assert_eq!(serde_json::from_str::<Output>(&json).unwrap(), output);
        }
    }
}
