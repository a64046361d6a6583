//! Import and fork at the command line, where a person meets them (issue 42: goals 1 s, 1 s).
//!
//! ```sh
//! cargo bench -p runcore-cli --bench import_fork                 # 100,000 messages, fork at 50,001
//! cargo bench -p runcore-cli --bench import_fork -- 20000 10001  # smaller
//! RUNCORE_PG_URL=postgresql://… cargo bench -p runcore-cli --bench import_fork   # + PostgreSQL
//! ```
//!
//! 1. **Import**: `runcore drive` given one `import` line of N messages (a w1-shaped history:
//!    a user message, an assistant answer with text and an `echo` call, its tool result, and
//!    again), timed from the start of the process to the `idle` of that line, with no store,
//!    with `--store sqlite:…` and (when `RUNCORE_PG_URL` is set) `--store postgresql://…`.
//! 2. **Fork**: `runcore fork t --at V --to NEW --store sqlite:…` on a thread of a little
//!    more than V commits (a w1 session committed straight into SQLite beforehand: the prompt
//!    is version 1, then each step commits its answer, an even version, whose call is still
//!    without its result, and its result, an odd one; so V is odd, the first complete version
//!    from 50,000), timed from the start of the process to its exit.
//!
//! Each figure is the best of 3 and one JSON line. `RUNCORE_BIN=PATH` times another build of
//! the binary (e.g. the one before a change) with the same inputs.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use runcore::host::script::{self, ModelTurn, Script, ServeError, Stop};
use runcore::store::CommitLog;
use runcore::{
    Agent, AgentConfig, AssistantMessage, ModelRequest, Output, RunId, ToolCall, ToolOutput,
    UserMessage,
};
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use serde_json::{Value, json};

/// The `runcore` binary: `RUNCORE_BIN` when set (to time two builds side by side), else the
/// one this package builds.
fn runcore() -> String {
    std::env::var("RUNCORE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_runcore").to_owned())
}

/// One `import` line of `n` messages: user, assistant (text and one `echo` call), tool result,
/// and again (a complete transcript).
fn import_line(n: usize) -> String {
    let text = "d".repeat(100);
    let messages: Vec<Value> = (0..n)
        .map(|i| match i % 3 {
            0 => json!({"role":"user","content":[{"type":"text","text":format!("question {i}")}]}),
            1 => json!({"role":"assistant","content":[{"type":"text","text":text},
                        {"type":"tool_call","id":format!("c{i}"),"name":"echo","arguments":{"i":i}}],
                        "stop_reason":"tool_use"}),
            _ => json!({"role":"tool_result","call_id":format!("c{}", i - 1),"tool_name":"echo",
                        "content":[{"type":"text","text":"ok"}],"is_error":false,"outcome":"executed"}),
        })
        .collect();
    json!({"type":"import","messages":messages}).to_string()
}

/// Runs `runcore drive ARGS`, writes `line`, reads up to the `idle` of line 1; the seconds from
/// the start of the process to that `idle`, and the bytes read.
fn drive_once(args: &[&str], line: &str) -> (f64, usize) {
    let start = Instant::now();
    let mut child = Command::new(runcore())
        .arg("drive")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn runcore drive");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
    // The line is written from another thread, so a driver that writes while it reads never
    // blocks on a full pipe.
    let writer = {
        let line = line.to_owned();
        std::thread::spawn(move || {
            stdin.write_all(line.as_bytes()).expect("write");
            stdin.write_all(b"\n").expect("write");
            stdin
        })
    };
    let mut bytes = 0;
    let mut text = String::new();
    loop {
        text.clear();
        let n = stdout.read_line(&mut text).expect("read");
        assert!(n > 0, "the driver ended early");
        bytes += n;
        assert!(
            !text.starts_with(r#"{"type":"error""#),
            "the driver wrote an error: {text}"
        );
        if text.starts_with(r#"{"type":"idle","line":1"#) {
            break;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    drop(writer.join().expect("writer"));
    assert!(child.wait().expect("wait").success());
    (elapsed, bytes)
}

/// Times an import of `line` (best of 3); `store(round)` gives each round its store URL and
/// thread (a new thread each round), `None` for no store.
fn time_import(
    label: &str,
    n: usize,
    line: &str,
    store: impl Fn(usize) -> Option<(String, String)>,
) {
    let mut best = f64::MAX;
    let mut bytes = 0;
    for round in 0..3 {
        let url = store(round);
        let args: Vec<&str> = match &url {
            Some((url, thread)) => vec!["--store", url, "--thread", thread],
            None => Vec::new(),
        };
        let (seconds, read) = drive_once(&args, line);
        best = best.min(seconds);
        bytes = read;
    }
    println!(
        "{{\"bench\":\"import\",\"store\":\"{label}\",\"messages\":{n},\"best_of_3_ms\":{:.1},\"bytes_out\":{bytes}}}",
        best * 1000.0
    );
}

/// w1's session: each model call answers 1 KB of text and one `echo` call, until the thread
/// holds `messages - 1` messages; then "done".
struct W1 {
    messages: usize,
    text: String,
}

impl Script for W1 {
    fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn {
        if request.context().count() >= self.messages.saturating_sub(1) {
            return ModelTurn::answer(AssistantMessage::text("done"));
        }
        ModelTurn::answer(AssistantMessage::new(
            vec![
                runcore::AssistantBlock::text(self.text.clone()),
                runcore::AssistantBlock::tool_call(
                    format!("call-{}", request.step).as_str(),
                    "echo",
                    json!({ "i": request.step }),
                ),
            ],
            runcore::StopReason::ToolUse,
        ))
    }

    fn tool(&mut self, _run_id: &RunId, call: &ToolCall) -> ToolOutput {
        ToolOutput::text(call.id.clone(), "t".repeat(100))
    }
}

/// A w1 session of about `messages` messages (two commits per step) on thread `t`, committed
/// straight into SQLite; returns the thread's version.
fn build_thread(path: &Path, messages: usize) -> u64 {
    let mut store = SqliteStore::open(
        path,
        SqliteOptions::default().with_synchronous(Synchronous::Normal),
    )
    .expect("open");
    let config = AgentConfig {
        max_steps: messages as u32 + 10,
        ..AgentConfig::for_thread("t")
    };
    let mut agent = Agent::new(config).expect("config");
    let mut session = W1 {
        messages,
        text: "d".repeat(1000),
    };
    let mut version = 0;
    let mut sink = |_: &Agent, output: &Output| -> Result<(), runcore::store::StoreError> {
        if let Output::Commit(commit) = output {
            store.commit_operation(commit.as_ref().clone().into_operation())?;
            version += 1;
        }
        Ok(())
    };
    agent.prompt(UserMessage::text("go"), 0).expect("prompt");
    match script::serve(&mut agent, &mut session, &mut sink) {
        Ok(Stop::Idle) => {}
        Err(ServeError::Sink(error)) => panic!("the store refused a commit: {error}"),
        other => panic!("the w1 session did not build: {other:?}"),
    }
    version
}

fn time_fork(dir: &Path, at: u64) {
    let path = dir.join("fork.db");
    // A commit per message after the prompt: a thread of `at + 100` messages is past `at`.
    let version = build_thread(&path, at as usize + 100);
    assert!(
        version >= at,
        "the thread has {version} commits, fewer than {at}"
    );
    let url = format!("sqlite:{}", path.display());
    let mut best = f64::MAX;
    for round in 0..3 {
        let start = Instant::now();
        let out = Command::new(runcore())
            .args([
                "fork",
                "t",
                "--at",
                &at.to_string(),
                "--to",
                &format!("fork-{round}"),
                "--store",
                &url,
            ])
            .output()
            .expect("fork");
        best = best.min(start.elapsed().as_secs_f64());
        assert!(
            out.status.success(),
            "fork failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    println!(
        "{{\"bench\":\"fork\",\"store\":\"sqlite\",\"at_version\":{at},\"parent_version\":{version},\"best_of_3_ms\":{:.1}}}",
        best * 1000.0
    );
}

fn main() {
    // `cargo bench` passes `--bench`; the figures come from the arguments after it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let messages: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    // Odd: a complete version of a w1 thread (see the module docs).
    let at: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(50_001);
    let temp = tempfile::Builder::new()
        .prefix("runcore-bench-")
        .tempdir()
        .expect("temp dir");
    let dir = temp.path();
    let line = import_line(messages);
    time_import("memory", messages, &line, |_| None);
    time_import("sqlite", messages, &line, |round| {
        let path = dir.join(format!("import-{round}.db"));
        Some((format!("sqlite:{}", path.display()), "imported".to_owned()))
    });
    if let Ok(url) = std::env::var("RUNCORE_PG_URL") {
        // A thread of its own per round and per run (the database may hold earlier ones).
        let pid = std::process::id();
        time_import("postgres", messages, &line, |round| {
            Some((url.clone(), format!("imported-{pid}-{round}")))
        });
    }
    time_fork(dir, at);
}
