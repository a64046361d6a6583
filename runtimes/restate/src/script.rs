//! A scripted model and scripted tools: deterministic stand-ins for the worker binary, the
//! tests, the benchmark and the README walk-through.
//!
//! The prompt is the script. Its words:
//! - `lookup N` — the model calls the `lookup` tool N times, one call per step (default 1
//!   when the word `lookup` stands alone);
//! - `deploy` — then it calls `deploy` once (a tool that needs approval in
//!   [`scripted_config`]);
//! - `fragile` — then it calls `fragile`, a tool that always fails transiently;
//! - `flaky-model` — the model fails transiently on every attempt;
//! - anything else is ignored. When nothing is left to call, the model answers
//!   `done: ` and the tool results so far.
//!
//! Everything the model and the tools answer is a function of the transcript and the call,
//! so a run of the same script gives the same transcript in any process, in any order of
//! crashes: that is what lets the end-to-end test compare a crashed cluster run with a
//! single-process one.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use runcore::{
    AgentConfig, AssistantBlock, AssistantMessage, ContentBlock, Message, RunId, StopReason,
    ToolCall, ToolOutput, ToolSpec,
};
use serde_json::json;

use crate::host::{Model, ModelCall, StepError, StepFuture, Tools};

/// The configuration the scripted model expects: `lookup` and `fragile` run at once,
/// `deploy` waits for approval (with a deadline `approval_deadline_ms` after the wait opens,
/// or none).
pub fn scripted_config(approval_deadline_ms: Option<u64>) -> AgentConfig {
    AgentConfig::default()
        .with_tool("lookup", ToolSpec::auto("squares a number"))
        .with_tool(
            "deploy",
            ToolSpec::gated("deploys to a target", approval_deadline_ms),
        )
        .with_tool("fragile", ToolSpec::auto("always fails transiently"))
}

/// The words of a script.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Script {
    lookups: u32,
    deploy: bool,
    fragile: bool,
    flaky_model: bool,
}

impl Script {
    fn parse(text: &str) -> Script {
        let mut script = Script::default();
        let words: Vec<&str> = text.split_whitespace().collect();
        for (at, word) in words.iter().enumerate() {
            match *word {
                "lookup" => {
                    script.lookups = words
                        .get(at + 1)
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(1)
                        .min(64);
                }
                "deploy" => script.deploy = true,
                "fragile" => script.fragile = true,
                "flaky-model" => script.flaky_model = true,
                _ => {}
            }
        }
        script
    }
}

/// The scripted model (see the module docs), with an optional delay per call.
#[derive(Debug, Clone, Default)]
pub struct ScriptedModel {
    /// Time each call takes.
    pub delay: Duration,
}

impl Model for ScriptedModel {
    fn call(&self, call: ModelCall) -> StepFuture<AssistantMessage> {
        let delay = self.delay;
        Box::pin(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            answer(&call.call.messages)
        })
    }
}

/// The scripted model's answer to a context: a pure function of the messages.
pub fn answer(messages: &[Message]) -> Result<AssistantMessage, StepError> {
    let start = messages
        .iter()
        .rposition(|m| matches!(m, Message::User(_)))
        .unwrap_or(0);
    let prompt = match messages.get(start) {
        Some(Message::User(user)) => text_of(&user.content),
        _ => String::new(),
    };
    let script = Script::parse(&prompt);
    if script.flaky_model {
        return Err(StepError::transient(
            "model_unavailable",
            "the scripted model is flaky",
        ));
    }
    let mut lookups = 0;
    let mut deployed = false;
    let mut fragile = false;
    let mut results = Vec::new();
    for message in messages.iter().skip(start) {
        match message {
            Message::Assistant(assistant) => {
                for call in assistant.tool_calls() {
                    match call.name.as_str() {
                        "lookup" => lookups += 1,
                        "deploy" => deployed = true,
                        "fragile" => fragile = true,
                        _ => {}
                    }
                }
            }
            Message::ToolResult(result) => results.push(text_of(&result.content)),
            _ => {}
        }
    }
    let call = if lookups < script.lookups {
        let n = lookups + 1;
        Some((format!("call-{n}"), "lookup", json!({ "n": n })))
    } else if script.deploy && !deployed {
        Some((
            "call-deploy".to_owned(),
            "deploy",
            json!({"target": "prod"}),
        ))
    } else if script.fragile && !fragile {
        Some(("call-fragile".to_owned(), "fragile", json!({})))
    } else {
        None
    };
    Ok(match call {
        Some((id, name, arguments)) => AssistantMessage::new(
            vec![AssistantBlock::tool_call(id, name, arguments)],
            StopReason::ToolUse,
        ),
        None => AssistantMessage::text(format!("done: {}", results.join("; "))),
    })
}

fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The scripted tools, with an optional delay per call and an optional record.
///
/// With a record directory, every start and completion is written there keyed by
/// `"{run_id}:{call_id}"` (`starts.log`, `done.log`; several processes may share it), and a
/// second completion of the same key is refused: the tool answers an error result saying
/// `interrupted` and writes the key to `refused.log`. The end-to-end test reads them back.
#[derive(Debug, Clone, Default)]
pub struct ScriptedTools {
    /// Time each call takes before it completes.
    pub delay: Duration,
    /// Where starts and completions are recorded.
    pub record: Option<Arc<PathBuf>>,
    /// Print one line per tool start on stderr (the worker binary does, so a test can see
    /// which process serves).
    pub announce: bool,
    /// A crash test's gate: every call except `call-1` waits, after its start is recorded,
    /// until this file exists. A test that SIGKILLs a worker while the gate is closed knows
    /// that no tool was between its effect and the journal entry of its result.
    pub gate: Option<Arc<PathBuf>>,
}

impl ScriptedTools {
    /// Tools that record into `dir` (created if missing).
    pub fn recording(dir: PathBuf, delay: Duration) -> std::io::Result<ScriptedTools> {
        fs::create_dir_all(dir.join("done"))?;
        Ok(ScriptedTools {
            delay,
            record: Some(Arc::new(dir)),
            announce: false,
            gate: None,
        })
    }
}

impl Tools for ScriptedTools {
    fn execute(&self, run_id: RunId, call: ToolCall) -> StepFuture<ToolOutput> {
        let delay = self.delay;
        let record = self.record.clone();
        let announce = self.announce;
        let gate = self.gate.clone();
        Box::pin(async move {
            let key = format!("{}:{}", run_id.as_str(), call.id.as_str());
            if announce {
                eprintln!("runcore-restate-worker[{}]: tool {key}", std::process::id());
            }
            if let Some(dir) = &record {
                append(dir, "starts.log", &key).map_err(io_failure)?;
            }
            if let Some(gate) = gate.filter(|_| call.id.as_str() != "call-1") {
                while !gate.exists() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let output = match call.name.as_str() {
                "lookup" => {
                    let n = call
                        .arguments
                        .get("n")
                        .and_then(|n| n.as_u64())
                        .unwrap_or(0);
                    ToolOutput::text(call.id.clone(), format!("lookup {n} = {}", n * n))
                }
                "deploy" => {
                    let target = call
                        .arguments
                        .get("target")
                        .and_then(|t| t.as_str())
                        .unwrap_or("nowhere");
                    ToolOutput::text(call.id.clone(), format!("deployed to {target}"))
                }
                "fragile" => {
                    return Err(StepError::transient(
                        "tool_unavailable",
                        "the fragile tool always fails",
                    ));
                }
                other => ToolOutput::error(call.id.clone(), format!("no tool named {other}")),
            };
            if let Some(dir) = &record {
                if !complete_once(dir, &key).map_err(io_failure)? {
                    append(dir, "refused.log", &key).map_err(io_failure)?;
                    return Ok(ToolOutput::error(
                        call.id.clone(),
                        format!("interrupted: {key} already completed once; refused"),
                    ));
                }
                append(dir, "done.log", &key).map_err(io_failure)?;
            }
            Ok(output)
        })
    }
}

/// Marks `key` completed; false when it already was (an exclusive create is atomic across
/// processes).
fn complete_once(dir: &std::path::Path, key: &str) -> std::io::Result<bool> {
    let name: String = key.bytes().map(|b| format!("{b:02x}")).collect();
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join("done").join(name))
    {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

fn append(dir: &std::path::Path, file: &str, key: &str) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(file))?;
    // One write per line: O_APPEND keeps lines whole across processes.
    f.write_all(format!("{key}\n").as_bytes())
}

fn io_failure(error: std::io::Error) -> StepError {
    StepError::transient("record_failed", error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use runcore::UserMessage;

    #[test]
    fn the_script_asks_for_lookups_then_deploy_then_answers() {
        let prompt = Message::from(UserMessage::text("lookup 2 deploy"));
        let first = answer(std::slice::from_ref(&prompt)).unwrap();
        let calls: Vec<_> = first.tool_calls().collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name.as_str(), "lookup");
        assert_eq!(calls[0].id.as_str(), "call-1");
    }

    #[test]
    fn parse_reads_counts_and_flags() {
        assert_eq!(
            Script::parse("lookup 3 deploy flaky-model"),
            Script {
                lookups: 3,
                deploy: true,
                fragile: false,
                flaky_model: true
            }
        );
        assert_eq!(Script::parse("lookup").lookups, 1);
        assert_eq!(Script::parse("hello").lookups, 0);
    }
}
