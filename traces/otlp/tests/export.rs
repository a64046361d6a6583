//! The exporter against a loopback collector: what arrives is a protobuf
//! `ExportTraceServiceRequest` carrying every field of every span, and a collector that is
//! not there or answers non-2xx is a typed error naming the URL.

#[allow(dead_code)]
#[path = "../../../cli/tests/common/collector.rs"]
mod collector;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use collector::{collector, collector_answering};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;
use runcore_otlp::{ExportError, OtlpExporter};
use runcore_traces::{
    AttributeValue, Attributes, SCOPE_NAME, SCOPE_VERSION, Span, SpanEvent, SpanKind, SpanStatus,
};

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const ROOT: &str = "b7ad6b7169203331";
const CHILD: &str = "00f067aa0ba902b7";

fn spans() -> Vec<Span> {
    let mut root_attributes = Attributes::new();
    root_attributes.insert("gen_ai.operation.name".into(), "invoke_agent".into());
    root_attributes.insert("gen_ai.usage.input_tokens".into(), AttributeValue::Int(100));
    let mut chat_attributes = Attributes::new();
    chat_attributes.insert("gen_ai.operation.name".into(), "chat".into());
    chat_attributes.insert("runcore.time.exact".into(), false.into());
    chat_attributes.insert(
        "gen_ai.response.finish_reasons".into(),
        AttributeValue::Strings(vec!["tool_use".into()]),
    );
    let mut event_attributes = Attributes::new();
    event_attributes.insert("runcore.tool.outcome".into(), "denied".into());
    vec![
        Span {
            trace_id: TRACE.into(),
            span_id: ROOT.into(),
            parent_span_id: None,
            name: "invoke_agent".into(),
            kind: SpanKind::Internal,
            start_ms: 1_000,
            end_ms: 1_750,
            attributes: root_attributes,
            events: vec![SpanEvent {
                name: "runcore.tool.not_executed".into(),
                time_ms: 1_300,
                attributes: event_attributes,
            }],
            status: SpanStatus::Unset,
        },
        Span {
            trace_id: TRACE.into(),
            span_id: CHILD.into(),
            parent_span_id: Some(ROOT.into()),
            name: "chat m1".into(),
            kind: SpanKind::Client,
            start_ms: 1_000,
            end_ms: 1_100,
            attributes: chat_attributes,
            events: Vec::new(),
            status: SpanStatus::Error {
                message: "overloaded".into(),
            },
        },
    ]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn value(kv: &KeyValue) -> Option<&any_value::Value> {
    kv.value.as_ref().and_then(|v: &AnyValue| v.value.as_ref())
}

#[test]
fn spans_arrive_as_protobuf_with_every_field() {
    let collector = collector();
    let exporter = OtlpExporter::new(&collector.url, "support-bot").expect("an exporter");
    exporter.export(&spans()).expect("exported");
    let export = collector
        .exports
        .recv_timeout(Duration::from_secs(10))
        .expect("a request");
    assert_eq!(export.path, "/v1/traces");
    assert_eq!(export.content_type, "application/x-protobuf");
    let request = ExportTraceServiceRequest::decode(export.body.as_slice()).expect("protobuf");
    let [resource] = request.resource_spans.as_slice() else {
        panic!("one resource: {request:?}");
    };
    let attributes = &resource.resource.as_ref().expect("a resource").attributes;
    assert_eq!(attributes.len(), 1, "only service.name: {attributes:?}");
    assert_eq!(attributes[0].key, "service.name");
    assert_eq!(
        value(&attributes[0]),
        Some(&any_value::Value::StringValue("support-bot".into()))
    );
    let [scope] = resource.scope_spans.as_slice() else {
        panic!("one scope: {resource:?}");
    };
    let scope_id = scope.scope.as_ref().expect("a scope");
    assert_eq!(
        (scope_id.name.as_str(), scope_id.version.as_str()),
        (SCOPE_NAME, SCOPE_VERSION)
    );
    let [root, chat] = scope.spans.as_slice() else {
        panic!("two spans: {scope:?}");
    };

    assert_eq!(hex(&root.trace_id), TRACE);
    assert_eq!(hex(&root.span_id), ROOT);
    assert!(root.parent_span_id.is_empty());
    assert_eq!(root.name, "invoke_agent");
    assert_eq!(root.kind, 1, "INTERNAL");
    assert_eq!(
        (root.start_time_unix_nano, root.end_time_unix_nano),
        (1_000_000_000, 1_750_000_000)
    );
    let tokens = root
        .attributes
        .iter()
        .find(|kv| kv.key == "gen_ai.usage.input_tokens")
        .and_then(value);
    assert_eq!(tokens, Some(&any_value::Value::IntValue(100)));
    assert_eq!(root.events.len(), 1);
    assert_eq!(root.events[0].name, "runcore.tool.not_executed");
    assert_eq!(root.events[0].time_unix_nano, 1_300_000_000);
    assert_eq!(root.events[0].attributes[0].key, "runcore.tool.outcome");
    assert_eq!(root.status.as_ref().map(|s| s.code), Some(0), "UNSET");

    assert_eq!(hex(&chat.trace_id), TRACE);
    assert_eq!(hex(&chat.span_id), CHILD);
    assert_eq!(hex(&chat.parent_span_id), ROOT);
    assert_eq!(chat.kind, 3, "CLIENT");
    assert_eq!(
        (chat.start_time_unix_nano, chat.end_time_unix_nano),
        (1_000_000_000, 1_100_000_000)
    );
    let keys: Vec<&str> = chat.attributes.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "gen_ai.operation.name",
            "gen_ai.response.finish_reasons",
            "runcore.time.exact"
        ]
    );
    assert_eq!(
        value(&chat.attributes[2]),
        Some(&any_value::Value::BoolValue(false))
    );
    let Some(any_value::Value::ArrayValue(reasons)) = value(&chat.attributes[1]) else {
        panic!("an array: {:?}", chat.attributes[1]);
    };
    assert_eq!(
        reasons.values[0].value,
        Some(any_value::Value::StringValue("tool_use".into()))
    );
    let status = chat.status.as_ref().expect("a status");
    assert_eq!((status.code, status.message.as_str()), (2, "overloaded"));
}

#[test]
fn one_exporter_exports_many_times_over_its_connection() {
    let collector = collector();
    let exporter = OtlpExporter::new(&format!("{}/custom", collector.url), "runcore").unwrap();
    for _ in 0..3 {
        exporter.export(&spans()).expect("exported");
    }
    for _ in 0..3 {
        let export = collector
            .exports
            .recv_timeout(Duration::from_secs(10))
            .expect("a request");
        assert_eq!(export.path, "/custom");
    }
}

#[test]
fn an_unreachable_collector_is_an_error_naming_the_url_in_bounded_time() {
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("address").port();
    drop(closed);
    let url = format!("http://127.0.0.1:{port}");
    let exporter =
        OtlpExporter::with_timeout(&url, "runcore", Duration::from_secs(2)).expect("built");
    let started = Instant::now();
    let error = exporter.export(&spans()).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(&error, ExportError::Failed { url: at, spans: 2, .. } if *at == format!("{url}/v1/traces")),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.contains(&url), "{text}");
    assert!(text.contains("is a collector listening there?"), "{text}");
}

#[test]
fn a_non_2xx_answer_is_an_error_with_the_status() {
    let failing = collector_answering(400);
    let exporter = OtlpExporter::new(&failing.url, "runcore").unwrap();
    let error = exporter.export(&spans()).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains(&failing.url) && text.contains("400"),
        "{text}"
    );
    // Not retried: 400 is not a transient status.
    assert!(failing.exports.recv_timeout(Duration::from_secs(5)).is_ok());
    assert!(
        failing
            .exports
            .recv_timeout(Duration::from_millis(500))
            .is_err()
    );
}

#[test]
fn spans_with_ids_that_are_not_hex_are_refused_before_anything_is_sent() {
    let collector = collector();
    let exporter = OtlpExporter::new(&collector.url, "runcore").unwrap();
    let mut bad = spans();
    bad[1].span_id = "not an id".into();
    let error = exporter.export(&bad).unwrap_err();
    assert!(
        matches!(&error, ExportError::BadSpan { span, .. } if span == "chat m1"),
        "{error:?}"
    );
    assert!(
        collector
            .exports
            .recv_timeout(Duration::from_millis(300))
            .is_err()
    );
}

/// A long run's spans: the run's and `children` chat spans under it, ids from their index.
fn long_run(children: usize) -> Vec<Span> {
    let root = spans().remove(0);
    let mut all = vec![root.clone()];
    for index in 0..children {
        let mut child = spans().remove(1);
        child.span_id = format!("{:016x}", index + 1);
        child.name = format!("chat {index}");
        all.push(child);
    }
    all
}

#[test]
fn a_long_run_goes_out_in_requests_of_at_most_512_spans_in_order() {
    // 1 + 1,299 spans: three requests (512, 512, 276). Before: one request of 1,300.
    let spans = long_run(1_299);
    let collector = collector();
    let exporter = OtlpExporter::new(&collector.url, "runcore").expect("built");
    exporter.export(&spans).expect("exported");
    let mut sizes = Vec::new();
    let mut names = Vec::new();
    while let Ok(export) = collector.exports.recv_timeout(Duration::from_secs(2)) {
        let request = ExportTraceServiceRequest::decode(export.body.as_slice()).expect("protobuf");
        let batch: Vec<String> = request
            .resource_spans
            .into_iter()
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .map(|s| s.name)
            .collect();
        sizes.push(batch.len());
        names.extend(batch);
    }
    assert_eq!(sizes, [512, 512, 276]);
    assert_eq!(runcore_otlp::MAX_BATCH, 512);
    let want: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, want, "every span once, in order");
}
