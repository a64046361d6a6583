//! `runcore drive`: the JSON-lines driver on stdin and stdout (SPEC §12), in memory or durable
//! (`--store URL`, SPEC §12.2).
//!
//! Everything between the bytes lives in the core: [`Driver`] in memory, [`DurableDriver`]
//! with a store (recovery at start, each commit applied to the store before its line, a
//! refused commit ending the session). This file reads stdin in capped lines, writes what
//! they return to stdout, and turns how the session ended into an exit status:
//! 1. open the store (in `main.rs`: a bad `--store` is one stderr line and exit 2, nothing
//!    created);
//! 2. start the durable driver and write its start-up lines (what the recovered agent emits,
//!    then `{"type":"idle","line":0}`);
//! 3. per input line, write its lines and flush; after a refused commit's `store` line,
//!    nothing more: exit status 3 (a restart recovers from what is committed).

use std::io::{self, BufRead, BufWriter, Write};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use runcore::driver::{ConfigObjectError, ContextMode, Driver, InputLine};
use runcore::host::{ClaimOptions, DurableDriver, DurableLines, DurableOptions, DurableStartError};
use runcore::limits::MAX_LINE_BYTES;
use runcore::store::{Store, StoreError};
use runcore::{Agent, AgentConfig, CommitError, Input, RecoveryPolicy, ThreadId};
use runcore_clock::wall_clock_ms;
use serde_json::Value;

/// Exit status when the store rejected or failed a commit (SPEC §12.2).
pub const EXIT_STORE: u8 = 3;

/// A `--config FILE`: a JSON object with the fields of a `config` line (`type` optional).
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// The agent configuration (defaults for what the file omits).
    pub config: AgentConfig,
    /// The thread the file names (`thread_id`), if it names one.
    pub thread: Option<ThreadId>,
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
        let Ok(object @ Value::Object(_)) = serde_json::from_slice::<Value>(&text) else {
            return Err(rejected("it must hold one JSON object".to_owned()));
        };
        let line = InputLine::config(Some(object)).map_err(|e| match e {
            ConfigObjectError::Invalid(why) => rejected(why),
            other => rejected(other.to_string()),
        })?;
        let Input::Config(config) = line.input else {
            return Err(rejected("it is not a config".to_owned()));
        };
        Agent::new(config.clone()).map_err(|e| rejected(e.to_string()))?;
        Ok(ConfigFile {
            config,
            thread: line.thread,
            context: line.context,
            now_ms: line.now_ms,
        })
    }

    /// The file as the config line it stands for.
    fn into_line(self) -> InputLine {
        InputLine::new(Input::Config(self.config), self.now_ms)
            .with_config_fields(self.context, self.thread)
    }
}

/// How a durable driver starts.
pub struct DurableStart<S> {
    /// The opened store.
    pub store: S,
    /// The driver's thread.
    pub thread: ThreadId,
    /// The recovery policy for a run left with unanswered tool calls.
    pub policy: RecoveryPolicy,
    /// The claim the driver takes before it recovers (SPEC §12.4).
    pub claim: ClaimStart,
    /// `--otlp URL`: export each ended run's spans (SPEC §14).
    pub otlp: Option<crate::trace::DriveExporter>,
}

/// `--owner`, `--lease-ms` and `--wait-claim`.
#[derive(Debug, Clone)]
pub struct ClaimStart {
    /// The owner and lease.
    pub options: ClaimOptions,
    /// How long to wait for a thread another owner holds (`None`: do not wait).
    pub wait_ms: Option<u64>,
}

/// Exit status when another owner holds the thread (SPEC §12.4).
pub const EXIT_CLAIM_HELD: u8 = 4;

/// Why a session ended early.
#[derive(Debug)]
pub enum DriveError {
    /// A usage or start-up error: one stderr line, exit 2.
    Usage(String),
    /// The store failed outside a commit (recovery's reads): one stderr line, exit 3.
    Store(String),
    /// A commit was refused, or the claim was lost; its `store` line is written: exit 3.
    CommitRefused,
    /// Another owner holds the thread live: one stderr line, exit 4, nothing written.
    ClaimHeld(String),
    /// Reading stdin or writing stdout failed (not a closed pipe): exit 1.
    Io(String),
}

/// The driver of a session: in memory, or durable.
// One value per process, made once and never moved in a loop: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Session<S> {
    Memory(Driver),
    Durable(DurableDriver<S>),
}

/// What the reader thread hands over: one line, the end of input, or a read error.
enum Read {
    Line(Vec<u8>),
    Eof,
    Failed(String),
}

/// Reads `input` line by line on its own thread, so the session can renew its claim while
/// it waits for the next line.
fn spawn_reader(input: impl BufRead + Send + 'static) -> mpsc::Receiver<Read> {
    let (send, receive) = mpsc::sync_channel(1);
    std::thread::spawn(move || {
        let mut reader = input;
        loop {
            let mut buf = Vec::new();
            let message = match read_line_capped(&mut reader, &mut buf) {
                Ok(0) => Read::Eof,
                Ok(_) => {
                    if buf.last() == Some(&b'\n') {
                        buf.pop();
                    }
                    Read::Line(buf)
                }
                Err(e) => Read::Failed(format!("reading stdin failed: {e}")),
            };
            let last = !matches!(message, Read::Line(_));
            if send.send(message).is_err() || last {
                return;
            }
        }
    });
    receive
}

/// Runs one session on `input` and `output`. `config` comes from `--config FILE`.
pub fn run_session<S: Store>(
    config: Option<ConfigFile>,
    durable: Option<DurableStart<S>>,
    input: impl BufRead + Send + 'static,
    output: impl Write,
) -> Result<(), DriveError> {
    let mut out = LineWriter {
        out: BufWriter::new(output),
        pipe_closed: false,
    };
    let mut exporter = None;
    let mut session = match durable {
        None => {
            let mut driver = Driver::new();
            if let Some(config) = config {
                driver
                    .apply(config.into_line())
                    .map_err(|e| DriveError::Usage(format!("--config was rejected: {e}")))?;
            }
            Session::Memory(driver)
        }
        Some(mut start) => {
            // Claim, recover, what the recovered agent emits, then idle 0 (SPEC §12.2, §12.4).
            exporter = start.otlp.take();
            let (driver, started) = start_durable(config, start)?;
            if let Some(exporter) = &exporter {
                exporter.after_lines(driver.store(), driver.thread(), &started.lines);
            }
            out.write_all(&started.lines)?;
            out.flush()?;
            if started.refused.is_some() {
                return Err(DriveError::CommitRefused);
            }
            Session::Durable(driver)
        }
    };
    let lines = spawn_reader(input);
    loop {
        let next = match &session {
            Session::Durable(driver) => match driver.poll_renew() {
                Some(at) => {
                    let wait = at.saturating_sub(wall_clock_ms());
                    match lines.recv_timeout(Duration::from_millis(wait)) {
                        Ok(read) => Some(read),
                        Err(mpsc::RecvTimeoutError::Timeout) => None,
                        Err(mpsc::RecvTimeoutError::Disconnected) => Some(Read::Eof),
                    }
                }
                None => Some(lines.recv().unwrap_or(Read::Eof)),
            },
            Session::Memory(_) => Some(lines.recv().unwrap_or(Read::Eof)),
        };
        if let Session::Durable(driver) = &mut session
            && let Some(lost) = driver.tick(wall_clock_ms())
        {
            // The claim is gone: one store line, nothing after it (SPEC §12.4).
            out.write(&lost)?;
            out.flush()?;
            return Err(DriveError::CommitRefused);
        }
        let buf = match next {
            // A renew was due; the claim was renewed.
            None => continue,
            Some(Read::Line(buf)) => buf,
            Some(Read::Eof) => {
                if let Session::Durable(driver) = &mut session {
                    // Released so the next owner can take the thread at once; a failed
                    // release only delays that until the lease runs out.
                    let _ = driver.release(wall_clock_ms());
                }
                return Ok(());
            }
            Some(Read::Failed(message)) => return Err(DriveError::Io(message)),
        };
        let refused = match &mut session {
            Session::Memory(driver) => {
                out.write_all(&driver.handle_line(&buf))?;
                false
            }
            Session::Durable(driver) => {
                // The session ends at the first refusal, so a line is never refused here.
                let handled = driver
                    .handle_line(&buf)
                    .map_err(|_| DriveError::CommitRefused)?;
                if let Some(exporter) = &exporter {
                    exporter.after_lines(driver.store(), driver.thread(), &handled.lines);
                }
                out.write_all(&handled.lines)?;
                handled.refused.is_some()
            }
        };
        out.flush()?;
        if refused {
            return Err(DriveError::CommitRefused);
        }
        if out.pipe_closed {
            // Nobody reads what the driver writes: stop, as at EOF.
            if let Session::Durable(driver) = &mut session {
                let _ = driver.release(wall_clock_ms());
            }
            return Ok(());
        }
    }
}

/// Claims the thread (waiting up to `--wait-claim` for another owner's claim to end), then
/// starts the durable driver on it, configured by `--config`.
fn start_durable<S: Store>(
    config: Option<ConfigFile>,
    mut start: DurableStart<S>,
) -> Result<(DurableDriver<S>, DurableLines), DriveError> {
    let file = config.unwrap_or(ConfigFile {
        config: AgentConfig::default(),
        thread: None,
        context: None,
        now_ms: None,
    });
    if file.thread.is_some() && file.config.thread_id != start.thread {
        return Err(DriveError::Usage(format!(
            "--config names thread {:?} but --thread is {:?}",
            file.config.thread_id.as_str(),
            start.thread.as_str()
        )));
    }
    let mut config = file.config;
    config.thread_id = start.thread.clone();
    let options = DurableOptions {
        config,
        context: file.context.unwrap_or_default(),
        now_ms: file.now_ms,
        policy: start.policy,
    };
    wait_for_claim(&mut start)?;
    DurableDriver::start_claimed(start.store, options, start.claim.options, wall_clock_ms())
        .map_err(|e| match e {
            DurableStartError::Store { .. } => DriveError::Store(e.to_string()),
            DurableStartError::Config(error) => {
                DriveError::Usage(format!("--config was rejected: {error}"))
            }
            DurableStartError::ClaimHeld { .. } => DriveError::ClaimHeld(e.to_string()),
            other => DriveError::Usage(other.to_string()),
        })
}

/// With `--wait-claim MS`, retries the claim until it is granted or MS have passed; the
/// driver's own claim (same owner and request id) then returns that grant.
fn wait_for_claim<S: Store>(start: &mut DurableStart<S>) -> Result<(), DriveError> {
    let Some(wait_ms) = start.claim.wait_ms else {
        return Ok(());
    };
    let deadline = wall_clock_ms().saturating_add(wait_ms);
    let request = start.claim.options.request(&start.thread);
    loop {
        match start.store.claim_thread(&request, wall_clock_ms()) {
            Ok(_) => return Ok(()),
            Err(StoreError::Rejected(CommitError::ClaimHeld { .. }))
                if wall_clock_ms() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            // The driver's own claim reports it (ClaimHeld after the wait, a bad owner id).
            Err(_) => return Ok(()),
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

    fn write_all(&mut self, lines: &[String]) -> Result<(), DriveError> {
        lines.iter().try_for_each(|line| self.write(line))
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
        Err(DriveError::ClaimHeld(message)) => {
            eprintln!("runcore drive: {message}");
            ExitCode::from(EXIT_CLAIM_HELD)
        }
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
    use std::io::Read;

    use runcore::store::SharedStore;
    use runcore::store::{CommitLog, CommittedThreadView, MemoryStore, StoreHandles, ThreadClaims};
    use runcore::{CommitOperation, Message, RunId, ThreadCommit};
    use serde_json::json;

    /// A session on a handle of `store` (the test keeps its own handle to look inside).
    fn session(
        store: &SharedStore<MemoryStore>,
        thread: &str,
        policy: RecoveryPolicy,
        lines: &[Value],
    ) -> (Result<(), DriveError>, Vec<Value>) {
        let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
        session_on(store, thread, policy, io::Cursor::new(input.into_bytes()))
    }

    fn session_on(
        store: &SharedStore<MemoryStore>,
        thread: &str,
        policy: RecoveryPolicy,
        input: impl BufRead + Send + 'static,
    ) -> (Result<(), DriveError>, Vec<Value>) {
        let mut output = Vec::new();
        let start = DurableStart {
            store: store.open_handle().unwrap(),
            thread: ThreadId::new(thread),
            policy,
            claim: ClaimStart {
                options: ClaimOptions::new("test-owner", 60_000),
                wait_ms: None,
            },
            otlp: None,
        };
        let result = run_session(None, Some(start), input, &mut output);
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
        let store = SharedStore::new(MemoryStore::new());
        let (result, lines) = session(
            &store,
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
        let store = SharedStore::new(MemoryStore::new());
        let (_, _) = session(
            &store,
            "t",
            RecoveryPolicy::Replay,
            &[json!({"type":"prompt","text":"hi"})],
        );
        // Restart while the model call is outstanding: the same call_model again, then idle 0.
        let (result, lines) = session(
            &store,
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
            &store,
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
        let store = SharedStore::new(MemoryStore::new());
        let (_, lines) = session(
            &store,
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
            &store,
            "t",
            RecoveryPolicy::Replay,
            &[json!({"type":"config","max_steps":3})],
        );
        let error = &lines.iter().find(|l| l["type"] == "error").unwrap()["error"];
        assert_eq!(error["kind"], "invalid_state");
        assert!(error["message"].as_str().unwrap().contains("history"));
    }

    /// Input that lets another writer commit on the thread before the session reads its
    /// first line (after the session started, so after its idle 0).
    struct OtherWriterFirst {
        other: SharedStore<MemoryStore>,
        operation: Option<CommitOperation>,
        input: &'static [u8],
    }

    impl Read for OtherWriterFirst {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if let Some(operation) = self.operation.take() {
                // The other writer holds the same claim (a second process started with the
                // same owner id): only the version fence can stop it.
                let mut store = self.other.lock().expect("the store");
                let claim = store
                    .thread_claim(&operation.commit.thread_id, 0)
                    .unwrap()
                    .expect("the session claimed the thread");
                store
                    .commit_operation(operation.claimed(claim.token(), 0))
                    .unwrap();
            }
            self.input.read(buf)
        }
    }

    #[test]
    fn a_fenced_commit_is_one_store_line_and_nothing_after_it() {
        let store = SharedStore::new(MemoryStore::new());
        let thread = ThreadId::new("t");
        let commit = ThreadCommit::assemble(
            thread.clone(),
            runcore::RunDisposition::Running {
                run_id: RunId::new("t/run-1"),
            },
            true,
            vec![Message::user("a")],
            Vec::new(),
            Vec::new(),
        );
        // Another writer commits first, from the same version and as the same operation
        // (run t/run-1, ordinal 0) with another payload.
        let input = OtherWriterFirst {
            other: store.open_handle().unwrap(),
            operation: Some(CommitOperation::new(commit, 0, 0)),
            input: b"{\"type\":\"prompt\",\"text\":\"b\"}\n{\"type\":\"abort\"}\n",
        };
        let (result, lines) = session_on(
            &store,
            "t",
            RecoveryPolicy::Replay,
            io::BufReader::new(input),
        );
        assert!(
            matches!(result, Err(DriveError::CommitRefused)),
            "{result:?}"
        );
        assert_eq!(
            lines.len(),
            2,
            "idle 0, the store line, nothing after: {lines:?}"
        );
        assert_eq!(lines[0], json!({"type":"idle","line":0}));
        assert_eq!(lines[1]["line"], 1);
        assert_eq!(lines[1]["error"]["kind"], "store");
        assert_eq!(lines[1]["error"]["reason"], "payload_mismatch");
        assert_eq!(store.thread_version(&thread).unwrap(), 1);
        assert_eq!(
            store.committed_messages(&thread).unwrap(),
            [Message::user("a")]
        );
    }

    /// A line far past the cap (200 MiB) is refused saying the cap in bytes and that it is at
    /// least as long as what was read (the reader stops keeping it one byte past the cap), not
    /// as if it were that long; the next line is read as ever.
    #[test]
    fn a_line_far_past_the_cap_is_reported_honestly() {
        let input = io::BufReader::new(io::repeat(b'a').take(200 << 20).chain(io::Cursor::new(
            b"\n{\"type\":\"prompt\",\"text\":\"hi\"}\n".to_vec(),
        )));
        let mut output = Vec::new();
        run_session::<MemoryStore>(None, None, input, &mut output).unwrap();
        let lines: Vec<Value> = String::from_utf8(output)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["type"], "error");
        assert_eq!(lines[0]["error"]["kind"], "invalid_json");
        assert_eq!(
            lines[0]["error"]["message"],
            "the line is over the limit of 67108864 bytes (at least 67108865 bytes)"
        );
        assert_eq!(lines[1], json!({"type": "idle", "line": 1}));
        assert_eq!(lines[2]["type"], "commit");
    }
}
