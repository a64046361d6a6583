//! T5 allow and deny: an approved call executes and the same run continues; a denied call
//! is paired with a denied result carrying the reason; two gated calls are asked one ticket
//! at a time, in call order.

use crate::common;
use crate::common::harness::{Harness, Reply};
use crate::support::{
    assert_nothing_executing, config, dispositions, execute_tools_count, outcomes, pending_ids,
    result_of, run1, text_of, ticket, tool_start_count,
};
use runcore::store::*;
use runcore::*;
use serde_json::json;

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
                arguments: json!({"path": "/tmp/x"}).into(),
            },
        }
    );
    assert_eq!(h.store.resume_ticket(&run1()).unwrap(), Some(t.clone()));
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
    assert_eq!(h.store.resume_ticket(&run1()).unwrap(), None);
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
