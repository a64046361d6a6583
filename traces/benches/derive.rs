//! Deriving the spans of a long run from SQLite (SPEC §14).
//!
//! ```sh
//! cargo bench -p runcore-traces --bench derive            # a 10,000-step thread
//! cargo bench -p runcore-traces --bench derive -- 20000   # another step count
//! ```
//!
//! A w1-style run (each model step: a 1 KB text answer with one `echo` tool call, then a
//! 100-byte result) of N steps is committed straight into SQLite (`synchronous=normal`), one
//! commit per step and one per tool batch, as any host commits it. Then, best of 5:
//!
//! 1. **read + derive**: `thread_spans` on the SQLite store: the committed messages and the
//!    audit events read through the store's ports, and every span derived;
//! 2. **derive alone**: `derive_spans` on the messages and events read once.
//!
//! Message content stays out of the spans (the default): with `content` each model step
//! carries its whole context, which grows with the run, so that output is quadratic in size
//! by nature. Each figure is one JSON line; the last one says whether the target (read +
//! derive ≤ 200 ms for 10,000 steps) was met.

use std::path::Path;
use std::time::Instant;

use runcore::host::script::{self, ModelTurn, Script, ServeError, Stop};
use runcore::store::{CheckpointReader, CommitLog, CommittedThreadView, EventScope};
use runcore::{
    Action, Agent, AgentConfig, Message, ModelRequest, Output, RunId, ThreadId, ToolCall,
    ToolOutput, UserMessage,
};
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use runcore_traces::{TraceOptions, derive_spans, thread_spans};

/// The comparison workloads of the core crate; only w1's answer is used here.
#[allow(dead_code)]
#[path = "../../benches/support/workloads.rs"]
mod workloads;

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
fn build_store(path: &Path, steps: u32) -> SqliteStore {
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
    agent.prompt(UserMessage::text("go"), 0).expect("prompt");
    match script::serve(&mut agent, &mut session, &mut sink) {
        Ok(Stop::Idle) => {}
        Err(ServeError::Sink(error)) => panic!("the store refused a commit: {error}"),
        other => panic!("the w1 run did not finish: {other:?}"),
    }
    store
}

fn best_of<T>(times: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::MAX;
    let mut last = None;
    for _ in 0..times {
        let start = Instant::now();
        let value = f();
        best = best.min(start.elapsed().as_secs_f64() * 1000.0);
        last = Some(value);
    }
    (best, last.expect("at least one round"))
}

fn main() {
    // `cargo bench` passes `--bench`; the step count comes from the arguments after it.
    let steps: u32 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::Builder::new()
        .prefix("runcore-bench-derive-")
        .tempdir()
        .expect("temp dir");
    let path = dir.path().join("runs.db");
    let started = Instant::now();
    let store = build_store(&path, steps);
    let build_s = started.elapsed().as_secs_f64();
    let thread = ThreadId::new("t");
    let options = TraceOptions::default();

    let (read_derive_ms, spans) = best_of(5, || {
        thread_spans(&store, &thread, &options).expect("spans from SQLite")
    });
    let messages: Vec<Message> = store.committed_messages(&thread).expect("messages");
    let events = store
        .list_events(&EventScope::Thread(thread.clone()), None, 1 << 30)
        .expect("events");
    let (derive_ms, derived) = best_of(5, || derive_spans(&thread, &messages, &events, &options));
    assert_eq!(derived, spans, "the same spans either way");
    let tools = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool"))
        .count();
    assert_eq!(
        tools,
        steps as usize - 1,
        "one tool span per step but the last"
    );
    println!(
        "{{\"bench\":\"derive_spans\",\"steps\":{steps},\"messages\":{},\"events\":{},\"spans\":{},\"build_store_s\":{build_s:.1},\"read_and_derive_best_of_5_ms\":{read_derive_ms:.1},\"derive_only_best_of_5_ms\":{derive_ms:.1}}}",
        messages.len(),
        events.len(),
        spans.len(),
    );
    if steps == 10_000 {
        println!(
            "{{\"bench\":\"derive_spans_target\",\"target_ms\":200,\"met\":{}}}",
            read_derive_ms <= 200.0
        );
    }
}
