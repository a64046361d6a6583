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
//! - A line longer than [`MAX_LINE_BYTES`] is rejected without being parsed (every input limit
//!   is in [`crate::limits`]).
//! - `compact.summary` is a string, a list of content blocks, or a user message object (to
//!   give the summary an `id`). After a compaction, delta context restarts from `base` 0 with
//!   the whole model context (summary first), then sends deltas of the model context again.
//!
//! [`DurableDriver`](crate::host::DurableDriver) is the same driver with a store behind it (SPEC §12.2, `runcore drive
//! --store URL`): it recovers the thread at start and applies every commit to the store before
//! handing out its line.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::agent::{Action, Agent, AgentConfig, AgentEvent, Input, Output};
use crate::commit::ThreadCommit;
use crate::error::{AgentError, json_kind};
use crate::ids::{RunId, Step, ThreadId};
use crate::message::{Message, ToolCall};
use crate::model_call::ToolDefinition;
use crate::store::StoreError;

mod commit_line;

pub use commit_line::{CommitLineError, StoreWrite};

use crate::limits::{self, MAX_LINE_BYTES};

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
    /// Whether `input` was measured against [`crate::limits`] as this line was read (its text
    /// or value), so [`Driver::apply`] does not measure it again. Set only by the readers
    /// ([`InputLine::parse`], [`InputLine::from_value`]); a line built around an input is
    /// measured by [`Agent::handle`].
    within_limits: bool,
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
const NO_FIELDS: [&str; 8] = [
    "abort",
    "pause",
    "clear_queues",
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
            within_limits: false,
        }
    }

    /// `self` with its `context` and `thread` (a `config` line's line-level fields).
    pub fn with_config_fields(
        self,
        context: Option<ContextMode>,
        thread: Option<ThreadId>,
    ) -> InputLine {
        InputLine {
            context,
            thread,
            ..self
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
        let line = InputLine::from_value(Value::Object(object))
            .map_err(|body| ConfigObjectError::Invalid(body.message))?;
        match line.input {
            Input::Config(_) => Ok(line),
            _ => Err(ConfigObjectError::Invalid(
                "it does not read as a config".into(),
            )),
        }
    }

    /// Parses one line's JSON text, held to the input limits ([`crate::limits`]: its nesting
    /// measured on the text, before it is parsed; its `now_ms`); the error is the body of the
    /// driver's `error` line. (The line cap is the reader's: [`Driver::parse_line`].) The
    /// line's fields are read straight from their text (no `serde_json::Value` in between,
    /// which would sort a `meta`'s keys), and integers beyond 64 bits are protected from
    /// serde's buffering ([`crate::protect_big_integers`]), so a `meta` comes through exactly
    /// (SPEC §2.1).
    pub fn parse(text: &str) -> Result<InputLine, ErrorBody> {
        limits::check_json_depth(text.as_bytes())
            .map_err(|e| error_body(&AgentError::InvalidInput(e)))?;
        let text = crate::message::protect_big_integers(text);
        match serde_json::from_str::<LineFields<'_>>(&text) {
            Ok(LineFields(Some(fields))) => InputLine::read_fields(fields),
            // Not an object: the same error as for a value.
            Ok(LineFields(None)) => match serde_json::from_str::<Value>(&text) {
                Ok(value) => InputLine::from_value(value),
                Err(e) => Err(invalid_json(format!("the line is not valid JSON: {e}"))),
            },
            Err(e) => Err(invalid_json(format!("the line is not valid JSON: {e}"))),
        }
    }

    /// Reads one line from its JSON value: an object with a string `"type"`, held to the input
    /// limits ([`crate::limits`]: its nesting measured on the value, its `now_ms`). The error
    /// is the body of the driver's `error` line: `invalid_json` when the line does not read as
    /// an input, `invalid_input` when it nests too deep or holds a user message with a role
    /// other than `"user"`.
    pub fn from_value(value: Value) -> Result<InputLine, ErrorBody> {
        limits::check_depth(&value).map_err(|e| error_body(&AgentError::InvalidInput(e)))?;
        let Value::Object(object) = value else {
            return Err(invalid_json(format!(
                "expected a JSON object with a \"type\", got {}",
                json_kind(&value)
            )));
        };
        let texts: Vec<(String, Box<RawValue>)> = object
            .into_iter()
            .map(|(key, value)| {
                let text = serde_json::value::to_raw_value(&value);
                text.map(|text| (key, text))
            })
            .collect::<Result<_, _>>()
            .map_err(|e| invalid_json(format!("not a valid input line: {e}")))?;
        InputLine::read_fields(
            texts
                .iter()
                .map(|(key, text)| (key.clone(), &**text))
                .collect(),
        )
    }

    /// Reads a line whose nesting was measured, from its fields: the roles of its user
    /// messages first (`invalid_input`), then the input (`invalid_json`).
    fn read_fields(fields: Vec<(String, &RawValue)>) -> Result<InputLine, ErrorBody> {
        check_user_roles(&fields)?;
        InputLine::from_fields(fields).map_err(invalid_json)
    }

    /// Reads one line from its fields, each as its JSON text, in the order they came.
    fn from_fields(mut fields: Vec<(String, &RawValue)>) -> Result<InputLine, String> {
        fn take(fields: &mut Vec<(String, &RawValue)>, name: &str) -> Option<Value> {
            let at = fields.iter().position(|(key, _)| key == name)?;
            let (_, text) = fields.remove(at);
            // Already read once as JSON: it reads again (a marker of a big integer reads as
            // the number serde_json always made of it).
            serde_json::from_str(text.get()).ok()
        }
        let peek = field_value;
        let kind = match peek(&fields, "type") {
            Some(Value::String(kind)) => kind,
            Some(other) => {
                return Err(format!(
                    "\"type\" must be a string, got {}",
                    json_kind(&other)
                ));
            }
            None => return Err("the object has no \"type\" field".to_owned()),
        };
        let invalid = |e: serde_json::Error| format!("not a valid input line: {e}");
        let now_ms = match take(&mut fields, "now_ms") {
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
        let context = if kind == "config" {
            match take(&mut fields, "context") {
                None | Some(Value::Null) => None,
                Some(value) => Some(serde_json::from_value::<ContextMode>(value).map_err(invalid)?),
            }
        } else {
            // Not a field of this input: left in, so serde names it as unknown (a null one
            // is dropped, as on a config line).
            if peek(&fields, "context") == Some(Value::Null) {
                take(&mut fields, "context");
            }
            None
        };
        let thread = match (kind.as_str(), peek(&fields, "thread_id")) {
            ("config", Some(Value::String(thread))) => Some(ThreadId::from(thread.as_str())),
            _ => None,
        };
        if NO_FIELDS.contains(&kind.as_str())
            && let Some((extra, _)) = fields.iter().find(|(key, _)| key != "type")
        {
            return Err(format!(
                "not a valid input line: unknown field `{extra}`, there are no fields"
            ));
        }
        // An import (the longest line a host writes, SPEC §8.10) reads its messages straight
        // from their text, without serde buffering the whole line first; anything that does not
        // read so goes the general way, for its error.
        if kind == "import"
            && let [(first, _), (second, _)] = fields.as_slice()
            && matches!(
                (first.as_str(), second.as_str()),
                ("type", "messages") | ("messages", "type")
            )
            && let Some((_, text)) = fields.iter().find(|(key, _)| key == "messages")
            && let Ok(messages) = serde_json::from_str::<Vec<crate::message::Message>>(text.get())
        {
            return Ok(InputLine {
                input: Input::Import { messages },
                now_ms,
                context,
                thread,
                within_limits: true,
            });
        }
        let input = Input::deserialize(
            serde::de::value::MapDeserializer::<_, serde_json::Error>::new(fields.into_iter()),
        )
        .map_err(invalid)?;
        Ok(InputLine {
            input,
            now_ms,
            context,
            thread,
            within_limits: true,
        })
    }
}

/// A line's fields in order, each as its JSON text; `None` when the line is not an object.
struct LineFields<'a>(Option<Vec<(String, &'a RawValue)>>);

impl<'de> Deserialize<'de> for LineFields<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = LineFields<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<LineFields<'de>, A::Error> {
                let mut fields = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    fields.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(LineFields(Some(fields)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<LineFields<'de>, E> {
                Ok(LineFields(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<LineFields<'de>, E> {
                Ok(LineFields(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<LineFields<'de>, E> {
                Ok(LineFields(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<LineFields<'de>, E> {
                Ok(LineFields(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<LineFields<'de>, E> {
                Ok(LineFields(None))
            }
            fn visit_unit<E>(self) -> Result<LineFields<'de>, E> {
                Ok(LineFields(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<LineFields<'de>, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(LineFields(None))
            }
        }
        deserializer.deserialize_any(Fields)
    }
}

/// The value of field `name` of a line's fields, read from its text.
fn field_value(fields: &[(String, &RawValue)], name: &str) -> Option<Value> {
    let (_, text) = fields.iter().find(|(key, _)| key == name)?;
    serde_json::from_str(text.get()).ok()
}

/// A user message on a line reads as it is written: its `role`, if given, is `"user"`
/// ([`crate::agent::check_user_roles`] on the fields that hold user messages).
fn check_user_roles(fields: &[(String, &RawValue)]) -> Result<(), ErrorBody> {
    let Some(Value::String(kind)) = field_value(fields, "type") else {
        return Ok(());
    };
    if !matches!(kind.as_str(), "prompt" | "steer" | "follow_up" | "compact") {
        return Ok(());
    }
    let mut object = Map::new();
    for name in ["text", "summary", "messages"] {
        if let Some(value) = field_value(fields, name) {
            object.insert(name.into(), value);
        }
    }
    crate::agent::check_user_roles(&kind, &object).map_err(|e| error_body(&e))
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

/// The name of the field of a store error's body that says what the store said (SPEC §12.4):
/// `{"kind":"store","reason":…,"message":…}`.
pub const STORE_REASON: &str = "reason";

/// The name that field had before it was [`STORE_REASON`] in every body (`code`), read back by
/// [`ErrorBody::store_reason`] from bodies written by older versions.
const OLD_STORE_REASON: &str = "code";

/// The body of a store's error: `kind` `store`, [`STORE_REASON`] `reason` (a rejection's
/// [`CommitError::code`](crate::CommitError::code), `transcript`, `unavailable`, `claim_lost`,
/// `open`, ...) and `message`. Every store error body is built here: the durable driver's
/// `store` lines, a fork's and an answer's store refusals, what the bindings raise and the
/// Restate worker answers.
pub fn store_body(reason: &str, message: impl Into<String>) -> ErrorBody {
    let mut details = Map::new();
    details.insert(STORE_REASON.into(), Value::from(reason));
    ErrorBody {
        kind: "store".into(),
        message: message.into(),
        details,
    }
}

/// The body of a store's error ([`store_body`] with [`StoreError::code`] and the error's text):
/// what the bindings raise and the Restate worker answers for a store call that failed or was
/// refused. A durable driver's `store` line carries the same body with advice in its message
/// ([`host::store_error_line`](crate::host::store_error_line)).
pub fn store_error_body(error: &StoreError) -> ErrorBody {
    store_body(error.code(), error.to_string())
}

impl ErrorBody {
    /// What the store said, in a store error's body: its `reason`, or the `code` a body
    /// written before the field had one name carries.
    pub fn store_reason(&self) -> Option<&str> {
        self.details
            .get(STORE_REASON)
            .or_else(|| self.details.get(OLD_STORE_REASON))
            .and_then(Value::as_str)
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
            // A reader may have stopped keeping the line past the cap: its length is a bound.
            return Err(invalid_json(limits::line_over_cap(bytes.len())));
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
        InputLine::parse(text)
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

    /// Applies one parsed line: its input at its time (the agent's clock when it has none), as
    /// [`apply_line`] applies it to an agent.
    pub fn apply(&mut self, line: InputLine) -> Result<(), AgentError> {
        if let Some(context) = apply_line(&mut self.agent, line)? {
            self.context = context;
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

/// Applies one line to `agent`: its input at its time (the agent's clock when it has none);
/// for a `config` line, returns its context mode (default `full`). A line read by
/// [`Driver::parse_line`], [`InputLine::parse`] or [`InputLine::from_value`] was held to the
/// input limits ([`crate::limits`]) as it was read, and is not measured again; a line built
/// around an input ([`InputLine::new`]) is, by [`Agent::handle`]. What a binding that keeps an
/// [`Agent`] (not a [`Driver`]) does with a line.
pub fn apply_line(agent: &mut Agent, line: InputLine) -> Result<Option<ContextMode>, AgentError> {
    let now_ms = line.now_ms.unwrap_or(agent.clock_ms());
    let is_config = matches!(line.input, Input::Config(_));
    if line.within_limits {
        agent.handle_within_limits(line.input, now_ms)?;
    } else {
        agent.handle(line.input, now_ms)?;
    }
    Ok(is_config.then(|| line.context.unwrap_or_default()))
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
        .map(|(name, spec)| ToolDefinition::of(name, spec))
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

    /// Issue 42: every door measures an input's nesting once: a line on its text (the agent is
    /// handed an input already measured), a value line on its value, a typed input by
    /// `Agent::handle` or the input method.
    #[test]
    fn each_door_checks_an_input_once() {
        let counted = |what: &str, f: &mut dyn FnMut()| {
            let before = crate::limits::depth_checks();
            f();
            assert_eq!(crate::limits::depth_checks() - before, 1, "{what}");
        };
        let answer = r#"{"type":"model_done","run_id":"r","step":1,"message":{"content":[{"type":"tool_call","id":"c","name":"t","arguments":{"a":[1]}}],"stop_reason":"tool_use"}}"#;
        let mut d = Driver::new();
        counted("a prompt line", &mut || {
            d.handle_line(br#"{"type":"prompt","text":"hi","run_id":"r"}"#);
        });
        counted("a model_done line", &mut || {
            let out = d.handle_line(answer.as_bytes());
            assert!(!out[0].contains("\"error\""), "{out:?}");
        });
        let mut d = Driver::new();
        d.handle_line(br#"{"type":"prompt","text":"hi","run_id":"r"}"#);
        counted("a value line", &mut || {
            let line = InputLine::from_value(serde_json::from_str(answer).unwrap()).unwrap();
            d.apply(line).unwrap();
        });
        let mut agent = Agent::new(AgentConfig::default()).unwrap();
        counted("Agent::prompt", &mut || {
            agent.prompt(crate::UserMessage::text("hi"), 0).unwrap();
        });
        let mut agent = Agent::new(AgentConfig::default()).unwrap();
        let mut input = Some(
            InputLine::parse(r#"{"type":"prompt","text":"hi"}"#)
                .unwrap()
                .input,
        );
        counted("Agent::handle", &mut || {
            agent.handle(input.take().unwrap(), 0).unwrap();
        });
    }

    /// Issue 42: a store error's body has one field for what the store said, `reason` (SPEC
    /// §12.4), from every builder; a body written with the old `code` still reads.
    #[test]
    fn a_store_error_body_has_one_reason_field() {
        use crate::commit::CommitError;
        let conflict = || {
            StoreError::Rejected(CommitError::VersionConflict {
                expected: 1,
                actual: 2,
            })
        };
        for body in [
            store_error_body(&conflict()),
            store_body("claim_lost", "lost"),
            crate::host::ForkError::Store(conflict()).body(),
        ] {
            let value = serde_json::to_value(&body).unwrap();
            assert_eq!(value["kind"], "store", "{value}");
            assert!(value["reason"].is_string(), "{value}");
            assert_eq!(value.get("code"), None, "{value}");
            assert_eq!(body.store_reason(), value["reason"].as_str());
        }
        let old: ErrorBody = serde_json::from_value(
            serde_json::json!({"kind": "store", "code": "version_conflict", "message": "m"}),
        )
        .unwrap();
        assert_eq!(old.store_reason(), Some("version_conflict"));
    }

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
