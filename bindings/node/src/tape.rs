//! Outputs to JavaScript as a tape: what `index.js` rebuilds into exactly the objects
//! `JSON.parse` makes of the driver's line, without the JSON text in between.
//!
//! A batch (one or more outputs) crosses as two things:
//!
//! - one string holding every string's contents back to back (JavaScript takes each with
//!   `slice`, its length in UTF-16 code units on the tape);
//! - a `Uint32Array` of operations, each a tag in its low 3 bits and a payload above them.
//!
//! Object keys cross once per agent: a key is given an id the first time it is written and
//! its text is sent in that batch's header; so is each object *shape* (its keys in order), which
//! `index.js` turns into a constructor that builds the object as one literal (one hidden class
//! per shape). Short strings values (`"event"`, `"text"`, run ids) go through the same table.
//! The tables are bounded: past [`MAX_KEYS`] or [`MAX_SHAPES`] both sides start afresh.
//!
//! Numbers are written as `JSON.parse` reads serde_json's text of them: integers exactly below
//! 2^29 on the tape, else the nearest double (as the decimal text parses); a float as its
//! double; a non-finite float as `null` (serde_json writes `null`). Anything serde_json writes
//! that a tape does not hold (a non-string map key, a raw JSON value) makes that output cross as
//! its JSON text instead (an operation of its own), so every output equals its line.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::Serialize;
use serde::ser;

/// A small non-negative integer: the payload is the value.
pub const TAG_INT: u32 = 0;
/// A string: the payload is its length in UTF-16 code units, taken from the batch's text.
pub const TAG_STR: u32 = 1;
/// An array: the payload is its length; its elements follow.
pub const TAG_ARRAY: u32 = 2;
/// An object: the payload is its shape's id; its values follow, in the shape's key order.
pub const TAG_OBJECT: u32 = 3;
/// A short string from the key table: the payload is its id.
pub const TAG_INTERNED: u32 = 4;
/// `null` (payload 0), `false` (1) or `true` (2).
pub const TAG_CONST: u32 = 5;
/// A double: the next two words are its 8 bytes in native order.
pub const TAG_F64: u32 = 6;
/// A value as JSON text (`JSON.parse` of the next payload code units of the text).
pub const TAG_JSON: u32 = 7;

/// The largest payload (29 bits).
const MAX_PAYLOAD: u64 = (1 << 29) - 1;
/// Strings values up to this many bytes are interned.
const INTERN_MAX: usize = 24;
/// Key table size past which a batch starts both sides' tables afresh.
pub const MAX_KEYS: usize = 1 << 15;
/// Shape table size past which a batch starts both sides' tables afresh.
pub const MAX_SHAPES: usize = 1 << 13;

/// Header words before a batch's values: total length, reset flag (bit 0) with the batch's value count above it, new key count (then their
/// lengths), new shape count (then each shape's key count and key ids).
const STATIC_SLOTS: usize = 256;

/// Slots of the hot-string cache ([`Tape::key_id`]).
const HOT_SLOTS: usize = 512;
/// The longest string the hot cache holds (every interned value fits).
const HOT_LEN: usize = INTERN_MAX;

/// One slot of the hot-string cache: a key id and its text, inline (`len` 0xff: empty).
#[derive(Clone, Copy)]
struct Hot {
    id: u32,
    len: u8,
    bytes: [u8; HOT_LEN],
}

impl Hot {
    const EMPTY: Hot = Hot {
        id: 0,
        len: u8::MAX,
        bytes: [0; HOT_LEN],
    };
}

/// The hot-cache slot of a short string: from its length and its first, middle and last
/// bytes (cheap; a collision only costs a lookup in the full table).
fn hot_slot(bytes: &[u8]) -> usize {
    let n = bytes.len();
    let at = |i: usize| usize::from(bytes.get(i).copied().unwrap_or(0));
    let mixed = n
        .wrapping_mul(0x9e37)
        .wrapping_add(at(0).wrapping_mul(31))
        .wrapping_add(at(n / 2).wrapping_mul(131))
        .wrapping_add(at(n.wrapping_sub(1)).wrapping_mul(1031))
        .wrapping_add(at(n.wrapping_sub(2)).wrapping_mul(7));
    (mixed ^ (mixed >> 9)) % HOT_SLOTS
}

/// FxHash (rustc's hasher): keys here are short strings and small integer lists.
#[derive(Default, Clone, Copy)]
struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        for &byte in chunks.remainder() {
            self.add(u64::from(byte));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// The tape of one agent: its key and shape tables (mirrored in `index.js`) and the batch
/// being written.
#[derive(Default)]
pub struct Tape {
    /// Key (and short string) ids by content.
    keys: FxMap<Box<str>, u32>,
    /// Struct field names (`&'static str`) by address: a cache in front of `keys`.
    statics: Vec<(usize, usize, u32)>,
    /// Recent short strings by a hash of a few of their bytes, stored inline: a small cache in
    /// front of `keys` that stays in the processor's cache while `keys` grows.
    hot: Vec<Hot>,
    /// Shape ids by their key ids.
    shapes: FxMap<Box<[u32]>, u32>,
    /// The batch's values.
    ops: Vec<u32>,
    /// The batch's string contents.
    text: String,
    /// True while `text` and `key_text` are ASCII.
    ascii: bool,
    /// Keys first written in this batch: their text, and their lengths.
    key_text: String,
    key_lengths: Vec<u32>,
    /// Shapes first written in this batch: key count then key ids, per shape.
    shape_defs: Vec<u32>,
    new_shapes: u32,
    /// Key ids of the objects being written (innermost last).
    open_keys: Vec<u32>,
    /// Set when this batch starts both sides' tables afresh.
    reset: bool,
    /// Values (outputs) written in this batch: sent above the reset flag, so `index.js`
    /// builds the batch's array without setting elements.
    values: u32,
    /// The assembled batch, when the caller's array was too short for it.
    pending: Vec<u32>,
}

/// Why a value could not go on the tape (its output then crosses as JSON text).
#[derive(Debug)]
pub struct Unsupported(String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

type Result<T> = std::result::Result<T, Unsupported>;

fn unsupported<T>(what: &str) -> Result<T> {
    Err(Unsupported(what.to_owned()))
}

thread_local! {
    /// A batch text's buffer, back from JavaScript (see [`give_back_text`]).
    static SPARE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// An empty buffer for a batch's text: the spare one when there is one.
fn spare_text() -> String {
    let mut text = SPARE.with(|spare| std::mem::take(&mut *spare.borrow_mut()));
    text.clear();
    text
}

/// Keeps `text`'s buffer for the next batch (once JavaScript has copied it).
pub fn give_back_text(text: String) {
    SPARE.with(|spare| {
        let mut spare = spare.borrow_mut();
        if text.capacity() > spare.capacity() {
            *spare = text;
        }
    });
}

/// A string's length in UTF-16 code units.
fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.encode_utf16().count()
    }
}

impl Tape {
    /// Starts a batch. `known` is how many keys and shapes `index.js` holds (what it wrote at
    /// the start of the tape array before the call): when they are not this side's counts (a
    /// batch JavaScript never decoded, a poll that failed after the tables grew), the tables
    /// start afresh on both sides, so the two sides never decode with different tables. The
    /// tables also start afresh when they have grown past their bounds.
    pub fn begin(&mut self, known: (u32, u32)) {
        let synced = known.0 as usize == self.keys.len() && known.1 as usize == self.shapes.len();
        self.ops.clear();
        self.text.clear();
        self.key_text.clear();
        self.key_lengths.clear();
        self.shape_defs.clear();
        self.new_shapes = 0;
        self.open_keys.clear();
        self.pending.clear();
        self.ascii = true;
        self.reset = false;
        self.values = 0;
        if !synced || self.keys.len() > MAX_KEYS || self.shapes.len() > MAX_SHAPES {
            self.forget();
            self.reset = true;
        }
    }

    /// The length in bytes of the batch's text so far.
    pub fn text_len(&self) -> usize {
        self.text.len() + self.key_text.len()
    }

    /// Forgets both tables (`index.js` does the same on the reset flag or `tapeReset()`).
    pub fn forget(&mut self) {
        self.keys.clear();
        self.shapes.clear();
        self.statics.clear();
        self.hot.clear();
    }

    /// Writes one value; when it does not fit the tape, its JSON text (from `json`) instead.
    pub fn write<T: Serialize + ?Sized>(&mut self, value: &T) {
        self.values += 1;
        let (ops, text, ascii) = (self.ops.len(), self.text.len(), self.ascii);
        if value.serialize(Writer { tape: self }).is_ok() {
            return;
        }
        self.ops.truncate(ops);
        self.text.truncate(text);
        self.ascii = ascii;
        self.open_keys.clear();
        // Plain data with string keys, as the driver writes it: serializing cannot fail. Were
        // it to, a debug build stops here and a release build gives `null`, never an empty
        // text that `JSON.parse` would throw on.
        let json = serde_json::to_string(value).unwrap_or_else(|error| {
            debug_assert!(false, "a value failed to serialize as JSON: {error}");
            "null".to_owned()
        });
        self.string_op(TAG_JSON, &json);
    }

    fn string_op(&mut self, tag: u32, s: &str) {
        let ascii = s.is_ascii();
        let length = if ascii {
            s.len()
        } else {
            s.encode_utf16().count()
        };
        self.ascii &= ascii;
        self.text.push_str(s);
        self.push_long(tag, length);
    }

    /// An operation whose payload may exceed 29 bits: then split (`index.js` reads a
    /// `TAG_STR`/`TAG_JSON` payload of all ones as "the next word is the length").
    fn push_long(&mut self, tag: u32, length: usize) {
        if (length as u64) < MAX_PAYLOAD {
            self.ops.push(tag | ((length as u32) << 3));
        } else {
            self.ops.push(tag | ((MAX_PAYLOAD as u32) << 3));
            self.ops.push(length as u32);
        }
    }

    fn value_str(&mut self, s: &str) {
        if s.len() <= INTERN_MAX
            && let Some(id) = self.key_id(s)
        {
            self.ops.push(TAG_INTERNED | (id << 3));
            return;
        }
        self.string_op(TAG_STR, s);
    }

    /// The id of key `s`, registering it (and sending it in this batch) when new; `None` when
    /// the table is full to its payload limit.
    fn key_id(&mut self, s: &str) -> Option<u32> {
        let bytes = s.as_bytes();
        let slot = if bytes.len() <= HOT_LEN {
            if self.hot.is_empty() {
                self.hot.resize(HOT_SLOTS, Hot::EMPTY);
            }
            let slot = hot_slot(bytes);
            let hot = &self.hot[slot];
            if usize::from(hot.len) == bytes.len() && hot.bytes[..bytes.len()] == *bytes {
                return Some(hot.id);
            }
            Some(slot)
        } else {
            None
        };
        let id = self.key_id_slow(s)?;
        if let Some(slot) = slot {
            let mut hot = Hot {
                id,
                len: bytes.len() as u8,
                bytes: [0; HOT_LEN],
            };
            hot.bytes[..bytes.len()].copy_from_slice(bytes);
            self.hot[slot] = hot;
        }
        Some(id)
    }

    fn key_id_slow(&mut self, s: &str) -> Option<u32> {
        if let Some(&id) = self.keys.get(s) {
            return Some(id);
        }
        let id = self.keys.len();
        if id as u64 >= MAX_PAYLOAD {
            return None;
        }
        let id = id as u32;
        self.keys.insert(s.into(), id);
        self.ascii &= s.is_ascii();
        self.key_text.push_str(s);
        self.key_lengths.push(utf16_len(s) as u32);
        Some(id)
    }

    fn static_key(&mut self, s: &'static str) -> Result<u32> {
        if self.statics.is_empty() {
            self.statics.resize(STATIC_SLOTS, (0, 0, 0));
        }
        let address = s.as_ptr() as usize;
        let slot = (address ^ (address >> 7) ^ s.len()) % STATIC_SLOTS;
        let (at, len, id) = self.statics[slot];
        if at == address && len == s.len() && at != 0 {
            return Ok(id);
        }
        let id = self
            .key_id(s)
            .ok_or_else(|| Unsupported("key table full".into()))?;
        self.statics[slot] = (address, s.len(), id);
        Ok(id)
    }

    /// Closes the object whose placeholder is at `at` and whose keys start at `keys`.
    fn close_object(&mut self, at: usize, keys: usize) -> Result<()> {
        let shape = match self.shapes.get(&self.open_keys[keys..]) {
            Some(&shape) => shape,
            None => {
                let shape = self.shapes.len() as u64;
                if shape >= MAX_PAYLOAD {
                    return unsupported("shape table full");
                }
                let shape = shape as u32;
                let ids: Box<[u32]> = self.open_keys[keys..].into();
                self.shape_defs.push(ids.len() as u32);
                self.shape_defs.extend_from_slice(&ids);
                self.new_shapes += 1;
                self.shapes.insert(ids, shape);
                shape
            }
        };
        self.ops[at] = TAG_OBJECT | (shape << 3);
        self.open_keys.truncate(keys);
        Ok(())
    }

    fn header_len(&self) -> usize {
        4 + self.key_lengths.len() + self.shape_defs.len()
    }

    /// Finishes the batch: its operations assembled in this tape (see [`Tape::take_words`])
    /// and its text, ASCII or not.
    pub fn finish(&mut self) -> (String, bool) {
        let total = self.header_len() + self.ops.len();
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        pending.resize(total, 0);
        self.write_batch(&mut pending);
        self.pending = pending;
        // The text leaves in a spare buffer (see [`spare_text`]): a buffer of a fresh
        // allocation per batch would fault in new pages each time.
        let mut text = spare_text();
        if self.key_text.is_empty() {
            std::mem::swap(&mut text, &mut self.text);
        } else {
            text.push_str(&self.key_text);
            text.push_str(&self.text);
        }
        (text, self.ascii)
    }

    /// Hands the finished batch's words to `write` when they fit in `room` words (then
    /// forgets them), else only their count (kept for [`Tape::copy_pending`]).
    pub fn take_words(&mut self, room: usize, write: impl FnOnce(&[u32])) {
        if self.pending.len() <= room {
            write(&self.pending);
            self.pending.clear();
        } else {
            write(&[self.pending.len() as u32]);
        }
    }

    fn write_batch(&self, out: &mut [u32]) {
        let total = self.header_len() + self.ops.len();
        out[0] = total as u32;
        out[1] = u32::from(self.reset) | (self.values << 1);
        out[2] = self.key_lengths.len() as u32;
        let mut at = 3;
        out[at..at + self.key_lengths.len()].copy_from_slice(&self.key_lengths);
        at += self.key_lengths.len();
        out[at] = self.new_shapes;
        at += 1;
        out[at..at + self.shape_defs.len()].copy_from_slice(&self.shape_defs);
        at += self.shape_defs.len();
        out[at..total].copy_from_slice(&self.ops);
    }

    /// Copies the batch [`Tape::finish`] could not fit into `out`; false if `out` is still too
    /// short (or there is none).
    pub fn copy_pending(&mut self, room: usize, write: impl FnOnce(&[u32])) -> bool {
        if self.pending.is_empty() || room < self.pending.len() {
            return false;
        }
        write(&self.pending);
        self.pending.clear();
        true
    }

    fn f64_op(&mut self, value: f64) {
        if value.is_finite() {
            let bytes = value.to_ne_bytes();
            let (low, high) = bytes.split_at(4);
            let word = |b: &[u8]| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            self.ops.push(TAG_F64);
            self.ops.push(word(low));
            self.ops.push(word(high));
        } else {
            self.ops.push(TAG_CONST);
        }
    }

    fn u64_op(&mut self, value: u64) {
        if value <= MAX_PAYLOAD {
            self.ops.push(TAG_INT | ((value as u32) << 3));
        } else {
            // The double nearest the integer: what `JSON.parse` makes of its digits.
            self.f64_op(value as f64);
        }
    }

    /// A 128-bit integer: as `u64` when it fits, else as the double `JSON.parse` reads.
    fn wide_op(&mut self, exact: Option<u64>, approximate: f64) {
        match exact {
            Some(v) => self.u64_op(v),
            None => self.f64_op(approximate),
        }
    }

    fn i64_op(&mut self, value: i64) {
        if value >= 0 {
            self.u64_op(value as u64);
        } else {
            self.f64_op(value as f64);
        }
    }
}

struct Writer<'a> {
    tape: &'a mut Tape,
}

/// An array or object being written.
struct Compound<'a> {
    tape: &'a mut Tape,
    /// The placeholder operation of the array or object.
    at: usize,
    /// Elements written (arrays).
    count: u32,
    /// Where this object's keys start in `open_keys`.
    keys: usize,
    /// A variant's wrapping object (`{variant: …}`): its placeholder and keys' start.
    outer: Option<(usize, usize)>,
}

impl<'a> Compound<'a> {
    fn array(tape: &'a mut Tape, outer: Option<(usize, usize)>) -> Self {
        let at = tape.ops.len();
        tape.ops.push(TAG_ARRAY);
        let keys = tape.open_keys.len();
        Compound {
            tape,
            at,
            count: 0,
            keys,
            outer,
        }
    }

    fn object(tape: &'a mut Tape, outer: Option<(usize, usize)>) -> Self {
        let at = tape.ops.len();
        tape.ops.push(TAG_OBJECT);
        let keys = tape.open_keys.len();
        Compound {
            tape,
            at,
            count: 0,
            keys,
            outer,
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.count += 1;
        value.serialize(Writer {
            tape: &mut *self.tape,
        })
    }

    fn end_array(self) -> Result<()> {
        if u64::from(self.count) > MAX_PAYLOAD {
            return unsupported("array too long");
        }
        self.tape.ops[self.at] = TAG_ARRAY | (self.count << 3);
        Self::end_outer(self.tape, self.outer)
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        let id = self.tape.static_key(key)?;
        self.tape.open_keys.push(id);
        value.serialize(Writer {
            tape: &mut *self.tape,
        })
    }

    fn end_object(self) -> Result<()> {
        self.tape.close_object(self.at, self.keys)?;
        Self::end_outer(self.tape, self.outer)
    }

    fn end_outer(tape: &mut Tape, outer: Option<(usize, usize)>) -> Result<()> {
        match outer {
            Some((at, keys)) => tape.close_object(at, keys),
            None => Ok(()),
        }
    }
}

impl Writer<'_> {
    /// Opens `{variant: …}`: its placeholder and key.
    fn open_variant(&mut self, variant: &'static str) -> Result<(usize, usize)> {
        let at = self.tape.ops.len();
        self.tape.ops.push(TAG_OBJECT);
        let keys = self.tape.open_keys.len();
        let id = self.tape.static_key(variant)?;
        self.tape.open_keys.push(id);
        Ok((at, keys))
    }
}

/// Serializer methods for narrow integers, each writing its value as the wide one.
macro_rules! widen {
    ($($method:ident($narrow:ty) => $wide:ident($to:ty)),+ $(,)?) => {
        $(
            fn $method(self, v: $narrow) -> Result<()> {
                self.$wide(<$to>::from(v))
            }
        )+
    };
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<()> {
        self.tape
            .ops
            .push(TAG_CONST | (if v { 2 << 3 } else { 1 << 3 }));
        Ok(())
    }
    widen! {
        serialize_i8(i8) => serialize_i64(i64),
        serialize_i16(i16) => serialize_i64(i64),
        serialize_i32(i32) => serialize_i64(i64),
        serialize_u8(u8) => serialize_u64(u64),
        serialize_u16(u16) => serialize_u64(u64),
        serialize_u32(u32) => serialize_u64(u64),
    }
    fn serialize_i64(self, v: i64) -> Result<()> {
        self.tape.i64_op(v);
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<()> {
        self.tape.u64_op(v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<()> {
        self.tape.wide_op(u64::try_from(v).ok(), v as f64);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<()> {
        self.tape.wide_op(u64::try_from(v).ok(), v as f64);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<()> {
        if !v.is_finite() {
            self.tape.ops.push(TAG_CONST);
            return Ok(());
        }
        // serde_json writes an f32's shortest digits; the double `JSON.parse` reads from them.
        let text = serde_json::to_string(&v).map_err(|e| Unsupported(e.to_string()))?;
        let value: f64 = text.parse().map_err(|_| Unsupported(text.clone()))?;
        self.tape.f64_op(value);
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<()> {
        self.tape.f64_op(v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<()> {
        self.tape.value_str(v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<()> {
        self.tape.value_str(v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<()> {
        // serde_json writes bytes as an array of numbers.
        if v.len() as u64 > MAX_PAYLOAD {
            return unsupported("bytes too long");
        }
        self.tape.ops.push(TAG_ARRAY | ((v.len() as u32) << 3));
        for &byte in v {
            self.tape.ops.push(TAG_INT | (u32::from(byte) << 3));
        }
        Ok(())
    }
    fn serialize_none(self) -> Result<()> {
        self.tape.ops.push(TAG_CONST);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<()> {
        self.tape.ops.push(TAG_CONST);
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<()> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<()> {
        let (at, keys) = self.open_variant(variant)?;
        value.serialize(Writer {
            tape: &mut *self.tape,
        })?;
        self.tape.close_object(at, keys)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>> {
        Ok(Compound::array(self.tape, None))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound<'a>> {
        Ok(Compound::array(self.tape, None))
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'a>> {
        Ok(Compound::array(self.tape, None))
    }
    fn serialize_tuple_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>> {
        let outer = self.open_variant(variant)?;
        Ok(Compound::array(self.tape, Some(outer)))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>> {
        Ok(Compound::object(self.tape, None))
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Compound<'a>> {
        // serde_json's own markers (a raw value, an arbitrary-precision number): JSON text.
        if name.starts_with("$serde_json::") {
            return unsupported("a serde_json private value");
        }
        Ok(Compound::object(self.tape, None))
    }
    fn serialize_struct_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>> {
        let outer = self.open_variant(variant)?;
        Ok(Compound::object(self.tape, Some(outer)))
    }
}

macro_rules! array_traits {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Unsupported;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
                self.element(value)
            }
            fn end(self) -> Result<()> {
                self.end_array()
            }
        }
    )*};
}

array_traits!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

macro_rules! struct_traits {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Unsupported;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<()> {
                self.field(key, value)
            }
            fn end(self) -> Result<()> {
                self.end_object()
            }
        }
    )*};
}

struct_traits!(SerializeStruct, SerializeStructVariant);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        let id = key.serialize(KeyWriter {
            tape: &mut *self.tape,
        })?;
        self.tape.open_keys.push(id);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(Writer {
            tape: &mut *self.tape,
        })
    }
    fn end(self) -> Result<()> {
        self.end_object()
    }
}

/// A map key: a string becomes its key id; anything else (serde_json quotes numbers and
/// booleans) sends the whole output as JSON text.
struct KeyWriter<'a> {
    tape: &'a mut Tape,
}

fn not_a_string_key<T>() -> Result<T> {
    unsupported("a map key that is not a string")
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = u32;
    type Error = Unsupported;
    type SerializeSeq = ser::Impossible<u32, Unsupported>;
    type SerializeTuple = ser::Impossible<u32, Unsupported>;
    type SerializeTupleStruct = ser::Impossible<u32, Unsupported>;
    type SerializeTupleVariant = ser::Impossible<u32, Unsupported>;
    type SerializeMap = ser::Impossible<u32, Unsupported>;
    type SerializeStruct = ser::Impossible<u32, Unsupported>;
    type SerializeStructVariant = ser::Impossible<u32, Unsupported>;

    fn serialize_str(self, v: &str) -> Result<u32> {
        self.tape
            .key_id(v)
            .ok_or_else(|| Unsupported("key table full".into()))
    }
    fn serialize_char(self, v: char) -> Result<u32> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<u32> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<u32> {
        value.serialize(self)
    }
    fn serialize_bool(self, _v: bool) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_i8(self, _v: i8) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_i16(self, _v: i16) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_i32(self, _v: i32) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_i64(self, _v: i64) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_u8(self, _v: u8) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_u16(self, _v: u16) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_u32(self, _v: u32) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_u64(self, _v: u64) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_f32(self, _v: f32) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_f64(self, _v: f64) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_none(self) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_unit(self) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<u32> {
        not_a_string_key()
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        not_a_string_key()
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        not_a_string_key()
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        not_a_string_key()
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        not_a_string_key()
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        not_a_string_key()
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        not_a_string_key()
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        not_a_string_key()
    }
}
