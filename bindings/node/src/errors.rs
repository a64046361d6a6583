//! How errors cross into JavaScript: a thrown `Error` whose message is `runcore:` followed by
//! the error's JSON body (`kind`, `message`, and its own fields); `index.js` turns it into the
//! `AgentError` subclass of its kind, `StoreError` or `SnapshotError`. A Rust panic is caught
//! here and never unwinds into Node.

use std::panic::{AssertUnwindSafe, catch_unwind};

use runcore::store::StoreError;
use runcore::{AgentError, SnapshotError};
use serde_json::{Value, json};

use crate::shared_candidates::{error_body, store_error_body};

/// The prefix `index.js` recognises.
const MARK: &str = "runcore:";

fn thrown(body: Value) -> napi::Error {
    napi::Error::from_reason(format!("{MARK}{body}"))
}

/// An input the agent rejected (SPEC §10).
pub fn agent_error(error: &AgentError) -> napi::Error {
    thrown(error_body(error))
}

/// Arguments that do not make a valid input line.
pub fn invalid_json(message: impl Into<String>) -> napi::Error {
    thrown(json!({"kind": "invalid_json", "message": message.into()}))
}

/// A line the driver refused before applying it (`invalid_json`, or `invalid_input` for a
/// line nested past the core's limit): its error body as the driver writes it.
pub fn line_error(body: &runcore::driver::ErrorBody) -> napi::Error {
    thrown(
        serde_json::to_value(body)
            .unwrap_or_else(|_| json!({"kind": "invalid_json", "message": body.message})),
    )
}

/// A broken invariant of runcore (a bug), a caught panic included.
pub fn internal(message: impl Into<String>) -> napi::Error {
    thrown(json!({"kind": "internal", "message": message.into()}))
}

/// A store call failed (`reason`: the rejection's code, `transcript`, `unavailable`, `open`).
pub fn store_error(error: &StoreError) -> napi::Error {
    thrown(store_error_body(error))
}

/// A store error with an explicit reason: the core's store body
/// ([`runcore::driver::store_body`]).
pub fn store_error_with_code(reason: &str, message: &str) -> napi::Error {
    line_error(&runcore::driver::store_body(reason, message))
}

/// A snapshot that cannot be restored.
pub fn snapshot_error(error: &SnapshotError) -> napi::Error {
    thrown(json!({"kind": "snapshot", "code": error.code(), "message": error.to_string()}))
}

/// A bad argument (a wrong name of a policy or mode): JavaScript's `TypeError`.
pub fn bad_argument(message: impl Into<String>) -> napi::Error {
    thrown(json!({"kind": "argument", "message": message.into()}))
}

/// Runs `f`, turning a panic into `Err(())`.
pub fn guard<T>(f: impl FnOnce() -> T) -> Result<T, ()> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|_| ())
}

/// Parses JSON text handed in by `index.js` (its own `JSON.stringify`).
pub fn parse_json(text: &str, what: &str) -> napi::Result<Value> {
    serde_json::from_str(text).map_err(|e| invalid_json(format!("{what} is not valid JSON: {e}")))
}
