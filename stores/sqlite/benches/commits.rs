//! Commit throughput and recovery time: SQLite at FULL and at NORMAL beside `MemoryStore`.
//!
//! - **Commits per second** with a realistic commit: one assistant message of about 1 KB
//!   and three audit drafts (`run_state_changed` plus two of the host's own), applied with
//!   `commit_operation` (fenced, idempotent) as an agent's host does. Operations are built
//!   (and hashed) before the clock starts: hashing is the core's cost, the same for every
//!   backend. Each round starts from a fresh store; the median of the rounds is reported.
//! - **Recovery** (`Agent::recover`, Replay) of a thread of 100,000 messages (50,000 runs
//!   of a prompt and an answer), from SQLite (a freshly opened connection) and from
//!   `MemoryStore`; the median of 5 rounds.
//!
//! Figures on the 2-core development machine (release; load average 3–5 from other builds,
//! which moves them by ±20%): MemoryStore 32,000–73,000 commits/s; SQLite NORMAL 4,600–6,200;
//! SQLite FULL 180–1,000 (one WAL sync per commit: the disk decides); recovery of 100,000
//! messages 230–300 ms from MemoryStore, 390–560 ms from SQLite (opening with `quick_check`
//! adds 120–180 ms for the 56 MB file). About a fifth of a SQLite commit's CPU is the core's
//! SHA-256 of the chained transcript digest, the same cost MemoryStore pays.
//!
//! Run with `cargo bench -p runcore-sqlite --bench commits` (a release build; add
//! `-- throughput` for the first part only). It takes about a minute on a 2-core machine,
//! most of it filling the 100,000-message thread.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use runcore::host::script::{self, ModelOnly, ModelTurn};
use runcore::store::{CommitLog, MemoryStore, StoreError};
use runcore::{
    Agent, AgentConfig, AssistantMessage, AuditDraft, CommitOperation, Message, ModelRequest,
    Output, RecoveryPolicy, RunDisposition, ThreadCommit, ThreadId, UserMessage,
};
use runcore_sqlite::{OpenCheck, SqliteOptions, SqliteStore, Synchronous};
use serde_json::json;
use tempfile::TempDir;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// About 1 KB of assistant text.
fn kilobyte(i: usize) -> String {
    let mut text = format!("Step {i}: ");
    while text.len() < 1024 {
        text.push_str("the quick brown fox jumps over the lazy dog; ");
    }
    text.truncate(1024);
    text
}

/// `n` realistic commits of one run on `thread`, as fenced operations.
fn operations(thread: &str, n: usize) -> Vec<CommitOperation> {
    let run = format!("{thread}/run-1");
    (0..n)
        .map(|i| {
            let commit = ThreadCommit::assemble(
                ThreadId::new(thread),
                RunDisposition::Running {
                    run_id: run.as_str().into(),
                },
                true,
                vec![Message::from(AssistantMessage::text(kilobyte(i)))],
                vec![],
                vec![
                    AuditDraft::new(
                        "model_usage",
                        json!({"step": i, "input_tokens": 1200 + i, "output_tokens": 256}),
                    ),
                    AuditDraft::new("step_finished", json!({"step": i, "now_ms": i * 1000})),
                ],
            );
            CommitOperation::new(commit, i as u64, i as u64)
        })
        .collect()
}

/// Commits per second of `store`, committing `ops` one by one.
fn throughput<S: CommitLog>(store: &mut S, ops: Vec<CommitOperation>) -> (Duration, usize) {
    let n = ops.len();
    let started = Instant::now();
    for op in ops {
        store.commit_operation(op).expect("a benchmark commit");
    }
    (started.elapsed(), n)
}

fn rate((elapsed, n): (Duration, usize)) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

fn sqlite_rounds(dir: &TempDir, level: Synchronous, commits: usize, rounds: usize) -> f64 {
    let mut rates = Vec::new();
    for round in 0..rounds {
        let path = dir
            .path()
            .join(format!("throughput-{level:?}-{round}.sqlite"));
        let mut store = SqliteStore::open(&path, SqliteOptions::default().with_synchronous(level))
            .expect("a fresh store");
        let ops = operations("bench", commits);
        rates.push(rate(throughput(&mut store, ops)));
    }
    median_rate(rates)
}

fn median_rate(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates.get(rates.len() / 2).copied().unwrap_or_default()
}

/// The operations of a thread of `runs` runs (a prompt and an answer each): 2 commits and 2
/// messages per run, as the agent emits them.
fn long_thread(thread: &str, runs: usize) -> Vec<CommitOperation> {
    let mut agent = Agent::new(AgentConfig::for_thread(thread)).expect("a valid config");
    let mut ops = Vec::with_capacity(runs * 2);
    let mut run_commits = 0u64;
    for i in 0..runs {
        agent
            .prompt(UserMessage::text(format!("question {i}")), i as u64)
            .expect("idle");
        run_commits = 0;
        let mut collect = |_: &Agent, output: &Output| {
            if let Output::Commit(commit) = output {
                let version = ops.len() as u64;
                ops.push(CommitOperation::new(
                    commit.commit.clone(),
                    run_commits,
                    version,
                ));
                run_commits += 1;
            }
            Ok::<(), Infallible>(())
        };
        let mut answer = ModelOnly(|_: &ModelRequest<'_>| {
            ModelTurn::answer(AssistantMessage::text(format!("answer {i}")))
        });
        script::serve(&mut agent, &mut answer, &mut collect).expect("served");
    }
    debug_assert!(run_commits > 0);
    ops
}

fn fill<S: CommitLog>(store: &mut S, ops: &[CommitOperation]) -> Result<Duration, StoreError> {
    let started = Instant::now();
    for op in ops {
        store.commit_operation(op.clone())?;
    }
    Ok(started.elapsed())
}

fn main() {
    let dir =
        TempDir::with_prefix_in("sqlite-bench-", env!("CARGO_TARGET_TMPDIR")).expect("a temp dir");

    println!("commits/s, one 1 KB assistant message + 3 audit drafts per commit (median)");
    let memory = {
        let mut rates = Vec::new();
        for _ in 0..5 {
            let mut store = MemoryStore::new();
            rates.push(rate(throughput(&mut store, operations("bench", 20_000))));
        }
        median_rate(rates)
    };
    let normal = sqlite_rounds(&dir, Synchronous::Normal, 10_000, 5);
    let full = sqlite_rounds(&dir, Synchronous::Full, 1_000, 3);
    let in_memory = {
        let mut rates = Vec::new();
        for _ in 0..3 {
            let mut store = SqliteStore::open_in_memory().expect("an in-memory store");
            rates.push(rate(throughput(&mut store, operations("bench", 10_000))));
        }
        median_rate(rates)
    };
    println!("  {:<44} {:>10.0}", "MemoryStore", memory);
    println!(
        "  {:<44} {:>10.0}",
        "SQLite file, synchronous = NORMAL", normal
    );
    println!("  {:<44} {:>10.0}", "SQLite file, synchronous = FULL", full);
    println!("  {:<44} {:>10.0}", "SQLite in memory (memdb)", in_memory);

    if std::env::args().any(|a| a == "throughput") {
        return;
    }
    println!("\nrecovery of a thread of 100,000 messages (Agent::recover, Replay; median of 5)");
    let thread = ThreadId::new("big");
    let ops = long_thread("big", 50_000);
    let mut memory_store = MemoryStore::new();
    fill(&mut memory_store, &ops).expect("fill MemoryStore");
    let path = dir.path().join("recovery.sqlite");
    let normal_options = SqliteOptions::default().with_synchronous(Synchronous::Normal);
    let filled = {
        let mut store = SqliteStore::open(&path, normal_options.clone()).expect("a fresh store");
        fill(&mut store, &ops).expect("fill SQLite")
    };
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "  (filled SQLite with {} commits at NORMAL in {filled:.1?}: {:.0} commits/s; file {:.1} MB)",
        ops.len(),
        ops.len() as f64 / filled.as_secs_f64(),
        size as f64 / 1e6
    );
    let config = AgentConfig::for_thread("big");
    let recover = |reader: &dyn Fn() -> Duration| median((0..5).map(|_| reader()).collect());
    let memory_time = recover(&|| {
        let started = Instant::now();
        let agent = Agent::recover(
            config.clone(),
            &memory_store,
            &thread,
            RecoveryPolicy::Replay,
        )
        .expect("recovers");
        assert_eq!(agent.transcript().len(), 100_000);
        started.elapsed()
    });
    let sqlite_time = recover(&|| {
        let store = SqliteStore::open(
            &path,
            normal_options.clone().with_check(OpenCheck::SchemaOnly),
        )
        .expect("reopens");
        let started = Instant::now();
        let agent = Agent::recover(config.clone(), &store, &thread, RecoveryPolicy::Replay)
            .expect("recovers");
        assert_eq!(agent.transcript().len(), 100_000);
        started.elapsed()
    });
    let open_quick = median(
        (0..5)
            .map(|_| {
                let started = Instant::now();
                let store = SqliteStore::open(&path, normal_options.clone()).expect("reopens");
                drop(store);
                started.elapsed()
            })
            .collect(),
    );
    println!("  {:<44} {:>10.1?}", "MemoryStore", memory_time);
    println!(
        "  {:<44} {:>10.1?}",
        "SQLite (fresh connection)", sqlite_time
    );
    println!(
        "  {:<44} {:>10.1?}",
        "SQLite open with quick_check (this file)", open_quick
    );
}
