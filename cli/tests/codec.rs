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

/// `--header` (repeatable) and `--headers-file` give the decoder the response's headers: a
/// `model_failed` line carries `retry_after_ms` (SPEC §13); a date is a delay from `--now-ms`
/// or the response's `date` header; a bad header is a usage error.
#[test]
fn decode_takes_the_response_headers() {
    let body = br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    let args = [
        "codec",
        "decode",
        "--api",
        "anthropic",
        "--run-id",
        "r",
        "--step",
        "1",
        "--status",
        "429",
    ];
    let failed = |extra: &[&str]| {
        let mut all = args.to_vec();
        all.extend(extra);
        let output = run(&all, body);
        assert!(output.status.success(), "{}", text(&output.stderr));
        let line: serde_json::Value =
            serde_json::from_str(text(&output.stdout).trim()).expect("one line");
        assert_eq!(line["type"], "model_failed");
        assert_eq!(line["code"], "rate_limited");
        line.get("retry_after_ms").cloned()
    };
    assert_eq!(failed(&[]), None);
    assert_eq!(failed(&["--header", "Retry-After: 3"]), Some(3000.into()));
    assert_eq!(
        failed(&[
            "--header",
            "retry-after: 3",
            "--header",
            "retry-after-ms: 1500"
        ]),
        Some(1500.into())
    );
    let date = "retry-after: Wed, 21 Oct 2026 07:28:30 GMT";
    assert_eq!(
        failed(&["--header", date, "--now-ms", "1792567700000"]),
        Some(10_000.into())
    );
    assert_eq!(
        failed(&[
            "--header",
            date,
            "--header",
            "Date: Wed, 21 Oct 2026 07:28:00 GMT"
        ]),
        Some(30_000.into())
    );
    let dir = std::env::temp_dir().join(format!("runcore-codec-headers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("headers.txt");
    std::fs::write(
        &file,
        "HTTP/2 429\r\nx-ratelimit-remaining-tokens: 0\r\nx-ratelimit-reset-tokens: 6m0s\r\n\r\n",
    )
    .expect("headers file");
    let path = file.to_str().expect("utf-8 path");
    assert_eq!(failed(&["--headers-file", path]), Some(360_000.into()));
    // --header comes after the file: retry-after wins over a reset header anyway.
    assert_eq!(
        failed(&["--headers-file", path, "--header", "retry-after: 2"]),
        Some(2000.into())
    );
    std::fs::write(&file, "no colon here\n").expect("headers file");
    let mut all = args.to_vec();
    all.extend(["--headers-file", path]);
    let bad_file = run(&all, body);
    assert_eq!(bad_file.status.code(), Some(1));
    assert!(bad_file.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
    let mut all = args.to_vec();
    all.extend(["--header", "nocolon"]);
    assert_eq!(run(&all, body).status.code(), Some(2));
}

/// A 200 body of only comments or pings is data (`incomplete_stream`, exit 0), not a format
/// error with no terminal line.
#[test]
fn decode_a_body_of_only_pings_is_incomplete() {
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
    let output = run(&args, b": hi\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains(r#""code":"incomplete_stream""#));
}
