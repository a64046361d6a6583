//! Spans as OTLP/JSON: the `ExportTraceServiceRequest` body that OTLP/HTTP takes with
//! `Content-Type: application/json` (the protobuf JSON mapping, ids as hex, 64-bit numbers as
//! strings, enums as numbers).

use serde_json::{Map, Value, json};

use crate::span::{AttributeValue, Attributes, Span, SpanStatus};

/// The instrumentation scope the spans are reported under.
pub const SCOPE_NAME: &str = "runcore-traces";

/// The instrumentation scope's version: this crate's.
pub const SCOPE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The body of one OTLP/HTTP export of `spans` (`POST /v1/traces`), with `service.name` =
/// `service_name` on the resource. The same spans give the same bytes.
pub fn to_otlp_json(spans: &[Span], service_name: &str) -> Value {
    json!({
        "resourceSpans": [{
            "resource": {
                "attributes": [key_value("service.name", &AttributeValue::from(service_name))],
            },
            "scopeSpans": [{
                "scope": {"name": SCOPE_NAME, "version": SCOPE_VERSION},
                "spans": spans.iter().map(span_json).collect::<Vec<_>>(),
            }],
        }],
    })
}

fn nanos(ms: u64) -> String {
    u128::from(ms).saturating_mul(1_000_000).to_string()
}

fn span_json(span: &Span) -> Value {
    let mut out = Map::new();
    out.insert("traceId".into(), span.trace_id.clone().into());
    out.insert("spanId".into(), span.span_id.clone().into());
    if let Some(parent) = &span.parent_span_id {
        out.insert("parentSpanId".into(), parent.clone().into());
    }
    out.insert("name".into(), span.name.clone().into());
    out.insert("kind".into(), span.kind.otlp_code().into());
    out.insert("startTimeUnixNano".into(), nanos(span.start_ms).into());
    out.insert("endTimeUnixNano".into(), nanos(span.end_ms).into());
    out.insert("attributes".into(), attributes_json(&span.attributes));
    if !span.events.is_empty() {
        let events = span
            .events
            .iter()
            .map(|event| {
                json!({
                    "timeUnixNano": nanos(event.time_ms),
                    "name": event.name,
                    "attributes": attributes_json(&event.attributes),
                })
            })
            .collect::<Vec<_>>();
        out.insert("events".into(), Value::Array(events));
    }
    let status = match &span.status {
        SpanStatus::Unset => json!({}),
        // STATUS_CODE_ERROR = 2.
        SpanStatus::Error { message } => json!({"code": 2, "message": message}),
    };
    out.insert("status".into(), status);
    Value::Object(out)
}

fn attributes_json(attributes: &Attributes) -> Value {
    Value::Array(
        attributes
            .iter()
            .map(|(key, value)| key_value(key, value))
            .collect(),
    )
}

fn key_value(key: &str, value: &AttributeValue) -> Value {
    json!({"key": key, "value": any_value(value)})
}

fn any_value(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::String(text) => json!({"stringValue": text}),
        AttributeValue::Int(number) => json!({"intValue": number.to_string()}),
        AttributeValue::Bool(flag) => json!({"boolValue": flag}),
        AttributeValue::Strings(items) => json!({
            "arrayValue": {"values": items.iter().map(|item| json!({"stringValue": item})).collect::<Vec<_>>()}
        }),
    }
}
