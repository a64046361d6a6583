//! The JSON-lines driver (SPEC §12), as a pure state machine over lines.
//!
//! The `runcore drive` binary reads stdin and writes stdout; everything in between lives here,
//! so any host (or test, or fuzzer) can drive the core with bytes and get exactly the lines the
//! binary would write. [`Driver::handle_line`] takes one input line (without its `\n`) and
//! returns the output lines it produces, the last of which is always
//! `{"type":"idle","line":N}`.
//!
//! Choices this module makes where §12 leaves room (all visible in `runcore schema`):
//! - Unknown fields on an input line are rejected (`invalid_json`), like a missing one.
//! - `content` of `tool_done` / `tool_progress` is a list of content blocks, or a plain string
//!   (one text block).
//! - `prompt` may carry a `run_id`; `config` may carry `max_tool_output_bytes`.
//! - `call_model.tools` lists `{"name", "description"?, "parameters"?}` in name order.
//! - Error lines carry `kind`, `message` and the error's own fields (e.g. `expected`, `got`);
//!   a resume error adds `resume_error`.
//! - A line longer than [`MAX_LINE_BYTES`] is rejected without being parsed.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::{Action, Agent, AgentConfig, AgentEvent, Input, Output, QueueMode, ToolSpec};
use crate::commit::ThreadCommit;
use crate::error::AgentError;
use crate::ids::{CallId, RunId, Step, ThreadId};
use crate::message::{AssistantMessage, ContentBlock, Message, ToolCall, ToolOutput, UserMessage};
use crate::resume::{ResumeCommand, ResumeResult};

/// The longest input line the driver parses (64 MiB).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// How `call_model` lines carry the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContextMode {
    /// Every `call_model` line carries the whole transcript (the default).
    #[default]
    Full,
    /// Each `call_model` line carries `"base": K` and only the messages from index K on, where
    /// K is how many messages earlier `call_model` lines already sent.
    Delta,
}

/// Tool output content: blocks, or a plain string (one text block).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    untagged,
    // Without this, serde says "data did not match any variant of untagged enum ContentInput",
    // which names neither the field nor what it takes.
    expecting = "`content` must be a string or a list of content blocks \
                 ({\"type\":\"text\",\"text\"} or {\"type\":\"image\",\"data\",\"mime_type\"})"
)]
pub enum ContentInput {
    /// Content blocks.
    Blocks(Vec<ContentBlock>),
    /// One text block.
    Text(String),
}

impl ContentInput {
    fn into_blocks(self) -> Vec<ContentBlock> {
        match self {
            ContentInput::Blocks(blocks) => blocks,
            ContentInput::Text(text) => vec![ContentBlock::text(text)],
        }
    }
}

/// An assistant message as a line carries it: the §2 shape, with `"role":"assistant"`
/// (optional here, since the field can only say one thing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct AssistantLine(
    #[serde(with = "crate::message::assistant_with_role")]
    #[schemars(schema_with = "crate::message::assistant_with_role::schema")]
    pub AssistantMessage,
);

/// The `config` line.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigLine {
    /// Default `"thread-1"`.
    #[serde(default)]
    pub thread_id: Option<ThreadId>,
    /// Default 32.
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// Sent with every `call_model`.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Default `"default"`.
    #[serde(default)]
    pub snapshot_id: Option<String>,
    /// Default `"default"`.
    #[serde(default)]
    pub catalog_fingerprint: Option<String>,
    /// `"all"` (default) or `"one_at_a_time"`.
    #[serde(default)]
    pub steering_mode: Option<QueueMode>,
    /// `"all"` (default) or `"one_at_a_time"`.
    #[serde(default)]
    pub follow_up_mode: Option<QueueMode>,
    /// The tool catalog; a tool not listed is `auto`.
    #[serde(default)]
    pub tools: Option<BTreeMap<String, ToolSpec>>,
    /// `"full"` (default) or `"delta"`.
    #[serde(default)]
    pub context: Option<ContextMode>,
    /// Larger tool outputs become `malformed` results (default 1 MiB).
    #[serde(default)]
    pub max_tool_output_bytes: Option<usize>,
    /// The host's clock.
    #[serde(default)]
    pub now_ms: Option<u64>,
}

impl ConfigLine {
    /// The agent configuration this line describes (defaults for what it omits).
    pub fn agent_config(&self) -> AgentConfig {
        let defaults = AgentConfig::default();
        AgentConfig {
            thread_id: self.thread_id.clone().unwrap_or(defaults.thread_id),
            max_steps: self.max_steps.unwrap_or(defaults.max_steps),
            system_prompt: self.system_prompt.clone(),
            snapshot_id: self.snapshot_id.clone().unwrap_or(defaults.snapshot_id),
            catalog_fingerprint: self
                .catalog_fingerprint
                .clone()
                .unwrap_or(defaults.catalog_fingerprint),
            steering_mode: self.steering_mode.unwrap_or(defaults.steering_mode),
            follow_up_mode: self.follow_up_mode.unwrap_or(defaults.follow_up_mode),
            tools: self.tools.clone().unwrap_or_default(),
            max_tool_output_bytes: self
                .max_tool_output_bytes
                .unwrap_or(defaults.max_tool_output_bytes),
        }
    }
}

/// One input line (tagged by `"type"`). Every line may carry `now_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[allow(missing_docs)] // the fields are the SPEC §12 names; each variant says what it maps to
pub enum InputLine {
    /// Configuration; only before the first `prompt`.
    Config(ConfigLine),
    /// Start a run.
    Prompt {
        text: String,
        #[serde(default)]
        run_id: Option<RunId>,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// Queue steering.
    Steer {
        text: String,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// Queue a follow-up.
    FollowUp {
        text: String,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// Cancel the active run.
    Abort {
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// Pause at the next boundary.
    Pause {
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// Streamed model text.
    ModelDelta {
        run_id: RunId,
        step: Step,
        text: String,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// The model's answer (an assistant message; `"role":"assistant"` may be given).
    ModelDone {
        run_id: RunId,
        step: Step,
        message: AssistantLine,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// The model call failed.
    ModelFailed {
        run_id: RunId,
        step: Step,
        code: String,
        message: String,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// Live tool progress.
    ToolProgress {
        run_id: RunId,
        call_id: CallId,
        content: ContentInput,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// A tool's result.
    ToolDone {
        run_id: RunId,
        call_id: CallId,
        content: ContentInput,
        #[serde(default)]
        is_error: bool,
        #[serde(default)]
        details: Option<Value>,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// A full resume command.
    Resume {
        command: ResumeCommand,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// A resume built from the currently committed ticket.
    ResumeTicket {
        result: ResumeResult,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// Cancel the wait.
    CancelWait {
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// End the run by host policy.
    Stop {
        reason: String,
        #[serde(default)]
        now_ms: Option<u64>,
    },
    /// End an expired wait.
    ExpireWait { now_ms: u64 },
    /// Give up on executing tools.
    AbandonTools {
        #[serde(default)]
        now_ms: Option<u64>,
    },
}

/// A tool as `call_model` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ToolDefinition<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<&'a str>,
    /// Its argument schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<&'a Value>,
}

/// The body of an `error` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// `invalid_json`, an agent error kind (SPEC §10), or `store` when the durable driver's
    /// store rejected or failed a commit (SPEC §12.2).
    pub kind: String,
    /// What went wrong, for people.
    pub message: String,
    /// The error's own fields (`expected`, `got`, `resume_error`, …).
    #[serde(flatten)]
    pub details: Map<String, Value>,
}

/// One output line (tagged by `"type"`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(missing_docs)] // the fields are the SPEC §12 names
pub enum OutputLine<'a> {
    /// Call the model with this context.
    CallModel {
        run_id: &'a RunId,
        step: Step,
        final_step: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        system_prompt: Option<&'a str>,
        /// In delta mode: how many messages earlier lines already sent.
        #[serde(skip_serializing_if = "Option::is_none")]
        base: Option<usize>,
        messages: &'a [Message],
        tools: Vec<ToolDefinition<'a>>,
    },
    /// Execute these calls.
    ExecuteTools {
        run_id: &'a RunId,
        step: Step,
        calls: &'a [ToolCall],
    },
    /// Persist this commit before acting on later lines.
    Commit { commit: &'a ThreadCommit },
    /// A notification.
    Event { event: &'a AgentEvent },
    /// The input line was rejected; nothing changed.
    Error { line: u64, error: ErrorBody },
    /// The last line written for input line `line`.
    Idle { line: u64 },
}

/// Drives one [`Agent`] from JSON lines.
#[derive(Debug, Clone)]
pub struct Driver {
    agent: Agent,
    context: ContextMode,
    /// Messages already sent by earlier `call_model` lines (delta mode).
    sent: usize,
    line: u64,
}

impl Default for Driver {
    fn default() -> Self {
        Self::new()
    }
}

fn error_body(error: &AgentError) -> ErrorBody {
    let mut details = match serde_json::to_value(error) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    details.remove("kind");
    ErrorBody {
        kind: error.kind().to_owned(),
        message: error.to_string(),
        details,
    }
}

fn invalid_json(message: impl Into<String>) -> ErrorBody {
    ErrorBody {
        kind: "invalid_json".into(),
        message: message.into(),
        details: Map::new(),
    }
}

fn to_line(line: &OutputLine<'_>) -> String {
    // Our own plain data with string keys: serialization cannot fail.
    serde_json::to_string(line).unwrap_or_default()
}

impl Driver {
    /// A driver with the default configuration (thread `"thread-1"`, 32 steps, full context).
    pub fn new() -> Self {
        Driver {
            agent: Agent::new(AgentConfig::default()).unwrap_or_else(|_| unreachable_default()),
            context: ContextMode::Full,
            sent: 0,
            line: 0,
        }
    }

    /// The driven agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The context mode.
    pub fn context(&self) -> ContextMode {
        self.context
    }

    /// Input lines handled so far.
    pub fn lines_handled(&self) -> u64 {
        self.line
    }

    /// Handles one input line (bytes, without the `\n`) and returns the output lines, the last
    /// of which is `idle`.
    pub fn handle_line(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        self.handle_line_into(bytes, &mut |line| out.push(line));
        out
    }

    /// Like [`handle_line`](Driver::handle_line), handing each output line to `sink`.
    pub fn handle_line_into(&mut self, bytes: &[u8], sink: &mut dyn FnMut(String)) {
        self.line = self.line.saturating_add(1);
        let line = self.line;
        if let Err(error) = self.apply_line(bytes) {
            sink(to_line(&OutputLine::Error { line, error }));
        }
        self.drain_into(sink);
        sink(to_line(&OutputLine::Idle { line }));
    }

    fn apply_line(&mut self, bytes: &[u8]) -> Result<(), ErrorBody> {
        let parsed = Self::parse_line(bytes)?;
        self.apply(parsed).map_err(|e| error_body(&e))
    }

    /// Reads one input line's bytes (without its `\n`) as [`handle_line`](Driver::handle_line)
    /// does: the body of its `invalid_json` error when it is too long, not UTF-8, not a JSON
    /// object with a string `"type"`, or not a known input with its required fields.
    ///
    /// With [`next_line`](Driver::next_line), [`apply`](Driver::apply),
    /// [`poll`](Driver::poll) and [`render`](Driver::render) this is `handle_line` in parts,
    /// for a host that must look at a line before it is applied, or act on an output before its
    /// line is written (a durable driver persists each commit first, SPEC §12.2).
    pub fn parse_line(bytes: &[u8]) -> Result<InputLine, ErrorBody> {
        if bytes.len() > MAX_LINE_BYTES {
            return Err(invalid_json(format!(
                "the line is {} bytes, over the limit of {MAX_LINE_BYTES}",
                bytes.len()
            )));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            invalid_json(format!(
                "the line is not valid UTF-8 (at byte {})",
                e.valid_up_to()
            ))
        })?;
        if text.trim().is_empty() {
            return Err(invalid_json("the line is empty; expected one JSON object"));
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| invalid_json(format!("the line is not valid JSON: {e}")))?;
        let Value::Object(object) = &value else {
            return Err(invalid_json(format!(
                "expected a JSON object with a \"type\", got {}",
                json_kind(&value)
            )));
        };
        match object.get("type") {
            Some(Value::String(_)) => {}
            Some(other) => {
                return Err(invalid_json(format!(
                    "\"type\" must be a string, got {}",
                    json_kind(other)
                )));
            }
            None => return Err(invalid_json("the object has no \"type\" field")),
        }
        serde_json::from_value(value)
            .map_err(|e| invalid_json(format!("not a valid input line: {e}")))
    }

    /// Counts one more input line and returns its number (1-based): the `line` of its `error`
    /// and `idle` lines. [`handle_line`](Driver::handle_line) does this itself.
    pub fn next_line(&mut self) -> u64 {
        self.line = self.line.saturating_add(1);
        self.line
    }

    /// The driven agent's next output ([`Agent::poll`]), for a host that acts on it before
    /// writing its line with [`render`](Driver::render). Call it until it returns `None` after
    /// each applied line, as [`drain_into`](Driver::drain_into) does.
    #[must_use]
    pub fn poll(&mut self) -> Option<Output> {
        self.agent.poll()
    }

    /// Applies one parsed line.
    pub fn apply(&mut self, line: InputLine) -> Result<(), AgentError> {
        let (input, now_ms) = match line {
            InputLine::Config(config) => {
                let agent_config = config.agent_config();
                self.agent.apply_at(
                    Input::Config {
                        config: agent_config,
                    },
                    config.now_ms,
                )?;
                self.context = config.context.unwrap_or_default();
                return Ok(());
            }
            InputLine::Prompt {
                text,
                run_id,
                now_ms,
            } => (
                Input::Prompt {
                    message: UserMessage::text(text),
                    now_ms: now_ms.unwrap_or(self.agent.clock_ms()),
                    run_id,
                },
                now_ms,
            ),
            InputLine::Steer { text, now_ms } => (
                Input::Steer {
                    message: UserMessage::text(text),
                },
                now_ms,
            ),
            InputLine::FollowUp { text, now_ms } => (
                Input::FollowUp {
                    message: UserMessage::text(text),
                },
                now_ms,
            ),
            InputLine::Abort { now_ms } => (Input::Abort, now_ms),
            InputLine::Pause { now_ms } => (Input::Pause, now_ms),
            InputLine::ModelDelta {
                run_id,
                step,
                text,
                now_ms,
            } => (Input::ModelDelta { run_id, step, text }, now_ms),
            InputLine::ModelDone {
                run_id,
                step,
                message,
                now_ms,
            } => (
                Input::ModelDone {
                    run_id,
                    step,
                    message: message.0,
                },
                now_ms,
            ),
            InputLine::ModelFailed {
                run_id,
                step,
                code,
                message,
                now_ms,
            } => (
                Input::ModelFailed {
                    run_id,
                    step,
                    code,
                    message,
                },
                now_ms,
            ),
            InputLine::ToolProgress {
                run_id,
                call_id,
                content,
                now_ms,
            } => (
                Input::ToolProgress {
                    run_id,
                    call_id,
                    content: content.into_blocks(),
                },
                now_ms,
            ),
            InputLine::ToolDone {
                run_id,
                call_id,
                content,
                is_error,
                details,
                now_ms,
            } => (
                Input::ToolDone {
                    run_id,
                    output: ToolOutput {
                        call_id: call_id.clone(),
                        content: content.into_blocks(),
                        is_error,
                        details,
                    },
                    call_id,
                },
                now_ms,
            ),
            InputLine::Resume { command, now_ms } => (Input::Resume { command }, now_ms),
            InputLine::ResumeTicket { result, now_ms } => {
                (Input::ResumeTicket { result, now_ms }, now_ms)
            }
            InputLine::CancelWait { now_ms } => (Input::CancelWait, now_ms),
            InputLine::Stop { reason, now_ms } => (Input::Stop { reason }, now_ms),
            InputLine::ExpireWait { now_ms } => (Input::ExpireWait { now_ms }, Some(now_ms)),
            InputLine::AbandonTools { now_ms } => (Input::AbandonTools, now_ms),
        };
        self.agent.apply_at(input, now_ms)
    }

    /// Drains the agent, handing each output as a JSON line to `sink`.
    pub fn drain_into(&mut self, sink: &mut dyn FnMut(String)) {
        while let Some(output) = self.agent.poll() {
            let line = self.render(&output);
            sink(line);
        }
    }

    /// Renders one output as its JSON line (in delta mode this advances the sent count).
    pub fn render(&mut self, output: &Output) -> String {
        render_output_line(&self.agent, output, self.context, &mut self.sent)
    }

    /// A driver around an existing agent (e.g. one from [`Agent::recover`] or
    /// [`Agent::restore_json`]); in delta mode the next `call_model` sends from `base` 0.
    pub fn from_agent(agent: Agent, context: ContextMode) -> Self {
        Driver {
            agent,
            context,
            sent: 0,
            line: 0,
        }
    }
}

/// Renders one output of `agent` as its driver JSON line. In delta mode `sent` is how many
/// messages earlier `call_model` lines carried; it is advanced.
pub fn render_output_line(
    agent: &Agent,
    output: &Output,
    context: ContextMode,
    sent: &mut usize,
) -> String {
    match output {
        Output::Action(Action::CallModel {
            run_id,
            step,
            final_step,
        }) => {
            let config = agent.config();
            let transcript = agent.transcript();
            let (base, messages) = match context {
                ContextMode::Full => (None, transcript),
                ContextMode::Delta => {
                    let base = (*sent).min(transcript.len());
                    (Some(base), transcript.get(base..).unwrap_or_default())
                }
            };
            let tools = config
                .tools
                .iter()
                .map(|(name, spec)| ToolDefinition {
                    name,
                    description: spec.description.as_deref(),
                    parameters: spec.parameters.as_ref(),
                })
                .collect();
            let line = to_line(&OutputLine::CallModel {
                run_id,
                step: *step,
                final_step: *final_step,
                system_prompt: config.system_prompt.as_deref(),
                base,
                messages,
                tools,
            });
            *sent = transcript.len();
            line
        }
        Output::Action(Action::ExecuteTools {
            run_id,
            step,
            calls,
        }) => to_line(&OutputLine::ExecuteTools {
            run_id,
            step: *step,
            calls,
        }),
        Output::Commit(commit) => to_line(&OutputLine::Commit { commit }),
        Output::Event(event) => to_line(&OutputLine::Event { event }),
    }
}

/// The `error` line for a rejected input.
pub fn error_line(line: u64, error: &AgentError) -> String {
    to_line(&OutputLine::Error {
        line,
        error: error_body(error),
    })
}

/// The `idle` line that closes input line `line`.
pub fn idle_line(line: u64) -> String {
    to_line(&OutputLine::Idle { line })
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The default configuration is valid by construction; this is never reached.
fn unreachable_default() -> Agent {
    debug_assert!(false, "the default configuration must be valid");
    // Fall back to a configuration that cannot fail validation.
    match Agent::new(AgentConfig::for_thread("thread-1")) {
        Ok(agent) => agent,
        Err(_) => unreachable_default(),
    }
}

/// JSON Schema (draft 2020-12) of one input line (the deserialization contract).
pub fn input_line_schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    generator.into_root_schema_for::<InputLine>().to_value()
}

/// JSON Schema (draft 2020-12) of one output line (the serialization contract).
pub fn output_line_schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    generator
        .into_root_schema_for::<OutputLine<'static>>()
        .to_value()
}

/// JSON Schema (draft 2020-12) of the driver's input and output lines, as one compound
/// document: each line schema is an embedded resource (its own `$id`) under `$defs`, so its
/// internal `$ref`s resolve within it.
pub fn json_schema() -> Value {
    let embed = |mut schema: Value, id: &str| {
        if let Value::Object(map) = &mut schema {
            map.remove("$schema");
            map.insert("$id".into(), Value::from(id));
        }
        schema
    };
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:runcore:driver",
        "title": "runcore JSON-lines driver",
        "description": "One input object per line on stdin; output objects, one per line, on stdout. After input line N the driver writes that line's outputs, then {\"type\":\"idle\",\"line\":N}.",
        "$defs": {
            "input_line": embed(input_line_schema(), "urn:runcore:driver:input-line"),
            "output_line": embed(output_line_schema(), "urn:runcore:driver:output-line"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_ends_with_idle() {
        let mut d = Driver::new();
        let out = d.handle_line(b"not json");
        assert_eq!(out.len(), 2);
        assert!(out[0].contains("\"invalid_json\""));
        assert_eq!(out[1], r#"{"type":"idle","line":1}"#);
        let out = d.handle_line(br#"{"type":"prompt","text":"hi"}"#);
        assert!(out[0].starts_with(r#"{"type":"commit""#));
        assert!(out.iter().any(|l| l.starts_with(r#"{"type":"call_model""#)));
        assert_eq!(out.last().unwrap(), r#"{"type":"idle","line":2}"#);
    }
}
