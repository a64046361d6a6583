//! Fixtures, checks and read snapshots shared by the conformance cases.
//!
//! Everything here returns `Err(String)` instead of panicking, because the suite runs inside a
//! host's own test binary against a backend that may be arbitrarily wrong: a failure must be a
//! message that says what was expected and what arrived, never an index-out-of-bounds.

use std::fmt::Debug;

use serde_json::json;

use crate::commit::{AuditDraft, CommitError, ThreadCommit};
use crate::ids::{CallId, RunId, ThreadId};
use crate::message::{AssistantMessage, Message};
use crate::resume::{PauseReason, PendingTool, ResumeTicket, ToolWaitReason, WaitIdentity};
use crate::run::{EndCause, Failure, RunDisposition, RunRecord, RunState};
use crate::state::StateCommand;
use crate::store::{
    CheckpointReader, EventRecord, EventScope, StoreError, TranscriptError, TranscriptSnapshotRef,
};

/// What every check returns: `Err` carries the failure message.
use super::{CaseFailure, CaseResult};

/// A read that failed in the backend, as a case failure that names the read.
pub(super) fn read<T>(what: &str, result: Result<T, StoreError>) -> Result<T, CaseFailure> {
    result.map_err(|error| CaseFailure(format!("{what}: the read failed: {error}")))
}

pub(super) fn ensure(condition: bool, message: impl FnOnce() -> String) -> CaseResult {
    if condition {
        Ok(())
    } else {
        Err(CaseFailure(message()))
    }
}

pub(super) fn expect_eq<T: PartialEq + Debug + ?Sized>(
    what: &str,
    expected: &T,
    got: &T,
) -> CaseResult {
    ensure(expected == got, || {
        format!("{what}: expected {expected:?}, got {got:?}")
    })
}

/// The transcript outcome of a slice or verification, for comparing with the expected one; a
/// backend failure is a case failure.
pub(super) fn pinned<T>(
    result: Result<T, StoreError>,
) -> Result<Result<T, TranscriptError>, CaseFailure> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(StoreError::Transcript(error)) => Ok(Err(error)),
        Err(other) => Err(CaseFailure(format!(
            "a transcript read failed in the backend: {other}"
        ))),
    }
}

/// Unwraps an accepted commit or operation, naming the step that was wrongly rejected.
pub(super) fn accepted<T>(what: &str, result: Result<T, StoreError>) -> Result<T, CaseFailure> {
    result.map_err(|error| {
        CaseFailure(format!(
            "{what}: expected the commit to be accepted, it was rejected with {error:?}"
        ))
    })
}

/// The contract rejection inside a store error, or a failure saying the backend failed instead.
fn rejection(what: &str, error: StoreError) -> Result<CommitError, CaseFailure> {
    match error {
        StoreError::Rejected(error) => Ok(error),
        other => Err(CaseFailure(format!(
            "{what}: expected a contract rejection, but the backend failed: {other}"
        ))),
    }
}

/// Checks that a commit or operation was rejected with exactly `expected`.
pub(super) fn rejected_with<T: Debug>(
    what: &str,
    result: Result<T, StoreError>,
    expected: &CommitError,
) -> CaseResult {
    match result {
        Ok(value) => Err(CaseFailure(format!(
            "{what}: expected rejection {expected:?}, but the store accepted it ({value:?})"
        ))),
        Err(error) => expect_eq(what, expected, &rejection(what, error)?),
    }
}

/// Checks that a commit or operation was rejected with an error of stable code `code`, for
/// errors whose payload is not fully predictable (e.g. a hash the backend reports).
pub(super) fn rejected_with_code<T: Debug>(
    what: &str,
    result: Result<T, StoreError>,
    code: &str,
) -> Result<CommitError, CaseFailure> {
    let error = match result {
        Ok(value) => {
            return Err(CaseFailure(format!(
                "{what}: expected a `{code}` rejection, but the store accepted it ({value:?})"
            )));
        }
        Err(error) => rejection(what, error)?,
    };
    if error.code() == code {
        Ok(error)
    } else {
        Err(CaseFailure(format!(
            "{what}: expected a `{code}` rejection, got `{}` ({error:?})",
            error.code()
        )))
    }
}

pub(super) fn thread(name: &str) -> ThreadId {
    ThreadId::new(name)
}

pub(super) fn run(name: &str) -> RunId {
    RunId::new(name)
}

pub(super) fn running(run_id: &str) -> RunDisposition {
    RunDisposition::Running {
        run_id: run(run_id),
    }
}

pub(super) fn ended(run_id: &str, cause: EndCause) -> RunDisposition {
    RunDisposition::Ended {
        run_id: run(run_id),
        cause,
    }
}

pub(super) fn identity(thread_id: &str, run_id: &str, correlation: &str) -> WaitIdentity {
    WaitIdentity {
        correlation_id: correlation.to_owned(),
        run_id: run(run_id),
        thread_id: thread(thread_id),
        snapshot_id: "snapshot-1".to_owned(),
        catalog_fingerprint: "catalog-1".to_owned(),
    }
}

/// A permission wait on one tool call, so the ticket carries every kind of field.
pub(super) fn permission_ticket(thread_id: &str, run_id: &str, correlation: &str) -> ResumeTicket {
    ResumeTicket::tool_call(
        identity(thread_id, run_id, correlation),
        ToolWaitReason::Permission,
        CallId::new("call-1"),
        PendingTool {
            name: "delete_file".into(),
            arguments: json!({ "path": "/tmp/x" }).into(),
        },
        Some(60_000),
    )
}

pub(super) fn pause_ticket(thread_id: &str, run_id: &str, correlation: &str) -> ResumeTicket {
    ResumeTicket::pause(
        identity(thread_id, run_id, correlation),
        PauseReason::Manual,
        None,
    )
}

pub(super) fn awaiting(ticket: ResumeTicket) -> RunDisposition {
    RunDisposition::Awaiting(Box::new(ticket))
}

/// Every end cause, one of each variant (and each failure), so the fence is checked for all.
pub(super) fn every_end_cause() -> Vec<EndCause> {
    vec![
        EndCause::NaturalEnd,
        EndCause::MaxSteps,
        EndCause::Cancelled,
        EndCause::Stopped("budget".to_owned()),
        EndCause::Error(Failure::Inference {
            code: "overloaded".to_owned(),
            message: "try later".to_owned(),
        }),
        EndCause::Error(Failure::CapabilityBound),
        EndCause::Error(Failure::StateConflict),
        EndCause::Indeterminate,
    ]
}

/// A commit as the agent assembles it (`state_changed = true`).
pub(super) fn commit(
    thread_id: &str,
    disposition: RunDisposition,
    messages: Vec<Message>,
    state: Vec<StateCommand>,
) -> ThreadCommit {
    ThreadCommit::assemble(
        thread(thread_id),
        disposition,
        true,
        messages,
        state,
        Vec::new(),
    )
}

/// A commit with caller drafts numbered `label-0`, `label-1`, … so event order is checkable.
pub(super) fn commit_with_drafts(
    thread_id: &str,
    disposition: RunDisposition,
    state_changed: bool,
    label: &str,
    drafts: usize,
) -> ThreadCommit {
    let extra = (0..drafts)
        .map(|i| AuditDraft::new(format!("{label}-{i}"), json!({ "label": label, "i": i })))
        .collect();
    ThreadCommit::assemble(
        thread(thread_id),
        disposition,
        state_changed,
        Vec::new(),
        Vec::new(),
        extra,
    )
}

pub(super) fn user(text: &str) -> Message {
    Message::user(text)
}

pub(super) fn assistant(text: &str) -> Message {
    Message::from(AssistantMessage::text(text))
}

/// Every event of `scope`, read in one page.
pub(super) fn all_events<S: CheckpointReader + ?Sized>(
    store: &S,
    scope: &EventScope,
) -> Result<Vec<EventRecord>, CaseFailure> {
    read(
        &format!("list_events({scope:?})"),
        store.list_events(scope, None, usize::MAX),
    )
}

/// Pages through `scope` with pages of `limit`, checking each page's contract as it goes.
pub(super) fn page_through<S: CheckpointReader + ?Sized>(
    store: &S,
    scope: &EventScope,
    limit: usize,
) -> Result<Vec<EventRecord>, CaseFailure> {
    let total = all_events(store, scope)?.len();
    let mut collected: Vec<EventRecord> = Vec::new();
    let mut from: Option<u64> = None;
    // A correct store ends after total / limit + 1 pages; the bound turns a store that never
    // advances into a failure instead of a hang.
    let max_pages = total.saturating_add(2);
    for _ in 0..max_pages {
        let page = read("list_events", store.list_events(scope, from, limit))?;
        ensure(page.len() <= limit, || {
            format!(
                "list_events({scope:?}, {from:?}, {limit}) returned {} events, more than the limit",
                page.len()
            )
        })?;
        let mut previous = from.unwrap_or(0);
        for event in &page {
            ensure(event.sequence > previous, || {
                format!(
                    "list_events({scope:?}, {from:?}, {limit}): sequence {} does not follow {previous} \
                     (pages must be ascending and `from` exclusive)",
                    event.sequence
                )
            })?;
            previous = event.sequence;
        }
        let Some(last) = page.last() else {
            return Ok(collected);
        };
        from = Some(last.sequence);
        collected.extend(page);
    }
    Err(CaseFailure(format!(
        "paging {scope:?} with limit {limit} did not end after {max_pages} pages"
    )))
}

/// Everything a reader can see about the named threads and runs. Two equal observations mean
/// no read result changed.
#[derive(Debug, PartialEq)]
pub(super) struct Observation {
    threads: Vec<ThreadObservation>,
    runs: Vec<RunObservation>,
    events: Vec<EventRecord>,
}

#[derive(Debug, PartialEq)]
struct ThreadObservation {
    thread_id: ThreadId,
    messages: Vec<Message>,
    latest_run: Option<RunRecord>,
    state: Vec<StateCommand>,
    snapshot: TranscriptSnapshotRef,
    version: u64,
    events: Vec<EventRecord>,
}

#[derive(Debug, PartialEq)]
struct RunObservation {
    run_id: RunId,
    record: Option<RunRecord>,
    state: Option<RunState>,
    ticket: Option<ResumeTicket>,
    events: Vec<EventRecord>,
}

pub(super) fn observe<S: CheckpointReader + ?Sized>(
    store: &S,
    threads: &[&str],
    runs: &[&str],
) -> Result<Observation, CaseFailure> {
    let mut observation = observe_without_all(store, threads, runs)?;
    observation.events = all_events(store, &EventScope::All)?;
    Ok(observation)
}

/// Like [`observe`] but without `list_events(All)`, for checking that one thread is untouched
/// while another moves.
pub(super) fn observe_without_all<S: CheckpointReader + ?Sized>(
    store: &S,
    threads: &[&str],
    runs: &[&str],
) -> Result<Observation, CaseFailure> {
    let threads = threads
        .iter()
        .map(|&name| {
            let id = thread(name);
            Ok(ThreadObservation {
                messages: read("committed_messages", store.committed_messages(&id))?,
                latest_run: read("latest_run", store.latest_run(&id))?,
                state: read("committed_state", store.committed_state(&id))?,
                snapshot: read("transcript_snapshot", store.transcript_snapshot(&id))?,
                version: read("thread_version", store.thread_version(&id))?,
                events: all_events(store, &EventScope::Thread(id.clone()))?,
                thread_id: id,
            })
        })
        .collect::<Result<_, CaseFailure>>()?;
    let runs = runs
        .iter()
        .map(|&name| {
            let id = run(name);
            Ok(RunObservation {
                record: read("run", store.run(&id))?,
                state: read("run_state", store.run_state(&id))?,
                ticket: read("resume_ticket", store.resume_ticket(&id))?,
                events: all_events(store, &EventScope::Run(id.clone()))?,
                run_id: id,
            })
        })
        .collect::<Result<_, CaseFailure>>()?;
    Ok(Observation {
        threads,
        runs,
        events: Vec::new(),
    })
}

/// Fails with the first read that differs, so a backend author sees what leaked.
pub(super) fn unchanged(what: &str, before: &Observation, after: &Observation) -> CaseResult {
    if before == after {
        return Ok(());
    }
    let leak = |read: String| -> CaseResult {
        Err(CaseFailure(format!(
            "{what}: must leave every read unchanged, but {read} changed"
        )))
    };
    for (b, a) in before.threads.iter().zip(&after.threads) {
        let t = &b.thread_id;
        if b.messages != a.messages {
            return leak(format!(
                "committed_messages({t}) (before {:?}, after {:?})",
                b.messages, a.messages
            ));
        }
        if b.latest_run != a.latest_run {
            return leak(format!(
                "latest_run({t}) (before {:?}, after {:?})",
                b.latest_run, a.latest_run
            ));
        }
        if b.state != a.state {
            return leak(format!(
                "committed_state({t}) (before {:?}, after {:?})",
                b.state, a.state
            ));
        }
        if b.snapshot != a.snapshot {
            return leak(format!(
                "transcript_snapshot({t}) (before {:?}, after {:?})",
                b.snapshot, a.snapshot
            ));
        }
        if b.version != a.version {
            return leak(format!(
                "thread_version({t}) (before {}, after {})",
                b.version, a.version
            ));
        }
        if b.events != a.events {
            return leak(format!(
                "list_events(Thread({t})) (before {} events, after {})",
                b.events.len(),
                a.events.len()
            ));
        }
    }
    for (b, a) in before.runs.iter().zip(&after.runs) {
        let r = &b.run_id;
        if b.record != a.record {
            return leak(format!(
                "run({r}) (before {:?}, after {:?})",
                b.record, a.record
            ));
        }
        if b.state != a.state {
            return leak(format!(
                "run_state({r}) (before {:?}, after {:?})",
                b.state, a.state
            ));
        }
        if b.ticket != a.ticket {
            return leak(format!(
                "resume_ticket({r}) (before {:?}, after {:?})",
                b.ticket, a.ticket
            ));
        }
        if b.events != a.events {
            return leak(format!(
                "list_events(Run({r})) (before {} events, after {})",
                b.events.len(),
                a.events.len()
            ));
        }
    }
    leak(format!(
        "list_events(All) (before {} events, after {})",
        before.events.len(),
        after.events.len()
    ))
}
