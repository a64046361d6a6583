//! Canonical JSON: the text the contract's hashes read (SPEC §7.1): object keys sorted by
//! their UTF-8 bytes, no whitespace, scalars and escapes exactly as serde_json writes them, so
//! two values that differ only in key order give the same bytes.
//!
//! It is written straight from a value's `Serialize` impl (no `serde_json::Value` tree): every
//! commit's payload hash and every transcript digest goes through here.

use std::borrow::Cow;

use crate::json_string::write_str;
use serde::Serialize;
use serde::ser::{self, Error as _};
use serde_json::{Error, Value};

/// Writes `value` as JSON with every object's keys sorted, no whitespace. Two values that
/// differ only in key order give the same text.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // Only serde_json's own output and ASCII punctuation were written: valid UTF-8.
    String::from_utf8(out).unwrap_or_else(|error| {
        debug_assert!(false, "canonical JSON was not UTF-8: {error}");
        String::from_utf8_lossy(error.as_bytes()).into_owned()
    })
}

/// Writes `value` with object keys sorted by their UTF-8 bytes (whatever order the map keeps
/// them in: another crate in the build may turn on serde_json's `preserve_order`), scalars
/// and keys as serde_json writes them, no whitespace.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // Already sorted when the map is a BTreeMap; a sorted slice sorts in one pass.
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(key, out);
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

/// A string, number, boolean or null, as serde_json writes it (escapes included).
fn write_scalar<T: serde::Serialize + ?Sized>(scalar: &T, out: &mut Vec<u8>) {
    // Writing a scalar into memory cannot fail; should it ever, the hash changes, and the
    // store's own check of the payload hash says so.
    let _ = serde_json::to_writer(&mut *out, scalar);
}

/// Canonical JSON of any serializable value, written straight from its `Serialize` impl: the
/// same text as [`canonical_json`] of `serde_json::to_value(value)`, without building the
/// `Value` tree (the payload hash of every commit goes through here).
///
/// As with `to_value`: map keys must be strings (or integers, booleans and unit variants, which
/// become strings); a repeated key keeps its last value; an `f32` is written as the `f64` it
/// widens to; integers beyond 64 bits are an error.
pub(crate) fn canonical_json_of<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    // Only serde_json's own output, escaped UTF-8 text and ASCII punctuation were written.
    String::from_utf8(canonical_json_bytes(value)?)
        .map_err(|_| Error::custom("canonical JSON was not UTF-8"))
}

/// [`canonical_json_of`] as bytes (what a hash reads; no UTF-8 check).
pub(crate) fn canonical_json_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    write_canonical_json(value, &mut out)?;
    Ok(out)
}

/// Appends [`canonical_json_of`] to `out`. A caller that writes many values can reuse one
/// buffer: once it has grown to fit, writing allocates next to nothing.
pub(crate) fn write_canonical_json<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let mut writer = Writer {
        out: std::mem::take(out),
        entries: Vec::with_capacity(16),
    };
    let result = value.serialize(Canonical { w: &mut writer });
    *out = writer.out;
    result
}

/// The text being written, and the entries of the objects being written, which every object
/// shares (so that a commit is written with a handful of allocations, not several per object).
struct Writer {
    out: Vec<u8>,
    /// The entries of the objects being written, innermost last: each entry's key and where
    /// the entry (`"key":value`, no comma) lies in `out`.
    entries: Vec<(Cow<'static, str>, usize, usize)>,
}

/// serde's four sequence traits for one writer type, all through its `element` and `close`.
macro_rules! seq_traits {
    ([$($generics:tt)*] $ty:ty, $ok:ty) => {
        seq_traits!(@one [$($generics)*] $ty, $ok, SerializeSeq, serialize_element);
        seq_traits!(@one [$($generics)*] $ty, $ok, SerializeTuple, serialize_element);
        seq_traits!(@one [$($generics)*] $ty, $ok, SerializeTupleStruct, serialize_field);
        seq_traits!(@one [$($generics)*] $ty, $ok, SerializeTupleVariant, serialize_field);
    };
    (@one [$($generics:tt)*] $ty:ty, $ok:ty, $trait:ident, $method:ident) => {
        impl<$($generics)*> ser::$trait for $ty {
            type Ok = $ok;
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(
                &mut self,
                value: &T,
            ) -> ::std::result::Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> ::std::result::Result<$ok, Error> {
                self.close()
            }
        }
    };
}

/// serde's struct and struct-variant traits for one writer type, through its `struct_field` and
/// `close`.
macro_rules! struct_traits {
    ([$($generics:tt)*] $ty:ty, $ok:ty) => {
        struct_traits!(@one [$($generics)*] $ty, $ok, SerializeStruct);
        struct_traits!(@one [$($generics)*] $ty, $ok, SerializeStructVariant);
    };
    (@one [$($generics:tt)*] $ty:ty, $ok:ty, $trait:ident) => {
        impl<$($generics)*> ser::$trait for $ty {
            type Ok = $ok;
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> ::std::result::Result<(), Error> {
                self.struct_field(key, value)
            }
            fn end(self) -> ::std::result::Result<$ok, Error> {
                self.close()
            }
        }
    };
}

/// Writes one value canonically.
struct Canonical<'a> {
    w: &'a mut Writer,
}

impl Canonical<'_> {
    fn scalar<T: Serialize + ?Sized>(self, scalar: &T) -> Result<(), Error> {
        serde_json::to_writer(&mut self.w.out, scalar)
    }
}

impl<'a> ser::Serializer for Canonical<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        match i64::try_from(v) {
            Ok(v) => self.scalar(&v),
            Err(_) => match u64::try_from(v) {
                Ok(v) => self.scalar(&v),
                Err(_) => Err(Error::custom("number out of range")),
            },
        }
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        match u64::try_from(v) {
            Ok(v) => self.scalar(&v),
            Err(_) => Err(Error::custom("number out of range")),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // `to_value` widens an f32 to f64 first, and so is it written there.
        self.scalar(&f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(&mut self.w.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(&mut self.w.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        write_str(&mut self.w.out, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        // One key: nothing to sort.
        self.w.out.push(b'{');
        write_str(&mut self.w.out, variant);
        self.w.out.push(b':');
        value.serialize(Canonical { w: &mut *self.w })?;
        self.w.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>, Error> {
        self.w.out.push(b'[');
        Ok(Seq {
            w: self.w,
            first: true,
            variant: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Seq<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>, Error> {
        self.w.out.push(b'{');
        write_str(&mut self.w.out, variant);
        self.w.out.extend_from_slice(b":[");
        Ok(Seq {
            w: self.w,
            first: true,
            variant: true,
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Object<'a>, Error> {
        Ok(Object::new(self.w, None))
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Object<'a>, Error> {
        if name == crate::message::RAW_TOKEN {
            return Ok(Object::raw(self.w));
        }
        Ok(Object::new(self.w, None))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Object<'a>, Error> {
        Ok(Object::new(self.w, Some(variant)))
    }
}

/// An array (or a tuple variant's array, inside its one-key object).
struct Seq<'a> {
    w: &'a mut Writer,
    first: bool,
    variant: bool,
}

impl Seq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !self.first {
            self.w.out.push(b',');
        }
        self.first = false;
        value.serialize(Canonical { w: &mut *self.w })
    }

    fn close(self) -> Result<(), Error> {
        self.w.out.push(b']');
        if self.variant {
            self.w.out.push(b'}');
        }
        Ok(())
    }
}

seq_traits!([] Seq<'_>, ());

/// An object, written in place as its entries come; at its end, if its keys did not come in
/// order (or one repeats), its entries are rewritten sorted by key, the last of a repeated key
/// kept. A struct variant's object is wrapped in its one-key object.
struct Object<'a> {
    w: &'a mut Writer,
    variant: bool,
    /// Where the first entry starts in `out` (just after `{`).
    start: usize,
    /// Where this object's entries start in the writer's `entries`.
    base: usize,
    /// Whether the keys so far are strictly increasing.
    in_order: bool,
    key: Option<String>,
    /// serde_json's raw-value marker (a `meta`'s text, SPEC §2.1): its one field is the text,
    /// written in canonical form, with no braces of this object's own.
    raw: bool,
}

impl<'a> Object<'a> {
    fn new(w: &'a mut Writer, variant: Option<&'static str>) -> Self {
        if let Some(variant) = variant {
            w.out.push(b'{');
            write_str(&mut w.out, variant);
            w.out.push(b':');
        }
        w.out.push(b'{');
        Object {
            start: w.out.len(),
            base: w.entries.len(),
            w,
            variant: variant.is_some(),
            in_order: true,
            key: None,
            raw: false,
        }
    }

    /// The marker object of a raw JSON text (nothing written yet).
    fn raw(w: &'a mut Writer) -> Self {
        Object {
            start: w.out.len(),
            base: w.entries.len(),
            w,
            variant: false,
            in_order: true,
            key: None,
            raw: true,
        }
    }

    /// Writes the raw JSON text `value` (a string) in canonical form.
    #[cold]
    fn raw_text<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let quoted = serde_json::to_vec(value)?;
        let text: String = serde_json::from_slice(&quoted)?;
        crate::message::write_canonical_meta(&text, &mut self.w.out)
    }

    fn entry<T: Serialize + ?Sized>(
        &mut self,
        key: Cow<'static, str>,
        value: &T,
    ) -> Result<(), Error> {
        if self.w.entries.len() > self.base {
            if let Some((last, _, _)) = self.w.entries.last() {
                self.in_order &= **last < *key;
            }
            self.w.out.push(b',');
        }
        let start = self.w.out.len();
        write_str(&mut self.w.out, &key);
        self.w.out.push(b':');
        // A nested object pushes its entries after this one's and takes them off at its end.
        value.serialize(Canonical { w: &mut *self.w })?;
        let end = self.w.out.len();
        self.w.entries.push((key, start, end));
        Ok(())
    }

    fn struct_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        if self.raw {
            return self.raw_text(value);
        }
        self.entry(Cow::Borrowed(key), value)
    }

    fn close(self) -> Result<(), Error> {
        if self.raw {
            return Ok(());
        }
        let Writer { out, entries } = &mut *self.w;
        if !self.in_order {
            let mine = &mut entries[self.base..];
            // Stable, so that of a repeated key the last one written ends its run.
            mine.sort_by(|a, b| a.0.cmp(&b.0));
            // The entries are copied behind the text, then written back in order over the
            // original place: what is written back is never longer than the copy's distance
            // from it, so nothing is overwritten before it is read.
            let copy = out.len();
            out.extend_from_within(self.start..copy);
            let mut at = self.start;
            for (i, (key, start, end)) in mine.iter().enumerate() {
                if mine.get(i + 1).is_some_and(|next| next.0 == *key) {
                    continue;
                }
                if at > self.start {
                    out[at] = b',';
                    at += 1;
                }
                let from = copy + (start - self.start);
                let to = copy + (end - self.start);
                out.copy_within(from..to, at);
                at += to - from;
            }
            out.truncate(at);
        }
        entries.truncate(self.base);
        out.push(b'}');
        if self.variant {
            out.push(b'}');
        }
        Ok(())
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key = Some(key.serialize(KeyString)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = self
            .key
            .take()
            .ok_or_else(|| Error::custom("a map value came before its key"))?;
        self.entry(Cow::Owned(key), value)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

struct_traits!([] Object<'_>, ());

/// A map key as the string `to_value` makes of it.
struct KeyString;

fn key_must_be_a_string() -> Error {
    Error::custom("key must be a string")
}

/// A float key is written as its number's text, as `to_value` does; a non-finite one is refused.
fn finite_key<T: Serialize>(finite: bool, v: &T) -> Result<String, Error> {
    if finite {
        serde_json::to_string(v)
    } else {
        Err(Error::custom(
            "float key must be finite (got NaN or +/-inf)",
        ))
    }
}

impl ser::Serializer for KeyString {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = ser::Impossible<String, Error>;
    type SerializeTuple = ser::Impossible<String, Error>;
    type SerializeTupleStruct = ser::Impossible<String, Error>;
    type SerializeTupleVariant = ser::Impossible<String, Error>;
    type SerializeMap = ser::Impossible<String, Error>;
    type SerializeStruct = ser::Impossible<String, Error>;
    type SerializeStructVariant = ser::Impossible<String, Error>;

    fn serialize_bool(self, v: bool) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i8(self, v: i8) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i128(self, v: i128) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u128(self, v: u128) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_f32(self, v: f32) -> Result<String, Error> {
        finite_key(v.is_finite(), &v)
    }
    fn serialize_f64(self, v: f64) -> Result<String, Error> {
        finite_key(v.is_finite(), &v)
    }
    fn serialize_char(self, v: char) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<String, Error> {
        Ok(v.to_owned())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit(self) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String, Error> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<String, Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_ignores_key_order() {
        let a = json!({"b": 1, "a": {"y": [1, {"q": 1, "p": 2}], "x": null}});
        let b = json!({"a": {"x": null, "y": [1, {"p": 2, "q": 1}]}, "b": 1});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":null,"y":[1,{"p":2,"q":1}]},"b":1}"#
        );
    }

    /// What `canonical_json_of` must equal: the canonical text of the value `to_value` makes.
    fn via_value<T: Serialize>(value: &T) -> Result<String, String> {
        serde_json::to_value(value)
            .map(|v| canonical_json(&v))
            .map_err(|e| e.to_string())
    }

    fn direct<T: Serialize>(value: &T) -> Result<String, String> {
        canonical_json_of(value).map_err(|e| e.to_string())
    }

    #[derive(Serialize)]
    enum Shapes {
        Unit,
        Newtype(u8),
        Tuple(i8, String),
        Struct { z: f32, a: Option<char> },
    }

    #[derive(Serialize)]
    struct Flattened {
        b: u32,
        a: u32,
        #[serde(flatten)]
        rest: std::collections::BTreeMap<String, u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
    }

    #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
    enum KeyKind {
        Alpha,
    }

    #[test]
    fn direct_canonical_json_is_the_canonical_json_of_the_value() {
        let mut rest = std::collections::BTreeMap::new();
        rest.insert("a".to_owned(), 7); // repeats a struct field: the last one wins
        rest.insert("c".to_owned(), 3);
        let flattened = Flattened {
            b: 2,
            a: 1,
            rest,
            skipped: None,
        };
        assert_eq!(direct(&flattened), via_value(&flattened));
        assert_eq!(direct(&flattened).unwrap(), r#"{"a":7,"b":2,"c":3}"#);

        let shapes = vec![
            Shapes::Unit,
            Shapes::Newtype(3),
            Shapes::Tuple(-1, "é\u{1}\"".to_owned()),
            Shapes::Struct {
                z: 0.1,
                a: Some('x'),
            },
            Shapes::Struct {
                z: f32::NAN,
                a: None,
            },
        ];
        assert_eq!(direct(&shapes), via_value(&shapes));

        let int_keys: std::collections::BTreeMap<i64, bool> =
            [(-3, true), (10, false), (2, true)].into_iter().collect();
        assert_eq!(direct(&int_keys), via_value(&int_keys));
        let variant_keys: std::collections::BTreeMap<KeyKind, ()> =
            [(KeyKind::Alpha, ())].into_iter().collect();
        assert_eq!(direct(&variant_keys), via_value(&variant_keys));

        let wide = (u128::from(u64::MAX), i128::from(i64::MIN), (), [1u8, 2]);
        assert_eq!(direct(&wide), via_value(&wide));
        assert_eq!(direct(&serde_bytes_like()), via_value(&serde_bytes_like()));

        let float_map = SerializeAsMap(vec![(1.5, 1), (-0.25, 2), (1e300, 3)]);
        assert_eq!(direct(&float_map), via_value(&float_map));
        // What `to_value` refuses, so does the direct writer.
        let nan_key = SerializeAsMap(vec![(f64::NAN, 1)]);
        assert!(direct(&nan_key).is_err());
        assert!(via_value(&nan_key).is_err());
        assert!(direct(&u128::MAX).is_err());
        assert!(via_value(&u128::MAX).is_err());
    }

    /// Bytes through `serialize_bytes`.
    fn serde_bytes_like() -> impl Serialize {
        struct Bytes;
        impl Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(b"\x00\xff")
            }
        }
        Bytes
    }

    /// Pairs serialized as a map.
    struct SerializeAsMap(Vec<(f64, u8)>);

    impl Serialize for SerializeAsMap {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(Some(self.0.len()))?;
            for (k, v) in &self.0 {
                map.serialize_entry(k, v)?;
            }
            map.end()
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::from),
            "[\\x00-\\x1f\"\\\\a-z\\x7f\u{e9}]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::btree_map(
                    "[\\x00-\\x1f\"\\\\a-d\\x7f\u{e9}]{0,4}|\\PC{0,6}",
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn strings_are_escaped_as_serde_json_escapes_them(text in proptest::prelude::any::<String>()) {
            let mut out = Vec::new();
            write_str(&mut out, &text);
            proptest::prop_assert_eq!(out, serde_json::to_vec(&text).unwrap());
        }

        #[test]
        fn any_json_value_writes_directly_as_it_does_through_canonical_json(value in json_value()) {
            proptest::prop_assert_eq!(direct(&value), Ok(canonical_json(&value)));
        }
    }
}
