//! `runcore.providers`: the provider codecs of `runcore-providers` (SPEC §13) for Python.
//!
//! Translation only: `encode` reads the `call_model` output dict and the options dict with the
//! crate's own serde types and returns the crate's `Encoded` as a dict; a decoder wraps the
//! crate's decoder and returns its inputs as the driver's input-line dicts (`agent.handle`
//! takes them as they are). Every rule (what is sent back, stop reasons, failure codes) lives in
//! the crate. The Python modules `runcore.providers.anthropic`, `…openai_chat` and
//! `…openai_responses` name these per API.

use pyo3::prelude::*;

use crate::convert::Text;
use pyo3::types::PyList;
use runcore_providers::{AnyDecoder, Api, CallModelContext, Options};

use crate::convert::from_py;
use crate::errors::{codec_error, guard};
use crate::json_to_py::to_py;
use crate::topy::{self, KeyCache};

fn api_named(name: &str) -> PyResult<Api> {
    Api::from_name(name).ok_or_else(|| {
        codec_error(
            "api",
            format!(
                "unknown API {name:?}: expected \"anthropic\", \"openai-chat\" or \"openai-responses\""
            ),
        )
    })
}

/// A value that is not JSON as `CodecError` of `code`; a lone surrogate in a string stays the
/// `InvalidJsonError` every method gives it.
fn not_json(code: &str, error: PyErr) -> PyErr {
    if Python::attach(|py| error.is_instance_of::<crate::errors::InvalidJsonError>(py)) {
        error
    } else {
        codec_error(code, format!("{code}: {error}"))
    }
}

fn options_from(options: &Bound<'_, PyAny>) -> PyResult<Options> {
    let value = from_py(options).map_err(|e| not_json("options", e))?;
    Options::from_value(value).map_err(|e| codec_error("options", e.to_string()))
}

fn context_from(call_model: &Bound<'_, PyAny>) -> PyResult<CallModelContext> {
    let value = from_py(call_model).map_err(|e| not_json("call_model", e))?;
    serde_json::from_value(value).map_err(|e| {
        codec_error(
            "call_model",
            format!("call_model is not a full-context call_model output: {e}"),
        )
    })
}

/// Encodes a `call_model` output (full-context mode) as the request body of API `api`
/// (`"anthropic"`, `"openai-chat"`, `"openai-responses"`): `{"body": …, "left_out": […]}`.
/// Bad options or a context that does not read raise `CodecError`.
#[pyfunction]
pub fn _provider_encode<'py>(
    py: Python<'py>,
    api: Text,
    call_model: &Bound<'py, PyAny>,
    options: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    crate::errors::guard(|| {
        let api: &str = &api;
        guard(|| {
            let api = api_named(api)?;
            let options = options_from(options)?;
            let context = context_from(call_model)?;
            let encoded = api
                .encode(&context, &options)
                .map_err(|e| codec_error("options", e.to_string()))?;
            let value = serde_json::to_value(&encoded)
                .map_err(|e| crate::errors::internal(format!("encoded body: {e}")))?;
            to_py(py, &value)
        })?
    })?
}

/// A header name or value: `str`, or `bytes` (as HTTP libraries give raw headers).
fn header_text(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(bytes) = value.cast::<pyo3::types::PyBytes>() {
        return Ok(String::from_utf8_lossy(bytes.as_bytes()).into_owned());
    }
    let text: Text = value.extract().map_err(|_| {
        codec_error(
            "options",
            "headers: every name and value must be a str or bytes",
        )
    })?;
    let text: &str = &text;
    Ok(text.to_owned())
}

/// The response's headers: a mapping (anything with `items()`, as `httpx.Headers` and
/// `dict` are) or an iterable of `(name, value)` pairs.
fn headers_from(headers: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    let pairs = if headers.hasattr("items")? {
        headers.call_method0("items")?
    } else {
        headers.clone()
    };
    let mut out = Vec::new();
    for pair in pairs.try_iter().map_err(|_| {
        codec_error(
            "options",
            "headers must be a mapping or (name, value) pairs",
        )
    })? {
        let pair = pair?;
        let (name, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair.extract().map_err(|_| {
            codec_error(
                "options",
                "headers must be a mapping or (name, value) pairs",
            )
        })?;
        out.push((header_text(&name)?, header_text(&value)?));
    }
    Ok(out)
}

/// Now, in milliseconds since the epoch: the reference for a date in the headers when neither
/// `now_ms` nor a `date` header gives one.
fn clock_ms() -> Option<u64> {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// A stream decoder of one model call's response (SPEC §13): `feed(bytes)` the body in chunks
/// split anywhere, then `finish()`. Both return lists of input dicts in the driver's
/// input-line shape (`{"type": "model_delta", …}`, then exactly one `model_done` or
/// `model_failed`), ready for `Agent.handle`.
#[pyclass(name = "ProviderDecoder", module = "runcore._runcore", subclass)]
pub struct PyProviderDecoder {
    api: Api,
    inner: Option<AnyDecoder>,
    keys: KeyCache,
    format_error: Option<String>,
}

impl PyProviderDecoder {
    fn inputs<'py>(
        &mut self,
        py: Python<'py>,
        inputs: &[runcore::Input],
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for input in inputs {
            list.append(topy::to_py(py, &mut self.keys, input)?)?;
        }
        Ok(list)
    }

    fn finished(&self) -> PyErr {
        codec_error(
            "finished",
            format!(
                "this {} decoder is finished: make a new one for the next response",
                self.api.name()
            ),
        )
    }
}

#[pymethods]
impl PyProviderDecoder {
    /// A decoder for API `api`'s response to model call `step` of run `run_id`, with HTTP status
    /// `status` (default 200; outside 2xx the whole body is an error and yields one
    /// `model_failed`). `headers` (a mapping, or `(name, value)` pairs, of `str` or `bytes`)
    /// are the response's: a `model_failed` then carries `retry_after_ms` (SPEC §13). A date in
    /// them is a delay from `now_ms` (milliseconds since the epoch), else the response's `date`
    /// header, else now.
    #[new]
    #[pyo3(signature = (api, run_id, step, status = None, *, headers = None, now_ms = None))]
    fn new(
        api: Text,
        run_id: Text,
        step: i64,
        status: Option<i64>,
        headers: Option<&Bound<'_, PyAny>>,
        now_ms: Option<u64>,
    ) -> PyResult<Self> {
        crate::errors::guard(|| {
            let api: &str = &api;
            let run_id: &str = &run_id;
            let api = api_named(api)?;
            let step = runcore::Step::try_from(step).map_err(|_| {
                codec_error(
                    "options",
                    format!("step must be an integer from 0 to {}, got {step}", u32::MAX),
                )
            })?;
            let status = match status {
                None => 200,
                Some(status) => u16::try_from(status)
                    .ok()
                    .filter(|s| (100..=999).contains(s))
                    .ok_or_else(|| {
                        codec_error(
                            "options",
                            format!("status must be an HTTP status (100 to 999), got {status}"),
                        )
                    })?,
            };
            let mut decoder = api.decoder(run_id, step, status);
            if let Some(headers) = headers {
                let headers = headers_from(headers)?;
                let has_date = headers
                    .iter()
                    .any(|(name, _)| name.eq_ignore_ascii_case("date"));
                let now = now_ms.or_else(|| if has_date { None } else { clock_ms() });
                decoder.set_headers(headers, now);
            }
            Ok(PyProviderDecoder {
                api,
                inner: Some(decoder),
                keys: KeyCache::default(),
                format_error: None,
            })
        })?
    }

    /// Feeds the next bytes of the body; returns the `model_delta` inputs they complete.
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        guard(|| {
            let Some(decoder) = self.inner.as_mut() else {
                return Err(self.finished());
            };
            let inputs = decoder.feed(data);
            self.inputs(py, &inputs)
        })?
    }

    /// Ends the body: the last deltas, then exactly one `model_done` or `model_failed`. A
    /// decoder finishes once.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        guard(|| {
            let Some(decoder) = self.inner.take() else {
                return Err(self.finished());
            };
            let (inputs, report) = decoder.finish_with_report();
            self.format_error = report.format_error.map(|e| e.to_string());
            self.inputs(py, &inputs)
        })?
    }

    /// After `finish()`: `None`, or, when a 2xx body was not the API's format at all, where and
    /// what was expected (the inputs still end in `model_failed`).
    #[getter]
    fn format_error(&self) -> PyResult<Option<String>> {
        crate::errors::guard(|| Ok(self.format_error.clone()))?
    }

    /// The API this decoder reads: `"anthropic"`, `"openai-chat"` or `"openai-responses"`.
    #[getter]
    fn api(&self) -> PyResult<&'static str> {
        crate::errors::guard(|| Ok(self.api.name()))?
    }

    fn __repr__(&self) -> PyResult<String> {
        crate::errors::guard(|| {
            Ok({
                format!(
                    "<runcore.providers decoder api={} finished={}>",
                    self.api.name(),
                    self.inner.is_none()
                )
            })
        })?
    }
}
