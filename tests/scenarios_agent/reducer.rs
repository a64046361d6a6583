//! A1, A2, A5: the pure reducer derives the state from events, ignores the events of an
//! older run, and observers see a state that reflects every event.

use std::cell::RefCell;
use std::rc::Rc;

use crate::common;
use crate::common::harness::{Harness, Reply};
use crate::support::{answer_model_with, kind, kinds, loop_event, render_state, run};
use runcore::*;
use serde_json::json;

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
            message: Some(Message::user("hi")),
            messages: Vec::new(),
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
                message: ask.clone().into(),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::ToolStart {
                step: 1,
                call_id: "c1".into(),
                name: "echo".into(),
                arguments: json!({"x": 1}).into(),
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
                message: Message::ToolResult(result.clone().into()),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::AssistantMessage {
                step: 2,
                message: AssistantMessage::text("done").into(),
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
    assert_eq!(
        states[3].messages.last(),
        Some(&Message::Assistant(ask.into()))
    );
    // tool start / end move the pending ids.
    assert_eq!(states[4].pending_tool_call_ids, vec![CallId::new("c1")]);
    assert!(states[5].pending_tool_call_ids.is_empty());
    assert_eq!(states[5].messages.len(), 2);
    // the tool result is appended.
    assert_eq!(
        states[6].messages.last(),
        Some(&Message::ToolResult(result.into()))
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
                kind: Default::default(),
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
        message: Some(Message::user(text)),
        messages: Vec::new(),
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
                message: AssistantMessage::text("old answer").into(),
            },
        ),
        loop_event(
            &r1,
            LoopEvent::ToolStart {
                step: 1,
                call_id: "c9".into(),
                name: "echo".into(),
                arguments: json!({}).into(),
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
        .filter(|e| e.run_id() == Some(&run(1)) && !matches!(e, AgentEvent::RunStart { .. }))
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

// ----- A5 observers -----------------------------------------------------------------------------

/// Whether `state` already reflects `event` (what an observer must see).
fn reflects(state: &AgentState, event: &AgentEvent) -> bool {
    match event {
        AgentEvent::RunStart {
            run_id, message, ..
        } => {
            state.status == AgentStatus::Running
                && state.active_run_id.as_ref() == Some(run_id)
                && state.messages.last() == message.as_ref()
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
