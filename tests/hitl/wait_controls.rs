//! The wait controls: cancel, abort and stop (while awaiting, while tools run, while the
//! model is out), pause at the next boundary, and abandoning tools.

use crate::common;
use crate::common::harness::{Harness, Reply};
use crate::support::{
    assert_nothing_executing, config, execute_tools_count, gated_batch, outcomes, pending_ids,
    reject, result_of, run1, text_of, ticket, waiting_call,
};
use runcore::store::*;
use runcore::*;
use serde_json::json;

// ----- wait controls: cancel, abort, stop ----------------------------------------------------------

#[test]
fn cancel_wait_ends_the_run_cancelled_with_skipped_results() {
    let mut h = Harness::new(config());
    let err = reject(&mut h, "cancel_wait while idle", Input::CancelWait);
    assert_eq!(err.kind(), "invalid_state");
    gated_batch(&mut h);
    h.resume(ResumeResult::allow()).unwrap();
    assert_eq!(waiting_call(&h), "c3");

    h.input("cancel_wait", Input::CancelWait).unwrap();
    assert!(h.agent.is_idle(), "cancelled at once");
    assert_eq!(h.last_cause(), &EndCause::Cancelled);
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Skipped),
            ("c2".to_owned(), ResultOutcome::Skipped),
            ("c3".to_owned(), ResultOutcome::Skipped),
        ]
    );
    assert_eq!(execute_tools_count(&h), 0);
    let err = reject(&mut h, "cancel_wait after the end", Input::CancelWait);
    assert_eq!(err.kind(), "invalid_state");
    common::snapshot!("cancel_wait", h.rendered());
}

#[test]
fn cancel_wait_while_running_is_invalid_state() {
    let mut h = Harness::new(config());
    h.script([Reply::text("hi")]);
    h.prompt("hello").unwrap();
    let err = reject(
        &mut h,
        "cancel_wait while the model is called",
        Input::CancelWait,
    );
    assert_eq!(err.kind(), "invalid_state");
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
}

#[test]
fn abort_while_awaiting_cancels_at_once_and_denied_calls_keep_denied() {
    let mut h = Harness::new(config());
    h.script([Reply::calls(&[("c1", "rm"), ("c2", "ask"), ("c3", "echo")])]);
    h.prompt("tidy up").unwrap();
    h.drive();
    h.resume(ResumeResult::deny("no")).unwrap();
    assert_eq!(waiting_call(&h), "c2");
    let commits = h.commits.len();

    h.abort().unwrap();
    assert!(h.agent.is_idle(), "the run ended at once");
    assert_eq!(h.commits.len(), commits + 1, "one Ended commit");
    assert_eq!(h.last_cause(), &EndCause::Cancelled);
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Denied),
            ("c2".to_owned(), ResultOutcome::Skipped),
            ("c3".to_owned(), ResultOutcome::Skipped),
        ]
    );
    assert!(text_of(&result_of(&h, "c1")).contains(": no"));
    assert_eq!(h.store.resume_ticket(&run1()).unwrap(), None);
    common::snapshot!("abort_while_awaiting", h.rendered());
}

#[test]
fn stop_while_awaiting_ends_the_run_stopped_at_once() {
    let mut h = Harness::new(config());
    gated_batch(&mut h);
    h.input(
        "stop budget_exhausted",
        Input::Stop {
            reason: "budget_exhausted".into(),
        },
    )
    .unwrap();
    assert!(h.agent.is_idle());
    assert_eq!(
        h.last_cause(),
        &EndCause::Stopped("budget_exhausted".into())
    );
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Skipped),
            ("c2".to_owned(), ResultOutcome::Skipped),
            ("c3".to_owned(), ResultOutcome::Skipped),
        ]
    );
    let err = reject(
        &mut h,
        "stop while idle",
        Input::Stop {
            reason: "again".into(),
        },
    );
    assert_eq!(err.kind(), "invalid_state");
    common::snapshot!("stop_while_awaiting", h.rendered());
}

#[test]
fn stop_while_tools_run_waits_for_every_outcome_then_ends_stopped() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "echo"), ("c2", "echo")]),
        Reply::text("never called"),
    ]);
    h.prompt("two tools").unwrap();
    h.drive_bounded(1);
    assert_eq!(pending_ids(&h), ["c1", "c2"]);
    h.answer_call("c2");
    let commits = h.commits.len();

    h.input(
        "stop shutting_down",
        Input::Stop {
            reason: "shutting_down".into(),
        },
    )
    .unwrap();
    assert_eq!(h.commits.len(), commits, "nothing ends while a tool is out");
    assert_eq!(h.agent.run_state(), Some(RunState::Running));
    assert!(h.run_ends.is_empty());

    h.answer_call("c1");
    assert!(h.agent.is_idle());
    assert_eq!(h.last_cause(), &EndCause::Stopped("shutting_down".into()));
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Executed),
            ("c2".to_owned(), ResultOutcome::Executed),
        ]
    );
    assert_eq!(h.model_calls.len(), 1, "no model call after the stop");
    common::snapshot!("stop_while_tools_run", h.rendered());
}

#[test]
fn stop_while_the_model_is_out_waits_for_its_answer_then_ends_stopped() {
    let mut h = Harness::new(config());
    h.script([Reply::call("c1", "echo", json!({}))]);
    h.prompt("one tool").unwrap();
    assert!(h.pending_model.is_some());
    h.input(
        "stop user_left",
        Input::Stop {
            reason: "user_left".into(),
        },
    )
    .unwrap();
    assert_eq!(h.agent.run_state(), Some(RunState::Running));
    h.drive();
    assert!(h.agent.is_idle());
    assert_eq!(h.last_cause(), &EndCause::Stopped("user_left".into()));
    assert_eq!(
        outcomes(&h),
        [("c1".to_owned(), ResultOutcome::Skipped)],
        "the call the model asked for after the stop never runs"
    );
    assert_eq!(execute_tools_count(&h), 0);
    common::snapshot!("stop_while_model_out", h.rendered());
}

// ----- pause --------------------------------------------------------------------------------------

#[test]
fn pause_asks_for_a_manual_ticket_at_the_next_boundary_and_input_continues_the_run() {
    let mut h = Harness::new(config());
    h.script([Reply::text("first answer"), Reply::text("second answer")]);
    let err = reject(&mut h, "pause while idle", Input::Pause);
    assert_eq!(err.kind(), "invalid_state");
    h.prompt("start").unwrap();
    h.input("pause", Input::Pause).unwrap();
    assert_eq!(
        h.agent.run_state(),
        Some(RunState::Running),
        "only at the boundary"
    );
    h.drive();

    let t = ticket(&h);
    assert_eq!(t.target(), &AwaitTarget::Pause(PauseReason::Manual));
    assert_eq!(t.correlation_id, "thread-1/run-1:wait-1");
    assert_eq!(t.deadline_ms, None);
    assert_eq!(h.model_calls.len(), 1);
    let err = reject(&mut h, "pause while awaiting", Input::Pause);
    assert_eq!(err.kind(), "invalid_state");

    h.resume(ResumeResult::Input("please go on".into()))
        .unwrap();
    let resumed = h.commits.last().expect("a commit");
    assert!(matches!(resumed.run, RunDisposition::Running { .. }));
    assert_eq!(resumed.messages, [Message::user("please go on")]);
    h.drive();

    assert_eq!(h.run_starts, [run1()], "the same run continues");
    assert_eq!(
        h.model_calls
            .iter()
            .map(|(run, step, _)| (run.clone(), *step))
            .collect::<Vec<_>>(),
        [(run1(), 1), (run1(), 2)]
    );
    let second_request = h.requests.last().expect("a second model call");
    assert_eq!(second_request.last(), Some(&Message::user("please go on")));
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(h.last_result().steps, 2);
    common::snapshot!("pause_input_resume", h.rendered());
}

#[test]
fn pause_during_tools_waits_for_the_whole_batch() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "echo"), ("c2", "echo")]),
        Reply::text("done"),
    ]);
    h.prompt("two tools").unwrap();
    h.drive_bounded(1);
    h.answer_call("c1");
    h.input("pause", Input::Pause).unwrap();
    h.answer_call("c2");
    assert_eq!(
        ticket(&h).target(),
        &AwaitTarget::Pause(PauseReason::Manual)
    );
    let paused = h.commits.last().expect("the Awaiting commit");
    assert_eq!(
        paused.messages.len(),
        2,
        "both results are committed with the pause"
    );
    assert_nothing_executing(&h);
    h.resume(ResumeResult::Input("continue".into())).unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("pause_during_tools", h.rendered());
}

// ----- abandon_tools ------------------------------------------------------------------------------

#[test]
fn abandon_tools_pairs_interrupted_results_and_ends_indeterminate() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "echo"), ("c2", "echo"), ("c3", "rm")]),
        Reply::text("never called"),
    ]);
    h.prompt("three tools").unwrap();
    h.drive();
    h.resume(ResumeResult::deny("no")).unwrap();
    assert_eq!(pending_ids(&h), ["c1", "c2"]);
    h.answer_call("c2");

    h.input("abandon_tools", Input::AbandonTools).unwrap();
    assert!(h.agent.is_idle());
    assert_eq!(h.last_cause(), &EndCause::Indeterminate);
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Interrupted),
            ("c2".to_owned(), ResultOutcome::Executed),
            ("c3".to_owned(), ResultOutcome::Denied),
        ]
    );
    assert!(result_of(&h, "c1").is_error);

    let late = Input::tool_done(run1(), ToolOutput::text("c1", "finished after all"));
    let err = reject(&mut h, "tool_done c1 (late)", late);
    assert_eq!(err.kind(), "unexpected_outcome");
    let err = reject(&mut h, "abandon_tools while idle", Input::AbandonTools);
    assert_eq!(err.kind(), "invalid_state");
    common::snapshot!("abandon_tools", h.rendered());
}

#[test]
fn abandon_tools_without_an_executing_batch_is_invalid_state() {
    let mut h = Harness::new(config());
    gated_batch(&mut h);
    let err = reject(&mut h, "abandon_tools while awaiting", Input::AbandonTools);
    assert_eq!(err.kind(), "invalid_state");
    h.resume(ResumeResult::allow()).unwrap();
    h.resume(ResumeResult::allow()).unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
}
