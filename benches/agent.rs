//! The agent loop's cost does not grow with the transcript.
//!
//! - per-step time of a long run (w1 shape) at N = 1,000 and N = 10,000 steps, and per-run time
//!   of many short runs (w2 shape), with their growth ratios;
//! - a reducer text-delta event on a state with 10 versus 100,000 messages;
//! - w1 and w2 at N = 10,000 side by side with their append-only floors (`floor_long_run`,
//!   `floor_many_runs`: the same messages, nothing else), interleaved in one run, as a ratio
//!   (issue target: <= 3x in instructions; count those with `scripts/count-instructions.sh`,
//!   callgrind on `examples/workloads.rs`, as the wall-time ratio on a shared machine is only
//!   indicative);
//! - the payload hash's canonical JSON of a commit carrying a 1,000-byte answer, written
//!   straight from the commit (`ThreadCommit::canonical_json`) against the old way, through a
//!   `serde_json::Value`, interleaved.
//!
//! Run with `cargo bench --bench agent`.

mod support;

use runcore::store::canonical_json;
use runcore::{
    AgentEvent, AgentState, AssistantMessage, AuditDraft, EndCause, LoopEvent, Message,
    RunDisposition, ThreadCommit, reduce,
};
use support::workloads::{floor_long_run, floor_many_runs, long_run, many_runs};
use support::{per_item, report, time};

fn reducer_delta(messages: usize, events: usize) -> std::time::Duration {
    let mut state = AgentState::with_messages(vec![Message::user("x"); messages]);
    state = reduce(
        state,
        &AgentEvent::RunStart {
            run_id: "r".into(),
            message: Some(Message::user("go")),
            messages: Vec::new(),
        },
    );
    let delta = AgentEvent::Loop {
        run_id: "r".into(),
        event: LoopEvent::TextDelta {
            step: 1,
            text: "abcd".into(),
        },
    };
    let start = std::time::Instant::now();
    for _ in 0..events {
        state = reduce(state, &delta);
    }
    let elapsed = start.elapsed();
    std::hint::black_box(state);
    elapsed
}

fn main() {
    println!("agent loop (min of 5 rounds)");
    let (small, _) = time(5, || long_run(1_000));
    let (large, _) = time(5, || long_run(10_000));
    report("w1 long run, N = 1,000: per step", per_item(small, 1_000));
    report("w1 long run, N = 10,000: per step", per_item(large, 10_000));
    report(
        "w1 time(10,000) / time(1,000)  (target <= 14)",
        format!("{:.2}", large.as_secs_f64() / small.as_secs_f64()),
    );
    let (small, _) = time(5, || many_runs(1_000));
    let (large, _) = time(5, || many_runs(10_000));
    report("w2 many runs, N = 1,000: per run", per_item(small, 1_000));
    report("w2 many runs, N = 10,000: per run", per_item(large, 10_000));
    report(
        "w2 time(10,000) / time(1,000)  (target <= 14)",
        format!("{:.2}", large.as_secs_f64() / small.as_secs_f64()),
    );

    println!("\nthe core against its floor, N = 10,000 (min of 5 interleaved rounds)");
    let n = 10_000;
    for (name, core, floor) in [
        (
            "w1",
            long_run as fn(u32) -> u32,
            floor_long_run as fn(u32) -> u32,
        ),
        ("w2", many_runs, floor_many_runs),
    ] {
        let (mut best_core, mut best_floor) = (None, None);
        for _ in 0..5 {
            let (c, _) = time(1, || core(n));
            let (f, _) = time(1, || floor(n));
            best_core = Some(best_core.map_or(c, |b: std::time::Duration| b.min(c)));
            best_floor = Some(best_floor.map_or(f, |b: std::time::Duration| b.min(f)));
        }
        let (c, f) = (
            best_core.unwrap_or_default(),
            best_floor.unwrap_or_default(),
        );
        report(
            &format!("{name} runcore: per item"),
            per_item(c, n as usize),
        );
        report(&format!("{name} floor: per item"), per_item(f, n as usize));
        report(
            &format!("{name} runcore / floor (wall)"),
            format!("{:.2}", c.as_secs_f64() / f.as_secs_f64().max(1e-9)),
        );
    }

    println!("\ncommit canonical JSON, 1,000-byte answer (min of 5 interleaved rounds of 10,000)");
    let commit = ThreadCommit::assemble(
        "thread-1".into(),
        RunDisposition::Ended {
            run_id: "thread-1/run-1".into(),
            cause: EndCause::NaturalEnd,
        },
        true,
        vec![Message::from(AssistantMessage::text("a".repeat(1000)))],
        vec![],
        vec![AuditDraft::new(
            "note",
            serde_json::json!({"b": 1, "a": [true, null]}),
        )],
    );
    assert_eq!(
        commit.canonical_json(),
        canonical_json(&serde_json::to_value(&commit).expect("serializes"))
    );
    let rounds = 10_000;
    let (mut best_direct, mut best_value) = (None, None);
    for _ in 0..5 {
        let (d, _) = time(1, || {
            (0..rounds)
                .map(|_| commit.canonical_json().len())
                .sum::<usize>()
        });
        let (v, _) = time(1, || {
            (0..rounds)
                .map(|_| canonical_json(&serde_json::to_value(&commit).unwrap_or_default()).len())
                .sum::<usize>()
        });
        best_direct = Some(best_direct.map_or(d, |b: std::time::Duration| b.min(d)));
        best_value = Some(best_value.map_or(v, |b: std::time::Duration| b.min(v)));
    }
    let (d, v) = (
        best_direct.unwrap_or_default(),
        best_value.unwrap_or_default(),
    );
    report("written straight from the commit", per_item(d, rounds));
    report("through a serde_json::Value", per_item(v, rounds));
    report(
        "through a Value / straight",
        format!("{:.2}", v.as_secs_f64() / d.as_secs_f64().max(1e-9)),
    );

    println!("\nreducer text delta (min of 5 rounds of 100,000 events)");
    let events = 100_000;
    // Only the reductions are timed (building the 100,000-message state is not).
    let fastest = |messages| {
        (0..5)
            .map(|_| reducer_delta(messages, events))
            .min()
            .unwrap_or_default()
    };
    let small = fastest(10);
    let large = fastest(100_000);
    report(
        "text delta, state with 10 messages",
        per_item(small, events),
    );
    report(
        "text delta, state with 100,000 messages",
        per_item(large, events),
    );
    report(
        "ratio 100,000 / 10  (target <= 1.5)",
        format!("{:.2}", large.as_secs_f64() / small.as_secs_f64()),
    );
}
