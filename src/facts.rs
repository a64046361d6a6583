//! One reader of a thread's committed history (STYLE 13: history is data, read once, then
//! decide).
//!
//! [`ThreadFacts`] is what the store holds about one thread, read once through the read ports
//! ([`CheckpointReader`]) and decoded once: the committed messages and the thread version, the
//! head run and its ticket, every audit event decoded as an [`AuditDraft`] and grouped by run
//! and by commit (with each commit's `commit_clock`), every compaction, the fork origin and the
//! imports. Recovery ([`decide_recovery`](crate::decide_recovery)), fork
//! ([`fork_thread`](crate::host::fork_thread)), the console's thread view and trace derivation
//! all take this one value; none of them pages the store itself. Paging lives here, in
//! [`ThreadFacts::read`] and its variants, and nowhere else.
//!
//! The value is plain data: [`ThreadFacts::from_records`] builds it from records without a
//! store (what the readers call page by page, and what tests and property tests use), and a
//! decision taking it can be tested with facts made directly.
//!
//! # Room for what comes next
//!
//! The waits of the thread model (SPEC §8.11) and delegation to child threads (SPEC §8.12)
//! are committed facts too. When their drafts exist, they are decoded here, in
//! [`ThreadFacts::from_records`]'s single pass, into fields of their own beside
//! [`imports`](ThreadFacts::imports) (the waits a thread has open and their deadlines; the
//! child threads a run delegated to and their outcomes), so every view reads them from the same
//! value instead of paging the events again.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::agent::history::{FORKED_FROM_KIND, ForkOrigin, IMPORTED_KIND};
use crate::commit::AuditDraft;
use crate::ids::{RunId, ThreadId};
use crate::message::{Message, UserMessage};
use crate::resume::ResumeTicket;
use crate::run::{RunRecord, RunState};
use crate::store::{CheckpointReader, EventRecord, EventScope, StoreError};

/// Events read per page.
const PAGE: usize = 1024;

/// A thread's committed history, read once (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadFacts {
    /// The thread.
    pub thread_id: ThreadId,
    /// Its commit count (0 for an unknown thread); for a view as of a version, that version.
    pub version: u64,
    /// The committed messages, in commit order.
    pub messages: Vec<Message>,
    /// The head run: the run of the thread's latest commit. `None` for a thread without
    /// commits, and for a view as of a version (the store keeps each run's latest record
    /// only).
    pub head: Option<RunRecord>,
    /// The head run's ticket, read when the head run is Awaiting.
    pub head_ticket: Option<ResumeTicket>,
    /// Every run with a commit on the thread, in the order of its first commit.
    pub runs: Vec<RunFacts>,
    /// Every compaction of the thread, in commit order (the last is the one in force).
    pub compactions: Vec<CompactionFact>,
    /// The parent and version the thread was forked from: the `forked_from` draft of its
    /// first commit (SPEC §8.10).
    pub forked_from: Option<ForkOrigin>,
    /// Every import of the thread (a fork's first commit is one), in commit order.
    pub imports: Vec<ImportFact>,
}

/// One run's committed facts.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFacts {
    /// The run.
    pub run_id: RunId,
    /// The run's record ([`ThreadFacts::read_with_runs`] reads it; `None` otherwise, or when
    /// the store has none).
    pub record: Option<RunRecord>,
    /// The run's ticket while it is Awaiting ([`ThreadFacts::read_with_runs`] reads it).
    pub ticket: Option<ResumeTicket>,
    /// Where the run's messages start in the transcript: its first `run_started` draft's
    /// `transcript_start` (`None` for a run committed whole, by an import or a fork).
    pub transcript_start: Option<usize>,
    /// The first `now_ms` its `run_started` drafts recorded.
    pub started_ms: Option<u64>,
    /// Its commits, in commit order.
    pub commits: Vec<CommitFacts>,
}

/// One commit of a run, as its audit drafts tell it.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitFacts {
    /// The commit's store-wide sequence.
    pub sequence: u64,
    /// Its `commit_clock`: (the agent's clock, the transcript length after the commit).
    pub clock: Option<(u64, usize)>,
    /// Its other drafts, decoded, in commit order.
    pub drafts: Vec<AuditDraft>,
}

/// A committed compaction (SPEC §8.9).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionFact {
    /// The run that compacted.
    pub run_id: RunId,
    /// The commit's store-wide sequence.
    pub commit_sequence: u64,
    /// The model context starts at this transcript index.
    pub keep_from: usize,
    /// The transcript's length when it compacted.
    pub transcript_len: usize,
    /// What stands before `transcript[keep_from..]` in the model context.
    pub summary: Arc<UserMessage>,
    /// The agent's clock when it compacted, when recorded.
    pub now_ms: Option<u64>,
}

impl CompactionFact {
    /// The `compacted` draft it was read from (what a fork inherits).
    pub fn draft(&self) -> AuditDraft {
        AuditDraft::Compacted {
            keep_from: self.keep_from,
            transcript_len: self.transcript_len,
            summary: self.summary.clone(),
            now_ms: self.now_ms,
        }
    }
}

/// A committed import (SPEC §8.10): a run that started and ended in one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportFact {
    /// The import's run.
    pub run_id: RunId,
    /// The commit's store-wide sequence.
    pub commit_sequence: u64,
    /// How many messages it imported, as its `imported` draft says.
    pub count: Option<u64>,
}

impl ThreadFacts {
    /// An empty thread: version 0, nothing committed.
    pub fn empty(thread_id: ThreadId) -> Self {
        ThreadFacts {
            thread_id,
            version: 0,
            messages: Vec::new(),
            head: None,
            head_ticket: None,
            runs: Vec::new(),
            compactions: Vec::new(),
            forked_from: None,
            imports: Vec::new(),
        }
    }

    /// Builds the facts from records, without a store: the thread's `version`, `messages`,
    /// head run and its ticket, and its audit `events` in store order (events of other
    /// threads are ignored). Each event is decoded once.
    pub fn from_records(
        thread_id: ThreadId,
        version: u64,
        messages: Vec<Message>,
        head: Option<RunRecord>,
        head_ticket: Option<ResumeTicket>,
        events: impl IntoIterator<Item = EventRecord>,
    ) -> Self {
        let mut facts = ThreadFacts {
            version,
            messages,
            head,
            head_ticket,
            ..ThreadFacts::empty(thread_id)
        };
        let mut builder = Builder::default();
        for event in events {
            builder.push(&mut facts, event);
        }
        facts
    }

    /// Reads the thread from `reader`: its version, messages, head run (and its ticket when
    /// Awaiting) and every audit event, paged. An unknown thread is [`ThreadFacts::empty`].
    pub fn read<R: CheckpointReader + ?Sized>(
        reader: &R,
        thread: &ThreadId,
    ) -> Result<Self, StoreError> {
        let head = reader.latest_run(thread)?;
        let head_ticket = match &head {
            Some(run) if run.state == RunState::Awaiting => reader.resume_ticket(&run.id)?,
            _ => None,
        };
        let mut facts = ThreadFacts {
            version: reader.thread_version(thread)?,
            messages: reader.committed_messages(thread)?,
            head,
            head_ticket,
            ..ThreadFacts::empty(thread.clone())
        };
        read_events(reader, &mut facts, u64::MAX)?;
        Ok(facts)
    }

    /// [`read`](ThreadFacts::read), and every run's record and ticket (one read per run):
    /// what a view listing the runs shows.
    pub fn read_with_runs<R: CheckpointReader + ?Sized>(
        reader: &R,
        thread: &ThreadId,
    ) -> Result<Self, StoreError> {
        let mut facts = ThreadFacts::read(reader, thread)?;
        for run in &mut facts.runs {
            run.record = reader.run(&run.run_id)?;
            if run.record.as_ref().map(|r| &r.state) == Some(&RunState::Awaiting) {
                run.ticket = reader.resume_ticket(&run.run_id)?;
            }
        }
        Ok(facts)
    }

    /// The thread as of `version` (SPEC §8.10): the messages its commits `1..=version` hold
    /// and the events of those commits (paging stops at the first later one). No head run:
    /// the store keeps each run's latest record only. `None` for version 0, a version past the
    /// thread's head, or an unknown thread.
    pub fn read_as_of<R: CheckpointReader + ?Sized>(
        reader: &R,
        thread: &ThreadId,
        version: u64,
    ) -> Result<Option<Self>, StoreError> {
        let Some(at) = reader.thread_as_of(thread, version)? else {
            return Ok(None);
        };
        let mut facts = ThreadFacts {
            version: at.version,
            messages: at.messages,
            ..ThreadFacts::empty(thread.clone())
        };
        read_events(reader, &mut facts, at.commit_sequence)?;
        Ok(Some(facts))
    }

    /// The compaction in force: the thread's latest.
    pub fn latest_compaction(&self) -> Option<&CompactionFact> {
        self.compactions.last()
    }

    /// The committed facts of `run`, if it has a commit on the thread.
    pub fn run(&self, run: &RunId) -> Option<&RunFacts> {
        self.runs.iter().find(|facts| facts.run_id == *run)
    }
}

/// Pages through the thread's events up to the commit `last_commit` (inclusive), adding each
/// to `facts`.
fn read_events<R: CheckpointReader + ?Sized>(
    reader: &R,
    facts: &mut ThreadFacts,
    last_commit: u64,
) -> Result<(), StoreError> {
    let scope = EventScope::Thread(facts.thread_id.clone());
    let mut builder = Builder::default();
    let mut from = None;
    loop {
        let page = reader.list_events(&scope, from, PAGE)?;
        let Some(last) = page.last() else { break };
        from = Some(last.sequence);
        let full = page.len() >= PAGE;
        for event in page {
            if event.commit_sequence > last_commit {
                return Ok(());
            }
            builder.push(facts, event);
        }
        if !full {
            break;
        }
    }
    Ok(())
}

/// What [`ThreadFacts::from_records`] keeps while it goes through the events.
#[derive(Default)]
struct Builder {
    /// Each run's index in `runs`.
    index_of: BTreeMap<RunId, usize>,
    /// The thread's first commit (where a fork's origin is).
    first_commit: Option<u64>,
}

impl Builder {
    fn push(&mut self, facts: &mut ThreadFacts, event: EventRecord) {
        if event.thread_id != facts.thread_id {
            return;
        }
        let EventRecord {
            commit_sequence,
            run_id,
            kind,
            payload,
            ..
        } = event;
        let first = *self.first_commit.get_or_insert(commit_sequence);
        let index = match self.index_of.get(&run_id) {
            Some(index) => *index,
            None => {
                facts.runs.push(RunFacts {
                    run_id: run_id.clone(),
                    record: None,
                    ticket: None,
                    transcript_start: None,
                    started_ms: None,
                    commits: Vec::new(),
                });
                let index = facts.runs.len() - 1;
                self.index_of.insert(run_id.clone(), index);
                index
            }
        };
        let draft = AuditDraft::from_stored(&kind, payload);
        match &draft {
            AuditDraft::Compacted {
                keep_from,
                transcript_len,
                summary,
                now_ms,
            } => facts.compactions.push(CompactionFact {
                run_id: run_id.clone(),
                commit_sequence,
                keep_from: *keep_from,
                transcript_len: *transcript_len,
                summary: summary.clone(),
                now_ms: *now_ms,
            }),
            AuditDraft::Custom { kind, payload }
                if kind == FORKED_FROM_KIND && commit_sequence == first =>
            {
                facts.forked_from = serde_json::from_value(payload.clone()).ok();
            }
            AuditDraft::Custom { kind, payload } if kind == IMPORTED_KIND => {
                facts.imports.push(ImportFact {
                    run_id: run_id.clone(),
                    commit_sequence,
                    count: payload.get("count").and_then(Value::as_u64),
                });
            }
            _ => {}
        }
        let Some(run) = facts.runs.get_mut(index) else {
            return;
        };
        if let AuditDraft::RunStarted {
            transcript_start,
            now_ms,
            ..
        } = &draft
        {
            run.transcript_start = run.transcript_start.or(Some(*transcript_start));
            run.started_ms = run.started_ms.or(*now_ms);
        }
        let fresh = run
            .commits
            .last()
            .is_none_or(|last| last.sequence != commit_sequence);
        if fresh {
            run.commits.push(CommitFacts {
                sequence: commit_sequence,
                clock: None,
                drafts: Vec::new(),
            });
        }
        if let Some(commit) = run.commits.last_mut() {
            match draft {
                AuditDraft::CommitClock {
                    now_ms,
                    transcript_len,
                } => commit.clock = Some((now_ms, transcript_len)),
                draft => commit.drafts.push(draft),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{CommitLog, MemoryStore};
    use crate::{RunDisposition, ThreadCommit};
    use serde_json::json;

    fn event(
        sequence: u64,
        commit: u64,
        thread: &str,
        run: &str,
        kind: &str,
        payload: Value,
    ) -> EventRecord {
        EventRecord {
            sequence,
            commit_sequence: commit,
            thread_id: ThreadId::new(thread),
            run_id: RunId::new(run),
            kind: kind.into(),
            payload,
        }
    }

    #[test]
    fn events_are_grouped_by_run_and_commit_and_decoded_once() {
        let facts = ThreadFacts::from_records(
            ThreadId::new("t"),
            3,
            Vec::new(),
            None,
            None,
            [
                event(
                    1,
                    1,
                    "t",
                    "t/run-1",
                    "forked_from",
                    json!({"thread_id":"p","version":2}),
                ),
                event(2, 1, "t", "t/run-1", "imported", json!({"count":2})),
                event(
                    3,
                    1,
                    "t",
                    "t/run-1",
                    "commit_clock",
                    json!({"now_ms":5,"transcript_len":2}),
                ),
                event(4, 2, "u", "u/run-1", "imported", json!({"count":9})),
                event(
                    5,
                    3,
                    "t",
                    "t/run-2",
                    "run_started",
                    json!({"run_id":"t/run-2","transcript_start":2,"now_ms":7}),
                ),
                event(
                    6,
                    4,
                    "t",
                    "t/run-2",
                    "compacted",
                    json!({"keep_from":1,"transcript_len":3,"summary":{"role":"user","content":[]}}),
                ),
                event(
                    7,
                    5,
                    "t",
                    "t/run-3",
                    "forked_from",
                    json!({"thread_id":"q","version":1}),
                ),
            ],
        );
        assert_eq!(
            facts.forked_from,
            Some(ForkOrigin {
                thread_id: ThreadId::new("p"),
                version: 2
            }),
            "only the first commit's forked_from is the origin"
        );
        let runs: Vec<_> = facts.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(runs, ["t/run-1", "t/run-2", "t/run-3"]);
        let first = &facts.runs[0];
        assert_eq!(first.commits.len(), 1);
        assert_eq!(first.commits[0].clock, Some((5, 2)));
        assert_eq!(first.commits[0].drafts.len(), 2);
        assert_eq!(facts.runs[1].transcript_start, Some(2));
        assert_eq!(facts.runs[1].started_ms, Some(7));
        assert_eq!(facts.runs[1].commits.len(), 2);
        assert_eq!(facts.imports.len(), 1);
        assert_eq!(facts.imports[0].count, Some(2));
        assert_eq!(facts.latest_compaction().map(|c| c.keep_from), Some(1));
    }

    #[test]
    fn read_pages_through_every_event_and_as_of_stops_at_the_version() {
        let mut store = MemoryStore::new();
        let thread = ThreadId::new("t");
        for n in 1..=1_500 {
            let commit = ThreadCommit::assemble(
                thread.clone(),
                RunDisposition::Running {
                    run_id: RunId::new(format!("t/run-{n}")),
                },
                true,
                Vec::new(),
                Vec::new(),
                Vec::new(),
            );
            store.commit(commit).unwrap();
        }
        let facts = ThreadFacts::read(&store, &thread).unwrap();
        assert_eq!(facts.version, 1_500);
        assert_eq!(facts.runs.len(), 1_500);
        assert_eq!(facts.head.map(|r| r.id), Some(RunId::new("t/run-1500")));
        let at = ThreadFacts::read_as_of(&store, &thread, 1_100)
            .unwrap()
            .unwrap();
        assert_eq!(at.version, 1_100);
        assert_eq!(at.runs.len(), 1_100);
        assert_eq!(
            ThreadFacts::read_as_of(&store, &thread, 1_501).unwrap(),
            None
        );
        let unknown = ThreadFacts::read(&store, &ThreadId::new("u")).unwrap();
        assert_eq!(unknown, ThreadFacts::empty(ThreadId::new("u")));
    }
}
