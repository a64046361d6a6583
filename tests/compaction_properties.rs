//! Compaction under any sequence of inputs (SPEC §8.9), checked against a naive reference:
//! - a compaction is accepted exactly where §8.9 allows it (a model call out with nothing of
//!   its answer arrived, `keep_from` past the previous one, within the transcript, and no
//!   tool result in the kept part whose call is not kept too);
//! - the model context is always `[summary] ++ transcript[keep_from..]`, and every tool call in
//!   it has its result in it (and every result its call);
//! - the committed transcript is an append-only log (each read extends the previous one);
//! - warm = cold: a crash at any commit recovers the context the committed compactions say, and
//!   a crash with a model call out recovers the very same call over the very same context.

mod common;

use proptest::prelude::*;
use runcore::store::*;
use runcore::*;
use serde_json::json;

#[derive(Debug, Clone)]
enum Op {
    Prompt,
    Continue,
    Text,
    Calls(u8),
    AnswerTools,
    Delta,
    Steer,
    Abort,
    Fail,
    /// `keep_from` as a fraction (of 256) of the transcript length plus two, so that every
    /// index, and one or two past the end, come up.
    Compact(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Prompt),
        1 => Just(Op::Continue),
        3 => Just(Op::Text),
        3 => (1u8..=3).prop_map(Op::Calls),
        3 => Just(Op::AnswerTools),
        1 => Just(Op::Delta),
        1 => Just(Op::Steer),
        1 => Just(Op::Abort),
        1 => Just(Op::Fail),
        4 => any::<u8>().prop_map(Op::Compact),
    ]
}

fn config() -> AgentConfig {
    AgentConfig {
        max_steps: 5,
        ..AgentConfig::default()
    }
    .with_tool("echo", ToolSpec::auto("echo"))
}

fn thread() -> ThreadId {
    ThreadId::new("thread-1")
}

/// The host side: the store, what is out, and the reference model context.
struct World {
    agent: Agent,
    store: MemoryStore,
    commits: Vec<AgentCommit>,
    /// The executing calls of the batch out.
    executing: Vec<(RunId, CallId)>,
    /// A delta of the outstanding call's answer was accepted.
    streamed: bool,
    next_call: u32,
    /// The reference: the latest accepted compaction.
    compaction: Option<(usize, Message)>,
}

impl World {
    fn drain(&mut self) {
        while let Some(output) = self.agent.poll() {
            match output {
                Output::Commit(commit) => {
                    self.store
                        .commit_operation(commit.as_ref().clone().into_operation())
                        .expect("the store accepts every commit");
                    self.commits.push(*commit);
                }
                Output::Action(Action::ExecuteTools { run_id, calls, .. }) => {
                    self.executing = calls.into_iter().map(|c| (run_id.clone(), c.id)).collect();
                }
                Output::Action(Action::CallModel { .. }) => self.streamed = false,
                Output::Event(_) => {}
            }
        }
    }

    fn out_call(&self) -> Option<(RunId, Step)> {
        self.agent
            .model_request()
            .map(|r| (r.run_id.clone(), r.step))
    }
}

/// The naive rule: every tool result at or after `keep_from` has its call at or after it
/// (call ids are unique in these runs), and `keep_from` is within the transcript and past the
/// previous compaction's.
fn reference_allows(transcript: &[Message], previous: Option<usize>, keep_from: usize) -> bool {
    if previous.is_some_and(|p| keep_from <= p) || keep_from > transcript.len() {
        return false;
    }
    let kept = &transcript[keep_from..];
    let kept_calls: Vec<CallId> = kept
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a.tool_calls().map(|c| c.id).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    kept.iter().all(|m| match m {
        Message::ToolResult(r) => kept_calls.contains(&r.call_id),
        _ => true,
    })
}

fn check_paired(context: &[Message]) -> Result<(), TestCaseError> {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for message in context {
        match message {
            Message::Assistant(a) => calls.extend(a.tool_calls().map(|c| c.id)),
            Message::ToolResult(r) => results.push(r.call_id.clone()),
            _ => {}
        }
    }
    prop_assert_eq!(
        calls,
        results,
        "every call in the context has its result there"
    );
    Ok(())
}

fn apply(world: &mut World, op: &Op, now_ms: u64) -> Result<(), TestCaseError> {
    let out_call = world.out_call();
    let agent = &mut world.agent;
    match op {
        Op::Prompt => {
            let _ = agent.prompt(UserMessage::text("go"), now_ms);
        }
        Op::Continue => {
            let _ = agent.continue_run(now_ms);
        }
        Op::Steer => {
            let _ = agent.steer(UserMessage::text("steer"));
        }
        Op::Abort => {
            let _ = agent.abort();
        }
        Op::Text | Op::Calls(_) | Op::Fail | Op::Delta => {
            if let Some((run_id, step)) = out_call {
                let result = match op {
                    Op::Text => agent.model_done(&run_id, step, AssistantMessage::text("ok")),
                    Op::Fail => agent.model_failed(&run_id, step, "overloaded", "later"),
                    Op::Delta => agent.model_delta(&run_id, step, "d"),
                    Op::Calls(n) => {
                        let blocks = (0..*n)
                            .map(|_| {
                                world.next_call += 1;
                                let id = format!("c{}", world.next_call);
                                AssistantBlock::tool_call(id, "echo", json!({}))
                            })
                            .collect();
                        let message = AssistantMessage::new(blocks, StopReason::ToolUse);
                        agent.model_done(&run_id, step, message)
                    }
                    _ => unreachable!(),
                };
                prop_assert!(result.is_ok(), "{op:?}: {result:?}");
                if matches!(op, Op::Delta) {
                    world.streamed = true;
                }
            }
        }
        Op::AnswerTools => {
            for (run_id, call_id) in std::mem::take(&mut world.executing) {
                let output = ToolOutput::text(call_id.clone(), "done");
                let _ = world.agent.tool_done(&run_id, &call_id, output);
                world.drain();
            }
        }
        Op::Compact(fraction) => {
            let len = agent.transcript().len();
            let keep_from = usize::from(*fraction) * (len + 2) / 256;
            let callable = agent.model_request().is_some() && !world.streamed;
            let previous = world.compaction.as_ref().map(|(k, _)| *k);
            let allowed = callable && reference_allows(agent.transcript(), previous, keep_from);
            let summary = UserMessage::text(format!("summary up to {keep_from}"));
            let before = agent.snapshot_json();
            match agent.compact(summary.clone(), keep_from, now_ms) {
                Ok(()) => {
                    prop_assert!(
                        allowed,
                        "accepted where §8.9 refuses: keep_from {keep_from}"
                    );
                    world.compaction = Some((keep_from, Message::from(summary)));
                }
                Err(error) => {
                    prop_assert!(!allowed, "refused where §8.9 allows: {error}");
                    let kind = if callable {
                        "invalid_input"
                    } else {
                        "invalid_state"
                    };
                    prop_assert_eq!(error.kind(), kind, "{}", error);
                    prop_assert_eq!(agent.snapshot_json(), before, "a refusal changes nothing");
                }
            }
        }
    }
    world.drain();
    Ok(())
}

/// The model context a crash after the first `k` commits recovers, as the reference reads the
/// committed drafts: the latest `compacted` draft's start.
fn committed_start(commits: &[AgentCommit]) -> usize {
    commits
        .iter()
        .flat_map(|c| c.commit.events.iter())
        .filter_map(|d| match d {
            AuditDraft::Compacted { keep_from, .. } => Some(*keep_from),
            _ => None,
        })
        .next_back()
        .unwrap_or(0)
}

fn store_of(commits: &[AgentCommit]) -> MemoryStore {
    let mut store = MemoryStore::new();
    for commit in commits {
        store
            .commit_operation(commit.clone().into_operation())
            .expect("a prefix of the log commits again");
    }
    store
}

proptest! {
    #![proptest_config(common::proptest_config(
        "proptest-regressions/compaction_properties.txt",
        256,
    ))]

    #[test]
    fn compaction_under_any_inputs(ops in proptest::collection::vec(op(), 1..40)) {
        let mut world = World {
            agent: Agent::new(config()).unwrap(),
            store: MemoryStore::new(),
            commits: Vec::new(),
            executing: Vec::new(),
            streamed: false,
            next_call: 0,
            compaction: None,
        };
        let mut committed: Vec<Message> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            apply(&mut world, op, i as u64)?;
            // The committed transcript only grows at its end.
            let now = world.store.committed_messages(&thread()).unwrap();
            prop_assert!(now.starts_with(&committed), "the committed log was rewritten");
            committed = now;
            prop_assert_eq!(world.agent.transcript(), committed.as_slice());
            // The model context is [summary] ++ transcript[keep_from..], and paired.
            if let Some(request) = world.agent.model_request() {
                let context: Vec<Message> = request.context().cloned().collect();
                let mut expected = Vec::new();
                let start = match &world.compaction {
                    Some((keep_from, summary)) => {
                        expected.push(summary.clone());
                        *keep_from
                    }
                    None => 0,
                };
                expected.extend_from_slice(&committed[start..]);
                prop_assert_eq!(&context, &expected);
                check_paired(&context)?;
                // A crash now: the recovered agent makes the same call over the same context.
                let mut cold =
                    Agent::recover(config(), &world.store, &thread(), RecoveryPolicy::Replay)
                        .unwrap();
                let first = cold.drain();
                prop_assert!(
                    matches!(first.as_slice(), [Output::Action(Action::CallModel { run_id, step, .. })]
                        if run_id == request.run_id && *step == request.step),
                    "{:?}", first
                );
                let cold_context: Vec<Message> =
                    cold.model_request().unwrap().context().cloned().collect();
                prop_assert_eq!(cold_context, context);
            }
        }
        // A crash at any commit: recovery rebuilds the context the committed facts say.
        for k in 0..=world.commits.len() {
            let store = store_of(&world.commits[..k]);
            let cold = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay)
                .expect("every prefix recovers");
            prop_assert_eq!(cold.context_start(), committed_start(&world.commits[..k]));
        }
    }
}
