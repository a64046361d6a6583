//! One claimed session (SPEC §7.2): the bracket every host operation that changes a thread it
//! does not hold writes — claim the thread, recover its agent from what is committed, commit
//! each output under the claim's token with the store's clock, release — written once.
//!
//! [`answer_permission`](super::answer_permission), the sweep's
//! [`act_under_claim`](super::act_under_claim) and the durable driver's
//! [`start_claimed`](super::DurableDriver::start_claimed) all hold a [`ClaimedSession`]; an
//! operation that never claims (the Restate worker, whose virtual object is the thread's single
//! writer) takes the same commit path through [`commit_operation_for`] with no claim. A live
//! claim of another owner is one error everywhere, [`ClaimHeld`].

use crate::agent::{Agent, AgentCommit, AgentConfig, Output, RecoverError, RecoveryPolicy};
use crate::commit::{CommitError, CommitOperation, CommitReceipt};
use crate::ids::ThreadId;
use crate::store::claims::{Claim, ClaimRequest};
use crate::store::{CheckpointReader, CommitLog, StoreError, ThreadClaims};

/// How a durable driver claims its thread (SPEC §7.2, §12.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimOptions {
    /// The host's name for this process start (`runcore drive` defaults to host name, pid and
    /// start time).
    pub owner: String,
    /// Names this process start's claim attempt: a retry with it while its claim is live gets
    /// the same claim back, so it must differ between starts (a restart that reuses an owner
    /// id must not inherit a live claim silently). `runcore drive` uses its pid and start
    /// time.
    pub request_id: String,
    /// How long each claim or renew lasts, in milliseconds.
    pub lease_ms: u64,
    /// The safety margin: the driver stops trusting its claim this long before the lease it
    /// last obtained runs out by its own clock. `None`: a fifth of the lease.
    pub margin_ms: Option<u64>,
}

impl ClaimOptions {
    /// Options for `owner` with `lease_ms`, the default margin, and the owner id as the
    /// request id (set [`request_id`](ClaimOptions::request_id) to tell starts apart when an
    /// owner id is reused).
    pub fn new(owner: impl Into<String>, lease_ms: u64) -> Self {
        let owner = owner.into();
        ClaimOptions {
            request_id: owner.clone(),
            owner,
            lease_ms,
            margin_ms: None,
        }
    }

    /// The claim request the driver makes for `thread` (a retry of it while the claim is
    /// live returns the same claim).
    pub fn request(&self, thread: &ThreadId) -> ClaimRequest {
        ClaimRequest {
            thread_id: thread.clone(),
            owner: self.owner.clone(),
            request_id: self.request_id.clone(),
            lease_ms: self.lease_ms,
        }
    }

    pub(super) fn margin(&self) -> u64 {
        self.margin_ms
            .unwrap_or(self.lease_ms / 5)
            .min(self.lease_ms)
    }
}

/// Another owner holds the thread's claim, live at store time: nothing was read or written
/// (SPEC §7.2; the CLI exits 4, the console answers `409 claim_held`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "thread {:?} is claimed by {owner:?} until {expires_at_ms} (store time)",
    thread_id.as_str()
)]
pub struct ClaimHeld {
    /// The thread.
    pub thread_id: ThreadId,
    /// Who holds it.
    pub owner: String,
    /// When that claim expires, in store time.
    pub expires_at_ms: u64,
}

/// Why a [`ClaimedSession`] could not be opened. Nothing was written.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum OpenError {
    /// Another owner holds the thread live.
    #[error(transparent)]
    Held(ClaimHeld),
    /// The store refused the request (a malformed owner or lease is
    /// [`CommitError::InvalidClaim`]) or failed.
    #[error(transparent)]
    Store(StoreError),
}

/// What a session's [`commit_outputs`](ClaimedSession::commit_outputs) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedAct {
    /// How many commits the agent emitted and the store took.
    pub commits: usize,
    /// The thread's version after them.
    pub version: u64,
}

/// The fenced operation of an agent commit: under `claim`'s token at store time `now_ms` when
/// there is a claim, plain otherwise. Every host commits the agent's commits through here.
pub fn commit_operation_for(
    commit: AgentCommit,
    claim: Option<&Claim>,
    now_ms: u64,
) -> CommitOperation {
    let operation = commit.into_operation();
    match claim {
        Some(claim) => operation.claimed(claim.token(), now_ms),
        None => operation,
    }
}

/// A thread claimed by this host: what it recovers and commits happens under the claim, and
/// [`release`](ClaimedSession::release) gives it back. [`ClaimedSession::run`] is the whole
/// bracket, releasing whatever happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedSession {
    claim: Claim,
}

impl ClaimedSession {
    /// Claims `thread` for `options.owner` at store time `now_ms`, before anything of it is
    /// read: another owner's live claim is [`OpenError::Held`].
    pub fn open<S: ThreadClaims + ?Sized>(
        store: &mut S,
        options: &ClaimOptions,
        thread: &ThreadId,
        now_ms: u64,
    ) -> Result<ClaimedSession, OpenError> {
        match store.claim_thread(&options.request(thread), now_ms) {
            Ok(claim) => Ok(ClaimedSession { claim }),
            Err(StoreError::Rejected(CommitError::ClaimHeld {
                owner,
                expires_at_ms,
            })) => Err(OpenError::Held(ClaimHeld {
                thread_id: thread.clone(),
                owner,
                expires_at_ms,
            })),
            Err(other) => Err(OpenError::Store(other)),
        }
    }

    /// The claim held.
    pub fn claim(&self) -> &Claim {
        &self.claim
    }

    /// The claimed thread.
    pub fn thread_id(&self) -> &ThreadId {
        &self.claim.thread_id
    }

    /// Recovers the claimed thread's agent under `policy`, with `config` (its thread id is
    /// set to the claimed thread).
    pub fn recover<S: CommitLog + CheckpointReader + ?Sized>(
        &self,
        store: &mut S,
        mut config: AgentConfig,
        policy: RecoveryPolicy,
    ) -> Result<Agent, RecoverError> {
        config.thread_id = self.claim.thread_id.clone();
        Agent::recover(config, &store, &self.claim.thread_id, policy)
    }

    /// Commits one agent commit, fenced, under the claim at store time `now_ms`.
    pub fn commit<S: CommitLog + ?Sized>(
        &self,
        store: &mut S,
        commit: AgentCommit,
        now_ms: u64,
    ) -> Result<CommitReceipt, StoreError> {
        store.commit_operation(commit_operation_for(commit, Some(&self.claim), now_ms))
    }

    /// Drains `agent`, committing every commit it emits under the claim (what else it emits,
    /// a model call or tools, is left to the thread's next worker).
    pub fn commit_outputs<S: CommitLog + CheckpointReader + ?Sized>(
        &self,
        store: &mut S,
        agent: &mut Agent,
        now_ms: u64,
    ) -> Result<ClaimedAct, StoreError> {
        let mut act = ClaimedAct {
            commits: 0,
            version: store.thread_version(&self.claim.thread_id)?,
        };
        while let Some(output) = agent.poll() {
            if let Output::Commit(commit) = output {
                act.version = self.commit(store, *commit, now_ms)?.record.thread_version;
                act.commits += 1;
            }
        }
        Ok(act)
    }

    /// Renews the claim for `lease_ms` more at store time `now_ms` (a lost claim is
    /// [`CommitError::ClaimLost`]); the session then holds the renewed claim.
    pub fn renew<S: ThreadClaims + ?Sized>(
        &mut self,
        store: &mut S,
        lease_ms: u64,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.claim = store.renew_claim(&self.claim, lease_ms, now_ms)?;
        Ok(())
    }

    /// Releases the claim at store time `now_ms`, so the next owner need not wait for the
    /// lease.
    pub fn release<S: ThreadClaims + ?Sized>(
        self,
        store: &mut S,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        store.release_claim(&self.claim, now_ms)
    }

    /// The whole bracket: opens a session on `thread`, runs `body` with it, and releases the
    /// claim whatever `body` answered. `body`'s error comes first; a failed release after a
    /// successful body is the store's error.
    pub fn run<S, T, E>(
        store: &mut S,
        options: &ClaimOptions,
        thread: &ThreadId,
        now_ms: u64,
        body: impl FnOnce(&mut S, &ClaimedSession) -> Result<T, E>,
    ) -> Result<T, E>
    where
        S: ThreadClaims + ?Sized,
        E: From<OpenError> + From<StoreError>,
    {
        let session = ClaimedSession::open(store, options, thread, now_ms)?;
        let outcome = body(store, &session);
        let released = session.release(store, now_ms);
        let value = outcome?;
        released?;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use crate::store::ports::CommittedThreadView;

    fn options(owner: &str) -> ClaimOptions {
        ClaimOptions::new(owner, 10_000)
    }

    #[derive(Debug, PartialEq)]
    enum Failed {
        Open(OpenError),
        Store(StoreError),
        Body,
    }
    impl From<OpenError> for Failed {
        fn from(e: OpenError) -> Self {
            Failed::Open(e)
        }
    }
    impl From<StoreError> for Failed {
        fn from(e: StoreError) -> Self {
            Failed::Store(e)
        }
    }

    #[test]
    fn a_live_claim_of_another_owner_is_held_and_the_body_never_runs() {
        let mut store = MemoryStore::new();
        let thread = ThreadId::new("t");
        let live = store
            .claim_thread(&options("worker").request(&thread), 100)
            .unwrap();
        let mut ran = false;
        let error = ClaimedSession::run(&mut store, &options("sweeper"), &thread, 200, |_, _| {
            ran = true;
            Ok::<(), Failed>(())
        })
        .unwrap_err();
        assert!(!ran);
        assert_eq!(
            error,
            Failed::Open(OpenError::Held(ClaimHeld {
                thread_id: thread.clone(),
                owner: "worker".into(),
                expires_at_ms: 10_100,
            }))
        );
        assert_eq!(
            error.to_string_lossy(),
            "thread \"t\" is claimed by \"worker\" until 10100 (store time)"
        );
        assert_eq!(store.thread_claim(&thread, 200).unwrap(), Some(live));
    }

    #[test]
    fn the_claim_is_released_when_the_body_fails_and_when_it_succeeds() {
        let mut store = MemoryStore::new();
        let thread = ThreadId::new("t");
        let failed = ClaimedSession::run(&mut store, &options("a"), &thread, 5, |store, s| {
            assert_eq!(s.thread_id(), &thread);
            assert!(store.thread_claim(&thread, 5).unwrap().is_some());
            Err::<(), _>(Failed::Body)
        });
        assert_eq!(failed, Err(Failed::Body));
        assert_eq!(store.thread_claim(&thread, 6).unwrap(), None);
        let done = ClaimedSession::run(&mut store, &options("b"), &thread, 7, |store, s| {
            Ok::<_, Failed>(store.thread_claim(&thread, 7).unwrap() == Some(s.claim().clone()))
        });
        assert_eq!(done, Ok(true));
        assert_eq!(store.thread_claim(&thread, 8).unwrap(), None);
        assert_eq!(store.thread_version(&thread).unwrap(), 0);
    }

    impl Failed {
        fn to_string_lossy(&self) -> String {
            match self {
                Failed::Open(e) => e.to_string(),
                other => format!("{other:?}"),
            }
        }
    }
}
