//! Claims and due work from Python (SPEC §7.2, §7.3, §12.4, §12.5): `runcore.sweep`,
//! `runcore.approve` and `runcore.deny`, each through a claim of its own, as `runcore sweep`,
//! `runcore approve` and `runcore deny` make them.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::convert::Text;
use runcore::host::{AnswerError, ClaimOptions, SweepOptions, sweep as core_sweep};
use runcore::{AgentConfig, PermissionDecision, RunId};

use crate::agent::parse_policy;
use crate::convert::serde_to_py;
use crate::errors::{
    agent_error, agent_error_of_kind, claim_held, store_error, store_error_with_code,
};
use runcore_clock::{default_owner, request_id, wall_clock_ms};

use crate::store::PyStore;

/// The lease a driver takes unless told otherwise, and the one a sweep or an answer takes.
pub const DEFAULT_LEASE_MS: u64 = 30_000;

/// Claim options for `owner` (default [`default_owner`]) and `lease_ms` (default 30000), with
/// a request id of `what`, the pid and the wall clock: unique per start.
pub fn claim_options(owner: Option<String>, lease_ms: Option<u64>, what: &str) -> ClaimOptions {
    let mut options = ClaimOptions::new(
        owner.unwrap_or_else(default_owner),
        lease_ms.unwrap_or(DEFAULT_LEASE_MS),
    );
    options.request_id = request_id(what);
    options
}

fn store_of<'a, 'py>(store: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyStore>> {
    store.cast::<PyStore>().map_err(|_| {
        PyTypeError::new_err(
            "store must be a runcore.Store (MemoryStore, SqliteStore or PostgresStore)",
        )
    })
}

/// Handles the store's due work once (SPEC §12.4, `runcore sweep`): each passed deadline
/// expired, each orphaned run left for a worker (`policy="replay"`) or sealed (`"seal"`),
/// each under a claim of `owner` (default: host, pid, start time) released after it. Returns
/// one dict per item, as `runcore sweep` prints them: `{"thread_id", "run_id", "reason",
/// "action"}` and, for a skipped item, `"detail"`.
#[pyfunction]
#[pyo3(signature = (store, *, owner = None, limit = 1000, policy = Text::from("replay")))]
pub fn sweep<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
    owner: Option<Text>,
    limit: usize,
    policy: Text,
) -> PyResult<Bound<'py, PyAny>> {
    crate::errors::guard(|| {
        let owner = owner.map(Text::into_string);
        let policy: &str = &policy;
        let policy = parse_policy(policy)?;
        let store = store_of(store)?;
        let options = SweepOptions {
            claim: claim_options(owner, None, "sweep"),
            limit,
            policy,
            config: AgentConfig::default(),
        };
        let items = store
            .borrow()
            .detached(py, move |s| core_sweep(s, &options, wall_clock_ms()))?
            .map_err(|e| store_error(&e))?;
        serde_to_py(py, &items)
    })?
}

fn answer<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
    run_id: &str,
    decision: PermissionDecision,
    owner: Option<String>,
    what: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let store = store_of(store)?;
    let run = RunId::new(run_id);
    let claim = claim_options(owner, None, what);
    let answered = store.borrow().detached(py, move |s| {
        runcore::host::answer_permission(s, &run, decision, &claim, wall_clock_ms())
    })?;
    match answered {
        Ok(answered) => serde_to_py(py, &answered),
        Err(error) => Err(answer_error(&error)),
    }
}

/// The exception for an answer that was not committed.
fn answer_error(error: &AnswerError) -> PyErr {
    match error {
        AnswerError::Refused(error) => agent_error(error),
        AnswerError::Held(held) => claim_held(
            &error.to_string(),
            Some(held.thread_id.as_str()),
            &held.owner,
            held.expires_at_ms,
        ),
        AnswerError::Fenced(fence) => store_error_with_code(fence.code(), &error.to_string()),
        AnswerError::Store(store) => store_error(store),
        other => agent_error_of_kind(other.kind(), other.to_string()),
    }
}

/// Approves the tool call `run_id` waits for (SPEC §12.5, `runcore approve`): one fenced
/// commit under a claim of `owner`, `note` kept for the audit trail. Returns `{"thread_id",
/// "version"}`. A run that does not await a permission raises the `AgentError` of its §10
/// kind (`ResumeError` with `.resume_error` `"not_waiting"`, …); a thread another owner holds
/// raises `ClaimHeld`.
#[pyfunction]
#[pyo3(signature = (store, run_id, note = None, *, owner = None))]
pub fn approve<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
    run_id: Text,
    note: Option<Text>,
    owner: Option<Text>,
) -> PyResult<Bound<'py, PyAny>> {
    crate::errors::guard(|| {
        let note = note.map(Text::into_string);
        let owner = owner.map(Text::into_string);
        let run_id: &str = &run_id;
        let note = note.filter(|n| !n.trim().is_empty());
        answer(
            py,
            store,
            run_id,
            PermissionDecision::Allow { note },
            owner,
            "approve",
        )
    })?
}

/// Denies the tool call `run_id` waits for (`runcore deny`); `reason` is what the model sees
/// in the call's denied result. As `approve` otherwise.
#[pyfunction]
#[pyo3(signature = (store, run_id, reason = None, *, owner = None))]
pub fn deny<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
    run_id: Text,
    reason: Option<Text>,
    owner: Option<Text>,
) -> PyResult<Bound<'py, PyAny>> {
    crate::errors::guard(|| {
        let reason = reason.map(Text::into_string);
        let owner = owner.map(Text::into_string);
        let run_id: &str = &run_id;
        let reason = reason.filter(|r| !r.trim().is_empty());
        answer(
            py,
            store,
            run_id,
            PermissionDecision::Deny { reason },
            owner,
            "deny",
        )
    })?
}

/// The spans of `thread_id` derived from its commits (SPEC §14), as the OTLP/JSON export body
/// that `runcore trace THREAD --json` prints (a dict: `{"resourceSpans": [...]}`); post it to
/// a collector's `/v1/traces` with `Content-Type: application/json`. With `run_id`, only that
/// run's spans (a run without a commit on the thread raises `AgentError` of kind
/// `invalid_state`); with `content=True`, message content goes into the spans.
#[pyfunction]
#[pyo3(signature = (store, thread_id, *, run_id = None, content = false))]
pub fn trace<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
    thread_id: Text,
    run_id: Option<Text>,
    content: bool,
) -> PyResult<Bound<'py, PyAny>> {
    crate::errors::guard(|| {
        let run_id = run_id.map(Text::into_string);
        let thread_id: &str = &thread_id;
        let store = store_of(store)?;
        let thread = runcore::ThreadId::new(thread_id);
        let run = run_id.map(RunId::new);
        let options = runcore_traces::TraceOptions {
            content,
            ..runcore_traces::TraceOptions::default()
        };
        let spans = store.borrow().detached(py, move |s| {
            runcore_traces::spans_from_store(&*s, &thread, run.as_ref(), &options)
        })?;
        match spans {
            Ok(spans) => serde_to_py(py, &runcore_traces::to_otlp_json(&spans, "runcore")),
            Err(runcore_traces::TraceError::Store(error)) => Err(store_error(&error)),
            Err(error) => Err(agent_error_of_kind("invalid_state", error.to_string())),
        }
    })?
}
