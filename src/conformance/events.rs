//! Cases about audit events and sequences: numbering, order, paging in every scope, density.

use serde_json::json;

use super::CaseResult;
use super::support::{
    accepted, all_events, commit, commit_with_drafts, ensure, expect_eq, page_through,
    rejected_with_code, run, running, thread,
};
use crate::store::{CheckpointReader, CommitLog, EventScope};

/// Events are numbered store-wide in commit order then in-commit order, carry their commit's
/// sequence, thread and run, and page with an exclusive `from`, ascending, at most `limit`
/// (0 → empty), for every scope.
pub fn events_ordered_and_paged<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    // (thread, run, label, drafts): interleaved threads and runs, one commit without events.
    let plan = [
        ("t1", "r1", "a", 3),
        ("t2", "r2", "b", 2),
        ("t1", "r1", "c", 0),
        ("t1", "r3", "d", 4),
        ("t2", "r2", "e", 1),
    ];
    // What each accepted commit should produce: (commit sequence, thread, run, kinds).
    let mut expected: Vec<(u64, &str, &str, Vec<String>)> = Vec::new();
    for (thread_id, run_id, label, drafts) in plan {
        let c = commit_with_drafts(thread_id, running(run_id), false, label, drafts);
        let kinds: Vec<String> = c.events.iter().map(|e| e.kind().to_owned()).collect();
        let record = accepted(&format!("commit {label}"), store.commit(c))?;
        expected.push((record.sequence, thread_id, run_id, kinds));
    }

    let all = all_events(store, &EventScope::All)?;
    let mut flat: Vec<(u64, &str, &str, String)> = Vec::new();
    for (sequence, thread_id, run_id, kinds) in &expected {
        for kind in kinds {
            flat.push((*sequence, thread_id, run_id, kind.clone()));
        }
    }
    expect_eq("number of events", &flat.len(), &all.len())?;
    for (index, (event, (commit_sequence, thread_id, run_id, kind))) in
        all.iter().zip(&flat).enumerate()
    {
        let what = format!("event #{index}");
        expect_eq(
            &format!("{what}.sequence"),
            &(index as u64 + 1),
            &event.sequence,
        )?;
        expect_eq(
            &format!("{what}.commit_sequence"),
            commit_sequence,
            &event.commit_sequence,
        )?;
        expect_eq(
            &format!("{what}.thread_id"),
            &thread(thread_id),
            &event.thread_id,
        )?;
        expect_eq(&format!("{what}.run_id"), &run(run_id), &event.run_id)?;
        expect_eq(&format!("{what}.kind"), kind, &event.kind)?;
    }
    let first_payload = all.first().map(|e| e.payload.clone());
    expect_eq(
        "the first event's payload",
        &Some(json!({ "label": "a", "i": 0 })),
        &first_payload,
    )?;

    let total = all.len() as u64;
    for from in [0, 1, 4, total.saturating_sub(1), total] {
        let page = store.list_events(&EventScope::All, Some(from), usize::MAX)?;
        let sequences: Vec<u64> = page.iter().map(|e| e.sequence).collect();
        let want: Vec<u64> = (from + 1..=total).collect();
        expect_eq(&format!("sequences after from = {from}"), &want, &sequences)?;
    }
    let from_none = store.list_events(&EventScope::All, None, usize::MAX)?;
    let from_zero = store.list_events(&EventScope::All, Some(0), usize::MAX)?;
    expect_eq("from None versus from Some(0)", &from_none, &from_zero)?;
    let limited: Vec<u64> = store
        .list_events(&EventScope::All, Some(2), 3)?
        .iter()
        .map(|e| e.sequence)
        .collect();
    expect_eq("from 2, limit 3", &vec![3, 4, 5], &limited)?;
    for (scope, from) in [
        (EventScope::All, None),
        (EventScope::All, Some(3)),
        (EventScope::Thread(thread("t1")), None),
        (EventScope::Run(run("r2")), Some(1)),
    ] {
        let page = store.list_events(&scope, from, 0)?;
        ensure(page.is_empty(), || {
            format!("list_events({scope:?}, {from:?}, 0) must be empty, got {page:?}")
        })?;
    }
    let past_end = store.list_events(&EventScope::All, Some(u64::MAX), 10)?;
    ensure(past_end.is_empty(), || {
        format!("from = u64::MAX must give an empty page, got {past_end:?}")
    })?;

    let scopes = [
        (EventScope::All, None, None),
        (EventScope::Thread(thread("t1")), Some(thread("t1")), None),
        (EventScope::Thread(thread("t2")), Some(thread("t2")), None),
        (EventScope::Run(run("r1")), None, Some(run("r1"))),
        (EventScope::Run(run("r2")), None, Some(run("r2"))),
        (EventScope::Run(run("r3")), None, Some(run("r3"))),
    ];
    for (scope, thread_filter, run_filter) in scopes {
        let want: Vec<_> = all
            .iter()
            .filter(|e| thread_filter.as_ref().is_none_or(|t| &e.thread_id == t))
            .filter(|e| run_filter.as_ref().is_none_or(|r| &e.run_id == r))
            .cloned()
            .collect();
        ensure(!want.is_empty(), || {
            format!("scope {scope:?} should have events")
        })?;
        expect_eq(
            &format!("list_events({scope:?}) in one page"),
            &want,
            &all_events(store, &scope)?,
        )?;
        for limit in [1, 2, 3, 7] {
            let paged = page_through(store, &scope, limit)?;
            expect_eq(
                &format!("paging {scope:?} with limit {limit}"),
                &want,
                &paged,
            )?;
        }
    }
    for scope in [
        EventScope::Thread(thread("no-such-thread")),
        EventScope::Run(run("no-such-run")),
    ] {
        let page = all_events(store, &scope)?;
        ensure(page.is_empty(), || {
            format!("an unknown {scope:?} must have no events, got {page:?}")
        })?;
    }
    Ok(())
}

/// Commit sequences and event sequences are each dense from 1 and distinct across threads and
/// runs, and a rejected commit consumes neither.
pub fn sequences_are_dense_and_distinct<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    let mut commit_sequences: Vec<u64> = Vec::new();
    let mut versions: Vec<(String, u64)> = Vec::new();
    for i in 0..12usize {
        let thread_id = format!("t{}", i % 3);
        let run_id = format!("r{}", i % 4);
        let thread_id = if run_id == "r3" {
            "t3".to_owned()
        } else {
            thread_id
        };
        let run_id = format!("{thread_id}/{run_id}");
        let c = commit_with_drafts(&thread_id, running(&run_id), i % 2 == 0, "e", i % 3);
        let record = accepted(&format!("commit {i}"), store.commit(c))?;
        commit_sequences.push(record.sequence);
        let previous = versions
            .iter()
            .rev()
            .find(|(t, _)| *t == thread_id)
            .map_or(0, |(_, v)| *v);
        expect_eq(
            &format!("thread_version of commit {i} on {thread_id}"),
            &previous.saturating_add(1),
            &record.thread_version,
        )?;
        versions.push((thread_id.clone(), record.thread_version));
        if i == 5 {
            // A rejection in the middle must not leave a gap.
            rejected_with_code(
                "an empty thread id",
                store.commit(commit("", running("x"), vec![], vec![])),
                "empty_thread_id",
            )?;
        }
    }
    let want: Vec<u64> = (1..=12).collect();
    expect_eq("commit sequences", &want, &commit_sequences)?;
    let events = all_events(store, &EventScope::All)?;
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    let want: Vec<u64> = (1..=events.len() as u64).collect();
    expect_eq("event sequences", &want, &sequences)?;
    let mut previous_commit = 0;
    for event in &events {
        ensure(event.commit_sequence >= previous_commit, || {
            format!(
                "event {} has commit_sequence {} after an event of commit {previous_commit}",
                event.sequence, event.commit_sequence
            )
        })?;
        ensure(commit_sequences.contains(&event.commit_sequence), || {
            format!(
                "event {} names commit_sequence {}, which no commit had",
                event.sequence, event.commit_sequence
            )
        })?;
        previous_commit = event.commit_sequence;
    }
    Ok(())
}
