//! Anthropic Messages API (`POST /v1/messages`).
//!
//! Request: the system prompt and the context's system messages become `system` (text
//! blocks); user, assistant and tool-result messages become `messages`, with consecutive tool
//! results in one user message (`tool_result` blocks, `is_error` when set); tools become
//! `{name, description, input_schema}`. Thinking is sent back with its signature and redacted
//! thinking with its data, to the same model only; thinking without a signature cannot be sent
//! (the API requires it) and is left out. A text block that is empty or only whitespace is
//! never sent, in any message (the API refuses it with 400); a user message left with nothing
//! is left out (and said so in `left_out`), and a tool result with no output is sent as a
//! `tool_result` without `content` (the API's empty result).
//!
//! Response: `message_start`, `content_block_start/delta/stop` (text, thinking with
//! `signature_delta`, redacted thinking, tool use with `input_json_delta`), `message_delta`
//! (stop reason, usage), `message_stop` (terminal), `ping` (ignored), `error` (a failure).
//!
//! | `stop_reason` | `stop_reason` in runcore |
//! |---|---|
//! | `end_turn`, `stop_sequence`, `pause_turn`, `refusal` | `stop` |
//! | `tool_use` | `tool_use` |
//! | `max_tokens`, `model_context_window_exceeded` | `length` |

use std::collections::BTreeMap;
use std::sync::Arc;

use runcore::{AssistantBlock, AssistantMessage, ContentBlock, Message, Meta, StopReason, Usage};
use serde_json::{Map, Value, json};

use crate::decode::{BodyError, Deltas, EventOutcome, Protocol, StreamDecoder};
use crate::encode::{
    LeftOut, check_model, codec_meta, empty_schema, merge_extra, paired_calls, same_source,
};
use crate::failure::{Failure, envelope};
use crate::wire::{count, nested_count, parse_arguments, text};
use crate::{Api, CallModelContext, EncodeError, Encoded, Options};

/// The output token limit when [`Options::max_tokens`] is not set (the API requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The decoder of a Messages response: see [`StreamDecoder`].
pub type Decoder = StreamDecoder<Messages>;

/// Encodes `context` as a Messages request body.
pub fn encode(context: &CallModelContext, options: &Options) -> Result<Encoded, EncodeError> {
    check_model(options)?;
    let mut left_out = Vec::new();
    let paired = paired_calls(&context.messages, &mut left_out);
    let mut system: Vec<Value> = Vec::new();
    if let Some(prompt) = context.system_prompt.as_deref().filter(|p| !blank(p)) {
        system.push(json!({"type": "text", "text": prompt}));
    }
    let mut messages: Vec<Value> = Vec::new();
    // The tool results waiting to be sent as one user message.
    let mut results: Vec<Value> = Vec::new();
    for (index, message) in context.messages.iter().enumerate() {
        if !matches!(message, Message::ToolResult(_)) && !results.is_empty() {
            messages.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
        }
        match message {
            Message::System(system_message) => {
                for (block, content) in system_message.content.iter().enumerate() {
                    match content {
                        // The API refuses empty text blocks.
                        ContentBlock::Text { text, .. } if blank(text) => {}
                        ContentBlock::Text { text, .. } => {
                            system.push(json!({"type": "text", "text": text}));
                        }
                        ContentBlock::Image { .. } => left_out.push(LeftOut {
                            message: index,
                            block: Some(block),
                            what: "image",
                            reason: "the system field holds text only".into(),
                        }),
                    }
                }
            }
            Message::User(user) => {
                let content: Vec<Value> = user.content.iter().filter_map(user_block).collect();
                if content.is_empty() {
                    left_out.push(LeftOut {
                        message: index,
                        block: None,
                        what: "message",
                        reason: "a user message with nothing to send (the API refuses empty \
                                 content)"
                            .into(),
                    });
                } else {
                    messages.push(json!({"role": "user", "content": content}));
                }
            }
            Message::Assistant(assistant) => {
                let same = same_source(assistant, Api::Anthropic, &options.model);
                let content = assistant_content(assistant, index, same, &paired, &mut left_out);
                if content.is_empty() {
                    left_out.push(LeftOut {
                        message: index,
                        block: None,
                        what: "message",
                        reason: "an assistant message with nothing to send (the API refuses \
                                 empty content)"
                            .into(),
                    });
                } else {
                    messages.push(json!({"role": "assistant", "content": content}));
                }
            }
            Message::ToolResult(result) => {
                if paired.contains(result.call_id.as_str()) {
                    let content: Vec<Value> =
                        result.content.iter().filter_map(user_block).collect();
                    let mut block = Map::new();
                    block.insert("type".into(), Value::from("tool_result"));
                    block.insert("tool_use_id".into(), Value::from(result.call_id.as_str()));
                    // A result with no output is sent without `content` (the API's empty
                    // result): an empty text block would be refused.
                    if !content.is_empty() {
                        block.insert("content".into(), Value::Array(content));
                    }
                    if result.is_error {
                        block.insert("is_error".into(), Value::Bool(true));
                    }
                    results.push(Value::Object(block));
                }
            }
        }
    }
    if !results.is_empty() {
        messages.push(json!({"role": "user", "content": results}));
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::from(options.model.as_str()));
    body.insert(
        "max_tokens".into(),
        Value::from(options.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !context.tools.is_empty() {
        let tools = context
            .tools
            .iter()
            .map(|tool| {
                let mut definition = Map::new();
                definition.insert("name".into(), Value::from(tool.name.as_ref()));
                if let Some(description) = &tool.description {
                    definition.insert("description".into(), Value::from(description.as_ref()));
                }
                definition.insert(
                    "input_schema".into(),
                    tool.parameters
                        .as_deref()
                        .cloned()
                        .unwrap_or_else(empty_schema),
                );
                Value::Object(definition)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &options.tool_choice {
            body.insert("tool_choice".into(), choice.clone());
        }
    }
    if let Some(thinking) = &options.reasoning {
        body.insert("thinking".into(), thinking.clone());
    }
    if options.stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    merge_extra(&mut body, &options.extra, &["messages"])?;
    Ok(Encoded {
        body: Value::Object(body),
        left_out,
    })
}

/// Whether a text is empty or only whitespace: the API refuses such a text block with 400
/// ("text content blocks must contain non-whitespace text").
fn blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// A user or tool-result block as the API's block; `None` for a blank text (never sent).
fn user_block(block: &ContentBlock) -> Option<Value> {
    match block {
        ContentBlock::Text { text, .. } if blank(text) => None,
        ContentBlock::Text { text, .. } => Some(json!({"type": "text", "text": text})),
        ContentBlock::Image {
            data, mime_type, ..
        } => Some(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": mime_type, "data": data},
        })),
    }
}

fn assistant_content(
    message: &AssistantMessage,
    index: usize,
    same: bool,
    paired: &std::collections::BTreeSet<String>,
    left_out: &mut Vec<LeftOut>,
) -> Vec<Value> {
    let mut content = Vec::new();
    for (block, part) in message.content.iter().enumerate() {
        match part {
            AssistantBlock::Text { text, .. } => {
                // The API refuses empty text blocks.
                if !blank(text) {
                    content.push(json!({"type": "text", "text": text}));
                }
            }
            AssistantBlock::Thinking {
                thinking,
                signature,
                ..
            } => match signature {
                Some(signature) if same => content.push(json!({
                    "type": "thinking", "thinking": thinking, "signature": signature,
                })),
                Some(_) => left_out.push(LeftOut {
                    message: index,
                    block: Some(block),
                    what: "thinking",
                    reason: "signed thinking from another API or model".into(),
                }),
                None => left_out.push(LeftOut {
                    message: index,
                    block: Some(block),
                    what: "thinking",
                    reason: "thinking without a signature cannot be sent back".into(),
                }),
            },
            AssistantBlock::RedactedThinking { data, .. } => {
                if same {
                    content.push(json!({"type": "redacted_thinking", "data": data}));
                } else {
                    left_out.push(LeftOut {
                        message: index,
                        block: Some(block),
                        what: "redacted_thinking",
                        reason: "redacted thinking from another API or model".into(),
                    });
                }
            }
            AssistantBlock::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                if !paired.contains(id.as_str()) {
                    continue;
                }
                let input = match arguments.as_ref() {
                    Value::Object(_) => Value::clone(arguments),
                    _ => {
                        left_out.push(LeftOut {
                            message: index,
                            block: Some(block),
                            what: "arguments",
                            reason: "the call's arguments were not a JSON object; sent as {}"
                                .into(),
                        });
                        Value::Object(Map::new())
                    }
                };
                content.push(json!({
                    "type": "tool_use", "id": id.as_str(), "name": name.as_str(), "input": input,
                }));
            }
        }
    }
    content
}

/// One content block being streamed.
#[derive(Debug)]
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        start: Value,
    },
    /// A block type runcore has no block for (server tools, …): not kept.
    Other,
}

/// The Messages protocol state. Use it through [`Decoder`].
#[derive(Debug, Default)]
pub struct Messages {
    id: Option<String>,
    model: Option<String>,
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    usage: Option<Value>,
    delta_usage: Option<Value>,
}

impl Messages {
    fn block_start(&mut self, index: u64, block: &Value) -> EventOutcome {
        let kind = text(block, "type").unwrap_or_default();
        let state = match kind {
            "text" => Block::Text(text(block, "text").unwrap_or_default().to_owned()),
            "thinking" => Block::Thinking {
                thinking: text(block, "thinking").unwrap_or_default().to_owned(),
                signature: text(block, "signature").unwrap_or_default().to_owned(),
            },
            "redacted_thinking" => {
                Block::Redacted(text(block, "data").unwrap_or_default().to_owned())
            }
            "tool_use" => Block::ToolUse {
                id: text(block, "id").unwrap_or_default().to_owned(),
                name: text(block, "name").unwrap_or_default().to_owned(),
                json: String::new(),
                start: block.get("input").cloned().unwrap_or(Value::Null),
            },
            _ => Block::Other,
        };
        let outcome = if matches!(state, Block::Other) {
            EventOutcome::Ignored
        } else {
            EventOutcome::Used
        };
        self.blocks.insert(index, state);
        outcome
    }

    /// A `content_block_delta` read into [`DeltaEvent`].
    fn typed_delta(&mut self, event: DeltaEvent<'_>, deltas: &mut Deltas) -> EventOutcome {
        let delta = &event.delta;
        let fields = DeltaFields {
            kind: &delta.kind,
            text: borrowed(&delta.text),
            thinking: borrowed(&delta.thinking),
            signature: borrowed(&delta.signature),
            partial_json: borrowed(&delta.partial_json),
        };
        self.block_delta(event.index, &fields, deltas)
    }

    fn block_delta(
        &mut self,
        index: u64,
        delta: &DeltaFields<'_>,
        deltas: &mut Deltas,
    ) -> EventOutcome {
        let kind = delta.kind;
        let block = self.blocks.entry(index).or_insert_with(|| match kind {
            "thinking_delta" | "signature_delta" => Block::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
            "input_json_delta" => Block::ToolUse {
                id: String::new(),
                name: String::new(),
                json: String::new(),
                start: Value::Null,
            },
            "text_delta" => Block::Text(String::new()),
            _ => Block::Other,
        });
        match (kind, block) {
            ("text_delta", Block::Text(text)) => {
                text.push_str(delta.text);
                deltas.text(delta.text);
            }
            ("thinking_delta", Block::Thinking { thinking, .. }) => {
                thinking.push_str(delta.thinking);
                deltas.thinking(delta.thinking);
            }
            ("signature_delta", Block::Thinking { signature, .. }) => {
                signature.push_str(delta.signature);
            }
            ("input_json_delta", Block::ToolUse { json, .. }) => {
                json.push_str(delta.partial_json);
            }
            _ => return EventOutcome::Ignored,
        }
        EventOutcome::Used
    }

    fn message_fields(&mut self, message: &Value) {
        if let Some(id) = text(message, "id") {
            self.id = Some(id.to_owned());
        }
        if let Some(model) = text(message, "model") {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = message.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        if let Some(reason) = text(message, "stop_reason") {
            self.stop_reason = Some(reason.to_owned());
        }
    }

    fn build(&mut self) -> AssistantMessage {
        let blocks = std::mem::take(&mut self.blocks);
        let content = blocks
            .into_values()
            .filter_map(|block| match block {
                Block::Text(text) => Some(AssistantBlock::Text {
                    text,
                    meta: Meta::new(),
                }),
                Block::Thinking {
                    thinking,
                    signature,
                } => Some(AssistantBlock::Thinking {
                    thinking,
                    signature: (!signature.is_empty()).then_some(signature),
                    meta: Meta::new(),
                }),
                Block::Redacted(data) => Some(AssistantBlock::RedactedThinking {
                    data,
                    meta: Meta::new(),
                }),
                Block::ToolUse {
                    id,
                    name,
                    json,
                    start,
                } => {
                    let arguments = if json.is_empty() && start.is_object() {
                        start
                    } else {
                        parse_arguments(&json)
                    };
                    Some(AssistantBlock::ToolCall {
                        id: id.into(),
                        name: name.into(),
                        arguments: Arc::new(arguments),
                        meta: Meta::new(),
                    })
                }
                Block::Other => None,
            })
            .collect();
        let mut message = AssistantMessage::new(content, stop_reason(self.stop_reason.as_deref()));
        message.usage = usage(self.usage.as_ref(), self.delta_usage.as_ref());
        message.model = self.model.take();
        message.response_id = self.id.take();
        message.provider_stop_reason = self.stop_reason.take();
        message.meta = codec_meta(Api::Anthropic);
        message
    }
}

/// A field of a borrowed delta, empty when absent.
fn borrowed<'a>(field: &'a Option<std::borrow::Cow<'_, str>>) -> &'a str {
    field.as_deref().unwrap_or_default()
}

/// The fields of a `content_block_delta`'s `delta` (empty when absent), from either path.
struct DeltaFields<'a> {
    kind: &'a str,
    text: &'a str,
    thinking: &'a str,
    signature: &'a str,
    partial_json: &'a str,
}

/// A `content_block_delta` event as it arrives, borrowed from the data line where it can be.
#[derive(serde::Deserialize)]
struct DeltaEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    index: u64,
    #[serde(borrow)]
    delta: DeltaBody<'a>,
}

/// The `delta` of a `content_block_delta`.
#[derive(serde::Deserialize)]
struct DeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    signature: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<std::borrow::Cow<'a, str>>,
}

/// The normative stop-reason table (SPEC §13). No stop reason, or one this codec does not
/// know, is a `stop`: the answer did end with `message_stop`.
pub fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens" | "model_context_window_exceeded") => StopReason::Length,
        _ => StopReason::Stop,
    }
}

/// Usage: `input_tokens` counts every prompt token (`input_tokens + cache_creation_input_tokens
/// + cache_read_input_tokens`); `message_delta`'s counts (cumulative) replace `message_start`'s.
fn usage(start: Option<&Value>, delta: Option<&Value>) -> Option<Usage> {
    if start.is_none() && delta.is_none() {
        return None;
    }
    let read = |key: &str| {
        delta
            .and_then(|d| count(d, key))
            .or_else(|| start.and_then(|s| count(s, key)))
    };
    let thinking = delta
        .and_then(|d| nested_count(d, "output_tokens_details", "thinking_tokens"))
        .or_else(|| {
            start.and_then(|s| nested_count(s, "output_tokens_details", "thinking_tokens"))
        });
    let cache_write = read("cache_creation_input_tokens");
    let cache_read = read("cache_read_input_tokens");
    Some(Usage {
        input_tokens: read("input_tokens")
            .unwrap_or(0)
            .saturating_add(cache_write.unwrap_or(0))
            .saturating_add(cache_read.unwrap_or(0)),
        output_tokens: read("output_tokens").unwrap_or(0),
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        reasoning_tokens: thinking,
    })
}

impl Protocol for Messages {
    const API: Api = Api::Anthropic;

    fn event(&mut self, name: Option<&str>, data: &str, deltas: &mut Deltas) -> EventOutcome {
        // Most of a stream is `content_block_delta` events: read them into a borrowed shape
        // (no `Value` tree); anything that does not fit takes the general path below.
        if name == Some("content_block_delta")
            && let Ok(event) = serde_json::from_str::<DeltaEvent<'_>>(data)
            && event.kind == "content_block_delta"
        {
            return self.typed_delta(event, deltas);
        }
        let Ok(value) = serde_json::from_str::<Value>(data) else {
            return EventOutcome::NotFormat(format!(
                "expected JSON in the data of an Anthropic event, found {:?}",
                data.chars().take(40).collect::<String>()
            ));
        };
        let kind = text(&value, "type").or(name).unwrap_or_default();
        let index = count(&value, "index").unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(message) = value.get("message") {
                    self.message_fields(message);
                }
                EventOutcome::Used
            }
            "content_block_start" => match value.get("content_block") {
                Some(block) => self.block_start(index, block),
                None => EventOutcome::Ignored,
            },
            "content_block_delta" => match value.get("delta") {
                Some(delta) => {
                    let field = |key| text(delta, key).unwrap_or_default();
                    let fields = DeltaFields {
                        kind: field("type"),
                        text: field("text"),
                        thinking: field("thinking"),
                        signature: field("signature"),
                        partial_json: field("partial_json"),
                    };
                    self.block_delta(index, &fields, deltas)
                }
                None => EventOutcome::Ignored,
            },
            "content_block_stop" => EventOutcome::Used,
            "message_delta" => {
                if let Some(reason) = value.get("delta").and_then(|d| text(d, "stop_reason")) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
                    self.delta_usage = Some(usage.clone());
                }
                EventOutcome::Used
            }
            "message_stop" => EventOutcome::Terminal,
            "error" => {
                let (kind, code, message) = envelope(&value).unwrap_or((None, None, None));
                EventOutcome::Failed(Failure::in_stream(kind, code, message))
            }
            _ => EventOutcome::Ignored,
        }
    }

    fn body(&mut self, body: &Value) -> Result<AssistantMessage, BodyError> {
        if let Some((kind, code, message)) = envelope(body) {
            return Err(BodyError::Failed(Failure::in_stream(kind, code, message)));
        }
        let Some(content) = body.get("content").and_then(Value::as_array) else {
            return Err(BodyError::NotFormat(
                "expected an Anthropic message object with a content array".into(),
            ));
        };
        self.message_fields(body);
        for (index, block) in (0u64..).zip(content) {
            self.block_start(index, block);
            if let Block::ToolUse { start, .. } = self.blocks.get(&index).unwrap_or(&Block::Other)
                && !start.is_object()
                && let Some(Block::ToolUse { json, .. }) = self.blocks.get_mut(&index)
            {
                // A non-object input is kept as its text, like a stream's.
                *json = block.get("input").map(Value::to_string).unwrap_or_default();
            }
        }
        Ok(self.build())
    }

    fn answer(&mut self) -> AssistantMessage {
        self.build()
    }
}
