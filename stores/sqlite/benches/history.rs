//! Threads that begin with history (SPEC §8.10) on SQLite: import, recovery of an imported
//! thread, and a fork in the middle of a long thread.
//!
//! - **Import of 100,000 messages**: an idle agent imports 25,000 exchanges (a user message, an
//!   assistant message with one tool call, its result and a text answer: 100,000 messages),
//!   and its one commit is applied to a fresh SQLite store (`Synchronous::Full`). Timed: the
//!   agent's `import` (the completeness checks and the commit's assembly), the payload hash, and
//!   the store's `commit_operation`, each, and in all. The median of 3 rounds.
//! - **Recovery** of that thread (`Agent::recover`, Replay) from a freshly opened connection.
//!   The median of 3 rounds.
//! - **Fork at version 50,000 of a 100,000-message thread**: a thread of 50,000 runs (a prompt
//!   and an answer each: 100,000 commits, 100,000 messages) is written once; then
//!   `fork_thread` at version 50,000 onto a new thread, timed, 3 times (3 new threads).
//!
//! ```sh
//! cargo bench -p runcore-sqlite --bench history
//! ```
//!
//! Figures: see `RESULTS.md` beside this file.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use runcore::host::fork_thread;
use runcore::host::script::{self, ModelOnly, ModelTurn};
use runcore::store::CommitLog;
use runcore::{
    Agent, AgentConfig, AssistantBlock, AssistantMessage, Message, ModelRequest, Output,
    RecoveryPolicy, ResultOutcome, StopReason, ThreadId, ToolResultMessage, UserMessage,
};
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use serde_json::json;
use tempfile::TempDir;

fn history(exchanges: usize) -> Vec<Message> {
    let mut messages = Vec::with_capacity(exchanges * 4);
    for i in 0..exchanges {
        let call = format!("c{i}");
        messages.push(Message::from(UserMessage::text(format!("question {i}"))));
        messages.push(Message::from(AssistantMessage::new(
            vec![
                AssistantBlock::thinking(format!("Look it up ({i}).")),
                AssistantBlock::tool_call(call.as_str(), "lookup", json!({"q": i})),
            ],
            StopReason::ToolUse,
        )));
        messages.push(Message::from(ToolResultMessage::synthetic(
            call.as_str().into(),
            "lookup",
            ResultOutcome::Executed,
            format!("result {i}"),
        )));
        messages.push(Message::from(AssistantMessage::text(format!(
            "The answer to {i} is {}.",
            i * 7
        ))));
    }
    messages
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn import_and_recover(dir: &TempDir) {
    let messages = history(25_000);
    let (mut agent_t, mut hash_t, mut store_t, mut total_t, mut recover_t) =
        (vec![], vec![], vec![], vec![], vec![]);
    for round in 0..3 {
        let path = dir.path().join(format!("import-{round}.sqlite"));
        let options = SqliteOptions::default().with_synchronous(Synchronous::Full);
        let mut store = SqliteStore::open(&path, options.clone()).expect("a fresh store");
        let thread = format!("imported-{round}");
        let mut agent = Agent::new(AgentConfig::for_thread(thread.as_str())).expect("config");
        let batch = messages.clone();
        let started = Instant::now();
        agent.import(batch, 1).expect("a complete transcript");
        let Some(Output::Commit(commit)) = agent.poll() else {
            panic!("the import's commit first")
        };
        let imported = started.elapsed();
        let hashing = Instant::now();
        let operation = commit.into_operation();
        let hashed = hashing.elapsed();
        let writing = Instant::now();
        store.commit_operation(operation).expect("stored");
        let written = writing.elapsed();
        agent_t.push(imported);
        hash_t.push(hashed);
        store_t.push(written);
        total_t.push(started.elapsed());
        drop(store);

        let started = Instant::now();
        let store = SqliteStore::open(&path, options).expect("reopen");
        let recovered = Agent::recover(
            AgentConfig::for_thread(thread.as_str()),
            &store,
            &ThreadId::new(thread.as_str()),
            RecoveryPolicy::Replay,
        )
        .expect("recovers");
        recover_t.push(started.elapsed());
        assert_eq!(recovered.transcript().len(), 100_000);
    }
    println!(
        "import of 100,000 messages into SQLite (FULL): {} in all (agent {}, payload hash {}, \
         store {}); recovery from a fresh connection: {}",
        ms(median(total_t)),
        ms(median(agent_t)),
        ms(median(hash_t)),
        ms(median(store_t)),
        ms(median(recover_t)),
    );
}

fn fork_in_the_middle(dir: &TempDir) {
    let path = dir.path().join("fork.sqlite");
    let mut store = SqliteStore::open(
        &path,
        SqliteOptions::default().with_synchronous(Synchronous::Normal),
    )
    .expect("a fresh store");
    let mut agent = Agent::new(AgentConfig::for_thread("long")).expect("config");
    let building = Instant::now();
    for i in 0..50_000u64 {
        agent
            .prompt(UserMessage::text(format!("question {i}")), i)
            .expect("idle");
        let mut commit = |_: &Agent, output: &Output| {
            if let Output::Commit(commit) = output {
                store
                    .commit_operation(commit.clone().into_operation())
                    .expect("stored");
            }
            Ok::<(), Infallible>(())
        };
        let mut answer = ModelOnly(|_: &ModelRequest<'_>| {
            ModelTurn::answer(AssistantMessage::text(format!("answer {i}")))
        });
        script::serve(&mut agent, &mut answer, &mut commit).expect("served");
    }
    println!(
        "(a thread of 100,000 commits and 100,000 messages written in {})",
        ms(building.elapsed())
    );
    let mut times = Vec::new();
    for round in 0..3 {
        let started = Instant::now();
        let forked = fork_thread(
            &mut store,
            &ThreadId::new("long"),
            50_000,
            &ThreadId::new(format!("fork-{round}")),
            1,
        )
        .expect("forked");
        times.push(started.elapsed());
        assert_eq!(forked.version, 1);
    }
    println!(
        "fork at version 50,000 of a 100,000-message thread (50,000 messages copied): {}",
        ms(median(times))
    );
}

fn main() {
    let dir = TempDir::new().expect("a temporary directory");
    import_and_recover(&dir);
    fork_in_the_middle(&dir);
}
