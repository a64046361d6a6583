//! The core's input limits (`runcore::driver::limits`) at and past each edge, through the
//! driver's line and through `Agent::handle`, and snapshots of inputs at the edge restore.

use runcore::Agent;
use runcore::driver::Driver;
use runcore::driver::MAX_LINE_BYTES;
use runcore::driver::limits::{MAX_DEPTH, MAX_NOW_MS};
use serde_json::{Value, json};

fn kind_of(lines: &[String]) -> Option<String> {
    lines.iter().find_map(|line| {
        let value: Value = serde_json::from_str(line).unwrap();
        (value["type"] == "error").then(|| value["error"]["kind"].as_str().unwrap().to_owned())
    })
}

fn nested(levels: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..levels {
        value = json!([value]);
    }
    value
}

/// A driver waiting for step 1's answer of run `r`.
fn waiting() -> Driver {
    let mut driver = Driver::new();
    let lines = driver.handle_line(br#"{"type":"prompt","text":"hi","run_id":"r"}"#);
    assert_eq!(kind_of(&lines), None);
    driver
}

/// A model_done line whose tool call arguments nest `levels` levels.
fn answer_with(levels: usize) -> String {
    json!({"type": "model_done", "run_id": "r", "step": 1, "message": {
        "content": [{"type": "tool_call", "id": "c", "name": "t", "arguments": nested(levels)}],
        "stop_reason": "tool_use"}})
    .to_string()
}

#[test]
fn nesting_at_the_edge_is_accepted_and_its_snapshot_restores() {
    // The line nests 4 levels around the arguments: object, message, content, block.
    let edge = MAX_DEPTH - 4;
    let mut driver = waiting();
    // Applied without draining: the queued commit (the deepest place) is in the snapshot too.
    let line = Driver::parse_line(answer_with(edge).as_bytes()).unwrap();
    driver.apply(line).unwrap();
    loop {
        let snapshot = driver.agent().snapshot_json();
        let restored = Agent::restore_json(&snapshot).expect("a snapshot the agent wrote restores");
        assert_eq!(restored.snapshot_json(), snapshot);
        if driver.poll().is_none() {
            break;
        }
    }
}

#[test]
fn nesting_past_the_edge_is_invalid_input_and_changes_nothing() {
    let mut driver = waiting();
    let before = driver.agent().snapshot_json();
    for levels in [MAX_DEPTH - 3, 100, 120, 200, 1000] {
        let lines = driver.handle_line(answer_with(levels).as_bytes());
        assert_eq!(
            kind_of(&lines).as_deref(),
            Some("invalid_input"),
            "{levels}"
        );
        assert_eq!(driver.agent().snapshot_json(), before);
    }
}

#[test]
fn now_ms_at_and_past_the_edge() {
    let mut driver = Driver::new();
    let line = format!(r#"{{"type":"prompt","text":"hi","now_ms":{MAX_NOW_MS}}}"#);
    assert_eq!(kind_of(&driver.handle_line(line.as_bytes())), None);
    let mut driver = Driver::new();
    for now in [MAX_NOW_MS + 1, u64::MAX] {
        let line = format!(r#"{{"type":"prompt","text":"hi","now_ms":{now}}}"#);
        assert_eq!(
            kind_of(&driver.handle_line(line.as_bytes())).as_deref(),
            Some("invalid_json")
        );
    }
    let mut agent = Agent::new(Default::default()).unwrap();
    let prompt = runcore::Input::Prompt {
        message: Some(runcore::UserMessage::text("hi")),
        messages: Vec::new(),
        run_id: None,
    };
    let error = agent.handle(prompt, MAX_NOW_MS + 1).unwrap_err();
    assert_eq!(error.kind(), "invalid_input");
}

#[test]
fn line_length_at_and_past_the_edge() {
    let head = r#"{"type":"prompt","text":""#;
    let tail = r#""}"#;
    let fill = MAX_LINE_BYTES - head.len() - tail.len();
    let line = format!("{head}{}{tail}", "a".repeat(fill));
    assert_eq!(line.len(), MAX_LINE_BYTES);
    assert_eq!(kind_of(&Driver::new().handle_line(line.as_bytes())), None);
    let line = format!("{head}{}{tail}", "a".repeat(fill + 1));
    assert_eq!(
        kind_of(&Driver::new().handle_line(line.as_bytes())).as_deref(),
        Some("invalid_json")
    );
}

#[test]
fn lone_surrogates_are_refused() {
    let lines = Driver::new().handle_line(br#"{"type":"prompt","text":"\ud800"}"#);
    assert_eq!(kind_of(&lines).as_deref(), Some("invalid_json"));
}

/// The nesting of JSON text, as the snapshot reader counts it.
fn depth_of(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth_of).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth_of).max().unwrap_or(0),
        _ => 0,
    }
}

/// A model_done line whose tool call arguments are an object nesting `levels` levels.
fn answer_object(levels: usize) -> String {
    json!({"type": "model_done", "run_id": "r", "step": 1, "message": {
        "content": [{"type": "tool_call", "id": "c", "name": "t",
            "arguments": {"x": nested(levels - 1)}}],
        "stop_reason": "tool_use"}})
    .to_string()
}

/// An agent's snapshot text with the tool call arguments of its transcript's last message
/// replaced by `levels` levels of nesting.
fn snapshot_nested(levels: usize) -> String {
    let mut driver = waiting();
    let lines = driver.handle_line(answer_object(1).as_bytes());
    assert_eq!(kind_of(&lines), None);
    let mut snapshot: Value = serde_json::from_str(&driver.agent().snapshot_json()).unwrap();
    let messages = snapshot["agent"]["messages"].as_array_mut().unwrap();
    let last = messages.last_mut().unwrap();
    last["content"][0]["arguments"] = json!({"x": nested(levels - 1)});
    snapshot.to_string()
}

#[test]
fn the_snapshot_reader_applies_its_own_depth_limit_at_and_past_the_edge() {
    use runcore::SnapshotError;
    use runcore::driver::limits::{MAX_SNAPSHOT_DEPTH, snapshot_too_deep};
    // envelope, agent, messages, message, content, block: the arguments start at level 7.
    let around = depth_of(&serde_json::from_str(&snapshot_nested(20)).unwrap()) - 20;
    assert_eq!(around, 6);
    let at_edge = snapshot_nested(MAX_SNAPSHOT_DEPTH - around);
    assert_eq!(
        depth_of(&serde_json::from_str(&at_edge).unwrap()),
        MAX_SNAPSHOT_DEPTH
    );
    let restored = Agent::restore_json(&at_edge)
        .unwrap_or_else(|e| panic!("a snapshot at the edge restores: {e}"));
    assert_eq!(
        serde_json::from_str::<Value>(&restored.snapshot_json()).unwrap(),
        serde_json::from_str::<Value>(&at_edge).unwrap()
    );
    // Past the edge, below serde_json's limit of 128 and past it: the reader's own error.
    let deepest = |levels: usize| {
        // Built as text: a `Value` this deep would overflow the test's stack.
        let deep = format!("{{\"x\":{}1{}}}", "[".repeat(levels), "]".repeat(levels));
        snapshot_nested(1).replace(r#"{"x":1}"#, &deep)
    };
    for levels in [MAX_SNAPSHOT_DEPTH - around + 1, 127 - around, 200, 100_000] {
        let text = if levels > 200 {
            deepest(levels)
        } else {
            snapshot_nested(levels)
        };
        assert_eq!(
            Agent::restore_json(&text).err(),
            Some(SnapshotError::Malformed(snapshot_too_deep())),
            "{levels}"
        );
        // The envelope read by serde (`AgentSnapshot`) applies it too, where serde can read it.
        if levels < 120 {
            let envelope: Result<runcore::AgentSnapshot, _> = serde_json::from_str(&text);
            let error = envelope.expect_err("refused").to_string();
            assert!(error.contains(&snapshot_too_deep()), "{error}");
        }
    }
}

#[test]
fn every_snapshot_the_agent_writes_restores_for_inputs_at_the_edge() {
    use runcore::driver::limits::MAX_SNAPSHOT_DEPTH;
    // Every place an input's own JSON lands in a snapshot, each at the deepest the driver
    // takes: tool call arguments (queued in the outbox's commit and event), a tool result's
    // details, a config's tool schema, a resume command's answer.
    let mut driver = waiting();
    let mut writes = Vec::new();
    let line = Driver::parse_line(answer_object(MAX_DEPTH - 4).as_bytes()).unwrap();
    driver.apply(line).unwrap();
    writes.push(driver.agent().snapshot_json());
    while driver.poll().is_some() {
        writes.push(driver.agent().snapshot_json());
    }
    let details = json!({"type": "tool_done", "run_id": "r", "call_id": "c", "content": "x",
        "details": nested(MAX_DEPTH - 1)});
    let lines = driver.handle_line(details.to_string().as_bytes());
    assert_eq!(kind_of(&lines), None, "{lines:?}");
    writes.push(driver.agent().snapshot_json());
    let past = json!({"type": "tool_done", "run_id": "r", "call_id": "c", "content": "x",
        "details": nested(MAX_DEPTH)});
    assert_eq!(
        kind_of(&driver.handle_line(past.to_string().as_bytes())).as_deref(),
        Some("invalid_input")
    );
    let mut config = Driver::new();
    let schema = json!({"type": "config", "tools": {"t": {"description": "d",
        "parameters": {"type": "object", "properties": {"x": nested(MAX_DEPTH - 6)}}}}});
    let lines = config.handle_line(schema.to_string().as_bytes());
    assert_eq!(kind_of(&lines), None, "{lines:?}");
    writes.push(config.agent().snapshot_json());
    for snapshot in writes {
        let depth = depth_of(&serde_json::from_str(&snapshot).unwrap());
        assert!(depth <= MAX_SNAPSHOT_DEPTH, "{depth}");
        let restored = Agent::restore_json(&snapshot).expect("a snapshot the agent wrote restores");
        assert_eq!(restored.snapshot_json(), snapshot);
    }
}

// ----- the Rust doors' nesting check: a fast walk of the JSON values an answer or a tool
// output holds, the exact walk near the limit; both must agree with the exact rule. -----

use runcore::{
    AgentConfig, AssistantBlock, AssistantMessage, Input, Meta, RunId, StopReason, ToolOutput,
    UserMessage,
};

/// An agent waiting for step 1's answer of run `r`.
fn agent_waiting_for_model() -> Agent {
    let mut agent = Agent::new(AgentConfig::default()).unwrap();
    agent
        .prompt_with_run_id(RunId::from("r"), UserMessage::text("hi"), 0)
        .unwrap();
    while agent.poll().is_some() {}
    agent
}

/// An agent whose call `c` of run `r` is executing.
fn agent_waiting_for_tool() -> Agent {
    let mut agent = agent_waiting_for_model();
    let answer = AssistantMessage::new(
        vec![AssistantBlock::tool_call("c", "t", json!({}))],
        StopReason::ToolUse,
    );
    agent.model_done(&RunId::from("r"), 1, answer).unwrap();
    while agent.poll().is_some() {}
    agent
}

fn meta_nesting(levels: usize) -> Meta {
    // The object itself is one level.
    std::iter::once(("k".to_owned(), nested(levels - 1))).collect()
}

/// Answers whose deepest value (in each place an answer holds one) nests `levels` levels.
fn answers_nesting(levels: usize) -> Vec<(&'static str, AssistantMessage)> {
    let call = |arguments: Value, meta: Meta| AssistantBlock::ToolCall {
        id: "c".into(),
        name: "t".into(),
        arguments: arguments.into(),
        meta,
    };
    let mut message_meta = AssistantMessage::text("x");
    message_meta.meta = meta_nesting(levels);
    vec![
        (
            "arguments",
            AssistantMessage::new(vec![call(nested(levels), Meta::new())], StopReason::ToolUse),
        ),
        (
            "call meta",
            AssistantMessage::new(
                vec![call(json!({}), meta_nesting(levels))],
                StopReason::ToolUse,
            ),
        ),
        (
            "text meta",
            AssistantMessage::new(
                vec![AssistantBlock::Text {
                    text: "x".into(),
                    meta: meta_nesting(levels),
                }],
                StopReason::Stop,
            ),
        ),
        ("message meta", message_meta),
    ]
}

#[test]
fn rust_doors_agree_with_the_exact_rule_around_the_edge() {
    // From well inside the fast walk's budget to past the limit, in every place a value
    // sits: `model_done` (the method and `handle`) and `tool_done` accept exactly what the
    // exact walk of the input accepts, and a refusal changes nothing.
    for levels in 40..=70 {
        for (place, answer) in answers_nesting(levels) {
            let input = Input::ModelDone {
                run_id: RunId::from("r"),
                step: 1,
                message: answer.clone(),
            };
            let expected = runcore::driver::limits::check_depth(&input).is_ok();
            let mut by_method = agent_waiting_for_model();
            let before = by_method.snapshot_json();
            let got = by_method.model_done(&RunId::from("r"), 1, answer);
            assert_eq!(
                got.is_ok(),
                expected,
                "model_done, {place}, {levels} levels"
            );
            if let Err(error) = got {
                assert_eq!(error.kind(), "invalid_input");
                assert_eq!(by_method.snapshot_json(), before);
            }
            let mut by_handle = agent_waiting_for_model();
            let got = by_handle.handle(input, 0);
            assert_eq!(got.is_ok(), expected, "handle, {place}, {levels} levels");
        }
        let mut with_details = ToolOutput::text("c", "ok");
        with_details.details = Some(nested(levels));
        let with_meta = ToolOutput::text("c", "ok").with_meta(meta_nesting(levels));
        for (place, output) in [("details", with_details), ("meta", with_meta)] {
            let input = Input::tool_done(RunId::from("r"), output.clone());
            let expected = runcore::driver::limits::check_depth(&input).is_ok();
            let mut by_method = agent_waiting_for_tool();
            let before = by_method.snapshot_json();
            let got = by_method.tool_done(&RunId::from("r"), &"c".into(), output);
            assert_eq!(got.is_ok(), expected, "tool_done, {place}, {levels} levels");
            if let Err(error) = got {
                assert_eq!(error.kind(), "invalid_input");
                assert_eq!(by_method.snapshot_json(), before);
            }
            let mut by_handle = agent_waiting_for_tool();
            assert_eq!(
                by_handle.handle(input, 0).is_ok(),
                expected,
                "handle tool_done, {place}, {levels} levels"
            );
        }
    }
    // The edge itself is inside that range, on both sides.
    let at_edge = Input::ModelDone {
        run_id: RunId::from("r"),
        step: 1,
        message: answers_nesting(MAX_DEPTH - 4).remove(0).1,
    };
    assert!(runcore::driver::limits::check_depth(&at_edge).is_ok());
    let past_edge = Input::ModelDone {
        run_id: RunId::from("r"),
        step: 1,
        message: answers_nesting(MAX_DEPTH - 3).remove(0).1,
    };
    assert!(runcore::driver::limits::check_depth(&past_edge).is_err());
}
