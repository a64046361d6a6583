//! Cases with several OS threads committing at once, each through its own handle
//! ([`StoreHandles::open_handle`]): on distinct threads, on one thread, and fenced writers
//! racing on one thread (SPEC §7.1).
//!
//! A store that is not safe to share can still run them through [`SharedStore`](crate::store::SharedStore), which puts
//! one lock around it (that is how [`MemoryStore`](crate::store::MemoryStore) runs them).

use super::CaseResult;
use super::support::{accepted, all_events, commit, expect_eq, read, running, thread, user};
use crate::commit::{CommitError, CommitOperation};
use crate::ids::RunId;
use crate::message::Message;
use crate::store::{CheckpointReader, CommittedThreadView, EventScope, StoreError, StoreHandles};

/// Writers per case.
const WRITERS: usize = 4;
/// Commits per writer.
const COMMITS: usize = 25;

/// Runs `work(i, handle)` on `WRITERS` OS threads, each with its own handle, and collects the
/// first failure.
fn race<S, W>(store: &S, work: W) -> CaseResult
where
    S: StoreHandles,
    W: Fn(usize, &mut S) -> Result<(), String> + Sync,
{
    let mut handles = Vec::with_capacity(WRITERS);
    for i in 0..WRITERS {
        handles.push(read(
            &format!("open_handle for writer {i}"),
            store.open_handle(),
        )?);
    }
    let work = &work;
    let outcomes: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let running: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(i, mut handle)| scope.spawn(move || work(i, &mut handle)))
            .collect();
        running
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("a writer thread panicked".to_owned()))
            })
            .collect()
    });
    for outcome in outcomes {
        outcome?;
    }
    Ok(())
}

/// Writer `i` makes `COMMITS` plain commits of run `run-{i}` on thread `thread_of(i)`, each
/// with one user message `"{i}:{k}"`, all writers at once.
fn race_plain_commits<S: StoreHandles>(
    store: &S,
    thread_of: impl Fn(usize) -> String + Sync,
) -> CaseResult {
    race(store, |i, handle| {
        let thread_name = thread_of(i);
        for k in 0..COMMITS {
            let c = commit(
                &thread_name,
                running(&format!("run-{i}")),
                vec![user(&format!("{i}:{k}"))],
                vec![],
            );
            handle
                .commit(c)
                .map_err(|e| format!("writer {i}, commit {k}: {e}"))?;
        }
        Ok(())
    })
}

/// Checks the store-wide sequences after a race: `commits` commits with dense commit
/// sequences, and dense event sequences in commit order.
fn dense_after_race<S: CheckpointReader>(store: &S, commits: usize) -> CaseResult {
    let events = all_events(store, &EventScope::All)?;
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    expect_eq("event sequences after the race", &expected, &sequences)?;
    let mut commit_sequences: Vec<u64> = events.iter().map(|e| e.commit_sequence).collect();
    let sorted = {
        let mut s = commit_sequences.clone();
        s.sort_unstable();
        s
    };
    expect_eq(
        "commit sequences ascend with event sequences",
        &sorted,
        &commit_sequences,
    )?;
    commit_sequences.dedup();
    let expected: Vec<u64> = (1..=commits as u64).collect();
    expect_eq(
        "commit sequences after the race (every commit carries drafts)",
        &expected,
        &commit_sequences,
    )?;
    Ok(())
}

fn message_text(message: &Message) -> String {
    match message {
        Message::User(user) => user
            .content
            .iter()
            .filter_map(|block| match block {
                crate::message::ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect(),
        _ => String::new(),
    }
}

/// Several OS threads commit on distinct threads at once: every commit lands exactly once,
/// each thread holds its writer's messages in order, and sequences stay dense.
pub fn concurrent_commits_on_distinct_threads<S: StoreHandles>(store: &mut S) -> CaseResult {
    race_plain_commits(store, |i| format!("thread-{i}"))?;
    for i in 0..WRITERS {
        let t = thread(&format!("thread-{i}"));
        let texts: Vec<String> = read("committed_messages", store.committed_messages(&t))?
            .iter()
            .map(message_text)
            .collect();
        let expected: Vec<String> = (0..COMMITS).map(|k| format!("{i}:{k}")).collect();
        expect_eq(&format!("messages of thread-{i}"), &expected, &texts)?;
        expect_eq(
            &format!("thread_version(thread-{i})"),
            &(COMMITS as u64),
            &read("thread_version", store.thread_version(&t))?,
        )?;
    }
    dense_after_race(store, WRITERS * COMMITS)
}

/// Several OS threads commit on one thread at once (each its own run, plain `commit`): the
/// thread holds every message exactly once, each writer's in the order it wrote them, and
/// sequences stay dense.
pub fn concurrent_commits_on_one_thread<S: StoreHandles>(store: &mut S) -> CaseResult {
    race_plain_commits(store, |_| "shared".to_owned())?;
    let texts: Vec<String> = read(
        "committed_messages",
        store.committed_messages(&thread("shared")),
    )?
    .iter()
    .map(message_text)
    .collect();
    expect_eq(
        "messages on the shared thread",
        &(WRITERS * COMMITS),
        &texts.len(),
    )?;
    for i in 0..WRITERS {
        let prefix = format!("{i}:");
        let mine: Vec<&String> = texts.iter().filter(|t| t.starts_with(&prefix)).collect();
        let expected: Vec<String> = (0..COMMITS).map(|k| format!("{i}:{k}")).collect();
        let expected: Vec<&String> = expected.iter().collect();
        expect_eq(
            &format!("writer {i}'s messages, in its order"),
            &expected,
            &mine,
        )?;
    }
    expect_eq(
        "thread_version(shared)",
        &((WRITERS * COMMITS) as u64),
        &read("thread_version", store.thread_version(&thread("shared")))?,
    )?;
    dense_after_race(store, WRITERS * COMMITS)
}

/// Fenced writers race on one thread: each reads the version, commits an operation built on
/// it, and on `VersionConflict` reads again and retries. No two writers ever land on the same
/// version, so every operation lands exactly once and the thread's version equals the number
/// of commits.
pub fn concurrent_fenced_writers_on_one_thread<S: StoreHandles>(store: &mut S) -> CaseResult {
    let per_writer = 10usize;
    race(store, |i, handle| {
        let run_id = format!("fenced-{i}");
        for k in 0..per_writer {
            let mut attempts = 0u32;
            loop {
                attempts += 1;
                if attempts > 10_000 {
                    return Err(format!("writer {i}, commit {k}: never got through"));
                }
                let version = handle
                    .thread_version(&thread("fenced"))
                    .map_err(|e| format!("writer {i}: thread_version failed: {e}"))?;
                let op = CommitOperation::new(
                    commit(
                        "fenced",
                        running(&run_id),
                        vec![user(&format!("{i}:{k}"))],
                        vec![],
                    ),
                    k as u64,
                    version,
                );
                match handle.commit_operation(op) {
                    Ok(receipt) if !receipt.duplicate => break,
                    Ok(_) => return Err(format!("writer {i}, commit {k}: a duplicate receipt")),
                    Err(StoreError::Rejected(CommitError::VersionConflict { .. })) => continue,
                    Err(e) => return Err(format!("writer {i}, commit {k}: {e}")),
                }
            }
        }
        Ok(())
    })?;
    let total = WRITERS * per_writer;
    let texts: Vec<String> = read(
        "committed_messages",
        store.committed_messages(&thread("fenced")),
    )?
    .iter()
    .map(message_text)
    .collect();
    expect_eq("messages of the fenced thread", &total, &texts.len())?;
    let mut unique = texts.clone();
    unique.sort();
    unique.dedup();
    expect_eq("distinct messages (nothing doubled)", &total, &unique.len())?;
    expect_eq(
        "thread_version(fenced)",
        &(total as u64),
        &read("thread_version", store.thread_version(&thread("fenced")))?,
    )?;
    for i in 0..WRITERS {
        let record = read("run", store.run(&RunId::new(format!("fenced-{i}"))))?;
        expect_eq(
            &format!("commits of fenced-{i}"),
            &Some(per_writer as u64),
            &record.map(|r| r.commits),
        )?;
    }
    // One more operation on the final version goes through; one on a stale version does not.
    let stale = CommitOperation::new(
        commit("fenced", running("late"), vec![], vec![]),
        0,
        total as u64 - 1,
    );
    match store.commit_operation(stale) {
        Err(StoreError::Rejected(CommitError::VersionConflict { .. })) => {}
        other => {
            return Err(format!(
                "a stale operation after the race: expected VersionConflict, got {other:?}"
            )
            .into());
        }
    }
    accepted(
        "an operation on the final version",
        store.commit_operation(CommitOperation::new(
            commit("fenced", running("late"), vec![], vec![]),
            0,
            total as u64,
        )),
    )?;
    dense_after_race(store, total + 1)
}
