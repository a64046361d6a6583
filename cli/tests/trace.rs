//! SPEC §14 through the binary: the golden run's spans (traces/tests/golden.rs) read from a
//! store recovered after a SIGKILL of the driver are the warm run's spans, byte for byte, on
//! SQLite (and on PostgreSQL when `RUNCORE_PG_URL` is set; under `CI=true` it must be); and
//! `runcore trace --otlp` / `runcore drive --otlp` export them with OpenTelemetry's OTLP/HTTP
//! exporter (protobuf) to a loopback collector, which decodes them with `opentelemetry-proto`.

mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::collector::{collector, collector_answering};
use common::console::postgres_store;
use common::process::{Drive, TempDir, first, runcore};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span as ProtoSpan;
use prost::Message as _;
use runcore::ThreadId;
use runcore::driver::{Driver, StoreWrite};
use runcore::store::{CommitLog, MemoryStore};
use runcore_traces::{Span, TraceOptions, spans_from_store, to_otlp_json};
use serde_json::Value;

const CONFIG: &str = include_str!("../../traces/tests/fixtures/golden.config.json");
const SCRIPT: &str = include_str!("../../traces/tests/fixtures/golden.in.jsonl");

fn script() -> Vec<Value> {
    SCRIPT
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect()
}

/// The warm run's spans: the script through one in-process driver, its commits into a
/// memory store.
fn warm_spans() -> Vec<Span> {
    let mut driver = Driver::new();
    let mut store = MemoryStore::new();
    for line in std::iter::once(CONFIG.trim()).chain(SCRIPT.lines()) {
        for out in driver.handle_line(line.as_bytes()) {
            let value: Value = serde_json::from_str(&out).expect("JSON");
            if value["type"] == "commit"
                && let StoreWrite::Fenced(operation) =
                    StoreWrite::from_output_line(value).expect("a commit line")
            {
                store.commit_operation(operation).expect("stored");
            }
        }
    }
    spans_from_store(
        &store,
        &ThreadId::new("golden"),
        None,
        &TraceOptions::default(),
    )
    .expect("spans")
}

/// The script through `runcore drive --store URL`, SIGKILLed while the two tools run; a new
/// process recovers (replay: the same tools are handed out again) and finishes the run.
fn crashed_run(dir: &TempDir, url: &str, restart_args: &[&str]) {
    let config = dir.join("golden.json");
    std::fs::write(&config, CONFIG).expect("write the config");
    let config = config.display().to_string();
    let args = ["--store", url, "--config", &config, "--thread", "golden"];
    let lines = script();
    let mut drive = Drive::spawn(&args);
    let mut out = Vec::new();
    for line in &lines[..4] {
        out = drive.send(line.clone());
    }
    let tools = first(&out, "execute_tools").clone();
    assert_eq!(tools["calls"].as_array().map(Vec::len), Some(2), "{tools}");
    drive.kill();

    let mut full: Vec<&str> = args.to_vec();
    full.extend_from_slice(restart_args);
    let mut drive = Drive::spawn(&full);
    assert_eq!(first(&drive.start, "execute_tools"), &tools);
    for line in &lines[4..] {
        out = drive.send(line.clone());
    }
    assert!(
        out.iter()
            .any(|l| l["type"] == "commit" && l["commit"]["run"]["type"] == "ended"),
        "{out:?}"
    );
    let (status, stderr) = drive.finish();
    assert!(status.success(), "{stderr}");
}

/// `runcore trace golden --store URL --json`, checked against the warm spans' export body.
fn assert_trace_is_warm(url: &str) {
    let output = runcore(&["trace", "golden", "--store", url, "--json"]);
    assert!(output.status.success(), "{output:?}");
    let want = format!("{}\n", to_otlp_json(&warm_spans(), "runcore"));
    assert_eq!(String::from_utf8_lossy(&output.stdout), want);
}

#[test]
fn spans_after_a_sigkill_on_sqlite_are_the_warm_spans_byte_for_byte() {
    let dir = TempDir::new("trace-sqlite");
    let url = dir.sqlite("runs.db");
    crashed_run(&dir, &url, &[]);
    assert_trace_is_warm(&url);
    // The text form names every span.
    let output = runcore(&["trace", "golden", "--store", &url]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.starts_with("invoke_agent  +0ms..+750ms"), "{text}");
    assert!(text.contains("  await delete  +250ms..+300ms (50 ms)  runcore.decision=deny"));
    assert!(
        text.contains(
            "  execute_tool write  +300ms..+500ms (200 ms)  error.type=tool_error  ERROR\n"
        )
    );
}

#[test]
fn spans_after_a_sigkill_on_postgres_are_the_warm_spans_byte_for_byte() {
    let Some(url) = postgres_store("trace") else {
        return;
    };
    let dir = TempDir::new("trace-postgres");
    crashed_run(&dir, &url, &[]);
    assert_trace_is_warm(&url);
}

#[test]
fn an_unknown_run_is_exit_1_and_a_missing_store_exit_2() {
    let dir = TempDir::new("trace-errors");
    let url = dir.sqlite("runs.db");
    crashed_run(&dir, &url, &[]);
    let output = runcore(&["trace", "golden", "--store", &url, "--run", "golden/run-7"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("golden/run-7"));
    let missing = dir.sqlite("missing.db");
    let output = runcore(&["trace", "golden", "--store", &missing]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(!dir.join("missing.db").exists(), "nothing created");
}

// ----- OTLP/HTTP ------------------------------------------------------------------------------

/// The spans of one export, decoded as protobuf; the resource names the service and the scope
/// is runcore-traces'.
fn decode(body: &[u8]) -> Vec<ProtoSpan> {
    let request =
        ExportTraceServiceRequest::decode(body).expect("a protobuf ExportTraceServiceRequest");
    let [resource] = request.resource_spans.as_slice() else {
        panic!("one resource: {request:?}");
    };
    let service = resource
        .resource
        .as_ref()
        .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.clone());
    assert_eq!(
        service,
        Some(any_value::Value::StringValue("runcore".into())),
        "{resource:?}"
    );
    for scope in &resource.scope_spans {
        assert_eq!(
            scope.scope.as_ref().map(|s| s.name.as_str()),
            Some(runcore_traces::SCOPE_NAME)
        );
    }
    request
        .resource_spans
        .into_iter()
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect()
}

fn string_attr(span: &ProtoSpan, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| match &v.value {
            Some(any_value::Value::StringValue(s)) => Some(s.clone()),
            _ => None,
        })
}

fn int_attr(span: &ProtoSpan, key: &str) -> Option<i64> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| match &v.value {
            Some(any_value::Value::IntValue(n)) => Some(*n),
            _ => None,
        })
}

/// What the golden run's export must say, decoded with the protocol's own types.
fn check_golden_export(spans: &[ProtoSpan]) {
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "invoke_agent",
            "chat claude-sonnet-4-5",
            "await write",
            "await delete",
            "execute_tool read",
            "execute_tool write",
            "chat claude-sonnet-4-5",
        ]
    );
    let root = &spans[0];
    assert!(root.parent_span_id.is_empty());
    assert_eq!(root.kind, 1, "INTERNAL");
    assert_eq!(root.trace_id.len(), 16);
    assert_eq!(root.start_time_unix_nano, 1_000_000_000);
    assert_eq!(root.end_time_unix_nano, 1_750_000_000);
    for span in &spans[1..] {
        assert_eq!(span.parent_span_id, root.span_id, "{}", span.name);
        assert_eq!(span.trace_id, root.trace_id);
    }
    // No --provider anywhere: the answers' `meta.codec.api` names it (issue 42: it was
    // missing from `drive --otlp`).
    for span in spans {
        assert_eq!(
            string_attr(span, "gen_ai.provider.name").as_deref(),
            Some("anthropic"),
            "{}",
            span.name
        );
    }
    let chat = &spans[1];
    assert_eq!(chat.kind, 3, "CLIENT");
    assert_eq!(
        (chat.start_time_unix_nano, chat.end_time_unix_nano),
        (1_000_000_000, 1_100_000_000)
    );
    assert_eq!(
        string_attr(chat, "gen_ai.operation.name").as_deref(),
        Some("chat")
    );
    assert_eq!(
        string_attr(chat, "gen_ai.response.model").as_deref(),
        Some("claude-sonnet-4-5")
    );
    assert_eq!(
        string_attr(chat, "gen_ai.response.id").as_deref(),
        Some("msg_01")
    );
    assert_eq!(
        string_attr(chat, "gen_ai.conversation.id").as_deref(),
        Some("golden")
    );
    assert_eq!(int_attr(chat, "gen_ai.usage.input_tokens"), Some(100));
    assert_eq!(
        int_attr(chat, "gen_ai.usage.cache_read.input_tokens"),
        Some(60)
    );
    let denied = &spans[3];
    assert_eq!(
        string_attr(denied, "runcore.decision").as_deref(),
        Some("deny")
    );
    assert_eq!(denied.events.len(), 1);
    assert_eq!(denied.events[0].time_unix_nano, 1_300_000_000);
    let failed = &spans[5];
    assert_eq!(
        string_attr(failed, "gen_ai.tool.name").as_deref(),
        Some("write")
    );
    assert_eq!(
        string_attr(failed, "gen_ai.tool.call.id").as_deref(),
        Some("c2")
    );
    assert_eq!(
        string_attr(failed, "error.type").as_deref(),
        Some("tool_error")
    );
    assert_eq!(
        failed.status.as_ref().map(|s| s.code),
        Some(2),
        "STATUS_CODE_ERROR"
    );
}

#[test]
fn trace_otlp_posts_the_spans_over_otlp_http() {
    let dir = TempDir::new("trace-otlp");
    let url = dir.sqlite("runs.db");
    crashed_run(&dir, &url, &[]);
    let collector = collector();
    let output = runcore(&["trace", "golden", "--store", &url, "--otlp", &collector.url]);
    assert!(output.status.success(), "{output:?}");
    let printed: Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    assert_eq!(
        printed,
        serde_json::json!({"spans": 7, "endpoint": format!("{}/v1/traces", collector.url)})
    );
    let export = collector
        .exports
        .recv_timeout(Duration::from_secs(10))
        .expect("an export");
    assert_eq!(export.path, "/v1/traces");
    assert_eq!(export.content_type, "application/x-protobuf");
    check_golden_export(&decode(&export.body));
    // The spans exported are the spans `--json` prints: same ids, same times.
    let json = runcore(&["trace", "golden", "--store", &url, "--json"]);
    let json: Value = serde_json::from_slice(&json.stdout).expect("OTLP/JSON");
    let printed_ids: Vec<String> = json["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .expect("spans")
        .iter()
        .map(|span| span["spanId"].as_str().unwrap_or_default().to_owned())
        .collect();
    let exported_ids: Vec<String> = decode(&export.body)
        .iter()
        .map(|span| hex(&span.span_id))
        .collect();
    assert_eq!(exported_ids, printed_ids);
}

#[test]
fn drive_otlp_exports_a_run_when_its_terminal_commit_is_stored() {
    let dir = TempDir::new("drive-otlp");
    let url = dir.sqlite("runs.db");
    let collector = collector();
    crashed_run(&dir, &url, &["--otlp", &collector.url]);
    let export = collector
        .exports
        .recv_timeout(Duration::from_secs(10))
        .expect("an export when the run ended");
    assert_eq!(export.path, "/v1/traces");
    assert_eq!(export.content_type, "application/x-protobuf");
    check_golden_export(&decode(&export.body));
    assert!(
        collector.exports.try_recv().is_err(),
        "one export for the one run"
    );
}

#[test]
fn a_failed_export_is_exit_1_with_a_reason() {
    let dir = TempDir::new("trace-otlp-fail");
    let url = dir.sqlite("runs.db");
    crashed_run(&dir, &url, &[]);
    // A port nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("address").port();
    drop(closed);
    let target = format!("http://127.0.0.1:{port}");
    let output = runcore(&["trace", "golden", "--store", &url, "--otlp", &target]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("exporting 7 spans to {target}/v1/traces failed")),
        "{stderr}"
    );
    // A collector that answers 500: the status is in the reason.
    let failing = collector_answering(500);
    let output = runcore(&["trace", "golden", "--store", &url, "--otlp", &failing.url]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&failing.url) && stderr.contains("500"),
        "{stderr}"
    );
    let output = runcore(&["trace", "golden", "--store", &url, "--otlp", "https://x"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("\"https://x\""),
        "{output:?}"
    );
}

#[test]
fn drive_with_a_bad_otlp_url_is_a_start_up_error() {
    let dir = TempDir::new("drive-otlp-bad");
    let url = dir.sqlite("runs.db");
    let output = runcore(&["drive", "--store", &url, "--otlp", "https://collector"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--otlp") && stderr.contains("https://collector"),
        "{stderr}"
    );
}

#[test]
fn drive_goes_on_when_the_collector_fails() {
    let dir = TempDir::new("drive-otlp-500");
    let url = dir.sqlite("runs.db");
    let failing = collector_answering(500);
    // The whole script runs (crashed_run checks the run ended and the exit status is 0);
    // the collector saw the attempt.
    crashed_run(&dir, &url, &["--otlp", &failing.url]);
    let export = failing
        .exports
        .recv_timeout(Duration::from_secs(10))
        .expect("an export was attempted");
    check_golden_export(&decode(&export.body));
}

/// A collector that accepts connections and reads what is sent, and never answers.
fn silent_collector() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            let mut reader = stream.try_clone().expect("clone");
            std::thread::spawn(move || {
                let mut sink = [0u8; 4096];
                while matches!(std::io::Read::read(&mut reader, &mut sink), Ok(n) if n > 0) {}
            });
            held.push(stream);
        }
    });
    format!("http://127.0.0.1:{port}")
}

#[test]
fn a_collector_that_never_answers_does_not_delay_the_run_ends_of_drive() {
    let dir = TempDir::new("drive-otlp-silent");
    let url = dir.sqlite("runs.db");
    let target = silent_collector();
    let mut drive = Drive::spawn(&["--store", &url, "--thread", "t", "--otlp", &target]);
    // Each import is a run that ends in its one commit: its spans are exported then.
    for n in 0..3u64 {
        let line = serde_json::json!({"type":"import","now_ms":1_000 + n,"messages":[
            {"role":"user","content":[{"type":"text","text":format!("q{n}")}]},
            {"role":"assistant","content":[{"type":"text","text":format!("a{n}")}],
             "stop_reason":"stop"}]});
        let sent = Instant::now();
        let out = drive.send(line);
        let took = sent.elapsed();
        assert!(
            out.iter()
                .any(|l| l["type"] == "commit" && l["commit"]["run"]["type"] == "ended"),
            "{out:?}"
        );
        // Before: the exporter's 10 s budget, on every run end.
        assert!(
            took < Duration::from_secs(2),
            "import {n} answered after {took:?}"
        );
    }
    // At the end the queued exports get a bounded wait (3 s), then the driver exits.
    let closed = Instant::now();
    let (status, stderr) = drive.finish();
    assert!(status.success(), "{stderr}");
    assert!(
        closed.elapsed() < Duration::from_secs(6),
        "{:?}",
        closed.elapsed()
    );
    assert!(
        stderr.contains("stopped waiting for the OTLP collector"),
        "{stderr}"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
