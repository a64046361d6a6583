//! Misuse errors of the agent (SPEC §10).
//!
//! A misuse error says what was expected and what arrived, and it never changes the agent:
//! its serialized state is identical before and after. The end of a run, failure included, is
//! an [`EndCause`](crate::EndCause), never an error. `Internal` is kept apart from misuse: it
//! reports a broken invariant of the crate itself (a bug), and is `debug_assert!`ed.

use serde::{Deserialize, Serialize};

use crate::ids::{CallId, RunId};
use crate::resume::ResumeError;
use crate::schema_via::schema_via_repr;

/// A rejected input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(into = "AgentErrorRepr", from = "AgentErrorRepr")]
#[non_exhaustive]
pub enum AgentError {
    /// `prompt` while a run is Running or Awaiting.
    #[error("a run is already active ({active_run}); prompt again after its run_end")]
    Busy {
        /// The active run.
        active_run: RunId,
    },
    /// `steer` / `follow_up` while idle or after the run's input closed.
    #[error("queued input is not accepted: {reason}")]
    NotAccepting {
        /// Why.
        reason: String,
    },
    /// A model or tool outcome for another run, step, or no outstanding action.
    #[error("unexpected outcome: expected {expected}, got {got}")]
    UnexpectedOutcome {
        /// What the agent waits for.
        expected: String,
        /// What arrived.
        got: String,
    },
    /// `tool_done` for a call that is not in the executing batch.
    #[error(
        "call {call_id} is not in the executing batch (executing: {})",
        call_list(executing)
    )]
    UnknownCall {
        /// The call named.
        call_id: CallId,
        /// The calls that are executing.
        executing: Vec<CallId>,
    },
    /// A second `tool_done` for the same call.
    #[error("call {call_id} already has its outcome")]
    DuplicateOutcome {
        /// The call named.
        call_id: CallId,
    },
    /// A resume that fails SPEC §4.
    #[error("resume rejected: {0}")]
    Resume(ResumeError),
    /// An input that means nothing in the current state.
    #[error("invalid in this state: expected {expected}, but {actual}")]
    InvalidState {
        /// The state the input needs.
        expected: String,
        /// The state the agent is in.
        actual: String,
    },
    /// `expire_wait` before the deadline, or for a wait without one.
    #[error("{}", not_expired_message(*.deadline_ms, *.now_ms))]
    NotExpired {
        /// The ticket's deadline (none: the wait never expires).
        deadline_ms: Option<u64>,
        /// The time given.
        now_ms: u64,
    },
    /// A structurally bad input (empty id, bad message shape, bad configuration).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A broken internal invariant: a bug in runcore, never caused by input.
    #[error("internal invariant violated (a runcore bug): {0}")]
    Internal(String),
}

fn call_list(calls: &[CallId]) -> String {
    if calls.is_empty() {
        return "none".to_owned();
    }
    calls
        .iter()
        .map(CallId::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

fn not_expired_message(deadline_ms: Option<u64>, now_ms: u64) -> String {
    match deadline_ms {
        Some(deadline) => {
            format!("the wait is not expired: deadline {deadline} ms, now {now_ms} ms")
        }
        None => format!("the wait has no deadline and never expires (now {now_ms} ms)"),
    }
}

impl From<ResumeError> for AgentError {
    fn from(e: ResumeError) -> Self {
        AgentError::Resume(e)
    }
}

impl AgentError {
    /// The stable snake_case kind, as the driver writes it (`busy`, `resume`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            AgentError::Busy { .. } => "busy",
            AgentError::NotAccepting { .. } => "not_accepting",
            AgentError::UnexpectedOutcome { .. } => "unexpected_outcome",
            AgentError::UnknownCall { .. } => "unknown_call",
            AgentError::DuplicateOutcome { .. } => "duplicate_outcome",
            AgentError::Resume(_) => "resume",
            AgentError::InvalidState { .. } => "invalid_state",
            AgentError::NotExpired { .. } => "not_expired",
            AgentError::InvalidInput(_) => "invalid_input",
            AgentError::Internal(_) => "internal",
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        AgentError::InvalidInput(reason.into())
    }

    pub(crate) fn state(expected: impl Into<String>, actual: impl Into<String>) -> Self {
        AgentError::InvalidState {
            expected: expected.into(),
            actual: actual.into(),
        }
    }

    pub(crate) fn unexpected(expected: impl Into<String>, got: impl Into<String>) -> Self {
        AgentError::UnexpectedOutcome {
            expected: expected.into(),
            got: got.into(),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
enum AgentErrorRepr {
    Busy {
        active_run: RunId,
    },
    NotAccepting {
        reason: String,
    },
    UnexpectedOutcome {
        expected: String,
        got: String,
    },
    UnknownCall {
        call_id: CallId,
        executing: Vec<CallId>,
    },
    DuplicateOutcome {
        call_id: CallId,
    },
    Resume(ResumeError),
    InvalidState {
        expected: String,
        actual: String,
    },
    NotExpired {
        deadline_ms: Option<u64>,
        now_ms: u64,
    },
    InvalidInput {
        reason: String,
    },
    Internal {
        detail: String,
    },
}

impl From<AgentError> for AgentErrorRepr {
    fn from(e: AgentError) -> Self {
        match e {
            AgentError::Busy { active_run } => AgentErrorRepr::Busy { active_run },
            AgentError::NotAccepting { reason } => AgentErrorRepr::NotAccepting { reason },
            AgentError::UnexpectedOutcome { expected, got } => {
                AgentErrorRepr::UnexpectedOutcome { expected, got }
            }
            AgentError::UnknownCall { call_id, executing } => {
                AgentErrorRepr::UnknownCall { call_id, executing }
            }
            AgentError::DuplicateOutcome { call_id } => {
                AgentErrorRepr::DuplicateOutcome { call_id }
            }
            AgentError::Resume(e) => AgentErrorRepr::Resume(e),
            AgentError::InvalidState { expected, actual } => {
                AgentErrorRepr::InvalidState { expected, actual }
            }
            AgentError::NotExpired {
                deadline_ms,
                now_ms,
            } => AgentErrorRepr::NotExpired {
                deadline_ms,
                now_ms,
            },
            AgentError::InvalidInput(reason) => AgentErrorRepr::InvalidInput { reason },
            AgentError::Internal(detail) => AgentErrorRepr::Internal { detail },
        }
    }
}

impl From<AgentErrorRepr> for AgentError {
    fn from(r: AgentErrorRepr) -> Self {
        match r {
            AgentErrorRepr::Busy { active_run } => AgentError::Busy { active_run },
            AgentErrorRepr::NotAccepting { reason } => AgentError::NotAccepting { reason },
            AgentErrorRepr::UnexpectedOutcome { expected, got } => {
                AgentError::UnexpectedOutcome { expected, got }
            }
            AgentErrorRepr::UnknownCall { call_id, executing } => {
                AgentError::UnknownCall { call_id, executing }
            }
            AgentErrorRepr::DuplicateOutcome { call_id } => {
                AgentError::DuplicateOutcome { call_id }
            }
            AgentErrorRepr::Resume(e) => AgentError::Resume(e),
            AgentErrorRepr::InvalidState { expected, actual } => {
                AgentError::InvalidState { expected, actual }
            }
            AgentErrorRepr::NotExpired {
                deadline_ms,
                now_ms,
            } => AgentError::NotExpired {
                deadline_ms,
                now_ms,
            },
            AgentErrorRepr::InvalidInput { reason } => AgentError::InvalidInput(reason),
            AgentErrorRepr::Internal { detail } => AgentError::Internal(detail),
        }
    }
}

schema_via_repr!(AgentError => AgentErrorRepr, "AgentError");

/// The kind of a JSON value as error messages name it ("a string", "an object", ...).
pub(crate) fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_serialize_with_their_kind() {
        let e = AgentError::Resume(ResumeError::NotWaiting);
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"kind":"resume","resume_error":"not_waiting"})
        );
        let e = AgentError::InvalidInput("empty id".into());
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"kind":"invalid_input","reason":"empty id"})
        );
        assert_eq!(e.kind(), "invalid_input");
        let back: AgentError = serde_json::from_value(serde_json::to_value(&e).unwrap()).unwrap();
        assert_eq!(back, e);
    }
}
