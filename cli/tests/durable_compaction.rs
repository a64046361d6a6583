//! Compaction through the durable driver (SPEC §8.9, §12.4), with a real crash: the driver
//! (`runcore drive --store sqlite:…`) is killed with `SIGKILL` after the compaction commit and
//! before the model answered; the restarted driver's `call_model` carries the compacted
//! context, and `runcore show` says where it starts while every message stays committed.

mod common;

use common::process::{Drive, TempDir, first, kinds, model_text, prompt, runcore, show_json};
use serde_json::{Value, json};

#[test]
fn a_sigkill_after_the_compaction_commit_restarts_over_the_compacted_context() {
    let dir = TempDir::new("compact");
    let url = dir.sqlite("runs.db");
    let args = ["--store", url.as_str(), "--thread", "t"];
    let mut drive = Drive::spawn(&args);
    let out = drive.send(prompt("List the files", 1_000));
    drive.send(model_text(first(&out, "call_model"), "a and b"));
    let out = drive.send(prompt("And now?", 2_000));
    let before = first(&out, "call_model").clone();
    assert_eq!(before["messages"].as_array().map(Vec::len), Some(3));

    let summary = "The user listed the files: a and b.";
    let out = drive.send(json!({"type":"compact","summary":summary,"keep_from":2,"now_ms":3_000}));
    assert_eq!(kinds(&out), ["commit", "event", "call_model", "idle"]);
    let commit = first(&out, "commit");
    assert_eq!(commit["commit"]["messages"], json!([]));
    assert_eq!(commit["commit"]["events"][0]["kind"], "compacted");
    let compacted = first(&out, "call_model").clone();
    assert_eq!(compacted["step"], before["step"], "the same step again");
    let expected = json!([
        {"role":"user","content":[{"type":"text","text":summary}]},
        before["messages"][2],
    ]);
    assert_eq!(compacted["messages"], expected);
    // Killed with the compacted call out: the model never answered it.
    drive.kill();

    let mut drive = Drive::spawn(&args);
    assert!(
        !kinds(&drive.start).contains(&"commit".to_owned()),
        "nothing is committed again: {:?}",
        drive.start
    );
    let again = first(&drive.start, "call_model").clone();
    assert_eq!(
        again, compacted,
        "the restarted driver's call is the compacted one"
    );
    let out = drive.send(model_text(&again, "Still a and b."));
    assert!(out.iter().any(|l| l["type"] == "event"
        && l["event"]["type"] == "run_end"
        && l["event"]["result"]["cause"]["type"] == "natural_end"));
    let (status, stderr) = drive.finish();
    assert!(status.success(), "{stderr}");

    let shown = show_json(&url, "t");
    assert_eq!(shown["context_start"], 2);
    assert_eq!(shown["messages"].as_array().map(Vec::len), Some(4));
    let text = runcore(&["show", "t", "--store", &url]);
    let text = String::from_utf8(text.stdout).expect("UTF-8");
    assert!(
        text.contains("-- the model context starts here, after the summary --"),
        "{text}"
    );
    assert!(text.contains("the summary, then messages 2..4"), "{text}");

    // A new run after a restart of the idle thread still sees the compacted context.
    let mut drive = Drive::spawn(&args);
    let out = drive.send(prompt("Thanks", 4_000));
    let call = first(&out, "call_model");
    let roles: Vec<&Value> = call["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| &m["role"])
        .collect();
    assert_eq!(roles, ["user", "user", "assistant", "user"]);
    assert_eq!(call["messages"][0], expected[0]);
    drive.finish();
}
