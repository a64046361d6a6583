//! `NativeStore`, wrapped by `MemoryStore`, `SqliteStore` and `PostgresStore` in `index.js`:
//! the commit log (SPEC §7, §7.1) and its read ports, every record as JSON text. The backend
//! sits behind a [`SharedStore`], so a durable driver and this object share it.
//!
//! Every method that touches the store returns a promise: the call runs on libuv's thread
//! pool through one napi [`AsyncTask`] ([`StoreCall`], this package's one crossing from the
//! JavaScript thread to the blocking store ports; STYLE: "An async host meets a blocking port
//! in one place"), never on the JavaScript thread, so a slow disk or database never stalls
//! the event loop. Opening a store stays synchronous (a constructor cannot await).

use std::ops::Range;

use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Task};
use napi_derive::napi;
use runcore::driver::StoreWrite;
use runcore::store::{
    CheckpointReader, Claim, ClaimRequest, CommitLog, CommittedThreadView, EventScope, MemoryStore,
    StoreError, ThreadClaims, TranscriptSnapshotRef,
};
use runcore::{RunId, ThreadId};
use runcore_postgres::PostgresStore;
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::errors::{
    bad_argument, guard, internal, invalid_json, store_error, store_error_with_code,
};
use crate::shared_candidates::{DynStore, SharedStore};

/// One store call, run on libuv's thread pool: its answer is the JSON text the promise
/// resolves to; a store error, or a panic (caught there: it never unwinds into Node), rejects
/// it with the thrown error `index.js` turns into `StoreError` / `InternalError`.
pub struct StoreCall {
    shared: SharedStore,
    call: Option<Call>,
}

/// The work of a [`StoreCall`]: the store in, the promise's JSON text (or its error) out.
type Call = Box<dyn FnOnce(&SharedStore) -> napi::Result<String> + Send>;

impl Task for StoreCall {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> napi::Result<String> {
        let call = self
            .call
            .take()
            .ok_or_else(|| internal("a store call was run twice"))?;
        let shared = &self.shared;
        guard(move || call(shared))
            .map_err(|()| internal("runcore panicked (a bug) in a store call"))?
    }

    fn resolve(&mut self, _env: Env, output: String) -> napi::Result<String> {
        Ok(output)
    }
}

/// A store: the write side and the read ports.
#[napi]
pub struct NativeStore {
    pub(crate) shared: SharedStore,
}

fn decode<T: DeserializeOwned>(what: &str, text: &str) -> napi::Result<T> {
    serde_json::from_str(text).map_err(|e| invalid_json(format!("not a valid {what}: {e}")))
}

/// A JavaScript number that must be a whole, non-negative safe integer.
fn whole(value: f64, what: &str) -> napi::Result<u64> {
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= 9_007_199_254_740_991.0
    {
        // Checked above: a whole number in 0..=2^53-1 converts exactly.
        Ok(value as u64)
    } else {
        Err(invalid_json(format!(
            "{what} must be a whole number from 0 to 2^53-1, got {value}"
        )))
    }
}

/// A JavaScript time (`Date.now()`) or duration in milliseconds, as the store takes it.
fn now_of(now_ms: f64) -> napi::Result<u64> {
    whole(now_ms, "a time in milliseconds")
}

fn limit_of(limit: Option<u32>) -> usize {
    limit.map_or(100, |l| l as usize)
}

impl NativeStore {
    fn new(backend: impl runcore::store::Store + Send + 'static) -> Self {
        NativeStore {
            shared: SharedStore::new(Box::new(backend)),
        }
    }

    /// A task that runs `f` on the locked store off the JavaScript thread and answers its
    /// result as JSON text.
    fn read<T: Serialize>(
        &self,
        f: impl FnOnce(&DynStore) -> Result<T, StoreError> + Send + 'static,
    ) -> AsyncTask<StoreCall> {
        AsyncTask::new(StoreCall {
            shared: self.shared.clone(),
            call: Some(Box::new(move |shared: &SharedStore| {
                let value = {
                    let store = shared.lock().map_err(|e| store_error(&e))?;
                    f(&store).map_err(|e| store_error(&e))?
                };
                serde_json::to_string(&value).map_err(|e| internal(e.to_string()))
            })),
        })
    }
}

impl NativeStore {
    /// A task that runs `f` on the store (a handle that may write) off the JavaScript thread
    /// and answers its result as JSON text.
    fn write<T: Serialize>(
        &self,
        f: impl FnOnce(&mut SharedStore) -> Result<T, StoreError> + Send + 'static,
    ) -> AsyncTask<StoreCall> {
        AsyncTask::new(StoreCall {
            shared: self.shared.clone(),
            call: Some(Box::new(move |shared: &SharedStore| {
                let mut shared = shared.clone();
                let value = f(&mut shared).map_err(|e| store_error(&e))?;
                serde_json::to_string(&value).map_err(|e| internal(e.to_string()))
            })),
        })
    }
}

#[napi]
impl NativeStore {
    /// The in-memory reference store.
    #[napi(factory, catch_unwind)]
    pub fn memory() -> Self {
        NativeStore::new(MemoryStore::new())
    }

    /// A store in one SQLite file (created if missing); `synchronous` is `"full"` (default) or
    /// `"normal"`.
    #[napi(factory, catch_unwind)]
    pub fn sqlite(path: String, synchronous: Option<String>) -> napi::Result<Self> {
        let synchronous = match synchronous.as_deref() {
            None => Synchronous::Full,
            Some(name) => name
                .parse::<Synchronous>()
                .map_err(|e| bad_argument(e.to_string()))?,
        };
        let options = SqliteOptions::default().with_synchronous(synchronous);
        let store = SqliteStore::open(&path, options)
            .map_err(|e| store_error_with_code("open", &e.to_string()))?;
        Ok(NativeStore::new(store))
    }

    /// The store at `url` (`sqlite:PATH`, `postgres://…`), opened through the one backend
    /// registry (`runcore drive --store`'s URLs); `create` (default true) creates a missing
    /// SQLite file or PostgreSQL tables, false refuses a place without a runcore store.
    #[napi(factory, catch_unwind)]
    pub fn open(url: String, create: Option<bool>) -> napi::Result<Self> {
        let access = match create {
            Some(false) => runcore_store_url::Access::Read,
            _ => runcore_store_url::Access::Write,
        };
        let backend = runcore_store_url::open_url(&url, access)
            .map_err(|message| store_error_with_code("open", &message))?;
        Ok(NativeStore {
            shared: SharedStore::new(backend),
        })
    }

    /// A store in a PostgreSQL database at `url`, its tables in `schema` when given.
    #[napi(factory, catch_unwind)]
    pub fn postgres(url: String, schema: Option<String>) -> napi::Result<Self> {
        let store = match &schema {
            Some(schema) => PostgresStore::connect_in_schema(&url, schema),
            None => PostgresStore::connect(&url),
        }
        .map_err(|e| store_error(&e))?;
        Ok(NativeStore::new(store))
    }

    /// Applies a `commit` output (its JSON text): fenced and idempotent when it carries
    /// `ordinal` and `expected_thread_version`, a plain commit otherwise. Returns the receipt
    /// (or record) as JSON text. With `claim` (a claim's JSON, SPEC §7.2) the fenced commit
    /// carries its token, checked at store time `now_ms`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn commit(
        &self,
        output: String,
        claim: Option<String>,
        now_ms: Option<f64>,
    ) -> napi::Result<AsyncTask<StoreCall>> {
        let output = decode("commit output", &output)?;
        let mut write =
            StoreWrite::from_output_line(output).map_err(|e| invalid_json(e.to_string()))?;
        if let Some(claim) = claim {
            let claim: Claim = decode("claim", &claim)?;
            match &mut write {
                StoreWrite::Fenced(operation) => {
                    operation.claim = Some(claim.token());
                    operation.now_ms = now_ms.map(now_of).transpose()?;
                }
                StoreWrite::Plain(_) => {
                    return Err(bad_argument(
                        "a commit under a claim must be fenced (carry ordinal and expected_thread_version)",
                    ));
                }
            }
        }
        Ok(AsyncTask::new(StoreCall {
            shared: self.shared.clone(),
            call: Some(Box::new(move |shared: &SharedStore| {
                let mut shared = shared.clone();
                let written = match write {
                    StoreWrite::Fenced(operation) => shared
                        .commit_operation(operation)
                        .map(|receipt| serde_json::to_string(&receipt)),
                    StoreWrite::Plain(commit) => shared
                        .commit(commit)
                        .map(|record| serde_json::to_string(&record)),
                };
                written
                    .map_err(|e| store_error(&e))?
                    .map_err(|e| internal(e.to_string()))
            })),
        }))
    }

    /// Claims a thread (SPEC §7.2): `request` is a claim request's JSON (`thread_id`, `owner`,
    /// `request_id`, `lease_ms`); resolves to the claim's JSON, or rejects with `claim_held`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn claim_thread(&self, request: String, now_ms: f64) -> napi::Result<AsyncTask<StoreCall>> {
        let request: ClaimRequest = decode("claim request", &request)?;
        let now = now_of(now_ms)?;
        Ok(self.write(move |store| store.claim_thread(&request, now)))
    }

    /// Extends a claim by `lease_ms` from store time; rejects with `claim_lost` when it is not current.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn renew_claim(
        &self,
        claim: String,
        lease_ms: f64,
        now_ms: f64,
    ) -> napi::Result<AsyncTask<StoreCall>> {
        let claim: Claim = decode("claim", &claim)?;
        let lease = now_of(lease_ms)?;
        let now = now_of(now_ms)?;
        Ok(self.write(move |store| store.renew_claim(&claim, lease, now)))
    }

    /// Ends a claim if it is the thread's current one.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn release_claim(&self, claim: String, now_ms: f64) -> napi::Result<AsyncTask<StoreCall>> {
        let claim: Claim = decode("claim", &claim)?;
        let now = now_of(now_ms)?;
        Ok(self.write(move |store| store.release_claim(&claim, now)))
    }

    /// Handles the store's due work once (SPEC §7.3, §12.4, `runcore sweep`): each passed
    /// deadline expired, each orphaned run left for a worker (`policy` `"replay"`) or sealed
    /// (`"seal"`), each under a claim of `owner` (lease `lease_ms`) released after it, at store
    /// time `now_ms`. Resolves to the items' JSON, as `runcore sweep` prints them. The core's
    /// host operation (`runcore::host::sweep`), not a copy of it.
    #[napi(catch_unwind)]
    pub fn sweep(
        &self,
        owner: String,
        request_id: String,
        lease_ms: f64,
        limit: f64,
        policy: String,
        now_ms: f64,
    ) -> napi::Result<AsyncTask<StoreCall>> {
        let policy = crate::shared_candidates::parse_policy(&policy).map_err(bad_argument)?;
        let mut claim = runcore::host::ClaimOptions::new(owner, whole(lease_ms, "leaseMs")?);
        claim.request_id = request_id;
        let limit = usize::try_from(whole(limit, "limit")?)
            .map_err(|_| invalid_json("limit is too large"))?;
        let options = runcore::host::SweepOptions {
            claim,
            limit,
            policy,
            config: runcore::AgentConfig::default(),
        };
        let now = whole(now_ms, "nowMs")?;
        Ok(self.write(move |store| runcore::host::sweep(store, &options, now)))
    }

    /// Answers the permission ticket `run_id` awaits (SPEC §12.5, `runcore approve` / `deny`):
    /// `decision` is a permission decision's JSON (`{"decision":"allow","note"?}` or
    /// `{"decision":"deny","reason"?}`), committed under a claim of `owner` of its own at store
    /// time `now_ms` and released after. Resolves to `{"thread_id","version"}`; a refused
    /// answer rejects with its §10 error (the thread unchanged), another owner's live claim
    /// with `StoreError` code `claim_held`. The core's host operation
    /// (`runcore::host::answer_permission`).
    #[napi(catch_unwind)]
    pub fn answer_permission(
        &self,
        run_id: String,
        decision: String,
        owner: String,
        request_id: String,
        lease_ms: f64,
        now_ms: f64,
    ) -> napi::Result<AsyncTask<StoreCall>> {
        let decision: runcore::PermissionDecision = decode("permission decision", &decision)?;
        let mut claim = runcore::host::ClaimOptions::new(owner, whole(lease_ms, "leaseMs")?);
        claim.request_id = request_id;
        let now = whole(now_ms, "nowMs")?;
        let run = RunId::new(run_id);
        Ok(AsyncTask::new(StoreCall {
            shared: self.shared.clone(),
            call: Some(Box::new(move |shared: &SharedStore| {
                let mut shared = shared.clone();
                match runcore::host::answer_permission(&mut shared, &run, decision, &claim, now) {
                    Ok(answered) => {
                        serde_json::to_string(&answered).map_err(|e| internal(e.to_string()))
                    }
                    Err(runcore::host::AnswerError::Held(held)) => {
                        Err(store_error_with_code("claim_held", &held.to_string()))
                    }
                    Err(error) => Err(crate::errors::line_error(&error.body())),
                }
            })),
        }))
    }

    /// The thread's live claim at store time, or `null`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn thread_claim(
        &self,
        thread_id: String,
        now_ms: f64,
    ) -> napi::Result<AsyncTask<StoreCall>> {
        let now = now_of(now_ms)?;
        let thread = ThreadId::new(thread_id);
        Ok(self.write(move |store| store.thread_claim(&thread, now)))
    }

    /// The thread's committed messages.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn committed_messages(&self, thread_id: String) -> AsyncTask<StoreCall> {
        self.read(move |s| s.committed_messages(&ThreadId::new(thread_id)))
    }

    /// One run's record, or `null`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn run(&self, run_id: String) -> AsyncTask<StoreCall> {
        self.read(move |s| s.run(&RunId::new(run_id)))
    }

    /// The thread's latest run's record, or `null`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn latest_run(&self, thread_id: String) -> AsyncTask<StoreCall> {
        self.read(move |s| s.latest_run(&ThreadId::new(thread_id)))
    }

    /// The run's resume ticket, or `null`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn resume_ticket(&self, run_id: String) -> AsyncTask<StoreCall> {
        self.read(move |s| s.resume_ticket(&RunId::new(run_id)))
    }

    /// The run's state, or `null`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn run_state(&self, run_id: String) -> AsyncTask<StoreCall> {
        self.read(move |s| s.run_state(&RunId::new(run_id)))
    }

    /// The thread's committed state commands.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn committed_state(&self, thread_id: String) -> AsyncTask<StoreCall> {
        self.read(move |s| s.committed_state(&ThreadId::new(thread_id)))
    }

    /// The thread's commit count.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn thread_version(&self, thread_id: String) -> AsyncTask<StoreCall> {
        self.read(move |s| s.thread_version(&ThreadId::new(thread_id)))
    }

    /// The thread as of `version` (SPEC §8.10), or `null`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn thread_as_of(
        &self,
        thread_id: String,
        version: f64,
    ) -> napi::Result<AsyncTask<StoreCall>> {
        let version = whole(version, "version")?;
        Ok(self.read(move |s| s.thread_as_of(&ThreadId::new(thread_id), version)))
    }

    /// Forks `thread_id` as of `at_version` onto the unused `new_thread_id` (SPEC §8.10): one
    /// fenced commit of the new thread. Resolves to `{thread_id, version, forked_from}`;
    /// rejects with `InvalidInputError` (nothing written) or `StoreError`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn fork(
        &self,
        thread_id: String,
        at_version: f64,
        new_thread_id: String,
        now_ms: Option<f64>,
    ) -> napi::Result<AsyncTask<StoreCall>> {
        let at_version = whole(at_version, "atVersion")?;
        let now_ms = match now_ms {
            Some(now) => whole(now, "nowMs")?,
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        };
        Ok(AsyncTask::new(StoreCall {
            shared: self.shared.clone(),
            call: Some(Box::new(move |shared: &SharedStore| {
                let mut shared = shared.clone();
                let forked = runcore::host::fork_thread(
                    &mut shared,
                    &ThreadId::new(thread_id),
                    at_version,
                    &ThreadId::new(new_thread_id),
                    now_ms,
                );
                match forked {
                    Ok(forked) => {
                        serde_json::to_string(&forked).map_err(|e| internal(e.to_string()))
                    }
                    Err(runcore::host::ForkError::Invalid(error)) => {
                        Err(crate::errors::agent_error(&error))
                    }
                    Err(runcore::host::ForkError::Store(error)) => Err(store_error(&error)),
                    Err(other) => Err(internal(other.to_string())),
                }
            })),
        }))
    }

    /// The thread's origin when it was forked (`{thread_id, version}`), or `null`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn forked_from(&self, thread_id: String) -> AsyncTask<StoreCall> {
        self.read(move |s| runcore::host::forked_from(s, &ThreadId::new(thread_id)))
    }

    /// Threads in id order after `after`, at most `limit` (default 100).
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn threads(&self, after: Option<String>, limit: Option<u32>) -> AsyncTask<StoreCall> {
        let after = after.map(ThreadId::new);
        let limit = limit_of(limit);
        self.read(move |s| s.threads(after.as_ref(), limit))
    }

    /// Pending tickets in run-id order after `after`, at most `limit` (default 100).
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn pending_tickets(
        &self,
        after: Option<String>,
        limit: Option<u32>,
    ) -> AsyncTask<StoreCall> {
        let after = after.map(RunId::new);
        let limit = limit_of(limit);
        self.read(move |s| s.pending_tickets(after.as_ref(), limit))
    }

    /// Audit events of `scope` (JSON text; `null`: all) with `sequence > after`.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn list_events(
        &self,
        scope: Option<String>,
        after: Option<f64>,
        limit: Option<u32>,
    ) -> napi::Result<AsyncTask<StoreCall>> {
        let scope = match scope {
            Some(text) => decode::<EventScope>("event scope", &text)?,
            None => EventScope::All,
        };
        let after = match after {
            Some(a) if a.is_finite() && a >= 0.0 && a.fract() == 0.0 => Some(a as u64),
            Some(a) => {
                return Err(bad_argument(format!(
                    "after must be a non-negative integer, got {a}"
                )));
            }
            None => None,
        };
        let limit = limit_of(limit);
        Ok(self.read(move |s| s.list_events(&scope, after, limit)))
    }

    /// The thread's spans derived from its commits (SPEC §14), as the OTLP/JSON export body
    /// (JSON text), the bytes `runcore trace THREAD --json` prints; `content` puts message
    /// content in the spans.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn trace(&self, thread_id: String, content: Option<bool>) -> AsyncTask<StoreCall> {
        let options = runcore_traces::TraceOptions {
            content: content.unwrap_or(false),
            ..runcore_traces::TraceOptions::default()
        };
        self.read(move |s| {
            runcore_traces::thread_spans(s, &ThreadId::new(thread_id), &options)
                .map(|spans| runcore_traces::to_otlp_json(&spans, "runcore"))
        })
    }

    /// Pins the thread's committed transcript prefix.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn transcript_snapshot(&self, thread_id: String) -> AsyncTask<StoreCall> {
        self.read(move |s| s.transcript_snapshot(&ThreadId::new(thread_id)))
    }

    /// Checks that a pinned prefix (JSON text) is still committed, unchanged.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn verify_transcript_snapshot(
        &self,
        snapshot: String,
    ) -> napi::Result<AsyncTask<StoreCall>> {
        let snapshot: TranscriptSnapshotRef = decode("transcript snapshot", &snapshot)?;
        Ok(self.read(move |s| s.verify_transcript_snapshot(&snapshot)))
    }

    /// The messages of `ranges` (JSON text of `[start, end]` pairs) within a pinned prefix.
    #[napi(ts_return_type = "Promise<string>", catch_unwind)]
    pub fn transcript_slice(
        &self,
        snapshot: String,
        ranges: String,
    ) -> napi::Result<AsyncTask<StoreCall>> {
        let snapshot: TranscriptSnapshotRef = decode("transcript snapshot", &snapshot)?;
        let pairs: Vec<(usize, usize)> = decode("list of [start, end] ranges", &ranges)?;
        let ranges: Vec<Range<usize>> = pairs.into_iter().map(|(a, b)| a..b).collect();
        Ok(self.read(move |s| s.transcript_slice(&snapshot, &ranges)))
    }
}
