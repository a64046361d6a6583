//! The routes: the pages, the JSON API of SPEC §12.5, and the two static files.
//!
//! | route | what |
//! |---|---|
//! | `GET /` · `/threads/{thread}?from=&limit=` · `/pending` · `/events` | the pages (HTML; a thread a window of its transcript, [`crate::page`]) |
//! | `POST /runs/{run}/decision` | the page's Approve / Deny form (`token` field); 303 to `/pending` |
//! | `GET /api/threads` · `/api/threads/{thread}?from=&limit=` · `/api/pending` · `/api/events` | JSON (`threads --json` lines as an array, one page of `show --json` with `"page"`, `pending --json` lines as an array, events) |
//! | `POST /api/runs/{run}/decision` | `{"decision":"allow","note"?}` / `{"decision":"deny","reason"?}` with `Authorization: Bearer TOKEN` → `200 {"thread_id","version"}` |
//!
//! A write checks the token first (401, nothing read or written), then the body (400), then
//! answers (409 for a run not awaiting a permission, with the §10 error; 409 for a fence).
//! Store calls cross to the synchronous backends through the workspace's one crossing,
//! `runcore_store_blocking::Blocking`: each on tokio's blocking pool, one at a time (one
//! console serves one operator); a call that panics answers 500 and the next one works.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use runcore::driver::ErrorBody;
use runcore::host::AnswerError;
use runcore::store::{CheckpointReader, EventScope};
use runcore::{RunId, ThreadId};
use runcore_store_blocking::Blocking;
use serde_json::{Map, Value};

use crate::html::{self, EventsQuery, Section};
use crate::page::{self, PageInfo, PageQuery};
use crate::shapes;
use crate::token::Token;

mod writes;

use writes::{api_decision, form_decision};

/// Events per page when the query names no limit.
const DEFAULT_EVENTS: u64 = 100;
/// The most events one request returns.
const MAX_EVENTS: u64 = 1000;

const SCRIPT: &str = include_str!("../static/console.js");
const STYLE: &str = include_str!("../static/console.css");

/// Nothing but our own script, style sheet and same-origin requests: a text that escaped
/// escaping still could not run.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What every request shares: the store, its label (redacted) and the token.
pub(crate) struct Shared<S> {
    store: Blocking<S>,
    store_label: String,
    token: Token,
    /// `--allow-remote`: every request needs the token, reads too.
    remote: bool,
}

pub(crate) type AppState<S> = Arc<Shared<S>>;

/// The shared state over `store`. The caller keeps a clone, so that the store is dropped
/// outside the runtime (a blocking backend's client may not be dropped inside one).
pub(crate) fn shared<S: Send + 'static>(
    store: S,
    store_label: String,
    token: Token,
    remote: bool,
) -> AppState<S> {
    Arc::new(Shared {
        store: Blocking::new(store),
        store_label,
        token,
        remote,
    })
}

/// The console's routes over `state`. With `local_hosts`, a request whose `Host` header is
/// not one of them is refused (403): a page of another site that a DNS name pointed at
/// 127.0.0.1 (DNS rebinding) then cannot read the console through the browser either.
pub(crate) fn router<S>(state: AppState<S>, local_hosts: Option<Vec<String>>) -> Router
where
    S: runcore::store::Store + Send + 'static,
{
    let hosts = Arc::new(local_hosts);
    let remote = state.remote;
    let token = state.token.clone();
    let store_label = state.store_label.clone();
    routes(state)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new((remote, token, store_label)),
            check_token_when_remote,
        ))
        .layer(axum::middleware::from_fn(api_errors_as_json))
        .layer(axum::middleware::from_fn_with_state(hosts, check_host))
}

/// Every error under `/api/` in the JSON error shape (`{"kind","message",…}`), whoever made
/// it: the handlers' own errors already are; the router's (404 for an unknown path, 405) and
/// the extractors' (413 for a body over the limit, …) are plain text, and are rewritten here.
async fn api_errors_as_json(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let is_api = request.uri().path().starts_with("/api/") || request.uri().path() == "/api";
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_api || !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned())
        .unwrap_or_default();
    let kind = match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        _ => "http_error",
    };
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("the request failed")
            .to_owned()
    } else {
        text
    };
    Failure::new(status, kind, message).json()
}

/// With `--allow-remote`, every request needs the token, reads too: `Authorization: Bearer
/// TOKEN`, or the `runcore_token` cookie the page's script sets from the `#token=` fragment
/// of the start line's URL. The two static files hold no data and are served to anyone (the
/// script is what turns the fragment into the cookie); the form posts carry the token in a
/// field, which their handler checks.
async fn check_token_when_remote(
    State(settings): State<Arc<(bool, Token, String)>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (remote, token, store_label) = settings.as_ref();
    let path = request.uri().path();
    let exempt = matches!(path, "/console.js" | "/console.css")
        || (request.method() == axum::http::Method::POST && !path.starts_with("/api/"));
    if !*remote || exempt {
        return next.run(request).await;
    }
    let headers = request.headers();
    let given = bearer(headers)
        .map(str::to_owned)
        .or_else(|| cookie_token(headers));
    if given.is_some_and(|given| token.matches(&given)) {
        return next.run(request).await;
    }
    if path.starts_with("/api/") {
        unauthorized().json()
    } else {
        unauthorized().page(store_label)
    }
}

/// The `runcore_token` cookie's value, if the request carries one.
fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix("runcore_token="))
        .map(str::to_owned)
        .next()
}

/// The `Host` values a loopback console at `addr` answers to.
pub(crate) fn local_hosts(addr: std::net::SocketAddr) -> Vec<String> {
    let port = addr.port();
    vec![
        addr.to_string(),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ]
}

async fn check_host(
    State(hosts): State<Arc<Option<Vec<String>>>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(hosts) = hosts.as_ref() {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Failure::new(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                format!(
                    "this console answers to {} only, not to Host {host:?}",
                    hosts.join(", ")
                ),
            )
            .json();
        }
    }
    next.run(request).await
}

fn routes<S>(state: AppState<S>) -> Router
where
    S: runcore::store::Store + Send + 'static,
{
    Router::new()
        .route("/", get(threads_page::<S>))
        .route("/threads/{thread_id}", get(thread_page::<S>))
        .route("/pending", get(pending_page::<S>))
        .route("/events", get(events_page::<S>))
        .route("/runs/{run_id}/decision", post(form_decision::<S>))
        .route("/api/threads", get(api_threads::<S>))
        .route("/api/threads/{thread_id}", get(api_thread::<S>))
        .route("/api/pending", get(api_pending::<S>))
        .route("/api/events", get(api_events::<S>))
        .route("/api/runs/{run_id}/decision", post(api_decision::<S>))
        .route("/console.js", get(script))
        .route("/console.css", get(style))
        .with_state(state)
}

/// A failure to answer a request, as JSON or as a page.
struct Failure {
    status: StatusCode,
    body: ErrorBody,
}

impl Failure {
    fn new(status: StatusCode, kind: &str, message: impl Into<String>) -> Self {
        Failure {
            status,
            body: ErrorBody {
                kind: kind.into(),
                message: message.into(),
                details: Map::new(),
            },
        }
    }

    fn store(error: &runcore::store::StoreError) -> Self {
        Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store",
            format!("reading the store failed: {error}"),
        )
    }

    fn of_answer(error: &AnswerError) -> Self {
        let status = match error {
            AnswerError::Refused(_) | AnswerError::Fenced(_) | AnswerError::Held { .. } => {
                StatusCode::CONFLICT
            }
            AnswerError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Failure {
            status,
            body: error.body(),
        }
    }

    fn json(self) -> Response {
        json_response(self.status, &self.body)
    }

    fn page(self, store_label: &str) -> Response {
        let body = html::error_page(self.status.as_u16(), &self.body.message);
        page_response(
            self.status,
            html::layout("Error", Section::Pending, store_label, &body),
        )
    }
}

fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn json_response(status: StatusCode, value: &impl serde::Serialize) -> Response {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    secured(
        (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            format!("{text}\n"),
        )
            .into_response(),
    )
}

fn page_response(status: StatusCode, html: String) -> Response {
    secured(
        (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            html,
        )
            .into_response(),
    )
}

/// Runs `f` on the store on the blocking pool; a call that panicked (or could not finish) is
/// a 500, and leaves the store usable for the next request.
async fn with_store<S, T>(
    state: &AppState<S>,
    f: impl FnOnce(&mut S) -> T + Send + 'static,
) -> Result<T, Failure>
where
    S: Send + 'static,
    T: Send + 'static,
{
    state.store.call(f).await.map_err(|e| {
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("a store call failed: {e}"),
        )
    })
}

// ----- reads ---------------------------------------------------------------------------------

/// Threads per page of the thread list.
const THREADS_PAGE: usize = 100;

/// The thread list: the threads waiting for a person first, then one page of every thread
/// (`?after=THREAD`, [`THREADS_PAGE`] a page) whose id contains `?q=` (any case).
async fn threads_page<S>(
    State(state): State<AppState<S>>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response
where
    S: runcore::store::Store + Send + 'static,
{
    let search = query
        .get("q")
        .map(|q| q.trim().to_owned())
        .unwrap_or_default();
    let after = query.get("after").filter(|a| !a.is_empty()).cloned();
    let read = move |s: &mut S| {
        let lines = shapes::threads(&*s)?;
        let mut waiting: Vec<String> = shapes::pending(&*s)?
            .into_iter()
            .map(|ticket| ticket.thread_id.to_string())
            .collect();
        waiting.dedup();
        Ok::<_, runcore::store::StoreError>((lines, waiting))
    };
    match with_store(&state, read).await {
        Ok(Ok((lines, waiting))) => {
            let needle = search.to_lowercase();
            let matching: Vec<shapes::ThreadLine> = lines
                .into_iter()
                .filter(|line| {
                    needle.is_empty() || line.thread_id.as_str().to_lowercase().contains(&needle)
                })
                .collect();
            let waiting: Vec<&shapes::ThreadLine> = matching
                .iter()
                .filter(|line| waiting.iter().any(|w| w == line.thread_id.as_str()))
                .take(THREADS_PAGE)
                .collect();
            let start = after.as_deref().map_or(0, |after| {
                matching.partition_point(|line| line.thread_id.as_str() <= after)
            });
            let page: Vec<&shapes::ThreadLine> =
                matching.iter().skip(start).take(THREADS_PAGE).collect();
            let next = (start + page.len() < matching.len())
                .then(|| page.last().map(|line| line.thread_id.to_string()))
                .flatten();
            let list = html::ThreadList {
                waiting: &waiting,
                page: &page,
                total: matching.len(),
                search: &search,
                first: after.is_some(),
                next: next.as_deref(),
            };
            page_response(
                StatusCode::OK,
                html::layout(
                    "Threads",
                    Section::Threads,
                    &state.store_label,
                    &html::threads_page(&list, shapes::wall_clock_ms()),
                ),
            )
        }
        Ok(Err(e)) => Failure::store(&e).page(&state.store_label),
        Err(f) => f.page(&state.store_label),
    }
}

/// Where each run of `thread` starts in the transcript: its `run_started.transcript_start`, or
/// for an import (no `run_started`) its commit's transcript length less the count it
/// imported, and 0 for a fork's import (the thread's first commit).
fn run_starts(
    store: &impl CheckpointReader,
    thread: &ThreadId,
) -> Result<html::RunStarts, runcore::store::StoreError> {
    let mut starts = Vec::new();
    let mut imported: Option<(String, usize)> = None;
    shapes::for_each_event_page(
        store,
        &EventScope::Thread(thread.clone()),
        None,
        None,
        |page| {
            for event in page {
                let number = |key: &str| {
                    event
                        .payload
                        .get(key)
                        .and_then(Value::as_u64)
                        .and_then(|n| usize::try_from(n).ok())
                };
                match event.kind.as_str() {
                    "run_started" => {
                        if let Some(at) = number("transcript_start") {
                            starts.push((at, event.run_id.to_string()));
                        }
                    }
                    "imported" => {
                        imported = Some((event.run_id.to_string(), number("count").unwrap_or(0)));
                    }
                    "forked_from" => {
                        imported = None;
                        starts.push((0, event.run_id.to_string()));
                    }
                    // Last in the import's commit: the transcript's length after it.
                    "commit_clock" => {
                        if let Some((run, count)) = imported.take()
                            && run == event.run_id.as_str()
                        {
                            let len = number("transcript_len").unwrap_or(0);
                            starts.push((len.saturating_sub(count), run));
                        }
                    }
                    _ => {}
                }
            }
            Ok::<(), runcore::store::StoreError>(())
        },
    )?;
    Ok(starts)
}

/// `show`'s view of a thread, where each of its runs starts in the transcript, and its spans
/// derived from its commits (SPEC §14: the timeline and the decisions).
fn thread_with_starts(
    store: &(impl CheckpointReader + runcore::store::ThreadClaims),
    thread: &ThreadId,
) -> Result<
    (
        shapes::ThreadView,
        html::RunStarts,
        Vec<runcore_traces::Span>,
        Vec<runcore::host::Forked>,
    ),
    runcore::store::StoreError,
> {
    let view = shapes::show(store, thread)?;
    let forks = shapes::forks_of(store, thread)?;
    let starts = run_starts(store, thread)?;
    let options = runcore_traces::TraceOptions::default();
    let spans = match runcore_traces::spans_from_store(store, thread, None, &options) {
        Ok(spans) => spans,
        Err(runcore_traces::TraceError::Store(error)) => return Err(error),
        // Without a run filter nothing else can fail; show the page without a timeline.
        Err(_) => Vec::new(),
    };
    Ok((view, starts, spans, forks))
}

/// A thread the store knows nothing of: no commit and no live claim (a claim on a thread
/// with no commit yet is shown).
fn unknown(view: &shapes::ThreadView) -> bool {
    view.version == 0 && view.claim.is_none()
}

/// 404 for a thread the store knows nothing of (issue 43: it was 200 with an empty thread).
fn not_found(thread: &ThreadId) -> Failure {
    Failure::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "thread {:?} has no commit and no live claim in this store",
            thread.as_str()
        ),
    )
}

/// The `from` and `limit` of a thread page's query (`?from=&limit=`, message indexes).
fn page_query(query: &BTreeMap<String, String>) -> Result<PageQuery, Failure> {
    let number = |name: &str| -> Result<Option<usize>, Failure> {
        match query.get(name).map(String::as_str) {
            None | Some("") => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|_| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_query",
                    format!("{name} must be a whole number, not {text:?}"),
                )
            }),
        }
    };
    Ok(PageQuery {
        from: number("from")?,
        limit: number("limit")?,
    })
}

async fn thread_page<S>(
    State(state): State<AppState<S>>,
    Path(thread_id): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response
where
    S: runcore::store::Store + Send + 'static,
{
    let query = match page_query(&query) {
        Ok(query) => query,
        Err(f) => return f.page(&state.store_label),
    };
    let thread = ThreadId::new(thread_id);
    let title = format!("Thread {thread}");
    match with_store(&state, move |s| thread_with_starts(&*s, &thread)).await {
        Ok(Ok((view, ..))) if unknown(&view) => not_found(&view.thread_id).page(&state.store_label),
        Ok(Ok((view, starts, spans, forks))) => {
            let page = PageInfo::of(query, view.messages.len(), view.runs.len());
            page_response(
                StatusCode::OK,
                html::layout(
                    &title,
                    Section::Threads,
                    &state.store_label,
                    &html::thread_page(
                        &view,
                        &page,
                        &starts,
                        &spans,
                        &forks,
                        shapes::wall_clock_ms(),
                    ),
                ),
            )
        }
        Ok(Err(e)) => Failure::store(&e).page(&state.store_label),
        Err(f) => f.page(&state.store_label),
    }
}

async fn pending_page<S>(
    State(state): State<AppState<S>>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response
where
    S: runcore::store::Store + Send + 'static,
{
    let notice = match (
        query.get("answered"),
        query.get("decision"),
        query.get("version"),
    ) {
        (Some(run), Some(decision), Some(version)) => {
            let verb = if decision == "deny" {
                "denied"
            } else {
                "approved"
            };
            Some(format!(
                "Run {run} {verb}: its thread is now at version {version}. The next worker \
                 on the thread takes it from here."
            ))
        }
        _ => None,
    };
    match with_store(&state, |s| shapes::pending(&*s)).await {
        Ok(Ok(tickets)) => page_response(
            StatusCode::OK,
            html::layout(
                "Pending",
                Section::Pending,
                &state.store_label,
                &html::pending_page(&tickets, notice.as_deref(), shapes::wall_clock_ms()),
            ),
        ),
        Ok(Err(e)) => Failure::store(&e).page(&state.store_label),
        Err(f) => f.page(&state.store_label),
    }
}

/// The `thread`, `run`, `from` and `limit` of an events query.
fn events_query(query: &BTreeMap<String, String>) -> Result<EventsQuery, Failure> {
    let bad = |message: String| Failure::new(StatusCode::BAD_REQUEST, "invalid_query", message);
    let number = |name: &str| -> Result<Option<u64>, Failure> {
        match query.get(name).map(String::as_str) {
            None | Some("") => Ok(None),
            Some(text) => text
                .parse()
                .map(Some)
                .map_err(|_| bad(format!("{name} must be a whole number, not {text:?}"))),
        }
    };
    let text = |name: &str| query.get(name).filter(|v| !v.is_empty()).cloned();
    let (thread, run) = (text("thread"), text("run"));
    if thread.is_some() && run.is_some() {
        return Err(bad("give thread or run, not both".into()));
    }
    Ok(EventsQuery {
        thread,
        run,
        from: number("from")?,
        limit: number("limit")?.unwrap_or(DEFAULT_EVENTS).min(MAX_EVENTS),
    })
}

fn scope_of(query: &EventsQuery) -> EventScope {
    match (&query.thread, &query.run) {
        (Some(thread), _) => EventScope::Thread(ThreadId::new(thread.as_str())),
        (None, Some(run)) => EventScope::Run(RunId::new(run.as_str())),
        (None, None) => EventScope::All,
    }
}

async fn read_events<S>(
    state: &AppState<S>,
    query: &EventsQuery,
) -> Result<Vec<runcore::store::EventRecord>, Failure>
where
    S: runcore::store::Store + Send + 'static,
{
    let (scope, from, limit) = (scope_of(query), query.from, query.limit);
    with_store(state, move |s| shapes::events(&*s, &scope, from, limit))
        .await?
        .map_err(|e| Failure::store(&e))
}

async fn events_page<S>(
    State(state): State<AppState<S>>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response
where
    S: runcore::store::Store + Send + 'static,
{
    let query = match events_query(&query) {
        Ok(query) => query,
        Err(f) => return f.page(&state.store_label),
    };
    match read_events(&state, &query).await {
        Ok(events) => page_response(
            StatusCode::OK,
            html::layout(
                "Events",
                Section::Events,
                &state.store_label,
                &html::events_page(&events, &query, shapes::wall_clock_ms()),
            ),
        ),
        Err(f) => f.page(&state.store_label),
    }
}

async fn api_threads<S>(State(state): State<AppState<S>>) -> Response
where
    S: runcore::store::Store + Send + 'static,
{
    match with_store(&state, |s| shapes::threads(&*s)).await {
        Ok(Ok(lines)) => json_response(StatusCode::OK, &lines),
        Ok(Err(e)) => Failure::store(&e).json(),
        Err(f) => f.json(),
    }
}

/// `show --json`'s shape for one page of the thread (see [`crate::page`]): `messages` and
/// `runs` cut to the window, and `"page"` saying where it is.
async fn api_thread<S>(
    State(state): State<AppState<S>>,
    Path(thread_id): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response
where
    S: runcore::store::Store + Send + 'static,
{
    let query = match page_query(&query) {
        Ok(query) => query,
        Err(f) => return f.json(),
    };
    let thread = ThreadId::new(thread_id);
    let read = move |s: &mut S| {
        let view = shapes::show(&*s, &thread)?;
        let starts = run_starts(&*s, &thread)?;
        Ok::<_, runcore::store::StoreError>(page::thread_page(view, &starts, query))
    };
    match with_store(&state, read).await {
        Ok(Ok(page)) if unknown(&page.view) => not_found(&page.view.thread_id).json(),
        Ok(Ok(view)) => json_response(StatusCode::OK, &view),
        Ok(Err(e)) => Failure::store(&e).json(),
        Err(f) => f.json(),
    }
}

async fn api_pending<S>(State(state): State<AppState<S>>) -> Response
where
    S: runcore::store::Store + Send + 'static,
{
    match with_store(&state, |s| shapes::pending(&*s)).await {
        Ok(Ok(tickets)) => json_response(StatusCode::OK, &tickets),
        Ok(Err(e)) => Failure::store(&e).json(),
        Err(f) => f.json(),
    }
}

async fn api_events<S>(
    State(state): State<AppState<S>>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response
where
    S: runcore::store::Store + Send + 'static,
{
    let query = match events_query(&query) {
        Ok(query) => query,
        Err(f) => return f.json(),
    };
    match read_events(&state, &query).await {
        Ok(events) => json_response(StatusCode::OK, &events),
        Err(f) => f.json(),
    }
}

// ----- writes --------------------------------------------------------------------------------

fn unauthorized() -> Failure {
    Failure::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "this needs the console's token (printed at its start): send Authorization: Bearer \
         TOKEN, or fill in the page's token box; nothing was written",
    )
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

async fn script() -> Response {
    secured(
        (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            SCRIPT,
        )
            .into_response(),
    )
}

async fn style() -> Response {
    secured(([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response())
}
