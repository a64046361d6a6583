//! PostgreSQL against the reference: random scripts of commits and operations — valid and not,
//! on ids with NUL bytes, capitals and non-ASCII letters (whose order a database collation
//! could change), with floats in state and payloads — get the same answer from
//! `PostgresStore` as from `MemoryStore`, step by step, and leave both reading the same.

mod support;

use proptest::prelude::*;
use runcore::store::{CheckpointReader, CommitLog, CommittedThreadView, EventScope, MemoryStore};
use runcore::{
    AuditDraft, CommitOperation, EndCause, Message, PauseReason, ResumeTicket, RunDisposition,
    RunId, StateCommand, StateScope, ThreadCommit, ThreadId, WaitIdentity,
};
use serde_json::json;

/// Ids whose byte order differs from a typical collation's order, one with a NUL byte.
const THREADS: &[&str] = &["thread", "Thread", "é-thread", "a\u{0}b", "z"];
const RUNS: &[&str] = &["run-1", "Run-1", "ü-run", "r\u{0}2", "run-10", "run-9"];

#[derive(Debug, Clone)]
enum Disposition {
    Running,
    /// Awaiting, with the ticket naming the commit's thread or (invalid) another one.
    Awaiting {
        own_thread: bool,
    },
    Ended(u8),
}

#[derive(Debug, Clone)]
struct Step {
    thread: usize,
    run: usize,
    disposition: Disposition,
    messages: usize,
    state: usize,
    drafts: usize,
    value: f64,
    /// `None`: a plain commit; `Some((ordinal shift, version shift, reuse the last hash))`:
    /// an operation, usually right (shift 0), sometimes stale or ahead.
    operation: Option<(i8, i8, bool)>,
    state_changed: bool,
}

fn disposition() -> impl Strategy<Value = Disposition> {
    prop_oneof![
        4 => Just(Disposition::Running),
        2 => Just(Disposition::Awaiting { own_thread: true }),
        1 => Just(Disposition::Awaiting { own_thread: false }),
        2 => (0u8..4).prop_map(Disposition::Ended),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..THREADS.len(),
        0..RUNS.len(),
        disposition(),
        0usize..3,
        0usize..3,
        0usize..3,
        prop_oneof![Just(0.1), Just(1e300), Just(-2.5e-8), Just(1.0 / 3.0)],
        prop_oneof![
            1 => Just(None),
            3 => Just(Some((0, 0, false))),
            1 => (-1i8..=1, -1i8..=1, any::<bool>()).prop_map(Some),
        ],
        any::<bool>(),
    )
        .prop_map(
            |(thread, run, disposition, messages, state, drafts, value, operation, changed)| Step {
                thread,
                run,
                disposition,
                messages,
                state,
                drafts,
                value,
                operation,
                state_changed: changed,
            },
        )
}

fn cause(n: u8) -> EndCause {
    match n {
        0 => EndCause::NaturalEnd,
        1 => EndCause::Cancelled,
        2 => EndCause::Stopped("budget".into()),
        _ => EndCause::Indeterminate,
    }
}

fn build(step: &Step, index: usize) -> ThreadCommit {
    let thread = THREADS[step.thread];
    let run = RunId::new(RUNS[step.run]);
    let disposition = match &step.disposition {
        Disposition::Running => RunDisposition::Running { run_id: run },
        Disposition::Awaiting { own_thread } => {
            let ticket_thread = if *own_thread {
                thread
            } else {
                THREADS[(step.thread + 1) % THREADS.len()]
            };
            RunDisposition::Awaiting(Box::new(ResumeTicket::pause(
                WaitIdentity {
                    correlation_id: format!("{run}:wait-{index}"),
                    run_id: run,
                    thread_id: ThreadId::new(ticket_thread),
                    snapshot_id: "snapshot".into(),
                    catalog_fingerprint: "catalog".into(),
                },
                PauseReason::Manual,
                Some(1_000 + index as u64),
            )))
        }
        Disposition::Ended(n) => RunDisposition::Ended {
            run_id: run,
            cause: cause(*n),
        },
    };
    ThreadCommit::assemble(
        ThreadId::new(thread),
        disposition,
        step.state_changed,
        (0..step.messages)
            .map(|i| Message::user(format!("message {index}.{i} ✓")))
            .collect(),
        (0..step.state)
            .map(|i| {
                let scope = if i % 2 == 0 {
                    StateScope::Thread
                } else {
                    StateScope::Run
                };
                StateCommand::set(scope, format!("k{i}"), json!({ "v": step.value, "i": i }))
            })
            .collect(),
        (0..step.drafts)
            .map(|i| AuditDraft::new(format!("kind-{i}\u{0}x"), json!([step.value, i, null])))
            .collect(),
    )
}

fn shifted(value: u64, shift: i8) -> u64 {
    value.saturating_add_signed(i64::from(shift))
}

/// Applies one step to both stores and checks they answer alike.
fn apply(
    memory: &mut MemoryStore,
    postgres: &mut support::Scratch,
    step: &Step,
    index: usize,
    last_hash: &mut String,
) -> Result<(), TestCaseError> {
    let commit = build(step, index);
    match step.operation {
        None => {
            let expected = memory.commit(commit.clone());
            let got = postgres.commit(commit);
            prop_assert_eq!(expected, got, "step {}: commit", index);
        }
        Some((ordinal_shift, version_shift, reuse_hash)) => {
            let run = commit.run_id().clone();
            let ordinal = shifted(memory.run_commit_count(&run), ordinal_shift);
            let version = shifted(
                memory
                    .thread_version(&commit.thread_id)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?,
                version_shift,
            );
            let mut operation = CommitOperation::new(commit, ordinal, version);
            if reuse_hash && !last_hash.is_empty() {
                operation.payload_hash = last_hash.clone();
            }
            *last_hash = operation.payload_hash.clone();
            let expected = memory.commit_operation(operation.clone());
            let got = postgres.commit_operation(operation);
            prop_assert_eq!(expected, got, "step {}: operation", index);
        }
    }
    Ok(())
}

/// Every read of both stores, compared.
fn same_reads(memory: &MemoryStore, postgres: &support::Scratch) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        memory.threads(None, usize::MAX),
        postgres.threads(None, usize::MAX)
    );
    prop_assert_eq!(
        memory.pending_tickets(None, usize::MAX),
        postgres.pending_tickets(None, usize::MAX)
    );
    prop_assert_eq!(
        memory.list_events(&EventScope::All, None, usize::MAX),
        postgres.list_events(&EventScope::All, None, usize::MAX)
    );
    for name in THREADS {
        let id = ThreadId::new(*name);
        prop_assert_eq!(
            memory.committed_messages(&id),
            postgres.committed_messages(&id)
        );
        prop_assert_eq!(memory.committed_state(&id), postgres.committed_state(&id));
        prop_assert_eq!(memory.thread_version(&id), postgres.thread_version(&id));
        prop_assert_eq!(memory.latest_run(&id), postgres.latest_run(&id));
        let pinned = memory.transcript_snapshot(&id);
        prop_assert_eq!(&pinned, &postgres.transcript_snapshot(&id));
        if let Ok(pinned) = pinned {
            prop_assert_eq!(
                memory.verify_transcript_snapshot(&pinned),
                postgres.verify_transcript_snapshot(&pinned)
            );
            let ranges = [0..pinned.end / 2, pinned.end / 2..pinned.end];
            prop_assert_eq!(
                memory.transcript_slice(&pinned, &ranges),
                postgres.transcript_slice(&pinned, &ranges)
            );
        }
        prop_assert_eq!(memory.threads(Some(&id), 2), postgres.threads(Some(&id), 2));
        let scope = EventScope::Thread(id);
        prop_assert_eq!(
            memory.list_events(&scope, Some(2), 3),
            postgres.list_events(&scope, Some(2), 3)
        );
    }
    for name in RUNS {
        let id = RunId::new(*name);
        prop_assert_eq!(memory.run(&id), postgres.run(&id));
        prop_assert_eq!(memory.resume_ticket(&id), postgres.resume_ticket(&id));
        prop_assert_eq!(
            memory.pending_tickets(Some(&id), 1),
            postgres.pending_tickets(Some(&id), 1)
        );
        let scope = EventScope::Run(id);
        prop_assert_eq!(
            memory.list_events(&scope, None, usize::MAX),
            postgres.list_events(&scope, None, usize::MAX)
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn postgres_answers_like_the_reference(steps in prop::collection::vec(step(), 1..40)) {
        let Some(server) = support::server() else {
            return Ok(());
        };
        let mut memory = MemoryStore::new();
        let mut postgres = server.scratch();
        let mut last_hash = String::new();
        for (index, step) in steps.iter().enumerate() {
            apply(&mut memory, &mut postgres, step, index, &mut last_hash)?;
        }
        same_reads(&memory, &postgres)?;
    }
}
