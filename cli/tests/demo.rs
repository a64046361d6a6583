//! `runcore demo`, the README's main job, through the real binary: by default it writes a
//! real SQLite file in a new temporary directory, kills its child process with SIGKILL while
//! the tool is outstanding, recovers from the file, reads its summary back from the store, and
//! removes the directory.

mod common;

use std::path::PathBuf;

use common::process::{TempDir, runcore};
use serde_json::Value;

fn stdout_of(args: &[&str]) -> String {
    let output = runcore(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "runcore {args:?}: {stderr}");
    assert!(stderr.is_empty(), "runcore {args:?}: {stderr}");
    String::from_utf8(output.stdout).expect("UTF-8")
}

#[test]
fn the_demo_crashes_for_real_recovers_from_disk_and_cleans_up() {
    let text = stdout_of(&["demo"]);
    let store_line = text
        .lines()
        .find_map(|l| l.strip_prefix("the store: sqlite:"))
        .expect("the timeline names its store");
    let file = PathBuf::from(
        store_line
            .strip_suffix(" (a new file in a temporary directory)")
            .expect("a temporary file"),
    );
    let dir = file.parent().expect("the file's directory");
    assert!(dir.starts_with(std::env::temp_dir()), "{}", dir.display());
    assert!(!dir.exists(), "the demo removes {}", dir.display());

    for expected in [
        "== Run 2: in a child process, killed with SIGKILL while a tool runs ==",
        "ACTION  execute tools: archive [call-archive]",
        "... the archive tool runs (outstanding since the ACTION above) ...",
        "with SIGKILL while the archive tool was outstanding",
        "recovered from disk alone (policy: replay)",
        "a late commit for the ended run 1 is fenced",
        "committed transcript equals the agent's: true",
        "== Summary, read back from sqlite:",
        "  demo-thread/run-1: ended: natural_end",
        "  demo-thread/run-2: ended: natural_end",
        "commits: 16 (the thread's version), audit events stored: 31, messages: 16, runs waiting for a person: 0",
        // A compaction before run 2's last model call, with a summary the scripted model wrote.
        "the scripted model writes the summary: \"Summary of the conversation so far:",
        "host compacts: the summary, then the transcript from message 12",
        "COMMIT  Running demo-thread/run-2, 0 message(s), audit: compacted",
        "the model now sees 4 messages: the summary, then messages 12..15 of the transcript",
        "the model context starts at message 12 (after the compaction's summary)",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    #[cfg(unix)]
    assert!(text.contains("(it ended by signal 9)"), "{text}");
    // The child handed out the tool, then the recovered parent handed it out again.
    assert_eq!(
        text.matches("ACTION  execute tools: archive [call-archive]")
            .count(),
        2
    );
    assert!(!text.contains("runcore-demo: the archive tool is outstanding"));
}

#[test]
fn the_json_demo_writes_the_same_lines_as_the_in_memory_one() {
    let durable = stdout_of(&["demo", "--json"]);
    let memory = stdout_of(&["demo", "--memory", "--json"]);
    assert_eq!(durable, memory);
    let idles: Vec<u64> = durable
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("every line is JSON"))
        .filter(|v| v["type"] == "idle")
        .map(|v| v["line"].as_u64().expect("line"))
        .collect();
    let expected: Vec<u64> = (1..=idles.len() as u64).collect();
    assert_eq!(
        idles, expected,
        "input lines are numbered across the processes"
    );
}

#[test]
fn a_chosen_store_is_kept_and_not_reused() {
    let dir = TempDir::new("demo-store");
    let url = dir.sqlite("demo.db");
    let text = stdout_of(&["demo", "--store", &url]);
    assert!(text.contains(&format!("the store: {url}\n")), "{text}");
    let shown = stdout_of(&["show", "demo-thread", "--store", &url]);
    assert!(shown.starts_with("thread demo-thread: version 16, 2 runs, 16 messages"));
    let again = runcore(&["demo", "--store", &url]);
    assert_eq!(again.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("already holds the demo's thread"),
        "{stderr}"
    );
    let usage = runcore(&["demo", "--memory", "--store", &url]);
    assert_eq!(usage.status.code(), Some(2));
}
