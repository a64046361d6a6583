//! `runcore drive --store sqlite:…` (SPEC §12.2) through the real binary, with real crashes:
//! every crash here is a `SIGKILL` of the driver process (`Child::kill`) at a chosen point,
//! then a new process on the same file.
//!
//! - replay: the same `execute_tools` is written again after the restart, and the finished
//!   transcript equals an uncrashed run's;
//! - seal: the run ends `indeterminate` with `interrupted` results; the next prompt is a new run;
//! - a crash while awaiting approval re-executes nothing; `pending` lists the ticket;
//!   `resume_ticket` continues the same run;
//! - a crash after a run ended: the restart writes only `idle` 0, the next run id is new and
//!   the transcript continues;
//! - two drivers on one thread: the second one's first commit is fenced (one `store` line,
//!   exit 3) and the store holds only the first one's commits;
//! - the Python host (`python_durable_host.py`) does the replay and seal crashes itself.

mod common;

use common::process::{
    Drive, TempDir, answer_tools, causes, first, kinds, model_text, model_tool, prompt, runcore,
    show_json,
};
use serde_json::{Value, json};

/// A session up to the moment the tool is outstanding: returns its `execute_tools` line.
fn up_to_the_tool(drive: &mut Drive) -> Value {
    let out = drive.send(prompt("Archive the Q3 folder", 1_000));
    let out = drive.send(model_tool(first(&out, "call_model"), "call-1", "archive"));
    first(&out, "execute_tools").clone()
}

/// Answers the tools and lets the model finish: returns the last line's outputs.
fn to_the_end(drive: &mut Drive, tools: &Value) -> Vec<Value> {
    let out = answer_tools(drive, tools);
    drive.send(model_text(first(&out, "call_model"), "Done."))
}

#[test]
fn replay_after_sigkill_hands_out_the_same_tools_and_ends_like_an_uncrashed_run() {
    let dir = TempDir::new("replay");
    let url = dir.sqlite("runs.db");
    let mut drive = Drive::spawn(&["--store", &url, "--thread", "crashed"]);
    assert_eq!(drive.start, [json!({"type":"idle","line":0})]);
    let tools = up_to_the_tool(&mut drive);
    drive.kill();

    let mut drive = Drive::spawn(&["--store", &url, "--thread", "crashed"]);
    // Nothing is committed again; the same calls are handed out again, before idle 0.
    assert!(!kinds(&drive.start).contains(&"commit".to_owned()));
    assert_eq!(first(&drive.start, "execute_tools"), &tools);
    let out = to_the_end(&mut drive, &tools);
    assert_eq!(causes(&out), ["natural_end"]);
    let (status, stderr) = drive.finish();
    assert!(status.success(), "{stderr}");

    let mut uncrashed = Drive::spawn(&["--store", &url, "--thread", "uncrashed"]);
    let tools = up_to_the_tool(&mut uncrashed);
    to_the_end(&mut uncrashed, &tools);
    uncrashed.finish();
    let crashed = show_json(&url, "crashed");
    assert_eq!(
        crashed["messages"],
        show_json(&url, "uncrashed")["messages"]
    );
    assert_eq!(crashed["messages"].as_array().map(Vec::len), Some(4));
    assert_eq!(crashed["runs"][0]["state"]["cause"]["type"], "natural_end");
}

#[test]
fn seal_after_sigkill_ends_indeterminate_and_the_next_prompt_is_a_new_run() {
    let dir = TempDir::new("seal");
    let url = dir.sqlite("runs.db");
    let mut drive = Drive::spawn(&["--store", &url, "--thread", "t"]);
    up_to_the_tool(&mut drive);
    drive.kill();

    let mut drive = Drive::spawn(&["--store", &url, "--thread", "t", "--recover", "seal"]);
    let sealing = first(&drive.start, "commit");
    assert_eq!(
        sealing["commit"]["run"]["cause"],
        json!({"type":"indeterminate"})
    );
    let outcomes: Vec<&Value> = sealing["commit"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool_result")
        .map(|m| &m["outcome"])
        .collect();
    assert_eq!(outcomes, [&json!("interrupted")]);
    assert_eq!(causes(&drive.start), ["indeterminate"]);
    assert!(!kinds(&drive.start).contains(&"execute_tools".to_owned()));

    let out = drive.send(prompt("Try again", 5_000));
    assert_eq!(first(&out, "commit")["commit"]["run"]["run_id"], "t/run-2");
    drive.finish();
    let shown = show_json(&url, "t");
    let runs: Vec<&Value> = shown["runs"].as_array().expect("runs").iter().collect();
    assert_eq!(runs[0]["state"]["cause"]["type"], "indeterminate");
    assert_eq!(runs[1]["id"], "t/run-2");
}

#[test]
fn a_crash_while_awaiting_approval_reexecutes_nothing_and_resume_continues_the_run() {
    let dir = TempDir::new("awaiting");
    let url = dir.sqlite("runs.db");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        json!({"thread_id":"t","tools":{"delete":{"policy":"require_approval"}}}).to_string(),
    )
    .expect("write config");
    let config = config.to_str().expect("UTF-8 path");
    let mut drive = Drive::spawn(&["--store", &url, "--config", config]);
    let out = drive.send(prompt("Delete the draft", 1_000));
    let out = drive.send(model_tool(first(&out, "call_model"), "call-1", "delete"));
    assert!(!kinds(&out).contains(&"execute_tools".to_owned()));
    let ticket = out
        .iter()
        .find(|l| l["type"] == "commit" && l["commit"]["run"]["type"] == "awaiting")
        .map(|l| l["commit"]["run"]["ticket"].clone())
        .expect("an awaiting commit");
    assert_eq!(ticket["run_id"], "t/run-1");
    drive.kill();

    // After the restart: what needs a person, and nothing executed again.
    let pending = runcore(&["pending", "--store", &url, "--json"]);
    assert!(pending.status.success());
    let lines: Vec<Value> = String::from_utf8_lossy(&pending.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines, std::slice::from_ref(&ticket));
    let mut drive = Drive::spawn(&["--store", &url, "--config", config]);
    assert_eq!(drive.start, [json!({"type":"idle","line":0})]);

    let out = drive
        .send(json!({"type":"resume_ticket","result":{"type":"permission","decision":"allow"}}));
    let tools = first(&out, "execute_tools").clone();
    assert_eq!(tools["run_id"], "t/run-1");
    assert_eq!(tools["calls"][0]["id"], "call-1");
    let out = to_the_end(&mut drive, &tools);
    assert_eq!(causes(&out), ["natural_end"]);
    drive.finish();
    let shown = show_json(&url, "t");
    assert_eq!(shown["runs"].as_array().map(Vec::len), Some(1));
    assert_eq!(shown["tickets"], json!([]));
    let pending = runcore(&["pending", "--store", &url, "--json"]);
    assert!(pending.stdout.is_empty());
}

#[test]
fn a_crash_after_a_run_ended_restarts_quietly_and_the_next_run_id_is_new() {
    let dir = TempDir::new("ended");
    let url = dir.sqlite("runs.db");
    let mut drive = Drive::spawn(&["--store", &url]);
    let out = drive.send(prompt("Hello", 1_000));
    let out = drive.send(model_text(first(&out, "call_model"), "Hi."));
    assert_eq!(causes(&out), ["natural_end"]);
    drive.kill();

    let mut drive = Drive::spawn(&["--store", &url]);
    assert_eq!(drive.start, [json!({"type":"idle","line":0})]);
    let out = drive.send(prompt("Again", 2_000));
    let run = &first(&out, "commit")["commit"]["run"]["run_id"];
    assert_eq!(run, "thread-1/run-2");
    // The transcript continues: the model sees the first exchange, then the new prompt.
    let call = first(&out, "call_model");
    assert_eq!(call["messages"].as_array().map(Vec::len), Some(3));
    let out = drive.send(model_text(call, "Hi again."));
    assert_eq!(causes(&out), ["natural_end"]);
    drive.kill();
    let shown = show_json(&url, "thread-1");
    let ids: Vec<&Value> = shown["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(ids, [&json!("thread-1/run-1"), &json!("thread-1/run-2")]);
    assert_eq!(shown["messages"].as_array().map(Vec::len), Some(4));
}

#[test]
fn a_second_driver_on_a_claimed_thread_exits_4_and_writes_nothing() {
    let dir = TempDir::new("two-writers");
    let url = dir.sqlite("runs.db");
    let mut a = Drive::spawn(&["--store", &url, "--thread", "shared", "--owner", "driver-a"]);
    let out = a.send(prompt("from A", 1_000));
    assert_eq!(kinds(&out), ["commit", "event", "call_model", "idle"]);

    // B and C find the thread claimed by A: one stderr line naming A and its expiry, exit
    // status 4, nothing read or written (SPEC §12.4).
    for owner in ["driver-b", "driver-c"] {
        let output = std::process::Command::new(common::process::RUNCORE)
            .args([
                "drive", "--store", &url, "--thread", "shared", "--owner", owner,
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run runcore drive");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(4), "{stderr}");
        assert!(output.stdout.is_empty(), "nothing on stdout");
        assert!(stderr.contains("claimed by \"driver-a\" until"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }

    // A goes on; the store holds only A's commits.
    let out = a.send(model_text(first(&out, "call_model"), "Hello A."));
    assert_eq!(causes(&out), ["natural_end"]);
    a.finish();
    let shown = show_json(&url, "shared");
    assert_eq!(shown["version"], 2);
    let texts: Vec<&Value> = shown["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| &m["content"][0]["text"])
        .collect();
    assert_eq!(texts, [&json!("from A"), &json!("Hello A.")]);
}

fn python3() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_python_host_survives_sigkill_under_replay_and_seal() {
    if !python3() {
        println!("note: python3 is not available; the durable Python host was not run");
        return;
    }
    let host = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python_durable_host.py");
    for mode in ["replay", "seal"] {
        let dir = TempDir::new(&format!("python-{mode}"));
        let output = std::process::Command::new("python3")
            .args([host, common::process::RUNCORE])
            .arg(dir.path())
            .arg(mode)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run python3");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{mode}:\n{stdout}{stderr}");
        assert_eq!(stdout, format!("ok {mode}\n"), "{stderr}");
    }
}
