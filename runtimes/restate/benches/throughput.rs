//! runcore inside Restate against the in-process durable driver, on the same script and the
//! same store (SQLite, synchronous FULL, then NORMAL: without an fsync per commit what is left
//! is the engine's own overhead):
//!
//! ```sh
//! cargo bench -p runcore-restate --bench throughput            # 48 threads, 8 sequential
//! cargo bench -p runcore-restate --bench throughput -- 96 16
//! ```
//!
//! The script is `lookup 3`: four model calls and three tool calls per thread, with the
//! scripted model and tools answering at once, so what is measured is the overhead of the
//! engine around runcore (journal round trips, state, the store), not a model.
//! - **threads/s**: N threads sent at once through the ingress (`/send`, idempotency keys),
//!   until every thread is idle again; for the driver, N threads one after another in one
//!   process (it has no concurrency of its own).
//! - **per step**: M threads one after another, each a synchronous `prompt` call; the mean
//!   time per model step (a step here is one model call, its commit and its tool call).
//!
//! Needs the Restate server (`npm ci` in runtimes/restate); without it, it says so and
//! exits. One JSON line per figure, then a table.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use runcore::host::{DurableDriver, DurableOptions};
use runcore::{AgentConfig, ThreadId};
use runcore_restate::Tools;
use runcore_restate::script::{ScriptedTools, answer, scripted_config};
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use serde_json::{Value, json};
use support::{Server, free_port, server_binary, start_worker, temp_dir};

const PROMPT: &str = "lookup 3";
const STEPS_PER_THREAD: f64 = 4.0;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let threads = args.first().copied().unwrap_or(48);
    let sequential = args.get(1).copied().unwrap_or(8);
    let Some(binary) = server_binary() else {
        return;
    };
    let mut rows = Vec::new();
    for (label, synchronous) in [("FULL", Synchronous::Full), ("NORMAL", Synchronous::Normal)] {
        let (tps, step) = durable_driver(threads, sequential, synchronous);
        rows.push((
            format!("in-process DurableDriver, SQLite {label}"),
            tps,
            step,
        ));
        for workers in [1, 2] {
            let (tps, step) = cluster(&binary, workers, threads, sequential, synchronous);
            rows.push((
                format!("Restate, {workers} worker(s), SQLite {label}"),
                tps,
                step,
            ));
        }
    }
    for (name, tps, step) in &rows {
        println!(
            "{}",
            json!({"host": name, "threads": threads, "threads_per_s": round(*tps),
                   "per_step_ms": round(*step)})
        );
    }
    println!(
        "\n| host | threads/s ({threads} threads) | per step, ms ({sequential} threads in a row) |"
    );
    println!("|---|---|---|");
    for (name, tps, step) in &rows {
        println!("| {name} | {tps:.1} | {step:.2} |");
    }
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The same script through `DurableDriver` lines on a SQLite file: (threads/s, ms per step).
fn durable_driver(threads: usize, sequential: usize, synchronous: Synchronous) -> (f64, f64) {
    let dir = temp_dir("bench-driver");
    let path = dir.path().join("store.db");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let tools = ScriptedTools::default();
    let options = SqliteOptions::default().with_synchronous(synchronous);
    let mut store = Some(SqliteStore::open(&path, options).expect("store"));
    let mut run = |thread: String| {
        let mut config: AgentConfig = scripted_config(None);
        config.thread_id = ThreadId::from(thread.as_str());
        let (mut driver, _) = DurableDriver::start(
            store.take().expect("the store"),
            DurableOptions::new(config),
        )
        .expect("start");
        let mut next = json!({"type": "prompt", "text": PROMPT}).to_string();
        loop {
            let out = driver.handle_line(next.as_bytes()).expect("line");
            assert!(out.refused.is_none());
            let action = out
                .lines
                .iter()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|l| l["type"] == "call_model" || l["type"] == "execute_tools");
            let Some(action) = action else { break };
            next = if action["type"] == "call_model" {
                let agent = driver.driver().agent();
                let request = agent.model_request().expect("request");
                let message = answer(request.messages).expect("answer");
                json!({"type": "model_done", "run_id": action["run_id"], "step": action["step"],
                       "message": message})
                .to_string()
            } else {
                let call: runcore::ToolCall =
                    serde_json::from_value(action["calls"][0].clone()).expect("call");
                let run_id = runcore::RunId::from(action["run_id"].as_str().unwrap_or(""));
                let output = runtime.block_on(tools.execute(run_id, call)).expect("tool");
                json!({"type": "tool_done", "run_id": action["run_id"], "call_id": output.call_id,
                       "content": output.content})
                .to_string()
            };
        }
        store = Some(driver.into_store());
    };
    let started = Instant::now();
    for i in 0..threads {
        run(format!("many-{i}"));
    }
    let tps = threads as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    for i in 0..sequential {
        run(format!("seq-{i}"));
    }
    let step = started.elapsed().as_secs_f64() * 1000.0 / (sequential as f64 * STEPS_PER_THREAD);
    (tps, step)
}

/// The script through a Restate server and `workers` worker processes on one port.
fn cluster(
    binary: &std::path::Path,
    workers: usize,
    threads: usize,
    sequential: usize,
    synchronous: Synchronous,
) -> (f64, f64) {
    let dir = temp_dir("bench-cluster");
    let mode = match synchronous {
        Synchronous::Normal => "?synchronous=normal",
        _ => "",
    };
    let store_url = format!("sqlite:{}{mode}", dir.path().join("store.db").display());
    let server = Server::start(binary.to_path_buf(), dir.path());
    let port = free_port();
    let _workers: Vec<_> = (0..workers)
        .map(|w| {
            start_worker(
                port,
                &store_url,
                &["--approval-deadline-ms", "0"],
                &dir.path().join(format!("worker-{w}.log")),
            )
        })
        .collect();
    server.register(port);
    // Warm up: the first invocation opens the connections.
    let (status, _) = server.call("warm", "prompt", &body(), Some("warm"));
    assert_eq!(status, 200);

    let started = Instant::now();
    for i in 0..sequential {
        let thread = format!("seq-{i}");
        let (status, view) = server.call(&thread, "prompt", &body(), Some(&thread));
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["last_end"]["cause"]["type"], "natural_end");
    }
    let step = started.elapsed().as_secs_f64() * 1000.0 / (sequential as f64 * STEPS_PER_THREAD);

    let started = Instant::now();
    for i in 0..threads {
        let thread = format!("many-{i}");
        let (status, _) = server.call(&thread, "prompt/send", &body(), Some(&thread));
        assert!((200..300).contains(&status));
    }
    for i in 0..threads {
        server.wait_for(&format!("many-{i}"), Duration::from_secs(300), |s| {
            s["last_end"].is_object()
        });
    }
    let tps = threads as f64 / started.elapsed().as_secs_f64();
    (tps, step)
}

fn body() -> String {
    json!({ "text": PROMPT }).to_string()
}
