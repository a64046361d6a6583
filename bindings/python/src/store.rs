//! `runcore.Store` and its backends: the commit log (§7, §7.1) and its read ports, returning
//! the core's serde shapes as dicts.
//!
//! Every backend sits behind one [`DynStore`], so `Agent.recover` and the read ports are
//! written once. A store is guarded by a mutex: Python may share it between threads, and a
//! durable `Driver` shares it with the Python object through a [`SharedBackend`].

use std::ops::Range;
use std::sync::MutexGuard;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::convert::Text;
use runcore::driver::{CommitLineError, StoreWrite};
use runcore::store::{
    CheckpointReader, Claim, ClaimRequest, CommitLog, CommittedThreadView, EventScope, MemoryStore,
    StoreError, ThreadClaims, TranscriptSnapshotRef,
};
use runcore::{CommitError, RunId, ThreadId};
use serde_json::Value;

use runcore_clock::wall_clock_ms;
use runcore_postgres::PostgresStore;
use runcore_sqlite::{OpenError, SqliteOptions, SqliteStore, Synchronous};

use crate::convert::{from_py, serde_to_py};
use crate::errors::{claim_held, guard, internal, store_error};
use runcore_store_url::Access;

/// Any backend, as one concrete type the core's generic functions accept (the core forwards
/// every port through `Box`).
pub type DynStore = runcore::store::BoxedStore;

/// The message of a store whose lock a Rust panic poisoned.
const POISONED: &str = "this store is unusable after an internal error (a Rust panic) in a call";

/// A handle on a Python store's backend, for a durable `Driver`: each call takes the store's
/// lock, so the Python object stays usable (its reads see every commit the driver made) while
/// the driver runs.
pub type SharedBackend = runcore::store::SharedStore<DynStore>;

/// The commit log and read ports of a runcore store (SPEC §7, §7.1). Open any store from its
/// URL with `Store.open(url)`, or one of the subclasses: `MemoryStore()`, ….
#[pyclass(subclass, module = "runcore", name = "Store")]
pub struct PyStore {
    inner: SharedBackend,
}

impl PyStore {
    /// A store over `backend`.
    pub fn new(backend: impl runcore::store::Store + Send + 'static) -> Self {
        PyStore {
            inner: SharedBackend::new(Box::new(backend)),
        }
    }

    /// A handle on this store's backend that a durable driver can own.
    pub fn shared(&self) -> SharedBackend {
        self.inner.clone()
    }

    fn lock(&self) -> PyResult<MutexGuard<'_, DynStore>> {
        self.inner.lock().map_err(|_| internal(POISONED))
    }

    /// Runs `f` on the backend under its lock.
    pub fn with<T>(&self, f: impl FnOnce(&mut DynStore) -> PyResult<T>) -> PyResult<T> {
        let mut store = self.lock()?;
        guard(|| f(&mut store))?
    }

    /// Runs `f` on the backend with the interpreter released (a SQLite commit waits for the
    /// disk; other Python threads run meanwhile); a Rust panic becomes `InternalError`.
    pub fn detached<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut DynStore) -> T + Send,
    ) -> PyResult<T> {
        enum Failed {
            Poisoned,
            Panicked,
        }
        let outcome = py.detach(|| {
            let mut store = self.inner.lock().map_err(|_| Failed::Poisoned)?;
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut store)))
                .map_err(|_| Failed::Panicked)
        });
        outcome.map_err(|failed| match failed {
            Failed::Poisoned => internal(POISONED),
            Failed::Panicked => internal("runcore panicked (a bug) in a store call"),
        })
    }

    /// Runs a write on the backend with the interpreter released.
    fn write<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut DynStore) -> Result<T, StoreError> + Send,
    ) -> PyResult<T> {
        self.detached(py, f)?.map_err(|e| store_error(&e))
    }

    fn read<'py, T: serde::Serialize>(
        &self,
        py: Python<'py>,
        f: impl FnOnce(&DynStore) -> Result<T, StoreError>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let value = self.with(|store| f(store).map_err(|e| store_error(&e)))?;
        serde_to_py(py, &value)
    }
}

fn decode<T: serde::de::DeserializeOwned>(what: &str, value: &Bound<'_, PyAny>) -> PyResult<T> {
    serde_json::from_value(from_py(value)?)
        .map_err(|e| PyValueError::new_err(format!("not a valid {what}: {e}")))
}

fn scope_of(scope: Option<&Bound<'_, PyAny>>) -> PyResult<EventScope> {
    match scope {
        None => Ok(EventScope::All),
        Some(scope) => decode(
            "event scope ({\"type\": \"all\"}, {\"type\": \"thread\", \"id\": ...} or \
             {\"type\": \"run\", \"id\": ...})",
            scope,
        ),
    }
}

#[pymethods]
impl PyStore {
    /// Opens the store at `url` through the one backend registry (`runcore drive --store`'s
    /// URLs): `sqlite:PATH` (`?synchronous=normal` optional) or `postgres://…`. With
    /// `create=True` (the default) a missing SQLite file or PostgreSQL tables are created;
    /// with `create=False` a place that holds no runcore store raises `StoreError` with code
    /// `"open"` and nothing is created. Any secret in the URL is masked in every message.
    #[staticmethod]
    #[pyo3(signature = (url, *, create = true))]
    fn open(py: Python<'_>, url: Text, create: bool) -> PyResult<PyStore> {
        crate::errors::guard(|| {
            let access = if create { Access::Write } else { Access::Read };
            let url = url.into_string();
            let backend = py
                .detach(move || runcore_store_url::open_url(&url, access))
                .map_err(|message| crate::errors::store_error_with_code("open", &message))?;
            Ok(PyStore {
                inner: SharedBackend::new(backend),
            })
        })?
    }

    /// Applies a `commit` output of the agent or driver (`{"type": "commit", "commit": ...}`):
    /// fenced and idempotent when it carries `ordinal` and `expected_thread_version` (SPEC
    /// §7.1), a plain commit otherwise. Returns the receipt (or record) as a dict; a rejection
    /// raises `StoreError`.
    fn commit<'py>(
        &self,
        py: Python<'py>,
        output: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let write =
                StoreWrite::from_output_line(from_py(output)?).map_err(|error| match error {
                    CommitLineError::NotAnObject => PyTypeError::new_err(
                        "commit() takes a commit output dict ({\"type\": \"commit\", \"commit\": ...})",
                    ),
                    error => PyValueError::new_err(error.to_string()),
                })?;
            match write {
                StoreWrite::Fenced(operation) => {
                    let receipt = self.write(py, move |store| store.commit_operation(operation))?;
                    serde_to_py(py, &receipt)
                }
                StoreWrite::Plain(commit) => {
                    let record = self.write(py, move |store| store.commit(commit))?;
                    serde_to_py(py, &record)
                }
            }
        })?
    }

    /// The thread's committed messages, in commit order.
    fn committed_messages<'py>(
        &self,
        py: Python<'py>,
        thread_id: Text,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            self.read(py, |s| s.committed_messages(&ThreadId::new(thread_id)))
        })?
    }

    /// Any run's record (`{"id", "thread_id", "state", ...}`), or `None`.
    fn run<'py>(&self, py: Python<'py>, run_id: Text) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let run_id: &str = &run_id;
            self.read(py, |s| s.run(&RunId::new(run_id)))
        })?
    }

    /// The run of the thread's latest commit, or `None`.
    fn latest_run<'py>(&self, py: Python<'py>, thread_id: Text) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            self.read(py, |s| s.latest_run(&ThreadId::new(thread_id)))
        })?
    }

    /// The run's ticket while it is awaiting, else `None`.
    fn resume_ticket<'py>(&self, py: Python<'py>, run_id: Text) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let run_id: &str = &run_id;
            self.read(py, |s| s.resume_ticket(&RunId::new(run_id)))
        })?
    }

    /// The run's latest committed state (`{"type": "running"}`, ...), or `None`.
    fn run_state<'py>(&self, py: Python<'py>, run_id: Text) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let run_id: &str = &run_id;
            self.read(py, |s| s.run_state(&RunId::new(run_id)))
        })?
    }

    /// The thread's state commands, in commit order.
    fn committed_state<'py>(
        &self,
        py: Python<'py>,
        thread_id: Text,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            self.read(py, |s| s.committed_state(&ThreadId::new(thread_id)))
        })?
    }

    /// The thread's commit count (0 for an unknown thread).
    fn thread_version(&self, thread_id: Text) -> PyResult<u64> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            self.with(|s| {
                s.thread_version(&ThreadId::new(thread_id))
                    .map_err(|e| store_error(&e))
            })
        })?
    }

    /// The thread as of `version` (SPEC §8.10): `{"thread_id", "version", "commit_sequence",
    /// "messages"}` with the messages committed in versions `1..=version`, or `None` for
    /// version 0, a version past the head, or an unknown thread.
    fn thread_as_of<'py>(
        &self,
        py: Python<'py>,
        thread_id: Text,
        version: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            self.read(py, |s| s.thread_as_of(&ThreadId::new(thread_id), version))
        })?
    }

    /// Forks `thread_id` as of `at_version` onto the unused thread `new_thread_id` (SPEC
    /// §8.10): one fenced commit of the new thread; the parent is only read. Returns
    /// `{"thread_id", "version", "forked_from": {"thread_id", "version"}}`. An unknown thread
    /// or version, a version with a tool call unanswered, or a `new_thread_id` in use raises
    /// `InvalidInputError` and writes nothing.
    #[pyo3(signature = (thread_id, at_version, new_thread_id, *, now_ms = None))]
    fn fork<'py>(
        &self,
        py: Python<'py>,
        thread_id: Text,
        at_version: u64,
        new_thread_id: Text,
        now_ms: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            let new_thread_id: &str = &new_thread_id;
            let parent = ThreadId::new(thread_id);
            let new_thread = ThreadId::new(new_thread_id);
            let now_ms = now_ms.unwrap_or_else(wall_clock_ms);
            let forked = self.detached(py, move |store| {
                runcore::host::fork_thread(store, &parent, at_version, &new_thread, now_ms)
            })?;
            match forked {
                Ok(forked) => serde_to_py(py, &forked),
                Err(runcore::host::ForkError::Invalid(error)) => {
                    Err(crate::errors::agent_error(&error))
                }
                Err(runcore::host::ForkError::Store(error)) => Err(store_error(&error)),
                Err(other) => Err(internal(other.to_string())),
            }
        })?
    }

    /// The thread's origin when it was forked (`{"thread_id", "version"}`), else `None`.
    fn forked_from<'py>(&self, py: Python<'py>, thread_id: Text) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            self.read(py, |s| {
                runcore::host::forked_from(s, &ThreadId::new(thread_id))
            })
        })?
    }

    /// Threads ordered by id, those after `after` (exclusive), at most `limit`.
    #[pyo3(signature = (after = None, limit = 100))]
    fn threads<'py>(
        &self,
        py: Python<'py>,
        after: Option<Text>,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let after = after.as_deref();
            let after = after.map(ThreadId::new);
            self.read(py, |s| s.threads(after.as_ref(), limit))
        })?
    }

    /// Every awaiting run's ticket across threads, ordered by run id, those after `after`
    /// (exclusive), at most `limit`.
    #[pyo3(signature = (after = None, limit = 100))]
    fn pending_tickets<'py>(
        &self,
        py: Python<'py>,
        after: Option<Text>,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let after = after.as_deref();
            let after = after.map(RunId::new);
            self.read(py, |s| s.pending_tickets(after.as_ref(), limit))
        })?
    }

    /// Committed audit events of `scope` (`None`: all; `{"type": "thread", "id": ...}`;
    /// `{"type": "run", "id": ...}`) with `sequence > after`, ascending, at most `limit`.
    #[pyo3(signature = (scope = None, after = None, limit = 100))]
    fn list_events<'py>(
        &self,
        py: Python<'py>,
        scope: Option<&Bound<'py, PyAny>>,
        after: Option<u64>,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let scope = scope_of(scope)?;
            self.read(py, |s| s.list_events(&scope, after, limit))
        })?
    }

    /// Pins the thread's committed transcript prefix: `{"thread_id", "end", "digest"}`.
    fn transcript_snapshot<'py>(
        &self,
        py: Python<'py>,
        thread_id: Text,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            self.read(py, |s| s.transcript_snapshot(&ThreadId::new(thread_id)))
        })?
    }

    /// Checks that a pinned prefix is still committed, unchanged (`StoreError` if not).
    fn verify_transcript_snapshot(&self, snapshot: &Bound<'_, PyAny>) -> PyResult<()> {
        crate::errors::guard(|| {
            let snapshot: TranscriptSnapshotRef = decode("transcript snapshot", snapshot)?;
            self.with(|s| {
                s.verify_transcript_snapshot(&snapshot)
                    .map_err(|e| store_error(&e))
            })
        })?
    }

    /// The messages of `ranges` (sorted, non-overlapping, half-open `(start, end)` pairs)
    /// within a pinned prefix.
    fn transcript_slice<'py>(
        &self,
        py: Python<'py>,
        snapshot: &Bound<'py, PyAny>,
        ranges: Vec<(usize, usize)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let snapshot: TranscriptSnapshotRef = decode("transcript snapshot", snapshot)?;
            let ranges: Vec<Range<usize>> = ranges.into_iter().map(|(a, b)| a..b).collect();
            self.read(py, |s| s.transcript_slice(&snapshot, &ranges))
        })?
    }

    /// Claims the thread for `owner` (SPEC §7.2): granted when no claim is live at store time
    /// `now_ms` (default: the wall clock, Unix-epoch ms), or again to a retry of the live
    /// claim's own `request_id`. Returns `{"thread_id", "owner", "epoch", "expires_at_ms"}`;
    /// a live claim of another request raises `ClaimHeld` (code `claim_held`), a bad owner,
    /// request id or lease `StoreError` with code `invalid_claim`.
    #[pyo3(signature = (thread_id, owner, request_id, lease_ms, now_ms = None))]
    fn claim_thread<'py>(
        &self,
        py: Python<'py>,
        thread_id: Text,
        owner: Text,
        request_id: Text,
        lease_ms: u64,
        now_ms: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            let owner: &str = &owner;
            let request_id: &str = &request_id;
            let request = ClaimRequest {
                thread_id: ThreadId::new(thread_id),
                owner: owner.to_owned(),
                request_id: request_id.to_owned(),
                lease_ms,
            };
            let now_ms = now_ms.unwrap_or_else(wall_clock_ms);
            match self.detached(py, move |s| s.claim_thread(&request, now_ms))? {
                Ok(claim) => serde_to_py(py, &claim),
                Err(error) => match &error {
                    StoreError::Rejected(CommitError::ClaimHeld {
                        owner,
                        expires_at_ms,
                    }) => Err(claim_held(
                        &error.to_string(),
                        Some(thread_id),
                        owner,
                        *expires_at_ms,
                    )),
                    _ => Err(store_error(&error)),
                },
            }
        })?
    }

    /// Extends a claim (a dict `claim_thread` returned) to store time + `lease_ms`; returns
    /// the renewed claim. A claim that expired or was replaced raises `StoreError` with code
    /// `claim_lost`.
    #[pyo3(signature = (claim, lease_ms, now_ms = None))]
    fn renew_claim<'py>(
        &self,
        py: Python<'py>,
        claim: &Bound<'py, PyAny>,
        lease_ms: u64,
        now_ms: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let claim: Claim = decode("claim", claim)?;
            let now_ms = now_ms.unwrap_or_else(wall_clock_ms);
            let renewed = self.write(py, move |s| s.renew_claim(&claim, lease_ms, now_ms))?;
            serde_to_py(py, &renewed)
        })?
    }

    /// Ends the claim if it is still the thread's current one (a no-op otherwise), so another
    /// owner can take the thread at once.
    #[pyo3(signature = (claim, now_ms = None))]
    fn release_claim(
        &self,
        py: Python<'_>,
        claim: &Bound<'_, PyAny>,
        now_ms: Option<u64>,
    ) -> PyResult<()> {
        crate::errors::guard(|| {
            let claim: Claim = decode("claim", claim)?;
            let now_ms = now_ms.unwrap_or_else(wall_clock_ms);
            self.write(py, move |s| s.release_claim(&claim, now_ms))
        })?
    }

    /// The thread's live claim at store time `now_ms` (default: the wall clock), or `None`.
    #[pyo3(signature = (thread_id, now_ms = None))]
    fn thread_claim<'py>(
        &self,
        py: Python<'py>,
        thread_id: Text,
        now_ms: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let thread_id: &str = &thread_id;
            let now_ms = now_ms.unwrap_or_else(wall_clock_ms);
            self.read(py, |s| s.thread_claim(&ThreadId::new(thread_id), now_ms))
        })?
    }

    /// Due work at store time `now_ms` (default: the wall clock), in the order each item
    /// became due, at most `limit`: the lines of `runcore due --json` (SPEC §12.4),
    /// `{"thread_id", "run_id", "reason"}`.
    #[pyo3(signature = (now_ms = None, limit = 100))]
    fn due_work<'py>(
        &self,
        py: Python<'py>,
        now_ms: Option<u64>,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::errors::guard(|| {
            let now_ms = now_ms.unwrap_or_else(wall_clock_ms);
            let items = self.write(py, move |s| s.due_work(now_ms, limit))?;
            let lines: Vec<Value> = items
                .iter()
                .map(|item| {
                    serde_json::json!({
                        "thread_id": item.thread_id,
                        "run_id": item.run_id,
                        "reason": item.reason,
                    })
                })
                .collect();
            serde_to_py(py, &lines)
        })?
    }
}

/// The in-memory reference store (nothing survives the process).
#[pyclass(extends = PyStore, module = "runcore", name = "MemoryStore")]
pub struct PyMemoryStore;

#[pymethods]
impl PyMemoryStore {
    /// An empty in-memory store.
    #[new]
    fn new() -> PyResult<PyClassInitializer<Self>> {
        crate::errors::guard(|| {
            Ok({
                PyClassInitializer::from(PyStore::new(MemoryStore::new()))
                    .add_subclass(PyMemoryStore)
            })
        })?
    }
}

/// A store in one SQLite file (the embedded default: WAL, one transaction per commit; several
/// processes may share the file). A missing file is created (its directory must exist).
#[pyclass(extends = PyStore, module = "runcore", name = "SqliteStore")]
pub struct PySqliteStore {
    path: String,
}

#[pymethods]
impl PySqliteStore {
    /// Opens (or creates) the store at `path`. `synchronous="full"` (the default) makes a
    /// returned commit survive a power loss; `"normal"` survives a process crash only, and
    /// commits faster.
    #[new]
    #[pyo3(signature = (path, *, synchronous = Text::from("full")))]
    fn new(path: Text, synchronous: Text) -> PyResult<PyClassInitializer<Self>> {
        crate::errors::guard(|| {
            let path: &str = &path;
            let synchronous: &str = &synchronous;
            let synchronous = synchronous
                .parse::<Synchronous>()
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            let options = SqliteOptions::default().with_synchronous(synchronous);
            let store = SqliteStore::open(path, options).map_err(|e| open_error(&e))?;
            Ok(
                PyClassInitializer::from(PyStore::new(store)).add_subclass(PySqliteStore {
                    path: path.to_owned(),
                }),
            )
        })?
    }

    /// The file's path, as given.
    #[getter]
    fn path(&self) -> PyResult<&str> {
        crate::errors::guard(|| Ok(self.path.as_str()))?
    }

    fn __repr__(&self) -> PyResult<String> {
        crate::errors::guard(|| Ok(format!("SqliteStore({:?})", self.path)))?
    }
}

/// A store in a PostgreSQL database (many processes, many machines). `url` is a
/// `postgres://` / `postgresql://` URL; `schema`, when given, keeps the store's tables in a
/// schema of their own (created if missing). A lost connection is re-opened by the next call.
#[pyclass(extends = PyStore, module = "runcore", name = "PostgresStore")]
pub struct PyPostgresStore {
    schema: Option<String>,
}

#[pymethods]
impl PyPostgresStore {
    /// Connects to the database at `url` (migrating the store's schema forward if needed).
    #[new]
    #[pyo3(signature = (url, *, schema = None))]
    fn new(py: Python<'_>, url: Text, schema: Option<Text>) -> PyResult<PyClassInitializer<Self>> {
        crate::errors::guard(|| {
            let schema = schema.map(Text::into_string);
            let url: &str = &url;
            let connected = py.detach(|| match &schema {
                Some(schema) => PostgresStore::connect_in_schema(url, schema),
                None => PostgresStore::connect(url),
            });
            let store = connected.map_err(|e| store_error(&e))?;
            Ok(PyClassInitializer::from(PyStore::new(store))
                .add_subclass(PyPostgresStore { schema }))
        })?
    }

    /// The schema the store's tables live in (`None`: the connection's default).
    #[getter]
    fn schema(&self) -> PyResult<Option<&str>> {
        crate::errors::guard(|| Ok(self.schema.as_deref()))?
    }

    fn __repr__(&self) -> PyResult<String> {
        crate::errors::guard(|| {
            Ok({
                match &self.schema {
                    Some(schema) => format!("PostgresStore(schema={schema:?})"),
                    None => "PostgresStore()".to_owned(),
                }
            })
        })?
    }
}

/// The exception for a store that cannot be opened: `StoreError` with code `"open"`.
fn open_error(error: &OpenError) -> PyErr {
    crate::errors::store_error_with_code("open", &error.to_string())
}
