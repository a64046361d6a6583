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
//! Each input is measured once, by the door it comes through:
//! - a line's text ([`Driver::parse_line`](crate::driver::Driver::parse_line),
//!   [`InputLine::parse`](crate::driver::InputLine::parse)): its length against
//!   [`MAX_LINE_BYTES`] by the reader, its nesting by [`check_json_depth`] before it is parsed
//!   (serde_json's own recursion limit, 128, is never what refuses a line), its `now_ms` by
//!   [`check_now_ms`] as it is read; the agent is handed the input as already measured;
//! - a line's value ([`InputLine::from_value`](crate::driver::InputLine::from_value), what the
//!   Python package's dicts are): its nesting by [`check_depth`];
//! - a typed input (`Agent::handle`, the input methods, the bindings' direct calls): by
//!   [`check_depth`], or by the fast path of `model_done` / `tool_done` (the depth of the JSON
//!   values they hold, through [`nests_within`]), proven equal to it around the edge by
//!   `tests/limits.rs`; its time by the same rule as [`check_now_ms`], as `invalid_input`;
//! - the line a binding's method stands for: its length by [`check_line_parts`].
//!
//! One walker measures values, typed or JSON ([`nests_within`], the serializer behind
//! [`check_depth`]); text is measured by a byte scan that agrees with it
//! ([`json_nests_within`]), and an error names where the input nests too deep
//! (`in messages[3]`) the same way from both.
//!
//! Serialized snapshots nest at most a fixed number of levels deeper than the inputs they hold
//! (the envelope, the agent, its outbox, a commit, its messages, ...): the snapshot reader
//! (`Agent::restore_json`) applies [`MAX_SNAPSHOT_DEPTH`], [`MAX_DEPTH`] plus
//! [`SNAPSHOT_NESTING`], itself, below serde_json's recursion limit of 128, so a snapshot nested
//! past it is the same `malformed` snapshot error from every door, and every snapshot an agent
//! writes (its inputs held to [`MAX_DEPTH`]) is one it restores.

use serde::Serialize;
use serde::ser;

/// The longest input line (64 MiB of UTF-8): what the driver parses, and the line a binding's
/// method stands for.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

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

/// Why a clock reading past [`MAX_NOW_MS`] is refused (the reason of `Agent::handle`'s
/// `invalid_input`; a line's `invalid_json` says it after "not a valid input line: ").
pub fn now_ms_over(now_ms: u64) -> String {
    format!("now_ms: {now_ms} is over the limit of 2^53 - 1")
}

/// Checks a host clock reading: the one rule, `now_ms` at most [`MAX_NOW_MS`]. The error is the
/// message of the driver's `invalid_json` (what a line, or a binding's method, is refused with).
pub fn check_now_ms(now_ms: u64) -> Result<u64, String> {
    if now_ms <= MAX_NOW_MS {
        Ok(now_ms)
    } else {
        Err(format!("not a valid input line: {}", now_ms_over(now_ms)))
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

/// The error message for a line (or the line a method stands for) of exactly `bytes` bytes,
/// past [`MAX_LINE_BYTES`].
pub fn line_too_long(bytes: usize) -> String {
    format!("the line is {bytes} bytes, over the limit of {MAX_LINE_BYTES} bytes")
}

/// The error message for a line past [`MAX_LINE_BYTES`] of which `read` bytes were read: a
/// reader stops keeping a line at the first byte past the cap, so `read` is a lower bound,
/// never the line's length.
pub fn line_over_cap(read: usize) -> String {
    format!("the line is over the limit of {MAX_LINE_BYTES} bytes (at least {read} bytes)")
}

/// Checks the length of a line; the error is the message of the driver's `invalid_json`.
pub fn check_line_len(bytes: usize) -> Result<(), String> {
    if bytes > MAX_LINE_BYTES {
        Err(line_too_long(bytes))
    } else {
        Ok(())
    }
}

/// Checks the line a binding's method stands for, `{"type":…,<fields>}`, whose fixed text (keys,
/// punctuation, numbers) is `fixed` bytes and whose string values are `strings`, against
/// [`MAX_LINE_BYTES`] without writing it: the strings are measured as JSON
/// ([`json_string_len`]) only when they may pass the cap (escapes at most sextuple a string).
/// The error is the message of the driver's `invalid_json`.
pub fn check_line_parts(fixed: usize, strings: &[&str]) -> Result<(), String> {
    let raw: usize = strings.iter().map(|s| s.len()).sum();
    if raw
        .saturating_mul(6)
        .saturating_add(fixed.saturating_add(2 * strings.len()))
        <= MAX_LINE_BYTES
    {
        return Ok(());
    }
    let length = strings
        .iter()
        .map(|s| json_string_len(s))
        .fold(fixed, usize::saturating_add);
    check_line_len(length)
}

/// The bytes of `,"now_ms":N` on a line (none without a time).
pub fn now_ms_len(now_ms: Option<u64>) -> usize {
    now_ms.map_or(0, |now| r#","now_ms":"#.len() + decimal_len(now))
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
    count_depth_check();
    if json_nests_within(bytes, MAX_DEPTH) {
        Ok(())
    } else {
        Err(too_deep(json_too_deep_at(bytes, MAX_DEPTH).as_deref()))
    }
}

/// Where the JSON text `bytes` first nests past `max` levels, told as [`check_depth`] tells it:
/// the member of the outermost object the too-deep part is in, with the element's index when
/// that member is an array (`messages[3]`). `None` when it nests within `max`, or the text is
/// not an object. Run only on a text [`json_nests_within`] refused.
fn json_too_deep_at(bytes: &[u8], max: usize) -> Option<String> {
    let (mut level, mut in_string, mut escaped) = (0usize, false, false);
    let mut string_start = 0;
    // The last string closed at level 1 (a member's key, before its value), and the key and
    // kind of the member being read at level 2, with its element count so far.
    let mut last_key: Option<(usize, usize)> = None;
    let (mut member, mut in_array, mut index) = (None, false, 0usize);
    for (at, &byte) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
                if level == 1 {
                    last_key = Some((string_start, at + 1));
                }
            }
            continue;
        }
        match byte {
            b'"' => {
                in_string = true;
                string_start = at;
            }
            b'[' | b'{' => {
                level += 1;
                if level == 2 {
                    (member, in_array, index) = (last_key, byte == b'[', 0);
                }
                if level > max {
                    let (start, end) = member?;
                    let key: String = serde_json::from_slice(bytes.get(start..end)?).ok()?;
                    return Some(location(key, in_array.then_some(index)));
                }
            }
            b']' | b'}' => level = level.saturating_sub(1),
            b',' if level == 2 => index += 1,
            _ => {}
        }
    }
    None
}

/// A location as the depth errors name it: `key`, or `key[index]`.
fn location(key: String, index: Option<usize>) -> String {
    match index {
        Some(index) => format!("{key}[{index}]"),
        None => key,
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

#[cfg(test)]
thread_local! {
    /// How many depth checks of an input ran on this thread (the crate's own tests count them:
    /// an input is measured once, whichever door it comes through).
    static DEPTH_CHECKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts one depth check of an input (in the crate's own tests; nothing otherwise).
#[inline(always)]
pub(crate) fn count_depth_check() {
    #[cfg(test)]
    DEPTH_CHECKS.with(|checks| checks.set(checks.get() + 1));
}

/// The depth checks counted on this thread so far.
#[cfg(test)]
pub(crate) fn depth_checks() -> usize {
    DEPTH_CHECKS.with(std::cell::Cell::get)
}

/// Why an input is refused by [`check_depth`]: `at` names where it nests too deep, when that
/// is known (the member of the input, with the element's index when it is a list:
/// `messages[3]`).
pub fn too_deep(at: Option<&str>) -> String {
    match at {
        Some(at) => format!(
            "the input nests deeper than {MAX_DEPTH} levels of objects and arrays (in {at})"
        ),
        None => format!("the input nests deeper than {MAX_DEPTH} levels of objects and arrays"),
    }
}

/// Checks that `value` nests at most [`MAX_DEPTH`] levels (objects, arrays, maps, sequences and
/// structs as its JSON has them); the error is the reason of an `invalid_input`, naming where
/// (as [`check_json_depth`] names it for the same value's JSON text).
pub fn check_depth<T: Serialize + ?Sized>(value: &T) -> Result<(), String> {
    count_depth_check();
    match value.serialize(Depth::new(MAX_DEPTH)) {
        Ok(()) => Ok(()),
        Err(error) => Err(too_deep(error.location().as_deref())),
    }
}

/// Whether `value` nests at most `max` levels (as [`check_depth`] counts them: a scalar 0, an
/// empty object or list 1); the walk goes no deeper than `max + 1` levels. The one depth walker:
/// of typed inputs, of JSON values, of snapshots.
pub fn nests_within<T: Serialize + ?Sized>(value: &T, max: usize) -> bool {
    value.serialize(Depth::new(max)).is_ok()
}

/// The error of [`Depth`]: too deep, and where, filled in as the walk unwinds (so the
/// outermost member and element stay), each with the level of the container holding it.
#[derive(Debug, Default)]
struct TooDeep {
    member: Option<(String, usize)>,
    element: Option<(usize, usize)>,
}

impl TooDeep {
    /// Inside member `key` of the object at `level`.
    fn in_member(mut self, key: String, level: usize) -> Self {
        self.member = Some((key, level));
        self
    }

    /// Inside element `index` of the list at `level`.
    fn in_element(mut self, index: usize, level: usize) -> Self {
        self.element = Some((index, level));
        self
    }

    /// The member of the outermost object, with the element's index when that member is a
    /// list (as [`json_too_deep_at`] tells it).
    fn location(self) -> Option<String> {
        let (key, level) = self.member?;
        let index = self
            .element
            .filter(|&(_, list)| list == level + 1)
            .map(|(index, _)| index);
        Some(location(key, index))
    }
}

impl std::fmt::Display for TooDeep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("too deep")
    }
}

impl std::error::Error for TooDeep {}

impl ser::Error for TooDeep {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        TooDeep::default()
    }
}

/// A serializer that only follows nesting: its `level` is the depth of the container being
/// entered's parent (inside a container: the container's own).
#[derive(Clone, Copy)]
struct Depth {
    level: usize,
    /// The deepest level allowed.
    max: usize,
    /// Inside a list: the index of its next element.
    next: usize,
    /// Inside serde_json's raw-value marker (a `meta`'s JSON text, SPEC §2.1): its string is
    /// JSON text, measured as the object it is, at this level.
    raw: bool,
}

impl Depth {
    fn new(max: usize) -> Depth {
        Depth {
            level: 0,
            max,
            next: 0,
            raw: false,
        }
    }

    fn enter(self) -> Result<Depth, TooDeep> {
        let level = self.level + 1;
        if level > self.max {
            Err(TooDeep::default())
        } else {
            Ok(Depth {
                level,
                next: 0,
                raw: false,
                ..self
            })
        }
    }

    /// The next element of the list this is inside.
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
        let index = self.next;
        self.next += 1;
        v.serialize(*self)
            .map_err(|e| e.in_element(index, self.level))
    }

    /// Member `key` of the object this is inside.
    fn member<T: Serialize + ?Sized>(&self, key: &str, v: &T) -> Done {
        v.serialize(*self)
            .map_err(|e| e.in_member(key.to_owned(), self.level))
    }
}

/// A map key as the text its JSON has (only for an error's location).
fn key_text<K: Serialize + ?Sized>(key: &K) -> String {
    match serde_json::to_value(key) {
        Ok(serde_json::Value::String(key)) => key,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
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
        serialize_bytes(&[u8]),
    );

    fn serialize_str(self, text: &str) -> Done {
        if self.raw && !json_nests_within(text.as_bytes(), self.max.saturating_sub(self.level)) {
            return Err(TooDeep::default());
        }
        Ok(())
    }

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
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Depth, TooDeep> {
        if name == crate::message::RAW_TOKEN {
            // Not a level of its own: the text's object is.
            return Ok(Depth { raw: true, ..self });
        }
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
        self.element(v)
    }
    fn end(self) -> Done {
        Ok(())
    }
}

impl ser::SerializeTuple for Depth {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
        self.element(v)
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
    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        v: &V,
    ) -> Done {
        v.serialize(*self)
            .map_err(|e| e.in_member(key_text(key), self.level))
    }
    fn end(self) -> Done {
        Ok(())
    }
}

impl ser::SerializeStruct for Depth {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Done {
        self.member(key, v)
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
        assert_eq!(
            check_depth(&nested(MAX_DEPTH + 1)),
            Err(too_deep(None)),
            "an array names no member"
        );
        assert!(check_depth(&nested(MAX_DEPTH + 1)).is_err());
        assert!(check_depth(&json!("flat")).is_ok());
    }

    #[test]
    fn json_depth_agrees_with_the_value_depth() {
        for levels in [0, 1, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 200] {
            let value = json!({"s": "[[[{{{\\\"[", "v": nested(levels)});
            let text = value.to_string();
            assert_eq!(
                check_json_depth(text.as_bytes()),
                check_depth(&value),
                "{levels}"
            );
        }
    }

    #[test]
    fn a_depth_error_names_the_member_and_element() {
        let text = |t: &str| json!([{"type": "text", "text": t}]);
        let mut deep = json!({"content": text("x"), "meta": {"v": nested(MAX_DEPTH)}});
        let value = json!({"type": "import", "messages": [
            {"role": "user", "content": text("a"), "meta": {"s": "[[,,\"]]"}},
            {"role": "user", "content": text("b")},
            deep.take(),
        ]});
        let expected = Err(too_deep(Some("messages[2]")));
        assert_eq!(check_depth(&value), expected);
        assert_eq!(check_json_depth(value.to_string().as_bytes()), expected);
        let value = json!({"type": "tool_done", "details": {"a": [nested(MAX_DEPTH)]}});
        let expected = Err(too_deep(Some("details")));
        assert_eq!(check_depth(&value), expected);
        assert_eq!(check_json_depth(value.to_string().as_bytes()), expected);
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
    fn line_parts_measure_as_the_line_does() {
        let head = r#"{"type":"prompt","text":}"#.len();
        let at_edge = "a".repeat(MAX_LINE_BYTES - head - 2);
        assert_eq!(check_line_parts(head, &[&at_edge]), Ok(()));
        let past = "\u{1}".repeat(MAX_LINE_BYTES / 6 + 1);
        assert_eq!(
            check_line_parts(head, &[&past]),
            Err(line_too_long(head + json_string_len(&past)))
        );
        assert_eq!(now_ms_len(None), 0);
        assert_eq!(now_ms_len(Some(123)), r#","now_ms":123"#.len());
    }

    #[test]
    fn line_len_at_and_past_the_edge() {
        assert!(check_line_len(MAX_LINE_BYTES).is_ok());
        assert_eq!(
            check_line_len(MAX_LINE_BYTES + 1),
            Err("the line is 67108865 bytes, over the limit of 67108864 bytes".to_owned())
        );
        assert_eq!(
            line_over_cap(MAX_LINE_BYTES + 1),
            "the line is over the limit of 67108864 bytes (at least 67108865 bytes)"
        );
    }
}
