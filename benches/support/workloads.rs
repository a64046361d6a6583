//! The comparison workloads, shared by `examples/workloads.rs` and the benchmarks.
//!
//! - `long_run(n)` (w1): one prompt; the scripted model answers n−1 times with 20 text deltas
//!   of 50 bytes, then an assistant message with that text and one `echo` tool call
//!   `{"i": step}`; the tool returns a 100-byte text; then a final text-only answer
//!   (max_steps = n). Returns the steps made.
//! - `many_runs(n)` (w2): n sequential prompts on one agent, each answered by one text-only
//!   assistant message of 1000 bytes. Returns the runs made.
//!
//! - `floor_long_run(n)` / `floor_many_runs(n)` (floor-w1, floor-w2): the same messages
//!   appended to a plain `Vec<Message>` and the same calls answered, with nothing else (no
//!   events, commits, checks or ids): what any agent must at least do, the floor the core's
//!   cost is compared to.
//!
//! Both run on `runcore::host::script::serve`, the one scripted host of the repository, with a
//! sink that drops every output (as a host that forwards them elsewhere would), so the
//! figures are the core's cost plus that host's. (Until 2026-12-03 they kept a hand-written
//! loop: `serve` then cost +12.7% on w1 and +4.9% on w2. Streamed deltas now move their text
//! straight into their event, and a drain ends at the action it hands out, so on `serve` w1
//! counts 21,270 instructions per item and w2 8,231, at N = 10,000: +0.3% and +1.8% against
//! the hand-written loop of the commit before.)

use std::convert::Infallible;

use runcore::host::script::{self, ModelOnly, ModelTurn, Script, Stop};
use runcore::{
    Agent, AgentConfig, AssistantBlock, AssistantMessage, Message, ModelRequest, Output, RunId,
    Step, StopReason, ToolCall, ToolOutput, UserMessage,
};
use serde_json::json;

/// w1's answer at a `step` before the last: `text`, then one `echo` call `{"i": step}` with
/// the id `call-{step}`. (The durable driver's bench writes its w1 session with it too.)
pub fn echo_answer(text: String, step: Step) -> AssistantMessage {
    AssistantMessage::new(
        vec![
            AssistantBlock::text(text),
            AssistantBlock::tool_call(
                format!("call-{step}").as_str(),
                "echo",
                json!({ "i": step }),
            ),
        ],
        StopReason::ToolUse,
    )
}

/// w1's script: every call but the last streams 20 deltas, then calls `echo` once; the last
/// answers with text only.
struct LongRun {
    n: u32,
    delta: String,
    text: String,
    tool_text: String,
    steps: u32,
}

impl Script for LongRun {
    fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn {
        let step = request.step;
        self.steps = step;
        std::hint::black_box(request.messages.len());
        if step < self.n {
            let message = echo_answer(self.text.clone(), step);
            ModelTurn::streamed(vec![self.delta.clone(); 20], message)
        } else {
            ModelTurn::answer(AssistantMessage::text("done"))
        }
    }

    fn tool(&mut self, _run_id: &RunId, call: &ToolCall) -> ToolOutput {
        ToolOutput::text(call.id.clone(), self.tool_text.clone())
    }
}

/// Outputs are dropped, as a host that forwards them elsewhere would.
fn dropped(_: &Agent, output: &Output) -> Result<(), Infallible> {
    std::hint::black_box(output);
    Ok(())
}

pub fn long_run(n: u32) -> u32 {
    let config = AgentConfig {
        max_steps: n,
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(config).expect("valid config");
    let delta = "d".repeat(50);
    let mut script = LongRun {
        n,
        text: delta.repeat(20),
        delta,
        tool_text: "t".repeat(100),
        steps: 0,
    };
    agent.prompt(UserMessage::text("go"), 0).expect("idle");
    let stop = script::serve(&mut agent, &mut script, &mut dropped).expect("served");
    assert_eq!(stop, Stop::Idle);
    script.steps
}

pub fn many_runs(n: u32) -> u32 {
    let mut agent = Agent::new(AgentConfig::default()).expect("valid config");
    let answer = "a".repeat(1000);
    let mut script =
        ModelOnly(|_: &ModelRequest<'_>| ModelTurn::answer(AssistantMessage::text(answer.clone())));
    for i in 0..n {
        agent
            .prompt(UserMessage::text(format!("q{i}")), u64::from(i))
            .expect("idle");
        let stop = script::serve(&mut agent, &mut script, &mut dropped).expect("served");
        debug_assert_eq!(stop, Stop::Idle);
    }
    n
}

/// w1's floor: the transcript grows by the same messages; deltas are gathered into the text.
pub fn floor_long_run(n: u32) -> u32 {
    let delta = "d".repeat(50);
    let tool_text = "t".repeat(100);
    let mut transcript: Vec<Message> = vec![Message::from(UserMessage::text("go"))];
    let mut steps = 0;
    for step in 1..=n {
        steps = step;
        std::hint::black_box(transcript.len());
        if step < n {
            let mut text = String::new();
            for _ in 0..20 {
                text.push_str(std::hint::black_box(&delta));
            }
            let message = echo_answer(text, step);
            let calls: Vec<_> = message.tool_calls().collect();
            transcript.push(Message::from(message));
            for call in calls {
                let output = ToolOutput::text(call.id.clone(), tool_text.clone());
                transcript.push(Message::from(output.into_result(call.name)));
            }
        } else {
            transcript.push(Message::from(AssistantMessage::text("done")));
        }
    }
    std::hint::black_box(&transcript);
    steps
}

/// w2's floor: n prompts and n answers appended to one transcript.
pub fn floor_many_runs(n: u32) -> u32 {
    let answer = "a".repeat(1000);
    let mut transcript: Vec<Message> = Vec::new();
    for i in 0..n {
        transcript.push(Message::from(UserMessage::text(format!("q{i}"))));
        std::hint::black_box(transcript.len());
        transcript.push(Message::from(AssistantMessage::text(answer.clone())));
    }
    std::hint::black_box(&transcript);
    n
}
