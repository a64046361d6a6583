//! How `MemoryStore` scales: per-commit time early versus late as the store grows, and
//! per-page time early versus late when paging through a million events.
//!
//! A tiny harness on `std::time::Instant` (no benchmark dependency): every operation is timed
//! on its own, and the first and last 10% are compared. A late/early ratio near 1 means the
//! cost does not grow with the store; anything that scans history shows up as a ratio in the
//! tens or hundreds.
//!
//! Run with `cargo bench --bench store`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use runcore::store::{CheckpointReader, CommitLog, EventScope, MemoryStore};
use runcore::{
    AuditDraft, CommitOperation, Message, RunDisposition, RunId, ThreadCommit, ThreadId,
};
use serde_json::json;

const COMMITS: usize = 100_000;
const EVENTS: usize = 1_000_000;
const PAGE: usize = 100;

/// One Running progress commit: one small user message, the lifecycle draft on a run's first
/// commit, and one progress draft.
fn progress_commit(thread: &ThreadId, run: &RunId, step: usize, drafts: usize) -> ThreadCommit {
    ThreadCommit::assemble(
        thread.clone(),
        RunDisposition::Running {
            run_id: run.clone(),
        },
        step == 0,
        vec![Message::user(format!("step {step}"))],
        vec![],
        (0..drafts)
            .map(|i| AuditDraft::new("model_progress", json!({ "step": step, "i": i })))
            .collect(),
    )
}

/// Per-operation durations of one scenario.
struct Samples {
    name: String,
    unit: &'static str,
    durations: Vec<Duration>,
}

impl Samples {
    fn window(&self, early: bool) -> &[Duration] {
        let tenth = (self.durations.len() / 10).max(1);
        if early {
            &self.durations[..tenth]
        } else {
            &self.durations[self.durations.len() - tenth..]
        }
    }

    fn mean_ns(window: &[Duration]) -> f64 {
        window.iter().map(Duration::as_nanos).sum::<u128>() as f64 / window.len() as f64
    }

    fn percentile_ns(window: &[Duration], p: f64) -> f64 {
        let mut sorted: Vec<u128> = window.iter().map(Duration::as_nanos).collect();
        sorted.sort_unstable();
        let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[index] as f64
    }
}

fn format_ns(ns: f64) -> String {
    if ns >= 1_000_000.0 {
        format!("{:.2} ms", ns / 1_000_000.0)
    } else if ns >= 1_000.0 {
        format!("{:.2} µs", ns / 1_000.0)
    } else {
        format!("{ns:.0} ns")
    }
}

fn print_table(rows: &[Samples]) {
    println!();
    println!(
        "{:<44} {:>7} {:>11} {:>11} {:>10} {:>11} {:>11} {:>11} {:>11}",
        "scenario",
        "n",
        "early mean",
        "late mean",
        "late/early",
        "early p50",
        "late p50",
        "late p99",
        "late max"
    );
    println!("{}", "-".repeat(136));
    for row in rows {
        let early = row.window(true);
        let late = row.window(false);
        let (early_mean, late_mean) = (Samples::mean_ns(early), Samples::mean_ns(late));
        println!(
            "{:<44} {:>7} {:>11} {:>11} {:>9.2}x {:>11} {:>11} {:>11} {:>11}",
            format!("{} (per {})", row.name, row.unit),
            row.durations.len(),
            format_ns(early_mean),
            format_ns(late_mean),
            late_mean / early_mean,
            format_ns(Samples::percentile_ns(early, 0.5)),
            format_ns(Samples::percentile_ns(late, 0.5)),
            format_ns(Samples::percentile_ns(late, 0.99)),
            format_ns(Samples::percentile_ns(late, 1.0)),
        );
    }
    println!();
    println!("early = first 10% of operations, late = last 10%; the store grows between them.");
    println!("A late/early ratio near 1 means the cost does not grow with the store.");
}

/// Commits `COMMITS` progress commits spread round-robin over `threads` threads (one run per
/// thread), timing each commit alone; building the commit is not timed. With `idempotent`,
/// each goes through `commit_operation` with its ordinal and expected version.
fn bench_commits(threads: usize, idempotent: bool) -> Samples {
    let ids: Vec<(ThreadId, RunId)> = (0..threads)
        .map(|t| {
            let thread = ThreadId::new(format!("thread-{t}"));
            let run = RunId::new(format!("thread-{t}/run-1"));
            (thread, run)
        })
        .collect();
    let mut store = MemoryStore::new();
    let mut durations = Vec::with_capacity(COMMITS);
    for i in 0..COMMITS {
        let (thread, run) = &ids[i % threads];
        let step = i / threads;
        let commit = progress_commit(thread, run, step, 1);
        let accepted = if idempotent {
            let operation = CommitOperation::new(commit, step as u64, step as u64);
            let start = Instant::now();
            let receipt = store.commit_operation(operation);
            durations.push(start.elapsed());
            black_box(receipt).is_ok()
        } else {
            let start = Instant::now();
            let record = store.commit(commit);
            durations.push(start.elapsed());
            black_box(record).is_ok()
        };
        assert!(accepted);
    }
    assert_eq!(store.last_sequence(), COMMITS as u64);
    let how = if idempotent {
        "commit_operation"
    } else {
        "commit"
    };
    let on = if threads == 1 {
        "1 thread".to_owned()
    } else {
        format!("{threads} threads")
    };
    Samples {
        name: format!("{how}, {on}"),
        unit: "commit",
        durations,
    }
}

/// Pages through every event of `scope` with pages of `PAGE`, timing each page alone.
fn bench_paging(store: &MemoryStore, scope: EventScope, label: &str) -> Samples {
    let mut durations = Vec::with_capacity(EVENTS / PAGE + 1);
    let mut from = None;
    let mut seen = 0usize;
    loop {
        let start = Instant::now();
        let page = store.list_events(&scope, from, PAGE).unwrap();
        durations.push(start.elapsed());
        let Some(last) = page.last() else { break };
        from = Some(last.sequence);
        seen += page.len();
        black_box(page);
    }
    durations.pop(); // the final empty page says nothing about position in the log
    assert_eq!(seen, EVENTS, "{label}");
    Samples {
        name: format!("page {label}, {PAGE}/page"),
        unit: "page",
        durations,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too, so keep it quick
    // there by doing nothing unless benchmarking was asked for.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let mut rows = vec![
        bench_commits(1, false),
        bench_commits(1_000, false),
        bench_commits(1_000, true),
    ];

    // 1,000,000 events on one thread (100,000 commits × 10 drafts, a new run every 100
    // commits), so both the All and the Thread scope walk all of them.
    let thread = ThreadId::new("big");
    let mut store = MemoryStore::new();
    for i in 0..EVENTS / 10 {
        let run = RunId::new(format!("big/run-{}", i / 100));
        let commit = ThreadCommit::assemble(
            thread.clone(),
            RunDisposition::Running { run_id: run },
            false,
            vec![],
            vec![],
            (0..10)
                .map(|d| AuditDraft::new("model_progress", json!({ "commit": i, "draft": d })))
                .collect(),
        );
        store.commit(commit).expect("accepted");
    }
    assert_eq!(store.event_count(), EVENTS);
    rows.push(bench_paging(&store, EventScope::All, "All"));
    rows.push(bench_paging(&store, EventScope::Thread(thread), "Thread"));
    print_table(&rows);
}
