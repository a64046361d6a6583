//! The Agent's hot methods as plain Node-API functions (`agentPoll`, `agentModelDelta`, …,
//! exported beside the classes), each taking the `NativeAgent` as its first argument.
//!
//! A napi-rs class method costs about 0.28 µs a call on the development machine before it does
//! anything (its borrow bookkeeping and class identity lookup); a w1 step makes some fifty
//! calls. These functions do only what Node-API needs: read the arguments, find the agent,
//! call the same `NativeAgent` code the class methods call.
//!
//! Finding the agent: `napi_unwrap` gives the pointer napi-rs wrapped, which is used only if it
//! is a live `NativeAgent` registered by `enableFastCalls()` (a thread's set of addresses,
//! removed when the agent is dropped), so no other object is ever read as one. Input strings
//! are read into a reused buffer.
//!
//! Handles: every `sys::napi_env` and `sys::napi_value` the private helpers below are given is
//! the current Node-API callback's own (its `env`, its arguments, or a value made with that
//! `env` during the call): only the `callback!` bodies and `exports` call them, with their own.
//! The `// SAFETY:` comments below rely on that and on nothing else about the callers.

// A test build has no module registration (napi-derive leaves it out), so nothing here is
// reached from it.
#![cfg_attr(test, allow(dead_code))]

use std::cell::RefCell;
use std::ffi::{CString, c_void};
use std::ptr;

use napi::sys;

use crate::agent::{LIVE, NativeAgent, Text};
use crate::napi_memory::{check, failed, read_capacity, read_whole, words};

thread_local! {
    /// Scratch space for string arguments.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

type Result<T> = napi::Result<T>;

/// The call's first `N` arguments (`undefined` past those given).
///
/// # Safety
///
/// `env` and `info` are the environment and callback info Node-API passed the callback that
/// is running now (they are valid only during that call).
unsafe fn arguments<const N: usize>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> Result<[sys::napi_value; N]> {
    let mut argc = N;
    let mut argv = [ptr::null_mut(); N];
    // SAFETY: `env` and `info` are the running callback's (this function's contract); `argv`
    // has room for `argc` values, and Node-API writes at most `argc`.
    let status = unsafe {
        sys::napi_get_cb_info(
            env,
            info,
            &mut argc,
            argv.as_mut_ptr(),
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    check(status, "napi_get_cb_info")?;
    Ok(argv)
}

/// The registered agent wrapped by `value`.
///
/// # Safety
///
/// `env` is the running callback's and `value` one of its arguments; the reference returned
/// is used only during that call, and no other reference to the same agent is live meanwhile
/// (each callback takes one agent, once, and runs no JavaScript that could call back in).
unsafe fn agent<'a>(env: sys::napi_env, value: sys::napi_value) -> Result<&'a mut NativeAgent> {
    let mut wrapped: *mut c_void = ptr::null_mut();
    // SAFETY: `env` and `value` are the running callback's (this function's contract);
    // `napi_unwrap` only reads the object's wrapped pointer (an error for other values).
    let status = unsafe { sys::napi_unwrap(env, value, &mut wrapped) };
    let address = wrapped as usize;
    if status != sys::Status::napi_ok || !LIVE.with(|live| live.borrow().contains_key(&address)) {
        return Err(napi::Error::from_reason(
            "runcore: the first argument is not an agent that takes fast calls",
        ));
    }
    // SAFETY: a registered address is a live `NativeAgent` (napi-rs's box, which it frees only
    // after dropping it, which unregisters it); the caller holds no other reference to it and
    // uses this one only during the call (this function's contract), and JavaScript, which
    // could reach it through a class method, does not run before the call returns.
    Ok(unsafe { &mut *(wrapped as *mut NativeAgent) })
}

fn value_type(env: sys::napi_env, value: sys::napi_value) -> Result<sys::napi_valuetype> {
    let mut kind = 0;
    check(
        // SAFETY: `env` and `value` are the running callback's (see the module's note on handles).
        unsafe { sys::napi_typeof(env, value, &mut kind) },
        "napi_typeof",
    )?;
    Ok(kind)
}

fn argument_error(what: &str) -> napi::Error {
    crate::errors::bad_argument(format!("{what} must be a string"))
}

/// The scratch buffer's capacity kept between calls: a larger one (after a large string) is
/// released when the call ends.
const SCRATCH_KEEP: usize = 1 << 20;

/// Runs `f` on the UTF-8 bytes of the string `value` (read into the thread's scratch buffer,
/// which `f` may change: it is overwritten by the next read).
fn with_str<T>(
    env: sys::napi_env,
    value: sys::napi_value,
    what: &str,
    f: impl FnOnce(&mut [u8]) -> Result<T>,
) -> Result<T> {
    if value_type(env, value)? != sys::ValueType::napi_string {
        return Err(argument_error(what));
    }
    let mut buffer = SCRATCH.with(|scratch| std::mem::take(&mut *scratch.borrow_mut()));
    let result = read_str(env, value, &mut buffer).and_then(|()| f(&mut buffer));
    if buffer.capacity() > SCRATCH_KEEP {
        // Released after a large string: the next call starts small again.
        buffer = Vec::new();
    }
    SCRATCH.with(|scratch| *scratch.borrow_mut() = buffer);
    result
}

/// Reads the string `value` as UTF-8 into `buffer` (its whole length).
fn read_str(env: sys::napi_env, value: sys::napi_value, buffer: &mut Vec<u8>) -> Result<()> {
    if buffer.capacity() < 256 {
        buffer.reserve(256);
    }
    let capacity = read_capacity(buffer.capacity());
    let mut written = 0;
    check(
        // SAFETY: `env` and `value` are the running callback's (see the module's note on
        // handles) and `value` is a string (checked by `with_str`); the buffer has room for at
        // least `capacity` bytes, and Node writes at most `capacity - 1` bytes and a NUL.
        unsafe {
            sys::napi_get_value_string_utf8(
                env,
                value,
                buffer.as_mut_ptr().cast(),
                capacity,
                &mut written,
            )
        },
        "napi_get_value_string_utf8",
    )?;
    if read_whole(written, capacity) {
        // SAFETY: Node initialized the first `written` bytes, and `written` < `capacity` <=
        // the buffer's capacity.
        unsafe { buffer.set_len(written) };
        return Ok(());
    }
    let mut length = 0;
    check(
        // SAFETY: handles as above; a null buffer with size 0 asks for the length only (nothing
        // is written but `length`).
        unsafe { sys::napi_get_value_string_utf8(env, value, ptr::null_mut(), 0, &mut length) },
        "napi_get_value_string_utf8",
    )?;
    if length > runcore::limits::MAX_LINE_BYTES {
        // No line holds it (`runcore::limits`): refused before it is copied.
        return Err(crate::errors::invalid_json(runcore::limits::line_too_long(
            length,
        )));
    }
    buffer.clear();
    buffer.reserve(length + 1);
    check(
        // SAFETY: handles as above; the buffer (cleared, then reserved) has room for `length + 1`
        // bytes, the most Node writes for a buffer of that size (the string and its NUL).
        unsafe {
            sys::napi_get_value_string_utf8(
                env,
                value,
                buffer.as_mut_ptr().cast(),
                length + 1,
                &mut written,
            )
        },
        "napi_get_value_string_utf8",
    )?;
    if written > length || written >= buffer.capacity() {
        return Err(failed(
            "napi_get_value_string_utf8 wrote more than the string's length",
        ));
    }
    // SAFETY: Node initialized the first `written` bytes, and `written` < the buffer's
    // capacity (checked just above).
    unsafe { buffer.set_len(written) };
    Ok(())
}

/// The string `value` as an owned `String`.
fn string(env: sys::napi_env, value: sys::napi_value, what: &str) -> Result<String> {
    with_str(env, value, what, |bytes| {
        // Node writes valid UTF-8 (a lone surrogate would become U+FFFD: `index.js` sends
        // strings that are not well-formed through the line, which refuses them).
        String::from_utf8(bytes.to_vec()).map_err(|_| failed("a string was not UTF-8"))
    })
}

/// `undefined` or `null` as `None`, else the string.
fn optional_string(
    env: sys::napi_env,
    value: sys::napi_value,
    what: &str,
) -> Result<Option<String>> {
    match value_type(env, value)? {
        sys::ValueType::napi_undefined | sys::ValueType::napi_null => Ok(None),
        _ => string(env, value, what).map(Some),
    }
}

/// `undefined` or `null` as `None`, else the number.
fn optional_number(env: sys::napi_env, value: sys::napi_value) -> Result<Option<f64>> {
    match value_type(env, value)? {
        sys::ValueType::napi_undefined | sys::ValueType::napi_null => Ok(None),
        sys::ValueType::napi_number => number(env, value).map(Some),
        _ => Err(crate::errors::bad_argument("nowMs must be a number")),
    }
}

fn number(env: sys::napi_env, value: sys::napi_value) -> Result<f64> {
    let mut number = 0.0;
    check(
        // SAFETY: `env` and `value` are the running callback's (see the module's note on handles);
        // the out-parameter is a local.
        unsafe { sys::napi_get_value_double(env, value, &mut number) },
        "napi_get_value_double",
    )?;
    Ok(number)
}

fn step(env: sys::napi_env, value: sys::napi_value) -> Result<u32> {
    let step = number(env, value)?;
    if step >= 0.0 && step <= f64::from(u32::MAX) && step.fract() == 0.0 {
        // An integer in range: exact.
        Ok(step as u32)
    } else {
        Err(crate::errors::bad_argument(
            "step must be an integer from 0 to 2^32 - 1",
        ))
    }
}

fn boolean(env: sys::napi_env, value: sys::napi_value) -> Result<bool> {
    let mut flag = false;
    check(
        // SAFETY: `env` and `value` are the running callback's (see the module's note on handles);
        // the out-parameter is a local.
        unsafe { sys::napi_get_value_bool(env, value, &mut flag) },
        "napi_get_value_bool",
    )?;
    Ok(flag)
}

/// A copy of the bytes of the Node `Buffer` `value` (any other value is an error), read by raw
/// pointer: the memory may be a `SharedArrayBuffer` another thread writes meanwhile, so no Rust
/// reference to it is made, and the copy is what the caller reads.
///
/// # Safety
///
/// `env` is the environment of the Node-API call running now and `value` one of its
/// arguments (its memory stays alive until that call returns).
pub(crate) unsafe fn buffer_copy(env: sys::napi_env, value: sys::napi_value) -> Result<Vec<u8>> {
    let mut data: *mut c_void = ptr::null_mut();
    let mut length = 0;
    // SAFETY: `env` and `value` are the running call's (this function's contract); the status
    // says whether `value` is a Buffer; both out-parameters are locals.
    let status = unsafe { sys::napi_get_buffer_info(env, value, &mut data, &mut length) };
    if status != sys::Status::napi_ok {
        return Err(crate::errors::bad_argument(
            "a line is a string or a Buffer",
        ));
    }
    let mut copy = Vec::with_capacity(length);
    if length > 0 && !data.is_null() {
        // SAFETY: the Buffer's `length` bytes at `data` are alive until the call returns (this
        // function's contract); they are read by raw pointer into our own new allocation of
        // `length` bytes (no overlap), which they then initialize.
        unsafe {
            ptr::copy_nonoverlapping(data.cast::<u8>(), copy.as_mut_ptr(), length);
            copy.set_len(length);
        }
    }
    Ok(copy)
}

fn null(env: sys::napi_env) -> Result<sys::napi_value> {
    let mut value = ptr::null_mut();
    check(
        // SAFETY: `env` is the running callback's (see the module's note on handles); the
        // out-parameter is a local.
        unsafe { sys::napi_get_null(env, &mut value) },
        "napi_get_null",
    )?;
    Ok(value)
}

fn undefined(env: sys::napi_env) -> Result<sys::napi_value> {
    let mut value = ptr::null_mut();
    check(
        // SAFETY: `env` is the running callback's (see the module's note on handles); the
        // out-parameter is a local.
        unsafe { sys::napi_get_undefined(env, &mut value) },
        "napi_get_undefined",
    )?;
    Ok(value)
}

fn boolean_value(env: sys::napi_env, flag: bool) -> Result<sys::napi_value> {
    let mut value = ptr::null_mut();
    check(
        // SAFETY: `env` is the running callback's (see the module's note on handles); the
        // out-parameter is a local.
        unsafe { sys::napi_get_boolean(env, flag, &mut value) },
        "napi_get_boolean",
    )?;
    Ok(value)
}

fn js_string(env: sys::napi_env, text: &str) -> Result<sys::napi_value> {
    let mut value = ptr::null_mut();
    check(
        // SAFETY: `env` is the running callback's (see the module's note on handles); `text` is
        // `text.len()` valid bytes, which Node copies.
        unsafe {
            sys::napi_create_string_utf8(env, text.as_ptr().cast(), text.len() as isize, &mut value)
        },
        "napi_create_string_utf8",
    )?;
    Ok(value)
}

fn text(env: sys::napi_env, text: Option<Text>) -> Result<sys::napi_value> {
    match text {
        // SAFETY: `env` is the running callback's (see the module's note on handles), as
        // `Text::to_js` requires.
        Some(text) => unsafe { text.to_js(env) },
        None => null(env),
    }
}

/// Answers the call: its value, or `undefined` after throwing the error.
fn answer(env: sys::napi_env, result: Result<sys::napi_value>) -> sys::napi_value {
    match result {
        Ok(value) => value,
        Err(error) => {
            let message = CString::new(error.reason.replace('\0', "\\u0000"))
                .unwrap_or_else(|_| c"runcore: an error".to_owned());
            // SAFETY: `env` is the running callback's (see the module's note on handles); the
            // message is a NUL-terminated string that outlives the call, which copies it.
            unsafe { sys::napi_throw_error(env, ptr::null(), message.as_ptr()) };
            ptr::null_mut()
        }
    }
}

/// A plain Node-API function: its JavaScript arguments are bound to the names in brackets
/// (missing ones are `undefined`), `body` computes the call's value, and an error it returns
/// is thrown instead.
macro_rules! callback {
    ($(#[$doc:meta])* fn $name:ident($env:ident, [$($arg:ident),+]) $body:block) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// Called by Node-API only (registered by `exports`), with the environment and
        /// callback info of the call it answers.
        unsafe extern "C" fn $name(
            $env: sys::napi_env,
            info: sys::napi_callback_info,
        ) -> sys::napi_value {
            const COUNT: usize = [$(stringify!($arg)),+].len();
            // A panic never unwinds into Node: it becomes `InternalError` (the agent's own
            // methods poison it first).
            let result = crate::errors::guard(|| {
                // SAFETY: `$env` and `info` are the parameters Node-API calls this callback with,
                // as `arguments` requires.
                unsafe { arguments::<COUNT>($env, info).and_then(|[$($arg),+]| $body) }
            })
            .unwrap_or_else(|()| Err(crate::errors::internal("runcore panicked (a bug)")));
            answer($env, result)
        }
    };
}

callback! {
    /// `agentPoll(agent, tape)`: `pollTape`.
    fn poll(env, [this, tape]) {
        let agent = agent(env, this)?;
        let words = words(env, tape)?;
        let batch = agent.poll_tape_words(&words)?;
        agent.tape_sent(text(env, batch))
    }
}

callback! {
    /// `agentPollAhead(agent, tape, consumed)`: `poll`'s batch (see
    /// `NativeAgent::poll_ahead_words`).
    fn poll_ahead(env, [this, tape, consumed]) {
        let agent = agent(env, this)?;
        let words = words(env, tape)?;
        let consumed = step(env, consumed)?;
        let batch = agent.poll_ahead_words(&words, consumed)?;
        agent.tape_sent(text(env, batch))
    }
}

callback! {
    /// `agentSettle(agent, consumed)`: the batch `poll` held is done with.
    fn settle(env, [this, consumed]) {
        let agent = agent(env, this)?;
        let consumed = step(env, consumed)?;
        agent.settle(consumed)?;
        undefined(env)
    }
}

callback! {
    /// `agentPollLine(agent)`: `pollLine`, the next output's driver line (JSON text) or
    /// `null`; a line that cannot be made a string throws `InternalError` and stays queued.
    fn poll_line(env, [this]) {
        let agent = agent(env, this)?;
        let line = agent.poll_line_text()?;
        agent.line_sent(text(env, line))
    }
}

callback! {
    /// `agentPollAll(agent, tape)`: `pollAllTape`.
    fn poll_all(env, [this, tape]) {
        let agent = agent(env, this)?;
        let words = words(env, tape)?;
        let batch = agent.poll_all_tape_words(&words)?;
        agent.tape_sent(text(env, Some(batch)))
    }
}

callback! {
    /// `agentHandle(agent, line)`: `handle`.
    fn handle(env, [this, line]) {
        let agent = agent(env, this)?;
        with_str(env, line, "line", |bytes| agent.handle_bytes(bytes))?;
        undefined(env)
    }
}

callback! {
    /// `agentPrompt(agent, text, runId, nowMs)`: `prompt`.
    fn prompt(env, [this, text, run_id, now_ms]) {
        let agent = agent(env, this)?;
        let text = string(env, text, "text")?;
        let run_id = optional_string(env, run_id, "runId")?;
        let now_ms = optional_number(env, now_ms)?;
        let run = agent.prompt(text, run_id, now_ms)?;
        js_string(env, &run)
    }
}

callback! {
    /// `agentModelDelta(agent, runId, step, text, nowMs)`: `modelDelta`.
    fn model_delta(env, [this, run_id, step_value, text, now_ms]) {
        let agent = agent(env, this)?;
        let run_id = string(env, run_id, "runId")?;
        let step = step(env, step_value)?;
        let text = string(env, text, "text")?;
        let now_ms = optional_number(env, now_ms)?;
        agent.model_delta(run_id, step, text, now_ms)?;
        undefined(env)
    }
}

callback! {
    /// `agentModelDone(agent, runId, step, messageJson, nowMs)`: `modelDone`.
    fn model_done(env, [this, run_id, step_value, message, now_ms]) {
        let agent = agent(env, this)?;
        let run_id = string(env, run_id, "runId")?;
        let step = step(env, step_value)?;
        let now_ms = optional_number(env, now_ms)?;
        with_str(env, message, "message", |bytes| {
            agent.model_done_json(run_id, step, bytes, now_ms)
        })?;
        undefined(env)
    }
}

callback! {
    /// `agentModelDoneText(agent, runId, step, text, stopReason, nowMs)`: `modelDone` with a
    /// text-only answer; `false` when `stopReason` is not one (nothing done).
    fn model_done_text(env, [this, run_id, step_value, text, reason, now_ms]) {
        let agent = agent(env, this)?;
        let run_id = string(env, run_id, "runId")?;
        let step = step(env, step_value)?;
        let text = string(env, text, "text")?;
        let now_ms = optional_number(env, now_ms)?;
        let taken = with_str(env, reason, "stopReason", |bytes| {
            let reason = std::str::from_utf8(bytes).unwrap_or_default();
            agent.model_done_text(run_id, step, text, reason, now_ms)
        })?;
        boolean_value(env, taken)
    }
}

callback! {
    /// `agentToolDoneText(agent, runId, callId, text, isError, nowMs, metaJson)`:
    /// `toolDoneText` (`metaJson`, the JSON text of a `meta` object, optional).
    fn tool_done_text(env, [this, run_id, call_id, text, is_error, now_ms, meta]) {
        let agent = agent(env, this)?;
        let run_id = string(env, run_id, "runId")?;
        let call_id = string(env, call_id, "callId")?;
        let text = string(env, text, "text")?;
        let is_error = boolean(env, is_error)?;
        let now_ms = optional_number(env, now_ms)?;
        let meta = optional_string(env, meta, "meta")?;
        agent.tool_done_text(run_id, call_id, text, is_error, now_ms, meta)?;
        undefined(env)
    }
}

type Callback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

const FUNCTIONS: [(&std::ffi::CStr, Callback); 11] = [
    (c"agentModelDone", model_done),
    (c"agentPollAhead", poll_ahead),
    (c"agentSettle", settle),
    (c"agentModelDoneText", model_done_text),
    (c"agentPoll", poll),
    (c"agentPollAll", poll_all),
    (c"agentPollLine", poll_line),
    (c"agentHandle", handle),
    (c"agentPrompt", prompt),
    (c"agentModelDelta", model_delta),
    (c"agentToolDoneText", tool_done_text),
];

/// Adds the plain functions to the module's exports.
#[napi_derive::napi(module_exports)]
pub fn exports(exports: napi::bindgen_prelude::Object, env: napi::Env) -> Result<()> {
    use napi::bindgen_prelude::JsValue;
    let (env, exports) = (env.raw(), exports.raw());
    for (name, callback) in FUNCTIONS {
        let mut function = ptr::null_mut();
        // SAFETY: `env` and `exports` are the ones napi-rs passes the module's registration,
        // running now; `name` is NUL-terminated and `callback` a Node-API callback of the
        // right signature; `function` is a local out-parameter.
        unsafe {
            check(
                sys::napi_create_function(
                    env,
                    name.as_ptr(),
                    name.to_bytes().len() as isize,
                    Some(callback),
                    ptr::null_mut(),
                    &mut function,
                ),
                "napi_create_function",
            )?;
            check(
                sys::napi_set_named_property(env, exports, name.as_ptr(), function),
                "napi_set_named_property",
            )?;
        }
    }
    Ok(())
}
