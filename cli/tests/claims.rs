//! Claims and due work through the real binary (SPEC §7.2, §7.3, §12.4), with real crashes:
//! a driver killed with `SIGKILL` leaves its claim to expire; `runcore due` and `runcore
//! sweep` then find what it left from committed rows alone.
//!
//! - a ticket with a deadline fires after every process has crashed (`sweep` expires it);
//! - an orphan is listed, left under replay, sealed under seal, and a restarted driver finishes
//!   a left one;
//! - two sweeps at once handle each item once;
//! - bad claim options are usage errors, nothing written.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::process::{Drive, TempDir, first, kinds, model_text, model_tool, runcore, show_json};
use serde_json::{Value, json};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .expect("clock after 1970")
}

fn lines_of(output: &std::process::Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// A config whose `deploy` tool needs approval within `deadline_ms`.
fn gated_config(dir: &TempDir, deadline_ms: u64) -> String {
    let path = dir.join("config.json");
    let config = json!({"tools": {"deploy": {"policy": "require_approval",
                                              "deadline_after_ms": deadline_ms}}});
    std::fs::write(&path, config.to_string()).expect("write the config");
    path.to_str().expect("UTF-8 path").to_owned()
}

/// Drives `thread` until its run awaits approval of `deploy`, with Unix-epoch times.
fn up_to_the_approval(url: &str, config: &str, thread: &str, lease_ms: &str) -> Drive {
    let mut drive = Drive::spawn(&[
        "--store",
        url,
        "--thread",
        thread,
        "--config",
        config,
        "--lease-ms",
        lease_ms,
    ]);
    let out = drive.send(json!({"type":"prompt","text":"ship it","now_ms":now_ms()}));
    let out = drive.send(model_tool(first(&out, "call_model"), "call-1", "deploy"));
    assert!(
        kinds(&out).contains(&"commit".to_owned()),
        "the wait is committed: {out:?}"
    );
    assert_eq!(
        show_json(url, thread)["runs"][0]["state"]["type"],
        "awaiting"
    );
    drive
}

#[test]
fn a_deadline_fires_after_every_process_crashed() {
    let dir = TempDir::new("deadline");
    let url = dir.sqlite("runs.db");
    let config = gated_config(&dir, 300);
    // A lease long enough to still be live at the first sweep (renewed at most a third of it
    // before the kill, so live at least 1 s after it).
    let drive = up_to_the_approval(&url, &config, "waits", "1500");
    drive.kill();
    // Nothing is due before the deadline.
    let due = lines_of(&runcore(&["due", "--store", &url, "--json"]));
    assert!(due.is_empty(), "{due:?}");
    std::thread::sleep(Duration::from_millis(400));
    let due = lines_of(&runcore(&["due", "--store", &url, "--json"]));
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0]["reason"]["type"], "deadline");
    assert_eq!(due[0]["thread_id"], "waits");
    // The dead driver's claim is still live: the sweep leaves the thread
    // alone rather than act on a thread another owner may still hold.
    let early = lines_of(&runcore(&["sweep", "--store", &url]));
    assert_eq!(early[0]["action"], "skipped", "{early:?}");
    assert_eq!(
        show_json(&url, "waits")["runs"][0]["state"]["type"],
        "awaiting"
    );
    std::thread::sleep(Duration::from_millis(1_600));

    let swept = runcore(&["sweep", "--store", &url, "--owner", "sweeper-1"]);
    assert!(swept.status.success(), "{swept:?}");
    let swept = lines_of(&swept);
    assert_eq!(swept.len(), 1, "{swept:?}");
    assert_eq!(swept[0]["reason"], "deadline");
    assert_eq!(swept[0]["action"], "expired");
    let shown = show_json(&url, "waits");
    assert_eq!(shown["runs"][0]["state"]["type"], "ended");
    assert_eq!(shown["tickets"], json!([]));
    // Handled once: nothing left to do.
    let again = lines_of(&runcore(&["sweep", "--store", &url]));
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn an_orphan_is_left_for_a_worker_or_sealed() {
    let dir = TempDir::new("orphan");
    let url = dir.sqlite("runs.db");
    for thread in ["left", "sealed"] {
        let mut drive = Drive::spawn(&["--store", &url, "--thread", thread]);
        let out = drive.send(json!({"type":"prompt","text":"hi","now_ms":1_000}));
        assert!(kinds(&out).contains(&"call_model".to_owned()));
        drive.kill();
    }
    // The dead drivers' claims (500 ms leases) expire; both runs are orphans.
    std::thread::sleep(Duration::from_millis(700));
    let due = lines_of(&runcore(&["due", "--store", &url, "--json"]));
    let reasons: Vec<&Value> = due.iter().map(|d| &d["reason"]["type"]).collect();
    assert_eq!(reasons, [&json!("orphaned"), &json!("orphaned")], "{due:?}");

    let swept = lines_of(&runcore(&["sweep", "--store", &url]));
    let actions: Vec<&Value> = swept.iter().map(|s| &s["action"]).collect();
    assert_eq!(actions, [&json!("left"), &json!("left")], "{swept:?}");

    // A worker picks "left" up under replay and finishes it.
    let mut worker = Drive::spawn(&["--store", &url, "--thread", "left"]);
    let call = first(&worker.start, "call_model").clone();
    let out = worker.send(model_text(&call, "Hello."));
    assert!(kinds(&out).contains(&"event".to_owned()));
    let (status, stderr) = worker.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(show_json(&url, "left")["runs"][0]["state"]["type"], "ended");

    // "sealed" is sealed by a sweep that chooses to.
    let swept = lines_of(&runcore(&["sweep", "--store", &url, "--recover", "seal"]));
    assert_eq!(swept.len(), 1, "{swept:?}");
    assert_eq!(swept[0]["thread_id"], "sealed");
    assert_eq!(swept[0]["action"], "sealed");
    assert_eq!(
        show_json(&url, "sealed")["runs"][0]["state"]["type"],
        "ended"
    );
    assert!(lines_of(&runcore(&["due", "--store", &url, "--json"])).is_empty());
}

#[test]
fn two_sweeps_at_once_handle_each_item_once() {
    let dir = TempDir::new("two-sweeps");
    let url = dir.sqlite("runs.db");
    let config = gated_config(&dir, 100);
    let threads: Vec<String> = (0..6).map(|i| format!("t{i}")).collect();
    for thread in &threads {
        up_to_the_approval(&url, &config, thread, "500").kill();
    }
    std::thread::sleep(Duration::from_millis(700));
    let sweeps: Vec<std::process::Child> = (0..2)
        .map(|i| {
            std::process::Command::new(common::process::RUNCORE)
                .args(["sweep", "--store", &url, "--owner", &format!("sweeper-{i}")])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn runcore sweep")
        })
        .collect();
    let mut expired = Vec::new();
    for sweep in sweeps {
        let output = sweep.wait_with_output().expect("sweep output");
        assert!(output.status.success());
        for line in lines_of(&output) {
            if line["action"] == "expired" {
                expired.push(line["thread_id"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    expired.sort();
    assert_eq!(expired, threads, "each wait expired exactly once");
    for thread in &threads {
        let shown = show_json(&url, thread);
        assert_eq!(shown["runs"][0]["state"]["type"], "ended", "{thread}");
    }
}

#[test]
fn bad_claim_options_are_usage_errors_and_nothing_is_written() {
    let dir = TempDir::new("bad-claims");
    let url = dir.sqlite("runs.db");
    for (args, says) in [
        (vec!["--owner", ""], "owner id is empty"),
        (vec!["--lease-ms", "0"], "lease is 0 ms"),
        (vec!["--lease-ms", "86400001"], "over the maximum"),
        (vec!["--lease-ms", "soon"], "whole number"),
    ] {
        let mut full = vec!["drive", "--store", url.as_str()];
        full.extend(args.iter().copied());
        let output = runcore(&full);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let long = "o".repeat(300);
    let output = runcore(&["drive", "--store", &url, "--owner", &long]);
    assert_eq!(output.status.code(), Some(2));
    assert!(!dir.join("runs.db").exists(), "nothing was created");
    let output = runcore(&["drive", "--owner", "w"]);
    assert_eq!(output.status.code(), Some(2), "--owner needs --store");
}
