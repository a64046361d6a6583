//! Compaction (SPEC §8.9): what a long thread's model step costs before and after it is
//! compacted, and what recovering the compacted thread costs.
//!
//! - one step in full context (a prompt, its `call_model` line rendered as the driver writes
//!   it, the model's answer, every output drained and rendered) on a thread of 100,000
//!   messages; the same after compacting it to a summary plus the last 20 messages; and on a
//!   thread of 21 messages (the target: after compaction the step costs what the 21-message
//!   thread costs, within 2×);
//! - recovering the compacted thread of 100,000 messages from a `MemoryStore` (target ≤ 1 s).
//!
//! Run with `cargo bench --bench compaction`.

mod support;

use runcore::driver::{ContextMode, SentContext, render_output_line};
use runcore::host::script::{self, ModelOnly, ModelTurn};
use runcore::store::{CommitLog, MemoryStore, StoreError};
use runcore::{
    Agent, AgentConfig, AssistantMessage, ModelRequest, Output, RecoveryPolicy, ThreadId,
    UserMessage,
};
use std::time::Duration;

use support::{per_item, report, time};

/// Drains `agent` as a durable driver host does: commits applied to `store`, every output
/// rendered as its line; the model call answered when `answer` is set. Returns the bytes
/// written.
fn step(agent: &mut Agent, store: &mut MemoryStore, answer: bool, sent: &mut SentContext) -> usize {
    drain(agent, store, answer, Some(sent))
}

/// [`step`], rendering the lines only when `sent` is given (building a long thread renders
/// nothing: that would cost the square of its length). With `answer`, every model call is
/// answered ([`script::serve`]); without, the call handed out is left waiting.
fn drain(
    agent: &mut Agent,
    store: &mut MemoryStore,
    answer: bool,
    mut sent: Option<&mut SentContext>,
) -> usize {
    let mut bytes = 0;
    let mut sink = |agent: &Agent, output: &Output| {
        if let Some(sent) = sent.as_deref_mut() {
            bytes += render_output_line(agent, output, ContextMode::Full, sent).len();
        }
        match output {
            Output::Commit(commit) => store
                .commit_operation(commit.as_ref().clone().into_operation())
                .map(drop),
            _ => Ok::<(), StoreError>(()),
        }
    };
    if answer {
        let mut model =
            ModelOnly(|_: &ModelRequest<'_>| ModelTurn::answer(AssistantMessage::text("answer")));
        script::serve(agent, &mut model, &mut sink).expect("served");
    } else {
        script::drain(agent, &mut sink).expect("drained");
    }
    bytes
}

/// A thread of `runs` two-message runs, committed into a new store.
fn thread_of(thread: &str, runs: u32) -> (Agent, MemoryStore) {
    let mut store = MemoryStore::new();
    let mut agent = Agent::new(AgentConfig::for_thread(thread)).expect("valid config");
    for i in 0..runs {
        agent
            .prompt(UserMessage::text(format!("question {i}")), u64::from(i))
            .expect("idle");
        drain(&mut agent, &mut store, true, None);
    }
    (agent, store)
}

/// Compacts `agent` at its next model call to a summary plus its last `keep` messages, and
/// lets the run finish.
fn compact(agent: &mut Agent, store: &mut MemoryStore, keep: usize) {
    let mut sent = SentContext::default();
    agent
        .prompt(UserMessage::text("one more"), 1_000_000)
        .expect("idle");
    step(agent, store, false, &mut sent);
    let keep_from = agent.transcript().len() - keep;
    let summary = UserMessage::text("Summary of the 100,000 messages so far.");
    agent
        .compact(summary, keep_from, 1_000_001)
        .expect("compacts");
    step(agent, store, true, &mut sent);
}

/// The time of one step (a prompt and its answered `call_model`), min and median of `rounds`
/// steps on `agent` (each step adds two messages).
fn steps(agent: &mut Agent, store: &mut MemoryStore, rounds: usize) -> (Duration, Duration) {
    let mut sent = SentContext::default();
    time(rounds, || {
        agent
            .prompt(UserMessage::text("next"), 2_000_000)
            .expect("idle");
        step(agent, store, true, &mut sent)
    })
}

fn main() {
    println!("compaction: one call_model step in full context (min / median of 20 steps)");
    let (mut long, mut long_store) = thread_of("long", 50_000);
    assert_eq!(long.transcript().len(), 100_000);
    let (before_min, before_median) = steps(&mut long, &mut long_store, 20);
    report(
        "100,000-message thread, not compacted",
        format!("{before_min:.2?} / {before_median:.2?}"),
    );

    compact(&mut long, &mut long_store, 20);
    assert_eq!(long.context_start(), long.transcript().len() - 21);
    let (after_min, after_median) = steps(&mut long, &mut long_store, 20);
    report(
        "same thread compacted to a summary + the last 20 messages",
        format!("{after_min:.2?} / {after_median:.2?}"),
    );

    // 10 runs and a prompt: a 21-message context at its first step.
    let (mut short, mut short_store) = thread_of("short", 10);
    let (short_min, short_median) = steps(&mut short, &mut short_store, 20);
    report(
        "a 21-message thread",
        format!("{short_min:.2?} / {short_median:.2?}"),
    );
    let ratio = after_median.as_secs_f64() / short_median.as_secs_f64();
    report(
        "compacted / 21-message (median; target ≤ 2×)",
        format!("{ratio:.2}×"),
    );
    let speedup = before_median.as_secs_f64() / after_median.as_secs_f64();
    report(
        "not compacted / compacted (median)",
        format!("{speedup:.0}×"),
    );

    println!("\nrecovery of the compacted thread (min / median of 5 rounds)");
    let messages = long.transcript().len();
    let config = AgentConfig::for_thread("long");
    let thread = ThreadId::new("long");
    let (recover_min, recover_median) = time(5, || {
        let agent = Agent::recover(config.clone(), &long_store, &thread, RecoveryPolicy::Replay)
            .expect("recovers");
        assert_eq!(agent.context_start(), long.context_start());
        agent
    });
    report(
        &format!("recover {messages} messages, compacted (target ≤ 1 s)"),
        format!("{recover_min:.2?} / {recover_median:.2?}"),
    );
    report("per message", per_item(recover_min, messages));
}
