//! Thread claims (SPEC §7.2) and due work (§7.3), as pure decisions every backend shares.
//!
//! A claim is a lease on one thread with an epoch. A store grants it to one owner at a time;
//! every fenced commit of a claimed thread carries its [`ClaimToken`], and [`admit`] checks it
//! (right after the duplicate check, so a lost-ack retry still gets its receipt).
//!
//! The rules, each with its reason:
//! - **Granted only when no claim is live** (never claimed, released, or expired at store
//!   time), because two live owners is exactly what a claim exists to prevent.
//! - **The epoch grows by one with every grant, and survives release and expiry**, so a
//!   token from an older grant can never match a newer one (a zombie that wakes up after its
//!   lease expired is fenced, even if its owner id is reused).
//! - **A retry of the same `(owner, request_id)` while that claim is live returns the same
//!   claim**, because a lost response must not turn into "already taken" for its own holder.
//! - **Renew only extends the current, unexpired claim**; a late renew gets `ClaimLost` and
//!   the holder stops acting. **Release ends only the current claim** and never a newer one.
//! - **Store time decides** expiry. `MemoryStore` and SQLite take the caller's `now_ms` (one
//!   machine, one clock); PostgreSQL reads the server's clock and ignores the caller's.
//!
//! Inputs are checked before anything is read: an empty or oversized owner or request id, a
//! zero lease or one over [`MAX_LEASE_MS`] is an [`InvalidClaim`](CommitError::InvalidClaim)
//! rejection and nothing is written.
//!
//! [`admit`]: crate::store::admit

use serde::{Deserialize, Serialize};

use crate::commit::{ClaimToken, CommitError};
use crate::ids::{RunId, ThreadId};

/// The longest lease a claim may ask for: one day. A longer lease would let a dead owner
/// block a thread for longer than any operator waits.
pub const MAX_LEASE_MS: u64 = 24 * 60 * 60 * 1000;

/// The longest owner or request id, in bytes.
pub const MAX_CLAIM_ID_BYTES: usize = 256;

/// A request for a thread's claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// The thread to own.
    pub thread_id: ThreadId,
    /// The host's name for one process start (unique per start: host, pid and start time).
    pub owner: String,
    /// Names this claim attempt; a retry with the same id gets the same claim.
    pub request_id: String,
    /// How long the claim lasts unless renewed, in milliseconds (1 ..= [`MAX_LEASE_MS`]).
    pub lease_ms: u64,
}

/// A granted claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// The thread.
    pub thread_id: ThreadId,
    /// Who holds it.
    pub owner: String,
    /// Which grant this is (1 for the thread's first; never reused).
    pub epoch: u64,
    /// When it expires, in store time (Unix-epoch milliseconds for shared stores).
    pub expires_at_ms: u64,
}

impl Claim {
    /// The token a fenced commit under this claim carries.
    pub fn token(&self) -> ClaimToken {
        ClaimToken {
            owner: self.owner.clone(),
            epoch: self.epoch,
        }
    }
}

/// A thread's claim as a store keeps it: the latest grant, live or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimRecord {
    /// The owner of the latest grant.
    pub owner: String,
    /// The request id of the latest grant.
    pub request_id: String,
    /// The latest grant's epoch.
    pub epoch: u64,
    /// When it expires (or expired).
    pub expires_at_ms: u64,
    /// When it was released, if it was.
    pub released_at_ms: Option<u64>,
}

impl ClaimRecord {
    /// Whether the claim is live at store time `now_ms`: not released, and `now_ms` before
    /// its expiry.
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.released_at_ms.is_none() && now_ms < self.expires_at_ms
    }

    /// When it stopped being live (released or expired), if it has by `now_ms`.
    pub fn ended_at(&self, now_ms: u64) -> Option<u64> {
        match self.released_at_ms {
            Some(at) => Some(at.min(self.expires_at_ms)),
            None if now_ms >= self.expires_at_ms => Some(self.expires_at_ms),
            None => None,
        }
    }

    /// The claim as handed to its holder.
    pub fn claim(&self, thread_id: &ThreadId) -> Claim {
        Claim {
            thread_id: thread_id.clone(),
            owner: self.owner.clone(),
            epoch: self.epoch,
            expires_at_ms: self.expires_at_ms,
        }
    }
}

/// What [`decide_claim`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimGrant {
    /// A new grant: store this record as the thread's claim, and hand out the claim.
    Granted(ClaimRecord),
    /// A retry of the live grant: hand it out again, write nothing.
    Same(Claim),
}

fn check_id(what: &'static str, id: &str) -> Result<(), CommitError> {
    if id.is_empty() {
        return Err(CommitError::InvalidClaim {
            reason: format!("the {what} is empty"),
        });
    }
    if id.len() > MAX_CLAIM_ID_BYTES {
        return Err(CommitError::InvalidClaim {
            reason: format!(
                "the {what} is {} bytes long; at most {MAX_CLAIM_ID_BYTES} are allowed",
                id.len()
            ),
        });
    }
    Ok(())
}

/// Checks a lease length: 1 ..= [`MAX_LEASE_MS`].
pub fn check_lease(lease_ms: u64) -> Result<(), CommitError> {
    if lease_ms == 0 {
        return Err(CommitError::InvalidClaim {
            reason: "the lease is 0 ms; a claim needs a lease of at least 1 ms".to_owned(),
        });
    }
    if lease_ms > MAX_LEASE_MS {
        return Err(CommitError::InvalidClaim {
            reason: format!("the lease of {lease_ms} ms is over the maximum of {MAX_LEASE_MS} ms"),
        });
    }
    Ok(())
}

/// Checks a claim request's fields (nothing is read or written before this passes).
pub fn check_claim_request(request: &ClaimRequest) -> Result<(), CommitError> {
    if request.thread_id.as_str().is_empty() {
        return Err(CommitError::EmptyThreadId);
    }
    check_id("owner id", &request.owner)?;
    check_id("request id", &request.request_id)?;
    check_lease(request.lease_ms)
}

/// Checks a token's fields (an epoch of 0 is never granted).
pub fn check_token(token: &ClaimToken) -> Result<(), CommitError> {
    check_id("claim token's owner id", &token.owner)?;
    if token.epoch == 0 {
        return Err(CommitError::InvalidClaim {
            reason: "the claim token's epoch is 0; epochs start at 1".to_owned(),
        });
    }
    Ok(())
}

/// Decides `claim_thread` against the thread's stored claim at store time `now_ms`.
pub fn decide_claim(
    request: &ClaimRequest,
    current: Option<&ClaimRecord>,
    now_ms: u64,
) -> Result<ClaimGrant, CommitError> {
    check_claim_request(request)?;
    let expires_at_ms = now_ms.saturating_add(request.lease_ms);
    match current {
        Some(record) if record.is_live(now_ms) => {
            if record.owner == request.owner && record.request_id == request.request_id {
                Ok(ClaimGrant::Same(record.claim(&request.thread_id)))
            } else {
                Err(CommitError::ClaimHeld {
                    owner: record.owner.clone(),
                    expires_at_ms: record.expires_at_ms,
                })
            }
        }
        current => {
            let epoch = current
                .map_or(0, |record| record.epoch)
                .checked_add(1)
                .ok_or_else(|| CommitError::CounterOverflow {
                    counter: "claim epoch".to_owned(),
                })?;
            Ok(ClaimGrant::Granted(ClaimRecord {
                owner: request.owner.clone(),
                request_id: request.request_id.clone(),
                epoch,
                expires_at_ms,
                released_at_ms: None,
            }))
        }
    }
}

/// Whether `claim` is the thread's current, unexpired grant; else `ClaimLost`.
fn current_grant<'a>(
    claim: &Claim,
    current: Option<&'a ClaimRecord>,
    now_ms: u64,
) -> Result<&'a ClaimRecord, CommitError> {
    match current {
        Some(record)
            if record.epoch == claim.epoch
                && record.owner == claim.owner
                && record.is_live(now_ms) =>
        {
            Ok(record)
        }
        other => Err(CommitError::ClaimLost {
            current_epoch: other.map_or(0, |record| record.epoch),
        }),
    }
}

/// Decides `renew_claim`: the record to store (same epoch, expiry `now_ms + lease_ms`), or
/// `ClaimLost` when `claim` is no longer the current, unexpired grant.
pub fn decide_renew(
    claim: &Claim,
    lease_ms: u64,
    current: Option<&ClaimRecord>,
    now_ms: u64,
) -> Result<ClaimRecord, CommitError> {
    check_lease(lease_ms)?;
    check_token(&claim.token())?;
    let record = current_grant(claim, current, now_ms)?;
    Ok(ClaimRecord {
        expires_at_ms: now_ms.saturating_add(lease_ms).max(record.expires_at_ms),
        ..record.clone()
    })
}

/// Decides `release_claim`: the released record to store when `claim` is the current grant
/// and not already released, `None` (a no-op) otherwise.
pub fn decide_release(
    claim: &Claim,
    current: Option<&ClaimRecord>,
    now_ms: u64,
) -> Option<ClaimRecord> {
    let record = current?;
    if record.epoch != claim.epoch || record.owner != claim.owner || record.released_at_ms.is_some()
    {
        return None;
    }
    Some(ClaimRecord {
        released_at_ms: Some(now_ms.min(record.expires_at_ms)),
        ..record.clone()
    })
}

/// The claim check of a fenced commit (§7.2): with a token, the thread's current claim must
/// have that owner and epoch and be unexpired at `now_ms`, else `ClaimLost`; without one, the
/// thread must have no live claim, else `ClaimHeld`.
pub fn check_commit_claim(
    token: Option<&ClaimToken>,
    current: Option<&ClaimRecord>,
    now_ms: u64,
) -> Result<(), CommitError> {
    match token {
        Some(token) => {
            check_token(token)?;
            match current {
                Some(record)
                    if record.epoch == token.epoch
                        && record.owner == token.owner
                        && record.is_live(now_ms) =>
                {
                    Ok(())
                }
                other => Err(CommitError::ClaimLost {
                    current_epoch: other.map_or(0, |record| record.epoch),
                }),
            }
        }
        None => match current {
            Some(record) if record.is_live(now_ms) => Err(CommitError::ClaimHeld {
                owner: record.owner.clone(),
                expires_at_ms: record.expires_at_ms,
            }),
            _ => Ok(()),
        },
    }
}

/// Why a run is due (SPEC §7.3).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum DueReason {
    /// An Awaiting run whose ticket's deadline has passed at store time.
    Deadline {
        /// The ticket's deadline.
        deadline_ms: u64,
    },
    /// The thread's latest run is Running, the thread was claimed at least once, and no claim
    /// is live: its owner died or left mid-run (or a person's decision made it ready).
    Orphaned {
        /// When the last claim expired or was released.
        claim_expired_at_ms: u64,
    },
}

impl DueReason {
    /// When the item became due.
    pub fn due_at_ms(&self) -> u64 {
        match self {
            DueReason::Deadline { deadline_ms } => *deadline_ms,
            DueReason::Orphaned {
                claim_expired_at_ms,
            } => *claim_expired_at_ms,
        }
    }

    /// The reason's tag: `"deadline"` or `"orphaned"`.
    pub fn kind(&self) -> &'static str {
        match self {
            DueReason::Deadline { .. } => "deadline",
            DueReason::Orphaned { .. } => "orphaned",
        }
    }
}

/// One item of due work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DueWork {
    /// The thread.
    pub thread_id: ThreadId,
    /// The run.
    pub run_id: RunId,
    /// Why it is due.
    pub reason: DueReason,
}

/// Orders due work by when each item became due, then by thread and run (a total order, so
/// every backend lists the same items in the same order).
pub fn due_order(a: &DueWork, b: &DueWork) -> std::cmp::Ordering {
    (a.reason.due_at_ms(), &a.thread_id, &a.run_id).cmp(&(
        b.reason.due_at_ms(),
        &b.thread_id,
        &b.run_id,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(owner: &str, request_id: &str) -> ClaimRequest {
        ClaimRequest {
            thread_id: ThreadId::new("t"),
            owner: owner.to_owned(),
            request_id: request_id.to_owned(),
            lease_ms: 100,
        }
    }

    fn granted(grant: Result<ClaimGrant, CommitError>) -> ClaimRecord {
        match grant {
            Ok(ClaimGrant::Granted(record)) => record,
            other => panic!("expected a grant, got {other:?}"),
        }
    }

    #[test]
    fn epochs_grow_across_expiry_and_release() {
        let first = granted(decide_claim(&request("a", "1"), None, 0));
        assert_eq!((first.epoch, first.expires_at_ms), (1, 100));
        // Live: another owner is refused, the same request gets the same claim.
        assert_eq!(
            decide_claim(&request("b", "1"), Some(&first), 99),
            Err(CommitError::ClaimHeld {
                owner: "a".into(),
                expires_at_ms: 100
            })
        );
        assert_eq!(
            decide_claim(&request("a", "1"), Some(&first), 50),
            Ok(ClaimGrant::Same(first.claim(&ThreadId::new("t"))))
        );
        // A new request id of the same owner is another attempt: refused while live.
        assert!(decide_claim(&request("a", "2"), Some(&first), 50).is_err());
        // Expired at exactly expires_at_ms.
        let second = granted(decide_claim(&request("b", "1"), Some(&first), 100));
        assert_eq!(second.epoch, 2);
        let released = decide_release(&second.claim(&ThreadId::new("t")), Some(&second), 120)
            .expect("current");
        assert_eq!(released.released_at_ms, Some(120));
        let third = granted(decide_claim(&request("b", "1"), Some(&released), 121));
        assert_eq!(third.epoch, 3);
    }

    #[test]
    fn stale_renew_release_and_commit_are_refused() {
        let t = ThreadId::new("t");
        let first = granted(decide_claim(&request("a", "1"), None, 0));
        let stale = first.claim(&t);
        let second = granted(decide_claim(&request("b", "1"), Some(&first), 200));
        assert_eq!(
            decide_renew(&stale, 100, Some(&second), 201),
            Err(CommitError::ClaimLost { current_epoch: 2 })
        );
        assert_eq!(decide_release(&stale, Some(&second), 201), None);
        assert_eq!(
            check_commit_claim(Some(&stale.token()), Some(&second), 201),
            Err(CommitError::ClaimLost { current_epoch: 2 })
        );
        assert_eq!(
            check_commit_claim(None, Some(&second), 201),
            Err(CommitError::ClaimHeld {
                owner: "b".into(),
                expires_at_ms: 300
            })
        );
        let current = second.claim(&t);
        assert_eq!(
            check_commit_claim(Some(&current.token()), Some(&second), 299),
            Ok(())
        );
        // Expired: the holder's own token is lost, and an unclaimed commit may go ahead.
        assert_eq!(
            check_commit_claim(Some(&current.token()), Some(&second), 300),
            Err(CommitError::ClaimLost { current_epoch: 2 })
        );
        assert_eq!(check_commit_claim(None, Some(&second), 300), Ok(()));
        let renewed = decide_renew(&current, 500, Some(&second), 250).expect("live");
        assert_eq!((renewed.epoch, renewed.expires_at_ms), (2, 750));
    }

    #[test]
    fn bad_input_is_refused_before_anything_is_read() {
        let mut bad = request("", "1");
        assert!(matches!(
            decide_claim(&bad, None, 0),
            Err(CommitError::InvalidClaim { .. })
        ));
        bad = request(&"x".repeat(MAX_CLAIM_ID_BYTES + 1), "1");
        assert!(matches!(
            decide_claim(&bad, None, 0),
            Err(CommitError::InvalidClaim { .. })
        ));
        bad = request("a", "1");
        bad.lease_ms = 0;
        assert!(decide_claim(&bad, None, 0).is_err());
        bad.lease_ms = MAX_LEASE_MS + 1;
        assert!(decide_claim(&bad, None, 0).is_err());
        let token = ClaimToken {
            owner: "a".into(),
            epoch: 0,
        };
        assert!(matches!(
            check_commit_claim(Some(&token), None, 0),
            Err(CommitError::InvalidClaim { .. })
        ));
    }
}
