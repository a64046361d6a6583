//! The agent state a UI keeps, derived from events by a pure reducer (SPEC §9).
//!
//! [`reduce`] takes the state by value and the event by reference and returns the next state:
//! the caller's event is never mutated, and a caller that wants the old state keeps a clone.
//! Each event costs time proportional to the event, never to the transcript (messages are
//! appended to the owned vector, nothing is copied or scanned).
//!
//! Rules:
//! - `run_start` always applies: status Running, the active run id, the user message
//!   or messages appended (a continued run has none), streaming text and pending ids cleared, awaiting cleared, diagnostics kept.
//! - A `loop` or `run_end` event whose run id is not the active run (or while Idle) leaves the
//!   state unchanged: late events of an old run are ignored.
//! - `text_delta` appends to `streaming_text` and `thinking_delta` to `streaming_thinking`
//!   (§2.1); `assistant_message` clears both and appends the message; `message_appended` appends; `tool_start` adds the id to the pending ids;
//!   `tool_end` and `synthetic_result` remove it; `awaiting` and `resumed` move the status;
//!   `compacted` moves `context_start` (the messages stay whole);
//!   `run_end` → Idle with `last_end`, pending ids cleared.
//!
//! After `run_end`, `messages` equals the committed transcript.

use serde::{Deserialize, Serialize};

use crate::ids::{CallId, RunId};
use crate::message::Message;
use crate::resume::AwaitTarget;
use crate::run::EndCause;

use super::events::{AgentEvent, LoopEvent};

/// The status a UI shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    /// No run is active.
    #[default]
    Idle,
    /// A run is executing.
    Running,
    /// A run waits on a ticket.
    Awaiting,
}

/// What a UI knows, derived from events only.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentState {
    /// Idle, Running or Awaiting.
    pub status: AgentStatus,
    /// The transcript as far as events told it.
    pub messages: Vec<Message>,
    /// Where the model context's transcript part begins (SPEC §8.9): the latest compaction's
    /// `keep_from`, 0 without one. `messages` stays the whole transcript.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub context_start: usize,
    /// The active run.
    pub active_run_id: Option<RunId>,
    /// How the last run ended.
    pub last_end: Option<EndCause>,
    /// Text streamed for the current model call.
    pub streaming_text: String,
    /// Reasoning streamed for the current model call (§2.1); absent from the serialized state
    /// when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub streaming_thinking: String,
    /// Calls started and not yet answered, in start order.
    pub pending_tool_call_ids: Vec<CallId>,
    /// What the active run waits for.
    pub awaiting: Option<AwaitTarget>,
    /// Problems noticed while delivering events (e.g. failing observers).
    pub diagnostics: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl AgentState {
    /// A state that already holds a transcript (e.g. after recovery).
    pub fn with_messages(messages: Vec<Message>) -> Self {
        AgentState {
            messages,
            ..Self::default()
        }
    }

    fn is_active(&self, run_id: &RunId) -> bool {
        self.status != AgentStatus::Idle && self.active_run_id.as_ref() == Some(run_id)
    }
}

/// The next state after `event` (see the module docs).
#[must_use]
pub fn reduce(mut state: AgentState, event: &AgentEvent) -> AgentState {
    match event {
        AgentEvent::RunStart {
            run_id,
            message,
            messages,
        } => {
            state.status = AgentStatus::Running;
            state.active_run_id = Some(run_id.clone());
            if let Some(message) = message {
                state.messages.push(message.clone());
            }
            state.messages.extend(messages.iter().cloned());
            state.streaming_text.clear();
            state.streaming_thinking.clear();
            state.pending_tool_call_ids.clear();
            state.awaiting = None;
        }
        AgentEvent::Loop { run_id, event } if state.is_active(run_id) => match event {
            LoopEvent::TextDelta { text, .. } => state.streaming_text.push_str(text),
            LoopEvent::ThinkingDelta { text, .. } => state.streaming_thinking.push_str(text),
            LoopEvent::AssistantMessage { message, .. } => {
                state.streaming_text.clear();
                state.streaming_thinking.clear();
                state.messages.push(Message::Assistant(message.clone()));
            }
            LoopEvent::MessageAppended { message, .. } => state.messages.push(message.clone()),
            LoopEvent::ToolStart { call_id, .. } => {
                if !state.pending_tool_call_ids.contains(call_id) {
                    state.pending_tool_call_ids.push(call_id.clone());
                }
            }
            LoopEvent::ToolEnd { call_id, .. } | LoopEvent::SyntheticResult { call_id, .. } => {
                state.pending_tool_call_ids.retain(|id| id != call_id);
            }
            LoopEvent::Awaiting { ticket } => {
                state.status = AgentStatus::Awaiting;
                state.awaiting = Some(ticket.target().clone());
            }
            LoopEvent::Resumed { .. } => {
                state.status = AgentStatus::Running;
                state.awaiting = None;
            }
            LoopEvent::Compacted { keep_from, .. } => state.context_start = *keep_from,
            LoopEvent::ToolProgress { .. } | LoopEvent::InputClosed => {}
        },
        AgentEvent::RunEnd { run_id, result } if state.is_active(run_id) => {
            state.status = AgentStatus::Idle;
            state.last_end = Some(result.cause.clone());
            state.pending_tool_call_ids.clear();
            state.streaming_text.clear();
            state.streaming_thinking.clear();
            state.awaiting = None;
            state.active_run_id = None;
        }
        // A late event of another run: ignored. Queued input is not state (§9).
        AgentEvent::Loop { .. } | AgentEvent::RunEnd { .. } | AgentEvent::QueuesCleared { .. } => {}
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::events::RunResult;

    fn start(run: &str) -> AgentEvent {
        AgentEvent::RunStart {
            run_id: run.into(),
            message: Some(Message::user("hi")),
            messages: Vec::new(),
        }
    }

    #[test]
    fn stale_events_leave_state_equal() {
        let s = reduce(AgentState::default(), &start("r2"));
        let stale = AgentEvent::Loop {
            run_id: "r1".into(),
            event: LoopEvent::TextDelta {
                step: 1,
                text: "x".into(),
            },
        };
        let end_old = AgentEvent::RunEnd {
            run_id: "r1".into(),
            result: RunResult {
                cause: EndCause::Cancelled,
                steps: 0,
                unconsumed: vec![],
            },
        };
        let after = reduce(reduce(s.clone(), &stale), &end_old);
        assert_eq!(after, s);
    }

    #[test]
    fn deltas_stream_and_the_message_clears_them() {
        let mut s = reduce(AgentState::default(), &start("r"));
        for t in ["a", "b"] {
            s = reduce(
                s,
                &AgentEvent::Loop {
                    run_id: "r".into(),
                    event: LoopEvent::TextDelta {
                        step: 1,
                        text: t.into(),
                    },
                },
            );
        }
        assert_eq!(s.streaming_text, "ab");
        s = reduce(
            s,
            &AgentEvent::Loop {
                run_id: "r".into(),
                event: LoopEvent::AssistantMessage {
                    step: 1,
                    message: crate::message::AssistantMessage::text("ab").into(),
                },
            },
        );
        assert_eq!(s.streaming_text, "");
        assert_eq!(s.messages.len(), 2);
    }
}
