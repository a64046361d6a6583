//! Agent configuration: the thread, the step budget, the tool catalog and its policies.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::AgentError;
use crate::ids::ThreadId;

use super::queues::QueueMode;

/// Whether a tool runs at once or waits for a person's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "policy", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolPolicy {
    /// Run without asking (the default for every tool, listed or not).
    #[default]
    Auto,
    /// Ask for a `Permission` ticket first, one call at a time in call order.
    RequireApproval {
        /// The ticket expires this long after it is created (`None`: never).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_after_ms: Option<u64>,
    },
}

/// A tool the model may call.
///
/// On the wire the policy is flat, as the driver's `config` line has it:
/// `{"description"?, "parameters"?, "policy"?: "auto" | "require_approval",
/// "deadline_after_ms"?}`; a deadline without `require_approval` is rejected.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(into = "ToolSpecRepr", try_from = "ToolSpecRepr")]
pub struct ToolSpec {
    /// What the tool does, for the model.
    pub description: Option<String>,
    /// The JSON Schema of its arguments, for the model.
    pub parameters: Option<Value>,
    /// Auto or approval-gated.
    pub policy: ToolPolicy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
enum PolicyName {
    #[default]
    Auto,
    RequireApproval,
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
struct ToolSpecRepr {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parameters: Option<Value>,
    #[serde(default)]
    policy: PolicyName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deadline_after_ms: Option<u64>,
}

impl From<ToolSpec> for ToolSpecRepr {
    fn from(spec: ToolSpec) -> Self {
        let (policy, deadline_after_ms) = match spec.policy {
            ToolPolicy::Auto => (PolicyName::Auto, None),
            ToolPolicy::RequireApproval { deadline_after_ms } => {
                (PolicyName::RequireApproval, deadline_after_ms)
            }
        };
        ToolSpecRepr {
            description: spec.description,
            parameters: spec.parameters,
            policy,
            deadline_after_ms,
        }
    }
}

impl TryFrom<ToolSpecRepr> for ToolSpec {
    type Error = String;

    fn try_from(repr: ToolSpecRepr) -> Result<Self, Self::Error> {
        let policy = match (repr.policy, repr.deadline_after_ms) {
            (PolicyName::Auto, None) => ToolPolicy::Auto,
            (PolicyName::Auto, Some(_)) => {
                return Err("deadline_after_ms needs \"policy\": \"require_approval\"".into());
            }
            (PolicyName::RequireApproval, deadline_after_ms) => {
                ToolPolicy::RequireApproval { deadline_after_ms }
            }
        };
        Ok(ToolSpec {
            description: repr.description,
            parameters: repr.parameters,
            policy,
        })
    }
}

crate::schema_via::schema_via_repr!(ToolSpec => ToolSpecRepr, "ToolSpec");

/// How an [`Agent`](super::Agent) behaves. Every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// The conversation (default `"thread-1"`).
    pub thread_id: ThreadId,
    /// The most model calls one run may make (default 32, at least 1).
    pub max_steps: u32,
    /// Instructions sent with every model call (not part of the transcript).
    pub system_prompt: Option<String>,
    /// The executable configuration tickets resume against (default `"default"`).
    pub snapshot_id: String,
    /// The tool catalog tickets resume against (default `"default"`).
    pub catalog_fingerprint: String,
    /// How many steering messages one boundary takes (default `all`).
    pub steering_mode: QueueMode,
    /// How many follow-ups one natural stop takes (default `all`).
    pub follow_up_mode: QueueMode,
    /// The tool catalog by name; a tool not listed is `auto`.
    pub tools: BTreeMap<String, ToolSpec>,
    /// A tool output larger than this (text bytes plus image data) is replaced by a
    /// `malformed` error result (default 1 MiB).
    pub max_tool_output_bytes: usize,
}

/// The default `max_steps`.
pub(crate) const DEFAULT_MAX_STEPS: u32 = 32;
/// The default `max_tool_output_bytes`.
pub(crate) const DEFAULT_MAX_TOOL_OUTPUT_BYTES: usize = 1024 * 1024;

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            thread_id: ThreadId::new("thread-1"),
            max_steps: DEFAULT_MAX_STEPS,
            system_prompt: None,
            snapshot_id: "default".into(),
            catalog_fingerprint: "default".into(),
            steering_mode: QueueMode::All,
            follow_up_mode: QueueMode::All,
            tools: BTreeMap::new(),
            max_tool_output_bytes: DEFAULT_MAX_TOOL_OUTPUT_BYTES,
        }
    }
}

impl AgentConfig {
    /// The default configuration for `thread_id`.
    pub fn for_thread(thread_id: impl Into<ThreadId>) -> Self {
        AgentConfig {
            thread_id: thread_id.into(),
            ..Self::default()
        }
    }

    /// Adds (or replaces) a tool.
    pub fn with_tool(mut self, name: impl Into<String>, spec: ToolSpec) -> Self {
        self.tools.insert(name.into(), spec);
        self
    }

    /// The policy for `tool` (`Auto` when it is not listed).
    pub fn policy(&self, tool: &str) -> ToolPolicy {
        self.tools
            .get(tool)
            .map(|spec| spec.policy)
            .unwrap_or_default()
    }

    /// Rejects a configuration the agent cannot run with.
    pub fn validate(&self) -> Result<(), AgentError> {
        if self.thread_id.is_blank() {
            return Err(AgentError::invalid("config: thread_id is empty"));
        }
        if self.max_steps == 0 {
            return Err(AgentError::invalid("config: max_steps must be at least 1"));
        }
        if self.snapshot_id.trim().is_empty() {
            return Err(AgentError::invalid("config: snapshot_id is empty"));
        }
        if self.catalog_fingerprint.trim().is_empty() {
            return Err(AgentError::invalid("config: catalog_fingerprint is empty"));
        }
        if let Some(name) = self.tools.keys().find(|name| name.trim().is_empty()) {
            return Err(AgentError::invalid(format!(
                "config: tool name {name:?} is empty"
            )));
        }
        Ok(())
    }
}

impl ToolSpec {
    /// An auto tool with a description.
    pub fn auto(description: impl Into<String>) -> Self {
        ToolSpec {
            description: Some(description.into()),
            parameters: None,
            policy: ToolPolicy::Auto,
        }
    }

    /// An approval-gated tool with a description and an optional ticket deadline.
    pub fn gated(description: impl Into<String>, deadline_after_ms: Option<u64>) -> Self {
        ToolSpec {
            description: Some(description.into()),
            parameters: None,
            policy: ToolPolicy::RequireApproval { deadline_after_ms },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_specs_use_the_driver_shape() {
        let spec: ToolSpec = serde_json::from_value(
            json!({"description":"d","policy":"require_approval","deadline_after_ms":5}),
        )
        .unwrap();
        assert_eq!(
            spec.policy,
            ToolPolicy::RequireApproval {
                deadline_after_ms: Some(5)
            }
        );
        let plain: ToolSpec = serde_json::from_value(json!({})).unwrap();
        assert_eq!(plain.policy, ToolPolicy::Auto);
        assert!(serde_json::from_value::<ToolSpec>(json!({"deadline_after_ms":5})).is_err());
        assert!(serde_json::from_value::<ToolSpec>(json!({"colour":"red"})).is_err());
    }

    #[test]
    fn defaults_match_the_spec() {
        let c: AgentConfig = serde_json::from_value(json!({})).unwrap();
        assert_eq!(c.thread_id.as_str(), "thread-1");
        assert_eq!(c.max_steps, 32);
        assert_eq!(c.snapshot_id, "default");
        assert_eq!(c.policy("anything"), ToolPolicy::Auto);
        assert!(AgentConfig { max_steps: 0, ..c }.validate().is_err());
    }
}
