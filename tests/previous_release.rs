//! What the previous release wrote still reads, hashes and recovers byte for byte (SPEC §2.1:
//! "a field that is absent is not serialized").
//!
//! `tests/fixtures/previous_release/session.in.jsonl` is a session with thinking, usage, message
//! ids, steering, two approvals, a compaction, a failed run and a run left awaiting; the
//! `.out.jsonl` beside it is what `runcore drive` of the release before §2.1 (commit 11280c9)
//! printed for it. Its commit lines are what that release stored.

use runcore::driver::{Driver, InputLine, StoreWrite};
use runcore::store::{CommitLog, CommittedThreadView, MemoryStore};
use runcore::{
    Agent, AgentConfig, Input, Output, PermissionDecision, RecoveryPolicy, ResumeResult, ThreadId,
};
use serde_json::Value;

const INPUT: &str = include_str!("fixtures/previous_release/session.in.jsonl");
const OUTPUT: &str = include_str!("fixtures/previous_release/session.out.jsonl");

fn config() -> AgentConfig {
    let first = INPUT.lines().next().expect("a config line");
    let line = InputLine::parse(first).expect("the config line parses");
    match line.input {
        Input::Config(config) => config,
        other => panic!("expected a config line, got {other:?}"),
    }
}

/// The same input lines give the same output lines, byte for byte — except for the one fact
/// added since: every agent commit now ends with a `commit_clock {now_ms, transcript_len}`
/// draft (SPEC §14). A commit line with that draft removed is the previous release's line
/// exactly, and its payload hash is the hash the previous release wrote.
#[test]
fn the_previous_release_session_prints_the_same_lines() {
    let mut driver = Driver::new();
    let mut got = Vec::new();
    for line in INPUT.lines() {
        got.extend(driver.handle_line(line.as_bytes()));
    }
    let want: Vec<&str> = OUTPUT.lines().collect();
    assert_eq!(got.len(), want.len(), "the number of output lines");
    for (index, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            without_commit_clock(got),
            *want,
            "output line {}",
            index + 1
        );
    }
}

/// `line` as the previous release printed it: a commit line without its trailing
/// `commit_clock` draft, with the payload hash of the commit that is left. Any other line
/// unchanged.
fn without_commit_clock(line: &str) -> String {
    const DRAFT: &str = r#"{"kind":"commit_clock","payload":{"#;
    let Some(mut start) = line.find(DRAFT) else {
        assert!(
            !line.contains(r#""type":"commit""#),
            "a commit without commit_clock: {line}"
        );
        return line.to_owned();
    };
    let end = line[start..]
        .find("}}")
        .map(|at| start + at + 2)
        .expect("the draft closes");
    // It is the last draft: drop the comma before it, if another one precedes it.
    if line[..start].ends_with(',') {
        start -= 1;
    }
    let stripped = format!("{}{}", &line[..start], &line[end..]);
    let value: Value = serde_json::from_str(&stripped).expect("JSON");
    let commit: runcore::ThreadCommit =
        serde_json::from_value(value["commit"].clone()).expect("the commit reads");
    let old_hash = value["payload_hash"].as_str().expect("a payload hash");
    stripped.replace(old_hash, &commit.payload_hash())
}

/// Every stored commit of the previous release reads back and re-serializes to the same bytes,
/// hashes to the payload hash it was stored with, and the store it builds recovers.
#[test]
fn previous_release_commits_hash_and_recover_unchanged() {
    let mut store = MemoryStore::new();
    let mut commits = 0;
    for line in OUTPUT.lines() {
        let value: Value = serde_json::from_str(line).expect("JSON");
        if value["type"] != "commit" {
            continue;
        }
        let stored = value["commit"].clone();
        // `from_output_line` recomputes the payload hash with this release's code and refuses
        // the line when it differs from the one the previous release wrote.
        let write = StoreWrite::from_output_line(value).expect("the commit line reads");
        let StoreWrite::Fenced(operation) = write else {
            panic!("the driver writes fenced commit lines");
        };
        assert_eq!(
            serde_json::to_value(&operation.commit).expect("JSON"),
            stored,
            "commit {commits} reads back whole (its bytes: the output-line test above)"
        );
        store
            .commit_operation(operation)
            .expect("the store takes it");
        commits += 1;
    }
    assert!(commits >= 10, "the fixture holds the session's commits");

    let thread = ThreadId::new("legacy");
    let mut agent = Agent::recover(config(), &store, &thread, RecoveryPolicy::Replay)
        .expect("the previous release's store recovers");
    // Recovered as the warm agent left it: awaiting the approval of c4 in run 3.
    assert_eq!(
        agent.transcript(),
        store.committed_messages(&thread).unwrap().as_slice()
    );
    let ticket = agent.current_ticket().cloned().expect("awaiting a ticket");
    assert_eq!(ticket.run_id.as_str(), "legacy/run-3");
    // A snapshot of it restores to the same agent.
    let snapshot = agent.snapshot();
    let restored = Agent::restore(snapshot.clone()).expect("restores");
    assert_eq!(restored.snapshot(), snapshot);
    // And it goes on: the approval executes the call.
    agent
        .resume_ticket(
            ResumeResult::Permission(PermissionDecision::Allow { note: None }),
            Some(4000),
        )
        .expect("resumes");
    let outputs: Vec<Output> = std::iter::from_fn(|| agent.poll()).collect();
    assert!(
        matches!(outputs.last(), Some(Output::Action(runcore::Action::ExecuteTools { calls, .. })) if calls.len() == 1 && calls[0].id.as_str() == "c4"),
        "the recovered run executes c4 after the approval: {outputs:?}"
    );
}
