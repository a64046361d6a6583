//! Encoder golden test on recorded conversations: for exchange i ≥ 1 of a cassette, the
//! transcript built from the *decoded* earlier responses plus the recorded user turns and tool
//! results encodes to the recorded request i (JSON-equal on the messages or items, the tools
//! and the system field).
//!
//! Normalized before comparing (client habits the contract leaves open, each harmless):
//! `cache_control` markers (a client's caching choice, not transcript content), `strict` on
//! tool definitions, `status` on Responses `function_call_output` items; function-call
//! `arguments` are compared as JSON (the codec re-serializes the parsed object, key order is
//! free); the recordings' redaction numbered copies of one encrypted reasoning blob apart
//! (`encrypted_content_REDACTED_2` in the request, `_3` in the response's final output), so
//! those placeholders compare equal.
//!
//! Skipped, and counted by reason in the reviewed snapshot `encode_golden__<api>__coverage`:
//! cassettes whose requests are independent (request i does not carry i earlier answers), and
//! requests holding content runcore has no block for (documents, server tools, audio, files).

#[macro_use]
mod common;

use std::collections::BTreeMap;

use common::{Exchange, decode, exchanges};
use runcore::{Input, Message};
use runcore_providers::{Api, CallModelContext, Options, ToolDefinition};
use serde_json::{Map, Value, json};

/// Why an exchange cannot be compared.
type Skip = &'static str;

fn decoded_answer(api: Api, exchange: &Exchange) -> Result<Message, Skip> {
    if exchange.status != 200 {
        return Err("an earlier exchange failed");
    }
    let (inputs, _) = decode(api, exchange.status, exchange.response.as_bytes());
    match inputs.into_iter().last() {
        Some(Input::ModelDone { message, .. }) => Ok(Message::Assistant(message.into())),
        _ => Err("an earlier response did not decode to an answer"),
    }
}

fn message(value: Value) -> Result<Message, Skip> {
    serde_json::from_value(value).map_err(|_| "a turn runcore cannot represent")
}

/// `content` (a string, or blocks) as runcore text/image blocks.
fn blocks(content: &Value, api: Api) -> Result<Vec<Value>, Skip> {
    if let Some(text) = content.as_str() {
        return Ok(vec![json!({"type": "text", "text": text})]);
    }
    let mut out = Vec::new();
    for block in content.as_array().ok_or("content of an unknown shape")? {
        let kind = block["type"].as_str().unwrap_or_default();
        match (api, kind) {
            (_, "text" | "input_text") => out.push(json!({"type": "text", "text": block["text"]})),
            (Api::Anthropic, "image") if block["source"]["type"] == "base64" => out.push(json!({
                "type": "image", "data": block["source"]["data"], "mime_type": block["source"]["media_type"],
            })),
            _ => return Err("content runcore has no block for (documents, files, audio, URLs)"),
        }
    }
    Ok(out)
}

/// Tool name by call id, from the decoded answers so far.
fn tool_name(messages: &[Message], call_id: &str) -> String {
    messages
        .iter()
        .filter_map(Message::as_assistant)
        .flat_map(|m| m.tool_calls())
        .find(|c| c.id.as_str() == call_id)
        .map(|c| c.name.to_string())
        .unwrap_or_default()
}

fn tool_result(
    messages: &[Message],
    call_id: &str,
    content: Vec<Value>,
    is_error: bool,
) -> Result<Message, Skip> {
    message(json!({
        "role": "tool_result", "call_id": call_id, "tool_name": tool_name(messages, call_id),
        "content": content, "is_error": is_error, "outcome": "executed",
    }))
}

/// The transcript, system prompt and options of recorded request `index` of a conversation.
fn context(
    api: Api,
    conversation: &[Exchange],
    index: usize,
) -> Result<(CallModelContext, Options), Skip> {
    let request = conversation[index]
        .request
        .as_ref()
        .ok_or("no request recorded")?;
    let mut answers = Vec::new();
    for earlier in &conversation[..index] {
        answers.push(decoded_answer(api, earlier)?);
    }
    let mut answers = answers.into_iter();
    let mut messages: Vec<Message> = Vec::new();
    let mut system_prompt = None;
    match api {
        Api::Anthropic => {
            if let Some(system) = request.get("system") {
                let texts = blocks(system, api)?;
                let [only] = texts.as_slice() else {
                    return Err("a system field of several blocks");
                };
                system_prompt = only["text"].as_str().map(str::to_owned);
            }
            for turn in request["messages"].as_array().ok_or("no messages")? {
                match turn["role"].as_str() {
                    Some("assistant") => {
                        messages.push(answers.next().ok_or("a history seeded by the client (more assistant turns than earlier responses)")?)
                    }
                    Some("user") => {
                        let mut plain = Vec::new();
                        let content = match &turn["content"] {
                            Value::String(text) => vec![json!({"type": "text", "text": text})],
                            Value::Array(content) => content.clone(),
                            _ => return Err("content of an unknown shape"),
                        };
                        for block in &content {
                            if block["type"] == "tool_result" {
                                let call = block["tool_use_id"].as_str().unwrap_or_default();
                                let content = blocks(&block["content"], api)?;
                                let is_error = block["is_error"].as_bool().unwrap_or(false);
                                messages.push(tool_result(&messages, call, content, is_error)?);
                            } else {
                                plain.extend(blocks(&Value::Array(vec![block.clone()]), api)?);
                            }
                        }
                        if !plain.is_empty() {
                            messages.push(message(json!({"role": "user", "content": plain}))?);
                        }
                    }
                    _ => return Err("a role the Messages API does not have"),
                }
            }
        }
        Api::OpenAiChat => {
            for (position, turn) in request["messages"]
                .as_array()
                .ok_or("no messages")?
                .iter()
                .enumerate()
            {
                match turn["role"].as_str() {
                    Some("system") if position == 0 => {
                        let texts = blocks(&turn["content"], api)?;
                        let [only] = texts.as_slice() else {
                            return Err("a system message of several parts");
                        };
                        system_prompt = only["text"].as_str().map(str::to_owned);
                    }
                    Some("system") => messages.push(message(
                        json!({"role": "system", "content": blocks(&turn["content"], api)?}),
                    )?),
                    Some("user") => messages.push(message(
                        json!({"role": "user", "content": blocks(&turn["content"], api)?}),
                    )?),
                    Some("assistant") => {
                        messages.push(answers.next().ok_or("a history seeded by the client (more assistant turns than earlier responses)")?)
                    }
                    Some("tool") => {
                        let call = turn["tool_call_id"].as_str().unwrap_or_default();
                        messages.push(tool_result(
                            &messages,
                            call,
                            blocks(&turn["content"], api)?,
                            false,
                        )?);
                    }
                    _ => return Err("a role runcore has no message for (developer, function)"),
                }
            }
        }
        Api::OpenAiResponses => {
            system_prompt = request
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let items = match &request["input"] {
                Value::Array(items) => items.clone(),
                Value::String(text) => {
                    vec![json!({"type": "message", "role": "user", "content": text})]
                }
                _ => return Err("no input"),
            };
            let mut in_answer = false;
            for item in &items {
                let answer_item =
                    matches!(item["type"].as_str(), Some("reasoning" | "function_call"))
                        || item["role"] == "assistant";
                if answer_item {
                    if !in_answer {
                        messages.push(answers.next().ok_or("a history seeded by the client (more assistant turns than earlier responses)")?);
                    }
                    in_answer = true;
                    continue;
                }
                in_answer = false;
                match (item["type"].as_str(), item["role"].as_str()) {
                    (Some("function_call_output"), _) => {
                        let call = item["call_id"].as_str().unwrap_or_default();
                        let output = item["output"]
                            .as_str()
                            .ok_or("a non-text function output")?;
                        messages.push(tool_result(
                            &messages,
                            call,
                            vec![json!({"type": "text", "text": output})],
                            false,
                        )?);
                    }
                    (_, Some(role @ ("user" | "system"))) => {
                        messages.push(message(
                            json!({"role": role, "content": blocks(&item["content"], api)?}),
                        )?);
                    }
                    _ => return Err("an input item runcore has no message for"),
                }
            }
        }
    }
    if answers.next().is_some() {
        return Err("independent requests (request i does not carry the i earlier answers)");
    }
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|tool| {
            let definition = tool.get("function").unwrap_or(tool);
            if api != Api::Anthropic && tool["type"] != "function" {
                return Err("a built-in tool");
            }
            if api == Api::Anthropic && tool.get("input_schema").is_none() {
                return Err("a server tool");
            }
            Ok(ToolDefinition::new(
                definition["name"].as_str().unwrap_or_default(),
                definition
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                definition
                    .get(if api == Api::Anthropic {
                        "input_schema"
                    } else {
                        "parameters"
                    })
                    .cloned(),
            ))
        })
        .collect::<Result<Vec<_>, Skip>>()?;
    let mut options = Options::new(request["model"].as_str().unwrap_or_default());
    options.stream = request["stream"] == true;
    options.reasoning = match api {
        Api::Anthropic => request.get("thinking"),
        Api::OpenAiChat => request.get("reasoning_effort"),
        Api::OpenAiResponses => request.get("reasoning"),
    }
    .cloned();
    Ok((
        CallModelContext {
            run_id: "run-1".into(),
            step: 1,
            final_step: false,
            system_prompt,
            messages,
            tools,
        },
        options,
    ))
}

/// Drops the keys the comparison ignores (see the module doc), recursively.
fn normalize(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let is_output = map.get("type") == Some(&json!("function_call_output"));
            let is_call = map.get("type") == Some(&json!("function_call"))
                || map.get("type") == Some(&json!("function"));
            let map: Map<String, Value> = map
                .iter()
                .filter(|(key, _)| key.as_str() != "cache_control" && key.as_str() != "strict")
                .filter(|(key, _)| !(is_output && key.as_str() == "status"))
                .map(|(key, value)| {
                    let value = match (key.as_str(), value) {
                        // The redaction numbered each copy of one encrypted blob apart.
                        ("encrypted_content", Value::String(text))
                            if text.starts_with("encrypted_content_REDACTED") =>
                        {
                            json!("encrypted_content_REDACTED")
                        }
                        // Arguments are JSON text: compared as JSON (key order is free).
                        ("arguments", Value::String(text)) if is_call => {
                            serde_json::from_str(text).unwrap_or_else(|_| value.clone())
                        }
                        _ => normalize(value),
                    };
                    (key.clone(), value)
                })
                .collect();
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        other => other.clone(),
    }
}

fn golden(api: Api) {
    let mut conversations: BTreeMap<String, Vec<Exchange>> = BTreeMap::new();
    for exchange in exchanges(api) {
        conversations
            .entry(exchange.cassette.clone())
            .or_default()
            .push(exchange);
    }
    let mut compared = Vec::new();
    let mut skipped: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut mismatches = Vec::new();
    for conversation in conversations.values_mut() {
        conversation.sort_by_key(|e| e.index);
        for index in 1..conversation.len() {
            let name = conversation[index].name();
            let (context, options) = match context(api, conversation, index) {
                Ok(found) => found,
                Err(reason) => {
                    skipped.entry(reason).or_default().push(name);
                    continue;
                }
            };
            let encoded = api.encode(&context, &options).expect("encodes");
            let recorded = conversation[index].request.as_ref().expect("a request");
            for key in ["system", "messages", "input", "instructions", "tools"] {
                let ours = normalize(encoded.body.get(key).unwrap_or(&Value::Null));
                let theirs = normalize(recorded.get(key).unwrap_or(&Value::Null));
                // A recorded string input is the one-user-message shorthand.
                if key == "input" && theirs.is_string() {
                    continue;
                }
                if ours != theirs {
                    mismatches.push(format!("{name} {key}:\n ours:   {ours}\n theirs: {theirs}"));
                }
            }
            compared.push(json!({"exchange": name, "left_out": encoded.left_out}));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(!compared.is_empty());
    snapshot_json!(
        format!("{}__coverage", api.name()),
        json!({"compared": compared, "skipped": skipped})
    );
}

#[test]
fn anthropic_golden() {
    golden(Api::Anthropic);
}

#[test]
fn openai_chat_golden() {
    golden(Api::OpenAiChat);
}

#[test]
fn openai_responses_golden() {
    golden(Api::OpenAiResponses);
}
