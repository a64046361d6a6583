//! runcore's spans (SPEC §14) exported through the OpenTelemetry project's own crates.
//!
//! [`runcore_traces`] derives spans from a thread's commits, with fixed ids and committed
//! times; this crate hands them to the exporter every OpenTelemetry Rust user has:
//! [`to_span_data`] turns each [`Span`] into the SDK's
//! [`SpanData`](opentelemetry_sdk::trace::SpanData) (ids, parent, kind, times, attributes,
//! events, status, instrumentation scope), and [`OtlpExporter`] sends them with
//! `opentelemetry-otlp`'s [`SpanExporter`](opentelemetry_otlp::SpanExporter) over OTLP/HTTP
//! with the protobuf encoding, to any collector (Jaeger, the OpenTelemetry Collector, …).
//!
//! # Batches
//! A long run's spans go out in requests of at most [`MAX_BATCH`] (512) spans, the SDK's
//! usual batch size, one after the other.
//!
//! # Blocking, from any thread
//! [`OtlpExporter::export`] blocks until the collector answered (or the exporter gave up) and
//! needs no async runtime of the caller's. The exporter's HTTP client is reqwest's blocking
//! client, which refuses to run on an async runtime's thread; so each export runs on a short
//! thread of its own, and a plain CLI and a Tokio worker call it alike (a Tokio worker should
//! still call it off its async threads, as it would any blocking call).
//!
//! # Errors, never panics
//! A URL that is not `http://HOST[:PORT][/PATH]`, an unreachable collector, a non-2xx answer
//! and a span whose ids are not hex come back as an [`ExportError`] that names the URL.
//!
//! ```no_run
//! use runcore::ThreadId;
//! use runcore::store::MemoryStore;
//! use runcore_otlp::OtlpExporter;
//! use runcore_traces::{TraceOptions, thread_spans};
//!
//! let store = MemoryStore::new();
//! let spans = thread_spans(&store, &ThreadId::new("t1"), &TraceOptions::default())?;
//! let exporter = OtlpExporter::new("http://127.0.0.1:4318", "runcore")?;
//! exporter.export(&spans)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod convert;
mod error;
mod export;

pub use convert::to_span_data;
pub use error::ExportError;
pub use export::{DEFAULT_PATH, MAX_BATCH, OtlpExporter, endpoint_of};
