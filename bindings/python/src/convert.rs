//! JSON values between Rust and Python: `serde_json::Value` ⇄ plain Python objects (`dict`,
//! `list`, `str`, `int`, `float`, `bool`, `None`).
//!
//! Inputs arrive as Python objects and become the driver's JSON shapes; outputs leave as the
//! driver's rendered lines, turned into Python objects by [`line_to_py`].

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// A Python object as a JSON value: `dict` (string keys), `list`/`tuple`, `str`, `int`,
/// `float` (finite), `bool` and `None`; anything else is a `TypeError` naming the path to it.
pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    from_py_at(obj, &mut String::new())
}

fn from_py_at(obj: &Bound<'_, PyAny>, path: &mut String) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // `bool` is a subclass of `int`: test it first.
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(str_of(s)?.into_owned()));
    }
    if obj.cast::<PyInt>().is_ok() {
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        return Err(PyValueError::new_err(format!(
            "{}: the integer {} does not fit in 64 bits",
            where_(path),
            obj.repr()?
        )));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let f = f.value();
        return Number::from_f64(f).map(Value::Number).ok_or_else(|| {
            PyValueError::new_err(format!(
                "{}: {f} is not a JSON number (NaN and infinities are not allowed)",
                where_(path)
            ))
        });
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (key, item) in dict.iter() {
            let Ok(key) = key.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "{}: dict keys must be strings, got {}",
                    where_(path),
                    key.get_type().name()?
                )));
            };
            let key = str_of(key)?.into_owned();
            let len = path.len();
            path.push('.');
            path.push_str(&key);
            let value = from_py_at(&item, path)?;
            path.truncate(len);
            map.insert(key, value);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(list) = obj.cast::<PyList>() {
        return sequence(list.iter(), path);
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        return sequence(tuple.iter(), path);
    }
    Err(PyTypeError::new_err(format!(
        "{}: {} is not a JSON value (use dict, list, str, int, float, bool or None)",
        where_(path),
        obj.get_type().name()?
    )))
}

fn sequence<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    path: &mut String,
) -> PyResult<Value> {
    let mut out = Vec::new();
    for (i, item) in items.enumerate() {
        let len = path.len();
        path.push_str(&format!("[{i}]"));
        out.push(from_py_at(&item, path)?);
        path.truncate(len);
    }
    Ok(Value::Array(out))
}

fn where_(path: &str) -> String {
    if path.is_empty() {
        "the value".to_owned()
    } else {
        format!("at {}", path.trim_start_matches('.'))
    }
}

/// JSON text (a rendered driver line, our own) as a Python object, in one pass: the dicts keep
/// the order in which the driver writes their keys (`"type"` first).
pub fn line_to_py<'py>(py: Python<'py>, line: &str) -> PyResult<Bound<'py, PyAny>> {
    let failed = std::cell::RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(line);
    let result = serde::de::DeserializeSeed::deserialize(
        Builder {
            py,
            failed: &failed,
        },
        &mut de,
    )
    .and_then(|value| de.end().map(|()| value));
    match result {
        Ok(value) => Ok(value),
        Err(e) => Err(failed.into_inner().unwrap_or_else(|| {
            crate::errors::internal(format!("runcore wrote a line that is not JSON: {e}"))
        })),
    }
}

/// Any serializable core value as a Python object (keys in the core's field order).
pub fn serde_to_py<'py, T: serde::Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| crate::errors::internal(format!("a core value did not serialize: {e}")))?;
    line_to_py(py, &text)
}

/// Builds Python objects straight from JSON tokens. A Python failure (out of memory) is kept
/// in `failed` and surfaces as itself.
#[derive(Clone, Copy)]
struct Builder<'a, 'py> {
    py: Python<'py>,
    failed: &'a std::cell::RefCell<Option<PyErr>>,
}

impl<'py> Builder<'_, 'py> {
    fn check<T, E: serde::de::Error>(&self, result: PyResult<T>) -> Result<T, E> {
        result.map_err(|e| {
            *self.failed.borrow_mut() = Some(e);
            E::custom("a Python object could not be built")
        })
    }
}

impl<'de, 'py> serde::de::DeserializeSeed<'de> for Builder<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'py> serde::de::Visitor<'de> for Builder<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.py.None().into_bound(self.py))
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(PyBool::new(self.py, v).to_owned().into_any())
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into_pyobject(self.py)
            .map_err(|e| E::custom(e))?
            .into_any())
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into_pyobject(self.py)
            .map_err(|e| E::custom(e))?
            .into_any())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(PyFloat::new(self.py, v).into_any())
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(PyString::new(self.py, v).into_any())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let list = PyList::empty(self.py);
        while let Some(item) = seq.next_element_seed(self)? {
            self.check(list.append(item))?;
        }
        Ok(list.into_any())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let dict = PyDict::new(self.py);
        while let Some(key) = map.next_key_seed(Key(self.py))? {
            let value = map.next_value_seed(self)?;
            self.check(dict.set_item(key, value))?;
        }
        Ok(dict.into_any())
    }
}

/// An object key, straight to a Python `str` (no owned Rust copy in between).
#[derive(Clone, Copy)]
struct Key<'py>(Python<'py>);

impl<'de, 'py> serde::de::DeserializeSeed<'de> for Key<'py> {
    type Value = Bound<'py, PyString>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, 'py> serde::de::Visitor<'de> for Key<'py> {
    type Value = Bound<'py, PyString>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(PyString::new(self.0, v))
    }
}

/// A Python `str` as Rust text: a lone surrogate (not valid Unicode, which Python strings may
/// hold) is refused with `InvalidJsonError`, the error the driver gives a line holding one,
/// never pyo3's `UnicodeEncodeError` (`runcore::limits`: strings are valid Unicode).
pub fn str_of<'a>(s: &'a Bound<'_, PyString>) -> PyResult<std::borrow::Cow<'a, str>> {
    s.to_cow().map_err(|error| {
        let py = s.py();
        if !error.is_instance_of::<pyo3::exceptions::PyUnicodeEncodeError>(py) {
            return error;
        }
        let at = error
            .value(py)
            .getattr("start")
            .and_then(|start| start.extract::<usize>())
            .map_or_else(|_| String::new(), |start| format!(" at index {start}"));
        crate::errors::invalid_json(format!(
            "not a valid input line: a string holds a lone surrogate{at}, which is not valid \
             Unicode (the driver refuses it)"
        ))
    })
}

/// A `str` argument read by [`str_of`]: every method's string arguments are this type (or a
/// dict, list or line read by [`from_py`], which reads its strings the same way), so a lone
/// surrogate is `InvalidJsonError` from every method, the agent unchanged.
pub struct Text(String);

impl Text {
    /// The text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text(text.to_owned())
    }
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl FromPyObject<'_, '_> for Text {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        let s = obj.cast::<PyString>()?;
        Ok(Text(str_of(&s)?.into_owned()))
    }
}
