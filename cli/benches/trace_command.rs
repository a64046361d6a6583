//! `runcore trace` as a command (issue 42: goal 200 ms): the wall time of the process, text
//! and `--json`, on a 10,000-step thread in SQLite, beside `traces/benches/derive.rs`'s
//! in-process figures.
//!
//! ```sh
//! cargo bench -p runcore-cli --bench trace_command                 # 10,000 steps, 7 rounds
//! cargo bench -p runcore-cli --bench trace_command -- 10000 9      # steps, rounds
//! RUNCORE_BEFORE=/path/to/old/runcore cargo bench -p runcore-cli --bench trace_command
//! RUNCORE_BENCH_DB=/tmp/t.db cargo bench -p runcore-cli --bench trace_command   # keep the store
//! ```
//!
//! The thread is a w1-style run (each model step a 1 KB text answer with one `echo` call, a
//! 100-byte result; a final text answer) committed straight into SQLite
//! (`synchronous=normal`), as `traces/benches/derive.rs` builds it. Each round runs
//! `runcore trace t --store sqlite:…` and `… --json` with stdout read by this process; with
//! `RUNCORE_BEFORE` the same commands of another build run in the same rounds, alternating,
//! so both see the same machine (and the outputs are checked equal). Figures: the median and
//! the best of the rounds, one JSON line each.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use runcore::host::script::{self, ModelTurn, Script, ServeError, Stop};
use runcore::store::CommitLog;
use runcore::{Action, Agent, AgentConfig, ModelRequest, Output, RunId, ToolCall, ToolOutput};
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};

/// The comparison workloads of the core crate; only w1's answer is used here.
#[allow(dead_code)]
#[path = "../../benches/support/workloads.rs"]
mod workloads;

const RUNCORE: &str = env!("CARGO_BIN_EXE_runcore");

/// w1: every model call but the last writes 1 KB of text and calls `echo`.
struct W1 {
    steps: u32,
    text: String,
    tool_text: String,
}

impl Script for W1 {
    fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn {
        if request.step >= self.steps {
            return ModelTurn::answer(runcore::AssistantMessage::text("done"));
        }
        ModelTurn::answer(workloads::echo_answer(self.text.clone(), request.step))
    }

    fn tool(&mut self, _run_id: &RunId, call: &ToolCall) -> ToolOutput {
        ToolOutput::text(call.id.clone(), self.tool_text.clone())
    }
}

/// Commits a w1 run of `steps` model steps on thread `t` into SQLite.
fn build_store(path: &Path, steps: u32) {
    let mut store = SqliteStore::open(
        path,
        SqliteOptions::default().with_synchronous(Synchronous::Normal),
    )
    .expect("open");
    let config = AgentConfig {
        max_steps: steps + 10,
        ..AgentConfig::for_thread("t")
    };
    let mut agent = Agent::new(config).expect("config");
    let mut session = W1 {
        steps,
        text: "d".repeat(1000),
        tool_text: "t".repeat(100),
    };
    let mut sink = |_: &Agent, output: &Output| match output {
        Output::Commit(commit) => store
            .commit_operation(commit.as_ref().clone().into_operation())
            .map(drop),
        Output::Action(Action::CallModel { .. } | Action::ExecuteTools { .. }) => Ok(()),
        _ => Ok(()),
    };
    agent
        .prompt(runcore::UserMessage::text("go"), 0)
        .expect("prompt");
    match script::serve(&mut agent, &mut session, &mut sink) {
        Ok(Stop::Idle) => {}
        Err(ServeError::Sink(error)) => panic!("the store refused a commit: {error}"),
        other => panic!("the w1 run did not finish: {other:?}"),
    }
}

/// One `runcore trace` process: its wall time in ms and its stdout.
fn trace(binary: &str, url: &str, json: bool) -> (f64, Vec<u8>) {
    let mut args = vec!["trace", "t", "--store", url];
    if json {
        args.push("--json");
    }
    let start = Instant::now();
    let output = Command::new(binary)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("run runcore trace");
    let took = start.elapsed().as_secs_f64() * 1000.0;
    assert!(output.status.success(), "{binary} {args:?}: {output:?}");
    (took, output.stdout)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; the figures come from the arguments after it.
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .filter_map(|a| a.parse().ok())
        .collect();
    let steps = args.first().copied().unwrap_or(10_000) as u32;
    let rounds = args.get(1).copied().unwrap_or(7) as usize;
    let before = std::env::var("RUNCORE_BEFORE").ok();
    let dir = tempfile::Builder::new()
        .prefix("runcore-bench-trace-")
        .tempdir()
        .expect("temp dir");
    // RUNCORE_BENCH_DB=PATH keeps the store (built there once, reused after) for profiling.
    let path = match std::env::var("RUNCORE_BENCH_DB") {
        Ok(path) => std::path::PathBuf::from(path),
        Err(_) => dir.path().join("runs.db"),
    };
    if !path.exists() {
        build_store(&path, steps);
    }
    let url = format!("sqlite:{}", path.display());
    let mut binaries = vec![("this build", RUNCORE.to_owned())];
    if let Some(before) = before {
        binaries.push(("RUNCORE_BEFORE", before));
    }
    for json in [false, true] {
        let form = if json { "json" } else { "text" };
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); binaries.len()];
        let mut sizes = vec![0usize; binaries.len()];
        // One warm-up of each (the store's pages into the OS cache), then the rounds.
        let mut outputs = Vec::new();
        for (_, binary) in &binaries {
            outputs.push(trace(binary, &url, json).1);
        }
        if let [first, other] = outputs.as_slice()
            && first != other
        {
            println!(
                "{{\"bench\":\"runcore_trace\",\"form\":\"{form}\",\"note\":\"the outputs differ ({} vs {} bytes)\"}}",
                first.len(),
                other.len()
            );
        }
        for _ in 0..rounds {
            for (index, (_, binary)) in binaries.iter().enumerate() {
                let (took, out) = trace(binary, &url, json);
                times[index].push(took);
                sizes[index] = out.len();
            }
        }
        for (index, (label, _)) in binaries.iter().enumerate() {
            let best = times[index].iter().copied().fold(f64::MAX, f64::min);
            let median = median(&mut times[index]);
            println!(
                "{{\"bench\":\"runcore_trace\",\"binary\":\"{label}\",\"form\":\"{form}\",\"steps\":{steps},\"rounds\":{rounds},\"stdout_bytes\":{},\"median_ms\":{median:.1},\"best_ms\":{best:.1},\"target_ms\":200,\"met\":{}}}",
                sizes[index],
                median <= 200.0
            );
        }
    }
}
