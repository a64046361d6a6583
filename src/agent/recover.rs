//! Recovery from committed facts only (SPEC §8.7).
//!
//! Recovery is read → decide → build. [`Agent::recover`] reads the thread's committed facts
//! once ([`ThreadFacts::read`]: its messages, head run record, that run's ticket and its audit
//! events, paged); [`decide_recovery`], a pure function of those facts, the configuration and
//! the policy, decides what the recovered agent is ([`RecoveryDecision`]); and the agent is
//! built from that decision ([`Agent::from_facts`]). The decision rebuilds an agent that
//! behaves exactly as the one that stopped would have:
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

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::commit::{AuditDraft, WaitBoundary};
use crate::error::AgentError;
use crate::facts::ThreadFacts;
use crate::ids::{CallId, RunId, ThreadId};
use crate::message::{Message, ToolCall, ToolResultMessage, UserMessage};
use crate::resume::{AwaitTarget, PermissionDecision, ResumeTicket};
use crate::run::{EndCause, RunState};
use crate::store::{CheckpointReader, StoreError};

use super::Agent;
use super::config::AgentConfig;
use super::queues::BoundaryKind;
use super::run_loop::{Batch, BatchCall, Run, Slot};

/// What the committed facts say about a run that has not ended, typed; the run loop puts the
/// run in the phase this names ([`Agent::rebuild`]).
pub(crate) enum RecoveredRun {
    /// Running, nothing open: the next model call.
    AtCall,
    /// Running, its last message a text answer (committed as Running by a host that stopped
    /// before the boundary): the boundary comes next.
    AfterAnswer,
    /// Running with unanswered tool calls: their batch, committed decisions applied, and
    /// whether the policy seals them (`interrupted`, `Ended(Indeterminate)`).
    OpenCalls { batch: Batch, seal: bool },
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

crate::named::named_enum!(RecoveryPolicy, "policy", { Replay => "replay", Seal => "seal" });

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

/// What recovery decided from a thread's committed facts (SPEC §8.7): everything the
/// recovered agent is made of that is not the facts themselves ([`decide_recovery`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryDecision {
    /// Every run id with a commit on the thread: minting skips them, so the next minted id is
    /// the first `"{thread}/run-{n}"` not used (the one the agent that stopped would have
    /// minted), whatever committed the earlier runs (an agent, an import, a fork).
    pub used_run_ids: BTreeSet<RunId>,
    /// The agent's clock: the latest time the head run's facts recorded (run start,
    /// permission decisions, compactions, a host's `now_ms`); 0 without a head run.
    pub clock_ms: u64,
    /// The model context (SPEC §8.9), from the thread's latest compaction: (keep_from,
    /// summary).
    pub compaction: Option<(usize, Arc<UserMessage>)>,
    /// What the head run is, and what it does next.
    pub head: HeadDecision,
}

/// The head run, recovered: a row of the SPEC §8.7 table.
#[derive(Debug, Clone, PartialEq)]
pub enum HeadDecision {
    /// No run: idle, transcript restored.
    Idle,
    /// The latest run ended: idle, transcript restored, the run's end remembered.
    Ended {
        /// The run.
        run_id: RunId,
        /// How it ended.
        cause: EndCause,
    },
    /// The latest run has not ended: it goes on.
    Resume(Box<ResumedRun>),
}

/// A run that has not ended, as recovery puts it back.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumedRun {
    /// The run.
    pub run_id: RunId,
    /// Its model calls answered so far: its committed assistant messages.
    pub steps: u32,
    /// How many waits it opened (its `run_awaiting` drafts).
    pub waits: u32,
    /// Where its messages start in the transcript.
    pub transcript_start: usize,
    /// Its stored commit count: the ordinal of its next commit (SPEC §7.1).
    pub commits: u64,
    /// What it does next.
    pub next: NextStep,
}

/// What a resumed run does next.
#[derive(Debug, Clone, PartialEq)]
pub enum NextStep {
    /// Running, no open tool calls: the next `CallModel` of the same run.
    CallModel,
    /// Running, its last message a text answer committed before the boundary: the boundary.
    Boundary,
    /// Awaiting a pause or remote-input ticket taken at the boundary `interrupted`: the same
    /// ticket.
    AwaitAt {
        /// The committed ticket.
        ticket: Box<ResumeTicket>,
        /// The boundary the wait interrupted (recorded, or implied by the messages).
        interrupted: WaitBoundary,
    },
    /// Awaiting the ticket of one of the open calls: the same ticket (that call is asked
    /// again), the other calls as their committed decisions leave them.
    AwaitCall {
        /// The committed ticket.
        ticket: Box<ResumeTicket>,
        /// The open calls, in call order.
        calls: Vec<CallDecision>,
    },
    /// Running with unanswered tool calls.
    OpenCalls {
        /// The open calls, in call order, committed decisions honoured.
        calls: Vec<CallDecision>,
        /// Whether they are sealed (policy `Seal`, nothing left to ask, something to
        /// execute): the calls to execute are paired `interrupted` and the run ends
        /// `Indeterminate`. Otherwise they go on (`Replay`: executed again; gated calls
        /// without a decision asked again).
        seal: bool,
    },
}

/// One open tool call and what recovery does with it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallDecision {
    /// The call, as its assistant message made it.
    pub call: ToolCall,
    /// What happens to it.
    pub action: CallAction,
}

/// What recovery does with one open tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallAction {
    /// Executed (again): an auto call, or a gated call with a committed `allow`.
    Execute,
    /// Asked again: a gated call without a committed decision.
    Ask,
    /// Its committed `deny`: the `denied` result.
    Denied {
        /// The reason the decision gave.
        reason: Option<String>,
    },
    /// Its arguments are not a JSON object: the `malformed` result, never executed.
    Malformed,
}

/// What the head run's drafts say, read in one pass over its commits.
#[derive(Default)]
struct HeadDrafts {
    /// Its latest `run_started`: transcript_start.
    start: Option<usize>,
    waits: u32,
    /// Its latest `run_awaiting`: (step, boundary), each absent when not recorded.
    wait: Option<(Option<u32>, Option<WaitBoundary>)>,
    /// Its permission decisions: (step, call id, decision).
    decisions: Vec<(u32, CallId, PermissionDecision)>,
    clock: u64,
}

impl HeadDrafts {
    fn of(facts: &ThreadFacts, run: &RunId) -> Self {
        let mut head = HeadDrafts::default();
        let observe = |now_ms: Option<u64>, clock: &mut u64| {
            if let Some(now) = now_ms {
                *clock = (*clock).max(now);
            }
        };
        let drafts = facts
            .run(run)
            .into_iter()
            .flat_map(|run| run.commits.iter())
            .flat_map(|commit| commit.drafts.iter());
        for draft in drafts {
            match draft {
                AuditDraft::RunStarted {
                    transcript_start,
                    now_ms,
                    ..
                } => {
                    head.start = Some(*transcript_start);
                    observe(*now_ms, &mut head.clock);
                }
                AuditDraft::RunAwaiting { step, boundary, .. } => {
                    head.waits = head.waits.saturating_add(1);
                    head.wait = Some((*step, *boundary));
                }
                AuditDraft::PermissionDecided {
                    step,
                    call_id,
                    decision,
                    now_ms,
                } => {
                    head.decisions
                        .push((*step, call_id.clone(), decision.clone()));
                    observe(*now_ms, &mut head.clock);
                }
                AuditDraft::Compacted { now_ms, .. } => observe(*now_ms, &mut head.clock),
                AuditDraft::Custom { payload, .. } => {
                    observe(
                        payload.get("now_ms").and_then(Value::as_u64),
                        &mut head.clock,
                    );
                }
                _ => {}
            }
        }
        head
    }
}

fn invalid(message: String) -> AgentError {
    AgentError::invalid(message)
}

/// Decides what the agent recovered from `facts` is (SPEC §8.7, the table in the module
/// docs), under `config` (its thread, `max_steps` and tool policies) and `policy`. Pure: no
/// store, no clock. Refuses ([`AgentError`], `invalid_input`) a configuration for another
/// thread or one the agent cannot run with, and facts that were not written by a runcore
/// agent (see the module docs).
pub fn decide_recovery(
    facts: &ThreadFacts,
    config: &AgentConfig,
    policy: RecoveryPolicy,
) -> Result<RecoveryDecision, AgentError> {
    if config.thread_id != facts.thread_id {
        return Err(invalid(format!(
            "recover: the configuration is for thread {:?}, not {:?}",
            config.thread_id.as_str(),
            facts.thread_id.as_str()
        )));
    }
    config.validate()?;
    let mut used_run_ids: BTreeSet<RunId> = facts.runs.iter().map(|r| r.run_id.clone()).collect();
    let compaction = match facts.latest_compaction() {
        Some(latest) if latest.keep_from > facts.messages.len() => {
            return Err(invalid(format!(
                "recover: the thread's latest compaction keeps from message {}, past the \
                 transcript ({} messages)",
                latest.keep_from,
                facts.messages.len()
            )));
        }
        Some(latest) => Some((latest.keep_from, latest.summary.clone())),
        None => None,
    };
    let Some(head) = &facts.head else {
        return Ok(RecoveryDecision {
            used_run_ids,
            clock_ms: 0,
            compaction,
            head: HeadDecision::Idle,
        });
    };
    let run_id = head.id.clone();
    // The head run counts as used even if no event of it is stored.
    used_run_ids.insert(run_id.clone());
    let drafts = HeadDrafts::of(facts, &run_id);
    let decided = |head: HeadDecision| RecoveryDecision {
        used_run_ids: used_run_ids.clone(),
        clock_ms: drafts.clock,
        compaction: compaction.clone(),
        head,
    };
    if let RunState::Ended(cause) = &head.state {
        return Ok(decided(HeadDecision::Ended {
            run_id,
            cause: cause.clone(),
        }));
    }
    let transcript_start = drafts.start.ok_or_else(|| {
        invalid(format!(
            "recover: run {run_id} has no run_started event; it was not written by a runcore agent"
        ))
    })?;
    let run_messages = facts.messages.get(transcript_start..).ok_or_else(|| {
        invalid(format!(
            "recover: run {run_id} starts at message {transcript_start}, past the transcript"
        ))
    })?;
    let steps = run_messages
        .iter()
        .filter(|m| matches!(m, Message::Assistant(_)))
        .count();
    let steps = u32::try_from(steps)
        .ok()
        .filter(|s| *s <= config.max_steps)
        .ok_or_else(|| {
            invalid(format!(
                "recover: run {run_id} made {steps} model calls, over max_steps {}",
                config.max_steps
            ))
        })?;
    // The calls of the run's last assistant message are open when nothing but resume
    // context (system messages, committed with an accepted resume in the middle of a batch)
    // follows it.
    let open_calls: Vec<ToolCall> = match run_messages
        .iter()
        .rev()
        .find(|m| !matches!(m, Message::System(_)))
    {
        Some(Message::Assistant(a)) => a.tool_calls().collect(),
        _ => Vec::new(),
    };
    // Each open call as its policy and the latest committed decision of this step leave it.
    let calls = || -> Vec<CallDecision> {
        open_calls
            .iter()
            .map(|call| {
                let decided = drafts
                    .decisions
                    .iter()
                    .rev()
                    .find(|(step, id, _)| *step == steps && *id == call.id);
                let action = match decided {
                    Some((_, _, PermissionDecision::Allow { .. })) => CallAction::Execute,
                    Some((_, _, PermissionDecision::Deny { reason })) => CallAction::Denied {
                        reason: reason.clone(),
                    },
                    None if !call.arguments.is_object() => CallAction::Malformed,
                    None => match config.policy(&call.name) {
                        super::ToolPolicy::Auto => CallAction::Execute,
                        super::ToolPolicy::RequireApproval { .. } => CallAction::Ask,
                    },
                };
                CallDecision {
                    call: call.clone(),
                    action,
                }
            })
            .collect()
    };
    // The step the head run's latest wait recorded: the run cannot have had more model calls
    // answered then than it has committed answers now, and when that wait is the open one
    // (the run is Awaiting) the two counts are the same.
    let awaiting = head.state == RunState::Awaiting;
    let (recorded_step, recorded_boundary) = drafts.wait.unwrap_or_default();
    if let Some(recorded) = recorded_step
        && (recorded > steps || (awaiting && recorded != steps))
    {
        return Err(invalid(format!(
            "recover: run {run_id} recorded its wait at step {recorded}, but {steps} \
             assistant messages of it are committed"
        )));
    }
    let next = if awaiting {
        let ticket = facts.head_ticket.clone().ok_or_else(|| {
            invalid(format!(
                "recover: run {run_id} is Awaiting but the store has no ticket for it"
            ))
        })?;
        match ticket.target() {
            AwaitTarget::ToolCall { call_id, .. } => {
                if open_calls.is_empty() {
                    return Err(invalid(format!(
                        "recover: run {run_id} waits on call {call_id}, but no tool calls are \
                         open"
                    )));
                }
                let mut calls = calls();
                let Some(waited) = calls.iter_mut().find(|c| c.call.id == *call_id) else {
                    return Err(invalid(format!(
                        "recover: run {run_id} waits on call {call_id}, which its last \
                         assistant message does not make"
                    )));
                };
                waited.action = CallAction::Ask;
                NextStep::AwaitCall {
                    ticket: Box::new(ticket),
                    calls,
                }
            }
            AwaitTarget::Pause(_) | AwaitTarget::RemoteInput { .. } => {
                // The boundary the wait interrupted, as its Awaiting commit recorded it. A
                // draft without it (a store written before it was recorded, or by another
                // writer) falls back to the message the Awaiting commit ended with: a tool
                // result closes a batch, anything else is a text answer.
                let interrupted = match recorded_boundary {
                    Some(boundary) => boundary,
                    None => match run_messages.last() {
                        Some(Message::ToolResult(_)) => WaitBoundary::AfterToolBatch,
                        _ => WaitBoundary::TextStop,
                    },
                };
                NextStep::AwaitAt {
                    ticket: Box::new(ticket),
                    interrupted,
                }
            }
        }
    } else if !open_calls.is_empty() {
        let calls = calls();
        let undecided = calls.iter().any(|c| c.action == CallAction::Ask);
        let executable = calls.iter().any(|c| c.action == CallAction::Execute);
        NextStep::OpenCalls {
            calls,
            seal: policy == RecoveryPolicy::Seal && !undecided && executable,
        }
    } else if matches!(run_messages.last(), Some(Message::Assistant(_))) {
        NextStep::Boundary
    } else {
        NextStep::CallModel
    };
    Ok(decided(HeadDecision::Resume(Box::new(ResumedRun {
        run_id,
        steps,
        waits: drafts.waits,
        transcript_start,
        commits: head.commits,
        next,
    }))))
}

/// The batch of `calls` at `step`, each slot as its decision says.
fn batch_of(step: u32, calls: Vec<CallDecision>, config: &AgentConfig) -> Batch {
    let calls = calls
        .into_iter()
        .map(|CallDecision { call, action }| {
            let slot = match action {
                CallAction::Execute => Slot::Ready,
                CallAction::Ask => Slot::Undecided,
                CallAction::Denied { reason } => {
                    Slot::Done(ToolResultMessage::denied(&call, reason.as_deref()))
                }
                CallAction::Malformed => Slot::Done(ToolResultMessage::malformed_arguments(&call)),
            };
            BatchCall {
                policy: config.policy(&call.name),
                call,
                slot,
            }
        })
        .collect();
    Batch { step, calls }
}

impl Agent {
    /// Rebuilds the agent of `thread_id` from committed facts (see the module docs): reads
    /// them once ([`ThreadFacts::read`]), then [`Agent::from_facts`]. Any outputs recovery
    /// decides (a re-asked ticket, replayed tools, a sealed end) are waiting in
    /// [`poll`](Agent::poll).
    pub fn recover(
        config: AgentConfig,
        reader: &impl CheckpointReader,
        thread_id: &ThreadId,
        policy: RecoveryPolicy,
    ) -> Result<Agent, RecoverError> {
        if config.thread_id != *thread_id {
            return Err(RecoverError::Invalid(invalid(format!(
                "recover: the configuration is for thread {:?}, not {:?}",
                config.thread_id.as_str(),
                thread_id.as_str()
            ))));
        }
        let facts = ThreadFacts::read(reader, thread_id)?;
        Ok(Agent::from_facts(config, facts, policy)?)
    }

    /// The agent recovered from `facts` (read by [`ThreadFacts::read`]): [`decide_recovery`],
    /// then the agent that decision describes. The recovered agent's first commit builds on
    /// `facts.version` (SPEC §7.1).
    pub fn from_facts(
        config: AgentConfig,
        facts: ThreadFacts,
        policy: RecoveryPolicy,
    ) -> Result<Agent, AgentError> {
        let decision = decide_recovery(&facts, &config, policy)?;
        let mut agent = Agent::new(config)?;
        agent.thread.messages = facts.messages;
        agent.thread.committed = agent.thread.messages.len();
        // The fence (SPEC §7.1): the recovered agent's first commit builds on the version
        // the store held when the facts were read; a second writer recovered from the same
        // version is fenced.
        agent.thread.thread_version = facts.version;
        agent.thread.used_run_ids = decision.used_run_ids;
        agent.thread.clock_ms = decision.clock_ms;
        if let Some((keep_from, summary)) = decision.compaction {
            agent.set_compaction(Some(super::Compaction::new(keep_from, summary)));
        }
        let resumed = match decision.head {
            HeadDecision::Idle => return Ok(agent),
            HeadDecision::Ended { run_id, cause } => {
                agent.thread.last_end = Some((run_id, cause));
                return Ok(agent);
            }
            HeadDecision::Resume(resumed) => *resumed,
        };
        let ResumedRun {
            run_id,
            steps,
            waits,
            transcript_start,
            commits,
            next,
        } = resumed;
        let awaiting = matches!(next, NextStep::AwaitAt { .. } | NextStep::AwaitCall { .. });
        // Ordinals continue from the run's stored commit count.
        let run = Run::recovered(run_id, steps, waits, transcript_start, awaiting, commits);
        let config = &agent.thread.config;
        let recovered = match next {
            NextStep::CallModel => RecoveredRun::AtCall,
            NextStep::Boundary => RecoveredRun::AfterAnswer,
            NextStep::AwaitAt {
                ticket,
                interrupted,
            } => RecoveredRun::AwaitingAt {
                ticket,
                interrupted: BoundaryKind::from(interrupted),
            },
            NextStep::AwaitCall { ticket, calls } => RecoveredRun::AwaitingCall {
                ticket,
                batch: batch_of(steps, calls, config),
            },
            NextStep::OpenCalls { calls, seal } => RecoveredRun::OpenCalls {
                batch: batch_of(steps, calls, config),
                seal,
            },
        };
        agent.rebuild(run, recovered)?;
        Ok(agent)
    }
}
