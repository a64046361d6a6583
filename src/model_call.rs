//! One model call, in one shape: what the agent hands out ([`Agent::model_call`] /
//! [`ModelRequest::to_call`]), what the driver prints as a full-context `call_model` line
//! (SPEC §12), what the provider codecs encode (SPEC §13) and what a durable runtime journals.
//!
//! [`Agent::model_call`]: crate::Agent::model_call
//! [`ModelRequest::to_call`]: crate::ModelRequest::to_call

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{RunId, Step};
use crate::message::Message;

/// A tool as the model sees it: its name, what it does and the JSON Schema of its arguments.
///
/// Borrowed from the agent's catalog where the driver prints a line (`ToolDefinition<'a>`),
/// owned where a call is kept or read from a line (`ToolDefinition<'static>`): one type, so
/// the two cannot drift apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition<'a> {
    /// The tool's name.
    pub name: Cow<'a, str>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Cow<'a, str>>,
    /// The JSON Schema of its arguments (an empty object schema when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Cow<'a, Value>>,
}

impl<'a> ToolDefinition<'a> {
    /// The definition of catalog entry `name`, borrowed from its spec.
    pub fn of(name: &'a str, spec: &'a crate::ToolSpec) -> Self {
        ToolDefinition {
            name: Cow::Borrowed(name),
            description: spec.description.as_deref().map(Cow::Borrowed),
            parameters: spec.parameters.as_ref().map(Cow::Borrowed),
        }
    }

    /// An owned definition.
    pub fn new(
        name: impl Into<String>,
        description: Option<String>,
        parameters: Option<Value>,
    ) -> ToolDefinition<'static> {
        ToolDefinition {
            name: Cow::Owned(name.into()),
            description: description.map(Cow::Owned),
            parameters: parameters.map(Cow::Owned),
        }
    }

    /// An owned copy.
    pub fn into_owned(self) -> ToolDefinition<'static> {
        ToolDefinition {
            name: Cow::Owned(self.name.into_owned()),
            description: self.description.map(|d| Cow::Owned(d.into_owned())),
            parameters: self.parameters.map(|p| Cow::Owned(p.into_owned())),
        }
    }
}

/// One model call, owned: the run and step it answers and the whole model context.
///
/// It serializes as the full-context `call_model` line `runcore drive` prints (`"type":
/// "call_model"` first, byte for byte the same), and reads from such a line; a delta-mode line
/// (`base` > 0) holds only part of the context and is refused. `type` may be left out.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    /// The run.
    pub run_id: RunId,
    /// The step (model call number within the run, from 1).
    pub step: Step,
    /// True for the last call the step budget allows.
    pub final_step: bool,
    /// The configured system prompt.
    pub system_prompt: Option<String>,
    /// The model context in order: a compaction's summary first, if any, then the transcript
    /// from the context start.
    pub messages: Vec<Message>,
    /// The tools the model may call, in catalog order.
    pub tools: Vec<ToolDefinition<'static>>,
}

/// The line's fields, as the driver writes them.
#[derive(Serialize)]
struct ModelCallLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    run_id: &'a RunId,
    step: Step,
    final_step: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_prompt: Option<Cow<'a, str>>,
    messages: &'a [Message],
    tools: &'a [ToolDefinition<'static>],
}

impl Serialize for ModelCall {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ModelCallLine {
            kind: "call_model",
            run_id: &self.run_id,
            step: self.step,
            final_step: self.final_step,
            system_prompt: self.system_prompt.as_deref().map(Cow::Borrowed),
            messages: &self.messages,
            tools: &self.tools,
        }
        .serialize(serializer)
    }
}

/// The line's fields with `type` optional (a reader may leave it out).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelCallIn {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    // Optional here so that a line of another type or mode is named as such first.
    #[serde(default)]
    run_id: Option<RunId>,
    #[serde(default)]
    step: Option<Step>,
    #[serde(default)]
    final_step: bool,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    base: Option<u64>,
    messages: Vec<Message>,
    #[serde(default)]
    tools: Vec<ToolDefinition<'static>>,
}

impl<'de> Deserialize<'de> for ModelCall {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let line = ModelCallIn::deserialize(deserializer)?;
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
        let (Some(run_id), Some(step)) = (line.run_id, line.step) else {
            return Err(serde::de::Error::custom(
                "a call_model line needs its run_id and step",
            ));
        };
        Ok(ModelCall {
            run_id,
            step,
            final_step: line.final_step,
            system_prompt: line.system_prompt,
            messages: line.messages,
            tools: line.tools,
        })
    }
}
