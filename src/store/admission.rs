//! Admission: the one place that decides whether a commit is accepted (SPEC §7, §7.1).
//!
//! Every backend commits the same way: read the [`CommitHead`] (what the store holds about
//! the commit's thread, run and operation) in one consistent snapshot, call [`admit`] (or
//! [`admit_commit`] for an unfenced commit), and then do what the [`Admission`] says —
//! return the stored receipt, return the rejection and write nothing, or write the
//! [`AppendPlan`]. The order of the checks is written here once, so `MemoryStore`, SQLite and
//! PostgreSQL cannot drift apart:
//!
//! 1. `validate` the commit (a malformed commit is rejected before anything is looked up);
//! 2. (operations) the operation's run is the commit's run;
//! 3. (operations) a stored operation with the same id: same payload hash → its receipt with
//!    `duplicate = true` (a lost acknowledgement retried), another hash → `PayloadMismatch`;
//! 4. the thread claim (§7.2, [`check_commit_claim`]): with the operation's token, the
//!    thread's current claim must be that one and unexpired at store time (`ClaimLost`);
//!    without one, the thread must have no live claim (`ClaimHeld`) — an unfenced commit is
//!    checked as an operation without a token;
//! 5. (operations) `expected_thread_version` equals the thread's commit count, because a writer
//!    that built on an older version is a second writer;
//! 6. (operations) the ordinal equals the run's stored commit count;
//! 7. the terminal fence: nothing is committed after a run's `Ended`;
//! 8. a run id committed on another thread is refused;
//! 9. every counter the append advances has room (store-wide sequences when the backend
//!    allocates them from what it read, then the thread version, the run's commit count, the
//!    transcript and state positions), so an append can never fail halfway.
//!
//! Duplicates are answered before the fences of 4–8 because a retried operation whose first
//! attempt landed must get its receipt even though the thread has moved on since.

use crate::commit::{CommitError, CommitOperation, CommitReceipt, CommitRecord, ThreadCommit};
use crate::ids::ThreadId;
use crate::run::RunState;
use crate::store::claims::{ClaimRecord, check_commit_claim};
use crate::store::ports::chain_digest;

/// What a store holds about one commit's thread, run and operation, read in one consistent
/// snapshot before [`admit`] decides.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitHead {
    /// The thread's commit count (0 for a thread with no commit).
    pub thread_version: u64,
    /// How many messages the thread's transcript holds.
    pub message_count: u64,
    /// How many state commands the thread holds.
    pub state_count: u64,
    /// The chained digest of the thread's transcript (`""` when it is empty).
    pub transcript_digest: String,
    /// The commit's run as stored, if it is.
    pub run: Option<RunHead>,
    /// The receipt stored under the operation's id, if any (operations only; `None` for an
    /// unfenced commit).
    pub stored_operation: Option<CommitReceipt>,
    /// The store-wide sequences, for a backend that allocates them densely from what it read
    /// (`MemoryStore`, SQLite). `None` for a backend that allocates them itself (from a
    /// database sequence): then the plan leaves them to it.
    pub sequences: Option<StoreSequences>,
    /// The largest value any counter may hold: `u64::MAX` in memory, `i64::MAX` for a SQL
    /// `bigint` column.
    pub counter_limit: u64,
    /// The thread's claim as stored (its latest grant, live or not), if it was ever claimed.
    pub claim: Option<ClaimRecord>,
    /// Store time, for the claim check (SPEC §7.2: the caller's for `MemoryStore` and
    /// SQLite, the server's for PostgreSQL).
    pub now_ms: u64,
}

impl CommitHead {
    /// The head of a thread with no commit, for a backend whose counters go to `counter_limit`.
    pub fn empty(counter_limit: u64) -> Self {
        CommitHead {
            thread_version: 0,
            message_count: 0,
            state_count: 0,
            transcript_digest: String::new(),
            run: None,
            stored_operation: None,
            sequences: None,
            counter_limit,
            claim: None,
            now_ms: 0,
        }
    }
}

/// A run as stored, as far as admission needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunHead {
    /// The thread the run was first committed on.
    pub thread_id: ThreadId,
    /// Its latest committed state.
    pub state: RunState,
    /// How many commits of the run are stored.
    pub commits: u64,
}

/// The last store-wide sequences handed out (0 when none was).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSequences {
    /// The last commit sequence.
    pub last_commit: u64,
    /// The last event sequence.
    pub last_event: u64,
}

/// What [`admit`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// The operation is already stored with the same payload: return this receipt
    /// (`duplicate = true`) and write nothing.
    Duplicate(CommitReceipt),
    /// The contract rejects the commit: return the error and write nothing.
    Reject(CommitError),
    /// Accepted: write the commit as planned, in one atomic step.
    Append(AppendPlan),
}

/// Where an accepted commit goes: every number the backend writes besides the commit's own
/// content.
#[derive(Debug, Clone, PartialEq)]
pub struct AppendPlan {
    /// The thread has no commit yet (its head row is created, not updated).
    pub new_thread: bool,
    /// The run has no commit yet (its row is created, not updated).
    pub new_run: bool,
    /// The thread's version after the commit.
    pub thread_version: u64,
    /// The run's commit count after the commit.
    pub run_commits: u64,
    /// The transcript position of the commit's first message (its messages take
    /// `message_start..message_start + n`).
    pub message_start: u64,
    /// The position of the commit's first state command.
    pub state_start: u64,
    /// The chained transcript digest after each of the commit's messages, in order (the last
    /// is the thread's new transcript digest).
    pub digests: Vec<String>,
    /// The commit's sequence, when the head carried the store's sequences.
    pub commit_sequence: Option<u64>,
    /// The sequence of the commit's first event (its events take consecutive sequences), when
    /// the head carried the store's sequences.
    pub first_event_sequence: Option<u64>,
}

impl AppendPlan {
    /// The thread's transcript digest after the commit (`previous` when it adds no message).
    pub fn transcript_digest<'a>(&'a self, previous: &'a str) -> &'a str {
        self.digests.last().map_or(previous, String::as_str)
    }

    /// The record of the commit once it is written at `sequence`.
    pub fn record(&self, sequence: u64) -> CommitRecord {
        CommitRecord {
            sequence,
            thread_version: self.thread_version,
        }
    }
}

/// Decides a fenced, idempotent [`CommitOperation`] against what the store holds (the order
/// is in the module documentation).
pub fn admit(operation: &CommitOperation, head: &CommitHead) -> Admission {
    match admit_fenced(operation, head) {
        Ok(plan) => plan,
        Err(error) => Admission::Reject(error),
    }
}

/// Decides an unfenced commit (`CommitLog::commit`): the rules of §7 without the operation's
/// checks.
pub fn admit_commit(commit: &ThreadCommit, head: &CommitHead) -> Admission {
    let checked = commit
        .validate()
        .and_then(|()| check_commit_claim(None, head.claim.as_ref(), head.now_ms))
        .and_then(|()| plan(commit, head));
    match checked {
        Ok(plan) => Admission::Append(plan),
        Err(error) => Admission::Reject(error),
    }
}

fn admit_fenced(operation: &CommitOperation, head: &CommitHead) -> Result<Admission, CommitError> {
    let commit = &operation.commit;
    commit.validate()?;
    let id = &operation.operation_id;
    if id.run_id != *commit.run_id() {
        return Err(CommitError::OperationRunMismatch {
            operation_run: id.run_id.clone(),
            commit_run: commit.run_id().clone(),
        });
    }
    if let Some(stored) = &head.stored_operation {
        if stored.payload_hash == operation.payload_hash {
            return Ok(Admission::Duplicate(CommitReceipt {
                duplicate: true,
                ..stored.clone()
            }));
        }
        return Err(CommitError::PayloadMismatch {
            run_id: id.run_id.clone(),
            ordinal: id.ordinal,
            stored: stored.payload_hash.clone(),
            got: operation.payload_hash.clone(),
        });
    }
    check_commit_claim(operation.claim.as_ref(), head.claim.as_ref(), head.now_ms)?;
    if operation.expected_thread_version != head.thread_version {
        return Err(CommitError::VersionConflict {
            expected: operation.expected_thread_version,
            actual: head.thread_version,
        });
    }
    let committed = head.run.as_ref().map_or(0, |run| run.commits);
    if id.ordinal != committed {
        return Err(CommitError::OrdinalConflict {
            expected: committed,
            got: id.ordinal,
        });
    }
    Ok(Admission::Append(plan(commit, head)?))
}

/// The rules every commit passes (terminal fence, run on another thread, counters) and the
/// plan of its write.
fn plan(commit: &ThreadCommit, head: &CommitHead) -> Result<AppendPlan, CommitError> {
    let run_id = commit.run_id();
    if let Some(run) = &head.run {
        if let RunState::Ended(cause) = &run.state {
            return Err(CommitError::AlreadyTerminal {
                run_id: run_id.clone(),
                cause: cause.clone(),
            });
        }
        if run.thread_id != commit.thread_id {
            return Err(CommitError::RunOnOtherThread {
                run_id: run_id.clone(),
                existing_thread: run.thread_id.clone(),
                commit_thread: commit.thread_id.clone(),
            });
        }
    }
    let limit = head.counter_limit;
    let advance = |base: u64, by: usize, counter: &str| -> Result<u64, CommitError> {
        u64::try_from(by)
            .ok()
            .and_then(|by| base.checked_add(by))
            .filter(|&next| next <= limit)
            .ok_or_else(|| CommitError::CounterOverflow {
                counter: counter.to_owned(),
            })
    };
    let (commit_sequence, first_event_sequence) = match head.sequences {
        Some(sequences) => {
            let commit_sequence = advance(sequences.last_commit, 1, "commit sequence")?;
            advance(sequences.last_event, commit.events.len(), "event sequence")?;
            (
                Some(commit_sequence),
                Some(sequences.last_event.saturating_add(1)),
            )
        }
        None => (None, None),
    };
    let thread_version = advance(head.thread_version, 1, "thread version")?;
    let run_commits = advance(
        head.run.as_ref().map_or(0, |run| run.commits),
        1,
        "run commit count",
    )?;
    advance(
        head.message_count,
        commit.messages.len(),
        "message position",
    )?;
    advance(head.state_count, commit.state.len(), "state position")?;

    let mut digest = head.transcript_digest.clone();
    let digests = commit
        .messages
        .iter()
        .map(|message| {
            digest = chain_digest(&digest, message);
            digest.clone()
        })
        .collect();
    Ok(AppendPlan {
        new_thread: head.thread_version == 0,
        new_run: head.run.is_none(),
        thread_version,
        run_commits,
        message_start: head.message_count,
        state_start: head.state_count,
        digests,
        commit_sequence,
        first_event_sequence,
    })
}
