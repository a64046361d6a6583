//! Test support: a Restate server this test starts, SIGKILLs and restarts on the same
//! directory; worker processes; a minimal HTTP/1.1 client for the ingress and admin APIs;
//! and the single-process reference run of a script.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use runcore::host::script::{self, ModelTurn, Script};
use runcore::store::{CommitLog, MemoryStore};
use runcore::{
    Agent, ModelRequest, Output, PermissionDecision, ResumeResult, RunId, ThreadId, ToolCall,
    UserMessage,
};
use runcore_restate::Tools;
use runcore_restate::script::{ScriptedTools, answer, scripted_config};
use serde_json::Value;

/// The server binary: `RUNCORE_RESTATE_SERVER` (scripts/with-restate.sh exports it), else the
/// one `npm ci` installs under runtimes/restate/node_modules. `None` outside CI when there is
/// none (the caller skips with a note); under `CI=true` a missing server fails the test.
pub fn server_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RUNCORE_RESTATE_SERVER") {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Some(path);
        }
        panic!("RUNCORE_RESTATE_SERVER={} is not a file", path.display());
    }
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    let candidate = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "node_modules/@restatedev/restate-server-{}-{arch}/bin/restate-server",
        std::env::consts::OS
    ));
    if candidate.is_file() {
        return Some(candidate);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "the Restate server is required in CI: run `npm ci` in runtimes/restate (or use \
             scripts/with-restate.sh), or set RUNCORE_RESTATE_SERVER"
        );
    }
    eprintln!(
        "note: the Restate server is not installed (npm ci in runtimes/restate); this test was \
         skipped"
    );
    None
}

/// Under `CI=true`.
pub fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// A store URL on the PostgreSQL server of `RUNCORE_PG_URL`, in a new schema of its own (made
/// here, so the workers' connections find it on their search_path). `None` with a note when
/// the variable is unset; under `CI=true` that fails the test.
pub fn postgres_store(label: &str) -> Option<String> {
    let Ok(server) = std::env::var(runcore_postgres::URL_ENV) else {
        assert!(
            !in_ci(),
            "{} is not set and CI=true: the PostgreSQL tests must run in CI (run them under \
             scripts/with-postgres.sh)",
            runcore_postgres::URL_ENV
        );
        eprintln!(
            "note: {} is not set (run under scripts/with-postgres.sh); this test was skipped",
            runcore_postgres::URL_ENV
        );
        return None;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let schema = format!("restate_{label}_{}_{nanos}", std::process::id());
    runcore_postgres::PostgresStore::connect_in_schema(&server, &schema)
        .expect("create a schema on the PostgreSQL server");
    Some(in_schema(&server, &schema))
}

/// `server` with its search_path set to `schema` alone.
pub fn in_schema(server: &str, schema: &str) -> String {
    let separator = if server.contains('?') { '&' } else { '?' };
    format!("{server}{separator}options=-c%20search_path%3D{schema}")
}

/// A fresh temporary directory, removed on drop.
pub fn temp_dir(label: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("runcore-restate-{label}-"))
        .tempdir()
        .expect("create a temporary directory")
}

/// A child process that is SIGKILLed when dropped (so a failing test leaves nothing
/// running).
pub struct Proc(pub Option<Child>);

impl Proc {
    pub fn pid(&self) -> Option<u32> {
        self.0.as_ref().map(Child::id)
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A free loopback port (bound and released: another process may take it, which a test
/// accepts on loopback).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A Restate server on loopback ports, in `dir/restate`, restartable on the same directory.
pub struct Server {
    pub binary: PathBuf,
    pub dir: PathBuf,
    pub ingress: u16,
    pub admin: u16,
    pub fabric: u16,
    pub proc: Proc,
}

impl Server {
    pub fn start(binary: PathBuf, dir: &Path) -> Server {
        let mut server = Server {
            binary,
            dir: dir.to_path_buf(),
            ingress: free_port(),
            admin: free_port(),
            fabric: free_port(),
            proc: Proc(None),
        };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .expect("server log");
        let child = Command::new(&self.binary)
            .arg("--base-dir")
            .arg(self.dir.join("restate"))
            .args([
                "--node-name",
                "n1",
                "--no-logo",
                "--default-num-partitions",
                "2",
            ])
            .env("RESTATE_LISTEN_MODE", "tcp")
            .env("RESTATE_DISABLE_TELEMETRY", "true")
            .env(
                "RESTATE_INGRESS__BIND_ADDRESS",
                format!("127.0.0.1:{}", self.ingress),
            )
            .env(
                "RESTATE_ADMIN__BIND_ADDRESS",
                format!("127.0.0.1:{}", self.admin),
            )
            .env("RESTATE_BIND_ADDRESS", format!("127.0.0.1:{}", self.fabric))
            .env(
                "RESTATE_ADVERTISED_ADDRESS",
                format!("http://127.0.0.1:{}/", self.fabric),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("server log"))
            .stderr(log)
            .spawn()
            .expect("start restate-server");
        self.proc = Proc(Some(child));
        self.wait_healthy();
    }

    fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let admin = http(self.admin, "GET", "/health", &[], b"");
            let ingress = http(self.ingress, "GET", "/restate/health", &[], b"");
            if matches!(admin, Ok((200, _))) && matches!(ingress, Ok((200, _))) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the Restate server did not become healthy (log: {})",
                self.dir.join("server.log").display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL, then start again on the same directory and ports.
    pub fn kill_and_restart(&mut self) {
        self.proc.kill();
        self.launch();
    }

    /// Registers the deployment at `port` (retried until the worker answers discovery).
    pub fn register(&self, port: u16) {
        let body = format!(r#"{{"uri":"http://127.0.0.1:{port}","force":true}}"#);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match http(
                self.admin,
                "POST",
                "/deployments",
                &[("content-type", "application/json")],
                body.as_bytes(),
            ) {
                Ok((200..=299, _)) => return,
                other => assert!(
                    Instant::now() < deadline,
                    "registering the deployment failed: {other:?}"
                ),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A call through the ingress: `(status, body)`.
    pub fn call(
        &self,
        thread: &str,
        handler: &str,
        body: &str,
        idempotency_key: Option<&str>,
    ) -> (u16, Value) {
        let mut headers = Vec::new();
        if !body.is_empty() {
            headers.push(("content-type", "application/json"));
        }
        if let Some(key) = idempotency_key {
            headers.push(("idempotency-key", key));
        }
        let path = format!("/RuncoreThread/{thread}/{handler}");
        let (status, bytes) = http(self.ingress, "POST", &path, &headers, body.as_bytes())
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    }

    /// The thread as its object saved it (the shared `state` handler).
    pub fn state(&self, thread: &str) -> Value {
        let (status, body) = self.call(thread, "state", "", None);
        assert_eq!(status, 200, "state of {thread}: {body}");
        body
    }

    /// Polls `state` until `done` holds (or panics after `limit`).
    pub fn wait_for(&self, thread: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let answer = http(
                self.ingress,
                "POST",
                &format!("/RuncoreThread/{thread}/state"),
                &[],
                b"",
            );
            if let Ok((200, bytes)) = answer
                && let Ok(state) = serde_json::from_slice::<Value>(&bytes)
            {
                if done(&state) {
                    return state;
                }
                assert!(
                    Instant::now() < deadline,
                    "{thread} did not get there in {limit:?}: {state}"
                );
            }
            assert!(Instant::now() < deadline, "{thread}: no state in {limit:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One HTTP/1.1 request on a fresh connection: `(status, body)`.
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n\
         content-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers"))?;
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let mut payload = response[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        payload = dechunk(&payload);
    }
    Ok((status, payload))
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = data.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&data[..line_end])
                .split(';')
                .next()
                .unwrap_or("0")
                .trim(),
            16,
        )
        .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        let end = (start + size).min(data.len());
        out.extend_from_slice(&data[start..end]);
        data = &data[(end + 2).min(data.len())..];
    }
    out
}

/// A worker process on `port` (several may share it).
pub fn start_worker(port: u16, store_url: &str, extra: &[&str], log: &Path) -> Proc {
    let log = std::fs::File::create(log).expect("worker log");
    let child = Command::new(env!("CARGO_BIN_EXE_runcore-restate-worker"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--store",
            store_url,
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("worker log"))
        .stderr(log)
        .spawn()
        .expect("start the worker");
    let proc = Proc(Some(child));
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the worker did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    proc
}

/// How a person answers a thread's approval wait in a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// No wait expected.
    None,
    /// Allow.
    Allow,
    /// Deny.
    Deny,
    /// Let the deadline pass.
    Expire,
}

/// The single-process run of a script: the same scripted model and tools driving an agent
/// on a MemoryStore, with the same answer to its wait.
pub fn single_process_run(
    thread: &str,
    prompt: &str,
    deadline_ms: u64,
    reply: Answer,
) -> MemoryStore {
    let mut store = MemoryStore::new();
    let mut config = scripted_config(Some(deadline_ms));
    config.thread_id = ThreadId::from(thread);
    let mut agent = Agent::new(config).expect("config");
    let tools = ScriptedTools::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    agent.prompt(UserMessage::text(prompt), 0).expect("prompt");
    let mut script = SingleProcess {
        runtime: &runtime,
        tools: &tools,
    };
    let mut sink = |_: &Agent, output: &Output| {
        if let Output::Commit(commit) = output {
            store.commit_operation(commit.as_ref().clone().into_operation())?;
        }
        Ok::<(), runcore::store::StoreError>(())
    };
    loop {
        script::serve(&mut agent, &mut script, &mut sink).expect("served");
        let Some(ticket) = agent.current_ticket().cloned() else {
            break;
        };
        match reply {
            Answer::Allow => agent
                .resume_ticket(
                    ResumeResult::Permission(PermissionDecision::Allow { note: None }),
                    Some(1),
                )
                .expect("allow"),
            Answer::Deny => agent
                .resume_ticket(
                    ResumeResult::Permission(PermissionDecision::Deny {
                        reason: Some("not today".to_owned()),
                    }),
                    Some(1),
                )
                .expect("deny"),
            Answer::Expire | Answer::None => agent
                .handle_timeout(ticket.deadline_ms.unwrap_or(0) + 1)
                .expect("timeout"),
        }
    }
    store
}

/// The worker's scripted model and tools, answered in this process.
struct SingleProcess<'a> {
    runtime: &'a tokio::runtime::Runtime,
    tools: &'a ScriptedTools,
}

impl Script for SingleProcess<'_> {
    fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn {
        match answer(request.messages) {
            Ok(message) => ModelTurn::answer(message),
            Err(error) => ModelTurn::fail("step_retries_exhausted", error.to_string()),
        }
    }

    fn tool(&mut self, run_id: &RunId, call: &ToolCall) -> runcore::ToolOutput {
        run_tool(self.runtime, self.tools, run_id, call.clone())
    }
}

fn run_tool(
    runtime: &tokio::runtime::Runtime,
    tools: &ScriptedTools,
    run_id: &RunId,
    call: ToolCall,
) -> runcore::ToolOutput {
    let id = call.id.clone();
    match runtime.block_on(tools.execute(run_id.clone(), call)) {
        Ok(output) => output,
        Err(error) => runcore::ToolOutput::error(id, format!("step_retries_exhausted: {error}")),
    }
}
