//! `runcore demo`: a realistic scripted session whose crash is real, printed as a readable
//! timeline (or, with `--json`, as the driver's output lines).
//!
//! The host here is scripted: a fake model, fake tools and a person answering approvals. It
//! drives the agent exactly as a real host would (one input, then drain) and applies every
//! commit to a store, fenced, before acting on what follows it.
//!
//! By default the store is a SQLite file in a new temporary directory. Run 1 happens in this
//! process. Run 2 happens in a child process (this same binary, `demo --child`), which says on
//! its stdout when the archive tool is outstanding; this process then kills it with `SIGKILL`
//! (`Child::kill`), opens the file again, recovers the agent from what the child committed, and
//! finishes the run. The summary is read back from the store, as `runcore show` reads it.
//! `--memory` keeps today's single-process session against a `MemoryStore`, where the crash can
//! only be simulated (the agent is dropped and rebuilt from the store).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use runcore::driver::{ContextMode, error_line, idle_line, render_output_line};
use runcore::host::script::{self, ModelTurn};
use runcore::store::{CheckpointReader, CommitLog, CommittedThreadView, EventScope, MemoryStore};
use runcore::{
    Action, Agent, AgentConfig, AssistantBlock, AssistantMessage, CallId, Input, Message, Output,
    RecoveryPolicy, ResumeCommand, ResumeResult, RunDisposition, RunId, RunState, StopReason,
    ThreadCommit, ThreadId, ToolCall, ToolOutput, ToolSpec, UserMessage,
};
use serde_json::json;

use crate::args::DemoArgs;
use crate::inspect;
use crate::text::{message_text, output_text, state_text};
use runcore_store_url::{self as store, Access, StoreUrl};

/// The start of the line the child writes when the archive tool is outstanding, followed by
/// the number of its last input line (never shown).
const OUTSTANDING: &str = "\u{1}runcore-demo: the archive tool is outstanding after line ";

/// The demo's errors, for people.
type DemoResult<T> = Result<T, Box<dyn std::error::Error>>;

/// `runcore demo [--json] [--store URL | --memory]` (and the hidden `--child`).
pub fn main(args: DemoArgs) -> ExitCode {
    let json = args.json;
    if args.child {
        return child_main(args.store.as_deref(), args.line.unwrap_or(0), json);
    }
    // clap refuses --memory with --store.
    if args.memory {
        return finish(memory_session(json));
    }
    let (url, temp_dir) = match args.store.as_deref() {
        Some(url) => match StoreUrl::parse(url) {
            Ok(url) => (url, None),
            Err(message) => return crate::start_error("demo", &message),
        },
        None => match TempDir::new() {
            Ok(dir) => (
                StoreUrl::Sqlite {
                    path: dir.path.join("demo.sqlite"),
                    synchronous: Default::default(),
                },
                Some(dir),
            ),
            Err(e) => {
                eprintln!("runcore demo: cannot create a temporary directory: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    if let Err(message) = store::precheck(&url, Access::Write) {
        return crate::start_error("demo", &message);
    }
    let result = durable_session(json, &url, temp_dir.as_ref());
    // The temporary directory goes whatever happened (its Drop removes it).
    drop(temp_dir);
    finish(result)
}

fn finish(result: DemoResult<String>) -> ExitCode {
    match result {
        Ok(text) => crate::write_stdout(&text),
        Err(e) => {
            eprintln!("runcore demo: the scripted session failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A directory under the system's temporary directory, removed when dropped.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("runcore-demo-{}-{nanos:09}", std::process::id()));
        // `create_dir`, not `create_dir_all`: an existing directory of that name is an error,
        // never a directory the demo would then remove.
        std::fs::create_dir(&path)?;
        Ok(TempDir { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The demo's agent configuration.
fn config() -> AgentConfig {
    AgentConfig {
        thread_id: ThreadId::new("demo-thread"),
        system_prompt: Some("You are a careful assistant with file and mail tools.".into()),
        ..AgentConfig::default()
    }
    .with_tool("search", ToolSpec::auto("Search the document index"))
    .with_tool("read_file", ToolSpec::auto("Read a file"))
    .with_tool(
        "archive",
        ToolSpec::auto("Archive a folder (idempotent by run and call id)"),
    )
    .with_tool(
        "delete_file",
        ToolSpec::gated("Delete a file", Some(60_000)),
    )
    .with_tool("send_email", ToolSpec::gated("Send an email", None))
}

/// The scripted host, over any store.
struct Host<S> {
    json: bool,
    agent: Agent,
    store: S,
    now_ms: u64,
    input_line: u64,
    sent: runcore::driver::SentContext,
    /// The outstanding model call.
    model_call: Option<(RunId, u32)>,
    /// The outstanding tool calls.
    tool_calls: Vec<ToolCall>,
    tool_run: Option<RunId>,
    /// Everything to print.
    out: String,
}

impl<S: CommitLog + CheckpointReader + runcore::store::ThreadClaims> Host<S> {
    /// A host over `store`, with a fresh agent (`agent` None) or a given one.
    fn new(json: bool, store: S, agent: Option<Agent>) -> DemoResult<Host<S>> {
        let agent = match agent {
            Some(agent) => agent,
            None => Agent::new(config())?,
        };
        Ok(Host {
            json,
            agent,
            store,
            now_ms: 0,
            input_line: 0,
            sent: Default::default(),
            model_call: None,
            tool_calls: Vec::new(),
            tool_run: None,
            out: String::new(),
        })
    }

    fn thread(&self) -> ThreadId {
        self.agent.thread_id().clone()
    }

    /// Appends one line to the printed output.
    fn line(&mut self, text: String) {
        self.out.push_str(&text);
        self.out.push('\n');
    }

    fn say(&mut self, text: &str) {
        if !self.json {
            self.line(text.to_owned());
        }
    }

    fn heading(&mut self, text: &str) {
        if !self.json {
            self.line(format!("\n== {text} =="));
        }
    }

    fn at(&mut self, at_ms: u64, text: &str) {
        self.now_ms = self.now_ms.max(at_ms);
        self.say(&format!("[{:>7.3}s] {text}", self.now_ms as f64 / 1000.0));
    }

    /// One input at `at_ms`, then drain.
    fn input(&mut self, at_ms: u64, label: &str, input: Input) -> DemoResult<()> {
        self.at(at_ms, label);
        self.input_line += 1;
        let result = self.agent.handle(input, self.now_ms);
        if let Err(error) = &result {
            if self.json {
                let text = error_line(self.input_line, error);
                self.line(text);
            } else {
                let text = format!("            rejected: {} ({})", error, error.kind());
                self.line(text);
            }
        }
        self.drain()?;
        if self.json {
            let text = idle_line(self.input_line, self.agent.poll_timeout());
            self.line(text);
        }
        Ok(result?)
    }

    /// Drains the agent ([`script::drain`]); every commit is applied to the store, fenced,
    /// before its line, and the action handed out is kept for the narrative to answer.
    fn drain(&mut self) -> DemoResult<()> {
        let (json, store, sent, out) = (self.json, &mut self.store, &mut self.sent, &mut self.out);
        let mut sink = |agent: &Agent, output: &Output| {
            if let Output::Commit(commit) = output {
                // The fenced operation the agent supplies with the commit (SPEC §7.1).
                store.commit_operation(commit.as_ref().clone().into_operation())?;
            }
            if json {
                out.push_str(&render_output_line(agent, output, ContextMode::Full, sent));
            } else {
                out.push_str("            ");
                out.push_str(&output_text(output));
            }
            out.push('\n');
            Ok::<(), runcore::store::StoreError>(())
        };
        match script::drain(&mut self.agent, &mut sink)? {
            Some(Action::CallModel { run_id, step, .. }) => self.model_call = Some((run_id, step)),
            Some(Action::ExecuteTools { run_id, calls, .. }) => {
                self.tool_run = Some(run_id);
                self.tool_calls = calls;
            }
            None => {}
        }
        Ok(())
    }

    /// The model answers the call out as `deltas` then `message`, 40 ms apart
    /// ([`ModelTurn::each_input`]).
    fn model(&mut self, at_ms: u64, deltas: &[&str], message: AssistantMessage) -> DemoResult<()> {
        let Some((run_id, step)) = self.model_call.take() else {
            return Err("the demo expected a model call".into());
        };
        let deltas = deltas.iter().map(|delta| (*delta).to_owned()).collect();
        let mut at = at_ms;
        ModelTurn::streamed(deltas, message).each_input(&run_id, step, |input| {
            let label = match &input {
                Input::ModelDelta { text, .. } => format!("model streams {text:?}"),
                Input::ModelDone { message, .. } => format!(
                    "model answers step {step}: {}",
                    message_text(&Message::from(message.clone()))
                ),
                other => format!("model: {}", other.kind()),
            };
            self.input(at, &label, input)?;
            at += 40;
            DemoResult::Ok(())
        })
    }

    fn tool(&mut self, at_ms: u64, call_id: &str, text: &str) -> DemoResult<()> {
        let run_id = self.tool_run.clone().unwrap_or_default();
        let call_id = CallId::new(call_id);
        self.tool_calls.retain(|c| c.id != call_id);
        let output = ToolOutput::text(call_id.clone(), text);
        self.input(
            at_ms,
            &format!("tool {call_id} finishes: {text:?}"),
            Input::tool_done(run_id, output),
        )
    }

    fn prompt(&mut self, at_ms: u64, text: &str) -> DemoResult<()> {
        self.input(
            at_ms,
            &format!("user prompts {text:?}"),
            Input::Prompt {
                message: Some(UserMessage::text(text)),
                run_id: None,
                messages: Vec::new(),
            },
        )
    }

    /// Run 1: parallel tools answered out of order, steering, a follow-up, approvals.
    fn run_one(&mut self) -> DemoResult<()> {
        self.heading(
            "Run 1: parallel tools answered out of order, steering, a follow-up, approvals",
        );
        self.prompt(1_000, "Find the Q3 report and summarise it")?;
        self.model(
            1_200,
            &["Let me ", "look that up."],
            calls(&[
                ("call-search", "search", json!({"query": "Q3 report"})),
                ("call-read", "read_file", json!({"path": "reports/q3.md"})),
            ]),
        )?;
        self.input(
            1_500,
            "user steers \"Focus on revenue\"",
            Input::Steer {
                message: UserMessage::text("Focus on revenue"),
            },
        )?;
        self.input(
            1_600,
            "user steers \"Use bullet points\"",
            Input::Steer {
                message: UserMessage::text("Use bullet points"),
            },
        )?;
        self.tool(1_700, "call-read", "Q3 revenue: 4.2M (+12%). Costs: 3.1M.")?;
        self.tool(1_900, "call-search", "1 hit: reports/q3.md")?;
        self.input(
            2_000,
            "user queues a follow-up \"Then tidy up and tell the team\"",
            Input::FollowUp {
                message: UserMessage::text("Then tidy up and tell the team"),
            },
        )?;
        self.model(
            2_300,
            &["- Revenue 4.2M", " (+12%)"],
            AssistantMessage::text("- Revenue 4.2M (+12%)\n- Costs 3.1M"),
        )?;
        self.model(
            2_800,
            &[],
            calls(&[
                (
                    "call-delete",
                    "delete_file",
                    json!({"path": "drafts/q3-old.md"}),
                ),
                (
                    "call-mail",
                    "send_email",
                    json!({"to": "team@example.com", "subject": "Q3 summary"}),
                ),
            ]),
        )?;
        let first_ticket = self.agent.current_ticket().cloned();
        self.input(
            5_000,
            "person allows delete_file",
            Input::ResumeTicket {
                result: ResumeResult::allow(),
            },
        )?;
        if let Some(ticket) = first_ticket {
            let stale = ResumeCommand::from_ticket(&ticket, ResumeResult::allow(), 5_100);
            // Rejected on purpose: the error is printed, the session goes on.
            let _ = self.input(
                5_100,
                "a duplicate of the first approval arrives (stale ticket)",
                Input::Resume { command: stale },
            );
        }
        self.input(
            6_000,
            "person denies send_email",
            Input::ResumeTicket {
                result: ResumeResult::deny("not before legal review"),
            },
        )?;
        self.tool(6_400, "call-delete", "deleted drafts/q3-old.md")?;
        self.model(
            6_800,
            &[],
            AssistantMessage::text("Deleted the old draft; the email waits for legal review."),
        )
    }

    /// Run 2 up to the crash point: the archive tool is handed out.
    fn run_two_until_the_tool(&mut self) -> DemoResult<()> {
        self.prompt(10_000, "Archive the Q3 folder")?;
        self.model(
            10_300,
            &[],
            calls(&[("call-archive", "archive", json!({"folder": "reports/q3"}))]),
        )
    }

    /// Run 2 after recovery: the re-issued tool answers; the host compacts the thread before
    /// the next model call (SPEC §8.9), with a summary the scripted model wrote; the model ends
    /// the run.
    fn run_two_after_recovery(&mut self) -> DemoResult<()> {
        self.drain()?;
        self.tool(
            12_400,
            "call-archive",
            "archived reports/q3 (idempotency key demo-thread/run-2:call-archive)",
        )?;
        self.compact_before_the_call()?;
        self.model(
            12_800,
            &[],
            AssistantMessage::text("The Q3 folder is archived."),
        )
    }

    /// The host measures the outstanding call's context; over its budget it asks the model
    /// for a summary of everything before run 2 and compacts instead of calling.
    fn compact_before_the_call(&mut self) -> DemoResult<()> {
        const BUDGET: usize = 8;
        let Some(request) = self.agent.model_request() else {
            return Err("the demo expected a model call before compacting".into());
        };
        let before = request.context_len();
        // Run 2's prompt: everything before it is run 1, whose batches are all closed.
        let keep_from = self
            .agent
            .transcript()
            .iter()
            .rposition(|m| matches!(m, Message::User(_)))
            .ok_or("the demo expected a prompt in the transcript")?;
        self.at(
            12_450,
            &format!(
                "the host measures the call's context: {before} messages, over its budget of \
                 {BUDGET}; it asks the model for a summary of run 1 instead of calling it"
            ),
        );
        let summary = "Summary of the conversation so far: the Q3 report shows revenue 4.2M \
                       (+12%) and costs 3.1M; the old draft was deleted; the email to the team \
                       waits for legal review.";
        self.at(
            12_500,
            &format!("the scripted model writes the summary: {summary:?}"),
        );
        self.input(
            12_550,
            &format!("host compacts: the summary, then the transcript from message {keep_from}"),
            Input::Compact {
                summary: UserMessage::text(summary),
                keep_from,
            },
        )?;
        let len = self.agent.transcript().len();
        let after = self.agent.model_request().map_or(0, |r| r.context_len());
        self.say(&format!(
            "            the model now sees {after} messages: the summary, then messages \
             {keep_from}..{len} of the transcript (run 2 so far); all {len} messages stay \
             committed and readable"
        ));
        Ok(())
    }

    /// A fenced post-terminal commit, paged audit events, the transcript check.
    fn promises(&mut self) -> DemoResult<()> {
        self.heading("The store keeps its promises");
        let thread = self.thread();
        let fenced = ThreadCommit::assemble(
            thread.clone(),
            RunDisposition::Running {
                run_id: RunId::new("demo-thread/run-1"),
            },
            false,
            vec![Message::user("one more thing")],
            Vec::new(),
            Vec::new(),
        );
        match self.store.commit(fenced) {
            Err(e) => self.say(&format!("a late commit for the ended run 1 is fenced: {e}")),
            Ok(_) => self.say("unexpected: the store accepted a commit for an ended run"),
        }
        let mut from = None;
        let mut pages = 0;
        let mut seen = 0;
        loop {
            let page = self
                .store
                .list_events(&EventScope::Thread(thread.clone()), from, 5)?;
            let Some(last) = page.last() else { break };
            from = Some(last.sequence);
            pages += 1;
            seen += page.len();
        }
        self.say(&format!(
            "audit events of {thread}, paged 5 at a time: {seen} events in {pages} pages"
        ));
        let transcript_matches = self.store.committed_messages(&thread)? == self.agent.transcript();
        self.say(&format!(
            "committed transcript equals the agent's: {transcript_matches}"
        ));
        Ok(())
    }

    /// The closing summary, read back from the store (what `runcore show` prints).
    fn summary(&mut self, source: &str) -> DemoResult<()> {
        self.heading(&format!("Summary, read back from {source}"));
        let view = inspect::show(&self.store, &self.thread())?;
        self.say(&format!("runs: {}", view.runs.len()));
        for run in &view.runs {
            let line = format!("  {}: {}", run.id, state_text(&run.state));
            self.say(&line);
        }
        let mut events = 0;
        let mut from = None;
        loop {
            let page = self.store.list_events(&EventScope::All, from, 512)?;
            let Some(last) = page.last() else { break };
            from = Some(last.sequence);
            events += page.len();
        }
        let pending = inspect::pending(&self.store)?.len();
        self.say(&format!(
            "commits: {} (the thread's version), audit events stored: {events}, messages: {}, \
             runs waiting for a person: {pending}",
            view.version,
            view.messages.len(),
        ));
        self.say(&format!(
            "the model context starts at message {} (after the compaction's summary)",
            view.context_start
        ));
        Ok(())
    }
}

fn calls(calls: &[(&str, &str, serde_json::Value)]) -> AssistantMessage {
    AssistantMessage::new(
        calls
            .iter()
            .map(|(id, name, args)| AssistantBlock::tool_call(*id, *name, args.clone()))
            .collect(),
        StopReason::ToolUse,
    )
}

/// Today's session in one process against a `MemoryStore`: the crash is simulated.
fn memory_session(json: bool) -> DemoResult<String> {
    let mut host = Host::new(json, MemoryStore::new(), None)?;
    host.say("runcore demo: one thread, two runs, a scripted model, scripted tools and a person");
    host.say("(in memory: COMMIT lines are applied to a MemoryStore before anything after them)");
    host.run_one()?;
    host.heading("Run 2: a crash after a commit, then recovery from the store");
    host.run_two_until_the_tool()?;
    host.say(
        "            ... the host drops its agent while the archive tool runs (simulated) ...",
    );
    let thread = host.thread();
    host.agent = Agent::recover(config(), &host.store, &thread, RecoveryPolicy::Replay)?;
    host.at(
        12_000,
        "a new agent is recovered from the in-memory store alone (policy: replay)",
    );
    host.run_two_after_recovery()?;
    host.promises()?;
    host.summary("the in-memory store")?;
    Ok(host.out)
}

/// The session against a real store, run 2 in a child process that is killed.
fn durable_session(json: bool, url: &StoreUrl, temp: Option<&TempDir>) -> DemoResult<String> {
    let backend = store::open(url, Access::Write)?;
    let thread = config().thread_id;
    if backend.thread_version(&thread)? > 0 {
        return Err(format!(
            "{url} already holds the demo's thread {:?}; give the demo a new store",
            thread.as_str()
        )
        .into());
    }
    let where_ = match temp {
        Some(_) => format!("{url} (a new file in a temporary directory)"),
        None => url.to_string(),
    };
    let mut host = Host::new(json, backend, None)?;
    host.say("runcore demo: one thread, two runs, a scripted model, scripted tools and a person");
    host.say(&format!("the store: {where_}"));
    host.say("(COMMIT lines are applied to the store, fenced, before anything after them)");
    host.run_one()?;
    let mut out = std::mem::take(&mut host.out);
    let input_line = host.input_line;
    // The parent lets go of the store: the child opens it on its own.
    drop(host);

    let mut heading = String::new();
    if !json {
        heading
            .push_str("\n== Run 2: in a child process, killed with SIGKILL while a tool runs ==\n");
    }
    out.push_str(&heading);
    let exe = std::env::current_exe()?;
    let mut command = Command::new(exe);
    command.args(["demo", "--child", "--store"]);
    command.arg(url_arg(url));
    command.args(["--line", &input_line.to_string()]);
    if json {
        command.arg("--json");
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    if !json {
        out.push_str(&format!("(child process {pid}: `runcore demo --child`)\n"));
    }
    let stdout = child.stdout.take().ok_or("the child has no stdout")?;
    let mut reader = BufReader::new(stdout);
    let mut outstanding = None;
    let mut line = String::new();
    while outstanding.is_none() {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let text = line.trim_end_matches('\n');
        match text.strip_prefix(OUTSTANDING) {
            Some(last_line) => outstanding = Some(last_line.parse::<u64>()?),
            None => {
                out.push_str(text);
                out.push('\n');
            }
        }
    }
    let Some(child_last_line) = outstanding else {
        let status = child.wait()?;
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        return Err(format!(
            "the child process ended ({status}) before the tool was outstanding: {}",
            stderr.trim()
        )
        .into());
    };
    child.kill()?;
    let status = child.wait()?;
    let killed = killed_by(&status);

    let backend = store::open(url, Access::Write)?;
    let on_disk = backend.latest_run(&thread)?;
    let version = backend.thread_version(&thread)?;
    let agent = Agent::recover(config(), &backend, &thread, RecoveryPolicy::Replay)?;
    let mut host = Host::new(json, backend, Some(agent))?;
    host.out = out;
    host.input_line = child_last_line;
    host.say(&format!(
        "            ... the parent killed child process {pid} with SIGKILL while the archive tool \
         was outstanding ({killed}) ..."
    ));
    let state = on_disk
        .as_ref()
        .map(|r| format!("{} {}", r.id, state_text(&r.state)))
        .unwrap_or_else(|| "no run".to_owned());
    host.at(
        12_000,
        &format!("the parent opens {url} again: thread {thread} at version {version}, {state}"),
    );
    host.say(&format!(
        "            recovered from disk alone (policy: replay): the archive call has no \
         committed result, so it is handed out again{}",
        if on_disk.is_some_and(|r| r.state == RunState::Running) {
            ""
        } else {
            " (unexpected: the run is not running)"
        }
    ));
    host.run_two_after_recovery()?;
    host.promises()?;
    host.summary(&where_)?;
    if let Some(temp) = temp {
        host.say(&format!(
            "(the temporary directory {} is removed as the demo ends)",
            temp.path.display()
        ));
    }
    Ok(host.out)
}

/// The `--store` argument that names `url` to the child.
fn url_arg(url: &StoreUrl) -> String {
    match url {
        StoreUrl::Sqlite { .. } => url.to_string(),
        StoreUrl::Postgres(url) => url.clone(),
    }
}

/// How the child ended, in words.
fn killed_by(status: &std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("it ended by signal {signal}");
        }
    }
    format!("it ended with {status}")
}

/// The child: run 2 up to the outstanding tool, say so, and wait to be killed.
fn child_main(store_url: Option<&str>, line: u64, json: bool) -> ExitCode {
    let result = (|| -> DemoResult<()> {
        let url = StoreUrl::parse(store_url.ok_or("--child needs --store")?)?;
        let backend = store::open(&url, Access::Write)?;
        let thread = config().thread_id;
        let agent = Agent::recover(config(), &backend, &thread, RecoveryPolicy::Replay)?;
        let mut host = Host::new(json, backend, Some(agent))?;
        host.input_line = line;
        host.at(
            9_000,
            &format!(
                "child {} recovers the agent from the store (thread idle, {} messages)",
                std::process::id(),
                host.agent.transcript().len()
            ),
        );
        host.drain()?;
        host.run_two_until_the_tool()?;
        host.say("            ... the archive tool runs (outstanding since the ACTION above) ...");
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(host.out.as_bytes())?;
        writeln!(stdout, "{OUTSTANDING}{}", host.input_line)?;
        stdout.flush()?;
        drop(stdout);
        // Wait for the parent's SIGKILL; if the parent goes away instead, stdin ends.
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        Err("the parent went away before killing the child".into())
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runcore demo --child: {e}");
            ExitCode::FAILURE
        }
    }
}
