//! `runcore threads`, `show`, `pending` and `events` (SPEC §12.3) over a store made by a
//! scripted session through `runcore drive --store` (ended, failed, awaiting and sealed runs
//! on three threads): every line they print, readable and `--json`, snapshot-tested — against
//! SQLite, and against PostgreSQL with the very same snapshots.
//!
//! The PostgreSQL half needs `RUNCORE_PG_URL` (`scripts/with-postgres.sh` sets it; `.ci/run`
//! runs the tests under it). Without it the test prints that it was skipped, except under
//! `CI=true`, where it fails: CI must never pass by testing nothing.

mod common;

use common::process::{Drive, TempDir, first, model_text, model_tool, prompt, runcore};
use serde_json::{Value, json};

/// Runs the scripted session into the store at `url`.
fn scripted_session(url: &str, dir: &TempDir) {
    let config = dir.join("alpha.json");
    std::fs::write(
        &config,
        json!({"thread_id":"alpha","system_prompt":"Be brief.",
               "tools":{"weather":{"description":"Weather by city"},
                        "deploy":{"policy":"require_approval","deadline_after_ms":60000}}})
        .to_string(),
    )
    .expect("write config");
    let config = config.to_str().expect("UTF-8 path");

    // alpha: a run with a tool that ends naturally, then a run that waits for approval.
    let mut alpha = Drive::spawn(&["--store", url, "--config", config]);
    let out = alpha.send(prompt("What is the weather in Paris?", 1_000));
    let out = alpha.send(model_tool(first(&out, "call_model"), "call-w", "weather"));
    let tools = first(&out, "execute_tools").clone();
    let out = alpha.send(
        json!({"type":"tool_done","run_id":tools["run_id"],"call_id":"call-w",
                                "content":"18 C, sunny","now_ms":1_500}),
    );
    alpha.send(model_text(first(&out, "call_model"), "18 C and sunny."));
    let out = alpha.send(prompt("Deploy the site", 2_000));
    alpha.send(model_tool(first(&out, "call_model"), "call-d", "deploy"));
    assert!(alpha.finish().0.success());

    // beta: a failed model call, then a run that ends naturally.
    let mut beta = Drive::spawn(&["--store", url, "--thread", "beta"]);
    let out = beta.send(prompt("Hi", 3_000));
    let call = first(&out, "call_model").clone();
    beta.send(
        json!({"type":"model_failed","run_id":call["run_id"],"step":call["step"],
                     "code":"overloaded","message":"try later","now_ms":3_100}),
    );
    let out = beta.send(prompt("Hi again", 3_200));
    beta.send(model_text(first(&out, "call_model"), "Hello!"));
    assert!(beta.finish().0.success());

    // gamma: killed while a tool runs, restarted with --recover seal.
    let mut gamma = Drive::spawn(&["--store", url, "--thread", "gamma"]);
    let out = gamma.send(prompt("Archive the folder", 4_000));
    gamma.send(model_tool(first(&out, "call_model"), "call-a", "archive"));
    gamma.kill();
    let gamma = Drive::spawn(&["--store", url, "--thread", "gamma", "--recover", "seal"]);
    assert!(gamma.finish().0.success());
}

/// Every inspection command's output: `(snapshot name, text)`.
fn inspections(url: &str) -> Vec<(&'static str, String)> {
    let cases: &[(&str, &[&str])] = &[
        ("threads", &["threads"]),
        ("threads_json", &["threads", "--json"]),
        ("show_alpha", &["show", "alpha"]),
        ("show_alpha_json", &["show", "alpha", "--json"]),
        ("show_beta", &["show", "beta"]),
        ("show_gamma", &["show", "gamma"]),
        ("show_gamma_json", &["show", "gamma", "--json"]),
        ("show_unknown", &["show", "nope"]),
        ("show_unknown_json", &["show", "nope", "--json"]),
        ("pending", &["pending"]),
        ("pending_json", &["pending", "--json"]),
        ("events", &["events"]),
        (
            "events_thread_beta",
            &["events", "--thread", "beta", "--json"],
        ),
        (
            "events_run_page",
            &[
                "events",
                "--run",
                "alpha/run-1",
                "--from",
                "1",
                "--limit",
                "1",
            ],
        ),
    ];
    cases
        .iter()
        .map(|(name, args)| {
            let mut full: Vec<&str> = args.to_vec();
            full.extend(["--store", url]);
            let output = runcore(&full);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "runcore {args:?}: {stderr}");
            assert!(stderr.is_empty(), "runcore {args:?}: {stderr}");
            let stdout = String::from_utf8(output.stdout).expect("UTF-8");
            if name.ends_with("json") || name.starts_with("events") {
                for line in stdout.lines() {
                    serde_json::from_str::<Value>(line).expect("one JSON value per line");
                }
            }
            let text = format!("$ runcore {} --store URL\n{stdout}", args.join(" "));
            (*name, text)
        })
        .collect()
}

/// The shapes §12.3 names, checked before the snapshots are.
fn check_shapes(url: &str) {
    let output = runcore(&["threads", "--store", url, "--json"]);
    let threads: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let ids: Vec<&Value> = threads.iter().map(|t| &t["thread_id"]).collect();
    assert_eq!(ids, [&json!("alpha"), &json!("beta"), &json!("gamma")]);
    for thread in &threads {
        let keys: Vec<&String> = thread.as_object().expect("object").keys().collect();
        // (serde_json's maps sort their keys.) `claim`: SPEC §12.4, null when none is live.
        assert_eq!(keys, ["claim", "latest_run", "thread_id", "version"]);
        assert_eq!(thread["claim"], Value::Null);
        let run: Vec<&String> = thread["latest_run"]
            .as_object()
            .expect("run")
            .keys()
            .collect();
        assert_eq!(run, ["id", "state", "thread_id"]);
    }
    let output = runcore(&["show", "alpha", "--store", url, "--json"]);
    let shown: Value = serde_json::from_slice(&output.stdout).expect("one object");
    let keys: Vec<&String> = shown.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "claim",
            "context_start",
            "forked_from",
            "messages",
            "runs",
            "thread_id",
            "tickets",
            "version"
        ]
    );
    assert_eq!(shown["context_start"], json!(0), "no compaction: 0");
    assert_eq!(shown["tickets"].as_array().map(Vec::len), Some(1));
    let output = runcore(&["pending", "--store", url, "--json"]);
    let pending: Value = serde_json::from_slice(&output.stdout).expect("one ticket, one JSON line");
    assert_eq!(pending, shown["tickets"][0]);
}

#[test]
fn every_inspection_of_a_sqlite_store_is_snapshotted() {
    let dir = TempDir::new("inspect-sqlite");
    let url = dir.sqlite("runs.db");
    scripted_session(&url, &dir);
    check_shapes(&url);
    for (name, text) in inspections(&url) {
        common::snapshot!(name, text);
    }
}

#[test]
fn every_inspection_of_a_postgres_store_prints_the_same_lines() {
    let Some(url) = common::console::postgres_store("inspect") else {
        return;
    };
    let dir = TempDir::new("inspect-postgres");
    scripted_session(&url, &dir);
    check_shapes(&url);
    for (name, text) in inspections(&url) {
        common::snapshot!(name, text);
    }
}
