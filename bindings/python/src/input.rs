//! From a driver-shaped input object (`{"type": "prompt", "text": …, "now_ms"?: …}`) to the
//! core: the object is read by the driver's own [`InputLine`] (whose input is the library's
//! [`Input`]) and applied exactly as `Driver::apply` applies it, so a method call and the same
//! line sent to `runcore drive` do the same thing.

use runcore::driver::{ContextMode, ErrorBody, InputLine};
use runcore::{Agent, AgentError, Input};
use serde_json::Value;

/// Why an input object was not applied.
pub enum Rejected {
    /// Not a valid input line: the driver's `error` body (`invalid_json`, or `invalid_input`
    /// for a user message of another role).
    Line(ErrorBody),
    /// The agent rejected the input (SPEC §10); nothing changed.
    Agent(AgentError),
}

/// Applies one input object to `agent` at its `now_ms` (the agent's clock when it has none).
/// For a `config` line, returns its context mode.
pub fn apply(agent: &mut Agent, value: Value) -> Result<Option<ContextMode>, Rejected> {
    let line = InputLine::from_value(value).map_err(Rejected::Line)?;
    let now_ms = line.now_ms.unwrap_or(agent.clock_ms());
    let is_config = matches!(line.input, Input::Config(_));
    agent.handle(line.input, now_ms).map_err(Rejected::Agent)?;
    Ok(is_config.then(|| line.context.unwrap_or_default()))
}
