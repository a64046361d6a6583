//! What `runcore drive --otlp` costs: the same w1 session through `runcore drive` over
//! SQLite with and without `--otlp` to a loopback collector, side by side in one run.
//!
//! ```sh
//! cargo bench -p runcore-cli --bench otlp_overhead             # 1000 steps, 5 rounds
//! cargo bench -p runcore-cli --bench otlp_overhead -- 2000 7   # steps, rounds
//! ```
//!
//! The session is the comparison workload w1 as `durable_driver` drives it (one prompt; per
//! step 20 text deltas of 50 bytes, an answer with that text and one `echo` tool call, a
//! 100-byte tool result; a final text answer), line by line through real pipes, each on a
//! fresh `sqlite:…?synchronous=normal` store (the fastest durable setting, so the export's
//! share is the largest it gets). With `--otlp`, the driver exports the run's spans when the
//! run's terminal commit is stored: every span of the run is read back from SQLite, derived
//! and sent (OTLP/HTTP, protobuf) before the driver answers the last line, so the wall time
//! includes the whole export. The two kinds alternate round by round, so both see the same
//! machine; the figures are the median and best of the rounds, and the ratio of the medians
//! (target: at most 1.05). Each figure is one JSON line.

#[allow(dead_code)]
#[path = "../tests/common/collector.rs"]
mod collector;

use std::time::{Duration, Instant};

#[path = "support/driver.rs"]
mod driver;

use driver::{Driver, w1_through};

/// One session on a fresh store: its wall time in seconds (start-up to the last answer) and
/// that of its last line.
fn session(dir: &std::path::Path, round: usize, otlp: Option<&str>, n: u32) -> (f64, f64) {
    let label = if otlp.is_some() { "otlp" } else { "plain" };
    let url = format!(
        "sqlite:{}?synchronous=normal",
        dir.join(format!("{label}-{round}.db")).display()
    );
    let mut args = vec!["--store", url.as_str()];
    if let Some(collector) = otlp {
        args.extend(["--otlp", collector]);
    }
    let start = Instant::now();
    let mut driver = Driver::spawn(&args);
    driver.until_idle();
    let (steps, last_line) = w1_through(&mut driver, n);
    let wall = start.elapsed().as_secs_f64();
    driver.finish();
    assert_eq!(steps, n);
    (wall, last_line)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; the figures come from the arguments after it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let steps: u32 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let temp = tempfile::Builder::new()
        .prefix("runcore-bench-otlp-")
        .tempdir()
        .expect("temp dir");
    let collector = collector::collector();
    let mut plain = Vec::new();
    let mut exported = Vec::new();
    let mut plain_last = Vec::new();
    let mut exported_last = Vec::new();
    let mut export_bytes = 0;
    for round in 0..rounds {
        let (wall, last) = session(temp.path(), round, None, steps);
        plain.push(wall);
        plain_last.push(last);
        let (wall, last) = session(temp.path(), round, Some(&collector.url), steps);
        exported.push(wall);
        exported_last.push(last);
        // The run's one export arrived (it was sent before the driver's last answer).
        let export = collector
            .exports
            .recv_timeout(Duration::from_secs(30))
            .expect("the run's spans");
        export_bytes = export.body.len();
        assert!(collector.exports.try_recv().is_err(), "one export per run");
    }
    let best = |values: &[f64]| values.iter().copied().fold(f64::MAX, f64::min);
    let (plain_best, exported_best) = (best(&plain), best(&exported));
    let (plain_median, exported_median) = (median(&mut plain), median(&mut exported));
    let (plain_last, exported_last) = (median(&mut plain_last), median(&mut exported_last));
    for (label, median, best, last) in [
        ("sqlite_normal", plain_median, plain_best, plain_last),
        (
            "sqlite_normal_otlp",
            exported_median,
            exported_best,
            exported_last,
        ),
    ] {
        println!(
            "{{\"bench\":\"w1_drive\",\"driver\":\"{label}\",\"steps\":{steps},\"rounds\":{rounds},\"median_s\":{median:.3},\"best_s\":{best:.3},\"steps_per_s_median\":{:.1},\"last_line_median_ms\":{:.1}}}",
            f64::from(steps) / median,
            last * 1000.0
        );
    }
    let ratio = exported_median / plain_median;
    println!(
        "{{\"bench\":\"otlp_overhead\",\"steps\":{steps},\"export_bytes\":{export_bytes},\"ratio_of_medians\":{ratio:.4},\"ratio_of_bests\":{:.4},\"target\":1.05,\"met\":{}}}",
        exported_best / plain_best,
        ratio <= 1.05
    );
}
