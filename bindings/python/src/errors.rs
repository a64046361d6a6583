//! Python exceptions: one class per SPEC §10 error kind under `runcore.AgentError`, plus the
//! store's, the snapshot's, and the panic guard that keeps a Rust panic from crossing into
//! Python as anything but an exception.
//!
//! Every `AgentError` instance carries `.kind` (the driver's `kind` string), `.message` (what
//! went wrong, for people), `.details` (the error's own fields as a dict, as the driver's
//! `error` line writes them) and each of those fields as an attribute (`.expected`, `.got`,
//! `.active_run`, `.resume_error`, …).

use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use runcore::store::StoreError as CoreStoreError;
use runcore::{AgentError as CoreAgentError, CommitError, SnapshotError as CoreSnapshotError};
use serde_json::Value;

use crate::json_to_py::to_py;

create_exception!(
    runcore,
    AgentError,
    PyException,
    "An input the agent rejected (SPEC §10); the agent is unchanged."
);
create_exception!(
    runcore,
    BusyError,
    AgentError,
    "`prompt` while a run is active (`busy`)."
);
create_exception!(
    runcore,
    NotAcceptingError,
    AgentError,
    "`steer` / `follow_up` while idle or after the run's input closed (`not_accepting`)."
);
create_exception!(
    runcore,
    UnexpectedOutcomeError,
    AgentError,
    "A model or tool outcome for another run, step, or no outstanding action (`unexpected_outcome`)."
);
create_exception!(
    runcore,
    UnknownCallError,
    AgentError,
    "`tool_done` for a call that is not in the executing batch (`unknown_call`)."
);
create_exception!(
    runcore,
    DuplicateOutcomeError,
    AgentError,
    "A second `tool_done` for the same call (`duplicate_outcome`)."
);
create_exception!(
    runcore,
    ResumeError,
    AgentError,
    "A resume that fails SPEC §4 (`resume`); `.resume_error` says which check."
);
create_exception!(
    runcore,
    InvalidStateError,
    AgentError,
    "An input that means nothing in the current state (`invalid_state`)."
);
create_exception!(
    runcore,
    NotExpiredError,
    AgentError,
    "`expire_wait` before the deadline, or for a wait without one (`not_expired`)."
);
create_exception!(
    runcore,
    InvalidInputError,
    AgentError,
    "A structurally bad input: empty id, bad message shape, bad configuration (`invalid_input`)."
);
create_exception!(
    runcore,
    InvalidJsonError,
    AgentError,
    "Arguments that do not make a valid input line: a missing or unknown field, a wrong type (`invalid_json`)."
);
create_exception!(
    runcore,
    InternalError,
    AgentError,
    "A broken invariant of runcore itself (a bug, `internal`), a Rust panic included."
);
create_exception!(
    runcore,
    StoreError,
    PyException,
    "A store call failed: `.reason` (and `.code`, its older name) is the rejection's code, `\"transcript\"` or `\"unavailable\"`."
);
create_exception!(
    runcore,
    ClaimHeld,
    StoreError,
    "Another owner holds the thread's claim, live (`claim_held`): `.owner`, `.expires_at_ms`."
);
create_exception!(
    runcore,
    SnapshotError,
    PyException,
    "A snapshot that cannot be restored: `.kind` is `newer_version`, `unsupported_version`, `malformed` or `inconsistent`."
);

create_exception!(
    runcore,
    CodecError,
    PyException,
    "A provider codec (`runcore.providers`) refused its arguments: `.code` is `\"options\"` (bad \
     options), `\"call_model\"` (not a full-context `call_model` output), `\"api\"` (an unknown \
     API) or `\"finished\"` (a decoder used after `finish()`); `.message` says what was expected."
);

/// `CodecError` with `code` and `message`.
pub fn codec_error(code: &str, message: impl Into<String>) -> PyErr {
    let message = message.into();
    let err = CodecError::new_err(message.clone());
    Python::attach(|py| {
        let value = err.value(py);
        let _ = value.setattr("code", code);
        let _ = value.setattr("message", message);
    });
    err
}

/// Registers the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("AgentError", py.get_type::<AgentError>())?;
    m.add("BusyError", py.get_type::<BusyError>())?;
    m.add("NotAcceptingError", py.get_type::<NotAcceptingError>())?;
    m.add(
        "UnexpectedOutcomeError",
        py.get_type::<UnexpectedOutcomeError>(),
    )?;
    m.add("UnknownCallError", py.get_type::<UnknownCallError>())?;
    m.add(
        "DuplicateOutcomeError",
        py.get_type::<DuplicateOutcomeError>(),
    )?;
    m.add("ResumeError", py.get_type::<ResumeError>())?;
    m.add("InvalidStateError", py.get_type::<InvalidStateError>())?;
    m.add("NotExpiredError", py.get_type::<NotExpiredError>())?;
    m.add("InvalidInputError", py.get_type::<InvalidInputError>())?;
    m.add("InvalidJsonError", py.get_type::<InvalidJsonError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add("ClaimHeld", py.get_type::<ClaimHeld>())?;
    m.add("SnapshotError", py.get_type::<SnapshotError>())?;
    m.add("CodecError", py.get_type::<CodecError>())?;
    Ok(())
}

/// The exception for an error of `kind` (the driver's kind string), with its attributes.
fn raise(kind: &str, message: String, details: serde_json::Map<String, Value>) -> PyErr {
    let err = match kind {
        "busy" => BusyError::new_err(message.clone()),
        "not_accepting" => NotAcceptingError::new_err(message.clone()),
        "unexpected_outcome" => UnexpectedOutcomeError::new_err(message.clone()),
        "unknown_call" => UnknownCallError::new_err(message.clone()),
        "duplicate_outcome" => DuplicateOutcomeError::new_err(message.clone()),
        "resume" => ResumeError::new_err(message.clone()),
        "invalid_state" => InvalidStateError::new_err(message.clone()),
        "not_expired" => NotExpiredError::new_err(message.clone()),
        "invalid_input" => InvalidInputError::new_err(message.clone()),
        "invalid_json" => InvalidJsonError::new_err(message.clone()),
        "internal" => InternalError::new_err(message.clone()),
        // A kind added to the core after this binding: still an AgentError with its kind.
        _ => AgentError::new_err(message.clone()),
    };
    Python::attach(|py| {
        // Attributes on a fresh exception instance: setting them cannot fail in practice, and
        // if it did the exception itself is still the right one to raise.
        let value = err.value(py);
        let _ = value.setattr("kind", kind);
        let _ = value.setattr("message", &message);
        let dict = PyDict::new(py);
        for (key, item) in &details {
            if let Ok(item) = to_py(py, item) {
                let _ = dict.set_item(key, &item);
                let _ = value.setattr(key.as_str(), &item);
            }
        }
        let _ = value.setattr("details", dict);
    });
    err
}

/// The exception for an agent error.
pub fn agent_error(error: &CoreAgentError) -> PyErr {
    let body = runcore::driver::error_body(error);
    raise(&body.kind, body.message, body.details)
}

/// The exception for the body of a driver `error` line.
pub fn line_error(body: runcore::driver::ErrorBody) -> PyErr {
    raise(&body.kind, body.message, body.details)
}

/// The `AgentError` subclass of `kind` with `message` and no fields of its own.
pub fn agent_error_of_kind(kind: &str, message: impl Into<String>) -> PyErr {
    raise(kind, message.into(), serde_json::Map::new())
}

/// `InvalidJsonError`: the arguments do not make a valid input line.
pub fn invalid_json(message: impl Into<String>) -> PyErr {
    raise("invalid_json", message.into(), serde_json::Map::new())
}

/// `InternalError`: a runcore bug.
pub fn internal(message: impl Into<String>) -> PyErr {
    raise("internal", message.into(), serde_json::Map::new())
}

/// `ClaimHeld` (code `claim_held`): `owner` holds the thread's claim until `expires_at_ms`.
pub fn claim_held(
    message: &str,
    thread_id: Option<&str>,
    owner: &str,
    expires_at_ms: u64,
) -> PyErr {
    let err = ClaimHeld::new_err(message.to_owned());
    Python::attach(|py| {
        let value = err.value(py);
        let _ = value.setattr("reason", "claim_held");
        let _ = value.setattr("code", "claim_held");
        let _ = value.setattr("message", message);
        let _ = value.setattr("thread_id", thread_id);
        let _ = value.setattr("owner", owner);
        let _ = value.setattr("expires_at_ms", expires_at_ms);
    });
    err
}

/// The exception for a store failure (`ClaimHeld` for a claim another owner holds).
pub fn store_error(error: &CoreStoreError) -> PyErr {
    if let CoreStoreError::Rejected(CommitError::ClaimHeld {
        owner,
        expires_at_ms,
    }) = error
    {
        return claim_held(&error.to_string(), None, owner, *expires_at_ms);
    }
    store_body_error(&runcore::driver::store_error_body(error))
}

/// `StoreError` with an explicit reason (e.g. `"open"` for a store that cannot be opened): the
/// core's store body ([`runcore::driver::store_body`]).
pub fn store_error_with_code(reason: &str, message: &str) -> PyErr {
    store_body_error(&runcore::driver::store_body(reason, message))
}

/// `StoreError` for a store error body: `.reason` (and `.code`, its older name) and
/// `.message`.
fn store_body_error(body: &runcore::driver::ErrorBody) -> PyErr {
    let reason = body.store_reason().unwrap_or("");
    let err = StoreError::new_err(body.message.clone());
    Python::attach(|py| {
        let value = err.value(py);
        let _ = value.setattr("reason", reason);
        let _ = value.setattr("code", reason);
        let _ = value.setattr("message", &body.message);
    });
    err
}

/// The exception for a snapshot that cannot be restored.
pub fn snapshot_error(error: &CoreSnapshotError) -> PyErr {
    let kind = error.code();
    let err = SnapshotError::new_err(error.to_string());
    Python::attach(|py| {
        let value = err.value(py);
        let _ = value.setattr("kind", kind);
        let _ = value.setattr("message", error.to_string());
    });
    err
}

/// Runs `f`, turning a Rust panic into `runcore.InternalError` (an ordinary `Exception`, not
/// PyO3's `PanicException`, which derives from `BaseException` and escapes `except
/// Exception`). The caller decides what a panic means for the object it was working on.
pub fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> Result<PyResult<T>, PyErr> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => Ok(result),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic with no message".to_owned());
            Err(internal(format!("runcore panicked (a bug): {what}")))
        }
    }
}
