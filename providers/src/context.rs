//! What a `call_model` carries, owned: the input of every `encode`.

use runcore::{Message, ModelRequest};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The model context of one `call_model`: the system prompt, the transcript messages and the
/// tool definitions.
///
/// Build it from the agent's outstanding request ([`CallModelContext::from_request`]) or read
/// it from a `call_model` driver line in full-context mode (it deserializes from the line as
/// `runcore drive` prints it; `type`, `run_id`, `step` and `final_step` are accepted and
/// ignored). A delta-mode line (`base` > 0) carries only part of the context and is refused.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CallModelContext {
    /// The configured system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The model context in order (a compaction's summary first, if any).
    pub messages: Vec<Message>,
    /// The tools the model may call, in catalog order.
    pub tools: Vec<ToolDefinition>,
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments (an empty object schema when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

impl CallModelContext {
    /// The context of the agent's outstanding model call.
    pub fn from_request(request: &ModelRequest<'_>) -> Self {
        CallModelContext {
            system_prompt: request.system_prompt.map(str::to_owned),
            messages: request.context().cloned().collect(),
            tools: request
                .tools
                .iter()
                .map(|(name, spec)| ToolDefinition {
                    name: name.clone(),
                    description: spec.description.clone(),
                    parameters: spec.parameters.clone(),
                })
                .collect(),
        }
    }
}

/// The `call_model` line's fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallModelLine {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    run_id: Option<Value>,
    #[serde(default)]
    #[allow(dead_code)]
    step: Option<Value>,
    #[serde(default)]
    #[allow(dead_code)]
    final_step: Option<bool>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    base: Option<u64>,
    messages: Vec<Message>,
    #[serde(default)]
    tools: Vec<ToolDefinition>,
}

impl<'de> Deserialize<'de> for CallModelContext {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let line = CallModelLine::deserialize(deserializer)?;
        if let Some(kind) = line.kind.as_deref()
            && kind != "call_model"
        {
            return Err(serde::de::Error::custom(format!(
                "expected a call_model line, found type {kind:?}"
            )));
        }
        if let Some(base) = line.base
            && base > 0
        {
            return Err(serde::de::Error::custom(format!(
                "a delta-mode call_model line (base {base}) holds only part of the context; \
                 use full-context mode"
            )));
        }
        Ok(CallModelContext {
            system_prompt: line.system_prompt,
            messages: line.messages,
            tools: line.tools,
        })
    }
}
