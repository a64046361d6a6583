//! Host glue that is not Node-specific. What every binding needs now lives in the core and is
//! only named here: the shared store handle ([`runcore::store::SharedStore`]), the names of recovery
//! policies and context modes (`FromStr`), configuration objects ([`InputLine::config`]) and a
//! durable driver's options ([`DurableOptions::from_line`]), an output's driver line
//! (`runcore::driver::output_line`) and a `commit` line read back for a store
//! (`runcore::driver::StoreWrite`). What is left here is this package's wording of the core's
//! errors. Nothing here touches Node-API.
//!
//! - [`DynStore`] / [`SharedStore`]: any backend as one boxed type, and the core's handle onto
//!   it that several owners (a store object, a durable driver) share.
//! - [`parse_policy`] / [`parse_context`] / [`config_line`] / [`durable_options`]: the core's
//!   readings, with this package's messages.
//! - [`error_body`]: an agent error as the body of its `error` line.

use runcore::driver::{ContextMode, InputLine};
use runcore::host::DurableOptions;
use runcore::{AgentConfig, AgentError, Input, RecoveryPolicy};
use serde_json::Value;

/// Any backend, as one concrete type the core's generic functions accept: the core forwards
/// every port through `Box<T>`, so the box needs no forwarding of its own.
pub type DynStore = runcore::store::BoxedStore;

/// A handle onto one [`DynStore`] that several owners share (the core's
/// [`runcore::store::SharedStore`]; a poisoned lock reads as an unavailable store).
pub type SharedStore = runcore::store::SharedStore<DynStore>;

/// A recovery policy as the driver names it (`--recover replay|seal`).
pub fn parse_policy(policy: &str) -> Result<RecoveryPolicy, String> {
    policy
        .parse()
        .map_err(|e: runcore::UnknownName| e.to_string())
}

/// A context mode as a `config` line names it.
pub fn parse_context(context: &str) -> Result<ContextMode, String> {
    context
        .parse()
        .map_err(|e: runcore::UnknownName| e.to_string())
}

/// A configuration object (the fields of a `config` line, `"type"` optional; `None`: the
/// defaults) read as the driver reads that line: its `invalid_json` message when it does not
/// read.
pub fn config_line(config: Option<Value>) -> Result<InputLine, String> {
    InputLine::config(config).map_err(|e| match e {
        runcore::driver::ConfigObjectError::NotAnObject(_) => {
            "a config must be an object with the fields of a config line".to_owned()
        }
        invalid => invalid.to_string(),
    })
}

/// The agent configuration of a config line read by [`config_line`], with its thread set to
/// `thread` when the object names none.
pub fn agent_config(
    config: Option<Value>,
    thread: Option<&str>,
) -> Result<(AgentConfig, InputLine), String> {
    let config = match (config, thread) {
        (Some(Value::Object(mut object)), Some(thread)) => {
            object
                .entry("thread_id")
                .or_insert_with(|| Value::from(thread));
            Some(Value::Object(object))
        }
        (None | Some(Value::Null), Some(thread)) => Some(serde_json::json!({"thread_id": thread})),
        (other, _) => other,
    };
    let line = config_line(config)?;
    match &line.input {
        Input::Config(config) => Ok((config.clone(), line)),
        _ => Err("a config line did not read as a config input".into()),
    }
}

/// The options of a durable driver (`runcore drive --config FILE --store URL --recover P`).
pub fn durable_options(
    config: Option<Value>,
    policy: RecoveryPolicy,
) -> Result<DurableOptions, String> {
    let (_, line) = agent_config(config, None)?;
    DurableOptions::from_line(line, policy)
        .ok_or_else(|| "a config line did not read as a config input".into())
}

/// The body of the driver's `error` line for `error`: `kind`, `message` and the error's own
/// fields.
pub fn error_body(error: &AgentError) -> Value {
    body_value(runcore::driver::error_body(error))
}

/// The body of a store's error: `kind` `store`, `code`, `message`.
pub fn store_error_body(error: &runcore::store::StoreError) -> Value {
    body_value(runcore::driver::store_error_body(error))
}

fn body_value(body: runcore::driver::ErrorBody) -> Value {
    let mut object = body.details;
    object.insert("kind".into(), Value::from(body.kind));
    object.insert("message".into(), Value::from(body.message));
    Value::Object(object)
}
