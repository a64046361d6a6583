//! `runcore codec encode|decode` (SPEC §12.6) through the binary: a call_model line from
//! `runcore drive` encodes, a recorded body decodes to lines `runcore drive` accepts, and the
//! exit statuses.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_runcore"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runcore starts");
    // A command that refuses its arguments exits before reading: a closed pipe is fine.
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    child.wait_with_output().expect("runcore ends")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The recorded body of the first exchange of an Anthropic cassette ending in `cassette`.
fn recorded_body(cassette: &str) -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../providers/tests/fixtures/anthropic.jsonl"
    );
    let fixtures = std::fs::read_to_string(path).expect("fixtures");
    fixtures
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|row| {
            row["cassette"]
                .as_str()
                .is_some_and(|c| c.ends_with(cassette))
                && row["index"] == 0
        })
        .and_then(|row| row["response"].as_str().map(str::to_owned))
        .expect("the cassette")
}

#[test]
fn encode_a_call_model_line_then_decode_the_answer_back_into_drive() {
    let config = r#"{"type":"config","system_prompt":"be brief","tools":{"get_weather":{"description":"weather","parameters":{"type":"object"}}}}"#;
    let prompt = r#"{"type":"prompt","text":"weather in Tokyo?"}"#;
    let driven = run(&["drive"], format!("{config}\n{prompt}\n").as_bytes());
    let call_model = text(&driven.stdout)
        .lines()
        .find(|l| l.starts_with(r#"{"type":"call_model""#))
        .expect("a call_model line")
        .to_owned();

    let encoded = run(
        &[
            "codec",
            "encode",
            "--api",
            "anthropic",
            "--model",
            "claude-sonnet-4-6",
        ],
        call_model.as_bytes(),
    );
    assert!(encoded.status.success(), "{}", text(&encoded.stderr));
    let body: serde_json::Value = serde_json::from_slice(&encoded.stdout).expect("one JSON body");
    assert_eq!(body["system"][0]["text"], "be brief");
    assert_eq!(body["tools"][0]["name"], "get_weather");

    let decoded = run(
        &[
            "codec",
            "decode",
            "--api",
            "anthropic",
            "--run-id",
            "thread-1/run-1",
            "--step",
            "1",
        ],
        recorded_body("reasoning_tool_roundtrip/streaming.yaml").as_bytes(),
    );
    assert!(decoded.status.success(), "{}", text(&decoded.stderr));
    let lines = text(&decoded.stdout);
    assert!(
        lines
            .lines()
            .last()
            .is_some_and(|l| l.starts_with(r#"{"type":"model_done""#))
    );

    let session = format!("{config}\n{prompt}\n{lines}");
    let driven = run(&["drive"], session.as_bytes());
    let out = text(&driven.stdout);
    assert!(!out.contains(r#""type":"error""#), "{out}");
    assert!(out.contains(r#"{"type":"execute_tools""#), "{out}");
}

#[test]
fn decode_exit_statuses() {
    let body = recorded_body("reasoning_tool_roundtrip/streaming.yaml");
    let args = [
        "codec",
        "decode",
        "--api",
        "anthropic",
        "--run-id",
        "r",
        "--step",
        "1",
    ];
    // Cut short: data, exit 0.
    let cut = run(&args, &body.as_bytes()[..body.len() / 2]);
    assert!(cut.status.success());
    assert!(text(&cut.stdout).contains(r#""code":"incomplete_stream""#));
    // Any body with a non-2xx status: data, exit 0.
    let mut with_status = args.to_vec();
    with_status.extend(["--status", "529"]);
    let overloaded = run(&with_status, b"<html>busy</html>");
    assert!(overloaded.status.success());
    assert!(text(&overloaded.stdout).contains(r#""code":"overloaded""#));
    // Not the API's format at all: exit 1, one line naming the offset, nothing on stdout.
    let garbage = run(&args, b"  {\"hello\": 1}");
    assert_eq!(garbage.status.code(), Some(1));
    assert!(garbage.stdout.is_empty());
    let stderr = text(&garbage.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("byte 2"), "{stderr}");
}

#[test]
fn encode_needs_a_model_and_a_full_context_line() {
    let line = r#"{"type":"call_model","run_id":"r","step":1,"final_step":false,"messages":[],"tools":[]}"#;
    let no_model = run(
        &["codec", "encode", "--api", "openai-chat"],
        line.as_bytes(),
    );
    assert_eq!(no_model.status.code(), Some(1));
    let delta = r#"{"type":"call_model","run_id":"r","step":2,"final_step":false,"base":2,"messages":[],"tools":[]}"#;
    let partial = run(
        &["codec", "encode", "--api", "openai-chat", "--model", "m"],
        delta.as_bytes(),
    );
    assert_eq!(partial.status.code(), Some(1));
    assert!(partial.stdout.is_empty());
    let options = run(
        &[
            "codec",
            "encode",
            "--api",
            "openai-chat",
            "--options",
            r#"{"model":"m","stream":false}"#,
        ],
        line.as_bytes(),
    );
    assert!(options.status.success(), "{}", text(&options.stderr));
    let body: serde_json::Value = serde_json::from_slice(&options.stdout).expect("JSON");
    assert_eq!(body["model"], "m");
    assert!(body.get("stream").is_none());
}
