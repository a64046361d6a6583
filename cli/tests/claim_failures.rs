//! Named failure modes of claims and due work (SPEC §7.2, §7.3, §12.4, §12.5), one test each:
//! through the binary where a real process makes the failure natural (a stopped owner, a
//! killed owner, a restart, two commands at once), else through the library on a SQLite file,
//! a `MemoryStore` or a PostgreSQL server, with a store wrapper that makes the interleaving
//! (or the outage) happen exactly where it must.
//!
//! - (a) a stale sweeper snapshot: the owner commits between the sweeper's read and its write;
//! - (b) a lease that runs out while its owner still works: the late line is refused;
//! - (c) a lost claim response retried with the same request id;
//! - (d) recovery refused while a (dead) owner's claim is live;
//! - (e) a restart that reuses its owner id does not inherit the live claim;
//! - (f) an approval and the deadline at the same instant: exactly one commits;
//! - (g) worker clocks ±10 minutes off a PostgreSQL server change nothing;
//! - (h) renews that fail (the store unavailable) until the trust window has passed.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::console::postgres_store;
use common::process::{
    Drive, RUNCORE, TempDir, first, kinds, model_text, model_tool, runcore, show_json,
};
use runcore::driver::InputLine;
use runcore::host::{
    ClaimOptions, DurableDriver, DurableOptions, SweepAction, SweepOptions, sweep,
};
use runcore::store::{
    CheckpointReader, Claim, ClaimRequest, CommitLog, CommittedThreadView, DueReason, DueWork,
    Intercept, Intercepted, MemoryStore, StoreError, ThreadClaims,
};
use runcore::{
    AgentConfig, CommitError, CommitOperation, CommitReceipt, Input, RecoveryPolicy, RunState,
    ThreadCommit, ThreadId,
};
use runcore_sqlite::{SqliteOptions, SqliteStore};
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

/// What the store holds of `thread` (its `show` minus the live claim, and its events).
fn stored(url: &str, thread: &str) -> (Value, String) {
    let mut shown = show_json(url, thread);
    shown.as_object_mut().map(|o| o.remove("claim"));
    let events = runcore(&["events", "--store", url, "--thread", thread]);
    assert!(events.status.success());
    (shown, String::from_utf8_lossy(&events.stdout).into_owned())
}

/// Sends `signal` (`STOP`, `CONT`) to a process.
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// A config file whose `deploy` tool needs approval within `deadline_ms`.
fn gated_config(dir: &TempDir, deadline_ms: u64) -> String {
    let path = dir.join(&format!("gated-{deadline_ms}.json"));
    let config = json!({"tools": {"deploy": {"policy": "require_approval",
                                              "deadline_after_ms": deadline_ms}}});
    std::fs::write(&path, config.to_string()).expect("write the config");
    path.to_str().expect("UTF-8 path").to_owned()
}

/// The agent configuration of a `config` line.
fn agent_config(line: Value) -> AgentConfig {
    let mut line = line;
    line["type"] = json!("config");
    match InputLine::from_value(line).expect("a config line").input {
        Input::Config(config) => config,
        other => panic!("not a config: {other:?}"),
    }
}

/// A store wrapper that runs a hook before the next claim or commit, and can make every renew
/// fail as a backend failure (not a refusal).
struct Hooked<S> {
    inner: S,
    before_claim: Option<Box<dyn FnOnce()>>,
    before_commit: Option<Box<dyn FnOnce()>>,
    renew_fails: bool,
    renews: u32,
}

impl<S> Hooked<S> {
    fn new(inner: S) -> Intercepted<Self> {
        Intercepted(Hooked {
            inner,
            before_claim: None,
            before_commit: None,
            renew_fails: false,
            renews: 0,
        })
    }
}

impl<S> Intercept for Hooked<S> {
    type Inner = S;
    fn inner(&self) -> &S {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }
    fn commit_operation(&mut self, operation: CommitOperation) -> Result<CommitReceipt, StoreError>
    where
        S: CommitLog,
    {
        if let Some(hook) = self.before_commit.take() {
            hook();
        }
        self.inner.commit_operation(operation)
    }
    fn claim_thread(&mut self, request: &ClaimRequest, now_ms: u64) -> Result<Claim, StoreError>
    where
        S: ThreadClaims,
    {
        if let Some(hook) = self.before_claim.take() {
            hook();
        }
        self.inner.claim_thread(request, now_ms)
    }
    fn renew_claim(
        &mut self,
        claim: &Claim,
        lease_ms: u64,
        now_ms: u64,
    ) -> Result<Claim, StoreError>
    where
        S: ThreadClaims,
    {
        self.renews += 1;
        if self.renew_fails {
            return Err(StoreError::unavailable("the store is unreachable"));
        }
        self.inner.renew_claim(claim, lease_ms, now_ms)
    }
}

fn sqlite(dir: &TempDir) -> SqliteStore {
    SqliteStore::open(dir.join("runs.db"), SqliteOptions::default()).expect("open SQLite")
}

/// A durable driver on `thread` claimed for `owner` at `now_ms` (store time: SQLite's is the
/// caller's); its start lines, parsed.
fn claimed_driver<S: CommitLog + CheckpointReader + ThreadClaims>(
    store: S,
    config: AgentConfig,
    owner: &str,
    lease_ms: u64,
    now_ms: u64,
) -> (DurableDriver<S>, Vec<Value>) {
    let (driver, started) = DurableDriver::start_claimed(
        store,
        DurableOptions::new(config),
        ClaimOptions::new(owner, lease_ms),
        now_ms,
    )
    .unwrap_or_else(|e| panic!("{owner} starts: {e}"));
    assert!(started.refused.is_none(), "{:?}", started.refused);
    (driver, parse(&started.lines))
}

fn parse(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

fn send<S: CommitLog + CheckpointReader>(driver: &mut DurableDriver<S>, line: Value) -> Vec<Value> {
    let handled = driver
        .handle_line(line.to_string().as_bytes())
        .expect("the session goes on");
    assert!(handled.refused.is_none(), "{:?}", handled.refused);
    parse(&handled.lines)
}

fn sweep_options(owner: &str, lease_ms: u64, policy: RecoveryPolicy) -> SweepOptions {
    let mut claim = ClaimOptions::new(owner, lease_ms);
    claim.request_id = format!("{owner}-sweep");
    SweepOptions {
        claim,
        limit: 100,
        policy,
        config: AgentConfig::default(),
    }
}

// (a) A stale sweeper snapshot. Two places the owner can commit after the sweeper read:
// between the sweeper's listing and its claim (the sweeper re-checks under its claim), and
// between its recovery reads and its commit (its lease ran out meanwhile and the owner took
// the thread: its commit is fenced). Either way the sweeper writes nothing, the owner's commit
// stays, and the sweeper's release does not end the owner's claim.

#[test]
fn a_stale_sweeper_snapshot_between_its_listing_and_its_claim_writes_nothing() {
    let dir = TempDir::new("stale-listing");
    let thread = ThreadId::new("d");
    let config = agent_config(json!({"thread_id":"d","tools":{"deploy":{
        "policy":"require_approval","deadline_after_ms":1_000}}}));
    // w0 brings the run to a wait with a deadline at 2_000 and leaves.
    let (mut w0, _) = claimed_driver(sqlite(&dir), config.clone(), "w0", 10_000, 1_000);
    let out = send(
        &mut w0,
        json!({"type":"prompt","text":"ship it","now_ms":1_000}),
    );
    let out = send(
        &mut w0,
        model_tool(first(&out, "call_model"), "c1", "deploy"),
    );
    assert!(kinds(&out).contains(&"commit".to_owned()), "{out:?}");
    w0.release(1_500).unwrap();

    let mut store = Hooked::new(sqlite(&dir));
    let due = store.due_work(5_000, 10).unwrap();
    assert!(
        matches!(
            due.as_slice(),
            [DueWork {
                reason: DueReason::Deadline { deadline_ms: 2_000 },
                ..
            }]
        ),
        "{due:?}"
    );
    // After the sweeper listed the item, the owner claims the thread, handles the timeout
    // itself and leaves; only then does the sweeper's claim go through.
    let owner_store = sqlite(&dir);
    let owner_config = config.clone();
    let owner_version = std::rc::Rc::new(std::cell::Cell::new(0));
    let seen = std::rc::Rc::clone(&owner_version);
    store.0.before_claim = Some(Box::new(move || {
        let (mut owner, started) =
            claimed_driver(owner_store, owner_config, "owner", 10_000, 5_000);
        let idle = started.last().expect("idle 0");
        assert_eq!((&idle["type"], &idle["line"]), (&json!("idle"), &json!(0)));
        let out = send(&mut owner, json!({"type":"timeout","now_ms":5_000}));
        assert!(kinds(&out).contains(&"commit".to_owned()), "{out:?}");
        seen.set(owner.store().thread_version(&ThreadId::new("d")).unwrap());
        owner.release(5_000).unwrap();
    }));
    let swept = sweep(
        &mut store,
        &sweep_options("sweeper", 10_000, RecoveryPolicy::Replay),
        5_000,
    )
    .unwrap();
    assert_eq!(swept.len(), 1, "{swept:?}");
    assert_eq!(swept[0].action, SweepAction::Skipped, "{swept:?}");
    assert_eq!(swept[0].detail.as_deref(), Some("no longer due"));
    let reader = sqlite(&dir);
    assert!(owner_version.get() > 0);
    assert_eq!(reader.thread_version(&thread).unwrap(), owner_version.get());
    assert!(matches!(
        reader.latest_run(&thread).unwrap().unwrap().state,
        RunState::Ended(_)
    ));
    assert_eq!(reader.thread_claim(&thread, 5_001).unwrap(), None);
    assert!(reader.due_work(5_001, 10).unwrap().is_empty());
}

#[test]
fn a_stale_sweeper_snapshot_between_its_reads_and_its_write_is_fenced() {
    let dir = TempDir::new("stale-write");
    let thread = ThreadId::new("o");
    let config = AgentConfig::for_thread("o");
    // w0 starts a run and dies with a model call in flight (its claim expires at 2_000).
    let (mut w0, _) = claimed_driver(sqlite(&dir), config.clone(), "w0", 1_000, 1_000);
    let out = send(&mut w0, json!({"type":"prompt","text":"hi","now_ms":1_000}));
    assert!(kinds(&out).contains(&"call_model".to_owned()));
    drop(w0);

    // A sealing sweeper at 10_000 with a 1 s lease claims the orphan and recovers it; before
    // its sealing commit lands, its lease has run out and the owner took the thread over at
    // 12_000 and finished the run.
    let mut store = Hooked::new(sqlite(&dir));
    let owner_store = sqlite(&dir);
    let owned = std::rc::Rc::new(std::cell::RefCell::new(None));
    let keep = std::rc::Rc::clone(&owned);
    store.0.before_commit = Some(Box::new(move || {
        let (mut owner, started) = claimed_driver(owner_store, config, "owner", 60_000, 12_000);
        let call = first(&started, "call_model").clone();
        let out = send(&mut owner, model_text(&call, "done by the owner"));
        assert!(kinds(&out).contains(&"commit".to_owned()), "{out:?}");
        *keep.borrow_mut() = Some(owner);
    }));
    let swept = sweep(
        &mut store,
        &sweep_options("sweeper", 1_000, RecoveryPolicy::Seal),
        10_000,
    )
    .unwrap();
    assert_eq!(swept.len(), 1, "{swept:?}");
    assert_eq!(swept[0].reason, "orphaned");
    assert_eq!(swept[0].action, SweepAction::Skipped, "{swept:?}");
    // Refused by the first fence it meets: the owner's commit took the same operation id
    // (the run's next ordinal) with another payload, which is checked before the claim
    // (SPEC §7.1, §7.2); the claim fence and the version fence stand behind it.
    let detail = swept[0].detail.clone().unwrap_or_default();
    assert!(
        detail.contains("payload hash") || detail.contains("claim"),
        "the fence refused it: {detail}"
    );

    let owner = owned.borrow_mut().take().expect("the owner ran");
    let owner_claim = owner.claim().cloned().expect("the owner holds the thread");
    let reader = sqlite(&dir);
    let messages = reader.committed_messages(&thread).unwrap();
    assert_eq!(
        messages.len(),
        2,
        "the prompt and the owner's answer: {messages:?}"
    );
    assert_eq!(
        reader.latest_run(&thread).unwrap().unwrap().state,
        RunState::Ended(runcore::EndCause::NaturalEnd),
        "the owner's end, not the sweeper's seal"
    );
    // The sweeper's release of its stale claim left the owner's claim alone.
    assert_eq!(
        reader.thread_claim(&thread, 12_100).unwrap(),
        Some(owner_claim)
    );
}

// (b) A lease that runs out while the owner still works: the owner is stopped (SIGSTOP) past
// its lease; meanwhile another worker takes the thread over and commits (or nobody does). The
// line the host sent the stopped owner is never acted on: woken, it writes one `claim_lost`
// store line and nothing after it, exits 3, and the store holds nothing of it.

#[test]
fn a_lease_that_runs_out_while_the_owner_works_ends_it_with_claim_lost() {
    let dir = TempDir::new("lease-runs-out");
    let url = dir.sqlite("runs.db");
    for takeover in [true, false] {
        let thread = if takeover { "taken" } else { "lapsed" };
        let mut w1 = Drive::spawn(&[
            "--store",
            &url,
            "--thread",
            thread,
            "--owner",
            "w1",
            "--lease-ms",
            "1000",
        ]);
        let out = w1.send(json!({"type":"prompt","text":"hi","now_ms":now_ms()}));
        let call = first(&out, "call_model").clone();
        signal(w1.pid(), "STOP");
        std::thread::sleep(Duration::from_millis(1_300));
        if takeover {
            let mut w2 = Drive::spawn(&[
                "--store",
                &url,
                "--thread",
                thread,
                "--owner",
                "w2",
                "--lease-ms",
                "60000",
            ]);
            assert_eq!(show_json(&url, thread)["claim"]["epoch"], 2);
            let replayed = first(&w2.start, "call_model").clone();
            let out = w2.send(model_text(&replayed, "from w2"));
            assert!(kinds(&out).contains(&"commit".to_owned()));
            assert!(w2.finish().0.success());
        }
        let before = stored(&url, thread);
        // The host's next line reaches the stopped owner; then it wakes up.
        w1.write(&model_text(&call, "late, from w1"));
        signal(w1.pid(), "CONT");
        let rest = w1.rest();
        assert_eq!(rest.len(), 1, "one line and nothing after it: {rest:?}");
        let error = &rest[0]["error"];
        assert_eq!(rest[0]["type"], "error", "{rest:?}");
        assert_eq!(error["kind"], "store", "{rest:?}");
        assert_eq!(error["reason"], "claim_lost", "{rest:?}");
        assert_eq!(error["epoch"], 1, "{rest:?}");
        if takeover {
            assert_eq!(error["current_epoch"], 2, "{rest:?}");
        }
        let (status, stderr) = w1.finish();
        assert_eq!(status.code(), Some(3), "{stderr}");
        assert_eq!(stored(&url, thread), before, "nothing of w1's late line");
        let texts = before.0["messages"].to_string();
        assert!(!texts.contains("late, from w1"), "{texts}");
    }
}

/// The library side of (b): a host that did not tick while it stalled past its lease (so
/// the driver still trusts its claim) sends a line whose commit the store refuses with
/// `ClaimLost` (another owner took the thread over): one `claim_lost` store line, as for a
/// refused renew (SPEC §12.4), nothing written, and the session is over.
#[test]
fn a_late_commit_refused_with_claim_lost_is_one_claim_lost_line() {
    let dir = TempDir::new("late-commit");
    let thread = ThreadId::new("t");
    let (mut w1, _) = claimed_driver(sqlite(&dir), AgentConfig::for_thread("t"), "w1", 1_000, 0);
    let mut other = sqlite(&dir);
    let w2 = other
        .claim_thread(&ClaimOptions::new("w2", 60_000).request(&thread), 2_000)
        .unwrap();
    assert_eq!(w2.epoch, 2);
    let line = json!({"type":"prompt","text":"late","now_ms":2_100});
    let handled = w1.handle_line(line.to_string().as_bytes()).unwrap();
    assert_eq!(
        handled.refused,
        Some(StoreError::Rejected(CommitError::ClaimLost {
            current_epoch: 2
        }))
    );
    let lines = parse(&handled.lines);
    assert_eq!(lines.len(), 1, "one line, nothing after it: {lines:?}");
    let error = &lines[0]["error"];
    assert_eq!(lines[0]["type"], "error");
    assert_eq!(lines[0]["line"], 1);
    assert_eq!(error["kind"], "store", "{error}");
    assert_eq!(error["reason"], "claim_lost", "{error}");
    assert_eq!(error.get("code"), None, "one field name: {error}");
    assert_eq!(error["epoch"], 1, "{error}");
    assert_eq!(error["current_epoch"], 2, "{error}");
    assert_eq!(w1.ended().map(|e| e.code), Some("claim_lost"));
    assert!(w1.handle_line(b"{\"type\":\"abort\"}").is_err());
    assert_eq!(other.thread_version(&thread).unwrap(), 0, "nothing written");
    assert_eq!(other.thread_claim(&thread, 2_200).unwrap(), Some(w2));
}

// (c) A lost claim response, retried with the same request id from another connection (the
// conformance suite's `claims_are_granted_and_refused` checks the same on one handle of every
// backend): the same claim comes back, not `ClaimHeld`; once that claim has expired, the same
// request id gets a new grant with a new epoch, never the stale one.

#[test]
fn a_lost_claim_response_retried_with_the_same_request_gets_the_same_claim() {
    let dir = TempDir::new("lost-response");
    let thread = ThreadId::new("t");
    let request = ClaimRequest {
        thread_id: thread.clone(),
        owner: "w1".into(),
        request_id: "w1-start-1".into(),
        lease_ms: 1_000,
    };
    let mut first_connection = sqlite(&dir);
    let lost = first_connection.claim_thread(&request, 100).unwrap();
    drop(first_connection);
    let mut retry_connection = sqlite(&dir);
    let retried = retry_connection.claim_thread(&request, 400).unwrap();
    assert_eq!(retried, lost, "the same claim, same epoch and expiry");
    // Another start of the same owner is refused meanwhile.
    let other_start = ClaimRequest {
        request_id: "w1-start-2".into(),
        ..request.clone()
    };
    assert!(matches!(
        retry_connection.claim_thread(&other_start, 500),
        Err(StoreError::Rejected(CommitError::ClaimHeld { .. }))
    ));
    // After the expiry the same request is a new claim.
    let later = retry_connection.claim_thread(&request, 1_200).unwrap();
    assert_eq!(later.epoch, lost.epoch + 1);
    assert_eq!(later.expires_at_ms, 2_200);
}

// (d) Recovery refused while another owner's claim is live. `durable_driver.rs`'s
// `a_second_driver_on_a_claimed_thread_exits_4_and_writes_nothing` covers a live, running
// owner on SQLite; here the owner was killed (its claim still live) with a tool call
// unanswered, and the second driver would seal it (`--recover seal`): it exits 4 and nothing
// is written, not the sealing commit either; the run is not even due yet.

fn recovery_is_refused_while_a_dead_owners_claim_is_live(url: &str) {
    let mut w1 = Drive::spawn(&[
        "--store",
        url,
        "--thread",
        "held",
        "--owner",
        "dead-owner",
        "--lease-ms",
        "60000",
    ]);
    let out = w1.send(json!({"type":"prompt","text":"work","now_ms":now_ms()}));
    let out = w1.send(model_tool(first(&out, "call_model"), "call-1", "search"));
    assert!(kinds(&out).contains(&"execute_tools".to_owned()));
    w1.kill();
    let before = stored(url, "held");
    let output = Command::new(RUNCORE)
        .args([
            "drive",
            "--store",
            url,
            "--thread",
            "held",
            "--owner",
            "second",
            "--recover",
            "seal",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run runcore drive");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing on stdout");
    assert!(stderr.contains("\"dead-owner\""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(stored(url, "held"), before, "nothing written, no seal");
    assert_eq!(before.0["runs"][0]["state"]["type"], "running");
    assert_eq!(show_json(url, "held")["claim"]["owner"], "dead-owner");
    let due = lines_of(&runcore(&["due", "--store", url, "--json"]));
    assert!(due.is_empty(), "a live claim is not an orphan: {due:?}");
}

#[test]
fn recovery_is_refused_while_a_dead_owners_claim_is_live_on_sqlite() {
    let dir = TempDir::new("dead-owner");
    recovery_is_refused_while_a_dead_owners_claim_is_live(&dir.sqlite("runs.db"));
}

#[test]
fn recovery_is_refused_while_a_dead_owners_claim_is_live_on_postgres() {
    let Some(url) = postgres_store("dead_owner") else {
        return;
    };
    recovery_is_refused_while_a_dead_owners_claim_is_live(&url);
}

// (e) A restart that reuses its owner id: `runcore drive --owner host-a`, killed, started again
// as `host-a` while the dead start's claim is live, is refused (exit 4) like any other owner —
// each start claims with its own request id — and writes nothing; after the lease it gets a new
// claim, with a new epoch.

#[test]
fn a_restart_that_reuses_its_owner_id_does_not_inherit_the_live_claim() {
    let dir = TempDir::new("reused-owner");
    let url = dir.sqlite("runs.db");
    let mut first_start = Drive::spawn(&[
        "--store",
        &url,
        "--thread",
        "t",
        "--owner",
        "host-a",
        "--lease-ms",
        "3000",
    ]);
    let out = first_start.send(json!({"type":"prompt","text":"hi","now_ms":now_ms()}));
    assert!(kinds(&out).contains(&"call_model".to_owned()));
    first_start.kill();
    let before = stored(&url, "t");
    let output = Command::new(RUNCORE)
        .args([
            "drive", "--store", &url, "--thread", "t", "--owner", "host-a",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run runcore drive");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("claimed by \"host-a\""), "{stderr}");
    assert!(output.stdout.is_empty());
    assert_eq!(stored(&url, "t"), before);
    assert_eq!(show_json(&url, "t")["claim"]["epoch"], 1);

    let mut second_start = Drive::spawn(&[
        "--store",
        &url,
        "--thread",
        "t",
        "--owner",
        "host-a",
        "--wait-claim",
        "20000",
    ]);
    assert_eq!(show_json(&url, "t")["claim"]["epoch"], 2, "a new claim");
    let call = first(&second_start.start, "call_model").clone();
    let out = second_start.send(model_text(&call, "Hello."));
    assert!(kinds(&out).contains(&"commit".to_owned()));
    assert!(second_start.finish().0.success());
}

// (f) An approval (`runcore approve`) and the deadline (`runcore sweep`) at the same instant:
// exactly one of the two commits; the other gets an error (`expired`, `not_waiting`, held) or
// finds nothing due. An approval past the deadline that holds the claim commits the expiry
// itself (and answers `expired`), so there is no round where neither commits. Tried at several offsets around the deadline, so either side can win.

fn an_approval_and_the_deadline_at_the_same_instant_commit_once(url: &str, dir: &TempDir) {
    let url = url.to_owned();
    let config = gated_config(dir, 1_000);
    let mut wins = (0, 0);
    let mut late = 0;
    for (i, approve_offset) in [-200i64, -100, -50, -25, -10, 0, 10, 25]
        .into_iter()
        .enumerate()
    {
        let thread = format!("race-{i}");
        let mut drive = Drive::spawn(&["--store", &url, "--thread", &thread, "--config", &config]);
        let out = drive.send(json!({"type":"prompt","text":"ship it","now_ms":now_ms()}));
        let out = drive.send(model_tool(first(&out, "call_model"), "call-1", "deploy"));
        assert!(kinds(&out).contains(&"commit".to_owned()));
        assert!(drive.finish().0.success());
        let shown = show_json(&url, &thread);
        let deadline = shown["tickets"][0]["deadline_ms"]
            .as_u64()
            .expect("a deadline");
        let version = shown["version"].as_u64().expect("version");
        let run = format!("{thread}/run-1");

        let at = |offset: i64| {
            let instant = deadline.saturating_add_signed(offset);
            move || {
                let now = now_ms();
                if instant > now {
                    std::thread::sleep(Duration::from_millis(instant - now));
                }
            }
        };
        let approve_at = at(approve_offset);
        let sweep_at = at(5);
        let (approve_url, sweep_url, approve_run) = (url.clone(), url.clone(), run.clone());
        let approving = std::thread::spawn(move || {
            approve_at();
            runcore(&["approve", &approve_run, "--store", &approve_url])
        });
        let sweeping = std::thread::spawn(move || {
            sweep_at();
            runcore(&["sweep", "--store", &sweep_url, "--owner", "sweeper"])
        });
        let approved = approving.join().expect("approve");
        let swept = sweeping.join().expect("sweep");
        assert!(swept.status.success());
        let swept: Vec<Value> = lines_of(&swept)
            .into_iter()
            .filter(|l| l["thread_id"] == thread.as_str())
            .collect();
        let expired = swept.iter().filter(|l| l["action"] == "expired").count();
        let approve_stderr = String::from_utf8_lossy(&approved.stderr).into_owned();
        let context = format!(
            "offset {approve_offset}: approve {:?} {approve_stderr} sweep {swept:?}",
            approved.status.code()
        );
        let after = show_json(&url, &thread);
        // A late approval that holds the claim applies the passed deadline itself (and gets
        // `expired`), so the sweep, finding the thread held, may skip it: the expiry is then
        // the approval process's commit. Either way exactly one commit, at once.
        let late_approval = !approved.status.success()
            && expired == 0
            && serde_json::from_str::<Value>(approve_stderr.trim())
                .is_ok_and(|e| e["resume_error"] == "expired");
        if late_approval {
            late += 1;
        }
        assert_eq!(
            after["version"].as_u64(),
            Some(version + 1),
            "one commit: {context}"
        );
        assert_eq!(after["tickets"], json!([]), "{context}");
        if approved.status.success() {
            wins.0 += 1;
            assert_eq!(expired, 0, "{context}");
            assert_eq!(after["runs"][0]["state"]["type"], "running", "{context}");
        } else {
            wins.1 += 1;
            assert_eq!(expired + usize::from(late_approval), 1, "{context}");
            assert_eq!(after["runs"][0]["state"]["type"], "ended", "{context}");
            assert_eq!(
                after["runs"][0]["state"]["cause"]["reason"], "wait_expired",
                "{context}"
            );
            match approved.status.code() {
                Some(1) => {
                    let error: Value =
                        serde_json::from_str(approve_stderr.trim()).expect("a JSON error line");
                    assert_eq!(error["kind"], "resume", "{context}");
                    let why = error["resume_error"].as_str().unwrap_or_default();
                    assert!(["expired", "not_waiting"].contains(&why), "{context}");
                }
                Some(3 | 4) => {}
                other => panic!("approve exit {other:?}: {context}"),
            }
        }
    }
    println!(
        "approve won {} times, the deadline {} times ({late} of them applied by the late approval)",
        wins.0, wins.1
    );
}

#[test]
fn an_approval_and_the_deadline_at_the_same_instant_commit_once_on_sqlite() {
    let dir = TempDir::new("approve-vs-deadline");
    an_approval_and_the_deadline_at_the_same_instant_commit_once(&dir.sqlite("runs.db"), &dir);
}

#[test]
fn an_approval_and_the_deadline_at_the_same_instant_commit_once_on_postgres() {
    let Some(url) = postgres_store("approve_vs_deadline") else {
        return;
    };
    let dir = TempDir::new("approve-vs-deadline-pg");
    an_approval_and_the_deadline_at_the_same_instant_commit_once(&url, &dir);
}

// (g) Worker clocks ±10 minutes off the PostgreSQL server: the server's clock decides who owns a
// thread and what is due; the `now_ms` the workers pass (and put in their lines) changes nothing.

const SKEW_MS: u64 = 10 * 60 * 1_000;

/// An awaiting commit sequence for `thread` whose ticket's deadline is `deadline_ms`, in the
/// (Unix-epoch) clock of the host that made it.
fn awaiting_commits(thread: &str, made_at: u64, deadline_after_ms: u64) -> Vec<ThreadCommit> {
    let config = agent_config(json!({"thread_id":thread,"tools":{"deploy":{
        "policy":"require_approval","deadline_after_ms":deadline_after_ms}}}));
    let mut driver = runcore::driver::Driver::new();
    driver
        .apply(InputLine::new(Input::Config(config), Some(made_at)))
        .expect("config");
    let mut commits = Vec::new();
    let mut handle = |line: Value, commits: &mut Vec<ThreadCommit>| -> Vec<Value> {
        let out: Vec<Value> = driver
            .handle_line(line.to_string().as_bytes())
            .iter()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect();
        for l in &out {
            if l["type"] == "commit" {
                commits.push(serde_json::from_value(l["commit"].clone()).expect("a commit"));
            }
        }
        out
    };
    let out = handle(
        json!({"type":"prompt","text":"ship it","now_ms":made_at}),
        &mut commits,
    );
    let call = first(&out, "call_model").clone();
    let mut answer = model_tool(&call, "call-1", "deploy");
    answer["now_ms"] = json!(made_at);
    handle(answer, &mut commits);
    commits
}

#[test]
fn worker_clocks_ten_minutes_off_postgres_change_nothing() {
    let Some(url) = postgres_store("skew") else {
        return;
    };
    let mut store = runcore_postgres::PostgresStore::connect(&url).expect("connect");
    let thread = ThreadId::new("skewed");
    let claim = |owner: &str, lease_ms| ClaimRequest {
        thread_id: thread.clone(),
        owner: owner.into(),
        request_id: format!("{owner}-1"),
        lease_ms,
    };
    let real = now_ms();
    let (behind, ahead) = (real - SKEW_MS, real + SKEW_MS);
    // A worker 10 min behind claims for 60 s: the expiry is server time + 60 s.
    let granted = store
        .claim_thread(&claim("behind", 60_000), behind)
        .unwrap();
    let slack = 30_000;
    assert!(
        granted.expires_at_ms.abs_diff(real + 60_000) < slack,
        "server time decides the expiry: {granted:?} (local {real})"
    );
    // A worker 10 min ahead (for which that claim looks long expired) is refused.
    match store.claim_thread(&claim("ahead", 60_000), ahead) {
        Err(StoreError::Rejected(CommitError::ClaimHeld { owner, .. })) => {
            assert_eq!(owner, "behind")
        }
        other => panic!("expected ClaimHeld, got {other:?}"),
    }
    for clock in [behind, real, ahead] {
        assert_eq!(
            store.thread_claim(&thread, clock).unwrap().as_ref(),
            Some(&granted),
            "the live claim, whatever the caller's clock"
        );
    }
    // The holder renews with a clock 10 min ahead: same epoch, expiry from server time.
    let renewed = store.renew_claim(&granted, 60_000, ahead).unwrap();
    assert_eq!(renewed.epoch, granted.epoch);
    assert!(
        renewed.expires_at_ms.abs_diff(now_ms() + 60_000) < slack,
        "{renewed:?}"
    );
    // Its fenced commit, stamped with a clock 10 min ahead, lands.
    let commits = awaiting_commits("skewed", behind, 300_000);
    let mut version = 0;
    for (ordinal, commit) in commits.into_iter().enumerate() {
        let operation =
            CommitOperation::new(commit, ordinal as u64, version).claimed(renewed.token(), ahead);
        version = store
            .commit_operation(operation)
            .unwrap()
            .record
            .thread_version;
    }
    // What is due does not depend on the caller's clock either: an orphan only once the claim
    // is gone by server time, a deadline only once it passed by server time.
    let due =
        |store: &runcore_postgres::PostgresStore, clock: u64| -> Vec<(String, &'static str)> {
            store
                .due_work(clock, 100)
                .unwrap()
                .into_iter()
                .map(|d| (d.thread_id.as_str().to_owned(), d.reason.kind()))
                .collect()
        };
    // "skewed" awaits with a deadline the host made 10 min behind + 5 min: by server time
    // that passed 5 min ago, whatever clock the caller of due_work has.
    for clock in [behind, real, ahead] {
        assert_eq!(
            due(&store, clock),
            [("skewed".to_owned(), "deadline")],
            "{clock}"
        );
    }
    // A ticket made by a host on time with a 5 min deadline is due for nobody yet, not even
    // for a caller 10 min ahead.
    for (ordinal, commit) in awaiting_commits("on-time", real, 300_000)
        .into_iter()
        .enumerate()
    {
        let operation = CommitOperation::new(commit, ordinal as u64, ordinal as u64);
        store.commit_operation(operation).unwrap();
    }
    for clock in [behind, real, ahead] {
        assert_eq!(
            due(&store, clock),
            [("skewed".to_owned(), "deadline")],
            "{clock}"
        );
    }
    store.release_claim(&renewed, behind).unwrap();
    assert_eq!(store.thread_claim(&thread, behind).unwrap(), None);
    // After the release, the other worker (10 min ahead) is granted the next epoch.
    let next = store.claim_thread(&claim("ahead", 60_000), ahead).unwrap();
    assert_eq!(next.epoch, granted.epoch + 1);
    assert!(
        next.expires_at_ms.abs_diff(now_ms() + 60_000) < slack,
        "{next:?}"
    );
}

// (h) The durable driver's trust window passes while every renew fails because the store is
// unavailable (an error, not a refusal): it goes on acting while the window lasts (the store
// may come back), then ends itself with one `claim_lost` store line (no `current_epoch`: no
// store said who holds the thread now) and acts no further. Its claim is not released: the
// store decides when it expires.

#[test]
fn renews_that_fail_until_the_trust_window_passes_stop_the_driver() {
    let thread = ThreadId::new("t");
    let mut store = Hooked::new(MemoryStore::new());
    store.0.renew_fails = true;
    // Lease 1_000 from 0: renews due from 333, trusted until 800 (a fifth of margin).
    let (mut driver, started) = claimed_driver(store, AgentConfig::for_thread("t"), "w1", 1_000, 0);
    assert_eq!(started, [json!({"type":"idle","line":0})]);
    assert_eq!(driver.poll_renew(), Some(333));
    assert_eq!(driver.tick(400), None, "a failed renew inside the window");
    assert_eq!(driver.store().0.renews, 1);
    let out = send(
        &mut driver,
        json!({"type":"prompt","text":"hi","now_ms":400}),
    );
    assert_eq!(kinds(&out), ["commit", "event", "call_model", "idle"]);
    assert_eq!(driver.tick(799), None, "still inside the window");
    assert!(driver.store().0.renews >= 2, "it kept trying");
    let lost = driver.tick(800).expect("the window has passed");
    let lost: Value = serde_json::from_str(&lost).unwrap();
    assert_eq!(lost["type"], "error");
    assert_eq!(lost["line"], 1);
    assert_eq!(lost["error"]["kind"], "store");
    assert_eq!(lost["error"]["reason"], "claim_lost");
    assert_eq!(lost["error"].get("code"), None, "one field name: {lost}");
    assert_eq!(lost["error"]["epoch"], 1);
    assert!(lost["error"].get("current_epoch").is_none(), "{lost}");
    // Nothing more: no line is handled, no renew is due, no claim is trusted.
    let renews = driver.store().0.renews;
    let refused = driver.handle_line(json!({"type":"abort"}).to_string().as_bytes());
    assert_eq!(refused.map(|_| ()).unwrap_err().code, "claim_lost");
    assert_eq!(driver.tick(900), None);
    assert_eq!(driver.store().0.renews, renews, "no renew after the end");
    assert_eq!(driver.poll_renew(), None);
    assert_eq!(driver.claim(), None);
    let store = driver.into_store();
    assert_eq!(store.0.inner.thread_version(&thread).unwrap(), 1);
    let live = store.0.inner.thread_claim(&thread, 900).unwrap();
    assert_eq!(live.map(|c| c.owner), Some("w1".to_owned()), "not released");
}

/// Through the binary: drivers whose input lines' `now_ms` are 10 minutes ahead of or behind
/// the server. Their claims expire by server time (`show`), a second driver is refused while
/// one lives, its run is not due while it lives, and once it is killed the run becomes an
/// orphan when its lease runs out by server time, with `claim_expired_at_ms` in server time.
#[test]
fn drivers_whose_lines_are_ten_minutes_off_postgres_change_nothing() {
    let Some(url) = postgres_store("skewed_lines") else {
        return;
    };
    for (thread, lines_now) in [
        ("ahead", now_ms() + SKEW_MS),
        ("behind", now_ms() - SKEW_MS),
    ] {
        let owner = format!("w-{thread}");
        let mut worker = Drive::spawn(&[
            "--store",
            &url,
            "--thread",
            thread,
            "--owner",
            &owner,
            "--lease-ms",
            "1500",
        ]);
        let out = worker.send(json!({"type":"prompt","text":"hi","now_ms":lines_now}));
        assert!(kinds(&out).contains(&"call_model".to_owned()));
        let claim = show_json(&url, thread)["claim"].clone();
        assert_eq!(claim["owner"], owner.as_str());
        let expires = claim["expires_at_ms"].as_u64().expect("an expiry");
        assert!(
            expires.abs_diff(now_ms() + 1_500) < 1_500,
            "server time, not the lines' time: {claim}"
        );
        let output = Command::new(RUNCORE)
            .args([
                "drive", "--store", &url, "--thread", thread, "--owner", "other",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("run runcore drive");
        assert_eq!(output.status.code(), Some(4));
        worker.kill();
        let due = lines_of(&runcore(&["due", "--store", &url, "--json"]));
        assert!(due.is_empty(), "still live by server time: {due:?}");
        let started = std::time::Instant::now();
        let orphan = loop {
            let due = lines_of(&runcore(&["due", "--store", &url, "--json"]));
            if let Some(item) = due.into_iter().find(|d| d["thread_id"] == thread) {
                break item;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "never orphaned"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(orphan["reason"]["type"], "orphaned");
        let expired_at = orphan["reason"]["claim_expired_at_ms"]
            .as_u64()
            .expect("claim_expired_at_ms");
        assert!(
            expired_at.abs_diff(now_ms()) < 5_000,
            "in server time: {orphan}"
        );
        assert!(expired_at >= expires, "{orphan} {claim}");
        // The next worker takes it over with the next epoch and finishes it.
        let mut next = Drive::spawn(&["--store", &url, "--thread", thread, "--owner", "next"]);
        assert_eq!(show_json(&url, thread)["claim"]["epoch"], 2);
        let call = first(&next.start, "call_model").clone();
        let mut answer = model_text(&call, "Hello.");
        answer["now_ms"] = json!(lines_now);
        let out = next.send(answer);
        assert!(kinds(&out).contains(&"commit".to_owned()));
        assert!(next.finish().0.success());
    }
}
