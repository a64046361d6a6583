//! Compaction on a real backend (SPEC §8.9): a thread compacted mid-run is written to the
//! store, and the model context comes back from the store's committed facts alone — the
//! `compacted` audit draft is stored like any other draft and read back typed.
//!
//! [`check`] drives a two-run thread with a compaction before run 2's first model call into
//! a store, then recovers an agent from it (as after a crash right after the compaction
//! commit) and compares its model call with the live agent's; then finishes the run and
//! checks a new run of the recovered, idle thread still starts from the summary.

use runcore::host::script;
use runcore::store::{CheckpointReader, CommitLog, EventScope};
use runcore::{
    Agent, AgentConfig, AssistantBlock, AssistantMessage, AuditDraft, CallId, Message, Output,
    RecoveryPolicy, RunId, StopReason, ThreadId, ToolOutput, ToolSpec, UserMessage,
};
use serde_json::json;

use crate::session::KitError;

fn config(thread: &ThreadId) -> AgentConfig {
    AgentConfig::for_thread(thread.as_str()).with_tool("echo", ToolSpec::auto("echo"))
}

fn fail(what: impl Into<String>) -> KitError {
    KitError(what.into())
}

/// Every output of `agent` now ([`script::drain`]), each commit written to `store` in order.
fn drain<S: CommitLog>(agent: &mut Agent, store: &mut S) -> Result<(), KitError> {
    let mut commit = |_: &Agent, output: &Output| match output {
        Output::Commit(commit) => store
            .commit_operation(commit.as_ref().clone().into_operation())
            .map(drop)
            .map_err(|e| {
                fail(format!(
                    "the store refused a compaction session commit: {e}"
                ))
            }),
        _ => Ok(()),
    };
    script::drain(agent, &mut commit).map(drop)
}

fn context(agent: &Agent) -> Result<Vec<Message>, KitError> {
    let request = agent
        .model_request()
        .ok_or_else(|| fail("a model call should be out"))?;
    Ok(request.context().cloned().collect())
}

/// Runs the compaction check on `store` (any empty thread id `thread` in it).
pub fn check<S: CommitLog + CheckpointReader>(
    store: &mut S,
    thread: &ThreadId,
) -> Result<(), KitError> {
    let run = |n: u32| RunId::new(format!("{}/run-{n}", thread.as_str()));
    let mut live = Agent::new(config(thread)).map_err(|e| fail(e.to_string()))?;
    let agent_error = |e: runcore::AgentError| fail(e.to_string());
    live.prompt(UserMessage::text("list files"), 1)
        .map_err(agent_error)?;
    drain(&mut live, store)?;
    let call = AssistantMessage::new(
        vec![AssistantBlock::tool_call(
            "c1",
            "echo",
            json!({"path": "."}),
        )],
        StopReason::ToolUse,
    );
    live.model_done(&run(1), 1, call).map_err(agent_error)?;
    drain(&mut live, store)?;
    live.tool_done(&run(1), &CallId::new("c1"), ToolOutput::text("c1", "a b"))
        .map_err(agent_error)?;
    drain(&mut live, store)?;
    live.model_done(&run(1), 2, AssistantMessage::text("two files"))
        .map_err(agent_error)?;
    drain(&mut live, store)?;
    live.prompt(UserMessage::text("and now?"), 2)
        .map_err(agent_error)?;
    drain(&mut live, store)?;
    let summary = UserMessage::text("The user listed the files: a and b (é, \u{1F600}).");
    live.compact(summary.clone(), 3, 3).map_err(agent_error)?;
    drain(&mut live, store)?;

    // The draft is stored and read back typed, summary and all.
    let events = store
        .list_events(&EventScope::Thread(thread.clone()), None, 10_000)
        .map_err(|e| fail(e.to_string()))?;
    let stored: Vec<AuditDraft> = events
        .iter()
        .filter(|e| e.kind == "compacted")
        .map(|e| AuditDraft::from_stored(&e.kind, e.payload.clone()))
        .collect();
    match stored.as_slice() {
        [
            AuditDraft::Compacted {
                keep_from: 3,
                transcript_len: 5,
                summary: read,
                now_ms: Some(3),
            },
        ] if **read == summary => {}
        other => return Err(fail(format!("the stored compacted draft: {other:?}"))),
    }
    let committed = store
        .committed_messages(thread)
        .map_err(|e| fail(e.to_string()))?;
    if committed != live.transcript() {
        return Err(fail("the committed transcript differs from the agent's"));
    }

    // A crash right after the compaction commit: the same call over the same context.
    let mut cold = Agent::recover(config(thread), &*store, thread, RecoveryPolicy::Replay)
        .map_err(|e| fail(e.to_string()))?;
    let _ = cold.drain();
    if context(&cold)? != context(&live)? || cold.context_start() != 3 {
        return Err(fail(
            "the recovered model context differs from the live one",
        ));
    }
    live.model_done(&run(2), 1, AssistantMessage::text("still two"))
        .map_err(agent_error)?;
    drain(&mut live, store)?;
    let mut idle = Agent::recover(config(thread), &*store, thread, RecoveryPolicy::Replay)
        .map_err(|e| fail(e.to_string()))?;
    idle.prompt(UserMessage::text("thanks"), 4)
        .map_err(agent_error)?;
    let _ = idle.drain();
    let context = context(&idle)?;
    if context.first() != Some(&Message::from(summary)) || context.len() != 5 {
        return Err(fail(format!(
            "a new run of the recovered thread sees {} messages, not the summary and 4",
            context.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn memory_store_rebuilds_the_compacted_context() {
        let mut store = runcore::store::MemoryStore::new();
        super::check(&mut store, &runcore::ThreadId::new("compacted"))
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
