//! One OTLP/HTTP exporter, driven synchronously.

use std::time::Duration;

use opentelemetry_otlp::{Protocol, RetryPolicy, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkError;
use opentelemetry_sdk::trace::SpanExporter as _;
use runcore_traces::Span;

use crate::convert::to_span_data;
use crate::error::ExportError;

/// The path a URL without one is given: OTLP/HTTP's traces path.
pub const DEFAULT_PATH: &str = "/v1/traces";

/// How long one export request may take, retries included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most spans one export request carries: the OpenTelemetry SDK's usual batch
/// (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`'s default). A collector may accept a much larger
/// request and then drop it (a run's 20,002 spans in one POST were answered 200 and lost),
/// so a long run goes out in requests of this size.
pub const MAX_BATCH: usize = 512;

/// `url` with the traces path it is posted to: a URL without a path (or with `/`) gets
/// [`DEFAULT_PATH`], as the OTLP specification's base endpoint does; any other path is kept.
/// Only `http://` (the exporter is built without TLS: a local collector or agent).
pub fn endpoint_of(url: &str) -> Result<String, ExportError> {
    let invalid = |reason: &str| ExportError::InvalidUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        invalid("only http:// URLs are supported (OTLP/HTTP without TLS: a local collector)")
    })?;
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    if let Some((_, host)) = authority.rsplit_once('@') {
        // The credentials are not repeated in the error (it is printed).
        return Err(ExportError::InvalidUrl {
            url: format!("http://***@{host}{path}"),
            reason: "credentials in the URL are not sent; put them in a header with \
                     OTEL_EXPORTER_OTLP_HEADERS"
                .to_owned(),
        });
    }
    // `[v6 address]:port` or `host:port`; the port is optional.
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => {
            let (address, after) = bracketed
                .split_once(']')
                .ok_or_else(|| invalid("an IPv6 address without its closing ]"))?;
            (address, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err(invalid(&format!("the port {port:?} is not a number")));
    }
    if host.is_empty() {
        return Err(invalid("no host"));
    }
    if path.is_empty() || path == "/" {
        Ok(format!("http://{authority}{DEFAULT_PATH}"))
    } else {
        Ok(url.to_owned())
    }
}

/// `opentelemetry-otlp`'s span exporter for one collector (OTLP/HTTP, protobuf), with the
/// resource's `service.name` set; [`export`](Self::export) sends spans and waits for the
/// answer. Build it once and export many times: it keeps its HTTP client (and connections).
#[derive(Debug)]
pub struct OtlpExporter {
    endpoint: String,
    exporter: opentelemetry_otlp::SpanExporter,
}

impl OtlpExporter {
    /// An exporter to `url` (see [`endpoint_of`]) reporting `service_name`, with a 10 s
    /// budget per export, retries included (the exporter's recommended retry policy: a
    /// refused connection, 429, 502, 503 and 504 are retried with backoff).
    pub fn new(url: &str, service_name: &str) -> Result<Self, ExportError> {
        Self::with_timeout(url, service_name, EXPORT_TIMEOUT)
    }

    /// [`new`](Self::new) with another budget per export.
    pub fn with_timeout(
        url: &str,
        service_name: &str,
        timeout: Duration,
    ) -> Result<Self, ExportError> {
        let endpoint = endpoint_of(url)?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint.clone())
            .with_timeout(timeout)
            .with_retry_policy(RetryPolicy::recommended())
            .build()
            .map_err(|error| ExportError::Build {
                url: endpoint.clone(),
                message: error.to_string(),
            })?;
        // Only what runcore knows: no SDK or host detectors, so the same spans always carry
        // the same resource.
        exporter.set_resource(
            &Resource::builder_empty()
                .with_service_name(service_name.to_owned())
                .build(),
        );
        Ok(OtlpExporter { endpoint, exporter })
    }

    /// Where spans are posted (the URL with [`DEFAULT_PATH`] when it had no path).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends `spans` in export requests of at most [`MAX_BATCH`] spans, in order, each
    /// after the collector answered the one before; stops at the first that fails. Nothing is
    /// sent for no spans, and nothing at all when a span cannot be expressed (checked before
    /// the first request). Blocks the calling thread (see the crate docs); never panics.
    pub fn export(&self, spans: &[Span]) -> Result<(), ExportError> {
        let data = to_span_data(spans, &self.endpoint)?;
        let mut data = data.into_iter();
        loop {
            let batch: Vec<_> = data.by_ref().take(MAX_BATCH).collect();
            if batch.is_empty() {
                return Ok(());
            }
            self.export_batch(batch, spans.len())?;
        }
    }

    /// One export request of `batch`, waiting for the answer (`total`: the spans of the
    /// whole export, for the error).
    fn export_batch(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
        total: usize,
    ) -> Result<(), ExportError> {
        // A thread of its own: reqwest's blocking client must not run on an async runtime's
        // thread, and the caller may be on one. Scoped, so the exporter is borrowed.
        let outcome = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("runcore-otlp-export".into())
                .spawn_scoped(scope, || {
                    futures_executor::block_on(self.exporter.export(batch))
                })
                .map(|handle| handle.join())
        });
        match outcome {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(error))) => Err(ExportError::Failed {
                url: self.endpoint.clone(),
                spans: total,
                message: sdk_message(&error),
            }),
            Ok(Err(_panic)) => Err(ExportError::Panicked {
                url: self.endpoint.clone(),
            }),
            Err(error) => Err(ExportError::Failed {
                url: self.endpoint.clone(),
                spans: total,
                message: format!("starting the export thread: {error}"),
            }),
        }
    }
}

fn sdk_message(error: &OTelSdkError) -> String {
    match error {
        OTelSdkError::InternalFailure(message) => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_without_a_path_get_v1_traces_others_keep_theirs_and_only_http_is_taken() {
        assert_eq!(
            endpoint_of("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            endpoint_of("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            endpoint_of("http://collector/custom/path").unwrap(),
            "http://collector/custom/path"
        );
        assert_eq!(
            endpoint_of("http://[::1]:4318").unwrap(),
            "http://[::1]:4318/v1/traces"
        );
        assert_eq!(
            endpoint_of("http://[::1]").unwrap(),
            "http://[::1]/v1/traces"
        );
        for bad in [
            "https://x",
            "x:4318",
            "http://:4318",
            "http://h:port",
            "http://[::1:4318",
            "http://[::1]:x",
            "",
        ] {
            let error = endpoint_of(bad).unwrap_err();
            assert!(
                matches!(&error, ExportError::InvalidUrl { url, .. } if url == bad),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn credentials_in_the_url_are_refused_and_not_repeated() {
        let error = endpoint_of("http://user:s3cret@collector:4318/v1/traces").unwrap_err();
        let text = error.to_string();
        assert!(!text.contains("s3cret") && !text.contains("user"), "{text}");
        assert!(
            text.contains("http://***@collector:4318/v1/traces"),
            "{text}"
        );
        assert!(text.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{text}");
    }

    #[test]
    fn a_bad_url_is_refused_when_the_exporter_is_built() {
        let error = OtlpExporter::new("https://collector:4318", "runcore").unwrap_err();
        assert!(
            error.to_string().contains("https://collector:4318"),
            "{error}"
        );
    }

    #[test]
    fn no_spans_send_nothing() {
        // Nothing listens on port 9 (discard) of the loopback; no spans, no request.
        let exporter = OtlpExporter::new("http://127.0.0.1:9", "runcore").unwrap();
        assert_eq!(exporter.endpoint(), "http://127.0.0.1:9/v1/traces");
        exporter.export(&[]).unwrap();
    }
}
