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
//! The host side is minimal on purpose (outputs are drained and dropped, as a host that
//! forwards them elsewhere would), so the figures are the core's own cost. That is why these
//! two loops are the one host in the repository not written on `runcore::script::serve`: on
//! `serve` (a sink call per output, a script call per turn, a re-check of the phase after
//! every input) w1 counted 24,741 instructions per item against 21,949 for this loop
//! (+12.7%) and w2 8,933 against 8,515 (+4.9%), at N = 2,000 (callgrind, 2026-12-02). The
//! figure is meant to measure the core, not a generic host, so the loops stay this small.

use runcore::{
    Action, Agent, AgentConfig, AssistantBlock, AssistantMessage, Message, Output, StopReason,
    ToolOutput, UserMessage,
};
use serde_json::json;

pub fn long_run(n: u32) -> u32 {
    let config = AgentConfig {
        max_steps: n,
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(config).expect("valid config");
    let delta = "d".repeat(50);
    let text = delta.repeat(20);
    let tool_text = "t".repeat(100);
    agent.prompt(UserMessage::text("go"), 0).expect("idle");
    let mut steps = 0;
    while let Some(output) = agent.poll() {
        match output {
            Output::Action(Action::CallModel { run_id, step, .. }) => {
                steps = step;
                std::hint::black_box(agent.model_request().map(|r| r.messages.len()));
                let message = if step < n {
                    for _ in 0..20 {
                        agent.model_delta(&run_id, step, &delta).expect("delta");
                    }
                    AssistantMessage::new(
                        vec![
                            AssistantBlock::text(text.clone()),
                            AssistantBlock::tool_call(
                                format!("call-{step}").as_str(),
                                "echo",
                                json!({ "i": step }),
                            ),
                        ],
                        StopReason::ToolUse,
                    )
                } else {
                    AssistantMessage::text("done")
                };
                agent.model_done(&run_id, step, message).expect("answer");
            }
            Output::Action(Action::ExecuteTools { run_id, calls, .. }) => {
                for call in calls {
                    let output = ToolOutput::text(call.id.clone(), tool_text.clone());
                    agent.tool_done(&run_id, &call.id, output).expect("result");
                }
            }
            other => {
                std::hint::black_box(other);
            }
        }
    }
    steps
}

pub fn many_runs(n: u32) -> u32 {
    let mut agent = Agent::new(AgentConfig::default()).expect("valid config");
    let answer = "a".repeat(1000);
    for i in 0..n {
        agent
            .prompt(UserMessage::text(format!("q{i}")), u64::from(i))
            .expect("idle");
        while let Some(output) = agent.poll() {
            if let Output::Action(Action::CallModel { run_id, step, .. }) = output {
                let message = AssistantMessage::text(answer.clone());
                agent.model_done(&run_id, step, message).expect("answer");
            }
        }
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
            let message = AssistantMessage::new(
                vec![
                    AssistantBlock::text(text),
                    AssistantBlock::tool_call(
                        format!("call-{step}").as_str(),
                        "echo",
                        json!({ "i": step }),
                    ),
                ],
                StopReason::ToolUse,
            );
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
