//! A3, A4, A6, A7, A8: the busy guard and the shared transcript, a run started on `run_end`,
//! no shared mutable data and malformed tool output, and abort before the first model call
//! and during tools.

use crate::common;
use crate::common::harness::{Harness, Reply, ToolOutputScript};
use crate::support::{
    answer_model_with_by_hand, apply_only, assistant_text, count_model_calls,
    execute_tools_actions, is_input_closed, is_run_end, is_run_start, is_tool_start, kinds, lines,
    poll_until, prompt_input, reject, result_of, results, run, run_bounds,
};
use runcore::host::script::ModelTurn;
use runcore::store::*;
use runcore::*;
use serde_json::json;

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
        ModelTurn::fail("rate_limited", "slow down"),
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
    apply_only(&mut h, "tool_done c1", Input::tool_done(run_id, output));
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
        Some(AgentEvent::RunStart { message, .. }) => *message = Some(tampered.clone()),
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
    h.pending_tools[0].1.arguments = json!({"path": "/etc/passwd"}).into();
    h.step();
    let call = h.agent.transcript()[1]
        .as_assistant()
        .and_then(|a| a.tool_calls().next())
        .expect("the call is in the transcript");
    assert_eq!(call.arguments, json!({"path": "a.txt"}).into());

    let mut forged = h.agent.transcript()[2].clone();
    if let Message::ToolResult(result) = &mut forged {
        // Copy on write: the agent's own message is not touched.
        let result = std::sync::Arc::make_mut(result);
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
    let committed = h.store.committed_messages(h.agent.thread_id()).unwrap();
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
            meta: Default::default(),
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
    h.script([ModelTurn::fail("request_cancelled", "the host cancelled")]);
    h.prompt("go").unwrap();
    h.abort().unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::Cancelled);
    assert_eq!(h.agent.transcript().len(), 2, "the error answer stays");
    common::snapshot!("a08_model_failure_after_abort", h.rendered());
}
