//! `runcore.Driver`: the JSON-lines driver of `runcore drive` (SPEC §12), in process. Each
//! `send` runs the very code the binary runs for one stdin line (`Driver::handle_line`), so
//! its result is exactly the lines the binary writes, parsed.

use pyo3::exceptions::{PyNotImplementedError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use runcore::driver::{ContextMode, Driver, InputLine};

use crate::agent::{PyAgent, config_line};
use crate::convert::{from_py, line_to_py};
use crate::errors::{agent_error, guard, internal, invalid_json};

/// The JSON-lines driver, in process: `send(line)` returns what `runcore drive` writes for
/// that line (its outputs, then `{"type": "idle", "line": N}`), as dicts.
#[pyclass(module = "runcore", name = "Driver")]
pub struct PyDriver {
    driver: Driver,
    /// Set when a Rust panic interrupted a line (see `Agent`).
    poisoned: bool,
}

impl PyDriver {
    fn lines(&mut self, line: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        if self.poisoned {
            return Err(internal(
                "this Driver is unusable after an internal error (a Rust panic)",
            ));
        }
        let bytes: Vec<u8> = if let Ok(text) = line.cast::<PyString>() {
            text.to_cow()?.as_bytes().to_vec()
        } else if let Ok(bytes) = line.cast::<PyBytes>() {
            bytes.as_bytes().to_vec()
        } else if line.cast::<pyo3::types::PyDict>().is_ok() {
            serde_json::to_vec(&from_py(line)?)
                .map_err(|e| internal(format!("a JSON value did not serialize: {e}")))?
        } else {
            return Err(PyTypeError::new_err(
                "send() takes one line: a str, bytes, or a dict (written as JSON)",
            ));
        };
        // The binary splits stdin on `\n` only and strips it: one line at a time here.
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        if bytes.contains(&b'\n') {
            return Err(PyValueError::new_err(
                "send() takes one line; this text holds a newline (send each line on its own)",
            ));
        }
        let driver = &mut self.driver;
        match guard(|| Ok(driver.handle_line(bytes))) {
            Ok(lines) => lines,
            Err(panic) => {
                self.poisoned = true;
                Err(panic)
            }
        }
    }
}

#[pymethods]
impl PyDriver {
    /// A driver; `config` is what `runcore drive --config FILE` reads (a dict with the fields
    /// of a `config` line, applied before input line 1). `store` is reserved for the durable
    /// driver (SPEC §12.2) and not supported by this build.
    #[new]
    #[pyo3(signature = (config = None, store = None))]
    fn new(config: Option<&Bound<'_, PyAny>>, store: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        if store.is_some() {
            return Err(PyNotImplementedError::new_err(
                "Driver(store=...) needs the durable driver (SPEC §12.2), not in this build; \
                 apply each commit output with store.commit(output) instead",
            ));
        }
        let mut driver = Driver::new();
        if let Some(config) = config {
            let line = InputLine::from_value(config_line(config)?)
                .map_err(|e| invalid_json(format!("not a valid config: {e}")))?;
            driver.apply(line).map_err(|e| agent_error(&e))?;
        }
        Ok(PyDriver {
            driver,
            poisoned: false,
        })
    }

    /// Handles one input line (a JSON `str`/`bytes`, or a dict) and returns the output
    /// dicts, the last of which is `{"type": "idle", "line": N}`. A bad line gives an
    /// `error` dict, as the binary writes it; it never raises for the line's content.
    fn send<'py>(
        &mut self,
        py: Python<'py>,
        line: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let lines = self.lines(line)?;
        let list = PyList::empty(py);
        for line in &lines {
            list.append(line_to_py(py, line)?)?;
        }
        Ok(list)
    }

    /// Like `send`, but the output lines as the exact JSON text the binary writes.
    fn send_raw(&mut self, line: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        self.lines(line)
    }

    /// A driver over a copy of `agent` (e.g. one from `Agent.recover`); the agent is left as
    /// it was. In delta context the next `call_model` carries the transcript from `base` 0.
    #[staticmethod]
    fn from_agent(agent: PyRef<'_, PyAgent>) -> Self {
        PyDriver {
            driver: Driver::from_agent(agent.agent.clone(), agent.context),
            poisoned: false,
        }
    }

    /// Input lines handled so far.
    #[getter]
    fn lines_handled(&self) -> u64 {
        self.driver.lines_handled()
    }

    /// `"full"` or `"delta"`: how `call_model` lines carry the transcript.
    #[getter]
    fn context(&self) -> &'static str {
        match self.driver.context() {
            ContextMode::Full => "full",
            ContextMode::Delta => "delta",
        }
    }

    /// The driven agent's `snapshot()` text.
    fn snapshot(&self) -> String {
        self.driver.agent().snapshot_json()
    }
}
