//! `NativeDriver`, wrapped by `Driver` in `index.js`: `runcore drive` in process, in memory
//! ([`Driver`]) or over a store ([`DurableDriver`], `runcore drive --store`), returning exactly
//! the bytes the binary writes for each input line.

use napi::Either;
use napi_derive::napi;
use runcore::driver::Driver;
use runcore::host::{DurableDriver, DurableStartError};
use serde_json::Value;

use crate::agent::NativeAgent;
use crate::errors::{
    agent_error, bad_argument, guard, internal, invalid_json, parse_json, store_error_with_code,
};
use crate::shared_candidates::{SharedStore, config_line, durable_options, parse_policy};
use crate::store::NativeStore;

enum Inner {
    Memory(Box<Driver>),
    Durable(Box<DurableDriver<SharedStore>>),
}

/// The JSON-lines driver.
#[napi]
pub struct NativeDriver {
    inner: Inner,
    startup: String,
    poisoned: bool,
}

fn joined(lines: Vec<String>) -> String {
    let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

fn start_error(error: &DurableStartError) -> napi::Error {
    match error {
        DurableStartError::Store { source, .. } => {
            store_error_with_code(source.code(), &error.to_string())
        }
        DurableStartError::Config(e) => agent_error(e),
        DurableStartError::Recover { error: e, .. } => agent_error(e),
        other => internal(other.to_string()),
    }
}

#[napi]
impl NativeDriver {
    /// An in-memory driver; `config` is the JSON text of what `runcore drive --config FILE`
    /// reads.
    #[napi(constructor, catch_unwind)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        let mut driver = Driver::new();
        if let Some(config) = config {
            let line =
                config_line(Some(parse_json(&config, "the config")?)).map_err(invalid_json)?;
            guard(|| driver.apply(line).map_err(|e| agent_error(&e)))
                .map_err(|()| internal("runcore panicked (a bug) applying a Driver's config"))??;
        }
        Ok(NativeDriver {
            inner: Inner::Memory(Box::new(driver)),
            startup: String::new(),
            poisoned: false,
        })
    }

    /// `runcore drive --config … --store … --recover policy` over `store`.
    #[napi(factory, catch_unwind)]
    pub fn durable(
        config: Option<String>,
        store: &NativeStore,
        policy: String,
    ) -> napi::Result<Self> {
        let policy = parse_policy(&policy).map_err(bad_argument)?;
        let config: Option<Value> = match config {
            Some(text) => Some(parse_json(&text, "the config")?),
            None => None,
        };
        let options = durable_options(config, policy).map_err(invalid_json)?;
        let shared = store.shared.clone();
        let started = guard(move || DurableDriver::start(shared, options))
            .map_err(|()| internal("runcore panicked (a bug) while a durable Driver started"))?;
        let (durable, started) = started.map_err(|e| start_error(&e))?;
        Ok(NativeDriver {
            inner: Inner::Durable(Box::new(durable)),
            startup: joined(started.lines),
            poisoned: false,
        })
    }

    /// A driver over a copy of `agent`.
    #[napi(factory, catch_unwind)]
    pub fn from_agent(agent: &NativeAgent) -> Self {
        let inner = agent.driver.agent().clone();
        NativeDriver {
            inner: Inner::Memory(Box::new(Driver::from_agent(inner, agent.driver.context()))),
            startup: String::new(),
            poisoned: false,
        }
    }

    /// Handles one input line (text or bytes, without its `\n`) and returns what the binary
    /// writes for it: its output lines, each ending in `\n`.
    #[napi(catch_unwind, ts_args_type = "line: string | Buffer")]
    pub fn send(
        &mut self,
        env: napi::Env,
        line: Either<String, napi::Unknown<'_>>,
    ) -> napi::Result<String> {
        if self.poisoned {
            return Err(internal(
                "this Driver is unusable after an internal error (a Rust panic)",
            ));
        }
        // A Buffer's memory may be a SharedArrayBuffer another thread writes during this
        // call: its bytes are copied once, by raw pointer (no Rust reference to them is ever
        // made), and only the copy is read (checked as UTF-8 and parsed), so what is checked
        // is what is used.
        let copied: Vec<u8>;
        let bytes: &[u8] = match &line {
            Either::A(text) => text.as_bytes(),
            Either::B(buffer) => {
                use napi::bindgen_prelude::JsValue;
                // SAFETY: `env` is the environment napi-rs passed this running method and
                // `buffer` one of its arguments.
                copied = unsafe { crate::raw::buffer_copy(env.raw(), buffer.raw()) }?;
                &copied
            }
        };
        let handled = match &mut self.inner {
            Inner::Memory(driver) => guard(|| Ok(driver.handle_line(bytes))),
            Inner::Durable(durable) => guard(|| {
                durable
                    .handle_line(bytes)
                    .map(|handled| handled.lines)
                    .map_err(|ended| store_error_with_code(ended.code, &ended.to_string()))
            }),
        };
        match handled {
            Ok(lines) => lines.map(joined),
            Err(()) => {
                self.poisoned = true;
                Err(internal("runcore panicked (a bug) in a Driver line"))
            }
        }
    }

    /// What a durable driver wrote before reading input (ending with `idle` line 0); empty in
    /// memory.
    /// Panics outside any guard of runcore's own, as a bug in an unguarded path would (for the
    /// tests: the boundary turns it into `InternalError` instead of aborting the process).
    #[napi(js_name = "_panicForTests", catch_unwind)]
    pub fn panic_for_tests(&self, message: String) -> napi::Result<()> {
        panic!("{message}")
    }

    #[napi(getter, catch_unwind)]
    pub fn startup(&self) -> String {
        self.startup.clone()
    }

    /// True once a durable driver's store refused a commit.
    #[napi(getter, catch_unwind)]
    pub fn closed(&self) -> bool {
        match &self.inner {
            Inner::Memory(_) => false,
            Inner::Durable(durable) => durable.ended().is_some(),
        }
    }

    /// Input lines handled so far.
    #[napi(getter, catch_unwind)]
    pub fn lines_handled(&self) -> f64 {
        self.driver().lines_handled() as f64
    }

    /// `"full"` or `"delta"`.
    #[napi(getter, catch_unwind)]
    pub fn context(&self) -> &'static str {
        self.driver().context().as_str()
    }

    /// The driven agent's snapshot (JSON text).
    #[napi(catch_unwind)]
    pub fn snapshot(&self) -> String {
        self.driver().agent().snapshot_json()
    }
}

impl NativeDriver {
    fn driver(&self) -> &Driver {
        match &self.inner {
            Inner::Memory(driver) => driver,
            Inner::Durable(durable) => durable.driver(),
        }
    }
}
