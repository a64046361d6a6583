//! The golden trace (SPEC §14): a scripted run with two model steps, two tools executed in
//! parallel (one failing), an approval and a denial, driven through the JSON-lines driver;
//! its commits go into a `MemoryStore` and the spans are derived from the store.
//!
//! `cli/tests/trace.rs` derives the same spans from a SQLite store recovered after a SIGKILL
//! of the driver process and checks them against this snapshot, byte for byte.

use runcore::ThreadId;
use runcore::driver::{Driver, StoreWrite};
use runcore::store::{CommitLog, MemoryStore};
use runcore_traces::{Span, SpanKind, SpanStatus, TraceOptions, spans_from_store, to_otlp_json};
use serde_json::Value;

const CONFIG: &str = include_str!("fixtures/golden.config.json");
const SCRIPT: &str = include_str!("fixtures/golden.in.jsonl");

/// The warm run: every input line through one driver, every commit line into the store.
fn warm_store() -> MemoryStore {
    let mut driver = Driver::new();
    let mut store = MemoryStore::new();
    for line in std::iter::once(CONFIG.trim()).chain(SCRIPT.lines()) {
        for out in driver.handle_line(line.as_bytes()) {
            let value: Value = serde_json::from_str(&out).expect("JSON");
            assert_ne!(value["type"], "error", "{out}");
            if value["type"] == "commit" {
                match StoreWrite::from_output_line(value).expect("a commit line") {
                    StoreWrite::Fenced(operation) => {
                        store.commit_operation(operation).expect("stored");
                    }
                    other => panic!("expected a fenced commit, got {other:?}"),
                }
            }
        }
    }
    store
}

fn options() -> TraceOptions {
    TraceOptions {
        agent_name: Some("tidy".into()),
        provider: Some("anthropic".into()),
        content: false,
    }
}

fn golden_spans() -> Vec<Span> {
    let store = warm_store();
    spans_from_store(&store, &ThreadId::new("golden"), None, &options()).expect("spans")
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a runcore_traces::AttributeValue> {
    span.attributes.get(key)
}

#[test]
fn the_golden_run_gives_the_spans_of_the_snapshot() {
    let spans = golden_spans();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "invoke_agent tidy",
            "chat claude-sonnet-4-5",
            "await write",
            "await delete",
            "execute_tool read",
            "execute_tool write",
            "chat claude-sonnet-4-5",
        ]
    );
    let root = &spans[0];
    assert_eq!(root.parent_span_id, None);
    assert_eq!((root.start_ms, root.end_ms), (1000, 1750));
    for child in &spans[1..] {
        assert_eq!(child.parent_span_id.as_ref(), Some(&root.span_id));
        assert_eq!(child.trace_id, root.trace_id);
        assert!(child.start_ms >= root.start_ms && child.end_ms <= root.end_ms);
    }
    // The model steps: CLIENT, exact times (previous commit → the answer's commit).
    assert_eq!(spans[1].kind, SpanKind::Client);
    assert_eq!((spans[1].start_ms, spans[1].end_ms), (1000, 1100));
    assert_eq!((spans[6].start_ms, spans[6].end_ms), (1500, 1750));
    assert_eq!(
        attr(&spans[1], "gen_ai.usage.cache_read.input_tokens"),
        Some(&60u64.into())
    );
    assert_eq!(
        attr(&spans[1], "gen_ai.response.id"),
        Some(&"msg_01".into())
    );
    // The waits: the approval with its note, the denial with its reason.
    assert_eq!((spans[2].start_ms, spans[2].end_ms), (1100, 1250));
    assert_eq!(attr(&spans[2], "runcore.decision"), Some(&"allow".into()));
    assert_eq!(
        attr(&spans[2], "runcore.decision.note"),
        Some(&"fine by me".into())
    );
    assert_eq!((spans[3].start_ms, spans[3].end_ms), (1250, 1300));
    assert_eq!(attr(&spans[3], "runcore.decision"), Some(&"deny".into()));
    assert_eq!(
        attr(&spans[3], "runcore.decision.reason"),
        Some(&"keep c.md".into())
    );
    // The tools ran in parallel from the last decision to the batch's commit; the failed one
    // is an error.
    for tool in &spans[4..6] {
        assert_eq!((tool.start_ms, tool.end_ms), (1300, 1500));
        assert_eq!(attr(tool, "runcore.time.exact"), Some(&false.into()));
    }
    assert_eq!(spans[4].status, SpanStatus::Unset);
    assert!(matches!(spans[5].status, SpanStatus::Error { .. }));
    assert_eq!(attr(&spans[5], "error.type"), Some(&"tool_error".into()));
    // The denied call was never executed: an event on the run's span.
    assert_eq!(root.events.len(), 1);
    assert_eq!(root.events[0].name, "runcore.tool.not_executed");

    insta::with_settings!({snapshot_path => "../../snapshots", prepend_module_to_snapshot => false, omit_expression => true}, {
        insta::assert_json_snapshot!("traces_golden_spans", spans);
    });
}

#[test]
fn deriving_twice_gives_the_same_bytes() {
    let first = serde_json::to_string(&golden_spans()).expect("JSON");
    let second = serde_json::to_string(&golden_spans()).expect("JSON");
    assert_eq!(first, second);
    let otlp = |spans: &[Span]| to_otlp_json(spans, "runcore").to_string();
    assert_eq!(otlp(&golden_spans()), otlp(&golden_spans()));
}

#[test]
fn content_is_only_there_when_asked_for() {
    let store = warm_store();
    let thread = ThreadId::new("golden");
    let plain = spans_from_store(&store, &thread, None, &options()).expect("spans");
    assert!(
        plain
            .iter()
            .all(|s| !s.attributes.contains_key("gen_ai.input.messages"))
    );
    let with = TraceOptions {
        content: true,
        ..options()
    };
    let spans = spans_from_store(&store, &thread, None, &with).expect("spans");
    let chat = spans
        .iter()
        .find(|s| s.name.starts_with("chat"))
        .expect("chat");
    let Some(runcore_traces::AttributeValue::String(input)) =
        chat.attributes.get("gen_ai.input.messages")
    else {
        panic!("input messages: {chat:?}");
    };
    let input: Value = serde_json::from_str(input).expect("JSON");
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[0]["parts"][0]["content"], "Tidy the notes");
    let Some(runcore_traces::AttributeValue::String(output)) =
        chat.attributes.get("gen_ai.output.messages")
    else {
        panic!("output messages: {chat:?}");
    };
    let output: Value = serde_json::from_str(output).expect("JSON");
    assert_eq!(output[0]["parts"][1]["type"], "tool_call");
    assert_eq!(output[0]["finish_reason"], "tool_use");
}

#[test]
fn a_run_filter_keeps_one_trace_and_an_unknown_run_is_an_error() {
    let store = warm_store();
    let thread = ThreadId::new("golden");
    let run = runcore::RunId::new("golden/run-1");
    let spans = spans_from_store(&store, &thread, Some(&run), &options()).expect("spans");
    assert_eq!(spans.len(), 7);
    let missing = runcore::RunId::new("golden/run-9");
    let error = spans_from_store(&store, &thread, Some(&missing), &options()).unwrap_err();
    assert!(error.to_string().contains("golden/run-9"), "{error}");
}

#[test]
fn commits_without_commit_clock_still_give_spans_with_bounds() {
    // The previous release's session (no `commit_clock` drafts): times are carried forward
    // from the drafts that have `now_ms`, and marked inexact.
    let output = include_str!("../../tests/fixtures/previous_release/session.out.jsonl");
    let mut store = MemoryStore::new();
    for line in output.lines() {
        let value: Value = serde_json::from_str(line).expect("JSON");
        if value["type"] != "commit" {
            continue;
        }
        if let StoreWrite::Fenced(operation) = StoreWrite::from_output_line(value).expect("line") {
            store.commit_operation(operation).expect("stored");
        }
    }
    let spans =
        spans_from_store(&store, &ThreadId::new("legacy"), None, &options()).expect("spans");
    assert!(spans.iter().any(|s| s.name == "invoke_agent tidy"));
    assert!(spans.iter().any(|s| s.name.starts_with("chat")));
    assert!(
        spans
            .iter()
            .filter(|s| s.name.starts_with("chat"))
            .all(|s| s.attributes.get("runcore.time.exact") == Some(&false.into()))
    );
    for span in &spans {
        assert!(span.start_ms <= span.end_ms, "{span:?}");
    }
}

/// Host data is data: events that are not what the agent writes (unknown kinds, payloads of
/// the wrong shape, transcript lengths past the transcript, times that run backwards, runs
/// with no `run_started`, events of another thread) give spans, never a panic, and every
/// span ends no earlier than it starts.
#[test]
fn odd_events_never_panic() {
    use runcore::store::EventRecord;
    use runcore::{Message, RunId};
    use serde_json::json;
    let thread = ThreadId::new("t");
    let event = |sequence: u64, commit: u64, run: &str, kind: &str, payload: Value| EventRecord {
        sequence,
        commit_sequence: commit,
        thread_id: thread.clone(),
        run_id: RunId::new(run),
        kind: kind.into(),
        payload,
    };
    let messages = [
        Message::user("hi"),
        serde_json::from_value::<Message>(json!({"role":"assistant","content":[
            {"type":"tool_call","id":"c","name":"x","arguments":"not an object"}],
            "stop_reason":"tool_use"}))
        .expect("a message"),
        serde_json::from_value::<Message>(json!({"role":"tool_result","call_id":"zz",
            "tool_name":"x","content":[],"is_error":true,"outcome":"interrupted"}))
        .expect("a message"),
    ];
    let mut events = vec![
        event(
            1,
            1,
            "r1",
            "commit_clock",
            json!({"now_ms": u64::MAX, "transcript_len": 999}),
        ),
        event(
            2,
            2,
            "r1",
            "commit_clock",
            json!({"now_ms": 5, "transcript_len": 1}),
        ),
        event(
            3,
            2,
            "r1",
            "run_started",
            json!({"run_id":"r1","transcript_start": 77}),
        ),
        event(
            4,
            3,
            "r1",
            "run_state_changed",
            json!({"state":"not a state"}),
        ),
        event(
            5,
            4,
            "r2",
            "permission_decided",
            json!({"call_id":"c","decision":"allow","step":1}),
        ),
        event(
            6,
            4,
            "r2",
            "run_state_changed",
            json!({"await_reason":"permission",
            "await_target":{"type":"tool_call","reason":"permission","call_id":"c",
            "tool":{"name":"x","arguments":{}}},"state":{"type":"awaiting"}}),
        ),
        event(7, 5, "r3", "something_else", json!([1, 2, 3])),
        event(
            8,
            6,
            "r3",
            "commit_clock",
            json!({"now_ms": 0, "transcript_len": 2}),
        ),
    ];
    let mut other = event(
        9,
        7,
        "r9",
        "commit_clock",
        json!({"now_ms": 1, "transcript_len": 0}),
    );
    other.thread_id = ThreadId::new("other");
    events.push(other);
    for content in [false, true] {
        let options = TraceOptions {
            content,
            ..options()
        };
        for cut in 0..=events.len() {
            for messages_cut in 0..=messages.len() {
                let spans = runcore_traces::derive_spans(
                    &thread,
                    &messages[..messages_cut],
                    &events[..cut],
                    &options,
                );
                for span in &spans {
                    assert!(span.start_ms <= span.end_ms, "{span:?}");
                }
                let _ = to_otlp_json(&spans, "runcore");
            }
        }
    }
}
