//! Threads that begin with history (SPEC §8.10) in traces (issue 42): an import or a fork
//! brings messages in without a model call, so it yields its run's span and nothing else (no
//! `chat`, no `execute_tool`, no token usage); a run after imports has only its own steps.
//! Also: the provider named by the codecs' `meta.codec.api`, and a failed tool's status
//! message without content.

use runcore::ThreadId;
use runcore::driver::{Driver, StoreWrite};
use runcore::store::{CommitLog, CommittedThreadView, MemoryStore};
use runcore_traces::{AttributeValue, Span, SpanStatus, TraceOptions, spans_from_store};
use serde_json::{Value, json};

/// Every line through one driver; every commit line into `store`.
fn drive(store: &mut MemoryStore, lines: &[Value]) {
    let mut driver = Driver::new();
    for line in lines {
        for out in driver.handle_line(line.to_string().as_bytes()) {
            let value: Value = serde_json::from_str(&out).expect("JSON");
            assert_ne!(value["type"], "error", "{line} → {out}");
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
}

fn config(thread: &str) -> Value {
    json!({"type":"config","thread_id":thread,"tools":{"read":{}}})
}

/// One import of a question and an answer with token usage (and a tool call and its result
/// every third import), at `now_ms`.
fn import(n: u64, now_ms: u64) -> Value {
    let mut messages =
        vec![json!({"role":"user","content":[{"type":"text","text":format!("q{n}")}]})];
    if n.is_multiple_of(3) {
        messages.push(json!({"role":"assistant","content":[
            {"type":"tool_call","id":format!("c{n}"),"name":"read","arguments":{}}],
            "stop_reason":"tool_use","usage":{"input_tokens":7,"output_tokens":3},
            "model":"m"}));
        messages.push(
            json!({"role":"tool_result","call_id":format!("c{n}"),"tool_name":"read",
            "content":[{"type":"text","text":"ok"}],"is_error":false,"outcome":"executed"}),
        );
    }
    messages.push(
        json!({"role":"assistant","content":[{"type":"text","text":format!("a{n}")}],
        "stop_reason":"stop","usage":{"input_tokens":10,"output_tokens":5},"model":"m"}),
    );
    json!({"type":"import","messages":messages,"now_ms":now_ms})
}

fn names(spans: &[Span]) -> Vec<&str> {
    spans.iter().map(|s| s.name.as_str()).collect()
}

fn options() -> TraceOptions {
    TraceOptions::default()
}

#[test]
fn n_imports_give_one_span_each_with_no_model_call_tool_call_or_usage() {
    const IMPORTS: u64 = 300;
    let mut store = MemoryStore::new();
    let mut lines = vec![config("t")];
    lines.extend((1..=IMPORTS).map(|n| import(n, 1_000 * n)));
    drive(&mut store, &lines);
    let spans = spans_from_store(&store, &ThreadId::new("t"), None, &options()).expect("spans");
    // Before the fix: every import took every earlier answer for one of its model calls,
    // N(N+1)/2-ish chat spans (here 60,000 and more).
    assert_eq!(spans.len(), IMPORTS as usize, "{:?}", &names(&spans)[..10]);
    for (n, span) in (1..=IMPORTS).zip(&spans) {
        assert_eq!(span.name, "invoke_agent");
        assert_eq!(span.parent_span_id, None);
        assert!(!span.attributes.contains_key("gen_ai.usage.input_tokens"));
        assert!(!span.attributes.contains_key("gen_ai.usage.output_tokens"));
        let count = if n.is_multiple_of(3) { 4 } else { 2 };
        assert_eq!(
            span.attributes.get("runcore.run.imported"),
            Some(&AttributeValue::Int(count)),
            "{span:?}"
        );
        assert_eq!((span.start_ms, span.end_ms), (1_000 * n, 1_000 * n));
    }
}

#[test]
fn a_run_after_imports_has_only_its_own_model_calls() {
    let mut store = MemoryStore::new();
    let mut lines = vec![config("t")];
    lines.extend((1..=5).map(|n| import(n, 1_000 * n)));
    lines.push(json!({"type":"prompt","text":"go on","now_ms":10_000}));
    lines.push(
        json!({"type":"model_done","run_id":"t/run-6","step":1,"message":{
        "content":[{"type":"text","text":"done"}],"stop_reason":"stop",
        "usage":{"input_tokens":40,"output_tokens":2},"model":"m"},"now_ms":10_500}),
    );
    drive(&mut store, &lines);
    let run = runcore::RunId::new("t/run-6");
    let spans =
        spans_from_store(&store, &ThreadId::new("t"), Some(&run), &options()).expect("spans");
    assert_eq!(names(&spans), ["invoke_agent", "chat m"]);
    assert_eq!(
        spans[0].attributes.get("gen_ai.usage.input_tokens"),
        Some(&AttributeValue::Int(40))
    );
    assert_eq!((spans[1].start_ms, spans[1].end_ms), (10_000, 10_500));
}

#[test]
fn a_fork_yields_its_run_span_only_and_does_not_report_its_parents_usage() {
    let mut store = MemoryStore::new();
    drive(
        &mut store,
        &[
            config("parent"),
            json!({"type":"prompt","text":"hi","now_ms":1_000}),
            json!({"type":"model_done","run_id":"parent/run-1","step":1,"message":{
                "content":[{"type":"text","text":"hello"}],"stop_reason":"stop",
                "usage":{"input_tokens":100,"output_tokens":20},"model":"m"},"now_ms":1_200}),
        ],
    );
    let parent = ThreadId::new("parent");
    let version = store.thread_version(&parent).expect("v");
    let fork = ThreadId::new("fork");
    runcore::host::fork_thread(&mut store, &parent, version, &fork, 5_000).expect("forked");
    let spans = spans_from_store(&store, &fork, None, &options()).expect("spans");
    assert_eq!(names(&spans), ["invoke_agent"], "{spans:?}");
    let span = &spans[0];
    assert!(!span.attributes.contains_key("gen_ai.usage.input_tokens"));
    assert_eq!(
        span.attributes.get("runcore.forked_from.thread_id"),
        Some(&"parent".into())
    );
    assert_eq!(
        span.attributes.get("runcore.forked_from.version"),
        Some(&AttributeValue::Int(i64::try_from(version).expect("small")))
    );
    // The fork's commit is the host's (no commit_clock): its time is the import's.
    assert_eq!((span.start_ms, span.end_ms), (5_000, 5_000));
    // The parent's trace is unchanged by the fork.
    let parent_spans = spans_from_store(&store, &parent, None, &options()).expect("spans");
    assert_eq!(names(&parent_spans), ["invoke_agent", "chat m"]);
}

/// A run whose answers a runcore codec decoded: `meta.codec.api` names the API.
fn decoded_run(store: &mut MemoryStore, api: &str) {
    drive(
        store,
        &[
            config("p"),
            json!({"type":"prompt","text":"hi","now_ms":1_000}),
            json!({"type":"model_done","run_id":"p/run-1","step":1,"message":{
                "content":[{"type":"tool_call","id":"c1","name":"read","arguments":{}}],
                "stop_reason":"tool_use","model":"m","meta":{"codec":{"api":api}}},
                "now_ms":1_100}),
            json!({"type":"tool_done","run_id":"p/run-1","call_id":"c1",
                "content":"secret output of the tool","is_error":true,"now_ms":1_200}),
            json!({"type":"model_done","run_id":"p/run-1","step":2,"message":{
                "content":[{"type":"text","text":"done"}],"stop_reason":"stop","model":"m",
                "meta":{"codec":{"api":api}}},"now_ms":1_300}),
        ],
    );
}

#[test]
fn the_provider_comes_from_the_codecs_meta_unless_given() {
    for (api, provider) in [
        ("anthropic", "anthropic"),
        ("openai-chat", "openai"),
        ("openai-responses", "openai"),
    ] {
        let mut store = MemoryStore::new();
        decoded_run(&mut store, api);
        let spans = spans_from_store(&store, &ThreadId::new("p"), None, &options()).expect("s");
        assert_eq!(
            names(&spans),
            ["invoke_agent", "chat m", "execute_tool read", "chat m"]
        );
        for span in &spans {
            assert_eq!(
                span.attributes.get("gen_ai.provider.name"),
                Some(&provider.into()),
                "{api}: {span:?}"
            );
        }
        let given = TraceOptions {
            provider: Some("aws.bedrock".into()),
            ..options()
        };
        let spans = spans_from_store(&store, &ThreadId::new("p"), None, &given).expect("s");
        assert!(
            spans
                .iter()
                .all(|s| s.attributes.get("gen_ai.provider.name") == Some(&"aws.bedrock".into()))
        );
    }
}

#[test]
fn a_failed_tools_status_is_its_error_type_unless_content_is_asked_for() {
    let mut store = MemoryStore::new();
    decoded_run(&mut store, "anthropic");
    let tool = |options: &TraceOptions| {
        spans_from_store(&store, &ThreadId::new("p"), None, options)
            .expect("spans")
            .into_iter()
            .find(|s| s.name == "execute_tool read")
            .expect("the tool span")
    };
    let plain = tool(&options());
    assert_eq!(
        plain.status,
        SpanStatus::Error {
            message: "tool_error".into()
        }
    );
    let text = serde_json::to_string(&plain).expect("JSON");
    assert!(!text.contains("secret output"), "{text}");
    let with = tool(&TraceOptions {
        content: true,
        ..options()
    });
    assert_eq!(
        with.status,
        SpanStatus::Error {
            message: "secret output of the tool".into()
        }
    );
}
