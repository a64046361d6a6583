//! The system under test, driven exactly like a host: one input, then `poll()` until `None`,
//! every commit persisted into a [`MemoryStore`] (it must be accepted), every event folded into
//! [`reduce`], every action recorded as outstanding. [`Host::check_invariants`] and
//! [`Host::check_against`] run after every transition.

use runcore::store::{CommitLog, CommittedThreadView, MemoryStore};
use runcore::{
    Action, Agent, AgentConfig, AgentError, AgentEvent, AgentState, AgentStatus, AwaitTarget,
    CallId, Message, Output, PauseReason, ResumeError, RunDisposition, RunId, RunResult, RunState,
    ThreadId, ToolCall, ToolSpec, reduce,
};
use serde_json::json;

use super::THREAD;
use super::reference::{Expect, RefConfig, RefEnd, RefPhase, RefState};
use super::transitions::{Answer, Transition, input_for, interjection, tool_output};
use crate::common::harness::{check_pairing, render_output};

/// The action the host is working on.
#[derive(Clone, Debug, PartialEq)]
enum Outstanding {
    None,
    Model {
        run: RunId,
        step: u32,
        final_step: bool,
    },
    Tools {
        run: RunId,
        calls: Vec<ToolCall>,
        answered: Vec<CallId>,
    },
}

/// What the host saw of one run.
#[derive(Clone, Debug)]
struct RunLog {
    id: RunId,
    /// Transcript index of its prompt.
    start: usize,
    /// Transcript length at its `run_end`.
    end: Option<usize>,
    /// Accepted `steer` / `follow_up` messages.
    queued: Vec<Message>,
    /// Accepted resume inputs.
    resume_inputs: Vec<Message>,
    result: Option<RunResult>,
}

/// An agent driven like a host.
pub struct Host {
    pub agent: Agent,
    store: MemoryStore,
    reducer: AgentState,
    outstanding: Outstanding,
    runs: Vec<RunLog>,
    ended_commits: Vec<RunId>,
    /// The state the latest commit recorded, with its run.
    last_commit: Option<(RunId, RunState)>,
    last: Expect,
    interjected: Expect,
    trace: Vec<String>,
}

macro_rules! ensure {
    ($host:expr, $cond:expr, $($arg:tt)+) => {
        if !$cond {
            panic!("{}\n--- trace ---\n{}", format!($($arg)+), $host.trace.join("\n"));
        }
    };
}

macro_rules! ensure_eq {
    ($host:expr, $left:expr, $right:expr, $($arg:tt)+) => {
        match (&$left, &$right) {
            (left, right) => {
                if left != right {
                    panic!(
                        "{}\n  left: {:?}\n right: {:?}\n--- trace ---\n{}",
                        format!($($arg)+),
                        left,
                        right,
                        $host.trace.join("\n")
                    );
                }
            }
        }
    };
}

/// The agent configuration for a reference configuration (one listed `auto` tool; unlisted
/// tools are `auto` too).
pub fn config_for(config: &RefConfig) -> AgentConfig {
    AgentConfig {
        max_steps: config.max_steps,
        steering_mode: config.steering,
        follow_up_mode: config.follow_ups,
        ..AgentConfig::for_thread(THREAD)
    }
    .with_tool("alpha", ToolSpec::auto("the first tool"))
}

/// The error kind the reference predicts: `AgentError::kind`, or `resume/<resume_error>`.
fn error_kind(error: &AgentError) -> &'static str {
    match error {
        AgentError::Resume(ResumeError::NotWaiting) => "resume/not_waiting",
        AgentError::Resume(ResumeError::ResultKindMismatch { .. }) => "resume/result_kind_mismatch",
        AgentError::Resume(_) => "resume/other",
        other => other.kind(),
    }
}

/// SPEC §8.2 output order for one input: commits, then events, then at most one action.
fn rank(output: &Output) -> u8 {
    match output {
        Output::Commit(_) => 0,
        Output::Event(_) => 1,
        Output::Action(_) => 2,
    }
}

impl Host {
    pub fn new(config: AgentConfig) -> Self {
        Host {
            agent: Agent::new(config).expect("a valid config"),
            store: MemoryStore::new(),
            reducer: AgentState::default(),
            outstanding: Outstanding::None,
            runs: Vec::new(),
            ended_commits: Vec::new(),
            last_commit: None,
            last: Expect::Nothing,
            interjected: Expect::Nothing,
            trace: Vec::new(),
        }
    }

    fn thread(&self) -> ThreadId {
        ThreadId::new(THREAD)
    }

    /// Applies one transition; returns every output (or error) as JSON lines.
    pub fn apply(&mut self, t: &Transition) -> Vec<String> {
        let mut lines = Vec::new();
        match t {
            Transition::Interject { inner, stop } => {
                self.last = self.input(inner, true, &mut lines);
                self.interjected = self.input(&interjection(stop), false, &mut lines);
            }
            _ => {
                self.last = self.input(t, false, &mut lines);
                self.interjected = Expect::Nothing;
            }
        }
        lines
    }

    /// Applies one input and drains it (all but its action when `hold_action`).
    fn input(&mut self, t: &Transition, hold_action: bool, lines: &mut Vec<String>) -> Expect {
        self.trace.push(format!("> {t:?}"));
        let before = serde_json::to_string(&self.agent).expect("the agent serializes");
        let transcript_len = self.agent.transcript().len();
        let result = match t {
            // Through the method: it is the door that checks an output naming another call
            // (an `Input` cannot express one).
            Transition::ToolDone { run, call, answer } => self.agent.tool_done(
                &RunId::new(run.as_str()),
                &CallId::new(call.as_str()),
                tool_output(call, *answer),
            ),
            _ => {
                let (input, now_ms) = input_for(t);
                let now_ms = now_ms.unwrap_or(self.agent.clock_ms());
                self.agent.handle(input, now_ms)
            }
        };
        match result {
            Err(error) => {
                self.trace.push(format!("  ! {error} ({})", error.kind()));
                let after = serde_json::to_string(&self.agent).expect("the agent serializes");
                ensure!(
                    self,
                    before == after,
                    "(f) the rejected input changed the agent: {error}"
                );
                let output = self.agent.poll();
                ensure!(
                    self,
                    output.is_none(),
                    "a rejected input emitted {output:?}"
                );
                lines.push(json!({ "error": error }).to_string());
                Expect::Rejected(error_kind(&error))
            }
            Ok(()) => {
                self.consume(t);
                self.drain(transcript_len, hold_action, lines);
                Expect::Accepted
            }
        }
    }

    /// Books an accepted input: the outcome answers the outstanding action; queued input is
    /// remembered for its run.
    fn consume(&mut self, t: &Transition) {
        match t {
            Transition::ModelDone { run, step, .. } | Transition::ModelFailed { run, step, .. } => {
                let answers = matches!(&self.outstanding,
                    Outstanding::Model { run: out, step: s, .. } if out.as_str() == run && s == step);
                ensure!(
                    self,
                    answers,
                    "an accepted model outcome that was not outstanding"
                );
                self.outstanding = Outstanding::None;
            }
            Transition::ToolDone { run, call, .. } => {
                let Outstanding::Tools {
                    run: out,
                    calls,
                    answered,
                } = &mut self.outstanding
                else {
                    panic!("an accepted tool_done with no tools outstanding");
                };
                assert_eq!(out.as_str(), run, "tool_done accepted for another run");
                let call = CallId::new(call.as_str());
                assert!(
                    calls.iter().any(|c| c.id == call) && !answered.contains(&call),
                    "tool_done accepted for {call}, which is not pending"
                );
                answered.push(call);
                if answered.len() == calls.len() {
                    self.outstanding = Outstanding::None;
                }
            }
            Transition::AbandonTools => {
                ensure!(
                    self,
                    matches!(self.outstanding, Outstanding::Tools { .. }),
                    "abandon_tools accepted with no tools outstanding"
                );
                self.outstanding = Outstanding::None;
            }
            Transition::Steer { text } | Transition::FollowUp { text } => {
                let log = self.runs.last_mut().expect("a run to queue into");
                log.queued.push(Message::user(text.as_str()));
            }
            Transition::Resume {
                answer: Answer::Input(text),
            } => {
                let log = self.runs.last_mut().expect("a run to resume");
                log.resume_inputs.push(Message::user(text.as_str()));
            }
            _ => {}
        }
    }

    /// Polls until `None` (or, when `hold_action`, until only an action is left), acting on
    /// every output like a host.
    fn drain(&mut self, transcript_len: usize, hold_action: bool, lines: &mut Vec<String>) {
        let outputs: Vec<Output> = std::iter::from_fn(|| {
            if hold_action && self.agent.pending_outputs() == 0 {
                None
            } else {
                self.agent.poll()
            }
        })
        .collect();
        let ranks: Vec<u8> = outputs.iter().map(rank).collect();
        for output in &outputs {
            self.trace.push(format!("  {}", render_output(output)));
        }
        ensure!(
            self,
            ranks.windows(2).all(|w| w[0] <= w[1]),
            "outputs of one input are not commits, then events, then an action: {ranks:?}"
        );
        ensure!(
            self,
            ranks.iter().filter(|r| **r == 2).count() <= 1,
            "more than one action for one input"
        );
        for output in outputs {
            lines.push(serde_json::to_string(&output).expect("outputs serialize"));
            self.act(output, transcript_len);
        }
    }

    fn act(&mut self, output: Output, transcript_len: usize) {
        let thread = self.thread();
        match output {
            Output::Commit(agent_commit) => {
                let run = agent_commit.commit.run_id().clone();
                // SPEC §7.1: the agent's own counts match what the store holds.
                ensure_eq!(
                    self,
                    agent_commit.expected_thread_version,
                    self.store
                        .thread_version(&thread)
                        .expect("memory store reads never fail"),
                    "§7.1 expected_thread_version of a commit of {run}"
                );
                ensure_eq!(
                    self,
                    agent_commit.ordinal,
                    self.store.run_commit_count(&run),
                    "§7.1 ordinal of a commit of {run}"
                );
                let commit = &agent_commit.commit;
                ensure!(
                    self,
                    !self.ended_commits.contains(&run),
                    "(e) a commit for {run} after its Ended commit"
                );
                let changes_state = commit
                    .events
                    .iter()
                    .any(|d| d.kind() == "run_state_changed");
                ensure!(
                    self,
                    !commit.messages.is_empty() || changes_state,
                    "a commit with no message that does not change the disposition"
                );
                // SPEC §6: state_changed for the first commit of an attempt and for every
                // Awaiting or Ended commit; not for further Running progress commits.
                let state = commit.run.state();
                let progress = state == RunState::Running
                    && self.last_commit == Some((run.clone(), RunState::Running));
                ensure_eq!(
                    self,
                    changes_state,
                    !progress,
                    "§6 run_state_changed draft of a {state:?} commit"
                );
                self.last_commit = Some((run.clone(), state));
                if let RunDisposition::Ended { run_id, .. } = &commit.run {
                    self.ended_commits.push(run_id.clone());
                }
                match self.store.commit_operation(agent_commit.into_operation()) {
                    Ok(receipt) => {
                        ensure!(self, !receipt.duplicate, "an agent commit was a duplicate")
                    }
                    Err(e) => ensure!(self, false, "the store rejected an agent commit: {e}"),
                }
            }
            Output::Event(event) => {
                match &event {
                    AgentEvent::RunStart { run_id, .. } => {
                        let open = self.runs.last().is_some_and(|r| r.result.is_none());
                        ensure!(
                            self,
                            !open,
                            "(c) run_start of {run_id} before the previous run_end"
                        );
                        let expected = format!("{THREAD}/run-{}", self.runs.len() + 1);
                        ensure_eq!(self, run_id.as_str(), expected, "(c) run ids in order");
                        self.runs.push(RunLog {
                            id: run_id.clone(),
                            start: transcript_len,
                            end: None,
                            queued: Vec::new(),
                            resume_inputs: Vec::new(),
                            result: None,
                        });
                    }
                    AgentEvent::RunEnd { run_id, result } => {
                        let latest = self.runs.last().map(|r| (r.id.clone(), r.result.is_none()));
                        ensure_eq!(
                            self,
                            latest,
                            Some((run_id.clone(), true)),
                            "(c) run_end of a run that is not the open one"
                        );
                        ensure!(
                            self,
                            self.ended_commits.contains(run_id),
                            "run_end of {run_id} before its terminal commit"
                        );
                        ensure_eq!(
                            self,
                            self.outstanding,
                            Outstanding::None,
                            "a run ended with an action outstanding"
                        );
                        let end = self.store.message_count(&thread);
                        let log = self.runs.last_mut().expect("checked");
                        log.end = Some(end);
                        log.result = Some(result.clone());
                    }
                    AgentEvent::QueuesCleared {
                        run_id,
                        steering,
                        follow_ups,
                    } => {
                        // Withdrawn: queued input of its run that never enters (not lost:
                        // announced here).
                        let open = self.runs.last_mut().filter(|r| r.result.is_none());
                        match (run_id, open) {
                            (None, open) => ensure!(
                                self,
                                open.is_none() && steering.is_empty() && follow_ups.is_empty(),
                                "queues_cleared without a run while a run is open, or with messages"
                            ),
                            (Some(run_id), Some(log)) if &log.id == run_id => {
                                for message in steering.iter().chain(follow_ups) {
                                    let at = log.queued.iter().position(|m| m == message);
                                    ensure!(
                                        self,
                                        at.is_some(),
                                        "(d) withdrew {message:?}, never queued"
                                    );
                                    if let Some(at) = at {
                                        log.queued.remove(at);
                                    }
                                }
                            }
                            (Some(run_id), _) => {
                                ensure!(self, false, "queues_cleared of {run_id}, not the open run")
                            }
                        }
                    }
                    _ => {}
                }
                self.reducer = reduce(std::mem::take(&mut self.reducer), &event);
                ensure!(
                    self,
                    self.reducer.messages.len() <= self.store.message_count(&thread),
                    "an event announced a message before it was committed"
                );
            }
            Output::Action(Action::CallModel {
                run_id,
                step,
                final_step,
            }) => {
                ensure_eq!(
                    self,
                    self.outstanding,
                    Outstanding::None,
                    "two outstanding actions"
                );
                let request = self
                    .agent
                    .model_request()
                    .map(|r| (r.step, r.messages.len()));
                ensure_eq!(
                    self,
                    request,
                    Some((step, self.agent.transcript().len())),
                    "the model request of the handed-out call"
                );
                self.outstanding = Outstanding::Model {
                    run: run_id,
                    step,
                    final_step,
                };
            }
            Output::Action(Action::ExecuteTools { run_id, calls, .. }) => {
                ensure_eq!(
                    self,
                    self.outstanding,
                    Outstanding::None,
                    "two outstanding actions"
                );
                ensure!(self, !calls.is_empty(), "an empty ExecuteTools");
                self.outstanding = Outstanding::Tools {
                    run: run_id,
                    calls,
                    answered: Vec::new(),
                };
            }
        }
    }

    /// Invariants (a)–(h) that hold after every drained input.
    pub fn check_invariants(&self) {
        let transcript = self.agent.transcript();
        let thread = self.thread();

        // (a) every call has exactly one result, in call order, before the next assistant
        // message; an open batch at the tail only while its tools are outstanding.
        let tools_out = matches!(self.outstanding, Outstanding::Tools { .. });
        if let Err(e) = check_pairing(transcript, tools_out) {
            ensure!(self, false, "(a) pairing broken: {e}");
        }

        // (b) at most one active run, and it is the open one.
        let open: Vec<&RunId> = self
            .runs
            .iter()
            .filter(|r| r.result.is_none())
            .map(|r| &r.id)
            .collect();
        ensure!(
            self,
            open.len() <= 1,
            "(b) more than one open run: {open:?}"
        );
        ensure_eq!(
            self,
            open.first().copied(),
            self.agent.active_run_id(),
            "(b) the open run is the active run"
        );

        // SPEC §8.2: a run's steps never exceed max_steps.
        let max_steps = self.agent.config().max_steps;
        let steps = self
            .runs
            .iter()
            .filter_map(|r| r.result.as_ref().map(|result| result.steps))
            .chain(self.agent.steps());
        for s in steps {
            ensure!(
                self,
                s <= max_steps,
                "a run made {s} steps, over {max_steps}"
            );
        }

        // (c) is checked as events arrive: start k, end k, start k+1…
        ensure!(
            self,
            self.runs.iter().rev().skip(1).all(|r| r.result.is_some()),
            "(c) an earlier run never ended"
        );

        // (d) queued input stays in its run: in its transcript slice or in its unconsumed.
        for log in &self.runs {
            let end = log.end.unwrap_or(transcript.len());
            for message in &log.queued {
                let inside = transcript[log.start..end]
                    .iter()
                    .filter(|m| *m == message)
                    .count();
                let everywhere = transcript.iter().filter(|m| *m == message).count();
                ensure_eq!(
                    self,
                    everywhere,
                    inside,
                    "(d) queued input of {} leaked",
                    log.id
                );
                if let Some(result) = &log.result {
                    let unused = result.unconsumed.iter().filter(|m| *m == message).count();
                    ensure_eq!(
                        self,
                        inside + unused,
                        1,
                        "(d) queued input of {} neither used once nor returned",
                        log.id
                    );
                } else {
                    ensure!(self, inside <= 1, "(d) queued input used twice");
                }
            }
            if let Some(result) = &log.result {
                for message in &result.unconsumed {
                    ensure!(
                        self,
                        log.queued.contains(message) || log.resume_inputs.contains(message),
                        "(d) unconsumed input of {} that it was never given",
                        log.id
                    );
                }
            } else {
                let waiting = log
                    .queued
                    .iter()
                    .filter(|m| !transcript[log.start..].contains(m))
                    .count();
                let (steering, follow_ups) = self.agent.queued();
                ensure_eq!(
                    self,
                    waiting,
                    steering + follow_ups,
                    "(d) queued input of the active run neither used nor still queued"
                );
            }
        }

        // (e) is checked as commits arrive; every ended run has exactly its Ended commit.
        let ended: Vec<&RunId> = self
            .runs
            .iter()
            .filter(|r| r.result.is_some())
            .map(|r| &r.id)
            .collect();
        ensure_eq!(
            self,
            ended,
            self.ended_commits.iter().collect::<Vec<_>>(),
            "(e) terminal commits"
        );

        // (g) the reducer agrees with the agent.
        let status = match self.agent.run_state() {
            None => AgentStatus::Idle,
            Some(RunState::Awaiting) => AgentStatus::Awaiting,
            Some(_) => AgentStatus::Running,
        };
        ensure_eq!(self, self.reducer.status, status, "(g) reducer status");
        ensure_eq!(
            self,
            self.reducer.active_run_id.as_ref(),
            self.agent.active_run_id(),
            "(g) reducer active run"
        );
        ensure!(
            self,
            self.reducer.messages == transcript,
            "(g) the reducer's messages differ from the transcript:\n{:#?}\nvs\n{:#?}",
            self.reducer.messages,
            transcript
        );
        if self.agent.active_run_id().is_none() {
            ensure_eq!(
                self,
                self.reducer.last_end.as_ref(),
                self.agent.last_end().map(|(_, cause)| cause),
                "(g) reducer last_end"
            );
        }
        let pending: Vec<CallId> = match &self.outstanding {
            Outstanding::Tools {
                calls, answered, ..
            } => calls
                .iter()
                .map(|c| c.id.clone())
                .filter(|id| !answered.contains(id))
                .collect(),
            _ => Vec::new(),
        };
        ensure_eq!(
            self,
            self.reducer.pending_tool_call_ids,
            pending,
            "(g) reducer pending tool calls"
        );
        if !matches!(self.outstanding, Outstanding::Model { .. }) {
            ensure_eq!(
                self,
                self.reducer.streaming_text,
                "",
                "(g) streaming text after the answer"
            );
        }
        ensure_eq!(
            self,
            self.reducer.awaiting.as_ref(),
            self.agent.current_ticket().map(|t| t.target()),
            "(g) reducer awaiting"
        );

        // (h) folding the commits reproduces the transcript and the run states.
        ensure!(
            self,
            self.store.committed_messages(&thread).unwrap() == transcript,
            "(h) the store's transcript differs from the agent's"
        );
        for log in &self.runs {
            let expected = match &log.result {
                Some(result) => Some(RunState::Ended(result.cause.clone())),
                None => self.agent.run_state(),
            };
            ensure_eq!(
                self,
                self.store.run_state(&log.id).unwrap(),
                expected,
                "(h) the store's state of {}",
                log.id
            );
        }
        ensure_eq!(
            self,
            self.store.latest_run(&thread).unwrap().map(|r| r.id),
            self.runs.last().map(|r| r.id.clone()),
            "(h) the thread head"
        );
        if let Some(active) = self.agent.active_run_id() {
            ensure_eq!(
                self,
                self.store.resume_ticket(active).unwrap().as_ref(),
                self.agent.current_ticket(),
                "(h) the committed ticket"
            );
        }
        ensure!(
            self,
            self.agent.pending_outputs() == 0,
            "outputs left undrained"
        );
    }

    /// Agreement with the reference.
    pub fn check_against(&self, reference: &RefState) {
        ensure_eq!(
            self,
            self.last,
            reference.last,
            "acceptance of the last input"
        );
        ensure_eq!(
            self,
            self.interjected,
            reference.interjected,
            "acceptance of the interjected input"
        );
        ensure!(
            self,
            self.agent.transcript() == reference.transcript,
            "the transcript differs from the reference:\n{:#?}\nvs reference\n{:#?}",
            self.agent.transcript(),
            reference.transcript
        );
        let ends: Vec<RefEnd> = self
            .runs
            .iter()
            .filter_map(|log| {
                log.result.as_ref().map(|result| RefEnd {
                    run: log.id.as_str().to_owned(),
                    cause: result.cause.clone(),
                    steps: result.steps,
                    unconsumed: result.unconsumed.clone(),
                })
            })
            .collect();
        ensure_eq!(self, ends, reference.ends, "run ends");
        ensure_eq!(
            self,
            self.agent
                .last_end()
                .map(|(run, cause)| (run.as_str().to_owned(), cause.clone())),
            reference
                .ends
                .last()
                .map(|e| (e.run.clone(), e.cause.clone())),
            "last_end"
        );
        let Some(run) = &reference.run else {
            ensure!(self, self.agent.is_idle(), "the agent is not idle");
            ensure_eq!(
                self,
                self.outstanding,
                Outstanding::None,
                "an action outstanding while idle"
            );
            return;
        };
        ensure_eq!(
            self,
            self.agent.active_run_id().map(RunId::as_str),
            Some(run.id.as_str()),
            "the active run"
        );
        ensure_eq!(self, self.agent.steps(), Some(run.steps), "steps");
        ensure_eq!(
            self,
            self.agent.queued(),
            (run.steering.len(), run.follow_ups.len()),
            "queued (steering, follow-ups)"
        );
        match &run.phase {
            RefPhase::Model { step } => {
                ensure_eq!(
                    self,
                    self.agent.run_state(),
                    Some(RunState::Running),
                    "status"
                );
                ensure_eq!(
                    self,
                    self.outstanding,
                    Outstanding::Model {
                        run: RunId::new(run.id.as_str()),
                        step: *step,
                        final_step: *step == reference.config.max_steps,
                    },
                    "the outstanding model call"
                );
            }
            RefPhase::Tools { calls, results, .. } => {
                ensure_eq!(
                    self,
                    self.agent.run_state(),
                    Some(RunState::Running),
                    "status"
                );
                let Outstanding::Tools {
                    run: out,
                    calls: out_calls,
                    answered,
                } = &self.outstanding
                else {
                    panic!(
                        "tools should be outstanding, not {:?}\n--- trace ---\n{}",
                        self.outstanding,
                        self.trace.join("\n")
                    );
                };
                ensure_eq!(
                    self,
                    out.as_str(),
                    run.id,
                    "the run of the outstanding tools"
                );
                ensure_eq!(self, out_calls, calls, "the executing calls");
                let mut answered: Vec<&str> = answered.iter().map(CallId::as_str).collect();
                answered.sort_unstable();
                let expected: Vec<&str> = results.keys().map(String::as_str).collect();
                ensure_eq!(self, answered, expected, "the answered calls");
            }
            RefPhase::Paused => {
                ensure_eq!(
                    self,
                    self.agent.run_state(),
                    Some(RunState::Awaiting),
                    "status"
                );
                ensure_eq!(
                    self,
                    self.outstanding,
                    Outstanding::None,
                    "an action outstanding while paused"
                );
                ensure_eq!(
                    self,
                    self.agent.current_ticket().map(|t| t.target().clone()),
                    Some(AwaitTarget::Pause(PauseReason::Manual)),
                    "the ticket"
                );
            }
            RefPhase::Between => panic!("the reference stopped between steps"),
        }
    }
}
