//! Unit tests of the durable driver: its session lines, recovery, refused commits, start
//! errors and claims.

use serde_json::json;

use super::*;
use crate::commit::{CommitError, CommitOperation, CommitReceipt};
use crate::message::Message;
use crate::store::{CommittedThreadView, EventRecord, EventScope, MemoryStore, StoreHandles};
use crate::store::{Intercept, Intercepted, SharedStore};

fn values(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn types(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|l| l["type"].as_str().unwrap()).collect()
}

fn send<S: CommitLog + CheckpointReader>(driver: &mut DurableDriver<S>, line: Value) -> Vec<Value> {
    let handled = driver.handle_line(line.to_string().as_bytes()).unwrap();
    assert!(handled.refused.is_none(), "{:?}", handled.refused);
    values(&handled.lines)
}

fn start<S: CommitLog + CheckpointReader>(
    store: S,
    thread: &str,
    policy: RecoveryPolicy,
) -> (DurableDriver<S>, Vec<Value>) {
    let options = DurableOptions {
        policy,
        ..DurableOptions::new(AgentConfig::for_thread(thread))
    };
    let (driver, started) = DurableDriver::start(store, options).unwrap();
    assert!(started.refused.is_none(), "{:?}", started.refused);
    (driver, values(&started.lines))
}

fn prompt(text: &str) -> Value {
    json!({"type":"prompt","text":text,"now_ms":1000})
}

fn tool_call(run: &Value) -> Value {
    json!({"type":"model_done","run_id":run,"step":1,"message":{"role":"assistant",
           "content":[{"type":"tool_call","id":"c1","name":"search","arguments":{"q":"x"}}],
           "stop_reason":"tool_use"}})
}

/// Drives thread `t` up to an `execute_tools` that is never answered; returns its line.
fn up_to_a_tool<S: CommitLog + CheckpointReader>(store: S) -> (S, Value) {
    let (mut driver, _) = start(store, "t", RecoveryPolicy::Replay);
    let out = send(&mut driver, prompt("find x"));
    let out = send(&mut driver, tool_call(&out[2]["run_id"]));
    assert_eq!(
        types(&out),
        ["commit", "event", "event", "execute_tools", "idle"]
    );
    let tools = out[3].clone();
    (driver.into_store(), tools)
}

/// Issue 42: a line through the durable driver is measured against the nesting limit
/// once (on its text, as it is read); the agent is handed an input already measured.
#[test]
fn a_line_is_depth_checked_once() {
    let (mut driver, _) = start(MemoryStore::new(), "t", RecoveryPolicy::Replay);
    for line in [
        prompt("find x"),
        tool_call(&json!("t/run-1")),
        json!({"type":"tool_done","run_id":"t/run-1","call_id":"c1","content":"found",
               "details":{"a":[1,{"b":2}]}}),
    ] {
        let before = crate::limits::depth_checks();
        let out = send(&mut driver, line.clone());
        assert!(!types(&out).contains(&"error"), "{line}: {out:?}");
        assert_eq!(crate::limits::depth_checks() - before, 1, "{line}");
    }
}

#[test]
fn a_new_thread_starts_with_idle_0_and_each_commit_is_stored_before_its_line() {
    let store = SharedStore::new(MemoryStore::new());
    let thread = ThreadId::new("t");
    let (mut driver, started) = start(store.open_handle().unwrap(), "t", RecoveryPolicy::Replay);
    assert_eq!(started, [json!({"type":"idle","line":0})]);
    assert!(!driver.has_history());
    let mut seen = Vec::new();
    let refused = driver
        .handle_line_into(prompt("hi").to_string().as_bytes(), &mut |line| {
            // What the store holds when the line is handed out.
            let version = store.thread_version(&thread).unwrap();
            seen.push((serde_json::from_str::<Value>(&line).unwrap(), version));
        })
        .unwrap();
    assert!(refused.is_none());
    let kinds: Vec<&str> = seen
        .iter()
        .map(|(l, _)| l["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["commit", "event", "call_model", "idle"]);
    let (commit, version_at_commit_line) = &seen[0];
    assert_eq!(commit["expected_thread_version"], 0);
    assert_eq!(commit["commit"]["thread_id"], "t");
    assert_eq!(*version_at_commit_line, 1, "stored before its line");
    assert_eq!(seen[3].0, json!({"type":"idle","line":1}));
    assert!(driver.has_history());
    assert_eq!(driver.driver().lines_handled(), 1);
}

#[test]
fn a_recovered_thread_hands_out_its_pending_work_before_idle_0() {
    let (store, tools) = up_to_a_tool(MemoryStore::new());
    let version = store.thread_version(&ThreadId::new("t")).unwrap();
    // Replay: the call's tool_start and the same execute_tools again, nothing stored.
    let (driver, started) = start(store, "t", RecoveryPolicy::Replay);
    assert_eq!(types(&started), ["event", "execute_tools", "idle"]);
    assert_eq!(started[0]["event"]["event"]["type"], "tool_start");
    assert_eq!(started[1], tools);
    assert_eq!(started[2], json!({"type":"idle","line":0}));
    assert!(driver.has_history());
    let store = driver.into_store();
    assert_eq!(store.thread_version(&ThreadId::new("t")).unwrap(), version);
    // Seal: the sealing commit (stored) and run_end, then idle 0.
    let (driver, started) = start(store, "t", RecoveryPolicy::Seal);
    assert_eq!(
        types(&started).iter().filter(|t| **t == "commit").count(),
        1
    );
    assert_eq!(started[0]["type"], "commit");
    assert_eq!(
        started[0]["commit"]["run"]["cause"]["type"],
        "indeterminate"
    );
    let end = &started[started.len() - 2];
    assert_eq!(end["event"]["type"], "run_end");
    assert_eq!(end["event"]["result"]["cause"]["type"], "indeterminate");
    assert_eq!(started.last(), Some(&json!({"type":"idle","line":0})));
    assert_eq!(
        driver.store().thread_version(&ThreadId::new("t")).unwrap(),
        version + 1
    );
}

#[test]
fn a_refused_commit_is_one_store_line_and_ends_the_session() {
    let store = SharedStore::new(MemoryStore::new());
    let thread = ThreadId::new("t");
    let (mut first, _) = start(store.open_handle().unwrap(), "t", RecoveryPolicy::Replay);
    let (mut second, _) = start(store.open_handle().unwrap(), "t", RecoveryPolicy::Replay);
    // The second driver writes first; the first one's commit builds on version 0 too.
    let ahead = send(&mut second, prompt("from the second"));
    assert_eq!(ahead[0]["type"], "commit");
    let line = json!({"type":"prompt","text":"from the first","run_id":"mine"});
    let handled = first.handle_line(line.to_string().as_bytes()).unwrap();
    let expected = StoreError::Rejected(CommitError::VersionConflict {
        expected: 0,
        actual: 1,
    });
    assert_eq!(handled.refused.as_ref(), Some(&expected));
    assert_eq!(handled.lines, [store_error_line(1, &expected)]);
    let ended = SessionEnded {
        line: 1,
        code: "version_conflict",
    };
    assert_eq!(first.ended(), Some(&ended));
    assert_eq!(first.handle_line(b"{\"type\":\"abort\"}"), Err(ended));
    assert_eq!(first.driver().lines_handled(), 1);
    // Nothing of the first driver's was stored.
    assert_eq!(store.thread_version(&thread).unwrap(), 1);
    assert_eq!(
        store.committed_messages(&thread).unwrap(),
        [Message::user("from the second")]
    );
}

#[test]
fn the_store_line_names_the_refusal() {
    let conflict = StoreError::Rejected(CommitError::VersionConflict {
        expected: 0,
        actual: 1,
    });
    let line: Value = serde_json::from_str(&store_error_line(4, &conflict)).unwrap();
    assert_eq!(line["type"], "error");
    assert_eq!(line["line"], 4);
    assert_eq!(line["error"]["kind"], "store");
    assert_eq!(line["error"]["reason"], "version_conflict");
    assert!(
        line["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rejected")
    );
    let gone = StoreError::unavailable("disk gone");
    let line: Value = serde_json::from_str(&store_error_line(2, &gone)).unwrap();
    assert_eq!(line["error"]["reason"], "unavailable");
    assert!(
        line["error"]["message"]
            .as_str()
            .unwrap()
            .contains("disk gone")
    );
}

#[test]
fn config_lines_for_another_thread_or_after_history_are_invalid_state() {
    let (mut driver, _) = start(MemoryStore::new(), "t", RecoveryPolicy::Replay);
    let out = send(&mut driver, json!({"type":"config","thread_id":"other"}));
    assert_eq!(types(&out), ["error", "idle"]);
    assert_eq!(out[0]["error"]["kind"], "invalid_state");
    // A config naming no thread is for the driver's thread.
    let out = send(&mut driver, json!({"type":"config","max_steps":3}));
    assert_eq!(out, [json!({"type":"idle","line":2})]);
    let out = send(&mut driver, prompt("hi"));
    assert_eq!(out[0]["commit"]["thread_id"], "t");
    let out = send(&mut driver, json!({"type":"config","max_steps":3}));
    assert_eq!(out[0]["error"]["kind"], "invalid_state");
    assert!(
        out[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("history")
    );
    // After a restart the thread has history from the start.
    let (mut driver, _) = start(driver.into_store(), "t", RecoveryPolicy::Replay);
    let out = send(&mut driver, json!({"type":"config","thread_id":"t"}));
    assert_eq!(out[0]["error"]["kind"], "invalid_state");
    assert_eq!(out[1], json!({"type":"idle","line":1}));
}

#[test]
fn bad_lines_are_error_lines_as_in_memory() {
    let (mut durable, _) = start(MemoryStore::new(), "thread-1", RecoveryPolicy::Replay);
    let mut memory = Driver::new();
    for line in [
        &b"not json"[..],
        b"",
        b"{\"type\":\"nope\"}",
        b"\xff",
        b"{\"type\":\"abort\"}",
    ] {
        let handled = durable.handle_line(line).unwrap();
        assert!(handled.refused.is_none());
        assert_eq!(handled.lines, memory.handle_line(line));
    }
}

#[test]
fn start_errors_are_typed() {
    let bad = AgentConfig {
        max_steps: 0,
        ..AgentConfig::for_thread("t")
    };
    // A fresh thread: the configuration is rejected.
    let error =
        DurableDriver::start(MemoryStore::new(), DurableOptions::new(bad.clone())).unwrap_err();
    assert!(
        matches!(
            error,
            DurableStartError::Config(AgentError::InvalidInput(_))
        ),
        "{error}"
    );
    // A thread with history: recovery refuses it.
    let (store, _) = up_to_a_tool(MemoryStore::new());
    let error = DurableDriver::start(store.clone(), DurableOptions::new(bad)).unwrap_err();
    assert!(matches!(&error, DurableStartError::Recover { thread, .. } if thread.as_str() == "t"));
    assert!(
        error
            .to_string()
            .starts_with("cannot recover thread \"t\": ")
    );
    // A store that cannot be read while recovering.
    let unreadable = Intercepted(Faulty {
        store,
        events_fail: true,
        commits_fail: false,
    });
    let error = DurableDriver::start(
        unreadable,
        DurableOptions::new(AgentConfig::for_thread("t")),
    )
    .unwrap_err();
    assert_eq!(
        error,
        DurableStartError::Store {
            thread: ThreadId::new("t"),
            source: StoreError::unavailable("events are gone"),
        }
    );
    assert!(
        error
            .to_string()
            .starts_with("cannot read thread \"t\" from the store: ")
    );
}

/// A store whose audit events (recovery reads them) or commits can fail.
#[derive(Debug)]
struct Faulty {
    store: MemoryStore,
    events_fail: bool,
    commits_fail: bool,
}

impl Intercept for Faulty {
    type Inner = MemoryStore;
    fn inner(&self) -> &MemoryStore {
        &self.store
    }
    fn inner_mut(&mut self) -> &mut MemoryStore {
        &mut self.store
    }
    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        if self.commits_fail {
            return Err(StoreError::unavailable("the disk is gone"));
        }
        self.store.commit_operation(operation)
    }
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        if self.events_fail {
            return Err(StoreError::unavailable("events are gone"));
        }
        self.store.list_events(scope, from, limit)
    }
}

#[test]
fn a_sealing_commit_refused_at_start_ends_the_session_at_line_0() {
    let (store, _) = up_to_a_tool(MemoryStore::new());
    let failing = Intercepted(Faulty {
        store,
        events_fail: false,
        commits_fail: true,
    });
    let options = DurableOptions {
        policy: RecoveryPolicy::Seal,
        ..DurableOptions::new(AgentConfig::for_thread("t"))
    };
    let (mut driver, started) = DurableDriver::start(failing, options).unwrap();
    let gone = StoreError::unavailable("the disk is gone");
    assert_eq!(started.lines, [store_error_line(0, &gone)]);
    assert_eq!(started.refused, Some(gone));
    let ended = SessionEnded {
        line: 0,
        code: "unavailable",
    };
    assert_eq!(driver.handle_line(b"{\"type\":\"abort\"}"), Err(ended));
}

fn claimed(
    store: SharedStore<MemoryStore>,
    owner: &str,
    now_ms: u64,
) -> Result<(DurableDriver<SharedStore<MemoryStore>>, Vec<Value>), DurableStartError> {
    let options = DurableOptions::new(AgentConfig::for_thread("t"));
    DurableDriver::start_claimed(store, options, ClaimOptions::new(owner, 1_000), now_ms)
        .map(|(driver, started)| (driver, values(&started.lines)))
}

#[test]
fn a_claimed_driver_claims_before_it_reads_and_fences_its_commits() {
    let store = SharedStore::new(MemoryStore::new());
    let (mut first, started) = claimed(store.open_handle().unwrap(), "w1", 0).unwrap();
    assert_eq!(started, [json!({"type":"idle","line":0})]);
    assert_eq!(first.claim().map(|c| c.epoch), Some(1));
    // A second owner is refused at start: nothing read, nothing written.
    let stored = |store: &SharedStore<MemoryStore>| {
        let mut value = serde_json::to_value(&*store.lock().unwrap()).unwrap();
        // Store time moves with every call; what is stored must not.
        value.as_object_mut().unwrap().remove("clock");
        value
    };
    let before = stored(&store);
    match claimed(store.open_handle().unwrap(), "w2", 10) {
        Err(DurableStartError::ClaimHeld(held)) => {
            assert_eq!((held.owner.as_str(), held.expires_at_ms), ("w1", 1_000))
        }
        other => panic!("expected ClaimHeld, got {other:?}"),
    }
    assert_eq!(stored(&store), before);
    // Commits under the claim land; a renew at a third of the lease extends it.
    assert_eq!(first.tick(100), None);
    let out = send(&mut first, prompt("hi"));
    assert_eq!(types(&out), ["commit", "event", "call_model", "idle"]);
    assert_eq!(first.poll_renew(), Some(333));
    assert_eq!(first.tick(400), None);
    assert_eq!(first.claim().map(|c| c.expires_at_ms), Some(1_400));
    // Released at EOF: the next owner takes the thread at once, with a new epoch.
    first.release(500).unwrap();
    let (second, started) = claimed(store.open_handle().unwrap(), "w2", 600).unwrap();
    assert_eq!(second.claim().map(|c| c.epoch), Some(2));
    assert_eq!(
        types(&started),
        ["call_model", "idle"],
        "the pending call, replayed"
    );
}

#[test]
fn a_driver_whose_claim_was_taken_over_acts_no_further() {
    let store = SharedStore::new(MemoryStore::new());
    let (mut first, _) = claimed(store.open_handle().unwrap(), "w1", 0).unwrap();
    let out = send(&mut first, prompt("hi"));
    assert_eq!(types(&out), ["commit", "event", "call_model", "idle"]);
    // w1 stalls past its lease; w2 takes the thread over and recovers it.
    let (_second, started) = claimed(store.open_handle().unwrap(), "w2", 2_000).unwrap();
    assert_eq!(types(&started), ["call_model", "idle"]);
    let version = store.thread_version(&ThreadId::new("t")).unwrap();
    // w1 wakes up: its renew is refused, one claim_lost line, nothing after it.
    let lost = first.tick(2_100).expect("the claim is lost");
    let lost: Value = serde_json::from_str(&lost).unwrap();
    assert_eq!(lost["error"]["kind"], "store");
    assert_eq!(lost["error"]["reason"], "claim_lost");
    assert_eq!(lost["error"]["current_epoch"], 2);
    assert!(
        first
            .handle_line(prompt("again").to_string().as_bytes())
            .is_err()
    );
    assert_eq!(first.poll_renew(), None);
    assert_eq!(store.thread_version(&ThreadId::new("t")).unwrap(), version);
}

#[test]
fn a_claimed_session_that_ends_on_a_refused_commit_releases_its_claim() {
    let failing = Intercepted(Faulty {
        store: MemoryStore::new(),
        events_fail: false,
        commits_fail: true,
    });
    let options = DurableOptions::new(AgentConfig::for_thread("t"));
    let (mut driver, _) =
        DurableDriver::start_claimed(failing, options, ClaimOptions::new("w1", 1_000), 0).unwrap();
    assert_eq!(driver.tick(100), None);
    let handled = driver
        .handle_line(prompt("hi").to_string().as_bytes())
        .unwrap();
    assert_eq!(
        handled.refused,
        Some(StoreError::unavailable("the disk is gone"))
    );
    assert_eq!(driver.claim(), None);
    assert_eq!(driver.poll_renew(), None);
    // Well inside the lease, the thread has no live claim: the next driver takes it at
    // once instead of being refused until the lease passes.
    let store = driver.into_store();
    let thread = ThreadId::new("t");
    assert_eq!(store.thread_claim(&thread, 200).unwrap(), None);
}

#[test]
fn a_driver_that_wakes_after_its_lease_ran_out_stops() {
    let store = SharedStore::new(MemoryStore::new());
    let (mut driver, _) = claimed(store.open_handle().unwrap(), "w1", 0).unwrap();
    // No tick until after the lease: the renew is refused even though no other owner
    // showed up, and the driver ends itself.
    let lost = driver.tick(1_100).expect("past the lease");
    assert!(lost.contains("claim_lost"), "{lost}");
    assert_eq!(driver.claim(), None);
}
