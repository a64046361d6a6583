//! From a driver-shaped input object (`{"type": "prompt", "text": …, "now_ms"?: …}`) to the
//! core: the line is read by the driver's own [`InputLine`] and applied to the agent as the
//! driver applies it, so a method call and the same line sent to `runcore drive` do the same.
//!
//! MERGE POINT (agent-reshape): today `InputLine` is a second copy of the inputs and this file
//! maps it onto [`Input`] the way `Driver::apply` does. Once the core's `InputLine` is
//! `{input, now_ms, context}` over the library's `Input` and the agent has `handle(input,
//! now_ms)`, [`apply`] becomes `InputLine::from_value` + `agent.handle(line.input,
//! line.now_ms.unwrap_or(agent.clock_ms()))`, and the mapping below goes away.

use runcore::driver::{ContentInput, ContextMode, InputLine};
use runcore::{Agent, AgentError, ContentBlock, Input, ToolOutput, UserMessage};
use serde_json::Value;

/// Why an input object was not applied.
pub enum Rejected {
    /// Not a valid input line (the driver's `invalid_json`).
    Line(String),
    /// The agent rejected the input (SPEC §10); nothing changed.
    Agent(AgentError),
}

/// Applies one input object to `agent`. For a `config` line, returns its context mode.
pub fn apply(agent: &mut Agent, value: Value) -> Result<Option<ContextMode>, Rejected> {
    let line = parse(value).map_err(Rejected::Line)?;
    apply_line(agent, line).map_err(Rejected::Agent)
}

/// Reads one input object with the driver's checks and messages.
pub fn parse(value: Value) -> Result<InputLine, String> {
    let Value::Object(object) = &value else {
        return Err(format!(
            "expected a JSON object with a \"type\", got {}",
            json_kind(&value)
        ));
    };
    match object.get("type") {
        Some(Value::String(_)) => {}
        Some(other) => {
            return Err(format!(
                "\"type\" must be a string, got {}",
                json_kind(other)
            ));
        }
        None => return Err("the object has no \"type\" field".to_owned()),
    }
    serde_json::from_value(value).map_err(|e| format!("not a valid input line: {e}"))
}

fn blocks(content: ContentInput) -> Vec<ContentBlock> {
    match content {
        ContentInput::Blocks(blocks) => blocks,
        ContentInput::Text(text) => vec![ContentBlock::text(text)],
    }
}

/// `Driver::apply`, on an agent the binding owns.
fn apply_line(agent: &mut Agent, line: InputLine) -> Result<Option<ContextMode>, AgentError> {
    let (input, now_ms) = match line {
        InputLine::Config(config) => {
            let agent_config = config.agent_config();
            agent.apply_at(
                Input::Config {
                    config: agent_config,
                },
                config.now_ms,
            )?;
            return Ok(Some(config.context.unwrap_or_default()));
        }
        InputLine::Prompt {
            text,
            run_id,
            now_ms,
        } => (
            Input::Prompt {
                message: UserMessage::text(text),
                now_ms: now_ms.unwrap_or(agent.clock_ms()),
                run_id,
            },
            now_ms,
        ),
        InputLine::Steer { text, now_ms } => (
            Input::Steer {
                message: UserMessage::text(text),
            },
            now_ms,
        ),
        InputLine::FollowUp { text, now_ms } => (
            Input::FollowUp {
                message: UserMessage::text(text),
            },
            now_ms,
        ),
        InputLine::Abort { now_ms } => (Input::Abort, now_ms),
        InputLine::Pause { now_ms } => (Input::Pause, now_ms),
        InputLine::ModelDelta {
            run_id,
            step,
            text,
            now_ms,
        } => (Input::ModelDelta { run_id, step, text }, now_ms),
        InputLine::ModelDone {
            run_id,
            step,
            message,
            now_ms,
        } => (
            Input::ModelDone {
                run_id,
                step,
                message: message.0,
            },
            now_ms,
        ),
        InputLine::ModelFailed {
            run_id,
            step,
            code,
            message,
            now_ms,
        } => (
            Input::ModelFailed {
                run_id,
                step,
                code,
                message,
            },
            now_ms,
        ),
        InputLine::ToolProgress {
            run_id,
            call_id,
            content,
            now_ms,
        } => (
            Input::ToolProgress {
                run_id,
                call_id,
                content: blocks(content),
            },
            now_ms,
        ),
        InputLine::ToolDone {
            run_id,
            call_id,
            content,
            is_error,
            details,
            now_ms,
        } => (
            Input::ToolDone {
                run_id,
                output: ToolOutput {
                    call_id: call_id.clone(),
                    content: blocks(content),
                    is_error,
                    details,
                },
                call_id,
            },
            now_ms,
        ),
        InputLine::Resume { command, now_ms } => (Input::Resume { command }, now_ms),
        InputLine::ResumeTicket { result, now_ms } => {
            (Input::ResumeTicket { result, now_ms }, now_ms)
        }
        InputLine::CancelWait { now_ms } => (Input::CancelWait, now_ms),
        InputLine::Stop { reason, now_ms } => (Input::Stop { reason }, now_ms),
        InputLine::ExpireWait { now_ms } => (Input::ExpireWait { now_ms }, Some(now_ms)),
        InputLine::AbandonTools { now_ms } => (Input::AbandonTools, now_ms),
    };
    agent.apply_at(input, now_ms)?;
    Ok(None)
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
