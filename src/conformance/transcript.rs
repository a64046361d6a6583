//! The transcript snapshot case: pins, slices, and every documented error.
// `transcript_slice` takes a list of ranges; a list of one range is the input under test,
// not a mistaken `vec![0; n]`.
#![allow(clippy::single_range_in_vec_init)]

use std::ops::Range;

use super::CaseResult;
use super::support::{accepted, assistant, commit, expect_eq, pinned, running, thread, user};
use crate::message::Message;
use crate::store::{
    CheckpointReader, CommitLog, TranscriptError, TranscriptSnapshotRef, transcript_digest,
};

/// Transcript snapshots pin a prefix that keeps verifying as the thread grows; slices return
/// the messages of sorted, non-overlapping, half-open ranges; bad ranges, too-long pins and
/// pins whose content differs are the documented errors.
pub fn transcript_snapshots<S: CommitLog + CheckpointReader>(store: &mut S) -> CaseResult {
    let messages = vec![user("m0"), assistant("m1"), user("m2")];
    accepted(
        "first messages",
        store.commit(commit("t1", running("r1"), messages.clone(), vec![])),
    )?;
    let t1 = thread("t1");
    let pin = store.transcript_snapshot(&t1)?;
    expect_eq(
        "the pin",
        &TranscriptSnapshotRef {
            thread_id: t1.clone(),
            end: 3,
            digest: transcript_digest(&messages),
        },
        &pin,
    )?;
    expect_eq(
        "verify a fresh pin",
        &Ok(()),
        &pinned(store.verify_transcript_snapshot(&pin))?,
    )?;

    let pick = |indexes: &[usize]| -> Vec<Message> {
        indexes
            .iter()
            .filter_map(|&i| messages.get(i).cloned())
            .collect()
    };
    let slices: [(&[Range<usize>], Vec<Message>); 5] = [
        (&[], vec![]),
        (&[0..3], pick(&[0, 1, 2])),
        (&[0..1, 2..3], pick(&[0, 2])),
        (&[1..1, 1..2], pick(&[1])),
        (&[0..1, 1..3], pick(&[0, 1, 2])),
    ];
    for (ranges, want) in &slices {
        expect_eq(
            &format!("transcript_slice({ranges:?})"),
            &Ok(want.clone()),
            &pinned(store.transcript_slice(&pin, ranges))?,
        )?;
    }

    accepted(
        "more messages",
        store.commit(commit(
            "t1",
            running("r1"),
            vec![assistant("m3"), user("m4")],
            vec![],
        )),
    )?;
    expect_eq(
        "verify the old pin after growth",
        &Ok(()),
        &pinned(store.verify_transcript_snapshot(&pin))?,
    )?;
    for (ranges, want) in &slices {
        expect_eq(
            &format!("transcript_slice({ranges:?}) of the old pin after growth"),
            &Ok(want.clone()),
            &pinned(store.transcript_slice(&pin, ranges))?,
        )?;
    }
    let grown = store.transcript_snapshot(&t1)?;
    expect_eq("the new pin's end", &5, &grown.end)?;
    expect_eq(
        "a slice of the new pin",
        &Ok(vec![assistant("m3"), user("m4")]),
        &pinned(store.transcript_slice(&grown, &[3..5]))?,
    )?;

    let invalid: [(Vec<Range<usize>>, TranscriptError); 4] = [
        (
            vec![2..4],
            TranscriptError::InvalidRange {
                start: 2,
                end: 4,
                limit: 3,
            },
        ),
        (
            vec![Range { start: 2, end: 1 }],
            TranscriptError::InvalidRange {
                start: 2,
                end: 1,
                limit: 3,
            },
        ),
        (
            vec![0..2, 1..3],
            TranscriptError::OverlappingRanges { start: 1, end: 3 },
        ),
        (
            vec![2..3, 0..1],
            TranscriptError::OverlappingRanges { start: 0, end: 1 },
        ),
    ];
    for (ranges, error) in invalid {
        expect_eq(
            &format!("transcript_slice({ranges:?}) of a 3-message pin"),
            &Err(error),
            &pinned(store.transcript_slice(&pin, &ranges))?,
        )?;
    }

    let too_long = TranscriptSnapshotRef {
        end: 9,
        ..grown.clone()
    };
    let unavailable = TranscriptError::SnapshotUnavailable {
        thread_id: t1.clone(),
        end: 9,
        committed: 5,
    };
    expect_eq(
        "verify a pin past the end",
        &Err(unavailable.clone()),
        &pinned(store.verify_transcript_snapshot(&too_long))?,
    )?;
    expect_eq(
        "slice a pin past the end",
        &Err(unavailable),
        &pinned(store.transcript_slice(&too_long, &[0..1]))?,
    )?;

    let mismatch = TranscriptError::SnapshotMismatch {
        thread_id: t1.clone(),
    };
    let wrong_digest = TranscriptSnapshotRef {
        digest: transcript_digest(&[user("m0"), assistant("m1"), user("changed")]),
        ..pin.clone()
    };
    expect_eq(
        "verify a pin with a wrong digest",
        &Err(mismatch.clone()),
        &pinned(store.verify_transcript_snapshot(&wrong_digest))?,
    )?;
    expect_eq(
        "slice a pin with a wrong digest",
        &Err(mismatch),
        &pinned(store.transcript_slice(&wrong_digest, &[0..1]))?,
    )?;

    accepted(
        "another thread",
        store.commit(commit(
            "t2",
            running("r2"),
            vec![user("x0"), user("x1"), user("x2")],
            vec![],
        )),
    )?;
    let elsewhere = TranscriptSnapshotRef {
        thread_id: thread("t2"),
        ..pin
    };
    let mismatch = TranscriptError::SnapshotMismatch {
        thread_id: thread("t2"),
    };
    expect_eq(
        "verify t1's pin against t2",
        &Err(mismatch.clone()),
        &pinned(store.verify_transcript_snapshot(&elsewhere))?,
    )?;
    expect_eq(
        "slice t1's pin against t2",
        &Err(mismatch),
        &pinned(store.transcript_slice(&elsewhere, &[0..3]))?,
    )
}
