//! Messages and content blocks (SPEC §2), tool outputs and the synthetic tool results of §8.6.
//!
//! Each role has its own content type, so a tool call can only ever appear in an assistant
//! message and a user message can only hold text and images: a wrong block in a wrong role is
//! a deserialization error, not something to check later.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{CallId, ToolName};

mod meta;

pub use meta::{Meta, MetaError, from_json_exact, protect_big_integers};
pub(crate) use meta::{RAW_TOKEN, write_canonical_meta};

/// Whether `meta` is empty (and so left out of the serialized message).
pub(crate) fn meta_is_empty(meta: &Meta) -> bool {
    meta.is_empty()
}

/// A block of user, system or tool-result content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// Base64 data (standard alphabet, padded).
        data: String,
        /// The media type, e.g. `image/png`.
        mime_type: String,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// The number of bytes this block holds (text or encoded image data).
    pub fn byte_len(&self) -> usize {
        match self {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Image { data, mime_type } => data.len().saturating_add(mime_type.len()),
        }
    }

    fn is_blank(&self) -> bool {
        match self {
            ContentBlock::Text { text } => crate::ids::is_blank(text),
            ContentBlock::Image { data, .. } => data.is_empty(),
        }
    }
}

/// A block of assistant content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AssistantBlock {
    /// Visible text.
    Text {
        /// The text.
        text: String,
        /// Host and codec data (§2.1), returned exactly; absent when empty.
        #[serde(default, skip_serializing_if = "meta_is_empty")]
        meta: Meta,
    },
    /// Model reasoning, kept in the transcript as the provider returned it.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The provider's opaque signature over the reasoning, kept byte for byte (Anthropic
        /// requires it back with tool use).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// Host and codec data (§2.1), returned exactly; absent when empty.
        #[serde(default, skip_serializing_if = "meta_is_empty")]
        meta: Meta,
    },
    /// Reasoning the provider returned encrypted instead of as text: kept byte for byte, never
    /// shown as text.
    RedactedThinking {
        /// The provider's opaque data.
        data: String,
        /// Host and codec data (§2.1), returned exactly; absent when empty.
        #[serde(default, skip_serializing_if = "meta_is_empty")]
        meta: Meta,
    },
    /// A tool call the model asked for.
    ToolCall {
        /// The call id as the model produced it.
        id: CallId,
        /// The tool's name.
        name: ToolName,
        /// The call's arguments, as JSON. A JSON object; anything else (a codec passes
        /// arguments that did not parse on as their raw text) is answered `malformed` without
        /// being executed (SPEC §13).
        // Shared: the batch, the `tool_start` event and the `execute_tools` action hold this
        // value, not copies of it.
        #[cfg_attr(feature = "schema", schemars(with = "Value"))]
        arguments: Arc<Value>,
        /// Host and codec data (§2.1), returned exactly; absent when empty.
        #[serde(default, skip_serializing_if = "meta_is_empty")]
        meta: Meta,
    },
}

impl AssistantBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        AssistantBlock::Text {
            text: text.into(),
            meta: Meta::new(),
        }
    }

    /// A thinking block without a signature.
    pub fn thinking(thinking: impl Into<String>) -> Self {
        AssistantBlock::Thinking {
            thinking: thinking.into(),
            signature: None,
            meta: Meta::new(),
        }
    }

    /// The block's `meta` (§2.1).
    pub fn meta(&self) -> &Meta {
        match self {
            AssistantBlock::Text { meta, .. }
            | AssistantBlock::Thinking { meta, .. }
            | AssistantBlock::RedactedThinking { meta, .. }
            | AssistantBlock::ToolCall { meta, .. } => meta,
        }
    }

    /// The block with `meta` set (§2.1).
    pub fn with_meta(mut self, new_meta: Meta) -> Self {
        match &mut self {
            AssistantBlock::Text { meta, .. }
            | AssistantBlock::Thinking { meta, .. }
            | AssistantBlock::RedactedThinking { meta, .. }
            | AssistantBlock::ToolCall { meta, .. } => *meta = new_meta,
        }
        self
    }

    /// A tool-call block (`arguments` is a `Value` or an already shared `Arc<Value>`).
    pub fn tool_call(
        id: impl Into<CallId>,
        name: impl Into<ToolName>,
        arguments: impl Into<Arc<Value>>,
    ) -> Self {
        AssistantBlock::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            meta: Meta::new(),
        }
    }
}

/// What a streamed `model_delta` carries (§2.1): answer text (the default) or reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeltaKind {
    /// Answer text, announced as `text_delta` and folded into `streaming_text`.
    #[default]
    Text,
    /// Reasoning, announced as `thinking_delta` and folded into `streaming_thinking`.
    Thinking,
}

impl DeltaKind {
    /// Whether this is the default kind (left out of the serialized delta).
    pub fn is_text(&self) -> bool {
        matches!(self, DeltaKind::Text)
    }
}

crate::named::named_enum!(DeltaKind, "kind", { Text => "text", Thinking => "thinking" });

/// Why the model stopped producing output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A natural end of the answer.
    Stop,
    /// The output hit its length limit (tool calls in it may be incomplete).
    Length,
    /// The model wants tools to run.
    ToolUse,
    /// The provider reported an error.
    Error,
    /// The request was aborted.
    Aborted,
}

/// Token usage as the provider reported it (SPEC §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Every prompt token, cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens (reasoning included).
    #[serde(default)]
    pub output_tokens: u64,
    /// How many of `input_tokens` were read from a prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// How many of `input_tokens` were written to a prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// How many of `output_tokens` were reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// A system message (instructions; also the only role allowed as resume context).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SystemMessage {
    /// Text or image blocks.
    pub content: Vec<ContentBlock>,
    /// Optional host-supplied stable identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Host data (§2.1), returned exactly and never read by the core; absent when empty.
    #[serde(default, skip_serializing_if = "meta_is_empty")]
    pub meta: Meta,
}

/// A user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UserMessage {
    /// Text or image blocks.
    pub content: Vec<ContentBlock>,
    /// Optional host-supplied stable identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Host data (§2.1), returned exactly and never read by the core; absent when empty.
    #[serde(default, skip_serializing_if = "meta_is_empty")]
    pub meta: Meta,
}

impl UserMessage {
    /// A user message with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        UserMessage {
            content: vec![ContentBlock::text(text)],
            id: None,
            meta: Meta::new(),
        }
    }
}

impl SystemMessage {
    /// A system message with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        SystemMessage {
            content: vec![ContentBlock::text(text)],
            id: None,
            meta: Meta::new(),
        }
    }

    /// Sets the stable message id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// A model answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AssistantMessage {
    /// Text, thinking and tool-call blocks, in the order the model produced them.
    pub content: Vec<AssistantBlock>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// The provider's error text when `stop_reason` is `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Token usage, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Optional host-supplied stable identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The model that answered, as the provider named it (§2.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The provider's id for the response (§2.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// The provider's own stop reason, verbatim (`end_turn`, `pause_turn`, `refusal`,
    /// `content_filter`, …); `stop_reason` stays the closed §2 set (§2.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_stop_reason: Option<String>,
    /// Host and codec data (§2.1), returned exactly and never read by the core; absent when empty.
    #[serde(default, skip_serializing_if = "meta_is_empty")]
    pub meta: Meta,
}

impl AssistantMessage {
    /// An answer with the given blocks and stop reason.
    pub fn new(content: Vec<AssistantBlock>, stop_reason: StopReason) -> Self {
        AssistantMessage {
            content,
            stop_reason,
            error_message: None,
            usage: None,
            id: None,
            model: None,
            response_id: None,
            provider_stop_reason: None,
            meta: Meta::new(),
        }
    }

    /// A text-only answer that stopped naturally.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(vec![AssistantBlock::text(text)], StopReason::Stop)
    }

    /// The tool calls of this message, in content order.
    pub fn tool_calls(&self) -> impl Iterator<Item = ToolCall> + '_ {
        self.content.iter().filter_map(|block| match block {
            AssistantBlock::ToolCall {
                id,
                name,
                arguments,
                ..
            } => Some(ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
            }),
            _ => None,
        })
    }

    /// Whether the message contains at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.content
            .iter()
            .any(|b| matches!(b, AssistantBlock::ToolCall { .. }))
    }

    /// Checks the shape the loop relies on: every tool call has a non-blank id and name, and
    /// call ids are unique within the message. Returns a reason on failure.
    ///
    /// `model_done` and imported history refuse a message that fails it (`invalid_input`); a
    /// provider codec calls it on a decoded answer, so that a broken response is a
    /// `model_failed`, never a `model_done` the agent would refuse.
    pub fn check_shape(&self) -> Result<(), String> {
        for (index, block) in self.content.iter().enumerate() {
            if let AssistantBlock::ToolCall { id, name, .. } = block {
                if id.is_blank() {
                    return Err(format!("tool call at content[{index}] has an empty id"));
                }
                if crate::ids::is_blank(name) {
                    return Err(format!("tool call {id} has an empty tool name"));
                }
                // The calls before this one, compared in place (no list of seen ids to
                // allocate for every answer).
                let repeated = self.content[..index].iter().any(
                    |earlier| matches!(earlier, AssistantBlock::ToolCall { id: other, .. } if other == id),
                );
                if repeated {
                    return Err(format!("tool call id {id} appears twice in one message"));
                }
            }
        }
        Ok(())
    }
}

/// How a tool result came to be (SPEC §8.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ResultOutcome {
    /// The host ran the tool and reported its output.
    Executed,
    /// An approval was refused.
    Denied,
    /// An approval wait expired.
    Expired,
    /// The model's output hit its length limit; the call was never executed.
    Truncated,
    /// Never started: the run ended first.
    Skipped,
    /// Started, but its outcome is unknown.
    Interrupted,
    /// The host's output could not be represented and was replaced.
    Malformed,
}

impl ResultOutcome {
    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultOutcome::Executed => "executed",
            ResultOutcome::Denied => "denied",
            ResultOutcome::Expired => "expired",
            ResultOutcome::Truncated => "truncated",
            ResultOutcome::Skipped => "skipped",
            ResultOutcome::Interrupted => "interrupted",
            ResultOutcome::Malformed => "malformed",
        }
    }
}

/// The result of one tool call, paired with its call by `call_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolResultMessage {
    /// The call this result answers.
    pub call_id: CallId,
    /// The called tool's name.
    pub tool_name: ToolName,
    /// Text or image blocks.
    pub content: Vec<ContentBlock>,
    /// Whether the result reports a failure.
    pub is_error: bool,
    /// Structured details for the host (not sent to the model by convention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// How this result came to be.
    pub outcome: ResultOutcome,
    /// Optional host-supplied stable identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Host data (§2.1), returned exactly and never read by the core; absent when empty.
    #[serde(default, skip_serializing_if = "meta_is_empty")]
    pub meta: Meta,
}

impl ToolResultMessage {
    /// A result the core wrote itself because the tool did not (or could not) answer.
    /// Synthetic results are always errors and say in text what happened.
    pub fn synthetic(
        call_id: CallId,
        tool_name: impl Into<ToolName>,
        outcome: ResultOutcome,
        text: impl Into<String>,
    ) -> Self {
        ToolResultMessage {
            call_id,
            tool_name: tool_name.into(),
            content: vec![ContentBlock::text(text)],
            is_error: true,
            details: None,
            outcome,
            id: None,
            meta: Meta::new(),
        }
    }

    /// `skipped`: the call never started because the run ended first.
    pub fn skipped(call: &ToolCall) -> Self {
        Self::synthetic(
            call.id.clone(),
            call.name.clone(),
            ResultOutcome::Skipped,
            "Skipped: the run ended before this tool call started.",
        )
    }

    /// `denied`: approval was refused, with the reason if one was given.
    pub fn denied(call: &ToolCall, reason: Option<&str>) -> Self {
        let text = match reason {
            Some(reason) if !reason.trim().is_empty() => {
                format!("Denied: approval for this tool call was refused: {reason}")
            }
            _ => "Denied: approval for this tool call was refused.".to_owned(),
        };
        Self::synthetic(
            call.id.clone(),
            call.name.clone(),
            ResultOutcome::Denied,
            text,
        )
    }

    /// `expired`: the approval wait expired before anyone answered.
    pub fn expired(call: &ToolCall) -> Self {
        Self::synthetic(
            call.id.clone(),
            call.name.clone(),
            ResultOutcome::Expired,
            "Expired: the approval wait for this tool call expired; it was not executed.",
        )
    }

    /// `truncated`: the model's output hit its length limit, so the call was never executed.
    pub fn truncated(call: &ToolCall) -> Self {
        Self::synthetic(
            call.id.clone(),
            call.name.clone(),
            ResultOutcome::Truncated,
            "Not executed: the model's output hit its length limit, so the arguments may be \
             incomplete. Re-issue the call with complete arguments.",
        )
    }

    /// `interrupted`: the call was started but its outcome is unknown.
    pub fn interrupted(call: &ToolCall) -> Self {
        Self::synthetic(
            call.id.clone(),
            call.name.clone(),
            ResultOutcome::Interrupted,
            "Interrupted: the tool call was started but its outcome is unknown.",
        )
    }

    /// `malformed`: the model's call has arguments that are not a JSON object (a codec passed
    /// text that did not parse on as it came), so it was never executed (SPEC §13).
    pub fn malformed_arguments(call: &ToolCall) -> Self {
        Self::synthetic(
            call.id.clone(),
            call.name.clone(),
            ResultOutcome::Malformed,
            "Not executed: the tool call's arguments are not a JSON object. Re-issue the call \
             with its arguments as one valid JSON object.",
        )
    }

    /// `malformed`: the host's output could not be represented.
    pub fn malformed(call: &ToolCall, why: &str) -> Self {
        Self::synthetic(
            call.id.clone(),
            call.name.clone(),
            ResultOutcome::Malformed,
            format!("Malformed tool output replaced: {why}"),
        )
    }
}

/// A message of the transcript, tagged by `role`.
///
/// Each variant holds its message behind an [`Arc`]: the transcript, the commit that persists
/// a message and the event that announces it hold the same message, so cloning a `Message` never
/// copies its content. Build one with `Message::from(UserMessage::text("hi"))` (or
/// [`Message::user`]); read one through the variant as through a reference
/// (`Message::Assistant(m) => &m.content`); change one with [`Arc::make_mut`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(description = "A message of the transcript, tagged by `role`.")
)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions.
    System(Arc<SystemMessage>),
    /// User input (prompts, steering, follow-ups, resume input).
    User(Arc<UserMessage>),
    /// A model answer.
    Assistant(Arc<AssistantMessage>),
    /// A tool result.
    ToolResult(Arc<ToolResultMessage>),
}

/// The role of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `system`
    System,
    /// `user`
    User,
    /// `assistant`
    Assistant,
    /// `tool_result`
    ToolResult,
}

impl Role {
    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "tool_result",
        }
    }
}

impl Message {
    /// The message's role.
    pub fn role(&self) -> Role {
        match self {
            Message::System(_) => Role::System,
            Message::User(_) => Role::User,
            Message::Assistant(_) => Role::Assistant,
            Message::ToolResult(_) => Role::ToolResult,
        }
    }

    /// The host-supplied message id, if any.
    pub fn id(&self) -> Option<&str> {
        match self {
            Message::System(m) => m.id.as_deref(),
            Message::User(m) => m.id.as_deref(),
            Message::Assistant(m) => m.id.as_deref(),
            Message::ToolResult(m) => m.id.as_deref(),
        }
    }

    /// The message's `meta` (§2.1): host and codec data, empty when absent.
    pub fn meta(&self) -> &Meta {
        match self {
            Message::System(m) => &m.meta,
            Message::User(m) => &m.meta,
            Message::Assistant(m) => &m.meta,
            Message::ToolResult(m) => &m.meta,
        }
    }

    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User(Arc::new(UserMessage::text(text)))
    }

    /// A system message with one text block.
    pub fn system(text: impl Into<String>) -> Self {
        Message::System(Arc::new(SystemMessage::text(text)))
    }

    /// The assistant message inside, if this is one.
    pub fn as_assistant(&self) -> Option<&AssistantMessage> {
        match self {
            Message::Assistant(m) => Some(m),
            _ => None,
        }
    }

    /// The tool result inside, if this is one.
    pub fn as_tool_result(&self) -> Option<&ToolResultMessage> {
        match self {
            Message::ToolResult(m) => Some(m),
            _ => None,
        }
    }

    /// Whether the content has substance: at least one block that is not blank text or
    /// empty image data. Assistant messages always count (an error answer may be empty).
    pub fn has_content(&self) -> bool {
        match self {
            Message::System(m) => has_substance(&m.content),
            Message::User(m) => has_substance(&m.content),
            Message::ToolResult(m) => has_substance(&m.content),
            Message::Assistant(_) => true,
        }
    }
}

/// Serde for an [`AssistantMessage`] written as a §2 message, with `"role":"assistant"`, where
/// the type already says it is one (e.g. the `assistant_message` event), so every message on
/// the wire has the same shape. Reading accepts the role or its absence, and no other role.
pub(crate) mod assistant_with_role {
    use std::borrow::Borrow;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    use super::AssistantMessage;

    #[derive(Serialize)]
    #[serde(tag = "role", rename_all = "snake_case")]
    enum Tagged<'a> {
        Assistant(&'a AssistantMessage),
    }

    /// Writes `message` with `"role":"assistant"`.
    pub(crate) fn serialize<S: Serializer, M: Borrow<AssistantMessage>>(
        message: &M,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        Tagged::Assistant(message.borrow()).serialize(serializer)
    }

    /// Reads an assistant message whose `role`, if present, is `assistant`.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>, M: From<AssistantMessage>>(
        deserializer: D,
    ) -> Result<M, D::Error> {
        use serde::de::Error;
        let mut value = Value::deserialize(deserializer)?;
        if let Value::Object(object) = &mut value {
            match object.remove("role") {
                None => {}
                Some(Value::String(role)) if role == "assistant" => {}
                Some(other) => {
                    return Err(D::Error::custom(format!(
                        "expected an assistant message, got role {other}"
                    )));
                }
            }
        }
        serde_json::from_value::<AssistantMessage>(value)
            .map(M::from)
            .map_err(D::Error::custom)
    }

    /// The JSON Schema: an assistant message with `"role": "assistant"`.
    #[cfg(feature = "schema")]
    pub(crate) fn schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = <AssistantMessage as schemars::JsonSchema>::json_schema(generator);
        if let Some(properties) = schema
            .ensure_object()
            .get_mut("properties")
            .and_then(Value::as_object_mut)
        {
            properties.insert("role".into(), serde_json::json!({ "const": "assistant" }));
        }
        schema
    }
}

/// True when at least one block is not blank.
pub(crate) fn has_substance(blocks: &[ContentBlock]) -> bool {
    blocks.iter().any(|b| !b.is_blank())
}

impl From<UserMessage> for Message {
    fn from(m: UserMessage) -> Self {
        Message::User(Arc::new(m))
    }
}

impl From<Arc<UserMessage>> for Message {
    fn from(m: Arc<UserMessage>) -> Self {
        Message::User(m)
    }
}

impl From<SystemMessage> for Message {
    fn from(m: SystemMessage) -> Self {
        Message::System(Arc::new(m))
    }
}

impl From<Arc<SystemMessage>> for Message {
    fn from(m: Arc<SystemMessage>) -> Self {
        Message::System(m)
    }
}

impl From<AssistantMessage> for Message {
    fn from(m: AssistantMessage) -> Self {
        Message::Assistant(Arc::new(m))
    }
}

impl From<Arc<AssistantMessage>> for Message {
    fn from(m: Arc<AssistantMessage>) -> Self {
        Message::Assistant(m)
    }
}

impl From<ToolResultMessage> for Message {
    fn from(m: ToolResultMessage) -> Self {
        Message::ToolResult(Arc::new(m))
    }
}

impl From<Arc<ToolResultMessage>> for Message {
    fn from(m: Arc<ToolResultMessage>) -> Self {
        Message::ToolResult(m)
    }
}

/// One tool call to execute, as handed to the host in `ExecuteTools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The call id (the host answers with it).
    pub id: CallId,
    /// The tool's name.
    pub name: ToolName,
    /// The call's arguments.
    // Shared with the assistant message that made the call.
    #[cfg_attr(feature = "schema", schemars(with = "Value"))]
    pub arguments: Arc<Value>,
}

/// What the host reports when a tool finishes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolOutput {
    /// The call this output answers.
    pub call_id: CallId,
    /// Text or image blocks.
    pub content: Vec<ContentBlock>,
    /// Whether the tool failed.
    #[serde(default)]
    pub is_error: bool,
    /// Structured details for the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Host data (§2.1) for the result message: carried onto it unchanged, never read by the
    /// core; absent when empty.
    #[serde(default, skip_serializing_if = "meta_is_empty")]
    pub meta: Meta,
}

impl ToolOutput {
    /// A successful text output.
    pub fn text(call_id: impl Into<CallId>, text: impl Into<String>) -> Self {
        ToolOutput {
            call_id: call_id.into(),
            content: vec![ContentBlock::text(text)],
            is_error: false,
            details: None,
            meta: Meta::new(),
        }
    }

    /// The output with `meta` set (§2.1).
    pub fn with_meta(mut self, meta: Meta) -> Self {
        self.meta = meta;
        self
    }

    /// A failed text output.
    pub fn error(call_id: impl Into<CallId>, text: impl Into<String>) -> Self {
        ToolOutput {
            is_error: true,
            ..Self::text(call_id, text)
        }
    }

    /// Why this output cannot be represented, if it cannot: an image whose media type is not
    /// `image/*` or whose data is not valid base64, or content larger than `max_bytes`.
    pub fn unrepresentable(&self, max_bytes: usize) -> Option<String> {
        let mut total: usize = 0;
        for (index, block) in self.content.iter().enumerate() {
            if let ContentBlock::Image { data, mime_type } = block {
                if !mime_type.starts_with("image/") || mime_type.len() <= "image/".len() {
                    return Some(format!(
                        "content[{index}] has media type {mime_type:?}, not an image type"
                    ));
                }
                if !is_base64(data) {
                    return Some(format!("content[{index}] image data is not valid base64"));
                }
            }
            total = total.saturating_add(block.byte_len());
        }
        if total > max_bytes {
            return Some(format!(
                "content is {total} bytes, over the configured limit of {max_bytes} bytes"
            ));
        }
        None
    }

    /// The result message this output becomes for `call` (its `meta` included).
    pub fn into_result(self, tool_name: impl Into<ToolName>) -> ToolResultMessage {
        ToolResultMessage {
            call_id: self.call_id,
            tool_name: tool_name.into(),
            content: self.content,
            is_error: self.is_error,
            details: self.details,
            outcome: ResultOutcome::Executed,
            id: None,
            meta: self.meta,
        }
    }

    /// The result message this output becomes for `call` when it cannot be represented
    /// ([`unrepresentable`](Self::unrepresentable) said `why`): a `malformed` error result that
    /// keeps the output's `meta` (host data about the call) and nothing else of it.
    pub fn into_malformed(self, call: &ToolCall, why: &str) -> ToolResultMessage {
        ToolResultMessage {
            meta: self.meta,
            ..ToolResultMessage::malformed(call, why)
        }
    }
}

/// Standard base64 with padding; empty data is not an image.
fn is_base64(data: &str) -> bool {
    let bytes = data.as_bytes();
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return false;
    }
    let padding = bytes.iter().rev().take_while(|&&b| b == b'=').count();
    if padding > 2 {
        return false;
    }
    let body = &bytes[..bytes.len() - padding];
    body.iter()
        .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_use_the_wire_shape() {
        let user = Message::user("hi");
        assert_eq!(
            serde_json::to_value(&user).unwrap(),
            json!({"role":"user","content":[{"type":"text","text":"hi"}]})
        );
        let result = Message::from(ToolResultMessage::synthetic(
            CallId::new("c1"),
            "echo",
            ResultOutcome::Skipped,
            "x",
        ));
        assert_eq!(
            serde_json::to_value(&result).unwrap(),
            json!({"role":"tool_result","call_id":"c1","tool_name":"echo",
                   "content":[{"type":"text","text":"x"}],"is_error":true,"outcome":"skipped"})
        );
    }

    #[test]
    fn a_tool_call_in_a_user_message_is_rejected() {
        let bad = json!({"role":"user","content":[{"type":"tool_call","id":"c","name":"n","arguments":{}}]});
        assert!(serde_json::from_value::<Message>(bad).is_err());
        let unknown = json!({"role":"user","content":[],"extra":1});
        assert!(serde_json::from_value::<Message>(unknown).is_err());
    }

    #[test]
    fn assistant_shape_checks_call_ids() {
        let dup = AssistantMessage::new(
            vec![
                AssistantBlock::tool_call("a", "t", json!({})),
                AssistantBlock::tool_call("a", "t", json!({})),
            ],
            StopReason::ToolUse,
        );
        assert!(dup.check_shape().unwrap_err().contains("twice"));
        let empty = AssistantMessage::new(
            vec![AssistantBlock::tool_call("", "t", json!({}))],
            StopReason::ToolUse,
        );
        assert!(empty.check_shape().is_err());
    }

    #[test]
    fn unrepresentable_outputs_are_detected() {
        let ok = ToolOutput {
            call_id: "c".into(),
            content: vec![ContentBlock::Image {
                data: "aGk=".into(),
                mime_type: "image/png".into(),
            }],
            is_error: false,
            details: None,
            meta: Meta::new(),
        };
        assert_eq!(ok.unrepresentable(100), None);
        let bad_data = ToolOutput {
            content: vec![ContentBlock::Image {
                data: "not base64!".into(),
                mime_type: "image/png".into(),
            }],
            ..ok.clone()
        };
        assert!(bad_data.unrepresentable(100).is_some());
        let bad_mime = ToolOutput {
            content: vec![ContentBlock::Image {
                data: "aGk=".into(),
                mime_type: "text/plain".into(),
            }],
            ..ok.clone()
        };
        assert!(bad_mime.unrepresentable(100).is_some());
        assert!(
            ToolOutput::text("c", "x".repeat(11))
                .unrepresentable(10)
                .is_some()
        );
        assert!(
            ToolOutput::text("c", "x".repeat(10))
                .unrepresentable(10)
                .is_none()
        );
    }
}
