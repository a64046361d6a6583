//! The reference: a deliberately naive model of SPEC §8.2 (`Vec`, `VecDeque`, `BTreeMap`, the
//! rules written out one by one, no cleverness). It predicts whether each input is accepted or
//! rejected (and with which error kind), the status, the outstanding action, the committed
//! transcript, every run end (cause, steps, unconsumed input) and the queues.

use std::collections::{BTreeMap, VecDeque};

use runcore::{
    AgentConfig, AssistantMessage, EndCause, Failure, Message, QueueMode, ResultOutcome,
    StopReason, ToolCall, ToolResultMessage,
};

use super::THREAD;
use super::transitions::{Answer, Reply, ToolAnswer, Transition, interjection, tool_output};

/// What the reference expects of the last input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// No input yet.
    Nothing,
    /// Accepted.
    Accepted,
    /// Rejected with this kind (`AgentError::kind`, or `resume/<resume_error>`).
    Rejected(&'static str),
}

#[derive(Clone, Debug)]
pub struct RefConfig {
    pub max_steps: u32,
    pub steering: QueueMode,
    pub follow_ups: QueueMode,
}

/// The reference: the rules of SPEC §8.2 written out directly.
#[derive(Clone, Debug)]
pub struct RefState {
    pub config: RefConfig,
    /// Counts transitions; makes generated texts and call ids unique.
    pub serial: u32,
    pub runs_started: u32,
    /// The committed transcript.
    pub transcript: Vec<Message>,
    pub run: Option<RefRun>,
    /// Every run end so far, in order.
    pub ends: Vec<RefEnd>,
    pub last: Expect,
    /// What the reference expects of the input interjected by the last transition.
    pub interjected: Expect,
}

#[derive(Clone, Debug)]
pub struct RefRun {
    pub id: String,
    pub steps: u32,
    pub phase: RefPhase,
    /// The cause an abort or stop asked for.
    pub end_request: Option<EndCause>,
    pub pause_requested: bool,
    pub steering: VecDeque<Message>,
    pub follow_ups: VecDeque<Message>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum RefPhase {
    /// The model call of `step` is outstanding.
    Model { step: u32 },
    /// The calls of `step` are executing; `results` holds the answered ones by call id.
    Tools {
        step: u32,
        calls: Vec<ToolCall>,
        results: BTreeMap<String, ToolResultMessage>,
    },
    /// Awaiting a `Pause(Manual)` ticket.
    Paused,
    /// Inside one input only.
    Between,
}

/// One run end: `run_end.result`, with the run id.
#[derive(Clone, Debug, PartialEq)]
pub struct RefEnd {
    pub run: String,
    pub cause: EndCause,
    pub steps: u32,
    pub unconsumed: Vec<Message>,
}

fn blank(text: &str) -> bool {
    text.trim().is_empty()
}

fn take(queue: &mut VecDeque<Message>, mode: QueueMode) -> Vec<Message> {
    match mode {
        QueueMode::All => queue.drain(..).collect(),
        QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
    }
}

/// The result a `tool_done` becomes (SPEC §8.6).
fn expected_result(call: &ToolCall, answer: ToolAnswer) -> ToolResultMessage {
    let output = tool_output(call.id.as_str(), answer);
    if answer == ToolAnswer::Malformed {
        let why = output
            .unrepresentable(AgentConfig::default().max_tool_output_bytes)
            .expect("the malformed answer is unrepresentable");
        return ToolResultMessage::malformed(call, &why);
    }
    ToolResultMessage {
        call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: output.content,
        is_error: output.is_error,
        details: None,
        outcome: ResultOutcome::Executed,
        id: None,
        meta: Default::default(),
    }
}

impl RefState {
    pub fn new(config: RefConfig) -> Self {
        RefState {
            config,
            serial: 0,
            runs_started: 0,
            transcript: Vec::new(),
            run: None,
            ends: Vec::new(),
            last: Expect::Nothing,
            interjected: Expect::Nothing,
        }
    }

    pub fn apply(mut self, t: &Transition) -> Self {
        self.serial += 1;
        let expect = |result: Result<(), &'static str>| match result {
            Ok(()) => Expect::Accepted,
            Err(kind) => Expect::Rejected(kind),
        };
        match t {
            Transition::Interject { inner, stop } => {
                let before = self.action_token();
                let inner_result = self.step(inner);
                let held = self.action_token();
                self.interjected = if inner_result.is_ok() && held.is_some() && held != before {
                    // The new action was not handed out: the run ends at once.
                    let cause = stop.clone().map_or(EndCause::Cancelled, EndCause::Stopped);
                    self.end_before_action(cause);
                    Expect::Accepted
                } else {
                    expect(self.step(&interjection(stop)))
                };
                self.last = expect(inner_result);
            }
            _ => {
                self.last = expect(self.step(t));
                self.interjected = Expect::Nothing;
            }
        }
        self
    }

    /// The action the host is (or would be) working on: `(run, step, tools?)`.
    fn action_token(&self) -> Option<(String, u32, bool)> {
        let run = self.run.as_ref()?;
        match &run.phase {
            RefPhase::Model { step } => Some((run.id.clone(), *step, false)),
            RefPhase::Tools { step, .. } => Some((run.id.clone(), *step, true)),
            RefPhase::Paused | RefPhase::Between => None,
        }
    }

    /// An abort or stop before the new action is polled: a model call that was not handed out
    /// is not a step; a tool batch that was not handed out is `skipped`.
    fn end_before_action(&mut self, cause: EndCause) {
        let mut run = self.run.take().expect("a held action");
        if let RefPhase::Model { .. } = run.phase {
            run.steps -= 1;
            run.phase = RefPhase::Between;
        }
        self.finish(run, cause, false);
    }

    /// One input. On `Err` nothing has changed.
    fn step(&mut self, t: &Transition) -> Result<(), &'static str> {
        match t {
            Transition::Prompt { text, .. } => {
                if self.run.is_some() {
                    return Err("busy");
                }
                if blank(text) {
                    return Err("invalid_input");
                }
                self.runs_started += 1;
                self.transcript.push(Message::user(text.as_str()));
                let run = RefRun {
                    id: format!("{THREAD}/run-{}", self.runs_started),
                    steps: 0,
                    phase: RefPhase::Between,
                    end_request: None,
                    pause_requested: false,
                    steering: VecDeque::new(),
                    follow_ups: VecDeque::new(),
                };
                self.call_model(run);
            }
            Transition::Steer { text } | Transition::FollowUp { text } => {
                let Some(run) = self.run.as_mut() else {
                    return Err("not_accepting");
                };
                if blank(text) {
                    return Err("invalid_input");
                }
                let queue = match t {
                    Transition::Steer { .. } => &mut run.steering,
                    _ => &mut run.follow_ups,
                };
                queue.push_back(Message::user(text.as_str()));
            }
            Transition::Abort => {
                if self.run.as_ref().is_some_and(|r| r.end_request.is_none()) {
                    self.request_end(EndCause::Cancelled);
                }
            }
            Transition::Stop { reason } => {
                if blank(reason) {
                    return Err("invalid_input");
                }
                let Some(run) = &self.run else {
                    return Err("invalid_state");
                };
                if run.end_request.is_none() {
                    self.request_end(EndCause::Stopped(reason.clone()));
                }
            }
            Transition::Pause => match self.run.as_mut() {
                Some(run) if run.phase != RefPhase::Paused => run.pause_requested = true,
                _ => return Err("invalid_state"),
            },
            Transition::Resume { answer } => {
                if !self.paused() {
                    return Err("resume/not_waiting");
                }
                let text = match answer {
                    Answer::Continue => return Err("resume/result_kind_mismatch"),
                    Answer::Input(text) if blank(text) => return Err("invalid_input"),
                    Answer::Input(text) => text,
                };
                let mut run = self.run.take().expect("paused");
                let input = Message::user(text.as_str());
                if run.steps >= self.config.max_steps {
                    // No model call is left to answer it: it comes back unconsumed.
                    run.steering.push_front(input);
                    run.phase = RefPhase::Between;
                    self.finish(run, EndCause::MaxSteps, false);
                } else {
                    self.transcript.push(input);
                    self.call_model(run);
                }
            }
            Transition::ClearQueues => {
                if let Some(run) = self.run.as_mut() {
                    run.steering.clear();
                    run.follow_ups.clear();
                }
            }
            Transition::SetQueueModes {
                steering,
                follow_ups,
            } => {
                if steering.is_none() && follow_ups.is_none() {
                    return Err("invalid_input");
                }
                if let Some(mode) = steering {
                    self.config.steering = *mode;
                }
                if let Some(mode) = follow_ups {
                    self.config.follow_ups = *mode;
                }
            }
            Transition::CancelWait => {
                if !self.paused() {
                    return Err("invalid_state");
                }
                let run = self.run.take().expect("paused");
                self.finish(run, EndCause::Cancelled, false);
            }
            Transition::ExpireWait { .. } => {
                return Err(if self.paused() {
                    "not_expired"
                } else {
                    "invalid_state"
                });
            }
            Transition::ModelDelta { run, step, .. } => self.expect_model(run, *step)?,
            Transition::ModelDone { run, step, reply } => {
                self.expect_model(run, *step)?;
                if let Reply::DuplicateIds { .. } = reply {
                    return Err("invalid_input");
                }
                self.model_done(*step, reply);
            }
            Transition::ModelFailed {
                run,
                step,
                code,
                message,
            } => {
                self.expect_model(run, *step)?;
                if blank(code) {
                    return Err("invalid_input");
                }
                let mut run = self.run.take().expect("a model call is out");
                self.transcript.push(Message::from(AssistantMessage {
                    error_message: Some(message.clone()),
                    ..AssistantMessage::new(Vec::new(), StopReason::Error)
                }));
                let cause = run.end_request.clone().unwrap_or_else(|| {
                    EndCause::Error(Failure::Inference {
                        code: code.clone(),
                        message: message.clone(),
                    })
                });
                run.phase = RefPhase::Between;
                self.finish(run, cause, false);
            }
            Transition::ToolProgress { run, call } => {
                let (calls, results) = self.expect_tools(run)?;
                if !calls.iter().any(|c| c.id.as_str() == call) {
                    return Err("unknown_call");
                }
                if results.contains_key(call) {
                    return Err("unexpected_outcome");
                }
            }
            Transition::ToolDone { run, call, answer } => {
                let (calls, results) = self.expect_tools(run)?;
                if *answer == ToolAnswer::NamesAnotherCall {
                    return Err("invalid_input");
                }
                let Some(called) = calls.iter().find(|c| c.id.as_str() == call) else {
                    return Err("unknown_call");
                };
                if results.contains_key(call) {
                    return Err("duplicate_outcome");
                }
                let result = expected_result(called, *answer);
                self.tool_done(call, result);
            }
            Transition::Interject { .. } => unreachable!("interjections are not nested"),
            Transition::AbandonTools => {
                if !matches!(
                    self.run.as_ref().map(|r| &r.phase),
                    Some(RefPhase::Tools { .. })
                ) {
                    return Err("invalid_state");
                }
                let run = self.run.take().expect("tools executing");
                self.finish(run, EndCause::Indeterminate, true);
            }
        }
        Ok(())
    }

    fn paused(&self) -> bool {
        matches!(self.run.as_ref().map(|r| &r.phase), Some(RefPhase::Paused))
    }

    fn expect_model(&self, run: &str, step: u32) -> Result<(), &'static str> {
        match &self.run {
            Some(r) if r.id == run && r.phase == RefPhase::Model { step } => Ok(()),
            _ => Err("unexpected_outcome"),
        }
    }

    fn expect_tools(
        &self,
        run: &str,
    ) -> Result<(&[ToolCall], &BTreeMap<String, ToolResultMessage>), &'static str> {
        match &self.run {
            Some(RefRun {
                id,
                phase: RefPhase::Tools { calls, results, .. },
                ..
            }) if id == run => Ok((calls, results)),
            _ => Err("unexpected_outcome"),
        }
    }

    /// An abort or stop: at once while paused, else when the outstanding outcome arrives.
    fn request_end(&mut self, cause: EndCause) {
        let mut run = self.run.take().expect("an active run");
        if run.phase == RefPhase::Paused {
            self.finish(run, cause, false);
        } else {
            run.end_request = Some(cause);
            self.run = Some(run);
        }
    }

    fn call_model(&mut self, mut run: RefRun) {
        run.steps += 1;
        run.phase = RefPhase::Model { step: run.steps };
        self.run = Some(run);
    }

    fn model_done(&mut self, step: u32, reply: &Reply) {
        let mut run = self.run.take().expect("a model call is out");
        let message = reply.message();
        let calls = reply.tool_calls();
        let stop_reason = message.stop_reason;
        let error_message = message.error_message.clone();
        self.transcript.push(Message::Assistant(message.into()));
        run.phase = RefPhase::Between;
        match stop_reason {
            StopReason::Error | StopReason::Aborted => {
                let cause = match (&run.end_request, stop_reason) {
                    (Some(cause), _) => cause.clone(),
                    (None, StopReason::Aborted) => EndCause::Cancelled,
                    (None, _) => EndCause::Error(Failure::Inference {
                        code: "model_error".into(),
                        message: error_message.expect("error replies carry a message"),
                    }),
                };
                run.phase = RefPhase::Tools {
                    step,
                    calls,
                    results: BTreeMap::new(),
                };
                self.finish(run, cause, false);
            }
            _ if calls.is_empty() => self.boundary(run, true),
            StopReason::Length => {
                for call in &calls {
                    self.transcript
                        .push(Message::from(ToolResultMessage::truncated(call)));
                }
                self.boundary(run, false);
            }
            StopReason::Stop | StopReason::ToolUse => {
                run.phase = RefPhase::Tools {
                    step,
                    calls,
                    results: BTreeMap::new(),
                };
                match run.end_request.clone() {
                    Some(cause) => self.finish(run, cause, false),
                    None => self.run = Some(run),
                }
            }
        }
    }

    fn tool_done(&mut self, call: &str, result: ToolResultMessage) {
        let mut run = self.run.take().expect("tools executing");
        let mut batch_results = None;
        if let RefPhase::Tools { calls, results, .. } = &mut run.phase {
            results.insert(call.to_owned(), result);
            if results.len() == calls.len() {
                batch_results = Some(
                    calls
                        .iter()
                        .map(|c| results[c.id.as_str()].clone())
                        .collect::<Vec<_>>(),
                );
            }
        }
        match batch_results {
            Some(in_call_order) => {
                self.transcript
                    .extend(in_call_order.into_iter().map(Message::from));
                run.phase = RefPhase::Between;
                self.boundary(run, false);
            }
            None => self.run = Some(run),
        }
    }

    /// SPEC §8.2 `boundary(kind)`, rule by rule.
    fn boundary(&mut self, mut run: RefRun, text_stop: bool) {
        if let Some(cause) = run.end_request.clone() {
            return self.finish(run, cause, false);
        }
        if run.pause_requested {
            run.pause_requested = false;
            run.phase = RefPhase::Paused;
            self.run = Some(run);
            return;
        }
        if text_stop && run.steering.is_empty() && run.follow_ups.is_empty() {
            return self.finish(run, EndCause::NaturalEnd, false);
        }
        if run.steps >= self.config.max_steps {
            return self.finish(run, EndCause::MaxSteps, false);
        }
        let no_steering = run.steering.is_empty();
        let steering = take(&mut run.steering, self.config.steering);
        self.transcript.extend(steering);
        if text_stop && no_steering {
            let follow_ups = take(&mut run.follow_ups, self.config.follow_ups);
            self.transcript.extend(follow_ups);
        }
        self.call_model(run);
    }

    /// SPEC §8.2 `finish(cause)`: open calls paired (`interrupted` when abandoned, else
    /// `skipped`), queues returned as unconsumed, the run cleared.
    fn finish(&mut self, mut run: RefRun, cause: EndCause, interrupt: bool) {
        if let RefPhase::Tools { calls, results, .. } = &run.phase {
            for call in calls {
                let result = match results.get(call.id.as_str()) {
                    Some(result) => result.clone(),
                    None if interrupt => ToolResultMessage::interrupted(call),
                    None => ToolResultMessage::skipped(call),
                };
                self.transcript.push(Message::ToolResult(result.into()));
            }
        }
        let mut unconsumed: Vec<Message> = run.steering.drain(..).collect();
        unconsumed.extend(run.follow_ups.drain(..));
        self.ends.push(RefEnd {
            run: run.id,
            cause,
            steps: run.steps,
            unconsumed,
        });
        self.run = None;
    }
}
