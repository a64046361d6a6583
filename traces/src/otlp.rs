//! Spans as OTLP/JSON: the `ExportTraceServiceRequest` body that OTLP/HTTP takes with
//! `Content-Type: application/json` (the protobuf JSON mapping, ids as hex, 64-bit numbers as
//! strings, enums as numbers).

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
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

/// [`to_otlp_json`]'s body written straight to `out`, byte for byte the same as
/// `to_otlp_json(spans, service_name).to_string()`, without building the JSON tree first (a
/// long run's 20,000 spans are a few hundred thousand values).
pub fn write_otlp_json(
    spans: &[Span],
    service_name: &str,
    out: impl std::io::Write,
) -> serde_json::Result<()> {
    serde_json::to_writer(
        out,
        &Body {
            spans,
            service_name,
        },
    )
}

// The writers below emit each object's keys in the order `serde_json::Map` (a BTreeMap) keeps
// them, sorted, so that the bytes are those of the tree `to_otlp_json` builds.

struct Body<'a> {
    spans: &'a [Span],
    service_name: &'a str,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut body = serializer.serialize_map(Some(1))?;
        body.serialize_entry("resourceSpans", &[ResourceSpans(self)])?;
        body.end()
    }
}

struct ResourceSpans<'a>(&'a Body<'a>);

impl Serialize for ResourceSpans<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let service = AttributeValue::from(self.0.service_name);
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry(
            "resource",
            &Attributes1("attributes", &[KeyValue("service.name", &service)]),
        )?;
        map.serialize_entry("scopeSpans", &[ScopeSpans(self.0.spans)])?;
        map.end()
    }
}

/// `{name: [key values]}`.
struct Attributes1<'a>(&'static str, &'a [KeyValue<'a>]);

impl Serialize for Attributes1<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.0, self.1)?;
        map.end()
    }
}

struct ScopeSpans<'a>(&'a [Span]);

impl Serialize for ScopeSpans<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Scope;
        impl Serialize for Scope {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("name", SCOPE_NAME)?;
                map.serialize_entry("version", SCOPE_VERSION)?;
                map.end()
            }
        }
        struct Spans<'a>(&'a [Span]);
        impl Serialize for Spans<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
                for span in self.0 {
                    seq.serialize_element(&SpanWriter(span))?;
                }
                seq.end()
            }
        }
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("scope", &Scope)?;
        map.serialize_entry("spans", &Spans(self.0))?;
        map.end()
    }
}

struct SpanWriter<'a>(&'a Span);

impl Serialize for SpanWriter<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let span = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("attributes", &AttributesWriter(&span.attributes))?;
        map.serialize_entry("endTimeUnixNano", &nanos(span.end_ms))?;
        if !span.events.is_empty() {
            map.serialize_entry("events", &EventsWriter(&span.events))?;
        }
        map.serialize_entry("kind", &span.kind.otlp_code())?;
        map.serialize_entry("name", &span.name)?;
        if let Some(parent) = &span.parent_span_id {
            map.serialize_entry("parentSpanId", parent)?;
        }
        map.serialize_entry("spanId", &span.span_id)?;
        map.serialize_entry("startTimeUnixNano", &nanos(span.start_ms))?;
        map.serialize_entry("status", &StatusWriter(&span.status))?;
        map.serialize_entry("traceId", &span.trace_id)?;
        map.end()
    }
}

struct EventsWriter<'a>(&'a [crate::span::SpanEvent]);

impl Serialize for EventsWriter<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for event in self.0 {
            struct Event<'a>(&'a crate::span::SpanEvent);
            impl Serialize for Event<'_> {
                fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                    let mut map = serializer.serialize_map(Some(3))?;
                    map.serialize_entry("attributes", &AttributesWriter(&self.0.attributes))?;
                    map.serialize_entry("name", &self.0.name)?;
                    map.serialize_entry("timeUnixNano", &nanos(self.0.time_ms))?;
                    map.end()
                }
            }
            seq.serialize_element(&Event(event))?;
        }
        seq.end()
    }
}

struct StatusWriter<'a>(&'a SpanStatus);

impl Serialize for StatusWriter<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            SpanStatus::Unset => serializer.serialize_map(Some(0))?.end(),
            SpanStatus::Error { message } => {
                let mut map = serializer.serialize_map(Some(2))?;
                // STATUS_CODE_ERROR = 2.
                map.serialize_entry("code", &2u8)?;
                map.serialize_entry("message", message)?;
                map.end()
            }
        }
    }
}

struct AttributesWriter<'a>(&'a Attributes);

impl Serialize for AttributesWriter<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for (key, value) in self.0 {
            seq.serialize_element(&KeyValue(key, value))?;
        }
        seq.end()
    }
}

struct KeyValue<'a>(&'a str, &'a AttributeValue);

impl Serialize for KeyValue<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("key", self.0)?;
        map.serialize_entry("value", &AnyValueWriter(self.1))?;
        map.end()
    }
}

struct AnyValueWriter<'a>(&'a AttributeValue);

impl Serialize for AnyValueWriter<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct StringValue<'a>(&'a str);
        impl Serialize for StringValue<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("stringValue", self.0)?;
                map.end()
            }
        }
        struct Values<'a>(&'a [String]);
        impl Serialize for Values<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(
                    "values",
                    &self
                        .0
                        .iter()
                        .map(|item| StringValue(item))
                        .collect::<Vec<_>>(),
                )?;
                map.end()
            }
        }
        let mut map = serializer.serialize_map(Some(1))?;
        match self.0 {
            AttributeValue::String(text) => map.serialize_entry("stringValue", text)?,
            AttributeValue::Int(number) => map.serialize_entry("intValue", &number.to_string())?,
            AttributeValue::Bool(flag) => map.serialize_entry("boolValue", flag)?,
            AttributeValue::Strings(items) => map.serialize_entry("arrayValue", &Values(items))?,
        }
        map.end()
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::{SpanEvent, SpanKind};

    #[test]
    fn the_writer_gives_the_bytes_of_the_tree() {
        let mut attributes = Attributes::new();
        attributes.insert("a.string".into(), "x \"quoted\" \u{1F600}\n".into());
        attributes.insert("b.int".into(), AttributeValue::Int(-7));
        attributes.insert("c.bool".into(), true.into());
        attributes.insert(
            "d.strings".into(),
            AttributeValue::Strings(vec!["stop".into(), "<&>".into()]),
        );
        let root = Span {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
            parent_span_id: None,
            name: "invoke_agent".into(),
            kind: SpanKind::Internal,
            start_ms: 1,
            end_ms: u64::MAX,
            attributes: attributes.clone(),
            events: vec![SpanEvent {
                name: "runcore.decision".into(),
                time_ms: 5,
                attributes: attributes.clone(),
            }],
            status: SpanStatus::Error {
                message: "it failed: \u{7}".into(),
            },
        };
        let child = Span {
            parent_span_id: Some(root.span_id.clone()),
            name: "chat m".into(),
            kind: SpanKind::Client,
            events: Vec::new(),
            status: SpanStatus::Unset,
            attributes: Attributes::new(),
            ..root.clone()
        };
        for spans in [vec![], vec![root.clone()], vec![root, child]] {
            let mut written = Vec::new();
            write_otlp_json(&spans, "svc \"x\"", &mut written).expect("written");
            assert_eq!(
                String::from_utf8(written).expect("UTF-8"),
                to_otlp_json(&spans, "svc \"x\"").to_string()
            );
        }
    }
}
