//! Property: any sequence of imports, multi-message prompts, runs and forks keeps every
//! invariant, against a naive reference (SPEC §8.10).
//!
//! The reference is a plain `Vec<Message>` per thread: what each accepted input appends, in
//! order. After every step: the agent's transcript is the reference; every call is paired in
//! call order (an open batch only while tools are out); message ids are unique; the store holds
//! what the agent committed; an agent recovered from the store — from every prefix of the
//! commits, as after a crash at any commit — has the committed transcript of that prefix and
//! asks the model what the warm one asked. A fork at a random version holds exactly the
//! parent's messages as of it (or is refused because a call is unanswered there), leaves the
//! parent unchanged, and, given the parent's later inputs, produces the parent's later messages.

mod common;

use std::collections::BTreeSet;

use proptest::prelude::*;
use runcore::host::fork_thread;
use runcore::store::{CommitLog, CommittedThreadView, MemoryStore};
use runcore::{
    Agent, AgentConfig, AssistantBlock, AssistantMessage, CommitOperation, Message, Output,
    RecoveryPolicy, ResultOutcome, StopReason, ThreadId, ToolOutput, ToolResultMessage,
    UserMessage,
};
use serde_json::json;

use common::harness::check_pairing;

/// One step of a session.
#[derive(Debug, Clone)]
enum Step {
    /// Import `exchanges` exchanges, some with tool calls, some messages with ids.
    Import { exchanges: u8, with_ids: bool },
    /// Prompt with one message, or several.
    Prompt { messages: u8 },
    /// The model answers text.
    Text,
    /// The model answers with `calls` tool calls.
    Calls { calls: u8 },
    /// The host answers every executing call, in the given rotation of call order.
    ToolResults { rotate: u8 },
    /// Fork the thread at version `at % (version + 1)` (0 included: refused).
    Fork { at: u16 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (1u8..4, any::<bool>()).prop_map(|(exchanges, with_ids)| Step::Import { exchanges, with_ids }),
        3 => (1u8..4).prop_map(|messages| Step::Prompt { messages }),
        3 => Just(Step::Text),
        3 => (1u8..4).prop_map(|calls| Step::Calls { calls }),
        3 => any::<u8>().prop_map(|rotate| Step::ToolResults { rotate }),
        2 => any::<u16>().prop_map(|at| Step::Fork { at }),
    ]
}

/// A session under test: the agent, its store, the reference, every operation committed.
struct Session {
    thread: ThreadId,
    agent: Agent,
    store: MemoryStore,
    reference: Vec<Message>,
    operations: Vec<CommitOperation>,
    /// Every accepted input after the start, for replaying onto a fork.
    inputs: Vec<(u64, Replay)>,
    next_id: u32,
}

/// An input as the parent got it, with the thread version it was given at.
#[derive(Debug, Clone)]
enum Replay {
    Prompt(Vec<UserMessage>),
    Import(Vec<Message>),
    Answer(AssistantMessage),
    Results(Vec<ToolOutput>),
}

impl Session {
    fn new(thread: &str) -> Session {
        Session {
            thread: ThreadId::new(thread),
            agent: Agent::new(AgentConfig::for_thread(thread)).expect("config"),
            store: MemoryStore::new(),
            reference: Vec::new(),
            operations: Vec::new(),
            inputs: Vec::new(),
            next_id: 0,
        }
    }

    fn settle(&mut self) {
        while let Some(output) = self.agent.poll() {
            if let Output::Commit(commit) = output {
                let operation = commit.into_operation();
                self.store
                    .commit_operation(operation.clone())
                    .expect("the store takes every commit");
                self.operations.push(operation);
            }
        }
    }

    fn version(&self) -> u64 {
        self.store.thread_version(&self.thread).expect("memory")
    }

    fn id(&mut self) -> String {
        self.next_id += 1;
        format!("m{}", self.next_id)
    }
}

fn exchanges(session: &mut Session, n: u8, with_ids: bool) -> Vec<Message> {
    let mut messages = Vec::new();
    for i in 0..n {
        let id = with_ids.then(|| session.id());
        messages.push(Message::from(UserMessage {
            id,
            ..UserMessage::text(format!("imported {i}"))
        }));
        if i % 2 == 0 {
            let call = format!("i{}", session.id());
            messages.push(Message::from(AssistantMessage::new(
                vec![
                    AssistantBlock::thinking("think")
                        .with_meta([("sig".to_owned(), json!(i))].into_iter().collect()),
                    AssistantBlock::tool_call(call.as_str(), "t", json!({"i": i})),
                ],
                StopReason::ToolUse,
            )));
            messages.push(Message::from(ToolResultMessage::synthetic(
                call.as_str().into(),
                "t",
                ResultOutcome::Executed,
                "ok",
            )));
        }
        messages.push(Message::from(AssistantMessage::text(format!("answer {i}"))));
    }
    messages
}

/// Applies `step`; accepted inputs are recorded in the reference and for replay.
fn apply(session: &mut Session, step: &Step) {
    let version = session.version();
    let run = session.agent.active_run_id().cloned();
    let steps = session.agent.steps().unwrap_or(0);
    match step {
        Step::Import {
            exchanges: n,
            with_ids,
        } => {
            let messages = exchanges(session, *n, *with_ids);
            if session.agent.import(messages.clone(), 1).is_ok() {
                session.reference.extend(messages.iter().cloned());
                session.inputs.push((version, Replay::Import(messages)));
            } else {
                assert!(
                    run.is_some(),
                    "an import is refused only while a run is active"
                );
            }
        }
        Step::Prompt { messages: n } => {
            let messages: Vec<UserMessage> = (0..*n)
                .map(|i| UserMessage::text(format!("prompt {i}")))
                .collect();
            let accepted = if messages.len() == 1 {
                session.agent.prompt(messages[0].clone(), 1).is_ok()
            } else {
                session
                    .agent
                    .prompt_messages(None, messages.clone(), 1)
                    .is_ok()
            };
            if accepted {
                session
                    .reference
                    .extend(messages.iter().cloned().map(Message::from));
                session.inputs.push((version, Replay::Prompt(messages)));
            } else {
                assert!(
                    run.is_some(),
                    "a prompt is refused only while a run is active"
                );
            }
        }
        Step::Text | Step::Calls { .. } => {
            let Some(run) = run.filter(|_| session.agent.model_request().is_some()) else {
                return;
            };
            let answer = match step {
                Step::Calls { calls } => AssistantMessage::new(
                    (0..*calls)
                        .map(|i| AssistantBlock::tool_call(format!("s{steps}c{i}"), "t", json!({})))
                        .collect(),
                    StopReason::ToolUse,
                ),
                _ => AssistantMessage::text("text"),
            };
            session
                .agent
                .model_done(&run, steps, answer.clone())
                .expect("the outstanding call's answer");
            session.reference.push(Message::from(answer.clone()));
            session.inputs.push((version, Replay::Answer(answer)));
        }
        Step::ToolResults { rotate } => {
            let Some(run) = run else { return };
            let calls: Vec<_> = session
                .agent
                .transcript()
                .last()
                .and_then(Message::as_assistant)
                .map(|a| a.tool_calls().collect())
                .unwrap_or_default();
            if calls.is_empty() || session.agent.pending_outputs() > 0 {
                return;
            }
            let mut order: Vec<usize> = (0..calls.len()).collect();
            order.rotate_left(usize::from(*rotate) % calls.len());
            let mut outputs = Vec::new();
            for index in order {
                let call = &calls[index];
                let output = ToolOutput::text(call.id.clone(), format!("result of {}", call.id));
                if session
                    .agent
                    .tool_done(&run, &call.id, output.clone())
                    .is_err()
                {
                    return;
                }
                outputs.push(output);
            }
            for call in &calls {
                session.reference.push(Message::from(
                    ToolOutput::text(call.id.clone(), format!("result of {}", call.id))
                        .into_result(call.name.clone()),
                ));
            }
            session.inputs.push((version, Replay::Results(outputs)));
        }
        Step::Fork { .. } => {}
    }
    session.settle();
}

fn check(session: &Session) -> Result<(), TestCaseError> {
    let transcript = session.agent.transcript();
    prop_assert_eq!(transcript, session.reference.as_slice());
    let open = session.agent.active_run_id().is_some();
    prop_assert!(
        check_pairing(transcript, open).is_ok(),
        "{:?}",
        check_pairing(transcript, open)
    );
    let ids: Vec<&str> = transcript.iter().filter_map(Message::id).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    prop_assert_eq!(ids.len(), unique.len(), "message ids are unique");
    prop_assert_eq!(
        session
            .store
            .committed_messages(&session.thread)
            .expect("memory"),
        transcript.to_vec()
    );
    Ok(())
}

/// After a crash at commit `k`: a store of the first `k` commits recovers to their messages.
fn crash_at(session: &Session, k: usize) -> Result<(), TestCaseError> {
    let mut store = MemoryStore::new();
    let mut messages = Vec::new();
    for operation in session.operations.iter().take(k) {
        messages.extend(operation.commit.messages.iter().cloned());
        store.commit_operation(operation.clone()).expect("replayed");
    }
    let cold = Agent::recover(
        AgentConfig::for_thread(session.thread.as_str()),
        &store,
        &session.thread,
        RecoveryPolicy::Replay,
    );
    let Ok(mut cold) = cold else {
        return Err(TestCaseError::fail(format!(
            "recover at commit {k}: {cold:?}"
        )));
    };
    while cold.poll().is_some() {}
    prop_assert_eq!(cold.transcript(), messages.as_slice());
    if k == session.operations.len() {
        let context = |agent: &Agent| -> Option<Vec<Message>> {
            agent
                .model_request()
                .map(|r| r.context().cloned().collect())
        };
        prop_assert_eq!(context(&cold), context(&session.agent));
    }
    Ok(())
}

/// Forks at `at` and replays the parent's later inputs on the fork.
/// What a fork step came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Forked {
    Refused,
    Made,
    Replayed,
}

fn fork_and_replay(session: &mut Session, at: u64, name: &str) -> Result<Forked, TestCaseError> {
    let before = session.store.clone();
    let forked = fork_thread(
        &mut session.store,
        &session.thread,
        at,
        &ThreadId::new(name),
        7,
    );
    let Ok(forked) = forked else {
        // Refused: version 0, or a call unanswered at that version; nothing written.
        prop_assert_eq!(&session.store, &before);
        if at > 0 {
            let at_messages = session
                .store
                .thread_as_of(&session.thread, at)
                .expect("memory")
                .expect("the version exists")
                .messages;
            prop_assert!(
                check_pairing(&at_messages, false).is_err(),
                "refused a complete version"
            );
        }
        return Ok(Forked::Refused);
    };
    prop_assert_eq!(forked.version, 1);
    let parent_at = session
        .store
        .thread_as_of(&session.thread, at)
        .expect("memory")
        .expect("the version exists")
        .messages;
    let fork_thread_id = ThreadId::new(name);
    prop_assert_eq!(
        session
            .store
            .committed_messages(&fork_thread_id)
            .expect("memory"),
        parent_at.clone()
    );
    prop_assert_eq!(
        session
            .store
            .committed_messages(&session.thread)
            .expect("memory"),
        session.reference.clone(),
        "the parent is unchanged"
    );
    // Replaying only makes sense from a version where the parent was idle (a complete
    // transcript with no run mid-way): the inputs given at versions >= at, in order.
    let mut fork = Agent::recover(
        AgentConfig::for_thread(name),
        &session.store,
        &fork_thread_id,
        RecoveryPolicy::Replay,
    )
    .expect("a fork recovers");
    while fork.poll().is_some() {}
    let later: Vec<&(u64, Replay)> = session.inputs.iter().filter(|(v, _)| *v >= at).collect();
    let starts_idle = later
        .first()
        .is_none_or(|(_, input)| matches!(input, Replay::Prompt(_) | Replay::Import(_)));
    if !starts_idle || later.first().is_some_and(|(v, _)| *v != at) {
        return Ok(Forked::Made);
    }
    for (_, input) in later {
        let run = fork.active_run_id().cloned();
        let step = fork.steps().unwrap_or(0);
        let accepted = match input {
            Replay::Prompt(messages) if messages.len() == 1 => {
                fork.prompt(messages[0].clone(), 1).is_ok()
            }
            Replay::Prompt(messages) => fork.prompt_messages(None, messages.clone(), 1).is_ok(),
            Replay::Import(messages) => fork.import(messages.clone(), 1).is_ok(),
            Replay::Answer(answer) => {
                run.is_some_and(|run| fork.model_done(&run, step, answer.clone()).is_ok())
            }
            Replay::Results(outputs) => run.is_some_and(|run| {
                outputs
                    .iter()
                    .all(|o| fork.tool_done(&run, &o.call_id, o.clone()).is_ok())
            }),
        };
        prop_assert!(accepted, "the fork takes the parent's input {input:?}");
        while fork.poll().is_some() {}
    }
    // The fork's messages after the import are the parent's messages after version `at`.
    let fork_later = fork.transcript().get(parent_at.len()..).unwrap_or_default();
    let parent_later = session.reference.get(parent_at.len()..).unwrap_or_default();
    prop_assert_eq!(fork_later, parent_later);
    Ok(Forked::Replayed)
}

/// Runs one generated session; what its forks came to.
fn session(steps: &[Step], crash: prop::sample::Index) -> Result<BTreeSet<Forked>, TestCaseError> {
    let mut session = Session::new("p");
    let mut forks = BTreeSet::new();
    for (index, step) in steps.iter().enumerate() {
        if let Step::Fork { at } = step {
            let at = u64::from(*at) % (session.version() + 1);
            let name = format!("fork-{index}");
            forks.insert(fork_and_replay(&mut session, at, &name)?);
            continue;
        }
        apply(&mut session, step);
        check(&session)?;
    }
    crash_at(&session, session.operations.len())?;
    crash_at(&session, crash.index(session.operations.len() + 1))?;
    Ok(forks)
}

/// The generator reaches refused forks, forks, and forks replayed to the parent's later
/// messages, so the property is not vacuous.
#[test]
fn generated_sessions_fork_and_replay() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let mut seen = BTreeSet::new();
    let strategy = (
        prop::collection::vec(step(), 1..24),
        any::<prop::sample::Index>(),
    );
    for _ in 0..200 {
        let (steps, crash) = strategy.new_tree(&mut runner).expect("a tree").current();
        seen.extend(session(&steps, crash).expect("the property holds"));
        if seen.len() == 3 {
            break;
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from([Forked::Refused, Forked::Made, Forked::Replayed])
    );
}

proptest! {
    #![proptest_config(common::proptest_config("proptest-regressions/history_properties.txt", 96))]

    #[test]
    fn imports_prompts_runs_and_forks_keep_every_invariant(
        steps in prop::collection::vec(step(), 1..24),
        crash in any::<prop::sample::Index>(),
    ) {
        session(&steps, crash)?;
    }
}
