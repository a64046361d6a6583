//! The durable driver's cost, through the real binary and real pipes.
//!
//! ```sh
//! cargo bench -p runcore-cli --bench durable_driver            # 1000 steps; 10k and 100k messages
//! cargo bench -p runcore-cli --bench durable_driver -- 2000 10000,100000
//! ```
//!
//! 1. **Steps per second of a w1-style session** (the comparison workload w1: one prompt; per
//!    step 20 text deltas of 50 bytes, an answer with that text and one `echo` tool call, a
//!    100-byte tool result; a final text answer), driven line by line through
//!    `runcore drive` in memory, `--store sqlite:…?synchronous=normal` and
//!    `--store sqlite:…` (FULL), side by side. The host writes one line and reads until its
//!    `idle`, as a real host does; the driver runs in `"context":"delta"` mode (the mode meant
//!    for long runs: each `call_model` carries only the new messages).
//! 2. **Start to `idle` 0** of `runcore drive --store sqlite:…` on a thread of 10,000 and
//!    100,000 committed messages (a w1 session committed straight into SQLite beforehand):
//!    once with the run ended (recovery alone), once with the run waiting for its next model
//!    call (recovery plus the `call_model` line carrying the whole transcript).
//!
//! Each figure is one JSON line.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use runcore::host::script::{self, ModelTurn, Script, ServeError, Stop};
use runcore::store::CommitLog;
use runcore::{
    Action, Agent, AgentConfig, AssistantMessage, ModelRequest, Output, RunId, ToolCall,
    ToolOutput, UserMessage,
};
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use serde_json::{Value, json};

/// The comparison workloads of the core crate; only w1's answer is used here.
#[allow(dead_code)]
#[path = "../../benches/support/workloads.rs"]
mod workloads;

#[path = "support/driver.rs"]
mod driver;

use driver::{Driver, RUNCORE, w1_through};

fn steps_per_second(label: &str, args: &[&str], n: u32) {
    let mut driver = Driver::spawn(args);
    if args.contains(&"--store") {
        driver.until_idle();
    }
    let start = Instant::now();
    let (steps, _) = w1_through(&mut driver, n);
    let wall = start.elapsed().as_secs_f64();
    driver.finish();
    println!(
        "{{\"bench\":\"w1_steps_per_second\",\"driver\":\"{label}\",\"steps\":{steps},\"wall_s\":{wall:.3},\"steps_per_s\":{:.1}}}",
        f64::from(steps) / wall
    );
}

/// The w1 session as a script: every model call writes 1 KB of text and calls `echo`, until
/// the thread holds `messages - 1` messages; then it answers "done".
struct W1 {
    messages: usize,
    text: String,
    tool_text: String,
}

impl Script for W1 {
    fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn {
        if request.context().count() >= self.messages.saturating_sub(1) {
            return ModelTurn::answer(AssistantMessage::text("done"));
        }
        ModelTurn::answer(workloads::echo_answer(self.text.clone(), request.step))
    }

    fn tool(&mut self, _run_id: &RunId, call: &ToolCall) -> ToolOutput {
        ToolOutput::text(call.id.clone(), self.tool_text.clone())
    }
}

/// Why [`build_store`]'s sink stopped the session.
#[derive(Debug)]
enum Held {
    /// At the last model call, on purpose (`ended` false).
    AtLastCall,
    /// The store refused a commit.
    Store(runcore::store::StoreError),
}

/// Commits a w1 session of about `messages` messages on thread `t` straight into SQLite; with
/// `ended` false the run is left waiting for its next model call (the sink stops the session
/// when that call is handed out, so nothing after it is acted on).
fn build_store(path: &Path, messages: usize, ended: bool) {
    let mut store = SqliteStore::open(
        path,
        SqliteOptions::default().with_synchronous(Synchronous::Normal),
    )
    .expect("open");
    // A step budget the session never reaches: it ends (or waits) by its message count.
    let config = AgentConfig {
        max_steps: messages as u32 + 10,
        ..AgentConfig::for_thread("t")
    };
    let mut agent = Agent::new(config).expect("config");
    let mut session = W1 {
        messages,
        text: "d".repeat(1000),
        tool_text: "t".repeat(100),
    };
    let mut sink = |agent: &Agent, output: &Output| match output {
        Output::Commit(commit) => store
            .commit_operation(commit.as_ref().clone().into_operation())
            .map(drop)
            .map_err(Held::Store),
        Output::Action(Action::CallModel { .. })
            if !ended && agent.transcript().len() >= messages.saturating_sub(1) =>
        {
            Err(Held::AtLastCall)
        }
        _ => Ok(()),
    };
    agent.prompt(UserMessage::text("go"), 0).expect("prompt");
    match script::serve(&mut agent, &mut session, &mut sink) {
        Ok(Stop::Idle) if ended => {}
        Err(ServeError::Sink(Held::AtLastCall)) if !ended => {}
        Err(ServeError::Sink(Held::Store(error))) => panic!("the store refused a commit: {error}"),
        other => panic!("the w1 session did not build: {other:?}"),
    }
}

fn time_to_idle_0(dir: &Path, messages: usize, ended: bool) {
    let path = dir.join(format!("m{messages}-{ended}.db"));
    build_store(&path, messages, ended);
    let url = format!("sqlite:{}", path.display());
    // The configuration the session ran with (its step budget), as a host recovers with it.
    let config = dir.join("config.json");
    std::fs::write(&config, json!({"max_steps": messages + 10}).to_string()).expect("config");
    let config = config.to_str().expect("UTF-8 path");
    let mut best = f64::MAX;
    let mut bytes = 0;
    for _ in 0..3 {
        let start = Instant::now();
        let mut driver = Driver::spawn(&["--store", &url, "--thread", "t", "--config", config]);
        bytes = driver.until_idle().1;
        best = best.min(start.elapsed().as_secs_f64());
        driver.finish();
    }
    let shown = Command::new(RUNCORE)
        .args(["threads", "--store", &url, "--json"])
        .output()
        .expect("threads");
    let thread: Value = serde_json::from_slice(&shown.stdout).expect("one thread");
    println!(
        "{{\"bench\":\"start_to_idle_0\",\"messages\":{messages},\"run\":\"{}\",\"version\":{},\"best_of_3_ms\":{:.1},\"bytes_before_idle_0\":{bytes}}}",
        if ended { "ended" } else { "awaiting_model" },
        thread["version"],
        best * 1000.0
    );
}

fn main() {
    // `cargo bench` passes `--bench`; the figures come from the arguments after it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let steps: u32 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let sizes: Vec<usize> = args
        .get(1)
        .map(|a| a.split(',').filter_map(|s| s.parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000]);
    let temp = tempfile::Builder::new()
        .prefix("runcore-bench-")
        .tempdir()
        .expect("temp dir");
    let dir = temp.path();
    let db = |name: &str| -> PathBuf { dir.join(name) };
    let normal = format!("sqlite:{}?synchronous=normal", db("normal.db").display());
    let full = format!("sqlite:{}", db("full.db").display());
    steps_per_second("memory", &[], steps);
    steps_per_second("sqlite_normal", &["--store", &normal], steps);
    steps_per_second("sqlite_full", &["--store", &full], steps);
    for &messages in &sizes {
        time_to_idle_0(dir, messages, true);
        time_to_idle_0(dir, messages, false);
    }
}
