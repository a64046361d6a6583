//! Cases about the listings and fences of SPEC §7.1: `thread_version`, `threads`,
//! `pending_tickets`, two writers from one version, and a retry after a lost acknowledgement.

use super::CaseResult;
use super::support::{
    accepted, awaiting, commit, ended, expect_eq, observe, pause_ticket, permission_ticket, read,
    rejected_with, run, running, thread, unchanged, user,
};
use crate::commit::{CommitError, CommitOperation};
use crate::ids::ThreadId;
use crate::run::EndCause;
use crate::store::{CheckpointReader, CommitLog};

/// `thread_version` is 0 for an unknown thread and counts the thread's commits; a run's
/// record counts that run's commits (`commits`, the ordinal of its next commit).
pub fn thread_version_counts_commits<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    let t1 = thread("t1");
    expect_eq(
        "thread_version of an unknown thread",
        &0,
        &read("thread_version", store.thread_version(&t1))?,
    )?;
    for n in 1..=3u64 {
        let disposition = if n == 3 {
            ended("r1", EndCause::NaturalEnd)
        } else {
            running("r1")
        };
        let op = CommitOperation::new(commit("t1", disposition, vec![], vec![]), n - 1, n - 1);
        accepted(&format!("operation {n}"), store.commit_operation(op))?;
        expect_eq(
            &format!("thread_version after commit {n}"),
            &n,
            &read("thread_version", store.thread_version(&t1))?,
        )?;
        let record = read("run", store.run(&run("r1")))?;
        expect_eq(
            &format!("run(r1).commits after commit {n}"),
            &Some(n),
            &record.map(|r| r.commits),
        )?;
    }
    accepted(
        "a commit on another thread",
        store.commit(commit("t2", running("r2"), vec![], vec![])),
    )?;
    expect_eq(
        "thread_version(t1) after a commit on t2",
        &3,
        &read("thread_version", store.thread_version(&t1))?,
    )?;
    Ok(())
}

/// Two writers A and B build on the same version: A's commit lands, B's is rejected with
/// `VersionConflict` and leaves the store exactly as A left it; B is fenced again at its next
/// attempt until it recovers.
pub fn two_writers_from_one_version<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    accepted(
        "the shared history",
        store.commit_operation(CommitOperation::new(
            commit("t1", running("r0"), vec![user("start")], vec![]),
            0,
            0,
        )),
    )?;
    let version = read("thread_version", store.thread_version(&thread("t1")))?;
    let a = CommitOperation::new(
        commit("t1", running("writer-a"), vec![user("from a")], vec![]),
        0,
        version,
    );
    let b = CommitOperation::new(
        commit("t1", running("writer-b"), vec![user("from b")], vec![]),
        0,
        version,
    );
    accepted("writer A", store.commit_operation(a))?;
    let runs = ["r0", "writer-a", "writer-b"];
    let before = observe(store, &["t1"], &runs)?;
    rejected_with(
        "writer B from the same version",
        store.commit_operation(b),
        &CommitError::VersionConflict {
            expected: version,
            actual: version + 1,
        },
    )?;
    unchanged("a fenced writer", &before, &observe(store, &["t1"], &runs)?)?;
    let b_next = CommitOperation::new(
        commit("t1", running("writer-b"), vec![user("b again")], vec![]),
        0,
        version,
    );
    rejected_with(
        "writer B's next commit, still on the old version",
        store.commit_operation(b_next),
        &CommitError::VersionConflict {
            expected: version,
            actual: version + 1,
        },
    )?;
    unchanged(
        "a fenced writer's second try",
        &before,
        &observe(store, &["t1"], &runs)?,
    )
}

/// A retry after a lost acknowledgement (the commit landed, the writer never heard) gets the
/// first receipt with `duplicate = true` and appends nothing; the writer's next commit then
/// builds on the version that receipt reports.
pub fn lost_ack_retry_appends_nothing<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    let op = CommitOperation::new(
        commit("t1", running("r1"), vec![user("hello")], vec![]),
        0,
        0,
    );
    let first = accepted("the first attempt", store.commit_operation(op.clone()))?;
    let before = observe(store, &["t1"], &["r1"])?;
    let retry = accepted("the retry", store.commit_operation(op))?;
    expect_eq("the retry is a duplicate", &true, &retry.duplicate)?;
    expect_eq("the retry's record", &first.record, &retry.record)?;
    unchanged(
        "a retried operation",
        &before,
        &observe(store, &["t1"], &["r1"])?,
    )?;
    let next = CommitOperation::new(
        commit("t1", ended("r1", EndCause::NaturalEnd), vec![], vec![]),
        1,
        retry.record.thread_version,
    );
    let next = accepted("the commit after the retry", store.commit_operation(next))?;
    expect_eq("its sequence", &2, &next.record.sequence)?;
    Ok(())
}

/// `threads` lists every thread ordered by id with its version and head run, paged with an
/// exclusive `after`; a limit of 0 gives an empty page.
pub fn threads_listed_and_paged<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    expect_eq(
        "threads of an empty store",
        &0,
        &read("threads", store.threads(None, 10))?.len(),
    )?;
    // Committed out of id order, with different versions.
    let names = ["t-c", "t-a", "t-e", "t-b", "t-d"];
    for (i, name) in names.iter().enumerate() {
        for k in 0..=i {
            let run_id = format!("{name}-run-{k}");
            accepted(
                &format!("commit {k} on {name}"),
                store.commit(commit(name, running(&run_id), vec![user("x")], vec![])),
            )?;
        }
    }
    let all = read("threads", store.threads(None, usize::MAX))?;
    let ids: Vec<&str> = all.iter().map(|t| t.thread_id.as_str()).collect();
    expect_eq(
        "thread ids, ordered",
        &vec!["t-a", "t-b", "t-c", "t-d", "t-e"],
        &ids,
    )?;
    for summary in &all {
        let position = names
            .iter()
            .position(|n| *n == summary.thread_id.as_str())
            .unwrap_or(usize::MAX);
        let expected_version = position as u64 + 1;
        expect_eq(
            &format!("version of {}", summary.thread_id),
            &expected_version,
            &summary.version,
        )?;
        expect_eq(
            &format!("latest_run of {}", summary.thread_id),
            &read("latest_run", store.latest_run(&summary.thread_id))?,
            &summary.latest_run,
        )?;
    }
    let mut paged: Vec<ThreadId> = Vec::new();
    let mut after: Option<ThreadId> = None;
    for _ in 0..10 {
        let page = read("threads", store.threads(after.as_ref(), 2))?;
        if page.is_empty() {
            break;
        }
        expect_eq("page size at most 2", &true, &(page.len() <= 2))?;
        after = page.last().map(|t| t.thread_id.clone());
        paged.extend(page.into_iter().map(|t| t.thread_id));
    }
    let all_ids: Vec<ThreadId> = all.into_iter().map(|t| t.thread_id).collect();
    expect_eq("threads paged by 2", &all_ids, &paged)?;
    expect_eq(
        "threads with limit 0",
        &0,
        &read("threads", store.threads(None, 0))?.len(),
    )?;
    expect_eq(
        "threads after the last",
        &0,
        &read("threads", store.threads(Some(&thread("t-e")), 5))?.len(),
    )?;
    expect_eq(
        "threads after an id between two threads",
        &vec![thread("t-c"), thread("t-d"), thread("t-e")],
        &read("threads", store.threads(Some(&thread("t-bb")), 5))?
            .into_iter()
            .map(|t| t.thread_id)
            .collect::<Vec<_>>(),
    )
}

/// `pending_tickets` lists the ticket of every Awaiting run across threads, ordered by run
/// id, paged with an exclusive `after`; a run that moved on leaves the listing.
pub fn pending_tickets_listed_and_paged<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    expect_eq(
        "pending tickets of an empty store",
        &0,
        &read("pending_tickets", store.pending_tickets(None, 10))?.len(),
    )?;
    // r-3 and r-1 wait on t1 and t2, r-2 waits then resumes, r-4 runs, r-5 waits on t3.
    let waits = [
        ("t1", "r-3", true),
        ("t2", "r-1", false),
        ("t2b", "r-2", true),
        ("t1b", "r-4", false),
        ("t3", "r-5", true),
    ];
    for (thread_name, run_name, permission) in waits {
        let correlation = format!("{run_name}:wait-1");
        let ticket = if permission {
            permission_ticket(thread_name, run_name, &correlation)
        } else {
            pause_ticket(thread_name, run_name, &correlation)
        };
        if run_name == "r-4" {
            accepted(
                "a running run",
                store.commit(commit(thread_name, running(run_name), vec![], vec![])),
            )?;
            continue;
        }
        accepted(
            &format!("{run_name} awaits"),
            store.commit(commit(thread_name, awaiting(ticket), vec![], vec![])),
        )?;
    }
    accepted(
        "r-2 resumes",
        store.commit(commit("t2b", running("r-2"), vec![], vec![])),
    )?;
    let all = read("pending_tickets", store.pending_tickets(None, usize::MAX))?;
    let runs: Vec<&str> = all.iter().map(|t| t.run_id.as_str()).collect();
    expect_eq("awaiting runs, ordered", &vec!["r-1", "r-3", "r-5"], &runs)?;
    for ticket in &all {
        expect_eq(
            &format!("the listed ticket of {}", ticket.run_id),
            &read("resume_ticket", store.resume_ticket(&ticket.run_id))?.as_ref(),
            &Some(ticket),
        )?;
    }
    let first = read("pending_tickets", store.pending_tickets(None, 1))?;
    expect_eq(
        "first page of 1",
        all.get(..1).unwrap_or_default(),
        &first[..],
    )?;
    let after = first.first().map(|t| t.run_id.clone());
    let rest = read("pending_tickets", store.pending_tickets(after.as_ref(), 5))?;
    expect_eq(
        "the page after it",
        all.get(1..).unwrap_or_default(),
        &rest[..],
    )?;
    expect_eq(
        "pending tickets with limit 0",
        &0,
        &read("pending_tickets", store.pending_tickets(None, 0))?.len(),
    )?;
    expect_eq(
        "pending tickets after r-2 (not itself waiting)",
        &vec!["r-3".to_owned(), "r-5".to_owned()],
        &read(
            "pending_tickets",
            store.pending_tickets(Some(&run("r-2")), 5),
        )?
        .iter()
        .map(|t| t.run_id.as_str().to_owned())
        .collect::<Vec<_>>(),
    )
}
