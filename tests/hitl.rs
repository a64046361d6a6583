//! Human in the loop (SPEC §4, §8.3, §8.5, §11 T5): approvals, the wait controls (cancel,
//! expiry, abort, stop, pause, abandoning tools) and the resume checks, through the public
//! API.
//!
//! Every scenario asserts the behaviour explicitly first (the harness also checks its
//! invariants after every drained output), then snapshots the rendered trace, so a snapshot is
//! a reviewed picture of behaviour that is already checked.

mod common;

use common::harness::{Harness, Reply, render_output};
use runcore::*;
use serde_json::json;

// ----- helpers ---------------------------------------------------------------------------------

/// The id the agent mints for its first run on the default thread.
fn run1() -> RunId {
    RunId::new("thread-1/run-1")
}

/// `rm` needs approval within 1 s; `ask` needs approval and never expires; anything else
/// (`echo`) is auto.
fn config() -> AgentConfig {
    AgentConfig::default()
        .with_tool("rm", ToolSpec::gated("remove", Some(1000)))
        .with_tool("ask", ToolSpec::gated("ask a person", None))
}

/// The ticket the agent currently waits on.
fn ticket(h: &Harness) -> ResumeTicket {
    h.agent
        .current_ticket()
        .cloned()
        .expect("the run is awaiting")
}

/// The call id a ticket waits on.
fn waiting_call(h: &Harness) -> String {
    ticket(h)
        .target()
        .call_id()
        .map(|c| c.as_str().to_owned())
        .expect("a tool-call wait")
}

/// `(call id, outcome)` of every tool result in the committed transcript.
fn outcomes(h: &Harness) -> Vec<(String, ResultOutcome)> {
    h.store
        .committed_messages(h.agent.thread_id())
        .iter()
        .filter_map(Message::as_tool_result)
        .map(|r| (r.call_id.as_str().to_owned(), r.outcome))
        .collect()
}

/// The committed result of `call_id`.
fn result_of(h: &Harness, call_id: &str) -> ToolResultMessage {
    h.store
        .committed_messages(h.agent.thread_id())
        .iter()
        .filter_map(Message::as_tool_result)
        .find(|r| r.call_id.as_str() == call_id)
        .cloned()
        .unwrap_or_else(|| panic!("no committed result for {call_id}"))
}

fn text_of(result: &ToolResultMessage) -> String {
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
fn execute_tools_count(h: &Harness) -> usize {
    h.trace
        .iter()
        .filter(|line| line.starts_with("  action execute_tools"))
        .count()
}

/// How many `tool_start` events were emitted.
fn tool_start_count(h: &Harness) -> usize {
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
fn assert_nothing_executing(h: &Harness) {
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
fn pending_ids(h: &Harness) -> Vec<String> {
    h.pending_tools
        .iter()
        .map(|(_, c)| c.id.as_str().to_owned())
        .collect()
}

/// A command answering the current ticket at the harness clock.
fn command(h: &Harness, result: ResumeResult) -> ResumeCommand {
    ResumeCommand::from_ticket(&ticket(h), result, h.clock_ms)
}

fn resume_with(h: &mut Harness, label: &str, command: ResumeCommand) -> Result<(), AgentError> {
    h.input(label, Input::Resume { command })
}

/// A rejected input: the error is returned, and nothing changed — the serialized agent (the
/// harness asserts that too), the store, the commits and the current ticket.
fn reject(h: &mut Harness, label: &str, input: Input) -> AgentError {
    let agent_before = serde_json::to_string(&h.agent).expect("agent serializes");
    let store_before = serde_json::to_string(&h.store).expect("store serializes");
    let ticket_before = h.agent.current_ticket().cloned();
    let (commits, events) = (h.commits.len(), h.events.len());
    let err = match h.input(label, input) {
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

fn resume_error(err: AgentError) -> ResumeError {
    match err {
        AgentError::Resume(e) => e,
        other => panic!("expected a resume error, got {other}"),
    }
}

fn system(id: &str, text: &str) -> Message {
    Message::System(SystemMessage::text(text).with_id(id))
}

/// `(disposition kind, correlation id or cause)` of every commit so far.
fn dispositions(h: &Harness) -> Vec<String> {
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

fn draft_kinds(commit: &ThreadCommit) -> Vec<&str> {
    commit.events.iter().map(|e| e.kind.as_str()).collect()
}

/// A gated batch `[c1 rm, c2 echo, c3 ask]` awaiting its first approval.
fn gated_batch(h: &mut Harness) {
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "echo"), ("c3", "ask")]),
        Reply::text("done"),
    ]);
    h.prompt("tidy up").unwrap();
    h.drive();
    assert_eq!(waiting_call(h), "c1");
}

// ----- T5: allow, deny ---------------------------------------------------------------------------

#[test]
fn t5_allow_executes_the_call_and_continues_the_same_run() {
    let mut h = Harness::new(config());
    h.clock_ms = 5_000;
    h.script([
        Reply::call("c1", "rm", json!({"path": "/tmp/x"})),
        Reply::text("removed"),
    ]);
    h.prompt("remove /tmp/x").unwrap();
    h.drive();

    let t = ticket(&h);
    assert_eq!(t.correlation_id, "thread-1/run-1:wait-1");
    assert_eq!(t.run_id, run1());
    assert_eq!(t.thread_id.as_str(), "thread-1");
    assert_eq!(t.snapshot_id, "default");
    assert_eq!(t.catalog_fingerprint, "default");
    assert_eq!(
        t.deadline_ms,
        Some(6_000),
        "clock when created + deadline_after_ms"
    );
    assert_eq!(
        t.target(),
        &AwaitTarget::ToolCall {
            reason: ToolWaitReason::Permission,
            call_id: CallId::new("c1"),
            tool: PendingTool {
                name: "rm".into(),
                arguments: json!({"path": "/tmp/x"}),
            },
        }
    );
    assert_eq!(h.store.resume_ticket(&run1()), Some(t.clone()));
    assert_nothing_executing(&h);
    assert_eq!(tool_start_count(&h), 0);

    h.clock_ms = 5_500;
    h.resume(ResumeResult::allow()).unwrap();
    assert_eq!(h.agent.run_state(), Some(RunState::Running));
    assert_eq!(pending_ids(&h), ["c1"], "the allowed call executes");
    h.drive();

    assert_eq!(
        h.run_starts,
        [run1()],
        "the same run continues: no new run_start"
    );
    assert_eq!(h.run_ends.len(), 1);
    assert_eq!(h.run_ends[0].0, run1());
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(h.last_result().steps, 2);
    assert_eq!(outcomes(&h), [("c1".to_owned(), ResultOutcome::Executed)]);
    assert_eq!(text_of(&result_of(&h, "c1")), "rm ok");
    assert_eq!(
        h.model_calls
            .iter()
            .map(|(run, step, _)| (run.clone(), *step))
            .collect::<Vec<_>>(),
        [(run1(), 1), (run1(), 2)]
    );
    assert_eq!(h.store.resume_ticket(&run1()), None);
    common::snapshot!("t5_allow", h.rendered());
}

#[test]
fn t5_deny_pairs_a_denied_result_with_the_reason_and_continues() {
    let mut h = Harness::new(config());
    h.script([
        Reply::call("c1", "rm", json!({"path": "/"})),
        Reply::text("understood, not removing it"),
    ]);
    h.prompt("remove everything").unwrap();
    h.drive();
    h.resume(ResumeResult::deny("not on production")).unwrap();
    h.drive();

    let denied = result_of(&h, "c1");
    assert_eq!(denied.outcome, ResultOutcome::Denied);
    assert!(denied.is_error);
    assert_eq!(denied.tool_name, "rm");
    assert!(
        text_of(&denied).contains("not on production"),
        "the reason is shown to the model: {}",
        text_of(&denied)
    );
    assert_eq!(execute_tools_count(&h), 0, "a denied call never executes");
    // The model's next request sees the call and its denied result.
    let request = h.requests.last().expect("a second model call");
    assert_eq!(
        request.last().and_then(Message::as_tool_result),
        Some(&denied)
    );
    assert_eq!(h.run_starts, [run1()]);
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(h.last_result().steps, 2);
    common::snapshot!("t5_deny", h.rendered());
}

#[test]
fn t5_two_gated_calls_are_asked_one_ticket_at_a_time_in_call_order() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "echo"), ("c3", "ask")]),
        Reply::text("done"),
    ]);
    h.prompt("tidy up").unwrap();
    h.drive();

    let first = ticket(&h);
    assert_eq!(first.correlation_id, "thread-1/run-1:wait-1");
    assert_eq!(first.target().call_id(), Some(&CallId::new("c1")));
    assert_nothing_executing(&h);
    assert_eq!(
        tool_start_count(&h),
        0,
        "no call of the batch starts before both are decided"
    );

    h.resume(ResumeResult::allow()).unwrap();
    let second = ticket(&h);
    assert_eq!(second.correlation_id, "thread-1/run-1:wait-2");
    assert_eq!(second.target().call_id(), Some(&CallId::new("c3")));
    assert_eq!(second.deadline_ms, None, "ask has no deadline");
    assert_nothing_executing(&h);
    assert_eq!(tool_start_count(&h), 0);
    assert_eq!(execute_tools_count(&h), 0);

    h.resume(ResumeResult::allow()).unwrap();
    assert_eq!(
        pending_ids(&h),
        ["c1", "c2", "c3"],
        "executed in call order"
    );
    h.drive();
    assert_eq!(
        dispositions(&h),
        [
            "running",
            "running",
            "awaiting thread-1/run-1:wait-1",
            "running",
            "awaiting thread-1/run-1:wait-2",
            "running",
            "running",
            "ended natural_end",
        ]
    );
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Executed),
            ("c2".to_owned(), ResultOutcome::Executed),
            ("c3".to_owned(), ResultOutcome::Executed),
        ]
    );
    assert_eq!(h.run_starts, [run1()]);
    common::snapshot!("t5_two_gated_calls", h.rendered());
}

// ----- T5: duplicate, stale and forged resumes ---------------------------------------------------

#[test]
fn t5_duplicate_resume_is_not_waiting() {
    let mut h = Harness::new(config());
    h.script([Reply::call("c1", "rm", json!({})), Reply::text("done")]);
    h.prompt("remove it").unwrap();
    h.drive();
    let allow = command(&h, ResumeResult::allow());
    resume_with(&mut h, "resume wait-1 allow", allow.clone()).unwrap();
    assert_eq!(
        pending_ids(&h),
        ["c1"],
        "the run moved on: the call executes"
    );

    let err = reject(
        &mut h,
        "resume wait-1 allow (again)",
        Input::Resume {
            command: allow.clone(),
        },
    );
    assert_eq!(err, AgentError::Resume(ResumeError::NotWaiting));
    let err = reject(
        &mut h,
        "resume_ticket allow (no ticket)",
        Input::ResumeTicket {
            result: ResumeResult::allow(),
            now_ms: None,
        },
    );
    assert_eq!(err, AgentError::Resume(ResumeError::NotWaiting));

    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    let err = reject(
        &mut h,
        "resume wait-1 allow (after the run ended)",
        Input::Resume { command: allow },
    );
    assert_eq!(err, AgentError::Resume(ResumeError::NotWaiting));
    assert_eq!(outcomes(&h), [("c1".to_owned(), ResultOutcome::Executed)]);
    common::snapshot!("t5_duplicate_resume", h.rendered());
}

#[test]
fn t5_stale_ticket_after_the_run_awaits_again_is_a_correlation_mismatch() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "rm")]),
        Reply::text("done"),
    ]);
    h.prompt("remove both").unwrap();
    h.drive();
    let stale = command(&h, ResumeResult::allow());
    resume_with(&mut h, "resume wait-1 allow", stale.clone()).unwrap();
    assert_eq!(ticket(&h).correlation_id, "thread-1/run-1:wait-2");

    let err = resume_error(reject(
        &mut h,
        "resume wait-1 allow (stale)",
        Input::Resume { command: stale },
    ));
    assert_eq!(
        err,
        ResumeError::CorrelationMismatch {
            expected: "thread-1/run-1:wait-2".into(),
            got: "thread-1/run-1:wait-1".into(),
        }
    );
    assert_eq!(waiting_call(&h), "c2", "the current ticket stays");

    h.resume(ResumeResult::deny("keep c2")).unwrap();
    h.drive();
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Executed),
            ("c2".to_owned(), ResultOutcome::Denied),
        ]
    );
    common::snapshot!("t5_stale_ticket", h.rendered());
}

#[test]
fn forged_commands_are_rejected_with_exactly_their_error_and_change_nothing() {
    let mut h = Harness::new(config());
    h.script([Reply::call("c1", "ask", json!({})), Reply::text("done")]);
    h.prompt("ask first").unwrap();
    h.drive();
    let genuine = command(&h, ResumeResult::allow());
    let current = ticket(&h);

    type Forge = fn(&mut ResumeCommand);
    let forgeries: [(&str, Forge, ResumeError); 5] = [
        (
            "correlation",
            |c| c.correlation_id = "thread-1/run-1:wait-9".into(),
            ResumeError::CorrelationMismatch {
                expected: "thread-1/run-1:wait-1".into(),
                got: "thread-1/run-1:wait-9".into(),
            },
        ),
        (
            "run",
            |c| c.run_id = RunId::new("thread-1/run-2"),
            ResumeError::RunMismatch {
                expected: run1(),
                got: RunId::new("thread-1/run-2"),
            },
        ),
        (
            "thread",
            |c| c.thread_id = ThreadId::new("thread-2"),
            ResumeError::ThreadMismatch {
                expected: ThreadId::new("thread-1"),
                got: ThreadId::new("thread-2"),
            },
        ),
        (
            "snapshot",
            |c| c.snapshot_id = "snapshot-v2".into(),
            ResumeError::SnapshotMismatch {
                expected: "default".into(),
                got: "snapshot-v2".into(),
            },
        ),
        (
            "fingerprint",
            |c| c.catalog_fingerprint = "catalog-v2".into(),
            ResumeError::FingerprintMismatch {
                expected: "default".into(),
                got: "catalog-v2".into(),
            },
        ),
    ];
    for (field, forge, expected) in forgeries {
        let mut forged = genuine.clone();
        forge(&mut forged);
        let err = resume_error(reject(
            &mut h,
            &format!("resume with a forged {field}"),
            Input::Resume { command: forged },
        ));
        assert_eq!(err, expected, "forged {field}");
        assert_eq!(
            ticket(&h),
            current,
            "the ticket is still current after {field}"
        );
        assert_eq!(h.store.resume_ticket(&run1()), Some(current.clone()));
    }

    resume_with(&mut h, "resume with the genuine command", genuine).unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(outcomes(&h), [("c1".to_owned(), ResultOutcome::Executed)]);
    common::snapshot!("forged_commands", h.rendered());
}

#[test]
fn result_kind_must_fit_the_wait() {
    let mut h = Harness::new(config());
    h.script([Reply::call("c1", "ask", json!({})), Reply::text("done")]);
    h.prompt("ask").unwrap();
    h.drive();

    let permission_target = "tool_call/permission".to_owned();
    let wrong_for_permission = [
        ResumeResult::Input("yes".into()),
        ResumeResult::Continue,
        ResumeResult::ToolResult(ToolOutput::text("c1", "did it myself")),
    ];
    for result in wrong_for_permission {
        let kind = result.kind();
        let cmd = command(&h, result);
        let err = resume_error(reject(
            &mut h,
            &format!("resume {} at a permission wait", kind.as_str()),
            Input::Resume { command: cmd },
        ));
        assert_eq!(
            err,
            ResumeError::ResultKindMismatch {
                target: permission_target.clone(),
                expected: vec![ResultKind::Permission],
                got: kind,
            }
        );
    }
    h.resume(ResumeResult::allow()).unwrap();

    // A manual pause takes text input only.
    h.input("pause", Input::Pause).unwrap();
    h.drive();
    assert_eq!(
        ticket(&h).target(),
        &AwaitTarget::Pause(PauseReason::Manual)
    );
    for result in [ResumeResult::allow(), ResumeResult::Continue] {
        let kind = result.kind();
        let cmd = command(&h, result);
        let err = resume_error(reject(
            &mut h,
            &format!("resume {} at a manual pause", kind.as_str()),
            Input::Resume { command: cmd },
        ));
        assert_eq!(
            err,
            ResumeError::ResultKindMismatch {
                target: "pause/manual".into(),
                expected: vec![ResultKind::Input],
                got: kind,
            }
        );
    }
    h.resume(ResumeResult::Input("carry on".into())).unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("result_kind_mismatch", h.rendered());
}

// ----- T5: expiry ---------------------------------------------------------------------------------

#[test]
fn t5_expired_resume_is_rejected_and_expire_wait_ends_the_run_stopped() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "echo"), ("c3", "ask")]),
        Reply::text("never asked"),
    ]);
    h.prompt("tidy up").unwrap();
    h.drive();
    assert_eq!(ticket(&h).deadline_ms, Some(1_000));

    h.clock_ms = 1_001;
    let err = resume_error(reject(
        &mut h,
        "resume allow one past the deadline",
        Input::ResumeTicket {
            result: ResumeResult::allow(),
            now_ms: Some(1_001),
        },
    ));
    assert_eq!(
        err,
        ResumeError::Expired {
            deadline_ms: 1_000,
            now_ms: 1_001,
        }
    );
    assert_eq!(
        waiting_call(&h),
        "c1",
        "an expired ticket does not end the run by itself"
    );
    assert_eq!(h.agent.run_state(), Some(RunState::Awaiting));

    h.input("expire_wait 1001", Input::ExpireWait { now_ms: 1_001 })
        .unwrap();
    assert!(h.agent.is_idle());
    assert_eq!(h.last_cause(), &EndCause::Stopped("wait_expired".into()));
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Expired),
            ("c2".to_owned(), ResultOutcome::Skipped),
            ("c3".to_owned(), ResultOutcome::Skipped),
        ],
        "the waiting call expired, the others were skipped, none is reported as denied"
    );
    assert!(result_of(&h, "c1").is_error);
    assert_eq!(execute_tools_count(&h), 0);
    assert_eq!(h.model_calls.len(), 1);
    assert_eq!(h.store.resume_ticket(&run1()), None);
    common::snapshot!("t5_expiry", h.rendered());
}

#[test]
fn expiry_of_a_later_ticket_keeps_earlier_decisions_apart() {
    // c1 was denied and c2 allowed before c3's wait expired: c1 keeps `denied`, c2 never
    // started (`skipped`), c3 is `expired`.
    let config = AgentConfig::default().with_tool("rm", ToolSpec::gated("remove", Some(100)));
    let mut h = Harness::new(config);
    h.script([Reply::calls(&[("c1", "rm"), ("c2", "rm"), ("c3", "rm")])]);
    h.prompt("remove three").unwrap();
    h.drive();
    h.resume(ResumeResult::deny("not this one")).unwrap();
    h.clock_ms = 50;
    h.resume(ResumeResult::allow()).unwrap();
    assert_eq!(waiting_call(&h), "c3");
    assert_eq!(
        ticket(&h).deadline_ms,
        Some(150),
        "deadline from the clock at creation"
    );
    h.input("expire_wait 151", Input::ExpireWait { now_ms: 151 })
        .unwrap();
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Denied),
            ("c2".to_owned(), ResultOutcome::Skipped),
            ("c3".to_owned(), ResultOutcome::Expired),
        ]
    );
    assert_eq!(h.last_cause(), &EndCause::Stopped("wait_expired".into()));
    common::snapshot!("expiry_after_decisions", h.rendered());
}

#[test]
fn expire_wait_before_or_at_the_deadline_is_not_expired() {
    let mut h = Harness::new(config());
    h.clock_ms = 100;
    h.script([Reply::call("c1", "rm", json!({})), Reply::text("done")]);
    h.prompt("remove it").unwrap();
    h.drive();
    assert_eq!(ticket(&h).deadline_ms, Some(1_100));

    for now_ms in [500, 1_100] {
        let err = reject(
            &mut h,
            &format!("expire_wait {now_ms}"),
            Input::ExpireWait { now_ms },
        );
        assert_eq!(
            err,
            AgentError::NotExpired {
                deadline_ms: Some(1_100),
                now_ms,
            }
        );
    }
    // Not while Running or idle either.
    h.clock_ms = 1_100;
    h.resume(ResumeResult::allow())
        .expect("an answer exactly at the deadline is accepted");
    let err = reject(
        &mut h,
        "expire_wait while running",
        Input::ExpireWait { now_ms: 9_999 },
    );
    assert_eq!(err.kind(), "invalid_state");
    h.drive();
    let err = reject(
        &mut h,
        "expire_wait while idle",
        Input::ExpireWait { now_ms: 9_999 },
    );
    assert_eq!(err.kind(), "invalid_state");
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("expire_wait_not_expired", h.rendered());
}

#[test]
fn a_wait_without_deadline_never_expires() {
    let mut h = Harness::new(config());
    h.script([Reply::call("c1", "ask", json!({})), Reply::text("done")]);
    h.prompt("ask").unwrap();
    h.drive();
    assert_eq!(ticket(&h).deadline_ms, None);

    let err = reject(
        &mut h,
        "expire_wait at the end of time",
        Input::ExpireWait { now_ms: u64::MAX },
    );
    assert_eq!(
        err,
        AgentError::NotExpired {
            deadline_ms: None,
            now_ms: u64::MAX,
        }
    );
    h.clock_ms = u64::MAX;
    h.resume(ResumeResult::allow())
        .expect("a wait without deadline accepts an answer at any time");
    h.drive();
    assert_eq!(outcomes(&h), [("c1".to_owned(), ResultOutcome::Executed)]);
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("wait_without_deadline", h.rendered());
}

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
    assert_eq!(h.store.resume_ticket(&run1()), None);
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

    let late = Input::ToolDone {
        run_id: run1(),
        call_id: CallId::new("c1"),
        output: ToolOutput::text("c1", "finished after all"),
    };
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

// ----- what an accepted resume commits -------------------------------------------------------------

#[test]
fn context_messages_are_committed_first_in_the_running_commit() {
    let mut h = Harness::new(config());
    h.script([Reply::text("paused here"), Reply::text("done")]);
    h.prompt("start").unwrap();
    h.input("pause", Input::Pause).unwrap();
    h.drive();

    let context = vec![
        system("ctx-1", "The user is on a phone."),
        system("ctx-2", "Answer briefly."),
    ];
    let invalid: [(&str, Vec<Message>, &str); 3] = [
        (
            "a user context message",
            vec![system("ctx-1", "ok"), Message::user("sneaky")],
            "invalid_context_role",
        ),
        (
            "repeated context ids",
            vec![system("ctx-1", "one"), system("ctx-1", "two")],
            "invalid_context_message",
        ),
        (
            "a blank context id",
            vec![system(" ", "blank")],
            "invalid_context_message",
        ),
    ];
    for (label, messages, code) in invalid {
        let cmd = command(&h, ResumeResult::Input("go".into())).with_context(messages);
        let err = resume_error(reject(
            &mut h,
            &format!("resume with {label}"),
            Input::Resume { command: cmd },
        ));
        assert_eq!(err.code(), code, "{label}");
    }

    let commits = h.commits.len();
    let cmd = command(&h, ResumeResult::Input("go on".into())).with_context(context.clone());
    resume_with(&mut h, "resume input with two context messages", cmd).unwrap();
    let first = h.commits[commits].clone();
    assert!(matches!(first.run, RunDisposition::Running { .. }));
    assert_eq!(
        first.messages,
        [
            context[0].clone(),
            context[1].clone(),
            Message::user("go on")
        ],
        "context first, then the input"
    );
    assert_eq!(
        h.trace
            .iter()
            .skip_while(|l| !l.starts_with("> resume input"))
            .nth(1)
            .map(|l| l.starts_with("  commit running")),
        Some(true),
        "the Running commit is the first output of the resume"
    );
    h.drive();
    let request = h.requests.last().expect("a model call after the resume");
    assert_eq!(&request[request.len() - 3..], first.messages.as_slice());
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("context_messages", h.rendered());
}

#[test]
fn the_permission_decision_is_audited_in_the_same_running_commit() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "ask")]),
        Reply::text("done"),
    ]);
    h.clock_ms = 10;
    h.prompt("two gated").unwrap();
    h.drive();

    let before = h.commits.len();
    h.clock_ms = 20;
    h.resume(ResumeResult::Permission(PermissionDecision::Allow {
        note: Some("ops approved".into()),
    }))
    .unwrap();
    let decided = &h.commits[before];
    assert!(matches!(decided.run, RunDisposition::Running { .. }));
    assert!(decided.messages.is_empty());
    assert_eq!(
        draft_kinds(decided),
        ["run_state_changed", "permission_decided"]
    );
    let payload = &decided.events[1].payload;
    assert_eq!(payload["call_id"], "c1");
    assert_eq!(payload["decision"], "allow");
    assert_eq!(payload["note"], "ops approved");
    assert_eq!(payload["step"], 1);

    let before = h.commits.len();
    h.resume(ResumeResult::deny("not now")).unwrap();
    let decided = &h.commits[before];
    assert!(matches!(decided.run, RunDisposition::Running { .. }));
    assert_eq!(
        draft_kinds(decided),
        ["run_state_changed", "permission_decided"]
    );
    let payload = &decided.events[1].payload;
    assert_eq!(payload["call_id"], "c2");
    assert_eq!(payload["decision"], "deny");
    assert_eq!(payload["reason"], "not now");
    // The decision is durable before any call of its batch runs.
    let decision_line = h
        .trace
        .iter()
        .position(|l| l.contains("drafts=[run_state_changed,permission_decided]"))
        .expect("a decision commit");
    let execute_line = h
        .trace
        .iter()
        .position(|l| l.starts_with("  action execute_tools"))
        .expect("an execute_tools action");
    assert!(decision_line < execute_line);
    h.drive();

    // In the store, each decision shares its commit with the run's move back to Running.
    let events = h.store.list_events(&EventScope::Run(run1()), None, 100);
    let decisions: Vec<&EventRecord> = events
        .iter()
        .filter(|e| e.kind == "permission_decided")
        .collect();
    assert_eq!(decisions.len(), 2);
    for decision in decisions {
        assert!(
            events
                .iter()
                .any(|e| e.commit_sequence == decision.commit_sequence
                    && e.kind == "run_state_changed"
                    && e.payload["state"]["type"] == "running"),
            "decision {} is not in a Running commit",
            decision.payload
        );
    }
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Executed),
            ("c2".to_owned(), ResultOutcome::Denied),
        ]
    );
    common::snapshot!("permission_decided_audit", h.rendered());
}

#[test]
fn the_first_commit_after_an_accepted_resume_deletes_the_ticket() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "ask")]),
        Reply::text("done"),
    ]);
    h.prompt("two gated").unwrap();
    h.drive();
    let first = ticket(&h);
    assert_eq!(h.store.resume_ticket(&run1()), Some(first));

    // Act on one output at a time, like a host that persists each commit as it comes.
    h.agent.resume_ticket(ResumeResult::allow(), None).unwrap();
    h.trace
        .push("> resume allow (polled one output at a time)".into());
    assert!(h.poll_one());
    assert!(matches!(
        h.commits.last().map(|c| &c.run),
        Some(RunDisposition::Running { .. })
    ));
    assert_eq!(
        h.store.resume_ticket(&run1()),
        None,
        "the first commit after the resume deletes the ticket"
    );
    h.note("the store holds no ticket now");
    h.drain();
    let second = ticket(&h);
    assert_eq!(second.correlation_id, "thread-1/run-1:wait-2");
    assert_eq!(h.store.resume_ticket(&run1()), Some(second));

    h.agent.resume_ticket(ResumeResult::allow(), None).unwrap();
    h.trace
        .push("> resume allow (polled one output at a time)".into());
    assert!(h.poll_one());
    assert_eq!(h.store.resume_ticket(&run1()), None);
    h.note("the store holds no ticket now");
    h.drain();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("ticket_deleted_by_first_commit", h.rendered());
}

/// Context messages given with a resume in the middle of a tool batch. SPEC §8.5 puts them in
/// the resume's Running commit, so they enter the transcript *between* the batch's calls and
/// its results (each call still gets exactly one result, in call order). The harness's
/// pairing invariant wants results right after their calls, so this scenario drives the agent
/// by hand.
#[test]
fn context_messages_at_a_permission_wait_are_committed_with_the_decision() {
    let mut agent = Agent::new(config()).unwrap();
    let mut store = MemoryStore::new();
    let mut trace: Vec<String> = Vec::new();
    let drain =
        |agent: &mut Agent, store: &mut MemoryStore, trace: &mut Vec<String>, label: &str| {
            trace.push(format!("> {label}"));
            let mut actions = Vec::new();
            while let Some(output) = agent.poll() {
                trace.push(format!("  {}", render_output(&output)));
                match output {
                    Output::Commit(commit) => {
                        store.commit(commit).expect("the store accepts the commit");
                    }
                    Output::Action(action) => actions.push(action),
                    Output::Event(_) => {}
                }
            }
            actions
        };
    let run = agent.prompt(UserMessage::text("two gated"), 0).unwrap();
    drain(&mut agent, &mut store, &mut trace, "prompt");
    let assistant = AssistantMessage::new(
        vec![
            AssistantBlock::tool_call("c1", "rm", json!({})),
            AssistantBlock::tool_call("c2", "echo", json!({})),
        ],
        StopReason::ToolUse,
    );
    agent.model_done(&run, 1, assistant).unwrap();
    drain(&mut agent, &mut store, &mut trace, "model_done step 1");

    let ticket = agent.current_ticket().cloned().unwrap();
    let cmd = ResumeCommand::from_ticket(&ticket, ResumeResult::allow(), 0)
        .with_context(vec![system("ctx-1", "Approved by the on-call engineer.")]);
    agent.resume(cmd).unwrap();
    let before = store.last_sequence();
    let actions = drain(
        &mut agent,
        &mut store,
        &mut trace,
        "resume allow with one context message",
    );
    assert_eq!(store.last_sequence(), before + 1, "one commit");
    let decided = trace
        .iter()
        .rev()
        .find(|l| l.starts_with("  commit"))
        .cloned()
        .unwrap_or_default();
    assert!(decided.contains("running") && decided.contains("permission_decided"));
    assert!(decided.contains("system: \"Approved by the on-call engineer.\""));
    let [Action::ExecuteTools { calls, .. }] = actions.as_slice() else {
        panic!("expected ExecuteTools, got {actions:?}");
    };
    assert_eq!(calls.len(), 2);
    for id in ["c1", "c2"] {
        agent
            .tool_done(&run, &CallId::new(id), ToolOutput::text(id, "ok"))
            .unwrap();
        drain(
            &mut agent,
            &mut store,
            &mut trace,
            &format!("tool_done {id}"),
        );
    }
    let messages = store.committed_messages(agent.thread_id());
    let roles: Vec<&str> = messages.iter().map(|m| m.role().as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "system", "tool_result", "tool_result"]
    );
    // Each call still has exactly one result, in call order, once the context is set aside.
    let without_context: Vec<Message> = messages
        .iter()
        .filter(|m| m.role() != Role::System)
        .cloned()
        .collect();
    common::harness::check_pairing(&without_context, true).expect("paired in call order");
    let rendered: Vec<String> = messages
        .iter()
        .map(common::harness::render_message)
        .collect();
    trace.push(format!(
        "# committed transcript:\n#   {}",
        rendered.join("\n#   ")
    ));
    common::snapshot!(
        "context_messages_at_permission_wait",
        trace.join("\n") + "\n"
    );
}
