//! OpenAI Chat Completions (`POST /v1/chat/completions`).
//!
//! Request: the system prompt and the context's system messages become `system` messages (in
//! place); a user message with one text block is sent as a string, else as parts (`text`,
//! `image_url` with a data URL); an assistant message is its text parts and `tool_calls`
//! (arguments as JSON text); each tool result is its own `tool` message (text only). The API
//! has no field for reasoning, so thinking is never sent back (left out). An empty text part is
//! never sent, and a user message left with nothing is left out (never `"content": []`); a tool
//! with no output is a `tool` message with `"content": ""` (the API's empty result).
//!
//! Response: `chat.completion.chunk` events (`choices[0].delta`: `content`, `tool_calls` by
//! `index`, `refusal`, and the `reasoning_content` some compatible servers send), `finish_reason`
//! and `[DONE]` (either ends a complete answer), a usage chunk; or a `chat.completion` body.
//! A refusal is its own text block, after the answer's text, marked `meta.refusal = true`
//! (its deltas are text deltas).
//! Choices other than index 0 are ignored.
//!
//! | `finish_reason` | `stop_reason` |
//! |---|---|
//! | `stop`, `content_filter` | `stop` |
//! | `tool_calls`, `function_call` | `tool_use` |
//! | `length` | `length` |

use std::collections::BTreeMap;
use std::sync::Arc;

use runcore::{AssistantBlock, AssistantMessage, ContentBlock, Message, Meta, StopReason, Usage};
use serde_json::{Map, Value, json};

use crate::decode::{BodyError, Deltas, EventOutcome, Protocol, StreamDecoder};
use crate::encode::{
    LeftOut, arguments_text, check_model, codec_meta, data_url, empty_schema, merge_extra,
    paired_calls,
};
use crate::failure::{Failure, envelope};
use crate::wire::{count, nested_count, parse_arguments, text};
use crate::{Api, CallModelContext, EncodeError, Encoded, Options};

/// The `meta` key set to `true` on the text block that holds a Chat refusal (SPEC §13).
pub const REFUSAL_META_KEY: &str = "refusal";

/// The decoder of a Chat Completions response: see [`StreamDecoder`].
pub type Decoder = StreamDecoder<ChatCompletions>;

/// Encodes `context` as a Chat Completions request body.
pub fn encode(context: &CallModelContext, options: &Options) -> Result<Encoded, EncodeError> {
    check_model(options)?;
    let mut left_out = Vec::new();
    let paired = paired_calls(&context.messages, &mut left_out);
    let mut messages: Vec<Value> = Vec::new();
    if let Some(prompt) = context.system_prompt.as_deref().filter(|p| !p.is_empty()) {
        messages.push(json!({"role": "system", "content": [{"type": "text", "text": prompt}]}));
    }
    for (index, message) in context.messages.iter().enumerate() {
        match message {
            Message::System(system) => {
                let mut parts = Vec::new();
                for (block, content) in system.content.iter().enumerate() {
                    match content {
                        ContentBlock::Text { text, .. } if text.is_empty() => {}
                        ContentBlock::Text { text, .. } => {
                            parts.push(json!({"type": "text", "text": text}));
                        }
                        ContentBlock::Image { .. } => left_out.push(LeftOut {
                            message: index,
                            block: Some(block),
                            what: "image",
                            reason: "system messages hold text only".into(),
                        }),
                    }
                }
                if !parts.is_empty() {
                    messages.push(json!({"role": "system", "content": parts}));
                }
            }
            Message::User(user) => {
                // Empty text parts are not sent; a message left with nothing is left out
                // (never `"content": []`).
                let blocks: Vec<&ContentBlock> = user
                    .content
                    .iter()
                    .filter(|block| !is_empty_text(block))
                    .collect();
                let content = match blocks.as_slice() {
                    [] => {
                        left_out.push(LeftOut {
                            message: index,
                            block: None,
                            what: "message",
                            reason: "a user message with nothing to send".into(),
                        });
                        continue;
                    }
                    [ContentBlock::Text { text, .. }] => Value::from(text.as_str()),
                    blocks => Value::Array(
                        blocks
                            .iter()
                            .map(|block| match block {
                                ContentBlock::Text { text, .. } => {
                                    json!({"type": "text", "text": text})
                                }
                                ContentBlock::Image {
                                    data, mime_type, ..
                                } => json!({
                                    "type": "image_url",
                                    "image_url": {"url": data_url(mime_type, data)},
                                }),
                            })
                            .collect(),
                    ),
                };
                messages.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(assistant) => {
                let mut parts = Vec::new();
                let mut calls = Vec::new();
                for (block, content) in assistant.content.iter().enumerate() {
                    match content {
                        AssistantBlock::Text { text, .. } => {
                            if !text.is_empty() {
                                parts.push(json!({"type": "text", "text": text}));
                            }
                        }
                        AssistantBlock::Thinking { .. }
                        | AssistantBlock::RedactedThinking { .. } => {
                            left_out.push(LeftOut {
                                message: index,
                                block: Some(block),
                                what: "thinking",
                                reason: "Chat Completions has no field for reasoning".into(),
                            });
                        }
                        AssistantBlock::ToolCall {
                            id,
                            name,
                            arguments,
                            ..
                        } => {
                            if paired.contains(id.as_str()) {
                                calls.push(json!({
                                    "id": id.as_str(),
                                    "type": "function",
                                    "function": {
                                        "name": name.as_str(),
                                        "arguments": arguments_text(arguments),
                                    },
                                }));
                            }
                        }
                    }
                }
                if parts.is_empty() && calls.is_empty() {
                    left_out.push(LeftOut {
                        message: index,
                        block: None,
                        what: "message",
                        reason: "an assistant message with nothing to send".into(),
                    });
                    continue;
                }
                let mut entry = Map::new();
                entry.insert("role".into(), Value::from("assistant"));
                if !parts.is_empty() {
                    entry.insert("content".into(), Value::Array(parts));
                }
                if !calls.is_empty() {
                    entry.insert("tool_calls".into(), Value::Array(calls));
                }
                messages.push(Value::Object(entry));
            }
            Message::ToolResult(result) => {
                if !paired.contains(result.call_id.as_str()) {
                    continue;
                }
                let mut text = String::new();
                for (block, content) in result.content.iter().enumerate() {
                    match content {
                        ContentBlock::Text { text: piece, .. } => {
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(piece);
                        }
                        ContentBlock::Image { .. } => left_out.push(LeftOut {
                            message: index,
                            block: Some(block),
                            what: "image",
                            reason: "tool messages hold text only".into(),
                        }),
                    }
                }
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": result.call_id.as_str(),
                    "content": text,
                }));
            }
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::from(options.model.as_str()));
    body.insert("messages".into(), Value::Array(messages));
    if let Some(max) = options.max_tokens {
        body.insert("max_completion_tokens".into(), Value::from(max));
    }
    if !context.tools.is_empty() {
        let tools = context
            .tools
            .iter()
            .map(|tool| {
                let mut function = Map::new();
                function.insert("name".into(), Value::from(tool.name.as_ref()));
                if let Some(description) = &tool.description {
                    function.insert("description".into(), Value::from(description.as_ref()));
                }
                function.insert(
                    "parameters".into(),
                    tool.parameters
                        .as_deref()
                        .cloned()
                        .unwrap_or_else(empty_schema),
                );
                json!({"type": "function", "function": function})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &options.tool_choice {
            body.insert("tool_choice".into(), choice.clone());
        }
    }
    if let Some(effort) = &options.reasoning {
        body.insert("reasoning_effort".into(), effort.clone());
    }
    if options.stream {
        body.insert("stream".into(), Value::Bool(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    merge_extra(&mut body, &options.extra, &["messages"])?;
    Ok(Encoded {
        body: Value::Object(body),
        left_out,
    })
}

/// Whether a block is a text with nothing in it (never sent).
fn is_empty_text(block: &ContentBlock) -> bool {
    matches!(block, ContentBlock::Text { text, .. } if text.is_empty())
}

/// One tool call being streamed, by its `index`.
#[derive(Debug, Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// The Chat Completions protocol state. Use it through [`Decoder`].
#[derive(Debug, Default)]
pub struct ChatCompletions {
    id: Option<String>,
    model: Option<String>,
    text: String,
    /// The model's refusal (`refusal`), kept apart from `text`.
    refusal: String,
    reasoning: String,
    calls: BTreeMap<u64, Call>,
    finish_reason: Option<String>,
    usage: Option<Value>,
}

impl ChatCompletions {
    fn top_fields(&mut self, value: &Value) {
        if let Some(id) = text(value, "id") {
            self.id = Some(id.to_owned());
        }
        if let Some(model) = text(value, "model") {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
    }

    fn build(&mut self) -> AssistantMessage {
        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(AssistantBlock::Thinking {
                thinking: std::mem::take(&mut self.reasoning),
                signature: None,
                meta: Meta::new(),
            });
        }
        if !self.text.is_empty() {
            content.push(AssistantBlock::Text {
                text: std::mem::take(&mut self.text),
                meta: Meta::new(),
            });
        }
        if !self.refusal.is_empty() {
            let mut meta = Meta::new();
            meta.insert(REFUSAL_META_KEY, Value::Bool(true));
            content.push(AssistantBlock::Text {
                text: std::mem::take(&mut self.refusal),
                meta,
            });
        }
        for call in std::mem::take(&mut self.calls).into_values() {
            content.push(AssistantBlock::ToolCall {
                id: call.id.into(),
                name: call.name.into(),
                arguments: Arc::new(parse_arguments(&call.arguments)),
                meta: Meta::new(),
            });
        }
        let mut message =
            AssistantMessage::new(content, stop_reason(self.finish_reason.as_deref()));
        message.usage = self.usage.as_ref().map(usage);
        message.model = self.model.take();
        message.response_id = self.id.take();
        message.provider_stop_reason = self.finish_reason.take();
        message.meta = codec_meta(Api::OpenAiChat);
        message
    }
}

/// The normative stop-reason table (SPEC §13); an unknown reason is a `stop`.
pub fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::Length,
        _ => StopReason::Stop,
    }
}

/// `prompt_tokens` (cached included) with `cached_tokens` and `reasoning_tokens`.
fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: count(usage, "prompt_tokens").unwrap_or(0),
        output_tokens: count(usage, "completion_tokens").unwrap_or(0),
        cache_read_tokens: nested_count(usage, "prompt_tokens_details", "cached_tokens"),
        cache_write_tokens: None,
        reasoning_tokens: nested_count(usage, "completion_tokens_details", "reasoning_tokens"),
    }
}

/// The choice with index 0 (a missing index counts as 0).
fn first_choice(value: &Value) -> Option<&Value> {
    value
        .get("choices")?
        .as_array()?
        .iter()
        .find(|choice| count(choice, "index").unwrap_or(0) == 0)
}

impl Protocol for ChatCompletions {
    const API: Api = Api::OpenAiChat;

    fn event(&mut self, _name: Option<&str>, data: &str, deltas: &mut Deltas) -> EventOutcome {
        if data.trim() == "[DONE]" {
            return EventOutcome::Terminal;
        }
        let Ok(value) = serde_json::from_str::<Value>(data) else {
            return EventOutcome::NotFormat(format!(
                "expected JSON or [DONE] in the data of a Chat Completions event, found {:?}",
                data.chars().take(40).collect::<String>()
            ));
        };
        if let Some((kind, code, message)) = envelope(&value) {
            return EventOutcome::Failed(Failure::in_stream(kind, code, message));
        }
        if value.get("choices").is_none() {
            return EventOutcome::Ignored;
        }
        self.top_fields(&value);
        let Some(choice) = first_choice(&value) else {
            // The usage chunk has no choices.
            return EventOutcome::Used;
        };
        if let Some(delta) = choice.get("delta") {
            if let Some(piece) = text(delta, "content") {
                self.text.push_str(piece);
                deltas.text(piece);
            }
            if let Some(piece) = text(delta, "refusal") {
                self.refusal.push_str(piece);
                deltas.text(piece);
            }
            for key in ["reasoning_content", "reasoning"] {
                if let Some(piece) = text(delta, key) {
                    self.reasoning.push_str(piece);
                    deltas.thinking(piece);
                }
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let index = count(call, "index").unwrap_or(0);
                let entry = self.calls.entry(index).or_default();
                if let Some(id) = text(call, "id") {
                    entry.id.push_str(id);
                }
                if let Some(function) = call.get("function") {
                    if let Some(name) = text(function, "name") {
                        entry.name.push_str(name);
                    }
                    if let Some(arguments) = text(function, "arguments") {
                        entry.arguments.push_str(arguments);
                    }
                }
            }
        }
        if let Some(reason) = text(choice, "finish_reason") {
            self.finish_reason = Some(reason.to_owned());
        }
        EventOutcome::Used
    }

    fn body(&mut self, body: &Value) -> Result<AssistantMessage, BodyError> {
        if let Some((kind, code, message)) = envelope(body) {
            return Err(BodyError::Failed(Failure::in_stream(kind, code, message)));
        }
        let Some(choice) = first_choice(body) else {
            return Err(BodyError::NotFormat(
                "expected a chat.completion object with choices".into(),
            ));
        };
        self.top_fields(body);
        let message = choice.get("message").unwrap_or(&Value::Null);
        if let Some(piece) = text(message, "content") {
            self.text.push_str(piece);
        }
        if let Some(piece) = text(message, "refusal") {
            self.refusal.push_str(piece);
        }
        for key in ["reasoning_content", "reasoning"] {
            if let Some(piece) = text(message, key) {
                self.reasoning.push_str(piece);
            }
        }
        for (index, call) in (0u64..).zip(
            message
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        ) {
            let function = call.get("function").unwrap_or(&Value::Null);
            self.calls.insert(
                index,
                Call {
                    id: text(call, "id").unwrap_or_default().to_owned(),
                    name: text(function, "name").unwrap_or_default().to_owned(),
                    arguments: text(function, "arguments").unwrap_or_default().to_owned(),
                },
            );
        }
        self.finish_reason = text(choice, "finish_reason").map(str::to_owned);
        Ok(self.build())
    }

    fn answer(&mut self) -> AssistantMessage {
        self.build()
    }

    fn complete(&self) -> bool {
        self.finish_reason.is_some()
    }
}
