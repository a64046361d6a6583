//! The JSON shapes of looking into a store (SPEC §12.3): what `runcore threads`, `show` and
//! `pending` print with `--json`, and what the console's API returns. They live here, not in
//! the binary, so that the console and the command line build them with the same code.
//!
//! Each is gathered through the core's read ports only ([`CheckpointReader`]), so it reads
//! any backend the same way.

use runcore::facts::ThreadFacts;
use runcore::host::ForkOrigin;
use runcore::store::{CheckpointReader, Claim, EventRecord, EventScope, StoreError, ThreadClaims};
use runcore::{Message, ResumeTicket, RunId, RunRecord, RunState, ThreadId};
pub use runcore_clock::wall_clock_ms;
use serde::Serialize;

/// How many items one read asks the store for.
const PAGE: usize = 512;

/// A run as §12.3 shows it: `{"id","thread_id","state"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunView {
    /// The run.
    pub id: RunId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// Its latest committed state.
    pub state: RunState,
}

impl From<RunRecord> for RunView {
    fn from(record: RunRecord) -> Self {
        RunView {
            id: record.id,
            thread_id: record.thread_id,
            state: record.state,
        }
    }
}

/// A live claim as §12.4 shows it: `{"owner","epoch","expires_at_ms"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimView {
    /// Who holds the thread.
    pub owner: String,
    /// The claim's epoch.
    pub epoch: u64,
    /// When it expires unless renewed, in store time.
    pub expires_at_ms: u64,
}

impl From<Claim> for ClaimView {
    fn from(claim: Claim) -> Self {
        ClaimView {
            owner: claim.owner,
            epoch: claim.epoch,
            expires_at_ms: claim.expires_at_ms,
        }
    }
}

fn live_claim<S: ThreadClaims + ?Sized>(
    store: &S,
    thread: &ThreadId,
) -> Result<Option<ClaimView>, StoreError> {
    Ok(store
        .thread_claim(thread, wall_clock_ms())?
        .map(ClaimView::from))
}

/// One line of `runcore threads --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadLine {
    /// The thread.
    pub thread_id: ThreadId,
    /// Its commit count.
    pub version: u64,
    /// The run of its latest commit.
    pub latest_run: Option<RunView>,
    /// Its live claim (SPEC §12.4), `null` when no owner holds it.
    pub claim: Option<ClaimView>,
}

/// What `runcore show THREAD --json` prints: everything committed on one thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadView {
    /// The thread.
    pub thread_id: ThreadId,
    /// Its commit count (0 for an unknown thread).
    pub version: u64,
    /// The committed transcript.
    pub messages: Vec<Message>,
    /// Where the model context's transcript part starts (SPEC §8.9, §12.4): the latest
    /// compaction's `keep_from`, 0 without one.
    pub context_start: usize,
    /// The latest compaction's summary (shown in the readable form only).
    #[serde(skip)]
    pub summary: Option<Message>,
    /// Its runs, in start order.
    pub runs: Vec<RunView>,
    /// The tickets of its awaiting runs.
    pub tickets: Vec<ResumeTicket>,
    /// Its live claim (SPEC §12.4), `null` when no owner holds it.
    pub claim: Option<ClaimView>,
    /// The thread it was forked from, and at which version (SPEC §12.6), `null` when it was
    /// not forked.
    pub forked_from: Option<ForkOrigin>,
}

/// Every thread, ordered by id.
pub fn threads<S: CheckpointReader + ThreadClaims + ?Sized>(
    store: &S,
) -> Result<Vec<ThreadLine>, StoreError> {
    let mut lines: Vec<ThreadLine> = Vec::new();
    loop {
        let after = lines.last().map(|l| l.thread_id.clone());
        let page = store.threads(after.as_ref(), PAGE)?;
        let full = page.len() == PAGE;
        for summary in page {
            lines.push(ThreadLine {
                claim: live_claim(store, &summary.thread_id)?,
                thread_id: summary.thread_id,
                version: summary.version,
                latest_run: summary.latest_run.map(RunView::from),
            });
        }
        if !full {
            return Ok(lines);
        }
    }
}

/// Everything committed on `thread` (an unknown thread is empty, version 0).
pub fn show<S: CheckpointReader + ThreadClaims + ?Sized>(
    store: &S,
    thread: &ThreadId,
) -> Result<ThreadView, StoreError> {
    // The thread's committed history, read once, with each run's record and ticket: the runs
    // in the order of their first commit are the runs in start order.
    let facts = ThreadFacts::read_with_runs(store, thread)?;
    let (context_start, summary) = match facts.latest_compaction() {
        Some(compaction) => (
            compaction.keep_from,
            Some(Message::User(compaction.summary.clone())),
        ),
        None => (0, None),
    };
    let mut runs = Vec::with_capacity(facts.runs.len());
    let mut tickets = Vec::new();
    for run in facts.runs {
        let Some(record) = run.record else {
            continue;
        };
        if record.state == RunState::Awaiting
            && let Some(ticket) = run.ticket
        {
            tickets.push(ticket);
        }
        runs.push(RunView::from(record));
    }
    let (version, messages, forked_from) = (facts.version, facts.messages, facts.forked_from);
    Ok(ThreadView {
        thread_id: thread.clone(),
        version,
        messages,
        context_start,
        summary,
        runs,
        tickets,
        claim: live_claim(store, thread)?,
        forked_from,
    })
}

/// How many threads [`forks_of`] looks through: a store-wide scan per thread page, bounded.
pub const FORK_SCAN: usize = 2_000;

/// The forks of `thread` (SPEC §8.10) among the first [`FORK_SCAN`] threads in id order, each
/// with the parent's version it holds. A fork names its parent in its own first commit and the
/// parent keeps no list of its forks, so finding them reads every thread's first events.
pub fn forks_of<S: CheckpointReader + ?Sized>(
    store: &S,
    thread: &ThreadId,
) -> Result<Vec<runcore::host::Forked>, StoreError> {
    let mut forks = Vec::new();
    let mut after: Option<ThreadId> = None;
    let mut seen = 0;
    while seen < FORK_SCAN {
        let page = store.threads(after.as_ref(), PAGE.min(FORK_SCAN - seen))?;
        let Some(last) = page.last() else { break };
        after = Some(last.thread_id.clone());
        seen += page.len();
        for summary in page {
            if summary.thread_id == *thread {
                continue;
            }
            if let Some(origin) = runcore::host::forked_from(store, &summary.thread_id)?
                && origin.thread_id == *thread
            {
                forks.push(runcore::host::Forked {
                    thread_id: summary.thread_id,
                    version: summary.version,
                    forked_from: origin,
                });
            }
        }
    }
    Ok(forks)
}

/// Every awaiting run's ticket, ordered by run id.
pub fn pending(store: &impl CheckpointReader) -> Result<Vec<ResumeTicket>, StoreError> {
    let mut tickets: Vec<ResumeTicket> = Vec::new();
    loop {
        let after = tickets.last().map(|t| t.run_id.clone());
        let page = store.pending_tickets(after.as_ref(), PAGE)?;
        let full = page.len() == PAGE;
        tickets.extend(page);
        if !full {
            return Ok(tickets);
        }
    }
}

/// The events of `scope` after `from` (exclusive), at most `limit` (all when `None`), read
/// page by page; `visit` sees each page in order and may stop early by returning `Err`.
pub fn for_each_event_page<E>(
    store: &impl CheckpointReader,
    scope: &EventScope,
    from: Option<u64>,
    limit: Option<u64>,
    mut visit: impl FnMut(&[EventRecord]) -> Result<(), E>,
) -> Result<(), E>
where
    E: From<StoreError>,
{
    let mut from = from;
    let mut left = limit.unwrap_or(u64::MAX);
    while left > 0 {
        let want = usize::try_from(left).unwrap_or(usize::MAX).min(PAGE);
        let page = store.list_events(scope, from, want)?;
        let Some(last) = page.last() else { break };
        from = Some(last.sequence);
        left = left.saturating_sub(page.len() as u64);
        visit(&page)?;
        if page.len() < want {
            break;
        }
    }
    Ok(())
}

/// At most `limit` events of `scope` after `from` (exclusive), ascending.
pub fn events(
    store: &impl CheckpointReader,
    scope: &EventScope,
    from: Option<u64>,
    limit: u64,
) -> Result<Vec<EventRecord>, StoreError> {
    let mut events = Vec::new();
    for_each_event_page(store, scope, from, Some(limit), |page| {
        events.extend_from_slice(page);
        Ok::<(), StoreError>(())
    })?;
    Ok(events)
}
