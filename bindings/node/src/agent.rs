//! `NativeAgent`, wrapped by `Agent` in `index.js`: the core's agent behind the driver's own
//! code path ([`Driver::apply`], [`Driver::poll`], and the driver's own output lines), so each
//! output is exactly the line `runcore drive` writes, handed to JavaScript as a tape (see
//! `tape`; `index.js` rebuilds the object `JSON.parse` makes of the line) or as its JSON text.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use napi_derive::napi;
use runcore::driver::{
    ContextMode, Driver, InputLine, SentContext, call_model_line, output_line, render_line,
};
use runcore::{
    Agent, AssistantBlock, AssistantMessage, CallId, ContentBlock, Input, RecoverError, RunId,
    StopReason, ThreadId, UserMessage,
};
use serde_json::Value;

use crate::errors::{
    agent_error, bad_argument, guard, internal, invalid_json, parse_json, snapshot_error,
    store_error,
};
use crate::napi_memory::TapeArray;
use crate::shared_candidates::{agent_config, config_line, parse_context, parse_policy};
use crate::store::NativeStore;
use crate::tape::Tape;

mod helpers;

use helpers::{assistant_message, bare_call, check_line, known, now_of, stop_reason_len, words};

thread_local! {
    /// The addresses of the live agents that take plain calls.
    /// (By address, with the agent's serial: an entry whose serial is not the agent's at that
    /// address is stale and is replaced.)
    pub(crate) static LIVE: RefCell<HashMap<usize, u64>> = RefCell::new(HashMap::new());
}

/// Lets the plain functions act on `agent` (at its final address: napi-rs's box); false when
/// it was registered already (a second JavaScript wrapper over the same native agent).
pub fn register(agent: &NativeAgent) -> bool {
    let address = agent as *const NativeAgent as usize;
    LIVE.with(|live| live.borrow_mut().insert(address, agent.serial) != Some(agent.serial))
}

/// Forgets `agent` (dropped).
pub fn unregister(agent: &NativeAgent) {
    let address = agent as *const NativeAgent as usize;
    // During thread teardown the set may be gone already: nothing to forget then.
    let _ = LIVE.try_with(|live| {
        let mut live = live.borrow_mut();
        if live.get(&address) == Some(&agent.serial) {
            live.remove(&address);
        }
    });
}

/// The batch text past which `pollAhead` stops putting queued outputs on one tape (the rest
/// wait for the next batch): far below V8's string limit (2^29 - 24 UTF-16 units).
const BATCH_TEXT: usize = 32 << 20;

thread_local! {
    /// The longest batch text handed to JavaScript: V8's own limit, unless a test injects a
    /// smaller one (`_setTapeTextCapForTests`) to stand for it.
    static TEXT_CAP: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The scratch buffer's size check (`raw`) for the tests: `[offered, whole]`, the size
/// offered to Node for a buffer of `capacity` bytes and whether a read that wrote `written`
/// bytes into it held the whole string.
// A test build has no module registration: nothing calls it there.
#[cfg_attr(test, allow(dead_code))]
#[napi(js_name = "_scratchCheckForTests", catch_unwind)]
pub fn scratch_check_for_tests(written: f64, capacity: f64) -> Vec<f64> {
    let (written, capacity) = (written as usize, capacity as usize);
    let offered = crate::napi_memory::read_capacity(capacity);
    let whole = crate::napi_memory::read_whole(written, offered);
    vec![offered as f64, f64::from(u8::from(whole))]
}

/// Sets the longest batch text handed to JavaScript (for the tests: a smaller cap stands for
/// V8's string limit; `0` restores the default).
// A test build has no module registration: nothing calls it there.
#[cfg_attr(test, allow(dead_code))]
#[napi(js_name = "_setTapeTextCapForTests", catch_unwind)]
pub fn set_tape_text_cap_for_tests(cap: u32) {
    TEXT_CAP.with(|c| c.set(if cap == 0 { usize::MAX } else { cap as usize }));
}

/// The agent of one thread, driven by inputs; outputs are polled as JSON lines.
#[napi]
pub struct NativeAgent {
    pub(crate) driver: Driver,
    /// Set when a Rust panic interrupted a call: the agent may be half-changed, so every later
    /// call throws `InternalError` instead of acting on it.
    poisoned: bool,
    /// Scratch space for the canonical JSON of commit outputs (their payload hashes).
    canonical: Vec<u8>,
    /// What earlier `call_model` outputs carried (delta mode): the driver's own count, kept
    /// here because outputs are rendered here (the driver's `render` is never called).
    sent: SentContext,
    /// The key and shape tables shared with `index.js`, and the batch being written.
    tape: Tape,
    /// How many outputs at the front of the outbox the last `pollAhead` put on the tape
    /// without taking them (JavaScript holds them and says how many it handed out).
    peeked: usize,
    /// Outputs taken from the agent for the last tape until JavaScript has its string (a
    /// failed string, past V8's limit, hands them out again on the next poll, first), with
    /// the sent context from before they were rendered.
    held: Vec<runcore::Output>,
    held_sent: SentContext,
    /// How many of `held` are on the last tape.
    held_on_tape: usize,
    /// Whether the last `pollLine` line is the first queued output, still in the outbox.
    line_peeked: bool,
    /// Commit outputs are dropped unseen (never hashed, written or handed out): set by a host
    /// that keeps no store and so has no use for them (`runcore/pi` in memory).
    drop_commits: bool,
    /// `call_model` outputs carry no messages (`"messages": []`, `base` as ever): set by a
    /// host that keeps the transcript itself and never reads them (`runcore/pi`), so the
    /// model context is neither rendered nor decoded for nothing.
    bare_calls: bool,
    /// This agent's serial number in its thread (`raw` tells a second registration of this
    /// agent from a stale one at the same address).
    pub(crate) serial: u64,
}

thread_local! {
    /// The last serial number given to an agent.
    static SERIAL: Cell<u64> = const { Cell::new(0) };
}

/// A batch's text as a JavaScript string: copied as Latin-1 (byte for byte) when it is ASCII,
/// else decoded from UTF-8.
pub struct Text {
    text: String,
    ascii: bool,
}

impl Text {
    /// The JavaScript string (a copy).
    ///
    /// # Safety
    ///
    /// `env` is the environment of the Node-API call being answered, running now (the string
    /// is made in its handle scope).
    pub(crate) unsafe fn to_js(
        &self,
        env: napi::sys::napi_env,
    ) -> napi::Result<napi::sys::napi_value> {
        if self.text.len() > TEXT_CAP.with(Cell::get) {
            return Err(internal(
                "a batch of outputs is too long for a JavaScript string; nothing was handed \
                 out (poll again once memory is freed)",
            ));
        }
        let mut value = std::ptr::null_mut();
        let (pointer, length) = (self.text.as_ptr().cast(), self.text.len() as isize);
        // SAFETY: `env` is the running call's (this function's contract); `pointer` is
        // `length` valid bytes of our own string (Latin-1 when ASCII, else UTF-8), which Node
        // copies; `value` is a local out-parameter.
        let status = unsafe {
            if self.ascii {
                napi::sys::napi_create_string_latin1(env, pointer, length, &mut value)
            } else {
                napi::sys::napi_create_string_utf8(env, pointer, length, &mut value)
            }
        };
        if status == napi::sys::Status::napi_ok {
            Ok(value)
        } else {
            Err(internal(
                "a batch of outputs could not be made a JavaScript string (past V8's string \
                 limit?); nothing was handed out",
            ))
        }
    }
}

impl napi::bindgen_prelude::ToNapiValue for Text {
    /// The JavaScript string ([`Text::to_js`]).
    ///
    /// # Safety
    ///
    /// As the trait's: `env` is the environment of the call whose return value this is,
    /// running now.
    unsafe fn to_napi_value(
        env: napi::sys::napi_env,
        val: Self,
    ) -> napi::Result<napi::sys::napi_value> {
        // SAFETY: napi-rs calls `to_napi_value` with the environment of the call whose return
        // value it converts, running now: `to_js`'s contract.
        unsafe { val.to_js(env) }
    }
}

impl Drop for Text {
    fn drop(&mut self) {
        crate::tape::give_back_text(std::mem::take(&mut self.text));
    }
}

impl napi::bindgen_prelude::TypeName for Text {
    fn type_name() -> &'static str {
        "String"
    }
    fn value_type() -> napi::ValueType {
        napi::ValueType::String
    }
}

impl Drop for NativeAgent {
    fn drop(&mut self) {
        unregister(self);
    }
}

impl NativeAgent {
    pub(crate) fn from_driver(driver: Driver) -> Self {
        NativeAgent {
            driver,
            poisoned: false,
            canonical: Vec::new(),
            sent: SentContext::default(),
            tape: Tape::default(),
            peeked: 0,
            held: Vec::new(),
            held_sent: SentContext::default(),
            held_on_tape: 0,
            line_peeked: false,
            drop_commits: false,
            bare_calls: false,
            serial: SERIAL.with(|serial| {
                serial.set(serial.get() + 1);
                serial.get()
            }),
        }
    }

    /// Runs `f` on the driver; a panic poisons this object and becomes `InternalError`.
    fn guarded<T>(&mut self, f: impl FnOnce(&mut Self) -> napi::Result<T>) -> napi::Result<T> {
        if self.poisoned {
            return Err(internal(
                "this Agent is unusable after an internal error (a Rust panic); restore it \
                 from a snapshot or recover it from its store",
            ));
        }
        match guard(|| f(&mut *self)) {
            Ok(result) => result,
            Err(()) => {
                self.poisoned = true;
                Err(internal(
                    "runcore panicked (a bug); this Agent is now unusable",
                ))
            }
        }
    }

    fn apply(&mut self, input: Input, now_ms: Option<u64>) -> napi::Result<()> {
        self.guarded(|this| {
            this.driver
                .apply(InputLine::new(input, now_ms))
                .map_err(|e| agent_error(&e))
        })
    }

    /// Applies one driver input line (its JSON bytes), exactly as the driver does.
    pub(crate) fn handle_bytes(&mut self, line: &[u8]) -> napi::Result<()> {
        self.guarded(|this| {
            let parsed =
                Driver::parse_line(line).map_err(|body| crate::errors::line_error(&body))?;
            this.driver.apply(parsed).map_err(|e| agent_error(&e))
        })
    }

    /// `model_done` with its message as JSON text, read straight into the message (what the
    /// driver reads from the line's `message`: an assistant message, `"role"` optional). Any
    /// message that does not read so goes through the whole line, for the driver's own error.
    pub(crate) fn model_done_json(
        &mut self,
        run_id: String,
        step: u32,
        message: &mut [u8],
        now_ms: Option<f64>,
    ) -> napi::Result<()> {
        let now_ms = now_of(now_ms)?;
        // `{"type":"model_done","run_id":R,"step":S,"message":M,"now_ms":N}`
        let fixed = r#"{"type":"model_done","run_id":,"step":,"message":}"#.len()
            + runcore::limits::decimal_len(u64::from(step))
            + runcore::limits::now_ms_len(now_ms)
            + message.len();
        check_line(fixed, &[&run_id])?;
        if let Some(message) = assistant_message(message) {
            let input = Input::ModelDone {
                run_id: RunId::new(run_id),
                step,
                message,
            };
            return self.apply(input, now_ms);
        }
        let mut line = format!(
            "{{\"type\":\"model_done\",\"run_id\":{},\"step\":{step},\"message\":",
            Value::from(run_id)
        );
        line.push_str(&String::from_utf8_lossy(message));
        if let Some(now) = now_ms {
            line.push_str(&format!(",\"now_ms\":{now}"));
        }
        line.push('}');
        self.handle_bytes(line.as_bytes())
    }

    /// The next output on the tape (in `ops` and the returned text), or `None`.
    pub(crate) fn poll_tape_words(&mut self, ops: &TapeArray) -> napi::Result<Option<Text>> {
        self.guarded(|this| this.one_taken(ops))
    }

    /// The next output, taken (the first one held from a failed tape first), alone on the
    /// tape; it stays held until JavaScript has the tape's string ([`NativeAgent::tape_sent`]).
    fn one_taken(&mut self, ops: &TapeArray) -> napi::Result<Option<Text>> {
        if self.held.is_empty() {
            self.held_sent = self.sent;
            match self.next_output() {
                Some(output) => self.held.push(output),
                None => return Ok(None),
            }
        } else {
            self.sent = self.held_sent;
        }
        self.write_held(ops, 1)
    }

    /// Writes the first `count` held outputs on one tape.
    fn write_held(&mut self, ops: &TapeArray, count: usize) -> napi::Result<Option<Text>> {
        let held = std::mem::take(&mut self.held);
        self.tape.begin(known(ops));
        for output in &held[..count] {
            self.write(output);
        }
        self.held = held;
        self.held_on_tape = count;
        Ok(Some(self.finish(ops)))
    }

    /// `pollAhead`: takes the `consumed` outputs JavaScript handed out of the batch it held;
    /// then, when outputs are queued, puts every one of them on the tape without taking them
    /// (they stay in the outbox until a later `consumed` says they were handed out), else the
    /// next output as `poll` hands it out (an action, taken), or `None`.
    pub(crate) fn poll_ahead_words(
        &mut self,
        ops: &TapeArray,
        consumed: u32,
    ) -> napi::Result<Option<Text>> {
        self.guarded(|this| {
            this.take_peeked(consumed);
            if this.held.is_empty() {
                this.drop_leading_commits();
            }
            if !this.held.is_empty() || this.driver.agent().pending_outputs() == 0 {
                return this.one_taken(ops);
            }
            this.tape.begin(known(ops));
            let cap = BATCH_TEXT.min(TEXT_CAP.with(Cell::get) / 2);
            let NativeAgent {
                driver,
                sent,
                canonical,
                tape,
                peeked,
                drop_commits,
                bare_calls,
                ..
            } = this;
            let agent = driver.agent();
            let mut count = 0;
            for output in agent.peek_outputs() {
                if *drop_commits && matches!(output, runcore::Output::Commit(_)) {
                    // Dropped unseen when the outputs around it are taken (`take_peeked`).
                    continue;
                }
                tape.write(&bare_call(
                    output_line(agent, output, driver.context(), sent, canonical),
                    *bare_calls,
                ));
                count += 1;
                if tape.text_len() > cap {
                    // The rest wait for the next batch: no batch grows past what JavaScript
                    // can take as one string.
                    break;
                }
            }
            *peeked = count;
            Ok(Some(this.finish(ops)))
        })
    }

    /// `settle`: takes the `consumed` outputs JavaScript handed out of the batch it held, and
    /// forgets the rest of that batch (those outputs are polled again).
    pub(crate) fn settle(&mut self, consumed: u32) -> napi::Result<()> {
        self.guarded(|this| {
            this.take_peeked(consumed);
            Ok(())
        })
    }

    /// Takes the first `consumed` of the peeked outputs (never more than were peeked, nor an
    /// action: peeked outputs are queued ones).
    /// When this agent drops commits, the commits among them (never on the tape) are dropped
    /// as they are passed, not counted.
    fn take_peeked(&mut self, consumed: u32) {
        let mut left = (consumed as usize).min(self.peeked);
        while left > 0 && self.driver.agent().pending_outputs() > 0 {
            match self.driver.poll() {
                Some(runcore::Output::Commit(_)) if self.drop_commits => {}
                Some(_) => left -= 1,
                None => break,
            }
        }
        self.peeked = 0;
    }

    /// Every output up to the next input on one tape.
    pub(crate) fn poll_all_tape_words(&mut self, ops: &TapeArray) -> napi::Result<Text> {
        self.guarded(|this| {
            if this.held.is_empty() {
                this.held_sent = this.sent;
            } else {
                this.sent = this.held_sent;
            }
            while let Some(output) = this.next_output() {
                this.held.push(output);
            }
            // Held until JavaScript has the string (see `tape_sent`).
            let count = this.held.len();
            let text = this.write_held(ops, count)?;
            Ok(text.unwrap_or_else(unreachable_text))
        })
    }

    /// The next output as its driver line's JSON text.
    fn next_line(&mut self) -> Option<String> {
        let output = if self.held.is_empty() {
            self.next_output()?
        } else {
            self.sent = self.held_sent;
            self.held.remove(0)
        };
        let context = self.driver.context();
        let line = render_line(&bare_call(
            output_line(
                self.driver.agent(),
                &output,
                context,
                &mut self.sent,
                &mut self.canonical,
            ),
            self.bare_calls,
        ));
        self.held_sent = self.sent;
        Some(line)
    }

    /// `pollLine`: the next output's driver line, or `None`. A queued output is rendered
    /// where it is, in the outbox (taken once JavaScript has the line); an action is taken
    /// (the first one held from a failed string first) and held until JavaScript has the
    /// line ([`NativeAgent::line_sent`]).
    pub(crate) fn poll_line_text(&mut self) -> napi::Result<Option<Text>> {
        self.guarded(|this| {
            this.line_peeked = false;
            let context = this.driver.context();
            if this.held.is_empty() {
                this.held_sent = this.sent;
                this.drop_leading_commits();
                if let Some(output) = this.driver.agent().peek_outputs().next() {
                    let text = render_line(&bare_call(
                        output_line(
                            this.driver.agent(),
                            output,
                            context,
                            &mut this.sent,
                            &mut this.canonical,
                        ),
                        this.bare_calls,
                    ));
                    this.line_peeked = true;
                    let ascii = text.is_ascii();
                    return Ok(Some(Text { text, ascii }));
                }
                match this.next_output() {
                    Some(output) => this.held.push(output),
                    None => return Ok(None),
                }
            } else {
                this.sent = this.held_sent;
            }
            let text = render_line(&bare_call(
                output_line(
                    this.driver.agent(),
                    &this.held[0],
                    context,
                    &mut this.sent,
                    &mut this.canonical,
                ),
                this.bare_calls,
            ));
            this.held_on_tape = 1;
            let ascii = text.is_ascii();
            Ok(Some(Text { text, ascii }))
        })
    }

    /// After a line of [`NativeAgent::poll_line_text`] was (or failed to be) made a
    /// JavaScript string: when it failed, its output stays where it was (queued, or held: the
    /// next poll of any kind hands it out first, rendered from the same sent context); else
    /// it is handed out.
    pub(crate) fn line_sent(
        &mut self,
        sent: napi::Result<napi::sys::napi_value>,
    ) -> napi::Result<napi::sys::napi_value> {
        let peeked = std::mem::take(&mut self.line_peeked);
        if sent.is_err() {
            self.held_on_tape = 0;
            self.sent = self.held_sent;
        } else if peeked {
            // The queued output JavaScript now has: taken from the outbox.
            let _ = self.driver.poll();
            self.held_sent = self.sent;
        } else {
            self.delivered();
        }
        sent
    }

    /// The agent's next output, past the commits this agent drops.
    fn next_output(&mut self) -> Option<runcore::Output> {
        loop {
            match self.driver.poll()? {
                runcore::Output::Commit(_) if self.drop_commits => {}
                output => return Some(output),
            }
        }
    }

    /// Takes the commits at the front of the outbox, when this agent drops commits.
    fn drop_leading_commits(&mut self) {
        while self.drop_commits
            && matches!(
                self.driver.agent().peek_outputs().next(),
                Some(runcore::Output::Commit(_))
            )
        {
            let _ = self.driver.poll();
        }
    }

    /// Writes `output`'s line on the tape.
    fn write(&mut self, output: &runcore::Output) {
        let context = self.driver.context();
        let line = bare_call(
            output_line(
                self.driver.agent(),
                output,
                context,
                &mut self.sent,
                &mut self.canonical,
            ),
            self.bare_calls,
        );
        self.tape.write(&line);
    }

    fn finish(&mut self, ops: &TapeArray) -> Text {
        let (text, ascii) = self.tape.finish();
        self.tape.take_words(ops.len(), |words| ops.write(words));
        Text { text, ascii }
    }

    /// After a tape's text was (or failed to be) made a JavaScript string: when it failed
    /// (past V8's string limit, say), the batch never reached JavaScript, so nothing of it
    /// counts as handed out (every queued output stays queued) and the next batch finds the
    /// tables out of step and starts them afresh on both sides.
    pub(crate) fn tape_sent(
        &mut self,
        sent: napi::Result<napi::sys::napi_value>,
    ) -> napi::Result<napi::sys::napi_value> {
        if sent.is_err() {
            self.peeked = 0;
            self.tape.forget();
            // The held outputs are rendered again, from the sent context they were first
            // rendered in.
            self.sent = self.held_sent;
        } else {
            self.delivered();
        }
        sent
    }

    /// JavaScript has the last tape: its held outputs are handed out.
    fn delivered(&mut self) {
        let count = self.held_on_tape.min(self.held.len());
        self.held.drain(..count);
        self.held_on_tape = 0;
        self.held_sent = self.sent;
    }

    fn active_run(&self, what: &str) -> napi::Result<String> {
        self.driver
            .agent()
            .active_run_id()
            .map(|run| run.as_str().to_owned())
            .ok_or_else(|| internal(format!("{what} was accepted but no run is active")))
    }

    fn usable(&self) -> napi::Result<()> {
        if self.poisoned {
            return Err(internal(
                "this Agent is unusable after an internal error (a Rust panic)",
            ));
        }
        Ok(())
    }
}

#[napi]
impl NativeAgent {
    /// An idle agent; `config` is the JSON text of a config object (the fields of a `config`
    /// line).
    #[napi(constructor, catch_unwind)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        let mut this = NativeAgent::from_driver(Driver::new());
        if let Some(config) = config {
            let line =
                config_line(Some(parse_json(&config, "the config")?)).map_err(invalid_json)?;
            this.guarded(|this| this.driver.apply(line).map_err(|e| agent_error(&e)))?;
        }
        Ok(this)
    }

    /// Applies one driver input line (its JSON text), exactly as the driver does.
    #[napi(catch_unwind)]
    pub fn handle(&mut self, line: String) -> napi::Result<()> {
        self.handle_bytes(line.as_bytes())
    }

    /// Applies an input line and returns the active run's id (`prompt`, `continue`).
    #[napi(catch_unwind)]
    pub fn handle_starting(&mut self, line: String) -> napi::Result<String> {
        self.handle(line)?;
        self.active_run("the input")
    }

    /// Applies an `import` line (SPEC §8.10) and returns the import's run id.
    #[napi(catch_unwind)]
    pub fn handle_imported(&mut self, line: String) -> napi::Result<String> {
        let before = self.driver.agent().last_end().map(|(run, _)| run.clone());
        self.handle(line)?;
        match self.driver.agent().last_end() {
            Some((run, _)) if Some(run) != before.as_ref() => Ok(run.as_str().to_owned()),
            _ => Err(internal("import was accepted but no run ended")),
        }
    }

    /// `prompt` built directly: returns the new run's id.
    #[napi(catch_unwind)]
    pub fn prompt(
        &mut self,
        text: String,
        run_id: Option<String>,
        now_ms: Option<f64>,
    ) -> napi::Result<String> {
        let now_ms = now_of(now_ms)?;
        // `{"type":"prompt","text":T,"run_id":R,"now_ms":N}`
        let fixed = r#"{"type":"prompt","text":}"#.len() + runcore::limits::now_ms_len(now_ms);
        match &run_id {
            Some(run) => check_line(fixed + r#","run_id":"#.len(), &[&text, run])?,
            None => check_line(fixed, &[&text])?,
        }
        let input = Input::Prompt {
            message: Some(UserMessage::text(text)),
            messages: Vec::new(),
            run_id: run_id.map(RunId::from),
        };
        self.apply(input, now_ms)?;
        self.active_run("prompt")
    }

    /// `model_delta` built directly.
    #[napi(catch_unwind)]
    pub fn model_delta(
        &mut self,
        run_id: String,
        step: u32,
        text: String,
        now_ms: Option<f64>,
    ) -> napi::Result<()> {
        let now_ms = now_of(now_ms)?;
        // `{"type":"model_delta","run_id":R,"step":S,"text":T,"now_ms":N}`
        let fixed = r#"{"type":"model_delta","run_id":,"step":,"text":}"#.len()
            + runcore::limits::decimal_len(u64::from(step))
            + runcore::limits::now_ms_len(now_ms);
        check_line(fixed, &[&run_id, &text])?;
        let input = Input::ModelDelta {
            run_id: RunId::new(run_id),
            step,
            text,
            kind: runcore::DeltaKind::Text,
        };
        self.apply(input, now_ms)
    }

    /// `tool_done` with one text block, built directly; `meta` is the JSON text of its `meta`
    /// object, if any. A `meta` that is not a JSON object goes through the whole line, for the
    /// driver's own error.
    #[napi(catch_unwind)]
    pub fn tool_done_text(
        &mut self,
        run_id: String,
        call_id: String,
        text: String,
        is_error: bool,
        now_ms: Option<f64>,
        meta: Option<String>,
    ) -> napi::Result<()> {
        let now_ms = now_of(now_ms)?;
        // `{"type":"tool_done","run_id":R,"call_id":C,"content":T,"is_error":B,"meta":M,
        // "now_ms":N}`
        let fixed = r#"{"type":"tool_done","run_id":,"call_id":,"content":,"is_error":}"#.len()
            + if is_error { 4 } else { 5 }
            + meta.as_ref().map_or(0, |m| r#","meta":"#.len() + m.len())
            + runcore::limits::now_ms_len(now_ms);
        check_line(fixed, &[&run_id, &call_id, &text])?;
        // The text kept exactly (key order, integers beyond 64 bits, SPEC §2.1).
        let meta = match meta.map(|m| runcore::Meta::from_json(&m).map_err(|_| m)) {
            None => runcore::Meta::new(),
            Some(Ok(meta)) => meta,
            Some(Err(meta)) => {
                let mut line = format!(
                    "{{\"type\":\"tool_done\",\"run_id\":{},\"call_id\":{},\"content\":{},\"is_error\":{is_error},\"meta\":{meta}",
                    Value::from(run_id),
                    Value::from(call_id),
                    Value::from(text)
                );
                if let Some(now) = now_ms {
                    line.push_str(&format!(",\"now_ms\":{now}"));
                }
                line.push('}');
                return self.handle_bytes(line.as_bytes());
            }
        };
        let input = Input::ToolDone {
            run_id: RunId::new(run_id),
            call_id: CallId::new(call_id),
            content: vec![ContentBlock::text(text)],
            is_error,
            details: None,
            meta,
        };
        self.apply(input, now_ms)
    }

    /// `model_done` with a text-only answer (`{content: [{type: "text", text}], stop_reason}`),
    /// built directly. `false` (nothing done) when `stop_reason` is not a stop reason: the
    /// caller then sends the message as JSON, for the driver's own error.
    pub(crate) fn model_done_text(
        &mut self,
        run_id: String,
        step: u32,
        text: String,
        stop_reason: &str,
        now_ms: Option<f64>,
    ) -> napi::Result<bool> {
        use serde::Deserialize;
        use serde::de::IntoDeserializer;
        let reason: Result<StopReason, serde::de::value::Error> =
            StopReason::deserialize(stop_reason.into_deserializer());
        let Ok(stop_reason) = reason else {
            return Ok(false);
        };
        let now_ms = now_of(now_ms)?;
        // `{"type":"model_done","run_id":R,"step":S,"message":{"content":[{"type":"text",
        // "text":T}],"stop_reason":"…"},"now_ms":N}`
        let fixed = r#"{"type":"model_done","run_id":,"step":,"message":{"content":[{"type":"text","text":}],"stop_reason":""}}"#.len()
            + runcore::limits::decimal_len(u64::from(step))
            + stop_reason_len(stop_reason)
            + runcore::limits::now_ms_len(now_ms);
        check_line(fixed, &[&run_id, &text])?;
        let input = Input::ModelDone {
            run_id: RunId::new(run_id),
            step,
            message: AssistantMessage::new(vec![AssistantBlock::text(text)], stop_reason),
        };
        self.apply(input, now_ms).map(|()| true)
    }

    /// Drops every later commit output unseen (`true`), or hands them out again (`false`):
    /// for a host that keeps no store (`runcore/pi` in memory), so no commit is hashed,
    /// written or decoded for nothing. Events and actions are handed out as before.
    #[napi(catch_unwind)]
    pub fn set_drop_commits(&mut self, drop: bool) -> napi::Result<()> {
        self.usable()?;
        self.drop_commits = drop;
        Ok(())
    }

    /// `call_model` outputs without their messages (`true`: `"messages": []`, every other
    /// field as ever), or with them again (`false`): for a host that keeps the transcript
    /// itself and never reads them (`runcore/pi`).
    #[napi(catch_unwind)]
    pub fn set_bare_calls(&mut self, bare: bool) -> napi::Result<()> {
        self.usable()?;
        self.bare_calls = bare;
        Ok(())
    }

    /// The next output as its driver line's JSON text, or `null`.
    #[napi(catch_unwind)]
    pub fn poll(&mut self) -> napi::Result<Option<String>> {
        self.guarded(|this| Ok(this.next_line()))
    }

    /// Every output up to the next input, as one JSON array's text.
    #[napi(catch_unwind)]
    pub fn poll_all(&mut self) -> napi::Result<String> {
        self.guarded(|this| {
            let mut text = String::from("[");
            while let Some(line) = this.next_line() {
                if text.len() > 1 {
                    text.push(',');
                }
                text.push_str(&line);
            }
            text.push(']');
            Ok(text)
        })
    }

    /// The next output on the tape (`index.js` decodes it from `ops` and the returned text),
    /// or `null`.
    #[napi(catch_unwind, ts_args_type = "ops: Uint32Array")]
    pub fn poll_tape(
        &mut self,
        env: napi::Env,
        ops: napi::Unknown<'_>,
    ) -> napi::Result<Option<Text>> {
        let text = self.poll_tape_words(&words(env, ops)?)?;
        // napi-rs makes the string after this returns: taken as delivered.
        self.delivered();
        Ok(text)
    }

    /// Every output up to the next input on one tape (none: an empty tape).
    #[napi(catch_unwind, ts_args_type = "ops: Uint32Array")]
    pub fn poll_all_tape(&mut self, env: napi::Env, ops: napi::Unknown<'_>) -> napi::Result<Text> {
        let text = self.poll_all_tape_words(&words(env, ops)?)?;
        // napi-rs makes the string after this returns: taken as delivered.
        self.delivered();
        Ok(text)
    }

    /// Copies the last tape into `ops` when it did not fit the array it was polled with; false
    /// if `ops` is still too short.
    #[napi(catch_unwind, ts_args_type = "ops: Uint32Array")]
    pub fn tape_copy(&mut self, env: napi::Env, ops: napi::Unknown<'_>) -> napi::Result<bool> {
        let ops = words(env, ops)?;
        Ok(self.tape.copy_pending(ops.len(), |words| ops.write(words)))
    }

    /// Lets the plain Node-API functions of `raw` (the hot methods) act on this agent.
    ///
    /// Throws when it was called already: one JavaScript `Agent` per native agent (a second
    /// wrapper would decode the first one's tapes with its own tables).
    #[napi(catch_unwind)]
    pub fn enable_fast_calls(&mut self) -> napi::Result<()> {
        if register(self) {
            Ok(())
        } else {
            Err(bad_argument(
                "this native agent has an Agent already (one Agent per native agent)",
            ))
        }
    }

    /// Forgets the tape's key and shape tables (`index.js` forgets its own).
    #[napi(catch_unwind)]
    pub fn tape_reset(&mut self) {
        self.tape.forget();
    }

    /// The outstanding model call as its `call_model` line with the whole transcript, or
    /// `null`.
    #[napi(catch_unwind)]
    pub fn model_request(&mut self) -> napi::Result<Option<String>> {
        self.guarded(|this| {
            let agent = this.driver.agent();
            let Some(request) = agent.model_request() else {
                return Ok(None);
            };
            let mut sent = runcore::driver::SentContext::default();
            let line = call_model_line(
                agent,
                request.run_id,
                request.step,
                request.final_step,
                ContextMode::Full,
                &mut sent,
            );
            serde_json::to_string(&line)
                .map(Some)
                .map_err(|e| internal(e.to_string()))
        })
    }

    /// The earliest `now_ms` at which something is due, or `null`.
    #[napi(catch_unwind)]
    pub fn poll_timeout(&self) -> Option<f64> {
        // Milliseconds since the epoch are far below 2^53: exact as a double.
        self.driver.agent().poll_timeout().map(|t| t as f64)
    }

    /// The whole agent as JSON text.
    #[napi(catch_unwind)]
    pub fn snapshot(&self) -> napi::Result<String> {
        self.usable()?;
        Ok(self.driver.agent().snapshot_json())
    }

    /// An agent from `snapshot()` text, in `context` (`"full"` or `"delta"`).
    #[napi(factory, catch_unwind)]
    pub fn restore(snapshot: String, context: Option<String>) -> napi::Result<Self> {
        let context = match context {
            Some(name) => parse_context(&name).map_err(bad_argument)?,
            None => ContextMode::Full,
        };
        let restored = guard(|| Agent::restore_json(&snapshot))
            .map_err(|()| internal("runcore panicked (a bug) while restoring a snapshot"))?
            .map_err(|e| snapshot_error(&e))?;
        Ok(NativeAgent::from_driver(Driver::from_agent(
            restored, context,
        )))
    }

    /// An agent rebuilt from what `store` committed for `thread_id` (SPEC §8.7), configured by
    /// `config` (JSON text of a config object; its thread defaults to `thread_id`).
    #[napi(factory, catch_unwind)]
    pub fn recover(
        store: &NativeStore,
        thread_id: String,
        policy: String,
        config: Option<String>,
    ) -> napi::Result<Self> {
        let policy = parse_policy(&policy).map_err(bad_argument)?;
        let config: Option<Value> = match config {
            Some(text) => Some(parse_json(&text, "the config")?),
            None => None,
        };
        let (config, line) = agent_config(config, Some(&thread_id)).map_err(invalid_json)?;
        let thread = ThreadId::new(thread_id);
        let shared = store.shared.clone();
        let recovered = guard(move || {
            let backend = shared.lock().map_err(|e| store_error(&e))?;
            Agent::recover(config, &*backend, &thread, policy).map_err(|e| match e {
                RecoverError::Store(e) => store_error(&e),
                RecoverError::Invalid(e) => agent_error(&e),
                other => internal(other.to_string()),
            })
        })
        .map_err(|()| internal("runcore panicked (a bug) while recovering"))??;
        Ok(NativeAgent::from_driver(Driver::from_agent(
            recovered,
            line.context.unwrap_or_default(),
        )))
    }

    /// Panics inside the boundary's guard, as a bug in runcore would (for the tests: the panic
    /// becomes `InternalError` and the agent refuses every later call).
    #[napi(js_name = "_panicForTests", catch_unwind)]
    pub fn panic_for_tests(&mut self, message: String) -> napi::Result<()> {
        self.guarded(|_| -> napi::Result<()> { panic!("{message}") })
    }

    /// The thread this agent drives.
    #[napi(getter, catch_unwind)]
    pub fn thread_id(&self) -> String {
        self.driver.agent().thread_id().as_str().to_owned()
    }

    /// The active run's id (`null` when idle).
    #[napi(getter, catch_unwind)]
    pub fn active_run_id(&self) -> Option<String> {
        self.driver
            .agent()
            .active_run_id()
            .map(|run| run.as_str().to_owned())
    }

    /// The agent's clock: the latest `now_ms` of an accepted input.
    #[napi(getter, catch_unwind)]
    pub fn clock_ms(&self) -> f64 {
        self.driver.agent().clock_ms() as f64
    }

    /// True when no run is active and nothing is left to poll.
    #[napi(getter, catch_unwind)]
    pub fn is_idle(&self) -> bool {
        self.driver.agent().is_idle()
    }

    /// `"full"` or `"delta"`.
    #[napi(getter, catch_unwind)]
    pub fn context(&self) -> &'static str {
        self.driver.context().as_str()
    }

    /// The ticket the active run waits on, as JSON text (`null` unless awaiting).
    #[napi(catch_unwind)]
    pub fn current_ticket(&self) -> Option<String> {
        self.driver
            .agent()
            .current_ticket()
            .and_then(|ticket| serde_json::to_string(ticket).ok())
    }

    /// The transcript, as the JSON text of a list of messages.
    #[napi(catch_unwind)]
    pub fn transcript(&self) -> napi::Result<String> {
        serde_json::to_string(self.driver.agent().transcript()).map_err(|e| internal(e.to_string()))
    }
}

/// An empty batch text (what a tape of no outputs never needs: `write_held` always gives one).
fn unreachable_text() -> Text {
    Text {
        text: String::new(),
        ascii: true,
    }
}
