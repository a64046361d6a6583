//! One run's state machine: the step-driven loop of SPEC §8.2.
//!
//! # Every phase × every input
//!
//! The phases an agent is in between inputs: `idle0` idle, empty transcript; `idle` idle after
//! a run; `call_model` Running, the model call decided but not yet polled ([`Phase::CallModel`]);
//! `model_out` Running, the model call of a step is out ([`Phase::ModelOut`]); `tools_ready`
//! Running, a batch not yet polled ([`Phase::ToolsReady`]); `tools_out` Running, a batch
//! executing ([`Phase::ToolsOut`]); `perm` Awaiting a permission ticket before its deadline
//! ([`Wait::Call`]); `perm_late` the same at a time past the deadline; `pause` Awaiting a
//! `Pause(Manual)` ticket ([`Wait::Pause`], which stores the boundary it interrupted); `remote`
//! Awaiting a remote-input ticket ([`Wait::Remote`]; no agent opens one itself, so the matrix
//! reaches it through recovery of another writer's commits).
//!
//! A cell is the error kind of a rejected input (nothing changes, the clock included; `resume`
//! errors give their `resume_error` code) or what an accepted one does. `-` is an accepted
//! no-op (nothing emitted, the clock advances); `queued` keeps the phase (in `call_model` /
//! `tools_ready` the next `poll` still hands out the action); `req` records an end (`abort` /
//! `stop`) or pause request, honoured once the outstanding outcome arrives (at the next
//! boundary); `finish(C)` ends the run at once with cause `C` (open calls `skipped`, or
//! `expired` for the waiting call on expiry); `withdrawn` empties the run's queues into a
//! `queues_cleared` event and keeps the phase. `UO` is `unexpected_outcome`, `IS`
//! `invalid_state`, `NA` `not_accepting`.
//!
//! | input           | idle0      | idle       | call_model | model_out  | tools_ready | tools_out      | perm       | perm_late          | pause      | remote     |
//! |-----------------|------------|------------|------------|------------|-------------|----------------|------------|--------------------|------------|------------|
//! | `prompt`        | new run → `model_out` | new run → `model_out` | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` |
//! | `steer`         | `NA`       | `NA`       | queued     | queued     | queued      | queued         | queued     | queued             | queued     | queued     |
//! | `follow_up`     | `NA`       | `NA`       | queued     | queued     | queued      | queued         | queued     | queued             | queued     | queued     |
//! | `abort`         | -          | -          | finish(Cancelled) | req | finish(Cancelled) | req     | finish(Cancelled) | finish(Cancelled) | finish(Cancelled) | finish(Cancelled) |
//! | `pause`         | `IS`       | `IS`       | req        | req        | req         | req            | `IS`       | `IS`               | `IS`       | `IS`       |
//! | `model_delta`   | `UO`       | `UO`       | `UO`       | `text_delta` | `UO`      | `UO`           | `UO`       | `UO`               | `UO`       | `UO`       |
//! | `model_done`    | `UO`       | `UO`       | `UO`       | by answer (below) | `UO` | `UO`           | `UO`       | `UO`               | `UO`       | `UO`       |
//! | `model_failed`  | `UO`       | `UO`       | `UO`       | finish(Error) | `UO`     | `UO`           | `UO`       | `UO`               | `UO`       | `UO`       |
//! | `tool_progress` | `UO`       | `UO`       | `UO`       | `UO`       | `UO`        | `tool_progress` | `UO`      | `UO`               | `UO`       | `UO`       |
//! | `tool_done`     | `UO`       | `UO`       | `UO`       | `UO`       | `UO`        | `tool_end`; last → after_batch | `UO` | `UO`       | `UO`       | `UO`       |
//! | `resume`        | `resume(not_waiting)` | `resume(not_waiting)` | `resume(not_waiting)` | `resume(not_waiting)` | `resume(not_waiting)` | `resume(not_waiting)` | commit Running, `resumed`; next ticket or dispatch | `resume(expired)` | commit Running, `resumed`, input appended → `model_out` | commit Running, `resumed`, input appended → `model_out` |
//! | `resume_ticket` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` |
//! | `cancel_wait`   | `IS`       | `IS`       | `IS`       | `IS`       | `IS`        | `IS`           | finish(Cancelled) | finish(Cancelled) | finish(Cancelled) | finish(Cancelled) |
//! | `stop`          | `IS`       | `IS`       | finish(Stopped) | req   | finish(Stopped) | req        | finish(Stopped) | finish(Stopped) | finish(Stopped) | finish(Stopped) |
//! | `expire_wait`   | `IS`       | `IS`       | `IS`       | `IS`       | `IS`        | `IS`           | `not_expired` | finish(Stopped("wait_expired")) | `not_expired` | `not_expired` |
//! | `abandon_tools` | `IS`       | `IS`       | `IS`       | `IS`       | `IS`        | open calls `interrupted`; finish(Indeterminate) | `IS` | `IS` | `IS` | `IS` |
//! | `continue`      | `IS` (empty transcript) | `IS` (ends in the answer) | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` |
//! | `timeout`       | -          | -          | -          | -          | -           | -              | -          | as `expire_wait`   | -          | -          |
//! | `config`        | replaced   | `IS`       | `IS`       | `IS`       | `IS`        | `IS`           | `IS`       | `IS`               | `IS`       | `IS`       |
//! | `compact`       | `IS`       | `IS`       | `IS`       | commit Running, `compacted` → `call_model` (the same step); `IS` once a delta arrived; a bad `keep_from` `invalid_input` | `IS` | `IS` | `IS`  | `IS`               | `IS`       | `IS`       |
//! | `import`        | one ended run: commit Ended(Stopped("imported")), `run_start`, `run_end` | one ended run, as idle0 | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` |
//! | `clear_queues`  | `queues_cleared` (empty, no run) | `queues_cleared` (empty, no run) | withdrawn | withdrawn | withdrawn | withdrawn | withdrawn | withdrawn | withdrawn | withdrawn |
//! | `set_queue_modes` | -        | -          | -          | -          | -           | -              | -          | -                  | -          | -          |
//!
//! `tests/phase_matrix.rs` checks this table: it drives every input into a fresh agent in each
//! of these phases, asserts a rejected input leaves the snapshot byte-identical, and snapshots
//! the outcomes (error kind, or drained output kinds and the next phase) in
//! `snapshots/phase_matrix__phase_matrix.snap`. It also reads this table and the next one from
//! this file and checks every cell against that matrix (an error code is that error; `-`
//! emits nothing but the action a poll hands out; `queued` queues; `req` records the request;
//! `finish(C)` ends the run with `C`). The matrix has four more phases than this table: the
//! model call out and the batch out, each with an abort or a pause request pending.
//!
//! # The steps behind the cells (SPEC §8.2)
//!
//! Every transition takes the agent's thread part ([`Thread`]), the run and what its phase held
//! (the `Batch` or `Wait` the caller matched, by value) apart, plus the output buffer ([`Tx`]),
//! and returns the run's successor ([`Next`]): the run goes on in a new phase, or it ended
//! (only [`Thread::finish`] makes the proof of that). An input reaches one through
//! [`Agent::transition`]: its handler matches the phase once, by value, and either hands what
//! it matched to the transition or gives the run back untouched with its answer
//! ([`Transition`]). The run is out of the agent only inside that call, where nothing but the
//! transition can reach the thread, so no getter ever sees a half-moved agent. This module is
//! the only one that writes a phase or the agent's active run; the run's fields are private
//! to it.
//!
//! | phase            | input                      | outputs → next phase                                  |
//! |------------------|----------------------------|-------------------------------------------------------|
//! | (idle)           | `prompt` / `continue`      | commit Running{user msg; none on `continue`}, `run_start` → `CallModel` |
//! | (idle)           | `import`                   | commit Ended(Stopped("imported")){messages}, `run_start`, `run_end` → (idle) |
//! | `CallModel`      | `poll`                     | action `CallModel` (steps += 1) → `ModelOut`          |
//! | `CallModel`      | `abort` / `stop`           | finish(Cancelled / Stopped)                           |
//! | `ModelOut`       | `model_failed`             | error message; finish(Cancelled, Stopped or Error)    |
//! | `ModelOut` (no delta yet) | `compact`         | commit Running (no messages, `compacted` draft), `compacted` → `CallModel` (steps −= 1: the same step again) |
//! | `ModelOut`       | `model_done` error/aborted | calls `skipped`; finish                               |
//! | `ModelOut`       | `model_done` text          | boundary(TextStop)                                    |
//! | `ModelOut`       | `model_done` length+calls  | `truncated` results; after_batch                      |
//! | `ModelOut`       | `model_done` calls         | commit Running{a}; end requested? finish : advance_batch |
//! | (advance_batch)  |                            | an undecided call? open `Wait::Call` : a ready call? `tool_start`s → `ToolsReady` : after_batch |
//! | `ToolsReady`     | `poll`                     | action `ExecuteTools` → `ToolsOut`                    |
//! | `ToolsReady`     | `abort` / `stop`           | calls `skipped`; finish                               |
//! | `ToolsOut`       | `tool_done`                | `tool_end`; all answered? after_batch : `ToolsOut`    |
//! | `ToolsOut`       | `abandon_tools`            | open calls `interrupted`; finish(Indeterminate)       |
//! | `Wait::Call`     | `resume` (accepted)        | commit Running (ticket deleted); advance_batch        |
//! | `Wait::Pause` / `Wait::Remote` | `resume` Input | commit Running{input} → `CallModel` (budget spent: finish(MaxSteps), the input `unconsumed`) |
//! | `Wait::Pause` / `Wait::Remote` | `resume` other | boundary(the one the wait interrupted)          |
//! | `Waiting`        | `abort` / `cancel_wait` / `stop` | open calls `skipped`; finish                    |
//! | `Waiting`        | `expire_wait` / `timeout` (past deadline) | waiting call `expired`, others `skipped`; finish(Stopped("wait_expired")) |
//!
//! `after_batch` appends every result of the batch in call order and takes the boundary;
//! `boundary` applies the queue rules of [`queues`](super::queues) (end, pause → open
//! `Wait::Pause` at this boundary, or take the queues, commit Running → `CallModel`); `finish`
//! closes input, returns the queues as `unconsumed`, pairs every open call, commits `Ended` with
//! every message not yet committed, then emits `input_closed` and `run_end`.
//!
//! # Recovery entries (SPEC §8.7, [`Agent::rebuild`])
//!
//! Recovery reads typed committed facts (the head run record, its ticket, the `run_started`,
//! `run_awaiting` and `permission_decided` audit drafts, the committed messages) into a
//! `RecoveredRun`, and the run is put in place here:
//!
//! | committed facts of the head run                  | recovered phase                          |
//! |--------------------------------------------------|------------------------------------------|
//! | none, or `Ended`                                 | idle (no active run)                     |
//! | Running, last message not an answer, no open calls | `CallModel` (the next step's call)     |
//! | Running, last message a text answer              | boundary(TextStop)                       |
//! | Running, open calls, `Replay` (or a call undecided) | committed decisions applied; advance_batch (`Wait::Call` for an undecided call, else `ToolsReady`) |
//! | Running, open calls all decided, `Seal`          | executable calls `interrupted`; finish(Indeterminate) |
//! | Awaiting a tool-call ticket                      | `Wait::Call` with the batch, the ticket's call undecided (no call open: refused) |
//! | Awaiting a pause ticket                          | `Wait::Pause` at the boundary its `run_awaiting {boundary, run_id, step}` draft recorded (a draft without `boundary`, from an older or another writer: the boundary the Awaiting commit was taken after, a tool result: AfterToolBatch; else TextStop) |
//! | Awaiting a remote-input ticket                   | `Wait::Remote`, the boundary as for a pause |
//!
//! Every Awaiting commit the agent makes (`open_wait`) carries
//! `run_awaiting {boundary?, run_id, step}`: the run's step count when the wait opened and,
//! for a pause, the boundary it interrupted; recovery checks the step against the committed
//! answers and refuses the facts when they disagree.
//!
//! `tests/recovery.rs` drives each row from a real crash of a live agent.
//!
//! # Files
//!
//! This file holds the phases, the run, the two doors ([`Agent::transition`], `poll`'s
//! [`Agent::hand_out`]) and the boundary; [`batch`] the tool batch (`advance_batch`,
//! `tool_done`, `after_batch`); [`model`] the model's outcomes and `compact`; [`wait`]
//! opening a wait and `resume`; [`finish`] every end of a run; [`recovery`] the recovery
//! entries.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::commit::{AuditDraft, ThreadCommit};
use crate::error::AgentError;
use crate::ids::{CallId, RunId, Step};
use crate::message::{Message, ToolResultMessage, UserMessage};
use crate::resume::{AwaitTarget, PauseReason, ResumeTicket};
use crate::run::{EndCause, RunDisposition};

use super::Agent;
use super::events::{Action, AgentCommit, AgentEvent, LoopEvent, MessageOrigin, Output, RunResult};
use super::queues::{
    BoundaryDecision, BoundaryInput, BoundaryKind, Queues, decide_boundary, take_queued,
};
use super::thread::Thread;

mod batch;
mod finish;
mod model;
mod recovery;
mod wait;

pub(crate) use batch::{Batch, BatchCall, Slot, check_tool_call};
use finish::Open;
pub(crate) use finish::Pairing;

/// The active run: what holds for its whole life, and the phase it is in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ActiveRun {
    pub(crate) run: Run,
    pub(crate) phase: Phase,
}

/// What an active run keeps across its phases. Only the run loop writes it; the rest of the
/// agent reads it through its getters and asks for a pause or queues input through its
/// methods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Run {
    run_id: RunId,
    /// Model calls handed out so far.
    steps: Step,
    /// The end an `abort` or `stop` asked for while an outcome was out; honoured when it
    /// arrives.
    end_request: Option<EndRequest>,
    pause_requested: bool,
    queues: Queues,
    /// Waits opened so far: the next ticket's correlation id is `"{run_id}:wait-{waits + 1}"`.
    waits: u32,
    /// Where the run's messages begin in the transcript.
    transcript_start: usize,
    /// What the run's latest commit recorded (for `state_changed`).
    committed_as: CommittedAs,
    /// Commits of this run emitted so far: the next commit's `ordinal` (SPEC §7.1).
    commits: u64,
}

impl Run {
    /// A new run whose messages begin at `transcript_start`: nothing committed, nothing
    /// queued or requested.
    pub(crate) fn new(run_id: RunId, transcript_start: usize) -> Run {
        Run {
            run_id,
            steps: 0,
            end_request: None,
            pause_requested: false,
            queues: Queues::default(),
            waits: 0,
            transcript_start,
            committed_as: CommittedAs::Nothing,
            commits: 0,
        }
    }

    /// A run rebuilt from committed facts (SPEC §8.7): `steps` model calls and `waits` waits
    /// made, its latest commit Awaiting (`awaiting`) or Running, `commits` commits stored.
    /// What facts cannot hold (queues, requests) starts empty.
    pub(crate) fn recovered(
        run_id: RunId,
        steps: Step,
        waits: u32,
        transcript_start: usize,
        awaiting: bool,
        commits: u64,
    ) -> Run {
        Run {
            steps,
            waits,
            committed_as: if awaiting {
                CommittedAs::Awaiting
            } else {
                CommittedAs::Running
            },
            commits,
            ..Run::new(run_id, transcript_start)
        }
    }

    /// The run's id.
    pub(crate) fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// Model calls handed out so far.
    pub(crate) fn steps(&self) -> Step {
        self.steps
    }

    /// Where the run's messages begin in the transcript.
    pub(crate) fn transcript_start(&self) -> usize {
        self.transcript_start
    }

    /// Whether an `abort` or `stop` is already recorded, waiting for the outstanding outcome.
    pub(crate) fn end_requested(&self) -> bool {
        self.end_request.is_some()
    }

    /// Asks for a `Pause(Manual)` wait at the next boundary.
    pub(crate) fn request_pause(&mut self) {
        self.pause_requested = true;
    }

    /// Queues a steering message for the next complete boundary.
    pub(crate) fn queue_steering(&mut self, message: Message) {
        self.queues.steering.push_back(message);
    }

    /// Queues a follow-up for the next natural text stop with no steering.
    pub(crate) fn queue_follow_up(&mut self, message: Message) {
        self.queues.follow_ups.push_back(message);
    }

    /// Empties both queues (what the run has not taken), each oldest first.
    pub(crate) fn withdraw_queued(&mut self) -> (Vec<Message>, Vec<Message>) {
        (
            self.queues.steering.drain(..).collect(),
            self.queues.follow_ups.drain(..).collect(),
        )
    }

    /// Queued steering and follow-up counts.
    pub(crate) fn queued(&self) -> (usize, usize) {
        (self.queues.steering.len(), self.queues.follow_ups.len())
    }
}

/// What the run's latest commit recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CommittedAs {
    Nothing,
    Running,
    Awaiting,
}

/// An end asked for while something was outstanding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EndRequest {
    Abort,
    Stop(String),
}

impl EndRequest {
    pub(crate) fn cause(&self) -> EndCause {
        match self {
            EndRequest::Abort => EndCause::Cancelled,
            EndRequest::Stop(reason) => EndCause::Stopped(reason.clone()),
        }
    }
}

/// Where an active run is between inputs. Every variant holds exactly what its phase needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    /// A model call is decided; the next `poll` that finds nothing queued hands it out.
    CallModel,
    /// The model call of `step` is with the host; `streamed` once a delta of its answer
    /// arrived (from then on the call can no longer be compacted away, SPEC §8.9).
    ModelOut {
        step: Step,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        streamed: bool,
    },
    /// A tool batch with every approval decided and at least one call to execute; the next
    /// `poll` that finds nothing queued hands out `ExecuteTools`.
    ToolsReady(Batch),
    /// A tool batch whose `ExecuteTools` was handed out: its executing calls are with the host.
    ToolsOut(Batch),
    /// Waiting on a committed ticket.
    Waiting(Box<Wait>),
}

/// A committed wait, by what answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Wait {
    /// A decision on (or the result of) one call of a tool batch: the ticket's call is in
    /// `batch`, undecided.
    Call { ticket: ResumeTicket, batch: Batch },
    /// A pause, taken at the boundary it interrupted; `Continue` takes that boundary again.
    Pause {
        ticket: ResumeTicket,
        interrupted: BoundaryKind,
    },
    /// Input from outside the run (a remote-input ticket, found on recovery), at a boundary.
    Remote {
        ticket: ResumeTicket,
        interrupted: BoundaryKind,
    },
}

impl Wait {
    pub(crate) fn ticket(&self) -> &ResumeTicket {
        match self {
            Wait::Call { ticket, .. }
            | Wait::Pause { ticket, .. }
            | Wait::Remote { ticket, .. } => ticket,
        }
    }

    /// The boundary a pause or remote-input wait interrupted (none for a call wait).
    pub(crate) fn interrupted(&self) -> Option<BoundaryKind> {
        match self {
            Wait::Call { .. } => None,
            Wait::Pause { interrupted, .. } | Wait::Remote { interrupted, .. } => {
                Some(*interrupted)
            }
        }
    }
}

impl Phase {
    /// What makes a phase read from a snapshot impossible, if anything: a tool phase with
    /// nothing for the host, or a call wait whose call is not open in its batch.
    pub(crate) fn inconsistency(&self) -> Option<String> {
        match self {
            Phase::ToolsReady(batch) if !batch.calls.iter().any(|c| c.slot == Slot::Ready) => Some(
                format!("the tools of step {} have no call to execute", batch.step),
            ),
            Phase::ToolsOut(batch) if batch.all_answered() => Some(format!(
                "the tools of step {} are out but every call has its result",
                batch.step
            )),
            Phase::Waiting(wait) => match wait.as_ref() {
                Wait::Call { ticket, batch } => {
                    let open = waiting_call(ticket)
                        .and_then(|call_id| batch.find(call_id))
                        .is_some_and(|entry| entry.slot == Slot::Undecided);
                    (!open).then(|| {
                        format!(
                            "ticket {} waits on a call its batch holds no open decision for",
                            ticket.correlation_id
                        )
                    })
                }
                Wait::Pause { ticket, .. } if !matches!(ticket.target(), AwaitTarget::Pause(_)) => {
                    Some(format!("ticket {} is not a pause", ticket.correlation_id))
                }
                Wait::Remote { ticket, .. }
                    if !matches!(ticket.target(), AwaitTarget::RemoteInput { .. }) =>
                {
                    Some(format!(
                        "ticket {} is not a remote input",
                        ticket.correlation_id
                    ))
                }
                _ => None,
            },
            _ => None,
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Phase::CallModel => "a model call is about to be handed out".into(),
            Phase::ModelOut {
                step,
                streamed: false,
            } => format!("the model call of step {step} is out"),
            Phase::ModelOut {
                step,
                streamed: true,
            } => format!("the model call of step {step} is out and its answer is arriving"),
            Phase::ToolsReady(batch) => {
                format!("the tools of step {} are about to execute", batch.step)
            }
            Phase::ToolsOut(batch) => format!("the tools of step {} are executing", batch.step),
            Phase::Waiting(wait) => {
                format!(
                    "the run is awaiting ticket {}",
                    wait.ticket().correlation_id
                )
            }
        }
    }
}

/// What a new run begins with: nothing (a `continue`), the prompt's one message, or its
/// several (§8.10). One message is the common case and costs no list.
pub(crate) enum Opening {
    Continue,
    One(UserMessage),
    Many(Vec<UserMessage>),
}

/// What comes after a transition: the run goes on in a new phase, or it has ended (its
/// `Ended` commit and `run_end` emitted). A transition consumes the run and must return one of
/// the two, so no path can drop a run without ending it.
#[must_use = "the successor of a run must be kept"]
pub(crate) enum Next {
    Continue(ActiveRun),
    Ended(RunEnded),
}

impl Next {
    /// What becomes `Agent::active`: the run that goes on, or none.
    fn into_active(self) -> Option<ActiveRun> {
        match self {
            Next::Continue(active) => Some(active),
            Next::Ended(RunEnded(())) => None,
        }
    }
}

/// Proof that a run ended: only [`Thread::finish`] makes one.
pub(crate) struct RunEnded(());

/// What an input handler's match leaves for [`Agent::transition`] to put back.
#[must_use = "the active run must be put back"]
pub(crate) enum Transition {
    /// The input was taken: the run's successor.
    Moved(Next),
    /// The input changed nothing: the active run as the handler got it, and the input's
    /// answer (the error of a refused input, or `Ok` for an accepted no-op).
    Kept(Option<ActiveRun>, Result<(), AgentError>),
}

/// The outputs of one input as they are made, commits before events: the output buffer (the
/// agent's outbox) borrowed for the input, each commit written after the input's earlier
/// commits and before its events.
#[derive(Debug)]
pub(crate) struct Tx<'a> {
    out: &'a mut VecDeque<Output>,
    /// Where the input's next commit goes.
    commits_at: usize,
}

impl<'a> Tx<'a> {
    /// A transaction over `out`: what it emits is queued behind the outputs not yet polled.
    fn over(out: &'a mut VecDeque<Output>) -> Tx<'a> {
        Tx {
            commits_at: out.len(),
            out,
        }
    }

    pub(crate) fn commit(&mut self, commit: Box<AgentCommit>) {
        self.out.insert(self.commits_at, Output::Commit(commit));
        self.commits_at += 1;
    }

    pub(crate) fn push(&mut self, event: AgentEvent) {
        self.out.push_back(Output::Event(event));
    }

    pub(crate) fn event(&mut self, run_id: &RunId, event: LoopEvent) {
        self.push(AgentEvent::Loop {
            run_id: run_id.clone(),
            event,
        });
    }
}

/// The tool call a `Wait::Call` ticket is about.
fn waiting_call(ticket: &ResumeTicket) -> Option<&CallId> {
    match ticket.target() {
        AwaitTarget::ToolCall { call_id, .. } => Some(call_id),
        AwaitTarget::RemoteInput { .. } | AwaitTarget::Pause(_) => None,
    }
}

// ----- where the active run changes hands: the only writes of `Agent::active` -------------------

impl Agent {
    /// Runs one transition of the active run: `step` gets the thread part, the active run by
    /// value and the output buffer, matches the phase the input needs, and returns what
    /// becomes the active run (the successor, or the run it got back, untouched, with the
    /// input's answer), which is put back before this returns.
    pub(crate) fn transition(
        &mut self,
        step: impl FnOnce(&mut Thread, Option<ActiveRun>, &mut Tx<'_>) -> Transition,
    ) -> Result<(), AgentError> {
        let mut tx = Tx::over(&mut self.outbox);
        let (active, answer) = match step(&mut self.thread, self.active.take(), &mut tx) {
            Transition::Moved(next) => (next.into_active(), Ok(())),
            Transition::Kept(active, answer) => (active, answer),
        };
        self.active = active;
        answer
    }

    /// Starts `run` (checked and minted by the caller): commits Running with the prompt (none
    /// on `continue`) and the `run_started` fact, announces `run_start`, and decides the first
    /// model call.
    pub(crate) fn begin(&mut self, mut run: Run, opening: Opening) {
        let thread = &mut self.thread;
        // One prompt message rides in `message`, several in `messages` (§8.10).
        let (message, messages) = match opening {
            Opening::Continue => (None, Vec::new()),
            Opening::One(message) => {
                let message = Message::from(message);
                thread.messages.push(message.clone());
                (Some(message), Vec::new())
            }
            Opening::Many(messages) => {
                let messages: Vec<Message> = messages.into_iter().map(Message::from).collect();
                thread.messages.extend(messages.iter().cloned());
                (None, messages)
            }
        };
        let started =
            AuditDraft::run_started(&run.run_id, run.transcript_start).with_now_ms(thread.clock_ms);
        // Room for `commit_clock` and the `run_state_changed` draft assembling puts in front.
        let mut extra = Vec::with_capacity(3);
        extra.push(started);
        let mut tx = Tx::over(&mut self.outbox);
        thread.commit_running(&mut run, extra, &mut tx);
        tx.push(AgentEvent::RunStart {
            run_id: run.run_id.clone(),
            message,
            messages,
        });
        self.active = Some(ActiveRun {
            run,
            phase: Phase::CallModel,
        });
    }

    /// A run that starts and ends in one commit with `messages` (an import, SPEC §8.10): the
    /// `Ended(cause)` commit with the messages and `draft`, then `run_start` (with the
    /// messages) and `run_end`. The agent is idle before and after.
    pub(crate) fn commit_imported(
        &mut self,
        run_id: RunId,
        messages: Vec<Message>,
        draft: AuditDraft,
        cause: EndCause,
    ) {
        let thread = &mut self.thread;
        let mut run = Run::new(run_id.clone(), thread.messages.len());
        thread.messages.extend(messages.iter().cloned());
        let mut tx = Tx::over(&mut self.outbox);
        let disposition = RunDisposition::Ended {
            run_id: run_id.clone(),
            cause: cause.clone(),
        };
        thread.push_commit(&mut tx, &mut run, disposition, true, vec![draft]);
        thread.last_end = Some((run_id.clone(), cause.clone()));
        let mut messages = messages;
        let message = if messages.len() == 1 {
            messages.pop()
        } else {
            None
        };
        tx.push(AgentEvent::RunStart {
            run_id: run_id.clone(),
            message,
            messages,
        });
        tx.push(AgentEvent::RunEnd {
            run_id,
            result: RunResult {
                cause,
                steps: 0,
                unconsumed: Vec::new(),
            },
        });
    }

    /// The action a `poll` hands out, if the run has one decided: the model call
    /// (`CallModel` → `ModelOut`, the step count grows) or the tool batch (`ToolsReady` →
    /// `ToolsOut`, its ready calls executing).
    pub(crate) fn hand_out(&mut self) -> Option<Action> {
        // Most polls find nothing to hand out: answer those without moving the run.
        if !matches!(
            self.active.as_ref()?.phase,
            Phase::CallModel | Phase::ToolsReady(_)
        ) {
            return None;
        }
        let ActiveRun { mut run, phase } = self.active.take()?;
        let max_steps = self.thread.config.max_steps;
        let (phase, action) = match phase {
            Phase::CallModel => {
                debug_assert!(run.steps < max_steps, "a call past the budget");
                run.steps = run.steps.saturating_add(1);
                let step = run.steps;
                let action = Action::CallModel {
                    run_id: run.run_id.clone(),
                    step,
                    final_step: step >= max_steps,
                };
                let phase = Phase::ModelOut {
                    step,
                    streamed: false,
                };
                (phase, Some(action))
            }
            Phase::ToolsReady(mut batch) => {
                let calls = batch.start_ready();
                let action = Action::ExecuteTools {
                    run_id: run.run_id.clone(),
                    step: batch.step,
                    calls,
                };
                (Phase::ToolsOut(batch), Some(action))
            }
            phase => (phase, None),
        };
        self.active = Some(ActiveRun { run, phase });
        action
    }
}

// ----- what every transition shares: appending, committing, the boundary -----------------------

impl Thread {
    /// Appends a message to the transcript and announces it.
    fn append(&mut self, tx: &mut Tx<'_>, run_id: &RunId, origin: MessageOrigin, message: Message) {
        self.messages.push(message.clone());
        tx.event(run_id, LoopEvent::MessageAppended { origin, message });
    }

    /// Appends a batch's results, in the order given (call order).
    fn append_results(
        &mut self,
        tx: &mut Tx<'_>,
        run_id: &RunId,
        results: impl IntoIterator<Item = ToolResultMessage>,
    ) {
        for result in results {
            self.append(tx, run_id, MessageOrigin::ToolResult, Message::from(result));
        }
    }

    /// The messages not yet committed, now committed.
    fn take_uncommitted(&mut self) -> Vec<Message> {
        let new = self
            .messages
            .get(self.committed..)
            .map(<[Message]>::to_vec)
            .unwrap_or_default();
        self.committed = self.messages.len();
        new
    }

    /// Emits one commit of `run` with every message not yet committed, stamped with the
    /// run's ordinal and the thread version it builds on (both then advance); its last draft
    /// is `commit_clock` (the agent's clock and the transcript length after it).
    fn push_commit(
        &mut self,
        tx: &mut Tx<'_>,
        run: &mut Run,
        disposition: RunDisposition,
        state_changed: bool,
        mut extra: Vec<AuditDraft>,
    ) {
        let messages = self.take_uncommitted();
        // Room for the drafts assembling puts in front and for `commit_clock` (when, and where
        // in the transcript: the facts a trace, SPEC §14, places spans by), appended last:
        // one allocation for every draft, and putting drafts in front moves only the caller's.
        let room = 1
            + usize::from(state_changed)
            + usize::from(matches!(disposition, RunDisposition::Awaiting(_)));
        if extra.capacity() == 0 {
            // Allocated at its size (growing an empty vector takes the slow path).
            extra = Vec::with_capacity(room);
        } else {
            extra.reserve_exact(room);
        }
        // Assembled in its box, where the clock joins it (the commit is not moved again).
        let mut commit = Box::new(AgentCommit {
            commit: ThreadCommit::assemble(
                self.config.thread_id.clone(),
                disposition,
                state_changed,
                messages,
                Vec::new(),
                extra,
            ),
            ordinal: run.commits,
            expected_thread_version: self.thread_version,
        });
        commit
            .commit
            .events
            .push(AuditDraft::commit_clock(self.clock_ms, self.committed));
        tx.commit(commit);
        run.commits = run.commits.saturating_add(1);
        self.thread_version = self.thread_version.saturating_add(1);
    }

    /// Commits `Running` with every new message. `state_changed` when the run's previous
    /// commit was not Running.
    fn commit_running(&mut self, run: &mut Run, extra: Vec<AuditDraft>, tx: &mut Tx<'_>) {
        let state_changed = run.committed_as != CommittedAs::Running;
        run.committed_as = CommittedAs::Running;
        let disposition = RunDisposition::Running {
            run_id: run.run_id.clone(),
        };
        self.push_commit(tx, run, disposition, state_changed, extra);
    }

    /// A complete protocol boundary: the queue rules decide (see `queues`).
    fn boundary(&mut self, mut run: Run, kind: BoundaryKind, tx: &mut Tx<'_>) -> Next {
        let decision = decide_boundary(&BoundaryInput {
            kind,
            end_requested: run.end_request.as_ref().map(EndRequest::cause),
            pause_requested: run.pause_requested,
            steering: run.queues.steering.len(),
            follow_ups: run.queues.follow_ups.len(),
            steps: run.steps,
            max_steps: self.config.max_steps,
        });
        match decision {
            BoundaryDecision::Finish(cause) => {
                Next::Ended(self.finish(run, None, cause, Pairing::Skip, tx))
            }
            BoundaryDecision::Pause => {
                run.pause_requested = false;
                let target = AwaitTarget::Pause(PauseReason::Manual);
                let wait = |ticket| Wait::Pause {
                    ticket,
                    interrupted: kind,
                };
                self.open_wait(run, target, None, wait, tx)
            }
            BoundaryDecision::Continue {
                take_steering,
                take_follow_ups,
            } => {
                if take_steering {
                    let taken = take_queued(&mut run.queues.steering, self.config.steering_mode);
                    for message in taken {
                        self.append(tx, &run.run_id, MessageOrigin::Steering, message);
                    }
                }
                if take_follow_ups {
                    let taken = take_queued(&mut run.queues.follow_ups, self.config.follow_up_mode);
                    for message in taken {
                        self.append(tx, &run.run_id, MessageOrigin::FollowUp, message);
                    }
                }
                self.commit_running(&mut run, Vec::new(), tx);
                Next::Continue(ActiveRun {
                    run,
                    phase: Phase::CallModel,
                })
            }
        }
    }
}
