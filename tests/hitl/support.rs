//! Helpers shared by the human-in-the-loop modules: tickets, resume commands, rejection
//! checks and views of the recorded outcomes, dispositions and commits.

use crate::common;
use crate::common::harness::{Harness, Reply};
use runcore::store::*;
use runcore::*;

/// The id the agent mints for its first run on the default thread.
pub(crate) fn run1() -> RunId {
    RunId::new("thread-1/run-1")
}

/// `rm` needs approval within 1 s; `ask` needs approval and never expires; anything else
/// (`echo`) is auto.
pub(crate) fn config() -> AgentConfig {
    AgentConfig::default()
        .with_tool("rm", ToolSpec::gated("remove", Some(1000)))
        .with_tool("ask", ToolSpec::gated("ask a person", None))
}

/// The ticket the agent currently waits on.
pub(crate) fn ticket(h: &Harness) -> ResumeTicket {
    h.agent
        .current_ticket()
        .cloned()
        .expect("the run is awaiting")
}

/// The call id a ticket waits on.
pub(crate) fn waiting_call(h: &Harness) -> String {
    ticket(h)
        .target()
        .call_id()
        .map(|c| c.as_str().to_owned())
        .expect("a tool-call wait")
}

/// `(call id, outcome)` of every tool result in the committed transcript.
pub(crate) fn outcomes(h: &Harness) -> Vec<(String, ResultOutcome)> {
    h.store
        .committed_messages(h.agent.thread_id())
        .unwrap()
        .iter()
        .filter_map(Message::as_tool_result)
        .map(|r| (r.call_id.as_str().to_owned(), r.outcome))
        .collect()
}

/// The committed result of `call_id`.
pub(crate) fn result_of(h: &Harness, call_id: &str) -> ToolResultMessage {
    h.store
        .committed_messages(h.agent.thread_id())
        .unwrap()
        .iter()
        .filter_map(Message::as_tool_result)
        .find(|r| r.call_id.as_str() == call_id)
        .cloned()
        .unwrap_or_else(|| panic!("no committed result for {call_id}"))
}

pub(crate) fn text_of(result: &ToolResultMessage) -> String {
    result
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

/// How many `ExecuteTools` actions were handed out.
pub(crate) fn execute_tools_count(h: &Harness) -> usize {
    h.trace
        .iter()
        .filter(|line| line.starts_with("  action execute_tools"))
        .count()
}

/// How many `tool_start` events were emitted.
pub(crate) fn tool_start_count(h: &Harness) -> usize {
    h.events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::Loop {
                    event: LoopEvent::ToolStart { .. },
                    ..
                }
            )
        })
        .count()
}

/// Awaiting ⇒ no tool is executing: nothing handed out, nothing started.
pub(crate) fn assert_nothing_executing(h: &Harness) {
    assert_eq!(h.agent.run_state(), Some(RunState::Awaiting));
    assert!(
        h.pending_tools.is_empty(),
        "tools are executing while Awaiting"
    );
    assert!(
        h.pending_model.is_none(),
        "a model call is out while Awaiting"
    );
}

/// The calls of the pending `ExecuteTools`, in the order they were handed out.
pub(crate) fn pending_ids(h: &Harness) -> Vec<String> {
    h.pending_tools
        .iter()
        .map(|(_, c)| c.id.as_str().to_owned())
        .collect()
}

/// A command answering the current ticket at the harness clock.
pub(crate) fn command(h: &Harness, result: ResumeResult) -> ResumeCommand {
    ResumeCommand::from_ticket(&ticket(h), result, h.clock_ms)
}

pub(crate) fn resume_with(
    h: &mut Harness,
    label: &str,
    command: ResumeCommand,
) -> Result<(), AgentError> {
    h.input(label, Input::Resume { command })
}

/// A rejected input: the error is returned, and nothing changed — the serialized agent (the
/// harness asserts that too), the store, the commits and the current ticket.
pub(crate) fn reject(h: &mut Harness, label: &str, input: Input) -> AgentError {
    let now_ms = h.clock_ms;
    reject_at(h, label, input, now_ms)
}

/// [`reject`] for an input that arrives at `now_ms`.
pub(crate) fn reject_at(h: &mut Harness, label: &str, input: Input, now_ms: u64) -> AgentError {
    let agent_before = serde_json::to_string(&h.agent).expect("agent serializes");
    let store_before = serde_json::to_string(&h.store).expect("store serializes");
    let ticket_before = h.agent.current_ticket().cloned();
    let (commits, events) = (h.commits.len(), h.events.len());
    let err = match h.input_at(label, input, now_ms) {
        Ok(()) => panic!("{label} was accepted"),
        Err(e) => e,
    };
    assert_eq!(
        serde_json::to_string(&h.agent).expect("agent serializes"),
        agent_before,
        "{label} changed the agent"
    );
    assert_eq!(
        serde_json::to_string(&h.store).expect("store serializes"),
        store_before,
        "{label} changed the store"
    );
    assert_eq!(h.agent.current_ticket().cloned(), ticket_before);
    assert_eq!((h.commits.len(), h.events.len()), (commits, events));
    assert_eq!(h.agent.pending_outputs(), 0, "{label} emitted something");
    err
}

pub(crate) fn resume_error(err: AgentError) -> ResumeError {
    match err {
        AgentError::Resume(e) => e,
        other => panic!("expected a resume error, got {other}"),
    }
}

pub(crate) fn system(id: &str, text: &str) -> Message {
    Message::from(SystemMessage::text(text).with_id(id))
}

/// `(disposition kind, correlation id or cause)` of every commit so far.
pub(crate) fn dispositions(h: &Harness) -> Vec<String> {
    h.commits
        .iter()
        .map(|c| match &c.run {
            RunDisposition::Running { .. } => "running".to_owned(),
            RunDisposition::Awaiting(t) => format!("awaiting {}", t.correlation_id),
            RunDisposition::Ended { cause, .. } => {
                format!("ended {}", common::harness::render_cause(cause))
            }
        })
        .collect()
}

pub(crate) fn draft_kinds(commit: &ThreadCommit) -> Vec<&str> {
    commit.events.iter().map(|e| e.kind()).collect()
}

/// A gated batch `[c1 rm, c2 echo, c3 ask]` awaiting its first approval.
pub(crate) fn gated_batch(h: &mut Harness) {
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "echo"), ("c3", "ask")]),
        Reply::text("done"),
    ]);
    h.prompt("tidy up").unwrap();
    h.drive();
    assert_eq!(waiting_call(h), "c1");
}
