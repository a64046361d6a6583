//! `runcore trace` and `runcore drive --otlp`: spans derived from commits (SPEC §14), printed
//! or exported over OTLP/HTTP.
//!
//! The export goes through `runcore-otlp`: the OpenTelemetry SDK's span data and
//! `opentelemetry-otlp`'s exporter (OTLP/HTTP, protobuf), driven synchronously. `--json`
//! prints the OTLP/JSON body `runcore_traces::to_otlp_json` writes.

use std::process::ExitCode;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::Duration;

use runcore::store::CheckpointReader;
use runcore::{RunId, ThreadId};
use runcore_otlp::OtlpExporter;
use runcore_traces::{
    Span, SpanStatus, TraceError, TraceOptions, spans_from_store, write_otlp_json,
};
use serde_json::{Value, json};

use crate::args::TraceArgs;

/// The `service.name` spans are reported under.
const SERVICE: &str = "runcore";

/// `runcore trace THREAD --store URL [--run RUN] [--otlp URL] [--json] [--content]`.
pub fn main(args: TraceArgs) -> ExitCode {
    let store = match crate::open_store("trace", &args.store) {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let options = TraceOptions {
        agent_name: args.agent,
        provider: args.provider,
        content: args.content,
    };
    let thread = ThreadId::new(args.thread);
    let run = args.run.map(RunId::new);
    let spans = match spans_from_store(&store, &thread, run.as_ref(), &options) {
        // Not dropped: the process ends once they are written, and freeing a long run's
        // 20,000 spans (their attribute maps) one by one costs more than the exit does.
        Ok(spans) => std::mem::ManuallyDrop::new(spans),
        Err(TraceError::Store(error)) => return crate::store_failed("trace", &error),
        Err(error) => {
            eprintln!("runcore {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(url) = args.otlp {
        let exported = OtlpExporter::new(&url, SERVICE).and_then(|exporter| {
            exporter.export(&spans)?;
            Ok(exporter.endpoint().to_owned())
        });
        return match exported {
            Ok(endpoint) => crate::write_stdout(&format!(
                "{}\n",
                json!({"spans": spans.len(), "endpoint": endpoint})
            )),
            Err(error) => {
                eprintln!("runcore trace: {error}");
                ExitCode::FAILURE
            }
        };
    }
    if args.json {
        // Written straight out, not built as a JSON tree first (20,000 spans of a long run).
        let mut body = Vec::with_capacity(spans.len().saturating_mul(1_200));
        if let Err(error) = write_otlp_json(&spans, SERVICE, &mut body) {
            eprintln!("runcore trace: writing the OTLP/JSON body failed: {error}");
            return ExitCode::FAILURE;
        }
        body.push(b'\n');
        return crate::write_stdout_bytes(&body);
    }
    crate::write_stdout(&text(&spans))
}

/// The spans for people: one line per span, children indented under their run, with times
/// in ms relative to the run's start.
pub fn text(spans: &[Span]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(spans.len().saturating_mul(64));
    let mut run_start = 0;
    for span in spans {
        let indent = if span.parent_span_id.is_none() {
            run_start = span.start_ms;
            ""
        } else {
            "  "
        };
        let status = match &span.status {
            SpanStatus::Unset => String::new(),
            // A failed tool's message is its error type (without --content), already shown.
            SpanStatus::Error { message }
                if span.attributes.get("error.type")
                    == Some(&runcore_traces::AttributeValue::String(message.clone())) =>
            {
                "  ERROR".to_owned()
            }
            SpanStatus::Error { message } => format!("  ERROR {message}"),
        };
        let _ = write!(
            out,
            "{indent}{name}  +{from}ms..+{to}ms ({took} ms)",
            name = span.name,
            from = span.start_ms.saturating_sub(run_start),
            to = span.end_ms.saturating_sub(run_start),
            took = span.end_ms.saturating_sub(span.start_ms),
        );
        for key in ["runcore.decision", "error.type"] {
            if let Some(runcore_traces::AttributeValue::String(value)) = span.attributes.get(key) {
                let _ = write!(out, "  {key}={value}");
            }
        }
        out.push_str(&status);
        out.push('\n');
    }
    if spans.is_empty() {
        out.push_str("no runs\n");
    }
    out
}

/// How many ended runs' spans may wait for the export thread; more are dropped (one stderr
/// line each) rather than held or waited for: a slow collector never slows the driver.
const EXPORT_QUEUE: usize = 64;

/// How long the end of a `drive --otlp` session waits for the exports still queued: long
/// enough for a collector that answers, bounded for one that never does.
const FLUSH_AT_EXIT: Duration = Duration::from_secs(3);

/// What `runcore drive --otlp URL` does after each input line: for every run whose terminal
/// commit the line's output carried (and so the store holds), derive its spans and hand them
/// to an export thread of its own. The driver never waits for the collector (a collector that
/// accepted and never answered delayed every run end by the exporter's 10 s); the queue is
/// bounded ([`EXPORT_QUEUE`] runs), and so is the wait for it at the end of the session
/// ([`FLUSH_AT_EXIT`]). A failed or dropped export is one line on stderr; the driver goes on.
#[derive(Debug)]
pub struct DriveExporter {
    /// The export thread's queue; `None` once the session ended.
    queue: Option<SyncSender<(RunId, Vec<Span>)>>,
    /// Disconnected when the export thread has finished.
    finished: Receiver<()>,
}

impl DriveExporter {
    /// An exporter to `url`, built once for the whole session (it keeps its connection), and
    /// its thread; a URL that is not `http://HOST[:PORT][/PATH]` is refused here, before
    /// driving starts.
    pub fn new(url: &str) -> Result<Self, runcore_otlp::ExportError> {
        let exporter = OtlpExporter::new(url, SERVICE)?;
        let (queue, runs) = mpsc::sync_channel::<(RunId, Vec<Span>)>(EXPORT_QUEUE);
        let (done, finished) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("runcore-drive-otlp".into())
            .spawn(move || {
                let _done = done;
                for (run, spans) in runs {
                    if let Err(error) = exporter.export(&spans) {
                        eprintln!(
                            "runcore drive: the spans of run {:?}: {error}",
                            run.as_str()
                        );
                    }
                }
            });
        if let Err(error) = spawned {
            return Err(runcore_otlp::ExportError::Build {
                url: url.to_owned(),
                message: format!("starting the export thread: {error}"),
            });
        }
        Ok(DriveExporter {
            queue: Some(queue),
            finished,
        })
    }

    /// Queues the spans of the runs that `lines` (a durable driver's output for one input)
    /// ended, without waiting for any export.
    pub fn after_lines(&self, store: &impl CheckpointReader, thread: &ThreadId, lines: &[String]) {
        for line in lines {
            // Only commit lines can end a run; the cheap test first, so the driver's other
            // lines are not parsed twice.
            if !line.contains("\"ended\"") {
                continue;
            }
            let Ok(value) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if value["type"] != "commit" || value["commit"]["run"]["type"] != "ended" {
                continue;
            }
            let Some(run) = value["commit"]["run"]["run_id"].as_str() else {
                continue;
            };
            let run = RunId::new(run);
            let spans = match spans_from_store(store, thread, Some(&run), &TraceOptions::default())
            {
                Ok(spans) => spans,
                Err(error) => {
                    eprintln!(
                        "runcore drive: the spans of run {:?}: {error}",
                        run.as_str()
                    );
                    continue;
                }
            };
            let Some(queue) = &self.queue else { return };
            match queue.try_send((run, spans)) {
                Ok(()) => {}
                Err(TrySendError::Full((run, _))) => eprintln!(
                    "runcore drive: the spans of run {:?} were not exported: {EXPORT_QUEUE} \
                     runs already wait for the collector",
                    run.as_str()
                ),
                Err(TrySendError::Disconnected((run, _))) => eprintln!(
                    "runcore drive: the spans of run {:?} were not exported: the export \
                     thread stopped",
                    run.as_str()
                ),
            }
        }
    }

    /// Ends the session's exports: what is queued still goes out, waiting at most
    /// `bound` for it; whatever is left then is abandoned (one stderr line).
    pub fn finish(&mut self, bound: Duration) {
        let Some(queue) = self.queue.take() else {
            return;
        };
        drop(queue);
        if let Err(RecvTimeoutError::Timeout) = self.finished.recv_timeout(bound) {
            eprintln!(
                "runcore drive: stopped waiting for the OTLP collector after {} ms; spans still \
                 being exported were not",
                bound.as_millis()
            );
        }
    }
}

impl Drop for DriveExporter {
    /// Every way out of a session (EOF, a refused commit, an I/O error) flushes, bounded.
    fn drop(&mut self) {
        self.finish(FLUSH_AT_EXIT);
    }
}
