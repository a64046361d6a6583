//! A9, A10, A11 and the stops: out-of-order results and FIFO steering, steering during a text
//! answer and before an abort, follow-ups and the queues of ended runs, the step budget
//! (§8.4), and the `length`, `aborted` and `error` stop reasons (§8.2).

use crate::common;
use crate::common::harness::{Harness, Reply};
use crate::support::{
    answer_model_with_by_hand, assistant_text, count_model_calls, execute_tools_actions,
    is_input_closed, kinds, lines, poll_until, reject, result_of, results, run, steer_input,
};
use runcore::host::script::ModelTurn;
use runcore::*;
use serde_json::json;

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
        ModelTurn::fail("overloaded", "try later"),
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
        ModelTurn::answer(AssistantMessage::new(
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
    h.script([ModelTurn::answer(AssistantMessage::new(
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
    h.script([ModelTurn::answer(AssistantMessage {
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
