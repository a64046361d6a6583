//! A person answers a permission ticket (SPEC §12.5): the one function behind `runcore approve`,
//! `runcore deny`, the operator console and the bindings.
//!
//! [`answer_permission`] is sans-IO like the rest of the core: the store comes in as the core's
//! own ports ([`CheckpointReader`] to recover, [`CommitLog`] to commit), the time as `now_ms`.
//! It does what a host's `resume_ticket` line would do, and no more:
//!
//! 1. read the run's record and its committed ticket (no ticket → `not_waiting`);
//! 2. recover the thread from committed facts ([`Agent::recover`]) with a configuration made
//!    from the ticket itself (thread, snapshot, fingerprint): the person's answer needs nothing
//!    the host's configuration holds, because recovery re-gates the waiting call;
//! 3. apply the answer as [`Agent::resume_ticket`] with a permission result, so the §4 checks
//!    (expiry, result kind, …) are the agent's own;
//! 4. commit, fenced ([`CommitLog::commit_operation`]), the first commit the agent emits: the
//!    Running commit that deletes the ticket and carries the `permission_decided` draft (and
//!    a `decided_by {call_id, owner}` host draft naming the claim's owner: who answered). What
//!    the agent would do next (the next ticket of the batch, the batch's execution, the denied
//!    result's pairing) is left to the worker that next recovers the thread: recovery honours
//!    the committed decision, so nothing is lost by stopping here, and nothing runs a tool or a
//!    model in the process of the person who answered.
//!
//! Two answers racing on one ticket: both recover the same version; the store's fence admits
//! one commit and refuses the other ([`AnswerError::Fenced`]), or, when the other answer was
//! committed first, the ticket is gone (`not_waiting`).
//!
//! The answer goes through a claim (SPEC §7.2, §12.5): the thread is claimed before anything
//! is recovered (another owner's live claim is [`AnswerError::Held`], nothing written), the
//! commit carries the claim's token, and the claim is released after it — so the run is then
//! Running with no live claim, which `due_work` lists as orphaned, and the next worker picks
//! it up.

use serde::{Deserialize, Serialize};

use super::ClaimOptions;
use super::session::{ClaimHeld, ClaimedSession, OpenError};
use crate::agent::{Agent, AgentConfig, Output, RecoverError, RecoveryPolicy};
use crate::commit::{AuditDraft, CommitError};
use crate::driver::ErrorBody;
use crate::error::AgentError;
use crate::ids::{RunId, ThreadId};
use crate::resume::{PermissionDecision, ResumeError, ResumeResult};
use crate::run::RunDisposition;
use crate::store::StoreError;
use crate::store::ports::Store;

/// Where a committed answer landed: `{"thread_id","version"}` (SPEC §12.5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answered {
    /// The run's thread.
    pub thread_id: ThreadId,
    /// The thread's version after the answer's commit.
    pub version: u64,
}

/// Why an answer was not committed. Nothing of it was written, with one exception: an answer
/// that comes after its ticket's deadline ([`Refused`](AnswerError::Refused) with `resume` /
/// `expired`) applies that passed deadline under its claim, as a sweep would (the run ends
/// `Stopped("wait_expired")`, SPEC §7.3, §8.5), so that of an approval and an expiry at the
/// same instant exactly one commits.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// The run does not await a permission now: the §10 error a `resume_ticket` would get
    /// (`resume` with `not_waiting`, `expired`, `result_kind_mismatch`, …).
    #[error(transparent)]
    Refused(AgentError),
    /// Another writer committed on the thread between this answer's recovery and its commit
    /// (SPEC §7.1: `version_conflict`, `ordinal_conflict`, `payload_mismatch`). Look again: the
    /// run has moved on.
    #[error("the thread moved on while answering: {0}")]
    Fenced(CommitError),
    /// The store failed, or refused the commit for a reason other than the fence.
    #[error(transparent)]
    Store(StoreError),
    /// The thread's committed facts could not be recovered (not written by a runcore agent).
    #[error("the thread cannot be recovered: {0}")]
    Unrecoverable(AgentError),
    /// Another owner holds the thread's claim live (SPEC §12.5: exit 4, `409 claim_held`).
    /// Nothing was read further or written.
    #[error(transparent)]
    Held(ClaimHeld),
}

impl AnswerError {
    /// The stable snake_case kind: a §10 kind for [`Refused`](AnswerError::Refused) (`resume`,
    /// …), `store` for a fence or a store failure, `invalid_state` for an unrecoverable thread.
    pub fn kind(&self) -> &'static str {
        match self {
            AnswerError::Refused(error) => error.kind(),
            AnswerError::Fenced(_) | AnswerError::Store(_) => "store",
            AnswerError::Unrecoverable(_) => "invalid_state",
            AnswerError::Held(_) => "claim_held",
        }
    }

    /// The error as the driver's error lines write it: `kind`, `message` and the error's own
    /// fields (`resume_error`, …; for a fence, `reason` is the commit error's kind).
    pub fn body(&self) -> ErrorBody {
        match self {
            AnswerError::Refused(error) => crate::driver::error_body(error),
            AnswerError::Fenced(error) => crate::driver::store_body(error.code(), self.to_string()),
            AnswerError::Held(held) => {
                let mut details = serde_json::Map::new();
                details.insert("owner".into(), held.owner.as_str().into());
                details.insert("expires_at_ms".into(), held.expires_at_ms.into());
                ErrorBody {
                    kind: "claim_held".into(),
                    message: self.to_string(),
                    details,
                }
            }
            AnswerError::Store(_) | AnswerError::Unrecoverable(_) => ErrorBody {
                kind: self.kind().into(),
                message: self.to_string(),
                details: serde_json::Map::new(),
            },
        }
    }
}

impl From<StoreError> for AnswerError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Rejected(
                fence @ (CommitError::VersionConflict { .. }
                | CommitError::OrdinalConflict { .. }
                | CommitError::PayloadMismatch { .. }),
            ) => AnswerError::Fenced(fence),
            other => AnswerError::Store(other),
        }
    }
}

impl From<RecoverError> for AnswerError {
    fn from(error: RecoverError) -> Self {
        match error {
            RecoverError::Store(e) => AnswerError::Store(e),
            RecoverError::Invalid(e) => AnswerError::Unrecoverable(e),
        }
    }
}

fn not_waiting() -> AnswerError {
    AnswerError::Refused(AgentError::Resume(ResumeError::NotWaiting))
}

/// Answers `run_id`'s current permission ticket with `decision` at `now_ms` (the clock the
/// ticket's deadline is in: Unix-epoch milliseconds for a store that hosts share, SPEC §7.3),
/// committing exactly one fenced Running commit with the `permission_decided` draft. See the
/// module docs for the steps and what is left to the next worker.
pub fn answer_permission<S: Store + ?Sized>(
    store: &mut S,
    run_id: &RunId,
    decision: PermissionDecision,
    claim: &ClaimOptions,
    now_ms: u64,
) -> Result<Answered, AnswerError> {
    if run_id.is_blank() {
        return Err(AnswerError::Refused(AgentError::invalid(
            "answer: the run id is empty",
        )));
    }
    let Some(record) = store.run(run_id)? else {
        return Err(not_waiting());
    };
    let thread_id = record.thread_id;
    // Claimed before anything is recovered: a live claim of another owner is `Held`, and
    // nothing is read further or written; released whatever happened.
    ClaimedSession::run(store, claim, &thread_id, now_ms, |store, session| {
        answer_on_thread(store, session, run_id, decision, now_ms)
    })
}

impl From<OpenError> for AnswerError {
    fn from(error: OpenError) -> Self {
        match error {
            OpenError::Held(held) => AnswerError::Held(held),
            OpenError::Store(store) => store.into(),
        }
    }
}

/// The kind of the host draft an answer adds beside its `permission_decided`:
/// `decided_by {call_id, owner}`, the owner of the claim it answered under.
pub const DECIDED_BY: &str = "decided_by";

/// Steps 1–4 of the module docs on the (claimed) thread.
fn answer_on_thread<S: Store + ?Sized>(
    store: &mut S,
    session: &ClaimedSession,
    run_id: &RunId,
    decision: PermissionDecision,
    now_ms: u64,
) -> Result<Answered, AnswerError> {
    let thread_id = session.thread_id();
    let Some(ticket) = store.resume_ticket(run_id)? else {
        return Err(not_waiting());
    };
    let mut config = AgentConfig::for_thread(thread_id.clone());
    config.snapshot_id = ticket.snapshot_id.clone();
    config.catalog_fingerprint = ticket.catalog_fingerprint.clone();
    // Recovery refuses a run with more model calls than `max_steps`; the answer makes none.
    config.max_steps = u32::MAX;
    let mut agent = match session.recover(store, config, RecoveryPolicy::Replay) {
        Ok(agent) => agent,
        // A backend's reads need not be one snapshot: another writer's commit between
        // recovery's reads (say, another answer deleting the ticket) can make the facts look
        // inconsistent. When the ticket read first is no longer there, the thread moved on.
        Err(RecoverError::Invalid(_)) if store.resume_ticket(run_id)?.as_ref() != Some(&ticket) => {
            return Err(not_waiting());
        }
        Err(error) => return Err(error.into()),
    };
    // Recovery of an Awaiting run emits nothing; drain to be sure what follows is the answer's.
    while agent.poll().is_some() {}
    match agent.resume_ticket(ResumeResult::Permission(decision), Some(now_ms)) {
        Ok(()) => {}
        Err(expired @ AgentError::Resume(ResumeError::Expired { .. })) => {
            // The deadline passed before the answer: holding the claim, apply it here (as a
            // sweep would, SPEC §7.3), so of an approval and an expiry at the same instant
            // exactly one commits — the expiry — and the answer gets `expired`.
            apply_passed_deadline(store, &mut agent, session, now_ms)?;
            return Err(AnswerError::Refused(expired));
        }
        Err(other) => return Err(AnswerError::Refused(other)),
    }
    let commit = std::iter::from_fn(|| agent.poll())
        .find_map(|output| match output {
            Output::Commit(commit) => Some(commit),
            _ => None,
        })
        .ok_or_else(|| {
            AnswerError::Unrecoverable(AgentError::Internal(
                "answer: an accepted permission resume emitted no commit".into(),
            ))
        })?;
    let is_the_decision = matches!(&commit.commit.run, RunDisposition::Running { run_id: r } if r == run_id)
        && commit
            .commit
            .events
            .iter()
            .any(|draft| matches!(draft, AuditDraft::PermissionDecided { .. }));
    if !is_the_decision {
        debug_assert!(false, "answer: the first commit is not the decision's");
        return Err(AnswerError::Unrecoverable(AgentError::Internal(
            "answer: the first commit after a permission resume is not a Running commit \
             with its permission_decided draft"
                .into(),
        )));
    }
    // Who answered: the claim's owner (`console:PID`, `runcore approve --owner`, a binding's
    // owner), as a host draft beside the decision, before the commit's `commit_clock`. The
    // agent never reads it; a trace and the console show it.
    let mut commit = commit;
    let call_id = commit.commit.events.iter().find_map(|draft| match draft {
        AuditDraft::PermissionDecided { call_id, .. } => Some(call_id.as_str().to_owned()),
        _ => None,
    });
    let at = commit
        .commit
        .events
        .iter()
        .position(|draft| matches!(draft, AuditDraft::CommitClock { .. }))
        .unwrap_or(commit.commit.events.len());
    commit.commit.events.insert(
        at,
        AuditDraft::new(
            DECIDED_BY,
            serde_json::json!({"call_id": call_id, "owner": session.claim().owner}),
        ),
    );
    let version = commit.expected_thread_version.saturating_add(1);
    session.commit(store, *commit, now_ms)?;
    Ok(Answered {
        thread_id: thread_id.clone(),
        version,
    })
}

/// Applies the passed deadline of `agent`'s wait as a `timeout` at `now_ms` and commits what
/// it emits (the run's Ended commit), fenced, under the claim.
fn apply_passed_deadline<S: Store + ?Sized>(
    store: &mut S,
    agent: &mut Agent,
    session: &ClaimedSession,
    now_ms: u64,
) -> Result<(), AnswerError> {
    agent
        .handle_timeout(now_ms)
        .map_err(AnswerError::Unrecoverable)?;
    session.commit_outputs(store, agent, now_ms)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{
        CheckpointReader, CommitLog, CommittedThreadView, EventScope, MemoryStore, ThreadClaims,
    };
    use crate::{AssistantBlock, AssistantMessage, RunState, StopReason, ToolSpec, UserMessage};
    use serde_json::json;

    const RUN: &str = "t/run-1";

    fn commit_all(agent: &mut Agent, store: &mut MemoryStore) {
        while let Some(output) = agent.poll() {
            if let Output::Commit(commit) = output {
                store.commit_operation(commit.into_operation()).unwrap();
            }
        }
    }

    /// A store whose run `t/run-1` awaits permission for `rm` (of two gated calls) made by an
    /// agent with its own snapshot and fingerprint; `deadline` for the first ticket.
    fn awaiting(deadline_after_ms: Option<u64>) -> MemoryStore {
        let mut store = MemoryStore::new();
        let mut config = AgentConfig::for_thread("t")
            .with_tool("rm", ToolSpec::gated("Remove", deadline_after_ms))
            .with_tool("mv", ToolSpec::gated("Move", None));
        config.snapshot_id = "snap-7".into();
        config.catalog_fingerprint = "fp-7".into();
        let mut agent = Agent::new(config).unwrap();
        agent.prompt(UserMessage::text("clean up"), 1_000).unwrap();
        commit_all(&mut agent, &mut store);
        let calls = vec![
            AssistantBlock::tool_call("c1", "rm", json!({"path": "/tmp/x"})),
            AssistantBlock::tool_call("c2", "mv", json!({"from": "a", "to": "b"})),
        ];
        agent
            .model_done(
                &RunId::new(RUN),
                1,
                AssistantMessage::new(calls, StopReason::ToolUse),
            )
            .unwrap();
        commit_all(&mut agent, &mut store);
        assert_eq!(
            store.run_state(&RunId::new(RUN)).unwrap(),
            Some(RunState::Awaiting)
        );
        store
    }

    fn allow() -> PermissionDecision {
        PermissionDecision::Allow {
            note: Some("ok".into()),
        }
    }

    #[test]
    fn an_allow_commits_one_running_commit_with_the_decision() {
        let mut store = awaiting(None);
        let before = store.thread_version(&ThreadId::new("t")).unwrap();
        let events_before = store.event_count();
        let answered =
            answer_permission(&mut store, &RunId::new(RUN), allow(), &claimer(), 2_000).unwrap();
        assert_eq!(
            answered,
            Answered {
                thread_id: ThreadId::new("t"),
                version: before + 1
            }
        );
        assert_eq!(
            store.thread_version(&ThreadId::new("t")).unwrap(),
            before + 1
        );
        let run = RunId::new(RUN);
        assert_eq!(store.run_state(&run).unwrap(), Some(RunState::Running));
        assert_eq!(store.resume_ticket(&run).unwrap(), None);
        let events = store
            .list_events(&EventScope::Run(run.clone()), None, 100)
            .unwrap();
        let new: Vec<&str> = events[events_before..]
            .iter()
            .map(|e| e.kind.as_str())
            .collect();
        assert!(new.contains(&"permission_decided"), "{new:?}");
        // The next gated call is the next worker's to ask: nothing else was committed.
        assert!(store.pending_tickets(None, 10).unwrap().is_empty());
    }

    #[test]
    fn a_thread_held_live_by_another_owner_is_held_and_nothing_is_written() {
        let mut store = awaiting(None);
        let thread = ThreadId::new("t");
        let worker = crate::host::ClaimOptions::new("worker", 60_000);
        let live = store.claim_thread(&worker.request(&thread), 1_900).unwrap();
        let before = serde_json::to_value(&store).unwrap();
        let error = answer_permission(&mut store, &RunId::new(RUN), allow(), &claimer(), 2_000)
            .unwrap_err();
        match &error {
            AnswerError::Held(held) => {
                assert_eq!(
                    (held.owner.as_str(), held.expires_at_ms),
                    ("worker", 61_900)
                );
            }
            other => panic!("expected Held, got {other:?}"),
        }
        assert_eq!(error.kind(), "claim_held");
        let mut after = serde_json::to_value(&store).unwrap();
        after["clock"] = before["clock"].clone();
        assert_eq!(after, before, "nothing written");
        assert_eq!(store.thread_claim(&thread, 2_000).unwrap(), Some(live));
    }

    #[test]
    fn a_second_answer_is_not_waiting_and_writes_nothing() {
        let mut store = awaiting(None);
        let run = RunId::new(RUN);
        answer_permission(&mut store, &run, allow(), &claimer(), 2_000).unwrap();
        let version = store.thread_version(&ThreadId::new("t")).unwrap();
        let deny = PermissionDecision::Deny { reason: None };
        let error = answer_permission(&mut store, &run, deny, &claimer(), 2_001).unwrap_err();
        assert_eq!(error.kind(), "resume");
        assert_eq!(
            error.body().details.get("resume_error"),
            Some(&json!("not_waiting"))
        );
        assert_eq!(store.thread_version(&ThreadId::new("t")).unwrap(), version);
    }

    #[test]
    fn an_unknown_or_blank_run_is_refused() {
        let mut store = awaiting(None);
        let error =
            answer_permission(&mut store, &RunId::new("nope"), allow(), &claimer(), 0).unwrap_err();
        assert!(matches!(
            error,
            AnswerError::Refused(AgentError::Resume(ResumeError::NotWaiting))
        ));
        let error =
            answer_permission(&mut store, &RunId::new(""), allow(), &claimer(), 0).unwrap_err();
        assert_eq!(error.kind(), "invalid_input");
    }

    #[test]
    fn a_late_answer_is_expired_and_applies_the_passed_deadline() {
        let thread = ThreadId::new("t");
        let run = RunId::new(RUN);
        let mut in_time = awaiting(Some(500));
        // The ticket was made at 1_000 with 500 to go: 1_500 is still in time, 1_501 is not.
        answer_permission(&mut in_time, &run, allow(), &claimer(), 1_500).unwrap();

        let mut store = awaiting(Some(500));
        let version = store.thread_version(&thread).unwrap();
        let error = answer_permission(&mut store, &run, allow(), &claimer(), 1_501).unwrap_err();
        assert_eq!(
            error.body().details.get("resume_error"),
            Some(&json!("expired"))
        );
        // The expiry is what committed: one commit, the run ended as a sweep would end it,
        // no ticket, nothing due, the claim released.
        assert_eq!(store.thread_version(&thread).unwrap(), version + 1);
        assert_eq!(
            store.run_state(&run).unwrap(),
            Some(RunState::Ended(crate::EndCause::Stopped(
                "wait_expired".into()
            )))
        );
        assert_eq!(store.resume_ticket(&run).unwrap(), None);
        assert_eq!(store.due_work(1_501, 10).unwrap(), vec![]);
        assert_eq!(store.thread_claim(&thread, 1_501).unwrap(), None);
        // A second late answer finds nothing to answer.
        let again = answer_permission(&mut store, &run, allow(), &claimer(), 1_600).unwrap_err();
        assert_eq!(
            again.body().details.get("resume_error"),
            Some(&json!("not_waiting"))
        );
    }

    #[test]
    fn a_pause_is_not_a_permission() {
        let mut store = MemoryStore::new();
        let mut agent = Agent::new(AgentConfig::for_thread("p")).unwrap();
        agent.prompt(UserMessage::text("hi"), 0).unwrap();
        agent.pause().unwrap();
        commit_all(&mut agent, &mut store);
        agent
            .model_done(&RunId::new("p/run-1"), 1, AssistantMessage::text("hello"))
            .unwrap();
        commit_all(&mut agent, &mut store);
        let run = RunId::new("p/run-1");
        assert_eq!(store.run_state(&run).unwrap(), Some(RunState::Awaiting));
        let error = answer_permission(&mut store, &run, allow(), &claimer(), 0).unwrap_err();
        assert_eq!(
            error.body().details.get("resume_error"),
            Some(&json!("result_kind_mismatch"))
        );
    }

    #[test]
    fn two_answers_from_the_same_version_commit_once() {
        // The loser recovers before the winner commits; the store's fence decides.
        let mut store = awaiting(None);
        let run = RunId::new(RUN);
        let ticket = store.resume_ticket(&run).unwrap().unwrap();
        let mut config = AgentConfig::for_thread("t");
        config.snapshot_id = ticket.snapshot_id.clone();
        config.catalog_fingerprint = ticket.catalog_fingerprint.clone();
        let mut loser =
            Agent::recover(config, &store, &ThreadId::new("t"), RecoveryPolicy::Replay).unwrap();
        let winner = answer_permission(&mut store, &run, allow(), &claimer(), 2_000).unwrap();
        let deny = ResumeResult::Permission(PermissionDecision::Deny { reason: None });
        loser.resume_ticket(deny, Some(2_000)).unwrap();
        let commit = std::iter::from_fn(|| loser.poll())
            .find_map(|o| match o {
                Output::Commit(c) => Some(c),
                _ => None,
            })
            .unwrap();
        let error = AnswerError::from(store.commit_operation(commit.into_operation()).unwrap_err());
        assert!(matches!(error, AnswerError::Fenced(_)), "{error:?}");
        assert_eq!(error.kind(), "store");
        assert_eq!(
            error.body().details.get("reason"),
            Some(&json!("payload_mismatch"))
        );
        let version = store.thread_version(&ThreadId::new("t")).unwrap();
        assert_eq!(version, winner.version);
    }

    fn claimer() -> crate::host::ClaimOptions {
        crate::host::ClaimOptions::new("operator", 60_000)
    }

    /// A store whose reads are not one snapshot: the first `latest_run` read returns the head
    /// as it was, and then another writer's commit lands before recovery's next reads.
    struct Racing {
        store: crate::store::SharedStore<MemoryStore>,
        winner: std::cell::RefCell<Option<crate::CommitOperation>>,
    }

    impl crate::store::Intercept for Racing {
        type Inner = crate::store::SharedStore<MemoryStore>;
        fn inner(&self) -> &Self::Inner {
            &self.store
        }
        fn inner_mut(&mut self) -> &mut Self::Inner {
            &mut self.store
        }
        fn latest_run(&self, t: &ThreadId) -> Result<Option<crate::RunRecord>, StoreError> {
            let head = self.store.latest_run(t);
            if let Some(operation) = self.winner.borrow_mut().take() {
                // The winner commits under the claim this answer holds (the same operator
                // in another window).
                let mut other_window = self.store.clone();
                let live = other_window
                    .thread_claim(t, 0)?
                    .expect("the answer claimed the thread");
                other_window.commit_operation(operation.claimed(live.token(), 0))?;
            }
            head
        }
    }

    #[test]
    fn a_ticket_answered_between_recovery_reads_is_not_waiting() {
        let store = awaiting(None);
        let run = RunId::new(RUN);
        let mut winner = None;
        // The winner: another answer, recovered from the same facts, committed between the
        // reads of this one's recovery.
        {
            let ticket = store.resume_ticket(&run).unwrap().unwrap();
            let mut config = AgentConfig::for_thread("t");
            config.snapshot_id = ticket.snapshot_id.clone();
            config.catalog_fingerprint = ticket.catalog_fingerprint.clone();
            let mut agent =
                Agent::recover(config, &store, &ThreadId::new("t"), RecoveryPolicy::Replay)
                    .unwrap();
            agent
                .resume_ticket(ResumeResult::Permission(allow()), Some(2_000))
                .unwrap();
            while let Some(output) = agent.poll() {
                if let Output::Commit(commit) = output {
                    winner.get_or_insert(commit.into_operation());
                }
            }
        }
        let version = store.thread_version(&ThreadId::new("t")).unwrap();
        let mut racing = crate::store::Intercepted(Racing {
            store: crate::store::SharedStore::new(store),
            winner: std::cell::RefCell::new(winner),
        });
        let error = answer_permission(&mut racing, &run, allow(), &claimer(), 2_001).unwrap_err();
        assert!(
            matches!(
                error,
                AnswerError::Refused(AgentError::Resume(ResumeError::NotWaiting))
            ),
            "{error:?}"
        );
        // Only the winner's commit is there.
        assert_eq!(
            racing.thread_version(&ThreadId::new("t")).unwrap(),
            version + 1
        );
    }
}
