//! End to end: two worker processes behind one port, a Restate server, and a store — SQLite
//! (one file the workers share) and PostgreSQL (a schema of its own on the server of
//! `RUNCORE_PG_URL`, which `scripts/with-postgres.sh` starts; without it the PostgreSQL test
//! skips with a note, except under `CI=true`, where it fails). Sixteen threads are driven through the ingress with idempotency keys; half wait for an
//! approval, and of those half let the deadline pass. A worker is SIGKILLed mid-run; later
//! the server is SIGKILLed and restarted on the same directory. Every thread must finish with
//! exactly the commits a single-process run of the same script makes, no tool may complete
//! twice, and `runcore show` / `threads` / `pending` must read the store.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use runcore::store::{CheckpointReader, CommittedThreadView, EventScope};
use runcore::{Message, ResultOutcome, RunState, ThreadId};
use runcore_store_url::{Access, StoreUrl};
use serde_json::Value;
use support::{
    Answer, Server, free_port, postgres_store, server_binary, single_process_run, start_worker,
    temp_dir,
};

const THREADS: usize = 16;
const DEADLINE_MS: u64 = 12_000;

fn script(i: usize) -> (String, &'static str, Answer) {
    let thread = format!("thread-{i:02}");
    match i % 8 {
        1 => (thread, "lookup 2 deploy", Answer::Allow),
        5 => (thread, "lookup 2 deploy", Answer::Deny),
        3 | 7 => (thread, "lookup 1 deploy", Answer::Expire),
        _ => (thread, "lookup 3", Answer::None),
    }
}

fn count_tool_lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|text| text.lines().filter(|l| l.contains(": tool ")).count())
        .unwrap_or(0)
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| t.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn runcore_cli() -> std::path::PathBuf {
    // The cli binary of the same target directory (cargo test --workspace builds it).
    let worker = Path::new(env!("CARGO_BIN_EXE_runcore-restate-worker"));
    worker.with_file_name(format!("runcore{}", std::env::consts::EXE_SUFFIX))
}

fn cli_json_lines(args: &[&str]) -> Vec<Value> {
    let output = Command::new(runcore_cli())
        .args(args)
        .output()
        .expect("run the runcore binary");
    assert!(
        output.status.success(),
        "runcore {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn a_crashed_cluster_run_on_sqlite_equals_the_single_process_run() {
    let Some(binary) = server_binary() else {
        return;
    };
    let dir = temp_dir("e2e");
    let store_url = format!("sqlite:{}", dir.path().join("store.db").display());
    crashed_cluster_run(binary, &dir, &store_url);
}

#[test]
fn a_crashed_cluster_run_on_postgres_equals_the_single_process_run() {
    let Some(binary) = server_binary() else {
        return;
    };
    let Some(store_url) = postgres_store("e2e") else {
        return;
    };
    let dir = temp_dir("e2e-pg");
    crashed_cluster_run(binary, &dir, &store_url);
}

/// The whole scenario on the store at `store_url` (`dir` holds the server's data, the tool
/// records and the worker logs).
fn crashed_cluster_run(binary: std::path::PathBuf, dir: &tempfile::TempDir, store_url: &str) {
    let store_url = store_url.to_owned();
    let cli_present = runcore_cli().is_file();
    if !cli_present {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "the runcore binary is missing beside the worker: run cargo test --workspace"
        );
        eprintln!(
            "note: the runcore binary is not built; the show/threads/pending checks are skipped"
        );
    }
    let started = Instant::now();
    let record = dir.path().join("tools");
    let mut server = Server::start(binary, dir.path());

    let port = free_port();
    let gate = dir.path().join("gate");
    let worker_args = [
        "--gate",
        gate.to_str().expect("utf-8 path"),
        "--approval-deadline-ms",
        "12000",
        "--tool-delay-ms",
        "60",
        "--model-delay-ms",
        "15",
        "--record",
        record.to_str().expect("utf-8 path"),
    ];
    let logs = [
        dir.path().join("worker-a.log"),
        dir.path().join("worker-b.log"),
    ];
    let mut workers = [
        start_worker(port, &store_url, &worker_args, &logs[0]),
        start_worker(port, &store_url, &worker_args, &logs[1]),
    ];
    server.register(port);

    // Every prompt goes in asynchronously, keyed; one is sent twice with the same key.
    for i in 0..THREADS {
        let (thread, prompt, _) = script(i);
        let body = serde_json::json!({ "text": prompt }).to_string();
        let key = format!("prompt-{thread}");
        let (status, answer) = server.call(&thread, "prompt/send", &body, Some(&key));
        assert!(
            (200..300).contains(&status),
            "send prompt {thread}: {status} {answer}"
        );
        if i == 0 {
            let (again, _) = server.call(&thread, "prompt/send", &body, Some(&key));
            assert!((200..300).contains(&again));
        }
    }

    // SIGKILL the worker that serves more, mid-run: every thread with a second lookup is
    // inside it (its start recorded, held at the gate), and the others wait for approval.
    // So no tool is between its effect and its journal entry: a retried call must start
    // again and complete once.
    let second_calls = (0..THREADS)
        .filter(|&i| !script(i).1.starts_with("lookup 1"))
        .count();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held = read_lines(&record.join("starts.log"))
            .iter()
            .filter(|key| key.ends_with(":call-2"))
            .collect::<BTreeSet<_>>()
            .len();
        if held == second_calls {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{held} of {second_calls} threads reached call-2"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in (0..THREADS).filter(|&i| script(i).1.starts_with("lookup 1")) {
        server.wait_for(&script(i).0, Duration::from_secs(60), |s| {
            s["status"] == "awaiting"
        });
    }
    let held = |log: &Path| {
        std::fs::read_to_string(log)
            .map(|t| t.lines().filter(|l| l.ends_with(":call-2")).count())
            .unwrap_or(0)
    };
    let busier = usize::from(held(&logs[1]) > held(&logs[0]));
    let held_by_killed = held(&logs[busier]);
    assert!(held_by_killed > 0, "the worker to kill holds no call");
    workers[busier].kill();
    let survivor = 1 - busier;
    std::fs::write(&gate, b"open").expect("open the gate");

    // The auto threads finish; the approval threads wait.
    for i in 0..THREADS {
        let (thread, _, reply) = script(i);
        let limit = Duration::from_secs(60);
        if reply == Answer::None {
            server.wait_for(&thread, limit, |s| s["last_end"].is_object());
        } else {
            server.wait_for(&thread, limit, |s| s["status"] == "awaiting");
        }
    }
    if cli_present {
        let pending = cli_json_lines(&["pending", "--store", &store_url, "--json"]);
        assert_eq!(pending.len(), THREADS / 2, "pending tickets: {pending:?}");
    }

    // SIGKILL the server and start it again on the same directory.
    server.kill_and_restart();

    // Answer the approvals (each twice with the same idempotency key: one decision).
    for i in 0..THREADS {
        let (thread, _, reply) = script(i);
        let decision = match reply {
            Answer::Allow => r#"{"result":{"type":"permission","decision":"allow"}}"#,
            Answer::Deny => {
                r#"{"result":{"type":"permission","decision":"deny","reason":"not today"}}"#
            }
            _ => continue,
        };
        let key = format!("resume-{thread}");
        let (status, first) = server.call(&thread, "resume", decision, Some(&key));
        assert_eq!(status, 200, "resume {thread}: {first}");
        let (status, second) = server.call(&thread, "resume", decision, Some(&key));
        assert_eq!(status, 200, "repeated resume {thread}: {second}");
        assert_eq!(first, second, "the same idempotency key answers the same");
    }

    // Every thread finishes: the deadlines fire after the server's restart.
    for i in 0..THREADS {
        let (thread, _, _) = script(i);
        server.wait_for(&thread, Duration::from_secs(60), |s| {
            s["status"] == "idle" && s["last_end"].is_object()
        });
    }
    let cluster_time = started.elapsed();

    // The store, read directly.
    let store = runcore_store_url::open(
        &StoreUrl::parse(&store_url).expect("a store URL"),
        Access::Read,
    )
    .expect("open the store");
    let done = read_lines(&record.join("done.log"));
    let refused = read_lines(&record.join("refused.log"));
    assert!(
        refused.is_empty(),
        "second completions were refused: {refused:?}"
    );
    let unique: BTreeSet<_> = done.iter().cloned().collect();
    assert_eq!(unique.len(), done.len(), "a tool completed twice: {done:?}");
    // The killed worker's calls started again on the survivor (and completed once).
    let starts = read_lines(&record.join("starts.log"));
    let restarted = starts.len() - starts.iter().collect::<BTreeSet<_>>().len();
    assert!(
        restarted >= held_by_killed,
        "{held_by_killed} calls were in flight on the killed worker, {restarted} restarted"
    );

    let mut executed = BTreeSet::new();
    for i in 0..THREADS {
        let (thread, prompt, reply) = script(i);
        let id = ThreadId::from(thread.as_str());
        let reference = single_process_run(&thread, prompt, DEADLINE_MS, reply);

        let messages = store.committed_messages(&id).expect("messages");
        assert_eq!(
            messages,
            reference.committed_messages(&id).expect("reference"),
            "{thread}: the transcript differs from the single-process run"
        );
        let version = store.thread_version(&id).expect("version");
        assert_eq!(
            version,
            reference.thread_version(&id).expect("reference"),
            "{thread}: commit count"
        );
        let run = store.latest_run(&id).expect("run").expect("a run");
        let reference_run = reference
            .latest_run(&id)
            .expect("reference")
            .expect("a run");
        assert_eq!(run.id, reference_run.id, "{thread}: run id");
        assert_eq!(run.state, reference_run.state, "{thread}: end cause");
        assert!(
            matches!(run.state, RunState::Ended(_)),
            "{thread}: {:?}",
            run.state
        );
        // Contiguous from version 1: every commit belongs to a run, none twice.
        assert_eq!(run.commits, version, "{thread}: commits of its one run");

        // The audit trail, kind by kind, equals the reference's (payloads carry times).
        let kinds = |events: Vec<runcore::store::EventRecord>| -> Vec<(String, String, u64)> {
            let mut commit_index = BTreeMap::new();
            events
                .into_iter()
                .map(|e| {
                    let n = commit_index.len() as u64;
                    let index = *commit_index.entry(e.commit_sequence).or_insert(n);
                    (e.run_id.as_str().to_owned(), e.kind, index)
                })
                .collect()
        };
        let events = store
            .list_events(&EventScope::Thread(id.clone()), None, 10_000)
            .expect("events");
        let sequences: Vec<u64> = events.iter().map(|e| e.commit_sequence).collect();
        assert!(
            sequences.windows(2).all(|w| w[0] <= w[1]),
            "{thread}: commit order"
        );
        assert_eq!(
            kinds(events),
            kinds(
                reference
                    .list_events(&EventScope::Thread(id.clone()), None, 10_000)
                    .expect("reference events")
            ),
            "{thread}: audit events"
        );

        // Every tool call has exactly one result, in call order.
        let mut open: Vec<String> = Vec::new();
        for message in &messages {
            match message {
                Message::Assistant(assistant) => {
                    assert!(open.is_empty(), "{thread}: calls without results {open:?}");
                    open = assistant
                        .tool_calls()
                        .map(|c| c.id.as_str().to_owned())
                        .collect();
                }
                Message::ToolResult(result) => {
                    assert_eq!(
                        open.first().map(String::as_str),
                        Some(result.call_id.as_str()),
                        "{thread}: a result out of call order"
                    );
                    open.remove(0);
                    if result.outcome == ResultOutcome::Executed {
                        executed.insert(format!("{}:{}", run.id.as_str(), result.call_id.as_str()));
                    }
                }
                _ => {}
            }
        }
        assert!(open.is_empty(), "{thread}: calls without results {open:?}");
    }
    assert_eq!(
        executed, unique,
        "the executed results in the store are exactly the completed tool calls"
    );

    if cli_present {
        let threads = cli_json_lines(&["threads", "--store", &store_url, "--json"]);
        assert_eq!(threads.len(), THREADS);
        let pending = cli_json_lines(&["pending", "--store", &store_url, "--json"]);
        assert!(
            pending.is_empty(),
            "nothing is pending at the end: {pending:?}"
        );
        let shown = cli_json_lines(&["show", "thread-01", "--store", &store_url, "--json"]);
        assert_eq!(shown.len(), 1);
        let messages = store
            .committed_messages(&ThreadId::from("thread-01"))
            .expect("messages");
        assert_eq!(
            shown[0]["messages"].as_array().map(Vec::len),
            Some(messages.len())
        );
    }
    eprintln!(
        "e2e ({}): {THREADS} threads finished in {:.1} s; worker {} was SIGKILLed ({} tool starts, \
         {held_by_killed} in flight), worker {survivor} survived ({} tool starts); {restarted} \
         calls restarted; {} tools completed once each",
        store_url.split(':').next().unwrap_or("?"),
        cluster_time.as_secs_f64(),
        busier,
        count_tool_lines(&logs[busier]),
        count_tool_lines(&logs[survivor]),
        done.len()
    );
}
