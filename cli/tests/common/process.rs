//! Running the real `runcore` binary: a driver conversed with line by line (every read has a
//! timeout, so a hang fails the test instead of stalling it), one-shot commands, and temporary
//! directories that are removed afterwards.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

/// The binary under test.
pub const RUNCORE: &str = env!("CARGO_BIN_EXE_runcore");

/// How long one read may wait for the driver.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// A fresh directory under the system's temporary directory, removed when dropped
/// (`tempfile`'s), with the paths the tests build in it.
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// A new, empty directory whose name starts with `label`.
    pub fn new(label: &str) -> TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("runcore-cli-test-{label}-"))
            .tempdir()
            .expect("create a temp dir");
        TempDir(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// `sqlite:<dir>/<file>`.
    pub fn sqlite(&self, file: &str) -> String {
        format!("sqlite:{}", self.join(file).display())
    }

    /// A path inside.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path().join(name)
    }
}

/// A running `runcore drive` and the conversation with it.
pub struct Drive {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Option<JoinHandle<String>>,
    /// What it wrote before and with `idle` 0 (durable drivers only), parsed.
    pub start: Vec<Value>,
}

impl Drive {
    /// Spawns `runcore drive ARGS` and, when `--store` is among them, reads up to `idle` 0.
    /// A durable driver gets a short lease and waits for a claim (unless ARGS say otherwise),
    /// so a restart after a SIGKILL takes the dead owner's claim over within half a second.
    pub fn spawn(args: &[&str]) -> Drive {
        let mut claim: Vec<&str> = Vec::new();
        if args.contains(&"--store") && !args.contains(&"--lease-ms") {
            claim.extend(["--lease-ms", "500"]);
        }
        if args.contains(&"--store") && !args.contains(&"--wait-claim") {
            claim.extend(["--wait-claim", "10000"]);
        }
        let mut full: Vec<&str> = args.to_vec();
        full.extend(claim);
        let mut drive = Drive::launch(&full);
        if args.contains(&"--store") {
            drive.start = drive.until_idle();
            assert_eq!(drive.start.last(), Some(&json!({"type":"idle","line":0})));
        }
        drive
    }

    /// Spawns `runcore drive ARGS` exactly as given (no default claim options) and reads
    /// what it writes up to `idle` 0. `Err` when it ended before: its exit code (`None`:
    /// killed by a signal), what it wrote to stdout, and its stderr (e.g. exit 4, another
    /// owner holds the thread).
    pub fn try_spawn_exact(args: &[&str]) -> Result<Drive, (Option<i32>, Vec<Value>, String)> {
        let mut drive = Drive::launch(args);
        let mut out = Vec::new();
        loop {
            match drive.next() {
                Some(line) => {
                    let idle = line["type"] == "idle";
                    out.push(line);
                    if idle {
                        drive.start = out;
                        return Ok(drive);
                    }
                }
                None => {
                    let (status, stderr) = drive.finish();
                    return Err((status.code(), out, stderr));
                }
            }
        }
    }

    /// The process id of the driver (to stop it with `SIGSTOP`, for instance).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Spawns `runcore drive ARGS` and starts reading its stdout and stderr.
    fn launch(args: &[&str]) -> Drive {
        let mut child = Command::new(RUNCORE)
            .arg("drive")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn runcore drive");
        let stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line.trim_end_matches('\n').to_owned()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Drive {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr: Some(stderr),
            start: Vec::new(),
        }
    }

    /// The next line, parsed; `None` at EOF.
    pub fn next(&mut self) -> Option<Value> {
        match self.lines.recv_timeout(READ_TIMEOUT) {
            Ok(line) => Some(serde_json::from_str(&line).expect("every output line is JSON")),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => None,
            Err(e) => panic!("the driver wrote nothing for {READ_TIMEOUT:?}: {e}"),
        }
    }

    /// Lines up to and including the next `idle`.
    pub fn until_idle(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let Some(line) = self.next() else {
                panic!("EOF before idle; so far: {out:?}");
            };
            let idle = line["type"] == "idle";
            out.push(line);
            if idle {
                return out;
            }
        }
    }

    /// Writes one line without reading.
    pub fn write(&mut self, line: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write a line");
        stdin.flush().expect("flush");
    }

    /// Writes one line without reading; `false` when the driver's stdin is closed (it
    /// exited).
    pub fn try_write(&mut self, line: &Value) -> bool {
        let Some(stdin) = self.stdin.as_mut() else {
            return false;
        };
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .is_ok()
    }

    /// Writes one line and returns its lines up to and including its `idle`.
    pub fn send(&mut self, line: Value) -> Vec<Value> {
        self.write(&line);
        self.until_idle()
    }

    /// Lines until EOF (after an error that ends the driver).
    pub fn rest(&mut self) -> Vec<Value> {
        std::iter::from_fn(|| self.next()).collect()
    }

    /// Kills the process with SIGKILL (`Child::kill`) and reaps it.
    pub fn kill(mut self) -> ExitStatus {
        self.child.kill().expect("kill the driver");
        self.child.wait().expect("reap the driver")
    }

    /// Closes stdin and waits: the exit status and everything on stderr.
    pub fn finish(mut self) -> (ExitStatus, String) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("wait for the driver");
        let stderr = self
            .stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        (status, stderr)
    }
}

/// Runs `runcore ARGS` with no stdin.
pub fn runcore(args: &[&str]) -> Output {
    Command::new(RUNCORE)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run runcore")
}

/// The kinds of `lines`.
pub fn kinds(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l["type"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The first line of `kind`.
pub fn first<'a>(lines: &'a [Value], kind: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} line in {lines:?}"))
}

/// The `run_end` causes in `lines`.
pub fn causes(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["type"] == "event" && l["event"]["type"] == "run_end")
        .map(|l| {
            l["event"]["result"]["cause"]["type"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect()
}

/// A prompt line.
pub fn prompt(text: &str, now_ms: u64) -> Value {
    json!({"type":"prompt","text":text,"now_ms":now_ms})
}

/// A `model_done` answering `call` (a `call_model` line) with text.
pub fn model_text(call: &Value, text: &str) -> Value {
    json!({"type":"model_done","run_id":call["run_id"],"step":call["step"],
           "message":{"role":"assistant","content":[{"type":"text","text":text}],"stop_reason":"stop"}})
}

/// A `model_done` answering `call` with one tool call `id` of `tool`.
pub fn model_tool(call: &Value, id: &str, tool: &str) -> Value {
    json!({"type":"model_done","run_id":call["run_id"],"step":call["step"],
           "message":{"role":"assistant","content":[{"type":"tool_call","id":id,"name":tool,"arguments":{"x":1}}],
                      "stop_reason":"tool_use"}})
}

/// A `tool_done` for every call of an `execute_tools` line, in order; returns the last
/// input's lines.
pub fn answer_tools(drive: &mut Drive, tools: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for call in tools["calls"].as_array().expect("calls") {
        out = drive.send(
            json!({"type":"tool_done","run_id":tools["run_id"],"call_id":call["id"],
                                "content":format!("done {}", call["id"])}),
        );
    }
    out
}

/// The bytes of a file, or `None` when it does not exist.
pub fn bytes_of(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// `runcore show THREAD --store URL --json`, parsed.
pub fn show_json(url: &str, thread: &str) -> Value {
    let output = runcore(&["show", thread, "--store", url, "--json"]);
    assert!(
        output.status.success(),
        "show: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("show --json is one JSON object")
}
