//! Looking into a store (SPEC §12.3): `runcore threads`, `show`, `pending` and `events`.
//!
//! Each command gathers its data through the core's read ports only ([`CheckpointReader`]),
//! so it reads any backend the same way, and renders it either as the JSON shapes of §12.3
//! (one JSON value per line) or as readable tables and transcripts in the words of the demo's
//! timeline.

use std::io::{self, Write};

use runcore::ResumeTicket;
use runcore::store::{CheckpointReader, EventScope, StoreError};
use serde::Serialize;

use crate::text::{deadline_text, state_text, ticket_target_text, transcript_line};

// The JSON shapes and the reads that gather them are shared with the console.
pub use runcore_console::shapes::{ThreadLine, ThreadView, pending, show, threads};

/// Why `runcore events` stopped.
#[derive(Debug)]
pub enum EventsError {
    /// The store failed.
    Store(StoreError),
    /// Writing stdout failed.
    Io(io::Error),
}

impl From<StoreError> for EventsError {
    fn from(error: StoreError) -> Self {
        EventsError::Store(error)
    }
}

/// Writes the events of `scope` after `from` (exclusive), at most `limit` (all when `None`),
/// one JSON line each, page by page.
pub fn write_events(
    store: &impl CheckpointReader,
    scope: &EventScope,
    from: Option<u64>,
    limit: Option<u64>,
    out: &mut impl Write,
) -> Result<(), EventsError> {
    runcore_console::shapes::for_each_event_page(store, scope, from, limit, |page| {
        for event in page {
            let line = json_line(event);
            writeln!(out, "{line}").map_err(EventsError::Io)?;
        }
        Ok(())
    })
}

/// One JSON value per line.
pub fn json_lines<T: Serialize>(items: &[T]) -> String {
    let mut text = String::new();
    for item in items {
        text.push_str(&json_line(item));
        text.push('\n');
    }
    text
}

/// `value` as one line of JSON (without its `\n`). Everything this binary prints is plain
/// data with string keys, so serializing cannot fail; were it to, a debug build stops here and
/// a release build prints an `internal` error object rather than an empty line a reader would
/// misread.
pub fn json_line<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|error| {
        debug_assert!(false, "a value failed to serialize as JSON: {error}");
        r#"{"error":{"kind":"internal","message":"a value failed to serialize as JSON"}}"#
            .to_owned()
    })
}

/// A table: a header row and rows, columns padded to their widest cell (the last column is
/// not padded).
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i == last {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  "));
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `runcore threads`, readable.
pub fn threads_text(lines: &[ThreadLine]) -> String {
    if lines.is_empty() {
        return "no threads in this store\n".to_owned();
    }
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|line| {
            let (run, state) = match &line.latest_run {
                Some(run) => (run.id.to_string(), state_text(&run.state)),
                None => ("-".to_owned(), "-".to_owned()),
            };
            let claim = match &line.claim {
                Some(claim) => format!("{} (epoch {})", claim.owner, claim.epoch),
                None => "-".to_owned(),
            };
            vec![
                line.thread_id.to_string(),
                line.version.to_string(),
                run,
                state,
                claim,
            ]
        })
        .collect();
    let mut text = table(
        &["THREAD", "VERSION", "LATEST RUN", "STATE", "CLAIMED BY"],
        &rows,
    );
    text.push_str(&format!("({})\n", plural(lines.len(), "thread", "threads")));
    text
}

/// `runcore show THREAD`, readable: the runs, the transcript and the tickets.
pub fn show_text(view: &ThreadView) -> String {
    let mut text = format!(
        "thread {}: version {}, {}, {}, {}\n",
        view.thread_id,
        view.version,
        plural(view.runs.len(), "run", "runs"),
        plural(view.messages.len(), "message", "messages"),
        plural(view.tickets.len(), "ticket", "tickets"),
    );
    if let Some(claim) = &view.claim {
        text.push_str(&format!(
            "claimed by {} (epoch {}) until {} (store time)\n",
            claim.owner, claim.epoch, claim.expires_at_ms
        ));
    }
    if let Some(origin) = &view.forked_from {
        text.push_str(&format!(
            "forked from {} at version {}\n",
            origin.thread_id, origin.version
        ));
    }
    if view.version == 0 {
        text.push_str("(nothing is committed on this thread)\n");
        return text;
    }
    text.push_str("\n== Runs (in start order) ==\n");
    let rows: Vec<Vec<String>> = view
        .runs
        .iter()
        .map(|run| vec![run.id.to_string(), state_text(&run.state)])
        .collect();
    for line in table(&["RUN", "STATE"], &rows).lines().skip(1) {
        text.push_str(&format!("  {line}\n"));
    }
    text.push_str("\n== Transcript ==\n");
    let digits = view.messages.len().saturating_sub(1).to_string().len();
    for (i, message) in view.messages.iter().enumerate() {
        if view.summary.is_some() && i == view.context_start {
            text.push_str("  -- the model context starts here, after the summary --\n");
        }
        text.push_str(&format!("  [{i:>digits$}] {}\n", transcript_line(message)));
    }
    if let Some(summary) = &view.summary {
        text.push_str(&format!(
            "\n== Model context ==\n  the summary, then messages {}..{} (a compaction; every \
             message stays committed)\n  summary: {}\n",
            view.context_start,
            view.messages.len(),
            transcript_line(summary),
        ));
    }
    if !view.tickets.is_empty() {
        text.push_str("\n== Waiting for a person ==\n");
        text.push_str(&tickets_block(&view.tickets));
    }
    text
}

fn tickets_block(tickets: &[ResumeTicket]) -> String {
    let rows: Vec<Vec<String>> = tickets
        .iter()
        .map(|t| {
            vec![
                t.run_id.to_string(),
                t.correlation_id.clone(),
                ticket_target_text(t),
                deadline_text(t),
            ]
        })
        .collect();
    table(
        &["RUN", "TICKET", "WAITS FOR", "DEADLINE (HOST CLOCK)"],
        &rows,
    )
    .lines()
    .map(|line| format!("  {line}\n"))
    .collect()
}

/// `runcore pending`, readable: what needs a person, and how to answer it.
pub fn pending_text(tickets: &[ResumeTicket], now_ms: u64) -> String {
    if tickets.is_empty() {
        return "no run is waiting for a person\n".to_owned();
    }
    let rows: Vec<Vec<String>> = tickets
        .iter()
        .map(|t| {
            vec![
                t.thread_id.to_string(),
                t.run_id.to_string(),
                t.correlation_id.clone(),
                ticket_target_text(t),
                deadline_for_people(t, now_ms),
            ]
        })
        .collect();
    let mut text = table(
        &[
            "THREAD",
            "RUN",
            "TICKET",
            "WAITS FOR",
            "DEADLINE (HOST CLOCK, UTC)",
        ],
        &rows,
    );
    text.push_str(&format!(
        "({} waiting for a person; answer a permission with `runcore approve RUN --store URL \
         [--note TEXT]` or `runcore deny RUN --store URL [--reason TEXT]`; other waits from \
         their host)\n",
        plural(tickets.len(), "run", "runs")
    ));
    text
}

/// A ticket's deadline as UTC civil time, marked `EXPIRED` once `now_ms` (the wall clock) is
/// past it (issue 43: raw milliseconds, an expired one unmarked). The clock is the host's, as
/// the deadline's is.
fn deadline_for_people(ticket: &ResumeTicket, now_ms: u64) -> String {
    match ticket.deadline_ms {
        Some(ms) => {
            let civil = runcore_console::time::iso_utc(ms)
                .replace('T', " ")
                .replace(".000Z", " UTC")
                .replace('Z', " UTC");
            if now_ms > ms {
                format!("{civil} EXPIRED")
            } else {
                civil
            }
        }
        None => "none".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runcore::store::{CommitLog, CommittedThreadView, MemoryStore};
    use runcore::{Agent, AgentConfig, Output, RunId, ThreadId, ToolSpec, UserMessage};

    /// A store with one ended run and one awaiting run on thread `t`, and an empty thread
    /// listing elsewhere.
    fn store() -> MemoryStore {
        let mut store = MemoryStore::new();
        let config = AgentConfig::for_thread("t").with_tool("rm", ToolSpec::gated("Remove", None));
        let mut agent = Agent::new(config).unwrap();
        let commit_all = |agent: &mut Agent, store: &mut MemoryStore| {
            while let Some(output) = agent.poll() {
                if let Output::Commit(commit) = output {
                    store.commit_operation(commit.into_operation()).unwrap();
                }
            }
        };
        agent.prompt(UserMessage::text("hi"), 0).unwrap();
        commit_all(&mut agent, &mut store);
        agent
            .model_done(
                &RunId::new("t/run-1"),
                1,
                runcore::AssistantMessage::text("hello"),
            )
            .unwrap();
        commit_all(&mut agent, &mut store);
        agent.prompt(UserMessage::text("remove x"), 0).unwrap();
        commit_all(&mut agent, &mut store);
        let call = runcore::AssistantBlock::tool_call("c1", "rm", serde_json::json!({"p": "x"}));
        agent
            .model_done(
                &RunId::new("t/run-2"),
                1,
                runcore::AssistantMessage::new(vec![call], runcore::StopReason::ToolUse),
            )
            .unwrap();
        commit_all(&mut agent, &mut store);
        store
    }

    #[test]
    fn show_lists_runs_in_start_order_with_the_awaiting_ticket() {
        let store = store();
        let view = show(&store, &ThreadId::new("t")).unwrap();
        let ids: Vec<&str> = view.runs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["t/run-1", "t/run-2"]);
        assert_eq!(view.tickets.len(), 1);
        assert_eq!(view.messages.len(), 4);
        assert_eq!(
            view.version,
            store.thread_version(&ThreadId::new("t")).unwrap()
        );
        assert_eq!(pending(&store).unwrap(), view.tickets);
        let text = show_text(&view);
        assert!(text.contains("t/run-1  ended: natural_end"), "{text}");
        assert!(text.contains("permission for rm [c1]"), "{text}");
    }

    #[test]
    fn an_unknown_thread_is_empty() {
        let view = show(&store(), &ThreadId::new("nope")).unwrap();
        assert_eq!(
            serde_json::to_string(&view).unwrap(),
            r#"{"thread_id":"nope","version":0,"messages":[],"context_start":0,"runs":[],"tickets":[],"claim":null,"forked_from":null}"#
        );
    }

    #[test]
    fn events_page_from_and_limit() {
        let store = store();
        let all = |from, limit| {
            let mut out = Vec::new();
            write_events(&store, &EventScope::All, from, limit, &mut out).unwrap();
            String::from_utf8(out).unwrap().lines().count()
        };
        let total = store.event_count();
        assert!(total > 3);
        assert_eq!(all(None, None), total);
        assert_eq!(all(Some(2), None), total - 2);
        assert_eq!(all(None, Some(3)), 3);
        assert_eq!(all(None, Some(0)), 0);
    }
}
