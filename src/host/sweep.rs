//! Acting on a thread that no process holds: one claimed step, and the sweep of due work
//! (SPEC §7.2, §7.3, §12.4).
//!
//! [`act_under_claim`] is the one way a host that is not the thread's live owner (a sweeper,
//! an operator answering an approval) changes a thread: claim it, recover its agent from what
//! is committed, apply its inputs, commit every commit the agent emits — fenced and under the
//! claim — and release the claim. Whatever the agent asks for next (a model call, tools) is
//! left to whichever worker claims the thread next: the run is then Running with no live
//! claim, which [`due_work`](crate::store::ThreadClaims::due_work) lists as orphaned, and a worker
//! recovering it under `replay` carries on.
//!
//! [`sweep`] handles due work once: each passed deadline is applied as a timeout at store time
//! (`expired`); each orphan is left for a worker under [`RecoveryPolicy::Replay`] (`left`) or
//! sealed under [`RecoveryPolicy::Seal`] (`sealed`: unanswered tool calls are paired
//! `interrupted` and the run ends `Indeterminate`, as recovery seals; a run whose only
//! in-flight work was a model call ends `Stopped("sealed")`, see [`SEALED_REASON`]); an item another owner
//! holds, or that stopped being due since it was listed, is `skipped`. Two sweeps at once
//! handle each item once: the claim admits one of them, and the version fence the other's
//! stale commit.

use serde::Serialize;

use crate::agent::{Agent, AgentConfig, RecoverError, RecoveryPolicy};
use crate::error::AgentError;
use crate::ids::{RunId, ThreadId};
use crate::run::RunState;
use crate::store::StoreError;
use crate::store::claims::{DueReason, DueWork};
use crate::store::ports::Store;

use super::ClaimOptions;
use super::session::{ClaimHeld, ClaimedAct, ClaimedSession, OpenError};

/// The reason an orphan with no open tool calls is stopped with under
/// [`RecoveryPolicy::Seal`]: its in-flight model call is thrown away, and there is no tool call
/// to pair `interrupted` (SPEC §8.7 seals only those), so it ends `Stopped("sealed")`.
pub const SEALED_REASON: &str = "sealed";

/// Why [`act_under_claim`] did nothing (or stopped). Every commit made before the error is
/// stored; none after it is.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ActError {
    /// Another owner holds the thread live (nothing was read or written).
    #[error(transparent)]
    ClaimHeld(ClaimHeld),
    /// The store failed or refused (a claim or a commit).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The thread's history could not be recovered.
    #[error("cannot recover thread {:?}: {error}", thread.as_str())]
    Recover {
        /// The thread.
        thread: ThreadId,
        /// Why.
        error: AgentError,
    },
    /// The agent refused the input (e.g. a resume for a run that is not waiting).
    #[error(transparent)]
    Agent(AgentError),
}

/// Claims `thread` for `claim.owner`, recovers its agent under `policy` (with `config`; its
/// thread id is set to `thread`), lets `act` apply inputs, commits what the agent emits under
/// the claim, and releases the claim — also when something failed. `now_ms` is the host's
/// clock (store time for stores whose time is the caller's).
pub fn act_under_claim<S: Store + ?Sized>(
    store: &mut S,
    claim: &ClaimOptions,
    config: AgentConfig,
    thread: &ThreadId,
    policy: RecoveryPolicy,
    now_ms: u64,
    act: impl FnOnce(&mut Agent) -> Result<(), AgentError>,
) -> Result<ClaimedAct, ActError> {
    ClaimedSession::run(store, claim, thread, now_ms, |store, session| {
        let mut agent = session
            .recover(store, config, policy)
            .map_err(|e| match e {
                RecoverError::Store(error) => ActError::Store(error),
                RecoverError::Invalid(error) => ActError::Recover {
                    thread: thread.clone(),
                    error,
                },
            })?;
        act(&mut agent).map_err(ActError::Agent)?;
        Ok(session.commit_outputs(store, &mut agent, now_ms)?)
    })
}

impl From<OpenError> for ActError {
    fn from(error: OpenError) -> Self {
        match error {
            OpenError::Held(held) => ActError::ClaimHeld(held),
            OpenError::Store(store) => ActError::Store(store),
        }
    }
}

/// What a sweep did with one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SweepAction {
    /// The passed deadline was applied (the wait expired, committed).
    Expired,
    /// The orphaned run was sealed as `Indeterminate`.
    Sealed,
    /// The orphan was left for a worker (policy `replay`).
    Left,
    /// Another owner held the thread, or the item was no longer due.
    Skipped,
}

/// One line of a sweep's report (`runcore sweep` prints one per item).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SweepItem {
    /// The thread.
    pub thread_id: ThreadId,
    /// The run.
    pub run_id: RunId,
    /// `deadline` or `orphaned`.
    pub reason: &'static str,
    /// What was done.
    pub action: SweepAction,
    /// Why an item was skipped, or what failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// How a sweep acts.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// The sweeper's claim owner and lease (one claim per item, released after it).
    pub claim: ClaimOptions,
    /// At most this many items.
    pub limit: usize,
    /// `replay` leaves orphans for a worker; `seal` ends them `Indeterminate`.
    pub policy: RecoveryPolicy,
    /// The configuration recovered agents run with (tool policies are configuration).
    pub config: AgentConfig,
}

/// Handles the store's due work once at local time `now_ms` (see the module documentation).
/// `Err` only when listing the due work failed; a failure on one item is that item's
/// `skipped` line with the failure as its detail.
pub fn sweep<S: Store + ?Sized>(
    store: &mut S,
    options: &SweepOptions,
    now_ms: u64,
) -> Result<Vec<SweepItem>, StoreError> {
    let due = store.due_work(now_ms, options.limit)?;
    Ok(due
        .into_iter()
        .map(|item| sweep_one(store, options, item, now_ms))
        .collect())
}

fn sweep_one<S: Store + ?Sized>(
    store: &mut S,
    options: &SweepOptions,
    item: DueWork,
    now_ms: u64,
) -> SweepItem {
    let report = |action, detail: Option<String>| SweepItem {
        thread_id: item.thread_id.clone(),
        run_id: item.run_id.clone(),
        reason: item.reason.kind(),
        action,
        detail,
    };
    let (policy, action) = match (&item.reason, options.policy) {
        (DueReason::Orphaned { .. }, RecoveryPolicy::Replay) => {
            return report(SweepAction::Left, None);
        }
        (DueReason::Orphaned { .. }, RecoveryPolicy::Seal) => {
            (RecoveryPolicy::Seal, SweepAction::Sealed)
        }
        (DueReason::Deadline { .. }, _) => (RecoveryPolicy::Replay, SweepAction::Expired),
    };
    // The item was listed a moment ago; under the claim, check it is still what was listed
    // (the run still the thread's latest, still in the state that made it due).
    let run_id = item.run_id.clone();
    let reason = item.reason.clone();
    let mut still_due = true;
    let result = act_under_claim(
        store,
        &options.claim,
        options.config.clone(),
        &item.thread_id,
        policy,
        now_ms,
        |agent| {
            let state = (agent.active_run_id() == Some(&run_id))
                .then(|| agent.run_state())
                .flatten();
            match (&reason, state) {
                (DueReason::Deadline { deadline_ms }, Some(RunState::Awaiting)) => {
                    // Due at store time: apply it at a time no earlier than the deadline, so
                    // a host clock behind the store's still expires what the store found due.
                    agent.handle_timeout(now_ms.max(*deadline_ms))
                }
                // Sealed in recovery (unanswered tool calls: `interrupted`, Indeterminate).
                (DueReason::Orphaned { .. }, _) if agent.active_run_id().is_none() => Ok(()),
                // Only a model call was in flight: nothing to pair; the run is stopped.
                (DueReason::Orphaned { .. }, Some(RunState::Running)) => agent.stop(SEALED_REASON),
                _ => {
                    still_due = false;
                    Ok(())
                }
            }
        },
    );
    match result {
        Ok(done) if still_due && done.commits > 0 => report(action, None),
        Ok(_) => report(SweepAction::Skipped, Some("no longer due".to_owned())),
        Err(ActError::ClaimHeld(held)) => report(
            SweepAction::Skipped,
            Some(format!("claimed by {:?}", held.owner)),
        ),
        Err(error) => report(SweepAction::Skipped, Some(error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolSpec;
    use crate::agent::{Output, ToolPolicy};
    use crate::message::{AssistantBlock, AssistantMessage, StopReason, UserMessage};
    use crate::store::ThreadClaims;
    use crate::store::{CommitLog, CommittedThreadView, MemoryStore};

    /// A thread whose run waits for approval of `deploy`, with a deadline at 5_000.
    fn waiting_store() -> MemoryStore {
        let mut config = AgentConfig::for_thread("t");
        config.tools.insert(
            "deploy".into(),
            ToolSpec {
                policy: ToolPolicy::RequireApproval {
                    deadline_after_ms: Some(4_000),
                },
                ..ToolSpec::default()
            },
        );
        let mut agent = Agent::new(config).unwrap();
        let mut store = MemoryStore::new();
        let run = agent.prompt(UserMessage::text("ship it"), 1_000).unwrap();
        let answer = AssistantMessage {
            content: vec![AssistantBlock::tool_call(
                "c1",
                "deploy",
                serde_json::json!({}),
            )],
            stop_reason: StopReason::ToolUse,
            error_message: None,
            usage: None,
            id: None,
            meta: Default::default(),
            model: None,
            response_id: None,
            provider_stop_reason: None,
        };
        for output in agent.drain() {
            if let Output::Commit(commit) = output {
                store.commit_operation(commit.into_operation()).unwrap();
            }
        }
        agent.model_done(&run, 1, answer).unwrap();
        for output in agent.drain() {
            if let Output::Commit(commit) = output {
                store.commit_operation(commit.into_operation()).unwrap();
            }
        }
        assert_eq!(agent.run_state(), Some(RunState::Awaiting));
        store
    }

    fn options(policy: RecoveryPolicy) -> SweepOptions {
        SweepOptions {
            claim: ClaimOptions::new("sweeper", 10_000),
            limit: 100,
            policy,
            config: AgentConfig::default(),
        }
    }

    #[test]
    fn a_passed_deadline_is_expired_once_and_the_claim_released() {
        let mut store = waiting_store();
        let thread = ThreadId::new("t");
        assert!(
            sweep(&mut store, &options(RecoveryPolicy::Replay), 4_999)
                .unwrap()
                .is_empty()
        );
        let version = store.thread_version(&thread).unwrap();
        let swept = sweep(&mut store, &options(RecoveryPolicy::Replay), 6_000).unwrap();
        assert_eq!(swept.len(), 1, "{swept:?}");
        assert_eq!(swept[0].action, SweepAction::Expired);
        assert_eq!(swept[0].reason, "deadline");
        assert!(store.thread_version(&thread).unwrap() > version);
        assert_eq!(store.thread_claim(&thread, 6_000).unwrap(), None);
        // The expired wait ended the run (SPEC §8.5); nothing is due any more.
        let run = store.latest_run(&thread).unwrap().unwrap();
        assert_eq!(
            run.state,
            RunState::Ended(crate::EndCause::Stopped("wait_expired".into()))
        );
        assert!(
            sweep(&mut store, &options(RecoveryPolicy::Replay), 6_001)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn an_item_another_owner_holds_is_skipped_and_nothing_is_written() {
        let mut store = waiting_store();
        let thread = ThreadId::new("t");
        let holder = ClaimOptions::new("worker", 60_000);
        let claim = store.claim_thread(&holder.request(&thread), 6_000).unwrap();
        let version = store.thread_version(&thread).unwrap();
        let swept = sweep(&mut store, &options(RecoveryPolicy::Seal), 6_100).unwrap();
        assert_eq!(swept[0].action, SweepAction::Skipped);
        assert!(swept[0].detail.as_deref().unwrap().contains("worker"));
        assert_eq!(store.thread_version(&thread).unwrap(), version);
        assert_eq!(store.thread_claim(&thread, 6_100).unwrap(), Some(claim));
    }

    #[test]
    fn an_orphan_is_left_under_replay_and_sealed_under_seal() {
        // A worker claimed the thread, committed a run's start, and died (its claim expired).
        let mut store = MemoryStore::new();
        let thread = ThreadId::new("o");
        let worker = ClaimOptions::new("worker", 1_000);
        let claim = store.claim_thread(&worker.request(&thread), 0).unwrap();
        let mut agent = Agent::new(AgentConfig::for_thread("o")).unwrap();
        agent.prompt(UserMessage::text("hi"), 0).unwrap();
        for output in agent.drain() {
            if let Output::Commit(commit) = output {
                let operation = commit.into_operation().claimed(claim.token(), 10);
                store.commit_operation(operation).unwrap();
            }
        }
        let left = sweep(&mut store, &options(RecoveryPolicy::Replay), 5_000).unwrap();
        assert_eq!(
            left.iter()
                .map(|i| (i.reason, i.action))
                .collect::<Vec<_>>(),
            [("orphaned", SweepAction::Left)]
        );
        let swept = sweep(&mut store, &options(RecoveryPolicy::Seal), 6_100).unwrap();
        assert_eq!(
            swept.iter().map(|i| i.action).collect::<Vec<_>>(),
            [SweepAction::Sealed]
        );
        let run = store.latest_run(&thread).unwrap().unwrap();
        assert!(matches!(run.state, RunState::Ended(_)), "{run:?}");
        assert!(
            sweep(&mut store, &options(RecoveryPolicy::Seal), 6_200)
                .unwrap()
                .is_empty()
        );
    }
}
