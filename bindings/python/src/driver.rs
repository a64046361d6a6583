//! `runcore.Driver`: the JSON-lines driver of `runcore drive` (SPEC §12), in process. Each
//! `send` runs the very code the binary runs for one stdin line (`Driver::handle_line`, or
//! `DurableDriver::handle_line` with a store, SPEC §12.2), so its result is exactly the lines
//! the binary writes, parsed.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::convert::Text;
use pyo3::types::{PyBytes, PyList, PyString};
use runcore::RecoveryPolicy;
use runcore::driver::Driver;
use runcore::host::{
    ClaimOptions, DurableDriver, DurableLines, DurableOptions, DurableStartError, SessionEnded,
};

use crate::agent::{PyAgent, config_input, parse_policy};
use crate::claims::claim_options;
use crate::convert::serde_to_py;
use crate::convert::{from_py, line_to_py};
use crate::errors::{agent_error, claim_held, guard, internal, store_error, store_error_with_code};
use runcore_clock::wall_clock_ms;

use crate::store::{PyStore, SharedBackend};

/// The driver inside: in memory, or durable over a Python store's backend. One per Python
/// object, never moved around: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Inner {
    Memory(Driver),
    Durable(DurableDriver<SharedBackend>),
}

impl Inner {
    fn driver(&self) -> &Driver {
        match self {
            Inner::Memory(driver) => driver,
            Inner::Durable(durable) => durable.driver(),
        }
    }
}

/// The JSON-lines driver, in process: `send(line)` returns what `runcore drive` writes for
/// that line (its outputs, then `{"type": "idle", "line": N}`), as dicts. With a store it is
/// `runcore drive --store`: it recovers the thread at construction (`startup`), stores every
/// commit before returning its line, and closes after a commit the store refused.
#[pyclass(module = "runcore", name = "Driver")]
pub struct PyDriver {
    inner: Inner,
    /// What the driver wrote before input line 1 (durable only).
    startup: Vec<String>,
    /// Set when a Rust panic interrupted a line (see `Agent`).
    poisoned: bool,
}

/// The bytes of one line given as `str`, `bytes` or a dict, without its `\n`.
fn line_bytes(line: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let mut bytes: Vec<u8> = if let Ok(text) = line.cast::<PyString>() {
        match text.to_cow() {
            Ok(text) => text.as_bytes().to_vec(),
            // A lone surrogate: its three-byte form (WTF-8), which is not UTF-8, so the driver
            // answers the line with the `invalid_json` error line it gives those bytes on stdin.
            Err(error)
                if error.is_instance_of::<pyo3::exceptions::PyUnicodeEncodeError>(line.py()) =>
            {
                text.call_method1("encode", ("utf-8", "surrogatepass"))?
                    .cast_into::<PyBytes>()?
                    .as_bytes()
                    .to_vec()
            }
            Err(error) => return Err(error),
        }
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
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    if bytes.contains(&b'\n') {
        return Err(PyValueError::new_err(
            "send() takes one line; this text holds a newline (send each line on its own)",
        ));
    }
    Ok(bytes)
}

/// `StoreError` for a line sent after the session ended.
fn ended_error(ended: &SessionEnded) -> PyErr {
    store_error_with_code(
        ended.code,
        &format!("this Driver is closed: {ended} (a new Driver on the same store does)"),
    )
}

/// The exception for a durable driver that could not start.
fn start_error(error: &DurableStartError) -> PyErr {
    match error {
        DurableStartError::Store { source, .. } => {
            store_error_with_code(source.code(), &error.to_string())
        }
        DurableStartError::Config(error) | DurableStartError::Recover { error, .. } => {
            agent_error(error)
        }
        DurableStartError::ClaimHeld(held) => claim_held(
            &error.to_string(),
            Some(held.thread_id.as_str()),
            &held.owner,
            held.expires_at_ms,
        ),
        DurableStartError::InvalidClaim(_) => {
            store_error_with_code("invalid_claim", &error.to_string())
        }
        other => internal(other.to_string()),
    }
}

/// Runs `f` without the interpreter (a store commit may wait for a disk or a server), a Rust
/// panic caught as `Err`.
fn detached<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> Result<T, ()> {
    py.detach(|| catch_unwind(AssertUnwindSafe(f)).map_err(|_| ()))
}

impl PyDriver {
    fn lines(&mut self, py: Python<'_>, line: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        if self.poisoned {
            return Err(internal(
                "this Driver is unusable after an internal error (a Rust panic)",
            ));
        }
        let bytes = line_bytes(line)?;
        if let Some(lost) = self.tick(py)? {
            return Ok(vec![lost]);
        }
        let handled = match &mut self.inner {
            Inner::Memory(driver) => guard(|| Ok(driver.handle_line(&bytes))),
            Inner::Durable(durable) => match detached(py, || durable.handle_line(&bytes)) {
                Ok(Ok(DurableLines { lines, .. })) => Ok(Ok(lines)),
                Ok(Err(ended)) => return Err(ended_error(&ended)),
                Err(()) => Err(internal(
                    "runcore panicked (a bug) in a durable Driver line",
                )),
            },
        };
        match handled {
            Ok(lines) => lines,
            Err(panic) => {
                self.poisoned = true;
                Err(panic)
            }
        }
    }

    /// Renews a claimed driver's claim when it is due; the `claim_lost` error line when the
    /// claim is gone (the session has then ended).
    fn tick(&mut self, py: Python<'_>) -> PyResult<Option<String>> {
        match &mut self.inner {
            Inner::Durable(durable) if durable.claim().is_some() => {
                detached(py, || durable.tick(wall_clock_ms()))
                    .map_err(|()| internal("runcore panicked (a bug) renewing a claim"))
            }
            _ => Ok(None),
        }
    }

    /// Releases a claimed driver's claim (the session ends), also after a refused commit
    /// closed it (a claim that is no longer the thread's current one is left alone by the
    /// store); a no-op for an unclaimed driver.
    fn release_claim(&mut self, py: Python<'_>) -> PyResult<()> {
        match &mut self.inner {
            Inner::Durable(durable) => match detached(py, || durable.release(wall_clock_ms())) {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(store_error(&error)),
                Err(()) => Err(internal("runcore panicked (a bug) releasing a claim")),
            },
            _ => Ok(()),
        }
    }

    fn durable(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        store: &Bound<'_, PyAny>,
        policy: RecoveryPolicy,
        claim: Option<ClaimOptions>,
    ) -> PyResult<Self> {
        let store = store.cast::<PyStore>().map_err(|_| {
            PyTypeError::new_err(
                "store must be a runcore.Store (MemoryStore, SqliteStore or PostgresStore)",
            )
        })?;
        let options = DurableOptions::from_line(config_input(config)?, policy)
            .ok_or_else(|| internal("a config line did not read as a config input"))?;
        let backend = store.borrow().shared();
        let started = detached(py, || match claim {
            Some(claim) => DurableDriver::start_claimed(backend, options, claim, wall_clock_ms()),
            None => DurableDriver::start(backend, options),
        })
        .map_err(|()| internal("runcore panicked (a bug) while a durable Driver started"))?;
        let (durable, started) = started.map_err(|e| start_error(&e))?;
        Ok(PyDriver {
            inner: Inner::Durable(durable),
            startup: started.lines,
            poisoned: false,
        })
    }
}

#[pymethods]
impl PyDriver {
    /// A driver; `config` is what `runcore drive --config FILE` reads (a dict with the fields
    /// of a `config` line, applied before input line 1).
    ///
    /// With `store` (a `MemoryStore`, `SqliteStore` or `PostgresStore`) it is `runcore drive
    /// --store` (SPEC §12.2) on the config's `thread_id` (default `"thread-1"`): construction
    /// recovers the thread under `policy` (`"replay"` or `"seal"`) and `startup` holds what
    /// the binary writes before reading input, ending with `{"type": "idle", "line": 0}`;
    /// every commit is stored before `send` returns its line. A commit the store refuses
    /// gives one `store` error dict as the last line; the driver is then closed and a later
    /// `send` raises `StoreError` (a new Driver recovers from what is committed). The store
    /// object stays usable meanwhile: its reads see every commit the driver made.
    ///
    /// With `owner` or `lease_ms` as well it is `runcore drive --store --owner` (SPEC §12.4):
    /// it claims the thread first (default owner: host name, pid and start time; default
    /// lease 30000 ms; the wall clock in Unix-epoch ms), renews the claim before a `send`
    /// when due (or at `tick()`), and releases it at `close()`, at the end of a `with` block,
    /// or when the driver is garbage-collected. A thread another owner holds raises
    /// `ClaimHeld`. When the claim is lost, `send` returns the one `claim_lost` store error
    /// dict and the driver is closed.
    #[new]
    #[pyo3(signature = (config = None, store = None, *, policy = Text::from("replay"), owner = None, lease_ms = None))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        store: Option<&Bound<'_, PyAny>>,
        policy: Text,
        owner: Option<Text>,
        lease_ms: Option<u64>,
    ) -> PyResult<Self> {
        crate::errors::guard(|| {
            let owner = owner.map(Text::into_string);
            let policy: &str = &policy;
            let policy = parse_policy(policy)?;
            let claim = if owner.is_some() || lease_ms.is_some() {
                Some(claim_options(owner, lease_ms, "drive"))
            } else {
                None
            };
            if let Some(store) = store {
                return PyDriver::durable(py, config, store, policy, claim);
            }
            if claim.is_some() {
                return Err(PyValueError::new_err(
                    "owner and lease_ms are for a durable driver (it claims a store's thread): \
                     pass store=...",
                ));
            }
            if policy == RecoveryPolicy::Seal {
                return Err(PyValueError::new_err(
                    "policy is for a durable driver (it recovers from a store): pass store=...",
                ));
            }
            let mut driver = Driver::new();
            if let Some(config) = config {
                driver
                    .apply(config_input(Some(config))?)
                    .map_err(|e| agent_error(&e))?;
            }
            Ok(PyDriver {
                inner: Inner::Memory(driver),
                startup: Vec::new(),
                poisoned: false,
            })
        })?
    }

    /// Handles one input line (a JSON `str`/`bytes`, or a dict) and returns the output
    /// dicts, the last of which is `{"type": "idle", "line": N}` (or, with a store, the
    /// `store` error of a refused commit). A bad line gives an `error` dict, as the binary
    /// writes it; it never raises for the line's content. A closed durable driver raises
    /// `StoreError`.
    fn send<'py>(
        &mut self,
        py: Python<'py>,
        line: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        crate::errors::guard(|| {
            let lines = self.lines(py, line)?;
            let list = PyList::empty(py);
            for line in &lines {
                list.append(line_to_py(py, line)?)?;
            }
            Ok(list)
        })?
    }

    /// Like `send`, but the output lines as the exact JSON text the binary writes.
    fn send_raw(&mut self, py: Python<'_>, line: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        crate::errors::guard(|| self.lines(py, line))?
    }

    /// A driver over a copy of `agent` (e.g. one from `Agent.recover`); the agent is left as
    /// it was. In delta context the next `call_model` carries the transcript from `base` 0.
    #[staticmethod]
    fn from_agent(agent: PyRef<'_, PyAgent>) -> PyResult<Self> {
        crate::errors::guard(|| {
            Ok({
                PyDriver {
                    inner: Inner::Memory(Driver::from_agent(agent.agent.clone(), agent.context)),
                    startup: Vec::new(),
                    poisoned: false,
                }
            })
        })?
    }

    /// What the driver wrote before input line 1, as dicts: with a store, the recovered
    /// agent's outputs then `{"type": "idle", "line": 0}` (or a `store` error dict when the
    /// store refused a recovery commit: the driver is then closed); `[]` in memory.
    #[getter]
    fn startup<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        crate::errors::guard(|| {
            let list = PyList::empty(py);
            for line in &self.startup {
                list.append(line_to_py(py, line)?)?;
            }
            Ok(list)
        })?
    }

    /// Renews the claim now if it is due (a host idle between lines calls it before the
    /// time `renew_at_ms` gives): `[]`, or `[the claim_lost error dict]` when the claim is
    /// gone (the driver is then closed). `[]` for an unclaimed driver.
    #[pyo3(name = "tick")]
    fn py_tick<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        crate::errors::guard(|| {
            let list = PyList::empty(py);
            if let Some(line) = self.tick(py)? {
                list.append(line_to_py(py, &line)?)?;
            }
            Ok(list)
        })?
    }

    /// When the claim's next renew is due (wall clock, Unix-epoch ms), or `None` for an
    /// unclaimed or closed driver.
    #[getter]
    fn renew_at_ms(&self) -> PyResult<Option<u64>> {
        crate::errors::guard(|| {
            Ok({
                match &self.inner {
                    Inner::Durable(durable) => durable.poll_renew(),
                    Inner::Memory(_) => None,
                }
            })
        })?
    }

    /// The claim the driver holds (`{"thread_id", "owner", "epoch", "expires_at_ms"}`), or
    /// `None` (unclaimed, released or lost).
    #[getter]
    fn claim<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        crate::errors::guard(|| match &self.inner {
            Inner::Durable(durable) => durable.claim().map(|c| serde_to_py(py, c)).transpose(),
            Inner::Memory(_) => Ok(None),
        })?
    }

    /// Releases the claim (a claimed driver), so another owner can take the thread at once;
    /// the driver is then closed. A no-op for an unclaimed driver or a second call.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        crate::errors::guard(|| self.release_claim(py))?
    }

    /// `close()`.
    fn release(&mut self, py: Python<'_>) -> PyResult<()> {
        crate::errors::guard(|| self.release_claim(py))?
    }

    fn __enter__(slf: Py<Self>) -> PyResult<Py<Self>> {
        crate::errors::guard(|| Ok(slf))?
    }

    /// Releases the claim (`close()`); an exception in the block goes on.
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        exc_value: &Bound<'_, PyAny>,
        traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        crate::errors::guard(|| {
            let _ = (exc_type, exc_value, traceback);
            self.release_claim(py)?;
            Ok(false)
        })?
    }

    /// Whether the store refused a commit of this driver, or its claim was lost or released:
    /// `send` then raises `StoreError`. Always `False` in memory.
    #[getter]
    fn closed(&self) -> PyResult<bool> {
        crate::errors::guard(|| {
            Ok({
                match &self.inner {
                    Inner::Memory(_) => false,
                    Inner::Durable(durable) => durable.ended().is_some(),
                }
            })
        })?
    }

    /// Input lines handled so far.
    #[getter]
    fn lines_handled(&self) -> PyResult<u64> {
        crate::errors::guard(|| Ok(self.inner.driver().lines_handled()))?
    }

    /// `"full"` or `"delta"`: how `call_model` lines carry the transcript.
    #[getter]
    fn context(&self) -> PyResult<&'static str> {
        crate::errors::guard(|| Ok(self.inner.driver().context().as_str()))?
    }

    /// The driven agent's `snapshot()` text.
    fn snapshot(&self) -> PyResult<String> {
        guard(|| Ok(self.inner.driver().agent().snapshot_json()))?
    }
}

impl Drop for PyDriver {
    /// A claimed driver dropped unreleased (garbage-collected) releases its claim; a failure
    /// only delays the next owner until the lease runs out.
    fn drop(&mut self) {
        if let Inner::Durable(durable) = &mut self.inner {
            let _ = catch_unwind(AssertUnwindSafe(|| durable.release(wall_clock_ms())));
        }
    }
}
