//! Proptest strategies for every public data type, shared by the property tests.
//!
//! Strings include the empty string and arbitrary Unicode so escaping and blank-id handling
//! are exercised. JSON values are built from nulls, booleans, integers and strings (no floats:
//! a float's text form is a formatting choice, not a property of the types under test).

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::Value;

use runcore::store::{EventRecord, EventScope, TranscriptError, TranscriptSnapshotRef};
use runcore::{
    AssistantBlock, AssistantMessage, AuditDraft, AwaitTarget, COMMIT_SCHEMA_VERSION, CallId,
    CommitError, CommitOperation, CommitReceipt, CommitRecord, ContentBlock, EndCause, Failure,
    MergePolicy, Message, Meta, OperationId, PauseReason, PendingTool, PermissionDecision,
    RemoteInputReason, ResultKind, ResultOutcome, ResumeCommand, ResumeError, ResumeResult,
    ResumeTicket, Role, RunDisposition, RunId, RunRecord, RunState, StateAction, StateCommand,
    StateScope, StopReason, SystemMessage, ThreadCommit, ThreadId, ToolCall, ToolOutput,
    ToolResultMessage, ToolWaitReason, Usage, UserMessage, WaitIdentity,
};

/// Short ids from a small alphabet (so collisions happen), sometimes empty.
pub fn id_text() -> impl Strategy<Value = String> {
    "[a-z0-9/:_-]{0,10}"
}

/// Arbitrary Unicode text, including control characters and quotes.
pub fn text() -> impl Strategy<Value = String> {
    "\\PC{0,12}|[\"\\\\\n\t ]{0,4}"
}

pub fn thread_id() -> impl Strategy<Value = ThreadId> {
    id_text().prop_map(ThreadId::new)
}

pub fn run_id() -> impl Strategy<Value = RunId> {
    id_text().prop_map(RunId::new)
}

pub fn call_id() -> impl Strategy<Value = CallId> {
    id_text().prop_map(CallId::new)
}

/// A JSON value up to three levels deep.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(text(), inner, 0..4).prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A JSON value that is not `null`, for `Option<Value>` fields where `null` means absent.
pub fn present_json_value() -> impl Strategy<Value = Value> {
    json_value().prop_filter("null reads back as an absent value", |v| !v.is_null())
}

pub fn content_block() -> impl Strategy<Value = ContentBlock> {
    prop_oneof![
        text().prop_map(|text| ContentBlock::Text { text }),
        (text(), text()).prop_map(|(data, mime_type)| ContentBlock::Image { data, mime_type }),
    ]
}

/// A `meta` object (§2.1): mostly absent, sometimes a few keys of any JSON.
pub fn meta() -> impl Strategy<Value = Meta> {
    prop_oneof![
        3 => Just(Meta::new()),
        1 => vec((id_text(), json_value()), 1..3).prop_map(|pairs| pairs.into_iter().collect()),
    ]
}

pub fn assistant_block() -> impl Strategy<Value = AssistantBlock> {
    prop_oneof![
        (text(), meta()).prop_map(|(text, meta)| AssistantBlock::Text { text, meta }),
        (text(), option::of(text()), meta()).prop_map(|(thinking, signature, meta)| {
            AssistantBlock::Thinking {
                thinking,
                signature,
                meta,
            }
        }),
        (text(), meta()).prop_map(|(data, meta)| AssistantBlock::RedactedThinking { data, meta }),
        (call_id(), text(), json_value(), meta()).prop_map(|(id, name, arguments, meta)| {
            AssistantBlock::ToolCall {
                id,
                name: name.into(),
                arguments: arguments.into(),
                meta,
            }
        }),
    ]
}

pub fn stop_reason() -> impl Strategy<Value = StopReason> {
    prop_oneof![
        Just(StopReason::Stop),
        Just(StopReason::Length),
        Just(StopReason::ToolUse),
        Just(StopReason::Error),
        Just(StopReason::Aborted),
    ]
}

pub fn result_outcome() -> impl Strategy<Value = ResultOutcome> {
    prop_oneof![
        Just(ResultOutcome::Executed),
        Just(ResultOutcome::Denied),
        Just(ResultOutcome::Expired),
        Just(ResultOutcome::Truncated),
        Just(ResultOutcome::Skipped),
        Just(ResultOutcome::Interrupted),
        Just(ResultOutcome::Malformed),
    ]
}

pub fn role() -> impl Strategy<Value = Role> {
    prop_oneof![
        Just(Role::System),
        Just(Role::User),
        Just(Role::Assistant),
        Just(Role::ToolResult),
    ]
}

fn message_id() -> impl Strategy<Value = Option<String>> {
    option::of(id_text())
}

pub fn usage() -> impl Strategy<Value = Usage> {
    (
        any::<u64>(),
        any::<u64>(),
        option::of(any::<u64>()),
        option::of(any::<u64>()),
        option::of(any::<u64>()),
    )
        .prop_map(
            |(
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
                reasoning_tokens,
            )| {
                Usage {
                    input_tokens,
                    output_tokens,
                    cache_read_tokens,
                    cache_write_tokens,
                    reasoning_tokens,
                }
            },
        )
}

pub fn system_message() -> impl Strategy<Value = SystemMessage> {
    (vec(content_block(), 0..3), message_id(), meta())
        .prop_map(|(content, id, meta)| SystemMessage { content, id, meta })
}

pub fn user_message() -> impl Strategy<Value = UserMessage> {
    (vec(content_block(), 0..3), message_id(), meta()).prop_map(|(content, id, meta)| UserMessage {
        content,
        id,
        meta,
    })
}

/// The optional provider fields of an assistant message (§2.1).
fn provider_fields() -> impl Strategy<Value = (Option<String>, Option<String>, Option<String>, Meta)>
{
    (
        option::of(text()),
        option::of(text()),
        option::of(text()),
        meta(),
    )
}

pub fn assistant_message() -> impl Strategy<Value = AssistantMessage> {
    (
        vec(assistant_block(), 0..4),
        stop_reason(),
        option::of(text()),
        option::of(usage()),
        message_id(),
        provider_fields(),
    )
        .prop_map(
            |(
                content,
                stop_reason,
                error_message,
                usage,
                id,
                (model, response_id, provider_stop_reason, meta),
            )| AssistantMessage {
                content,
                stop_reason,
                error_message,
                usage,
                id,
                model,
                response_id,
                provider_stop_reason,
                meta,
            },
        )
}

pub fn tool_result_message() -> impl Strategy<Value = ToolResultMessage> {
    (
        call_id(),
        text(),
        vec(content_block(), 0..3),
        any::<bool>(),
        option::of(present_json_value()),
        result_outcome(),
        message_id(),
        meta(),
    )
        .prop_map(
            |(call_id, tool_name, content, is_error, details, outcome, id, meta)| {
                ToolResultMessage {
                    call_id,
                    tool_name: tool_name.into(),
                    content,
                    is_error,
                    details,
                    outcome,
                    id,
                    meta,
                }
            },
        )
}

pub fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        system_message().prop_map(Message::from),
        user_message().prop_map(Message::from),
        assistant_message().prop_map(Message::from),
        tool_result_message().prop_map(Message::from),
    ]
}

pub fn tool_call() -> impl Strategy<Value = ToolCall> {
    (call_id(), text(), json_value()).prop_map(|(id, name, arguments)| ToolCall {
        id,
        name: name.into(),
        arguments: arguments.into(),
    })
}

pub fn tool_output() -> impl Strategy<Value = ToolOutput> {
    (
        call_id(),
        vec(content_block(), 0..3),
        any::<bool>(),
        option::of(present_json_value()),
        meta(),
    )
        .prop_map(|(call_id, content, is_error, details, meta)| ToolOutput {
            call_id,
            content,
            is_error,
            details,
            meta,
        })
}

pub fn failure() -> impl Strategy<Value = Failure> {
    prop_oneof![
        (text(), text()).prop_map(|(code, message)| Failure::Inference { code, message }),
        Just(Failure::CapabilityBound),
        Just(Failure::StateConflict),
    ]
}

pub fn end_cause() -> impl Strategy<Value = EndCause> {
    prop_oneof![
        Just(EndCause::NaturalEnd),
        Just(EndCause::MaxSteps),
        Just(EndCause::Cancelled),
        text().prop_map(EndCause::Stopped),
        failure().prop_map(EndCause::Error),
        Just(EndCause::Indeterminate),
    ]
}

pub fn run_state() -> impl Strategy<Value = RunState> {
    prop_oneof![
        Just(RunState::Running),
        Just(RunState::Awaiting),
        end_cause().prop_map(RunState::Ended),
    ]
}

pub fn tool_wait_reason() -> impl Strategy<Value = ToolWaitReason> {
    prop_oneof![
        Just(ToolWaitReason::Permission),
        Just(ToolWaitReason::ClientExecution),
        Just(ToolWaitReason::ScheduledAction),
        Just(ToolWaitReason::Delegation),
    ]
}

pub fn remote_input_reason() -> impl Strategy<Value = RemoteInputReason> {
    prop_oneof![
        Just(RemoteInputReason::UserInput),
        Just(RemoteInputReason::ExternalEvent),
    ]
}

pub fn pause_reason() -> impl Strategy<Value = PauseReason> {
    prop_oneof![
        Just(PauseReason::Manual),
        Just(PauseReason::RateLimit),
        Just(PauseReason::BudgetReached),
    ]
}

pub fn pending_tool() -> impl Strategy<Value = PendingTool> {
    (text(), json_value()).prop_map(|(name, arguments)| PendingTool {
        name: name.into(),
        arguments: arguments.into(),
    })
}

pub fn await_target() -> impl Strategy<Value = AwaitTarget> {
    prop_oneof![
        (tool_wait_reason(), call_id(), pending_tool()).prop_map(|(reason, call_id, tool)| {
            AwaitTarget::ToolCall {
                reason,
                call_id,
                tool,
            }
        }),
        (remote_input_reason(), call_id())
            .prop_map(|(reason, call_id)| AwaitTarget::RemoteInput { reason, call_id }),
        pause_reason().prop_map(AwaitTarget::Pause),
    ]
}

pub fn wait_identity() -> impl Strategy<Value = WaitIdentity> {
    (id_text(), run_id(), thread_id(), id_text(), id_text()).prop_map(
        |(correlation_id, run_id, thread_id, snapshot_id, catalog_fingerprint)| WaitIdentity {
            correlation_id,
            run_id,
            thread_id,
            snapshot_id,
            catalog_fingerprint,
        },
    )
}

pub fn resume_ticket() -> impl Strategy<Value = ResumeTicket> {
    (wait_identity(), await_target(), option::of(any::<u64>()))
        .prop_map(|(identity, target, deadline)| ResumeTicket::new(identity, target, deadline))
}

pub fn run_disposition() -> impl Strategy<Value = RunDisposition> {
    prop_oneof![
        run_id().prop_map(|run_id| RunDisposition::Running { run_id }),
        resume_ticket().prop_map(|ticket| RunDisposition::Awaiting(Box::new(ticket))),
        (run_id(), end_cause()).prop_map(|(run_id, cause)| RunDisposition::Ended { run_id, cause }),
    ]
}

pub fn run_record() -> impl Strategy<Value = RunRecord> {
    (run_id(), thread_id(), run_state(), any::<u64>()).prop_map(
        |(id, thread_id, state, commits)| RunRecord {
            commits,
            id,
            thread_id,
            state,
        },
    )
}

pub fn permission_decision() -> impl Strategy<Value = PermissionDecision> {
    prop_oneof![
        option::of(text()).prop_map(|note| PermissionDecision::Allow { note }),
        option::of(text()).prop_map(|reason| PermissionDecision::Deny { reason }),
    ]
}

pub fn resume_result() -> impl Strategy<Value = ResumeResult> {
    prop_oneof![
        Just(ResumeResult::Continue),
        tool_output().prop_map(ResumeResult::ToolResult),
        permission_decision().prop_map(ResumeResult::Permission),
        text().prop_map(ResumeResult::Input),
    ]
}

pub fn result_kind() -> impl Strategy<Value = ResultKind> {
    prop_oneof![
        Just(ResultKind::Continue),
        Just(ResultKind::ToolResult),
        Just(ResultKind::Permission),
        Just(ResultKind::Input),
    ]
}

pub fn resume_command() -> impl Strategy<Value = ResumeCommand> {
    (
        wait_identity(),
        resume_result(),
        vec(message(), 0..3),
        any::<u64>(),
    )
        .prop_map(
            |(identity, result, context_messages, now_ms)| ResumeCommand {
                correlation_id: identity.correlation_id,
                run_id: identity.run_id,
                thread_id: identity.thread_id,
                snapshot_id: identity.snapshot_id,
                catalog_fingerprint: identity.catalog_fingerprint,
                result,
                context_messages,
                now_ms,
            },
        )
}

pub fn state_scope() -> impl Strategy<Value = StateScope> {
    prop_oneof![
        Just(StateScope::Run),
        Just(StateScope::Thread),
        Just(StateScope::Shared),
        Just(StateScope::Profile),
    ]
}

pub fn merge_policy() -> impl Strategy<Value = MergePolicy> {
    prop_oneof![
        Just(MergePolicy::Disjoint),
        Just(MergePolicy::Commutative),
        Just(MergePolicy::Exclusive),
    ]
}

pub fn state_action() -> impl Strategy<Value = StateAction> {
    prop_oneof![
        3 => json_value().prop_map(StateAction::Set),
        1 => Just(StateAction::Remove),
    ]
}

pub fn state_command() -> impl Strategy<Value = StateCommand> {
    (
        id_text(),
        state_scope(),
        merge_policy(),
        option::of(run_id()),
        state_action(),
    )
        .prop_map(|(key, scope, merge, run_id, action)| StateCommand {
            key,
            scope,
            merge,
            run_id,
            action,
        })
}

pub fn audit_draft() -> impl Strategy<Value = AuditDraft> {
    (id_text(), json_value()).prop_map(|(kind, payload)| AuditDraft::new(kind, payload))
}

pub fn thread_commit() -> impl Strategy<Value = ThreadCommit> {
    (
        0..=COMMIT_SCHEMA_VERSION + 1,
        thread_id(),
        run_disposition(),
        vec(message(), 0..3),
        vec(state_command(), 0..3),
        vec(audit_draft(), 0..3),
    )
        .prop_map(
            |(schema_version, thread_id, run, messages, state, events)| ThreadCommit {
                schema_version,
                thread_id,
                run,
                messages,
                state,
                events,
            },
        )
}

pub fn event_record() -> impl Strategy<Value = EventRecord> {
    (
        any::<u64>(),
        any::<u64>(),
        thread_id(),
        run_id(),
        id_text(),
        json_value(),
    )
        .prop_map(
            |(sequence, commit_sequence, thread_id, run_id, kind, payload)| EventRecord {
                sequence,
                commit_sequence,
                thread_id,
                run_id,
                kind,
                payload,
            },
        )
}

pub fn event_scope() -> impl Strategy<Value = EventScope> {
    prop_oneof![
        Just(EventScope::All),
        thread_id().prop_map(EventScope::Thread),
        run_id().prop_map(EventScope::Run),
    ]
}

pub fn operation_id() -> impl Strategy<Value = OperationId> {
    (run_id(), any::<u64>()).prop_map(|(run_id, ordinal)| OperationId { run_id, ordinal })
}

pub fn commit_operation() -> impl Strategy<Value = CommitOperation> {
    (operation_id(), any::<u64>(), id_text(), thread_commit()).prop_map(
        |(operation_id, expected_thread_version, payload_hash, commit)| CommitOperation {
            operation_id,
            expected_thread_version,
            payload_hash,
            commit,
            claim: None,
            now_ms: None,
        },
    )
}

pub fn commit_record() -> impl Strategy<Value = CommitRecord> {
    (any::<u64>(), any::<u64>()).prop_map(|(sequence, thread_version)| CommitRecord {
        sequence,
        thread_version,
    })
}

pub fn commit_receipt() -> impl Strategy<Value = CommitReceipt> {
    (operation_id(), id_text(), commit_record(), any::<bool>()).prop_map(
        |(operation_id, payload_hash, record, duplicate)| CommitReceipt {
            operation_id,
            payload_hash,
            record,
            duplicate,
        },
    )
}

pub fn transcript_snapshot_ref() -> impl Strategy<Value = TranscriptSnapshotRef> {
    (thread_id(), any::<usize>(), id_text()).prop_map(|(thread_id, end, digest)| {
        TranscriptSnapshotRef {
            thread_id,
            end,
            digest,
        }
    })
}

pub fn resume_error() -> impl Strategy<Value = ResumeError> {
    prop_oneof![
        Just(ResumeError::NotWaiting),
        (id_text(), id_text())
            .prop_map(|(expected, got)| ResumeError::CorrelationMismatch { expected, got }),
        (run_id(), run_id()).prop_map(|(expected, got)| ResumeError::RunMismatch { expected, got }),
        (thread_id(), thread_id())
            .prop_map(|(expected, got)| ResumeError::ThreadMismatch { expected, got }),
        (id_text(), id_text())
            .prop_map(|(expected, got)| ResumeError::SnapshotMismatch { expected, got }),
        (id_text(), id_text())
            .prop_map(|(expected, got)| ResumeError::FingerprintMismatch { expected, got }),
        (any::<u64>(), any::<u64>()).prop_map(|(deadline_ms, now_ms)| ResumeError::Expired {
            deadline_ms,
            now_ms
        }),
        (text(), vec(result_kind(), 0..4), result_kind()).prop_map(|(target, expected, got)| {
            ResumeError::ResultKindMismatch {
                target,
                expected,
                got,
            }
        }),
        (call_id(), call_id())
            .prop_map(|(expected, got)| ResumeError::ToolCallMismatch { expected, got }),
        (any::<usize>(), role())
            .prop_map(|(index, role)| ResumeError::InvalidContextRole { index, role }),
        (any::<usize>(), text())
            .prop_map(|(index, reason)| ResumeError::InvalidContextMessage { index, reason }),
    ]
}

pub fn commit_error() -> impl Strategy<Value = CommitError> {
    prop_oneof![
        (any::<u32>(), any::<u32>()).prop_map(|(found, supported)| {
            CommitError::UnsupportedSchemaVersion { found, supported }
        }),
        Just(CommitError::EmptyThreadId),
        Just(CommitError::EmptyRunId),
        Just(CommitError::EmptyCorrelationId),
        (thread_id(), thread_id()).prop_map(|(commit_thread, ticket_thread)| {
            CommitError::TicketThreadMismatch {
                commit_thread,
                ticket_thread,
            }
        }),
        (state_scope(), id_text())
            .prop_map(|(scope, key)| CommitError::ExclusiveConflict { scope, key }),
        (run_id(), end_cause())
            .prop_map(|(run_id, cause)| CommitError::AlreadyTerminal { run_id, cause }),
        (run_id(), thread_id(), thread_id()).prop_map(
            |(run_id, existing_thread, commit_thread)| CommitError::RunOnOtherThread {
                run_id,
                existing_thread,
                commit_thread,
            }
        ),
        text().prop_map(|counter| CommitError::CounterOverflow { counter }),
        (run_id(), run_id()).prop_map(|(operation_run, commit_run)| {
            CommitError::OperationRunMismatch {
                operation_run,
                commit_run,
            }
        }),
        (run_id(), any::<u64>(), id_text(), id_text()).prop_map(
            |(run_id, ordinal, stored, got)| CommitError::PayloadMismatch {
                run_id,
                ordinal,
                stored,
                got,
            }
        ),
        (any::<u64>(), any::<u64>())
            .prop_map(|(expected, actual)| CommitError::VersionConflict { expected, actual }),
        (any::<u64>(), any::<u64>())
            .prop_map(|(expected, got)| CommitError::OrdinalConflict { expected, got }),
    ]
}

pub fn transcript_error() -> impl Strategy<Value = TranscriptError> {
    prop_oneof![
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(start, end, limit)| TranscriptError::InvalidRange { start, end, limit }),
        (any::<usize>(), any::<usize>())
            .prop_map(|(start, end)| TranscriptError::OverlappingRanges { start, end }),
        (thread_id(), any::<usize>(), any::<usize>()).prop_map(|(thread_id, end, committed)| {
            TranscriptError::SnapshotUnavailable {
                thread_id,
                end,
                committed,
            }
        }),
        thread_id().prop_map(|thread_id| TranscriptError::SnapshotMismatch { thread_id }),
    ]
}
