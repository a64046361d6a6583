//! Compaction (SPEC §8.9): a bounded model context over an append-only transcript.
//!
//! What a compaction commits and emits, each `keep_from` rule with its reason, the rendered
//! `call_model` lines before and after a compaction (full and delta context, snapshotted), and
//! recovery, continue and snapshots rebuilding the same model context from committed facts.

mod common;

use runcore::driver::{ContextMode, Driver};
use runcore::store::*;
use runcore::*;
use serde_json::{Value, json};

fn thread() -> ThreadId {
    ThreadId::new("thread-1")
}

fn run(n: u32) -> RunId {
    RunId::new(format!("thread-1/run-{n}"))
}

fn config() -> AgentConfig {
    AgentConfig::default().with_tool("echo", ToolSpec::auto("echo"))
}

fn call(id: &str) -> AssistantMessage {
    AssistantMessage::new(
        vec![AssistantBlock::tool_call(id, "echo", json!({"x": id}))],
        StopReason::ToolUse,
    )
}

/// Drains the agent, applying each commit to `store` (fenced, as a host does), and returns
/// every output.
fn drain(agent: &mut Agent, store: &mut MemoryStore) -> Vec<Output> {
    let mut outputs = Vec::new();
    while let Some(output) = agent.poll() {
        if let Output::Commit(commit) = &output {
            store
                .commit_operation(commit.as_ref().clone().into_operation())
                .expect("the store accepts the agent's commit");
        }
        outputs.push(output);
    }
    outputs
}

/// A thread with one finished run (prompt, a tool call and its result, a text answer) and a
/// second run whose first model call is out:
/// `[0 user, 1 assistant(c1), 2 tool_result(c1), 3 assistant text, 4 user]`.
fn two_runs(store: &mut MemoryStore) -> Agent {
    let mut agent = Agent::new(config()).unwrap();
    agent.prompt(UserMessage::text("list files"), 10).unwrap();
    drain(&mut agent, store);
    agent.model_done(&run(1), 1, call("c1")).unwrap();
    drain(&mut agent, store);
    agent
        .tool_done(&run(1), &CallId::new("c1"), ToolOutput::text("c1", "a b"))
        .unwrap();
    drain(&mut agent, store);
    agent
        .model_done(&run(1), 2, AssistantMessage::text("two files"))
        .unwrap();
    drain(&mut agent, store);
    agent.prompt(UserMessage::text("and now?"), 20).unwrap();
    drain(&mut agent, store);
    assert_eq!(agent.model_request().map(|r| r.step), Some(1));
    agent
}

fn context(agent: &Agent) -> Vec<Message> {
    let request = agent.model_request().expect("a model call is out");
    request.context().cloned().collect()
}

fn summary() -> UserMessage {
    UserMessage::text("The user listed the files: there are two, a and b.")
}

#[test]
fn a_compaction_commits_announces_and_calls_the_same_step_again() {
    let mut store = MemoryStore::new();
    let mut agent = two_runs(&mut store);
    let transcript_before = agent.transcript().to_vec();
    agent.compact(summary(), 3, 30).unwrap();
    let outputs = drain(&mut agent, &mut store);
    let [
        Output::Commit(commit),
        Output::Event(event),
        Output::Action(action),
    ] = outputs.as_slice()
    else {
        panic!("commit, event, action: {outputs:?}");
    };
    assert!(commit.commit.messages.is_empty(), "no message is written");
    assert_eq!(
        commit.commit.run,
        RunDisposition::Running { run_id: run(2) },
        "a Running commit of the run"
    );
    let drafts: Vec<(String, Value)> = commit
        .commit
        .events
        .iter()
        .map(|d| (d.kind().to_owned(), d.payload()))
        .collect();
    assert_eq!(
        drafts,
        [
            (
                "compacted".to_owned(),
                json!({
                    "keep_from": 3, "transcript_len": 5, "now_ms": 30,
                    "summary": serde_json::to_value(Message::from(summary())).unwrap(),
                })
            ),
            // Every agent commit ends with its clock and transcript length (SPEC §14).
            (
                "commit_clock".to_owned(),
                json!({"now_ms": 30, "transcript_len": 5})
            )
        ]
    );
    assert_eq!(
        serde_json::to_value(event).unwrap(),
        json!({"type": "loop", "run_id": "thread-1/run-2",
               "event": {"type": "compacted", "keep_from": 3, "removed": 3}})
    );
    assert_eq!(
        action,
        &Action::CallModel {
            run_id: run(2),
            step: 1,
            final_step: false
        },
        "the same step again"
    );
    // The transcript is not rewritten; the model context is [summary] ++ transcript[3..].
    assert_eq!(agent.transcript(), transcript_before.as_slice());
    assert_eq!(
        store.committed_messages(&thread()).unwrap(),
        transcript_before
    );
    assert_eq!(agent.context_start(), 3);
    let mut expected = vec![Message::from(summary())];
    expected.extend_from_slice(&transcript_before[3..]);
    assert_eq!(context(&agent), expected);
    assert_eq!(agent.model_request().unwrap().context_len(), 3);
    // The reducer keeps the whole transcript and learns where the context starts.
    let in_run = AgentState {
        status: AgentStatus::Running,
        active_run_id: Some(run(2)),
        ..AgentState::with_messages(transcript_before.clone())
    };
    let state = outputs.iter().fold(in_run, |state, output| match output {
        Output::Event(event) => reduce(state, event),
        _ => state,
    });
    assert_eq!(state.context_start, 3);
    assert_eq!(state.messages, transcript_before);

    // A second compaction moves forward; `removed` counts from the previous start.
    agent.compact(UserMessage::text("newer"), 4, 31).unwrap();
    let outputs = drain(&mut agent, &mut store);
    let removed: Vec<Value> = outputs
        .iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(serde_json::to_value(e).unwrap()["event"]["removed"].clone()),
            _ => None,
        })
        .collect();
    assert_eq!(removed, [json!(1)]);
    assert_eq!(context(&agent).len(), 2);
    // The answer to the compacted call ends the run as any answer does.
    agent
        .model_done(&run(2), 1, AssistantMessage::text("still two"))
        .unwrap();
    drain(&mut agent, &mut store);
    assert_eq!(
        agent.last_end(),
        Some((&run(2), &EndCause::NaturalEnd)),
        "the run ends naturally"
    );
    assert_eq!(agent.transcript().len(), 6);
}

#[test]
fn every_keep_from_rule_is_invalid_input_naming_it_and_changes_nothing() {
    let mut store = MemoryStore::new();
    let mut agent = two_runs(&mut store);
    let reason = |agent: &mut Agent, keep_from| {
        let before = agent.snapshot_json();
        let error = agent.compact(summary(), keep_from, 99).unwrap_err();
        assert_eq!(agent.snapshot_json(), before, "keep_from {keep_from}");
        assert_eq!(error.kind(), "invalid_input", "{error}");
        error.to_string()
    };
    assert!(reason(&mut agent, 6).contains("past the end of the transcript (5 messages)"));
    assert!(reason(&mut agent, 2).contains("tool_result of call c1"));
    let empty = UserMessage {
        content: vec![],
        ..UserMessage::text("")
    };
    assert_eq!(
        agent.compact(empty, 3, 0).unwrap_err().kind(),
        "invalid_input",
        "an empty summary"
    );
    agent.compact(summary(), 3, 30).unwrap();
    drain(&mut agent, &mut store);
    for not_greater in [0, 3] {
        assert!(
            reason(&mut agent, not_greater).contains("greater than the previous compaction's"),
            "{not_greater}"
        );
    }
}

#[test]
fn a_call_whose_result_would_be_cut_off_cannot_be_compacted_away() {
    // A resume with context in the middle of a batch puts a system message between a call and
    // its result: keep_from there is no tool result, but it would split the call from it.
    let config = config().with_tool("rm", ToolSpec::gated("remove", None));
    let mut store = MemoryStore::new();
    let mut agent = Agent::new(config).unwrap();
    agent.prompt(UserMessage::text("go"), 0).unwrap();
    drain(&mut agent, &mut store);
    let calls = AssistantMessage::new(
        vec![AssistantBlock::tool_call("c1", "rm", json!({}))],
        StopReason::ToolUse,
    );
    agent.model_done(&run(1), 1, calls).unwrap();
    drain(&mut agent, &mut store);
    let ticket = agent.current_ticket().cloned().unwrap();
    let context = vec![Message::System(
        SystemMessage::text("approved").with_id("ctx").into(),
    )];
    agent
        .resume(ResumeCommand::from_ticket(&ticket, ResumeResult::allow(), 0).with_context(context))
        .unwrap();
    drain(&mut agent, &mut store);
    agent
        .tool_done(&run(1), &CallId::new("c1"), ToolOutput::text("c1", "gone"))
        .unwrap();
    drain(&mut agent, &mut store);
    // [user, assistant(c1), system, tool_result(c1)]; step 2 is out.
    assert_eq!(agent.model_request().unwrap().step, 2);
    let error = agent.compact(summary(), 2, 0).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("tool call c1 (message 1) has its result at or after it"),
        "{error}"
    );
    agent.compact(summary(), 4, 0).unwrap();
    assert_eq!(agent.context_start(), 4);
}

#[test]
fn compaction_is_refused_once_the_answer_began_or_when_no_call_is_out() {
    let mut store = MemoryStore::new();
    let mut agent = two_runs(&mut store);
    agent.model_delta(&run(2), 1, "Sti").unwrap();
    drain(&mut agent, &mut store);
    let error = agent.compact(summary(), 3, 0).unwrap_err();
    assert_eq!(error.kind(), "invalid_state");
    assert!(
        error.to_string().contains("its answer is arriving"),
        "{error}"
    );
    let idle = &mut Agent::new(config()).unwrap();
    assert_eq!(
        idle.compact(summary(), 0, 0).unwrap_err().kind(),
        "invalid_state"
    );
}

/// The driver's lines of a two-run thread compacted before run 2's first call, then a third
/// run: only the `call_model` lines, each after the input line that produced it.
fn call_model_lines(context: ContextMode) -> String {
    let mode = match context {
        ContextMode::Full => "full",
        ContextMode::Delta => "delta",
    };
    let inputs = [
        json!({"type": "config", "context": mode, "system_prompt": "Be brief.",
               "tools": {"echo": {"description": "echo"}}}),
        json!({"type": "prompt", "text": "list files"}),
        json!({"type": "model_done", "run_id": "thread-1/run-1", "step": 1, "message": {
            "content": [{"type": "tool_call", "id": "c1", "name": "echo", "arguments": {}}],
            "stop_reason": "tool_use"}}),
        json!({"type": "tool_done", "run_id": "thread-1/run-1", "call_id": "c1", "content": "a b"}),
        json!({"type": "model_done", "run_id": "thread-1/run-1", "step": 2, "message": {
            "content": [{"type": "text", "text": "two files"}], "stop_reason": "stop"}}),
        json!({"type": "prompt", "text": "and now?"}),
        json!({"type": "compact", "summary": [{"type": "text", "text": "Two files: a and b."}],
               "keep_from": 3, "now_ms": 5}),
        json!({"type": "model_done", "run_id": "thread-1/run-2", "step": 1, "message": {
            "content": [{"type": "text", "text": "still two"}], "stop_reason": "stop"}}),
        json!({"type": "prompt", "text": "thanks"}),
    ];
    let mut driver = Driver::new();
    let mut text = String::new();
    for input in inputs {
        let line = input.to_string();
        let out = driver.handle_line(line.as_bytes());
        assert!(
            !out.iter().any(|l| l.contains(r#""type":"error""#)),
            "{line}: {out:?}"
        );
        for output in out.iter().filter(|l| l.contains(r#""type":"call_model""#)) {
            text.push_str(&format!("after {}:\n{output}\n", input["type"]));
        }
    }
    text
}

#[test]
fn call_model_lines_before_and_after_a_compaction_full_context() {
    let text = call_model_lines(ContextMode::Full);
    common::snapshot!("call_model_full", text);
}

#[test]
fn call_model_lines_before_and_after_a_compaction_delta_context() {
    let text = call_model_lines(ContextMode::Delta);
    // After the compaction the delta starts over from base 0 with the whole model context.
    let bases: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["base"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(bases, [0, 1, 3, 0, 3]);
    common::snapshot!("call_model_delta", text);
}

#[test]
fn recovery_continue_and_snapshots_rebuild_the_compacted_context() {
    let mut store = MemoryStore::new();
    let mut live = two_runs(&mut store);
    live.compact(summary(), 3, 30).unwrap();
    drain(&mut live, &mut store);
    let live_context = context(&live);

    // A crash after the compaction commit, before the model answered: the recovered agent
    // calls the same step over the same context.
    let mut cold = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).unwrap();
    let outputs = cold.drain();
    assert_eq!(
        outputs,
        [Output::Action(Action::CallModel {
            run_id: run(2),
            step: 1,
            final_step: false
        })]
    );
    assert_eq!(context(&cold), live_context);
    assert_eq!(cold.context_start(), 3);

    // A snapshot carries the compaction.
    let restored = Agent::restore_json(&live.snapshot_json()).unwrap();
    assert_eq!(context(&restored), live_context);

    // The run ends; `continue` starts a new run over the compacted context, also after a
    // recovery of the ended thread.
    live.model_done(&run(2), 1, AssistantMessage::text("still two"))
        .unwrap();
    drain(&mut live, &mut store);
    let mut idle = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).unwrap();
    assert_eq!(idle.context_start(), 3);
    live.prompt(UserMessage::text("more"), 40).unwrap();
    drain(&mut live, &mut store);
    idle.prompt(UserMessage::text("more"), 40).unwrap();
    let _ = idle.drain();
    assert_eq!(context(&idle), context(&live));
    assert_eq!(context(&live)[0], Message::from(summary()));
    assert_eq!(context(&live).len(), 5);
}

#[test]
fn a_snapshot_without_a_compaction_is_written_as_before() {
    let mut store = MemoryStore::new();
    let agent = two_runs(&mut store);
    let json = agent.snapshot_json();
    assert!(!json.contains("compaction"), "{json}");
    let restored = Agent::restore_json(&json).unwrap();
    assert_eq!(restored.context_start(), 0);
    assert!(restored.compaction().is_none());
}

#[test]
fn a_snapshot_with_an_impossible_compaction_is_refused() {
    let mut store = MemoryStore::new();
    let mut agent = two_runs(&mut store);
    agent.compact(summary(), 3, 30).unwrap();
    drain(&mut agent, &mut store);
    let good: Value = serde_json::from_str(&agent.snapshot_json()).unwrap();
    assert_eq!(good["agent"]["compaction"]["keep_from"], 3);
    let mut past = good.clone();
    past["agent"]["compaction"]["keep_from"] = json!(99);
    let mut not_user = good.clone();
    not_user["agent"]["compaction"]["summary"]["role"] = json!("system");
    for bad in [past, not_user] {
        let error = Agent::restore_json(&bad.to_string()).unwrap_err();
        assert!(matches!(error, SnapshotError::Inconsistent(_)), "{error:?}");
    }
    assert!(Agent::restore_json(&good.to_string()).is_ok());
}
