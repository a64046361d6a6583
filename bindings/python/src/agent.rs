//! `runcore.Agent`: the core's [`Agent`] with one method per input, outputs polled lazily and
//! given as the driver's own output lines (its `OutputLine` type, or its renderer for
//! `call_model`), as Python objects.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::convert::Text;
use pyo3::types::{PyString, PyType};
use runcore::driver::{ContextMode, InputLine, OutputLine, call_model_line, output_line};
use runcore::{
    Agent, AgentConfig, AssistantMessage, CallId, ContentBlock, DeltaKind, Input, RecoveryPolicy,
    RunId, Step, ThreadId, UserMessage,
};
use serde_json::{Map, Value};

use crate::convert::{from_py, serde_to_py};
use crate::errors::{self, agent_error, guard, internal, invalid_json};
use crate::input::{self, Rejected};
use crate::store::PyStore;
use crate::topy::KeyCache;

/// One agent per thread (SPEC §8): call one input method, then `poll()` until it returns
/// `None` (or iterate `drain()`), acting on each output in order.
#[pyclass(module = "runcore", name = "Agent")]
pub struct PyAgent {
    pub(crate) agent: Agent,
    pub(crate) context: ContextMode,
    /// Messages already carried by earlier `call_model` outputs (delta context).
    sent: runcore::driver::SentContext,
    /// Set when a Rust panic interrupted an input: the agent may be half-changed, so every
    /// later call raises `InternalError` instead of acting on it.
    poisoned: Option<String>,
    /// Python strings for the field names of outputs, made once.
    keys: KeyCache,
    /// Scratch space for the canonical JSON of commit outputs (their payload hashes).
    canonical: Vec<u8>,
}

/// Builds a driver-shaped input object.
struct Line(Map<String, Value>);

impl Line {
    fn new(kind: &str) -> Self {
        let mut map = Map::new();
        map.insert("type".into(), Value::from(kind));
        Line(map)
    }

    fn set(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.insert(key.into(), value.into());
        self
    }

    fn json(self, key: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(self.set(key, from_py(value)?))
    }

    fn now(self, now_ms: Option<u64>) -> Self {
        match now_ms {
            Some(now) => self.set("now_ms", now),
            None => self,
        }
    }
}

/// The length of `value` as compact JSON text (what the line it stands for holds).
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; a value that would not serialize counts as empty.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Holds the line a method stands for to the driver's cap (`runcore::driver::limits`): its
/// fixed text is `fixed` bytes and its string values are `strings`.
fn check_line(fixed: usize, strings: &[&str]) -> PyResult<()> {
    use runcore::driver::MAX_LINE_BYTES;
    use runcore::driver::limits::{check_line_len, json_string_len};
    let raw: usize = strings.iter().map(|s| s.len()).sum();
    if raw
        .saturating_mul(6)
        .saturating_add(fixed + 2 * strings.len())
        <= MAX_LINE_BYTES
    {
        return Ok(());
    }
    let length = fixed + strings.iter().map(|s| json_string_len(s)).sum::<usize>();
    check_line_len(length).map_err(invalid_json)
}

/// The bytes of `,"now_ms":N` (none without a time).
fn now_len(now_ms: Option<u64>) -> usize {
    now_ms.map_or(0, |now| {
        r#","now_ms":"#.len() + runcore::driver::limits::decimal_len(now)
    })
}

/// A step number as the driver reads it (`u32`).
fn step_of(step: u64) -> PyResult<Step> {
    Step::try_from(step).map_err(|_| {
        invalid_json(format!(
            "not a valid input line: step {step} is out of range (at most {})",
            Step::MAX
        ))
    })
}

/// One of the driver's output lines as Python objects (dicts keep the line's key order).
fn to_python<'py>(
    py: Python<'py>,
    keys: &mut KeyCache,
    line: &OutputLine<'_>,
) -> PyResult<Bound<'py, PyAny>> {
    crate::topy::to_py(py, keys, line)
}

/// A recovery policy named as the driver names it: `"replay"` or `"seal"`.
pub(crate) fn parse_policy(policy: &str) -> PyResult<RecoveryPolicy> {
    policy
        .parse()
        .map_err(|e: runcore::UnknownName| PyValueError::new_err(e.to_string()))
}

fn parse_context(context: Option<&str>) -> PyResult<Option<ContextMode>> {
    context
        .map(str::parse)
        .transpose()
        .map_err(|e: runcore::UnknownName| PyValueError::new_err(e.to_string()))
}

/// A `config` object (a dict with the fields of a `config` line, `type` optional) as a line.
pub(crate) fn config_line(config: &Bound<'_, PyAny>) -> PyResult<Value> {
    match from_py(config)? {
        Value::Object(mut object) => {
            object.insert("type".into(), Value::from("config"));
            Ok(Value::Object(object))
        }
        _ => Err(PyTypeError::new_err(
            "config must be a dict with the fields of a config line",
        )),
    }
}

/// A `config` object (`None`: the defaults) read as the driver reads a config line.
pub(crate) fn config_input(config: Option<&Bound<'_, PyAny>>) -> PyResult<InputLine> {
    let fields = config.map(from_py).transpose()?;
    InputLine::config(fields).map_err(|e| match e {
        runcore::driver::ConfigObjectError::NotAnObject(_) => {
            PyTypeError::new_err("config must be a dict with the fields of a config line")
        }
        invalid => invalid_json(invalid.to_string()),
    })
}

impl PyAgent {
    pub(crate) fn from_agent(agent: Agent, context: ContextMode) -> Self {
        PyAgent {
            agent,
            context,
            sent: Default::default(),
            poisoned: None,
            keys: KeyCache::default(),
            canonical: Vec::new(),
        }
    }

    fn usable(&self) -> PyResult<()> {
        match &self.poisoned {
            Some(why) => Err(internal(format!(
                "this Agent is unusable after an internal error ({why}); restore it from a \
                 snapshot or recover it from its store"
            ))),
            None => Ok(()),
        }
    }

    /// Runs `f` on the agent; a panic poisons this object and becomes `InternalError`.
    fn guarded<T>(&mut self, f: impl FnOnce(&mut Self) -> PyResult<T>) -> PyResult<T> {
        self.usable()?;
        match guard(|| f(self)) {
            Ok(result) => result,
            Err(panic) => {
                self.poisoned = Some("a Rust panic".to_owned());
                Err(panic)
            }
        }
    }

    /// Applies one input object: exactly what the driver does with the same line.
    fn input(&mut self, line: Value) -> PyResult<()> {
        runcore::driver::limits::check_line_len(json_len(&line)).map_err(invalid_json)?;
        runcore::driver::limits::check_depth(&line)
            .map_err(|e| agent_error(&runcore::AgentError::InvalidInput(e)))?;
        self.guarded(|this| match input::apply(&mut this.agent, line) {
            Ok(Some(context)) => {
                this.context = context;
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(Rejected::Line(message)) => Err(invalid_json(message)),
            Err(Rejected::Agent(error)) => Err(agent_error(&error)),
        })
    }

    fn send(&mut self, line: Line) -> PyResult<()> {
        self.input(Value::Object(line.0))
    }

    /// Applies an input built directly (every input whose arguments are Python scalars): what
    /// the driver does with the same line, without a JSON object in between. Inputs that carry
    /// Python objects (a message, content blocks, a resume command) are read as the driver
    /// reads its line, so their errors are the driver's, word for word.
    fn handle_input(&mut self, input: Input, now_ms: Option<u64>) -> PyResult<()> {
        if let Some(now) = now_ms
            && let Err(message) = runcore::driver::limits::check_now_ms(now)
        {
            // The driver reads a line's nesting before its time: so does every door.
            runcore::driver::limits::check_depth(&input)
                .map_err(|e| agent_error(&runcore::AgentError::InvalidInput(e)))?;
            return Err(invalid_json(message));
        }
        self.guarded(|this| {
            let now_ms = now_ms.unwrap_or(this.agent.clock_ms());
            this.agent
                .handle(input, now_ms)
                .map_err(|e| agent_error(&e))
        })
    }

    /// The next output as the driver's dict, or `None`.
    pub(crate) fn next_output<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.guarded(|this| {
            let Some(output) = this.agent.poll() else {
                return Ok(None);
            };
            // The driver's own output type, straight to Python objects (no JSON text between).
            let line = output_line(
                &this.agent,
                &output,
                this.context,
                &mut this.sent,
                &mut this.canonical,
            );
            to_python(py, &mut this.keys, &line).map(Some)
        })
    }
}

#[pymethods]
impl PyAgent {
    /// An idle agent; `config` is a dict with the fields of the driver's `config` line.
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        crate::errors::guard(|| {
            let agent = Agent::new(AgentConfig::default()).map_err(|e| agent_error(&e))?;
            let mut this = PyAgent::from_agent(agent, ContextMode::Full);
            if let Some(config) = config {
                this.input(config_line(config)?)?;
            }
            Ok(this)
        })?
    }

    /// Any driver input line, as a dict or its JSON text (`{"type": "prompt", ...}`).
    fn handle(&mut self, line: &Bound<'_, PyAny>) -> PyResult<()> {
        crate::errors::guard(|| {
            let value = if let Ok(text) = line.cast::<PyString>() {
                let text = crate::convert::str_of(text)?;
                runcore::driver::limits::check_line_len(text.len()).map_err(invalid_json)?;
                runcore::driver::limits::check_json_depth(text.as_bytes())
                    .map_err(|e| agent_error(&runcore::AgentError::InvalidInput(e)))?;
                serde_json::from_str(&text)
                    .map_err(|e| invalid_json(format!("the line is not valid JSON: {e}")))?
            } else {
                from_py(line)?
            };
            self.input(value)
        })?
    }

    /// Starts a run with the user's `text`, or with several user messages (a list of message
    /// dicts, SPEC §8.10); returns its run id. `BusyError` while a run is active.
    #[pyo3(signature = (text, *, run_id = None, now_ms = None))]
    fn prompt(
        &mut self,
        text: &Bound<'_, PyAny>,
        run_id: Option<Text>,
        now_ms: Option<u64>,
    ) -> PyResult<String> {
        crate::errors::guard(|| {
            let run_id = run_id.as_deref();
            // What the driver makes of `{"type": "prompt", "text" | "messages": …, "run_id"?: …}`,
            // built directly.
            let (message, messages) = if let Ok(text) = text.cast::<PyString>() {
                let text = crate::convert::str_of(text)?;
                // `{"type":"prompt","text":T,"run_id":R,"now_ms":N}`
                let fixed = r#"{"type":"prompt","text":}"#.len() + now_len(now_ms);
                match run_id {
                    Some(run) => check_line(fixed + r#","run_id":"#.len(), &[&text, run])?,
                    None => check_line(fixed, &[&text])?,
                }
                (Some(UserMessage::text(text)), Vec::new())
            } else if text.is_instance_of::<pyo3::types::PyList>()
                || text.is_instance_of::<pyo3::types::PyTuple>()
            {
                let messages: Vec<UserMessage> =
                    serde_json::from_value(from_py(text)?).map_err(|e| {
                        invalid_json(format!("prompt: not a list of user messages: {e}"))
                    })?;
                (None, messages)
            } else {
                return Err(PyTypeError::new_err(
                    "prompt takes a str or a list of user message dicts",
                ));
            };
            let input = Input::Prompt {
                message,
                messages,
                run_id: run_id.map(RunId::from),
            };
            self.handle_input(input, now_ms)?;
            self.agent
                .active_run_id()
                .map(|run| run.as_str().to_owned())
                .ok_or_else(|| internal("prompt was accepted but no run is active"))
        })?
    }

    /// Appends existing messages (a list of message dicts of any roles) to this idle agent's
    /// transcript as one committed, ended run, without a model call (SPEC §8.10); returns the
    /// import's run id. `InvalidInputError` names the broken rule and the message index;
    /// `BusyError` while a run is active.
    #[pyo3(signature = (messages, *, now_ms = None))]
    fn import_messages(
        &mut self,
        messages: &Bound<'_, PyAny>,
        now_ms: Option<u64>,
    ) -> PyResult<String> {
        crate::errors::guard(|| {
            let messages: Vec<runcore::Message> = serde_json::from_value(from_py(messages)?)
                .map_err(|e| invalid_json(format!("import: not a list of messages: {e}")))?;
            let before = self.agent.last_end().map(|(run, _)| run.clone());
            self.handle_input(Input::Import { messages }, now_ms)?;
            match self.agent.last_end() {
                Some((run, _)) if Some(run) != before.as_ref() => Ok(run.as_str().to_owned()),
                _ => Err(internal("import was accepted but no run ended")),
            }
        })?
    }

    /// Queues steering for the active run (enters at the next complete boundary).
    #[pyo3(signature = (text, *, now_ms = None))]
    fn steer(&mut self, text: Text, now_ms: Option<u64>) -> PyResult<()> {
        crate::errors::guard(|| {
            let text: &str = &text;
            // `{"type":"steer","text":T,"now_ms":N}`
            check_line(
                r#"{"type":"steer","text":}"#.len() + now_len(now_ms),
                &[text],
            )?;
            let message = UserMessage::text(text);
            self.handle_input(Input::Steer { message }, now_ms)
        })?
    }

    /// Queues a follow-up (enters only after a natural text stop).
    #[pyo3(signature = (text, *, now_ms = None))]
    fn follow_up(&mut self, text: Text, now_ms: Option<u64>) -> PyResult<()> {
        crate::errors::guard(|| {
            let text: &str = &text;
            // `{"type":"follow_up","text":T,"now_ms":N}`
            check_line(
                r#"{"type":"follow_up","text":}"#.len() + now_len(now_ms),
                &[text],
            )?;
            let message = UserMessage::text(text);
            self.handle_input(Input::FollowUp { message }, now_ms)
        })?
    }

    /// Cancels the active run (a no-op when idle).
    #[pyo3(signature = (*, now_ms = None))]
    fn abort(&mut self, now_ms: Option<u64>) -> PyResult<()> {
        crate::errors::guard(|| self.handle_input(Input::Abort, now_ms))?
    }

    /// Asks the running run to pause at its next boundary.
    #[pyo3(signature = (*, now_ms = None))]
    fn pause(&mut self, now_ms: Option<u64>) -> PyResult<()> {
        crate::errors::guard(|| self.handle_input(Input::Pause, now_ms))?
    }

    /// Streamed text of the outstanding model call; `kind="thinking"` for streamed reasoning
    /// (a `thinking_delta` event).
    #[pyo3(signature = (run_id, step, text, *, kind = Text::from("text"), now_ms = None))]
    fn model_delta(
        &mut self,
        run_id: Text,
        step: u64,
        text: Text,
        kind: Text,
        now_ms: Option<u64>,
    ) -> PyResult<()> {
        crate::errors::guard(|| {
            let run_id: &str = &run_id;
            let text: &str = &text;
            let kind: &str = &kind;
            let kind: DeltaKind = kind
                .parse()
                .map_err(|error: runcore::UnknownName| PyValueError::new_err(error.to_string()))?;
            // `{"type":"model_delta","run_id":R,"step":S,"text":T,"kind":K,"now_ms":N}`
            let kind_len = if kind == DeltaKind::Text {
                0
            } else {
                r#","kind":"thinking""#.len()
            };
            let fixed = r#"{"type":"model_delta","run_id":,"step":,"text":}"#.len()
                + runcore::driver::limits::decimal_len(step)
                + kind_len
                + now_len(now_ms);
            check_line(fixed, &[run_id, text])?;
            let input = Input::ModelDelta {
                run_id: RunId::new(run_id),
                step: step_of(step)?,
                text: text.to_owned(),
                kind,
            };
            self.handle_input(input, now_ms)
        })?
    }

    /// The model's answer: an assistant message dict (`content`, `stop_reason`, ...).
    #[pyo3(signature = (run_id, step, message, *, now_ms = None))]
    fn model_done(
        &mut self,
        run_id: Text,
        step: u64,
        message: &Bound<'_, PyAny>,
        now_ms: Option<u64>,
    ) -> PyResult<()> {
        crate::errors::guard(|| {
            let run_id: &str = &run_id;
            // The message read as the driver reads a `model_done` line's (an assistant message,
            // `"role": "assistant"` allowed), without the line around it; anything that does not
            // read goes the line's way, so its error is the driver's.
            let message_value = from_py(message)?;
            // `{"type":"model_done","run_id":R,"step":S,"message":M,"now_ms":N}`
            let fixed = r#"{"type":"model_done","run_id":,"step":,"message":}"#.len()
                + runcore::driver::limits::decimal_len(step)
                + json_len(&message_value)
                + now_len(now_ms);
            check_line(fixed, &[run_id])?;
            if let (Ok(step), Value::Object(mut object)) = (Step::try_from(step), message_value) {
                let role_ok = match object.remove("role") {
                    None => true,
                    Some(role) => role == "assistant",
                };
                if role_ok
                    && let Ok(message) =
                        serde_json::from_value::<AssistantMessage>(Value::Object(object))
                {
                    let input = Input::ModelDone {
                        run_id: RunId::from(run_id),
                        step,
                        message,
                    };
                    return self.handle_input(input, now_ms);
                }
            }
            let line = Line::new("model_done")
                .set("run_id", run_id)
                .set("step", step)
                .json("message", message)?
                .now(now_ms);
            self.send(line)
        })?
    }

    /// The outstanding model call failed with the provider's `code` and `message`.
    #[pyo3(signature = (run_id, step, code, message, *, now_ms = None))]
    fn model_failed(
        &mut self,
        run_id: Text,
        step: u64,
        code: Text,
        message: Text,
        now_ms: Option<u64>,
    ) -> PyResult<()> {
        crate::errors::guard(|| {
            let run_id: &str = &run_id;
            let code: &str = &code;
            let message: &str = &message;
            let input = Input::ModelFailed {
                run_id: RunId::from(run_id),
                step: step_of(step)?,
                code: code.to_owned(),
                message: message.to_owned(),
            };
            self.handle_input(input, now_ms)
        })?
    }

    /// Live progress of an executing call (a string or content blocks; never committed).
    #[pyo3(signature = (run_id, call_id, content, *, now_ms = None))]
    fn tool_progress(
        &mut self,
        run_id: Text,
        call_id: Text,
        content: &Bound<'_, PyAny>,
        now_ms: Option<u64>,
    ) -> PyResult<()> {
        crate::errors::guard(|| {
            let run_id: &str = &run_id;
            let call_id: &str = &call_id;
            let line = Line::new("tool_progress")
                .set("run_id", run_id)
                .set("call_id", call_id)
                .json("content", content)?
                .now(now_ms);
            self.send(line)
        })?
    }

    /// The result of one executing call (a string or content blocks); `meta`, a dict the core
    /// keeps on the result message exactly (SPEC §2.1).
    #[pyo3(signature = (run_id, call_id, content, *, is_error = false, details = None, meta = None, now_ms = None))]
    #[allow(clippy::too_many_arguments)]
    fn tool_done(
        &mut self,
        run_id: Text,
        call_id: Text,
        content: &Bound<'_, PyAny>,
        is_error: bool,
        details: Option<&Bound<'_, PyAny>>,
        meta: Option<&Bound<'_, PyAny>>,
        now_ms: Option<u64>,
    ) -> PyResult<()> {
        crate::errors::guard(|| {
            let run_id: &str = &run_id;
            let call_id: &str = &call_id;
            if let (Ok(text), None, None) = (content.cast::<PyString>(), details, meta) {
                let text = crate::convert::str_of(text)?;
                // `{"type":"tool_done","run_id":R,"call_id":C,"content":T,"is_error":B,"now_ms":N}`
                let fixed = r#"{"type":"tool_done","run_id":,"call_id":,"content":,"is_error":}"#
                    .len()
                    + if is_error { 4 } else { 5 }
                    + now_len(now_ms);
                check_line(fixed, &[run_id, call_id, &text])?;
                let input = Input::ToolDone {
                    run_id: RunId::new(run_id),
                    call_id: CallId::new(call_id),
                    content: vec![ContentBlock::text(text.into_owned())],
                    is_error,
                    details: None,
                    meta: runcore::Meta::new(),
                };
                return self.handle_input(input, now_ms);
            }
            let mut line = Line::new("tool_done")
                .set("run_id", run_id)
                .set("call_id", call_id)
                .json("content", content)?
                .set("is_error", is_error);
            if let Some(details) = details {
                line = line.json("details", details)?;
            }
            if let Some(meta) = meta {
                line = line.json("meta", meta)?;
            }
            self.send(line.now(now_ms))
        })?
    }

    /// A full resume command (a `ResumeCommand` dict).
    #[pyo3(signature = (command, *, now_ms = None))]
    fn resume(&mut self, command: &Bound<'_, PyAny>, now_ms: Option<u64>) -> PyResult<()> {
        crate::errors::guard(|| {
            let line = Line::new("resume").json("command", command)?.now(now_ms);
            self.send(line)
        })?
    }

    /// Answers the current ticket with a `ResumeResult` dict (`{"type": "permission",
    /// "decision": "allow"}`, `{"type": "input", "text": ...}`, ...).
    #[pyo3(signature = (result, *, now_ms = None))]
    fn resume_ticket(&mut self, result: &Bound<'_, PyAny>, now_ms: Option<u64>) -> PyResult<()> {
        crate::errors::guard(|| {
            let line = Line::new("resume_ticket")
                .json("result", result)?
                .now(now_ms);
            self.send(line)
        })?
    }

    /// Ends the awaiting run `cancelled`.
    #[pyo3(signature = (*, now_ms = None))]
    fn cancel_wait(&mut self, now_ms: Option<u64>) -> PyResult<()> {
        crate::errors::guard(|| self.handle_input(Input::CancelWait, now_ms))?
    }

    /// Ends the active run by host policy, `stopped` with `reason`.
    #[pyo3(signature = (reason, *, now_ms = None))]
    fn stop(&mut self, reason: Text, now_ms: Option<u64>) -> PyResult<()> {
        crate::errors::guard(|| {
            let reason: &str = &reason;
            let reason = reason.to_owned();
            self.handle_input(Input::Stop { reason }, now_ms)
        })?
    }

    /// Ends an expired wait (`NotExpiredError` before its deadline).
    fn expire_wait(&mut self, now_ms: u64) -> PyResult<()> {
        crate::errors::guard(|| self.handle_input(Input::ExpireWait, Some(now_ms)))?
    }

    /// Gives up on the executing tools: open calls `interrupted`, the run `indeterminate`.
    #[pyo3(signature = (*, now_ms = None))]
    fn abandon_tools(&mut self, now_ms: Option<u64>) -> PyResult<()> {
        crate::errors::guard(|| self.handle_input(Input::AbandonTools, now_ms))?
    }

    /// Does what is due at `now_ms` (SPEC §8.5): an expired wait ends `stopped`
    /// (`"wait_expired"`); a harmless no-op when nothing is due yet.
    fn handle_timeout(&mut self, now_ms: u64) -> PyResult<()> {
        crate::errors::guard(|| self.handle_input(Input::Timeout, Some(now_ms)))?
    }

    /// Starts a run from the current transcript without a new message (SPEC §8.8); returns
    /// its run id. `InvalidStateError` when there is nothing to continue, `BusyError` while a
    /// run is active.
    #[pyo3(signature = (*, now_ms = None))]
    fn continue_run(&mut self, now_ms: Option<u64>) -> PyResult<String> {
        crate::errors::guard(|| {
            self.handle_input(Input::Continue, now_ms)?;
            self.agent
                .active_run_id()
                .map(|run| run.as_str().to_owned())
                .ok_or_else(|| internal("continue was accepted but no run is active"))
        })?
    }

    /// Compacts the thread (SPEC §8.9) instead of answering the outstanding model call: from
    /// now on the model context is `summary` (a string, content blocks, or a user message
    /// dict) followed by the transcript from `keep_from` on; the transcript stays whole and
    /// committed. The next `poll()`s give the compaction's commit, its `compacted` event and
    /// the same step's `call_model` again. `InvalidStateError` unless a model call is out with
    /// nothing of its answer arrived; `InvalidInputError` naming the `keep_from` rule broken.
    #[pyo3(signature = (summary, keep_from, *, now_ms = None))]
    fn compact(
        &mut self,
        summary: &Bound<'_, PyAny>,
        keep_from: u64,
        now_ms: Option<u64>,
    ) -> PyResult<()> {
        crate::errors::guard(|| {
            let line = Line::new("compact")
                .json("summary", summary)?
                .set("keep_from", keep_from)
                .now(now_ms);
            self.send(line)
        })?
    }

    /// The earliest `now_ms` at which something is due (call `handle_timeout` then), or
    /// `None`. Changes with every input.
    fn poll_timeout(&self) -> PyResult<Option<u64>> {
        crate::errors::guard(|| Ok(self.agent.poll_timeout()))?
    }

    /// The next output as the dict `runcore drive` would print (`commit`, `event`,
    /// `call_model`, `execute_tools`), or `None` when there is nothing to do until the next
    /// input. An action is decided only when it is polled.
    fn poll<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        crate::errors::guard(|| self.next_output(py))?
    }

    /// An iterator that polls lazily until `poll()` returns `None`.
    fn drain(slf: Py<Self>) -> PyResult<Drain> {
        crate::errors::guard(|| Ok(Drain { agent: slf }))?
    }

    /// The outstanding model call as its `call_model` dict with the whole transcript (full
    /// context, whatever the configured mode), or `None`.
    fn model_request<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.guarded(|this| {
            let Some(request) = this.agent.model_request() else {
                return Ok(None);
            };
            let mut sent = runcore::driver::SentContext::default();
            let line = call_model_line(
                &this.agent,
                request.run_id,
                request.step,
                request.final_step,
                ContextMode::Full,
                &mut sent,
            );
            to_python(py, &mut this.keys, &line).map(Some)
        })
    }

    /// The whole agent as JSON text (queues and in-flight actions included).
    fn snapshot(&self) -> PyResult<String> {
        crate::errors::guard(|| {
            self.usable()?;
            guard(|| Ok(self.agent.snapshot_json()))?
        })?
    }

    /// An agent from `snapshot()` text. In delta context the next `call_model` carries the
    /// transcript from `base` 0.
    #[classmethod]
    #[pyo3(signature = (snapshot, *, context = None))]
    fn restore(_cls: &Bound<'_, PyType>, snapshot: Text, context: Option<Text>) -> PyResult<Self> {
        crate::errors::guard(|| {
            let context = context.as_deref();
            let snapshot: &str = &snapshot;
            let context = parse_context(context)?.unwrap_or_default();
            match guard(|| Agent::restore_json(snapshot).map_err(|e| errors::snapshot_error(&e))) {
                Ok(result) => Ok(PyAgent::from_agent(result?, context)),
                Err(panic) => Err(panic),
            }
        })?
    }

    /// An agent rebuilt from what `store` committed for `thread_id` (SPEC §8.7); drain it
    /// first: under `"replay"` it hands out the pending action again, under `"seal"` it ends
    /// an interrupted tool batch `indeterminate`. `config` is the configuration the thread
    /// ran with (tool policies are configuration, not committed facts).
    #[classmethod]
    #[pyo3(signature = (store, thread_id, policy = Text::from("replay"), *, config = None))]
    fn recover(
        _cls: &Bound<'_, PyType>,
        store: &Bound<'_, PyStore>,
        thread_id: Text,
        policy: Text,
        config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            let policy: &str = &policy;
            let policy = parse_policy(policy)?;
            let mut line = match config {
                Some(config) => config_line(config)?,
                None => serde_json::json!({"type": "config"}),
            };
            if let Value::Object(object) = &mut line {
                object
                    .entry("thread_id")
                    .or_insert_with(|| Value::from(thread_id));
            }
            let line = InputLine::from_value(line)
                .map_err(|e| invalid_json(format!("not a valid config: {e}")))?;
            let context = line.context.unwrap_or_default();
            let Input::Config(config) = line.input else {
                return Err(internal("a config line did not read as a config input"));
            };
            let store = store.borrow();
            let thread = ThreadId::new(thread_id);
            let recovered = guard(|| {
                store.with(|backend| {
                    Agent::recover(config, backend, &thread, policy).map_err(|e| match e {
                        runcore::RecoverError::Store(e) => errors::store_error(&e),
                        runcore::RecoverError::Invalid(e) => agent_error(&e),
                        other => internal(other.to_string()),
                    })
                })
            })??;
            Ok(PyAgent::from_agent(recovered, context))
        })?
    }

    /// The thread this agent drives.
    #[getter]
    fn thread_id(&self) -> PyResult<String> {
        crate::errors::guard(|| Ok(self.agent.thread_id().as_str().to_owned()))?
    }

    /// The active run's id (`None` when idle).
    #[getter]
    fn active_run_id(&self) -> PyResult<Option<String>> {
        crate::errors::guard(|| {
            Ok({
                self.agent
                    .active_run_id()
                    .map(|run| run.as_str().to_owned())
            })
        })?
    }

    /// The agent's clock: the latest `now_ms` of an accepted input.
    #[getter]
    fn clock_ms(&self) -> PyResult<u64> {
        crate::errors::guard(|| Ok(self.agent.clock_ms()))?
    }

    /// Where the model context's transcript part starts (SPEC §8.9): the latest compaction's
    /// `keep_from`, 0 when the thread was never compacted.
    #[getter]
    fn context_start(&self) -> PyResult<usize> {
        crate::errors::guard(|| Ok(self.agent.context_start()))?
    }

    /// True when no run is active and nothing is left to poll.
    #[getter]
    fn is_idle(&self) -> PyResult<bool> {
        crate::errors::guard(|| Ok(self.agent.is_idle()))?
    }

    /// The ticket the active run waits on, as a dict (`None` unless awaiting).
    fn current_ticket<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        guard(|| {
            self.agent
                .current_ticket()
                .map(|ticket| serde_to_py(py, ticket))
                .transpose()
        })?
    }

    /// The transcript (between inputs: the committed transcript), as message dicts.
    fn transcript<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        guard(|| serde_to_py(py, &self.agent.transcript()))?
    }

    fn __repr__(&self) -> PyResult<String> {
        crate::errors::guard(|| {
            Ok({
                match self.agent.active_run_id() {
                    Some(run) => format!(
                        "Agent(thread_id={:?}, active_run_id={:?})",
                        self.agent.thread_id().as_str(),
                        run.as_str()
                    ),
                    None => format!(
                        "Agent(thread_id={:?}, idle)",
                        self.agent.thread_id().as_str()
                    ),
                }
            })
        })?
    }
}

/// The iterator `Agent.drain()` returns: each step polls the agent (lazily).
#[pyclass(module = "runcore", name = "Drain")]
pub struct Drain {
    agent: Py<PyAgent>,
}

#[pymethods]
impl Drain {
    fn __iter__(slf: PyRef<'_, Self>) -> PyResult<PyRef<'_, Self>> {
        crate::errors::guard(|| Ok(slf))?
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        crate::errors::guard(|| self.agent.bind(py).borrow_mut().next_output(py))?
    }
}
