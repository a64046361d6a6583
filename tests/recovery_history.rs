//! Recovery reads the thread's whole audit history (SPEC §8.7), page by page.
//!
//! `Agent::recover` pages through the thread's events 1,024 at a time. These tests put the head
//! run's facts (its `run_started`, a permission decision, a host's clock reading) where only a
//! reader that pages correctly finds them, and count the pages read; they were written against
//! the mutants cargo-mutants left alive in `src/agent/recover.rs` (see docs/mutants.md).

mod common;

use std::cell::Cell;

use common::harness::{Harness, Reply};
use runcore::store::*;
use runcore::*;
use serde_json::json;

/// The page size of `recover.rs`'s history reader.
const PAGE: usize = 1024;

fn thread() -> ThreadId {
    ThreadId::new("thread-1")
}

/// `ask` needs approval and never expires.
fn config() -> AgentConfig {
    AgentConfig::default().with_tool("ask", ToolSpec::gated("ask a person", None))
}

fn event_count(store: &MemoryStore) -> usize {
    store
        .list_events(&EventScope::Thread(thread()), None, usize::MAX)
        .unwrap()
        .len()
}

/// The thread's events in store order, as (sequence index from 1, run id, kind).
fn event_positions(store: &MemoryStore) -> Vec<(usize, RunId, String)> {
    store
        .list_events(&EventScope::Thread(thread()), None, usize::MAX)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, e)| (i + 1, e.run_id, e.kind))
        .collect()
}

/// `fillers` runs that each answer one prompt and end, then a head run with two gated calls
/// `[c1 ask, c2 ask]`: c1 is allowed, and the process crashes right after that decision is
/// committed (before c2's ticket is).
fn history_then_decision(fillers: usize) -> Harness {
    let mut h = Harness::new(config());
    for _ in 0..fillers {
        h.script([Reply::text("ok")]);
        h.prompt("filler").unwrap();
        h.drive();
        assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    }
    h.script([
        Reply::calls(&[("c1", "ask"), ("c2", "ask")]),
        Reply::text("done"),
    ]);
    h.prompt("two questions").unwrap();
    h.drive();
    h.crash_after_commits = Some(h.commits.len() + 1);
    h.resume(ResumeResult::allow()).unwrap();
    assert!(h.crashed);
    h
}

/// Where the head run's `run_started` and its `permission_decided` sit in the thread's events.
fn head_positions(store: &MemoryStore) -> (usize, usize) {
    let head = store.latest_run(&thread()).unwrap().expect("a head run").id;
    let find = |kind: &str| {
        event_positions(store)
            .into_iter()
            .find(|(_, run, k)| *run == head && k == kind)
            .map(|(i, _, _)| i)
            .unwrap_or_else(|| panic!("the head run has a {kind} event"))
    };
    (find("run_started"), find("permission_decided"))
}

/// The recovered agent honours c1's committed approval (it asks c2, not c1, and then runs
/// both), which it can only do if it read the head run's events wherever they are.
fn assert_recovers_the_decision(h: &Harness) {
    let mut cold = Harness::recover(config(), h.store.clone(), RecoveryPolicy::Replay)
        .expect("recovery finds the head run's run_started on any page");
    assert_eq!(
        cold.agent
            .current_ticket()
            .and_then(|t| t.target().call_id())
            .map(|c| c.as_str().to_owned())
            .as_deref(),
        Some("c2"),
        "c1's approval is read back, so only c2 is asked"
    );
    cold.script([Reply::text("done")]);
    cold.resume(ResumeResult::allow()).unwrap();
    let pending: Vec<&str> = cold
        .pending_tools
        .iter()
        .map(|(_, c)| c.id.as_str())
        .collect();
    assert_eq!(pending, ["c1", "c2"]);
    cold.drive();
    assert_eq!(cold.last_cause(), &EndCause::NaturalEnd);
}

#[test]
fn recover_reads_the_head_runs_facts_past_the_first_page_of_events() {
    // Events one filler run writes, and how many come before the head run's decision.
    let per_filler =
        event_count(&history_then_decision(1).store) - event_count(&history_then_decision(0).store);
    assert!(per_filler > 0);
    let (started0, decided0) = head_positions(&history_then_decision(0).store);
    assert!(started0 < decided0);

    // The smallest filler count that puts the decision past the first page, and one more
    // for every event between the run start and the decision: across them the page boundary
    // falls between run_started and the decision, then before both.
    let first = (PAGE + 1 - decided0).div_ceil(per_filler);
    let last = (PAGE + 1 - started0).div_ceil(per_filler);
    let mut straddled = false;
    let mut both_past = false;
    for fillers in first..=last {
        let h = history_then_decision(fillers);
        let (started, decided) = head_positions(&h.store);
        assert!(
            decided > PAGE,
            "{fillers} fillers: the decision is past page 1"
        );
        straddled |= started <= PAGE;
        both_past |= started > PAGE;
        assert_recovers_the_decision(&h);
    }
    assert!(
        straddled,
        "a scenario with run_started on page 1, the decision on page 2"
    );
    assert!(both_past, "a scenario with the whole head run past page 1");
}

/// Commits `n` host events on the thread under a run of their own that ends at once (an
/// unfenced host commit), so they count as thread events but belong to no agent run.
fn host_events(store: &mut MemoryStore, n: usize) {
    let run_id = RunId::new("host/notes");
    let drafts = (0..n)
        .map(|i| AuditDraft::new("host_note", json!({ "i": i })))
        .collect();
    let commit = ThreadCommit::assemble(
        thread(),
        RunDisposition::Ended {
            run_id,
            cause: EndCause::NaturalEnd,
        },
        false,
        Vec::new(),
        Vec::new(),
        drafts,
    );
    store.commit(commit).unwrap();
}

/// A reader that counts how many pages recovery asks for.
struct CountingReader {
    inner: MemoryStore,
    pages: Cell<usize>,
}

impl Intercept for CountingReader {
    type Inner = MemoryStore;
    fn inner(&self) -> &MemoryStore {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut MemoryStore {
        &mut self.inner
    }
    fn list_events(
        &self,
        scope: &EventScope,
        from: Option<u64>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.pages.set(self.pages.get() + 1);
        self.inner.list_events(scope, from, limit)
    }
}

fn pages_read(store: &MemoryStore) -> usize {
    let reader = Intercepted(CountingReader {
        inner: store.clone(),
        pages: Cell::new(0),
    });
    Agent::recover(config(), &reader, &thread(), RecoveryPolicy::Replay).expect("recovers");
    reader.0.pages.get()
}

#[test]
fn recover_stops_paging_at_the_first_short_page() {
    // An empty thread: one (empty) page. A short history: one page. A history past one page:
    // two pages, the second short, and no third read.
    assert_eq!(pages_read(&MemoryStore::new()), 1);
    let short = history_then_decision(0);
    assert!(event_count(&short.store) < PAGE);
    assert_eq!(
        pages_read(&short.store),
        1,
        "a short first page is the last"
    );
    let mut long = history_then_decision(0).store;
    host_events(&mut long, PAGE);
    let total = event_count(&long);
    assert!(total > PAGE && total < 2 * PAGE);
    assert_eq!(pages_read(&long), 2, "a short second page is the last");
}

#[test]
fn recover_takes_the_clock_from_a_host_event_of_the_head_run() {
    // The head run starts at 1,000; a host event committed with its first commit says 7,000.
    let mut agent = Agent::new(config()).unwrap();
    let mut store = MemoryStore::new();
    agent
        .handle(
            Input::Prompt {
                message: Some(UserMessage::text("hi")),
                run_id: None,
                messages: Vec::new(),
            },
            1_000,
        )
        .unwrap();
    let mut committed = 0;
    while let Some(output) = agent.poll() {
        if let Output::Commit(mut commit) = output {
            commit
                .commit
                .events
                .push(AuditDraft::new("host_clock", json!({ "now_ms": 7_000 })));
            store.commit_operation(commit.into_operation()).unwrap();
            committed += 1;
        }
    }
    assert_eq!(
        committed, 1,
        "the run's first commit, then the model call is out"
    );
    assert_eq!(agent.clock_ms(), 1_000);

    let cold = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).unwrap();
    assert_eq!(
        cold.clock_ms(),
        7_000,
        "the latest clock reading among the head run's events, a host's included"
    );
}

/// A thread written by another writer: its run 1 started at message 0 with `messages` (and
/// no clock reading), with `extra` drafts on the same commit.
fn written_elsewhere(messages: Vec<Message>, extra: Vec<AuditDraft>) -> MemoryStore {
    let run_id = RunId::new("thread-1/run-1");
    let mut drafts = vec![AuditDraft::run_started(&run_id, 0)];
    drafts.extend(extra);
    let mut store = MemoryStore::new();
    let running = ThreadCommit::assemble(
        thread(),
        RunDisposition::Running { run_id },
        false,
        messages,
        Vec::new(),
        drafts,
    );
    store.commit(running).unwrap();
    store
}

fn compacted(keep_from: usize, transcript_len: usize, now_ms: u64) -> AuditDraft {
    AuditDraft::Compacted {
        keep_from,
        transcript_len,
        summary: std::sync::Arc::new(UserMessage::text("the story so far")),
        now_ms: Some(now_ms),
    }
}

#[test]
fn recover_rebuilds_a_compaction_that_keeps_no_message_and_takes_its_clock() {
    // keep_from == the transcript's length is a compaction that keeps nothing after the
    // summary: the model context is the summary alone. Its clock reading is the run's latest.
    let store = written_elsewhere(vec![Message::user("tidy")], vec![compacted(1, 1, 5_000)]);
    let mut cold = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay)
        .expect("a compaction up to the transcript's end is accepted");
    assert_eq!(cold.clock_ms(), 5_000, "the compaction's clock reading");
    while cold.poll().is_some() {}
    let request = cold.model_request().expect("the next model call is out");
    assert!(request.summary.is_some(), "the summary opens the context");
    assert!(
        request.messages.is_empty(),
        "no message is kept after the summary"
    );
}

#[test]
fn recover_refuses_a_compaction_past_the_transcript() {
    let store = written_elsewhere(vec![Message::user("tidy")], vec![compacted(2, 1, 5_000)]);
    let err = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).unwrap_err();
    assert!(matches!(&err, RecoverError::Invalid(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("keeps from message 2, past the transcript (1 messages)"),
        "{err}"
    );
}

#[test]
fn recover_refuses_a_call_wait_when_no_call_is_open() {
    // The run's last message is the prompt: no call is open, yet the committed ticket waits on
    // one. Recovery says so (not that the assistant message lacks that call: there is none).
    let mut store = written_elsewhere(vec![Message::user("tidy")], Vec::new());
    let cfg = config();
    let identity = WaitIdentity {
        correlation_id: "thread-1/run-1:wait-1".into(),
        run_id: RunId::new("thread-1/run-1"),
        thread_id: thread(),
        snapshot_id: cfg.snapshot_id,
        catalog_fingerprint: cfg.catalog_fingerprint,
    };
    let target = AwaitTarget::ToolCall {
        reason: ToolWaitReason::Permission,
        call_id: CallId::new("c1"),
        tool: PendingTool {
            name: "ask".into(),
            arguments: json!({}).into(),
        },
    };
    let ticket = ResumeTicket::new(identity, target, None);
    let awaiting = ThreadCommit::assemble(
        thread(),
        RunDisposition::Awaiting(Box::new(ticket)),
        true,
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    store.commit(awaiting).unwrap();
    let err = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).unwrap_err();
    assert!(matches!(&err, RecoverError::Invalid(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("waits on call c1, but no tool calls are open"),
        "{err}"
    );
}

/// Starts a durable driver on `thread` over `store`, hands it `lines`, and gives the store
/// back with the run ids of the commits made (the process stops after each call).
fn drive_lines(
    store: MemoryStore,
    thread: &str,
    lines: &[serde_json::Value],
) -> (MemoryStore, Vec<String>) {
    use runcore::host::{DurableDriver, DurableOptions};
    let options = DurableOptions::new(AgentConfig::for_thread(thread));
    let (mut driver, started) = DurableDriver::start(store, options).unwrap();
    assert_eq!(started.refused, None);
    let mut runs = Vec::new();
    for line in lines {
        let handled = driver.handle_line(line.to_string().as_bytes()).unwrap();
        assert_eq!(handled.refused, None, "{line}: {:?}", handled.lines);
        for text in handled.lines {
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            if value["type"] == "commit" {
                runs.push(
                    value["commit"]["run"]["run_id"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                );
            }
        }
    }
    (driver.into_store(), runs)
}

/// Imports and forks commit whole runs without a `run_started` event; after a restart their
/// run ids are still used, so the recovered agent mints the next free one (before, the third
/// import by a restarted driver minted `t/run-1` again and the store refused it).
#[test]
fn recover_counts_the_run_ids_of_imports_and_forks_as_used() {
    let import = json!({"type":"import","messages":[
        {"role":"user","content":[{"type":"text","text":"hi"}]},
        {"role":"assistant","content":[{"type":"text","text":"hello"}],"stop_reason":"stop"}]});
    let mut store = MemoryStore::new();
    for n in 1..=3 {
        let (next, runs) = drive_lines(store, "t", std::slice::from_ref(&import));
        assert_eq!(runs, [format!("t/run-{n}")]);
        store = next;
    }
    runcore::host::fork_thread(&mut store, &ThreadId::new("t"), 3, &ThreadId::new("f"), 5).unwrap();
    let (store, runs) = drive_lines(store, "f", std::slice::from_ref(&import));
    assert_eq!(runs, ["f/run-2"]);
    let (_, runs) = drive_lines(store, "f", std::slice::from_ref(&import));
    assert_eq!(runs, ["f/run-3"]);
}
