//! A `runcore drive` child process and workload w1 through it: shared by the benches that time
//! the JSON-lines driver (`durable_driver`, `otlp_overhead`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

/// The `runcore` binary this package builds.
pub const RUNCORE: &str = env!("CARGO_BIN_EXE_runcore");

/// A `runcore drive` child with its pipes.
pub struct Driver {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Driver {
    /// Starts `runcore drive ARGS`.
    pub fn spawn(args: &[&str]) -> Driver {
        let mut child = Command::new(RUNCORE)
            .arg("drive")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn runcore drive");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
        Driver {
            child,
            stdin,
            stdout,
            line: String::new(),
        }
    }

    /// Reads up to and including the next idle; returns the action among the lines (if any)
    /// and how many bytes were read. An error line panics.
    pub fn until_idle(&mut self) -> (Option<Value>, usize) {
        let mut action = None;
        let mut bytes = 0;
        loop {
            self.line.clear();
            let n = self.stdout.read_line(&mut self.line).expect("read");
            assert!(n > 0, "the driver ended early");
            bytes += n;
            if self.line.starts_with(r#"{"type":"idle""#) {
                return (action, bytes);
            }
            if self.line.starts_with(r#"{"type":"call_model""#)
                || self.line.starts_with(r#"{"type":"execute_tools""#)
            {
                action = Some(serde_json::from_str(&self.line).expect("JSON"));
            }
            if self.line.starts_with(r#"{"type":"error""#) {
                panic!("the driver wrote an error: {}", self.line);
            }
        }
    }

    /// Writes one line and reads up to the next idle; the action it got, if any.
    pub fn send(&mut self, line: &Value) -> Option<Value> {
        writeln!(self.stdin, "{line}").expect("write");
        self.stdin.flush().expect("flush");
        self.until_idle().0
    }

    /// Closes stdin and waits for a successful exit.
    pub fn finish(mut self) {
        drop(self.stdin);
        let status = self.child.wait().expect("wait");
        assert!(status.success());
    }
}

/// One w1 session through a driver (as `benches/support/workloads.rs` describes it): returns
/// the steps made and how long the driver took to answer the last answer (the line whose
/// commit ends the run).
pub fn w1_through(driver: &mut Driver, n: u32) -> (u32, f64) {
    let mut last_line_s = 0.0;
    let delta = "d".repeat(50);
    let text = delta.repeat(20);
    let tool_text = "t".repeat(100);
    driver.send(&json!({"type":"config","max_steps":n,"context":"delta"}));
    let mut action = driver.send(&json!({"type":"prompt","text":"go"}));
    let mut steps = 0;
    while let Some(line) = action.take() {
        let run = line["run_id"].clone();
        if line["type"] == "call_model" {
            let step = line["step"].as_u64().expect("step") as u32;
            steps = step;
            let message = if step < n {
                for _ in 0..20 {
                    driver
                        .send(&json!({"type":"model_delta","run_id":run,"step":step,"text":delta}));
                }
                json!({"role":"assistant","content":[{"type":"text","text":text},
                       {"type":"tool_call","id":format!("call-{step}"),"name":"echo","arguments":{"i":step}}],
                       "stop_reason":"tool_use"})
            } else {
                json!({"role":"assistant","content":[{"type":"text","text":"done"}],"stop_reason":"stop"})
            };
            let sent = Instant::now();
            action = driver
                .send(&json!({"type":"model_done","run_id":run,"step":step,"message":message}));
            last_line_s = sent.elapsed().as_secs_f64();
        } else {
            for call in line["calls"].as_array().expect("calls") {
                action = driver.send(&json!({"type":"tool_done","run_id":run,"call_id":call["id"],"content":tool_text}));
            }
        }
    }
    (steps, last_line_s)
}
