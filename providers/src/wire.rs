//! Small readers of provider JSON shared by the decoders.

use serde_json::Value;

/// `value[key]` as a string.
pub(crate) fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// `value[key]` as an unsigned integer.
pub(crate) fn count(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// `value[outer][inner]` as an unsigned integer.
pub(crate) fn nested_count(value: &Value, outer: &str, inner: &str) -> Option<u64> {
    value.get(outer).and_then(|o| count(o, inner))
}

/// Tool-call arguments, parsed once when the call is complete: a JSON object, or (anything
/// else: truncated JSON, an array, a scalar) the raw text as a JSON string, which the core
/// answers `malformed` or `truncated` without executing the call. No text at all is a call
/// without arguments: `{}`.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => value,
        _ => Value::String(raw.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        assert_eq!(parse_arguments(""), serde_json::json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), serde_json::json!({"a": 1}));
        assert_eq!(parse_arguments("{\"a\":"), Value::from("{\"a\":"));
        assert_eq!(parse_arguments("[1]"), Value::from("[1]"));
    }
}
