//! One run's state machine: the step-driven loop of SPEC §8.2.
//!
//! # Every phase × every input
//!
//! The phases an agent is in between inputs (`Between` is transient and never observed):
//! `idle0` idle, empty transcript; `idle` idle after a run; `call_model` Running, the model
//! call decided but not yet polled; `model_out` Running, the model call of a step is out;
//! `tools_ready` Running, a batch not yet polled (not dispatched); `tools_out` Running, a batch
//! executing; `perm` Awaiting a permission ticket before its deadline; `perm_late` the same at
//! a time past the deadline; `pause` Awaiting a `Pause(Manual)` ticket.
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
//! | input           | idle0      | idle       | call_model | model_out  | tools_ready | tools_out      | perm       | perm_late          | pause      |
//! |-----------------|------------|------------|------------|------------|-------------|----------------|------------|--------------------|------------|
//! | `prompt`        | new run → `model_out` | new run → `model_out` | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` |
//! | `steer`         | `NA`       | `NA`       | queued     | queued     | queued      | queued         | queued     | queued             | queued     |
//! | `follow_up`     | `NA`       | `NA`       | queued     | queued     | queued      | queued         | queued     | queued             | queued     |
//! | `abort`         | -          | -          | finish(Cancelled) | req | finish(Cancelled) | req     | finish(Cancelled) | finish(Cancelled) | finish(Cancelled) |
//! | `pause`         | `IS`       | `IS`       | req        | req        | req         | req            | `IS`       | `IS`               | `IS`       |
//! | `model_delta`   | `UO`       | `UO`       | `UO`       | `text_delta` | `UO`      | `UO`           | `UO`       | `UO`               | `UO`       |
//! | `model_done`    | `UO`       | `UO`       | `UO`       | by answer (below) | `UO` | `UO`           | `UO`       | `UO`               | `UO`       |
//! | `model_failed`  | `UO`       | `UO`       | `UO`       | finish(Error) | `UO`     | `UO`           | `UO`       | `UO`               | `UO`       |
//! | `tool_progress` | `UO`       | `UO`       | `UO`       | `UO`       | `UO`        | `tool_progress` | `UO`      | `UO`               | `UO`       |
//! | `tool_done`     | `UO`       | `UO`       | `UO`       | `UO`       | `UO`        | `tool_end`; last → after_batch | `UO` | `UO`       | `UO`       |
//! | `resume`        | `resume(not_waiting)` | `resume(not_waiting)` | `resume(not_waiting)` | `resume(not_waiting)` | `resume(not_waiting)` | `resume(not_waiting)` | commit Running, `resumed`; next ticket or dispatch | `resume(expired)` | commit Running, `resumed`, input appended → `model_out` |
//! | `resume_ticket` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` | as `resume` |
//! | `cancel_wait`   | `IS`       | `IS`       | `IS`       | `IS`       | `IS`        | `IS`           | finish(Cancelled) | finish(Cancelled) | finish(Cancelled) |
//! | `stop`          | `IS`       | `IS`       | finish(Stopped) | req   | finish(Stopped) | req        | finish(Stopped) | finish(Stopped) | finish(Stopped) |
//! | `expire_wait`   | `IS`       | `IS`       | `IS`       | `IS`       | `IS`        | `IS`           | `not_expired` | finish(Stopped("wait_expired")) | `not_expired` |
//! | `abandon_tools` | `IS`       | `IS`       | `IS`       | `IS`       | `IS`        | open calls `interrupted`; finish(Indeterminate) | `IS` | `IS` | `IS` |
//! | `continue`      | `IS` (empty transcript) | `IS` (ends in the answer) | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` | `busy` |
//! | `timeout`       | -          | -          | -          | -          | -           | -              | -          | as `expire_wait`   | -          |
//! | `config`        | replaced   | `IS`       | `IS`       | `IS`       | `IS`        | `IS`           | `IS`       | `IS`               | `IS`       |
//!
//! `tests/phase_matrix.rs` checks this table: it drives every input into a fresh agent in each
//! of these phases, asserts a rejected input leaves the snapshot byte-identical, and snapshots
//! the outcomes (error kind, or drained output kinds and the next phase) in
//! `snapshots/phase_matrix__phase_matrix.snap`.
//!
//! # The steps behind the cells (SPEC §8.2)
//!
//! | phase            | input                      | outputs → next phase                                  |
//! |------------------|----------------------------|-------------------------------------------------------|
//! | (idle)           | `prompt` / `continue`      | commit Running{user msg; none on `continue`}, `run_start` → `CallModel` |
//! | `CallModel`      | `poll`                     | action `CallModel` (steps += 1) → `ModelOutstanding`  |
//! | `CallModel`      | `abort` / `stop`           | finish(Cancelled / Stopped)                           |
//! | `ModelOutstanding` | `model_failed`           | error message; finish(Cancelled, Stopped or Error)    |
//! | `ModelOutstanding` | `model_done` error/aborted | calls `skipped`; finish                             |
//! | `ModelOutstanding` | `model_done` text        | boundary(TextStop)                                    |
//! | `ModelOutstanding` | `model_done` length+calls | `truncated` results; after_batch                     |
//! | `ModelOutstanding` | `model_done` calls       | commit Running{a}; abort? finish : gate or dispatch   |
//! | `Tools` (not dispatched) | `poll`             | action `ExecuteTools` → `Tools` (dispatched)          |
//! | `Tools` (not dispatched) | `abort` / `stop`   | calls `skipped`; finish                               |
//! | `Tools` (dispatched) | `tool_done`            | `tool_end`; all answered? after_batch                 |
//! | `Tools` (dispatched) | `abandon_tools`        | open calls `interrupted`; finish(Indeterminate)       |
//! | `Waiting`        | `resume` (accepted)        | commit Running (ticket deleted); next ticket, dispatch or boundary |
//! | `Waiting`        | `abort` / `cancel_wait` / `stop` | open calls `skipped`; finish                    |
//! | `Waiting`        | `expire_wait` / `timeout` (past deadline) | waiting call `expired`, others `skipped`; finish(Stopped("wait_expired")) |
//!
//! `after_batch` appends every result of the batch in call order and takes the boundary;
//! `boundary` applies the queue rules of [`queues`](super::queues); `finish` closes input,
//! returns the queues as `unconsumed`, pairs every open call, commits `Ended` with every message
//! not yet committed, clears the active run, then emits `input_closed` and `run_end`.

use serde::{Deserialize, Serialize};

use crate::commit::{AuditDraft, ThreadCommit};
use crate::error::AgentError;
use crate::ids::{CallId, RunId, Step};
use crate::message::{
    AssistantMessage, Message, ResultOutcome, StopReason, ToolCall, ToolResultMessage,
};
use crate::resume::{AwaitTarget, PendingTool, ResumeTicket, ToolWaitReason, WaitIdentity};
use crate::run::{EndCause, Failure, RunDisposition};

use super::Agent;
use super::config::ToolPolicy;
use super::events::{AgentCommit, AgentEvent, LoopEvent, MessageOrigin, RunResult};
use super::queues::{
    BoundaryDecision, BoundaryInput, BoundaryKind, Queues, decide_boundary, take_queued,
};

/// The active run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ActiveRun {
    pub(crate) run_id: RunId,
    /// Model calls handed out so far.
    pub(crate) steps: Step,
    pub(crate) phase: Phase,
    /// The end an `abort` or `stop` asked for; honoured at the next safe point.
    pub(crate) end_request: Option<EndRequest>,
    pub(crate) pause_requested: bool,
    pub(crate) queues: Queues,
    /// Waits opened so far (for correlation ids `"{run_id}:wait-{n}"`).
    pub(crate) waits: u32,
    /// Where the run's messages begin in the transcript.
    pub(crate) transcript_start: usize,
    /// What the run's latest commit recorded (for `state_changed`).
    pub(crate) committed_as: CommittedAs,
    /// Commits of this run emitted so far: the next commit's `ordinal` (SPEC §7.1).
    #[serde(default)]
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

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    /// A model call is decided; it is handed out by the next `poll` that finds nothing queued.
    CallModel,
    /// The model call of `step` is with the host.
    ModelOutstanding { step: Step },
    /// A tool batch, every approval decided.
    Tools(Batch),
    /// Waiting on a committed ticket.
    Waiting(Box<Wait>),
    /// Transient: between a batch and its boundary (never observed between inputs).
    Between,
}

impl Phase {
    pub(crate) fn describe(&self) -> String {
        match self {
            Phase::CallModel => "a model call is about to be handed out".into(),
            Phase::ModelOutstanding { step } => format!("the model call of step {step} is out"),
            Phase::Tools(batch) if batch.dispatched => {
                format!("the tools of step {} are executing", batch.step)
            }
            Phase::Tools(batch) => format!("the tools of step {} are about to execute", batch.step),
            Phase::Waiting(wait) => {
                format!("the run is awaiting ticket {}", wait.ticket.correlation_id)
            }
            Phase::Between => "the run is at a boundary".into(),
        }
    }
}

/// The tool calls of one assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Batch {
    pub(crate) step: Step,
    pub(crate) calls: Vec<BatchCall>,
    /// Whether `ExecuteTools` was handed out.
    pub(crate) dispatched: bool,
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

/// A committed wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Wait {
    pub(crate) ticket: ResumeTicket,
    /// The batch an approval wait belongs to (none for a pause).
    pub(crate) batch: Option<Batch>,
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
        Batch {
            step,
            calls,
            dispatched: false,
        }
    }

    pub(crate) fn find(&self, call_id: &CallId) -> Option<&BatchCall> {
        self.calls.iter().find(|c| c.call.id == *call_id)
    }

    pub(crate) fn find_mut(&mut self, call_id: &CallId) -> Option<&mut BatchCall> {
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

/// The outputs of one input, emitted commits first, then events.
#[derive(Debug, Default)]
pub(crate) struct Tx {
    pub(crate) commits: Vec<AgentCommit>,
    pub(crate) events: Vec<AgentEvent>,
}

impl Tx {
    pub(crate) fn event(&mut self, run_id: &RunId, event: LoopEvent) {
        self.events.push(AgentEvent::Loop {
            run_id: run_id.clone(),
            event,
        });
    }
}

impl Agent {
    /// Appends a message to the transcript and announces it.
    pub(crate) fn append(
        &mut self,
        tx: &mut Tx,
        run_id: &RunId,
        origin: MessageOrigin,
        message: Message,
    ) {
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
        run: &mut ActiveRun,
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
        tx.commits.push(AgentCommit {
            commit,
            ordinal: run.commits,
            expected_thread_version: self.thread_version,
        });
        run.commits = run.commits.saturating_add(1);
        self.thread_version = self.thread_version.saturating_add(1);
    }

    /// Commits `Running` with every new message. `state_changed` when the run's previous
    /// commit was not Running.
    pub(crate) fn commit_running(
        &mut self,
        run: &mut ActiveRun,
        extra: Vec<AuditDraft>,
        tx: &mut Tx,
    ) {
        let state_changed = run.committed_as != CommittedAs::Running;
        run.committed_as = CommittedAs::Running;
        let disposition = RunDisposition::Running {
            run_id: run.run_id.clone(),
        };
        self.push_commit(tx, run, disposition, state_changed, extra);
    }

    /// Opens a wait: mints the ticket, commits `Awaiting` and announces it.
    fn open_wait(
        &mut self,
        mut run: ActiveRun,
        target: AwaitTarget,
        deadline_after_ms: Option<u64>,
        batch: Option<Batch>,
        tx: &mut Tx,
    ) {
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
        run.committed_as = CommittedAs::Awaiting;
        self.push_commit(
            tx,
            &mut run,
            RunDisposition::Awaiting(Box::new(ticket.clone())),
            true,
            Vec::new(),
        );
        tx.event(
            &run.run_id,
            LoopEvent::Awaiting {
                ticket: ticket.clone(),
            },
        );
        run.phase = Phase::Waiting(Box::new(Wait { ticket, batch }));
        self.active = Some(run);
    }

    /// `model_done` for the outstanding step (already checked).
    pub(crate) fn model_answered(
        &mut self,
        mut run: ActiveRun,
        step: Step,
        message: AssistantMessage,
        tx: &mut Tx,
    ) {
        let calls: Vec<ToolCall> = message.tool_calls().collect();
        let stop_reason = message.stop_reason;
        let error_message = message.error_message.clone();
        self.messages.push(Message::Assistant(message.clone()));
        tx.event(&run.run_id, LoopEvent::AssistantMessage { step, message });
        run.phase = Phase::Between;
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
                run.phase = Phase::Tools(Batch::gated(step, calls, |_| ToolPolicy::Auto));
                self.finish(run, cause, Pairing::Skip, tx);
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
                self.after_batch(run, batch, tx);
            }
            StopReason::Stop | StopReason::ToolUse => {
                // The calls are durable before any effect.
                self.commit_running(&mut run, Vec::new(), tx);
                let batch = Batch::gated(step, calls, |name| self.config.policy(name));
                if let Some(request) = &run.end_request {
                    let cause = request.cause();
                    run.phase = Phase::Tools(batch);
                    self.finish(run, cause, Pairing::Skip, tx);
                } else {
                    self.advance_batch(run, batch, tx);
                }
            }
        }
    }

    /// Asks the next approval, or dispatches the ready calls, or (nothing to run) closes the
    /// batch.
    pub(crate) fn advance_batch(&mut self, mut run: ActiveRun, batch: Batch, tx: &mut Tx) {
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
            self.open_wait(run, target, deadline_after_ms, Some(batch), tx);
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
            run.phase = Phase::Tools(batch);
            self.active = Some(run);
        } else {
            self.after_batch(run, batch, tx);
        }
    }

    /// One `tool_done` (already checked): records the result; closes the batch when every
    /// executing call is answered.
    pub(crate) fn on_tool_result(
        &mut self,
        mut run: ActiveRun,
        result: ToolResultMessage,
        tx: &mut Tx,
    ) {
        let Phase::Tools(mut batch) = std::mem::replace(&mut run.phase, Phase::Between) else {
            debug_assert!(false, "on_tool_result outside a tool batch");
            self.active = Some(run);
            return;
        };
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
            self.after_batch(run, batch, tx);
        } else {
            run.phase = Phase::Tools(batch);
            self.active = Some(run);
        }
    }

    /// Appends every result of the batch in call order, then takes the boundary.
    pub(crate) fn after_batch(&mut self, mut run: ActiveRun, batch: Batch, tx: &mut Tx) {
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
                Message::ToolResult(result),
            );
        }
        run.phase = Phase::Between;
        self.boundary(run, BoundaryKind::AfterToolBatch, tx);
    }

    /// A complete protocol boundary: the queue rules decide (see `queues`).
    pub(crate) fn boundary(&mut self, mut run: ActiveRun, kind: BoundaryKind, tx: &mut Tx) {
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
            BoundaryDecision::Finish(cause) => self.finish(run, cause, Pairing::Skip, tx),
            BoundaryDecision::Pause => {
                run.pause_requested = false;
                self.open_wait(
                    run,
                    AwaitTarget::Pause(crate::resume::PauseReason::Manual),
                    None,
                    None,
                    tx,
                );
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
                run.phase = Phase::CallModel;
                self.active = Some(run);
            }
        }
    }

    /// Ends the run: close input, return the queues, pair every open call, commit `Ended`
    /// with everything not yet committed, clear the active run, then `input_closed` and
    /// `run_end`.
    pub(crate) fn finish(
        &mut self,
        mut run: ActiveRun,
        cause: EndCause,
        pairing: Pairing,
        tx: &mut Tx,
    ) {
        let unconsumed = run.queues.drain_unconsumed();
        let (batch, waiting_call) = match std::mem::replace(&mut run.phase, Phase::Between) {
            Phase::Tools(batch) => (Some(batch), None),
            Phase::Waiting(wait) => (wait.batch, wait.ticket.target().call_id().cloned()),
            Phase::CallModel | Phase::ModelOutstanding { .. } | Phase::Between => (None, None),
        };
        if let Some(batch) = batch {
            let mut results = Vec::with_capacity(batch.calls.len());
            for entry in batch.calls {
                let synthetic = match (&entry.slot, pairing) {
                    (Slot::Done(_), _) => None,
                    (Slot::Executing, Pairing::Interrupt) => {
                        Some(ToolResultMessage::interrupted(&entry.call))
                    }
                    (Slot::Undecided, Pairing::Expire)
                        if waiting_call.as_ref() == Some(&entry.call.id) =>
                    {
                        Some(ToolResultMessage::expired(&entry.call))
                    }
                    _ => Some(ToolResultMessage::skipped(&entry.call)),
                };
                let result = match (synthetic, entry.slot) {
                    (Some(result), _) => {
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
                    (None, Slot::Done(result)) => result,
                    (None, _) => ToolResultMessage::skipped(&entry.call),
                };
                results.push(result);
            }
            for result in results {
                self.append(
                    tx,
                    &run.run_id,
                    MessageOrigin::ToolResult,
                    Message::ToolResult(result),
                );
            }
        }
        let disposition = RunDisposition::Ended {
            run_id: run.run_id.clone(),
            cause: cause.clone(),
        };
        self.push_commit(tx, &mut run, disposition, true, Vec::new());
        self.last_end = Some((run.run_id.clone(), cause.clone()));
        self.active = None;
        tx.event(&run.run_id, LoopEvent::InputClosed);
        tx.events.push(AgentEvent::RunEnd {
            run_id: run.run_id,
            result: RunResult {
                cause,
                steps: run.steps,
                unconsumed,
            },
        });
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
