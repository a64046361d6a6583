//! Two workloads for comparing runcore with other agent libraries.
//!
//! ```sh
//! cargo run --release --example workloads -- w1 10000
//! cargo run --release --example workloads -- w2 10000
//! ```
//!
//! Each prints one JSON line:
//! `{"peer":"runcore","workload","param","wall_ms","per_item_us","peak_rss_kb"}`.
//!
//! - **w1 (long run)**: one prompt; the scripted model answers N−1 times with 20 text deltas of
//!   50 bytes, then an assistant message with that text and one `echo` tool call `{"i": n}`;
//!   the tool returns a 100-byte text; then a final text-only answer (max_steps = N). Items are
//!   steps (model calls).
//! - **w2 (many runs)**: N sequential prompts on one agent, each answered by one text-only
//!   assistant message of 1000 bytes. Items are runs.
//!
//! The host side is minimal on purpose (outputs are drained and dropped, as a host that
//! forwards them elsewhere would), so the figures are the core's own cost.

use std::time::Instant;

use runcore::{
    Action, Agent, AgentConfig, AssistantBlock, AssistantMessage, Output, StopReason, ToolOutput,
    UserMessage,
};
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (workload, n) = match args.as_slice() {
        [w, n] => match n.parse::<u32>() {
            Ok(n) if n >= 1 => (w.as_str(), n),
            _ => usage(),
        },
        _ => usage(),
    };
    let start = Instant::now();
    let items = match workload {
        "w1" => w1(n),
        "w2" => w2(n),
        _ => usage(),
    };
    let wall = start.elapsed();
    let wall_ms = wall.as_secs_f64() * 1000.0;
    let per_item_us = wall.as_secs_f64() * 1e6 / f64::from(items);
    // Fields in the documented order (a JSON object built with serde_json would sort them).
    let line = format!(
        "{{\"peer\":\"runcore\",\"workload\":\"{workload}\",\"param\":{n},\"wall_ms\":{wall_ms:.3},\"per_item_us\":{per_item_us:.3},\"peak_rss_kb\":{}}}",
        peak_rss_kb()
    );
    println!("{line}");
}

fn usage() -> ! {
    eprintln!("usage: workloads <w1|w2> <N>   (N >= 1)");
    std::process::exit(2);
}

/// One long run of `n` model calls; returns the number of steps.
fn w1(n: u32) -> u32 {
    let config = AgentConfig {
        max_steps: n,
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(config).expect("valid config");
    let delta = "d".repeat(50);
    let full_text = delta.repeat(20);
    let tool_text = "t".repeat(100);
    agent
        .prompt(UserMessage::text("start the long run"), 0)
        .expect("idle agent");
    let mut steps = 0;
    while let Some(output) = agent.poll() {
        match output {
            Output::Action(Action::CallModel { run_id, step, .. }) => {
                steps = step;
                let request = agent.model_request().expect("outstanding call");
                std::hint::black_box(request.messages.len());
                if step < n {
                    for _ in 0..20 {
                        agent.model_delta(&run_id, step, &delta).expect("delta");
                    }
                    let message = AssistantMessage::new(
                        vec![
                            AssistantBlock::text(full_text.clone()),
                            AssistantBlock::tool_call(
                                format!("call-{step}").as_str(),
                                "echo",
                                json!({ "i": step }),
                            ),
                        ],
                        StopReason::ToolUse,
                    );
                    agent.model_done(&run_id, step, message).expect("answer");
                } else {
                    agent
                        .model_done(&run_id, step, AssistantMessage::text("done"))
                        .expect("final answer");
                }
            }
            Output::Action(Action::ExecuteTools { run_id, calls, .. }) => {
                for call in calls {
                    agent
                        .tool_done(
                            &run_id,
                            &call.id,
                            ToolOutput::text(call.id.clone(), tool_text.clone()),
                        )
                        .expect("tool result");
                }
            }
            Output::Commit(commit) => {
                std::hint::black_box(commit);
            }
            Output::Event(event) => {
                std::hint::black_box(event);
            }
        }
    }
    steps
}

/// `n` sequential runs; returns the number of runs.
fn w2(n: u32) -> u32 {
    let mut agent = Agent::new(AgentConfig::default()).expect("valid config");
    let answer = "a".repeat(1000);
    for i in 0..n {
        agent
            .prompt(UserMessage::text(format!("question {i}")), u64::from(i))
            .expect("idle agent");
        while let Some(output) = agent.poll() {
            match output {
                Output::Action(Action::CallModel { run_id, step, .. }) => {
                    agent
                        .model_done(&run_id, step, AssistantMessage::text(answer.clone()))
                        .expect("answer");
                }
                other => {
                    std::hint::black_box(other);
                }
            }
        }
    }
    n
}

/// Peak resident set size in KiB (Linux `VmHWM`), 0 where unavailable.
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse().ok())
        })
        .unwrap_or(0)
}
