//! Cases about what a reader sees after commits: every read port, accumulation, the thread
//! head, births in any state, the empty store, state replay and thread isolation.
// `transcript_slice` takes a list of ranges; a list of one range is the input under test,
// not a mistaken `vec![0; n]`.
#![allow(clippy::single_range_in_vec_init)]

use serde_json::{Value, json};

use super::CaseResult;
use super::support::{
    accepted, all_events, assistant, awaiting, commit, ended, ensure, expect_eq,
    observe_without_all, pause_ticket, pinned, rejected_with, run, running, thread, unchanged,
    user,
};
use crate::commit::{CommitError, ThreadCommit};
use crate::message::Message;
use crate::run::{EndCause, RunRecord, RunState};
use crate::state::{MaterializedState, MergePolicy, StateCommand, StateScope};
use crate::store::{
    CheckpointReader, CommitLog, EventScope, TranscriptError, TranscriptSnapshotRef,
    transcript_digest,
};

/// A commit is readable through every read port right after it is accepted: messages, the run
/// record and state, the thread head, state commands (Run scope stamped), and no ticket.
pub fn commit_then_read<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    let messages = vec![user("hello"), assistant("hi there")];
    let state = vec![
        StateCommand::set(StateScope::Run, "draft", json!("x")),
        StateCommand::set(StateScope::Thread, "topic", json!("greetings")),
    ];
    let first = commit("t1", running("r1"), messages.clone(), state);
    let stamped_state = first.state.clone();
    let record = accepted("first commit", store.commit(first))?;
    expect_eq("first commit's sequence", &1, &record.sequence)?;
    expect_eq("first commit's thread_version", &1, &record.thread_version)?;

    let t1 = thread("t1");
    let r1 = run("r1");
    let running_record = RunRecord {
        id: r1.clone(),
        thread_id: t1.clone(),
        state: RunState::Running,
        commits: 1,
    };
    expect_eq(
        "committed_messages(t1)",
        &messages,
        &store.committed_messages(&t1)?,
    )?;
    expect_eq("run(r1)", &Some(running_record.clone()), &store.run(&r1)?)?;
    expect_eq(
        "run_state(r1)",
        &Some(RunState::Running),
        &store.run_state(&r1)?,
    )?;
    expect_eq(
        "latest_run(t1)",
        &Some(running_record),
        &store.latest_run(&t1)?,
    )?;
    expect_eq(
        "committed_state(t1)",
        &stamped_state,
        &store.committed_state(&t1)?,
    )?;
    expect_eq(
        "the Run-scoped command's owner",
        &Some(r1.clone()),
        &stamped_state.first().and_then(|c| c.run_id.clone()),
    )?;
    expect_eq(
        "resume_ticket(r1) while Running",
        &None,
        &store.resume_ticket(&r1)?,
    )?;

    let end = commit("t1", ended("r1", EndCause::NaturalEnd), vec![], vec![]);
    let record = accepted("ending commit", store.commit(end))?;
    expect_eq("ending commit's sequence", &2, &record.sequence)?;
    expect_eq("ending commit's thread_version", &2, &record.thread_version)?;
    let ended_state = RunState::Ended(EndCause::NaturalEnd);
    expect_eq(
        "run_state(r1) after Ended",
        &Some(ended_state.clone()),
        &store.run_state(&r1)?,
    )?;
    expect_eq(
        "latest_run(t1) after Ended",
        &Some(RunRecord {
            id: r1.clone(),
            thread_id: t1.clone(),
            state: ended_state,
            commits: 2,
        }),
        &store.latest_run(&t1)?,
    )?;
    expect_eq(
        "committed_messages(t1) after a commit without messages",
        &messages,
        &store.committed_messages(&t1)?,
    )
}

/// Commits accumulate on a thread (messages, state, versions) and `latest_run` follows the run
/// of the thread's latest commit, even when an earlier run has ended.
pub fn commits_accumulate_and_latest_run_follows<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    let t1 = thread("t1");
    let steps = [
        commit(
            "t1",
            running("r1"),
            vec![user("one")],
            vec![StateCommand::set(StateScope::Thread, "n", json!(1))],
        ),
        commit("t1", running("r1"), vec![assistant("two")], vec![]),
        commit(
            "t1",
            ended("r1", EndCause::NaturalEnd),
            vec![],
            vec![StateCommand::set(StateScope::Thread, "n", json!(2))],
        ),
        commit("t1", running("r2"), vec![user("three")], vec![]),
    ];
    let mut messages: Vec<Message> = Vec::new();
    let mut state: Vec<StateCommand> = Vec::new();
    let mut run_commits: std::collections::BTreeMap<crate::ids::RunId, u64> = Default::default();
    for (index, step) in steps.into_iter().enumerate() {
        let n = index as u64 + 1;
        messages.extend(step.messages.iter().cloned());
        state.extend(step.state.iter().cloned());
        let run_id = step.run_id().clone();
        let run_state = step.run.state();
        let commits = run_commits.entry(run_id.clone()).or_default();
        *commits += 1;
        let commits = *commits;
        let record = accepted(&format!("commit {n}"), store.commit(step))?;
        expect_eq(&format!("commit {n}'s sequence"), &n, &record.sequence)?;
        expect_eq(
            &format!("commit {n}'s thread_version"),
            &n,
            &record.thread_version,
        )?;
        expect_eq(
            &format!("committed_messages after commit {n}"),
            &messages,
            &store.committed_messages(&t1)?,
        )?;
        expect_eq(
            &format!("committed_state after commit {n}"),
            &state,
            &store.committed_state(&t1)?,
        )?;
        expect_eq(
            &format!("latest_run after commit {n}"),
            &Some(RunRecord {
                id: run_id,
                thread_id: t1.clone(),
                state: run_state,
                commits,
            }),
            &store.latest_run(&t1)?,
        )?;
    }
    expect_eq(
        "run(r1) after a later run started",
        &Some(RunState::Ended(EndCause::NaturalEnd)),
        &store.run(&run("r1"))?.map(|r| r.state),
    )?;
    let last = commit("t1", ended("r2", EndCause::Cancelled), vec![], vec![]);
    accepted("ending r2", store.commit(last))?;
    expect_eq(
        "latest_run(t1) after r2 ended",
        &Some(RunState::Ended(EndCause::Cancelled)),
        &store.latest_run(&t1)?.map(|r| r.state),
    )
}

/// A run's first fact may be any state: a run born Awaiting has its ticket, a run born Ended
/// (a queued run cancelled before it executed) is recorded and fenced.
pub fn run_may_be_born_in_any_state<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    let ticket = pause_ticket("t1", "born-awaiting", "born-awaiting:wait-1");
    accepted(
        "a run born Awaiting",
        store.commit(commit("t1", awaiting(ticket.clone()), vec![], vec![])),
    )?;
    expect_eq(
        "resume_ticket(born-awaiting)",
        &Some(ticket),
        &store.resume_ticket(&run("born-awaiting"))?,
    )?;
    accepted(
        "a run born Ended",
        store.commit(commit(
            "t1",
            ended("born-ended", EndCause::Cancelled),
            vec![],
            vec![],
        )),
    )?;
    expect_eq(
        "run(born-ended)",
        &Some(RunRecord {
            id: run("born-ended"),
            thread_id: thread("t1"),
            state: RunState::Ended(EndCause::Cancelled),
            commits: 1,
        }),
        &store.run(&run("born-ended"))?,
    )?;
    rejected_with(
        "a commit to a run born Ended",
        store.commit(commit("t1", running("born-ended"), vec![], vec![])),
        &CommitError::AlreadyTerminal {
            run_id: run("born-ended"),
            cause: EndCause::Cancelled,
        },
    )
}

/// A fresh store has nothing: no messages, runs, tickets, state or events; an empty transcript
/// pins at 0 and verifies.
pub fn empty_store_reads_are_absent<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    let t = thread("t1");
    let r = run("r1");
    expect_eq(
        "committed_messages",
        &Vec::<Message>::new(),
        &store.committed_messages(&t)?,
    )?;
    expect_eq("run", &None, &store.run(&r)?)?;
    expect_eq("latest_run", &None, &store.latest_run(&t)?)?;
    expect_eq("resume_ticket", &None, &store.resume_ticket(&r)?)?;
    expect_eq("run_state", &None, &store.run_state(&r)?)?;
    expect_eq(
        "committed_state",
        &Vec::<StateCommand>::new(),
        &store.committed_state(&t)?,
    )?;
    for scope in [
        EventScope::All,
        EventScope::Thread(t.clone()),
        EventScope::Run(r),
    ] {
        for (from, limit) in [(None, 10), (Some(0), 10), (Some(5), usize::MAX), (None, 0)] {
            let page = store.list_events(&scope, from, limit)?;
            ensure(page.is_empty(), || {
                format!("list_events({scope:?}, {from:?}, {limit}) on an empty store: {page:?}")
            })?;
        }
    }
    let pin = store.transcript_snapshot(&t)?;
    expect_eq(
        "transcript_snapshot of an empty thread",
        &TranscriptSnapshotRef {
            thread_id: t.clone(),
            end: 0,
            digest: String::new(),
        },
        &pin,
    )?;
    expect_eq(
        "verifying the empty pin",
        &Ok(()),
        &pinned(store.verify_transcript_snapshot(&pin))?,
    )?;
    expect_eq(
        "slicing the empty pin",
        &Ok(Vec::new()),
        &pinned(store.transcript_slice(&pin, &[0..0]))?,
    )
}

/// `committed_state` returns every command in commit order, and replaying it with
/// [`MaterializedState::rebuild`] equals applying the commits one by one, for every viewer.
pub fn committed_state_replays<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    let t1 = thread("t1");
    let commits = [
        commit(
            "t1",
            running("r1"),
            vec![],
            vec![
                StateCommand::set(StateScope::Thread, "profile", json!({ "a": 1 })),
                StateCommand::set(StateScope::Run, "scratch", json!(1)),
                StateCommand::set(StateScope::Shared, "counter", json!(1)),
            ],
        ),
        commit(
            "t1",
            ended("r1", EndCause::NaturalEnd),
            vec![],
            vec![
                StateCommand::set(StateScope::Thread, "profile", json!({ "b": 2 }))
                    .with_merge(MergePolicy::Commutative),
                StateCommand::remove(StateScope::Shared, "counter"),
                StateCommand::set(StateScope::Profile, "lang", json!("zh")),
            ],
        ),
        commit(
            "t1",
            running("r2"),
            vec![],
            vec![
                StateCommand::set(StateScope::Run, "scratch", json!(2)),
                StateCommand::set(StateScope::Thread, "profile", json!({ "a": 3 }))
                    .with_merge(MergePolicy::Commutative),
                StateCommand::remove(StateScope::Run, "never-set"),
            ],
        ),
    ];
    let r1 = run("r1");
    let r2 = run("r2");
    let viewers = [None, Some(&r1), Some(&r2)];
    let mut incremental: Vec<MaterializedState> =
        viewers.iter().map(|_| MaterializedState::new()).collect();
    let mut history: Vec<StateCommand> = Vec::new();
    for (index, c) in commits.into_iter().enumerate() {
        for command in &c.state {
            for (state, viewer) in incremental.iter_mut().zip(viewers) {
                state.apply(command, viewer);
            }
        }
        history.extend(c.state.iter().cloned());
        accepted(&format!("state commit {index}"), store.commit(c))?;
        let committed = store.committed_state(&t1)?;
        expect_eq(
            &format!("committed_state after commit {index}"),
            &history,
            &committed,
        )?;
        for (state, viewer) in incremental.iter().zip(viewers) {
            expect_eq(
                &format!("state for viewer {viewer:?} rebuilt after commit {index}"),
                state,
                &MaterializedState::rebuild(&committed, viewer),
            )?;
        }
    }
    let committed = store.committed_state(&t1)?;
    let shared = MaterializedState::rebuild(&committed, None);
    expect_eq(
        "merged thread profile",
        &Some(&json!({ "a": 3, "b": 2 })),
        &shared.get(StateScope::Thread, "profile"),
    )?;
    expect_eq(
        "removed shared counter",
        &None,
        &shared.get(StateScope::Shared, "counter"),
    )?;
    expect_eq(
        "profile lang",
        &Some(&json!("zh")),
        &shared.get(StateScope::Profile, "lang"),
    )?;
    expect_eq(
        "Run scope without a viewer",
        &None,
        &shared.get(StateScope::Run, "scratch"),
    )?;
    for (viewer, value) in [(&r1, json!(1)), (&r2, json!(2))] {
        let state = MaterializedState::rebuild(&committed, Some(viewer));
        expect_eq(
            &format!("Run-scoped scratch seen by {viewer}"),
            &Some(&value),
            &state.get(StateScope::Run, "scratch"),
        )?;
    }
    Ok(())
}

/// Two threads share no messages, state, head, events or transcript pins.
pub fn threads_are_isolated<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    let a = commit_on("a", "ra", "from a", json!("a"));
    let b = commit_on("b", "rb", "from b", json!("b"));
    let (a_messages, a_state) = (a.messages.clone(), a.state.clone());
    let (b_messages, b_state) = (b.messages.clone(), b.state.clone());
    accepted("commit on a", store.commit(a))?;
    accepted("commit on b", store.commit(b))?;
    for (name, run_name, messages, state) in [
        ("a", "ra", &a_messages, &a_state),
        ("b", "rb", &b_messages, &b_state),
    ] {
        let t = thread(name);
        expect_eq(
            &format!("committed_messages({name})"),
            messages,
            &store.committed_messages(&t)?,
        )?;
        expect_eq(
            &format!("committed_state({name})"),
            state,
            &store.committed_state(&t)?,
        )?;
        expect_eq(
            &format!("latest_run({name})"),
            &Some(run(run_name)),
            &store.latest_run(&t)?.map(|r| r.id),
        )?;
        let events = all_events(store, &EventScope::Thread(t.clone()))?;
        ensure(
            !events.is_empty() && events.iter().all(|e| e.thread_id == t),
            || {
                format!(
                    "list_events(Thread({name})) must hold only, and some, events of {name}: {events:?}"
                )
            },
        )?;
        let pin = store.transcript_snapshot(&t)?;
        expect_eq(
            &format!("verify pin of {name}"),
            &Ok(()),
            &pinned(store.verify_transcript_snapshot(&pin))?,
        )?;
    }
    // Only thread a moves; b reads exactly as before.
    let before_b = observe_without_all(store, &["b"], &["rb"])?;
    accepted(
        "second commit on a",
        store.commit(commit_on("a", "ra", "more a", json!("a2"))),
    )?;
    unchanged(
        "a commit on thread a, read through thread b",
        &before_b,
        &observe_without_all(store, &["b"], &["rb"])?,
    )?;
    let a_pin = store.transcript_snapshot(&thread("a"))?;
    let moved = TranscriptSnapshotRef {
        thread_id: thread("b"),
        end: 1,
        digest: transcript_digest(a_messages.get(..1).unwrap_or_default()),
    };
    ensure(a_pin.end == 2, || {
        format!("thread a's pin should cover 2 messages: {a_pin:?}")
    })?;
    expect_eq(
        "thread a's one-message prefix verified against thread b",
        &Err(TranscriptError::SnapshotMismatch {
            thread_id: thread("b"),
        }),
        &pinned(store.verify_transcript_snapshot(&moved))?,
    )
}

fn commit_on(thread_id: &str, run_id: &str, text: &str, value: Value) -> ThreadCommit {
    commit(
        thread_id,
        running(run_id),
        vec![user(text)],
        vec![StateCommand::set(StateScope::Thread, "owner", value)],
    )
}
