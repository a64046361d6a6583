//! The agent loop's cost does not grow with the transcript.
//!
//! - per-step time of a long run (w1 shape) at N = 1,000 and N = 10,000 steps, and per-run time
//!   of many short runs (w2 shape), with their growth ratios;
//! - a reducer text-delta event on a state with 10 versus 100,000 messages.
//!
//! Run with `cargo bench --bench agent`.

mod support;

use runcore::{AgentEvent, AgentState, LoopEvent, Message, reduce};
use support::workloads::{long_run, many_runs};
use support::{per_item, report, time};

fn reducer_delta(messages: usize, events: usize) -> std::time::Duration {
    let mut state = AgentState::with_messages(vec![Message::user("x"); messages]);
    state = reduce(
        state,
        &AgentEvent::RunStart {
            run_id: "r".into(),
            message: Some(Message::user("go")),
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
