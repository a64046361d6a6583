//! T1: the run lifecycle (SPEC §3). Every `RunState` × next-state pair obeys
//! `permits == !is_terminal`; every terminal state absorbs every commit in the reference store
//! without a trace; and the rendered transition table is snapshotted so any change to it is a
//! reviewed diff.

mod common;

use common::strategies::run_state;
use proptest::prelude::*;
use runcore::store::{CommitLog, CommittedThreadView, MemoryStore};
use runcore::{
    AuditDraft, CallId, CommitError, CommitOperation, EndCause, Failure, Message, PauseReason,
    PendingTool, RemoteInputReason, ResumeTicket, RunDisposition, RunId, RunState, StateCommand,
    StateScope, ThreadCommit, ThreadId, ToolWaitReason, WaitIdentity,
};
use serde_json::json;

/// One of each end cause, every `Failure` included. The match fails to compile when a variant
/// is added, so the sweeps below cannot silently skip it.
fn every_end_cause() -> Vec<EndCause> {
    let all = vec![
        EndCause::NaturalEnd,
        EndCause::MaxSteps,
        EndCause::Cancelled,
        EndCause::Stopped("budget".into()),
        EndCause::Error(Failure::Inference {
            code: "overloaded".into(),
            message: "try later".into(),
        }),
        EndCause::Error(Failure::CapabilityBound),
        EndCause::Error(Failure::StateConflict),
        EndCause::Indeterminate,
    ];
    for cause in &all {
        match cause {
            EndCause::NaturalEnd
            | EndCause::MaxSteps
            | EndCause::Cancelled
            | EndCause::Stopped(_)
            | EndCause::Indeterminate
            | EndCause::Error(Failure::Inference { .. })
            | EndCause::Error(Failure::CapabilityBound)
            | EndCause::Error(Failure::StateConflict) => {}
        }
    }
    all
}

fn every_state() -> Vec<RunState> {
    let mut states = vec![RunState::Running, RunState::Awaiting];
    states.extend(every_end_cause().into_iter().map(RunState::Ended));
    for state in &states {
        match state {
            RunState::Running | RunState::Awaiting | RunState::Ended(_) => {}
        }
    }
    states
}

fn label(state: &RunState) -> String {
    match state {
        RunState::Running => "running".into(),
        RunState::Awaiting => "awaiting".into(),
        RunState::Ended(EndCause::Error(Failure::Inference { .. })) => {
            "ended(error:inference)".into()
        }
        RunState::Ended(EndCause::Error(failure)) => format!("ended(error:{})", failure.code()),
        RunState::Ended(cause) => format!("ended({})", cause.kind()),
    }
}

#[test]
fn permits_is_not_terminal_for_every_pair() {
    let states = every_state();
    assert_eq!(states.len(), 10);
    for from in &states {
        let terminal = matches!(from, RunState::Ended(_));
        assert_eq!(from.is_terminal(), terminal, "is_terminal({from:?})");
        assert_eq!(from.end_cause().is_some(), terminal, "end_cause({from:?})");
        for next in &states {
            assert_eq!(
                from.permits(next),
                !terminal,
                "permits({from:?} → {next:?})"
            );
        }
    }
}

/// A cause's kind is the `type` tag it carries on the wire, and its `Display` text (what a
/// host logs or shows) names the cause, with a stop's reason and an inference failure's code
/// and message.
#[test]
fn kinds_and_display_text() {
    let displayed: Vec<(String, String)> = every_end_cause()
        .into_iter()
        .map(|cause| {
            let wire = serde_json::to_value(&cause).unwrap();
            assert_eq!(wire["type"], cause.kind(), "kind of {cause:?}");
            (cause.kind().to_owned(), cause.to_string())
        })
        .collect();
    let expected = [
        ("natural_end", "natural_end"),
        ("max_steps", "max_steps"),
        ("cancelled", "cancelled"),
        ("stopped", "stopped: budget"),
        ("error", "error: inference overloaded: try later"),
        ("error", "error: capability_bound"),
        ("error", "error: state_conflict"),
        ("indeterminate", "indeterminate"),
    ];
    let expected: Vec<(String, String)> = expected
        .into_iter()
        .map(|(kind, text)| (kind.to_owned(), text.to_owned()))
        .collect();
    assert_eq!(displayed, expected);
}

proptest! {
    #![proptest_config(common::proptest_config("proptest-regressions/lifecycle.txt", 256))]

    #[test]
    fn permits_is_not_terminal_for_generated_pairs(from in run_state(), next in run_state()) {
        prop_assert_eq!(from.permits(&next), !from.is_terminal());
        prop_assert_eq!(from.is_terminal(), matches!(from, RunState::Ended(_)));
        // Not even the same Ended is permitted after Ended.
        prop_assert_eq!(from.permits(&from), !from.is_terminal());
    }
}

const THREAD: &str = "t";

fn identity(run: &str, correlation: &str) -> WaitIdentity {
    WaitIdentity {
        correlation_id: correlation.into(),
        run_id: run.into(),
        thread_id: THREAD.into(),
        snapshot_id: "s".into(),
        catalog_fingerprint: "f".into(),
    }
}

/// Every kind of ticket, so every Awaiting shape is tried against the fence.
fn every_ticket(run: &str) -> Vec<ResumeTicket> {
    let tool = PendingTool {
        name: "rm".into(),
        arguments: json!({}).into(),
    };
    let mut tickets: Vec<ResumeTicket> = [
        ToolWaitReason::Permission,
        ToolWaitReason::ClientExecution,
        ToolWaitReason::ScheduledAction,
        ToolWaitReason::Delegation,
    ]
    .into_iter()
    .map(|reason| {
        ResumeTicket::tool_call(
            identity(run, &format!("{run}:{reason:?}")),
            reason,
            CallId::new("c"),
            tool.clone(),
            Some(10),
        )
    })
    .collect();
    for reason in [
        RemoteInputReason::UserInput,
        RemoteInputReason::ExternalEvent,
    ] {
        tickets.push(ResumeTicket::remote_input(
            identity(run, &format!("{run}:{reason:?}")),
            reason,
            CallId::new("c"),
            None,
        ));
    }
    for reason in [
        PauseReason::Manual,
        PauseReason::RateLimit,
        PauseReason::BudgetReached,
    ] {
        tickets.push(ResumeTicket::pause(
            identity(run, &format!("{run}:{reason:?}")),
            reason,
            None,
        ));
    }
    tickets
}

/// Every disposition a commit can carry for `run`.
fn every_disposition(run: &str) -> Vec<RunDisposition> {
    let mut all = vec![RunDisposition::Running {
        run_id: RunId::new(run),
    }];
    all.extend(
        every_ticket(run)
            .into_iter()
            .map(|t| RunDisposition::Awaiting(Box::new(t))),
    );
    all.extend(
        every_end_cause()
            .into_iter()
            .map(|cause| RunDisposition::Ended {
                run_id: RunId::new(run),
                cause,
            }),
    );
    all
}

fn disposition_for(run: &str, state: &RunState) -> RunDisposition {
    match state {
        RunState::Running => RunDisposition::Running {
            run_id: RunId::new(run),
        },
        RunState::Awaiting => RunDisposition::Awaiting(Box::new(ResumeTicket::pause(
            identity(run, &format!("{run}:wait")),
            PauseReason::Manual,
            None,
        ))),
        RunState::Ended(cause) => RunDisposition::Ended {
            run_id: RunId::new(run),
            cause: cause.clone(),
        },
    }
}

/// A commit that would write something of every kind if it were accepted.
fn full_commit(disposition: RunDisposition) -> ThreadCommit {
    ThreadCommit::assemble(
        ThreadId::new(THREAD),
        disposition,
        true,
        vec![Message::user("late input")],
        vec![
            StateCommand::set(StateScope::Run, "k", json!(1)),
            StateCommand::set(StateScope::Thread, "k", json!(2)),
        ],
        vec![AuditDraft::new("custom", json!({ "late": true }))],
    )
}

fn json_of(store: &MemoryStore) -> String {
    serde_json::to_string(store).unwrap()
}

/// A store where `run` reached `cause` through `history` (earlier states), on a thread that
/// also holds another, still running run.
fn ended_store(run: &str, history: &[RunState], cause: &EndCause) -> MemoryStore {
    let mut store = MemoryStore::new();
    store
        .commit(full_commit(RunDisposition::Running {
            run_id: RunId::new("bystander"),
        }))
        .unwrap();
    for state in history {
        store
            .commit(full_commit(disposition_for(run, state)))
            .unwrap();
    }
    store
        .commit(full_commit(disposition_for(
            run,
            &RunState::Ended(cause.clone()),
        )))
        .unwrap();
    store
}

#[test]
fn every_terminal_state_absorbs_every_commit() {
    let histories: [&[RunState]; 4] = [
        &[],
        &[RunState::Running],
        &[RunState::Awaiting],
        &[RunState::Running, RunState::Awaiting, RunState::Running],
    ];
    let mut attempts = 0;
    for cause in every_end_cause() {
        for history in histories {
            let run = "r";
            let mut store = ended_store(run, history, &cause);
            let before = json_of(&store);
            let version = store.thread_version(&ThreadId::new(THREAD)).unwrap();
            let ordinal = store.run_commit_count(&RunId::new(run));
            let fence = CommitError::AlreadyTerminal {
                run_id: RunId::new(run),
                cause: cause.clone(),
            };
            for disposition in every_disposition(run) {
                let commit = full_commit(disposition);
                assert_eq!(store.commit(commit.clone()), Err(fence.clone().into()));
                assert_eq!(json_of(&store), before, "{cause:?} after {history:?}");
                let operation = CommitOperation::new(commit, ordinal, version);
                assert_eq!(store.commit_operation(operation), Err(fence.clone().into()));
                assert_eq!(json_of(&store), before, "{cause:?} after {history:?}");
                attempts += 2;
            }
            // The fence is per run: the bystander on the same thread still commits.
            store
                .commit(full_commit(RunDisposition::Running {
                    run_id: RunId::new("bystander"),
                }))
                .unwrap();
        }
    }
    assert_eq!(attempts, 8 * 4 * (1 + 9 + 8) * 2);
}

/// Tries `from → to` in the reference store: `None` means the run has no fact yet.
fn store_allows(from: Option<&RunState>, to: &RunState) -> bool {
    let mut store = MemoryStore::new();
    if let Some(from) = from {
        store
            .commit(full_commit(disposition_for("r", from)))
            .unwrap();
    }
    let before = json_of(&store);
    let result = store.commit(full_commit(disposition_for("r", to)));
    if result.is_err() {
        assert_eq!(json_of(&store), before, "{from:?} → {to:?} left a trace");
    }
    result.is_ok()
}

#[test]
fn lifecycle_transition_table() {
    let states = every_state();
    let from_width = states.iter().map(|s| label(s).len()).max().unwrap_or(0);
    let mut table = String::from(
        "Rows: the run's latest committed state. Columns: the state of its next commit.\n\
         Each cell is what MemoryStore does, checked against RunState::permits.\n\n",
    );
    for (index, to) in states.iter().enumerate() {
        table.push_str(&format!("[{}] {}\n", index + 1, label(to)));
    }
    table.push('\n');
    let header: Vec<String> = (1..=states.len())
        .map(|i| format!("{:8}", format!("[{i}]")))
        .collect();
    let header_line = format!("{:from_width$} | {}", "from \\ to", header.join(" | "));
    table.push_str(header_line.trim_end());
    table.push('\n');
    let mut rows: Vec<Option<&RunState>> = vec![None];
    rows.extend(states.iter().map(Some));
    for from in rows {
        let from_label = from.map_or_else(|| "(no fact)".to_owned(), label);
        let cells: Vec<String> = states
            .iter()
            .map(|to| {
                let allowed = store_allows(from, to);
                let permitted = from.is_none_or(|f| f.permits(to));
                assert_eq!(
                    allowed, permitted,
                    "store and permits disagree on {from:?} → {to:?}"
                );
                format!("{:8}", if allowed { "allowed" } else { "rejected" })
            })
            .collect();
        let line = format!("{from_label:from_width$} | {}", cells.join(" | "));
        table.push_str(line.trim_end());
        table.push('\n');
    }
    common::snapshot!("lifecycle_transition_table", table);
}

#[test]
fn peek_outputs_shows_what_poll_hands_out_and_takes_nothing() {
    let mut agent = runcore::Agent::new(runcore::AgentConfig::default()).unwrap();
    agent.prompt(runcore::UserMessage::text("hi"), 5).unwrap();
    let peeked: Vec<runcore::Output> = agent.peek_outputs().cloned().collect();
    assert_eq!(peeked.len(), agent.pending_outputs());
    assert!(!peeked.is_empty());
    // Peeking changed nothing: polling hands out exactly those outputs, then the action
    // (never among the peeked ones: it is decided when polled).
    let polled: Vec<runcore::Output> = (0..peeked.len()).filter_map(|_| agent.poll()).collect();
    assert_eq!(polled, peeked);
    assert_eq!(agent.peek_outputs().len(), 0);
    assert!(matches!(
        agent.poll(),
        Some(runcore::Output::Action(runcore::Action::CallModel { .. }))
    ));
}
