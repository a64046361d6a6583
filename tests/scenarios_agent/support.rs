//! Helpers shared by the scenario modules: inputs, polling by hand, rejection checks and
//! renderings for readable order assertions.

use crate::common::harness::{Harness, render_cause, render_message};
use runcore::host::script::ModelTurn;
use runcore::*;

/// The id the agent mints for its `n`th run on the default thread.
pub(crate) fn run(n: u64) -> RunId {
    RunId::new(format!("thread-1/run-{n}"))
}

pub(crate) fn prompt_input(text: &str) -> Input {
    Input::Prompt {
        message: Some(UserMessage::text(text)),
        run_id: None,
        messages: Vec::new(),
    }
}

pub(crate) fn steer_input(text: &str) -> Input {
    Input::Steer {
        message: UserMessage::text(text),
    }
}

pub(crate) fn assistant_text(text: &str) -> Message {
    Message::from(AssistantMessage::text(text))
}

/// The transcript rendered one line per message, for readable order assertions.
pub(crate) fn lines(messages: &[Message]) -> Vec<String> {
    messages.iter().map(render_message).collect()
}

/// Applies an input without draining: the test then polls by hand, like a host that acts on
/// each output as it comes.
pub(crate) fn apply_only(h: &mut Harness, label: &str, input: Input) {
    if let Err(e) = h.agent.handle(input, h.clock_ms) {
        panic!("{label} was rejected: {e}");
    }
    h.trace.push(format!("> {label} (not drained)"));
}

/// Polls one output at a time until the newest event satisfies `stop`. False when the outputs
/// ran out first.
pub(crate) fn poll_until(h: &mut Harness, stop: impl Fn(&AgentEvent) -> bool) -> bool {
    loop {
        let before = h.events.len();
        if !h.poll_one() {
            return false;
        }
        if h.events.len() > before && h.events.last().is_some_and(&stop) {
            return true;
        }
    }
}

pub(crate) fn is_run_start(event: &AgentEvent) -> bool {
    matches!(event, AgentEvent::RunStart { .. })
}

pub(crate) fn is_run_end(event: &AgentEvent) -> bool {
    matches!(event, AgentEvent::RunEnd { .. })
}

pub(crate) fn is_input_closed(event: &AgentEvent) -> bool {
    matches!(
        event,
        AgentEvent::Loop {
            event: LoopEvent::InputClosed,
            ..
        }
    )
}

pub(crate) fn is_tool_start(event: &AgentEvent) -> bool {
    matches!(
        event,
        AgentEvent::Loop {
            event: LoopEvent::ToolStart { .. },
            ..
        }
    )
}

/// Answers the outstanding model call with `message` (the harness forgets the call).
pub(crate) fn answer_model_with(h: &mut Harness, message: AssistantMessage) {
    let (run_id, step) = h.pending_model.take().expect("a model call is outstanding");
    h.answer_model(&run_id, step, ModelTurn::answer(message));
}

/// Answers the outstanding model call with text without draining.
pub(crate) fn answer_model_with_by_hand(h: &mut Harness, text: &str) {
    let (run_id, step) = h.pending_model.take().expect("a model call is outstanding");
    apply_only(
        h,
        &format!("model_done step {step}: {text:?}"),
        Input::ModelDone {
            run_id,
            step,
            message: AssistantMessage::text(text),
        },
    );
}

/// A rejected input: its error kind is `kind`, the serialized agent is identical (outbox
/// included), nothing new is emitted and nothing was recorded.
/// Applies `input` at the host's clock (`h.clock_ms`) and expects it rejected with `kind`,
/// changing nothing (the agent's clock included).
pub(crate) fn reject(h: &mut Harness, label: &str, input: Input, kind: &str) -> AgentError {
    let before = serde_json::to_string(&h.agent).expect("agent serializes");
    let (events, commits) = (h.events.len(), h.commits.len());
    let pending = h.agent.pending_outputs();
    let now_ms = h.clock_ms;
    let err = match h.input_at(label, input, now_ms) {
        Ok(()) => panic!("{label} was accepted, expected {kind}"),
        Err(e) => e,
    };
    assert_eq!(err.kind(), kind, "{label}: {err}");
    assert_eq!(
        serde_json::to_string(&h.agent).expect("agent serializes"),
        before,
        "{label} changed the agent"
    );
    assert_eq!(
        h.agent.pending_outputs(),
        pending,
        "{label} emitted outputs"
    );
    assert_eq!((h.events.len(), h.commits.len()), (events, commits));
    err
}

/// A short kind for an event, for order assertions.
pub(crate) fn kind(event: &AgentEvent) -> String {
    match event {
        AgentEvent::RunStart { run_id, .. } => format!("run_start {run_id}"),
        AgentEvent::RunEnd { run_id, .. } => format!("run_end {run_id}"),
        AgentEvent::Loop { event, .. } => match event {
            LoopEvent::TextDelta { .. } => "text_delta".into(),
            LoopEvent::AssistantMessage { step, .. } => format!("assistant_message {step}"),
            LoopEvent::MessageAppended { origin, message } => {
                format!("appended {origin:?} {}", render_message(message))
            }
            LoopEvent::ToolStart { call_id, .. } => format!("tool_start {call_id}"),
            LoopEvent::ToolProgress { call_id, .. } => format!("tool_progress {call_id}"),
            LoopEvent::ToolEnd {
                call_id, outcome, ..
            } => format!("tool_end {call_id} {}", outcome.as_str()),
            LoopEvent::SyntheticResult {
                call_id, outcome, ..
            } => format!("synthetic {call_id} {}", outcome.as_str()),
            LoopEvent::Awaiting { .. } => "awaiting".into(),
            LoopEvent::Resumed { .. } => "resumed".into(),
            LoopEvent::InputClosed => "input_closed".into(),
            _ => "other".into(),
        },
        _ => "other".into(),
    }
}

pub(crate) fn kinds(events: &[AgentEvent]) -> Vec<String> {
    events.iter().map(kind).collect()
}

/// Only the run_start / run_end events, in order.
pub(crate) fn run_bounds(events: &[AgentEvent]) -> Vec<String> {
    kinds(events)
        .into_iter()
        .filter(|k| k.starts_with("run_"))
        .collect()
}

/// The tool results of a transcript as `"call:tool outcome[ error]"`, in transcript order.
pub(crate) fn results(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(Message::as_tool_result)
        .map(|r| {
            let error = if r.is_error { " error" } else { "" };
            format!(
                "{}:{} {}{error}",
                r.call_id,
                r.tool_name,
                r.outcome.as_str()
            )
        })
        .collect()
}

pub(crate) fn count_model_calls(h: &Harness, run_id: &RunId) -> usize {
    h.model_calls.iter().filter(|(r, ..)| r == run_id).count()
}

pub(crate) fn execute_tools_actions(h: &Harness) -> usize {
    h.trace
        .iter()
        .filter(|l| l.contains("action execute_tools"))
        .count()
}

pub(crate) fn result_of(h: &Harness, run_id: &RunId) -> RunResult {
    let ends: Vec<&RunResult> = h
        .run_ends
        .iter()
        .filter(|(r, _)| r == run_id)
        .map(|(_, result)| result)
        .collect();
    assert_eq!(ends.len(), 1, "exactly one run_end for {run_id}");
    ends[0].clone()
}

pub(crate) fn render_state(s: &AgentState) -> String {
    format!(
        "status={:?} run={} messages={} streaming={:?} pending=[{}] last_end={}",
        s.status,
        s.active_run_id
            .as_ref()
            .map_or_else(|| "-".to_owned(), ToString::to_string),
        s.messages.len(),
        s.streaming_text,
        s.pending_tool_call_ids
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(","),
        s.last_end
            .as_ref()
            .map_or_else(|| "-".to_owned(), render_cause),
    )
}

pub(crate) fn loop_event(run_id: &RunId, event: LoopEvent) -> AgentEvent {
    AgentEvent::Loop {
        run_id: run_id.clone(),
        event,
    }
}
