//! What every encoder shares: options, the result, what was left out and why, and the rules
//! that decide what may be sent back.

use std::collections::BTreeSet;

use runcore::{AssistantMessage, Message, Meta};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Api, CODEC_META_KEY};

/// Request options (SPEC §13).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// The model to call (required, not empty).
    pub model: String,
    /// The output token limit (`max_tokens`, `max_completion_tokens`, `max_output_tokens`).
    /// Anthropic requires one: 4096 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Ask for an SSE stream (default true).
    #[serde(default = "default_stream")]
    pub stream: bool,
    /// The API's reasoning setting, sent as given: Anthropic `thinking` (e.g.
    /// `{"type":"enabled","budget_tokens":2048}`), Chat `reasoning_effort` (e.g. `"low"`),
    /// Responses `reasoning` (e.g. `{"effort":"low","summary":"auto"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Value>,
    /// The API's `tool_choice`, sent as given (only when there are tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Merged into the body last, key by key, for parameters the codec does not know (or to
    /// replace one it built, e.g. `system` with `cache_control` blocks); the transcript key
    /// (`messages`, `input`) cannot be replaced.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

fn default_stream() -> bool {
    true
}

impl Options {
    /// Options for `model` with every default.
    pub fn new(model: impl Into<String>) -> Self {
        Options {
            model: model.into(),
            max_tokens: None,
            stream: true,
            reasoning: None,
            tool_choice: None,
            extra: Map::new(),
        }
    }
}

impl Options {
    /// Reads options given as JSON (a binding's or the command line's): an object with at
    /// least a non-empty `model`, and only the fields above. The one place where a door's
    /// options are checked, so that every door refuses the same options with the same words.
    pub fn from_value(value: Value) -> Result<Options, OptionsError> {
        let Value::Object(object) = value else {
            return Err(OptionsError::NotAnObject);
        };
        match object.get("model") {
            None | Some(Value::Null) => return Err(OptionsError::MissingModel),
            Some(Value::String(model)) if model.trim().is_empty() => {
                return Err(OptionsError::MissingModel);
            }
            _ => {}
        }
        serde_json::from_value(Value::Object(object))
            .map_err(|error| OptionsError::Invalid(error.to_string()))
    }
}

/// Options that do not read ([`Options::from_value`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// Not a JSON object.
    #[error("options must be an object with at least \"model\"")]
    NotAnObject,
    /// `model` is absent, null or blank.
    #[error("options.model is required and must not be empty (the model to call)")]
    MissingModel,
    /// A field is unknown or of the wrong type (serde's words).
    #[error("options: {0}")]
    Invalid(String),
}

/// An encoded request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Encoded {
    /// The request body.
    pub body: Value,
    /// What the context held that the body does not, and why.
    pub left_out: Vec<LeftOut>,
}

/// One piece of the context the body does not carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// Index of the message in the context.
    pub message: usize,
    /// Index of the block in the message's content, when one block was left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<usize>,
    /// What was left out: `thinking`, `redacted_thinking`, `signature`, `reasoning_item`,
    /// `item_id`, `image`, `tool_call`, `tool_result`, `message`, `arguments`.
    pub what: &'static str,
    /// Why.
    pub reason: String,
}

/// A context that cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// `options.model` is empty.
    #[error("options.model is required and must not be empty")]
    MissingModel,
    /// `options.extra` tried to replace the transcript.
    #[error(
        "options.extra may not replace {key:?}: the codec builds the transcript from the context"
    )]
    ExtraReplacesContext {
        /// The key.
        key: String,
    },
}

pub(crate) fn check_model(options: &Options) -> Result<(), EncodeError> {
    if options.model.trim().is_empty() {
        return Err(EncodeError::MissingModel);
    }
    Ok(())
}

/// Merges `extra` into `body` last, key by key. Any key may be replaced (`system` with
/// `cache_control` blocks, `tools` with built-in tools added) except the one that carries the
/// transcript (`messages`, `input`): a transcript from somewhere else would break the
/// call/result pairing the codec guarantees.
pub(crate) fn merge_extra(
    body: &mut Map<String, Value>,
    extra: &Map<String, Value>,
    context_keys: &[&str],
) -> Result<(), EncodeError> {
    for (key, value) in extra {
        if context_keys.contains(&key.as_str()) {
            return Err(EncodeError::ExtraReplacesContext { key: key.clone() });
        }
        body.insert(key.clone(), value.clone());
    }
    Ok(())
}

/// Whether the assistant message came from `api` and a model that `model` names: equal, or the
/// dated snapshot of it the provider answers with (`gpt-4o-mini` → `gpt-4o-mini-2024-07-18`,
/// `claude-sonnet-4` → `claude-sonnet-4-20250514`).
/// Provider-opaque content (signatures, encrypted reasoning, item ids) is only sent back then.
pub(crate) fn same_source(message: &AssistantMessage, api: Api, model: &str) -> bool {
    let from_api = message
        .meta
        .get(CODEC_META_KEY)
        .and_then(|codec| codec.get("api"))
        .and_then(Value::as_str)
        == Some(api.name());
    let same_model = message.model.as_deref().is_some_and(|answered| {
        answered == model || is_dated(answered, model) || is_dated(model, answered)
    });
    from_api && same_model
}

/// Whether `long` is `short` with a date snapshot suffix (`-2024-07-18`, `-20250514`): the
/// same model, not another version of it (`claude-sonnet-4` is not `claude-sonnet-4-5`).
fn is_dated(long: &str, short: &str) -> bool {
    long.strip_prefix(short)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|date| {
            let digits = |part: &str, len: usize| {
                part.len() == len && part.bytes().all(|b| b.is_ascii_digit())
            };
            match date.split('-').collect::<Vec<_>>().as_slice() {
                [compact] => digits(compact, 8),
                [year, month, day] => digits(year, 4) && digits(month, 2) && digits(day, 2),
                _ => false,
            }
        })
}

/// The `meta` of a decoded message: which API the content came from.
pub(crate) fn codec_meta(api: Api) -> Meta {
    let mut meta = Meta::new();
    let mut codec = Map::new();
    codec.insert("api".into(), Value::from(api.name()));
    meta.insert(CODEC_META_KEY, Value::Object(codec));
    meta
}

/// The call ids that have both a call and a result in the context: only these are sent (the
/// body never has a call without its result nor a result without its call). The others are
/// reported in `left_out`.
pub(crate) fn paired_calls(messages: &[Message], left_out: &mut Vec<LeftOut>) -> BTreeSet<String> {
    let mut calls = BTreeSet::new();
    let mut results = BTreeSet::new();
    for message in messages {
        match message {
            Message::Assistant(assistant) => {
                for call in assistant.tool_calls() {
                    calls.insert(call.id.to_string());
                }
            }
            Message::ToolResult(result) => {
                results.insert(result.call_id.to_string());
            }
            _ => {}
        }
    }
    let paired: BTreeSet<String> = calls.intersection(&results).cloned().collect();
    for (index, message) in messages.iter().enumerate() {
        match message {
            Message::Assistant(assistant) => {
                for (block, content) in assistant.content.iter().enumerate() {
                    if let runcore::AssistantBlock::ToolCall { id, .. } = content
                        && !paired.contains(id.as_str())
                    {
                        left_out.push(LeftOut {
                            message: index,
                            block: Some(block),
                            what: "tool_call",
                            reason: format!("tool call {id} has no result in the context"),
                        });
                    }
                }
            }
            Message::ToolResult(result) if !paired.contains(result.call_id.as_str()) => {
                left_out.push(LeftOut {
                    message: index,
                    block: None,
                    what: "tool_result",
                    reason: format!("tool result {} has no call in the context", result.call_id),
                });
            }
            _ => {}
        }
    }
    paired
}

/// A tool call's arguments as text: the JSON of an object, or the raw text a call whose
/// arguments did not parse was passed on with.
pub(crate) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// The JSON Schema of a tool without one: an object with no properties.
pub(crate) fn empty_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// A base64 image as a data URL (the OpenAI APIs' image form).
pub(crate) fn data_url(mime_type: &str, data: &str) -> String {
    format!("data:{mime_type};base64,{data}")
}

#[cfg(test)]
mod tests {
    use super::{Options, OptionsError};

    #[test]
    fn options_read_once_with_one_set_of_words() {
        use serde_json::json;
        let read = |value| Options::from_value(value);
        assert_eq!(read(json!({"model": "m"})), Ok(Options::new("m")));
        assert_eq!(read(json!(null)), Err(OptionsError::NotAnObject));
        assert_eq!(read(json!([])), Err(OptionsError::NotAnObject));
        for missing in [json!({}), json!({"model": null}), json!({"model": "  "})] {
            assert_eq!(read(missing), Err(OptionsError::MissingModel));
        }
        assert!(
            matches!(read(json!({"model": "m", "temprature": 1})), Err(OptionsError::Invalid(m)) if m.contains("unknown field"))
        );
        assert!(matches!(
            read(json!({"model": 5})),
            Err(OptionsError::Invalid(_))
        ));
    }

    use super::*;

    #[test]
    fn dated_snapshots_are_the_same_model() {
        assert!(is_dated("gpt-4o-mini-2024-07-18", "gpt-4o-mini"));
        assert!(is_dated("claude-sonnet-4-20250514", "claude-sonnet-4"));
        assert!(!is_dated("claude-sonnet-4-5", "claude-sonnet-4"));
        assert!(!is_dated("claude-sonnet-4-5-20250929", "claude-sonnet-4"));
        assert!(!is_dated("gpt-4o-mini", "gpt-4o"));
    }
}
