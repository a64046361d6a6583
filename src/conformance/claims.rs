//! Cases about thread claims and due work (SPEC §7.2, §7.3).
//!
//! Store time is the caller's for some backends and the server's for others (PostgreSQL), so
//! these cases pass the machine's wall clock as `now_ms` and let real time pass for expiry
//! (short leases, short sleeps): every backend then sees the same times, whichever clock it
//! reads.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::CaseResult;
use super::support::{
    accepted, awaiting, commit, ended, ensure, expect_eq, identity, read, rejected_with_code,
    running, thread,
};
use crate::commit::{CommitError, CommitOperation};
use crate::ids::{CallId, RunId};
use crate::resume::{PendingTool, ResumeTicket, ToolWaitReason};
use crate::run::EndCause;
use crate::store::claims::{Claim, ClaimRequest, DueReason};
use crate::store::{StoreError, StoreHandles};

/// A lease long enough never to expire during a case.
const LONG_LEASE_MS: u64 = 60_000;
/// A lease that expires within a case.
const SHORT_LEASE_MS: u64 = 300;

/// Wall-clock milliseconds since the Unix epoch.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Sleeps until a lease of `lease_ms` granted at `granted_at` has surely expired.
fn outlive(granted_at: u64, lease_ms: u64) {
    let until = granted_at.saturating_add(lease_ms).saturating_add(150);
    let wait = until.saturating_sub(now());
    std::thread::sleep(Duration::from_millis(wait));
}

fn request(thread_id: &str, owner: &str, request_id: &str, lease_ms: u64) -> ClaimRequest {
    ClaimRequest {
        thread_id: thread(thread_id),
        owner: owner.to_owned(),
        request_id: request_id.to_owned(),
        lease_ms,
    }
}

fn code_of(result: Result<Claim, StoreError>) -> String {
    match result {
        Ok(claim) => format!("granted {claim:?}"),
        Err(StoreError::Rejected(error)) => error.code().to_owned(),
        Err(other) => format!("backend failure: {other}"),
    }
}

/// A claim is granted when none is live, refused (`ClaimHeld`, naming the owner) while one is,
/// and `thread_claim` shows the live one; a retry of the same request gets the same claim.
pub fn claims_are_granted_and_refused<S: StoreHandles>(store: &mut S) -> CaseResult {
    let t = thread("claimed");
    expect_eq(
        "thread_claim of a never-claimed thread",
        &None,
        &read("thread_claim", store.thread_claim(&t, now()))?,
    )?;
    let first = accepted(
        "claim by a",
        store.claim_thread(&request("claimed", "a", "a-1", LONG_LEASE_MS), now()),
    )?;
    expect_eq("the first epoch", &1, &first.epoch)?;
    expect_eq("the owner", &"a", &first.owner.as_str())?;
    let retried = accepted(
        "the same request again (a lost response)",
        store.claim_thread(&request("claimed", "a", "a-1", LONG_LEASE_MS), now()),
    )?;
    expect_eq("the retried claim", &first, &retried)?;
    match store.claim_thread(&request("claimed", "b", "b-1", LONG_LEASE_MS), now()) {
        Err(StoreError::Rejected(CommitError::ClaimHeld {
            owner,
            expires_at_ms,
        })) => {
            expect_eq("ClaimHeld's owner", &"a", &owner.as_str())?;
            expect_eq("ClaimHeld's expiry", &first.expires_at_ms, &expires_at_ms)?;
        }
        other => {
            return Err(format!(
                "a claim by b while a holds it: expected ClaimHeld, got {other:?}"
            )
            .into());
        }
    }
    // The same owner with a new request id (a restart reusing its owner id) is refused too:
    // it does not inherit the live claim silently.
    expect_eq(
        "a new request of the same owner while its claim is live",
        &"claim_held".to_owned(),
        &code_of(store.claim_thread(&request("claimed", "a", "a-2", LONG_LEASE_MS), now())),
    )?;
    expect_eq(
        "thread_claim while a holds it",
        &Some(first),
        &read("thread_claim", store.thread_claim(&t, now()))?,
    )?;
    Ok(())
}

/// Every new grant increases the epoch by one, after a release and after an expiry alike; a
/// stale claim can neither renew nor release, and never ends a newer one.
pub fn claim_epochs_grow_and_stale_claims_are_lost<S: StoreHandles>(store: &mut S) -> CaseResult {
    let t = thread("epochs");
    let first = accepted(
        "claim by a",
        store.claim_thread(&request("epochs", "a", "a-1", LONG_LEASE_MS), now()),
    )?;
    accepted("release by a", store.release_claim(&first, now()))?;
    expect_eq(
        "thread_claim after release",
        &None,
        &read("thread_claim", store.thread_claim(&t, now()))?,
    )?;
    let granted_at = now();
    let second = accepted(
        "claim by b after a released",
        store.claim_thread(&request("epochs", "b", "b-1", SHORT_LEASE_MS), granted_at),
    )?;
    expect_eq("the epoch after a release", &2, &second.epoch)?;
    outlive(granted_at, SHORT_LEASE_MS);
    expect_eq(
        "thread_claim after expiry",
        &None,
        &read("thread_claim", store.thread_claim(&t, now()))?,
    )?;
    expect_eq(
        "renewing an expired claim",
        &"claim_lost".to_owned(),
        &code_of(store.renew_claim(&second, LONG_LEASE_MS, now())),
    )?;
    let third = accepted(
        "claim by c after b expired",
        store.claim_thread(&request("epochs", "c", "c-1", LONG_LEASE_MS), now()),
    )?;
    expect_eq("the epoch after an expiry", &3, &third.epoch)?;
    match store.renew_claim(&first, LONG_LEASE_MS, now()) {
        Err(StoreError::Rejected(CommitError::ClaimLost { current_epoch })) => {
            expect_eq("ClaimLost's current epoch", &3, &current_epoch)?;
        }
        other => return Err(format!("renewing epoch 1: expected ClaimLost, got {other:?}").into()),
    }
    accepted(
        "a stale release (a no-op)",
        store.release_claim(&second, now()),
    )?;
    expect_eq(
        "thread_claim after a stale release",
        &Some(third.clone()),
        &read("thread_claim", store.thread_claim(&t, now()))?,
    )?;
    let renewed = accepted(
        "renewing the current claim",
        store.renew_claim(&third, LONG_LEASE_MS, now()),
    )?;
    expect_eq("the renewed epoch", &3, &renewed.epoch)?;
    ensure(renewed.expires_at_ms >= third.expires_at_ms, || {
        format!("a renew moved the expiry back: {third:?} → {renewed:?}")
    })
}

/// A commit on a claimed thread must carry the current claim's token: a stale epoch, an
/// expired claim, a missing token or a malformed one is rejected and writes nothing; the
/// current token commits. A lost-ack retry of a stored operation still gets its receipt.
pub fn claimed_commits_are_fenced<S: StoreHandles>(store: &mut S) -> CaseResult {
    let t = thread("fenced");
    let granted_at = now();
    let stale = accepted(
        "claim by a",
        store.claim_thread(&request("fenced", "a", "a-1", SHORT_LEASE_MS), granted_at),
    )?;
    let first = CommitOperation::new(commit("fenced", running("r1"), vec![], vec![]), 0, 0);
    let receipt = accepted(
        "a's first commit",
        store.commit_operation(first.clone().claimed(stale.token(), now())),
    )?;
    rejected_with_code(
        "a commit without a token while a's claim is live",
        store.commit_operation(CommitOperation::new(
            commit("fenced", running("r1"), vec![], vec![]),
            1,
            1,
        )),
        "claim_held",
    )?;
    outlive(granted_at, SHORT_LEASE_MS);
    let next = || CommitOperation::new(commit("fenced", running("r1"), vec![], vec![]), 1, 1);
    rejected_with_code(
        "a commit under a's expired claim",
        store.commit_operation(next().claimed(stale.token(), now())),
        "claim_lost",
    )?;
    let current = accepted(
        "claim by b",
        store.claim_thread(&request("fenced", "b", "b-1", LONG_LEASE_MS), now()),
    )?;
    rejected_with_code(
        "a commit under a's stale epoch",
        store.commit_operation(next().claimed(stale.token(), now())),
        "claim_lost",
    )?;
    let mut malformed = current.token();
    malformed.epoch = 0;
    rejected_with_code(
        "a commit with a malformed token",
        store.commit_operation(next().claimed(malformed, now())),
        "invalid_claim",
    )?;
    expect_eq(
        "thread_version after the refused commits",
        &1,
        &read("thread_version", store.thread_version(&t))?,
    )?;
    let retry = accepted(
        "a lost-ack retry of a's stored first commit",
        store.commit_operation(first.claimed(stale.token(), now())),
    )?;
    ensure(retry.duplicate && retry.record == receipt.record, || {
        format!("the retry should get the stored receipt {receipt:?}, got {retry:?}")
    })?;
    accepted(
        "b's commit under the current claim",
        store.commit_operation(
            CommitOperation::new(
                commit("fenced", ended("r1", EndCause::NaturalEnd), vec![], vec![]),
                1,
                1,
            )
            .claimed(current.token(), now()),
        ),
    )?;
    expect_eq(
        "thread_version after b's commit",
        &2,
        &read("thread_version", store.thread_version(&t))?,
    )
}

/// Malformed claim requests are refused with `invalid_claim` and nothing is claimed.
pub fn bad_claim_requests_are_refused<S: StoreHandles>(store: &mut S) -> CaseResult {
    let cases = [
        ("an empty owner", request("bad", "", "r", LONG_LEASE_MS)),
        (
            "an oversized owner",
            request("bad", &"o".repeat(10_000), "r", LONG_LEASE_MS),
        ),
        (
            "an empty request id",
            request("bad", "a", "", LONG_LEASE_MS),
        ),
        ("a zero lease", request("bad", "a", "r", 0)),
        (
            "a lease over the maximum",
            request("bad", "a", "r", crate::store::claims::MAX_LEASE_MS + 1),
        ),
    ];
    for (what, bad) in cases {
        expect_eq(
            what,
            &"invalid_claim".to_owned(),
            &code_of(store.claim_thread(&bad, now())),
        )?;
    }
    expect_eq(
        "thread_claim after the refused requests",
        &None,
        &read("thread_claim", store.thread_claim(&thread("bad"), now()))?,
    )
}

/// Owners racing from several OS threads for one thread: exactly one is granted.
pub fn racing_owners_get_one_claim<S: StoreHandles>(store: &mut S) -> CaseResult {
    const OWNERS: usize = 4;
    let mut handles = Vec::with_capacity(OWNERS);
    for i in 0..OWNERS {
        handles.push(read(&format!("open_handle {i}"), store.open_handle())?);
    }
    let outcomes: Vec<Result<Claim, StoreError>> = std::thread::scope(|scope| {
        let racing: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(i, mut handle)| {
                scope.spawn(move || {
                    let owner = format!("owner-{i}");
                    handle.claim_thread(&request("raced", &owner, "1", LONG_LEASE_MS), now())
                })
            })
            .collect();
        racing
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(StoreError::unavailable("a racing thread panicked")))
            })
            .collect()
    });
    let mut winners = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(claim) => winners.push(claim),
            Err(StoreError::Rejected(CommitError::ClaimHeld { .. })) => {}
            Err(other) => return Err(format!("a racing claim failed: {other}").into()),
        }
    }
    ensure(winners.len() == 1, || {
        format!("exactly one racing owner should hold the thread, these did: {winners:?}")
    })?;
    expect_eq(
        "thread_claim after the race",
        &Some(winners.remove(0)),
        &read("thread_claim", store.thread_claim(&thread("raced"), now()))?,
    )
}

fn ticket_with_deadline(thread_id: &str, run_id: &str, deadline_ms: u64) -> ResumeTicket {
    ResumeTicket::tool_call(
        identity(thread_id, run_id, "wait-1"),
        ToolWaitReason::Permission,
        CallId::new("call-1"),
        PendingTool {
            name: "deploy".into(),
            arguments: serde_json::json!({}).into(),
        },
        Some(deadline_ms),
    )
}

/// `due_work` lists Awaiting runs whose deadline has passed and orphaned runs (latest run
/// Running, claimed once, no live claim), in the order each became due; a deadline not yet
/// passed, a live claim, an ended run and a never-claimed Running thread are not listed.
pub fn due_work_lists_deadlines_and_orphans<S: StoreHandles>(store: &mut S) -> CaseResult {
    let start = now();
    // Deadlines: one long passed, one just passed, one far ahead.
    for (thread_id, deadline) in [
        ("d-late", start.saturating_sub(5_000)),
        ("d-early", start.saturating_sub(10_000)),
        ("d-future", start.saturating_add(3_600_000)),
    ] {
        let run_id = format!("{thread_id}/run-1");
        accepted(
            &format!("the wait of {thread_id}"),
            store.commit(commit(
                thread_id,
                awaiting(ticket_with_deadline(thread_id, &run_id, deadline)),
                vec![],
                vec![],
            )),
        )?;
    }
    // Never claimed: not an orphan.
    accepted(
        "a running, never-claimed thread",
        store.commit(commit(
            "unclaimed",
            running("unclaimed/run-1"),
            vec![],
            vec![],
        )),
    )?;
    // Orphaned: claimed, a Running commit under the claim, then released.
    let claim = accepted(
        "claim of the orphan's thread",
        store.claim_thread(&request("orphan", "w", "1", LONG_LEASE_MS), now()),
    )?;
    accepted(
        "the orphan's running commit",
        store.commit_operation(
            CommitOperation::new(
                commit("orphan", running("orphan/run-1"), vec![], vec![]),
                0,
                0,
            )
            .claimed(claim.token(), now()),
        ),
    )?;
    accepted(
        "the orphan's owner leaves",
        store.release_claim(&claim, now()),
    )?;
    // Live claim: not an orphan.
    let live = accepted(
        "claim of a live thread",
        store.claim_thread(&request("live", "w", "1", LONG_LEASE_MS), now()),
    )?;
    accepted(
        "the live thread's running commit",
        store.commit_operation(
            CommitOperation::new(commit("live", running("live/run-1"), vec![], vec![]), 0, 0)
                .claimed(live.token(), now()),
        ),
    )?;
    let due = read("due_work", store.due_work(now(), 100))?;
    let listed: Vec<(String, &'static str)> = due
        .iter()
        .map(|item| (item.run_id.as_str().to_owned(), item.reason.kind()))
        .collect();
    expect_eq(
        "due work, in due order",
        &vec![
            ("d-early/run-1".to_owned(), "deadline"),
            ("d-late/run-1".to_owned(), "deadline"),
            ("orphan/run-1".to_owned(), "orphaned"),
        ],
        &listed,
    )?;
    if let Some(item) = due.first() {
        expect_eq(
            "the first item's reason",
            &DueReason::Deadline {
                deadline_ms: start.saturating_sub(10_000),
            },
            &item.reason,
        )?;
    }
    expect_eq(
        "due_work with limit 1",
        &due.first().cloned().into_iter().collect::<Vec<_>>(),
        &read("due_work", store.due_work(now(), 1))?,
    )?;
    // Answering the wait takes it off the list.
    accepted(
        "the early wait ends",
        store.commit(commit(
            "d-early",
            ended("d-early/run-1", EndCause::Cancelled),
            vec![],
            vec![],
        )),
    )?;
    let after: Vec<RunId> = read("due_work", store.due_work(now(), 100))?
        .into_iter()
        .map(|item| item.run_id)
        .collect();
    expect_eq(
        "due work after the early wait ended",
        &vec![RunId::new("d-late/run-1"), RunId::new("orphan/run-1")],
        &after,
    )
}
