//! `runcore drive`: the JSON-lines driver on stdin and stdout (SPEC §12), in memory or durable
//! (`--store URL`, SPEC §12.2).
//!
//! The durable driver does for a host in another language what a Rust host does itself: it
//! opens the store, rebuilds the thread's agent from what is committed ([`Agent::recover`]),
//! and applies every commit to the store, fenced ([`CommitLog::commit_operation`], SPEC §7.1),
//! *before* writing its `commit` line. So a line the host has read is a fact, and a host that
//! is killed at any point restarts the driver and goes on from what is committed.
//!
//! The order of a durable session:
//! 1. open the store (a bad `--store` is one stderr line and exit 2, nothing created);
//! 2. if the thread has history, recover under the policy and write what the recovered agent
//!    emits (a pending `call_model` or `execute_tools` under replay; the sealing commit and
//!    `run_end` under seal; nothing more while awaiting);
//! 3. write `{"type":"idle","line":0}`, with or without history;
//! 4. per input line, as the in-memory driver, except that a commit the store rejects or fails
//!    gives one `store` error line, nothing after it, and exit status 3 (the agent is then
//!    ahead of the store; a restart recovers from what is committed).

use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::process::ExitCode;

use runcore::driver::{
    ContextMode, Driver, ErrorBody, InputLine, MAX_LINE_BYTES, OutputLine, error_line, idle_line,
};
use runcore::{
    Agent, AgentCommit, AgentConfig, AgentError, CheckpointReader, CommitLog, Input, Output,
    RecoveryPolicy, StoreError, ThreadId,
};
use serde_json::{Map, Value};

/// Exit status when the store rejected or failed a commit (SPEC §12.2).
pub const EXIT_STORE: u8 = 3;

/// A `--config FILE`: a JSON object with the fields of a `config` line (`type` optional).
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// The agent configuration (defaults for what the file omits).
    pub config: AgentConfig,
    /// Whether the file names a thread (`thread_id`).
    pub names_thread: bool,
    /// How `call_model` lines carry the transcript.
    pub context: Option<ContextMode>,
    /// The host's clock, if the file gives it.
    pub now_ms: Option<u64>,
}

impl ConfigFile {
    /// Reads and checks the file at `path`.
    pub fn read(path: &str) -> Result<ConfigFile, String> {
        let text =
            std::fs::read(path).map_err(|e| format!("cannot read --config {path:?}: {e}"))?;
        let rejected = |e: String| format!("--config {path:?} was rejected: {e}");
        let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(&text) else {
            return Err(rejected("it must hold one JSON object".to_owned()));
        };
        let names_thread = object.get("thread_id").is_some_and(|v| !v.is_null());
        object.insert("type".into(), Value::from("config"));
        let line = InputLine::from_value(Value::Object(object)).map_err(rejected)?;
        let Input::Config(config) = line.input else {
            return Err(rejected("it is not a config".to_owned()));
        };
        Agent::new(config.clone()).map_err(|e| rejected(e.to_string()))?;
        Ok(ConfigFile {
            config,
            names_thread,
            context: line.context,
            now_ms: line.now_ms,
        })
    }

    /// The file as the config line it stands for.
    fn into_line(self) -> InputLine {
        InputLine {
            input: Input::Config(self.config),
            now_ms: self.now_ms,
            context: self.context,
        }
    }
}

/// The store half of a durable session.
struct Durable<'s, S> {
    store: &'s mut S,
    thread: ThreadId,
    /// Whether the thread has committed history (at start, or since).
    has_history: bool,
}

impl<S: CommitLog + CheckpointReader> Durable<'_, S> {
    /// Applies one agent commit as the fenced operation it carries (SPEC §7.1).
    fn apply(&mut self, commit: AgentCommit) -> Result<(), StoreError> {
        // A duplicate receipt is the same fact already stored (SPEC §7.1): harmless.
        self.store.commit_operation(commit.into_operation())?;
        self.has_history = true;
        Ok(())
    }

    /// The `invalid_state` error of a `config` line a durable driver cannot take, if it is
    /// one. `raw` is the line as sent: a config line that names no thread is for the
    /// driver's thread.
    fn check_config(&self, config: &mut AgentConfig, raw: &[u8]) -> Result<(), AgentError> {
        if self.has_history {
            return Err(AgentError::InvalidState {
                expected: "no config line once the thread has history (configure with --config)"
                    .into(),
                actual: format!("thread {:?} has commits in the store", self.thread.as_str()),
            });
        }
        let names_thread = serde_json::from_slice::<Value>(raw)
            .is_ok_and(|v| v.get("thread_id").is_some_and(|t| !t.is_null()));
        if names_thread && config.thread_id != self.thread {
            return Err(AgentError::InvalidState {
                expected: format!(
                    "a config for the driver's thread {:?}",
                    self.thread.as_str()
                ),
                actual: format!("a config for thread {:?}", config.thread_id.as_str()),
            });
        }
        config.thread_id = self.thread.clone();
        Ok(())
    }
}

/// The `store` error line for a commit the store rejected or failed.
pub fn store_error_line(line: u64, error: &StoreError) -> String {
    let mut details = Map::new();
    details.insert("code".into(), Value::from(error.code()));
    let message = match error {
        StoreError::Rejected(rejection) => format!(
            "the store rejected the commit ({rejection}); nothing of it was written. Another \
             writer may hold this thread: restart the driver to recover from what is committed"
        ),
        other => format!(
            "the store failed to apply the commit ({other}); restart the driver to recover \
             from what is committed"
        ),
    };
    serde_json::to_string(&OutputLine::Error {
        line,
        error: ErrorBody {
            kind: "store".into(),
            message,
            details,
        },
    })
    .unwrap_or_default()
}

/// How a durable driver starts.
pub struct DurableStart<'s, S> {
    /// The opened store.
    pub store: &'s mut S,
    /// The driver's thread.
    pub thread: ThreadId,
    /// The recovery policy for a run left with unanswered tool calls.
    pub policy: RecoveryPolicy,
}

/// Why a session ended early.
#[derive(Debug)]
pub enum DriveError {
    /// A usage or start-up error: one stderr line, exit 2.
    Usage(String),
    /// The store failed outside a commit (recovery's reads): one stderr line, exit 3.
    Store(String),
    /// A commit was refused; its `store` line is written: exit 3.
    CommitRefused,
    /// Reading stdin or writing stdout failed (not a closed pipe): exit 1.
    Io(String),
}

/// Runs one session on `input` and `output`. `config` comes from `--config FILE`.
pub fn run_session<S: CommitLog + CheckpointReader>(
    config: Option<ConfigFile>,
    durable: Option<DurableStart<'_, S>>,
    input: impl BufRead,
    output: impl Write,
) -> Result<(), DriveError> {
    let (mut driver, mut durable) = match durable {
        None => {
            let mut driver = Driver::new();
            if let Some(config) = config {
                driver
                    .apply(config.into_line())
                    .map_err(|e| DriveError::Usage(format!("--config was rejected: {e}")))?;
            }
            (driver, None)
        }
        Some(start) => {
            let (driver, durable) = start_durable(config, start)?;
            (driver, Some(durable))
        }
    };
    let mut out = LineWriter {
        out: BufWriter::new(output),
        pipe_closed: false,
    };
    if let Some(durable) = durable.as_mut() {
        // What the recovered agent emits, then idle 0 (SPEC §12.2).
        drain(&mut driver, Some(durable), 0, &mut out)?;
        out.write(&idle_line(0, driver.agent().poll_timeout()))?;
        out.flush()?;
    }
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match read_line_capped(&mut reader, &mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(DriveError::Io(format!("reading stdin failed: {e}"))),
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        let line = driver.next_line();
        let applied = match Driver::parse_line(&buf) {
            Err(error) => {
                Err(serde_json::to_string(&OutputLine::Error { line, error }).unwrap_or_default())
            }
            Ok(mut parsed) => {
                let checked = match (&mut parsed.input, durable.as_ref()) {
                    (Input::Config(config), Some(durable)) => durable.check_config(config, &buf),
                    _ => Ok(()),
                };
                checked
                    .and_then(|()| driver.apply(parsed))
                    .map_err(|e| error_line(line, &e))
            }
        };
        if let Err(text) = applied {
            out.write(&text)?;
        }
        drain(&mut driver, durable.as_mut(), line, &mut out)?;
        out.write(&idle_line(line, driver.agent().poll_timeout()))?;
        out.flush()?;
        if out.pipe_closed {
            // Nobody reads what the driver writes: stop, as at EOF.
            return Ok(());
        }
    }
}

/// Writes output lines; a closed pipe (the host went away) is not an error, the session ends.
struct LineWriter<W: Write> {
    out: BufWriter<W>,
    pipe_closed: bool,
}

impl<W: Write> LineWriter<W> {
    fn write(&mut self, text: &str) -> Result<(), DriveError> {
        if self.pipe_closed {
            return Ok(());
        }
        let result = self
            .out
            .write_all(text.as_bytes())
            .and_then(|()| self.out.write_all(b"\n"));
        self.check(result)
    }

    fn flush(&mut self) -> Result<(), DriveError> {
        if self.pipe_closed {
            return Ok(());
        }
        let result = self.out.flush();
        self.check(result)
    }

    fn check(&mut self, result: io::Result<()>) -> Result<(), DriveError> {
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.pipe_closed = true;
                Ok(())
            }
            Err(e) => Err(DriveError::Io(format!("writing stdout failed: {e}"))),
        }
    }
}

/// Opens the thread: recovers it when it has history, else a fresh agent on it.
fn start_durable<'s, S: CommitLog + CheckpointReader>(
    config: Option<ConfigFile>,
    start: DurableStart<'s, S>,
) -> Result<(Driver, Durable<'s, S>), DriveError> {
    let mut file = config.unwrap_or(ConfigFile {
        config: AgentConfig::default(),
        names_thread: false,
        context: None,
        now_ms: None,
    });
    if file.names_thread && file.config.thread_id != start.thread {
        return Err(DriveError::Usage(format!(
            "--config names thread {:?} but --thread is {:?}",
            file.config.thread_id.as_str(),
            start.thread.as_str()
        )));
    }
    file.config.thread_id = start.thread.clone();
    let unavailable = |e: StoreError| {
        DriveError::Store(format!(
            "cannot read thread {:?} from the store: {e}",
            start.thread.as_str()
        ))
    };
    let has_history = start
        .store
        .thread_version(&start.thread)
        .map_err(unavailable)?
        > 0;
    let driver = if has_history {
        let agent = Agent::recover(
            file.config.clone(),
            &*start.store,
            &start.thread,
            start.policy,
        )
        .map_err(|e| match e {
            runcore::RecoverError::Store(e) => unavailable(e),
            other => DriveError::Usage(format!(
                "cannot recover thread {:?}: {other}",
                start.thread.as_str()
            )),
        })?;
        Driver::from_agent(agent, file.context.unwrap_or_default())
    } else {
        let mut driver = Driver::new();
        driver
            .apply(file.into_line())
            .map_err(|e| DriveError::Usage(format!("--config was rejected: {e}")))?;
        driver
    };
    Ok((
        driver,
        Durable {
            store: start.store,
            thread: start.thread,
            has_history,
        },
    ))
}

/// Drains the driver: each output rendered, each commit applied to the store first.
fn drain<S: CommitLog + CheckpointReader>(
    driver: &mut Driver,
    mut durable: Option<&mut Durable<'_, S>>,
    line: u64,
    out: &mut LineWriter<impl Write>,
) -> Result<(), DriveError> {
    while let Some(output) = driver.poll() {
        let text = driver.render(&output);
        if let (Output::Commit(commit), Some(durable)) = (output, durable.as_deref_mut())
            && let Err(error) = durable.apply(commit)
        {
            out.write(&store_error_line(line, &error))?;
            out.flush()?;
            return Err(DriveError::CommitRefused);
        }
        out.write(&text)?;
    }
    Ok(())
}

/// The exit code and stderr line of a session's end.
pub fn exit(result: Result<(), DriveError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(DriveError::Usage(message)) => {
            eprintln!("runcore drive: {message}");
            ExitCode::from(2)
        }
        Err(DriveError::Store(message)) => {
            eprintln!("runcore drive: {message}");
            ExitCode::from(EXIT_STORE)
        }
        Err(DriveError::CommitRefused) => ExitCode::from(EXIT_STORE),
        Err(DriveError::Io(message)) => {
            eprintln!("runcore drive: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Reads one line (through `\n`) into `buf`, keeping at most `MAX_LINE_BYTES + 1` bytes of it
/// (the driver rejects longer lines) while still consuming the rest.
fn read_line_capped(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut total = 0usize;
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let room = (MAX_LINE_BYTES + 1).saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if done && buf.last() != Some(&b'\n') && chunk.len() > room {
            // The line was cut: keep the newline so the caller strips it consistently.
            buf.push(b'\n');
        }
        let used = chunk.len();
        total += used;
        reader.consume(used);
        if done {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runcore::{
        CommitError, CommitOperation, CommittedThreadView, MemoryStore, Message, RunId,
        ThreadCommit,
    };
    use serde_json::json;

    fn session(
        store: &mut MemoryStore,
        thread: &str,
        policy: RecoveryPolicy,
        lines: &[Value],
    ) -> (Result<(), DriveError>, Vec<Value>) {
        let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let mut output = Vec::new();
        let start = DurableStart {
            store,
            thread: ThreadId::new(thread),
            policy,
        };
        let result = run_session(None, Some(start), input.as_bytes(), &mut output);
        let lines = String::from_utf8(output)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (result, lines)
    }

    fn types(lines: &[Value]) -> Vec<&str> {
        lines.iter().map(|l| l["type"].as_str().unwrap()).collect()
    }

    fn answer(run: &str, step: u64, text: &str) -> Value {
        json!({"type":"model_done","run_id":run,"step":step,
               "message":{"role":"assistant","content":[{"type":"text","text":text}],"stop_reason":"stop"}})
    }

    #[test]
    fn a_new_thread_writes_idle_0_and_commits_before_their_lines() {
        let mut store = MemoryStore::new();
        let (result, lines) = session(
            &mut store,
            "t",
            RecoveryPolicy::Replay,
            &[json!({"type":"prompt","text":"hi"})],
        );
        assert!(result.is_ok());
        assert_eq!(
            types(&lines),
            ["idle", "commit", "event", "call_model", "idle"]
        );
        assert_eq!(lines[0], json!({"type":"idle","line":0}));
        assert_eq!(lines[1]["commit"]["thread_id"], "t");
        assert_eq!(store.thread_version(&ThreadId::new("t")).unwrap(), 1);
    }

    #[test]
    fn a_restart_recovers_and_continues_the_transcript() {
        let mut store = MemoryStore::new();
        let (_, _) = session(
            &mut store,
            "t",
            RecoveryPolicy::Replay,
            &[json!({"type":"prompt","text":"hi"})],
        );
        // Restart while the model call is outstanding: the same call_model again, then idle 0.
        let (result, lines) = session(
            &mut store,
            "t",
            RecoveryPolicy::Replay,
            &[answer("t/run-1", 1, "hello")],
        );
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(types(&lines)[..2], ["call_model", "idle"]);
        assert_eq!(lines[0]["run_id"], "t/run-1");
        assert!(lines.iter().any(|l| l["commit"]["run"]["type"] == "ended"));
        // Restart after the run ended: nothing but idle 0; the next prompt is run 2.
        let (_, lines) = session(
            &mut store,
            "t",
            RecoveryPolicy::Replay,
            &[json!({"type":"prompt","text":"again"})],
        );
        assert_eq!(lines[0], json!({"type":"idle","line":0}));
        assert_eq!(lines[1]["commit"]["run"]["run_id"], "t/run-2");
        assert_eq!(lines[3]["messages"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn config_lines_for_another_thread_or_after_history_are_invalid_state() {
        let mut store = MemoryStore::new();
        let (_, lines) = session(
            &mut store,
            "t",
            RecoveryPolicy::Replay,
            &[
                json!({"type":"config","thread_id":"other"}),
                json!({"type":"config","max_steps":3}),
                json!({"type":"prompt","text":"hi"}),
            ],
        );
        assert_eq!(lines[1]["error"]["kind"], "invalid_state");
        assert_eq!(lines[3], json!({"type":"idle","line":2}));
        // The config without a thread kept the driver's thread.
        assert_eq!(lines[4]["commit"]["thread_id"], "t");
        let (_, lines) = session(
            &mut store,
            "t",
            RecoveryPolicy::Replay,
            &[json!({"type":"config","max_steps":3})],
        );
        let error = &lines.iter().find(|l| l["type"] == "error").unwrap()["error"];
        assert_eq!(error["kind"], "invalid_state");
        assert!(error["message"].as_str().unwrap().contains("history"));
    }

    #[test]
    fn a_fenced_commit_is_one_store_line_and_nothing_after_it() {
        let mut store = MemoryStore::new();
        let thread = ThreadId::new("t");
        let commit = |text: &str, run: &str| {
            ThreadCommit::assemble(
                thread.clone(),
                runcore::RunDisposition::Running {
                    run_id: RunId::new(run),
                },
                true,
                vec![Message::user(text)],
                Vec::new(),
                Vec::new(),
            )
        };
        // Another writer commits first, from the same version.
        store
            .commit_operation(CommitOperation::new(commit("a", "t/run-1"), 0, 0))
            .unwrap();
        let mut durable = Durable {
            store: &mut store,
            thread: thread.clone(),
            has_history: false,
        };
        let error = durable
            .apply(AgentCommit {
                commit: commit("b", "t/run-9"),
                ordinal: 0,
                expected_thread_version: 0,
            })
            .unwrap_err();
        assert_eq!(
            error.rejection(),
            Some(&CommitError::VersionConflict {
                expected: 0,
                actual: 1
            })
        );
        let line: Value = serde_json::from_str(&store_error_line(4, &error)).unwrap();
        assert_eq!(line["line"], 4);
        assert_eq!(line["error"]["kind"], "store");
        assert_eq!(line["error"]["code"], "version_conflict");
        assert_eq!(store.thread_version(&thread).unwrap(), 1);
    }
}
