//! Recovery and snapshots.
//!
//! - recovering a thread of 100,000 committed messages, alone in the store and beside 1,000
//!   other threads (recovery is linear in the thread's own history, independent of the rest);
//! - snapshot size and serialize / restore time of an agent holding 10,000 messages.
//!
//! Run with `cargo bench --bench recovery`.

mod support;

use runcore::host::script::{self, ModelOnly, ModelTurn};
use runcore::store::{CommitLog, MemoryStore, StoreError};
use runcore::{
    Agent, AgentConfig, AssistantMessage, ModelRequest, Output, RecoveryPolicy, ThreadId,
    UserMessage,
};
use support::{per_item, report, time};

/// Runs `runs` short runs (2 messages each) on `thread`, committing into `store`; returns the
/// agent.
fn fill(store: &mut MemoryStore, thread: &str, runs: u32) -> Agent {
    let mut agent = Agent::new(AgentConfig::for_thread(thread)).expect("valid config");
    let mut commit = |_: &Agent, output: &Output| match output {
        Output::Commit(commit) => store
            .commit_operation(commit.as_ref().clone().into_operation())
            .map(drop),
        _ => Ok::<(), StoreError>(()),
    };
    for i in 0..runs {
        agent
            .prompt(UserMessage::text(format!("question {i}")), u64::from(i))
            .expect("idle");
        let mut answer = ModelOnly(|_: &ModelRequest<'_>| {
            ModelTurn::answer(AssistantMessage::text(format!("answer {i}")))
        });
        script::serve(&mut agent, &mut answer, &mut commit).expect("served");
    }
    agent
}

fn main() {
    println!("recovery (min of 5 rounds)");
    let thread = ThreadId::new("big");
    let mut alone = MemoryStore::new();
    fill(&mut alone, "big", 50_000);
    let mut crowded = MemoryStore::new();
    for t in 0..1_000 {
        fill(&mut crowded, &format!("other-{t}"), 20);
    }
    fill(&mut crowded, "big", 50_000);
    let config = AgentConfig::for_thread("big");
    let recover = |store: &MemoryStore| {
        let agent = Agent::recover(config.clone(), store, &thread, RecoveryPolicy::Replay)
            .expect("recovers");
        assert_eq!(agent.transcript().len(), 100_000);
        agent
    };
    let (alone_time, _) = time(5, || recover(&alone));
    let (crowded_time, _) = time(5, || recover(&crowded));
    report(
        "recover a thread of 100,000 messages, alone",
        format!("{alone_time:.2?}"),
    );
    report(
        "same, beside 1,000 other threads (40,000 messages)",
        format!("{crowded_time:.2?}"),
    );
    report("per message (alone)", per_item(alone_time, 100_000));

    println!("\nagent snapshot, 10,000 messages (min of 5 rounds)");
    let mut scratch = MemoryStore::new();
    let agent = fill(&mut scratch, "snap", 5_000);
    assert_eq!(agent.transcript().len(), 10_000);
    let json = agent.snapshot_json();
    report("snapshot size", format!("{} bytes", json.len()));
    let (serialize, _) = time(5, || agent.snapshot_json().len());
    let (restore, _) = time(5, || Agent::restore_json(&json).expect("restores"));
    report("serialize (snapshot_json)", format!("{serialize:.2?}"));
    report("restore (restore_json)", format!("{restore:.2?}"));
}
