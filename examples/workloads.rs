//! Two workloads for comparing runcore with other agent libraries.
//!
//! ```sh
//! cargo run --release --example workloads -- w1 10000
//! cargo run --release --example workloads -- w2 10000
//! cargo run --release --example workloads -- floor-w1 10000
//! cargo run --release --example workloads -- floor-w2 10000
//! ```
//!
//! Each prints one JSON line:
//! `{"peer":"runcore"|"floor","workload","param","wall_ms","per_item_us","peak_rss_kb"}`.
//!
//! - **w1 (long run)**: one prompt; the scripted model answers N−1 times with 20 text deltas of
//!   50 bytes, then an assistant message with that text and one `echo` tool call `{"i": n}`;
//!   the tool returns a 100-byte text; then a final text-only answer (max_steps = N). Items are
//!   steps (model calls).
//! - **w2 (many runs)**: N sequential prompts on one agent, each answered by one text-only
//!   assistant message of 1000 bytes. Items are runs.
//!
//! - **floor-w1 / floor-w2**: the same messages appended to a plain `Vec<Message>` and the
//!   same calls answered, and nothing else (no events, commits or checks): the floor the
//!   core's cost is measured against, in the same run.
//!
//! The host is `runcore::host::script::serve` with a sink that drops every output, as a host that
//! forwards them elsewhere would, so the figures are the core's own cost plus the scripted
//! host's.
//!
//! Instructions, which do not depend on the machine's load, are counted by
//! `scripts/count-instructions.sh [N]` (callgrind, the workload function only): it prints all
//! four workloads per item and each one's ratio to its floor.

use std::time::Instant;

#[path = "../benches/support/workloads.rs"]
mod workloads;

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
        "w1" => workloads::long_run(n),
        "w2" => workloads::many_runs(n),
        "floor-w1" => workloads::floor_long_run(n),
        "floor-w2" => workloads::floor_many_runs(n),
        _ => usage(),
    };
    let wall = start.elapsed();
    let peer = if workload.starts_with("floor-") {
        "floor"
    } else {
        "runcore"
    };
    let wall_ms = wall.as_secs_f64() * 1000.0;
    let per_item_us = wall.as_secs_f64() * 1e6 / f64::from(items);
    // Fields in the documented order (a JSON object built with serde_json would sort them).
    let line = format!(
        "{{\"peer\":\"{peer}\",\"workload\":\"{workload}\",\"param\":{n},\"wall_ms\":{wall_ms:.3},\"per_item_us\":{per_item_us:.3},\"peak_rss_kb\":{}}}",
        peak_rss_kb()
    );
    println!("{line}");
}

fn usage() -> ! {
    eprintln!("usage: workloads <w1|w2|floor-w1|floor-w2> <N>   (N >= 1)");
    std::process::exit(2);
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
