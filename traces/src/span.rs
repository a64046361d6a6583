//! The span model: plain serde data, ordered maps, so the same spans always serialize to the
//! same bytes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a span stands for, in OpenTelemetry's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    /// Work inside the process (`invoke_agent`, `execute_tool`, `await`).
    Internal,
    /// A call to a remote service (`chat`: the model provider).
    Client,
}

impl SpanKind {
    /// OTLP's number for the kind (`SPAN_KIND_INTERNAL` = 1, `SPAN_KIND_CLIENT` = 3).
    pub fn otlp_code(self) -> u8 {
        match self {
            SpanKind::Internal => 1,
            SpanKind::Client => 3,
        }
    }
}

/// A span's status: unset, or an error with a short description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum SpanStatus {
    /// Nothing failed (OpenTelemetry's `UNSET`: instrumentation does not claim `OK`).
    Unset,
    /// The run, the model step or the tool call failed.
    Error {
        /// What failed, for people.
        message: String,
    },
}

/// An attribute's value (the OpenTelemetry `AnyValue` subset spans need).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AttributeValue {
    /// A string.
    String(String),
    /// An integer (token counts, step numbers).
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// An array of strings (`gen_ai.response.finish_reasons`).
    Strings(Vec<String>),
}

impl From<&str> for AttributeValue {
    fn from(value: &str) -> Self {
        AttributeValue::String(value.to_owned())
    }
}

impl From<String> for AttributeValue {
    fn from(value: String) -> Self {
        AttributeValue::String(value)
    }
}

impl From<u64> for AttributeValue {
    fn from(value: u64) -> Self {
        AttributeValue::Int(i64::try_from(value).unwrap_or(i64::MAX))
    }
}

impl From<bool> for AttributeValue {
    fn from(value: bool) -> Self {
        AttributeValue::Bool(value)
    }
}

/// Attributes by key, in key order.
pub type Attributes = BTreeMap<String, AttributeValue>;

/// Something that happened at one moment of a span (a person's decision on a wait).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanEvent {
    /// The event's name.
    pub name: String,
    /// When, in Unix milliseconds (a committed `now_ms`).
    pub time_ms: u64,
    /// Its attributes.
    pub attributes: Attributes,
}

/// One span, derived from committed facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// 32 lowercase hex digits: one trace per run, hashed from the thread and run ids.
    pub trace_id: String,
    /// 16 lowercase hex digits, hashed from the thread, run, step and call ids.
    pub span_id: String,
    /// The run's span for a child span; `None` for the run's span.
    pub parent_span_id: Option<String>,
    /// `invoke_agent`, `chat {model}`, `execute_tool {tool}` or `await {what}`.
    pub name: String,
    /// INTERNAL or CLIENT.
    pub kind: SpanKind,
    /// Start, Unix milliseconds (see the crate docs for which times are exact).
    pub start_ms: u64,
    /// End, Unix milliseconds, never before `start_ms`.
    pub end_ms: u64,
    /// The GenAI semantic-convention attributes (and `runcore.*` ones).
    pub attributes: Attributes,
    /// Point events (decisions on waits, calls that were never executed).
    pub events: Vec<SpanEvent>,
    /// Unset, or error.
    pub status: SpanStatus,
}
