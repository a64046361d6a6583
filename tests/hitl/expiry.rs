//! T5 expiry: an expired resume is rejected and `expire_wait` ends the run stopped; earlier
//! decisions stay apart; nothing expires before its deadline or without one.

use crate::common;
use crate::common::harness::{Harness, Reply};
use crate::support::{
    config, execute_tools_count, outcomes, reject, reject_at, result_of, resume_error, run1,
    ticket, waiting_call,
};
use runcore::store::*;
use runcore::*;
use serde_json::json;

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

    h.input_at("expire_wait 1001", Input::ExpireWait, 1_001)
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
    assert_eq!(h.store.resume_ticket(&run1()).unwrap(), None);
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
    h.input_at("expire_wait 151", Input::ExpireWait, 151)
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
        let err = reject_at(
            &mut h,
            &format!("expire_wait {now_ms}"),
            Input::ExpireWait,
            now_ms,
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
    let err = reject_at(
        &mut h,
        "expire_wait while running",
        Input::ExpireWait,
        9_999,
    );
    assert_eq!(err.kind(), "invalid_state");
    h.drive();
    let err = reject_at(&mut h, "expire_wait while idle", Input::ExpireWait, 9_999);
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

    let err = reject_at(
        &mut h,
        "expire_wait at the end of time",
        Input::ExpireWait,
        runcore::limits::MAX_NOW_MS,
    );
    assert_eq!(
        err,
        AgentError::NotExpired {
            deadline_ms: None,
            now_ms: runcore::limits::MAX_NOW_MS,
        }
    );
    h.clock_ms = runcore::limits::MAX_NOW_MS;
    h.resume(ResumeResult::allow())
        .expect("a wait without deadline accepts an answer at any time");
    h.drive();
    assert_eq!(outcomes(&h), [("c1".to_owned(), ResultOutcome::Executed)]);
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("wait_without_deadline", h.rendered());
}
