//! T2: `validate_resume` (SPEC §4). Each axis mutated alone yields exactly its error; when
//! several are wrong the first in SPEC order wins; the full target × result-kind matrix; the
//! deadline boundary; tool-call identity; context message checks; and a property test against
//! a naive reference of the ten steps.

mod common;

use common::strategies::{message, resume_result, resume_ticket};
use proptest::prelude::*;
use runcore::{
    AwaitTarget, CallId, ContentBlock, Message, PauseReason, PendingTool, PermissionDecision,
    RemoteInputReason, ResultKind, ResumeCommand, ResumeError, ResumeResult, ResumeTicket, Role,
    RunId, SystemMessage, ThreadId, ToolOutput, ToolWaitReason, WaitIdentity, validate_resume,
};
use serde_json::json;

fn identity() -> WaitIdentity {
    WaitIdentity {
        correlation_id: "t/run-1:wait-1".into(),
        run_id: "t/run-1".into(),
        thread_id: "t".into(),
        snapshot_id: "snap-1".into(),
        catalog_fingerprint: "cat-1".into(),
    }
}

const CALL: &str = "call-1";
const DEADLINE: u64 = 1_000;

/// A client-execution wait with a deadline: the one target where every axis can be wrong.
fn client_execution_ticket() -> ResumeTicket {
    ResumeTicket::tool_call(
        identity(),
        ToolWaitReason::ClientExecution,
        CallId::new(CALL),
        PendingTool {
            name: "run_locally".into(),
            arguments: json!({ "cmd": "ls" }).into(),
        },
        Some(DEADLINE),
    )
}

fn system(id: &str, text: &str) -> Message {
    Message::from(SystemMessage::text(text).with_id(id))
}

/// A command that passes every check against [`client_execution_ticket`].
fn valid_command(ticket: &ResumeTicket) -> ResumeCommand {
    ResumeCommand::from_ticket(
        ticket,
        ResumeResult::ToolResult(ToolOutput::text(CALL, "ok")),
        DEADLINE - 1,
    )
    .with_context(vec![system("ctx-1", "the user is in a hurry")])
}

/// The SPEC §4 axes in check order (after "no active ticket"), each with the mutation that
/// breaks it alone and the exact error that must come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Axis {
    Correlation,
    Run,
    Thread,
    Snapshot,
    Fingerprint,
    Deadline,
    ResultKind,
    ToolCall,
    ContextRole,
    ContextMessage,
}

const AXES: [Axis; 10] = [
    Axis::Correlation,
    Axis::Run,
    Axis::Thread,
    Axis::Snapshot,
    Axis::Fingerprint,
    Axis::Deadline,
    Axis::ResultKind,
    Axis::ToolCall,
    Axis::ContextRole,
    Axis::ContextMessage,
];

impl Axis {
    fn break_it(self, cmd: &mut ResumeCommand) {
        match self {
            Axis::Correlation => cmd.correlation_id = "t/run-1:wait-0".into(),
            Axis::Run => cmd.run_id = RunId::new("t/run-2"),
            Axis::Thread => cmd.thread_id = ThreadId::new("u"),
            Axis::Snapshot => cmd.snapshot_id = "snap-2".into(),
            Axis::Fingerprint => cmd.catalog_fingerprint = "cat-2".into(),
            Axis::Deadline => cmd.now_ms = DEADLINE + 1,
            Axis::ResultKind => cmd.result = ResumeResult::Input("hello".into()),
            Axis::ToolCall => {
                cmd.result = ResumeResult::ToolResult(ToolOutput::text("call-other", "ok"))
            }
            // Appended after the existing context, so with ContextMessage also broken the
            // role error (checked over every message first) still wins.
            Axis::ContextRole => cmd.context_messages.push(Message::user("sneaky")),
            Axis::ContextMessage => cmd.context_messages.insert(
                0,
                Message::from(SystemMessage {
                    content: vec![],
                    id: Some("ctx-0".into()),
                    meta: Default::default(),
                }),
            ),
        }
    }

    /// The error of this axis for a command built by [`valid_command`] with `axes` broken.
    fn error(self, broken: &[Axis]) -> ResumeError {
        let context_len = 1 + usize::from(broken.contains(&Axis::ContextMessage));
        match self {
            Axis::Correlation => ResumeError::CorrelationMismatch {
                expected: "t/run-1:wait-1".into(),
                got: "t/run-1:wait-0".into(),
            },
            Axis::Run => ResumeError::RunMismatch {
                expected: RunId::new("t/run-1"),
                got: RunId::new("t/run-2"),
            },
            Axis::Thread => ResumeError::ThreadMismatch {
                expected: ThreadId::new("t"),
                got: ThreadId::new("u"),
            },
            Axis::Snapshot => ResumeError::SnapshotMismatch {
                expected: "snap-1".into(),
                got: "snap-2".into(),
            },
            Axis::Fingerprint => ResumeError::FingerprintMismatch {
                expected: "cat-1".into(),
                got: "cat-2".into(),
            },
            Axis::Deadline => ResumeError::Expired {
                deadline_ms: DEADLINE,
                now_ms: DEADLINE + 1,
            },
            Axis::ResultKind => ResumeError::ResultKindMismatch {
                target: "tool_call/client_execution".into(),
                expected: vec![ResultKind::ToolResult],
                got: ResultKind::Input,
            },
            Axis::ToolCall => ResumeError::ToolCallMismatch {
                expected: CallId::new(CALL),
                got: CallId::new("call-other"),
            },
            Axis::ContextRole => ResumeError::InvalidContextRole {
                index: context_len,
                role: Role::User,
            },
            Axis::ContextMessage => ResumeError::InvalidContextMessage {
                index: 0,
                reason: "content is empty".into(),
            },
        }
    }
}

/// Breaks `axes` on a valid command. Later axes are applied first so that, where two
/// mutations touch the same field (result kind and tool call), the earlier axis's mutation
/// is the one that stands, as it would be for a caller who got that axis wrong.
fn command_with(ticket: &ResumeTicket, axes: &[Axis]) -> ResumeCommand {
    let mut cmd = valid_command(ticket);
    let mut ordered = axes.to_vec();
    ordered.sort();
    for axis in ordered.into_iter().rev() {
        axis.break_it(&mut cmd);
    }
    cmd
}

#[test]
fn the_valid_command_is_accepted() {
    let ticket = client_execution_ticket();
    assert_eq!(
        validate_resume(Some(&ticket), &valid_command(&ticket)),
        Ok(())
    );
}

#[test]
fn no_active_ticket_is_not_waiting() {
    let ticket = client_execution_ticket();
    assert_eq!(
        validate_resume(None, &valid_command(&ticket)),
        Err(ResumeError::NotWaiting)
    );
}

#[test]
fn each_axis_mutated_alone_yields_exactly_its_error() {
    let ticket = client_execution_ticket();
    for axis in AXES {
        let cmd = command_with(&ticket, &[axis]);
        assert_eq!(
            validate_resume(Some(&ticket), &cmd),
            Err(axis.error(&[axis])),
            "{axis:?}"
        );
        assert_eq!(
            validate_resume(None, &cmd),
            Err(ResumeError::NotWaiting),
            "{axis:?}"
        );
    }
}

#[test]
fn the_first_failing_axis_wins_for_every_pair() {
    let ticket = client_execution_ticket();
    let mut pairs = 0;
    for (i, first) in AXES.iter().enumerate() {
        for second in &AXES[i + 1..] {
            let broken = [*first, *second];
            let cmd = command_with(&ticket, &broken);
            assert_eq!(
                validate_resume(Some(&ticket), &cmd),
                Err(first.error(&broken)),
                "{first:?} + {second:?}"
            );
            assert_eq!(validate_resume(None, &cmd), Err(ResumeError::NotWaiting));
            pairs += 1;
        }
    }
    assert_eq!(pairs, 45);
}

#[test]
fn with_every_axis_wrong_the_correlation_wins() {
    let ticket = client_execution_ticket();
    let cmd = command_with(&ticket, &AXES);
    assert_eq!(
        validate_resume(Some(&ticket), &cmd),
        Err(Axis::Correlation.error(&AXES))
    );
}

fn every_target() -> Vec<AwaitTarget> {
    let tool = PendingTool {
        name: "rm".into(),
        arguments: json!({}).into(),
    };
    let mut targets: Vec<AwaitTarget> = [
        ToolWaitReason::Permission,
        ToolWaitReason::ClientExecution,
        ToolWaitReason::ScheduledAction,
        ToolWaitReason::Delegation,
    ]
    .into_iter()
    .map(|reason| AwaitTarget::ToolCall {
        reason,
        call_id: CallId::new(CALL),
        tool: tool.clone(),
    })
    .collect();
    for reason in [
        RemoteInputReason::UserInput,
        RemoteInputReason::ExternalEvent,
    ] {
        targets.push(AwaitTarget::RemoteInput {
            reason,
            call_id: CallId::new(CALL),
        });
    }
    for reason in [
        PauseReason::Manual,
        PauseReason::RateLimit,
        PauseReason::BudgetReached,
    ] {
        targets.push(AwaitTarget::Pause(reason));
    }
    targets
}

fn every_result() -> Vec<ResumeResult> {
    vec![
        ResumeResult::Continue,
        ResumeResult::ToolResult(ToolOutput::text(CALL, "ok")),
        ResumeResult::Permission(PermissionDecision::Allow { note: None }),
        ResumeResult::Permission(PermissionDecision::Deny {
            reason: Some("no".into()),
        }),
        ResumeResult::Input("yes".into()),
    ]
}

/// SPEC §4 step 8, written out independently of `AwaitTarget::accepted_kinds`.
fn spec_accepts(target: &AwaitTarget) -> &'static [ResultKind] {
    use ResultKind::*;
    match target.reason_name() {
        "permission" | "scheduled_action" => &[Permission],
        "client_execution" => &[ToolResult],
        "delegation" => &[Input, ToolResult, Permission],
        "user_input" | "external_event" | "manual" | "rate_limit" => &[Input],
        "budget_reached" => &[Continue],
        other => panic!("unknown reason {other}"),
    }
}

#[test]
fn target_by_result_kind_matrix() {
    let mut rendered =
        String::from("target \\ result: continue, tool_result, allow, deny, input\n");
    for target in every_target() {
        let ticket = ResumeTicket::new(identity(), target.clone(), None);
        let mut cells = Vec::new();
        for result in every_result() {
            let kind = result.kind();
            let cmd = ResumeCommand::from_ticket(&ticket, result, 0);
            let outcome = validate_resume(Some(&ticket), &cmd);
            let expected_kinds = spec_accepts(&target);
            if expected_kinds.contains(&kind) {
                assert_eq!(outcome, Ok(()), "{target:?} with {kind:?}");
                cells.push("ok");
            } else {
                assert_eq!(
                    outcome,
                    Err(ResumeError::ResultKindMismatch {
                        target: format!("{}/{}", target.kind_name(), target.reason_name()),
                        expected: expected_kinds.to_vec(),
                        got: kind,
                    }),
                    "{target:?} with {kind:?}"
                );
                cells.push("mismatch");
            }
            assert_eq!(target.accepts(kind), expected_kinds.contains(&kind));
        }
        rendered.push_str(&format!(
            "{:28} {}\n",
            format!("{}/{}", target.kind_name(), target.reason_name()),
            cells.join(", ")
        ));
    }
    common::snapshot!("target_by_result_kind_matrix", rendered);
}

#[test]
fn the_deadline_is_inclusive_and_none_never_expires() {
    let at = |deadline: Option<u64>, now: u64| {
        let ticket = ResumeTicket::pause(identity(), PauseReason::Manual, deadline);
        validate_resume(
            Some(&ticket),
            &ResumeCommand::from_ticket(&ticket, ResumeResult::Input("go".into()), now),
        )
    };
    let expired = |deadline_ms, now_ms| {
        Err(ResumeError::Expired {
            deadline_ms,
            now_ms,
        })
    };
    assert_eq!(at(Some(DEADLINE), DEADLINE), Ok(()));
    assert_eq!(at(Some(DEADLINE), DEADLINE - 1), Ok(()));
    assert_eq!(
        at(Some(DEADLINE), DEADLINE + 1),
        expired(DEADLINE, DEADLINE + 1)
    );
    assert_eq!(at(Some(0), 0), Ok(()));
    assert_eq!(at(Some(0), 1), expired(0, 1));
    assert_eq!(at(Some(0), u64::MAX), expired(0, u64::MAX));
    assert_eq!(
        at(Some(u64::MAX - 1), u64::MAX),
        expired(u64::MAX - 1, u64::MAX)
    );
    assert_eq!(at(Some(u64::MAX), u64::MAX), Ok(()));
    for now in [0, 1, DEADLINE, u64::MAX - 1, u64::MAX] {
        assert_eq!(at(None, now), Ok(()), "no deadline at {now}");
    }
    let ticket = ResumeTicket::pause(identity(), PauseReason::Manual, Some(DEADLINE));
    assert!(!ticket.is_expired_at(DEADLINE));
    assert!(ticket.is_expired_at(DEADLINE + 1));
    assert!(!ResumeTicket::pause(identity(), PauseReason::Manual, None).is_expired_at(u64::MAX));
}

#[test]
fn a_tool_result_must_name_the_waited_call_except_for_delegation() {
    let output = |call: &str| ResumeResult::ToolResult(ToolOutput::text(call, "ok"));
    let ticket = client_execution_ticket();
    let cmd = ResumeCommand::from_ticket(&ticket, output("other"), 0);
    assert_eq!(
        validate_resume(Some(&ticket), &cmd),
        Err(ResumeError::ToolCallMismatch {
            expected: CallId::new(CALL),
            got: CallId::new("other"),
        })
    );
    let delegation = ResumeTicket::tool_call(
        identity(),
        ToolWaitReason::Delegation,
        CallId::new(CALL),
        PendingTool {
            name: "ask_colleague".into(),
            arguments: json!({}).into(),
        },
        None,
    );
    let cmd = ResumeCommand::from_ticket(&delegation, output("other"), 0);
    assert_eq!(validate_resume(Some(&delegation), &cmd), Ok(()));
    // A permission wait answered with a tool result is a kind mismatch, not a call mismatch.
    let permission = ResumeTicket::tool_call(
        identity(),
        ToolWaitReason::Permission,
        CallId::new(CALL),
        PendingTool {
            name: "rm".into(),
            arguments: json!({}).into(),
        },
        None,
    );
    let cmd = ResumeCommand::from_ticket(&permission, output("other"), 0);
    assert!(matches!(
        validate_resume(Some(&permission), &cmd),
        Err(ResumeError::ResultKindMismatch { .. })
    ));
}

fn with_context(messages: Vec<Message>) -> Result<(), ResumeError> {
    let ticket = ResumeTicket::pause(identity(), PauseReason::Manual, None);
    let cmd = ResumeCommand::from_ticket(&ticket, ResumeResult::Input("go".into()), 0)
        .with_context(messages);
    validate_resume(Some(&ticket), &cmd)
}

fn invalid_message(index: usize) -> impl Fn(&ResumeError) -> bool {
    move |error| matches!(error, ResumeError::InvalidContextMessage { index: i, .. } if *i == index)
}

#[test]
fn context_messages_must_be_system() {
    assert_eq!(with_context(vec![]), Ok(()));
    assert_eq!(
        with_context(vec![system("a", "one"), system("b", "two")]),
        Ok(())
    );
    for (bad, role) in [
        (Message::user("u"), Role::User),
        (
            Message::Assistant(runcore::AssistantMessage::text("a").into()),
            Role::Assistant,
        ),
        (
            Message::ToolResult(
                runcore::ToolResultMessage::synthetic(
                    CallId::new("c"),
                    "t",
                    runcore::ResultOutcome::Skipped,
                    "x",
                )
                .into(),
            ),
            Role::ToolResult,
        ),
    ] {
        assert_eq!(
            with_context(vec![system("a", "one"), bad]),
            Err(ResumeError::InvalidContextRole { index: 1, role })
        );
    }
}

#[test]
fn context_messages_need_content_and_unique_non_blank_ids() {
    let empty = Message::from(SystemMessage {
        content: vec![],
        id: Some("e".into()),
        meta: Default::default(),
    });
    let blank_text = Message::from(SystemMessage::text("  \n").with_id("b"));
    let no_id = Message::system("no id");
    let cases: Vec<(Vec<Message>, usize, &str)> = vec![
        (vec![empty], 0, "content is empty"),
        (vec![system("a", "ok"), blank_text], 1, "content is empty"),
        (vec![no_id], 0, "non-blank id"),
        (vec![system("", "blank id")], 0, "non-blank id"),
        (vec![system("  ", "blank id")], 0, "non-blank id"),
        (
            vec![system("a", "one"), system("b", "two"), system("a", "three")],
            2,
            "\"a\"",
        ),
    ];
    for (messages, index, reason_part) in cases {
        let error = with_context(messages.clone()).unwrap_err();
        assert!(invalid_message(index)(&error), "{messages:?}: {error:?}");
        let ResumeError::InvalidContextMessage { reason, .. } = &error else {
            unreachable!()
        };
        assert!(
            reason.contains(reason_part),
            "{reason:?} should mention {reason_part:?}"
        );
    }
    // Image content counts as content.
    let image = Message::from(SystemMessage {
        content: vec![ContentBlock::Image {
            data: "aGk=".into(),
            mime_type: "image/png".into(),
        }],
        id: Some("img".into()),
        meta: Default::default(),
    });
    assert_eq!(with_context(vec![image]), Ok(()));
    // Roles are checked over every message before content and ids.
    let empty_first = Message::from(SystemMessage {
        content: vec![],
        id: None,
        meta: Default::default(),
    });
    assert_eq!(
        with_context(vec![empty_first, Message::user("u")]),
        Err(ResumeError::InvalidContextRole {
            index: 1,
            role: Role::User
        })
    );
}

/// A naive reference of the ten steps of SPEC §4, written from the SPEC text only.
fn reference(ticket: Option<&ResumeTicket>, cmd: &ResumeCommand) -> Result<(), &'static str> {
    let Some(ticket) = ticket else {
        return Err("not_waiting");
    };
    if cmd.correlation_id != ticket.correlation_id {
        return Err("correlation_mismatch");
    }
    if cmd.run_id != ticket.run_id {
        return Err("run_mismatch");
    }
    if cmd.thread_id != ticket.thread_id {
        return Err("thread_mismatch");
    }
    if cmd.snapshot_id != ticket.snapshot_id {
        return Err("snapshot_mismatch");
    }
    if cmd.catalog_fingerprint != ticket.catalog_fingerprint {
        return Err("fingerprint_mismatch");
    }
    if ticket.deadline_ms.is_some_and(|d| cmd.now_ms > d) {
        return Err("expired");
    }
    if !spec_accepts(ticket.target()).contains(&cmd.result.kind()) {
        return Err("result_kind_mismatch");
    }
    if let (
        AwaitTarget::ToolCall {
            reason, call_id, ..
        },
        ResumeResult::ToolResult(output),
    ) = (ticket.target(), &cmd.result)
        && *reason != ToolWaitReason::Delegation
        && output.call_id != *call_id
    {
        return Err("tool_call_mismatch");
    }
    if cmd
        .context_messages
        .iter()
        .any(|m| m.role() != Role::System)
    {
        return Err("invalid_context_role");
    }
    let mut ids: Vec<&str> = Vec::new();
    for m in &cmd.context_messages {
        let content = match m {
            Message::System(s) => &s.content,
            _ => unreachable!(),
        };
        let substantial = content.iter().any(|b| match b {
            ContentBlock::Text { text } => !text.trim().is_empty(),
            ContentBlock::Image { data, .. } => !data.is_empty(),
        });
        let id = m.id().filter(|id| !id.trim().is_empty());
        match id {
            Some(id) if substantial && !ids.contains(&id) => ids.push(id),
            _ => return Err("invalid_context_message"),
        }
    }
    Ok(())
}

fn context_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        3 => ("[ab ]{0,2}", "[a-c ]{0,2}").prop_map(|(id, text)| {
            Message::from(SystemMessage { content: vec![ContentBlock::text(text)], id: Some(id), meta: Default::default() })
        }),
        1 => message(),
    ]
}

proptest! {
    #![proptest_config(common::proptest_config("proptest-regressions/resume.txt", 512))]

    /// Random tickets and commands, with each identity field kept or replaced, agree with the
    /// naive reference on whether and why the resume is rejected.
    #[test]
    fn validate_resume_agrees_with_the_naive_reference(
        ticket in resume_ticket(),
        active in prop::bool::weighted(0.9),
        result in resume_result(),
        flips in prop::array::uniform5(prop::bool::weighted(0.15)),
        now_offset in prop_oneof![Just(0i8), Just(-1i8), Just(1i8), any::<i8>()],
        context in prop::collection::vec(context_message(), 0..3),
        use_ticket_call in any::<bool>(),
    ) {
        let mut result = result;
        if let (true, ResumeResult::ToolResult(output), Some(call)) =
            (use_ticket_call, &mut result, ticket.target().call_id())
        {
            output.call_id = call.clone();
        }
        let now = match ticket.deadline_ms {
            Some(d) => d.saturating_add_signed(i64::from(now_offset)),
            None => u64::MAX,
        };
        let mut cmd = ResumeCommand::from_ticket(&ticket, result, now).with_context(context);
        if flips[0] { cmd.correlation_id.push('x'); }
        if flips[1] { cmd.run_id = RunId::new(format!("{}x", cmd.run_id)); }
        if flips[2] { cmd.thread_id = ThreadId::new(format!("{}x", cmd.thread_id)); }
        if flips[3] { cmd.snapshot_id.push('x'); }
        if flips[4] { cmd.catalog_fingerprint.push('x'); }
        let active = active.then_some(&ticket);
        let got = validate_resume(active, &cmd);
        let want = reference(active, &cmd);
        prop_assert_eq!(got.as_ref().map_err(|e| e.code()), want.as_ref().map_err(|c| *c));
    }
}
