//! A fleet of real workers on one store (SPEC §7.1, §7.2, §7.3, §12.4, §12.5), once per
//! backend: SQLite on a file, PostgreSQL on `RUNCORE_PG_URL`.
//!
//! Eight threads share the store. A scripted host per thread drives it through `runcore drive
//! --store … --thread T --owner w-N --lease-ms …` worker processes, one at a time per thread,
//! and kills them with `SIGKILL` at seeded pseudo-random points (before a line, or just after
//! writing one, so a commit may land unacknowledged). The next worker waits for the dead one's
//! lease to run out (`--wait-claim`) and takes the thread over under `replay`. Each run calls
//! the tool `work`, then `deploy`, which needs approval: the host approves (`runcore approve`)
//! or denies (`runcore deny`) it, or lets its short deadline pass; a sweeper loop (`runcore
//! sweep`, now and then with `--recover seal`) expires what is due.
//!
//! Where the claim epoch is visible: the store records only each thread's latest claim (not
//! one per commit), and `drive` writes no claim line, so the host reads its worker's claim
//! from `runcore show --json` (`"claim"`) right after the worker started, and checks it again
//! before it executes each tool. It writes that owner and epoch into every message it makes
//! (the model's text, each tool result), so the stored transcript itself says under which
//! claim each of those commits was made.
//!
//! At the end, per thread:
//! - every commit line the host saw (an acknowledged commit) is in the store: submitting the
//!   same operation again returns the stored receipt (`duplicate`) at the same version;
//! - along the thread's versions the claim epochs never decrease (the acknowledged commits by
//!   version, and the epochs written into the stored transcript, in order), and every worker's
//!   epoch is greater than the one before it;
//! - every tool the host executed ran while its worker's claim was the thread's current one
//!   at store time, and every executed tool result in the store comes from such a run;
//! - every run is paired (each tool call has exactly one result) and ended; no ticket, no
//!   claim and no due work is left; a thread whose deadline was left to pass was expired by
//!   exactly one sweep, the others by none.
//!
//! The seed is printed, and named in every failure; `RUNCORE_FLEET_SEED=N` replays one.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::console::postgres_store;
use common::process::{Drive, RUNCORE, TempDir, runcore, show_json};
use runcore::{CommitOperation, ThreadCommit};
use serde_json::{Value, json};

/// The workers' lease: long enough that a live worker on a slow, shared machine keeps its
/// claim (it renews every third of it), short enough that takeovers after a kill are quick.
const LEASE_MS: &str = "4000";
/// How long a new worker waits for the dead one's claim to run out.
const WAIT_CLAIM_MS: &str = "30000";
/// The threads of the fleet.
const THREADS: usize = 8;
/// At most this many kills per thread (each costs up to a lease of waiting).
const MAX_KILLS: u32 = 3;
/// The deadline of `deploy`'s approval on threads whose deadline is left to pass.
const SHORT_DEADLINE_MS: u64 = 1_500;
/// The deadline on threads a person answers (never reached in a test).
const LONG_DEADLINE_MS: u64 = 600_000;
/// How long any one wait of the host may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(90);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .expect("clock after 1970")
}

/// xorshift64*: a small deterministic generator (no `rand` needed).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // splitmix64 of the seed, so that nearby seeds give unrelated streams (and never 0).
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a person (or nobody) does with a thread's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Approve,
    Deny,
    /// Nobody answers: the deadline passes and a sweep expires the wait.
    Expire,
}

impl Plan {
    fn of(index: usize) -> Plan {
        match index % 3 {
            0 => Plan::Approve,
            1 => Plan::Expire,
            _ => Plan::Deny,
        }
    }
}

/// One commit line a worker wrote (so the store had acknowledged it).
#[derive(Debug, Clone)]
struct Acked {
    epoch: u64,
    line: Value,
}

/// One tool execution by the host.
#[derive(Debug, Clone)]
struct Execution {
    owner: String,
    epoch: u64,
    call_id: String,
}

/// What the host of one thread saw and did.
#[derive(Debug, Default)]
struct ThreadLog {
    /// The workers in start order: owner and claim epoch.
    workers: Vec<(String, u64)>,
    acked: Vec<Acked>,
    executions: Vec<Execution>,
    /// Versions of the commits `runcore approve` / `deny` acknowledged.
    answers: Vec<u64>,
    kills: u32,
    /// Workers that ended with a `claim_lost` (or other `store`) line on their own.
    lost: u32,
    /// Times the host found its worker's claim no longer current before executing a tool
    /// (it then executed nothing and replaced the worker).
    stale: u32,
}

/// What every host thread shares.
struct Fleet {
    url: String,
    seed: u64,
    approved_config: String,
    expiring_config: String,
    owners: AtomicUsize,
}

/// A config file: `work` runs at once; `deploy` needs approval within `deadline_ms`.
fn config_file(dir: &TempDir, name: &str, deadline_ms: u64) -> String {
    let path = dir.join(name);
    let config = json!({"tools": {
        "work": {"description": "does some work"},
        "deploy": {"description": "deploys", "policy": "require_approval",
                   "deadline_after_ms": deadline_ms}}});
    std::fs::write(&path, config.to_string()).expect("write a config");
    path.to_str().expect("UTF-8 path").to_owned()
}

/// The tag the host writes into each message it makes: `[w-3 e5]`.
fn tag(owner: &str, epoch: u64) -> String {
    format!("[{owner} e{epoch}]")
}

/// The owner and epoch of a tag at the start of `text`.
fn parse_tag(text: &str) -> Option<(String, u64)> {
    let inner = text.strip_prefix('[')?.split(']').next()?;
    let (owner, epoch) = inner.split_once(' ')?;
    Some((owner.to_owned(), epoch.strip_prefix('e')?.parse().ok()?))
}

/// The scripted model: `work` first, then `deploy`, then a final answer, decided from the
/// transcript the `call_model` line carries (so a replayed call gets the same kind of answer).
fn model_answer(call: &Value, owner: &str, epoch: u64) -> Value {
    let messages = call["messages"].as_array().cloned().unwrap_or_default();
    let has_result = |tool: &str| {
        messages
            .iter()
            .any(|m| m["role"] == "tool_result" && m["tool_name"] == tool)
    };
    let text = json!({"type":"text","text":tag(owner, epoch)});
    let (content, stop) = if !has_result("work") {
        (
            json!([text, {"type":"tool_call","id":"work-1","name":"work","arguments":{"n":1}}]),
            "tool_use",
        )
    } else if !has_result("deploy") {
        (
            json!([text, {"type":"tool_call","id":"deploy-1","name":"deploy","arguments":{"to":"prod"}}]),
            "tool_use",
        )
    } else {
        (json!([text]), "stop")
    };
    json!({"type":"model_done","run_id":call["run_id"],"step":call["step"],"now_ms":now_ms(),
           "message":{"role":"assistant","content":content,"stop_reason":stop}})
}

/// Lines up to and including the next `idle`, and whether the driver ended first.
fn until_idle_or_end(worker: &mut Drive) -> (Vec<Value>, bool) {
    let mut out = Vec::new();
    loop {
        match worker.next() {
            None => return (out, true),
            Some(line) => {
                let idle = line["type"] == "idle";
                out.push(line);
                if idle {
                    return (out, false);
                }
            }
        }
    }
}

/// The last line of `kind` in `lines`.
fn last<'a>(lines: &'a [Value], kind: &str) -> Option<&'a Value> {
    lines.iter().rev().find(|l| l["type"] == kind)
}

/// Runs `runcore approve|deny RUN` until it answers (exit 0), retrying while another owner
/// holds the thread (exit 4, e.g. a killed worker's lease still running); the commit's version.
fn answer(fleet: &Fleet, thread: &str, run: &str, plan: Plan) -> u64 {
    let command = if plan == Plan::Approve {
        "approve"
    } else {
        "deny"
    };
    let started = Instant::now();
    loop {
        let output = runcore(&[command, run, "--store", &fleet.url]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        match output.status.code() {
            Some(0) => {
                let line: Value =
                    serde_json::from_slice(&output.stdout).expect("one JSON line from approve");
                assert_eq!(line["thread_id"], thread, "seed {}", fleet.seed);
                return line["version"].as_u64().expect("a version");
            }
            Some(4) if started.elapsed() < PATIENCE => {
                std::thread::sleep(Duration::from_millis(100));
            }
            other => panic!(
                "seed {}: runcore {command} {run}: exit {other:?}: {stderr}",
                fleet.seed
            ),
        }
    }
}

/// Waits until the thread's latest run has ended (a sweep expires its wait).
fn until_ended(fleet: &Fleet, thread: &str) {
    let started = Instant::now();
    loop {
        let shown = show_json(&fleet.url, thread);
        let runs = shown["runs"].as_array().cloned().unwrap_or_default();
        if runs.last().is_some_and(|r| r["state"]["type"] == "ended") {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "seed {}: {thread}'s wait never expired: {shown}",
            fleet.seed
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The host of one thread: workers one after another until the thread's run has ended.
fn host(fleet: &Fleet, index: usize) -> ThreadLog {
    let thread = format!("fleet-{index}");
    let plan = Plan::of(index);
    let seed = fleet.seed;
    let mut rng = Rng::new(seed ^ (index as u64).wrapping_mul(0x1000_0000_01B3));
    let mut log = ThreadLog::default();
    let config = if plan == Plan::Expire {
        &fleet.expiring_config
    } else {
        &fleet.approved_config
    };
    let started = Instant::now();
    'workers: loop {
        assert!(
            started.elapsed() < PATIENCE * 2,
            "seed {seed}: {thread} did not finish: {log:?}"
        );
        let owner = format!("w-{}", fleet.owners.fetch_add(1, Ordering::Relaxed));
        let args = [
            "--store",
            fleet.url.as_str(),
            "--thread",
            thread.as_str(),
            "--config",
            config.as_str(),
            "--owner",
            owner.as_str(),
            "--lease-ms",
            LEASE_MS,
            "--wait-claim",
            WAIT_CLAIM_MS,
        ];
        let mut worker = match Drive::try_spawn_exact(&args) {
            Ok(worker) => worker,
            // Still held after the wait (a sweep or an answer took the thread meanwhile).
            Err((Some(4), out, _)) => {
                assert!(
                    out.is_empty(),
                    "seed {seed}: exit 4 writes nothing: {out:?}"
                );
                continue;
            }
            Err(other) => panic!("seed {seed}: {owner} on {thread} did not start: {other:?}"),
        };
        let shown = show_json(&fleet.url, &thread);
        let claim = &shown["claim"];
        assert_eq!(
            claim["owner"], owner,
            "seed {seed}: a started worker holds its thread: {shown}"
        );
        let epoch = claim["epoch"].as_u64().expect("an epoch");
        if let Some((_, before)) = log.workers.last() {
            assert!(
                epoch > *before,
                "seed {seed}: {thread}: {owner}'s epoch {epoch} after {before}"
            );
        }
        log.workers.push((owner.clone(), epoch));
        let mut out = std::mem::take(&mut worker.start);
        let mut ended = false;
        loop {
            for line in &out {
                if line["type"] == "commit" {
                    log.acked.push(Acked {
                        epoch,
                        line: line.clone(),
                    });
                }
            }
            if let Some(error) = out.iter().find(|l| l["type"] == "error") {
                // Only a store line ends a worker; it is its last line (SPEC §12.2, §12.4).
                assert_eq!(error["error"]["kind"], "store", "seed {seed}: {out:?}");
                assert_eq!(out.last(), Some(error), "seed {seed}: nothing after it");
                if !ended {
                    let rest = worker.rest();
                    assert!(rest.is_empty(), "seed {seed}: nothing after it: {rest:?}");
                }
                let (status, stderr) = worker.finish();
                assert_eq!(status.code(), Some(3), "seed {seed}: {stderr}");
                log.lost += 1;
                continue 'workers;
            }
            assert!(
                !ended,
                "seed {seed}: {owner} on {thread} ended without a store line: {out:?}"
            );
            let input = if let Some(tools) = last(&out, "execute_tools") {
                let now = show_json(&fleet.url, &thread);
                if now["claim"]["owner"] != owner || now["claim"]["epoch"] != epoch {
                    log.stale += 1;
                    worker.kill();
                    continue 'workers;
                }
                let calls = tools["calls"].as_array().expect("calls");
                assert_eq!(calls.len(), 1, "seed {seed}: one call per step: {tools}");
                let call_id = calls[0]["id"].as_str().expect("a call id").to_owned();
                log.executions.push(Execution {
                    owner: owner.clone(),
                    epoch,
                    call_id: call_id.clone(),
                });
                json!({"type":"tool_done","run_id":tools["run_id"],"call_id":call_id,
                       "content":format!("{} ran {call_id}", tag(&owner, epoch)),
                       "now_ms":now_ms()})
            } else if let Some(call) = last(&out, "call_model") {
                model_answer(call, &owner, epoch)
            } else {
                let shown = show_json(&fleet.url, &thread);
                let runs = shown["runs"].as_array().cloned().unwrap_or_default();
                match runs.last().map(|r| r["state"]["type"].clone()) {
                    None => json!({"type":"prompt","text":format!("task for {thread}"),
                                   "now_ms":now_ms()}),
                    Some(state) => {
                        let (status, stderr) = worker.finish();
                        assert!(status.success(), "seed {seed}: {owner}: {stderr}");
                        if state == "ended" {
                            return log;
                        }
                        assert_eq!(state, "awaiting", "seed {seed}: nothing pending: {shown}");
                        let run = runs.last().map(|r| r["id"].as_str().unwrap_or_default());
                        let run = run.expect("a run").to_owned();
                        match plan {
                            Plan::Expire => until_ended(fleet, &thread),
                            Plan::Approve | Plan::Deny => {
                                let version = answer(fleet, &thread, &run, plan);
                                log.answers.push(version);
                            }
                        }
                        continue 'workers;
                    }
                }
            };
            if log.kills < MAX_KILLS {
                match rng.below(100) {
                    0..15 => {
                        worker.kill();
                        log.kills += 1;
                        continue 'workers;
                    }
                    15..27 => {
                        // Mid-flight: the line may or may not have been handled.
                        let _ = worker.try_write(&input);
                        std::thread::sleep(Duration::from_millis(rng.below(30)));
                        worker.kill();
                        log.kills += 1;
                        continue 'workers;
                    }
                    _ => {}
                }
            }
            if !worker.try_write(&input) {
                // It ended on its own (a lost claim): its lines say so.
                let (rest, _) = until_idle_or_end(&mut worker);
                out = rest;
                ended = true;
                continue;
            }
            (out, ended) = until_idle_or_end(&mut worker);
        }
    }
}

/// `runcore sweep` in a loop until `stop`: every line of every sweep.
fn sweeper(url: String, seed: u64, stop: Arc<AtomicBool>) -> Vec<Value> {
    let mut rng = Rng::new(seed ^ 0x5EED);
    let mut lines = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let owner = format!("sweeper-{n}");
        n += 1;
        let mut args = vec!["sweep", "--store", url.as_str(), "--owner", owner.as_str()];
        // Now and then a sweep seals what is orphaned (a dead worker's run nobody took over
        // yet): the fleet must stay consistent whichever of the two gets there first.
        if rng.below(10) == 0 {
            args.extend(["--recover", "seal"]);
        }
        let output = Command::new(RUNCORE)
            .args(&args)
            .output()
            .expect("run runcore sweep");
        assert!(
            output.status.success(),
            "seed {seed}: sweep: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            lines.push(serde_json::from_str(line).expect("a sweep line is JSON"));
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    lines
}

/// Every stored message's text blocks.
fn texts(message: &Value) -> Vec<String> {
    message["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The checks of the module documentation on one thread.
fn check_thread(
    store: &mut runcore_store_url::Backend,
    fleet: &Fleet,
    index: usize,
    log: &ThreadLog,
    sweeps: &[Value],
) {
    let seed = fleet.seed;
    let thread = format!("fleet-{index}");
    let plan = Plan::of(index);
    let shown = show_json(&fleet.url, &thread);
    let context = format!("seed {seed}, {thread} ({plan:?}): {log:?}\n{shown}");

    // Ended, nothing waiting, nobody holding it.
    let runs = shown["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{context}");
    assert_eq!(runs[0]["state"]["type"], "ended", "{context}");
    assert_eq!(shown["tickets"], json!([]), "{context}");
    assert_eq!(shown["claim"], Value::Null, "{context}");

    // Paired: every tool call has exactly one result, after it.
    let messages = shown["messages"].as_array().expect("messages");
    let mut calls = Vec::new();
    let mut results: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for (i, message) in messages.iter().enumerate() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_call" {
                calls.push((i, block["id"].as_str().unwrap_or_default().to_owned()));
            }
        }
        if message["role"] == "tool_result" {
            let id = message["call_id"].as_str().unwrap_or_default().to_owned();
            let outcome = message["outcome"].as_str().unwrap_or_default().to_owned();
            results.entry(id).or_default().push((i, outcome));
        }
    }
    // A sweep may seal a dead worker's run before its first model call: then there is none.
    let sealed_early = sweeps
        .iter()
        .any(|s| s["thread_id"] == thread.as_str() && s["action"] == "sealed");
    assert!(!calls.is_empty() || sealed_early, "{context}");
    for (at, id) in &calls {
        let found = results.get(id).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(found.len(), 1, "{id} has one result: {context}");
        assert!(found[0].0 > *at, "{id}'s result follows it: {context}");
    }
    assert_eq!(
        results.len(),
        calls.len(),
        "no result without a call: {context}"
    );

    // The epochs written into the stored transcript never decrease, and each names a worker
    // of this thread with its epoch.
    let workers: BTreeSet<(String, u64)> = log.workers.iter().cloned().collect();
    let mut stored_epoch = 0;
    for message in messages {
        if message["role"] == "user" {
            continue;
        }
        let Some(text) = texts(message).into_iter().next() else {
            continue;
        };
        let Some((owner, epoch)) = parse_tag(&text) else {
            // A synthetic result (denied, expired, interrupted) carries no tag.
            assert_ne!(message["outcome"], "executed", "{context}");
            continue;
        };
        assert!(
            workers.contains(&(owner.clone(), epoch)),
            "{owner} e{epoch}: {context}"
        );
        assert!(epoch >= stored_epoch, "epochs never decrease: {context}");
        stored_epoch = epoch;
        if message["role"] == "tool_result" {
            // An executed result in the store: the host ran that call under that claim.
            assert_eq!(message["outcome"], "executed", "{context}");
            let call_id = message["call_id"].as_str().unwrap_or_default();
            assert!(
                log.executions
                    .iter()
                    .any(|e| e.owner == owner && e.epoch == epoch && e.call_id == call_id),
                "{call_id} stored as run by {owner} e{epoch}: {context}"
            );
        }
    }

    // Every acknowledged commit is in the store, at its version; by version, the epochs of
    // the acknowledged commits never decrease.
    let mut by_version: BTreeMap<u64, u64> = BTreeMap::new();
    for acked in &log.acked {
        let line = &acked.line;
        let commit: ThreadCommit =
            serde_json::from_value(line["commit"].clone()).expect("a commit line's commit");
        let ordinal = line["ordinal"].as_u64().expect("ordinal");
        let expected = line["expected_thread_version"].as_u64().expect("version");
        let operation = CommitOperation::new(commit, ordinal, expected);
        assert_eq!(
            json!(operation.payload_hash),
            line["payload_hash"],
            "{context}"
        );
        let receipt = store.commit_operation(operation).unwrap_or_else(|e| {
            panic!("acknowledged commit at {expected} not stored: {e}: {context}")
        });
        assert!(
            receipt.duplicate,
            "acknowledged commit at {expected}: {context}"
        );
        assert_eq!(receipt.record.thread_version, expected + 1, "{context}");
        let before = by_version.insert(expected + 1, acked.epoch);
        assert!(
            before.is_none(),
            "version {} acknowledged twice: {context}",
            expected + 1
        );
    }
    let epochs: Vec<u64> = by_version.values().copied().collect();
    assert!(
        epochs.windows(2).all(|w| w[0] <= w[1]),
        "epochs by version {by_version:?}: {context}"
    );
    let version = shown["version"].as_u64().expect("version");
    for answered in &log.answers {
        assert!(*answered <= version, "{context}");
        assert!(!by_version.contains_key(answered), "{context}");
    }
    let executed_here: Vec<&Execution> = log.executions.iter().collect();
    for execution in executed_here {
        assert!(
            workers.contains(&(execution.owner.clone(), execution.epoch)),
            "{context}"
        );
    }

    // How the run ended, and who expired it.
    let expired = sweeps
        .iter()
        .filter(|s| s["thread_id"] == thread.as_str() && s["action"] == "expired")
        .count();
    let sealed = sweeps
        .iter()
        .any(|s| s["thread_id"] == thread.as_str() && s["action"] == "sealed");
    let cause = &runs[0]["state"]["cause"];
    match plan {
        Plan::Expire => {
            if !sealed || expired == 1 {
                assert_eq!(expired, 1, "expired by exactly one sweep: {context}");
                assert_eq!(cause["type"], "stopped", "{context}");
                assert_eq!(cause["reason"], "wait_expired", "{context}");
            }
        }
        Plan::Approve | Plan::Deny => {
            assert_eq!(expired, 0, "{context}");
            if !sealed {
                assert_eq!(cause["type"], "natural_end", "{context}");
                assert_eq!(log.answers.len(), 1, "{context}");
                let outcome = if plan == Plan::Approve {
                    "executed"
                } else {
                    "denied"
                };
                assert_eq!(
                    results.get("deploy-1").map(|r| r[0].1.as_str()),
                    Some(outcome),
                    "{context}"
                );
            }
        }
    }
}

fn fleet_on(url: String, dir: &TempDir) {
    let seed = std::env::var("RUNCORE_FLEET_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(now_ms);
    println!("fleet seed {seed} (RUNCORE_FLEET_SEED={seed} replays it)");
    let started = Instant::now();
    let fleet = Arc::new(Fleet {
        url: url.clone(),
        seed,
        approved_config: config_file(dir, "approved.json", LONG_DEADLINE_MS),
        expiring_config: config_file(dir, "expiring.json", SHORT_DEADLINE_MS),
        owners: AtomicUsize::new(0),
    });
    // The store exists before the sweeper's first look (a sweep never creates one).
    drop(
        runcore_store_url::open(
            &runcore_store_url::StoreUrl::parse(&url).expect("the store URL"),
            runcore_store_url::Access::Write,
        )
        .expect("create the store"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sweeping = {
        let (url, stop) = (url.clone(), Arc::clone(&stop));
        std::thread::spawn(move || sweeper(url, seed, stop))
    };
    let hosts: Vec<_> = (0..THREADS)
        .map(|index| {
            let fleet = Arc::clone(&fleet);
            std::thread::spawn(move || host(&fleet, index))
        })
        .collect();
    let mut logs = Vec::new();
    let mut failures = Vec::new();
    for (index, handle) in hosts.into_iter().enumerate() {
        match handle.join() {
            Ok(log) => logs.push(log),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                failures.push(format!("fleet-{index}: {message}"));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let sweeps = sweeping
        .join()
        .unwrap_or_else(|_| panic!("seed {seed}: the sweeper failed; hosts: {failures:#?}"));
    assert!(failures.is_empty(), "seed {seed}: {failures:#?}");

    let mut store = runcore_store_url::open(
        &runcore_store_url::StoreUrl::parse(&url).expect("the store URL"),
        runcore_store_url::Access::Read,
    )
    .expect("open the store");
    for (index, log) in logs.iter().enumerate() {
        check_thread(&mut store, &fleet, index, log, &sweeps);
    }
    let due = runcore(&["due", "--store", &url, "--json"]);
    assert!(due.status.success());
    assert!(
        due.stdout.is_empty(),
        "seed {seed}: nothing is due at the end"
    );

    let total = |f: fn(&ThreadLog) -> usize| logs.iter().map(f).sum::<usize>();
    let actions = |action: &str| sweeps.iter().filter(|s| s["action"] == action).count();
    println!(
        "fleet seed {seed}: {} workers, {} kills, {} lost claims, {} stale before a tool, \
         {} acknowledged commits, {} tool executions, {} answers, sweeps: {} expired, {} sealed, \
         {} left, {} skipped; {:.1} s",
        total(|l| l.workers.len()),
        total(|l| l.kills as usize),
        total(|l| l.lost as usize),
        total(|l| l.stale as usize),
        total(|l| l.acked.len()),
        total(|l| l.executions.len()),
        total(|l| l.answers.len()),
        actions("expired"),
        actions("sealed"),
        actions("left"),
        actions("skipped"),
        started.elapsed().as_secs_f64()
    );
    // The fleet was exercised: workers died and others took over.
    assert!(
        total(|l| l.workers.len()) > THREADS,
        "seed {seed}: takeovers happened"
    );
}

#[test]
fn a_fleet_of_killed_workers_on_sqlite() {
    let dir = TempDir::new("fleet");
    let url = dir.sqlite("fleet.db");
    fleet_on(url, &dir);
}

#[test]
fn a_fleet_of_killed_workers_on_postgres() {
    let Some(url) = postgres_store("fleet") else {
        return;
    };
    let dir = TempDir::new("fleet-pg");
    fleet_on(url, &dir);
}
