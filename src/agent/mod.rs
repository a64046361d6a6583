//! The [`Agent`]: one per thread, the committed transcript across runs, at most one active run
//! driven through the step-driven loop of SPEC §8.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use crate::error::AgentError;
use crate::ids::{CallId, RunId, Step, ThreadId};
use crate::message::{AssistantMessage, ContentBlock, DeltaKind, Message, ToolOutput, UserMessage};
use crate::resume::ResumeTicket;
use crate::run::{EndCause, RunState};

mod compaction;
mod config;
mod control;
mod events;
pub(crate) mod history;
mod input;
mod observers;
mod queues;
mod recover;
mod reducer;
mod run_loop;
mod snapshot;
mod thread;

pub use config::{AgentConfig, ToolPolicy, ToolSpec};
pub use events::{Action, AgentCommit, AgentEvent, LoopEvent, MessageOrigin, Output, RunResult};
pub use input::Input;
pub(crate) use input::check_user_roles;
pub use observers::{Observer, ObserverId, Observers};
pub use queues::QueueMode;
pub use recover::{
    CallAction, CallDecision, HeadDecision, NextStep, RecoverError, RecoveryDecision,
    RecoveryPolicy, ResumedRun, decide_recovery,
};
pub use reducer::{AgentState, AgentStatus, reduce};
pub use snapshot::{AGENT_SCHEMA_VERSION, AgentSnapshot, SnapshotError};
pub use thread::Compaction;

use run_loop::{ActiveRun, Opening, Phase, Run, Transition, check_tool_call};
use thread::Thread;

/// One agent per thread: it keeps the committed transcript across runs and owns at most one
/// active run, which it drives through the step-driven loop. It does no I/O.
///
/// # How to drive it
/// Give it **one input** ([`handle`](Agent::handle), or one of the input methods that are sugar
/// over it), then call [`poll`](Agent::poll) until it returns `None`, acting on each
/// [`Output`] in order: persist a `Commit` (fenced, with its operation fields) before acting on
/// anything after it, show an `Event`, do an `Action` and answer it with the matching outcome
/// input. Then ask [`poll_timeout`](Agent::poll_timeout) when to come back if no input arrives
/// first, and call [`handle_timeout`](Agent::handle_timeout) then. Repeat.
///
/// # Methods, by kind
/// - **Getters:** [`config`](Agent::config), [`thread_id`](Agent::thread_id),
///   [`transcript`](Agent::transcript), [`model_request`](Agent::model_request),
///   [`context_start`](Agent::context_start), [`compaction`](Agent::compaction),
///   [`active_run_id`](Agent::active_run_id), [`run_state`](Agent::run_state),
///   [`current_ticket`](Agent::current_ticket), [`steps`](Agent::steps),
///   [`clock_ms`](Agent::clock_ms), [`last_end`](Agent::last_end),
///   [`queued`](Agent::queued), [`is_idle`](Agent::is_idle),
///   [`pending_outputs`](Agent::pending_outputs).
/// - **Inputs** (one mutation each): [`handle`](Agent::handle) takes any [`Input`] with its
///   time; the sugar: [`set_config`](Agent::set_config), [`prompt`](Agent::prompt),
///   [`prompt_with_run_id`](Agent::prompt_with_run_id), [`continue_run`](Agent::continue_run),
///   [`steer`](Agent::steer), [`follow_up`](Agent::follow_up), [`abort`](Agent::abort),
///   [`pause`](Agent::pause), [`model_delta`](Agent::model_delta),
///   [`model_done`](Agent::model_done), [`model_failed`](Agent::model_failed),
///   [`tool_progress`](Agent::tool_progress), [`tool_done`](Agent::tool_done),
///   [`resume`](Agent::resume), [`resume_ticket`](Agent::resume_ticket),
///   [`cancel_wait`](Agent::cancel_wait), [`stop`](Agent::stop),
///   [`expire_wait`](Agent::expire_wait), [`abandon_tools`](Agent::abandon_tools),
///   [`handle_timeout`](Agent::handle_timeout), [`compact`](Agent::compact).
/// - **Output:** [`poll`](Agent::poll) / [`drain`](Agent::drain) after every input;
///   [`poll_timeout`](Agent::poll_timeout) after draining.
/// - **Persistence:** [`snapshot`](Agent::snapshot) / [`restore`](Agent::restore) (the whole
///   machine, queues included) and [`recover`](Agent::recover) (from committed facts only).
///
/// A rejected input returns an [`AgentError`] and changes nothing: the agent's serialized
/// state is identical before and after.
///
/// Its data comes in three parts, borrowed apart by every transition: the thread (what it
/// keeps across runs: configuration, transcript, counters, clock), the active run, and the
/// outbox. (It serializes, in a snapshot, as one object of their fields.)
#[derive(Clone, PartialEq)]
pub struct Agent {
    thread: Thread,
    active: Option<ActiveRun>,
    outbox: VecDeque<Output>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let thread = &self.thread;
        f.debug_struct("Agent")
            .field("config", &thread.config)
            .field("messages", &thread.messages)
            .field("committed", &thread.committed)
            .field("clock_ms", &thread.clock_ms)
            .field("runs_started", &thread.runs_started)
            .field("thread_version", &thread.thread_version)
            .field("used_run_ids", &thread.used_run_ids)
            .field("active", &self.active)
            .field("last_end", &thread.last_end)
            .field("outbox", &self.outbox)
            .field("compaction", &thread.compaction)
            .finish()
    }
}

/// What a model call needs, borrowed from the agent (nothing is copied per step).
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// The run.
    pub run_id: &'a RunId,
    /// The step being called.
    pub step: Step,
    /// True for the last call the budget allows.
    pub final_step: bool,
    /// The configured system prompt.
    pub system_prompt: Option<&'a str>,
    /// The summary of the latest compaction (SPEC §8.9): the model context's first message.
    /// `None` when the thread was never compacted.
    pub summary: Option<&'a Message>,
    /// The transcript from the context start on, oldest first: the whole transcript without
    /// a compaction, else `transcript[keep_from..]`. The model context is `summary` (if any)
    /// followed by these; see [`context`](ModelRequest::context).
    pub messages: &'a [Message],
    /// The tool catalog.
    pub tools: &'a BTreeMap<String, ToolSpec>,
}

impl<'a> ModelRequest<'a> {
    /// The model context in order: the summary (if any), then [`messages`](ModelRequest::messages).
    pub fn context(&self) -> impl Iterator<Item = &'a Message> + 'a {
        self.summary.into_iter().chain(self.messages.iter())
    }

    /// How many messages the model context holds.
    pub fn context_len(&self) -> usize {
        self.messages.len() + usize::from(self.summary.is_some())
    }

    /// The tools as the model sees them, in catalog order, borrowed from the catalog.
    pub fn tool_definitions(&self) -> impl Iterator<Item = crate::ToolDefinition<'a>> + 'a {
        self.tools
            .iter()
            .map(|(name, spec)| crate::ToolDefinition::of(name, spec))
    }

    /// The call, owned ([`ModelCall`](crate::ModelCall)): the one shape the driver prints,
    /// the codecs encode and a durable runtime journals. It copies the context.
    pub fn to_call(&self) -> crate::ModelCall {
        crate::ModelCall {
            run_id: self.run_id.clone(),
            step: self.step,
            final_step: self.final_step,
            system_prompt: self.system_prompt.map(str::to_owned),
            messages: self.context().cloned().collect(),
            tools: self
                .tool_definitions()
                .map(crate::ToolDefinition::into_owned)
                .collect(),
        }
    }
}

/// `"{thread}/run-{n}"`, the run id minting gives the `n`th run (written without the
/// formatting machinery: it is made once per run).
fn minted_run_id(thread: &ThreadId, n: u64) -> RunId {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        // `rest % 10` is a single decimal digit.
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let parts = [thread.as_str().as_bytes(), b"/run-", &digits[at..]];
    let len: usize = parts.iter().map(|part| part.len()).sum();
    // Written on the stack and copied once into the id's shared string (a `String` would be
    // allocated, then copied into the `Arc` and freed); a long thread id takes the slow path.
    let mut buffer = [0u8; 96];
    if let Some(out) = buffer.get_mut(..len) {
        let mut from = 0;
        for part in parts {
            out[from..from + part.len()].copy_from_slice(part);
            from += part.len();
        }
        if let Ok(id) = std::str::from_utf8(out) {
            return RunId::from(id);
        }
    }
    let mut id = String::with_capacity(len);
    id.push_str(thread.as_str());
    id.push_str("/run-");
    for &digit in &digits[at..] {
        id.push(char::from(digit));
    }
    RunId::new(id)
}

fn check_message_id(id: Option<&str>, what: &str) -> Result<(), AgentError> {
    match id {
        Some(id) if crate::ids::is_blank(id) => Err(AgentError::invalid(format!(
            "{what} has a blank id; omit it or give a non-blank one"
        ))),
        _ => Ok(()),
    }
}

fn check_user_message(message: &UserMessage, what: &str) -> Result<(), AgentError> {
    if !crate::message::has_substance(&message.content) {
        return Err(AgentError::invalid(format!("{what} has no content")));
    }
    check_message_id(message.id.as_deref(), what)
}

impl Agent {
    /// An idle agent with an empty transcript.
    pub fn new(config: AgentConfig) -> Result<Agent, AgentError> {
        config.validate()?;
        Ok(Agent {
            thread: Thread::new(config),
            active: None,
            outbox: VecDeque::new(),
        })
    }

    // ----- getters -------------------------------------------------------------------------

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.thread.config
    }

    /// The thread this agent drives.
    pub fn thread_id(&self) -> &ThreadId {
        &self.thread.config.thread_id
    }

    /// The transcript. Between inputs it equals the committed transcript.
    pub fn transcript(&self) -> &[Message] {
        &self.thread.messages
    }

    /// The request of the outstanding model call, if one is outstanding.
    pub fn model_request(&self) -> Option<ModelRequest<'_>> {
        let active = self.active.as_ref()?;
        match active.phase {
            Phase::ModelOut { step, .. } => Some(ModelRequest {
                run_id: active.run.run_id(),
                step,
                final_step: step >= self.thread.config.max_steps,
                system_prompt: self.thread.config.system_prompt.as_deref(),
                summary: self.thread.compaction.as_ref().map(Compaction::summary),
                messages: self.thread.context_tail(),
                tools: &self.thread.config.tools,
            }),
            _ => None,
        }
    }

    /// The outstanding model call, owned ([`ModelRequest::to_call`]), if one is outstanding.
    pub fn model_call(&self) -> Option<crate::ModelCall> {
        self.model_request().map(|request| request.to_call())
    }

    /// The active run (Running or Awaiting).
    pub fn active_run_id(&self) -> Option<&RunId> {
        self.active.as_ref().map(|active| active.run.run_id())
    }

    /// The active run's state (`None` when idle; an ended run is no longer active).
    pub fn run_state(&self) -> Option<RunState> {
        self.active.as_ref().map(|active| match active.phase {
            Phase::Waiting(_) => RunState::Awaiting,
            _ => RunState::Running,
        })
    }

    /// The ticket the active run waits on.
    pub fn current_ticket(&self) -> Option<&ResumeTicket> {
        match &self.active.as_ref()?.phase {
            Phase::Waiting(wait) => Some(wait.ticket()),
            _ => None,
        }
    }

    /// Model calls the active run has made.
    pub fn steps(&self) -> Option<Step> {
        self.active.as_ref().map(|active| active.run.steps())
    }

    /// The agent's clock: the latest `now_ms` seen on an accepted input.
    pub fn clock_ms(&self) -> u64 {
        self.thread.clock_ms
    }

    /// The last run that ended, and how.
    pub fn last_end(&self) -> Option<(&RunId, &EndCause)> {
        self.thread
            .last_end
            .as_ref()
            .map(|(run, cause)| (run, cause))
    }

    /// Queued steering and follow-up counts of the active run.
    pub fn queued(&self) -> (usize, usize) {
        self.active
            .as_ref()
            .map_or((0, 0), |active| active.run.queued())
    }

    /// True when no run is active and nothing is left to poll.
    pub fn is_idle(&self) -> bool {
        self.active.is_none() && self.outbox.is_empty()
    }

    /// Outputs waiting to be polled (not counting an action decided at poll time).
    pub fn pending_outputs(&self) -> usize {
        self.outbox.len()
    }

    /// The outputs waiting to be polled, in the order [`poll`](Agent::poll) hands them out,
    /// left where they are (an action decided at poll time is not among them): for a host
    /// that renders a batch ahead and polls each one as it acts on it.
    pub fn peek_outputs(&self) -> impl ExactSizeIterator<Item = &Output> + '_ {
        self.outbox.iter()
    }

    // ----- output --------------------------------------------------------------------------

    /// The next output to act on, or `None` when there is nothing to do until the next input.
    ///
    /// Call it after every input until it returns `None`. Commits and events of an input come
    /// out first; an action is decided only when everything before it was drained, so an
    /// `abort()` made while draining (say, on seeing `run_start`) means the model call that
    /// was not yet handed out never is. Handing out an action changes the agent (the step
    /// count grows, the action becomes outstanding).
    #[must_use = "an output must be acted on in order"]
    pub fn poll(&mut self) -> Option<Output> {
        if let Some(output) = self.outbox.pop_front() {
            return Some(output);
        }
        self.hand_out().map(Output::Action)
    }

    /// Drains every output available now (see [`poll`](Agent::poll)).
    pub fn drain(&mut self) -> Vec<Output> {
        std::iter::from_fn(|| self.poll()).collect()
    }

    // ----- input handlers (reached through `handle`) ---------------------------------------

    fn on_config(&mut self, config: AgentConfig) -> Result<(), AgentError> {
        if self.thread.runs_started > 0 || !self.thread.used_run_ids.is_empty() {
            return Err(AgentError::state(
                "config before the first prompt",
                "the agent has already been prompted",
            ));
        }
        config.validate()?;
        self.thread.config = config;
        Ok(())
    }

    /// `prompt` with `text` (one message) or `messages` (several, §8.10): exactly one given.
    fn on_prompt(
        &mut self,
        run_id: Option<RunId>,
        message: Option<UserMessage>,
        messages: Vec<UserMessage>,
    ) -> Result<RunId, AgentError> {
        if let Some(active) = &self.active {
            return Err(AgentError::Busy {
                active_run: active.run.run_id().clone(),
            });
        }
        if run_id.as_ref().is_some_and(RunId::is_blank) {
            return Err(AgentError::invalid("prompt: the run id is empty"));
        }
        let opening = match (message, messages.is_empty()) {
            (Some(message), true) => {
                check_user_message(&message, "the prompt")?;
                Opening::One(message)
            }
            (None, false) => {
                for (index, message) in messages.iter().enumerate() {
                    check_user_message(message, &format!("the prompt's messages[{index}]"))?;
                }
                self.thread.check_new_ids(
                    messages.iter().map(|m| m.id.as_deref()),
                    "the prompt's messages",
                )?;
                Opening::Many(messages)
            }
            (None, true) => {
                return Err(AgentError::invalid(
                    "prompt: no message; give `text` or a non-empty `messages` list",
                ));
            }
            (Some(_), false) => {
                return Err(AgentError::invalid(
                    "prompt: give `text` or `messages`, not both",
                ));
            }
        };
        self.start_run(run_id, opening)
    }

    /// `continue` (SPEC §8.8): a new run over the transcript as it stands.
    fn on_continue(&mut self) -> Result<RunId, AgentError> {
        if let Some(active) = &self.active {
            return Err(AgentError::Busy {
                active_run: active.run.run_id().clone(),
            });
        }
        let why_not = match self.thread.messages.last() {
            None => Some("the transcript is empty: there is no run to continue from"),
            Some(Message::Assistant(_)) => Some(
                "the transcript ends in the model's own answer: prompt with a new message instead",
            ),
            Some(Message::System(_)) => {
                Some("the transcript ends in a system message, which the model cannot answer")
            }
            Some(Message::User(_) | Message::ToolResult(_)) => None,
        };
        if let Some(why_not) = why_not {
            return Err(AgentError::state(
                "a transcript ending in a user or tool_result message",
                why_not,
            ));
        }
        self.start_run(None, Opening::Continue)
    }

    /// Mints (or takes) the run id, commits Running (with the prompt, if any) and announces
    /// `run_start`; returns the run's id. Every check was made before.
    fn start_run(&mut self, run_id: Option<RunId>, opening: Opening) -> Result<RunId, AgentError> {
        if let Some(id) = &run_id
            && self.run_id_used(id)
        {
            return Err(AgentError::invalid(format!(
                "prompt: run id {id} was already used on this thread"
            )));
        }
        let run_id = self.mint_run_id(run_id)?;
        let run = Run::new(run_id.clone(), self.thread.messages.len());
        self.begin(run, opening);
        Ok(run_id)
    }

    /// The run id of a new run: the host's (remembered), or the next minted
    /// `"{thread_id}/run-{n}"` that no host supplied. Checks nothing else.
    #[inline(always)]
    fn mint_run_id(&mut self, run_id: Option<RunId>) -> Result<RunId, AgentError> {
        // Minted ids skip any id a host already supplied, so run ids never repeat.
        let thread = &mut self.thread;
        let mut n = thread.runs_started;
        let run_id = match run_id {
            Some(id) => id,
            None => loop {
                n = n
                    .checked_add(1)
                    .ok_or_else(|| AgentError::invalid("prompt: the run counter is exhausted"))?;
                let candidate = minted_run_id(&thread.config.thread_id, n);
                if !thread.used_run_ids.contains(&candidate) {
                    break candidate;
                }
            },
        };
        if thread.runs_started == n {
            // Host-supplied: remembered, so neither the host nor minting uses it again.
            thread.used_run_ids.insert(run_id.clone());
        }
        thread.runs_started = n;
        Ok(run_id)
    }

    /// Whether `id` was used on this thread: host-supplied or recovered (in `used_run_ids`),
    /// or minted (`"{thread}/run-{n}"` with `n` up to `runs_started`, written as minting
    /// writes it).
    fn run_id_used(&self, id: &RunId) -> bool {
        let thread = &self.thread;
        if thread.used_run_ids.contains(id) {
            return true;
        }
        let Some(digits) = id
            .as_str()
            .strip_prefix(thread.config.thread_id.as_str())
            .and_then(|rest| rest.strip_prefix("/run-"))
        else {
            return false;
        };
        digits.parse::<u64>().is_ok_and(|n| {
            (1..=thread.runs_started).contains(&n)
                && minted_run_id(&thread.config.thread_id, n) == *id
        })
    }

    fn on_queue_input(&mut self, message: UserMessage, steering: bool) -> Result<(), AgentError> {
        let what = if steering { "steer" } else { "follow_up" };
        let Some(active) = self.active.as_mut() else {
            let reason = match &self.thread.last_end {
                Some((run, _)) => {
                    format!("{what}: no run is active (the input of {run} is closed)")
                }
                None => format!("{what}: no run is active"),
            };
            return Err(AgentError::NotAccepting { reason });
        };
        check_user_message(&message, &format!("the {what} message"))?;
        let message = Message::from(message);
        if steering {
            active.run.queue_steering(message);
        } else {
            active.run.queue_follow_up(message);
        }
        Ok(())
    }

    #[cold]
    fn model_mismatch(
        active: Option<&ActiveRun>,
        run_id: &RunId,
        step: Step,
        got: &str,
    ) -> AgentError {
        let got = format!("{got} for run {run_id} step {step}");
        let Some(active) = active else {
            return AgentError::unexpected("nothing (no run is active)", got);
        };
        let run_id = active.run.run_id();
        match &active.phase {
            Phase::ModelOut { step: out, .. } => {
                AgentError::unexpected(format!("a model outcome for run {run_id} step {out}"), got)
            }
            phase => AgentError::unexpected(
                format!("no model outcome ({} of run {run_id})", phase.describe()),
                got,
            ),
        }
    }

    /// `model_delta` with its text moved in (no copy): the input's handler, and what a scripted
    /// host gives without building an [`Input`] (a delta is at the agent's own clock, so
    /// `handle`'s clock rule has nothing to do).
    pub(crate) fn on_model_delta(
        &mut self,
        run_id: &RunId,
        step: Step,
        kind: DeltaKind,
        text: String,
    ) -> Result<(), AgentError> {
        self.expect_model_streamed(run_id, step)?;
        self.push_delta(run_id.clone(), step, kind, text);
        Ok(())
    }

    /// A delta of the outstanding model call of `run_id`'s `step`: it is checked, and the call
    /// marked streamed, in one look at the active run (a delta is the hottest input).
    #[inline]
    pub(crate) fn expect_model_streamed(
        &mut self,
        run_id: &RunId,
        step: Step,
    ) -> Result<(), AgentError> {
        if let Some(ActiveRun {
            run,
            phase:
                Phase::ModelOut {
                    step: out,
                    streamed,
                },
        }) = self.active.as_mut()
            && *out == step
            && run.run_id() == run_id
        {
            *streamed = true;
            return Ok(());
        }
        Err(Self::model_mismatch(
            self.active.as_ref(),
            run_id,
            step,
            "model_delta",
        ))
    }

    /// Queues the event of a delta checked by [`expect_model_streamed`](Self::expect_model_streamed).
    fn push_delta(&mut self, run_id: RunId, step: Step, kind: DeltaKind, text: String) {
        let event = match kind {
            DeltaKind::Text => LoopEvent::TextDelta { step, text },
            DeltaKind::Thinking => LoopEvent::ThinkingDelta { step, text },
        };
        self.outbox
            .push_back(Output::Event(AgentEvent::Loop { run_id, event }));
    }

    /// `model_done`: the answer arrives behind its `Arc` (the one the transcript, the event
    /// and the commit share), so it is moved as one pointer from here on.
    fn on_model_done(
        &mut self,
        run_id: &RunId,
        step: Step,
        message: std::sync::Arc<AssistantMessage>,
    ) -> Result<(), AgentError> {
        self.transition(|thread, active, tx| match active {
            Some(ActiveRun {
                run,
                phase: phase @ Phase::ModelOut { step: out, .. },
            }) if out == step && run.run_id() == run_id => {
                let checked = message
                    .check_shape()
                    .map_err(|reason| AgentError::invalid(format!("model_done: {reason}")))
                    .and_then(|()| {
                        check_message_id(message.id.as_deref(), "the assistant message")
                    });
                match checked {
                    Ok(()) => Transition::Moved(thread.model_answered(run, step, message, tx)),
                    Err(error) => Transition::Kept(Some(ActiveRun { run, phase }), Err(error)),
                }
            }
            active => {
                let error = Self::model_mismatch(active.as_ref(), run_id, step, "model_done");
                Transition::Kept(active, Err(error))
            }
        })
    }

    fn on_model_failed(
        &mut self,
        run_id: &RunId,
        step: Step,
        code: &str,
        message: &str,
    ) -> Result<(), AgentError> {
        self.transition(|thread, active, tx| match active {
            Some(ActiveRun {
                run,
                phase: phase @ Phase::ModelOut { step: out, .. },
            }) if out == step && run.run_id() == run_id => {
                if code.trim().is_empty() {
                    let error = AgentError::invalid("model_failed: the error code is empty");
                    return Transition::Kept(Some(ActiveRun { run, phase }), Err(error));
                }
                Transition::Moved(thread.model_gave_up(run, step, code, message, tx))
            }
            active => {
                let error = Self::model_mismatch(active.as_ref(), run_id, step, "model_failed");
                Transition::Kept(active, Err(error))
            }
        })
    }

    fn expect_tools(&self, run_id: &RunId, got: &str) -> Result<&run_loop::Batch, AgentError> {
        if let Some(active) = &self.active
            && let Phase::ToolsOut(batch) = &active.phase
            && active.run.run_id() == run_id
        {
            return Ok(batch);
        }
        Err(Self::tools_mismatch(self.active.as_ref(), run_id, got))
    }

    #[cold]
    fn tools_mismatch(active: Option<&ActiveRun>, run_id: &RunId, got: &str) -> AgentError {
        let got = format!("{got} for run {run_id}");
        let Some(active) = active else {
            return AgentError::unexpected("nothing (no run is active)", got);
        };
        let active_id = active.run.run_id();
        match &active.phase {
            Phase::ToolsOut(batch) => AgentError::unexpected(
                format!("tool outcomes for run {active_id} step {}", batch.step),
                got,
            ),
            phase => AgentError::unexpected(
                format!("no tool outcome ({} of run {active_id})", phase.describe()),
                got,
            ),
        }
    }

    fn on_tool_progress(
        &mut self,
        run_id: &RunId,
        call_id: &CallId,
        content: Vec<ContentBlock>,
    ) -> Result<(), AgentError> {
        let batch = self.expect_tools(run_id, "tool_progress")?;
        if call_id.is_blank() {
            return Err(AgentError::invalid("tool_progress: the call id is empty"));
        }
        match check_tool_call(batch, call_id) {
            Ok(_) => {}
            Err(AgentError::DuplicateOutcome { call_id }) => {
                return Err(AgentError::unexpected(
                    "progress of an executing call",
                    format!("progress of call {call_id}, which already has its outcome"),
                ));
            }
            Err(e) => return Err(e),
        }
        self.outbox.push_back(Output::Event(AgentEvent::Loop {
            run_id: run_id.clone(),
            event: LoopEvent::ToolProgress {
                call_id: call_id.clone(),
                content,
            },
        }));
        Ok(())
    }

    fn on_tool_done(
        &mut self,
        run_id: &RunId,
        call_id: &CallId,
        output: ToolOutput,
    ) -> Result<(), AgentError> {
        self.transition(|thread, active, tx| match active {
            Some(ActiveRun {
                run,
                phase: Phase::ToolsOut(batch),
            }) if run.run_id() == run_id => {
                let max_bytes = thread.config.max_tool_output_bytes;
                match tool_result(&batch, call_id, output, max_bytes) {
                    Ok(result) => Transition::Moved(thread.tool_answered(run, batch, result, tx)),
                    Err(error) => {
                        let phase = Phase::ToolsOut(batch);
                        Transition::Kept(Some(ActiveRun { run, phase }), Err(error))
                    }
                }
            }
            active => {
                let error = Self::tools_mismatch(active.as_ref(), run_id, "tool_done");
                Transition::Kept(active, Err(error))
            }
        })
    }
}

/// The result a `tool_done` of `call_id` gives the executing `batch`, checked against it (an
/// output too large or unrepresentable is `malformed`).
fn tool_result(
    batch: &run_loop::Batch,
    call_id: &CallId,
    output: ToolOutput,
    max_bytes: usize,
) -> Result<crate::message::ToolResultMessage, AgentError> {
    if call_id.is_blank() {
        return Err(AgentError::invalid("tool_done: the call id is empty"));
    }
    let entry = check_tool_call(batch, call_id)?;
    Ok(match output.unrepresentable(max_bytes) {
        Some(why) => output.into_malformed(&entry.call, &why),
        None => output.into_result(entry.call.name.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_run_ids_read_thread_slash_run_n() {
        let long = "t".repeat(200);
        for thread in ["thread-1", "线程", long.as_str(), &"x".repeat(90)] {
            for n in [1, 9, 10, 12_345, u64::MAX] {
                let id = minted_run_id(&ThreadId::from(thread), n);
                assert_eq!(id.as_str(), format!("{thread}/run-{n}"));
            }
        }
    }
}
