//! Every public data type survives value → JSON → value unchanged, and re-serializes to the
//! same text (SPEC §0.7: all public data is serde, stable). The wire shape of every variant of
//! the lifecycle and resume enums is snapshotted, so a change to it is a reviewed diff.

mod common;

use std::fmt::Debug;

use common::strategies::*;
use proptest::prelude::*;
use runcore::store::{CommitLog, MemoryStore};
use runcore::{
    AuditDraft, AwaitTarget, CallId, EndCause, Failure, Input, MaterializedState, PauseReason,
    PendingTool, PermissionDecision, RemoteInputReason, ResumeResult, ResumeTicket, RunDisposition,
    RunId, RunState, ToolOutput, ToolWaitReason, WaitIdentity,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

fn round_trip<T>(value: &T) -> Result<(), TestCaseError>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let text = serde_json::to_string(value).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back: T = serde_json::from_str(&text)
        .map_err(|e| TestCaseError::fail(format!("{e} while reading back {text}")))?;
    prop_assert_eq!(&back, value, "read back from {}", text);
    let again = serde_json::to_string(&back).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(again, text, "serialization is not stable");
    Ok(())
}

/// One property per type, so a failure names the type.
macro_rules! round_trips {
    ($($name:ident: $strategy:expr;)*) => {
        proptest! {
            #![proptest_config(common::proptest_config("proptest-regressions/serde_roundtrip.txt", 48))]
            $(
                #[test]
                fn $name(value in $strategy) {
                    round_trip(&value)?;
                }
            )*
        }
    };
}

round_trips! {
    thread_id_round_trips: thread_id();
    run_id_round_trips: run_id();
    call_id_round_trips: call_id();
    content_block_round_trips: content_block();
    assistant_block_round_trips: assistant_block();
    stop_reason_round_trips: stop_reason();
    usage_round_trips: usage();
    system_message_round_trips: system_message();
    user_message_round_trips: user_message();
    assistant_message_round_trips: assistant_message();
    tool_result_message_round_trips: tool_result_message();
    result_outcome_round_trips: result_outcome();
    role_round_trips: role();
    message_round_trips: message();
    tool_call_round_trips: tool_call();
    tool_output_round_trips: tool_output();
    failure_round_trips: failure();
    end_cause_round_trips: end_cause();
    run_state_round_trips: run_state();
    run_disposition_round_trips: run_disposition();
    run_record_round_trips: run_record();
    tool_wait_reason_round_trips: tool_wait_reason();
    remote_input_reason_round_trips: remote_input_reason();
    pause_reason_round_trips: pause_reason();
    pending_tool_round_trips: pending_tool();
    await_target_round_trips: await_target();
    wait_identity_round_trips: wait_identity();
    resume_ticket_round_trips: resume_ticket();
    resume_command_round_trips: resume_command();
    resume_result_round_trips: resume_result();
    result_kind_round_trips: result_kind();
    permission_decision_round_trips: permission_decision();
    state_scope_round_trips: state_scope();
    merge_policy_round_trips: merge_policy();
    state_action_round_trips: state_action();
    state_command_round_trips: state_command();
    audit_draft_round_trips: audit_draft();
    thread_commit_round_trips: thread_commit();
    event_record_round_trips: event_record();
    event_scope_round_trips: event_scope();
    operation_id_round_trips: operation_id();
    commit_operation_round_trips: commit_operation();
    commit_record_round_trips: commit_record();
    commit_receipt_round_trips: commit_receipt();
    transcript_snapshot_ref_round_trips: transcript_snapshot_ref();
    resume_error_round_trips: resume_error();
    commit_error_round_trips: commit_error();
    transcript_error_round_trips: transcript_error();
}

proptest! {
    #![proptest_config(common::proptest_config("proptest-regressions/serde_roundtrip.txt", 32))]

    #[test]
    fn materialized_state_round_trips(commands in prop::collection::vec(state_command(), 0..8)) {
        let viewer = commands.iter().find_map(|c| c.run_id.clone());
        round_trip(&MaterializedState::rebuild(&commands, viewer.as_ref()))?;
    }

    /// A store holding whatever a random commit stream left in it serializes and reads back
    /// equal (rejected commits included in the stream).
    #[test]
    fn memory_store_round_trips(commits in prop::collection::vec(thread_commit(), 0..6)) {
        let mut store = MemoryStore::new();
        for commit in commits {
            let _ = store.commit(commit);
        }
        round_trip(&store)?;
    }
}

fn identity() -> WaitIdentity {
    WaitIdentity {
        correlation_id: "t/run-1:wait-1".into(),
        run_id: "t/run-1".into(),
        thread_id: "t".into(),
        snapshot_id: "snap-1".into(),
        catalog_fingerprint: "cat-1".into(),
    }
}

/// One of each `EndCause`; the match fails to compile when a variant is added, so the
/// snapshots below cannot silently miss it.
fn every_end_cause() -> Vec<EndCause> {
    let all = vec![
        EndCause::NaturalEnd,
        EndCause::MaxSteps,
        EndCause::Cancelled,
        EndCause::Stopped("budget exhausted".into()),
        EndCause::Error(Failure::Inference {
            code: "rate_limit".into(),
            message: "slow down".into(),
        }),
        EndCause::Error(Failure::CapabilityBound),
        EndCause::Error(Failure::StateConflict),
        EndCause::Indeterminate,
    ];
    for cause in &all {
        match cause {
            EndCause::NaturalEnd
            | EndCause::MaxSteps
            | EndCause::Cancelled
            | EndCause::Stopped(_)
            | EndCause::Indeterminate => {}
            EndCause::Error(
                Failure::Inference { .. } | Failure::CapabilityBound | Failure::StateConflict,
            ) => {}
        }
    }
    all
}

fn every_await_target() -> Vec<AwaitTarget> {
    let tool = PendingTool {
        name: "delete_file".into(),
        arguments: json!({ "path": "/tmp/x" }).into(),
    };
    let mut all: Vec<AwaitTarget> = [
        ToolWaitReason::Permission,
        ToolWaitReason::ClientExecution,
        ToolWaitReason::ScheduledAction,
        ToolWaitReason::Delegation,
    ]
    .into_iter()
    .map(|reason| AwaitTarget::ToolCall {
        reason,
        call_id: CallId::new("call-1"),
        tool: tool.clone(),
    })
    .collect();
    for reason in [
        RemoteInputReason::UserInput,
        RemoteInputReason::ExternalEvent,
    ] {
        all.push(AwaitTarget::RemoteInput {
            reason,
            call_id: CallId::new("call-2"),
        });
    }
    for reason in [
        PauseReason::Manual,
        PauseReason::RateLimit,
        PauseReason::BudgetReached,
    ] {
        all.push(AwaitTarget::Pause(reason));
    }
    for target in &all {
        match target {
            AwaitTarget::ToolCall { reason, .. } => match reason {
                ToolWaitReason::Permission
                | ToolWaitReason::ClientExecution
                | ToolWaitReason::ScheduledAction
                | ToolWaitReason::Delegation => {}
            },
            AwaitTarget::RemoteInput { reason, .. } => match reason {
                RemoteInputReason::UserInput | RemoteInputReason::ExternalEvent => {}
            },
            AwaitTarget::Pause(reason) => match reason {
                PauseReason::Manual | PauseReason::RateLimit | PauseReason::BudgetReached => {}
            },
        }
    }
    all
}

/// Checks the snapshot set also round-trips, so a snapshot never shows a shape that cannot be
/// read back.
fn all_round_trip<T>(values: &[T])
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    for value in values {
        let text = serde_json::to_string(value).unwrap();
        let back: T = serde_json::from_str(&text).unwrap();
        assert_eq!(&back, value);
    }
}

#[test]
fn run_state_variants() {
    let mut states = vec![RunState::Running, RunState::Awaiting];
    states.extend(every_end_cause().into_iter().map(RunState::Ended));
    all_round_trip(&states);
    common::snapshot_json!("run_state_variants", states);
}

#[test]
fn end_cause_variants() {
    let causes = every_end_cause();
    all_round_trip(&causes);
    common::snapshot_json!("end_cause_variants", causes);
}

#[test]
fn run_disposition_variants() {
    let mut dispositions = vec![
        RunDisposition::Running {
            run_id: RunId::new("t/run-1"),
        },
        RunDisposition::Awaiting(Box::new(ResumeTicket::pause(
            identity(),
            PauseReason::Manual,
            Some(1_700_000_000_000),
        ))),
    ];
    dispositions.extend(
        every_end_cause()
            .into_iter()
            .map(|cause| RunDisposition::Ended {
                run_id: RunId::new("t/run-1"),
                cause,
            }),
    );
    all_round_trip(&dispositions);
    common::snapshot_json!("run_disposition_variants", dispositions);
}

#[test]
fn await_target_variants() {
    let targets = every_await_target();
    all_round_trip(&targets);
    common::snapshot_json!("await_target_variants", targets);
}

#[test]
fn resume_ticket_variants() {
    let tickets: Vec<ResumeTicket> = every_await_target()
        .into_iter()
        .zip([None, Some(0), Some(u64::MAX)].into_iter().cycle())
        .map(|(target, deadline)| ResumeTicket::new(identity(), target, deadline))
        .collect();
    all_round_trip(&tickets);
    common::snapshot_json!("resume_ticket_variants", tickets);
}

#[test]
fn resume_result_variants() {
    let results = vec![
        ResumeResult::Continue,
        ResumeResult::ToolResult(ToolOutput::text("call-1", "done")),
        ResumeResult::ToolResult(ToolOutput {
            details: Some(json!({ "exit_code": 1 })),
            ..ToolOutput::error("call-1", "failed")
        }),
        ResumeResult::Permission(PermissionDecision::Allow { note: None }),
        ResumeResult::Permission(PermissionDecision::Allow {
            note: Some("looks safe".into()),
        }),
        ResumeResult::Permission(PermissionDecision::Deny { reason: None }),
        ResumeResult::Permission(PermissionDecision::Deny {
            reason: Some("not in prod".into()),
        }),
        ResumeResult::Input("use the staging bucket".into()),
    ];
    for result in &results {
        match result {
            ResumeResult::Continue
            | ResumeResult::ToolResult(_)
            | ResumeResult::Permission(PermissionDecision::Allow { .. })
            | ResumeResult::Permission(PermissionDecision::Deny { .. })
            | ResumeResult::Input(_) => {}
        }
    }
    all_round_trip(&results);
    common::snapshot_json!("resume_result_variants", results);
}

#[test]
fn null_details_read_back_as_absent() {
    // `details: null` and no `details` mean the same: there are none. The strategies above
    // therefore never generate `Some(Value::Null)`; this pins the documented behaviour.
    let with_null = ToolOutput {
        details: Some(serde_json::Value::Null),
        ..ToolOutput::text("c", "x")
    };
    let text = serde_json::to_string(&with_null).unwrap();
    let back: ToolOutput = serde_json::from_str(&text).unwrap();
    assert_eq!(back.details, None);
}

#[test]
fn event_scope_rejects_unknown_fields() {
    // A misspelled key (`thread` for `id`) must fail, not silently list every event.
    for bad in [
        r#"{"type":"all","extra":1}"#,
        r#"{"type":"thread","thread":"t"}"#,
    ] {
        assert!(
            serde_json::from_str::<runcore::store::EventScope>(bad).is_err(),
            "{bad}"
        );
    }
    let scope: runcore::store::EventScope =
        serde_json::from_str(r#"{"type":"thread","id":"t"}"#).unwrap();
    assert_eq!(scope, runcore::store::EventScope::Thread("t".into()));
}

/// Every typed audit draft the crate writes, in its stored `{kind, payload}` shape (SPEC §6),
/// plus a host's custom draft; each reads back to the same typed value.
#[test]
fn audit_draft_variants() {
    let ticket = ResumeTicket::pause(identity(), PauseReason::Manual, Some(1_700_000_000_000));
    let drafts = vec![
        AuditDraft::run_state_changed(&RunDisposition::Running {
            run_id: RunId::new("t/run-1"),
        }),
        AuditDraft::run_state_changed(&RunDisposition::Awaiting(Box::new(ticket))),
        AuditDraft::run_state_changed(&RunDisposition::Ended {
            run_id: RunId::new("t/run-1"),
            cause: EndCause::Stopped("wait_expired".into()),
        }),
        AuditDraft::state_changed(2),
        AuditDraft::run_awaiting(&RunId::new("t/run-1")),
        AuditDraft::permission_decided(
            2,
            &CallId::new("c1"),
            &PermissionDecision::Allow {
                note: Some("ok".into()),
            },
        )
        .with_now_ms(5),
        AuditDraft::permission_decided(
            2,
            &CallId::new("c2"),
            &PermissionDecision::Deny { reason: None },
        ),
        AuditDraft::run_started(&RunId::new("t/run-1"), 0).with_now_ms(0),
        AuditDraft::new("host_note", serde_json::json!({"b": 1, "a": [true]})),
    ];
    all_round_trip(&drafts);
    common::snapshot_json!("audit_draft_variants", drafts);
}

/// The `compacted` draft (SPEC §8.9): its summary is written as a user message and it reads
/// back typed; a payload whose summary is not a user message stays a custom draft.
#[test]
fn compacted_audit_draft() {
    let summary = std::sync::Arc::new(runcore::UserMessage::text("the story so far"));
    let draft = AuditDraft::compacted(3, 7, summary).with_now_ms(9);
    all_round_trip(std::slice::from_ref(&draft));
    assert_eq!(draft.kind(), "compacted");
    let payload = draft.payload();
    assert_eq!(
        payload,
        serde_json::json!({
            "keep_from": 3, "transcript_len": 7, "now_ms": 9,
            "summary": {"role": "user", "content": [{"type": "text", "text": "the story so far"}]},
        })
    );
    let mut not_user = payload.clone();
    not_user["summary"]["role"] = "system".into();
    assert!(matches!(
        AuditDraft::from_stored("compacted", not_user),
        AuditDraft::Custom { .. }
    ));
    common::snapshot_json!("compacted_audit_draft", draft);
}

/// Every field-less `Input`; the match breaks the build when a variant is added, so a new
/// field-less input cannot skip the test below.
fn every_field_less_input() -> Vec<Input> {
    let all = vec![
        Input::Abort,
        Input::Pause,
        Input::ClearQueues,
        Input::CancelWait,
        Input::ExpireWait,
        Input::AbandonTools,
        Input::Continue,
        Input::Timeout,
    ];
    let field_less = |input: &Input| match input {
        Input::Abort
        | Input::Pause
        | Input::ClearQueues
        | Input::CancelWait
        | Input::ExpireWait
        | Input::AbandonTools
        | Input::Continue
        | Input::Timeout => true,
        Input::Config(_)
        | Input::Prompt { .. }
        | Input::Import { .. }
        | Input::Steer { .. }
        | Input::FollowUp { .. }
        | Input::ModelDelta { .. }
        | Input::ModelDone { .. }
        | Input::ModelFailed { .. }
        | Input::ToolProgress { .. }
        | Input::ToolDone { .. }
        | Input::Resume { .. }
        | Input::ResumeTicket { .. }
        | Input::Stop { .. }
        | Input::SetQueueModes { .. }
        | Input::Compact { .. } => false,
    };
    assert!(all.iter().all(field_less));
    all
}

/// `Input` read on its own (not through the driver, which checks lines itself) rejects
/// unknown fields on its field-less variants as it does on the others, and keeps the wire
/// shape `{"type":"<kind>"}`.
#[test]
fn field_less_inputs_reject_unknown_fields() {
    for input in every_field_less_input() {
        let kind = input.kind();
        let text = serde_json::to_string(&input).unwrap();
        assert_eq!(text, format!(r#"{{"type":"{kind}"}}"#));
        assert_eq!(serde_json::from_str::<Input>(&text).unwrap(), input);
        for junk in [
            format!(r#"{{"type":"{kind}","bogus":1}}"#),
            format!(r#"{{"bogus":null,"type":"{kind}"}}"#),
            format!(r#"{{"type":"{kind}","now_ms":5}}"#),
        ] {
            let error = serde_json::from_str::<Input>(&junk)
                .unwrap_err()
                .to_string();
            assert!(error.contains("unknown field"), "{junk}: {error}");
        }
    }
    // The variants with fields already rejected junk; one stays here as the reference.
    let error = serde_json::from_str::<Input>(r#"{"type":"stop","reason":"x","bogus":1}"#)
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown field"), "{error}");
}

/// `model_failed` carries the provider's `retry_after_ms` when given (SPEC §8.11, §12.7) and
/// leaves it out of the line when not, so lines written before it read and print unchanged.
#[test]
fn model_failed_carries_an_optional_retry_after() {
    let without =
        r#"{"type":"model_failed","run_id":"r","step":1,"code":"rate_limited","message":"m"}"#;
    let input: Input = serde_json::from_str(without).unwrap();
    assert!(matches!(
        &input,
        Input::ModelFailed {
            retry_after_ms: None,
            ..
        }
    ));
    assert_eq!(serde_json::to_string(&input).unwrap(), without);
    let with = r#"{"type":"model_failed","run_id":"r","step":1,"code":"rate_limited","message":"m","retry_after_ms":3000}"#;
    let input: Input = serde_json::from_str(with).unwrap();
    assert!(matches!(
        &input,
        Input::ModelFailed {
            retry_after_ms: Some(3000),
            ..
        }
    ));
    assert_eq!(serde_json::to_string(&input).unwrap(), with);
    let line = runcore::driver::InputLine::parse(with).unwrap();
    assert_eq!(line.input, input);
    let negative = with.replace("3000", "-1");
    assert!(serde_json::from_str::<Input>(&negative).is_err());
}

/// The owned model call reads from a full-context `call_model` line and refuses what is not
/// one, naming why: another type, a delta-mode line, a line without its run.
#[test]
fn model_call_reads_a_full_context_line_only() {
    let line = r#"{"type":"call_model","run_id":"r","step":2,"final_step":false,"system_prompt":"s","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"tools":[{"name":"t","parameters":{"type":"object"}}]}"#;
    let call: runcore::ModelCall = serde_json::from_str(line).unwrap();
    assert_eq!(call.step, 2);
    assert_eq!(call.tools[0].name, "t");
    assert_eq!(serde_json::to_string(&call).unwrap(), line);
    let refused = |text: &str| {
        serde_json::from_str::<runcore::ModelCall>(text)
            .unwrap_err()
            .to_string()
    };
    assert!(
        refused(&line.replace("call_model", "execute_tools"))
            .contains("expected a call_model line")
    );
    assert!(
        refused(&line.replace(r#""step":2,"#, r#""step":2,"base":1,"#)).contains("full-context")
    );
    assert!(refused(&line.replace(r#""run_id":"r","#, "")).contains("run_id"));
    assert!(
        refused(&line.replace(r#""name":"t","#, r#""name":"t","x":1,"#)).contains("unknown field")
    );
}
