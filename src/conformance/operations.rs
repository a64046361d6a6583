//! Cases about idempotent commit operations: duplicates, payload reuse, version and ordinal
//! conflicts.

use super::CaseResult;
use super::support::{
    accepted, commit, ended, ensure, expect_eq, observe, rejected_with, run, running, unchanged,
    user,
};
use crate::commit::{CommitError, CommitOperation};
use crate::run::EndCause;
use crate::store::{CheckpointReader, CommitLog};

/// Retrying an operation with the same hash returns the stored receipt with `duplicate = true`
/// and appends nothing, even after the thread moved on or the run ended.
pub fn operation_duplicate_returns_stored_receipt<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    let first = CommitOperation::new(
        commit("t1", running("r1"), vec![user("once")], vec![]),
        0,
        0,
    );
    let receipt = accepted("the first operation", store.commit_operation(first.clone()))?;
    expect_eq(
        "the first receipt's duplicate flag",
        &false,
        &receipt.duplicate,
    )?;
    expect_eq(
        "the first receipt's operation id",
        &first.operation_id,
        &receipt.operation_id,
    )?;
    expect_eq(
        "the first receipt's payload hash",
        &first.payload_hash,
        &receipt.payload_hash,
    )?;
    expect_eq("the first receipt's sequence", &1, &receipt.record.sequence)?;
    expect_eq(
        "the first receipt's thread_version",
        &1,
        &receipt.record.thread_version,
    )?;

    let before = observe(store, &["t1"], &["r1"])?;
    let retry = accepted("the retry", store.commit_operation(first.clone()))?;
    let mut want = receipt.clone();
    want.duplicate = true;
    expect_eq("the retry's receipt", &want, &retry)?;
    unchanged(
        "a duplicate operation",
        &before,
        &observe(store, &["t1"], &["r1"])?,
    )?;

    let end = CommitOperation::new(
        commit("t1", ended("r1", EndCause::NaturalEnd), vec![], vec![]),
        1,
        1,
    );
    let end_receipt = accepted("the ending operation", store.commit_operation(end.clone()))?;
    accepted(
        "another run",
        store.commit(commit("t1", running("r2"), vec![], vec![])),
    )?;
    let before = observe(store, &["t1"], &["r1", "r2"])?;
    for (what, operation, stored) in [
        (
            "retry of the first operation after the run ended",
            first,
            receipt,
        ),
        (
            "retry of the ending operation after the run ended",
            end,
            end_receipt,
        ),
    ] {
        let mut want = stored;
        want.duplicate = true;
        expect_eq(what, &Ok(want), &store.commit_operation(operation))?;
        unchanged(what, &before, &observe(store, &["t1"], &["r1", "r2"])?)?;
    }
    Ok(())
}

/// Reusing an operation id with another payload hash is rejected and changes nothing.
pub fn operation_payload_reuse_is_rejected<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    let original = CommitOperation::new(commit("t1", running("r1"), vec![user("a")], vec![]), 0, 0);
    accepted(
        "the original operation",
        store.commit_operation(original.clone()),
    )?;
    let before = observe(store, &["t1"], &["r1"])?;
    let other = CommitOperation::new(commit("t1", running("r1"), vec![user("b")], vec![]), 0, 0);
    ensure(other.payload_hash != original.payload_hash, || {
        "two different commits hashed the same".to_owned()
    })?;
    rejected_with(
        "the same operation id with another commit",
        store.commit_operation(other.clone()),
        &CommitError::PayloadMismatch {
            run_id: run("r1"),
            ordinal: 0,
            stored: original.payload_hash.clone(),
            got: other.payload_hash,
        },
    )?;
    unchanged("payload reuse", &before, &observe(store, &["t1"], &["r1"])?)?;
    let mut tampered = original.clone();
    tampered.payload_hash = "0".repeat(64);
    rejected_with(
        "the same commit under another hash",
        store.commit_operation(tampered),
        &CommitError::PayloadMismatch {
            run_id: run("r1"),
            ordinal: 0,
            stored: original.payload_hash,
            got: "0".repeat(64),
        },
    )?;
    unchanged("payload reuse", &before, &observe(store, &["t1"], &["r1"])?)
}

/// `expected_thread_version` must equal the thread's commit count; a stale or future version
/// is rejected and changes nothing.
pub fn operation_version_conflict_is_rejected<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    accepted(
        "r0 on t1",
        store.commit(commit("t1", running("r0"), vec![], vec![])),
    )?;
    accepted(
        "r0 again",
        store.commit(commit("t1", running("r0"), vec![], vec![])),
    )?;
    let before = observe(store, &["t1"], &["r0", "r1"])?;
    for stale in [0, 1, 3, u64::MAX] {
        let op = CommitOperation::new(
            commit("t1", running("r1"), vec![user("x")], vec![]),
            0,
            stale,
        );
        rejected_with(
            &format!("expected_thread_version {stale} on a thread at 2"),
            store.commit_operation(op),
            &CommitError::VersionConflict {
                expected: stale,
                actual: 2,
            },
        )?;
        unchanged(
            "a version conflict",
            &before,
            &observe(store, &["t1"], &["r0", "r1"])?,
        )?;
    }
    let op = CommitOperation::new(commit("t1", running("r1"), vec![user("x")], vec![]), 0, 2);
    let receipt = accepted(
        "the operation at the right version",
        store.commit_operation(op),
    )?;
    expect_eq("its thread_version", &3, &receipt.record.thread_version)?;
    let fresh = CommitOperation::new(commit("t2", running("r2"), vec![], vec![]), 0, 1);
    rejected_with(
        "expected_thread_version 1 on a thread with no commits",
        store.commit_operation(fresh),
        &CommitError::VersionConflict {
            expected: 1,
            actual: 0,
        },
    )
}

/// The ordinal must equal the run's committed-commit count (plain commits included); a
/// skipped or repeated ordinal is rejected and changes nothing.
pub fn operation_ordinal_conflict_is_rejected<S: CommitLog + CheckpointReader>(
    store: &mut S,
) -> CaseResult {
    accepted(
        "plain commit of r1",
        store.commit(commit("t1", running("r1"), vec![], vec![])),
    )?;
    let before = observe(store, &["t1"], &["r1"])?;
    for ordinal in [0, 2, u64::MAX] {
        let op = CommitOperation::new(
            commit("t1", running("r1"), vec![user("x")], vec![]),
            ordinal,
            1,
        );
        rejected_with(
            &format!("ordinal {ordinal} for a run with 1 commit"),
            store.commit_operation(op),
            &CommitError::OrdinalConflict {
                expected: 1,
                got: ordinal,
            },
        )?;
        unchanged(
            "an ordinal conflict",
            &before,
            &observe(store, &["t1"], &["r1"])?,
        )?;
    }
    let op = CommitOperation::new(commit("t1", running("r1"), vec![user("x")], vec![]), 1, 1);
    accepted("ordinal 1", store.commit_operation(op))?;
    let first_of_new_run = CommitOperation::new(commit("t1", running("r2"), vec![], vec![]), 1, 2);
    rejected_with(
        "ordinal 1 for a run with no commits",
        store.commit_operation(first_of_new_run),
        &CommitError::OrdinalConflict {
            expected: 0,
            got: 1,
        },
    )
}
