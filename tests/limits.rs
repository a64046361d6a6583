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
