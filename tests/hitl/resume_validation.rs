//! T5 resume checks: a duplicate resume, a stale ticket, forged commands and a result
//! kind that does not fit the wait are rejected with exactly their error and change
//! nothing.

use crate::common;
use crate::common::harness::{Harness, Reply};
use crate::support::{
    command, config, outcomes, pending_ids, reject, resume_error, resume_with, run1, ticket,
    waiting_call,
};
use runcore::store::*;
use runcore::*;
use serde_json::json;

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
        assert_eq!(
            h.store.resume_ticket(&run1()).unwrap(),
            Some(current.clone())
        );
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
