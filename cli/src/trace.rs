//! `runcore trace` and `runcore drive --otlp`: spans derived from commits (SPEC §14), printed
//! or exported over OTLP/HTTP.
//!
//! The export is OTLP/HTTP with the JSON encoding (`Content-Type: application/json`), the
//! body written by `runcore_traces::to_otlp_json`, posted over a plain `std::net` connection:
//! one request, `Connection: close`. Only `http://` URLs (a local collector or agent); the
//! OpenTelemetry SDK's exporters need an async runtime and an HTTP client stack for what is
//! here one POST of bytes we already have (see cli/Cargo.toml).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use runcore::store::CheckpointReader;
use runcore::{RunId, ThreadId};
use runcore_traces::{Span, SpanStatus, TraceError, TraceOptions, spans_from_store, to_otlp_json};
use serde_json::{Value, json};

use crate::args::TraceArgs;

/// The `service.name` spans are reported under.
const SERVICE: &str = "runcore";

/// How long one export may take to connect, write and read the answer.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

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
        Ok(spans) => spans,
        Err(TraceError::Store(error)) => return crate::store_failed("trace", &error),
        Err(error) => {
            eprintln!("runcore {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(url) = args.otlp {
        return match export(&url, &spans) {
            Ok(status) => crate::write_stdout(&format!(
                "{}\n",
                json!({"spans": spans.len(), "status": status})
            )),
            Err(message) => {
                eprintln!("runcore trace: exporting to {url} failed: {message}");
                ExitCode::FAILURE
            }
        };
    }
    if args.json {
        return crate::write_stdout(&format!("{}\n", to_otlp_json(&spans, SERVICE)));
    }
    crate::write_stdout(&text(&spans))
}

/// The spans for people: one line per span, children indented under their run, with times
/// in ms relative to the run's start.
pub fn text(spans: &[Span]) -> String {
    let mut out = String::new();
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
            SpanStatus::Error { message } => format!("  ERROR {message}"),
        };
        let extra = ["runcore.decision", "error.type"]
            .iter()
            .filter_map(|key| match span.attributes.get(*key) {
                Some(runcore_traces::AttributeValue::String(value)) => {
                    Some(format!("  {key}={value}"))
                }
                _ => None,
            })
            .collect::<String>();
        out.push_str(&format!(
            "{indent}{name}  +{from}ms..+{to}ms ({took} ms){extra}{status}\n",
            name = span.name,
            from = span.start_ms.saturating_sub(run_start),
            to = span.end_ms.saturating_sub(run_start),
            took = span.end_ms.saturating_sub(span.start_ms),
        ));
    }
    if spans.is_empty() {
        out.push_str("no runs\n");
    }
    out
}

/// Posts `spans` as one OTLP/HTTP JSON export to `url`; the HTTP status when it is 2xx.
pub fn export(url: &str, spans: &[Span]) -> Result<u16, String> {
    let body = to_otlp_json(spans, SERVICE).to_string();
    let (host, port, path) = parse_http_url(url)?;
    let address = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, EXPORT_TIMEOUT)
        .map_err(|e| format!("connecting: {e}"))?;
    stream
        .set_read_timeout(Some(EXPORT_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(EXPORT_TIMEOUT)))
        .map_err(|e| format!("setting timeouts: {e}"))?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .and_then(|()| stream.flush())
        .map_err(|e| format!("sending: {e}"))?;
    let mut answer = Vec::new();
    stream
        .take(64 * 1024)
        .read_to_end(&mut answer)
        .map_err(|e| format!("reading the answer: {e}"))?;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| "the answer is not HTTP".to_owned())?;
    if (200..300).contains(&status) {
        Ok(status)
    } else {
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").trim();
        Err(format!("HTTP {status}: {body}"))
    }
}

/// `http://HOST[:PORT][/PATH]` → (host, port, path); no path (or `/`) means `/v1/traces`.
fn parse_http_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url:?}: only http:// URLs are supported (OTLP/HTTP, JSON)"))?;
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let path = if path.is_empty() || path == "/" {
        "/v1/traces".to_owned()
    } else {
        path.to_owned()
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (
            host,
            port.parse::<u16>()
                .map_err(|_| format!("{url:?}: the port {port:?} is not a number"))?,
        ),
        None => (authority, 80),
    };
    if host.is_empty() {
        return Err(format!("{url:?}: no host"));
    }
    Ok((host.to_owned(), port, path))
}

/// What `runcore drive --otlp URL` does after each input line: for every run whose terminal
/// commit the line's output carried (and so the store holds), export its spans. A failed
/// export is one line on stderr; the driver goes on.
pub struct DriveExporter {
    /// Where to.
    pub url: String,
}

impl DriveExporter {
    /// Exports the runs that `lines` (a durable driver's output for one input) ended.
    pub fn after_lines(&self, store: &impl CheckpointReader, thread: &ThreadId, lines: &[String]) {
        for line in lines {
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
            let result = spans_from_store(store, thread, Some(&run), &TraceOptions::default())
                .map_err(|e| e.to_string())
                .and_then(|spans| export(&self.url, &spans));
            if let Err(message) = result {
                eprintln!(
                    "runcore drive: exporting the spans of {} to {} failed: {message}",
                    run.as_str(),
                    self.url
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_without_a_path_get_v1_traces_and_only_http_is_taken() {
        assert_eq!(
            parse_http_url("http://127.0.0.1:4318").unwrap(),
            ("127.0.0.1".into(), 4318, "/v1/traces".into())
        );
        assert_eq!(
            parse_http_url("http://collector/custom/path").unwrap(),
            ("collector".into(), 80, "/custom/path".into())
        );
        assert!(parse_http_url("https://x").is_err());
        assert!(parse_http_url("http://:4318").is_err());
        assert!(parse_http_url("http://h:port").is_err());
    }
}
