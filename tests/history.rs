//! Threads that begin with history (SPEC §8.10) and lossless content on the wire (§2.1):
//! import, several prompt messages, thinking deltas — through the library and the driver.

mod common;

use runcore::driver::Driver;
use runcore::store::{CommitLog, CommittedThreadView, MemoryStore};
use runcore::{
    Agent, AgentConfig, AgentEvent, AssistantBlock, AssistantMessage, EndCause, Message, Output,
    RecoveryPolicy, RunDisposition, StopReason, ThreadId, ToolResultMessage, UserMessage, reduce,
};
use serde_json::{Value, json};

fn lines(driver: &mut Driver, input: &[Value]) -> String {
    let mut out = String::new();
    for line in input {
        out.push_str("> ");
        out.push_str(&line.to_string());
        out.push('\n');
        for output in driver.handle_line(line.to_string().as_bytes()) {
            out.push_str(&output);
            out.push('\n');
        }
    }
    out
}

fn history() -> Vec<Value> {
    vec![
        json!({"role": "system", "content": [{"type": "text", "text": "Be brief."}]}),
        json!({"role": "user", "content": [{"type": "text", "text": "What is in a.txt?"}],
               "id": "u1", "meta": {"timestamp": 1733000000000u64}}),
        json!({"role": "assistant", "content": [
                  {"type": "thinking", "thinking": "Read it.", "signature": "sig-1"},
                  {"type": "redacted_thinking", "data": "b64data"},
                  {"type": "tool_call", "id": "c1", "name": "read", "arguments": {"path": "a.txt"},
                   "meta": {"item_id": "fc_1"}}],
               "stop_reason": "tool_use", "model": "m-1", "response_id": "resp-1",
               "provider_stop_reason": "tool_use",
               "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 8}}),
        json!({"role": "tool_result", "call_id": "c1", "tool_name": "read",
               "content": [{"type": "text", "text": "hello"}], "is_error": false,
               "outcome": "executed"}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "It says hello."}],
               "stop_reason": "stop", "provider_stop_reason": "end_turn"}),
    ]
}

/// The driver's lines for an import, a multi-message prompt and thinking deltas.
#[test]
fn driver_lines_for_import_several_messages_and_thinking() {
    let mut driver = Driver::new();
    let rendered = lines(
        &mut driver,
        &[
            json!({"type": "config", "thread_id": "h"}),
            json!({"type": "import", "messages": history(), "now_ms": 100}),
            json!({"type": "prompt", "messages": [
                {"content": [{"type": "text", "text": "Now b.txt."}]},
                {"content": [{"type": "text", "text": "And be quick."}], "id": "u2",
                 "meta": {"source": "cli"}}
            ], "now_ms": 200}),
            json!({"type": "model_delta", "run_id": "h/run-2", "step": 1, "text": "Think", "kind": "thinking"}),
            json!({"type": "model_delta", "run_id": "h/run-2", "step": 1, "text": "Done"}),
            json!({"type": "model_done", "run_id": "h/run-2", "step": 1, "message": {
                "content": [{"type": "thinking", "thinking": "Think", "signature": "sig-2"},
                            {"type": "text", "text": "Done", "meta": {"k": [1, 2]}}],
                "stop_reason": "stop", "model": "m-1", "meta": {"cost": 0.5}}, "now_ms": 300}),
        ],
    );
    common::snapshot!("driver_lines", rendered);
}

/// `import` commits one ended run whose events give a reducer the committed transcript; a
/// `continue` after an import that ends in a user message starts a run over it.
#[test]
fn import_is_one_committed_ended_run() {
    let mut agent = Agent::new(AgentConfig::default()).unwrap();
    let messages: Vec<Message> = history()
        .into_iter()
        .map(|m| serde_json::from_value(m).unwrap())
        .collect();
    let run = agent.import(messages.clone(), 5).unwrap();
    let outputs: Vec<Output> = std::iter::from_fn(|| agent.poll()).collect();
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    let Output::Commit(commit) = &outputs[0] else {
        panic!("a commit first: {outputs:?}")
    };
    assert_eq!(commit.ordinal, 0);
    assert_eq!(commit.expected_thread_version, 0);
    assert_eq!(commit.commit.messages, messages);
    assert_eq!(
        commit.commit.run,
        RunDisposition::Ended {
            run_id: run.clone(),
            cause: EndCause::Stopped("imported".into())
        }
    );
    let kinds: Vec<&str> = commit.commit.events.iter().map(|e| e.kind()).collect();
    assert_eq!(kinds, ["run_state_changed", "imported", "commit_clock"]);
    assert_eq!(
        commit.commit.events[1].payload(),
        json!({"count": 5, "now_ms": 5})
    );
    let mut state = runcore::AgentState::default();
    for output in &outputs {
        if let Output::Event(event) = output {
            state = reduce(state, event);
        }
    }
    assert_eq!(
        state.messages, messages,
        "the reducer's transcript is the committed one"
    );
    assert!(matches!(
        outputs[2],
        Output::Event(AgentEvent::RunEnd { .. })
    ));
    assert!(agent.is_idle());
    assert_eq!(agent.transcript(), messages.as_slice());

    // Ends in the model's answer: nothing to continue.
    assert_eq!(agent.continue_run(6).unwrap_err().kind(), "invalid_state");
    // Ends in a user message: continue runs over it.
    agent.import(vec![Message::user("and c.txt?")], 7).unwrap();
    while agent.poll().is_some() {}
    agent.continue_run(8).unwrap();
    let outputs: Vec<Output> = std::iter::from_fn(|| agent.poll()).collect();
    assert!(
        matches!(
            outputs.last(),
            Some(Output::Action(runcore::Action::CallModel { step: 1, .. }))
        ),
        "{outputs:?}"
    );
    let request = agent.model_request().unwrap();
    assert_eq!(request.context().count(), 6);
}

/// Every bad import is an `InvalidInput` naming the rule and the index, and changes nothing.
#[test]
fn bad_imports_are_refused_and_change_nothing() {
    let call = |ids: &[&str]| {
        Message::from(AssistantMessage::new(
            ids.iter()
                .map(|id| AssistantBlock::tool_call(*id, "read", json!({})))
                .collect(),
            StopReason::ToolUse,
        ))
    };
    let result = |id: &str| {
        Message::from(ToolResultMessage::synthetic(
            id.into(),
            "read",
            runcore::ResultOutcome::Executed,
            "ok",
        ))
    };
    let with_id = |id: &str| {
        Message::from(UserMessage {
            id: Some(id.into()),
            ..UserMessage::text("hi")
        })
    };
    let cases: Vec<(&str, Vec<Message>, &str)> = vec![
        ("no messages", vec![], "no messages"),
        (
            "a call with no result",
            vec![Message::user("q"), call(&["c1"])],
            "messages[1]: tool call c1 has no result",
        ),
        (
            "a result with no call",
            vec![Message::user("q"), result("c9")],
            "messages[1]: the tool result for call c9 has no call",
        ),
        (
            "results out of call order",
            vec![call(&["c1", "c2"]), result("c2"), result("c1")],
            "messages[1]: the result for call c2 comes before the result for call c1",
        ),
        (
            "a call answered after the next answer",
            vec![
                call(&["c1"]),
                Message::from(AssistantMessage::text("x")),
                result("c1"),
            ],
            "messages[0]: tool call c1 has no result before the next assistant message (messages[1])",
        ),
        (
            "a second result for one call",
            vec![
                call(&["c1", "c2"]),
                result("c1"),
                result("c1"),
                result("c2"),
            ],
            "messages[2]: a second result for call c1 (its result is messages[1]); every tool \
             call has exactly one result",
        ),
        (
            "a duplicate message id",
            vec![with_id("m1"), with_id("m1")],
            "messages[1]: message id \"m1\" appears twice",
        ),
        (
            "an id already in the thread",
            vec![with_id("u0")],
            "messages[0]: message id \"u0\" is already in the thread",
        ),
    ];
    let mut agent = Agent::new(AgentConfig::default()).unwrap();
    agent.import(vec![with_id("u0")], 1).unwrap();
    while agent.poll().is_some() {}
    for (label, messages, reason) in cases {
        let before = agent.snapshot_json();
        let error = agent.import(messages, 2).unwrap_err();
        assert_eq!(error.kind(), "invalid_input", "{label}");
        assert!(error.to_string().contains(reason), "{label}: {error}");
        assert_eq!(agent.snapshot_json(), before, "{label}: nothing changed");
        assert_eq!(agent.pending_outputs(), 0, "{label}: nothing emitted");
    }
    // Busy while a run is active.
    agent.prompt(UserMessage::text("go"), 3).unwrap();
    let before = agent.snapshot_json();
    let error = agent.import(vec![Message::user("x")], 4).unwrap_err();
    assert_eq!(error.kind(), "busy");
    assert_eq!(agent.snapshot_json(), before);
}

/// A multi-message prompt commits every message in its first commit, in order; bad lists are
/// refused.
#[test]
fn several_prompt_messages() {
    let mut agent = Agent::new(AgentConfig::default()).unwrap();
    let messages = vec![UserMessage::text("one"), UserMessage::text("two")];
    agent.prompt_messages(None, messages.clone(), 1).unwrap();
    let outputs: Vec<Output> = std::iter::from_fn(|| agent.poll()).collect();
    let Output::Commit(commit) = &outputs[0] else {
        panic!("{outputs:?}")
    };
    let want: Vec<Message> = messages.iter().cloned().map(Message::from).collect();
    assert_eq!(commit.commit.messages, want);
    assert!(
        matches!(&outputs[1], Output::Event(AgentEvent::RunStart { message: None, messages, .. }) if *messages == want)
    );

    let mut idle = Agent::new(AgentConfig::default()).unwrap();
    for (label, list) in [
        ("empty", vec![]),
        (
            "a blank message",
            vec![UserMessage::text("a"), UserMessage::text(" ")],
        ),
        (
            "a repeated id",
            vec![
                UserMessage {
                    id: Some("x".into()),
                    ..UserMessage::text("a")
                },
                UserMessage {
                    id: Some("x".into()),
                    ..UserMessage::text("b")
                },
            ],
        ),
    ] {
        let before = idle.snapshot_json();
        let error = idle.prompt_messages(None, list, 1).unwrap_err();
        assert_eq!(error.kind(), "invalid_input", "{label}: {error}");
        assert_eq!(idle.snapshot_json(), before, "{label}");
    }
    // Both forms at once, and neither, on the driver.
    let mut driver = Driver::new();
    for line in [
        json!({"type": "prompt", "text": "a", "messages": [{"content": [{"type": "text", "text": "b"}]}]}),
        json!({"type": "prompt"}),
    ] {
        let out = driver.handle_line(line.to_string().as_bytes());
        assert!(out[0].contains("\"invalid_input\""), "{out:?}");
    }
}

/// A user message reads as it is written (issue 42): the `"role":"user"` every user message the
/// driver prints carries is accepted wherever an input reads a user message (`prompt`'s `text`
/// and `messages`, `steer`, `follow_up`, `compact`'s `summary`), through the driver's line and
/// `Agent::handle`; any other role is `invalid_input`, saying which roles are accepted, and
/// changes nothing.
#[test]
fn user_messages_read_as_written() {
    let text = |t: &str| json!([{"type": "text", "text": t}]);
    // A host copies the user message of a transcript the driver printed into a new prompt.
    let mut first = Driver::new();
    let out = first.handle_line(br#"{"type":"prompt","text":"hello","now_ms":1}"#);
    let commit: Value = serde_json::from_str(&out[0]).unwrap();
    let printed = commit["commit"]["messages"][0].clone();
    assert_eq!(printed["role"], "user", "{printed}");

    let accepted = [
        json!({"type": "prompt", "messages": [printed, {"role": "user", "content": text("b")}]}),
        json!({"type": "steer", "text": {"role": "user", "content": text("s")}}),
        json!({"type": "follow_up", "text": {"role": "user", "content": text("f"), "id": "f1"}}),
    ];
    let mut driver = Driver::new();
    let mut agent = Agent::new(AgentConfig::default()).unwrap();
    for line in &accepted {
        let out = driver.handle_line(line.to_string().as_bytes());
        assert!(
            !out.iter().any(|l| l.contains("\"error\"")),
            "{line}: {out:?}"
        );
        let input: runcore::Input = serde_json::from_value(line.clone()).unwrap();
        agent.handle(input, agent.clock_ms()).unwrap();
        while agent.poll().is_some() {}
    }
    // The same messages as without the role.
    let Some(Message::User(user)) = driver.agent().transcript().first() else {
        panic!("{:?}", driver.agent().transcript())
    };
    assert_eq!(**user, UserMessage::text("hello"));
    assert_eq!(driver.agent().snapshot_json(), agent.snapshot_json());
    // A compaction summary copied from a transcript reads too.
    let summary: runcore::Input = serde_json::from_value(json!({
        "type": "compact", "keep_from": 1,
        "summary": {"role": "user", "content": text("so far")},
    }))
    .unwrap();
    assert!(matches!(summary, runcore::Input::Compact { .. }));

    // Any other role: `invalid_input` naming the field and the accepted role; nothing changes.
    let refused = [
        (
            json!({"type": "prompt", "messages": [{"content": text("a")},
                   {"role": "assistant", "content": text("b")}]}),
            "prompt: messages[1]: role \"assistant\"",
        ),
        (
            json!({"type": "prompt", "text": {"role": "system", "content": text("a")}}),
            "prompt: text: role \"system\"",
        ),
        (
            json!({"type": "steer", "text": {"role": "tool_result", "content": text("a")}}),
            "steer: text: role \"tool_result\"",
        ),
        (
            json!({"type": "follow_up", "text": {"role": 7, "content": text("a")}}),
            "follow_up: text: role 7",
        ),
        (
            json!({"type": "compact", "keep_from": 1,
                   "summary": {"role": "assistant", "content": text("a")}}),
            "compact: summary: role \"assistant\"",
        ),
    ];
    for (line, says) in &refused {
        let before = driver.agent().snapshot_json();
        let out = driver.handle_line(line.to_string().as_bytes());
        let error: Value = serde_json::from_str(&out[0]).unwrap();
        assert_eq!(error["error"]["kind"], "invalid_input", "{line}: {out:?}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
        assert!(
            message.ends_with("a user message has role \"user\" (or none)"),
            "{message}"
        );
        assert_eq!(driver.agent().snapshot_json(), before, "{line}");
        // `Input`'s own reading refuses it as well, with the same reason.
        let read = serde_json::from_value::<runcore::Input>(line.clone()).unwrap_err();
        assert!(read.to_string().contains("has role \"user\""), "{read}");
    }
}

/// An imported thread recovers from the store as any committed one.
#[test]
fn an_imported_thread_recovers() {
    let mut store = MemoryStore::new();
    let mut agent = Agent::new(AgentConfig::default()).unwrap();
    let messages: Vec<Message> = history()
        .into_iter()
        .map(|m| serde_json::from_value(m).unwrap())
        .collect();
    agent.import(messages.clone(), 5).unwrap();
    agent.prompt(UserMessage::text("more"), 6).unwrap();
    while let Some(output) = agent.poll() {
        if let Output::Commit(commit) = output {
            store.commit_operation(commit.into_operation()).unwrap();
        }
    }
    let mut cold = Agent::recover(
        AgentConfig::default(),
        &store,
        &ThreadId::new("thread-1"),
        RecoveryPolicy::Replay,
    )
    .unwrap();
    while cold.poll().is_some() {}
    assert_eq!(cold.transcript(), agent.transcript());
    let context = |agent: &Agent| -> Vec<Message> {
        agent.model_request().unwrap().context().cloned().collect()
    };
    assert_eq!(context(&cold), context(&agent));
    assert_eq!(cold.active_run_id(), agent.active_run_id());
}

/// The driver session of a tool call whose `tool_done` carries `meta` (§2.1).
fn tool_meta_session() -> Vec<Value> {
    vec![
        json!({"type": "config", "thread_id": "m"}),
        json!({"type": "prompt", "text": "Read a.txt", "now_ms": 100}),
        json!({"type": "model_done", "run_id": "m/run-1", "step": 1, "message": {
            "content": [{"type": "tool_call", "id": "c1", "name": "read", "arguments": {"path": "a.txt"}},
                        {"type": "tool_call", "id": "c2", "name": "read", "arguments": {"path": "b.txt"}}],
            "stop_reason": "tool_use"}}),
        // Not an object: refused, naming the field, and nothing changes.
        json!({"type": "tool_done", "run_id": "m/run-1", "call_id": "c1", "content": "hello",
               "meta": [1]}),
        json!({"type": "tool_done", "run_id": "m/run-1", "call_id": "c1", "content": "hello",
               "meta": {"timestamp": 1733000000500u64, "trace": {"span": "s-1"}}}),
        // An empty object is the same as none: absent on the wire.
        json!({"type": "tool_done", "run_id": "m/run-1", "call_id": "c2", "content": "bye",
               "is_error": true, "meta": {}, "now_ms": 300}),
    ]
}

/// `tool_done.meta` lands on the committed tool result exactly, is hashed with it, and an
/// empty one leaves no trace.
#[test]
fn driver_lines_for_tool_done_meta() {
    let mut driver = Driver::new();
    let rendered = lines(&mut driver, &tool_meta_session());
    common::snapshot!("driver_tool_done_meta", rendered);
    let transcript = driver.agent().transcript();
    let results: Vec<&ToolResultMessage> = transcript
        .iter()
        .filter_map(Message::as_tool_result)
        .collect();
    assert_eq!(results.len(), 2, "{transcript:?}");
    assert_eq!(
        serde_json::to_value(&results[0].meta).unwrap(),
        json!({"timestamp": 1733000000500u64, "trace": {"span": "s-1"}})
    );
    assert!(results[1].meta.is_empty());
    let rejected: Vec<&str> = rendered
        .lines()
        .filter(|line| line.contains("\"type\":\"error\""))
        .collect();
    assert_eq!(rejected.len(), 1, "{rendered}");
    assert!(rejected[0].contains("\"line\":4"), "{rejected:?}");
    assert!(rejected[0].contains("\"invalid_json\""), "{rejected:?}");
    assert!(
        rejected[0].contains("`meta` must be a JSON object, got an array"),
        "{rejected:?}"
    );
}

/// A tool result's `meta` given on the driver's `tool_done` line survives the store (its
/// commit line applies with its payload hash) and an agent recovered from it.
#[test]
fn tool_done_meta_survives_commit_store_and_recovery() {
    let mut driver = Driver::new();
    let mut store = MemoryStore::new();
    for line in tool_meta_session() {
        for output in driver.handle_line(line.to_string().as_bytes()) {
            let value: Value = serde_json::from_str(&output).unwrap();
            if value["type"] == "commit" {
                match runcore::driver::StoreWrite::from_output_line(value).unwrap() {
                    runcore::driver::StoreWrite::Fenced(operation) => {
                        store.commit_operation(operation).unwrap();
                    }
                    runcore::driver::StoreWrite::Plain(commit) => panic!("unfenced: {commit:?}"),
                }
            }
        }
    }
    let thread = ThreadId::new("m");
    let stored = store.committed_messages(&thread).unwrap();
    assert_eq!(stored.as_slice(), driver.agent().transcript());
    let result = stored.iter().find_map(Message::as_tool_result).unwrap();
    assert_eq!(
        result.meta.get("timestamp"),
        Some(&json!(1733000000500u64)),
        "{result:?}"
    );
    let config = AgentConfig {
        thread_id: thread.clone(),
        ..AgentConfig::default()
    };
    let mut cold = Agent::recover(config, &store, &thread, RecoveryPolicy::Replay).unwrap();
    while cold.poll().is_some() {}
    assert_eq!(cold.transcript(), driver.agent().transcript());
    let context = |agent: &Agent| -> Vec<Message> {
        agent.model_request().unwrap().context().cloned().collect()
    };
    assert_eq!(context(&cold), context(driver.agent()));
}

/// The text of a `meta` with keys out of order and integers beyond 64 bits (§2.1).
const EXACT_META: &str =
    r#"{"z":18446744073709551616,"a":{"y":-18446744073709551617,"b":[1.5,"x"]},"m":1}"#;

/// An import line whose messages and blocks carry `meta` as text, with `space` between its
/// tokens (the hash does not see formatting).
fn exact_meta_import(space: &str) -> String {
    let meta = EXACT_META.replace(':', &format!(":{space}"));
    format!(
        r#"{{"type":"import","messages":[{{"role":"user","content":[{{"type":"text","text":"hi"}}],"meta":{meta}}},{{"role":"assistant","content":[{{"type":"text","text":"yo","meta":{meta}}}],"stop_reason":"stop","meta":{meta}}}],"now_ms":5}}"#
    )
}

/// A `meta` with `18446744073709551616` and unsorted keys comes back exactly through the driver
/// line, the commit line (its hash checked), the store and recovery; its hash does not depend
/// on whitespace or key order.
#[test]
fn meta_comes_back_exactly_through_the_driver_store_and_recovery() {
    let mut driver = Driver::new();
    let mut store = MemoryStore::new();
    let mut hash = None;
    for output in driver.handle_line(exact_meta_import("").as_bytes()) {
        if output.starts_with(r#"{"type":"commit""#) {
            // The commit line holds the text exactly.
            assert_eq!(output.matches(EXACT_META).count(), 3, "{output}");
            match runcore::driver::StoreWrite::from_output_text(&output).unwrap() {
                runcore::driver::StoreWrite::Fenced(operation) => {
                    hash = Some(operation.payload_hash.clone());
                    store.commit_operation(operation).unwrap();
                }
                runcore::driver::StoreWrite::Plain(commit) => panic!("unfenced: {commit:?}"),
            }
        }
    }
    let thread = ThreadId::new("thread-1");
    let stored = store.committed_messages(&thread).unwrap();
    assert_eq!(stored.as_slice(), driver.agent().transcript());
    for message in &stored {
        assert_eq!(message.meta().as_json(), Some(EXACT_META));
    }
    let answer = stored.iter().find_map(Message::as_assistant).unwrap();
    assert_eq!(answer.content[0].meta().as_json(), Some(EXACT_META));
    let cold = Agent::recover(
        AgentConfig::default(),
        &store,
        &thread,
        RecoveryPolicy::Replay,
    )
    .unwrap();
    assert_eq!(cold.transcript(), driver.agent().transcript());
    let restored = Agent::restore_json(&cold.snapshot_json()).unwrap();
    assert_eq!(restored.transcript(), driver.agent().transcript());

    // The same messages with spaces in their `meta`: the same payload hash.
    let mut spaced = Driver::new();
    let spaced_hash = spaced
        .handle_line(exact_meta_import(" ").as_bytes())
        .iter()
        .find_map(|line| {
            let value: Value = serde_json::from_str(line).ok()?;
            Some(value.get("payload_hash")?.as_str()?.to_owned())
        });
    assert_eq!(spaced_hash, hash);
    assert!(hash.is_some());
}
