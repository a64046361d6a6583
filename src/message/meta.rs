//! `meta` (SPEC §2.1): host and codec data, kept as its JSON text.
//!
//! The core stores, hashes and returns `meta` and never reads it, so it keeps the text, not a
//! tree: an integer beyond 64 bits (`18446744073709551616`) and the host's key order come back
//! exactly, and a message that carries `meta` costs one string, not a map of values.
//!
//! **The text** is the object as serde_json writes it compactly — no whitespace, strings
//! escaped as serde_json escapes them, integers as their digits (any size), other numbers as
//! serde_json writes the `f64` they read as — with the keys in the order they came (a repeated
//! key kept as it came). Every door produces the same text for the same object: a line read
//! straight from JSON text (serde_json's raw-value protocol gives the object's own text) and a
//! value that reached `meta` through serde's buffering of an internally tagged enum (the
//! driver's input lines, a message's `role`), as events.
//!
//! **Integers beyond 64 bits through buffering.** serde buffers the fields of an internally
//! tagged enum (`Message`, the driver's `Input`) before it knows the variant, and its buffer
//! reads a number as `u64`, `i64` or `f64`: an integer beyond 64 bits would be rounded there.
//! [`protect_big_integers`] rewrites such an integer in the JSON text, before it is read, as
//! serde_json's raw-value marker object (`{"$serde_json::private::RawValue":"<digits>"}`): the
//! buffer keeps that as a string, `meta` writes the digits back, and a `serde_json::Value`
//! reads the marker as the number it always read (serde_json parses it). The driver and the
//! stores read messages through [`from_json_exact`].
//!
//! **The hash** (SPEC §7.1): `meta` enters the canonical form as the object it is, keys sorted
//! (recursively, a repeated key's last value kept), with scalars as serde_json writes them:
//! exactly the canonical text of the `serde_json::Map` that `meta` was before this change, so a
//! commit stored before it hashes the same when it is re-sent. One case differs: an integer
//! beyond 64 bits is written as its digits where before it was rounded to an `f64` on reading
//! (so two different integers could hash the same). A commit stored before this change holds
//! that rounded float in its text, and so still hashes as it did; only a commit whose input
//! had such an integer and that is re-sent from the host's original text, not from the store,
//! hashes differently — and then the store refuses it as another payload (§7.1), which fails
//! closed rather than accepting two different facts as one.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::json_string::write_str;

/// serde_json's raw-value marker: the name of the struct (and of its one field) through which
/// a raw JSON text is written and read.
pub(crate) const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// Host and codec data on a message or an assistant block (SPEC §2.1): a JSON object the core
/// stores, hashes with the commit and returns exactly, and never reads. Absent when empty, so a
/// message without it serializes (and hashes) exactly as before `meta` existed.
///
/// Codecs keep in it what they must send back and has no field of its own (an OpenAI Responses
/// reasoning item's id and encrypted content, a function-call item id); hosts keep their own
/// (a timestamp, a cost, a trace id).
///
/// It is kept as its JSON text ([`as_json`](Meta::as_json)), in the host's key order, integers
/// of any size exact (see the module docs for the text and for how it is hashed). An empty
/// `Meta` holds nothing: one word, no allocation. Build it from JSON text with
/// [`from_json`](Meta::from_json), from a `serde_json::Map`, by collecting pairs, or with
/// [`insert`](Meta::insert); read it with [`get`](Meta::get) or [`as_map`](Meta::as_map) (a
/// `serde_json` view, parsed once on first use: an integer beyond 64 bits reads there as the
/// nearest `f64`, and keys in sorted order).
#[derive(Clone, Default)]
pub struct Meta(Option<Box<MetaText>>);

/// A non-empty `meta`: its text, and the map view parsed from it on first use.
struct MetaText {
    text: Box<str>,
    map: OnceLock<Map<String, Value>>,
}

impl Clone for MetaText {
    fn clone(&self) -> Self {
        MetaText {
            text: self.text.clone(),
            map: OnceLock::new(),
        }
    }
}

/// Why a text is not a `meta`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MetaError(String);

impl Meta {
    /// An empty `meta` (absent on the wire).
    pub const fn new() -> Self {
        Meta(None)
    }

    /// A `meta` from the JSON text of an object, kept exactly (key order, integers of any
    /// size; whitespace is not kept). An empty object is an empty `meta`. Anything else is an
    /// error that says what it got.
    pub fn from_json(text: &str) -> Result<Meta, MetaError> {
        normalize_raw(text).map_err(|e| MetaError(e.to_string()))
    }

    /// The JSON text of the object (compact, keys in the order they came), `None` when empty.
    pub fn as_json(&self) -> Option<&str> {
        self.0.as_deref().map(|meta| &*meta.text)
    }

    /// Whether it holds no key (and is left out of the serialized message).
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// How many distinct keys it holds.
    pub fn len(&self) -> usize {
        self.as_map().map_or(0, Map::len)
    }

    /// The value of `key`, if any (the map view: see the type's docs).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_map().and_then(|map| map.get(key))
    }

    /// Sets `key` (in place if it is there; a new key goes where it sorts when the keys are
    /// in sorted order — so a `meta` built by inserting is written as the sorted map it was
    /// before `meta` kept its text — and last otherwise); returns the value it replaced. The
    /// other keys keep their text and order.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) -> Option<Value> {
        let key = key.into();
        let previous = self.get(&key).cloned();
        let value_text = serde_json::to_string(&value).unwrap_or_else(|_| "null".to_owned());
        let entries = self.entries();
        let sorted = entries.windows(2).all(|pair| pair[0].0 < pair[1].0);
        let mut replaced = false;
        let mut out = Vec::new();
        out.push(b'{');
        for (name, raw) in entries {
            if !replaced && previous.is_none() && sorted && name > key {
                replaced = true;
                push_entry(&mut out, &key, &value_text);
            }
            if name == key {
                if replaced {
                    continue;
                }
                replaced = true;
                push_entry(&mut out, &name, &value_text);
            } else {
                push_entry(&mut out, &name, raw.get());
            }
        }
        if !replaced {
            push_entry(&mut out, &key, &value_text);
        }
        out.push(b'}');
        *self = Meta::from_text(out);
        previous
    }

    /// Removes `key` (every occurrence); returns its value. The other keys keep their text and
    /// order.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let removed = self.get(key).cloned();
        if removed.is_some() {
            let mut out = vec![b'{'];
            for (name, raw) in self.entries().into_iter().filter(|(name, _)| name != key) {
                push_entry(&mut out, &name, raw.get());
            }
            out.push(b'}');
            *self = Meta::from_text(out);
        }
        removed
    }

    /// The keys and values, in key order (the map view).
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.as_map().into_iter().flat_map(|map| map.iter())
    }

    /// The object as a `serde_json` map (the map view), when it holds a key.
    pub fn as_map(&self) -> Option<&Map<String, Value>> {
        self.0.as_deref().map(|meta| {
            meta.map.get_or_init(|| {
                serde_json::from_str(&meta.text).unwrap_or_else(|error| {
                    debug_assert!(false, "meta text does not read back: {error}");
                    Map::new()
                })
            })
        })
    }

    /// The object as a `serde_json` map (empty when absent).
    pub fn into_map(self) -> Map<String, Value> {
        self.as_map().cloned().unwrap_or_default()
    }

    /// The entries in order, each with its value's text (empty when absent).
    fn entries(&self) -> Vec<(String, Box<serde_json::value::RawValue>)> {
        self.as_json()
            .and_then(|text| serde_json::from_str::<OrderedEntries>(text).ok())
            .map(|entries| entries.0)
            .unwrap_or_default()
    }

    /// Wraps normalized text (`{}` is empty).
    fn from_text(text: Vec<u8>) -> Meta {
        if text == b"{}" {
            return Meta(None);
        }
        // Only JSON text (ASCII punctuation, serde_json's output, escaped strings) was written.
        match String::from_utf8(text) {
            Ok(text) => Meta(Some(Box::new(MetaText {
                text: text.into_boxed_str(),
                map: OnceLock::new(),
            }))),
            Err(error) => {
                debug_assert!(false, "meta text was not UTF-8: {error}");
                Meta(None)
            }
        }
    }
}

fn push_entry(out: &mut Vec<u8>, key: &str, value: &str) {
    if out.len() > 1 {
        out.push(b',');
    }
    write_str(out, key);
    out.push(b':');
    out.extend_from_slice(value.as_bytes());
}

/// An object's entries in order, values as their text.
struct OrderedEntries(Vec<(String, Box<serde_json::value::RawValue>)>);

impl<'de> Deserialize<'de> for OrderedEntries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = OrderedEntries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedEntries, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    entries.push((key, map.next_value()?));
                }
                Ok(OrderedEntries(entries))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

impl PartialEq for Meta {
    fn eq(&self, other: &Self) -> bool {
        self.as_json() == other.as_json()
    }
}

impl fmt::Debug for Meta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Meta")
            .field(&self.as_json().unwrap_or("{}"))
            .finish()
    }
}

impl From<Map<String, Value>> for Meta {
    fn from(map: Map<String, Value>) -> Self {
        if map.is_empty() {
            return Meta(None);
        }
        let mut out = Vec::new();
        // A map of JSON values with string keys always serializes.
        if serde_json::to_writer(&mut out, &map).is_err() {
            debug_assert!(false, "a JSON map failed to serialize");
            return Meta(None);
        }
        let meta = Meta::from_text(out);
        if let Some(text) = meta.0.as_deref() {
            let _ = text.map.set(map);
        }
        meta
    }
}

impl FromIterator<(String, Value)> for Meta {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(pairs: I) -> Self {
        Meta::from(pairs.into_iter().collect::<Map<String, Value>>())
    }
}

impl Serialize for Meta {
    /// Through serde_json's raw-value protocol: serde_json writes the text as it is, and
    /// `serde_json::to_value` parses it; the canonical writer (the hash) sorts it.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        match self.as_json() {
            Some(text) => {
                let mut raw = serializer.serialize_struct(RAW_TOKEN, 1)?;
                raw.serialize_field(RAW_TOKEN, text)?;
                raw.end()
            }
            None => Map::new().serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Meta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // serde_json hands the object's own text to `visit_map` under the marker key; other
        // deserializers (serde's buffer, a `Value`) call `visit_newtype_struct` and give the
        // object as events.
        deserializer.deserialize_newtype_struct(RAW_TOKEN, MetaVisitor)
    }
}

struct MetaVisitor;

impl<'de> Visitor<'de> for MetaVisitor {
    type Value = Meta;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<Meta, D::Error> {
        let mut out = Vec::new();
        deserializer.deserialize_any(TopObject { out: &mut out })?;
        Ok(Meta::from_text(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Meta, A::Error> {
        let mut out = Vec::new();
        TopObject { out: &mut out }.visit_map(map)?;
        Ok(Meta::from_text(out))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Meta, E> {
        Err(not_an_object("null"))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Meta, E> {
        Err(not_an_object("a boolean"))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Meta, E> {
        Err(not_an_object("a number"))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Meta, E> {
        Err(not_an_object("a number"))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Meta, E> {
        Err(not_an_object("a number"))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Meta, E> {
        Err(not_an_object("a string"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Meta, A::Error> {
        Err(not_an_object("an array"))
    }
}

fn not_an_object<E: de::Error>(got: &str) -> E {
    E::custom(format!("`meta` must be a JSON object, got {got}"))
}

/// The text of a raw JSON object (as serde_json's raw-value protocol gives it), written as
/// `meta` keeps it.
fn normalize_raw(raw: &str) -> Result<Meta, serde_json::Error> {
    let text = protect_big_integers(raw);
    let mut out = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_str(&text);
    de::Deserializer::deserialize_any(&mut deserializer, TopObject { out: &mut out })?;
    deserializer.end()?;
    Ok(Meta::from_text(out))
}

/// The object at the top of a `meta`: anything else is refused, naming what it is.
struct TopObject<'o> {
    out: &'o mut Vec<u8>,
}

impl<'de> Visitor<'de> for TopObject<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some(first) = map.next_key::<Cow<'de, str>>()? else {
            self.out.extend_from_slice(b"{}");
            return Ok(());
        };
        if first == RAW_TOKEN {
            // serde_json's raw text of the object.
            let raw: Cow<'de, str> = map.next_value()?;
            let meta = normalize_raw(&raw).map_err(de::Error::custom)?;
            self.out
                .extend_from_slice(meta.as_json().unwrap_or("{}").as_bytes());
            return Ok(());
        }
        JsonText {
            out: self.out,
            sort: false,
        }
        .object(Some(first), map)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(not_an_object("null"))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(not_an_object("a boolean"))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(not_an_object("a number"))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(not_an_object("a number"))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(not_an_object("a number"))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(not_an_object("a string"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(not_an_object("an array"))
    }
}

/// Writes the JSON value it is given as events, compactly: in the order the keys came, or
/// (`sort`) keys sorted by their bytes with a repeated key's last value kept (the canonical
/// form, SPEC §7.1). A marker object (`{RAW_TOKEN: "<digits>"}`, see [`protect_big_integers`])
/// is written as its number.
struct JsonText<'o> {
    out: &'o mut Vec<u8>,
    sort: bool,
}

impl<'de> DeserializeSeed<'de> for JsonText<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> JsonText<'_> {
    fn object<A: MapAccess<'de>>(
        self,
        first: Option<Cow<'de, str>>,
        mut map: A,
    ) -> Result<(), A::Error> {
        let mut key = first;
        if self.sort {
            let mut entries: Vec<(Cow<'de, str>, Vec<u8>)> = Vec::new();
            while let Some(name) = key {
                let mut value = Vec::new();
                map.next_value_seed(JsonText {
                    out: &mut value,
                    sort: true,
                })?;
                entries.push((name, value));
                key = map.next_key()?;
            }
            // Stable: of a repeated key, the last written ends its run and is the one kept.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            self.out.push(b'{');
            let mut first = true;
            for (i, (name, value)) in entries.iter().enumerate() {
                if entries.get(i + 1).is_some_and(|next| next.0 == *name) {
                    continue;
                }
                if !first {
                    self.out.push(b',');
                }
                first = false;
                write_str(self.out, name);
                self.out.push(b':');
                self.out.extend_from_slice(value);
            }
            self.out.push(b'}');
            return Ok(());
        }
        self.out.push(b'{');
        let mut first = true;
        while let Some(name) = key {
            if !first {
                self.out.push(b',');
            }
            first = false;
            write_str(self.out, &name);
            self.out.push(b':');
            map.next_value_seed(JsonText {
                out: &mut *self.out,
                sort: false,
            })?;
            key = map.next_key()?;
        }
        self.out.push(b'}');
        Ok(())
    }

    fn scalar<T: Serialize, E: de::Error>(self, value: T) -> Result<(), E> {
        serde_json::to_writer(&mut *self.out, &value).map_err(E::custom)
    }
}

impl<'de> Visitor<'de> for JsonText<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.scalar(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.scalar(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.scalar(v)
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<(), E> {
        self.out.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<(), E> {
        self.out.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.scalar(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        write_str(self.out, v);
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.out.push(b'[');
        let mut first = true;
        loop {
            if !first {
                self.out.push(b',');
            }
            let at = self.out.len();
            let more = seq.next_element_seed(JsonText {
                out: &mut *self.out,
                sort: self.sort,
            })?;
            if more.is_none() {
                if !first {
                    // The comma written for an element that was not there.
                    self.out.truncate(at - 1);
                }
                break;
            }
            first = false;
        }
        self.out.push(b']');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let first = map.next_key::<Cow<'de, str>>()?;
        if first.as_deref() == Some(RAW_TOKEN) {
            let digits: Cow<'de, str> = map.next_value()?;
            if !is_integer_token(&digits) {
                return Err(de::Error::custom(format!(
                    "a raw-value marker must hold an integer's digits, got {digits:?}"
                )));
            }
            if map.next_key::<de::IgnoredAny>()?.is_some() {
                return Err(de::Error::custom("a raw-value marker has one key"));
            }
            self.out.extend_from_slice(digits.as_bytes());
            return Ok(());
        }
        self.object(first, map)
    }
}

/// Whether `token` is a JSON integer: an optional `-`, then `0` or digits not starting with `0`.
fn is_integer_token(token: &str) -> bool {
    let digits = token.strip_prefix('-').unwrap_or(token);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
}

/// Appends the canonical form (SPEC §7.1) of a `meta`'s text: keys sorted recursively, a
/// repeated key's last value kept, scalars as serde_json writes them, integers of any size as
/// their digits (see the module docs for why this hashes as before).
pub(crate) fn write_canonical_meta(text: &str, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let text = protect_big_integers(text);
    let mut deserializer = serde_json::Deserializer::from_str(&text);
    de::Deserializer::deserialize_any(&mut deserializer, JsonText { out, sort: true })?;
    deserializer.end()
}

/// `text` with every integer beyond 64 bits (outside strings) written as serde_json's raw-value
/// marker object holding its digits, so that reading the text through serde's buffering keeps
/// the integer exact (see the module docs). Borrowed, untouched, when there is none (the usual
/// case: one pass over the bytes, no copy).
pub fn protect_big_integers(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => at = string_end(bytes, at + 1),
            b'-' | b'0'..=b'9' => {
                let start = at;
                while bytes
                    .get(at)
                    .is_some_and(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                {
                    at += 1;
                }
                let token = text.get(start..at).unwrap_or("");
                if is_integer_token(token)
                    && token.parse::<i64>().is_err()
                    && token.parse::<u64>().is_err()
                {
                    let out = out.get_or_insert_with(|| String::with_capacity(text.len() + 64));
                    out.push_str(text.get(copied..start).unwrap_or(""));
                    out.push_str("{\"");
                    out.push_str(RAW_TOKEN);
                    out.push_str("\":\"");
                    out.push_str(token);
                    out.push_str("\"}");
                    copied = at;
                }
            }
            _ => at += 1,
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(text.get(copied..).unwrap_or(""));
            Cow::Owned(out)
        }
    }
}

/// Where the string whose contents start at `at` ends (just past its closing quote, or the end
/// of the text).
fn string_end(bytes: &[u8], mut at: usize) -> usize {
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => return at + 1,
            b'\\' => at += 2,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// Reads `T` from JSON text keeping every `meta` exact: integers beyond 64 bits survive serde's
/// buffering of internally tagged enums ([`protect_big_integers`]). What the driver and the
/// stores read messages and commits with; anything else reads as `serde_json::from_str` reads
/// it (an integer beyond 64 bits outside `meta` is the `f64` it always was, and an error where
/// a 64-bit integer is expected).
pub fn from_json_exact<T: de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str(&protect_big_integers(text))
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Meta {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Meta".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Map<String, Value> as schemars::JsonSchema>::json_schema(generator)
    }

    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: &str = r#"{"z":18446744073709551616,"a":{"y":1,"b":[-18446744073709551617,1.50,"\u0041"]},"m":null}"#;

    #[test]
    fn text_keeps_big_integers_and_key_order() {
        let meta = Meta::from_json(BIG).unwrap();
        assert_eq!(
            meta.as_json(),
            Some(
                r#"{"z":18446744073709551616,"a":{"y":1,"b":[-18446744073709551617,1.5,"A"]},"m":null}"#
            )
        );
        // Straight from text, and through serde's buffering (an internally tagged enum).
        let direct: Meta = serde_json::from_str(BIG).unwrap();
        assert_eq!(direct, meta);
        #[derive(Deserialize)]
        #[serde(tag = "t")]
        enum Tagged {
            A { meta: Meta },
        }
        let line = format!(r#"{{"meta":{BIG},"t":"A"}}"#);
        let Tagged::A { meta: buffered } = from_json_exact(&line).unwrap();
        assert_eq!(buffered, meta);
        assert_eq!(
            serde_json::to_string(&meta).unwrap(),
            meta.as_json().unwrap()
        );
    }

    #[test]
    fn canonical_form_sorts_and_keeps_integers() {
        let mut out = Vec::new();
        write_canonical_meta(BIG, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":{"b":[-18446744073709551617,1.5,"A"],"y":1},"m":null,"z":18446744073709551616}"#
        );
    }

    #[test]
    fn not_an_object_is_refused() {
        for text in ["[]", "1", "\"x\"", "null", "{\"a\":1e400}", "{\"a\":1} x"] {
            assert!(Meta::from_json(text).is_err(), "{text}");
        }
        assert!(Meta::from_json("{ }").unwrap().is_empty());
        assert!(
            serde_json::from_str::<Meta>("[1]")
                .unwrap_err()
                .to_string()
                .contains("`meta` must be a JSON object")
        );
    }

    #[test]
    fn insert_and_remove_keep_the_other_keys_exact() {
        let mut meta = Meta::from_json(r#"{"z":18446744073709551616,"a":1}"#).unwrap();
        assert_eq!(meta.insert("a", Value::from(2)), Some(Value::from(1)));
        meta.insert("b", Value::from("x"));
        assert_eq!(
            meta.as_json(),
            Some(r#"{"z":18446744073709551616,"a":2,"b":"x"}"#)
        );
        assert_eq!(meta.remove("a"), Some(Value::from(2)));
        assert_eq!(
            meta.as_json(),
            Some(r#"{"z":18446744073709551616,"b":"x"}"#)
        );
        assert_eq!(meta.len(), 2);
        // Keys in sorted order stay sorted: a map built by inserting reads as it always did.
        let mut built = Meta::new();
        for key in ["m", "b", "z", "a"] {
            built.insert(key, Value::from(1));
        }
        assert_eq!(built.as_json(), Some(r#"{"a":1,"b":1,"m":1,"z":1}"#));
        meta.remove("z");
        meta.remove("b");
        assert!(meta.is_empty());
    }

    #[test]
    fn strings_are_left_alone_by_the_protection() {
        let text = r#"{"s":"18446744073709551616 \"99999999999999999999\"","n":-0,"e":1e30}"#;
        assert!(matches!(protect_big_integers(text), Cow::Borrowed(_)));
    }
}
