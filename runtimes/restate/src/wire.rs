//! The JSON a caller sends and gets back, and the §10 error bodies of terminal errors.

use restate_sdk::prelude::TerminalError;
use runcore::store::StoreError;
use runcore::{Agent, AgentError, EndCause, Message, ResumeResult, ResumeTicket, RunId, ThreadId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The body of a `resume` call: the answer, and optionally the wait it answers.
///
/// `{"result": {"type": "permission", "decision": "allow"}}` answers the current wait;
/// with `"correlation_id"` (the ticket's) a decision meant for an earlier wait is refused
/// (`resume` / `correlation_mismatch`) instead of answering a later one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// The answer.
    pub result: ResumeResult,
    /// The ticket's correlation id; absent, the current ticket's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// System messages to append with the decision (SPEC §8.5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_messages: Vec<Message>,
}

/// How a run ended: its id and cause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnd {
    /// The run.
    pub run_id: RunId,
    /// Its end cause.
    pub cause: EndCause,
}

/// What every handler answers, and what the shared `state` handler reads: the thread as its
/// object last saved it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadView {
    /// The thread (the object's key).
    pub thread_id: ThreadId,
    /// The thread's commit count in the store.
    pub version: u64,
    /// `idle`, `running` or `awaiting`.
    pub status: String,
    /// The active run, if any.
    pub active_run: Option<RunId>,
    /// The ticket of the wait, while awaiting.
    pub ticket: Option<ResumeTicket>,
    /// The latest run that ended.
    pub last_end: Option<RunEnd>,
    /// The transcript's length.
    pub messages: usize,
    /// Queued steering and follow-up messages.
    pub queued: (usize, usize),
}

impl ThreadView {
    /// The view of `agent` at store version `version`.
    pub fn of(agent: &Agent, version: u64) -> ThreadView {
        let status = if agent.current_ticket().is_some() {
            "awaiting"
        } else if agent.active_run_id().is_some() {
            "running"
        } else {
            "idle"
        };
        ThreadView {
            thread_id: agent.thread_id().clone(),
            version,
            status: status.to_owned(),
            active_run: agent.active_run_id().cloned(),
            ticket: agent.current_ticket().cloned(),
            last_end: agent.last_end().map(|(run_id, cause)| RunEnd {
                run_id: run_id.clone(),
                cause: cause.clone(),
            }),
            messages: agent.transcript().len(),
            queued: agent.queued(),
        }
    }

    /// The view of a thread the object has never seen.
    pub fn unknown(thread_id: ThreadId) -> ThreadView {
        ThreadView {
            thread_id,
            version: 0,
            status: "idle".to_owned(),
            active_run: None,
            ticket: None,
            last_end: None,
            messages: 0,
            queued: (0, 0),
        }
    }
}

/// The HTTP-like code of a misuse error (the input is wrong for the thread's state).
pub const MISUSE_CODE: u16 = 409;
/// The code of a body that is not what the handler reads.
pub const INVALID_CODE: u16 = 400;
/// The code of a commit the store refused (a fence, a conflict).
pub const STORE_REFUSED_CODE: u16 = 409;

/// The §10 body of an agent error: `{"kind", "message", …its fields}`, as the JSON-lines
/// driver writes it.
pub fn agent_error_body(error: &AgentError) -> Value {
    serde_json::to_value(runcore::driver::error_body(error))
        .unwrap_or_else(|_| serde_json::json!({"kind": error.kind(), "message": error.to_string()}))
}

/// A terminal error carrying the §10 body of a misuse input: the engine does not retry it,
/// and the thread is unchanged.
pub fn misuse(error: &AgentError) -> TerminalError {
    let code = match error {
        AgentError::InvalidInput(_) => INVALID_CODE,
        _ => MISUSE_CODE,
    };
    TerminalError::new_with_code(code, agent_error_body(error).to_string())
}

/// A terminal error for a body that does not parse (`invalid_json`).
pub fn invalid_json(message: impl Into<String>) -> TerminalError {
    let body = serde_json::json!({"kind": "invalid_json", "message": message.into()});
    TerminalError::new_with_code(INVALID_CODE, body.to_string())
}

/// A terminal error for a commit the store refused: `{"kind":"store","reason","message"}`
/// ([`runcore::driver::store_body`]).
pub fn store_refused(error: &StoreError) -> TerminalError {
    let body = runcore::driver::store_body(
        error.code(),
        format!("the store refused a commit ({}): {error}", error.code()),
    );
    // Our own plain data: serialization cannot fail; were it to, the kind still says it.
    let body = serde_json::to_value(body)
        .unwrap_or_else(|_| serde_json::json!({"kind": "store", "message": error.to_string()}));
    TerminalError::new_with_code(STORE_REFUSED_CODE, body.to_string())
}

/// A terminal error for a thread whose committed history cannot be recovered (a
/// configuration that does not fit it, facts not written by runcore).
pub fn unrecoverable(message: impl Into<String>) -> TerminalError {
    let body = serde_json::json!({"kind": "recover", "message": message.into()});
    TerminalError::new_with_code(500, body.to_string())
}
