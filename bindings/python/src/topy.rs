//! Rust values to Python objects through serde: structs and maps become dicts (in field
//! order), sequences lists, tuples tuples, a variant with data a one-key dict, and scalars
//! str, int, float, bool, None or bytes — the shapes `pythonize` makes, which this replaced.
//! The difference is speed: the field names of structs, the same few `&'static str`s on every
//! output, become Python strings once and are reused from a [`KeyCache`], instead of a new
//! string (allocated, hashed, freed) per field per output.

use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use serde::Serialize;
use serde::ser;

/// Python strings for struct field names, looked up by the name's address (a field name is a
/// `&'static str`, so its address and length identify it). Direct-mapped: a slot holds one
/// name, and a name whose slot is taken by another is simply made anew.
pub struct KeyCache {
    slots: Vec<Option<(usize, usize, Py<PyString>)>>,
}

const SLOTS: usize = 512;

impl Default for KeyCache {
    fn default() -> Self {
        KeyCache {
            slots: (0..SLOTS).map(|_| None).collect(),
        }
    }
}

impl KeyCache {
    fn key<'py>(&mut self, py: Python<'py>, name: &'static str) -> Bound<'py, PyString> {
        let address = name.as_ptr() as usize;
        let slot = (address ^ (address >> 9) ^ name.len()) % SLOTS;
        match self.slots.get_mut(slot) {
            Some(Some((at, len, string))) if *at == address && *len == name.len() => {
                string.bind(py).clone()
            }
            Some(entry) => {
                let string = PyString::new(py, name);
                *entry = Some((address, name.len(), string.clone().unbind()));
                string
            }
            None => PyString::new(py, name),
        }
    }
}

/// serde_json's raw-value marker: the name of the struct, and of its one field, that holds a
/// raw JSON text.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// `value` as a Python object.
pub fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    keys: &mut KeyCache,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    value.serialize(ToPy { py, keys }).map_err(|e| e.0)
}

/// A Python error carried through serde.
#[derive(Debug)]
pub struct Error(PyErr);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(crate::errors::internal(format!(
            "an output did not convert: {msg}"
        )))
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Self {
        Error(e)
    }
}

type Result<T> = std::result::Result<T, Error>;

/// serde's four sequence traits for one writer type, all through its `push` and `finish`.
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
                self.push(value)
            }
            fn end(self) -> ::std::result::Result<$ok, Error> {
                self.finish()
            }
        }
    };
}

/// serde's struct and struct-variant traits for one writer type, through its `field` and
/// `finish`.
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
                self.field(key, value)
            }
            fn end(self) -> ::std::result::Result<$ok, Error> {
                self.finish()
            }
        }
    };
}

struct ToPy<'a, 'py> {
    py: Python<'py>,
    keys: &'a mut KeyCache,
}

impl<'py> ToPy<'_, 'py> {
    fn any<T: IntoPyObject<'py>>(self, value: T) -> Result<Bound<'py, PyAny>> {
        Ok(value.into_bound_py_any(self.py)?)
    }

    /// `{variant: value}`.
    fn one_key(
        py: Python<'py>,
        keys: &mut KeyCache,
        variant: &'static str,
        value: Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyAny>> {
        let dict = PyDict::new(py);
        dict.set_item(keys.key(py, variant), value)?;
        Ok(dict.into_any())
    }
}

impl<'a, 'py> ser::Serializer for ToPy<'a, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    type SerializeSeq = Seq<'a, 'py>;
    type SerializeTuple = Seq<'a, 'py>;
    type SerializeTupleStruct = Seq<'a, 'py>;
    type SerializeTupleVariant = Seq<'a, 'py>;
    type SerializeMap = Dict<'a, 'py>;
    type SerializeStruct = Dict<'a, 'py>;
    type SerializeStructVariant = Dict<'a, 'py>;

    fn serialize_bool(self, v: bool) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_i8(self, v: i8) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_i16(self, v: i16) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_i32(self, v: i32) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_i64(self, v: i64) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_i128(self, v: i128) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_u16(self, v: u16) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_u32(self, v: u32) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_u64(self, v: u64) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_u128(self, v: u128) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_f32(self, v: f32) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_f64(self, v: f64) -> Result<Self::Ok> {
        self.any(v)
    }
    fn serialize_char(self, v: char) -> Result<Self::Ok> {
        Ok(PyString::new(self.py, v.encode_utf8(&mut [0; 4])).into_any())
    }
    fn serialize_str(self, v: &str) -> Result<Self::Ok> {
        Ok(PyString::new(self.py, v).into_any())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Self::Ok> {
        Ok(PyBytes::new(self.py, v).into_any())
    }
    fn serialize_none(self) -> Result<Self::Ok> {
        Ok(self.py.None().into_bound(self.py))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Self::Ok> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Self::Ok> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Self::Ok> {
        Ok(self.keys.key(self.py, variant).into_any())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Self::Ok> {
        let py = self.py;
        let inner = value.serialize(ToPy {
            py,
            keys: &mut *self.keys,
        })?;
        ToPy::one_key(py, self.keys, variant, inner)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq<'a, 'py>> {
        Ok(Seq::new(self, len.unwrap_or(0), Shape::List))
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a, 'py>> {
        Ok(Seq::new(self, len, Shape::Tuple))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Seq<'a, 'py>> {
        Ok(Seq::new(self, len, Shape::Tuple))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Seq<'a, 'py>> {
        Ok(Seq::new(self, len, Shape::TupleVariant(variant)))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Dict<'a, 'py>> {
        Ok(Dict::new(self, None))
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Dict<'a, 'py>> {
        let raw = name == RAW_TOKEN;
        Ok(Dict {
            raw,
            ..Dict::new(self, None)
        })
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Dict<'a, 'py>> {
        Ok(Dict::new(self, Some(variant)))
    }
}

/// What a sequence becomes.
enum Shape {
    List,
    Tuple,
    /// `{variant: tuple}`.
    TupleVariant(&'static str),
}

struct Seq<'a, 'py> {
    py: Python<'py>,
    keys: &'a mut KeyCache,
    items: Vec<Bound<'py, PyAny>>,
    shape: Shape,
}

impl<'a, 'py> Seq<'a, 'py> {
    fn new(to: ToPy<'a, 'py>, len: usize, shape: Shape) -> Self {
        Seq {
            py: to.py,
            keys: to.keys,
            items: Vec::with_capacity(len),
            shape,
        }
    }

    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let item = value.serialize(ToPy {
            py: self.py,
            keys: &mut *self.keys,
        })?;
        self.items.push(item);
        Ok(())
    }

    fn finish(self) -> Result<Bound<'py, PyAny>> {
        match self.shape {
            Shape::List => Ok(PyList::new(self.py, self.items)?.into_any()),
            Shape::Tuple => Ok(PyTuple::new(self.py, self.items)?.into_any()),
            Shape::TupleVariant(variant) => {
                let tuple = PyTuple::new(self.py, self.items)?.into_any();
                ToPy::one_key(self.py, self.keys, variant, tuple)
            }
        }
    }
}

seq_traits!(['py] Seq<'_, 'py>, Bound<'py, PyAny>);

/// A dict, filled as the entries come (a struct variant's dict is wrapped in `{variant: …}`).
struct Dict<'a, 'py> {
    py: Python<'py>,
    keys: &'a mut KeyCache,
    dict: Bound<'py, PyDict>,
    key: Option<Bound<'py, PyAny>>,
    variant: Option<&'static str>,
    /// serde_json's raw-value marker (a `meta`, kept as its JSON text, SPEC §2.1): its one
    /// field is JSON text, which becomes what Python's `json.loads` makes of it (integers of
    /// any size exact, keys in order).
    raw: bool,
}

impl<'a, 'py> Dict<'a, 'py> {
    fn new(to: ToPy<'a, 'py>, variant: Option<&'static str>) -> Self {
        Dict {
            py: to.py,
            dict: PyDict::new(to.py),
            keys: to.keys,
            key: None,
            variant,
            raw: false,
        }
    }

    fn field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> Result<()> {
        let value = value.serialize(ToPy {
            py: self.py,
            keys: &mut *self.keys,
        })?;
        self.dict.set_item(self.keys.key(self.py, name), value)?;
        Ok(())
    }

    fn finish(self) -> Result<Bound<'py, PyAny>> {
        if self.raw {
            let text = self.dict.get_item(RAW_TOKEN)?;
            let loads = self.py.import("json")?.getattr("loads")?;
            return Ok(loads.call1((text,))?);
        }
        match self.variant {
            None => Ok(self.dict.into_any()),
            Some(variant) => ToPy::one_key(self.py, self.keys, variant, self.dict.into_any()),
        }
    }
}

impl<'py> ser::SerializeMap for Dict<'_, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.key = Some(key.serialize(ToPy {
            py: self.py,
            keys: &mut *self.keys,
        })?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let Some(key) = self.key.take() else {
            return Err(ser::Error::custom("a map value came before its key"));
        };
        let value = value.serialize(ToPy {
            py: self.py,
            keys: &mut *self.keys,
        })?;
        self.dict.set_item(key, value)?;
        Ok(())
    }
    fn end(self) -> Result<Self::Ok> {
        self.finish()
    }
}

struct_traits!(['py] Dict<'_, 'py>, Bound<'py, PyAny>);
