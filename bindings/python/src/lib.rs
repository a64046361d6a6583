//! The Python package `runcore`: the core's [`runcore::Agent`], its JSON-lines
//! [`runcore::driver::Driver`] and its stores, as a native module (`runcore._runcore`).
//!
//! The binding is thin on purpose: inputs are the driver's input objects built from keyword
//! arguments and read by the driver's own `InputLine` (the scalar hot paths build the core's
//! `Input` directly); outputs are the driver's `OutputLine`s turned into Python objects. So
//! `Agent.poll()` gives the dict `runcore drive` would print (a test checks it on every scenario
//! file), and a new input or output shape in the core reaches Python without a second copy.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use pyo3::prelude::*;

use crate::convert::Text;

mod agent;
mod claims;
mod convert;
mod driver;
mod errors;
mod json_to_py;
mod providers;
mod store;
mod topy;

/// Raises `InternalError` from inside the panic guard: lets the tests check that a Rust panic
/// becomes an ordinary exception (not an abort, not `PanicException`).
#[pyfunction]
fn _panic_for_tests(message: Text) -> PyResult<()> {
    errors::guard(|| -> PyResult<()> { panic!("{}", &*message) })?
}

/// The native module.
#[pymodule]
fn _runcore(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<agent::PyAgent>()?;
    m.add_class::<agent::Drain>()?;
    m.add_class::<driver::PyDriver>()?;
    m.add_class::<store::PyStore>()?;
    m.add_class::<store::PyMemoryStore>()?;
    m.add_class::<store::PySqliteStore>()?;
    m.add_class::<store::PyPostgresStore>()?;
    m.add_function(wrap_pyfunction!(claims::sweep, m)?)?;
    m.add_function(wrap_pyfunction!(claims::approve, m)?)?;
    m.add_function(wrap_pyfunction!(claims::deny, m)?)?;
    m.add_class::<providers::PyProviderDecoder>()?;
    m.add_function(wrap_pyfunction!(providers::_provider_encode, m)?)?;
    m.add_function(wrap_pyfunction!(claims::trace, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
