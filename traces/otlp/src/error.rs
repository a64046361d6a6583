//! Why spans were not exported: the one error of both the conversion and the export, in its
//! own file so that neither imports the other for it.

/// Why spans were not exported. Every variant names the URL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The URL is not `http://HOST[:PORT][/PATH]`.
    #[error("{url:?} is not an OTLP/HTTP URL: {reason}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The OpenTelemetry exporter could not be built for the URL.
    #[error("setting up the OTLP exporter for {url} failed: {message}")]
    Build {
        /// The endpoint.
        url: String,
        /// The exporter's error.
        message: String,
    },
    /// A span could not be expressed in OpenTelemetry's terms (its ids are not hex).
    #[error("span {span:?} cannot be exported to {url}: {reason}")]
    BadSpan {
        /// The endpoint.
        url: String,
        /// The span's name.
        span: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The collector could not be reached, or answered with a non-2xx status (after the
    /// exporter's retries).
    #[error("exporting {spans} spans to {url} failed: {message}{}", hint(message))]
    Failed {
        /// The endpoint.
        url: String,
        /// How many spans were being sent.
        spans: usize,
        /// The exporter's error (`network error`, or the HTTP status).
        message: String,
    },
    /// The exporter panicked (a bug in it or in this crate); the caller goes on.
    #[error("exporting spans to {url} failed: the exporter panicked")]
    Panicked {
        /// The endpoint.
        url: String,
    },
}

/// What a person can do about the exporter's one message for every failure without an HTTP
/// answer (it keeps the cause to itself).
fn hint(message: &str) -> &'static str {
    if message.contains("network error") {
        " (no HTTP answer: is a collector listening there?)"
    } else {
        ""
    }
}
