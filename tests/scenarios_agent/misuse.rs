//! §10: every misuse error changes nothing, and minted run ids never repeat a host-supplied
//! one.

use crate::common;
use crate::common::harness::{Harness, Reply};
use crate::support::{prompt_input, reject, results, run, steer_input};
use runcore::*;
use serde_json::json;

// ----- §10 misuse errors change nothing -----------------------------------------------------------

fn tool_done_input(run_id: RunId, call_id: &str) -> Input {
    Input::tool_done(run_id, ToolOutput::text(call_id, "x"))
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
                    kind: Default::default(),
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
            ("expire_wait", Input::ExpireWait, "invalid_state"),
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
                },
                "resume",
            ),
            ("prompt \"  \"", prompt_input("  "), "invalid_input"),
            (
                "prompt with an empty run id",
                Input::Prompt {
                    message: Some(UserMessage::text("q")),
                    run_id: Some(RunId::new("")),
                    messages: Vec::new(),
                },
                "invalid_input",
            ),
            (
                "set_queue_modes without a mode",
                Input::SetQueueModes {
                    steering_mode: None,
                    follow_up_mode: None,
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
                    retry_after_ms: None,
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
                    retry_after_ms: None,
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
            ("expire_wait", Input::ExpireWait, "invalid_state"),
            ("abandon_tools", Input::AbandonTools, "invalid_state"),
            (
                "stop \" \"",
                Input::Stop { reason: " ".into() },
                "invalid_input",
            ),
            (
                "config after the first prompt",
                Input::Config(config.clone()),
                "invalid_state",
            ),
        ],
    );
    assert_eq!(errors[0], AgentError::Busy { active_run: run(1) });

    h.note("the tools of step 1 are executing");
    h.step();
    let mut errors = reject_all(
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
        ],
    );
    // An output naming another call cannot be written as an `Input` (its call id is the
    // output's); the `tool_done` method rejects it before it gets there.
    let before = serde_json::to_string(&h.agent).expect("agent serializes");
    let err = h
        .agent
        .tool_done(&run(1), &CallId::new("c1"), ToolOutput::text("c2", "x"))
        .expect_err("an output naming another call is rejected");
    assert_eq!(err.kind(), "invalid_input");
    assert_eq!(
        serde_json::to_string(&h.agent).expect("agent serializes"),
        before
    );
    h.trace.push(format!(
        "> tool_done c1 with an output naming c2\n  ! {} ({})",
        err,
        err.kind()
    ));
    errors.push(err);
    errors.extend(reject_all(
        &mut h,
        vec![
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
    ));
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
    // Rejected inputs arrive at 50 ms (time changes nothing when an input is rejected).
    h.clock_ms = 50;
    let errors = reject_all(
        &mut h,
        vec![
            ("pause", Input::Pause, "invalid_state"),
            ("abandon_tools", Input::AbandonTools, "invalid_state"),
            ("expire_wait at 50", Input::ExpireWait, "not_expired"),
            (
                "resume_ticket with input",
                Input::ResumeTicket {
                    result: ResumeResult::Input("hi".into()),
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
    h.clock_ms = 0;
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
                    message: Some(UserMessage::text("q")),
                    run_id: Some(run(1)),
                    messages: Vec::new(),
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
            message: Some(UserMessage::text("q1")),
            run_id: Some(run(2)),
            messages: Vec::new(),
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
            message: Some(UserMessage::text("q3")),
            run_id: Some(run(1)),
            messages: Vec::new(),
        },
    );
    assert!(matches!(reused, Err(AgentError::InvalidInput(_))));
}
