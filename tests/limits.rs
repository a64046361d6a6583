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
