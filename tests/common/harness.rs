//! A test harness that owns the clock, a scripted model and scripted tools.
//!
//! The harness drives an [`Agent`] exactly as a host would: one input, then drain every output,
//! persisting commits into a [`MemoryStore`] and folding events into the reducer. After every
//! drained output it checks the invariants that must hold at all times, and it renders a
//! readable trace of everything that happened (inputs, commits, events, actions) for
//! snapshots.
//!
//! - [`Harness::input`] applies one input (recording it in the trace) and drains.
//! - [`Harness::step`] answers the outstanding action once from the scripts.
//! - [`Harness::drive`] steps until nothing is outstanding or a script runs dry;
//!   [`Harness::drive_bounded`] does at most `n` steps.
//! - Crashes and restarts: `crash_after_commits` stops polling right after that many commits
//!   are persisted; [`Harness::recover`] builds a harness around an agent recovered from a
//!   store; `restore_at_poll` round-trips the agent through a snapshot at one poll;
//!   `output_log` records every output as JSON.

use std::collections::{BTreeMap, VecDeque};

use runcore::host::script::ModelTurn;
use runcore::store::MemoryStore;
use runcore::store::{CommitLog, CommittedThreadView};
use runcore::{
    Action, Agent, AgentConfig, AgentError, AgentEvent, AgentState, AgentStatus, AssistantBlock,
    AssistantMessage, CallId, EndCause, Input, LoopEvent, Message, Output, RecoverError,
    RecoveryPolicy, ResumeResult, RunDisposition, RunId, RunResult, RunState, Step, StopReason,
    ThreadCommit, ToolCall, ToolOutput, UserMessage, reduce,
};
use serde_json::Value;

/// Scripted model turns ([`ModelTurn`], the crate's scripted host vocabulary) in the short
/// forms the scenarios use.
pub struct Reply;

impl Reply {
    /// A text answer with `stop`.
    pub fn text(t: &str) -> ModelTurn {
        ModelTurn::answer(AssistantMessage::text(t))
    }

    /// One tool call with `tool_use`.
    pub fn call(id: &str, name: &str, args: Value) -> ModelTurn {
        Reply::tool_calls(vec![(id, name, args)])
    }

    /// Tool calls `(id, name)` with empty arguments and `tool_use`.
    pub fn calls(calls: &[(&str, &str)]) -> ModelTurn {
        Reply::tool_calls(
            calls
                .iter()
                .map(|(id, name)| (*id, *name, Value::Object(Default::default())))
                .collect(),
        )
    }

    fn tool_calls(calls: Vec<(&str, &str, Value)>) -> ModelTurn {
        ModelTurn::answer(AssistantMessage::new(
            calls
                .into_iter()
                .map(|(id, name, args)| AssistantBlock::tool_call(id, name, args))
                .collect(),
            StopReason::ToolUse,
        ))
    }
}

/// How scripted tools answer a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolOrder {
    /// In call order.
    CallOrder,
    /// Last call first.
    Reversed,
}

/// A readable rendering of one output.
pub fn render_output(output: &Output) -> String {
    match output {
        Output::Action(Action::CallModel {
            run_id,
            step,
            final_step,
        }) => format!(
            "action call_model {run_id} step {step}{}",
            if *final_step { " (final)" } else { "" }
        ),
        Output::Action(Action::ExecuteTools {
            run_id,
            step,
            calls,
        }) => format!(
            "action execute_tools {run_id} step {step}: {}",
            calls
                .iter()
                .map(|c| format!("{}:{}", c.id, c.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Output::Commit(commit) => render_commit(&commit.commit),
        Output::Event(event) => render_event(event),
    }
}

pub fn render_commit(commit: &ThreadCommit) -> String {
    let disposition = match &commit.run {
        RunDisposition::Running { run_id } => format!("running {run_id}"),
        RunDisposition::Awaiting(ticket) => format!(
            "awaiting {} [{} {}{}]",
            ticket.run_id,
            ticket.correlation_id,
            ticket.target().kind_name(),
            ticket
                .target()
                .call_id()
                .map(|c| format!(" {c}"))
                .unwrap_or_default()
        ),
        RunDisposition::Ended { run_id, cause } => {
            format!("ended {run_id} {}", render_cause(cause))
        }
    };
    let messages: Vec<String> = commit.messages.iter().map(render_message).collect();
    let drafts: Vec<&str> = commit.events.iter().map(|e| e.kind()).collect();
    let mut line = format!("commit {disposition} drafts=[{}]", drafts.join(","));
    for m in messages {
        line.push_str("\n      + ");
        line.push_str(&m);
    }
    line
}

pub fn render_cause(cause: &EndCause) -> String {
    match cause {
        EndCause::Stopped(reason) => format!("stopped({reason})"),
        EndCause::Error(failure) => format!("error({})", failure.code()),
        other => other.kind().to_owned(),
    }
}

fn text_of(blocks: &[runcore::ContentBlock]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            runcore::ContentBlock::Text { text } => text.clone(),
            runcore::ContentBlock::Image { mime_type, .. } => format!("<image {mime_type}>"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn render_message(message: &Message) -> String {
    match message {
        Message::System(m) => format!("system: {:?}", text_of(&m.content)),
        Message::User(m) => format!("user: {:?}", text_of(&m.content)),
        Message::Assistant(m) => {
            let parts: Vec<String> = m
                .content
                .iter()
                .map(|b| match b {
                    AssistantBlock::Text { text, .. } => format!("{text:?}"),
                    AssistantBlock::Thinking { .. } => "<thinking>".to_owned(),
                    AssistantBlock::RedactedThinking { .. } => "<redacted thinking>".to_owned(),
                    AssistantBlock::ToolCall { id, name, .. } => format!("call {id}:{name}"),
                })
                .collect();
            let err = m
                .error_message
                .as_ref()
                .map(|e| format!(" error={e:?}"))
                .unwrap_or_default();
            format!(
                "assistant[{}]: {}{err}",
                serde_json::to_value(m.stop_reason)
                    .map(|v| v.as_str().unwrap_or("?").to_owned())
                    .unwrap_or_default(),
                parts.join(", ")
            )
        }
        Message::ToolResult(r) => format!(
            "tool_result {} ({}{}): {:?}",
            r.call_id,
            r.outcome.as_str(),
            if r.is_error { ", error" } else { "" },
            text_of(&r.content)
        ),
    }
}

pub fn render_event(event: &AgentEvent) -> String {
    match event {
        AgentEvent::RunStart {
            run_id,
            message: Some(message),
            ..
        } => {
            format!("event run_start {run_id} {}", render_message(message))
        }
        AgentEvent::RunStart { run_id, .. } => format!("event run_start {run_id} (continue)"),
        AgentEvent::RunEnd { run_id, result } => format!(
            "event run_end {run_id} {} steps={} unconsumed=[{}]",
            render_cause(&result.cause),
            result.steps,
            result
                .unconsumed
                .iter()
                .map(render_message)
                .collect::<Vec<_>>()
                .join("; ")
        ),
        AgentEvent::Loop { run_id, event } => {
            let detail = match event {
                LoopEvent::TextDelta { step, text } => format!("text_delta step {step} {text:?}"),
                LoopEvent::AssistantMessage { step, message } => format!(
                    "assistant_message step {step} {}",
                    render_message(&Message::Assistant(message.clone()))
                ),
                LoopEvent::MessageAppended { origin, message } => format!(
                    "message_appended ({}) {}",
                    serde_json::to_value(origin)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    render_message(message)
                ),
                LoopEvent::ToolStart { call_id, name, .. } => {
                    format!("tool_start {call_id}:{name}")
                }
                LoopEvent::ToolProgress { call_id, .. } => format!("tool_progress {call_id}"),
                LoopEvent::ToolEnd {
                    call_id,
                    outcome,
                    is_error,
                    ..
                } => format!(
                    "tool_end {call_id} {}{}",
                    outcome.as_str(),
                    if *is_error { " error" } else { "" }
                ),
                LoopEvent::SyntheticResult {
                    call_id, outcome, ..
                } => format!("synthetic_result {call_id} {}", outcome.as_str()),
                LoopEvent::Awaiting { ticket } => format!(
                    "awaiting {} {}/{}{}",
                    ticket.correlation_id,
                    ticket.target().kind_name(),
                    ticket.target().reason_name(),
                    ticket
                        .deadline_ms
                        .map(|d| format!(" deadline={d}"))
                        .unwrap_or_default()
                ),
                LoopEvent::Resumed {
                    correlation_id,
                    result,
                } => format!("resumed {correlation_id} with {}", result.as_str()),
                LoopEvent::InputClosed => "input_closed".to_owned(),
                other => format!("{other:?}"),
            };
            format!("event {run_id} {detail}")
        }
        other => format!("event {other:?}"),
    }
}

/// Checks that every tool call in `messages` has exactly one result, right after its
/// assistant message, in call order — except an open batch at the very end (`allow_open`).
pub fn check_pairing(messages: &[Message], allow_open: bool) -> Result<(), String> {
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::Assistant(a) => {
                let calls: Vec<ToolCall> = a.tool_calls().collect();
                let results: Vec<&runcore::ToolResultMessage> = messages[i + 1..]
                    .iter()
                    .take_while(|m| matches!(m, Message::ToolResult(_)))
                    .filter_map(Message::as_tool_result)
                    .collect();
                if results.is_empty() && !calls.is_empty() && allow_open && i + 1 == messages.len()
                {
                    return Ok(());
                }
                if results.len() != calls.len() {
                    return Err(format!(
                        "assistant message {i} has {} calls but {} results follow it",
                        calls.len(),
                        results.len()
                    ));
                }
                for (call, result) in calls.iter().zip(&results) {
                    if call.id != result.call_id || call.name != result.tool_name {
                        return Err(format!(
                            "message {i}: result {}:{} does not pair call {}:{} in call order",
                            result.call_id, result.tool_name, call.id, call.name
                        ));
                    }
                }
                i += 1 + results.len();
            }
            Message::ToolResult(r) => {
                return Err(format!(
                    "tool result {} at {i} has no call before it",
                    r.call_id
                ));
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// Drives one agent against scripted fakes, checking invariants after every output.
pub struct Harness {
    pub agent: Agent,
    pub store: MemoryStore,
    pub reducer: AgentState,
    pub trace: Vec<String>,
    pub model: VecDeque<ModelTurn>,
    /// Scripted tool outputs by tool name (default: `"<name> ok"`).
    pub tool_outputs: BTreeMap<String, ToolOutputScript>,
    pub tool_order: ToolOrder,
    pub clock_ms: u64,
    pub model_calls: Vec<(RunId, Step, bool)>,
    pub pending_model: Option<(RunId, Step)>,
    pub pending_tools: Vec<(RunId, ToolCall)>,
    pub run_starts: Vec<RunId>,
    pub run_ends: Vec<(RunId, RunResult)>,
    pub events: Vec<AgentEvent>,
    pub commits: Vec<ThreadCommit>,
    /// Requests seen by the model: the transcript it was sent at each call.
    pub requests: Vec<Vec<Message>>,
    /// Crash simulation: once this many commits were persisted through this harness, the
    /// process "crashes": nothing more is polled (the outputs after that commit are lost).
    pub crash_after_commits: Option<usize>,
    /// Whether the simulated crash happened.
    pub crashed: bool,
    /// When set, every polled output is recorded here as its serialized JSON.
    pub output_log: Option<Vec<String>>,
    /// Outputs polled so far (counts every `poll` that returned an output).
    pub polls: usize,
    /// When `polls` reaches this value, the agent is round-tripped through
    /// `snapshot_json`/`restore_json` before the next poll (the restored agent replaces it).
    pub restore_at_poll: Option<usize>,
    ended_runs: Vec<RunId>,
}

/// What a scripted tool answers.
#[derive(Debug, Clone)]
pub enum ToolOutputScript {
    Text(String),
    Error(String),
    Output(ToolOutput),
}

impl Harness {
    pub fn new(config: AgentConfig) -> Self {
        let agent = Agent::new(config).expect("valid config");
        Harness::with_agent(agent)
    }

    pub fn with_agent(agent: Agent) -> Self {
        Harness {
            agent,
            store: MemoryStore::new(),
            reducer: AgentState::default(),
            trace: Vec::new(),
            model: VecDeque::new(),
            tool_outputs: BTreeMap::new(),
            tool_order: ToolOrder::CallOrder,
            clock_ms: 0,
            model_calls: Vec::new(),
            pending_model: None,
            pending_tools: Vec::new(),
            run_starts: Vec::new(),
            run_ends: Vec::new(),
            events: Vec::new(),
            commits: Vec::new(),
            requests: Vec::new(),
            crash_after_commits: None,
            crashed: false,
            output_log: None,
            polls: 0,
            restore_at_poll: None,
            ended_runs: Vec::new(),
        }
    }

    /// A harness around an agent recovered from `store` (which the harness takes over), as a
    /// host restarting after a crash would build it: the reducer starts from the committed
    /// transcript and the recovered run (if any), then the recovery's outputs are drained.
    pub fn recover(
        config: AgentConfig,
        store: MemoryStore,
        policy: RecoveryPolicy,
    ) -> Result<Self, RecoverError> {
        let thread = config.thread_id.clone();
        let agent = Agent::recover(config, &store, &thread, policy)?;
        // What a UI restarting with the host knows: the committed transcript and the run the
        // store says is not over (recovery may end it at once, e.g. with `Seal`).
        let mut reducer = AgentState::with_messages(store.committed_messages(&thread).unwrap());
        let mut h = Harness::with_agent(agent);
        if let Some(head) = store.latest_run(&thread).unwrap() {
            let status = match &head.state {
                RunState::Running => Some(AgentStatus::Running),
                RunState::Awaiting => Some(AgentStatus::Awaiting),
                RunState::Ended(_) => None,
            };
            if let Some(status) = status {
                reducer.status = status;
                reducer.awaiting = store
                    .resume_ticket(&head.id)
                    .unwrap()
                    .map(|t| t.target().clone());
                reducer.active_run_id = Some(head.id.clone());
                h.run_starts.push(head.id);
            }
        }
        h.reducer = reducer;
        h.store = store;
        h.trace.push(format!(
            "> recover ({})",
            serde_json::to_value(policy)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        ));
        h.drain();
        Ok(h)
    }

    pub fn script(&mut self, replies: impl IntoIterator<Item = ModelTurn>) -> &mut Self {
        self.model.extend(replies);
        self
    }

    pub fn note(&mut self, line: impl Into<String>) {
        self.trace.push(format!("# {}", line.into()));
    }

    /// The rendered trace.
    pub fn rendered(&self) -> String {
        let mut out = self.trace.join("\n");
        out.push('\n');
        out
    }

    /// Applies `input` (rendered as `label`) at the agent's own clock and drains. Errors are
    /// recorded and returned.
    pub fn input(&mut self, label: &str, input: Input) -> Result<(), AgentError> {
        let now_ms = self.agent.clock_ms();
        self.input_at(label, input, now_ms)
    }

    /// Applies `input` (rendered as `label`) at `now_ms` and drains. Errors are recorded and
    /// returned.
    pub fn input_at(&mut self, label: &str, input: Input, now_ms: u64) -> Result<(), AgentError> {
        let before = serde_json::to_string(&self.agent).expect("agent serializes");
        match self.agent.handle(input, now_ms) {
            Ok(()) => {
                self.trace.push(format!("> {label}"));
                self.drain();
                Ok(())
            }
            Err(e) => {
                let after = serde_json::to_string(&self.agent).expect("agent serializes");
                assert_eq!(before, after, "a rejected input changed the agent: {e}");
                self.trace
                    .push(format!("> {label}\n  ! {} ({})", e, e.kind()));
                Err(e)
            }
        }
    }

    pub fn prompt(&mut self, text: &str) -> Result<(), AgentError> {
        let now_ms = self.clock_ms;
        self.input_at(
            &format!("prompt {text:?}"),
            Input::Prompt {
                message: Some(UserMessage::text(text)),
                run_id: None,
                messages: Vec::new(),
            },
            now_ms,
        )
    }

    pub fn steer(&mut self, text: &str) -> Result<(), AgentError> {
        self.input(
            &format!("steer {text:?}"),
            Input::Steer {
                message: UserMessage::text(text),
            },
        )
    }

    pub fn follow_up(&mut self, text: &str) -> Result<(), AgentError> {
        self.input(
            &format!("follow_up {text:?}"),
            Input::FollowUp {
                message: UserMessage::text(text),
            },
        )
    }

    pub fn abort(&mut self) -> Result<(), AgentError> {
        self.input("abort", Input::Abort)
    }

    pub fn resume(&mut self, result: ResumeResult) -> Result<(), AgentError> {
        let label = format!(
            "resume {}",
            serde_json::to_string(&result).unwrap_or_default()
        );
        let now_ms = self.clock_ms;
        self.input_at(&label, Input::ResumeTicket { result }, now_ms)
    }

    /// Polls one output and acts on it: commits are persisted, events reduced, actions
    /// recorded as outstanding. Returns false when there was nothing to poll.
    pub fn poll_one(&mut self) -> bool {
        if self.crashed {
            return false;
        }
        if self.restore_at_poll == Some(self.polls) {
            self.restore_at_poll = None;
            let json = self.agent.snapshot_json();
            let restored = Agent::restore_json(&json).expect("a snapshot restores");
            assert_eq!(
                restored.snapshot_json(),
                json,
                "snapshot round trip changed the agent"
            );
            self.agent = restored;
        }
        let Some(output) = self.agent.poll() else {
            return false;
        };
        self.polls += 1;
        if let Some(log) = &mut self.output_log {
            log.push(serde_json::to_string(&output).expect("outputs serialize"));
        }
        self.trace.push(format!("  {}", render_output(&output)));
        match output {
            Output::Commit(commit) => {
                if let Some(ended) = self
                    .ended_runs
                    .iter()
                    .find(|r| *r == commit.commit.run_id())
                {
                    panic!("a commit for run {ended} after its Ended commit");
                }
                if let RunDisposition::Ended { run_id, .. } = &commit.commit.run {
                    self.ended_runs.push(run_id.clone());
                }
                // Fenced like a real host's (SPEC §7.1): the agent's ordinal and expected
                // thread version must match the store, recovered agents included.
                let receipt = self
                    .store
                    .commit_operation(commit.clone().into_operation())
                    .unwrap_or_else(|e| panic!("the store rejected an agent commit: {e}"));
                assert!(!receipt.duplicate, "an agent commit was a duplicate");
                self.commits.push(commit.commit);
                if self.crash_after_commits == Some(self.commits.len()) {
                    self.crashed = true;
                    self.trace
                        .push("  ~ crash: the process stops here".to_owned());
                }
            }
            Output::Event(event) => {
                match &event {
                    AgentEvent::RunStart { run_id, .. } => {
                        assert_eq!(
                            self.run_starts.len(),
                            self.run_ends.len(),
                            "run_start of {run_id} before the previous run_end"
                        );
                        self.run_starts.push(run_id.clone());
                    }
                    AgentEvent::RunEnd { run_id, result } => {
                        assert_eq!(
                            self.run_starts.last(),
                            Some(run_id),
                            "run_end of a run that is not the latest started"
                        );
                        assert!(
                            self.ended_runs.contains(run_id),
                            "run_end before the terminal commit"
                        );
                        self.run_ends.push((run_id.clone(), result.clone()));
                    }
                    _ => {}
                }
                self.reducer = reduce(std::mem::take(&mut self.reducer), &event);
                self.events.push(event);
            }
            Output::Action(Action::CallModel {
                run_id,
                step,
                final_step,
            }) => {
                assert!(
                    self.pending_model.is_none() && self.pending_tools.is_empty(),
                    "two outstanding actions"
                );
                let request = self
                    .agent
                    .model_request()
                    .expect("a model request while a call is out");
                assert_eq!(request.step, step);
                self.requests.push(request.messages.to_vec());
                self.model_calls.push((run_id.clone(), step, final_step));
                self.pending_model = Some((run_id, step));
            }
            Output::Action(Action::ExecuteTools { run_id, calls, .. }) => {
                assert!(
                    self.pending_model.is_none() && self.pending_tools.is_empty(),
                    "two outstanding actions"
                );
                self.pending_tools = calls.into_iter().map(|c| (run_id.clone(), c)).collect();
            }
        }
        true
    }

    /// Drains every output, then checks the invariants.
    pub fn drain(&mut self) {
        while self.poll_one() {}
        if !self.crashed {
            self.check_invariants();
        }
    }

    /// Invariants that hold whenever the outputs are drained.
    pub fn check_invariants(&self) {
        let thread = self.agent.thread_id().clone();
        let committed = self.store.committed_messages(&thread).unwrap();
        assert_eq!(
            committed,
            self.agent.transcript(),
            "the store's transcript differs from the agent's"
        );
        if let Err(e) = check_pairing(self.agent.transcript(), true) {
            panic!("pairing broken: {e}\n{}", self.rendered());
        }
        if self.agent.active_run_id().is_none() {
            assert_eq!(
                self.reducer.messages,
                self.agent.transcript(),
                "reducer messages after run_end"
            );
            assert_eq!(self.reducer.status, runcore::AgentStatus::Idle);
            assert_eq!(self.run_starts.len(), self.run_ends.len());
        } else {
            assert_eq!(
                self.reducer.active_run_id.as_ref(),
                self.agent.active_run_id()
            );
        }
        assert!(self.run_ends.len() <= self.run_starts.len());
    }

    /// Answers the outstanding action once from the scripts. Returns false when nothing is
    /// outstanding or the model script is empty.
    pub fn step(&mut self) -> bool {
        if let Some((run_id, step)) = self.pending_model.clone() {
            let Some(reply) = self.model.pop_front() else {
                return false;
            };
            self.pending_model = None;
            self.answer_model(&run_id, step, reply);
            return true;
        }
        if !self.pending_tools.is_empty() {
            let mut calls = std::mem::take(&mut self.pending_tools);
            if self.tool_order == ToolOrder::Reversed {
                calls.reverse();
            }
            for (run_id, call) in calls {
                self.answer_tool(&run_id, &call);
            }
            return true;
        }
        false
    }

    /// Gives `turn` as the answer of `run_id`'s call `step`, one input at a time
    /// ([`ModelTurn::each_input`]), each labelled in the trace and drained.
    pub fn answer_model(&mut self, run_id: &RunId, step: Step, turn: ModelTurn) {
        turn.each_input(run_id, step, |input| {
            let label = match &input {
                Input::ModelDelta { text, .. } => format!("model_delta step {step} {text:?}"),
                Input::ModelFailed { code, .. } => format!("model_failed step {step} {code}"),
                Input::ModelDone { message, .. } => format!(
                    "model_done step {step}: {}",
                    render_message(&Message::from(message.clone()))
                ),
                other => other.kind().to_owned(),
            };
            let kind = input.kind();
            self.input(&label, input)
                .unwrap_or_else(|e| panic!("{kind} rejected: {e}"));
            Ok::<(), std::convert::Infallible>(())
        })
        .unwrap_or_else(|never| match never {});
    }

    pub fn tool_output(&self, call: &ToolCall) -> ToolOutput {
        match self.tool_outputs.get(call.name.as_str()) {
            Some(ToolOutputScript::Text(t)) => ToolOutput::text(call.id.clone(), t.clone()),
            Some(ToolOutputScript::Error(t)) => ToolOutput::error(call.id.clone(), t.clone()),
            Some(ToolOutputScript::Output(o)) => ToolOutput {
                call_id: call.id.clone(),
                ..o.clone()
            },
            None => ToolOutput::text(call.id.clone(), format!("{} ok", call.name)),
        }
    }

    pub fn answer_tool(&mut self, run_id: &RunId, call: &ToolCall) {
        let output = self.tool_output(call);
        self.pending_tools.retain(|(_, c)| c.id != call.id);
        self.input(
            &format!("tool_done {}", call.id),
            Input::tool_done(run_id.clone(), output),
        )
        .expect("tool_done accepted");
    }

    /// Answers one specific pending call (for out-of-order delivery).
    pub fn answer_call(&mut self, call_id: &str) {
        let (run_id, call) = self
            .pending_tools
            .iter()
            .find(|(_, c)| c.id == CallId::new(call_id))
            .cloned()
            .unwrap_or_else(|| panic!("call {call_id} is not pending"));
        self.answer_tool(&run_id, &call);
    }

    /// Steps until nothing is outstanding or the model script is empty.
    pub fn drive(&mut self) {
        self.drive_bounded(10_000);
    }

    /// At most `n` steps.
    pub fn drive_bounded(&mut self, n: usize) {
        for _ in 0..n {
            if !self.step() {
                break;
            }
        }
    }

    /// The end of the last run.
    pub fn last_result(&self) -> &RunResult {
        &self.run_ends.last().expect("a run ended").1
    }

    pub fn last_cause(&self) -> &EndCause {
        &self.last_result().cause
    }
}
