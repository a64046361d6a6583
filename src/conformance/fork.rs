//! Reads as of a version and forks (SPEC §8.10): every backend answers `thread_as_of`, and a
//! fork made through it is a committed fact of the new thread that leaves the parent as it was.

use serde_json::json;

use super::support::{ensure, expect_eq, read, thread};
use super::{CaseFailure, CaseResult};
use crate::agent::{Agent, AgentConfig, Output, RecoveryPolicy};
use crate::host::{ForkError, ForkOrigin, fork_thread, forked_from};
use crate::ids::ThreadId;
use crate::message::{
    AssistantBlock, AssistantMessage, Message, StopReason, ToolOutput, UserMessage,
};
use crate::store::claims::ClaimRequest;
use crate::store::{CheckpointReader, CommitLog, ThreadClaims};

fn refused(what: &str) -> impl Fn(crate::AgentError) -> CaseFailure + '_ {
    move |error| CaseFailure(format!("{what}: the agent refused it: {error}"))
}

/// Commits every output the agent has queued; the model context of the call it hands out,
/// if any.
fn settle<S: CommitLog>(agent: &mut Agent, store: &mut S) -> Result<(), CaseFailure> {
    while let Some(output) = agent.poll() {
        if let Output::Commit(commit) = output {
            store
                .commit_operation(commit.into_operation())
                .map_err(|e| CaseFailure(format!("a commit was refused: {e}")))?;
        }
    }
    Ok(())
}

fn context(agent: &Agent) -> Vec<Message> {
    agent
        .model_request()
        .map(|request| request.context().cloned().collect())
        .unwrap_or_default()
}

/// Drives the parent's second half (what a fork at version 4 replays): the answer with a
/// call, its result, a text answer. Returns the transcript.
fn second_half<S: CommitLog>(
    agent: &mut Agent,
    store: &mut S,
) -> Result<Vec<Message>, CaseFailure> {
    let run = agent
        .active_run_id()
        .cloned()
        .ok_or_else(|| CaseFailure("no active run to go on with".into()))?;
    agent
        .model_done(
            &run,
            1,
            AssistantMessage::new(
                vec![AssistantBlock::tool_call("c1", "read", json!({"p": 1}))],
                StopReason::ToolUse,
            ),
        )
        .map_err(refused("the call"))?;
    settle(agent, store)?;
    agent
        .tool_done(&run, &"c1".into(), ToolOutput::text("c1", "one"))
        .map_err(refused("the result"))?;
    settle(agent, store)?;
    agent
        .model_done(&run, 2, AssistantMessage::text("done"))
        .map_err(refused("the last answer"))?;
    settle(agent, store)?;
    Ok(agent.transcript().to_vec())
}

/// `thread_as_of` answers every version with exactly the messages committed up to it (`None`
/// for version 0, past the head, or an unknown thread); a fork at a complete version is one
/// commit of the new thread naming its parent, inheriting the parent's compaction, replaying
/// to the parent's later messages under the same inputs, and leaving the parent (claimed by
/// another owner meanwhile) unchanged; forks at an incomplete version, past the head, onto an
/// existing thread, or from an unknown one are refused and write nothing.
pub fn forks_read_as_of_a_version<S: CommitLog + CheckpointReader + ThreadClaims>(
    store: &mut S,
) -> CaseResult {
    let parent = thread("parent");
    let config = |thread_id: &ThreadId| AgentConfig {
        thread_id: thread_id.clone(),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(config(&parent)).map_err(refused("the config"))?;
    // v1 prompt, v2 answer (run 1); v3 prompt, v4 compaction (run 2, the call out).
    let run1 = agent
        .prompt(UserMessage::text("a"), 1)
        .map_err(refused("prompt a"))?;
    settle(&mut agent, store)?;
    agent
        .model_done(&run1, 1, AssistantMessage::text("A"))
        .map_err(refused("answer A"))?;
    settle(&mut agent, store)?;
    agent
        .prompt(UserMessage::text("b"), 2)
        .map_err(refused("prompt b"))?;
    settle(&mut agent, store)?;
    agent
        .compact(UserMessage::text("summary of a"), 2, 3)
        .map_err(refused("compact"))?;
    settle(&mut agent, store)?;
    let parent_context_at_4 = context(&agent);
    // v5 the call, v6 its result, v7 the answer.
    let parent_after = second_half(&mut agent, store)?;
    let head = read("thread_version", store.thread_version(&parent))?;
    expect_eq("the parent's version", &7, &head)?;

    let all = read("committed_messages", store.committed_messages(&parent))?;
    let mut sequences = Vec::new();
    for (version, len) in [(1, 1), (2, 2), (3, 3), (4, 3), (5, 4), (6, 5), (7, 6)] {
        let at = read("thread_as_of", store.thread_as_of(&parent, version))?
            .ok_or_else(|| CaseFailure(format!("thread_as_of(parent, {version}) is None")))?;
        expect_eq(
            &format!("the messages as of version {version}"),
            all.get(..len).unwrap_or_default(),
            at.messages.as_slice(),
        )?;
        expect_eq(
            &format!("the version of version {version}"),
            &version,
            &at.version,
        )?;
        sequences.push(at.commit_sequence);
    }
    ensure(sequences.windows(2).all(|w| w[0] < w[1]), || {
        format!("commit sequences grow with the version: {sequences:?}")
    })?;
    for (what, thread_id, version) in [
        ("version 0", &parent, 0),
        ("past the head", &parent, 8),
        ("an unknown thread", &thread("nobody"), 1),
    ] {
        let at = read("thread_as_of", store.thread_as_of(thread_id, version))?;
        ensure(at.is_none(), || format!("thread_as_of for {what}: {at:?}"))?;
    }

    // Another owner claims the parent: a fork only reads it.
    let claim = store
        .claim_thread(
            &ClaimRequest {
                thread_id: parent.clone(),
                owner: "worker-a".into(),
                request_id: "r1".into(),
                lease_ms: 60_000,
            },
            10,
        )
        .map_err(|e| CaseFailure(format!("claim the parent: {e}")))?;

    let before = read("committed_messages", store.committed_messages(&parent))?;
    let child = thread("child");
    let invalid =
        |result: Result<crate::host::Forked, ForkError>, what: &str, needle: &str| match result {
            Err(ForkError::Invalid(error)) if error.to_string().contains(needle) => Ok(()),
            other => Err(CaseFailure(format!(
                "{what}: expected invalid_input naming {needle:?}, got {other:?}"
            ))),
        };
    invalid(
        fork_thread(store, &parent, 5, &child, 20),
        "a fork with a call open",
        "c1",
    )?;
    invalid(
        fork_thread(store, &parent, 8, &child, 20),
        "a fork past the head",
        "version 8",
    )?;
    invalid(
        fork_thread(store, &parent, 0, &child, 20),
        "a fork at version 0",
        "version 0",
    )?;
    invalid(
        fork_thread(store, &thread("nobody"), 1, &child, 20),
        "a fork of an unknown thread",
        "no commits",
    )?;
    invalid(
        fork_thread(store, &parent, 2, &parent, 20),
        "a fork onto itself",
        "differ",
    )?;
    expect_eq(
        "the child after refused forks",
        &0,
        &read("thread_version", store.thread_version(&child))?,
    )?;

    let forked = fork_thread(store, &parent, 4, &child, 20)
        .map_err(|e| CaseFailure(format!("the fork at version 4: {e}")))?;
    expect_eq("the fork's version", &1, &forked.version)?;
    let origin = Some(ForkOrigin {
        thread_id: parent.clone(),
        version: 4,
    });
    expect_eq(
        "forked_from",
        &origin,
        &read("forked_from", forked_from(&*store, &child))?,
    )?;
    expect_eq(
        "the parent's origin",
        &None,
        &read("forked_from", forked_from(&*store, &parent))?,
    )?;
    invalid(
        fork_thread(store, &parent, 2, &child, 20),
        "a fork onto an existing thread",
        "already exists",
    )?;
    expect_eq(
        "the parent after the fork",
        &before,
        &read("committed_messages", store.committed_messages(&parent))?,
    )?;
    expect_eq(
        "the parent's version after the fork",
        &7,
        &read("thread_version", store.thread_version(&parent))?,
    )?;
    let live = read("thread_claim", store.thread_claim(&parent, 11))?;
    expect_eq("the parent's claim after the fork", &Some(claim), &live)?;

    // The fork recovers to the parent's transcript and model context as of version 4, and the
    // parent's later inputs give the parent's later messages.
    let mut fork = Agent::recover(config(&child), &*store, &child, RecoveryPolicy::Replay)
        .map_err(|e| CaseFailure(format!("recover the fork: {e}")))?;
    settle(&mut fork, store)?;
    expect_eq(
        "the fork's transcript",
        before.get(..3).unwrap_or_default(),
        fork.transcript(),
    )?;
    // The parent's run 2 started from a prompt before the compaction: the fork (idle, with the
    // inherited compaction) continues from its last user message instead.
    fork.continue_run(2).map_err(refused("continue the fork"))?;
    settle(&mut fork, store)?;
    let fork_context: Vec<Message> = context(&fork);
    expect_eq(
        "the fork's model context",
        &parent_context_at_4,
        &fork_context,
    )?;
    let fork_after = second_half(&mut fork, store)?;
    expect_eq(
        "the fork replays to the parent's messages",
        &parent_after,
        &fork_after,
    )?;
    Ok(())
}
