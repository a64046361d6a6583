//! Unit tests of the commit module: assembling and validating drafts, payload hashes, and the
//! typed drafts' stored shapes.

use super::*;
use crate::resume::{PauseReason, ResumeTicket, WaitIdentity};
use crate::state::MergePolicy;
use serde_json::json;

fn ticket(thread: &str) -> ResumeTicket {
    ResumeTicket::pause(
        WaitIdentity {
            correlation_id: "r:wait-1".into(),
            run_id: "r".into(),
            thread_id: thread.into(),
            snapshot_id: "s".into(),
            catalog_fingerprint: "f".into(),
        },
        PauseReason::Manual,
        None,
    )
}

#[test]
fn assemble_binds_only_run_scope_and_orders_drafts() {
    let run_cmd = StateCommand::set(StateScope::Run, "a", json!(1));
    let thread_cmd = StateCommand::set(StateScope::Thread, "b", json!(2));
    let commit = ThreadCommit::assemble(
        "t".into(),
        RunDisposition::Awaiting(Box::new(ticket("t"))),
        true,
        vec![],
        vec![run_cmd, thread_cmd],
        vec![AuditDraft::new("custom", json!({}))],
    );
    assert_eq!(commit.state[0].run_id, Some(RunId::new("r")));
    assert_eq!(commit.state[1].run_id, None);
    let kinds: Vec<&str> = commit.events.iter().map(|e| e.kind()).collect();
    assert_eq!(
        kinds,
        [
            "run_state_changed",
            "state_changed",
            "run_awaiting",
            "custom"
        ]
    );
    assert_eq!(commit.events[0].payload()["await_reason"], "manual");
}

#[test]
fn validate_rejects_bad_shapes() {
    let ok = ThreadCommit::assemble(
        "t".into(),
        RunDisposition::Running { run_id: "r".into() },
        true,
        vec![],
        vec![],
        vec![],
    );
    assert_eq!(ok.validate(), Ok(()));
    let mut empty_thread = ok.clone();
    empty_thread.thread_id = ThreadId::new("");
    assert_eq!(empty_thread.validate(), Err(CommitError::EmptyThreadId));
    let mut empty_run = ok.clone();
    empty_run.run = RunDisposition::Running { run_id: "".into() };
    assert_eq!(empty_run.validate(), Err(CommitError::EmptyRunId));
    let mut other_thread = ok.clone();
    other_thread.run = RunDisposition::Awaiting(Box::new(ticket("u")));
    assert!(matches!(
        other_thread.validate(),
        Err(CommitError::TicketThreadMismatch { .. })
    ));
    let mut exclusive = ok.clone();
    let e = StateCommand::set(StateScope::Thread, "k", json!(1)).with_merge(MergePolicy::Exclusive);
    exclusive.state = vec![e.clone(), e];
    assert!(matches!(
        exclusive.validate(),
        Err(CommitError::ExclusiveConflict { .. })
    ));
}

#[test]
fn payload_hash_is_stable_and_content_sensitive() {
    let a = ThreadCommit::assemble(
        "t".into(),
        RunDisposition::Running { run_id: "r".into() },
        true,
        vec![Message::user("x")],
        vec![],
        vec![],
    );
    let mut b = a.clone();
    assert_eq!(a.payload_hash(), b.payload_hash());
    b.messages.push(Message::user("y"));
    assert_ne!(a.payload_hash(), b.payload_hash());
}

#[test]
fn typed_drafts_round_trip_through_their_stored_shape() {
    let d = PermissionDecision::Deny {
        reason: Some("no".into()),
    };
    let drafts = [
        AuditDraft::permission_decided(3, &CallId::new("c"), &d).with_now_ms(7),
        AuditDraft::permission_decided(
            1,
            &CallId::new("c"),
            &PermissionDecision::Allow { note: None },
        ),
        AuditDraft::run_started(&RunId::new("r"), 4).with_now_ms(9),
        AuditDraft::run_awaiting(&RunId::new("r")),
        AuditDraft::state_changed(2),
        AuditDraft::run_state_changed(&RunDisposition::Awaiting(Box::new(ticket("t")))),
        AuditDraft::run_state_changed(&RunDisposition::Ended {
            run_id: "r".into(),
            cause: EndCause::Stopped("x".into()),
        }),
    ];
    let deny_with_reason = PermissionDecision::Deny {
        reason: Some("no".into()),
    };
    let allow_with_note = PermissionDecision::Allow {
        note: Some("ok".into()),
    };
    let drafts = drafts.into_iter().chain([
        AuditDraft::permission_decided(2, &CallId::new("c"), &deny_with_reason).with_now_ms(1),
        AuditDraft::permission_decided(2, &CallId::new("c"), &allow_with_note).with_now_ms(1),
        AuditDraft::run_started(&RunId::new("r"), 0),
        AuditDraft::new("custom", json!({"z": [1, {"b": 2, "a": 1}], "a": null})),
    ]);
    for draft in drafts {
        let json = serde_json::to_string(&draft).unwrap();
        // Written with every key in sorted order (as a `Value` map, which sorts, writes it
        // back), and its payload is `payload()`.
        let reread: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(json, serde_json::to_string(&reread).unwrap());
        assert_eq!(reread["payload"], draft.payload(), "{json}");
        let back: AuditDraft = serde_json::from_str(&json).unwrap();
        assert_eq!(back, draft, "{json}");
        assert_eq!(
            AuditDraft::from_stored(draft.kind(), draft.payload()),
            draft
        );
    }
    // A crate kind whose payload has another shape stays a custom draft, unchanged.
    let odd = AuditDraft::new("permission_decided", json!({"n": 1}));
    let back: AuditDraft = serde_json::from_str(&serde_json::to_string(&odd).unwrap()).unwrap();
    assert_eq!(back, odd);
    // Extra keys are not silently dropped: the draft stays custom.
    let mut payload = AuditDraft::run_awaiting(&RunId::new("r")).payload();
    payload["extra"] = json!(true);
    assert!(matches!(
        AuditDraft::from_stored("run_awaiting", payload),
        AuditDraft::Custom { .. }
    ));
}

/// The exact bytes each typed kind writes (every key sorted, optional keys only when
/// present), and odd payloads of the crate's kinds that stay custom, unchanged.
#[test]
fn typed_payloads_write_exact_bytes_and_odd_shapes_stay_custom() {
    let summary = Arc::new(UserMessage::text("so far"));
    let allow = PermissionDecision::Allow {
        note: Some("ok".into()),
    };
    let deny = PermissionDecision::Deny {
        reason: Some("no".into()),
    };
    let cases = [
        (
            AuditDraft::run_state_changed(&RunDisposition::Awaiting(Box::new(ticket("t")))),
            r#"{"await_reason":"manual","await_target":{"reason":"manual","type":"pause"},"state":{"type":"awaiting"}}"#,
        ),
        (
            AuditDraft::run_state_changed(&RunDisposition::Ended {
                run_id: "r".into(),
                cause: EndCause::Stopped("x".into()),
            }),
            r#"{"state":{"cause":{"reason":"x","type":"stopped"},"type":"ended"}}"#,
        ),
        (AuditDraft::state_changed(2), r#"{"commands":2}"#),
        (
            AuditDraft::run_awaiting_at(&RunId::new("r"), 4, Some(WaitBoundary::TextStop)),
            r#"{"boundary":"text_stop","run_id":"r","step":4}"#,
        ),
        (
            AuditDraft::permission_decided(2, &CallId::new("c"), &allow).with_now_ms(5),
            r#"{"call_id":"c","decision":"allow","note":"ok","now_ms":5,"step":2}"#,
        ),
        (
            AuditDraft::permission_decided(2, &CallId::new("c"), &deny).with_now_ms(5),
            r#"{"call_id":"c","decision":"deny","now_ms":5,"reason":"no","step":2}"#,
        ),
        (
            AuditDraft::run_started(&RunId::new("r"), 3).with_now_ms(1),
            r#"{"now_ms":1,"run_id":"r","transcript_start":3}"#,
        ),
        (
            AuditDraft::compacted(1, 4, summary).with_now_ms(8),
            r#"{"keep_from":1,"now_ms":8,"summary":{"content":[{"text":"so far","type":"text"}],"role":"user"},"transcript_len":4}"#,
        ),
    ];
    for (draft, payload) in cases {
        let wire = format!(r#"{{"kind":"{}","payload":{payload}}}"#, draft.kind());
        assert_eq!(serde_json::to_string(&draft).unwrap(), wire);
        assert_eq!(canonical_json_of(&draft).unwrap(), wire);
        let stored: Value = serde_json::from_str(payload).unwrap();
        assert_eq!(AuditDraft::from_stored(draft.kind(), stored), draft);
    }
    for (kind, odd) in [
        (
            "run_state_changed",
            json!({"await_reason": "permission", "await_target": {"reason": "manual", "type": "pause"}, "state": {"type": "awaiting"}}),
        ),
        (
            "run_state_changed",
            json!({"await_reason": "manual", "state": {"type": "awaiting"}}),
        ),
        ("state_changed", json!({"commands": -1})),
        (
            "permission_decided",
            json!({"call_id": "c", "decision": "allow", "reason": "no", "step": 1}),
        ),
        (
            "permission_decided",
            json!({"call_id": "c", "decision": "deny", "note": "ok", "step": 1}),
        ),
        (
            "permission_decided",
            json!({"call_id": "c", "decision": "maybe", "step": 1}),
        ),
        (
            "permission_decided",
            json!({"call_id": "c", "decision": "allow", "now_ms": null, "step": 1}),
        ),
        (
            "run_started",
            json!({"run_id": "r", "transcript_start": 1.0}),
        ),
        (
            "compacted",
            json!({"keep_from": 0, "summary": {"role": "assistant", "content": []}, "transcript_len": 0}),
        ),
        ("compacted", json!({"keep_from": 0, "transcript_len": 0})),
    ] {
        let draft = AuditDraft::from_stored(kind, odd.clone());
        assert_eq!(draft, AuditDraft::new(kind, odd.clone()), "{kind} {odd}");
    }
}
