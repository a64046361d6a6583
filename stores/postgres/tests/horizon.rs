//! Readers paging with `from` while many writers commit on distinct threads (SPEC §7.1,
//! amended): the store-wide sequences are strictly increasing, a reader never misses an event
//! that becomes visible later with a smaller sequence, and a gap left by a rolled-back
//! transaction neither blocks nor confuses it (see the crate docs, "Readers page behind a
//! transaction-id horizon").

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use postgres::Client;
use runcore::store::{
    CheckpointReader, CommitLog, CommittedThreadView, EventRecord, EventScope, StoreHandles,
};
use runcore::{
    AuditDraft, CommitOperation, Message, RunDisposition, RunId, ThreadCommit, ThreadId,
};
use serde_json::json;

fn commit(thread: &str, run: &str, k: u64, drafts: usize) -> ThreadCommit {
    ThreadCommit::assemble(
        ThreadId::new(thread),
        RunDisposition::Running {
            run_id: RunId::new(run),
        },
        true,
        vec![Message::user(format!("{thread}:{k}"))],
        vec![],
        (0..drafts)
            .map(|d| AuditDraft::new("progress", json!({ "k": k, "d": d })))
            .collect(),
    )
}

/// Reads every page after `from`, `limit` at a time, to the end of what is settled now.
fn page_on(
    store: &impl CheckpointReader,
    from: &mut Option<u64>,
    limit: usize,
    into: &mut Vec<EventRecord>,
) {
    loop {
        let page = store
            .list_events(&EventScope::All, *from, limit)
            .expect("a page");
        let Some(last) = page.last() else {
            return;
        };
        *from = Some(last.sequence);
        let full = page.len() == limit;
        into.extend(page);
        if !full {
            return;
        }
    }
}

#[test]
fn a_reader_paging_beside_writers_on_distinct_threads_misses_and_doubles_nothing() {
    let Some(server) = support::server() else {
        return;
    };
    const WRITERS: usize = 6;
    const COMMITS: u64 = 60;
    let store = server.scratch();
    // Every commit pauses a random moment between taking its sequences and committing, so
    // commits finish out of sequence order all the time: a reader paging past a committed
    // event while a smaller one is still in flight would miss it.
    server
        .client_in(store.0.guard().schema())
        .batch_execute(
            "CREATE FUNCTION linger() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN PERFORM pg_sleep(random() * 0.004); RETURN NULL; END $$;
             CREATE TRIGGER linger AFTER INSERT ON runcore_events
                 FOR EACH STATEMENT EXECUTE FUNCTION linger();",
        )
        .expect("make commits linger");
    let done = AtomicBool::new(false);
    let (receipts, seen) = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|i| {
                let mut handle = store.open_handle().expect("a writer's handle");
                scope.spawn(move || {
                    let thread = format!("thread-{i}");
                    let run = format!("{thread}/run");
                    (0..COMMITS)
                        .map(|k| {
                            // 1 to 3 drafts, so event blocks of several sizes interleave.
                            let c = commit(&thread, &run, k, 1 + (k as usize + i) % 3);
                            let events = c.events.len();
                            let receipt = handle
                                .commit_operation(CommitOperation::new(c, k, k))
                                .expect("a commit on its own thread lands");
                            (receipt, events)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let reader = {
            let handle = store.open_handle().expect("the reader's handle");
            let done = &done;
            scope.spawn(move || {
                let mut from = None;
                let mut seen = Vec::new();
                // Small pages, the whole time the writers run, then once more after.
                while !done.load(Ordering::Acquire) {
                    page_on(&handle, &mut from, 7, &mut seen);
                }
                page_on(&handle, &mut from, 7, &mut seen);
                seen
            })
        };
        let receipts: Vec<_> = writers
            .into_iter()
            .map(|w| w.join().expect("writer"))
            .collect();
        done.store(true, Ordering::Release);
        (receipts, reader.join().expect("reader"))
    });

    // Everything, read at the end in one page.
    let all = store
        .list_events(&EventScope::All, None, usize::MAX)
        .expect("all events");
    let expected_events: usize = receipts.iter().flatten().map(|(_, n)| n).sum();
    let receipts: Vec<Vec<_>> = receipts
        .into_iter()
        .map(|of_thread| of_thread.into_iter().map(|(r, _)| r).collect())
        .collect();
    assert_eq!(all.len(), expected_events, "every draft of every commit");
    // The paging reader saw exactly what is stored, in order: nothing missed, nothing twice.
    let seen_sequences = sequences(&seen);
    let stored = sequences(&all);
    let missed: Vec<u64> = stored
        .iter()
        .filter(|s| !seen_sequences.contains(s))
        .copied()
        .collect();
    assert!(missed.is_empty(), "the paging reader missed {missed:?}");
    assert_eq!(seen_sequences.len(), stored.len(), "nothing seen twice");
    assert_eq!(seen, all, "what the reader saw is what is stored");
    for pair in all.windows(2) {
        assert!(
            pair[0].sequence < pair[1].sequence,
            "event sequences strictly increase: {} then {}",
            pair[0].sequence,
            pair[1].sequence
        );
        assert!(pair[0].commit_sequence <= pair[1].commit_sequence);
    }
    // Commit sequences are distinct across threads and ascend within each.
    let mut commit_sequences: Vec<u64> = receipts
        .iter()
        .flatten()
        .map(|r| r.record.sequence)
        .collect();
    commit_sequences.sort_unstable();
    let before = commit_sequences.len();
    commit_sequences.dedup();
    assert_eq!(
        commit_sequences.len(),
        before,
        "commit sequences are distinct"
    );
    for (i, thread_receipts) in receipts.iter().enumerate() {
        let versions: Vec<u64> = thread_receipts
            .iter()
            .map(|r| r.record.thread_version)
            .collect();
        assert_eq!(
            versions,
            (1..=COMMITS).collect::<Vec<_>>(),
            "thread-{i}'s versions are dense"
        );
        for pair in thread_receipts.windows(2) {
            assert!(pair[0].record.sequence < pair[1].record.sequence);
        }
        let thread = ThreadId::new(format!("thread-{i}"));
        assert_eq!(store.thread_version(&thread).expect("version"), COMMITS);
        // Each commit's events carry its receipt's sequence, in the thread's order.
        let of_thread: BTreeMap<u64, usize> =
            all.iter()
                .filter(|e| e.thread_id == thread)
                .fold(BTreeMap::new(), |mut m, e| {
                    *m.entry(e.commit_sequence).or_insert(0) += 1;
                    m
                });
        let receipt_sequences: Vec<u64> =
            thread_receipts.iter().map(|r| r.record.sequence).collect();
        assert_eq!(
            of_thread.keys().copied().collect::<Vec<_>>(),
            receipt_sequences
        );
    }
}

/// The internals a hand-made transaction needs to act as a commit in flight: what
/// `runcore_commit` does under the commit mutex (schema version 2), without its rows.
fn take_sequences_like_a_commit(sql: &mut postgres::Transaction<'_>) -> (i64, i64) {
    let row = sql
        .query_one(
            "SELECT pg_current_xact_id()::text, nextval('runcore_commit_sequence'),
                    nextval('runcore_event_sequence')",
            &[],
        )
        .expect("take an id and sequences");
    (row.get(1), row.get(2))
}

fn insert_event(sql: &mut postgres::Transaction<'_>, commit: i64, event: i64, thread: &str) {
    sql.execute(
        "INSERT INTO runcore_events
             (sequence, commit_sequence, thread_id, run_id, kind, payload, xid)
         VALUES ($1, $2, $3, $4, 'progress', '{}', pg_current_xact_id())",
        &[
            &event,
            &commit,
            &thread.as_bytes(),
            &format!("{thread}/run").as_bytes(),
        ],
    )
    .expect("an event row");
}

fn sequences(events: &[EventRecord]) -> Vec<u64> {
    events.iter().map(|e| e.sequence).collect()
}

#[test]
fn a_later_commit_stays_hidden_until_an_earlier_one_in_flight_ends() {
    let Some(server) = support::server() else {
        return;
    };
    let mut store = server.scratch();
    let mut raw: Client = server.client_in(store.0.guard().schema());
    store.commit(commit("a", "a/run", 0, 1)).expect("first");
    let first = sequences(
        &store
            .list_events(&EventScope::All, None, 10)
            .expect("the first commit's events"),
    );
    let n = first.len() as i64;
    // A commit in flight: it took commit sequence 2 and the next event sequence, wrote its
    // event, and has not committed.
    let mut in_flight = raw.transaction().expect("begin");
    let (c, e) = take_sequences_like_a_commit(&mut in_flight);
    assert_eq!((c, e), (2, n + 1));
    insert_event(&mut in_flight, c, e, "slow");
    // A later commit on another thread lands: sequence 3, its events after.
    let record = store.commit(commit("b", "b/run", 0, 1)).expect("later");
    assert_eq!(record.sequence, 3);
    // Its events are committed but not settled: a reader that got them would page on past
    // them and never see the one in flight. So the reader gets only the first commit's,
    // after waiting a little.
    let started = Instant::now();
    let page = store
        .list_events(&EventScope::All, None, 10)
        .expect("a page");
    assert_eq!(sequences(&page), first);
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "the reader waited for the commit in flight before answering"
    );
    let paged_from = page.last().map(|e| e.sequence);
    // The same for a scope: thread b's one event waits behind the commit in flight.
    let b = store
        .list_events(&EventScope::Thread(ThreadId::new("b")), None, 10)
        .expect("b's events");
    assert!(b.is_empty(), "{b:?}");
    // The commit in flight ends: from where the reader stopped, both come, in order.
    in_flight.commit().expect("the slow commit lands");
    let next = store
        .list_events(&EventScope::All, paged_from, 10)
        .expect("the next page");
    let next = sequences(&next);
    assert_eq!(next.first().copied(), Some(e as u64), "the slow one first");
    assert!(next.len() >= 2, "then the later commit's: {next:?}");
    assert!(next.windows(2).all(|p| p[1] == p[0] + 1), "{next:?}");
}

#[test]
fn a_rolled_back_transactions_gap_neither_blocks_nor_confuses_readers() {
    let Some(server) = support::server() else {
        return;
    };
    let mut store = server.scratch();
    let mut raw: Client = server.client_in(store.0.guard().schema());
    store.commit(commit("a", "a/run", 0, 2)).expect("first");
    let first = sequences(
        &store
            .list_events(&EventScope::All, None, 10)
            .expect("the first commit's events"),
    );
    let n = first.len() as u64;

    // One transaction takes sequences and rolls back before anything else happens.
    let mut gone = raw.transaction().expect("begin");
    let (c, e) = take_sequences_like_a_commit(&mut gone);
    insert_event(&mut gone, c, e, "gone");
    gone.rollback().expect("rollback");
    // Another is in flight while a later commit lands, then rolls back.
    let mut in_flight = raw.transaction().expect("begin");
    let (c2, e2) = take_sequences_like_a_commit(&mut in_flight);
    insert_event(&mut in_flight, c2, e2, "gone");
    assert_eq!((e as u64, e2 as u64), (n + 1, n + 2), "the gaps to be");
    let record = store.commit(commit("b", "b/run", 0, 2)).expect("later");
    assert!(record.sequence > c2 as u64);
    let page = store
        .list_events(&EventScope::All, None, 10)
        .expect("a page");
    assert_eq!(
        sequences(&page),
        first,
        "b's events wait behind the one in flight"
    );
    in_flight.rollback().expect("rollback");

    // Now nothing is in flight: the gaps are skipped, and paging goes on over them.
    let next = store
        .list_events(&EventScope::All, Some(n), 10)
        .expect("the next page");
    let after_gaps = sequences(&next);
    assert!(!after_gaps.is_empty());
    assert_eq!(after_gaps[0], n + 3, "right after the two gaps");
    assert!(after_gaps.windows(2).all(|p| p[1] == p[0] + 1));
    assert!(next.iter().all(|e| e.commit_sequence == record.sequence));
    assert!(next.iter().all(|e| e.thread_id == ThreadId::new("b")));
    // Paging from inside the gap finds the same, and nothing of the rolled-back ones.
    for from in [Some(n + 1), Some(n + 2)] {
        assert_eq!(
            sequences(&store.list_events(&EventScope::All, from, 10).expect("page")),
            after_gaps
        );
    }
    assert!(
        store
            .list_events(&EventScope::Thread(ThreadId::new("gone")), None, 10)
            .expect("page")
            .is_empty()
    );
    // And commits go on past the gap, on both threads.
    let more = store.commit(commit("a", "a/run", 1, 1)).expect("more");
    assert!(more.sequence > record.sequence);
    assert_eq!(more.thread_version, 2);
}

#[test]
fn the_write_refuses_a_transaction_that_already_has_an_id() {
    let Some(server) = support::server() else {
        return;
    };
    let mut store = server.scratch();
    let mut raw: Client = server.client_in(store.0.guard().schema());
    // A transaction that wrote before calling the write would have its id from before the
    // commit mutex, out of order with the sequences: refused, before anything is taken.
    let mut tx = raw.transaction().expect("begin");
    tx.batch_execute("CREATE TEMPORARY TABLE earlier (a int); INSERT INTO earlier VALUES (1)")
        .expect("a write first");
    let error = tx
        .query_one(
            "SELECT runcore_commit(1, 'z'::bytea, 'z/run'::bytea, '{x}'::bytea[],
                 '{\"{}\"}'::text[], false, -1, ''::bytea, 1, '{}'::bigint[], '{}'::text[],
                 '{}'::text[], '{}'::bigint[], '{}'::text[], 'null', 1, NULL,
                 true, 0, 0, '', true, 0, 1, 2)",
            &[],
        )
        .expect_err("refused");
    assert_eq!(
        error.code(),
        Some(&postgres::error::SqlState::INVALID_TRANSACTION_STATE),
        "{error}"
    );
    tx.rollback().expect("rollback");
    // Nothing was taken: the next commit gets the first sequences.
    let record = store.commit(commit("a", "a/run", 0, 1)).expect("a commit");
    assert_eq!(record.sequence, 1);
    let events = store
        .list_events(&EventScope::All, None, 10)
        .expect("events");
    assert_eq!(events.first().map(|e| e.sequence), Some(1));
}
