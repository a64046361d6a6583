//! The operator console under test: `runcore console` started for real on a free loopback
//! port, a small HTTP/1.1 client over a TCP stream (so a test sends exactly the bytes it
//! means, percent-encoded paths and malformed bodies included), and the scripted session
//! whose store the console tests look into.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

use serde_json::{Value, json};

use super::process::{Drive, RUNCORE, TempDir, first, model_text, prompt, runcore};

/// A running `runcore console`.
pub struct Console {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The write token it printed.
    pub token: String,
    /// Its start line.
    pub start_line: String,
}

impl Console {
    /// Starts `runcore console --store URL --listen 127.0.0.1:0` and reads its start line.
    pub fn start(url: &str) -> Console {
        Console::start_with(url, &[])
    }

    /// [`Console::start`] with more arguments (`--allow-remote`).
    pub fn start_with(url: &str, extra: &[&str]) -> Console {
        let mut child = Command::new(RUNCORE)
            .args(["console", "--store", url, "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn runcore console");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the console prints its start line");
        let line = line.trim_end().to_owned();
        // console: http://HOST:PORT/ token: TOKEN (SPEC §12.5)
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words.len(), 4, "start line: {line:?}");
        assert_eq!((words[0], words[2]), ("console:", "token:"), "{line:?}");
        let addr = words[1]
            .strip_prefix("http://")
            .and_then(|a| a.strip_suffix('/'))
            .expect("http://HOST:PORT/")
            .to_owned();
        Console {
            child,
            addr,
            token: words[3].to_owned(),
            start_line: line,
        }
    }

    /// `http://HOST:PORT`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A GET.
    pub fn get(&self, path: &str) -> Response {
        request(&self.addr, "GET", path, &[], b"")
    }

    /// `GET path` that must be 200 with a JSON body.
    pub fn get_json(&self, path: &str) -> Value {
        let response = self.get(path);
        assert_eq!(response.status, 200, "GET {path}: {}", response.body);
        response.json()
    }

    /// `POST /api/runs/{run}/decision` with `body` and the console's token.
    pub fn decide(&self, run: &str, body: &str) -> Response {
        let auth = format!("Bearer {}", self.token);
        self.post(
            &format!("/api/runs/{}/decision", encode(run)),
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        )
    }

    /// A POST with these headers.
    pub fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        request(&self.addr, "POST", path, headers, body)
    }

    /// Stops it with SIGTERM and waits: it must exit 0.
    pub fn stop(mut self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(status.success());
        let status = self.child.wait().expect("reap the console");
        assert!(status.success(), "the console exits 0 on SIGTERM: {status}");
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    /// Its status.
    pub status: u16,
    /// Its headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: String,
}

impl Response {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("JSON body: {e}: {}", self.body))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`); `Host` is `addr` unless
/// `headers` name one.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut stream = TcpStream::connect(addr).expect("connect to the console");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .expect("write the request");
    stream.write_all(body).expect("write the body");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    let text = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    assert!(
        !headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked")),
        "the console's bodies have a length"
    );
    Response {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// `text` as one percent-encoded path segment.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A message and a tool argument that would run script if a page did not escape them.
pub const HOSTILE_TEXT: &str = "Deploy <script>window.HACKED=1</script> now & \"quote\"";
/// The hostile tool argument.
pub const HOSTILE_ARGUMENT: &str = "<img src=x onerror=\"window.HACKED=2\">";

/// The configuration file of the session's threads: `deploy` needs approval.
pub fn config_file(dir: &TempDir, thread: &str) -> String {
    let path = dir.join(&format!("{thread}.json"));
    std::fs::write(
        &path,
        json!({"thread_id":thread,"system_prompt":"Be brief.",
               "tools":{"deploy":{"description":"Deploy the site","policy":"require_approval"},
                        "weather":{"description":"Weather by city"}}})
        .to_string(),
    )
    .expect("write config");
    path.to_str().expect("UTF-8 path").to_owned()
}

/// A `model_done` asking for `deploy` with the hostile argument.
fn deploy_call(call: &Value, id: &str) -> Value {
    json!({"type":"model_done","run_id":call["run_id"],"step":call["step"],
           "message":{"role":"assistant","content":[
               {"type":"text","text":"I will deploy it."},
               {"type":"tool_call","id":id,"name":"deploy",
                "arguments":{"target":"production","note":HOSTILE_ARGUMENT}}],
           "stop_reason":"tool_use"}})
}

/// The scripted session: threads `alpha` and `beta` each wait for approval of `deploy`
/// (`alpha/run-2` after an ended run with a weather call; `beta/run-1` at once), `gamma` has
/// one ended run.
pub fn scripted_session(url: &str, dir: &TempDir) {
    let config = config_file(dir, "alpha");
    let mut alpha = Drive::spawn(&["--store", url, "--config", &config]);
    let out = alpha.send(prompt("What is the weather in Paris?", 1_000));
    let call = first(&out, "call_model").clone();
    let out = alpha.send(
        json!({"type":"model_done","run_id":call["run_id"],"step":call["step"],
        "message":{"role":"assistant","content":[{"type":"tool_call","id":"call-w","name":"weather",
                   "arguments":{"city":"Paris"}}],"stop_reason":"tool_use"}}),
    );
    let tools = first(&out, "execute_tools").clone();
    let out = alpha.send(
        json!({"type":"tool_done","run_id":tools["run_id"],"call_id":"call-w",
                                "content":"18 C, sunny","now_ms":1_500}),
    );
    alpha.send(model_text(first(&out, "call_model"), "18 C and sunny."));
    let out = alpha.send(prompt(HOSTILE_TEXT, 2_000));
    alpha.send(deploy_call(first(&out, "call_model"), "call-d"));
    assert!(alpha.finish().0.success());

    let config = config_file(dir, "beta");
    let mut beta = Drive::spawn(&["--store", url, "--config", &config]);
    let out = beta.send(prompt("Ship it", 3_000));
    beta.send(deploy_call(first(&out, "call_model"), "call-b"));
    assert!(beta.finish().0.success());

    let mut gamma = Drive::spawn(&["--store", url, "--thread", "gamma"]);
    let out = gamma.send(prompt("Hi", 4_000));
    gamma.send(model_text(first(&out, "call_model"), "Hello!"));
    assert!(gamma.finish().0.success());
}

/// The scripted session, alpha's deploy approved with a note, a compaction on gamma, and
/// thread `delta` waiting on a ticket whose deadline passed long ago (host time 1 s after the
/// epoch): what the console shows of time and causality. Returns the store URL.
pub fn time_session(dir: &TempDir) -> String {
    let url = dir.sqlite("runs.db");
    scripted_session(&url, dir);
    let console = Console::start(&url);
    let response = console.decide("alpha/run-2", r#"{"decision":"allow","note":"go ahead"}"#);
    assert_eq!(response.status, 200, "{}", response.body);
    drop(console);

    let mut gamma = Drive::spawn(&["--store", &url, "--thread", "gamma"]);
    gamma.send(prompt("And now?", 5_000));
    let out = gamma
        .send(json!({"type":"compact","summary":"They said hello.","keep_from":2,"now_ms":5_100}));
    gamma.send(model_text(first(&out, "call_model"), "Still here."));
    assert!(gamma.finish().0.success());

    let config = dir.join("delta.json");
    std::fs::write(
        &config,
        json!({"thread_id":"delta","tools":{"deploy":{"policy":"require_approval","deadline_after_ms":1}}})
            .to_string(),
    )
    .expect("write config");
    let config = config.display().to_string();
    let mut delta = Drive::spawn(&["--store", &url, "--config", &config]);
    let out = delta.send(prompt("Ship it", 1_000));
    let call = first(&out, "call_model").clone();
    delta.send(json!({"type":"model_done","run_id":call["run_id"],"step":call["step"],
        "message":{"role":"assistant","content":[{"type":"tool_call","id":"call-x","name":"deploy","arguments":{}}],
                   "stop_reason":"tool_use"},"now_ms":1_000}));
    assert!(delta.finish().0.success());
    url
}

/// `runcore CMD --store URL --json` as one JSON array (of its lines).
pub fn cli_json_lines(args: &[&str], url: &str) -> Value {
    let mut full = args.to_vec();
    full.extend(["--store", url, "--json"]);
    let output = runcore(&full);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Value::Array(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect(),
    )
}

/// Under `CI=true`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// A store on the PostgreSQL server of `RUNCORE_PG_URL`, in a new schema of its own; `None`
/// (with a note) outside CI when the variable is unset; a failure under CI.
pub fn postgres_store(label: &str) -> Option<String> {
    let Ok(server) = std::env::var(runcore_postgres::URL_ENV) else {
        assert!(
            !in_ci(),
            "{} is not set and CI=true: the PostgreSQL console tests must run in CI \
             (run the tests under scripts/with-postgres.sh)",
            runcore_postgres::URL_ENV
        );
        println!(
            "skipped: {} is not set (run under scripts/with-postgres.sh)",
            runcore_postgres::URL_ENV
        );
        return None;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let schema = format!("console_{label}_{}_{nanos}", std::process::id());
    runcore_postgres::PostgresStore::connect_in_schema(&server, &schema)
        .expect("create a schema on the PostgreSQL server");
    let separator = if server.contains('?') { '&' } else { '?' };
    Some(format!(
        "{server}{separator}options=-c%20search_path%3D{schema}"
    ))
}
