//! Failures as data with stable codes (SPEC §13). A host judges a failure by its code, never by
//! its message.
//!
//! | code | when |
//! |---|---|
//! | `rate_limited` | HTTP 429; `rate_limit_error`, `rate_limit_exceeded` |
//! | `overloaded` | HTTP 529; `overloaded_error` (also inside a 200 stream) |
//! | `context_length_exceeded` | a 400 (or an error event) saying the prompt is too long |
//! | `invalid_request` | any other 400 (and 413, 422, other 4xx) |
//! | `authentication` | 401, 403 |
//! | `not_found` | 404 |
//! | `server_error` | 5xx; `api_error`, `server_error` |
//! | `incomplete_stream` | the body ended before the API's terminal event |
//! | `stream_error` | any other error event inside a 200 stream |

use serde_json::Value;

use crate::Api;

/// A stable failure code (SPEC §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FailureCode {
    /// HTTP 429.
    RateLimited,
    /// HTTP 529 or `overloaded_error`.
    Overloaded,
    /// The prompt does not fit the model's context window.
    ContextLengthExceeded,
    /// Any other 4xx the request caused.
    InvalidRequest,
    /// 401, 403.
    Authentication,
    /// 404.
    NotFound,
    /// 5xx, `api_error`.
    ServerError,
    /// The body ended before the API's terminal event.
    IncompleteStream,
    /// An error event inside a 200 stream.
    StreamError,
}

impl FailureCode {
    /// The code as `model_failed` carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::RateLimited => "rate_limited",
            FailureCode::Overloaded => "overloaded",
            FailureCode::ContextLengthExceeded => "context_length_exceeded",
            FailureCode::InvalidRequest => "invalid_request",
            FailureCode::Authentication => "authentication",
            FailureCode::NotFound => "not_found",
            FailureCode::ServerError => "server_error",
            FailureCode::IncompleteStream => "incomplete_stream",
            FailureCode::StreamError => "stream_error",
        }
    }
}

/// A failure: its code and the provider's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The stable code.
    pub code: FailureCode,
    /// What the provider said (`type: message`), or what the decoder saw.
    pub message: String,
}

impl Failure {
    /// The body ended before `api`'s terminal event.
    pub fn incomplete(api: Api) -> Self {
        Failure {
            code: FailureCode::IncompleteStream,
            message: format!(
                "the response body ended before its terminal event ({})",
                api.terminal_event()
            ),
        }
    }

    /// An error the provider reported inside a 2xx body: its type (or code) and message. The
    /// code follows the type where the table names it, else `stream_error`.
    pub fn in_stream(kind: Option<&str>, code: Option<&str>, message: Option<&str>) -> Self {
        let code_value = classify(kind, code, message).unwrap_or(FailureCode::StreamError);
        Failure {
            code: code_value,
            message: describe(kind.or(code), message),
        }
    }
}

/// The code an error type, error code or message names, if the table has one.
fn classify(kind: Option<&str>, code: Option<&str>, message: Option<&str>) -> Option<FailureCode> {
    let names = [kind, code];
    let is = |wanted: &[&str]| names.iter().flatten().any(|name| wanted.contains(name));
    if is(&["context_length_exceeded", "string_above_max_length"]) || says_too_long(message) {
        return Some(FailureCode::ContextLengthExceeded);
    }
    if is(&["overloaded_error", "overloaded"]) {
        return Some(FailureCode::Overloaded);
    }
    if is(&[
        "rate_limit_error",
        "rate_limit_exceeded",
        "insufficient_quota",
    ]) {
        return Some(FailureCode::RateLimited);
    }
    if is(&["api_error", "server_error", "internal_error"]) {
        return Some(FailureCode::ServerError);
    }
    if is(&[
        "authentication_error",
        "permission_error",
        "invalid_api_key",
    ]) {
        return Some(FailureCode::Authentication);
    }
    if is(&["not_found_error", "model_not_found"]) {
        return Some(FailureCode::NotFound);
    }
    None
}

/// Anthropic reports an over-long prompt as a plain `invalid_request_error` whose message says
/// so; this is the one place a message is read, to give the host a code instead.
fn says_too_long(message: Option<&str>) -> bool {
    message.is_some_and(|message| {
        let message = message.to_ascii_lowercase();
        message.contains("prompt is too long")
            || message.contains("context length")
            || message.contains("context window")
            || message.contains("maximum context")
    })
}

fn describe(kind: Option<&str>, message: Option<&str>) -> String {
    match (kind, message) {
        (Some(kind), Some(message)) => format!("{kind}: {message}"),
        (Some(kind), None) => kind.to_owned(),
        (None, Some(message)) => message.to_owned(),
        (None, None) => "the provider reported an error".to_owned(),
    }
}

/// The error envelope's `type`, `code` and `message`, in any of the three APIs' shapes:
/// `{"type":"error","error":{"type","message"}}`, `{"error":{"type","code","message"}}`,
/// `{"type":"error","code","message"}` (a Responses error event).
pub(crate) fn envelope(body: &Value) -> Option<(Option<&str>, Option<&str>, Option<&str>)> {
    let object = body.as_object()?;
    let error = match object.get("error") {
        Some(Value::Object(error)) => error,
        Some(Value::String(message)) => return Some((None, None, Some(message))),
        _ if object.get("type").and_then(Value::as_str) == Some("error") => {
            let text = |key: &str| object.get(key).and_then(Value::as_str);
            return Some((None, text("code"), text("message")));
        }
        _ => return None,
    };
    let text = |key: &str| error.get(key).and_then(Value::as_str);
    Some((text("type"), text("code"), text("message")))
}

/// The failure of a non-2xx response: the status decides, the provider's error type refines
/// (`overloaded_error` on any status, a too-long prompt on a 400).
pub(crate) fn http_failure(status: u16, body: &[u8]) -> Failure {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let (kind, code, message) = parsed
        .as_ref()
        .and_then(envelope)
        .unwrap_or((None, None, None));
    let named = classify(kind, code, message);
    let code_value = match status {
        429 => FailureCode::RateLimited,
        529 => FailureCode::Overloaded,
        401 | 403 => FailureCode::Authentication,
        404 => FailureCode::NotFound,
        400 if named == Some(FailureCode::ContextLengthExceeded) => {
            FailureCode::ContextLengthExceeded
        }
        _ if named == Some(FailureCode::Overloaded) => FailureCode::Overloaded,
        500..=599 => FailureCode::ServerError,
        _ => FailureCode::InvalidRequest,
    };
    let message = if kind.is_some() || message.is_some() {
        format!("HTTP {status}: {}", describe(kind.or(code), message))
    } else {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        if text.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {text}")
        }
    };
    Failure {
        code: code_value,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_table() {
        let code = |status, body: &str| http_failure(status, body.as_bytes()).code.as_str();
        assert_eq!(code(429, ""), "rate_limited");
        assert_eq!(code(529, ""), "overloaded");
        assert_eq!(
            code(
                500,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"x"}}"#
            ),
            "overloaded"
        );
        assert_eq!(
            code(400, r#"{"error":{"code":"context_length_exceeded"}}"#),
            "context_length_exceeded"
        );
        assert_eq!(
            code(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 2 tokens > 1 maximum"}}"#
            ),
            "context_length_exceeded"
        );
        assert_eq!(code(400, "nope"), "invalid_request");
        assert_eq!(code(422, ""), "invalid_request");
        assert_eq!(code(401, ""), "authentication");
        assert_eq!(code(403, ""), "authentication");
        assert_eq!(code(404, ""), "not_found");
        assert_eq!(code(503, "<html>"), "server_error");
    }

    #[test]
    fn in_stream_table() {
        let code = |kind| {
            Failure::in_stream(Some(kind), None, Some("m"))
                .code
                .as_str()
        };
        assert_eq!(code("overloaded_error"), "overloaded");
        assert_eq!(code("api_error"), "server_error");
        assert_eq!(code("something_new"), "stream_error");
    }
}
