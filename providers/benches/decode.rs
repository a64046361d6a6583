//! Decode throughput on the recorded streams, against a floor that does the least any decoder
//! must: split the body into lines and parse each `data:` payload with serde_json.
//!
//! Run with `cargo bench -p runcore-providers --bench decode`. Prints MB/s per API for the
//! decoder (whole body, and fed in 64-byte chunks) and for the floor, and the ratio.

use std::time::{Duration, Instant};

use runcore_providers::Api;
use serde_json::Value;

/// Times `f` `rounds` times; the fastest run.
fn fastest<T>(rounds: usize, mut f: impl FnMut() -> T) -> Duration {
    (0..rounds)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(f());
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn bodies(api: Api) -> Vec<String> {
    let path = format!(
        "{}/tests/fixtures/{}.jsonl",
        env!("CARGO_MANIFEST_DIR"),
        api.name()
    );
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|row| {
            row["content_type"]
                .as_str()
                .is_some_and(|t| t.starts_with("text/event-stream"))
        })
        .filter_map(|row| row["response"].as_str().map(str::to_owned))
        .collect()
}

fn decode(api: Api, bodies: &[String], chunk: usize) -> usize {
    let mut inputs = 0;
    for body in bodies {
        let mut decoder = api.decoder("run", 1, 200);
        for piece in body.as_bytes().chunks(chunk) {
            inputs += decoder.feed(piece).len();
        }
        inputs += decoder.finish_with_report().0.len();
    }
    inputs
}

fn floor(bodies: &[String]) -> usize {
    let mut values = 0;
    for body in bodies {
        for line in body.lines() {
            if let Some(data) = line.strip_prefix("data: ") {
                values += usize::from(serde_json::from_str::<Value>(data).is_ok());
            }
        }
    }
    values
}

fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64().max(1e-9) / 1_000_000.0
}

fn main() {
    for api in Api::ALL {
        let bodies = bodies(api);
        let bytes: usize = bodies.iter().map(String::len).sum();
        let whole = fastest(10, || decode(api, &bodies, usize::MAX));
        let chunked = fastest(10, || decode(api, &bodies, 64));
        let base = fastest(10, || floor(&bodies));
        println!(
            "{:<18} {:>4} bodies {:>8} bytes  decoder {:>7.1} MB/s  (64-byte chunks {:>7.1} MB/s)  floor {:>7.1} MB/s  decoder/floor time {:.2}x",
            api.name(),
            bodies.len(),
            bytes,
            mb_per_s(bytes, whole),
            mb_per_s(bytes, chunked),
            mb_per_s(bytes, base),
            whole.as_secs_f64() / base.as_secs_f64().max(1e-9),
        );
    }
}
