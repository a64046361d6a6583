//! `runcore demo`: a realistic scripted session against the in-memory store, printed as a
//! readable timeline (or, with `--json`, as the driver's output lines).
//!
//! The host here is scripted: a fake model, fake tools and a person answering approvals. It
//! drives the agent exactly as a real host would (one input, then drain), persists every commit
//! into a `MemoryStore`, and at one point "crashes" and recovers from the store alone.

use std::process::ExitCode;

use runcore::driver::{ContextMode, error_line, idle_line, render_output_line};
use runcore::{
    Action, Agent, AgentConfig, AgentError, AgentEvent, AssistantBlock, AssistantMessage, CallId,
    CheckpointReader, CommitLog, CommittedThreadView, ContentBlock, EventScope, Input, LoopEvent,
    MemoryStore, Message, Output, RecoveryPolicy, ResumeCommand, ResumeResult, RunDisposition,
    RunId, StopReason, ThreadCommit, ThreadId, ToolCall, ToolOutput, ToolSpec, UserMessage,
};
use serde_json::json;

/// The scripted host.
struct Host {
    json: bool,
    agent: Agent,
    store: MemoryStore,
    config: AgentConfig,
    now_ms: u64,
    input_line: u64,
    sent: usize,
    commits: usize,
    events: usize,
    /// The outstanding model call.
    model_call: Option<(RunId, u32)>,
    /// The outstanding tool calls.
    tool_calls: Vec<ToolCall>,
    tool_run: Option<RunId>,
    ends: Vec<(RunId, String)>,
    /// Everything to print, written at the end in one go.
    out: String,
}

impl Host {
    fn new(json: bool, config: AgentConfig) -> Result<Host, AgentError> {
        Ok(Host {
            json,
            agent: Agent::new(config.clone())?,
            store: MemoryStore::new(),
            config,
            now_ms: 0,
            input_line: 0,
            sent: 0,
            commits: 0,
            events: 0,
            model_call: None,
            tool_calls: Vec::new(),
            tool_run: None,
            ends: Vec::new(),
            out: String::new(),
        })
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

    /// One input at `at_ms`, then drain.
    fn input(&mut self, at_ms: u64, label: &str, input: Input) -> Result<(), AgentError> {
        self.now_ms = self.now_ms.max(at_ms);
        self.input_line += 1;
        self.say(&format!("[{:>7.3}s] {label}", self.now_ms as f64 / 1000.0));
        let result = self.agent.apply_at(input, Some(self.now_ms));
        if let Err(error) = &result {
            if self.json {
                let text = error_line(self.input_line, error);
                self.line(text);
            } else {
                let text = format!("            rejected: {} ({})", error, error.kind());
                self.line(text);
            }
        }
        self.drain();
        if self.json {
            let text = idle_line(self.input_line);
            self.line(text);
        }
        result
    }

    fn drain(&mut self) {
        while let Some(output) = self.agent.poll() {
            if self.json {
                let text =
                    render_output_line(&self.agent, &output, ContextMode::Full, &mut self.sent);
                self.line(text);
            } else {
                let text = format!("            {}", describe(&output));
                self.line(text);
            }
            match output {
                Output::Commit(commit) => {
                    self.commits += 1;
                    if let Err(e) = self.store.commit(commit) {
                        self.line(format!("            the store rejected a commit: {e}"));
                    }
                }
                Output::Event(event) => {
                    self.events += 1;
                    if let AgentEvent::RunEnd { run_id, result } = &event {
                        self.ends.push((run_id.clone(), cause_text(&result.cause)));
                    }
                }
                Output::Action(Action::CallModel { run_id, step, .. }) => {
                    self.model_call = Some((run_id, step));
                }
                Output::Action(Action::ExecuteTools { run_id, calls, .. }) => {
                    self.tool_run = Some(run_id);
                    self.tool_calls = calls;
                }
            }
        }
    }

    fn model(
        &mut self,
        at_ms: u64,
        deltas: &[&str],
        message: AssistantMessage,
    ) -> Result<(), AgentError> {
        let Some((run_id, step)) = self.model_call.take() else {
            return Err(AgentError::InvalidInput(
                "the demo expected a model call".into(),
            ));
        };
        for (i, delta) in deltas.iter().enumerate() {
            let input = Input::ModelDelta {
                run_id: run_id.clone(),
                step,
                text: (*delta).to_owned(),
            };
            self.input(
                at_ms + i as u64 * 40,
                &format!("model streams {delta:?}"),
                input,
            )?;
        }
        let label = format!(
            "model answers step {step}: {}",
            message_text(&Message::Assistant(message.clone()))
        );
        self.input(
            at_ms + deltas.len() as u64 * 40,
            &label,
            Input::ModelDone {
                run_id,
                step,
                message,
            },
        )
    }

    fn tool(&mut self, at_ms: u64, call_id: &str, text: &str) -> Result<(), AgentError> {
        let run_id = self.tool_run.clone().unwrap_or_default();
        let call_id = CallId::new(call_id);
        self.tool_calls.retain(|c| c.id != call_id);
        let output = ToolOutput::text(call_id.clone(), text);
        self.input(
            at_ms,
            &format!("tool {call_id} finishes: {text:?}"),
            Input::ToolDone {
                run_id,
                call_id,
                output,
            },
        )
    }

    fn prompt(&mut self, at_ms: u64, text: &str) -> Result<(), AgentError> {
        self.input(
            at_ms,
            &format!("user prompts {text:?}"),
            Input::Prompt {
                message: UserMessage::text(text),
                now_ms: at_ms,
                run_id: None,
            },
        )
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

fn cause_text(cause: &runcore::EndCause) -> String {
    match cause {
        runcore::EndCause::Stopped(reason) => format!("stopped ({reason})"),
        runcore::EndCause::Error(f) => format!("error ({})", f.code()),
        other => other.kind().to_owned(),
    }
}

fn blocks_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => format!("{text:?}"),
            ContentBlock::Image { mime_type, .. } => format!("<{mime_type} image>"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn message_text(message: &Message) -> String {
    match message {
        Message::System(m) => format!("system {}", blocks_text(&m.content)),
        Message::User(m) => format!("user {}", blocks_text(&m.content)),
        Message::Assistant(m) => m
            .content
            .iter()
            .map(|b| match b {
                AssistantBlock::Text { text } => format!("{text:?}"),
                AssistantBlock::Thinking { .. } => "(thinking)".to_owned(),
                AssistantBlock::ToolCall { id, name, .. } => format!("call {name} [{id}]"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Message::ToolResult(r) => format!(
            "result [{}] {} {}",
            r.call_id,
            r.outcome.as_str(),
            blocks_text(&r.content)
        ),
    }
}

fn describe_commit(commit: &ThreadCommit) -> String {
    let disposition = match &commit.run {
        RunDisposition::Running { run_id } => format!("Running {run_id}"),
        RunDisposition::Awaiting(t) => {
            format!("Awaiting {} on ticket {}", t.run_id, t.correlation_id)
        }
        RunDisposition::Ended { run_id, cause } => format!("Ended {run_id}: {}", cause_text(cause)),
    };
    let kinds: Vec<&str> = commit.events.iter().map(|e| e.kind.as_str()).collect();
    format!(
        "COMMIT  {disposition}, {} message(s){}",
        commit.messages.len(),
        if kinds.is_empty() {
            String::new()
        } else {
            format!(", audit: {}", kinds.join(", "))
        }
    )
}

fn describe(output: &Output) -> String {
    match output {
        Output::Commit(commit) => describe_commit(commit),
        Output::Action(Action::CallModel {
            step, final_step, ..
        }) => format!(
            "ACTION  call the model (step {step}{})",
            if *final_step { ", final" } else { "" }
        ),
        Output::Action(Action::ExecuteTools { calls, .. }) => format!(
            "ACTION  execute tools: {}",
            calls
                .iter()
                .map(|c| format!("{} [{}]", c.name, c.id))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Output::Event(AgentEvent::RunStart { run_id, .. }) => format!("event   run_start {run_id}"),
        Output::Event(AgentEvent::RunEnd { run_id, result }) => format!(
            "event   run_end {run_id}: {} after {} step(s), {} unconsumed",
            cause_text(&result.cause),
            result.steps,
            result.unconsumed.len()
        ),
        Output::Event(AgentEvent::Loop { event, .. }) => match event {
            LoopEvent::TextDelta { text, .. } => format!("event   text {text:?}"),
            LoopEvent::AssistantMessage { .. } => "event   assistant message".to_owned(),
            LoopEvent::MessageAppended { origin, message } => {
                format!("event   appended ({origin:?}): {}", message_text(message))
            }
            LoopEvent::ToolStart { call_id, name, .. } => {
                format!("event   tool_start {name} [{call_id}]")
            }
            LoopEvent::ToolEnd {
                call_id, outcome, ..
            } => format!("event   tool_end [{call_id}] {}", outcome.as_str()),
            LoopEvent::SyntheticResult {
                call_id, outcome, ..
            } => {
                format!("event   synthetic result [{call_id}] {}", outcome.as_str())
            }
            LoopEvent::Awaiting { ticket } => format!(
                "event   awaiting {} ({} {})",
                ticket.correlation_id,
                ticket.target().reason_name(),
                ticket
                    .target()
                    .call_id()
                    .map(|c| c.to_string())
                    .unwrap_or_default()
            ),
            LoopEvent::Resumed {
                correlation_id,
                result,
            } => {
                format!("event   resumed {correlation_id} with {}", result.as_str())
            }
            LoopEvent::InputClosed => "event   input closed".to_owned(),
            other => format!("event   {other:?}"),
        },
        Output::Event(other) => format!("event   {other:?}"),
    }
}

/// Runs the demo; `json` prints driver output lines instead of the timeline.
pub fn run(json: bool) -> ExitCode {
    match session(json) {
        Ok(text) => crate::write_stdout(&text),
        Err(e) => {
            eprintln!("runcore demo: the scripted session failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The session's printed text.
pub fn session(json: bool) -> Result<String, Box<dyn std::error::Error>> {
    let config = AgentConfig {
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
    .with_tool("send_email", ToolSpec::gated("Send an email", None));
    let mut host = Host::new(json, config)?;
    host.say("runcore demo: one thread, two runs, a scripted model, scripted tools and a person");
    host.say("(COMMIT lines are persisted to the in-memory store before anything after them)");

    host.heading("Run 1: parallel tools answered out of order, steering, a follow-up, approvals");
    host.prompt(1_000, "Find the Q3 report and summarise it")?;
    host.model(
        1_200,
        &["Let me ", "look that up."],
        calls(&[
            ("call-search", "search", json!({"query": "Q3 report"})),
            ("call-read", "read_file", json!({"path": "reports/q3.md"})),
        ]),
    )?;
    host.input(
        1_500,
        "user steers \"Focus on revenue\"",
        Input::Steer {
            message: UserMessage::text("Focus on revenue"),
        },
    )?;
    host.input(
        1_600,
        "user steers \"Use bullet points\"",
        Input::Steer {
            message: UserMessage::text("Use bullet points"),
        },
    )?;
    host.tool(1_700, "call-read", "Q3 revenue: 4.2M (+12%). Costs: 3.1M.")?;
    host.tool(1_900, "call-search", "1 hit: reports/q3.md")?;
    host.input(
        2_000,
        "user queues a follow-up \"Then tidy up and tell the team\"",
        Input::FollowUp {
            message: UserMessage::text("Then tidy up and tell the team"),
        },
    )?;
    host.model(
        2_300,
        &["- Revenue 4.2M", " (+12%)"],
        AssistantMessage::text("- Revenue 4.2M (+12%)\n- Costs 3.1M"),
    )?;
    host.model(
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
    let first_ticket = host.agent.current_ticket().cloned();
    host.input(
        5_000,
        "person allows delete_file",
        Input::ResumeTicket {
            result: ResumeResult::allow(),
            now_ms: Some(5_000),
        },
    )?;
    if let Some(ticket) = first_ticket {
        let stale = ResumeCommand::from_ticket(&ticket, ResumeResult::allow(), 5_100);
        let _ = host.input(
            5_100,
            "a duplicate of the first approval arrives (stale ticket)",
            Input::Resume { command: stale },
        );
    }
    host.input(
        6_000,
        "person denies send_email",
        Input::ResumeTicket {
            result: ResumeResult::deny("not before legal review"),
            now_ms: Some(6_000),
        },
    )?;
    host.tool(6_400, "call-delete", "deleted drafts/q3-old.md")?;
    host.model(
        6_800,
        &[],
        AssistantMessage::text("Deleted the old draft; the email waits for legal review."),
    )?;

    host.heading("Run 2: a crash after a commit, then recovery from the store");
    host.prompt(10_000, "Archive the Q3 folder")?;
    host.model(
        10_300,
        &[],
        calls(&[("call-archive", "archive", json!({"folder": "reports/q3"}))]),
    )?;
    host.say("            ... the host process dies while the archive tool runs ...");
    let thread = host.config.thread_id.clone();
    host.agent = Agent::recover(
        host.config.clone(),
        &host.store,
        &thread,
        RecoveryPolicy::Replay,
    )?;
    host.say("[ 12.000s] a new process recovers the agent from the store alone (policy: replay)");
    host.drain();
    host.tool(
        12_400,
        "call-archive",
        "archived reports/q3 (idempotency key demo-thread/run-2:call-archive)",
    )?;
    host.model(
        12_800,
        &[],
        AssistantMessage::text("The Q3 folder is archived."),
    )?;

    host.heading("The store keeps its promises");
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
    match host.store.commit(fenced) {
        Err(e) => host.say(&format!("a late commit for the ended run 1 is fenced: {e}")),
        Ok(_) => host.say("unexpected: the store accepted a commit for an ended run"),
    }
    let mut from = None;
    let mut pages = 0;
    let mut seen = 0;
    loop {
        let page = host
            .store
            .list_events(&EventScope::Thread(thread.clone()), from, 5)?;
        let Some(last) = page.last() else { break };
        from = Some(last.sequence);
        pages += 1;
        seen += page.len();
    }
    host.say(&format!(
        "audit events of {thread}, paged 5 at a time: {seen} events in {pages} pages"
    ));
    let transcript_matches = host.store.committed_messages(&thread)? == host.agent.transcript();
    host.say(&format!(
        "committed transcript equals the agent's: {transcript_matches}"
    ));

    host.heading("Summary");
    host.say(&format!("runs: {}", host.ends.len()));
    for (run, cause) in host.ends.clone() {
        host.say(&format!("  {run}: {cause}"));
    }
    host.say(&format!(
        "commits: {} (store sequence {}), events emitted: {}, audit events stored: {}, messages: {}",
        host.commits,
        host.store.last_sequence(),
        host.events,
        host.store.event_count(),
        host.agent.transcript().len()
    ));
    Ok(host.out)
}
