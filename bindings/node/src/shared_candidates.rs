//! Host glue that is not Node-specific. What every binding needs now lives in the core and is
//! only named here: the shared store handle ([`runcore::SharedStore`]), the names of recovery
//! policies and context modes (`FromStr`), configuration objects ([`InputLine::config`]) and a
//! durable driver's options ([`DurableOptions::from_line`]). What is left is still to move.
//! Nothing here touches Node-API.
//!
//! - [`DynStore`] / [`SharedStore`]: any backend as one boxed type, and the core's handle onto
//!   it that several owners (a store object, a durable driver) share.
//! - [`parse_policy`] / [`parse_context`] / [`config_line`] / [`durable_options`]: the core's
//!   readings, with this package's messages.
//! - [`StoreWrite`] / [`store_write_of_output`]: a `commit` output line read back into what a
//!   store applies (fenced when it carries its operation fields).
//! - [`payload_hash`] / [`output_line`] / [`render_output`]: a commit's payload hash with the
//!   CPU's SHA instructions (the same hex as `ThreadCommit::payload_hash`), and the driver's line
//!   of an output using it (as its `OutputLine`, or rendered).
//! - [`error_body`] / [`snapshot_error_code`]: an agent error as the body of its `error` line, and
//!   a snapshot error's stable code.

use runcore::driver::{
    ContextMode, DurableOptions, InputLine, OutputLine, SentContext, call_model_line, error_line,
};
use runcore::{
    Action, Agent, AgentConfig, AgentError, CommitOperation, Input, Output, RecoveryPolicy,
    SnapshotError, ThreadCommit,
};
use serde_json::Value;

/// A backend a binding can hold: every port of a store, movable to another thread.
pub trait Backend: runcore::Store + Send {}

impl<T: runcore::Store + Send> Backend for T {}

/// Any backend, as one concrete type the core's generic functions accept: the core forwards
/// every port through `Box<T>`, so the box needs no forwarding of its own.
pub type DynStore = Box<dyn Backend>;

/// A handle onto one [`DynStore`] that several owners share (the core's
/// [`runcore::SharedStore`]; a poisoned lock reads as an unavailable store).
pub type SharedStore = runcore::SharedStore<DynStore>;

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

/// What a store applies for one `commit` output line.
#[derive(Debug)]
pub enum StoreWrite {
    /// A fenced, idempotent commit (SPEC §7.1): the output carried `ordinal` and
    /// `expected_thread_version`.
    Fenced(CommitOperation),
    /// A plain commit (an output without its operation fields).
    Plain(ThreadCommit),
}

/// Reads a `commit` output (`{"type": "commit", "commit": …, "ordinal", …}`) back into what a
/// store applies. A `payload_hash` that is not the commit's own means the commit was changed
/// after the agent emitted it: refused.
pub fn store_write_of_output(output: Value) -> Result<StoreWrite, String> {
    let Value::Object(mut output) = output else {
        return Err(
            "commit() takes a commit output ({\"type\": \"commit\", \"commit\": ...})".into(),
        );
    };
    match output.get("type") {
        Some(Value::String(kind)) if kind == "commit" => {}
        Some(Value::String(kind)) => {
            return Err(format!(
                "commit() takes a commit output, got a {kind:?} output"
            ));
        }
        _ => {
            return Err(
                "commit() takes a commit output ({\"type\": \"commit\", \"commit\": ...})".into(),
            );
        }
    }
    let commit: ThreadCommit = serde_json::from_value(output.remove("commit").unwrap_or_default())
        .map_err(|e| format!("not a valid commit: {e}"))?;
    let field = |name: &str| output.get(name).and_then(Value::as_u64);
    match (field("ordinal"), field("expected_thread_version")) {
        (Some(ordinal), Some(version)) => {
            let operation = CommitOperation::new(commit, ordinal, version);
            match output.get("payload_hash") {
                Some(Value::String(hash)) if *hash != operation.payload_hash => Err(format!(
                    "the output's payload_hash {hash} is not its commit's hash {}: the commit \
                     was changed after the agent emitted it",
                    operation.payload_hash
                )),
                _ => Ok(StoreWrite::Fenced(operation)),
            }
        }
        _ => Ok(StoreWrite::Plain(commit)),
    }
}

/// The body of the driver's `error` line for `error`: `kind`, `message` and the error's own
/// fields.
pub fn error_body(error: &AgentError) -> Value {
    serde_json::from_str::<Value>(&error_line(0, error))
        .ok()
        .and_then(|mut line| line.get_mut("error").map(Value::take))
        .unwrap_or_else(|| serde_json::json!({"kind": error.kind(), "message": error.to_string()}))
}

/// A snapshot error's stable code.
pub fn snapshot_error_code(error: &SnapshotError) -> &'static str {
    match error {
        SnapshotError::NewerVersion { .. } => "newer_version",
        SnapshotError::UnsupportedVersion { .. } => "unsupported_version",
        SnapshotError::Malformed(_) => "malformed",
        SnapshotError::Inconsistent(_) => "inconsistent",
        _ => "snapshot",
    }
}

/// The payload hash of a commit (SPEC §7.1), as the core computes it
/// ([`ThreadCommit::payload_hash_with`]); `buffer` is scratch space kept between calls.
pub fn payload_hash(commit: &ThreadCommit, buffer: &mut Vec<u8>) -> String {
    commit.payload_hash_with(buffer)
}

/// The driver's output line for `output` (what [`Driver::render`](runcore::driver::Driver::render) writes, as the driver's own
/// [`OutputLine`] type), with the commit's hash from [`payload_hash`]. In delta mode `sent` is
/// what earlier `call_model` lines carried; it is advanced, as the driver advances its own.
pub fn output_line<'a>(
    agent: &'a Agent,
    output: &'a Output,
    context: ContextMode,
    sent: &mut SentContext,
    buffer: &mut Vec<u8>,
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
            payload_hash: payload_hash(&commit.commit, buffer),
        },
        Output::Event(event) => OutputLine::Event { event },
    }
}

/// [`output_line`] as the JSON line the driver writes (without its `\n`).
pub fn render_output(
    agent: &Agent,
    output: &Output,
    context: ContextMode,
    sent: &mut SentContext,
    buffer: &mut Vec<u8>,
) -> String {
    // Plain data with string keys: writing it cannot fail.
    serde_json::to_string(&output_line(agent, output, context, sent, buffer)).unwrap_or_default()
}
