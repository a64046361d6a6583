//! OpenAI Responses (`POST /v1/responses`).
//!
//! Request: the system prompt becomes `instructions`; the context's system messages become
//! `system` message items in place; user messages `message` items (`input_text`,
//! `input_image` with `detail: "auto"`; an empty text is not sent, a message left with nothing
//! is left out); an assistant message becomes, block by block in order, its reasoning items
//! (sent back whole, to the same model only), `message` items (`output_text`) and
//! `function_call` items (with their `fc_…` ids to the same model only, so a function call is
//! never sent without the reasoning item it followed); each tool result a
//! `function_call_output` item (an empty `output` for a tool with no output). Tools are
//! `{type: "function", name, description, parameters, strict: false}`. With a reasoning setting the body asks for
//! `include: ["reasoning.encrypted_content"]`, so reasoning can be sent back statelessly.
//!
//! Response: `response.created`, `response.output_item.added/done`, `…output_text.delta`,
//! `…reasoning_summary_text.delta` and `…reasoning_text.delta` (thinking deltas),
//! `…function_call_arguments.delta/done` (accumulated by item id), then
//! `response.completed` or `response.incomplete` (terminal; its `output`, when not empty, is
//! the answer), `response.failed` and `error` (failures).
//!
//! | terminal | `stop_reason` |
//! |---|---|
//! | completed, with function calls | `tool_use` |
//! | completed, without | `stop` |
//! | incomplete: `max_output_tokens` (or another reason) | `length` |
//! | incomplete: `content_filter` | `stop` |

use std::collections::BTreeMap;
use std::sync::Arc;

use runcore::{AssistantBlock, AssistantMessage, ContentBlock, Message, Meta, StopReason, Usage};
use serde_json::{Map, Value, json};

use crate::decode::{BodyError, Deltas, EventOutcome, Protocol, StreamDecoder};
use crate::encode::{
    LeftOut, arguments_text, check_model, codec_meta, data_url, empty_schema, merge_extra,
    paired_calls, same_source,
};
use crate::failure::{Failure, envelope};
use crate::wire::{count, nested_count, parse_arguments, text};
use crate::{Api, CallModelContext, EncodeError, Encoded, Options};

/// The `meta` key of a block decoded from a Responses item (see the crate docs).
pub const META_KEY: &str = "openai_responses";

/// The decoder of a Responses response: see [`StreamDecoder`].
pub type Decoder = StreamDecoder<Responses>;

/// Encodes `context` as a Responses request body.
pub fn encode(context: &CallModelContext, options: &Options) -> Result<Encoded, EncodeError> {
    check_model(options)?;
    let mut left_out = Vec::new();
    let paired = paired_calls(&context.messages, &mut left_out);
    let mut input: Vec<Value> = Vec::new();
    for (index, message) in context.messages.iter().enumerate() {
        match message {
            Message::System(system) => {
                let content = input_content(&system.content);
                if !content.is_empty() {
                    input.push(json!({"type": "message", "role": "system", "content": content}));
                }
            }
            Message::User(user) => {
                let content = input_content(&user.content);
                if content.is_empty() {
                    left_out.push(LeftOut {
                        message: index,
                        block: None,
                        what: "message",
                        reason: "a user message with nothing to send".into(),
                    });
                } else {
                    input.push(json!({"type": "message", "role": "user", "content": content}));
                }
            }
            Message::Assistant(assistant) => {
                let same = same_source(assistant, Api::OpenAiResponses, &options.model);
                assistant_items(assistant, index, same, &paired, &mut input, &mut left_out);
            }
            Message::ToolResult(result) => {
                if !paired.contains(result.call_id.as_str()) {
                    continue;
                }
                let mut output = String::new();
                for (block, content) in result.content.iter().enumerate() {
                    match content {
                        ContentBlock::Text { text, .. } => {
                            if !output.is_empty() {
                                output.push('\n');
                            }
                            output.push_str(text);
                        }
                        ContentBlock::Image { .. } => left_out.push(LeftOut {
                            message: index,
                            block: Some(block),
                            what: "image",
                            reason: "function_call_output is sent as text".into(),
                        }),
                    }
                }
                input.push(json!({
                    "type": "function_call_output",
                    "call_id": result.call_id.as_str(),
                    "output": output,
                }));
            }
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::from(options.model.as_str()));
    if let Some(prompt) = context.system_prompt.as_deref().filter(|p| !p.is_empty()) {
        body.insert("instructions".into(), Value::from(prompt));
    }
    body.insert("input".into(), Value::Array(input));
    if let Some(max) = options.max_tokens {
        body.insert("max_output_tokens".into(), Value::from(max));
    }
    if !context.tools.is_empty() {
        let tools = context
            .tools
            .iter()
            .map(|tool| {
                let mut definition = Map::new();
                definition.insert("type".into(), Value::from("function"));
                definition.insert("name".into(), Value::from(tool.name.as_ref()));
                if let Some(description) = &tool.description {
                    definition.insert("description".into(), Value::from(description.as_ref()));
                }
                definition.insert(
                    "parameters".into(),
                    tool.parameters
                        .as_deref()
                        .cloned()
                        .unwrap_or_else(empty_schema),
                );
                // Required by the published schema; `false` keeps any JSON Schema valid (strict
                // mode accepts a subset only), as the other two APIs do.
                definition.insert("strict".into(), Value::Bool(false));
                Value::Object(definition)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &options.tool_choice {
            body.insert("tool_choice".into(), choice.clone());
        }
    }
    if let Some(reasoning) = &options.reasoning {
        body.insert("reasoning".into(), reasoning.clone());
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if options.stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    merge_extra(&mut body, &options.extra, &["input"])?;
    Ok(Encoded {
        body: Value::Object(body),
        left_out,
    })
}

/// A message's parts: `input_text` (an empty text is not sent) and `input_image` (with the
/// `detail` the published schema requires: `auto`).
fn input_content(blocks: &[ContentBlock]) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } if text.is_empty() => None,
            ContentBlock::Text { text, .. } => Some(json!({"type": "input_text", "text": text})),
            ContentBlock::Image {
                data, mime_type, ..
            } => Some(json!({
                "type": "input_image",
                "image_url": data_url(mime_type, data),
                "detail": "auto",
            })),
        })
        .collect()
}

/// The block's Responses item data, if it has any.
fn item_meta(block: &AssistantBlock) -> Option<&Map<String, Value>> {
    block.meta().get(META_KEY).and_then(Value::as_object)
}

/// An output message item being filled while encoding: its id (when sent), the item's fields,
/// its content parts.
type OpenMessage = (Option<Value>, Map<String, Value>, Vec<Value>);

fn assistant_items(
    message: &AssistantMessage,
    index: usize,
    same: bool,
    paired: &std::collections::BTreeSet<String>,
    input: &mut Vec<Value>,
    left_out: &mut Vec<LeftOut>,
) {
    // The output message item being filled.
    let mut open: Option<OpenMessage> = None;
    let close = |open: &mut Option<OpenMessage>, input: &mut Vec<Value>| {
        if let Some((_, item, parts)) = open.take() {
            let mut item = item;
            item.insert("content".into(), Value::Array(parts));
            input.push(Value::Object(item));
        }
    };
    for (block, part) in message.content.iter().enumerate() {
        let meta = item_meta(part);
        match part {
            AssistantBlock::Text { text, .. } => {
                let id = meta.and_then(|m| m.get("id")).filter(|_| same).cloned();
                if open.as_ref().is_some_and(|(open_id, _, _)| *open_id != id) {
                    close(&mut open, input);
                }
                let (_, _, parts) = open.get_or_insert_with(|| {
                    let mut item = Map::new();
                    item.insert("type".into(), Value::from("message"));
                    item.insert("role".into(), Value::from("assistant"));
                    if let Some(id) = &id {
                        item.insert("id".into(), id.clone());
                        let status = meta.and_then(|m| m.get("status")).cloned();
                        item.insert("status".into(), status.unwrap_or(Value::from("completed")));
                    }
                    (id.clone(), item, Vec::new())
                });
                let refusal =
                    meta.and_then(|m| m.get("part")).and_then(|p| p.as_str()) == Some("refusal");
                if refusal {
                    parts.push(json!({"type": "refusal", "refusal": text}));
                } else {
                    let mut part = Map::new();
                    part.insert("type".into(), Value::from("output_text"));
                    part.insert("text".into(), Value::from(text.as_str()));
                    if let Some(annotations) = meta.and_then(|m| m.get("annotations")) {
                        part.insert("annotations".into(), annotations.clone());
                    }
                    parts.push(Value::Object(part));
                }
            }
            AssistantBlock::Thinking { .. } | AssistantBlock::RedactedThinking { .. } => {
                close(&mut open, input);
                let item =
                    meta.filter(|m| m.get("type").and_then(Value::as_str) == Some("reasoning"));
                match item {
                    Some(item) if same => input.push(reasoning_item(item)),
                    Some(_) => left_out.push(LeftOut {
                        message: index,
                        block: Some(block),
                        what: "reasoning_item",
                        reason: "a reasoning item from another model".into(),
                    }),
                    None => left_out.push(LeftOut {
                        message: index,
                        block: Some(block),
                        what: "thinking",
                        reason: "reasoning is sent back only as a Responses reasoning item".into(),
                    }),
                }
            }
            AssistantBlock::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                close(&mut open, input);
                if !paired.contains(id.as_str()) {
                    continue;
                }
                let mut item = Map::new();
                item.insert("type".into(), Value::from("function_call"));
                item.insert("call_id".into(), Value::from(id.as_str()));
                item.insert("name".into(), Value::from(name.as_str()));
                item.insert("arguments".into(), Value::from(arguments_text(arguments)));
                if let Some(item_id) = meta.and_then(|m| m.get("id")) {
                    if same {
                        item.insert("id".into(), item_id.clone());
                        let status = meta.and_then(|m| m.get("status")).cloned();
                        item.insert("status".into(), status.unwrap_or(Value::from("completed")));
                    } else {
                        left_out.push(LeftOut {
                            message: index,
                            block: Some(block),
                            what: "item_id",
                            reason: "a function_call item id from another model".into(),
                        });
                    }
                }
                input.push(Value::Object(item));
            }
        }
    }
    close(&mut open, input);
}

/// A reasoning item as it is sent back: its `id`, `summary`, `encrypted_content` and
/// (reasoning text) `content` as they came; the output-only `status`, and empty or null
/// fields, are not sent.
fn reasoning_item(item: &Map<String, Value>) -> Value {
    let mut sent = Map::new();
    sent.insert("type".into(), Value::from("reasoning"));
    for key in ["id", "summary", "encrypted_content", "content"] {
        match item.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(parts)) if parts.is_empty() && key == "content" => {}
            Some(value) => {
                sent.insert(key.into(), value.clone());
            }
        }
    }
    if !sent.contains_key("summary") {
        sent.insert("summary".into(), json!([]));
    }
    Value::Object(sent)
}

/// One output item being streamed, by `output_index`.
#[derive(Debug, Default)]
struct Item {
    /// The item as `output_item.added` (then `output_item.done`) gave it.
    item: Value,
    done: bool,
    /// Text by content index.
    text: BTreeMap<u64, String>,
    /// Reasoning summary text by summary index.
    summary: BTreeMap<u64, String>,
    /// Reasoning text by content index.
    reasoning: BTreeMap<u64, String>,
    arguments: String,
}

impl Item {
    /// The item: the finished one, or one rebuilt from what streamed.
    fn value(self) -> Value {
        if self.done {
            return self.item;
        }
        let mut item = match self.item {
            Value::Object(item) => item,
            _ => Map::new(),
        };
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                let parts = self
                    .text
                    .into_values()
                    .map(|text| json!({"type": "output_text", "text": text, "annotations": []}))
                    .collect();
                item.insert("content".into(), Value::Array(parts));
            }
            Some("function_call") => {
                item.insert("arguments".into(), Value::from(self.arguments));
            }
            Some("reasoning") => {
                let summary = self
                    .summary
                    .into_values()
                    .map(|text| json!({"type": "summary_text", "text": text}))
                    .collect();
                item.insert("summary".into(), Value::Array(summary));
                if !self.reasoning.is_empty() {
                    let content = self
                        .reasoning
                        .into_values()
                        .map(|text| json!({"type": "reasoning_text", "text": text}))
                        .collect();
                    item.insert("content".into(), Value::Array(content));
                }
            }
            _ => {}
        }
        Value::Object(item)
    }
}

/// The Responses protocol state. Use it through [`Decoder`].
#[derive(Debug, Default)]
pub struct Responses {
    items: BTreeMap<u64, Item>,
    /// Item id → output index, for events that name only the item.
    by_id: BTreeMap<String, u64>,
    /// The response object of the terminal event.
    response: Option<Value>,
}

impl Responses {
    fn item_for(&mut self, value: &Value) -> &mut Item {
        let index = count(value, "output_index")
            .or_else(|| text(value, "item_id").and_then(|id| self.by_id.get(id).copied()))
            .unwrap_or(0);
        self.items.entry(index).or_default()
    }

    fn set_item(&mut self, value: &mut Value, done: bool) {
        let index = count(value, "output_index").unwrap_or(self.items.len() as u64);
        let Some(item) = value.get_mut("item").map(Value::take) else {
            return;
        };
        if let Some(id) = text(&item, "id") {
            self.by_id.insert(id.to_owned(), index);
        }
        let entry = self.items.entry(index).or_default();
        entry.item = item;
        entry.done = done;
    }

    fn build(&mut self, response: &Value) -> AssistantMessage {
        let output = response
            .get("output")
            .and_then(Value::as_array)
            .filter(|output| !output.is_empty())
            .cloned()
            .unwrap_or_else(|| {
                std::mem::take(&mut self.items)
                    .into_values()
                    .map(Item::value)
                    .collect()
            });
        let content = blocks(&output);
        let has_calls = content
            .iter()
            .any(|block| matches!(block, AssistantBlock::ToolCall { .. }));
        let status = text(response, "status").unwrap_or("completed");
        let (stop, provider) = if status == "incomplete" {
            let reason = response
                .get("incomplete_details")
                .and_then(|d| text(d, "reason"))
                .unwrap_or("incomplete");
            let stop = if reason == "content_filter" {
                StopReason::Stop
            } else {
                StopReason::Length
            };
            (stop, reason.to_owned())
        } else if has_calls {
            (StopReason::ToolUse, status.to_owned())
        } else {
            (StopReason::Stop, status.to_owned())
        };
        let mut message = AssistantMessage::new(content, stop);
        message.usage = response.get("usage").filter(|u| u.is_object()).map(usage);
        message.model = text(response, "model").map(str::to_owned);
        message.response_id = text(response, "id").map(str::to_owned);
        message.provider_stop_reason = Some(provider);
        message.meta = codec_meta(Api::OpenAiResponses);
        message
    }
}

/// `input_tokens` (cached included) with `cached_tokens` and `reasoning_tokens`.
fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: count(usage, "input_tokens").unwrap_or(0),
        output_tokens: count(usage, "output_tokens").unwrap_or(0),
        cache_read_tokens: nested_count(usage, "input_tokens_details", "cached_tokens"),
        cache_write_tokens: None,
        reasoning_tokens: nested_count(usage, "output_tokens_details", "reasoning_tokens"),
    }
}

fn with_meta(mut block: AssistantBlock, data: Map<String, Value>) -> AssistantBlock {
    let mut meta = Meta::new();
    meta.insert(META_KEY, Value::Object(data));
    match &mut block {
        AssistantBlock::Text { meta: m, .. }
        | AssistantBlock::Thinking { meta: m, .. }
        | AssistantBlock::RedactedThinking { meta: m, .. }
        | AssistantBlock::ToolCall { meta: m, .. } => *m = meta,
    }
    block
}

/// The blocks of a response's output items. Items runcore has no block for (web search calls,
/// …) are not kept.
fn blocks(output: &[Value]) -> Vec<AssistantBlock> {
    let mut content = Vec::new();
    for item in output {
        match text(item, "type") {
            Some("message") => {
                let mut data = Map::new();
                data.insert("type".into(), Value::from("message"));
                for key in ["id", "status"] {
                    if let Some(value) = item.get(key).filter(|v| !v.is_null()) {
                        data.insert(key.into(), value.clone());
                    }
                }
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let mut data = data.clone();
                    let piece = match text(part, "type") {
                        Some("refusal") => {
                            data.insert("part".into(), Value::from("refusal"));
                            text(part, "refusal")
                        }
                        _ => {
                            if let Some(annotations) = part
                                .get("annotations")
                                .filter(|a| a.as_array().is_some_and(|a| !a.is_empty()))
                            {
                                data.insert("annotations".into(), annotations.clone());
                            }
                            text(part, "text")
                        }
                    };
                    content.push(with_meta(
                        AssistantBlock::text(piece.unwrap_or_default()),
                        data,
                    ));
                }
            }
            Some("reasoning") => {
                let texts = |key: &str| -> Vec<String> {
                    item.get(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|part| text(part, "text").map(str::to_owned))
                        .collect()
                };
                let mut thinking = texts("summary");
                if thinking.is_empty() {
                    thinking = texts("content");
                }
                let data = item.as_object().cloned().unwrap_or_default();
                content.push(with_meta(
                    AssistantBlock::Thinking {
                        thinking: thinking.join("\n\n"),
                        signature: None,
                        meta: Meta::new(),
                    },
                    data,
                ));
            }
            Some("function_call") => {
                let mut data = Map::new();
                data.insert("type".into(), Value::from("function_call"));
                for key in ["id", "status"] {
                    if let Some(value) = item.get(key).filter(|v| !v.is_null()) {
                        data.insert(key.into(), value.clone());
                    }
                }
                let arguments = parse_arguments(text(item, "arguments").unwrap_or_default());
                content.push(with_meta(
                    AssistantBlock::ToolCall {
                        id: text(item, "call_id").unwrap_or_default().into(),
                        name: text(item, "name").unwrap_or_default().into(),
                        arguments: Arc::new(arguments),
                        meta: Meta::new(),
                    },
                    data,
                ));
            }
            _ => {}
        }
    }
    content
}

fn failed(response: Option<&Value>) -> Failure {
    let error = response
        .and_then(|r| r.get("error"))
        .unwrap_or(&Value::Null);
    Failure::in_stream(None, text(error, "code"), text(error, "message"))
}

impl Protocol for Responses {
    const API: Api = Api::OpenAiResponses;

    fn event(&mut self, name: Option<&str>, data: &str, deltas: &mut Deltas) -> EventOutcome {
        let Ok(mut value) = serde_json::from_str::<Value>(data) else {
            return EventOutcome::NotFormat(format!(
                "expected JSON in the data of a Responses event, found {:?}",
                data.chars().take(40).collect::<String>()
            ));
        };
        let kind = text(&value, "type").or(name).unwrap_or_default();
        let piece = text(&value, "delta").unwrap_or_default();
        match kind {
            // The lifecycle events before the end carry nothing the answer needs: its id and
            // model come again in the terminal event.
            "response.created" | "response.in_progress" | "response.queued" => {}
            "response.output_item.added" => self.set_item(&mut value, false),
            "response.output_item.done" => self.set_item(&mut value, true),
            "response.output_text.delta" | "response.refusal.delta" => {
                let index = count(&value, "content_index").unwrap_or(0);
                let item = self.item_for(&value);
                item.text.entry(index).or_default().push_str(piece);
                deltas.text(piece);
            }
            "response.reasoning_summary_text.delta" => {
                let index = count(&value, "summary_index").unwrap_or(0);
                let item = self.item_for(&value);
                item.summary.entry(index).or_default().push_str(piece);
                deltas.thinking(piece);
            }
            "response.reasoning_text.delta" => {
                let index = count(&value, "content_index").unwrap_or(0);
                let item = self.item_for(&value);
                item.reasoning.entry(index).or_default().push_str(piece);
                deltas.thinking(piece);
            }
            "response.function_call_arguments.delta" => {
                self.item_for(&value).arguments.push_str(piece);
            }
            "response.function_call_arguments.done" => {
                if let Some(arguments) = text(&value, "arguments") {
                    self.item_for(&value).arguments = arguments.to_owned();
                }
            }
            "response.output_text.done"
            | "response.content_part.added"
            | "response.content_part.done"
            | "response.reasoning_summary_part.added"
            | "response.reasoning_summary_part.done"
            | "response.reasoning_summary_text.done"
            | "response.reasoning_text.done"
            | "response.refusal.done" => {}
            "response.completed" | "response.incomplete" => {
                self.response = value.get_mut("response").map(Value::take);
                return EventOutcome::Terminal;
            }
            "response.failed" => return EventOutcome::Failed(failed(value.get("response"))),
            "error" => {
                let (kind, code, message) = envelope(&value).unwrap_or((None, None, None));
                return EventOutcome::Failed(Failure::in_stream(kind, code, message));
            }
            _ => return EventOutcome::Ignored,
        }
        EventOutcome::Used
    }

    fn body(&mut self, body: &Value) -> Result<AssistantMessage, BodyError> {
        if body.get("output").is_none() {
            if let Some((kind, code, message)) = envelope(body) {
                return Err(BodyError::Failed(Failure::in_stream(kind, code, message)));
            }
            return Err(BodyError::NotFormat(
                "expected a Responses response object with an output array".into(),
            ));
        }
        match text(body, "status") {
            Some("failed") => Err(BodyError::Failed(failed(Some(body)))),
            None | Some("completed" | "incomplete") => Ok(self.build(body)),
            Some(other) => Err(BodyError::Failed(Failure::in_stream(
                None,
                None,
                Some(&format!("the response is {other}, not completed")),
            ))),
        }
    }

    fn answer(&mut self) -> AssistantMessage {
        let response = self.response.take().unwrap_or(Value::Null);
        self.build(&response)
    }
}
