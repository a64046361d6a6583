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
//! - `tool_done` may carry `meta`, a JSON object (SPEC §2.1) that becomes the result message's
//!   `meta`; one that is not an object is `invalid_json`, naming `meta` (as a message's is).
//! - `prompt` may carry a `run_id`; `config` may carry `max_tool_output_bytes`.
//! - `call_model.tools` lists `{"name", "description"?, "parameters"?}` in name order.
//! - Error lines carry `kind`, `message` and the error's own fields (e.g. `expected`, `got`);
//!   a resume error adds `resume_error`.
//! - A line longer than [`MAX_LINE_BYTES`] is rejected without being parsed.
//! - `compact.summary` is a string, a list of content blocks, or a user message object (to
//!   give the summary an `id`). After a compaction, delta context restarts from `base` 0 with
//!   the whole model context (summary first), then sends deltas of the model context again.
//!
//! [`DurableDriver`](crate::host::DurableDriver) is the same driver with a store behind it (SPEC §12.2, `runcore drive
//! --store URL`): it recovers the thread at start and applies every commit to the store before
//! handing out its line.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::{Action, Agent, AgentConfig, AgentEvent, Input, Output};
use crate::commit::ThreadCommit;
use crate::error::AgentError;
use crate::ids::{RunId, Step, ThreadId};
use crate::message::{Message, ToolCall};
use crate::store::StoreError;

mod commit_line;

pub use commit_line::{CommitLineError, StoreWrite};

pub mod limits;

/// The longest input line the driver parses (64 MiB); see [`limits`] for every input limit.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// How `call_model` lines carry the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ContextMode {
    /// Every `call_model` line carries the whole transcript (the default).
    #[default]
    Full,
    /// Each `call_model` line carries `"base": K` and only the messages from index K on, where
    /// K is how many messages earlier `call_model` lines already sent.
    Delta,
}

crate::named::named_enum!(ContextMode, "context", { Full => "full", Delta => "delta" });

/// One input line, parsed: the library's own [`Input`] (the line's `"type"` and fields) and
/// the line-level fields beside it.
///
/// There is no second copy of the inputs here: the fields of a line are exactly the serde shape
/// of [`Input`] (and of [`AgentConfig`] for `config`), so a new input reaches the driver by
/// being added to [`Input`].
#[derive(Debug, Clone, PartialEq)]
pub struct InputLine {
    /// The input.
    pub input: Input,
    /// The host's clock for this line (SPEC §8.5); absent, the agent's clock stands still.
    /// Required on `expire_wait` and `timeout`.
    pub now_ms: Option<u64>,
    /// `config` only: how `call_model` lines carry the transcript (default `full`).
    pub context: Option<ContextMode>,
    /// `config` only: the thread the line names. `None` when it names none: the config then
    /// holds the default thread, and a driver bound to a thread (the durable driver,
    /// `runcore drive --thread`) takes the line as being for its own thread.
    pub thread: Option<ThreadId>,
}

/// Why a configuration object ([`InputLine::config`]) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigObjectError {
    /// It is not a JSON object (the kind it is instead).
    #[error("a config must be an object with the fields of a config line, got {0}")]
    NotAnObject(&'static str),
    /// A field does not read (the driver's message).
    #[error("not a valid config: {0}")]
    Invalid(String),
}

/// Inputs whose line must say what time it is.
const NEEDS_NOW: [&str; 2] = ["expire_wait", "timeout"];

/// Inputs without fields. serde's `deny_unknown_fields` does not reach the unit variants of an
/// internally tagged enum, so the driver rejects their extra fields itself.
const NO_FIELDS: [&str; 7] = [
    "abort",
    "pause",
    "cancel_wait",
    "expire_wait",
    "abandon_tools",
    "continue",
    "timeout",
];

impl InputLine {
    /// The line of `input` at the host's clock `now_ms`, with no line-level field beside it
    /// (what a binding's `agent.prompt(...)` stands for).
    pub fn new(input: Input, now_ms: Option<u64>) -> InputLine {
        InputLine {
            input,
            now_ms,
            context: None,
            thread: None,
        }
    }

    /// Reads a configuration object (the fields of a `config` line, its `"type"` optional:
    /// what `runcore drive --config FILE` holds and what a binding's `config` argument is);
    /// `None` or `null` is the default configuration.
    pub fn config(fields: Option<Value>) -> Result<InputLine, ConfigObjectError> {
        let mut object = match fields {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(object)) => object,
            Some(other) => return Err(ConfigObjectError::NotAnObject(json_kind(&other))),
        };
        object.insert("type".into(), Value::from("config"));
        let line =
            InputLine::from_value(Value::Object(object)).map_err(ConfigObjectError::Invalid)?;
        match line.input {
            Input::Config(_) => Ok(line),
            _ => Err(ConfigObjectError::Invalid(
                "it does not read as a config".into(),
            )),
        }
    }

    /// Parses one line's JSON text.
    pub fn parse(text: &str) -> Result<InputLine, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("the line is not valid JSON: {e}"))?;
        InputLine::from_value(value)
    }

    /// Reads one line from its JSON value: an object with a string `"type"`.
    pub fn from_value(value: Value) -> Result<InputLine, String> {
        let Value::Object(mut object) = value else {
            return Err(format!(
                "expected a JSON object with a \"type\", got {}",
                json_kind(&value)
            ));
        };
        let kind = match object.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            Some(other) => {
                return Err(format!(
                    "\"type\" must be a string, got {}",
                    json_kind(other)
                ));
            }
            None => return Err("the object has no \"type\" field".to_owned()),
        };
        let invalid = |e: serde_json::Error| format!("not a valid input line: {e}");
        let now_ms = match object.remove("now_ms") {
            None | Some(Value::Null) => None,
            Some(value) => Some(
                serde_json::from_value::<u64>(value)
                    .map_err(|e| format!("not a valid input line: now_ms: {e}"))
                    .and_then(limits::check_now_ms)?,
            ),
        };
        if now_ms.is_none() && NEEDS_NOW.contains(&kind.as_str()) {
            return Err(format!("not a valid input line: {kind} needs `now_ms`"));
        }
        let context = match (kind.as_str(), object.remove("context")) {
            (_, None | Some(Value::Null)) => None,
            ("config", Some(value)) => {
                Some(serde_json::from_value::<ContextMode>(value).map_err(invalid)?)
            }
            (_, Some(value)) => {
                // Not a field of this input: put it back so serde names it as unknown.
                object.insert("context".into(), value);
                None
            }
        };
        let thread = match (kind.as_str(), object.get("thread_id")) {
            ("config", Some(Value::String(thread))) => Some(ThreadId::from(thread.as_str())),
            _ => None,
        };
        if NO_FIELDS.contains(&kind.as_str())
            && let Some(extra) = object.keys().find(|key| *key != "type")
        {
            return Err(format!(
                "not a valid input line: unknown field `{extra}`, there are no fields"
            ));
        }
        let input = serde_json::from_value::<Input>(Value::Object(object)).map_err(invalid)?;
        Ok(InputLine {
            input,
            now_ms,
            context,
            thread,
        })
    }
}

/// A tool as `call_model` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
        /// In delta mode: how many messages of the model context earlier lines already sent
        /// (0 after a compaction: the host replaces its copy, SPEC §8.9).
        #[serde(skip_serializing_if = "Option::is_none")]
        base: Option<usize>,
        /// The model context from `base` on (from the start in full mode): the compaction's
        /// summary first, if any, then the transcript from the context start.
        #[cfg_attr(feature = "schema", schemars(with = "Vec<Message>"))]
        messages: ContextMessages<'a>,
        tools: Vec<ToolDefinition<'a>>,
    },
    /// Execute these calls.
    ExecuteTools {
        run_id: &'a RunId,
        step: Step,
        calls: &'a [ToolCall],
    },
    /// Persist this commit before acting on later lines, fenced by its operation fields
    /// (SPEC §7.1, §12.1).
    Commit {
        commit: &'a ThreadCommit,
        /// Commits of this run emitted before this one.
        ordinal: u64,
        /// The thread's commit count this commit builds on.
        expected_thread_version: u64,
        /// SHA-256 (lowercase hex) of the commit's canonical JSON.
        payload_hash: String,
    },
    /// A notification.
    Event { event: &'a AgentEvent },
    /// The input line was rejected; nothing changed.
    Error { line: u64, error: ErrorBody },
    /// The last line written for input line `line`; `timeout_ms` when something is due then
    /// (send a `timeout` line at that time, SPEC §12.1).
    Idle {
        line: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
    },
}

/// Messages of a model context, borrowed: an optional summary then a slice of the transcript
/// (written as one JSON array, nothing copied).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextMessages<'a> {
    /// The compaction's summary, when the context starts with it.
    pub summary: Option<&'a Message>,
    /// The transcript messages that follow.
    pub messages: &'a [Message],
}

impl<'a> ContextMessages<'a> {
    /// The messages in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a Message> + 'a {
        self.summary.into_iter().chain(self.messages.iter())
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.messages.len() + usize::from(self.summary.is_some())
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Serialize for ContextMessages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// What earlier `call_model` lines carried, in delta context: how many messages of the model
/// context, and under which compaction (SPEC §8.9). A new compaction starts the delta over
/// from `base` 0. The default is "nothing sent".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SentContext {
    /// The `keep_from` of the compaction the sent messages belong to.
    compaction: Option<usize>,
    /// Model-context messages sent.
    messages: usize,
}

/// Drives one [`Agent`] from JSON lines.
#[derive(Debug, Clone)]
pub struct Driver {
    agent: Agent,
    context: ContextMode,
    /// What earlier `call_model` lines already sent (delta mode).
    sent: SentContext,
    line: u64,
}

impl Default for Driver {
    fn default() -> Self {
        Self::new()
    }
}

/// The §10 error body of `error` (`kind`, `message`, and the error's own fields beside them):
/// what an `error` line carries, and what every binding and server answers for a refused input
/// (so the shape is built here once).
pub fn error_body(error: &AgentError) -> ErrorBody {
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

/// The body of a store's error (`kind` `store`, `code` [`StoreError::code`], `message` the
/// error's text): what the bindings raise and the Restate worker answers for a store call that
/// failed or was refused, built here once. A durable driver's `store` line carries the same
/// body with advice in its message ([`host::store_error_line`](crate::host::store_error_line)).
pub fn store_error_body(error: &StoreError) -> ErrorBody {
    let mut details = Map::new();
    details.insert("code".into(), Value::from(error.code()));
    ErrorBody {
        kind: "store".into(),
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

/// An output line as the JSON text the driver writes (without its `\n`).
pub fn render_line(line: &OutputLine<'_>) -> String {
    // Our own plain data with string keys: serialization cannot fail. Were it to, a debug
    // build stops here, and a release build writes an `internal` error line rather than an
    // empty one a host would misread.
    serde_json::to_string(line).unwrap_or_else(|error| {
        debug_assert!(false, "an output line failed to serialize: {error}");
        r#"{"type":"error","line":0,"error":{"kind":"internal","message":"an output line failed to serialize"}}"#.to_owned()
    })
}

impl Driver {
    /// A driver with the default configuration (thread `"thread-1"`, 32 steps, full context).
    pub fn new() -> Self {
        Driver {
            agent: Agent::new(AgentConfig::default()).unwrap_or_else(|_| unreachable_default()),
            context: ContextMode::Full,
            sent: SentContext::default(),
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
            sink(render_line(&OutputLine::Error { line, error }));
        }
        self.drain_into(sink);
        sink(idle_line(line, self.agent.poll_timeout()));
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
            return Err(invalid_json(limits::line_too_long(bytes.len())));
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
        limits::check_json_depth(bytes).map_err(|e| error_body(&AgentError::InvalidInput(e)))?;
        InputLine::parse(text).map_err(invalid_json)
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

    /// Applies one parsed line: its input at its time (the agent's clock when it has none).
    pub fn apply(&mut self, line: InputLine) -> Result<(), AgentError> {
        let now_ms = line.now_ms.unwrap_or(self.agent.clock_ms());
        let is_config = matches!(line.input, Input::Config(_));
        self.agent.handle(line.input, now_ms)?;
        if is_config {
            self.context = line.context.unwrap_or_default();
        }
        Ok(())
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
            sent: SentContext::default(),
            line: 0,
        }
    }
}

/// The `call_model` line of an outstanding call (the model context borrowed from the agent,
/// nothing copied). In delta mode `sent` is what earlier `call_model` lines carried; it is
/// advanced (after a compaction the line carries `base` 0 and the whole model context). A binding that converts lines to its own objects builds them here,
/// so its lines cannot drift from the driver's.
pub fn call_model_line<'a>(
    agent: &'a Agent,
    run_id: &'a RunId,
    step: Step,
    final_step: bool,
    context: ContextMode,
    sent: &mut SentContext,
) -> OutputLine<'a> {
    let config = agent.config();
    let compaction = agent.compaction();
    let whole = ContextMessages {
        summary: compaction.map(crate::agent::Compaction::summary),
        messages: agent.context_tail(),
    };
    let current = compaction.map(crate::agent::Compaction::keep_from);
    let (base, messages) = match context {
        ContextMode::Full => (None, whole),
        ContextMode::Delta => {
            let base = if sent.compaction == current {
                sent.messages.min(whole.len())
            } else {
                0
            };
            (Some(base), context_from(whole, base))
        }
    };
    *sent = SentContext {
        compaction: current,
        messages: whole.len(),
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
    OutputLine::CallModel {
        run_id,
        step,
        final_step,
        system_prompt: config.system_prompt.as_deref(),
        base,
        messages,
        tools,
    }
}

/// `whole[base..]`.
fn context_from(whole: ContextMessages<'_>, base: usize) -> ContextMessages<'_> {
    match (whole.summary, base) {
        (_, 0) => whole,
        (Some(_), base) => ContextMessages {
            summary: None,
            messages: whole.messages.get(base - 1..).unwrap_or_default(),
        },
        (None, base) => ContextMessages {
            summary: None,
            messages: whole.messages.get(base..).unwrap_or_default(),
        },
    }
}

/// The driver's line for one output of `agent`, as the driver's own [`OutputLine`] type: what
/// [`render_output_line`] writes, for a binding that turns it into its language's objects
/// instead of JSON text. In delta mode `sent` is what earlier `call_model` lines carried; it
/// is advanced. `scratch` is room for a commit's canonical JSON
/// ([`ThreadCommit::payload_hash_with`](crate::ThreadCommit::payload_hash_with)), kept between
/// calls by a caller that renders many outputs.
pub fn output_line<'a>(
    agent: &'a Agent,
    output: &'a Output,
    context: ContextMode,
    sent: &mut SentContext,
    scratch: &mut Vec<u8>,
) -> OutputLine<'a> {
    match output {
        Output::Action(Action::CallModel {
            run_id,
            step,
            final_step,
        }) => call_model_line(agent, run_id, *step, *final_step, context, sent),
        Output::Action(Action::ExecuteTools {
            run_id,
            step,
            calls,
        }) => OutputLine::ExecuteTools {
            run_id,
            step: *step,
            calls,
        },
        Output::Commit(commit) => OutputLine::Commit {
            commit: &commit.commit,
            ordinal: commit.ordinal,
            expected_thread_version: commit.expected_thread_version,
            payload_hash: commit.commit.payload_hash_with(scratch),
        },
        Output::Event(event) => OutputLine::Event { event },
    }
}

/// Renders one output of `agent` as its driver JSON line (without its `\n`): [`output_line`],
/// written. In delta mode `sent` is what earlier `call_model` lines carried; it is advanced.
pub fn render_output_line(
    agent: &Agent,
    output: &Output,
    context: ContextMode,
    sent: &mut SentContext,
) -> String {
    render_line(&output_line(agent, output, context, sent, &mut Vec::new()))
}

/// The `error` line for a rejected input.
pub fn error_line(line: u64, error: &AgentError) -> String {
    render_line(&OutputLine::Error {
        line,
        error: error_body(error),
    })
}

/// The `idle` line that closes input line `line`, with the agent's
/// [`poll_timeout`](Agent::poll_timeout) after it.
pub fn idle_line(line: u64, timeout_ms: Option<u64>) -> String {
    render_line(&OutputLine::Idle { line, timeout_ms })
}

pub(crate) fn json_kind(value: &Value) -> &'static str {
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

/// JSON Schema (draft 2020-12) of one input line (the deserialization contract): the schema
/// of [`Input`] with the line-level fields added to every variant (`now_ms`, required on
/// `expire_wait` and `timeout`) and to `config` (`context`).
///
/// With the `schema` feature.
#[cfg(feature = "schema")]
pub fn input_line_schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<Input>().to_value();
    let context = schemars::SchemaGenerator::default()
        .into_root_schema_for::<ContextMode>()
        .to_value();
    if let Some(Value::Array(variants)) = schema.get_mut("oneOf") {
        for variant in variants {
            let kind = variant
                .pointer("/properties/type/const")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_default();
            let Some(Value::Object(properties)) = variant.get_mut("properties") else {
                continue;
            };
            properties.insert(
                "now_ms".into(),
                serde_json::json!({
                    "description": "The host's clock for this input (SPEC §8.5).",
                    "type": "integer", "format": "uint64", "minimum": 0,
                }),
            );
            if kind == "config" {
                let mut context = context.clone();
                if let Value::Object(map) = &mut context {
                    map.remove("$schema");
                    map.remove("title");
                    map.insert(
                        "description".into(),
                        Value::from("How call_model lines carry the transcript (default full)."),
                    );
                }
                properties.insert("context".into(), context);
            }
            if NEEDS_NOW.contains(&kind.as_str())
                && let Some(Value::Array(required)) = variant.get_mut("required")
            {
                required.push(Value::from("now_ms"));
            }
        }
    }
    schema
}

/// JSON Schema (draft 2020-12) of one output line (the serialization contract).
///
/// With the `schema` feature.
#[cfg(feature = "schema")]
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
///
/// With the `schema` feature.
#[cfg(feature = "schema")]
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
