//! The lossless-content case (SPEC §2.1): every provider field and every `meta` survives the
//! store, and an agent recovered from it asks the model exactly what the warm agent asked.

use serde_json::{Value, json};

use super::CaseResult;
use super::support::{accepted, ensure, expect_eq, read, thread};
use crate::agent::{Action, Agent, AgentConfig, Output, RecoveryPolicy};
use crate::message::{
    AssistantBlock, AssistantMessage, ContentBlock, Message, Meta, StopReason, ToolOutput, Usage,
    UserMessage,
};
use crate::store::{CheckpointReader, CommitLog, StoreError, transcript_digest};

fn meta(value: Value) -> Meta {
    match value {
        Value::Object(object) => Meta::from(object),
        _ => Meta::new(),
    }
}

/// An answer that holds every §2.1 field: thinking with a signature, redacted thinking, `meta`
/// on the message and on every block, the provider's model, response id and stop reason, and
/// the whole usage.
pub(super) fn rich_answer() -> AssistantMessage {
    AssistantMessage {
        usage: Some(Usage {
            input_tokens: 1200,
            output_tokens: 340,
            cache_read_tokens: Some(1000),
            cache_write_tokens: Some(0),
            reasoning_tokens: Some(128),
        }),
        id: Some("msg-1".into()),
        model: Some("claude-sonnet-4-5-20250929".into()),
        response_id: Some("msg_01XyZ".into()),
        provider_stop_reason: Some("tool_use".into()),
        meta: meta(json!({"cost": {"usd": 0.0123}, "trace": ["a", 1, null, {"é": "ü\u{1F600}"}]})),
        ..AssistantMessage::new(
            vec![
                AssistantBlock::Thinking {
                    thinking: "The user wants a.txt; read it first.\n".into(),
                    signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxiY3Jl+/=".into()),
                    meta: Meta::new(),
                },
                AssistantBlock::RedactedThinking {
                    data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP".into(),
                    meta: meta(json!({"n": 2})),
                },
                AssistantBlock::text("Reading it.").with_meta(meta(json!({"item_id": "msg_1"}))),
                AssistantBlock::tool_call("toolu_1", "read", json!({"path": "a.txt"}))
                    .with_meta(meta(json!({"openai_responses": {"id": "fc_1"}}))),
            ],
            StopReason::ToolUse,
        )
    }
}

/// Messages of every role, each with `meta`.
pub(super) fn rich_prompt() -> UserMessage {
    UserMessage {
        // Keys out of order and an integer beyond 64 bits: kept exactly (§2.1).
        meta: exact_meta(
            r#"{"timestamp":1733000000000,"source":"import","big":18446744073709551616}"#,
        ),
        id: Some("u-1".into()),
        ..UserMessage::text("Read a.txt")
    }
}

/// The host's `meta` on the tool output (carried onto its result message).
fn tool_meta() -> Meta {
    exact_meta(
        r#"{"trace":{"span":"s-1","ok":true},"timestamp":1733000000500,"n":-18446744073709551617}"#,
    )
}

/// A `meta` from its JSON text (the text a host sent).
fn exact_meta(text: &str) -> Meta {
    Meta::from_json(text).unwrap_or_default()
}

/// Every §2.1 field written through the store reads back equal, pins the same digest, and an
/// agent recovered from the store asks the model for exactly what the warm agent asked, byte
/// for byte, also after a snapshot and restore.
pub fn lossless_content_round_trips<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    let thread_id = thread("lossless");
    let config = AgentConfig {
        thread_id: thread_id.clone(),
        system_prompt: Some("Be brief.".into()),
        ..AgentConfig::default()
    };
    let step_failed = |what: &str, error: crate::AgentError| {
        super::CaseFailure(format!("{what}: the agent refused it: {error}"))
    };
    let mut warm = Agent::new(config.clone()).map_err(|e| step_failed("the config", e))?;
    let apply = |agent: &mut Agent, store: &mut S| -> Result<Option<Action>, StoreError> {
        let mut action = None;
        while let Some(output) = agent.poll() {
            match output {
                Output::Commit(commit) => {
                    store.commit_operation(commit.into_operation())?;
                }
                Output::Action(next) => action = Some(next),
                Output::Event(_) => {}
            }
        }
        Ok(action)
    };
    let run_id = warm
        .prompt(rich_prompt(), 1_000)
        .map_err(|e| step_failed("prompt", e))?;
    accepted("the prompt's commit", apply(&mut warm, store))?;
    warm.model_done(&run_id, 1, rich_answer())
        .map_err(|e| step_failed("model_done", e))?;
    accepted("the answer's commit", apply(&mut warm, store))?;
    let output = ToolOutput {
        content: vec![
            ContentBlock::text("hello"),
            ContentBlock::Image {
                data: "aGk=".into(),
                mime_type: "image/png".into(),
            },
        ],
        details: Some(json!({"bytes": 5})),
        meta: tool_meta(),
        ..ToolOutput::text("toolu_1", "")
    };
    warm.tool_done(&run_id, &"toolu_1".into(), output)
        .map_err(|e| step_failed("tool_done", e))?;
    accepted("the results' commit", apply(&mut warm, store))?;

    let committed = read("committed_messages", store.committed_messages(&thread_id))?;
    expect_eq(
        "the committed transcript",
        warm.transcript(),
        committed.as_slice(),
    )?;
    let answer = committed.iter().find_map(Message::as_assistant);
    expect_eq("the answer as stored", &Some(&rich_answer()), &answer)?;
    ensure(
        committed.first().map(Message::meta) == Some(&rich_prompt().meta),
        || format!("the prompt's meta as stored: {:?}", committed.first()),
    )?;
    let result = committed.iter().find_map(Message::as_tool_result);
    ensure(result.map(|r| &r.meta) == Some(&tool_meta()), || {
        format!("the tool result's meta as stored: {result:?}")
    })?;
    // Exactly the host's text: its key order and an integer beyond 64 bits.
    ensure(
        committed.first().and_then(|m| m.meta().as_json())
            == Some(r#"{"timestamp":1733000000000,"source":"import","big":18446744073709551616}"#),
        || format!("the prompt's meta text as stored: {:?}", committed.first()),
    )?;
    let pin = read("transcript_snapshot", store.transcript_snapshot(&thread_id))?;
    expect_eq(
        "the pinned digest",
        &transcript_digest(&committed),
        &pin.digest,
    )?;

    let mut cold = Agent::recover(config, &*store, &thread_id, RecoveryPolicy::Replay)
        .map_err(|e| super::CaseFailure(format!("recover: {e}")))?;
    // The recovered run hands out the same model call (nothing to commit before it).
    while cold.poll().is_some() {}
    expect_eq(
        "the recovered transcript",
        warm.transcript(),
        cold.transcript(),
    )?;
    let request = |agent: &Agent| -> Result<String, super::CaseFailure> {
        let request = agent
            .model_request()
            .ok_or_else(|| super::CaseFailure("no model request".into()))?;
        let context: Vec<&Message> = request.context().collect();
        serde_json::to_string(&context).map_err(|e| super::CaseFailure(e.to_string()))
    };
    let warm_request = request(&warm)?;
    expect_eq(
        "the recovered model request",
        &warm_request,
        &request(&cold)?,
    )?;
    let restored =
        Agent::restore(cold.snapshot()).map_err(|e| super::CaseFailure(format!("restore: {e}")))?;
    expect_eq(
        "the restored model request",
        &warm_request,
        &request(&restored)?,
    )?;
    ensure(
        warm_request.contains("\"signature\":\"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxiY3Jl+/=\""),
        || format!("the signature is in the request: {warm_request}"),
    )?;
    Ok(())
}
