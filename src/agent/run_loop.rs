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
//! `expired` for the waiting call on expiry). `UO` is `unexpected_outcome`, `IS`
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
//! Every transition consumes the run and returns its successor ([`Next`]): the run goes on in a
//! new phase, or it ended (only [`Agent::finish`] makes the proof of that). This module is the
//! only one that writes a phase or the agent's active run.
//!
//! | phase            | input                      | outputs → next phase                                  |
//! |------------------|----------------------------|-------------------------------------------------------|
//! | (idle)           | `prompt` / `continue`      | commit Running{user msg; none on `continue`}, `run_start` → `CallModel` |
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

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::commit::{AuditDraft, ThreadCommit, WaitBoundary};
use crate::error::AgentError;
use crate::ids::{CallId, RunId, Step};
use crate::message::{
    AssistantMessage, Message, ResultOutcome, StopReason, ToolCall, ToolOutput, ToolResultMessage,
    UserMessage,
};
use crate::resume::{
    AwaitTarget, PauseReason, PendingTool, PermissionDecision, ResumeCommand, ResumeResult,
    ResumeTicket, ToolWaitReason, WaitIdentity,
};
use crate::run::{EndCause, Failure, RunDisposition};

use super::Agent;
use super::compaction::Compaction;
use super::config::ToolPolicy;
use super::events::{Action, AgentCommit, AgentEvent, LoopEvent, MessageOrigin, Output, RunResult};
use super::queues::{
    BoundaryDecision, BoundaryInput, BoundaryKind, Queues, decide_boundary, take_queued,
};
use super::recover::{RecoveredRun, RecoveryPolicy};

/// The active run: what holds for its whole life, and the phase it is in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ActiveRun {
    pub(crate) run: Run,
    pub(crate) phase: Phase,
}

/// What an active run keeps across its phases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Run {
    pub(crate) run_id: RunId,
    /// Model calls handed out so far.
    pub(crate) steps: Step,
    /// The end an `abort` or `stop` asked for while an outcome was out; honoured when it
    /// arrives.
    pub(crate) end_request: Option<EndRequest>,
    pub(crate) pause_requested: bool,
    pub(crate) queues: Queues,
    /// Waits opened so far: the next ticket's correlation id is `"{run_id}:wait-{waits + 1}"`.
    pub(crate) waits: u32,
    /// Where the run's messages begin in the transcript.
    pub(crate) transcript_start: usize,
    /// What the run's latest commit recorded (for `state_changed`).
    pub(crate) committed_as: CommittedAs,
    /// Commits of this run emitted so far: the next commit's `ordinal` (SPEC §7.1).
    pub(crate) commits: u64,
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

/// The tool calls of one assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Batch {
    pub(crate) step: Step,
    pub(crate) calls: Vec<BatchCall>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BatchCall {
    pub(crate) call: ToolCall,
    pub(crate) policy: ToolPolicy,
    pub(crate) slot: Slot,
}

/// One call's progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Slot {
    /// Approval-gated, no decision yet.
    Undecided,
    /// Will execute (auto, or allowed).
    Ready,
    /// Handed to the host.
    Executing,
    /// Has its result (executed, malformed, denied, truncated).
    Done(ToolResultMessage),
}

impl Batch {
    /// A batch of `calls`, gated calls undecided and the rest ready.
    pub(crate) fn gated(
        step: Step,
        calls: Vec<ToolCall>,
        policy_of: impl Fn(&str) -> ToolPolicy,
    ) -> Self {
        let calls = calls
            .into_iter()
            .map(|call| {
                let policy = policy_of(&call.name);
                let slot = match policy {
                    ToolPolicy::Auto => Slot::Ready,
                    ToolPolicy::RequireApproval { .. } => Slot::Undecided,
                };
                BatchCall { call, policy, slot }
            })
            .collect();
        Batch { step, calls }
    }

    pub(crate) fn find(&self, call_id: &CallId) -> Option<&BatchCall> {
        self.calls.iter().find(|c| c.call.id == *call_id)
    }

    fn find_mut(&mut self, call_id: &CallId) -> Option<&mut BatchCall> {
        self.calls.iter_mut().find(|c| c.call.id == *call_id)
    }

    pub(crate) fn executing_ids(&self) -> Vec<CallId> {
        self.calls
            .iter()
            .filter(|c| c.slot == Slot::Executing)
            .map(|c| c.call.id.clone())
            .collect()
    }

    fn all_answered(&self) -> bool {
        self.calls.iter().all(|c| matches!(c.slot, Slot::Done(_)))
    }
}

/// How `finish` pairs calls that have no result yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pairing {
    /// Every open call: `skipped`.
    Skip,
    /// Executing calls: `interrupted` (outcome unknown); the rest `skipped`.
    Interrupt,
    /// The waiting call: `expired`; the rest `skipped`.
    Expire,
}

/// The calls a run that ends leaves without a result: a batch, and the call its wait (if
/// any) is about.
pub(crate) struct Open {
    batch: Batch,
    waiting: Option<CallId>,
}

impl Open {
    fn batch(batch: Batch) -> Option<Open> {
        Some(Open {
            batch,
            waiting: None,
        })
    }

    /// The open calls of a phase a run ends in.
    pub(crate) fn of(phase: Phase) -> Option<Open> {
        match phase {
            Phase::ToolsReady(batch) | Phase::ToolsOut(batch) => Open::batch(batch),
            Phase::Waiting(wait) => match *wait {
                Wait::Call { ticket, batch } => Some(Open {
                    waiting: waiting_call(&ticket).cloned(),
                    batch,
                }),
                Wait::Pause { .. } | Wait::Remote { .. } => None,
            },
            Phase::CallModel | Phase::ModelOut { .. } => None,
        }
    }
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

/// Proof that a run ended: only [`Agent::finish`] makes one.
pub(crate) struct RunEnded(());

/// The outputs of one input as they are made, commits before events: the transaction holds
/// the agent's outbox while the input is handled (see [`Agent::with_tx`]) and writes into it
/// directly, each commit after the input's earlier commits and before its events.
#[derive(Debug)]
pub(crate) struct Tx {
    out: VecDeque<Output>,
    /// Where the input's next commit goes.
    commits_at: usize,
}

impl Tx {
    pub(crate) fn commit(&mut self, commit: AgentCommit) {
        self.out
            .insert(self.commits_at, Output::Commit(Box::new(commit)));
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
    /// Runs one transition of the active run: `step` consumes the run and returns its successor,
    /// which becomes the active run (or none, when the run ended); then the outputs are queued.
    /// Callers have checked that a run is active.
    pub(crate) fn transition(
        &mut self,
        step: impl FnOnce(&mut Agent, ActiveRun, &mut Tx) -> Next,
    ) -> Result<(), AgentError> {
        let Some(active) = self.active.take() else {
            debug_assert!(false, "a transition with no active run");
            return Err(AgentError::Internal(
                "a transition was asked for with no active run".into(),
            ));
        };
        self.with_tx(|agent, tx| {
            agent.active = step(agent, active, tx).into_active();
        });
        Ok(())
    }

    /// Runs `f` with a transaction over the outbox: what it emits is queued behind the outputs
    /// not yet polled, the input's commits before its events.
    pub(crate) fn with_tx<R>(&mut self, f: impl FnOnce(&mut Agent, &mut Tx) -> R) -> R {
        let out = std::mem::take(&mut self.outbox);
        let mut tx = Tx {
            commits_at: out.len(),
            out,
        };
        let result = f(self, &mut tx);
        self.outbox = tx.out;
        result
    }

    /// Starts `run` (checked and minted by the caller): commits Running with the prompt (none
    /// on `continue`) and the `run_started` fact, announces `run_start`, and decides the first
    /// model call.
    pub(crate) fn begin(&mut self, mut run: Run, message: Option<UserMessage>) {
        let message = message.map(Message::from);
        if let Some(message) = &message {
            self.messages.push(message.clone());
        }
        let started =
            AuditDraft::run_started(&run.run_id, run.transcript_start).with_now_ms(self.clock_ms);
        // Room for the `run_state_changed` draft that assembling puts in front.
        let mut extra = Vec::with_capacity(2);
        extra.push(started);
        self.with_tx(|agent, tx| {
            agent.commit_running(&mut run, extra, tx);
            tx.push(AgentEvent::RunStart {
                run_id: run.run_id.clone(),
                message,
            });
        });
        self.active = Some(ActiveRun {
            run,
            phase: Phase::CallModel,
        });
    }

    /// The action a `poll` hands out, if the run has one decided: the model call
    /// (`CallModel` → `ModelOut`, the step count grows) or the tool batch (`ToolsReady` →
    /// `ToolsOut`, its ready calls executing).
    pub(crate) fn hand_out(&mut self) -> Option<Action> {
        let ActiveRun { mut run, phase } = self.active.take()?;
        let (phase, action) = match phase {
            Phase::CallModel => {
                debug_assert!(run.steps < self.config.max_steps, "a call past the budget");
                run.steps = run.steps.saturating_add(1);
                let step = run.steps;
                let action = Action::CallModel {
                    run_id: run.run_id.clone(),
                    step,
                    final_step: step >= self.config.max_steps,
                };
                let phase = Phase::ModelOut {
                    step,
                    streamed: false,
                };
                (phase, Some(action))
            }
            Phase::ToolsReady(mut batch) => {
                let mut calls = Vec::new();
                for entry in &mut batch.calls {
                    if entry.slot == Slot::Ready {
                        entry.slot = Slot::Executing;
                        calls.push(entry.call.clone());
                    }
                }
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

    /// Puts a run rebuilt from committed facts (SPEC §8.7) in place, in the phase the facts
    /// say, and takes the step recovery decides (see the recovery rows of the module table).
    pub(crate) fn rebuild(
        &mut self,
        run: Run,
        facts: RecoveredRun,
        policy: RecoveryPolicy,
    ) -> Result<(), AgentError> {
        let next = self.with_tx(|agent, tx| rebuild_step(agent, run, facts, policy, tx))?;
        self.active = next.into_active();
        Ok(())
    }
}

/// The step recovery takes for `facts` (see [`Agent::rebuild`]).
fn rebuild_step(
    agent: &mut Agent,
    run: Run,
    facts: RecoveredRun,
    policy: RecoveryPolicy,
    tx: &mut Tx,
) -> Result<Next, AgentError> {
    let next = match facts {
        RecoveredRun::AtCall => Next::Continue(ActiveRun {
            run,
            phase: Phase::CallModel,
        }),
        RecoveredRun::AfterAnswer => agent.boundary(run, BoundaryKind::TextStop, tx),
        RecoveredRun::AwaitingCall { ticket, mut batch } => {
            let ticket = *ticket;
            let call_id = waiting_call(&ticket).cloned();
            let Some(entry) = call_id.as_ref().and_then(|id| batch.find_mut(id)) else {
                return Err(AgentError::invalid(format!(
                    "recover: run {} waits on call {}, which its last assistant message does \
                     not make",
                    run.run_id,
                    call_id.as_ref().map_or("(none)", CallId::as_str)
                )));
            };
            entry.slot = Slot::Undecided;
            if entry.policy == ToolPolicy::Auto {
                entry.policy = ToolPolicy::RequireApproval {
                    deadline_after_ms: None,
                };
            }
            Next::Continue(ActiveRun {
                run,
                phase: Phase::Waiting(Box::new(Wait::Call { ticket, batch })),
            })
        }
        RecoveredRun::AwaitingAt {
            ticket,
            interrupted,
        } => {
            let ticket = *ticket;
            let wait = match ticket.target() {
                AwaitTarget::Pause(_) => Wait::Pause {
                    ticket,
                    interrupted,
                },
                AwaitTarget::RemoteInput { .. } => Wait::Remote {
                    ticket,
                    interrupted,
                },
                AwaitTarget::ToolCall { call_id, .. } => {
                    return Err(AgentError::invalid(format!(
                        "recover: run {} waits on call {call_id} at a boundary, with no batch",
                        run.run_id
                    )));
                }
            };
            Next::Continue(ActiveRun {
                run,
                phase: Phase::Waiting(Box::new(wait)),
            })
        }
        RecoveredRun::OpenCalls(mut batch) => {
            let undecided = batch.calls.iter().any(|c| c.slot == Slot::Undecided);
            let executable = batch.calls.iter().any(|c| c.slot == Slot::Ready);
            if policy == RecoveryPolicy::Seal && !undecided && executable {
                for entry in &mut batch.calls {
                    if entry.slot == Slot::Ready {
                        entry.slot = Slot::Executing;
                    }
                }
                let cause = EndCause::Indeterminate;
                let open = Open::batch(batch);
                Next::Ended(agent.finish(run, open, cause, Pairing::Interrupt, tx))
            } else {
                agent.advance_batch(run, batch, tx)
            }
        }
    };
    Ok(next)
}

// ----- the transitions -------------------------------------------------------------------------

impl Agent {
    /// Appends a message to the transcript and announces it.
    fn append(&mut self, tx: &mut Tx, run_id: &RunId, origin: MessageOrigin, message: Message) {
        self.messages.push(message.clone());
        tx.event(run_id, LoopEvent::MessageAppended { origin, message });
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
    /// run's ordinal and the thread version it builds on (both then advance).
    fn push_commit(
        &mut self,
        tx: &mut Tx,
        run: &mut Run,
        disposition: RunDisposition,
        state_changed: bool,
        extra: Vec<AuditDraft>,
    ) {
        let messages = self.take_uncommitted();
        let commit = ThreadCommit::assemble(
            self.config.thread_id.clone(),
            disposition,
            state_changed,
            messages,
            Vec::new(),
            extra,
        );
        tx.commit(AgentCommit {
            commit,
            ordinal: run.commits,
            expected_thread_version: self.thread_version,
        });
        run.commits = run.commits.saturating_add(1);
        self.thread_version = self.thread_version.saturating_add(1);
    }

    /// Commits `Running` with every new message. `state_changed` when the run's previous
    /// commit was not Running.
    fn commit_running(&mut self, run: &mut Run, extra: Vec<AuditDraft>, tx: &mut Tx) {
        let state_changed = run.committed_as != CommittedAs::Running;
        run.committed_as = CommittedAs::Running;
        let disposition = RunDisposition::Running {
            run_id: run.run_id.clone(),
        };
        self.push_commit(tx, run, disposition, state_changed, extra);
    }

    /// Opens a wait: mints the ticket, commits `Awaiting`, announces it, and waits in the
    /// variant `wait` builds around the ticket.
    fn open_wait(
        &mut self,
        mut run: Run,
        target: AwaitTarget,
        deadline_after_ms: Option<u64>,
        wait: impl FnOnce(ResumeTicket) -> Wait,
        tx: &mut Tx,
    ) -> Next {
        run.waits = run.waits.saturating_add(1);
        let identity = WaitIdentity {
            correlation_id: format!("{}:wait-{}", run.run_id, run.waits),
            run_id: run.run_id.clone(),
            thread_id: self.config.thread_id.clone(),
            snapshot_id: self.config.snapshot_id.clone(),
            catalog_fingerprint: self.config.catalog_fingerprint.clone(),
        };
        let deadline_ms = deadline_after_ms.map(|after| self.clock_ms.saturating_add(after));
        let ticket = ResumeTicket::new(identity, target, deadline_ms);
        let wait = wait(ticket.clone());
        run.committed_as = CommittedAs::Awaiting;
        // The commit records where the run waits (its step count, the boundary a pause
        // interrupted), so recovery reads that fact instead of inferring it.
        let waits_at = AuditDraft::run_awaiting_at(
            &run.run_id,
            run.steps,
            wait.interrupted().map(WaitBoundary::from),
        );
        self.push_commit(
            tx,
            &mut run,
            RunDisposition::Awaiting(Box::new(ticket.clone())),
            true,
            vec![waits_at],
        );
        tx.event(
            &run.run_id,
            LoopEvent::Awaiting {
                ticket: Box::new(ticket),
            },
        );
        Next::Continue(ActiveRun {
            run,
            phase: Phase::Waiting(Box::new(wait)),
        })
    }

    /// `model_done` for the outstanding step (checked by the caller).
    pub(crate) fn model_answered(
        &mut self,
        mut run: Run,
        step: Step,
        message: AssistantMessage,
        tx: &mut Tx,
    ) -> Next {
        let calls: Vec<ToolCall> = message.tool_calls().collect();
        let stop_reason = message.stop_reason;
        let error_message = message.error_message.clone();
        let message = Arc::new(message);
        self.messages.push(Message::Assistant(Arc::clone(&message)));
        tx.event(&run.run_id, LoopEvent::AssistantMessage { step, message });
        match stop_reason {
            StopReason::Error | StopReason::Aborted => {
                let cause = match (&run.end_request, stop_reason) {
                    (Some(request), _) => request.cause(),
                    (None, StopReason::Aborted) => EndCause::Cancelled,
                    (None, _) => EndCause::Error(Failure::Inference {
                        code: "model_error".into(),
                        message: error_message
                            .unwrap_or_else(|| "the model reported an error".into()),
                    }),
                };
                // Calls in a failed answer never run: each is paired `skipped`.
                let batch = Batch::gated(step, calls, |_| ToolPolicy::Auto);
                Next::Ended(self.finish(run, Open::batch(batch), cause, Pairing::Skip, tx))
            }
            _ if calls.is_empty() => self.boundary(run, BoundaryKind::TextStop, tx),
            StopReason::Length => {
                let mut batch = Batch::gated(step, calls, |_| ToolPolicy::Auto);
                for entry in &mut batch.calls {
                    let result = ToolResultMessage::truncated(&entry.call);
                    tx.event(
                        &run.run_id,
                        LoopEvent::SyntheticResult {
                            call_id: entry.call.id.clone(),
                            tool_name: entry.call.name.clone(),
                            outcome: ResultOutcome::Truncated,
                        },
                    );
                    entry.slot = Slot::Done(result);
                }
                self.after_batch(run, batch, tx)
            }
            StopReason::Stop | StopReason::ToolUse => {
                // The calls are durable before any effect.
                self.commit_running(&mut run, Vec::new(), tx);
                let batch = Batch::gated(step, calls, |name| self.config.policy(name));
                match run.end_request.as_ref().map(EndRequest::cause) {
                    Some(cause) => {
                        Next::Ended(self.finish(run, Open::batch(batch), cause, Pairing::Skip, tx))
                    }
                    None => self.advance_batch(run, batch, tx),
                }
            }
        }
    }

    /// `model_failed` for the outstanding step (checked by the caller): the error becomes an
    /// assistant message and the run ends (with the cause an end request asked for, if any).
    pub(crate) fn model_gave_up(
        &mut self,
        run: Run,
        step: Step,
        code: &str,
        text: &str,
        tx: &mut Tx,
    ) -> Next {
        let assistant = Arc::new(AssistantMessage {
            content: Vec::new(),
            stop_reason: StopReason::Error,
            error_message: Some(text.to_owned()),
            usage: None,
            id: None,
        });
        self.messages
            .push(Message::Assistant(Arc::clone(&assistant)));
        tx.event(
            &run.run_id,
            LoopEvent::AssistantMessage {
                step,
                message: assistant,
            },
        );
        let cause = match &run.end_request {
            Some(request) => request.cause(),
            None => EndCause::Error(Failure::Inference {
                code: code.to_owned(),
                message: text.to_owned(),
            }),
        };
        Next::Ended(self.finish(run, None, cause, Pairing::Skip, tx))
    }

    /// Asks the next approval, or makes the ready calls ready to hand out, or (nothing to run)
    /// closes the batch.
    fn advance_batch(&mut self, run: Run, batch: Batch, tx: &mut Tx) -> Next {
        let undecided = batch
            .calls
            .iter()
            .find(|c| c.slot == Slot::Undecided)
            .map(|c| (c.call.clone(), c.policy));
        if let Some((call, policy)) = undecided {
            let deadline_after_ms = match policy {
                ToolPolicy::RequireApproval { deadline_after_ms } => deadline_after_ms,
                ToolPolicy::Auto => None,
            };
            let target = AwaitTarget::ToolCall {
                reason: ToolWaitReason::Permission,
                call_id: call.id,
                tool: PendingTool {
                    name: call.name,
                    arguments: call.arguments,
                },
            };
            let wait = |ticket| Wait::Call { ticket, batch };
            self.open_wait(run, target, deadline_after_ms, wait, tx)
        } else if batch.calls.iter().any(|c| c.slot == Slot::Ready) {
            for entry in batch.calls.iter().filter(|c| c.slot == Slot::Ready) {
                tx.event(
                    &run.run_id,
                    LoopEvent::ToolStart {
                        step: batch.step,
                        call_id: entry.call.id.clone(),
                        name: entry.call.name.clone(),
                        arguments: entry.call.arguments.clone(),
                    },
                );
            }
            Next::Continue(ActiveRun {
                run,
                phase: Phase::ToolsReady(batch),
            })
        } else {
            self.after_batch(run, batch, tx)
        }
    }

    /// One `tool_done` of an executing call (checked by the caller): records the result; closes
    /// the batch when every call is answered.
    pub(crate) fn tool_answered(
        &mut self,
        run: Run,
        mut batch: Batch,
        result: ToolResultMessage,
        tx: &mut Tx,
    ) -> Next {
        tx.event(
            &run.run_id,
            LoopEvent::ToolEnd {
                call_id: result.call_id.clone(),
                tool_name: result.tool_name.clone(),
                is_error: result.is_error,
                outcome: result.outcome,
            },
        );
        if let Some(entry) = batch.find_mut(&result.call_id) {
            entry.slot = Slot::Done(result);
        }
        if batch.all_answered() {
            self.after_batch(run, batch, tx)
        } else {
            Next::Continue(ActiveRun {
                run,
                phase: Phase::ToolsOut(batch),
            })
        }
    }

    /// Appends every result of the batch in call order, then takes the boundary.
    fn after_batch(&mut self, run: Run, batch: Batch, tx: &mut Tx) -> Next {
        for entry in batch.calls {
            let result = match entry.slot {
                Slot::Done(result) => result,
                other => {
                    debug_assert!(false, "after_batch with an open call: {other:?}");
                    ToolResultMessage::skipped(&entry.call)
                }
            };
            self.append(
                tx,
                &run.run_id,
                MessageOrigin::ToolResult,
                Message::from(result),
            );
        }
        self.boundary(run, BoundaryKind::AfterToolBatch, tx)
    }

    /// A complete protocol boundary: the queue rules decide (see `queues`).
    fn boundary(&mut self, mut run: Run, kind: BoundaryKind, tx: &mut Tx) -> Next {
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

    /// `abort`, `stop` or `cancel_wait`: ends the run now when no outcome is out; otherwise
    /// records the request (the first one wins), honoured when the outstanding outcome arrives.
    pub(crate) fn end_or_request(
        &mut self,
        active: ActiveRun,
        request: EndRequest,
        tx: &mut Tx,
    ) -> Next {
        let ActiveRun { mut run, phase } = active;
        match phase {
            Phase::ModelOut { .. } | Phase::ToolsOut(_) => {
                run.end_request.get_or_insert(request);
                Next::Continue(ActiveRun { run, phase })
            }
            Phase::CallModel | Phase::ToolsReady(_) | Phase::Waiting(_) => {
                let cause = request.cause();
                Next::Ended(self.finish(run, Open::of(phase), cause, Pairing::Skip, tx))
            }
        }
    }

    /// Ends the run now, in whatever phase: `expire_wait` (the waiting call `expired`) and
    /// `abandon_tools` (executing calls `interrupted`).
    pub(crate) fn end_now(
        &mut self,
        active: ActiveRun,
        cause: EndCause,
        pairing: Pairing,
        tx: &mut Tx,
    ) -> Next {
        let ActiveRun { run, phase } = active;
        Next::Ended(self.finish(run, Open::of(phase), cause, pairing, tx))
    }

    /// `resume` of the run's wait (validated, and checked to apply, by the caller): commits
    /// Running (which deletes the ticket) with any context messages, then goes on as the wait's
    /// kind says.
    pub(crate) fn resumed(
        &mut self,
        active: ActiveRun,
        command: ResumeCommand,
        tx: &mut Tx,
    ) -> Next {
        let ActiveRun { mut run, phase } = active;
        let Phase::Waiting(wait) = phase else {
            debug_assert!(false, "resumed outside a wait");
            return Next::Continue(ActiveRun { run, phase });
        };
        tx.event(
            &run.run_id,
            LoopEvent::Resumed {
                correlation_id: wait.ticket().correlation_id.clone(),
                result: command.result.kind(),
            },
        );
        for message in command.context_messages {
            self.append(tx, &run.run_id, MessageOrigin::ResumeContext, message);
        }
        match *wait {
            Wait::Call { ticket, mut batch } => {
                let mut extra = Vec::new();
                let max_bytes = self.config.max_tool_output_bytes;
                let step = batch.step;
                if let Some(call_id) = waiting_call(&ticket)
                    && let Some(entry) = batch.find_mut(call_id)
                {
                    let answer = |output: ToolOutput| match output.unrepresentable(max_bytes) {
                        Some(why) => ToolResultMessage::malformed(&entry.call, &why),
                        None => output.into_result(entry.call.name.clone()),
                    };
                    let slot = match command.result {
                        ResumeResult::Permission(decision) => {
                            extra.push(
                                AuditDraft::permission_decided(step, call_id, &decision)
                                    .with_now_ms(self.clock_ms),
                            );
                            match decision {
                                PermissionDecision::Allow { .. } => Slot::Ready,
                                PermissionDecision::Deny { reason } => {
                                    let denied =
                                        ToolResultMessage::denied(&entry.call, reason.as_deref());
                                    tx.event(
                                        &run.run_id,
                                        LoopEvent::SyntheticResult {
                                            call_id: denied.call_id.clone(),
                                            tool_name: denied.tool_name.clone(),
                                            outcome: denied.outcome,
                                        },
                                    );
                                    Slot::Done(denied)
                                }
                            }
                        }
                        ResumeResult::ToolResult(output) => Slot::Done(answer(output)),
                        ResumeResult::Input(text) => {
                            Slot::Done(answer(ToolOutput::text(call_id.clone(), text)))
                        }
                        ResumeResult::Continue => Slot::Ready,
                    };
                    entry.slot = slot;
                }
                self.commit_running(&mut run, extra, tx);
                self.advance_batch(run, batch, tx)
            }
            Wait::Pause { interrupted, .. } | Wait::Remote { interrupted, .. } => {
                match command.result {
                    ResumeResult::Input(text) => {
                        let input = Message::user(text);
                        if run.steps >= self.config.max_steps {
                            // No model call is left to answer it: it comes back unconsumed.
                            run.queues.steering.push_front(input);
                            let cause = EndCause::MaxSteps;
                            Next::Ended(self.finish(run, None, cause, Pairing::Skip, tx))
                        } else {
                            self.append(tx, &run.run_id, MessageOrigin::ResumeInput, input);
                            self.commit_running(&mut run, Vec::new(), tx);
                            Next::Continue(ActiveRun {
                                run,
                                phase: Phase::CallModel,
                            })
                        }
                    }
                    // `Continue` (and any other answer) re-takes the boundary the wait
                    // interrupted; the boundary's own commit (Running, Awaiting or Ended) is
                    // the one that deletes the ticket.
                    _ => self.boundary(run, interrupted, tx),
                }
            }
        }
    }

    /// `compact` of the outstanding model call (checked by the caller, SPEC §8.9): commits the
    /// compaction (Running, no messages), announces it, and decides the same step's call again
    /// over the new model context.
    pub(crate) fn compacted(
        &mut self,
        active: ActiveRun,
        keep_from: usize,
        summary: Arc<UserMessage>,
        tx: &mut Tx,
    ) -> Next {
        let ActiveRun { mut run, phase } = active;
        if !matches!(
            phase,
            Phase::ModelOut {
                streamed: false,
                ..
            }
        ) {
            debug_assert!(false, "compacted outside an untouched model call");
            return Next::Continue(ActiveRun { run, phase });
        }
        let removed = keep_from.saturating_sub(self.context_start());
        let draft = AuditDraft::compacted(keep_from, self.messages.len(), Arc::clone(&summary))
            .with_now_ms(self.clock_ms);
        self.set_compaction(Some(Compaction::new(keep_from, summary)));
        self.commit_running(&mut run, vec![draft], tx);
        tx.event(&run.run_id, LoopEvent::Compacted { keep_from, removed });
        // The same step is handed out again: the call that was out is never answered.
        run.steps = run.steps.saturating_sub(1);
        Next::Continue(ActiveRun {
            run,
            phase: Phase::CallModel,
        })
    }

    /// Ends the run: close input, return the queues, pair every open call, commit `Ended` with
    /// everything not yet committed, then `input_closed` and `run_end`.
    pub(crate) fn finish(
        &mut self,
        mut run: Run,
        open: Option<Open>,
        cause: EndCause,
        pairing: Pairing,
        tx: &mut Tx,
    ) -> RunEnded {
        let unconsumed = run.queues.drain_unconsumed();
        if let Some(Open { batch, waiting }) = open {
            let mut results = Vec::with_capacity(batch.calls.len());
            for entry in batch.calls {
                let result = match entry.slot {
                    Slot::Done(result) => result,
                    slot => {
                        let result = match (slot, pairing) {
                            (Slot::Executing, Pairing::Interrupt) => {
                                ToolResultMessage::interrupted(&entry.call)
                            }
                            (Slot::Undecided, Pairing::Expire)
                                if waiting.as_ref() == Some(&entry.call.id) =>
                            {
                                ToolResultMessage::expired(&entry.call)
                            }
                            _ => ToolResultMessage::skipped(&entry.call),
                        };
                        tx.event(
                            &run.run_id,
                            LoopEvent::SyntheticResult {
                                call_id: result.call_id.clone(),
                                tool_name: result.tool_name.clone(),
                                outcome: result.outcome,
                            },
                        );
                        result
                    }
                };
                results.push(result);
            }
            for result in results {
                self.append(
                    tx,
                    &run.run_id,
                    MessageOrigin::ToolResult,
                    Message::from(result),
                );
            }
        }
        let disposition = RunDisposition::Ended {
            run_id: run.run_id.clone(),
            cause: cause.clone(),
        };
        self.push_commit(tx, &mut run, disposition, true, Vec::new());
        self.last_end = Some((run.run_id.clone(), cause.clone()));
        tx.event(&run.run_id, LoopEvent::InputClosed);
        tx.push(AgentEvent::RunEnd {
            run_id: run.run_id,
            result: RunResult {
                cause,
                steps: run.steps,
                unconsumed,
            },
        });
        RunEnded(())
    }
}

/// Checks a `tool_done` against the executing batch without changing anything.
pub(crate) fn check_tool_call<'a>(
    batch: &'a Batch,
    call_id: &CallId,
) -> Result<&'a BatchCall, AgentError> {
    let entry = batch.find(call_id).ok_or_else(|| AgentError::UnknownCall {
        call_id: call_id.clone(),
        executing: batch.executing_ids(),
    })?;
    match &entry.slot {
        Slot::Executing => Ok(entry),
        Slot::Done(result)
            if matches!(
                result.outcome,
                ResultOutcome::Executed | ResultOutcome::Malformed
            ) =>
        {
            Err(AgentError::DuplicateOutcome {
                call_id: call_id.clone(),
            })
        }
        _ => Err(AgentError::UnknownCall {
            call_id: call_id.clone(),
            executing: batch.executing_ids(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: CallId::new(id),
            name: "t".into(),
            arguments: json!({}).into(),
        }
    }

    /// Which answer a `tool_done` gets for a call in each slot: only an executing call takes
    /// an outcome; a call that already has its own outcome is a duplicate; a call the host
    /// never got (undecided, ready, or answered for it: denied, skipped, truncated) is unknown.
    #[test]
    fn check_tool_call_answers_by_slot() {
        let executed = ToolOutput::text("executed", "ok").into_result("t");
        let slots = [
            ("executing", Slot::Executing),
            ("executed", Slot::Done(executed)),
            (
                "malformed",
                Slot::Done(ToolResultMessage::malformed(&call("malformed"), "bad")),
            ),
            (
                "denied",
                Slot::Done(ToolResultMessage::denied(&call("denied"), None)),
            ),
            (
                "skipped",
                Slot::Done(ToolResultMessage::skipped(&call("skipped"))),
            ),
            (
                "truncated",
                Slot::Done(ToolResultMessage::truncated(&call("truncated"))),
            ),
            ("undecided", Slot::Undecided),
            ("ready", Slot::Ready),
        ];
        let batch = Batch {
            step: 1,
            calls: slots
                .iter()
                .map(|(id, slot)| BatchCall {
                    call: call(id),
                    policy: ToolPolicy::Auto,
                    slot: slot.clone(),
                })
                .collect(),
        };
        let answer = |id: &str| match check_tool_call(&batch, &CallId::new(id)) {
            Ok(_) => "ok",
            Err(AgentError::DuplicateOutcome { .. }) => "duplicate_outcome",
            Err(AgentError::UnknownCall { executing, .. }) => {
                assert_eq!(executing, [CallId::new("executing")]);
                "unknown_call"
            }
            Err(other) => panic!("{id}: {other:?}"),
        };
        let got: Vec<(&str, &str)> = ["executing", "executed", "malformed", "denied", "skipped"]
            .into_iter()
            .chain(["truncated", "undecided", "ready", "absent"])
            .map(|id| (id, answer(id)))
            .collect();
        assert_eq!(
            got,
            [
                ("executing", "ok"),
                ("executed", "duplicate_outcome"),
                ("malformed", "duplicate_outcome"),
                ("denied", "unknown_call"),
                ("skipped", "unknown_call"),
                ("truncated", "unknown_call"),
                ("undecided", "unknown_call"),
                ("ready", "unknown_call"),
                ("absent", "unknown_call"),
            ]
        );
    }
}
