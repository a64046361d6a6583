//! Driver throughput: JSON lines in, JSON lines out, compared with driving the library directly.
//!
//! - a stream of `model_delta` lines (lines per second);
//! - a w1-style session (one long run: 20 deltas, then a tool call, then the tool's result, per
//!   step) through the driver versus through the library, per step.
//!
//! Run with `cargo bench --bench driver`.

mod support;

use runcore::driver::Driver;
use support::workloads::long_run;
use support::{per_item, report, time};

const STEPS: u32 = 2_000;

fn delta_stream(lines: usize) -> usize {
    let mut driver = Driver::new();
    let mut written = 0;
    driver.handle_line(br#"{"type":"prompt","text":"stream please"}"#);
    let line = br#"{"type":"model_delta","run_id":"thread-1/run-1","step":1,"text":"0123456789012345678901234567890123456789012345678"}"#;
    for _ in 0..lines {
        written += driver.handle_line(line).len();
    }
    written
}

fn session_through_driver(steps: u32) -> usize {
    let mut driver = Driver::new();
    let mut written = 0;
    let config = format!(r#"{{"type":"config","max_steps":{steps},"context":"delta"}}"#);
    written += driver.handle_line(config.as_bytes()).len();
    written += driver
        .handle_line(br#"{"type":"prompt","text":"go"}"#)
        .len();
    let delta = "d".repeat(50);
    let text = delta.repeat(20);
    let tool_text = "t".repeat(100);
    for step in 1..=steps {
        let run = "thread-1/run-1";
        if step < steps {
            let delta_line = format!(
                r#"{{"type":"model_delta","run_id":"{run}","step":{step},"text":"{delta}"}}"#
            );
            for _ in 0..20 {
                written += driver.handle_line(delta_line.as_bytes()).len();
            }
            let done = format!(
                r#"{{"type":"model_done","run_id":"{run}","step":{step},"message":{{"role":"assistant","content":[{{"type":"text","text":"{text}"}},{{"type":"tool_call","id":"call-{step}","name":"echo","arguments":{{"i":{step}}}}}],"stop_reason":"tool_use"}}}}"#
            );
            written += driver.handle_line(done.as_bytes()).len();
            let result = format!(
                r#"{{"type":"tool_done","run_id":"{run}","call_id":"call-{step}","content":"{tool_text}"}}"#
            );
            written += driver.handle_line(result.as_bytes()).len();
        } else {
            let done = format!(
                r#"{{"type":"model_done","run_id":"{run}","step":{step},"message":{{"role":"assistant","content":[{{"type":"text","text":"done"}}],"stop_reason":"stop"}}}}"#
            );
            written += driver.handle_line(done.as_bytes()).len();
        }
    }
    written
}

fn main() {
    println!("driver throughput (min of 5 rounds)");
    let lines = 100_000;
    let (stream, _) = time(5, || delta_stream(lines));
    report(
        "model_delta lines through the driver",
        per_item(stream, lines),
    );
    report(
        "  = lines per second",
        format!("{:.0}", lines as f64 / stream.as_secs_f64()),
    );
    let (driver, _) = time(5, || session_through_driver(STEPS));
    let (direct, _) = time(5, || long_run(STEPS));
    let steps = STEPS as usize;
    report(
        "w1-style session via the driver (delta context): per step",
        per_item(driver, steps),
    );
    report(
        "w1-style session via the library: per step",
        per_item(direct, steps),
    );
    report(
        "driver / library",
        format!("{:.1}x", driver.as_secs_f64() / direct.as_secs_f64()),
    );
    let (full, _) = time(3, || {
        let mut d = Driver::new();
        d.handle_line(br#"{"type":"config","max_steps":500}"#);
        d.handle_line(br#"{"type":"prompt","text":"go"}"#);
        for step in 1..500u32 {
            let done = format!(
                r#"{{"type":"model_done","run_id":"thread-1/run-1","step":{step},"message":{{"role":"assistant","content":[{{"type":"tool_call","id":"c{step}","name":"echo","arguments":{{}}}}],"stop_reason":"tool_use"}}}}"#
            );
            d.handle_line(done.as_bytes());
            let result = format!(
                r#"{{"type":"tool_done","run_id":"thread-1/run-1","call_id":"c{step}","content":"ok"}}"#
            );
            d.handle_line(result.as_bytes());
        }
    });
    report(
        "500 steps with full context (O(transcript) per call_model)",
        per_item(full, 500),
    );
}
