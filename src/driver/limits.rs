//! The input limits every door applies: the JSON-lines driver, `Agent::handle`, and each
//! binding's methods (the Node package's fast paths, the Python package's methods). One rule
//! per limit, owned here, so what one door accepts every door accepts, and a snapshot the agent
//! writes is one it can restore.
//!
//! | limit | rule | refused as |
//! |---|---|---|
//! | [`MAX_LINE_BYTES`] | an input line (or the line a binding's method stands for) is at most 64 MiB of UTF-8 | `invalid_json` |
//! | [`MAX_DEPTH`] | an input's JSON nesting (objects and arrays, the input itself counting 1) is at most 64 | `invalid_input` |
//! | [`MAX_NOW_MS`] | `now_ms` is an integer from 0 to 2^53 − 1 (exact as a JavaScript number) | `invalid_json` |
//! | strings | valid Unicode: a lone surrogate (`"\ud800"`) is refused, never replaced by U+FFFD | `invalid_json` |
//!
//! Serialized snapshots nest at most a fixed number of levels deeper than the inputs they hold
//! (the envelope, the agent, its outbox, a commit, its messages, ...): the snapshot reader
//! (`Agent::restore_json`) applies [`MAX_SNAPSHOT_DEPTH`], [`MAX_DEPTH`] plus
//! [`SNAPSHOT_NESTING`], itself, below serde_json's recursion limit of 128, so a snapshot nested
//! past it is the same `malformed` snapshot error from every door, and every snapshot an agent
//! writes (its inputs held to [`MAX_DEPTH`]) is one it restores.

use serde::Serialize;
use serde::ser;

use super::MAX_LINE_BYTES;

/// The deepest nesting of an input's JSON (objects and arrays; the input object is level 1).
pub const MAX_DEPTH: usize = 64;

/// How many levels deeper than the input line it came in a value sits in a snapshot, at most,
/// with room to spare (measured: 7, a `tool_done`'s `details` in the outbox's commit).
pub const SNAPSHOT_NESTING: usize = 32;

/// The deepest nesting of a snapshot's JSON that the snapshot reader accepts (the envelope is
/// level 1): [`MAX_DEPTH`] plus [`SNAPSHOT_NESTING`], below serde_json's limit of 128.
pub const MAX_SNAPSHOT_DEPTH: usize = MAX_DEPTH + SNAPSHOT_NESTING;

/// Why a snapshot is refused by the snapshot reader's depth check.
pub fn snapshot_too_deep() -> String {
    format!("the snapshot nests deeper than {MAX_SNAPSHOT_DEPTH} levels of objects and arrays")
}

/// The largest `now_ms`: 2^53 − 1, the largest integer a JavaScript number holds exactly.
pub const MAX_NOW_MS: u64 = (1 << 53) - 1;

/// Checks a host clock reading; the error is the message of the driver's `invalid_json`.
pub fn check_now_ms(now_ms: u64) -> Result<u64, String> {
    if now_ms <= MAX_NOW_MS {
        Ok(now_ms)
    } else {
        Err(format!(
            "not a valid input line: now_ms: {now_ms} is over the limit of 2^53 - 1"
        ))
    }
}

/// A clock reading from a floating-point number (what JavaScript passes): `NaN`, infinities,
/// negatives, fractions and values past [`MAX_NOW_MS`] are refused (`-0` reads as 0); the error
/// is the message of the driver's `invalid_json`.
pub fn now_ms_from_f64(now_ms: f64) -> Result<u64, String> {
    if now_ms.is_finite() && now_ms >= 0.0 && now_ms.fract() == 0.0 && now_ms <= MAX_NOW_MS as f64 {
        // An integer from 0 to 2^53 - 1: the conversion is exact.
        Ok(now_ms as u64)
    } else {
        Err(format!(
            "not a valid input line: now_ms: {now_ms} is not an integer from 0 to 2^53 - 1"
        ))
    }
}

/// The error message for a line (or the line a method stands for) of `bytes` bytes, past
/// [`MAX_LINE_BYTES`].
pub fn line_too_long(bytes: usize) -> String {
    format!("the line is {bytes} bytes, over the limit of {MAX_LINE_BYTES}")
}

/// Checks the length of a line; the error is the message of the driver's `invalid_json`.
pub fn check_line_len(bytes: usize) -> Result<(), String> {
    if bytes > MAX_LINE_BYTES {
        Err(line_too_long(bytes))
    } else {
        Ok(())
    }
}

/// The length in bytes of `s` as a JSON string (quotes and escapes included), as serde_json
/// and JavaScript's `JSON.stringify` write it (they escape the same characters the same way).
pub fn json_string_len(s: &str) -> usize {
    let mut length = s.len() + 2;
    for &byte in s.as_bytes() {
        match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => length += 1,
            0..=0x1f => length += 5,
            _ => {}
        }
    }
    length
}

/// The length in bytes of `n` in decimal.
pub fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().unwrap_or(0) as usize + 1
}

/// Checks that the JSON text `bytes` nests at most [`MAX_DEPTH`] levels of objects and arrays
/// (brackets inside strings not counted), before it is parsed: a line nested deeper is refused
/// with the same `invalid_input` as the input it holds would be, never a parser's own limit.
/// Text that is not JSON passes here (the parser says what is wrong with it).
pub fn check_json_depth(bytes: &[u8]) -> Result<(), String> {
    if json_nests_within(bytes, MAX_DEPTH) {
        Ok(())
    } else {
        Err(too_deep())
    }
}

/// Whether the JSON text `bytes` nests at most `max` levels of objects and arrays (brackets
/// inside strings not counted); text that is not JSON is measured all the same (its parser
/// says what is wrong with it).
pub fn json_nests_within(bytes: &[u8], max: usize) -> bool {
    let (mut level, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                level += 1;
                if level > max {
                    return false;
                }
            }
            b']' | b'}' => level = level.saturating_sub(1),
            _ => {}
        }
    }
    true
}

/// Whether a JSON value nests at most `max` levels of objects and arrays (a scalar: 0; an
/// empty object or array: 1). The walk goes no deeper than `max + 1` levels.
pub fn value_nests_within(value: &serde_json::Value, max: usize) -> bool {
    use serde_json::Value;
    match value {
        Value::Array(items) => {
            max > 0 && items.iter().all(|item| value_nests_within(item, max - 1))
        }
        Value::Object(map) => map_nests_within(map, max),
        _ => true,
    }
}

/// [`value_nests_within`] for a JSON object (itself counting 1).
#[inline]
pub(crate) fn map_nests_within(
    map: &serde_json::Map<String, serde_json::Value>,
    max: usize,
) -> bool {
    max > 0 && map.values().all(|item| value_nests_within(item, max - 1))
}

/// Why an input is refused by [`check_depth`].
pub fn too_deep() -> String {
    format!("the input nests deeper than {MAX_DEPTH} levels of objects and arrays")
}

/// Checks that `value` nests at most [`MAX_DEPTH`] levels (objects, arrays, maps, sequences and
/// structs as its JSON has them); the error is the reason of an `invalid_input`.
pub fn check_depth<T: Serialize + ?Sized>(value: &T) -> Result<(), String> {
    if nests_within(value, MAX_DEPTH) {
        Ok(())
    } else {
        Err(too_deep())
    }
}

/// Whether `value` nests at most `max` levels (as [`check_depth`] counts them).
pub fn nests_within<T: Serialize + ?Sized>(value: &T, max: usize) -> bool {
    value.serialize(Depth { level: 0, max }).is_ok()
}

/// The error of [`Depth`]: too deep.
#[derive(Debug)]
struct TooDeep;

impl std::fmt::Display for TooDeep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("too deep")
    }
}

impl std::error::Error for TooDeep {}

impl ser::Error for TooDeep {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        TooDeep
    }
}

/// A serializer that only follows nesting: its `level` is the depth of the container being
/// entered's parent.
#[derive(Clone, Copy)]
struct Depth {
    level: usize,
    /// The deepest level allowed.
    max: usize,
}

impl Depth {
    fn enter(self) -> Result<Depth, TooDeep> {
        let level = self.level + 1;
        if level > self.max {
            Err(TooDeep)
        } else {
            Ok(Depth { level, ..self })
        }
    }
}

type Done = Result<(), TooDeep>;

macro_rules! scalars {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, _: $ty) -> Done { Ok(()) })*
    };
}

impl ser::Serializer for Depth {
    type Ok = ();
    type Error = TooDeep;
    type SerializeSeq = Depth;
    type SerializeTuple = Depth;
    type SerializeTupleStruct = Depth;
    type SerializeTupleVariant = Depth;
    type SerializeMap = Depth;
    type SerializeStruct = Depth;
    type SerializeStructVariant = Depth;

    scalars!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
    );

    fn serialize_none(self) -> Done {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Done {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Done {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Done {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Done {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Done {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        v: &T,
    ) -> Done {
        // `{"variant": value}`
        v.serialize(self.enter()?)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Depth, TooDeep> {
        self.enter()
    }
    fn serialize_tuple(self, _: usize) -> Result<Depth, TooDeep> {
        self.enter()
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Depth, TooDeep> {
        self.enter()
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Depth, TooDeep> {
        self.enter()?.enter()
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Depth, TooDeep> {
        self.enter()
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Depth, TooDeep> {
        self.enter()
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Depth, TooDeep> {
        self.enter()?.enter()
    }
}

impl ser::SerializeSeq for Depth {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
        v.serialize(*self)
    }
    fn end(self) -> Done {
        Ok(())
    }
}

impl ser::SerializeTuple for Depth {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
        v.serialize(*self)
    }
    fn end(self) -> Done {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Depth {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
        v.serialize(*self)
    }
    fn end(self) -> Done {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Depth {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
        v.serialize(*self)
    }
    fn end(self) -> Done {
        Ok(())
    }
}

impl ser::SerializeMap for Depth {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, _: &T) -> Done {
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
        v.serialize(*self)
    }
    fn end(self) -> Done {
        Ok(())
    }
}

impl ser::SerializeStruct for Depth {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, v: &T) -> Done {
        v.serialize(*self)
    }
    fn end(self) -> Done {
        Ok(())
    }
}

impl ser::SerializeStructVariant for Depth {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, v: &T) -> Done {
        v.serialize(*self)
    }
    fn end(self) -> Done {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn nested(levels: usize) -> Value {
        let mut value = json!(1);
        for _ in 0..levels {
            value = json!([value]);
        }
        value
    }

    #[test]
    fn depth_at_and_past_the_edge() {
        assert!(check_depth(&nested(MAX_DEPTH)).is_ok());
        assert!(check_depth(&nested(MAX_DEPTH + 1)).is_err());
        assert!(check_depth(&json!("flat")).is_ok());
    }

    #[test]
    fn json_depth_agrees_with_the_value_depth() {
        for levels in [0, 1, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 200] {
            let value = json!({"s": "[[[{{{\\\"[", "v": nested(levels)});
            let text = value.to_string();
            assert_eq!(
                check_json_depth(text.as_bytes()).is_ok(),
                check_depth(&value).is_ok(),
                "{levels}"
            );
        }
    }

    #[test]
    fn now_at_and_past_the_edge() {
        assert_eq!(check_now_ms(MAX_NOW_MS), Ok(MAX_NOW_MS));
        assert!(check_now_ms(MAX_NOW_MS + 1).is_err());
        assert_eq!(now_ms_from_f64(MAX_NOW_MS as f64), Ok(MAX_NOW_MS));
        assert_eq!(now_ms_from_f64(-0.0), Ok(0));
        for bad in [f64::NAN, f64::INFINITY, -1.0, 0.5, (MAX_NOW_MS + 1) as f64] {
            assert!(now_ms_from_f64(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_string_len_matches_serde_json() {
        for s in [
            "",
            "plain",
            "q\"b\\",
            "\n\r\t\u{8}\u{c}",
            "\u{1}\u{1f}",
            "é漢🙂",
            "\u{7f}",
        ] {
            assert_eq!(
                json_string_len(s),
                serde_json::to_string(s).unwrap().len(),
                "{s:?}"
            );
        }
        assert_eq!(decimal_len(0), 1);
        assert_eq!(decimal_len(9), 1);
        assert_eq!(decimal_len(10), 2);
        assert_eq!(decimal_len(u64::MAX), 20);
    }

    #[test]
    fn line_len_at_and_past_the_edge() {
        assert!(check_line_len(MAX_LINE_BYTES).is_ok());
        assert!(check_line_len(MAX_LINE_BYTES + 1).is_err());
    }
}
