//! The class methods' helpers: the tape array a method was passed, the line cap check, an
//! assistant message read from its JSON text, a `call_model` line without its messages, a
//! `now_ms` from JavaScript, a stop reason's length and the keys and shapes `index.js` holds.

use runcore::driver::{ContextMessages, OutputLine};
use runcore::{AssistantMessage, StopReason};
use serde_json::Value;

use crate::errors::invalid_json;
use crate::napi_memory::TapeArray;

/// The tape array a class method was passed (never read or written through a Rust reference:
/// it may be shared memory).
///
/// Only the class methods call it, each with its own `env` and argument, and use the
/// `TapeArray` before they return.
pub(super) fn words(env: napi::Env, ops: napi::Unknown<'_>) -> napi::Result<TapeArray> {
    use napi::bindgen_prelude::JsValue;
    // SAFETY: `env` is the environment napi-rs passed the running class method and `ops` one
    // of its arguments (an `Unknown` napi-rs made for this call); the callers use the
    // `TapeArray` only before they return.
    unsafe { crate::napi_memory::tape_array(env.raw(), ops.raw()) }
}

/// Holds the line a method stands for to the core's line cap
/// ([`runcore::limits::check_line_parts`]): its fixed text is `fixed` bytes and its string
/// values are `strings`.
pub(super) fn check_line(fixed: usize, strings: &[&str]) -> napi::Result<()> {
    runcore::limits::check_line_parts(fixed, strings).map_err(invalid_json)
}

/// An assistant message from its JSON text as a `model_done` line's `message` reads (its
/// `"role"`, if any, `"assistant"`), or `None` (then the line says why). Lines are capped at
/// [`runcore::limits::MAX_LINE_BYTES`]: a message near that goes through the line too.
pub(super) fn assistant_message(message: &mut [u8]) -> Option<AssistantMessage> {
    // Without a `"role"` anywhere in the text, the message reads straight into its type: what
    // the driver's reading (a JSON value, its role taken out, then the type) gives when it
    // accepts. When the direct read fails (or a role may be there), the driver's way decides.
    if !contains(message, b"\"role\"")
        && let Ok(message) = serde_json::from_slice::<AssistantMessage>(message)
    {
        return Some(message);
    }
    // The same for a message that starts `{"role":"assistant",` (as `JSON.stringify` writes
    // one built with its role first) and has no other `"role"`: read with that member blanked
    // out in place (spaces: every byte stays where it was), then put back.
    const ROLE: &[u8] = br#"{"role":"assistant","#;
    if message.starts_with(ROLE) && !contains(&message[ROLE.len()..], b"\"role\"") {
        message[1..ROLE.len()].fill(b' ');
        let read = serde_json::from_slice::<AssistantMessage>(message);
        message[..ROLE.len()].copy_from_slice(ROLE);
        if let Ok(message) = read {
            return Some(message);
        }
    }
    let mut value: Value = serde_json::from_slice(message).ok()?;
    let Value::Object(object) = &mut value else {
        return None;
    };
    match object.remove("role") {
        None => {}
        Some(Value::String(role)) if role == "assistant" => {}
        Some(_) => return None,
    }
    serde_json::from_value(value).ok()
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, _)) = needle.split_first() else {
        return true;
    };
    let mut from = 0;
    // Only where the needle's first byte is (a quote, for the needles here) is it compared.
    while let Some(at) = haystack[from..].iter().position(|&b| b == first) {
        if haystack[from + at..].starts_with(needle) {
            return true;
        }
        from += at + 1;
    }
    false
}

/// `line`, its messages left out when `bare` and it is a `call_model` line (see
/// [`NativeAgent::set_bare_calls`](super::NativeAgent::set_bare_calls)).
pub(super) fn bare_call(line: OutputLine<'_>, bare: bool) -> OutputLine<'_> {
    match line {
        OutputLine::CallModel {
            run_id,
            step,
            final_step,
            system_prompt,
            base,
            tools,
            ..
        } if bare => OutputLine::CallModel {
            run_id,
            step,
            final_step,
            system_prompt,
            base,
            messages: ContextMessages {
                summary: None,
                messages: &[],
            },
            tools,
        },
        line => line,
    }
}

/// A `now_ms` from JavaScript, under the core's rule (`runcore::limits`).
pub(super) fn now_of(now_ms: Option<f64>) -> napi::Result<Option<u64>> {
    now_ms
        .map(runcore::limits::now_ms_from_f64)
        .transpose()
        .map_err(invalid_json)
}

/// The bytes of a stop reason's name as a JSON string's contents.
pub(super) fn stop_reason_len(reason: StopReason) -> usize {
    match reason {
        StopReason::Stop => 4,
        StopReason::Length => 6,
        StopReason::ToolUse => 8,
        StopReason::Error => 5,
        StopReason::Aborted => 7,
    }
}

/// How many keys and shapes `index.js` holds: the first two words of the tape array, which it
/// writes before each poll.
pub(super) fn known(ops: &TapeArray) -> (u32, u32) {
    (ops.read(0), ops.read(1))
}
