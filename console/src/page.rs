//! One page of a thread (issue 42): every page of the console stays bounded, however long the
//! thread. A thread of 10,000 steps was one 19.5 MB page; one of 50,000 imports grew the
//! console until the kernel killed it.
//!
//! A page is a window of the transcript, `from` (a message index) and at most `limit`
//! messages ([`THREAD_PAGE`] unless asked, at most [`MAX_THREAD_PAGE`]); without `from`, the
//! latest messages. With it go the runs whose messages the window holds (or that start in
//! it), the spans of those runs only, each run's timeline capped at [`TIMELINE_ROWS`] rows and
//! the decisions at [`MAX_DECISIONS`] (each with a count of what was left out). Pending
//! tickets are always shown: only a thread's active run can wait, so there are few.

use std::collections::BTreeSet;

use runcore_traces::{AttributeValue, Span};
use serde::Serialize;

use crate::shapes::ThreadView;

/// Messages a thread page holds when the query names no limit.
pub const THREAD_PAGE: usize = 200;
/// The most messages one thread page holds.
pub const MAX_THREAD_PAGE: usize = 1000;
/// The most spans one run's timeline draws (its run span included); the rest are counted.
pub const TIMELINE_ROWS: usize = 200;
/// The most decisions one page lists; the rest are counted.
pub const MAX_DECISIONS: usize = 200;

/// Where each run's messages start in the transcript: `(message index, run id)`, in commit
/// order (so by index).
pub type RunStarts = Vec<(usize, String)>;

/// Which window of the transcript a page shows, as asked (`?from=&limit=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageQuery {
    /// The first message's index; `None`: the latest page.
    pub from: Option<usize>,
    /// How many messages at most; `None`: [`THREAD_PAGE`].
    pub limit: Option<usize>,
}

/// The window a page shows, in the API's JSON as `"page"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PageInfo {
    /// The index of the page's first message (`messages[0]` is message `from`).
    pub from: usize,
    /// The most messages a page holds.
    pub limit: usize,
    /// The thread's message count.
    pub total: usize,
    /// The `from` of the page before, `null` on the first.
    pub previous: Option<usize>,
    /// The `from` of the page after, `null` on the latest.
    pub next: Option<usize>,
    /// The thread's run count (`runs` holds only the page's).
    pub runs_total: usize,
}

impl PageInfo {
    /// The window `query` asks for in a transcript of `total` messages.
    pub fn of(query: PageQuery, total: usize, runs_total: usize) -> Self {
        let limit = query.limit.unwrap_or(THREAD_PAGE).clamp(1, MAX_THREAD_PAGE);
        let from = query
            .from
            .unwrap_or_else(|| total.saturating_sub(limit))
            .min(total);
        let to = from.saturating_add(limit).min(total);
        PageInfo {
            from,
            limit,
            total,
            previous: (from > 0).then(|| from.saturating_sub(limit)),
            next: (to < total).then_some(to),
            runs_total,
        }
    }

    /// One past the page's last message.
    pub fn to(&self) -> usize {
        self.from.saturating_add(self.limit).min(self.total)
    }
}

/// A thread's page: `show`'s view with only the window's messages and runs, and where the
/// window is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadPage {
    /// `show --json`'s shape, `messages` and `runs` cut to the page.
    #[serde(flatten)]
    pub view: ThreadView,
    /// The window.
    pub page: PageInfo,
}

/// The runs (by id) whose messages fall in `[from, to)` of a transcript of `total` messages,
/// or that start in it (a run with no message yet starts where the transcript ends).
pub fn runs_on_page(starts: &RunStarts, page: &PageInfo) -> BTreeSet<String> {
    let (from, to) = (page.from, page.to());
    let mut on = BTreeSet::new();
    for (index, (start, run)) in starts.iter().enumerate() {
        let end = starts
            .get(index + 1)
            .map_or(page.total, |(next, _)| *next)
            .max(*start);
        let overlaps = *start < to && end > from;
        let starts_here = *start >= from && (*start < to || to == page.total);
        if overlaps || starts_here {
            on.insert(run.clone());
        }
    }
    on
}

/// `view` cut to the window `query` asks for.
pub fn thread_page(mut view: ThreadView, starts: &RunStarts, query: PageQuery) -> ThreadPage {
    let page = PageInfo::of(query, view.messages.len(), view.runs.len());
    let on = runs_on_page(starts, &page);
    view.messages.truncate(page.to());
    view.messages.drain(..page.from);
    view.runs.retain(|run| on.contains(run.id.as_str()));
    ThreadPage { view, page }
}

/// The spans of the runs on the page (each run's span and its children), in their order.
pub fn spans_on_page(spans: Vec<Span>, runs: &BTreeSet<String>) -> Vec<Span> {
    let traces: BTreeSet<String> = spans
        .iter()
        .filter(|span| span.parent_span_id.is_none())
        .filter(|span| {
            matches!(span.attributes.get("runcore.run.id"),
                Some(AttributeValue::String(run)) if runs.contains(run))
        })
        .map(|span| span.trace_id.clone())
        .collect();
    spans
        .into_iter()
        .filter(|span| traces.contains(&span.trace_id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_page_by_default_and_windows_that_never_pass_the_end() {
        let page = PageInfo::of(PageQuery::default(), 1_000, 3);
        assert_eq!((page.from, page.to(), page.limit), (800, 1_000, 200));
        assert_eq!((page.previous, page.next), (Some(600), None));
        let page = PageInfo::of(
            PageQuery {
                from: Some(0),
                limit: Some(50_000),
            },
            5_000,
            1,
        );
        assert_eq!((page.from, page.to()), (0, MAX_THREAD_PAGE));
        assert_eq!((page.previous, page.next), (None, Some(MAX_THREAD_PAGE)));
        let page = PageInfo::of(
            PageQuery {
                from: Some(9_999),
                limit: Some(0),
            },
            10,
            0,
        );
        assert_eq!((page.from, page.to(), page.limit), (10, 10, 1));
        let empty = PageInfo::of(PageQuery::default(), 0, 0);
        assert_eq!(
            (empty.from, empty.to(), empty.previous, empty.next),
            (0, 0, None, None)
        );
    }

    #[test]
    fn a_run_is_on_every_page_its_messages_reach() {
        let starts: RunStarts = vec![(0, "r1".into()), (10, "r2".into()), (10, "r3".into())];
        let page = |from, limit| {
            PageInfo::of(
                PageQuery {
                    from: Some(from),
                    limit: Some(limit),
                },
                30,
                3,
            )
        };
        let on = |from, limit| {
            runs_on_page(&starts, &page(from, limit))
                .into_iter()
                .collect::<Vec<_>>()
        };
        assert_eq!(on(0, 5), ["r1"]);
        assert_eq!(on(5, 10), ["r1", "r2", "r3"]);
        assert_eq!(on(20, 10), ["r3"]);
        // r2 has no message (r3 started at the same index): shown where it starts.
        assert_eq!(on(10, 1), ["r2", "r3"]);
    }
}
