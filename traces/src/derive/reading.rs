//! Single facts read for the spans: how a wait was answered, whether a call was executed, an
//! answer's provider and stop reason, capped status text, and messages in the GenAI
//! conventions' `{role, parts}` shape.

use runcore::facts::CommitFacts;
use runcore::{
    AssistantBlock, AssistantMessage, AuditDraft, ContentBlock, EndCause, Message,
    PermissionDecision, ResultOutcome, RunState, ToolResultMessage,
};
use serde_json::{Value, json};

use super::CommitView;

/// How a wait was answered, read from the run's next commit: the decision's name, when, and
/// its note or reason.
pub(super) fn decision_of(
    next: &CommitFacts,
    fallback_ms: u64,
) -> (String, u64, Vec<(String, String)>) {
    let (name, at, mut details) = decision_without_owner(next, fallback_ms);
    // `decided_by {call_id, owner}`: who answered (the claim's owner), when a person's door
    // (`runcore approve`/`deny`, the console, a binding) committed the decision.
    let owner = next.drafts.iter().find_map(|draft| match draft {
        AuditDraft::Custom { kind, payload } if kind == runcore::host::DECIDED_BY => payload
            .get("owner")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    });
    if let Some(owner) = owner {
        details.push(("runcore.decision.by".to_owned(), owner));
    }
    (name, at, details)
}

fn decision_without_owner(
    next: &CommitFacts,
    fallback_ms: u64,
) -> (String, u64, Vec<(String, String)>) {
    for draft in &next.drafts {
        if let AuditDraft::PermissionDecided {
            decision, now_ms, ..
        } = draft
        {
            let at = now_ms.unwrap_or(fallback_ms);
            return match decision {
                PermissionDecision::Allow { note } => (
                    "allow".into(),
                    at,
                    note.iter()
                        .map(|note| ("runcore.decision.note".to_owned(), note.clone()))
                        .collect(),
                ),
                PermissionDecision::Deny { reason } => (
                    "deny".into(),
                    at,
                    reason
                        .iter()
                        .map(|reason| ("runcore.decision.reason".to_owned(), reason.clone()))
                        .collect(),
                ),
            };
        }
    }
    let name = match next.state() {
        Some((RunState::Ended(EndCause::Stopped(reason)), _)) if reason == "wait_expired" => {
            "expired"
        }
        Some((RunState::Ended(EndCause::Cancelled), _)) => "cancelled",
        Some((RunState::Ended(EndCause::Stopped(_)), _)) => "stopped",
        Some((RunState::Ended(_), _)) => "ended",
        _ => "resumed",
    };
    (name.to_owned(), fallback_ms, Vec::new())
}

/// Whether a result's call was handed to the host: executed (successfully or not), its
/// outcome lost in a crash (`interrupted`), or its output replaced as `malformed` (arguments
/// that were a JSON object were executed; any other arguments never were).
pub(super) fn executed(result: &ToolResultMessage, arguments: &Value) -> bool {
    match result.outcome {
        ResultOutcome::Executed | ResultOutcome::Interrupted => true,
        ResultOutcome::Malformed => arguments.is_object(),
        _ => false,
    }
}

/// `gen_ai.provider.name` of an answer decoded by a runcore codec: its `meta.codec.api`
/// (SPEC §2.1) in the GenAI conventions' words (both OpenAI APIs are `openai`).
pub(super) fn provider_of(answer: &AssistantMessage) -> Option<&'static str> {
    let api = answer.meta.get("codec")?.get("api")?.as_str()?;
    match api {
        "anthropic" => Some("anthropic"),
        "openai-chat" | "openai-responses" => Some("openai"),
        _ => None,
    }
}

/// The §2 `stop_reason` as it is written (a match, not a serde round trip per step).
pub(super) fn stop_reason_name(answer: &AssistantMessage) -> String {
    use runcore::StopReason;
    let name = match answer.stop_reason {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "tool_use",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
    };
    name.to_owned()
}

/// The longest status message a failed tool's text gives (with content), in bytes.
pub(super) const STATUS_MESSAGE_MAX: usize = 1024;

/// `text` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub(super) fn capped(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push('…');
    text
}

pub(super) fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn content_parts(content: &[ContentBlock]) -> Vec<Value> {
    content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => json!({"type": "text", "content": text}),
            ContentBlock::Image { data, mime_type } => json!({
                "type": "blob", "modality": "image", "mime_type": mime_type, "content": data
            }),
            #[allow(unreachable_patterns)]
            _ => json!({"type": "unknown"}),
        })
        .collect()
}

/// A message in the GenAI conventions' `{role, parts}` shape.
pub(super) fn message_parts(message: &Message) -> Value {
    match message {
        Message::System(system) => json!({
            "role": "system",
            "parts": content_parts(&system.content),
        }),
        Message::User(user) => json!({"role": "user", "parts": content_parts(&user.content)}),
        Message::Assistant(answer) => {
            let parts: Vec<Value> = answer
                .content
                .iter()
                .filter_map(|block| match block {
                    AssistantBlock::Text { text, .. } => {
                        Some(json!({"type": "text", "content": text}))
                    }
                    AssistantBlock::Thinking { thinking, .. } => {
                        Some(json!({"type": "reasoning", "content": thinking}))
                    }
                    AssistantBlock::ToolCall {
                        id,
                        name,
                        arguments,
                        ..
                    } => Some(json!({
                        "type": "tool_call", "id": id, "name": name, "arguments": arguments
                    })),
                    _ => None,
                })
                .collect();
            json!({"role": "assistant", "parts": parts})
        }
        Message::ToolResult(result) => json!({
            "role": "tool",
            "parts": [{
                "type": "tool_call_response",
                "id": result.call_id,
                "response": text_of(&result.content),
            }],
        }),
    }
}
