//! Bad input and failures, each through a real Restate server and an endpoint served from
//! this test process (so a test can count attempts and put a store behind it that refuses):
//! a misuse input is a terminal error carrying the §10 kind and message, and the thread is
//! unchanged; a transient model or tool failure is retried by policy and then becomes data;
//! a store that refuses a commit ends the invocation with a terminal error naming it; a store
//! call that panics or fails fails only its own invocation (retried until the cause is gone),
//! never the other threads'. With `otlp` set, each run's spans reach a collector once its
//! terminal commit is stored.

mod support;

#[allow(dead_code)]
#[path = "../../../cli/tests/common/collector.rs"]
mod collector;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use restate_sdk::prelude::{Endpoint, HttpServer};
use runcore::store::{
    BoxedStore, CommitLog, CommittedThreadView, Intercept, Intercepted, MemoryStore, StoreError,
};
use runcore::{
    Agent, AssistantMessage, CommitError, CommitOperation, CommitReceipt, Message, RecoveryPolicy,
    RunDisposition, RunId, ThreadCommit, ThreadId, ToolCall, ToolOutput, UserMessage,
};
use runcore_otlp::OtlpExporter;
use runcore_restate::script::{ScriptedModel, ScriptedTools, scripted_config};
use runcore_restate::{
    Model, ModelCall, SharedStore, StepFuture, ThreadHost, ThreadObject, Tools, shared,
};
use runcore_store_blocking::BlockingError;
use runcore_traces::{TraceOptions, thread_spans};
use serde_json::Value;
use support::{Server, server_binary, temp_dir};

/// An endpoint served on a thread of this process until dropped.
struct InProcess {
    port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InProcess {
    fn serve(host: ThreadHost) -> InProcess {
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                let port = listener.local_addr().expect("address").port();
                port_tx.send(port).expect("send the port");
                let endpoint = Endpoint::builder().bind(ThreadObject::new(host)).build();
                HttpServer::new(endpoint)
                    .serve_with_cancel(listener, stopped)
                    .await;
            });
        });
        let port = port_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the endpoint listens");
        InProcess {
            port,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Counts the calls it forwards.
struct Counting<T> {
    inner: T,
    calls: Arc<AtomicUsize>,
}

impl Model for Counting<ScriptedModel> {
    fn call(&self, call: ModelCall) -> StepFuture<AssistantMessage> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.call(call)
    }
}

impl Tools for Counting<ScriptedTools> {
    fn execute(&self, run_id: RunId, call: ToolCall) -> StepFuture<ToolOutput> {
        if call.name.as_str() == "fragile" {
            self.calls.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.execute(run_id, call)
    }
}

struct Cluster {
    server: Server,
    _endpoint: InProcess,
    store: SharedStore,
    model_calls: Arc<AtomicUsize>,
    fragile_calls: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

fn cluster(label: &str, store: BoxedStore) -> Option<Cluster> {
    cluster_exporting(label, store, None)
}

fn cluster_exporting(
    label: &str,
    store: BoxedStore,
    otlp: Option<Arc<OtlpExporter>>,
) -> Option<Cluster> {
    let binary = server_binary()?;
    let dir = temp_dir(label);
    let server = Server::start(binary, dir.path());
    let store = shared(store);
    let model_calls = Arc::new(AtomicUsize::new(0));
    let fragile_calls = Arc::new(AtomicUsize::new(0));
    let mut host = ThreadHost::new(
        scripted_config(Some(600_000)),
        Arc::new(Counting {
            inner: ScriptedModel::default(),
            calls: model_calls.clone(),
        }),
        Arc::new(Counting {
            inner: ScriptedTools::default(),
            calls: fragile_calls.clone(),
        }),
        store.clone(),
    );
    host.otlp = otlp;
    let endpoint = InProcess::serve(host);
    server.register(endpoint.port);
    Some(Cluster {
        server,
        _endpoint: endpoint,
        store,
        model_calls,
        fragile_calls,
        _dir: dir,
    })
}

/// The §10 body inside a terminal error's answer.
fn error_body(answer: &Value) -> Value {
    let message = answer["message"].as_str().unwrap_or_default();
    serde_json::from_str(message).unwrap_or_else(|_| panic!("not a §10 body: {answer}"))
}

fn version(store: &SharedStore, thread: &str) -> u64 {
    store
        .call_blocking(|store| store.thread_version(&ThreadId::from(thread)))
        .expect("the call")
        .expect("version")
}

fn transcript(store: &SharedStore, thread: &str) -> Vec<Message> {
    let mut config = scripted_config(Some(600_000));
    config.thread_id = ThreadId::from(thread);
    let agent = store
        .call_blocking(|store| {
            Agent::recover(
                config,
                store,
                &ThreadId::from(thread),
                RecoveryPolicy::Replay,
            )
        })
        .expect("the call")
        .expect("recover");
    agent.transcript().to_vec()
}

#[test]
fn misuse_inputs_are_terminal_errors_carrying_the_kind_and_leave_the_thread_unchanged() {
    let Some(c) = cluster("misuse", Box::new(MemoryStore::new())) else {
        return;
    };
    let s = &c.server;

    // A steer while idle.
    let (status, answer) = s.call("t", "steer", r#"{"text":"hurry"}"#, None);
    assert_eq!(status, 409, "{answer}");
    let body = error_body(&answer);
    assert_eq!(body["kind"], "not_accepting", "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("not accepted"))
    );
    assert_eq!(version(&c.store, "t"), 0);
    assert_eq!(s.state("t")["status"], "idle");

    // A malformed body, and a body with a field the input does not have.
    let (status, answer) = s.call("t", "prompt", "{", None);
    assert_eq!(status, 400, "{answer}");
    assert_eq!(error_body(&answer)["kind"], "invalid_json");
    let (status, answer) = s.call("t", "prompt", r#"{"txt":"hello"}"#, None);
    assert_eq!(status, 400, "{answer}");
    assert_eq!(error_body(&answer)["kind"], "invalid_json");
    assert_eq!(version(&c.store, "t"), 0);

    // A thread waiting for approval.
    let (status, waiting) = s.call("t", "prompt", r#"{"text":"lookup 1 deploy"}"#, Some("p1"));
    assert_eq!(status, 200, "{waiting}");
    assert_eq!(waiting["status"], "awaiting");
    let before = version(&c.store, "t");

    // A resume for a stale ticket.
    let stale =
        r#"{"result":{"type":"permission","decision":"allow"},"correlation_id":"t/run-1:wait-9"}"#;
    let (status, answer) = s.call("t", "resume", stale, None);
    assert_eq!(status, 409, "{answer}");
    let body = error_body(&answer);
    assert_eq!(body["kind"], "resume", "{body}");
    assert_eq!(body["resume_error"], "correlation_mismatch", "{body}");
    // A resume whose result does not fit the wait.
    let (status, answer) = s.call(
        "t",
        "resume",
        r#"{"result":{"type":"input","text":"x"}}"#,
        None,
    );
    assert_eq!(status, 409, "{answer}");
    assert_eq!(error_body(&answer)["resume_error"], "result_kind_mismatch");
    // A second prompt while a run waits.
    let (status, answer) = s.call("t", "prompt", r#"{"text":"again"}"#, None);
    assert_eq!(status, 409, "{answer}");
    assert_eq!(error_body(&answer)["kind"], "busy");

    // A `timeout` that arrives before the deadline is a no-op (not an error).
    let (status, early) = s.call("t", "timeout", "", None);
    assert_eq!(status, 200, "{early}");
    assert_eq!(early, waiting);

    // Unchanged: the same version in the store, the same ticket in the object.
    assert_eq!(version(&c.store, "t"), before);
    assert_eq!(s.state("t"), waiting);

    // The right answer still works, and a second resume after it is `not_waiting`.
    let allow = r#"{"result":{"type":"permission","decision":"allow"}}"#;
    let (status, done) = s.call("t", "resume", allow, Some("r1"));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["last_end"]["cause"]["type"], "natural_end");
    let (status, answer) = s.call("t", "resume", allow, Some("r2"));
    assert_eq!(status, 409, "{answer}");
    assert_eq!(error_body(&answer)["resume_error"], "not_waiting");
}

#[test]
fn a_transient_model_failure_is_retried_then_becomes_model_failed() {
    let Some(c) = cluster("model", Box::new(MemoryStore::new())) else {
        return;
    };
    let (status, view) = c
        .server
        .call("m", "prompt", r#"{"text":"flaky-model"}"#, None);
    assert_eq!(status, 200, "the invocation completes: {view}");
    let cause = &view["last_end"]["cause"];
    assert_eq!(cause["type"], "error", "{view}");
    assert_eq!(cause["failure"]["type"], "inference");
    assert_eq!(cause["failure"]["code"], "step_retries_exhausted");
    assert!(
        cause["failure"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("model_unavailable"))
    );
    assert_eq!(c.model_calls.load(Ordering::SeqCst), 3, "three attempts");
    // The failure is data in the store: the assistant error message ends the transcript.
    let messages = transcript(&c.store, "m");
    assert!(matches!(messages.last(), Some(Message::Assistant(a)) if a.error_message.is_some()));
}

#[test]
fn a_transient_tool_failure_is_retried_then_becomes_an_error_result() {
    let Some(c) = cluster("tool", Box::new(MemoryStore::new())) else {
        return;
    };
    let (status, view) = c
        .server
        .call("f", "prompt", r#"{"text":"lookup 1 fragile"}"#, None);
    assert_eq!(status, 200, "the invocation completes: {view}");
    assert_eq!(view["last_end"]["cause"]["type"], "natural_end", "{view}");
    assert_eq!(c.fragile_calls.load(Ordering::SeqCst), 3, "three attempts");
    let messages = transcript(&c.store, "f");
    let result = messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult(r) if r.call_id.as_str() == "call-fragile" => Some(r.clone()),
            _ => None,
        })
        .expect("the fragile call has a result");
    assert!(result.is_error);
}

#[test]
fn with_otlp_a_run_is_exported_once_its_terminal_commit_is_stored() {
    let collector = collector::collector();
    let exporter = OtlpExporter::new(&collector.url, "runcore").expect("an exporter");
    let Some(c) = cluster_exporting(
        "otlp",
        Box::new(MemoryStore::new()),
        Some(Arc::new(exporter)),
    ) else {
        return;
    };
    let (status, view) = c.server.call("o", "prompt", r#"{"text":"lookup 1"}"#, None);
    assert_eq!(status, 200, "the invocation completes: {view}");
    assert_eq!(view["last_end"]["cause"]["type"], "natural_end", "{view}");
    let export = collector
        .exports
        .recv_timeout(Duration::from_secs(30))
        .expect("the ended run's spans");
    assert_eq!(export.path, "/v1/traces");
    assert_eq!(export.content_type, "application/x-protobuf");
    let request =
        ExportTraceServiceRequest::decode(export.body.as_slice()).expect("a protobuf request");
    let exported: Vec<(String, Vec<u8>, Vec<u8>)> = request
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .map(|span| {
            (
                span.name.clone(),
                span.span_id.clone(),
                span.parent_span_id.clone(),
            )
        })
        .collect();
    // What was exported is what the store's commits derive: the same spans, the same ids.
    let derived = c
        .store
        .call_blocking(|store| {
            thread_spans(&**store, &ThreadId::from("o"), &TraceOptions::default())
        })
        .expect("the call")
        .expect("spans");
    let hex = |bytes: &[u8]| -> String { bytes.iter().map(|b| format!("{b:02x}")).collect() };
    assert_eq!(
        exported
            .iter()
            .map(|(name, id, parent)| (name.clone(), hex(id), hex(parent)))
            .collect::<Vec<_>>(),
        derived
            .iter()
            .map(|span| (
                span.name.clone(),
                span.span_id.clone(),
                span.parent_span_id.clone().unwrap_or_default()
            ))
            .collect::<Vec<_>>()
    );
    assert_eq!(exported.first().map(|s| s.0.as_str()), Some("invoke_agent"));
    assert!(
        exported.iter().any(|s| s.0.starts_with("execute_tool")),
        "{exported:?}"
    );
    assert!(
        collector
            .exports
            .recv_timeout(Duration::from_millis(500))
            .is_err(),
        "one export for the one run"
    );
}

/// A store with a second writer: just before the object's second commit on thread `fenced`,
/// another writer commits on that thread, so the object's commit meets a real version fence.
struct SecondWriter {
    inner: MemoryStore,
    commits: usize,
}

impl Intercept for SecondWriter {
    type Inner = MemoryStore;

    fn inner(&self) -> &MemoryStore {
        &self.inner
    }

    fn inner_mut(&mut self) -> &mut MemoryStore {
        &mut self.inner
    }

    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        self.commits += 1;
        if self.commits == 2 {
            let intruder = ThreadCommit::assemble(
                ThreadId::from("fenced"),
                RunDisposition::Running {
                    run_id: RunId::from("intruder/run-1"),
                },
                true,
                vec![Message::from(UserMessage::text("another writer"))],
                Vec::new(),
                Vec::new(),
            );
            self.inner.commit(intruder)?;
        }
        CommitLog::commit_operation(&mut self.inner, operation)
    }
}

#[test]
fn a_store_that_refuses_a_commit_ends_the_invocation_with_a_terminal_error_naming_it() {
    let store = SecondWriter {
        inner: MemoryStore::new(),
        commits: 0,
    };
    let Some(c) = cluster("fence", Box::new(Intercepted(store))) else {
        return;
    };
    let (status, answer) = c
        .server
        .call("fenced", "prompt", r#"{"text":"lookup 2"}"#, None);
    assert_eq!(
        status, 409,
        "a terminal error, not retried forever: {answer}"
    );
    let body = error_body(&answer);
    assert_eq!(body["kind"], "store", "{body}");
    assert_eq!(body["reason"], "version_conflict", "{body}");
    let expected = CommitError::VersionConflict {
        expected: 1,
        actual: 2,
    };
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("version_conflict") && m.contains(&expected.to_string())),
        "{body}"
    );
    // The object's first commit and the intruder's; nothing of the refused one.
    assert_eq!(version(&c.store, "fenced"), 2);
}

/// A store with a fault switch for two threads: while it is on, every call on thread
/// `panics` panics inside the store (as the PostgreSQL client did when it was called on an
/// async thread) and every call on thread `fails` answers `unavailable`; the other threads
/// are served normally throughout.
struct FaultSwitch {
    inner: MemoryStore,
    on: Arc<AtomicBool>,
    faults: Arc<AtomicUsize>,
}

impl FaultSwitch {
    fn fault(&self, thread: &ThreadId) -> Result<(), StoreError> {
        if !self.on.load(Ordering::SeqCst) {
            return Ok(());
        }
        match thread.as_str() {
            "panics" => {
                self.faults.fetch_add(1, Ordering::SeqCst);
                panic!("the store's client panicked (a fault switched on by the test)")
            }
            "fails" => {
                self.faults.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::unavailable(
                    "the store went away (a fault switched on)",
                ))
            }
            _ => Ok(()),
        }
    }
}

impl Intercept for FaultSwitch {
    type Inner = MemoryStore;

    fn inner(&self) -> &MemoryStore {
        &self.inner
    }

    fn inner_mut(&mut self) -> &mut MemoryStore {
        &mut self.inner
    }

    // Every handler reads the thread's version first (its `load` step), then recovers from
    // it: a fault here fails the invocation before anything is read or written.
    fn thread_version(&self, thread: &ThreadId) -> Result<u64, StoreError>
    where
        Self::Inner: CommittedThreadView,
    {
        self.fault(thread)?;
        self.inner.thread_version(thread)
    }

    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        self.fault(&operation.commit.thread_id)?;
        CommitLog::commit_operation(&mut self.inner, operation)
    }
}

#[test]
fn a_failing_handler_fails_only_its_invocation_and_finishes_once_the_cause_is_gone() {
    let on = Arc::new(AtomicBool::new(true));
    let faults = Arc::new(AtomicUsize::new(0));
    let store = FaultSwitch {
        inner: MemoryStore::new(),
        on: on.clone(),
        faults: faults.clone(),
    };
    let Some(c) = cluster("fault", Box::new(Intercepted(store))) else {
        return;
    };
    let healthy = ["ok-1", "ok-2", "ok-3"];
    for thread in ["panics", "fails"].iter().chain(&healthy) {
        let (status, answer) = c
            .server
            .call(thread, "prompt/send", r#"{"text":"lookup 2"}"#, None);
        assert!((200..300).contains(&status), "{thread}: {status} {answer}");
    }
    // The other threads finish while the two keep failing (and are retried).
    for thread in healthy {
        c.server.wait_for(thread, Duration::from_secs(60), |s| {
            s["status"] == "idle" && s["last_end"]["cause"]["type"] == "natural_end"
        });
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while faults.load(Ordering::SeqCst) < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the failed invocations were not retried"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for thread in ["panics", "fails"] {
        let view = c.server.state(thread);
        assert_eq!(view["version"], 0, "{thread}: nothing saved yet: {view}");
        assert!(view["last_end"].is_null(), "{thread}: {view}");
    }
    // A panicking store call is an error of that call; the shared store was not poisoned by
    // the panics and still answers for the other threads.
    let panicked = c
        .store
        .call_blocking(|store| store.thread_version(&ThreadId::from("panics")));
    assert!(
        matches!(&panicked, Err(BlockingError::Panicked(text)) if text.contains("fault switched on")),
        "{panicked:?}"
    );
    assert!(version(&c.store, "ok-1") > 0);
    assert_eq!(version(&c.store, "ok-1"), version(&c.store, "ok-2"));

    // The cause removed, both finish by Restate's retries, as the healthy ones did.
    on.store(false, Ordering::SeqCst);
    for thread in ["panics", "fails"] {
        let view = c.server.wait_for(thread, Duration::from_secs(60), |s| {
            s["status"] == "idle" && s["last_end"].is_object()
        });
        assert_eq!(view["last_end"]["cause"]["type"], "natural_end", "{view}");
        assert_eq!(
            version(&c.store, thread),
            version(&c.store, "ok-1"),
            "{thread}"
        );
        assert_eq!(
            transcript(&c.store, thread).len(),
            transcript(&c.store, "ok-1").len(),
            "{thread}"
        );
    }
}

/// A TCP proxy in front of the PostgreSQL server that a test can cut (every connection
/// through it closed, new ones refused at once) and restore: the store going away and coming
/// back, without stopping the server other tests share.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    open: Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Proxy {
    fn start(target: String) -> Proxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("address").port();
        let up = Arc::new(AtomicBool::new(true));
        let open = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (accept_up, accept_open) = (up.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if !accept_up.load(Ordering::SeqCst) {
                    continue; // dropped: the connection is refused
                }
                let Ok(server) = std::net::TcpStream::connect(&target) else {
                    continue;
                };
                let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
                    client.try_clone(),
                    server.try_clone(),
                    client.try_clone(),
                    server.try_clone(),
                ) else {
                    continue;
                };
                if let Ok(mut open) = accept_open.lock() {
                    open.push(c3);
                    open.push(s3);
                }
                let (mut from_client, mut to_server) = (client, server);
                let (mut from_server, mut to_client) = (s2, c2);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from_client, &mut to_server);
                    let _ = to_server.shutdown(std::net::Shutdown::Both);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from_server, &mut to_client);
                    let _ = to_client.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Proxy { port, up, open }
    }

    /// Closes every connection through the proxy and refuses new ones.
    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for stream in self.open.lock().expect("the proxy's list").drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Lets connections through again.
    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_store_that_goes_away_mid_invocation_fails_it_and_the_thread_finishes_once_it_is_back() {
    let Some(binary) = server_binary() else {
        return;
    };
    let Some(direct) = support::postgres_store("outage") else {
        return;
    };
    // postgresql://user@HOST:PORT/db?… → the same through the proxy.
    let authority = |url: &str| -> Option<(usize, usize)> {
        let start = url.find("://")? + 3;
        let end = start + url[start..].find('/')?;
        let host = url[start..end]
            .rfind('@')
            .map_or(start, |at| start + at + 1);
        Some((host, end))
    };
    let (host, end) = authority(&direct).expect("RUNCORE_PG_URL names host:port");
    let proxy = Proxy::start(direct[host..end].to_owned());
    let url = format!(
        "{}127.0.0.1:{}{}",
        &direct[..host],
        proxy.port,
        &direct[end..]
    );

    let dir = temp_dir("outage");
    let server = Server::start(binary, dir.path());
    let record = dir.path().join("tools");
    let gate = dir.path().join("gate");
    let tools = ScriptedTools {
        gate: Some(Arc::new(gate.clone())),
        ..ScriptedTools::recording(record.clone(), Duration::ZERO).expect("record dir")
    };
    let store = runcore_restate::open_store(&url).expect("open through the proxy");
    let host = ThreadHost::new(
        scripted_config(Some(600_000)),
        Arc::new(ScriptedModel::default()),
        Arc::new(tools),
        store.clone(),
    );
    let endpoint = InProcess::serve(host);
    server.register(endpoint.port);

    let (status, answer) = server.call("outage", "prompt/send", r#"{"text":"lookup 2"}"#, None);
    assert!((200..300).contains(&status), "{status} {answer}");
    // The second call is held at the gate: the first call's result is committed.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(record.join("starts.log"))
        .is_ok_and(|t| t.lines().any(|l| l.ends_with(":call-2")))
    {
        assert!(std::time::Instant::now() < deadline, "call-2 never started");
        std::thread::sleep(Duration::from_millis(10));
    }

    // The store goes away; the call completes; its commit fails, and so do the retries.
    proxy.cut();
    std::fs::write(&gate, b"open").expect("open the gate");
    std::thread::sleep(Duration::from_millis(1500));
    let view = server.state("outage");
    assert!(
        view["last_end"].is_null(),
        "finished without its store: {view}"
    );

    // Back: the thread finishes, as a single-process run of the same script does.
    proxy.restore();
    let view = server.wait_for("outage", Duration::from_secs(60), |s| {
        s["status"] == "idle" && s["last_end"].is_object()
    });
    assert_eq!(view["last_end"]["cause"]["type"], "natural_end", "{view}");
    let reference =
        support::single_process_run("outage", "lookup 2", 600_000, support::Answer::None);
    let thread = ThreadId::from("outage");
    let stored = runcore_store_url::open(
        &runcore_store_url::StoreUrl::parse(&direct).expect("a store URL"),
        runcore_store_url::Access::Read,
    )
    .expect("open the store");
    use runcore::store::CommittedThreadView;
    assert_eq!(
        stored.committed_messages(&thread).expect("messages"),
        reference.committed_messages(&thread).expect("reference")
    );
    assert_eq!(
        CommittedThreadView::thread_version(&stored, &thread).expect("version"),
        CommittedThreadView::thread_version(&reference, &thread).expect("reference")
    );
    drop(endpoint);
    drop(store);
}

#[test]
fn a_worker_given_an_unreachable_store_exits_2_with_one_line_naming_it() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_runcore-restate-worker"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--store",
            "postgresql://nobody:s3cret@127.0.0.1:1/db",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the worker");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr
            .starts_with("runcore-restate-worker: --store postgresql://nobody:***@127.0.0.1:1/db"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

#[test]
fn a_worker_given_a_bad_otlp_url_exits_2_with_one_line_naming_it() {
    let dir = temp_dir("bad-otlp");
    let store = format!("sqlite:{}", dir.path().join("runs.db").display());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_runcore-restate-worker"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--store",
            &store,
            "--otlp",
            "https://collector:4318",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the worker");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with("runcore-restate-worker: --otlp: \"https://collector:4318\""),
        "{stderr}"
    );
}
