//! The races a commit can lose between its read and its write, and counters at their end.
//!
//! A commit reads the thread, decides, and writes conditionally on the version it read (see
//! `src/write.rs`). These tests make the losing sides happen on purpose: the same new run
//! committed on many threads at once (only the primary key can tell), many writers on one
//! thread (the version tells), and counters that cannot advance.

mod support;

use std::sync::Barrier;

use runcore::store::{
    CheckpointReader, CommitLog, CommittedThreadView, EventScope, StoreError, StoreHandles,
};
use runcore::{
    AuditDraft, CommitError, CommitOperation, Message, RunDisposition, RunId, ThreadCommit,
    ThreadId,
};
use serde_json::json;

fn commit(thread: &str, run: &str) -> ThreadCommit {
    ThreadCommit::assemble(
        ThreadId::new(thread),
        RunDisposition::Running {
            run_id: RunId::new(run),
        },
        true,
        vec![Message::user(format!("{run} on {thread}"))],
        vec![],
        vec![AuditDraft::new("progress", json!({}))],
    )
}

/// Half the writers fence their commits as operations, so both keys (the run's and the
/// operation's) are raced.
fn fenced(writer: usize) -> bool {
    writer.is_multiple_of(2)
}

#[test]
fn one_new_run_committed_on_many_threads_at_once_lands_once() {
    let Some(server) = support::server() else {
        return;
    };
    const WRITERS: usize = 6;
    const ROUNDS: usize = 15;
    let store = server.scratch();
    let barrier = Barrier::new(WRITERS);
    let outcomes: Vec<Vec<Result<(), StoreError>>> = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|i| {
                let mut handle = store.open_handle().expect("a handle");
                let barrier = &barrier;
                scope.spawn(move || {
                    (0..ROUNDS)
                        .map(|round| {
                            barrier.wait();
                            let run = format!("run-{round}");
                            let thread = format!("thread-{i}");
                            if fenced(i) {
                                let version = handle
                                    .thread_version(&ThreadId::new(&thread))
                                    .expect("version");
                                handle
                                    .commit_operation(CommitOperation::new(
                                        commit(&thread, &run),
                                        0,
                                        version,
                                    ))
                                    .map(|_| ())
                            } else {
                                handle.commit(commit(&thread, &run)).map(|_| ())
                            }
                        })
                        .collect()
                })
            })
            .collect();
        writers
            .into_iter()
            .map(|w| w.join().expect("writer"))
            .collect()
    });
    for round in 0..ROUNDS {
        let run = RunId::new(format!("run-{round}"));
        let record = store.run(&run).expect("read").expect("the run landed");
        let winners: Vec<usize> = (0..WRITERS)
            .filter(|&i| outcomes[i][round].is_ok())
            .collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one writer lands the run"
        );
        let winner = winners[0];
        assert_eq!(record.thread_id, ThreadId::new(format!("thread-{winner}")));
        assert_eq!(record.commits, 1);
        // The others get what MemoryStore answers to the same commit arriving second.
        for (i, results) in outcomes.iter().enumerate().filter(|(i, _)| *i != winner) {
            let loser_fenced = fenced(i);
            match (&results[round], loser_fenced, fenced(winner)) {
                (Err(StoreError::Rejected(CommitError::PayloadMismatch { .. })), true, true) => {}
                (
                    Err(StoreError::Rejected(CommitError::OrdinalConflict {
                        expected: 1,
                        got: 0,
                    })),
                    true,
                    false,
                ) => {}
                (
                    Err(StoreError::Rejected(CommitError::RunOnOtherThread {
                        run_id,
                        existing_thread,
                        ..
                    })),
                    false,
                    _,
                ) => {
                    assert_eq!(run_id, &run);
                    assert_eq!(existing_thread, &record.thread_id);
                }
                (other, ..) => panic!("round {round}, writer {i} (winner {winner}): {other:?}"),
            }
        }
    }
    let events = store
        .list_events(&EventScope::All, None, usize::MAX)
        .expect("events");
    // Strictly increasing; a loser's write that failed on the run's key after taking its
    // sequences leaves a gap (SPEC §7.1 amended), so not necessarily dense.
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    assert!(
        sequences.windows(2).all(|pair| pair[0] < pair[1]),
        "{sequences:?}"
    );
    assert_eq!(events.len(), ROUNDS * 2, "two drafts per landed commit");
}

#[test]
fn counters_at_their_end_reject_the_commit_and_write_nothing() {
    let Some(server) = support::server() else {
        return;
    };
    let mut store = server.scratch();
    store.commit(commit("t", "r")).expect("first commit");
    let mut sql = server.client_in(store.0.guard().schema());
    let thread = ThreadId::new("t");
    let overflow = |counter: &str| {
        Err(StoreError::Rejected(CommitError::CounterOverflow {
            counter: counter.to_owned(),
        }))
    };
    let before = store
        .list_events(&EventScope::All, None, usize::MAX)
        .expect("events");

    sql.batch_execute("UPDATE runcore_threads SET version = 9223372036854775807")
        .expect("thread version at its end");
    // The thread at its end, the store too: the store's counter is reported first.
    sql.batch_execute("SELECT setval('runcore_commit_sequence', 9223372036854775807)")
        .expect("commit sequence at its end");
    assert_eq!(
        store.commit(commit("t", "r")).map(|_| ()),
        overflow("commit sequence")
    );
    sql.batch_execute("SELECT setval('runcore_commit_sequence', 1)")
        .expect("reset");
    assert_eq!(
        store.commit(commit("t", "r")).map(|_| ()),
        overflow("thread version")
    );
    sql.batch_execute("UPDATE runcore_threads SET version = 1")
        .expect("reset");

    // Event sequences: one more draft does not fit — at the sequence's end, and one short of
    // it with a commit of two drafts (the block's end would pass it).
    for at in ["9223372036854775807", "9223372036854775806"] {
        sql.batch_execute(&format!("SELECT setval('runcore_event_sequence', {at})"))
            .expect("event sequence at its end");
        let two_drafts = {
            let mut c = commit("t", "r");
            c.events.push(AuditDraft::new("more", json!({})));
            c
        };
        assert_eq!(
            store.commit(two_drafts).map(|_| ()),
            overflow("event sequence")
        );
    }
    // The failed attempts took commit sequences, not written (gaps); start both again.
    sql.batch_execute(
        "SELECT setval('runcore_event_sequence', 2), setval('runcore_commit_sequence', 1)",
    )
    .expect("reset");

    // Nothing of the rejected commits was written.
    assert_eq!(store.thread_version(&thread).expect("version"), 1);
    assert_eq!(
        store.committed_messages(&thread).expect("messages").len(),
        1
    );
    assert_eq!(
        store
            .list_events(&EventScope::All, None, usize::MAX)
            .expect("events"),
        before
    );
    // And the store goes on.
    let record = store
        .commit(commit("t", "r"))
        .expect("a commit after the resets");
    assert_eq!((record.sequence, record.thread_version), (2, 2));
}
