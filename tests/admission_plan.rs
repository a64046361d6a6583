//! The plan `admit_commit` hands a backend (SPEC §7.1): the transcript digest after the commit.
//!
//! `MemoryStore` keeps the per-message digests; SQLite reads `AppendPlan::transcript_digest`
//! for the thread's new head digest. This pins it in the root crate, where the mutant that
//! made it return `""` lived (see docs/mutants.md).

use runcore::store::*;
use runcore::*;

fn commit(messages: Vec<Message>) -> ThreadCommit {
    ThreadCommit::assemble(
        ThreadId::new("thread-1"),
        RunDisposition::Running {
            run_id: RunId::new("thread-1/run-1"),
        },
        false,
        messages,
        Vec::new(),
        Vec::new(),
    )
}

fn plan(commit: &ThreadCommit, head: &CommitHead) -> AppendPlan {
    match admit_commit(commit, head) {
        Admission::Append(plan) => plan,
        other => panic!("expected an append, got {other:?}"),
    }
}

#[test]
fn the_plans_transcript_digest_is_the_chain_after_its_last_message() {
    let mut head = CommitHead::empty(u64::MAX);
    head.thread_version = 1;
    head.message_count = 1;
    head.transcript_digest = chain_digest("", &Message::user("m0"));
    let previous = head.transcript_digest.clone();

    let messages = vec![Message::user("m1"), Message::user("m2")];
    let with_messages = plan(&commit(messages.clone()), &head);
    let after_m1 = chain_digest(&previous, &messages[0]);
    let after_m2 = chain_digest(&after_m1, &messages[1]);
    assert_eq!(with_messages.digests, [after_m1, after_m2.clone()]);
    assert_eq!(with_messages.transcript_digest(&previous), after_m2);
    assert_eq!(
        after_m2,
        transcript_digest(&[
            Message::user("m0"),
            messages[0].clone(),
            messages[1].clone()
        ]),
        "the chain is the digest of the whole transcript"
    );

    let without_messages = plan(&commit(Vec::new()), &head);
    assert!(without_messages.digests.is_empty());
    assert_eq!(
        without_messages.transcript_digest(&previous),
        previous,
        "a commit without messages keeps the thread's digest"
    );
}

#[test]
fn the_plan_says_whether_the_thread_and_the_run_are_new() {
    let first = commit(vec![Message::user("m0")]);
    let empty = plan(&first, &CommitHead::empty(u64::MAX));
    assert!(
        empty.new_thread,
        "a thread with no commit gets its head row created"
    );
    assert!(empty.new_run, "a run with no commit gets its row created");
    assert_eq!((empty.thread_version, empty.run_commits), (1, 1));

    let mut head = CommitHead::empty(u64::MAX);
    head.thread_version = 1;
    head.message_count = 1;
    head.run = Some(RunHead {
        thread_id: ThreadId::new("thread-1"),
        state: RunState::Running,
        commits: 1,
    });
    let second = plan(&commit(Vec::new()), &head);
    assert!(!second.new_thread, "the thread's head row is updated");
    assert!(!second.new_run, "the run's row is updated");
    assert_eq!((second.thread_version, second.run_commits), (2, 2));
    assert_eq!(second.message_start, 1);
}
