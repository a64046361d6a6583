//! Cases about what a store must refuse: the terminal fence, tickets that must disappear, run
//! ids on another thread, and rejections that must leave no trace.

use serde_json::json;

use super::CaseResult;
use super::support::{
    accepted, all_events, assistant, awaiting, commit, ended, ensure, every_end_cause, expect_eq,
    observe, pause_ticket, permission_ticket, rejected_with, rejected_with_code, run, running,
    thread, unchanged, user,
};
use crate::commit::{COMMIT_SCHEMA_VERSION, CommitError, CommitOperation, ThreadCommit, kinds};
use crate::run::{EndCause, RunState};
use crate::state::{MergePolicy, StateCommand, StateScope};
use crate::store::{CheckpointReader, CommitLog, EventScope};

/// After `Ended(cause)`, every disposition (Running, Awaiting, every Ended, even the same one)
/// is rejected with `AlreadyTerminal { cause }`, through `commit` and `commit_operation`, and
/// leaves no message, event, state, sequence or version behind.
pub fn terminal_run_is_fenced<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    let causes = every_end_cause();
    let run_names: Vec<String> = (0..causes.len()).map(|i| format!("r{i}")).collect();
    let run_refs: Vec<&str> = run_names.iter().map(String::as_str).collect();
    let mut version = 0u64;
    let mut sequence = 0u64;
    for (name, cause) in run_names.iter().zip(&causes) {
        for c in [
            commit("t1", running(name), vec![user("go")], vec![]),
            commit(
                "t1",
                ended(name, cause.clone()),
                vec![assistant("done")],
                vec![],
            ),
        ] {
            let record = accepted(&format!("setting up {name}"), store.commit(c))?;
            version += 1;
            sequence = record.sequence;
        }
    }
    let before = observe(store, &["t1"], &run_refs)?;
    for (name, cause) in run_names.iter().zip(&causes) {
        let fence = CommitError::AlreadyTerminal {
            run_id: run(name),
            cause: cause.clone(),
        };
        let mut attempts = vec![
            ("Running", running(name)),
            (
                "Awaiting",
                awaiting(pause_ticket("t1", name, &format!("{name}:wait-9"))),
            ),
        ];
        for next in &causes {
            attempts.push(("Ended", ended(name, next.clone())));
        }
        for (label, disposition) in attempts {
            let what = format!("{label} after {name} ended with {cause:?}");
            let late = commit(
                "t1",
                disposition,
                vec![user("late")],
                vec![StateCommand::set(StateScope::Thread, "late", json!(true))],
            );
            rejected_with(&what, store.commit(late.clone()), &fence)?;
            unchanged(&what, &before, &observe(store, &["t1"], &run_refs)?)?;
            rejected_with(
                &format!("{what}, as an operation"),
                store.commit_operation(CommitOperation::new(late, 2, version)),
                &fence,
            )?;
            unchanged(&what, &before, &observe(store, &["t1"], &run_refs)?)?;
        }
    }
    // The fence is per run: the thread itself still accepts commits, and nothing was consumed.
    let record = accepted(
        "a new run after the fenced attempts",
        store.commit(commit("t1", running("fresh"), vec![], vec![])),
    )?;
    expect_eq(
        "sequence after rejected commits",
        &sequence.saturating_add(1),
        &record.sequence,
    )?;
    expect_eq(
        "thread_version after rejected commits",
        &(version + 1),
        &record.thread_version,
    )
}

/// An Awaiting commit makes its ticket readable (while the run is Awaiting); the run's next
/// commit, whatever its disposition, deletes it.
pub fn ticket_appears_with_awaiting_and_disappears_with_next_commit<
    S: CommitLog + CheckpointReader,
>(
    store: &mut S,
) -> CaseResult {
    let r1 = run("r1");
    accepted(
        "start",
        store.commit(commit("t1", running("r1"), vec![], vec![])),
    )?;
    expect_eq(
        "resume_ticket before Awaiting",
        &None,
        &store.resume_ticket(&r1)?,
    )?;

    let first = permission_ticket("t1", "r1", "r1:wait-1");
    accepted(
        "await",
        store.commit(commit("t1", awaiting(first.clone()), vec![], vec![])),
    )?;
    expect_eq(
        "resume_ticket while Awaiting",
        &Some(first),
        &store.resume_ticket(&r1)?,
    )?;
    expect_eq(
        "run_state while Awaiting",
        &Some(RunState::Awaiting),
        &store.run_state(&r1)?,
    )?;
    let awaiting_events = all_events(store, &EventScope::Run(r1.clone()))?;
    let awaiting_kinds: Vec<&str> = awaiting_events.iter().map(|e| e.kind.as_str()).collect();
    ensure(awaiting_kinds.contains(&kinds::RUN_AWAITING), || {
        format!("an Awaiting commit's `run_awaiting` draft must be stored, got {awaiting_kinds:?}")
    })?;

    accepted(
        "resume",
        store.commit(commit("t1", running("r1"), vec![], vec![])),
    )?;
    expect_eq(
        "resume_ticket after the resume commit",
        &None,
        &store.resume_ticket(&r1)?,
    )?;

    let second = pause_ticket("t1", "r1", "r1:wait-2");
    accepted(
        "await again",
        store.commit(commit("t1", awaiting(second.clone()), vec![], vec![])),
    )?;
    expect_eq(
        "resume_ticket while Awaiting again",
        &Some(second),
        &store.resume_ticket(&r1)?,
    )?;
    accepted(
        "end while Awaiting",
        store.commit(commit(
            "t1",
            ended("r1", EndCause::Cancelled),
            vec![],
            vec![],
        )),
    )?;
    expect_eq(
        "resume_ticket after Ended",
        &None,
        &store.resume_ticket(&r1)?,
    )
}

/// Awaiting → Awaiting replaces the ticket: only the newest is readable.
pub fn awaiting_to_awaiting_replaces_ticket<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    let r1 = run("r1");
    let first = permission_ticket("t1", "r1", "r1:wait-1");
    let second = pause_ticket("t1", "r1", "r1:wait-2");
    accepted(
        "first wait",
        store.commit(commit("t1", awaiting(first), vec![], vec![])),
    )?;
    accepted(
        "second wait",
        store.commit(commit("t1", awaiting(second.clone()), vec![], vec![])),
    )?;
    expect_eq(
        "resume_ticket after Awaiting → Awaiting",
        &Some(second),
        &store.resume_ticket(&r1)?,
    )?;
    expect_eq(
        "run_state",
        &Some(RunState::Awaiting),
        &store.run_state(&r1)?,
    )
}

/// A run id committed on one thread cannot be committed on another, whatever the disposition;
/// the rejection changes nothing.
pub fn run_id_reused_on_another_thread_is_rejected<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    accepted(
        "r1 on t1",
        store.commit(commit("t1", running("r1"), vec![user("x")], vec![])),
    )?;
    accepted(
        "r2 on t2",
        store.commit(commit("t2", running("r2"), vec![user("y")], vec![])),
    )?;
    let before = observe(store, &["t1", "t2"], &["r1", "r2"])?;
    let expected = CommitError::RunOnOtherThread {
        run_id: run("r1"),
        existing_thread: thread("t1"),
        commit_thread: thread("t2"),
    };
    for (label, disposition) in [
        ("Running", running("r1")),
        ("Awaiting", awaiting(pause_ticket("t2", "r1", "r1:wait-1"))),
        ("Ended", ended("r1", EndCause::NaturalEnd)),
    ] {
        let what = format!("{label} for r1 on t2");
        let c = commit("t2", disposition, vec![user("stolen")], vec![]);
        rejected_with(&what, store.commit(c.clone()), &expected)?;
        unchanged(
            &what,
            &before,
            &observe(store, &["t1", "t2"], &["r1", "r2"])?,
        )?;
        rejected_with(
            &format!("{what}, as an operation"),
            store.commit_operation(CommitOperation::new(c, 1, 1)),
            &expected,
        )?;
        unchanged(
            &what,
            &before,
            &observe(store, &["t1", "t2"], &["r1", "r2"])?,
        )?;
    }
    Ok(())
}

/// Every kind of rejected commit and operation (invalid shape, fence, run on another thread,
/// payload, version, ordinal, operation/commit run mismatch) changes no read result and
/// consumes no sequence or version.
pub fn rejected_commits_change_no_read_result<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    let threads = ["t1", "t2"];
    let runs = ["r0", "r1", "r2"];
    let op = CommitOperation::new(commit("t1", running("r0"), vec![user("a")], vec![]), 0, 0);
    accepted("r0 starts", store.commit_operation(op.clone()))?;
    accepted(
        "r0 ends",
        store.commit(commit(
            "t1",
            ended("r0", EndCause::MaxSteps),
            vec![],
            vec![],
        )),
    )?;
    accepted(
        "r1 awaits",
        store.commit(commit(
            "t1",
            awaiting(permission_ticket("t1", "r1", "r1:wait-1")),
            vec![assistant("may I?")],
            vec![StateCommand::set(StateScope::Run, "k", json!(1))],
        )),
    )?;
    let last = accepted(
        "r2 runs",
        store.commit(commit("t2", running("r2"), vec![user("b")], vec![])),
    )?;
    let before = observe(store, &threads, &runs)?;

    let exclusive =
        StateCommand::set(StateScope::Thread, "lock", json!(1)).with_merge(MergePolicy::Exclusive);
    let mut newer_schema = commit("t1", running("r1"), vec![user("x")], vec![]);
    newer_schema.schema_version = COMMIT_SCHEMA_VERSION + 1;
    let mut blank_correlation = permission_ticket("t1", "r1", "r1:wait-2");
    blank_correlation.correlation_id = "  ".to_owned();
    let plain_rejections: Vec<(&str, ThreadCommit, &str)> = vec![
        (
            "a newer schema version",
            newer_schema,
            "unsupported_schema_version",
        ),
        (
            "an empty thread id",
            commit("", running("r1"), vec![user("x")], vec![]),
            "empty_thread_id",
        ),
        (
            "a blank run id",
            commit("t1", running(" "), vec![user("x")], vec![]),
            "empty_run_id",
        ),
        (
            "a blank correlation id",
            commit("t1", awaiting(blank_correlation), vec![user("x")], vec![]),
            "empty_correlation_id",
        ),
        (
            "a ticket for another thread",
            commit(
                "t1",
                awaiting(pause_ticket("t2", "r1", "r1:wait-3")),
                vec![user("x")],
                vec![],
            ),
            "ticket_thread_mismatch",
        ),
        (
            "a repeated Exclusive set",
            commit(
                "t1",
                running("r1"),
                vec![user("x")],
                vec![exclusive.clone(), exclusive],
            ),
            "exclusive_conflict",
        ),
        (
            "a commit to an ended run",
            commit("t1", running("r0"), vec![user("x")], vec![]),
            "already_terminal",
        ),
        (
            "a run on another thread",
            commit("t2", running("r1"), vec![user("x")], vec![]),
            "run_on_other_thread",
        ),
    ];
    for (what, c, code) in plain_rejections {
        rejected_with_code(what, store.commit(c.clone()), code)?;
        unchanged(what, &before, &observe(store, &threads, &runs)?)?;
        // Through commit_operation with a correct version and ordinal, the same rule rejects.
        let version = match c.thread_id.as_str() {
            "t1" => 3,
            "t2" => 1,
            _ => 0,
        };
        let ordinal = match c.run_id().as_str() {
            "r0" => 2,
            "r1" | "r2" => 1,
            _ => 0,
        };
        rejected_with_code(
            &format!("{what}, as an operation"),
            store.commit_operation(CommitOperation::new(c, ordinal, version)),
            code,
        )?;
        unchanged(what, &before, &observe(store, &threads, &runs)?)?;
    }

    let mut foreign =
        CommitOperation::new(commit("t1", running("r1"), vec![user("x")], vec![]), 1, 3);
    foreign.operation_id.run_id = run("r2");
    let mut reused = op.clone();
    reused.payload_hash = "f".repeat(64);
    let operation_rejections: Vec<(&str, CommitOperation, &str)> = vec![
        (
            "an operation naming another run",
            foreign,
            "operation_run_mismatch",
        ),
        (
            "an operation id reused with another hash",
            reused,
            "payload_mismatch",
        ),
        (
            "a stale thread version",
            CommitOperation::new(commit("t1", running("r1"), vec![user("x")], vec![]), 1, 2),
            "version_conflict",
        ),
        (
            "a skipped ordinal",
            CommitOperation::new(commit("t1", running("r1"), vec![user("x")], vec![]), 2, 3),
            "ordinal_conflict",
        ),
    ];
    for (what, operation, code) in operation_rejections {
        rejected_with_code(what, store.commit_operation(operation), code)?;
        unchanged(what, &before, &observe(store, &threads, &runs)?)?;
    }

    let next = accepted(
        "a valid commit after the rejections",
        store.commit(commit("t1", running("r1"), vec![user("ok")], vec![])),
    )?;
    expect_eq(
        "its sequence (nothing consumed)",
        &last.sequence.saturating_add(1),
        &next.sequence,
    )?;
    expect_eq(
        "its thread_version (nothing consumed)",
        &4,
        &next.thread_version,
    )?;
    let next_op = CommitOperation::new(commit("t1", running("r1"), vec![], vec![]), 2, 4);
    accepted(
        "an operation at the expected version and ordinal",
        store.commit_operation(next_op),
    )?;
    Ok(())
}
