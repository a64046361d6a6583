//! runcore-traces spans → the OpenTelemetry SDK's `SpanData`.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind as OtelSpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use runcore_traces::{
    AttributeValue, Attributes, SCOPE_NAME, SCOPE_VERSION, Span, SpanKind, SpanStatus,
};

use crate::error::ExportError;

/// Each span as the SDK's [`SpanData`], in the same order: its trace and span ids, its
/// parent (the run's span; none for a run's span), its kind, its start and end (committed
/// Unix milliseconds), its attributes and events, its status, and the `runcore-traces`
/// instrumentation scope. Spans are sampled (`TraceFlags::SAMPLED`): they were committed.
///
/// An id that is not hex (spans are plain data anyone can build) is an
/// [`ExportError::BadSpan`]; `endpoint` only names where the spans were going.
pub fn to_span_data(spans: &[Span], endpoint: &str) -> Result<Vec<SpanData>, ExportError> {
    let scope = InstrumentationScope::builder(SCOPE_NAME)
        .with_version(SCOPE_VERSION)
        .build();
    spans
        .iter()
        .map(|span| span_data(span, &scope, endpoint))
        .collect()
}

fn span_data(
    span: &Span,
    scope: &InstrumentationScope,
    endpoint: &str,
) -> Result<SpanData, ExportError> {
    let bad = |what: &str, id: &str| ExportError::BadSpan {
        url: endpoint.to_owned(),
        span: span.name.clone(),
        reason: format!("its {what} {id:?} is not hex"),
    };
    let trace_id = hex_id(&span.trace_id, 32)
        .map(|id| TraceId::from_bytes(id.to_be_bytes()))
        .ok_or_else(|| bad("trace id", &span.trace_id))?;
    let span_id = hex_id(&span.span_id, 16)
        .and_then(|id| u64::try_from(id).ok())
        .map(|id| SpanId::from_bytes(id.to_be_bytes()))
        .ok_or_else(|| bad("span id", &span.span_id))?;
    let parent_span_id = match &span.parent_span_id {
        Some(parent) => hex_id(parent, 16)
            .and_then(|id| u64::try_from(id).ok())
            .map(|id| SpanId::from_bytes(id.to_be_bytes()))
            .ok_or_else(|| bad("parent span id", parent))?,
        None => SpanId::INVALID,
    };
    let events = span
        .events
        .iter()
        .map(|event| {
            Event::new(
                event.name.clone(),
                time_of(event.time_ms),
                key_values(&event.attributes),
                0,
            )
        })
        .collect();
    Ok(SpanData {
        span_context: SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        ),
        parent_span_id,
        parent_span_is_remote: false,
        span_kind: match span.kind {
            SpanKind::Internal => OtelSpanKind::Internal,
            SpanKind::Client => OtelSpanKind::Client,
        },
        name: Cow::Owned(span.name.clone()),
        start_time: time_of(span.start_ms),
        end_time: time_of(span.end_ms.max(span.start_ms)),
        attributes: key_values(&span.attributes),
        dropped_attributes_count: 0,
        events: span_events(events),
        links: SpanLinks::default(),
        status: match &span.status {
            SpanStatus::Unset => Status::Unset,
            SpanStatus::Error { message } => Status::error(message.clone()),
        },
        instrumentation_scope: scope.clone(),
    })
}

/// The SDK's event list (`SpanEvents` is non-exhaustive: filled in place).
fn span_events(events: Vec<Event>) -> SpanEvents {
    let mut list = SpanEvents::default();
    list.events = events;
    list
}

/// `digits` lowercase or uppercase hex digits as a number; `None` for anything else.
fn hex_id(text: &str, digits: usize) -> Option<u128> {
    if text.len() != digits || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    u128::from_str_radix(text, 16).ok()
}

/// Committed Unix milliseconds as a `SystemTime` (the latest representable one past that:
/// no committed clock is near it).
fn time_of(ms: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(Duration::from_millis(ms))
        .unwrap_or(UNIX_EPOCH)
}

fn key_values(attributes: &Attributes) -> Vec<KeyValue> {
    attributes
        .iter()
        .map(|(key, value)| KeyValue::new(key.clone(), any_value(value)))
        .collect()
}

fn any_value(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::String(text) => Value::String(StringValue::from(text.clone())),
        AttributeValue::Int(number) => Value::I64(*number),
        AttributeValue::Bool(flag) => Value::Bool(*flag),
        AttributeValue::Strings(items) => Value::Array(Array::String(
            items.iter().cloned().map(StringValue::from).collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use runcore_traces::SpanEvent;

    use super::*;

    fn span(parent: Option<&str>) -> Span {
        let mut attributes = Attributes::new();
        attributes.insert("gen_ai.operation.name".into(), "chat".into());
        attributes.insert("gen_ai.usage.input_tokens".into(), AttributeValue::Int(12));
        attributes.insert("runcore.time.exact".into(), false.into());
        attributes.insert(
            "gen_ai.response.finish_reasons".into(),
            AttributeValue::Strings(vec!["end_turn".into()]),
        );
        let mut event_attributes = Attributes::new();
        event_attributes.insert("runcore.decision".into(), "allow".into());
        Span {
            trace_id: "0123456789abcdef0123456789abcdef".into(),
            span_id: "fedcba9876543210".into(),
            parent_span_id: parent.map(str::to_owned),
            name: "chat m".into(),
            kind: SpanKind::Client,
            start_ms: 1_700_000_000_123,
            end_ms: 1_700_000_000_456,
            attributes,
            events: vec![SpanEvent {
                name: "runcore.decision".into(),
                time_ms: 1_700_000_000_200,
                attributes: event_attributes,
            }],
            status: SpanStatus::Error {
                message: "boom".into(),
            },
        }
    }

    #[test]
    fn every_field_of_a_span_is_carried_over() {
        let data = to_span_data(&[span(Some("00000000000000ff"))], "http://x").unwrap();
        let [data] = data.as_slice() else {
            panic!("one span in, one out: {data:?}");
        };
        assert_eq!(
            data.span_context.trace_id().to_string(),
            "0123456789abcdef0123456789abcdef"
        );
        assert_eq!(data.span_context.span_id().to_string(), "fedcba9876543210");
        assert!(data.span_context.is_sampled());
        assert_eq!(data.parent_span_id.to_string(), "00000000000000ff");
        assert_eq!(data.span_kind, OtelSpanKind::Client);
        assert_eq!(data.name, "chat m");
        let ms = |time: SystemTime| time.duration_since(UNIX_EPOCH).unwrap().as_millis();
        assert_eq!(ms(data.start_time), 1_700_000_000_123);
        assert_eq!(ms(data.end_time), 1_700_000_000_456);
        assert_eq!(
            data.attributes,
            vec![
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new(
                    "gen_ai.response.finish_reasons",
                    Value::Array(Array::String(vec!["end_turn".into()]))
                ),
                KeyValue::new("gen_ai.usage.input_tokens", 12i64),
                KeyValue::new("runcore.time.exact", false),
            ]
        );
        assert_eq!(data.events.len(), 1);
        assert_eq!(data.events.events[0].name, "runcore.decision");
        assert_eq!(ms(data.events.events[0].timestamp), 1_700_000_000_200);
        assert_eq!(
            data.events.events[0].attributes,
            vec![KeyValue::new("runcore.decision", "allow")]
        );
        assert_eq!(data.status, Status::error("boom"));
        assert_eq!(data.instrumentation_scope.name(), SCOPE_NAME);
        assert_eq!(data.instrumentation_scope.version(), Some(SCOPE_VERSION));
    }

    #[test]
    fn a_run_span_has_no_parent_and_an_unset_status_stays_unset() {
        let mut root = span(None);
        root.status = SpanStatus::Unset;
        root.kind = SpanKind::Internal;
        let data = to_span_data(&[root], "http://x").unwrap();
        assert_eq!(data[0].parent_span_id, SpanId::INVALID);
        assert_eq!(data[0].span_kind, OtelSpanKind::Internal);
        assert_eq!(data[0].status, Status::Unset);
    }

    #[test]
    fn ids_that_are_not_hex_of_the_right_length_are_errors_naming_the_span_and_url() {
        for (trace_id, span_id, parent) in [
            ("not hex", "fedcba9876543210", None),
            ("0123456789abcdef0123456789abcde", "fedcba9876543210", None),
            ("0123456789abcdef0123456789abcdef", "fedcba98765432", None),
            ("0123456789abcdef0123456789abcdef", "+edcba9876543210", None),
            (
                "0123456789abcdef0123456789abcdef",
                "fedcba9876543210",
                Some("zz"),
            ),
        ] {
            let mut bad = span(parent);
            bad.trace_id = trace_id.into();
            bad.span_id = span_id.into();
            let error = to_span_data(&[bad], "http://collector:4318").unwrap_err();
            let text = error.to_string();
            assert!(text.contains("http://collector:4318"), "{text}");
            assert!(text.contains("chat m"), "{text}");
        }
    }
}
