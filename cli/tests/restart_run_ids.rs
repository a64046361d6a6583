//! A thread goes on after its driver restarts, whatever made its earlier runs (SPEC §8.7,
//! §8.10): the run ids of import and fork commits count as used after recovery, so a restarted
//! `runcore drive` mints the next free id instead of one the store already holds (which the
//! store refuses: `payload_mismatch`, exit 3, and the thread was stuck). And a driver whose
//! commit the store refused releases its claim, so the next start is not refused as "claimed"
//! (exit 4) until the lease passes.
//!
//! Each flow runs on SQLite and on PostgreSQL. The PostgreSQL cases need `RUNCORE_PG_URL`
//! (`scripts/with-postgres.sh`); they are skipped without it, except under `CI=true`, where
//! they fail.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::console::postgres_store;
use common::process::{Drive, RUNCORE, TempDir, first, model_text, prompt, runcore};
use runcore::store::CommitLog;
use runcore::{RunDisposition, RunId, ThreadCommit, ThreadId};
use serde_json::{Value, json};

/// The README's import line: one user message and its answer.
const IMPORT: &str = r#"{"type":"import","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"text","text":"hello"}],"stop_reason":"stop"}]}"#;

/// `echo "$input" | runcore drive --store URL --thread THREAD` (the default lease, no waiting
/// for a claim, as the README's shell flow runs it): the exit code and the lines written.
fn drive_once(url: &str, thread: &str, input: &str) -> (Option<i32>, Vec<Value>, String) {
    let mut child = Command::new(RUNCORE)
        .args(["drive", "--store", url, "--thread", thread])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn runcore drive");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("write stdin");
    drop(stdin);
    let output = child.wait_with_output().expect("wait for runcore drive");
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (
        output.status.code(),
        lines,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The run ids of the commits in `lines`.
fn committed_runs(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["type"] == "commit")
        .map(|l| {
            l["commit"]["run"]["run_id"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect()
}

/// The shell flow: three imports, each by a new driver; every one commits, with run ids
/// `t/run-1`, `t/run-2`, `t/run-3`.
fn imports_by_restarted_drivers(url: &str) {
    for n in 1..=3 {
        let (code, lines, stderr) = drive_once(url, "t", &format!("{IMPORT}\n"));
        assert_eq!(code, Some(0), "import {n}: {lines:?} {stderr}");
        assert_eq!(
            committed_runs(&lines),
            vec![format!("t/run-{n}")],
            "import {n}"
        );
    }
}

/// Import a transcript that ends with the user's message, `continue` it, restart, `prompt`.
fn import_continue_restart_prompt(url: &str) {
    let mut drive = Drive::spawn(&["--store", url, "--thread", "c"]);
    let out = drive.send(json!({"type":"import","messages":[
        {"role":"user","content":[{"type":"text","text":"hi"}]}]}));
    assert_eq!(committed_runs(&out), vec!["c/run-1"]);
    let out = drive.send(json!({"type":"continue","now_ms":1_000}));
    let out = drive.send(model_text(first(&out, "call_model"), "hello"));
    assert_eq!(committed_runs(&out), vec!["c/run-2"]);
    assert!(drive.finish().0.success());

    let mut drive = Drive::spawn(&["--store", url, "--thread", "c"]);
    let out = drive.send(prompt("again", 2_000));
    let call = first(&out, "call_model");
    assert_eq!(call["run_id"], "c/run-3");
    let out = drive.send(model_text(call, "hello again"));
    assert_eq!(committed_runs(&out), vec!["c/run-3"]);
    assert!(drive.finish().0.success());
}

/// Fork a thread, drive one run on the fork, restart, drive another.
fn fork_one_run_restart(url: &str) {
    let mut main = Drive::spawn(&["--store", url, "--thread", "main"]);
    let out = main.send(prompt("Hi", 1_000));
    main.send(model_text(first(&out, "call_model"), "Hello."));
    assert!(main.finish().0.success());
    let forked = runcore(&["fork", "main", "--at", "2", "--to", "f", "--store", url]);
    assert!(
        forked.status.success(),
        "{}",
        String::from_utf8_lossy(&forked.stderr)
    );

    let mut fork = Drive::spawn(&["--store", url, "--thread", "f"]);
    let out = fork.send(prompt("One run", 2_000));
    let call = first(&out, "call_model");
    assert_eq!(call["run_id"], "f/run-2");
    fork.send(model_text(call, "Done."));
    assert!(fork.finish().0.success());

    let mut fork = Drive::spawn(&["--store", url, "--thread", "f"]);
    let out = fork.send(prompt("After the restart", 3_000));
    let call = first(&out, "call_model");
    assert_eq!(call["run_id"], "f/run-3");
    let out = fork.send(model_text(call, "Still going."));
    assert_eq!(committed_runs(&out), vec!["f/run-3"]);
    assert!(fork.finish().0.success());
}

/// A commit the store refuses (the run id the driver mints, `x/run-1`, is already committed on
/// another thread: `run_on_other_thread`) ends the session with exit 3, and the driver
/// releases its claim: the next start, which does not wait for a claim, is not refused with
/// exit 4.
fn a_refused_commit_releases_the_claim(url: &str) {
    let mut store =
        runcore_store_url::open_url(url, runcore_store_url::Access::Write).expect("open the store");
    let squatter = ThreadCommit::assemble(
        ThreadId::new("other"),
        RunDisposition::Running {
            run_id: RunId::new("x/run-1"),
        },
        true,
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    store.commit(squatter).expect("commit on the other thread");
    drop(store);

    let (code, lines, stderr) = drive_once(url, "x", &format!("{IMPORT}\n"));
    assert_eq!(code, Some(3), "{lines:?} {stderr}");
    let last = lines.last().expect("a store line");
    assert_eq!(last["error"]["kind"], "store", "{last}");

    // No `--wait-claim`: a claim left behind would refuse this start at once (exit 4).
    let (code, lines, stderr) = drive_once(url, "x", "");
    assert_eq!(code, Some(0), "{lines:?} {stderr}");
    assert_eq!(lines, vec![json!({"type":"idle","line":0})]);
}

#[test]
fn sqlite_imports_by_restarted_drivers_each_commit() {
    let dir = TempDir::new("restart-imports");
    imports_by_restarted_drivers(&dir.sqlite("r.db"));
}

#[test]
fn sqlite_import_continue_restart_prompt() {
    let dir = TempDir::new("restart-continue");
    import_continue_restart_prompt(&dir.sqlite("r.db"));
}

#[test]
fn sqlite_fork_one_run_restart() {
    let dir = TempDir::new("restart-fork");
    fork_one_run_restart(&dir.sqlite("r.db"));
}

#[test]
fn sqlite_a_refused_commit_releases_the_claim() {
    let dir = TempDir::new("restart-refused");
    a_refused_commit_releases_the_claim(&dir.sqlite("r.db"));
}

#[test]
fn postgres_imports_by_restarted_drivers_each_commit() {
    if let Some(url) = postgres_store("restart_imports") {
        imports_by_restarted_drivers(&url);
    }
}

#[test]
fn postgres_import_continue_restart_prompt() {
    if let Some(url) = postgres_store("restart_continue") {
        import_continue_restart_prompt(&url);
    }
}

#[test]
fn postgres_fork_one_run_restart() {
    if let Some(url) = postgres_store("restart_fork") {
        fork_one_run_restart(&url);
    }
}

#[test]
fn postgres_a_refused_commit_releases_the_claim() {
    if let Some(url) = postgres_store("restart_refused") {
        a_refused_commit_releases_the_claim(&url);
    }
}
