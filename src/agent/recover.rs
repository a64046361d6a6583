//! Recovery from committed facts only (SPEC §8.7).
//!
//! [`Agent::recover`] reads the thread's committed messages, its head run record, that run's
//! ticket and the thread's audit events (paged), and rebuilds an agent that behaves exactly as
//! the one that stopped would have:
//!
//! | latest run                      | recovered agent                                          |
//! |---------------------------------|----------------------------------------------------------|
//! | none, or `Ended`                | idle, transcript restored                                 |
//! | `Awaiting`                      | the same ticket; `resume` works as if nothing stopped     |
//! | `Running`, no open tool calls   | the next `CallModel` of the same run, step count restored |
//! | `Running`, unanswered tool calls| committed decisions honoured (denied calls keep `denied`; a gated call with no decision is asked again); then `Replay` (`ExecuteTools` for exactly the unanswered executable calls) or `Seal` (`interrupted` results, `Ended(Indeterminate)`) |
//!
//! The model context comes back with it: the thread's latest `compacted` draft (SPEC §8.9)
//! says where it starts and what summary stands before it.
//!
//! # Recorded facts, not inferences
//!
//! Where a waiting run stands is read from what its Awaiting commit recorded: the agent writes
//! `run_awaiting {boundary?, run_id, step}` with every wait it opens — `step`, the run's step
//! count when the wait opened, and for a pause (or a remote-input wait) `boundary`, the loop
//! boundary it interrupted (`text_stop` / `after_tool_batch`), which answering the wait
//! without input takes again. Recovery takes both from the head run's latest `run_awaiting`
//! draft. A draft without them — `run_awaiting {run_id}`, as
//! [`ThreadCommit::assemble`](crate::ThreadCommit::assemble) synthesizes it for a host-built
//! commit, and as stores written before the fields existed hold it — falls back to what the
//! messages imply: a wait whose Awaiting commit ended with a tool result interrupted
//! `after_tool_batch`, anything else `text_stop`.
//!
//! The step count of a run that has not ended is the count of its committed assistant
//! messages, and that too is a recorded fact, not a guess: each model call the agent hands out
//! either is answered — and the answer is committed as exactly one assistant message before
//! anything else of the run is (the next commit, at the latest the Awaiting or Ended one) — or
//! is still out when the process stops, and then the recovered run issues it again as the same
//! step. A compaction takes back the step it interrupts (SPEC §8.9), so it adds none. So a
//! recorded `step` must equal that count while its wait is open (the run is Awaiting), and can
//! never exceed it: facts that say otherwise were not written by a runcore agent, and recovery
//! refuses them ([`RecoverError::Invalid`], naming both numbers) rather than rebuild a run
//! from them. So does a committed tool-call ticket whose run has no open tool calls.
//!
//! What committed facts cannot hold is not recovered: input queued but never committed
//! (steering, follow-ups) and the host's clock. The clock resumes from the latest time the
//! run's facts recorded (run start, permission decisions); the host's clock comes back with its
//! next input, like every input's (for a wait past its deadline: [`Agent::handle_timeout`]).
//! Replayed tools must be idempotent by `"{run_id}:{call_id}"`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::commit::{AuditDraft, WaitBoundary};
use crate::error::AgentError;
use crate::ids::{RunId, ThreadId};
use crate::message::{Message, ToolCall, ToolResultMessage};
use crate::resume::{AwaitTarget, PermissionDecision};
use crate::run::RunState;
use crate::store::{CheckpointReader, EventScope, StoreError};

use super::Agent;
use super::config::AgentConfig;
use super::queues::BoundaryKind;
use super::run_loop::{Batch, Run, Slot};

/// What the committed facts say about a run that has not ended, typed; the run loop puts the
/// run in the phase this names ([`Agent::rebuild`]).
pub(crate) enum RecoveredRun {
    /// Running, nothing open: the next model call.
    AtCall,
    /// Running, its last message a text answer (committed as Running by a host that stopped
    /// before the boundary): the boundary comes next.
    AfterAnswer,
    /// Running with unanswered tool calls: their batch, committed decisions applied.
    OpenCalls(Batch),
    /// Awaiting the committed ticket of a tool call: the batch holding it, committed
    /// decisions applied.
    AwaitingCall {
        ticket: Box<crate::resume::ResumeTicket>,
        batch: Batch,
    },
    /// Awaiting a pause or remote-input ticket, taken at the boundary `interrupted`.
    AwaitingAt {
        ticket: Box<crate::resume::ResumeTicket>,
        interrupted: BoundaryKind,
    },
}

/// What to do with tool calls that were handed out but whose results were never committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RecoveryPolicy {
    /// Execute exactly the unanswered executable calls again (tools must be idempotent by
    /// `"{run_id}:{call_id}"`).
    Replay,
    /// Pair them `interrupted` and end the run `Indeterminate`.
    Seal,
}

crate::error::named_enum!(RecoveryPolicy, "policy", { Replay => "replay", Seal => "seal" });

/// Why [`Agent::recover`] could not rebuild an agent.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum RecoverError {
    /// A read of the committed facts failed in the backend.
    #[error("recover: {0}")]
    Store(#[from] StoreError),
    /// The configuration does not fit the thread, or the committed facts were not written by
    /// a runcore agent.
    #[error(transparent)]
    Invalid(#[from] AgentError),
}

/// Events read while paging through the thread's audit log.
const PAGE: usize = 1024;

/// What the thread's events say about its runs.
#[derive(Default)]
struct History {
    /// Every run id with a commit on the thread (each commit carries at least its
    /// `run_state_changed` draft), whether an agent started it with `run_started` or an
    /// import or fork committed it whole.
    run_ids: std::collections::BTreeSet<RunId>,
    /// `run_started` of the head run: (transcript_start, now_ms).
    head_start: Option<(usize, u64)>,
    head_waits: u32,
    /// What the head run's latest `run_awaiting` draft recorded: (step, boundary), each absent
    /// when the draft was written without it.
    head_wait: Option<(Option<u32>, Option<WaitBoundary>)>,
    /// Permission decisions of the head run: (step, call id, decision).
    head_decisions: Vec<(u32, crate::ids::CallId, PermissionDecision)>,
    head_clock: u64,
    /// The thread's latest compaction (of any run): (keep_from, summary).
    compaction: Option<(usize, std::sync::Arc<crate::message::UserMessage>)>,
}

impl History {
    fn observe(&mut self, now_ms: Option<u64>) {
        if let Some(now) = now_ms {
            self.head_clock = self.head_clock.max(now);
        }
    }
}

fn read_history(
    reader: &impl CheckpointReader,
    thread: &ThreadId,
    head: Option<&RunId>,
) -> Result<History, StoreError> {
    let mut history = History::default();
    let scope = EventScope::Thread(thread.clone());
    let mut from = None;
    loop {
        let page = reader.list_events(&scope, from, PAGE)?;
        let Some(last) = page.last() else { break };
        from = Some(last.sequence);
        for event in page.iter() {
            let draft = AuditDraft::from_stored(&event.kind, event.payload.clone());
            history.run_ids.insert(event.run_id.clone());
            if let AuditDraft::Compacted {
                keep_from, summary, ..
            } = &draft
            {
                history.compaction = Some((*keep_from, summary.clone()));
            }
            if Some(&event.run_id) != head {
                continue;
            }
            match draft {
                AuditDraft::RunStarted {
                    transcript_start,
                    now_ms,
                    ..
                } => {
                    history.head_start = Some((transcript_start, now_ms.unwrap_or(0)));
                    history.observe(now_ms);
                }
                AuditDraft::RunAwaiting { step, boundary, .. } => {
                    history.head_waits = history.head_waits.saturating_add(1);
                    history.head_wait = Some((step, boundary));
                }
                AuditDraft::PermissionDecided {
                    step,
                    call_id,
                    decision,
                    now_ms,
                } => {
                    history.head_decisions.push((step, call_id, decision));
                    history.observe(now_ms);
                }
                AuditDraft::Compacted { now_ms, .. } => history.observe(now_ms),
                AuditDraft::Custom { payload, .. } => {
                    history.observe(payload.get("now_ms").and_then(Value::as_u64));
                }
                _ => {}
            }
        }
        if page.len() < PAGE {
            break;
        }
    }
    Ok(history)
}

impl Agent {
    /// Rebuilds the agent of `thread_id` from committed facts (see the module docs). Any
    /// outputs recovery decides (a re-asked ticket, replayed tools, a sealed end) are waiting
    /// in [`poll`](Agent::poll).
    pub fn recover(
        config: AgentConfig,
        reader: &impl CheckpointReader,
        thread_id: &ThreadId,
        policy: RecoveryPolicy,
    ) -> Result<Agent, RecoverError> {
        if config.thread_id != *thread_id {
            return Err(RecoverError::Invalid(AgentError::invalid(format!(
                "recover: the configuration is for thread {:?}, not {:?}",
                config.thread_id.as_str(),
                thread_id.as_str()
            ))));
        }
        let mut agent = Agent::new(config)?;
        agent.thread.messages = reader.committed_messages(thread_id)?;
        agent.thread.committed = agent.thread.messages.len();
        // The fence (SPEC §7.1): the recovered agent's first commit builds on the version the
        // store holds now; a second writer recovered from the same version is fenced.
        agent.thread.thread_version = reader.thread_version(thread_id)?;
        let head = reader.latest_run(thread_id)?;
        let history = read_history(reader, thread_id, head.as_ref().map(|r| &r.id))?;
        // Minting restarts from 1 and skips every used id, so the next minted id is the first
        // `"{thread}/run-{n}"` not used: the one the agent that stopped would have minted.
        agent.thread.used_run_ids = history.run_ids;
        agent.thread.clock_ms = history.head_clock;
        // The model context (SPEC §8.9) from the thread's latest committed compaction.
        if let Some((keep_from, summary)) = history.compaction {
            if keep_from > agent.thread.messages.len() {
                return Err(RecoverError::Invalid(AgentError::invalid(format!(
                    "recover: the thread's latest compaction keeps from message {keep_from}, \
                     past the transcript ({} messages)",
                    agent.thread.messages.len()
                ))));
            }
            agent.set_compaction(Some(super::Compaction::new(keep_from, summary)));
        }
        let Some(head) = head else {
            return Ok(agent);
        };
        let run_id = head.id.clone();
        // The head run counts as used even if its start was not recorded as `run_started`.
        agent.thread.used_run_ids.insert(run_id.clone());
        if let RunState::Ended(cause) = head.state {
            agent.thread.last_end = Some((run_id, cause));
            return Ok(agent);
        }
        let (transcript_start, _) = history.head_start.ok_or_else(|| {
            AgentError::invalid(format!(
                "recover: run {run_id} has no run_started event; it was not written by a runcore agent"
            ))
        })?;
        let run_messages = agent.thread.messages.get(transcript_start..).ok_or_else(|| {
            AgentError::invalid(format!(
                "recover: run {run_id} starts at message {transcript_start}, past the transcript"
            ))
        })?;
        let steps = run_messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant(_)))
            .count();
        let steps = u32::try_from(steps)
            .ok()
            .filter(|s| *s <= agent.thread.config.max_steps)
            .ok_or_else(|| {
                AgentError::invalid(format!(
                    "recover: run {run_id} made {steps} model calls, over max_steps {}",
                    agent.thread.config.max_steps
                ))
            })?;
        // The calls of the run's last assistant message are open when nothing but resume
        // context (system messages, committed with an accepted resume in the middle of a
        // batch) follows it.
        let open_calls: Vec<ToolCall> = match run_messages
            .iter()
            .rev()
            .find(|m| !matches!(m, Message::System(_)))
        {
            Some(Message::Assistant(a)) => a.tool_calls().collect(),
            _ => Vec::new(),
        };
        let decisions: Vec<(crate::ids::CallId, PermissionDecision)> = history
            .head_decisions
            .iter()
            .filter(|(step, _, _)| *step == steps)
            .map(|(_, call, decision)| (call.clone(), decision.clone()))
            .collect();
        // Ordinals continue from the run's stored commit count.
        let awaiting = head.state == RunState::Awaiting;
        let run = Run::recovered(
            run_id.clone(),
            steps,
            history.head_waits,
            transcript_start,
            awaiting,
            head.commits,
        );
        let batch = || {
            let mut batch = Batch::answered(steps, open_calls.clone(), |name| {
                agent.thread.config.policy(name)
            });
            for entry in &mut batch.calls {
                match decisions
                    .iter()
                    .rev()
                    .find(|(call, _)| *call == entry.call.id)
                {
                    Some((_, PermissionDecision::Allow { .. })) => entry.slot = Slot::Ready,
                    Some((_, PermissionDecision::Deny { reason })) => {
                        entry.slot =
                            Slot::Done(ToolResultMessage::denied(&entry.call, reason.as_deref()));
                    }
                    None => {}
                }
            }
            batch
        };
        // The step the head run's latest wait recorded: the run cannot have had more model
        // calls answered then than it has committed answers now, and when that wait is the
        // open one (the run is Awaiting) the two counts are the same.
        let (recorded_step, recorded_boundary) = history.head_wait.unwrap_or_default();
        if let Some(recorded) = recorded_step {
            let awaiting = head.state == RunState::Awaiting;
            if recorded > steps || (awaiting && recorded != steps) {
                return Err(RecoverError::Invalid(AgentError::invalid(format!(
                    "recover: run {run_id} recorded its wait at step {recorded}, but {steps} \
                     assistant messages of it are committed"
                ))));
            }
        }
        let facts = if head.state == RunState::Awaiting {
            let ticket = reader.resume_ticket(&run_id)?.ok_or_else(|| {
                AgentError::invalid(format!(
                    "recover: run {run_id} is Awaiting but the store has no ticket for it"
                ))
            })?;
            match ticket.target() {
                AwaitTarget::ToolCall { call_id, .. } => {
                    if open_calls.is_empty() {
                        return Err(RecoverError::Invalid(AgentError::invalid(format!(
                            "recover: run {run_id} waits on call {call_id}, but no tool calls \
                             are open"
                        ))));
                    }
                    RecoveredRun::AwaitingCall {
                        ticket: Box::new(ticket),
                        batch: batch(),
                    }
                }
                AwaitTarget::Pause(_) | AwaitTarget::RemoteInput { .. } => {
                    // The boundary the wait interrupted, as its Awaiting commit recorded it. A
                    // draft without it (a store written before it was recorded, or by another
                    // writer) falls back to the message the Awaiting commit ended with: a tool
                    // result closes a batch, anything else is a text answer.
                    let interrupted = match recorded_boundary {
                        Some(boundary) => BoundaryKind::from(boundary),
                        None => match run_messages.last() {
                            Some(Message::ToolResult(_)) => BoundaryKind::AfterToolBatch,
                            _ => BoundaryKind::TextStop,
                        },
                    };
                    RecoveredRun::AwaitingAt {
                        ticket: Box::new(ticket),
                        interrupted,
                    }
                }
            }
        } else if !open_calls.is_empty() {
            RecoveredRun::OpenCalls(batch())
        } else if matches!(run_messages.last(), Some(Message::Assistant(_))) {
            RecoveredRun::AfterAnswer
        } else {
            RecoveredRun::AtCall
        };
        agent.rebuild(run, facts, policy)?;
        Ok(agent)
    }
}
