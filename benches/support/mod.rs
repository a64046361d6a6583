//! A tiny timing harness for the benchmarks (no benchmark dependency): run a closure several
//! times, keep the fastest and the median, print a readable line.
#![allow(dead_code)]

pub mod workloads;

use std::time::{Duration, Instant};

/// Times `f` `rounds` times; returns (min, median).
pub fn time<T>(rounds: usize, mut f: impl FnMut() -> T) -> (Duration, Duration) {
    let mut samples: Vec<Duration> = (0..rounds.max(1))
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(f());
            start.elapsed()
        })
        .collect();
    samples.sort();
    (samples[0], samples[samples.len() / 2])
}

/// Formats a duration per item.
pub fn per_item(total: Duration, items: usize) -> String {
    let ns = total.as_nanos() as f64 / items.max(1) as f64;
    if ns >= 1_000_000.0 {
        format!("{:.3} ms", ns / 1_000_000.0)
    } else if ns >= 1_000.0 {
        format!("{:.3} µs", ns / 1_000.0)
    } else {
        format!("{ns:.1} ns")
    }
}

/// Prints one result line.
pub fn report(name: &str, detail: impl std::fmt::Display) {
    println!("{name:<58} {detail}");
}
