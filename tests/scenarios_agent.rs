//! The stateful-agent acceptance scenarios of SPEC §11 (A1–A11), plus the step budget (§8.4),
//! `length` and `aborted` stops (§8.2) and a sweep of the misuse errors of §10.
//!
//! Every scenario drives the public API through the harness (which checks the invariants after
//! every drained output), asserts the behaviour explicitly, and only then snapshots the rendered
//! trace, so a snapshot is a reviewed picture of behaviour that is already checked.

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::harness::{Harness, Reply, ToolOutputScript, render_cause, render_message};
use runcore::*;
use serde_json::json;

// ----- helpers ---------------------------------------------------------------------------------

/// The id the agent mints for its `n`th run on the default thread.
fn run(n: u64) -> RunId {
    RunId::new(format!("thread-1/run-{n}"))
}

fn prompt_input(text: &str) -> Input {
    Input::Prompt {
        message: UserMessage::text(text),
        now_ms: 0,
        run_id: None,
    }
}

fn steer_input(text: &str) -> Input {
    Input::Steer {
        message: UserMessage::text(text),
    }
}

fn assistant_text(text: &str) -> Message {
    Message::Assistant(AssistantMessage::text(text))
}

/// The transcript rendered one line per message, for readable order assertions.
fn lines(messages: &[Message]) -> Vec<String> {
    messages.iter().map(render_message).collect()
}

/// Applies an input without draining: the test then polls by hand, like a host that acts on
/// each output as it comes.
fn apply_only(h: &mut Harness, label: &str, input: Input) {
    if let Err(e) = h.agent.apply(input) {
        panic!("{label} was rejected: {e}");
    }
    h.trace.push(format!("> {label} (not drained)"));
}

/// Polls one output at a time until the newest event satisfies `stop`. False when the outputs
/// ran out first.
fn poll_until(h: &mut Harness, stop: impl Fn(&AgentEvent) -> bool) -> bool {
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

fn is_run_start(event: &AgentEvent) -> bool {
    matches!(event, AgentEvent::RunStart { .. })
}

fn is_run_end(event: &AgentEvent) -> bool {
    matches!(event, AgentEvent::RunEnd { .. })
}

fn is_input_closed(event: &AgentEvent) -> bool {
    matches!(
        event,
        AgentEvent::Loop {
            event: LoopEvent::InputClosed,
            ..
        }
    )
}

fn is_tool_start(event: &AgentEvent) -> bool {
    matches!(
        event,
        AgentEvent::Loop {
            event: LoopEvent::ToolStart { .. },
            ..
        }
    )
}

/// Answers the outstanding model call with `message` (the harness forgets the call).
fn answer_model_with(h: &mut Harness, message: AssistantMessage) {
    let (run_id, step) = h.pending_model.take().expect("a model call is outstanding");
    h.answer_model(&run_id, step, Reply::Message(message));
}

/// Answers the outstanding model call with text without draining.
fn answer_model_with_by_hand(h: &mut Harness, text: &str) {
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
fn reject(h: &mut Harness, label: &str, input: Input, kind: &str) -> AgentError {
    let before = serde_json::to_string(&h.agent).expect("agent serializes");
    let (events, commits) = (h.events.len(), h.commits.len());
    let pending = h.agent.pending_outputs();
    let err = match h.input(label, input) {
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
fn kind(event: &AgentEvent) -> String {
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

fn kinds(events: &[AgentEvent]) -> Vec<String> {
    events.iter().map(kind).collect()
}

/// Only the run_start / run_end events, in order.
fn run_bounds(events: &[AgentEvent]) -> Vec<String> {
    kinds(events)
        .into_iter()
        .filter(|k| k.starts_with("run_"))
        .collect()
}

/// The tool results of a transcript as `"call:tool outcome[ error]"`, in transcript order.
fn results(messages: &[Message]) -> Vec<String> {
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

fn count_model_calls(h: &Harness, run_id: &RunId) -> usize {
    h.model_calls.iter().filter(|(r, ..)| r == run_id).count()
}

fn execute_tools_actions(h: &Harness) -> usize {
    h.trace
        .iter()
        .filter(|l| l.contains("action execute_tools"))
        .count()
}

fn result_of(h: &Harness, run_id: &RunId) -> RunResult {
    let ends: Vec<&RunResult> = h
        .run_ends
        .iter()
        .filter(|(r, _)| r == run_id)
        .map(|(_, result)| result)
        .collect();
    assert_eq!(ends.len(), 1, "exactly one run_end for {run_id}");
    ends[0].clone()
}

fn render_state(s: &AgentState) -> String {
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

fn loop_event(run_id: &RunId, event: LoopEvent) -> AgentEvent {
    AgentEvent::Loop {
        run_id: run_id.clone(),
        event,
    }
}

// ----- A1 the reducer derives the state ----------------------------------------------------------

/// A1: the pure reducer over a hand-written event list derives every field, and neither the
/// events nor a kept prior state are mutated.
#[test]
fn a01_reducer_derives_state() {
    let r1 = RunId::new("r1");
    let ask = AssistantMessage::new(
        vec![
            AssistantBlock::text("Hello"),
            AssistantBlock::tool_call("c1", "echo", json!({"x": 1})),
        ],
        StopReason::ToolUse,
    );
    let result = ToolOutput::text("c1", "echo ok").into_result("echo");
    let events = vec![
        AgentEvent::RunStart {
            run_id: r1.clone(),
            message: Message::user("hi"),
        },
        loop_event(
            &r1,
            LoopEvent::TextDelta {
                step: 1,
                text: "Hel".into(),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::TextDelta {
                step: 1,
                text: "lo".into(),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::AssistantMessage {
                step: 1,
                message: ask.clone(),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::ToolStart {
                step: 1,
                call_id: "c1".into(),
                name: "echo".into(),
                arguments: json!({"x": 1}),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::ToolEnd {
                call_id: "c1".into(),
                tool_name: "echo".into(),
                is_error: false,
                outcome: ResultOutcome::Executed,
            },
        ),
        loop_event(
            &r1,
            LoopEvent::MessageAppended {
                origin: MessageOrigin::ToolResult,
                message: Message::ToolResult(result.clone()),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::AssistantMessage {
                step: 2,
                message: AssistantMessage::text("done"),
            },
        ),
        loop_event(&r1, LoopEvent::InputClosed),
        AgentEvent::RunEnd {
            run_id: r1.clone(),
            result: RunResult {
                cause: EndCause::NaturalEnd,
                steps: 2,
                unconsumed: vec![],
            },
        },
    ];
    let events_before = events.clone();

    let mut state = AgentState {
        diagnostics: vec!["kept".into()],
        ..AgentState::default()
    };
    let mut trace = vec![format!("start: {}", render_state(&state))];
    let mut states = Vec::new();
    for event in &events {
        let kept = state.clone();
        let next = reduce(state.clone(), event);
        assert_eq!(state, kept, "a caller's prior state is untouched");
        state = next;
        trace.push(format!("{}: {}", kind(event), render_state(&state)));
        states.push(state.clone());
    }
    assert_eq!(events, events_before, "the reducer does not mutate events");

    // run_start: Running, the run, the user message; diagnostics kept.
    assert_eq!(states[0].status, AgentStatus::Running);
    assert_eq!(states[0].active_run_id, Some(r1.clone()));
    assert_eq!(states[0].messages, vec![Message::user("hi")]);
    assert_eq!(states[0].diagnostics, vec!["kept".to_owned()]);
    // text deltas stream.
    assert_eq!(states[1].streaming_text, "Hel");
    assert_eq!(states[2].streaming_text, "Hello");
    // the assistant message clears the stream and is appended.
    assert_eq!(states[3].streaming_text, "");
    assert_eq!(states[3].messages.last(), Some(&Message::Assistant(ask)));
    // tool start / end move the pending ids.
    assert_eq!(states[4].pending_tool_call_ids, vec![CallId::new("c1")]);
    assert!(states[5].pending_tool_call_ids.is_empty());
    assert_eq!(states[5].messages.len(), 2);
    // the tool result is appended.
    assert_eq!(
        states[6].messages.last(),
        Some(&Message::ToolResult(result))
    );
    assert_eq!(states[7].messages.len(), 4);
    assert_eq!(states[8], states[7], "input_closed changes nothing");
    // run_end: Idle, last_end, nothing pending, no active run.
    let end = &states[9];
    assert_eq!(end.status, AgentStatus::Idle);
    assert_eq!(end.last_end, Some(EndCause::NaturalEnd));
    assert_eq!(end.active_run_id, None);
    assert!(end.pending_tool_call_ids.is_empty() && end.streaming_text.is_empty());
    assert_eq!(end.messages.len(), 4);
    assert_eq!(end.diagnostics, vec!["kept".to_owned()]);

    let mut rendered = trace.join("\n");
    rendered.push('\n');
    common::snapshot!("a01_reducer_derives_state", rendered);
}

/// A1 through the agent: the harness reducer follows a live run field by field, and after
/// `run_end` its messages equal the committed transcript.
#[test]
fn a01_reducer_follows_a_live_run() {
    let mut h = Harness::new(AgentConfig::default());
    h.prompt("hi").unwrap();
    assert_eq!(h.reducer.status, AgentStatus::Running);
    assert_eq!(h.reducer.active_run_id, Some(run(1)));
    assert_eq!(h.reducer.messages, vec![Message::user("hi")]);

    for piece in ["Hel", "lo"] {
        h.input(
            &format!("model_delta step 1 {piece:?}"),
            Input::ModelDelta {
                run_id: run(1),
                step: 1,
                text: piece.into(),
            },
        )
        .unwrap();
    }
    assert_eq!(h.reducer.streaming_text, "Hello");
    assert_eq!(h.reducer.messages.len(), 1, "deltas are not records");

    answer_model_with(
        &mut h,
        AssistantMessage::new(
            vec![
                AssistantBlock::text("Hello"),
                AssistantBlock::tool_call("c1", "echo", json!({})),
            ],
            StopReason::ToolUse,
        ),
    );
    assert_eq!(h.reducer.streaming_text, "");
    assert_eq!(h.reducer.messages.len(), 2);
    assert_eq!(h.reducer.pending_tool_call_ids, vec![CallId::new("c1")]);

    h.answer_call("c1");
    assert!(h.reducer.pending_tool_call_ids.is_empty());
    assert_eq!(h.reducer.messages.len(), 3);
    assert_eq!(h.reducer.status, AgentStatus::Running);

    h.script([Reply::text("bye")]);
    h.drive();
    assert_eq!(h.reducer.status, AgentStatus::Idle);
    assert_eq!(h.reducer.last_end, Some(EndCause::NaturalEnd));
    assert_eq!(h.reducer.active_run_id, None);
    assert_eq!(h.reducer.messages, h.agent.transcript());
    assert_eq!(h.reducer.messages.len(), 4);
    common::snapshot!("a01_reducer_follows_a_live_run", h.rendered());
}

// ----- A2 events of an older run are ignored ---------------------------------------------------

/// A2: loop and run_end events of an older run, applied after a newer run_start (or while idle),
/// leave the state equal.
#[test]
fn a02_reducer_ignores_events_of_an_older_run() {
    // Pure.
    let (r1, r2) = (RunId::new("r1"), RunId::new("r2"));
    let start = |run_id: &RunId, text: &str| AgentEvent::RunStart {
        run_id: run_id.clone(),
        message: Message::user(text),
    };
    let stale = vec![
        loop_event(
            &r1,
            LoopEvent::TextDelta {
                step: 1,
                text: "old".into(),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::AssistantMessage {
                step: 1,
                message: AssistantMessage::text("old answer"),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::ToolStart {
                step: 1,
                call_id: "c9".into(),
                name: "echo".into(),
                arguments: json!({}),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::Resumed {
                correlation_id: "r1:wait-1".into(),
                result: ResultKind::Input,
            },
        ),
        loop_event(&r1, LoopEvent::InputClosed),
        AgentEvent::RunEnd {
            run_id: r1.clone(),
            result: RunResult {
                cause: EndCause::Cancelled,
                steps: 1,
                unconsumed: vec![],
            },
        },
    ];
    let mut state = reduce(AgentState::default(), &start(&r1, "first"));
    state = reduce(state, &stale[0]);
    state = reduce(state, &start(&r2, "second"));
    assert_eq!(state.streaming_text, "", "run_start clears the old stream");
    let newer = state.clone();
    for event in &stale {
        state = reduce(state, event);
        assert_eq!(
            state,
            newer,
            "{} of the old run changed the state",
            kind(event)
        );
    }
    let idle = reduce(
        state,
        &AgentEvent::RunEnd {
            run_id: r2.clone(),
            result: RunResult {
                cause: EndCause::NaturalEnd,
                steps: 1,
                unconsumed: vec![],
            },
        },
    );
    assert_eq!(idle.status, AgentStatus::Idle);
    let mut after = idle.clone();
    for event in &stale {
        after = reduce(after, event);
    }
    assert_eq!(after, idle, "late events while idle are ignored");

    // Through the agent: replay run 1's events while run 2 is active, then after it ended.
    let mut h = Harness::new(AgentConfig::default());
    h.script([
        Reply::call("c1", "echo", json!({})),
        Reply::text("one done"),
    ]);
    h.prompt("one").unwrap();
    h.drive();
    h.prompt("two").unwrap();
    let old: Vec<AgentEvent> = h
        .events
        .iter()
        .filter(|e| e.run_id() == &run(1) && !matches!(e, AgentEvent::RunStart { .. }))
        .cloned()
        .collect();
    assert!(old.len() >= 6, "run 1 emitted its loop events and run_end");
    let replay = |state: &AgentState| old.iter().fold(state.clone(), reduce);
    assert_eq!(h.reducer.status, AgentStatus::Running);
    assert_eq!(
        replay(&h.reducer),
        h.reducer,
        "run 2 is unaffected by run 1's events"
    );
    h.note(format!(
        "replayed {} events of run 1 while run 2 runs: state unchanged",
        old.len()
    ));
    h.script([Reply::text("two done")]);
    h.drive();
    assert_eq!(
        replay(&h.reducer),
        h.reducer,
        "idle is unaffected by run 1's events"
    );
    h.note("replayed them again while idle: state unchanged");
    common::snapshot!("a02_reducer_ignores_older_run", h.rendered());
}

// ----- A3 busy guard, shared transcript, model failure -----------------------------------------

/// A3: a prompt while a run is active (model out, tools executing, awaiting) is `Busy` and
/// emits nothing.
#[test]
fn a03_busy_guard() {
    let config = AgentConfig::default().with_tool("rm", ToolSpec::gated("remove", None));
    let mut h = Harness::new(config);
    h.script([
        Reply::call("c1", "echo", json!({})),
        Reply::call("c2", "rm", json!({})),
        Reply::text("done"),
    ]);
    h.prompt("first").unwrap();
    let busy = AgentError::Busy { active_run: run(1) };

    h.note("the model call is out");
    assert_eq!(
        reject(&mut h, "prompt \"second\"", prompt_input("second"), "busy"),
        busy
    );
    h.step();
    h.note("the tools are executing");
    assert_eq!(
        reject(&mut h, "prompt \"second\"", prompt_input("second"), "busy"),
        busy
    );
    h.step();
    h.step();
    assert_eq!(h.agent.run_state(), Some(RunState::Awaiting));
    h.note("the run is awaiting");
    assert_eq!(
        reject(&mut h, "prompt \"second\"", prompt_input("second"), "busy"),
        busy
    );
    h.resume(ResumeResult::allow()).unwrap();
    h.drive();

    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(h.run_starts, vec![run(1)]);
    assert!(
        !lines(h.agent.transcript())
            .iter()
            .any(|l| l.contains("second")),
        "a rejected prompt never enters the transcript"
    );
    common::snapshot!("a03_busy_guard", h.rendered());
}

/// A3: two sequential runs share the transcript: the second model request sees user,
/// assistant, user.
#[test]
fn a03_sequential_runs_share_the_transcript() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::text("a1"), Reply::text("a2")]);
    h.prompt("q1").unwrap();
    h.drive();
    h.prompt("q2").unwrap();
    h.drive();

    assert_eq!(h.requests.len(), 2);
    assert_eq!(
        h.requests[1],
        vec![
            Message::user("q1"),
            assistant_text("a1"),
            Message::user("q2")
        ]
    );
    let roles: Vec<Role> = h.requests[1].iter().map(Message::role).collect();
    assert_eq!(roles, vec![Role::User, Role::Assistant, Role::User]);
    assert_eq!(result_of(&h, &run(1)).cause, EndCause::NaturalEnd);
    assert_eq!(result_of(&h, &run(2)).cause, EndCause::NaturalEnd);
    assert_eq!(h.agent.transcript().len(), 4);
    common::snapshot!("a03_shared_transcript", h.rendered());
}

/// A3: a model failure on step 2 keeps step 1's tool call and result, ends `Error(Inference)`,
/// and the next prompt runs cleanly.
#[test]
fn a03_model_failure_keeps_earlier_tool_facts() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([
        Reply::call("c1", "echo", json!({"x": 1})),
        Reply::Fail("rate_limited".into(), "slow down".into()),
        Reply::text("fine now"),
    ]);
    h.prompt("q1").unwrap();
    h.drive();

    let failed = result_of(&h, &run(1));
    assert_eq!(
        failed.cause,
        EndCause::Error(Failure::Inference {
            code: "rate_limited".into(),
            message: "slow down".into(),
        })
    );
    assert_eq!(failed.steps, 2);
    assert!(failed.unconsumed.is_empty());
    match &failed.cause {
        EndCause::Error(failure) => assert_eq!(failure.code(), "rate_limited"),
        other => panic!("unexpected cause {other:?}"),
    }
    let transcript = h.agent.transcript().to_vec();
    assert_eq!(transcript.len(), 4);
    assert!(transcript[1].as_assistant().unwrap().has_tool_calls());
    assert_eq!(results(&transcript), vec!["c1:echo executed"]);
    let error = transcript[3]
        .as_assistant()
        .expect("the error answer stays");
    assert_eq!(error.stop_reason, StopReason::Error);
    assert_eq!(error.error_message.as_deref(), Some("slow down"));

    h.prompt("q2").unwrap();
    h.drive();
    let next = result_of(&h, &run(2));
    assert_eq!(next.cause, EndCause::NaturalEnd);
    assert_eq!(next.steps, 1);
    let mut expected = transcript.clone();
    expected.push(Message::user("q2"));
    assert_eq!(h.requests.last(), Some(&expected));
    common::snapshot!("a03_model_failure", h.rendered());
}

// ----- A4 a run started on run_end ----------------------------------------------------------------

/// A4: a host starts run 2 the moment it drains run 1's `run_end` (run 1 was aborted during
/// tools with steering queued, so it has cleanup to do). Run 2 is unaffected, a third prompt
/// during run 2 is `Busy`, and events run start1, end1, start2, end2.
#[test]
fn a04_run_started_on_run_end_is_unaffected() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::call("c1", "echo", json!({}))]);
    h.prompt("one").unwrap();
    h.step();
    h.steer("late note").unwrap();
    h.abort().unwrap();
    assert_eq!(
        h.agent.run_state(),
        Some(RunState::Running),
        "waits for the tool"
    );

    let (run_id, call) = h.pending_tools.pop().expect("c1 is executing");
    let output = h.tool_output(&call);
    apply_only(
        &mut h,
        "tool_done c1",
        Input::ToolDone {
            run_id,
            call_id: call.id.clone(),
            output,
        },
    );
    assert!(poll_until(&mut h, is_run_end));
    h.note("run_end of run 1 drained: prompt run 2 at once");
    h.script([Reply::text("two done")]);
    h.prompt("two").unwrap();
    assert_eq!(h.agent.active_run_id(), Some(&run(2)));
    assert_eq!(h.agent.queued(), (0, 0), "run 1's queue did not leak");
    let err = h.prompt("three").unwrap_err();
    assert_eq!(err, AgentError::Busy { active_run: run(2) });
    h.drive();

    assert_eq!(
        run_bounds(&h.events),
        vec![
            format!("run_start {}", run(1)),
            format!("run_end {}", run(1)),
            format!("run_start {}", run(2)),
            format!("run_end {}", run(2)),
        ]
    );
    let first = result_of(&h, &run(1));
    assert_eq!(first.cause, EndCause::Cancelled);
    assert_eq!(first.unconsumed, vec![Message::user("late note")]);
    let second = result_of(&h, &run(2));
    assert_eq!(second.cause, EndCause::NaturalEnd);
    assert_eq!(second.steps, 1);
    assert!(second.unconsumed.is_empty());
    assert_eq!(count_model_calls(&h, &run(2)), 1);
    assert_eq!(
        lines(h.requests.last().unwrap()),
        vec![
            "user: \"one\"",
            "assistant[tool_use]: call c1:echo",
            "tool_result c1 (executed): \"echo ok\"",
            "user: \"two\"",
        ]
    );
    assert_eq!(h.reducer.last_end, Some(EndCause::NaturalEnd));
    assert_eq!(h.reducer.status, AgentStatus::Idle);
    common::snapshot!("a04_run_started_on_run_end", h.rendered());
}

/// A4, stricter: a prompt accepted while run 1's `run_end` is still waiting to be polled (the
/// host saw `input_closed`) comes out after it: outputs are one FIFO.
#[test]
fn a04_prompt_before_run_end_is_polled_keeps_fifo() {
    let mut h = Harness::new(AgentConfig::default());
    h.prompt("one").unwrap();
    answer_model_with_by_hand(&mut h, "one done");
    assert!(poll_until(&mut h, is_input_closed));
    assert!(
        h.agent.pending_outputs() > 0,
        "run_end of run 1 is not polled yet"
    );
    h.note("input_closed drained, run_end not yet: prompt run 2");
    h.script([Reply::text("two done")]);
    h.prompt("two").unwrap();
    h.drive();
    assert_eq!(
        run_bounds(&h.events),
        vec![
            format!("run_start {}", run(1)),
            format!("run_end {}", run(1)),
            format!("run_start {}", run(2)),
            format!("run_end {}", run(2)),
        ]
    );
    assert_eq!(result_of(&h, &run(1)).cause, EndCause::NaturalEnd);
    assert_eq!(result_of(&h, &run(2)).cause, EndCause::NaturalEnd);
    common::snapshot!("a04_prompt_before_run_end_polled", h.rendered());
}

// ----- A5 observers -----------------------------------------------------------------------------

/// Whether `state` already reflects `event` (what an observer must see).
fn reflects(state: &AgentState, event: &AgentEvent) -> bool {
    match event {
        AgentEvent::RunStart { run_id, message } => {
            state.status == AgentStatus::Running
                && state.active_run_id.as_ref() == Some(run_id)
                && state.messages.last() == Some(message)
        }
        AgentEvent::RunEnd { result, .. } => {
            state.status == AgentStatus::Idle && state.last_end.as_ref() == Some(&result.cause)
        }
        AgentEvent::Loop { event, .. } => match event {
            LoopEvent::TextDelta { text, .. } => state.streaming_text.ends_with(text.as_str()),
            LoopEvent::AssistantMessage { message, .. } => {
                state.streaming_text.is_empty()
                    && state.messages.last() == Some(&Message::Assistant(message.clone()))
            }
            LoopEvent::MessageAppended { message, .. } => state.messages.last() == Some(message),
            LoopEvent::ToolStart { call_id, .. } => state.pending_tool_call_ids.contains(call_id),
            LoopEvent::ToolEnd { call_id, .. } | LoopEvent::SyntheticResult { call_id, .. } => {
                !state.pending_tool_call_ids.contains(call_id)
            }
            _ => true,
        },
        _ => true,
    }
}

/// A5: observers see the state already updated by the event; a failing observer does not stop
/// the others and is recorded as `"observer: …"`; unsubscribing works.
#[test]
fn a05_observers() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::call("c1", "echo", json!({})), Reply::text("done")]);
    h.prompt("hi").unwrap();
    h.drive();
    let first_run = h.events.len();

    let seen_a: Rc<RefCell<Vec<String>>> = Rc::default();
    let seen_c: Rc<RefCell<Vec<String>>> = Rc::default();
    let mut observers = Observers::new();
    let log = Rc::clone(&seen_a);
    let _a = observers.subscribe(
        move |state: &AgentState, event: &AgentEvent| -> Result<(), String> {
            let verdict = if reflects(state, event) {
                "updated"
            } else {
                "STALE"
            };
            log.borrow_mut()
                .push(format!("{} ({verdict})", kind(event)));
            Ok(())
        },
    );
    let _b = observers.subscribe(|_: &AgentState, event: &AgentEvent| -> Result<(), String> {
        match event {
            AgentEvent::RunStart { run_id, .. } => Err(format!("cannot render {run_id}")),
            _ => Ok(()),
        }
    });
    let log = Rc::clone(&seen_c);
    let c = observers.subscribe(
        move |_: &AgentState, event: &AgentEvent| -> Result<(), String> {
            log.borrow_mut().push(kind(event));
            Ok(())
        },
    );
    assert_eq!(observers.len(), 3);

    let mut state = AgentState::default();
    for event in &h.events {
        state = observers.deliver(state, event);
    }
    assert_eq!(seen_a.borrow().len(), first_run);
    assert!(
        seen_a.borrow().iter().all(|l| l.ends_with("(updated)")),
        "{:?}",
        seen_a.borrow()
    );
    assert_eq!(
        *seen_c.borrow(),
        kinds(&h.events),
        "the observer after the failing one saw every event"
    );
    assert_eq!(
        state.diagnostics,
        vec![format!("observer: cannot render {}", run(1))]
    );
    let mut plain = state.clone();
    plain.diagnostics.clear();
    assert_eq!(plain, h.reducer, "delivery reduces exactly like reduce");

    assert!(observers.unsubscribe(c));
    assert!(!observers.unsubscribe(c), "a second unsubscribe is a no-op");
    assert_eq!(observers.len(), 2);

    h.script([Reply::text("again")]);
    h.prompt("more").unwrap();
    h.drive();
    for event in &h.events[first_run..] {
        state = observers.deliver(state, event);
    }
    assert_eq!(
        seen_c.borrow().len(),
        first_run,
        "unsubscribed: saw nothing more"
    );
    assert_eq!(seen_a.borrow().len(), h.events.len());
    assert_eq!(
        state.diagnostics,
        vec![
            format!("observer: cannot render {}", run(1)),
            format!("observer: cannot render {}", run(2)),
        ]
    );

    h.note(format!("observer a: {}", seen_a.borrow().join(" | ")));
    h.note(format!(
        "observer c (unsubscribed after run 1) saw {} events",
        seen_c.borrow().len()
    ));
    h.note(format!("diagnostics: {:?}", state.diagnostics));
    common::snapshot!("a05_observers", h.rendered());
}

// ----- A6 no shared mutable data, malformed outputs ----------------------------------------------

/// A6: the host's copies (events, commits, requests, actions, results, reducer state) are its
/// own: mutating them changes neither the agent's transcript nor any later output.
#[test]
fn a06_no_shared_mutable_data() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([
        Reply::call("c1", "echo", json!({"path": "a.txt"})),
        Reply::text("done"),
    ]);
    h.prompt("original").unwrap();
    h.note("the host mutates its copies: the run_start event, the commit, the request, a UI state");
    let tampered = Message::user("tampered");
    match h.events.first_mut() {
        Some(AgentEvent::RunStart { message, .. }) => *message = tampered.clone(),
        other => panic!("expected run_start, got {other:?}"),
    }
    h.commits[0].messages[0] = tampered.clone();
    h.requests[0][0] = tampered.clone();
    let mut ui = h.reducer.clone();
    ui.messages[0] = tampered.clone();
    assert_eq!(h.agent.transcript()[0], Message::user("original"));
    assert_eq!(h.reducer.messages[0], Message::user("original"));
    assert_ne!(ui, h.reducer, "the UI copy is its own");

    h.step();
    h.note("the host mutates the arguments of its copy of the ExecuteTools call");
    h.pending_tools[0].1.arguments = json!({"path": "/etc/passwd"});
    h.step();
    let call = h.agent.transcript()[1]
        .as_assistant()
        .and_then(|a| a.tool_calls().next())
        .expect("the call is in the transcript");
    assert_eq!(call.arguments, json!({"path": "a.txt"}));

    let mut forged = h.agent.transcript()[2].clone();
    if let Message::ToolResult(result) = &mut forged {
        result.content = vec![ContentBlock::text("forged")];
        result.is_error = true;
    }
    assert_ne!(forged, h.agent.transcript()[2]);
    h.note("the host forges a copy of the tool result");
    h.drive();

    let request = &h.requests[1];
    assert_eq!(request[0], Message::user("original"));
    assert_eq!(results(request), vec!["c1:echo executed"]);
    assert_eq!(
        lines(&request[2..3]),
        vec!["tool_result c1 (executed): \"echo ok\""]
    );

    let mut copy = h.last_result().clone();
    copy.unconsumed.push(Message::user("smuggled"));
    assert_ne!(&copy, h.last_result());
    h.note("the host adds to its copy of run_end.unconsumed");
    h.script([Reply::text("again")]);
    h.prompt("next").unwrap();
    h.drive();
    assert_eq!(
        lines(h.requests.last().unwrap()),
        vec![
            "user: \"original\"",
            "assistant[tool_use]: call c1:echo",
            "tool_result c1 (executed): \"echo ok\"",
            "assistant[stop]: \"done\"",
            "user: \"next\"",
        ]
    );
    let committed = h.store.committed_messages(h.agent.thread_id());
    assert_eq!(committed[0], Message::user("original"));
    common::snapshot!("a06_no_shared_mutable_data", h.rendered());
}

/// A6: an output with invalid image data, or over `max_tool_output_bytes`, becomes a
/// `malformed` error result with the same call id and tool name; the run ends `NaturalEnd`.
#[test]
fn a06_malformed_tool_output() {
    let config = AgentConfig {
        max_tool_output_bytes: 32,
        ..AgentConfig::default()
    };
    let mut h = Harness::new(config);
    h.tool_outputs.insert(
        "snap".into(),
        ToolOutputScript::Output(ToolOutput {
            call_id: CallId::new("-"),
            content: vec![ContentBlock::Image {
                data: "not base64!".into(),
                mime_type: "image/png".into(),
            }],
            is_error: false,
            details: None,
        }),
    );
    h.tool_outputs
        .insert("dump".into(), ToolOutputScript::Text("x".repeat(33)));
    h.script([
        Reply::calls(&[("c1", "snap"), ("c2", "dump"), ("c3", "echo")]),
        Reply::text("done"),
    ]);
    h.prompt("look").unwrap();
    h.drive();

    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(
        results(h.agent.transcript()),
        vec![
            "c1:snap malformed error",
            "c2:dump malformed error",
            "c3:echo executed",
        ]
    );
    let ends: Vec<String> = kinds(&h.events)
        .into_iter()
        .filter(|k| k.starts_with("tool_end"))
        .collect();
    assert_eq!(
        ends,
        vec![
            "tool_end c1 malformed",
            "tool_end c2 malformed",
            "tool_end c3 executed"
        ]
    );
    assert_eq!(count_model_calls(&h, &run(1)), 2, "the run continued");
    common::snapshot!("a06_malformed_tool_output", h.rendered());
}

// ----- A7 abort before the first model call ----------------------------------------------------

fn assert_cancelled_without_model_call(h: &Harness) {
    assert_eq!(count_model_calls(h, &run(1)), 0, "zero CallModel actions");
    let result = result_of(h, &run(1));
    assert_eq!(result.cause, EndCause::Cancelled);
    assert_eq!(result.steps, 0);
    assert_eq!(
        kinds(&h.events),
        vec![
            format!("run_start {}", run(1)),
            "input_closed".to_owned(),
            format!("run_end {}", run(1)),
        ]
    );
    assert_eq!(h.commits.len(), 2, "Running then Ended");
    assert_eq!(h.agent.transcript(), [Message::user("first")]);
}

/// After the cancelled run, another run is unaffected.
fn assert_next_run_clean(h: &mut Harness) {
    h.script([Reply::text("hello")]);
    h.prompt("second").unwrap();
    h.drive();
    let result = result_of(h, &run(2));
    assert_eq!(result.cause, EndCause::NaturalEnd);
    assert_eq!(result.steps, 1);
    assert_eq!(h.model_calls, vec![(run(2), 1, false)]);
    assert_eq!(h.run_ends.len(), 2);
}

/// A7: abort right after the prompt, before anything is polled: `Cancelled`, zero model
/// calls, exactly one `run_end`; a repeated abort is harmless; the next run is unaffected.
#[test]
fn a07_abort_before_polling() {
    let mut h = Harness::new(AgentConfig::default());
    apply_only(&mut h, "prompt \"first\"", prompt_input("first"));
    h.note("abort before polling: the prompt's outputs and the abort's come out in order");
    h.abort().unwrap();
    assert_cancelled_without_model_call(&h);
    h.abort().unwrap();
    assert_eq!(h.agent.pending_outputs(), 0, "abort while idle is a no-op");
    assert_eq!(h.run_ends.len(), 1);
    assert_next_run_clean(&mut h);
    common::snapshot!("a07_abort_before_polling", h.rendered());
}

/// A7: abort while draining, on seeing `run_start`: the model call that was not yet handed
/// out never is.
#[test]
fn a07_abort_on_run_start() {
    let mut h = Harness::new(AgentConfig::default());
    apply_only(&mut h, "prompt \"first\"", prompt_input("first"));
    assert!(poll_until(&mut h, is_run_start));
    h.abort().unwrap();
    assert_cancelled_without_model_call(&h);
    assert_next_run_clean(&mut h);
    common::snapshot!("a07_abort_on_run_start", h.rendered());
}

// ----- A8 abort during tools, a model that ignores abort ------------------------------------------

/// A8: abort while tools run: the core waits for every outcome, pairs them in call order and
/// ends `Cancelled` without another model call.
#[test]
fn a08_abort_during_tools() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::calls(&[("c1", "echo"), ("c2", "echo")])]);
    h.prompt("go").unwrap();
    h.step();
    h.answer_call("c1");
    h.abort().unwrap();
    h.abort().unwrap();
    assert_eq!(
        h.agent.run_state(),
        Some(RunState::Running),
        "waiting for c2"
    );
    assert!(h.run_ends.is_empty());
    h.answer_call("c2");

    let result = result_of(&h, &run(1));
    assert_eq!(result.cause, EndCause::Cancelled);
    assert_eq!(result.steps, 1);
    assert_eq!(count_model_calls(&h, &run(1)), 1);
    assert_eq!(
        results(h.agent.transcript()),
        vec!["c1:echo executed", "c2:echo executed",]
    );
    let ended = h.commits.last().unwrap();
    assert!(matches!(
        &ended.run,
        RunDisposition::Ended {
            cause: EndCause::Cancelled,
            ..
        }
    ));
    assert_eq!(
        results(&ended.messages).len(),
        2,
        "the results commit with the end"
    );
    common::snapshot!("a08_abort_during_tools", h.rendered());
}

/// A8 (§8.3 "outputs are decided when they are polled"): an abort while draining, on seeing
/// `tool_start`, before `ExecuteTools` is handed out: the calls never execute, they are paired
/// `skipped`, and the run ends `Cancelled` at once.
#[test]
fn a08_abort_on_tool_start_before_execute_tools() {
    let mut h = Harness::new(AgentConfig::default());
    h.prompt("go").unwrap();
    let (run_id, step) = h.pending_model.take().expect("the model call is out");
    apply_only(
        &mut h,
        "model_done step 1: calls c1, c2",
        Input::ModelDone {
            run_id,
            step,
            message: AssistantMessage::new(
                vec![
                    AssistantBlock::tool_call("c1", "echo", json!({})),
                    AssistantBlock::tool_call("c2", "echo", json!({})),
                ],
                StopReason::ToolUse,
            ),
        },
    );
    assert!(poll_until(&mut h, is_tool_start));
    h.abort().unwrap();
    assert_eq!(
        execute_tools_actions(&h),
        0,
        "ExecuteTools was never handed out"
    );
    assert!(h.pending_tools.is_empty());
    let result = result_of(&h, &run(1));
    assert_eq!(result.cause, EndCause::Cancelled);
    assert_eq!(
        results(h.agent.transcript()),
        vec!["c1:echo skipped error", "c2:echo skipped error",]
    );
    common::snapshot!("a08_abort_on_tool_start", h.rendered());
}

/// A8: a model that ignores the abort and answers with text: the run ends `Cancelled` and the
/// message stays.
#[test]
fn a08_model_ignores_abort_with_text() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::text("I kept going")]);
    h.prompt("go").unwrap();
    h.abort().unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::Cancelled);
    assert_eq!(
        h.agent.transcript(),
        [Message::user("go"), assistant_text("I kept going")]
    );
    assert_eq!(count_model_calls(&h, &run(1)), 1);
    common::snapshot!("a08_model_ignores_abort_text", h.rendered());
}

/// A8: a model that ignores the abort and asks for tools: the calls are committed, never
/// executed, and paired `skipped`; the run ends `Cancelled`.
#[test]
fn a08_model_ignores_abort_with_tool_calls() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::calls(&[("c1", "echo"), ("c2", "write")])]);
    h.prompt("go").unwrap();
    h.abort().unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::Cancelled);
    assert_eq!(execute_tools_actions(&h), 0);
    assert_eq!(
        results(h.agent.transcript()),
        vec!["c1:echo skipped error", "c2:write skipped error",]
    );
    // The calls are durable (a Running commit) before the end pairs them.
    let n = h.commits.len();
    assert!(matches!(
        h.commits[n - 2].run,
        RunDisposition::Running { .. }
    ));
    assert_eq!(
        lines(&h.commits[n - 2].messages),
        vec!["assistant[tool_use]: call c1:echo, call c2:write"]
    );
    common::snapshot!("a08_model_ignores_abort_tool_calls", h.rendered());
}

/// A8: a model failure after an abort ends the run `Cancelled`, not `Error`.
#[test]
fn a08_model_failure_after_abort_is_cancelled() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::Fail(
        "request_cancelled".into(),
        "the host cancelled".into(),
    )]);
    h.prompt("go").unwrap();
    h.abort().unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::Cancelled);
    assert_eq!(h.agent.transcript().len(), 2, "the error answer stays");
    common::snapshot!("a08_model_failure_after_abort", h.rendered());
}

// ----- A9 out-of-order results, FIFO steering ----------------------------------------------------

/// A9: two tools answered out of order: results in call order, `tool_end` in completion order;
/// two steering messages queued during the batch enter the next request, FIFO, after both
/// results.
#[test]
fn a09_out_of_order_results_and_fifo_steering() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([
        Reply::calls(&[("c1", "read"), ("c2", "write")]),
        Reply::text("done"),
    ]);
    h.prompt("go").unwrap();
    h.step();
    h.steer("s1").unwrap();
    h.answer_call("c2");
    h.steer("s2").unwrap();
    assert_eq!(h.agent.queued(), (2, 0));
    assert_eq!(h.requests.len(), 1, "steering waits for the whole batch");
    h.answer_call("c1");
    h.drive();

    let ends: Vec<String> = kinds(&h.events)
        .into_iter()
        .filter(|k| k.starts_with("tool_end"))
        .collect();
    assert_eq!(ends, vec!["tool_end c2 executed", "tool_end c1 executed"]);
    assert_eq!(
        lines(&h.requests[1]),
        vec![
            "user: \"go\"",
            "assistant[tool_use]: call c1:read, call c2:write",
            "tool_result c1 (executed): \"read ok\"",
            "tool_result c2 (executed): \"write ok\"",
            "user: \"s1\"",
            "user: \"s2\"",
        ]
    );
    let appended: Vec<String> = kinds(&h.events)
        .into_iter()
        .filter(|k| k.starts_with("appended"))
        .collect();
    assert_eq!(
        appended,
        vec![
            "appended ToolResult tool_result c1 (executed): \"read ok\"",
            "appended ToolResult tool_result c2 (executed): \"write ok\"",
            "appended Steering user: \"s1\"",
            "appended Steering user: \"s2\"",
        ]
    );
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    assert!(h.last_result().unconsumed.is_empty());
    common::snapshot!("a09_out_of_order_and_fifo_steering", h.rendered());
}

// ----- A10 steering during a text answer; steering before an abort -------------------------------

/// A10: steering queued while the model writes a text answer starts another model call in the
/// same run.
#[test]
fn a10_steering_during_text_answer_continues_the_run() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::text("a long answer"), Reply::text("a short one")]);
    h.prompt("explain").unwrap();
    h.steer("shorter please").unwrap();
    h.drive();

    assert_eq!(h.run_starts, vec![run(1)]);
    assert_eq!(h.model_calls, vec![(run(1), 1, false), (run(1), 2, false)]);
    assert_eq!(
        h.requests[1],
        vec![
            Message::user("explain"),
            assistant_text("a long answer"),
            Message::user("shorter please"),
        ]
    );
    let result = h.last_result();
    assert_eq!(result.cause, EndCause::NaturalEnd);
    assert_eq!(result.steps, 2);
    assert!(result.unconsumed.is_empty());
    common::snapshot!("a10_steering_during_text", h.rendered());
}

/// A10: steering queued before an abort is never consumed: it is returned in `run_end` and does
/// not leak into the next run.
#[test]
fn a10_steering_before_abort_is_not_consumed() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::text("answer"), Reply::text("next answer")]);
    h.prompt("q1").unwrap();
    h.steer("s1").unwrap();
    h.abort().unwrap();
    h.drive();

    let first = result_of(&h, &run(1));
    assert_eq!(first.cause, EndCause::Cancelled);
    assert_eq!(first.unconsumed, vec![Message::user("s1")]);
    assert_eq!(count_model_calls(&h, &run(1)), 1);
    assert!(!h.agent.transcript().contains(&Message::user("s1")));

    h.prompt("q2").unwrap();
    h.drive();
    assert_eq!(
        h.requests.last().unwrap(),
        &vec![
            Message::user("q1"),
            assistant_text("answer"),
            Message::user("q2")
        ]
    );
    let second = result_of(&h, &run(2));
    assert_eq!(second.cause, EndCause::NaturalEnd);
    assert!(second.unconsumed.is_empty());
    assert!(!h.agent.transcript().contains(&Message::user("s1")));
    common::snapshot!("a10_steering_before_abort", h.rendered());
}

// ----- A11 follow-ups, closed input, queues of ended runs ----------------------------------------

/// A11: follow-ups wait for a natural text stop (not a tool batch) and enter all at once in
/// `All` mode.
#[test]
fn a11_follow_ups_after_natural_stop_all_at_once() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([
        Reply::call("c1", "echo", json!({})),
        Reply::text("done 1"),
        Reply::text("done 2"),
    ]);
    h.prompt("q").unwrap();
    h.follow_up("f1").unwrap();
    h.follow_up("f2").unwrap();
    h.drive();

    assert_eq!(count_model_calls(&h, &run(1)), 3);
    assert!(
        !h.requests[1].contains(&Message::user("f1")),
        "follow-ups do not enter after a tool batch"
    );
    assert_eq!(
        lines(&h.requests[2][3..]),
        vec![
            "assistant[stop]: \"done 1\"",
            "user: \"f1\"",
            "user: \"f2\""
        ]
    );
    let result = h.last_result();
    assert_eq!(result.cause, EndCause::NaturalEnd);
    assert!(result.unconsumed.is_empty());
    common::snapshot!("a11_follow_ups_all", h.rendered());
}

/// A11: in `OneAtATime` mode each natural stop takes the oldest follow-up only.
#[test]
fn a11_follow_ups_one_at_a_time() {
    let config = AgentConfig {
        follow_up_mode: QueueMode::OneAtATime,
        ..AgentConfig::default()
    };
    let mut h = Harness::new(config);
    h.script([Reply::text("a1"), Reply::text("a2"), Reply::text("a3")]);
    h.prompt("q").unwrap();
    h.follow_up("f1").unwrap();
    h.follow_up("f2").unwrap();
    h.drive();

    assert_eq!(h.requests.len(), 3);
    assert_eq!(
        lines(&h.requests[1][1..]),
        vec!["assistant[stop]: \"a1\"", "user: \"f1\""]
    );
    assert_eq!(
        lines(&h.requests[2][3..]),
        vec!["assistant[stop]: \"a2\"", "user: \"f2\""]
    );
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(h.last_result().steps, 3);
    common::snapshot!("a11_follow_ups_one_at_a_time", h.rendered());
}

/// A11: steer and follow-up are `NotAccepting` while idle, once the run's input closed (even
/// before its `run_end` is polled), and after the run ended.
#[test]
fn a11_queued_input_rejected_when_idle_and_after_input_closed() {
    let mut h = Harness::new(AgentConfig::default());
    let follow = |text: &str| Input::FollowUp {
        message: UserMessage::text(text),
    };
    h.note("idle, never prompted");
    reject(&mut h, "steer \"s\"", steer_input("s"), "not_accepting");
    reject(&mut h, "follow_up \"f\"", follow("f"), "not_accepting");

    h.prompt("q").unwrap();
    answer_model_with_by_hand(&mut h, "done");
    assert!(poll_until(&mut h, is_input_closed));
    h.note("input_closed polled, run_end not yet");
    reject(&mut h, "steer \"s\"", steer_input("s"), "not_accepting");
    reject(&mut h, "follow_up \"f\"", follow("f"), "not_accepting");
    h.note("poll the rest");
    h.drain();
    h.note("after run_end");
    reject(&mut h, "steer \"s\"", steer_input("s"), "not_accepting");
    reject(&mut h, "follow_up \"f\"", follow("f"), "not_accepting");

    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    assert!(h.last_result().unconsumed.is_empty());
    assert_eq!(h.agent.transcript().len(), 2);
    common::snapshot!("a11_not_accepting", h.rendered());
}

/// A11: the queues of a run that ended in an error come back as `unconsumed` (steering first)
/// and never reach the next run.
#[test]
fn a11_error_run_queues_are_returned_unconsumed() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([
        Reply::Fail("overloaded".into(), "try later".into()),
        Reply::text("fresh"),
    ]);
    h.prompt("q1").unwrap();
    h.follow_up("f1").unwrap();
    h.steer("s1").unwrap();
    h.drive();

    let failed = result_of(&h, &run(1));
    assert!(matches!(&failed.cause, EndCause::Error(f) if f.code() == "overloaded"));
    assert_eq!(
        failed.unconsumed,
        vec![Message::user("s1"), Message::user("f1")]
    );

    h.prompt("q2").unwrap();
    h.drive();
    let request = h.requests.last().unwrap();
    assert_eq!(request.len(), 3);
    assert!(!request.contains(&Message::user("s1")) && !request.contains(&Message::user("f1")));
    let next = result_of(&h, &run(2));
    assert_eq!(next.cause, EndCause::NaturalEnd);
    assert!(next.unconsumed.is_empty());
    common::snapshot!("a11_error_run_queues", h.rendered());
}

/// A11: the queues of an aborted run come back as `unconsumed` and never reach the next run.
#[test]
fn a11_aborted_run_queues_are_returned_unconsumed() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::call("c1", "echo", json!({})), Reply::text("fresh")]);
    h.prompt("q1").unwrap();
    h.step();
    h.follow_up("f1").unwrap();
    h.steer("s1").unwrap();
    h.abort().unwrap();
    h.drive();

    let aborted = result_of(&h, &run(1));
    assert_eq!(aborted.cause, EndCause::Cancelled);
    assert_eq!(
        aborted.unconsumed,
        vec![Message::user("s1"), Message::user("f1")]
    );
    assert_eq!(count_model_calls(&h, &run(1)), 1);

    h.prompt("q2").unwrap();
    h.drive();
    let request = h.requests.last().unwrap();
    assert_eq!(
        lines(request),
        vec![
            "user: \"q1\"",
            "assistant[tool_use]: call c1:echo",
            "tool_result c1 (executed): \"echo ok\"",
            "user: \"q2\"",
        ]
    );
    assert!(result_of(&h, &run(2)).unconsumed.is_empty());
    common::snapshot!("a11_aborted_run_queues", h.rendered());
}

// ----- §8.4 max steps -----------------------------------------------------------------------------

/// §8.4: the last allowed CallModel has `final_step`; a tool batch on the last step is
/// executed and paired, then the run ends `MaxSteps` with queued input unconsumed.
#[test]
fn max_steps_ends_with_queued_input_unconsumed() {
    let config = AgentConfig {
        max_steps: 2,
        ..AgentConfig::default()
    };
    let mut h = Harness::new(config);
    h.script([
        Reply::call("c1", "echo", json!({})),
        Reply::call("c2", "echo", json!({})),
    ]);
    h.prompt("q").unwrap();
    h.step();
    h.step();
    assert_eq!(h.model_calls.last(), Some(&(run(1), 2, true)));
    h.steer("s").unwrap();
    h.follow_up("f").unwrap();
    h.drive();

    assert_eq!(h.model_calls, vec![(run(1), 1, false), (run(1), 2, true)]);
    let result = h.last_result();
    assert_eq!(result.cause, EndCause::MaxSteps);
    assert_eq!(result.steps, 2);
    assert_eq!(
        result.unconsumed,
        vec![Message::user("s"), Message::user("f")]
    );
    assert_eq!(
        results(h.agent.transcript()),
        vec!["c1:echo executed", "c2:echo executed",]
    );
    assert!(!h.agent.transcript().contains(&Message::user("s")));
    common::snapshot!("max_steps_unconsumed", h.rendered());
}

/// §8.4: a text stop on the last step with nothing queued is still `NaturalEnd`.
#[test]
fn max_steps_text_stop_on_last_step_is_natural_end() {
    let config = AgentConfig {
        max_steps: 2,
        ..AgentConfig::default()
    };
    let mut h = Harness::new(config);
    h.script([Reply::call("c1", "echo", json!({})), Reply::text("done")]);
    h.prompt("q").unwrap();
    h.drive();
    assert_eq!(h.model_calls, vec![(run(1), 1, false), (run(1), 2, true)]);
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(h.last_result().steps, 2);
    common::snapshot!("max_steps_text_stop_natural", h.rendered());
}

/// §8.4: a text stop on the last step with a follow-up queued ends `MaxSteps`, the follow-up
/// unconsumed (no model call would answer it).
#[test]
fn max_steps_text_stop_with_follow_up_queued() {
    let config = AgentConfig {
        max_steps: 1,
        ..AgentConfig::default()
    };
    let mut h = Harness::new(config);
    h.script([Reply::text("done")]);
    h.prompt("q").unwrap();
    h.follow_up("f").unwrap();
    h.drive();
    assert_eq!(h.model_calls, vec![(run(1), 1, true)]);
    assert_eq!(h.last_cause(), &EndCause::MaxSteps);
    assert_eq!(h.last_result().unconsumed, vec![Message::user("f")]);
    common::snapshot!("max_steps_text_stop_follow_up", h.rendered());
}

// ----- §8.2 length and aborted stops -----------------------------------------------------------

/// §8.2: a `length` stop with tool calls pairs every call `truncated` (never executed) and the
/// loop continues.
#[test]
fn length_stop_with_tool_calls_truncates_and_continues() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([
        Reply::Message(AssistantMessage::new(
            vec![
                AssistantBlock::text("let me"),
                AssistantBlock::tool_call("c1", "write", json!({"text": "hal"})),
                AssistantBlock::tool_call("c2", "echo", json!({})),
            ],
            StopReason::Length,
        )),
        Reply::text("sorry, retrying later"),
    ]);
    h.prompt("q").unwrap();
    h.drive();

    assert_eq!(
        execute_tools_actions(&h),
        0,
        "truncated calls never execute"
    );
    assert_eq!(
        results(h.agent.transcript()),
        vec!["c1:write truncated error", "c2:echo truncated error",]
    );
    let text = lines(&h.agent.transcript()[2..3]).join("");
    assert!(text.contains("Re-issue the call"), "{text}");
    assert_eq!(count_model_calls(&h, &run(1)), 2, "the loop continued");
    assert_eq!(results(&h.requests[1]).len(), 2);
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("length_stop_truncated", h.rendered());
}

/// §8.2: an answer with stop reason `aborted` (no abort requested) ends the run `Cancelled`,
/// its calls paired `skipped`.
#[test]
fn model_aborted_stop_reason_ends_cancelled() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::Message(AssistantMessage::new(
        vec![
            AssistantBlock::text("partial"),
            AssistantBlock::tool_call("c1", "echo", json!({})),
        ],
        StopReason::Aborted,
    ))]);
    h.prompt("q").unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::Cancelled);
    assert_eq!(execute_tools_actions(&h), 0);
    assert_eq!(results(h.agent.transcript()), vec!["c1:echo skipped error"]);
    assert_eq!(h.agent.transcript().len(), 3, "the answer stays, paired");
    common::snapshot!("model_aborted_stop_reason", h.rendered());
}

/// §8.2: an answer with stop reason `error` ends `Error(Inference{code: "model_error"})` with
/// its error message; its calls are paired `skipped`.
#[test]
fn model_error_stop_reason_ends_error() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::Message(AssistantMessage {
        error_message: Some("context overflow".into()),
        ..AssistantMessage::new(
            vec![AssistantBlock::tool_call("c1", "echo", json!({}))],
            StopReason::Error,
        )
    })]);
    h.prompt("q").unwrap();
    h.drive();
    assert_eq!(
        h.last_cause(),
        &EndCause::Error(Failure::Inference {
            code: "model_error".into(),
            message: "context overflow".into(),
        })
    );
    assert_eq!(results(h.agent.transcript()), vec!["c1:echo skipped error"]);
    common::snapshot!("model_error_stop_reason", h.rendered());
}

// ----- §10 misuse errors change nothing -----------------------------------------------------------

fn tool_done_input(run_id: RunId, call_id: &str) -> Input {
    Input::ToolDone {
        run_id,
        call_id: CallId::new(call_id),
        output: ToolOutput::text(call_id, "x"),
    }
}

fn model_done_input(run_id: RunId, step: Step, message: AssistantMessage) -> Input {
    Input::ModelDone {
        run_id,
        step,
        message,
    }
}

fn calls_message(ids: &[&str]) -> AssistantMessage {
    let calls = ids
        .iter()
        .map(|id| AssistantBlock::tool_call(*id, "echo", json!({})))
        .collect();
    AssistantMessage::new(calls, StopReason::ToolUse)
}

/// Rejects every `(label, input, kind)` of `cases` (see [`reject`]), returning the errors.
fn reject_all(h: &mut Harness, cases: Vec<(&str, Input, &str)>) -> Vec<AgentError> {
    cases
        .into_iter()
        .map(|(label, input, kind)| reject(h, label, input, kind))
        .collect()
}

/// §10: every misuse error has its kind and leaves the serialized agent identical (the harness
/// and `reject` compare `serde_json::to_string(&agent)` before and after), in every state:
/// idle, model out, tools executing, awaiting, after the end.
#[test]
fn misuse_errors_change_nothing() {
    let config = AgentConfig::default().with_tool("rm", ToolSpec::gated("remove", Some(100)));
    let mut h = Harness::new(config.clone());
    let other_run = RunId::new("thread-1/run-9");
    let text = AssistantMessage::text;

    h.note("idle");
    let errors = reject_all(
        &mut h,
        vec![
            ("steer", steer_input("s"), "not_accepting"),
            (
                "follow_up",
                Input::FollowUp {
                    message: UserMessage::text("f"),
                },
                "not_accepting",
            ),
            (
                "model_done run-1 step 1",
                model_done_input(run(1), 1, text("x")),
                "unexpected_outcome",
            ),
            (
                "model_delta",
                Input::ModelDelta {
                    run_id: run(1),
                    step: 1,
                    text: "x".into(),
                },
                "unexpected_outcome",
            ),
            (
                "tool_done c1",
                tool_done_input(run(1), "c1"),
                "unexpected_outcome",
            ),
            ("pause", Input::Pause, "invalid_state"),
            ("cancel_wait", Input::CancelWait, "invalid_state"),
            (
                "expire_wait",
                Input::ExpireWait { now_ms: 1_000 },
                "invalid_state",
            ),
            (
                "stop",
                Input::Stop {
                    reason: "budget".into(),
                },
                "invalid_state",
            ),
            ("abandon_tools", Input::AbandonTools, "invalid_state"),
            (
                "resume_ticket allow",
                Input::ResumeTicket {
                    result: ResumeResult::allow(),
                    now_ms: None,
                },
                "resume",
            ),
            ("prompt \"  \"", prompt_input("  "), "invalid_input"),
            (
                "prompt with an empty run id",
                Input::Prompt {
                    message: UserMessage::text("q"),
                    now_ms: 0,
                    run_id: Some(RunId::new("")),
                },
                "invalid_input",
            ),
        ],
    );
    assert_eq!(errors[10], AgentError::Resume(ResumeError::NotWaiting));
    h.abort().unwrap();
    assert_eq!(h.agent.pending_outputs(), 0, "abort while idle is a no-op");

    h.note("the model call of step 1 is out");
    h.script([
        Reply::calls(&[("c1", "echo"), ("c2", "echo")]),
        Reply::call("c3", "rm", json!({})),
    ]);
    h.prompt("q").unwrap();
    let errors = reject_all(
        &mut h,
        vec![
            ("prompt", prompt_input("again"), "busy"),
            (
                "model_done for another run",
                model_done_input(other_run.clone(), 1, text("x")),
                "unexpected_outcome",
            ),
            (
                "model_done for step 2",
                model_done_input(run(1), 2, text("x")),
                "unexpected_outcome",
            ),
            (
                "model_failed for step 2",
                Input::ModelFailed {
                    run_id: run(1),
                    step: 2,
                    code: "x".into(),
                    message: "x".into(),
                },
                "unexpected_outcome",
            ),
            (
                "model_done with a duplicate call id",
                model_done_input(run(1), 1, calls_message(&["d", "d"])),
                "invalid_input",
            ),
            (
                "model_done with an empty call id",
                model_done_input(run(1), 1, calls_message(&[""])),
                "invalid_input",
            ),
            (
                "model_failed with an empty code",
                Input::ModelFailed {
                    run_id: run(1),
                    step: 1,
                    code: " ".into(),
                    message: "x".into(),
                },
                "invalid_input",
            ),
            ("steer \"\"", steer_input(""), "invalid_input"),
            (
                "tool_done c1",
                tool_done_input(run(1), "c1"),
                "unexpected_outcome",
            ),
            ("cancel_wait", Input::CancelWait, "invalid_state"),
            (
                "expire_wait",
                Input::ExpireWait { now_ms: 1_000 },
                "invalid_state",
            ),
            ("abandon_tools", Input::AbandonTools, "invalid_state"),
            (
                "stop \" \"",
                Input::Stop { reason: " ".into() },
                "invalid_input",
            ),
            (
                "config after the first prompt",
                Input::Config {
                    config: config.clone(),
                },
                "invalid_state",
            ),
        ],
    );
    assert_eq!(errors[0], AgentError::Busy { active_run: run(1) });

    h.note("the tools of step 1 are executing");
    h.step();
    let errors = reject_all(
        &mut h,
        vec![
            (
                "tool_done zz",
                tool_done_input(run(1), "zz"),
                "unknown_call",
            ),
            (
                "tool_done with an empty call id",
                tool_done_input(run(1), ""),
                "invalid_input",
            ),
            (
                "tool_done c1 with an output naming c2",
                Input::ToolDone {
                    run_id: run(1),
                    call_id: CallId::new("c1"),
                    output: ToolOutput::text("c2", "x"),
                },
                "invalid_input",
            ),
            (
                "tool_done for another run",
                tool_done_input(other_run.clone(), "c1"),
                "unexpected_outcome",
            ),
            (
                "model_done while tools run",
                model_done_input(run(1), 1, text("x")),
                "unexpected_outcome",
            ),
            ("cancel_wait", Input::CancelWait, "invalid_state"),
        ],
    );
    assert!(
        matches!(&errors[0], AgentError::UnknownCall { call_id, .. } if call_id.as_str() == "zz")
    );
    h.answer_call("c1");
    let errors = reject_all(
        &mut h,
        vec![
            (
                "tool_done c1 again",
                tool_done_input(run(1), "c1"),
                "duplicate_outcome",
            ),
            (
                "tool_progress c1 after its outcome",
                Input::ToolProgress {
                    run_id: run(1),
                    call_id: CallId::new("c1"),
                    content: vec![ContentBlock::text("50%")],
                },
                "unexpected_outcome",
            ),
        ],
    );
    assert_eq!(
        errors[0],
        AgentError::DuplicateOutcome {
            call_id: CallId::new("c1")
        }
    );
    h.answer_call("c2");

    h.note("the run awaits approval of c3");
    h.step();
    assert_eq!(h.agent.run_state(), Some(RunState::Awaiting));
    let ticket = h.agent.current_ticket().expect("a ticket").clone();
    let mut stale = ResumeCommand::from_ticket(&ticket, ResumeResult::allow(), 0);
    stale.correlation_id = "thread-1/run-1:wait-0".into();
    let errors = reject_all(
        &mut h,
        vec![
            ("pause", Input::Pause, "invalid_state"),
            ("abandon_tools", Input::AbandonTools, "invalid_state"),
            (
                "expire_wait at 50",
                Input::ExpireWait { now_ms: 50 },
                "not_expired",
            ),
            (
                "resume_ticket with input",
                Input::ResumeTicket {
                    result: ResumeResult::Input("hi".into()),
                    now_ms: None,
                },
                "resume",
            ),
            (
                "resume with another correlation id",
                Input::Resume { command: stale },
                "resume",
            ),
            ("prompt", prompt_input("again"), "busy"),
            (
                "model_done while awaiting",
                model_done_input(run(1), 2, text("x")),
                "unexpected_outcome",
            ),
            (
                "tool_done c3",
                tool_done_input(run(1), "c3"),
                "unexpected_outcome",
            ),
        ],
    );
    assert!(matches!(
        errors[2],
        AgentError::NotExpired {
            deadline_ms: Some(100),
            now_ms: 50
        }
    ));
    assert!(matches!(
        errors[3],
        AgentError::Resume(ResumeError::ResultKindMismatch { .. })
    ));
    assert!(matches!(
        errors[4],
        AgentError::Resume(ResumeError::CorrelationMismatch { .. })
    ));
    h.input("cancel_wait", Input::CancelWait).unwrap();
    assert_eq!(h.last_cause(), &EndCause::Cancelled);

    h.note("the run ended");
    reject_all(
        &mut h,
        vec![
            ("cancel_wait", Input::CancelWait, "invalid_state"),
            ("stop", Input::Stop { reason: "x".into() }, "invalid_state"),
            ("pause", Input::Pause, "invalid_state"),
            (
                "model_done after the end",
                model_done_input(run(1), 2, text("x")),
                "unexpected_outcome",
            ),
            (
                "prompt reusing the ended run's id",
                Input::Prompt {
                    message: UserMessage::text("q"),
                    now_ms: 0,
                    run_id: Some(run(1)),
                },
                "invalid_input",
            ),
        ],
    );
    assert_eq!(
        results(h.agent.transcript()),
        vec![
            "c1:echo executed",
            "c2:echo executed",
            "c3:rm skipped error"
        ]
    );
    common::snapshot!("misuse_errors", h.rendered());
}

// ----- run ids ---------------------------------------------------------------------------------

/// §1: run ids are unique. A host-supplied id that has the minted shape (`"{thread}/run-{n}"`)
/// is skipped when the agent mints, and a host-supplied id is never accepted twice.
#[test]
fn minted_run_id_never_repeats_a_host_supplied_one() {
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::text("a"), Reply::text("b")]);
    h.input(
        "prompt \"q1\" with run id thread-1/run-2",
        Input::Prompt {
            message: UserMessage::text("q1"),
            now_ms: 0,
            run_id: Some(run(2)),
        },
    )
    .unwrap();
    h.drive();
    let minted = h
        .agent
        .prompt(UserMessage::text("q2"), 0)
        .expect("an idle agent accepts a prompt");
    assert_ne!(minted, run(2), "the minted id repeats the first run's id");
    assert_eq!(minted, run(1), "the first free minted id");
    h.drain();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    let reused = h.input(
        "prompt \"q3\" with run id thread-1/run-1 again",
        Input::Prompt {
            message: UserMessage::text("q3"),
            now_ms: 0,
            run_id: Some(run(1)),
        },
    );
    assert!(matches!(reused, Err(AgentError::InvalidInput(_))));
}
