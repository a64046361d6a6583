//! The console's pages: server-rendered HTML built from the same shapes the JSON API returns.
//!
//! Every text that comes from the store (messages, tool arguments, ids, reasons) goes through
//! [`escape`]: a message containing `<script>` is shown as those characters, never run. The
//! pages load one small script of our own (`/console.js`: polling refresh and the token box)
//! and one style sheet; the response's Content-Security-Policy allows nothing else.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use runcore::store::EventRecord;
use runcore::{ResumeTicket, RunState};
use runcore_traces::Span;
use serde_json::Value;

use crate::page::PageInfo;
use crate::shapes::{ThreadLine, ThreadView};
use crate::time::time_html;

mod spans;
#[cfg(test)]
mod tests;

use spans::{decisions, timelines};

/// `text` with `& < > " '` replaced by character references: safe in element content and in
/// quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` as one percent-encoded path segment (every byte outside the unreserved set is
/// encoded, `/` included: run ids contain it).
pub fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Which page a link in the header is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The thread list and one thread's transcript.
    Threads,
    /// Pending approvals.
    Pending,
    /// Audit events.
    Events,
}

/// The page around `body`.
pub fn layout(title: &str, section: Section, store_label: &str, body: &str) -> String {
    let link = |href: &str, name: &str, this: Section| {
        let current = if this == section {
            r#" aria-current="page""#
        } else {
            ""
        };
        format!(r#"<a href="{href}"{current}>{name}</a>"#)
    };
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · runcore console</title>
<link rel="stylesheet" href="/console.css">
<script src="/console.js" defer></script>
</head>
<body>
<header>
<strong class="brand">runcore</strong>
<nav>{threads} {pending} {events}</nav>
<span class="store" title="the store (secrets are never shown)">{store}</span>
<label class="token">token <input type="password" id="token-box" autocomplete="off" placeholder="from the console's start line"></label>
</header>
<main id="main">
{body}
</main>
</body>
</html>
"#,
        title = escape(title),
        threads = link("/", "Threads", Section::Threads),
        pending = link("/pending", "Pending", Section::Pending),
        events = link("/events", "Events", Section::Events),
        store = escape(store_label),
    )
}

/// A run state in words: `running`, `awaiting`, `ended: natural_end`, `ended: stopped (why)`.
pub fn state_text(state: &RunState) -> String {
    match state {
        RunState::Running => "running".into(),
        RunState::Awaiting => "awaiting".into(),
        RunState::Ended(cause) => {
            let value = serde_json::to_value(cause).unwrap_or(Value::Null);
            let kind = value.get("type").and_then(Value::as_str).unwrap_or("ended");
            let detail = value
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| {
                    value.get("failure").map(|f| {
                        f.get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned()
                    })
                });
            match detail {
                Some(detail) if !detail.is_empty() => format!("ended: {kind} ({detail})"),
                _ => format!("ended: {kind}"),
            }
        }
    }
}

fn state_badge(state: &RunState) -> String {
    let class = match state {
        RunState::Running => "running",
        RunState::Awaiting => "awaiting",
        RunState::Ended(_) => "ended",
    };
    format!(
        r#"<span class="badge {class}">{}</span>"#,
        escape(&state_text(state))
    )
}

/// What the thread list shows: the threads waiting for a person, one page of the rest, and
/// where the page is.
#[derive(Debug)]
pub struct ThreadList<'a> {
    /// Threads with a run waiting for a person (shown first: they need someone).
    pub waiting: &'a [&'a ThreadLine],
    /// The page's threads, in id order.
    pub page: &'a [&'a ThreadLine],
    /// How many threads match the search.
    pub total: usize,
    /// The search (`?q=`), empty for none.
    pub search: &'a str,
    /// Whether this is a later page (a link back to the first).
    pub first: bool,
    /// The `after` of the next page, if any.
    pub next: Option<&'a str>,
}

/// The thread list: a search box, the threads waiting for a person, then one page of threads
/// with their version, latest run, state and live claim.
pub fn threads_page(list: &ThreadList<'_>, now_ms: u64) -> String {
    let mut body = String::from("<h1>Threads</h1>\n");
    let _ = writeln!(
        body,
        r#"<form method="get" action="/" class="search"><input type="search" name="q" value="{q}" placeholder="thread id contains…" aria-label="search threads"><button type="submit">Search</button></form>"#,
        q = escape(list.search)
    );
    if list.total == 0 {
        let text = if list.search.is_empty() {
            "No threads in this store.".to_owned()
        } else {
            format!("No thread id contains {:?}.", list.search)
        };
        let _ = writeln!(body, "<p class=\"empty\">{}</p>", escape(&text));
        return body;
    }
    if !list.waiting.is_empty() {
        body.push_str("<h2>Waiting for a person</h2>\n");
        body.push_str(&threads_table(list.waiting, now_ms, "waiting"));
    }
    let _ = writeln!(
        body,
        "<h2>All threads</h2>\n<p class=\"meta\">{} threads{}</p>",
        list.total,
        if list.search.is_empty() {
            String::new()
        } else {
            format!(" matching <code>{}</code>", escape(list.search))
        }
    );
    body.push_str(&threads_table(list.page, now_ms, "threads"));
    let query = if list.search.is_empty() {
        String::new()
    } else {
        format!("q={}&amp;", path_segment(list.search))
    };
    let mut links = Vec::new();
    if list.first {
        links.push(format!(
            r#"<a href="/?{}">first page</a>"#,
            query.trim_end_matches("&amp;")
        ));
    }
    if let Some(next) = list.next {
        links.push(format!(
            r#"<a href="/?{query}after={}" rel="next">next page →</a>"#,
            path_segment(next)
        ));
    }
    if !links.is_empty() {
        let _ = writeln!(body, "<nav class=\"pager\">{}</nav>", links.join(" · "));
    }
    body
}

fn threads_table(lines: &[&ThreadLine], now_ms: u64, id: &str) -> String {
    let mut body = format!(
        "<table class=\"list threads\" id=\"{id}\"><thead><tr><th>Thread</th><th>Version</th><th>Latest run</th>\
         <th>State</th><th>Claim</th></tr></thead><tbody>\n"
    );
    for line in lines {
        let (run, state) = match &line.latest_run {
            Some(run) => (escape(run.id.as_str()), state_badge(&run.state)),
            None => ("–".into(), "–".into()),
        };
        let _ = writeln!(
            body,
            r#"<tr><td data-label="Thread"><a href="/threads/{href}">{thread}</a></td><td data-label="Version">{version}</td><td data-label="Latest run">{run}</td><td data-label="State">{state}</td><td data-label="Claim">{claim}</td></tr>"#,
            href = path_segment(line.thread_id.as_str()),
            thread = escape(line.thread_id.as_str()),
            version = line.version,
            claim = claim_html(line.claim.as_ref(), now_ms),
        );
    }
    body.push_str("</tbody></table>\n");
    body
}

/// Where a thread comes from and what was forked from it (SPEC §8.10), linked both ways.
fn lineage(view: &ThreadView, forks: &[runcore::host::Forked]) -> String {
    let mut text = String::new();
    if let Some(origin) = &view.forked_from {
        let _ = writeln!(
            text,
            r#"<p class="meta lineage">forked from <a href="/threads/{href}">{parent}</a> at version {version}</p>"#,
            href = path_segment(origin.thread_id.as_str()),
            parent = escape(origin.thread_id.as_str()),
            version = origin.version,
        );
    }
    if !forks.is_empty() {
        let links: Vec<String> = forks
            .iter()
            .map(|fork| {
                format!(
                    r#"<a href="/threads/{href}">{thread}</a> (at version {version})"#,
                    href = path_segment(fork.thread_id.as_str()),
                    thread = escape(fork.thread_id.as_str()),
                    version = fork.forked_from.version,
                )
            })
            .collect();
        let _ = writeln!(
            text,
            r#"<p class="meta lineage">forks: {}</p>"#,
            links.join(", ")
        );
    }
    text
}

/// A live claim: who holds the thread and until when (store time), or "free".
fn claim_html(claim: Option<&crate::shapes::ClaimView>, now_ms: u64) -> String {
    match claim {
        Some(claim) => format!(
            r#"<span class="claim">held by <code>{owner}</code> (epoch {epoch}) until {until}</span>"#,
            owner = escape(&claim.owner),
            epoch = claim.epoch,
            until = time_html(claim.expires_at_ms, now_ms),
        ),
        None => r#"<span class="claim free">free</span>"#.to_owned(),
    }
}

pub use crate::page::RunStarts;

/// One thread: its live claim, its runs with a timeline of each, who decided each
/// permission, its transcript with each tool call beside its result, where the model context
/// starts (and the compaction summary that stands for what comes before), and its pending
/// tickets — one window of it, `page` (see [`crate::page`]): the window's messages, the runs
/// they belong to, and those runs' spans. `spans` are the thread's spans derived from its
/// commits (SPEC §14); `now_ms` is the server's clock, for "3 min ago".
pub fn thread_page(
    view: &ThreadView,
    page: &PageInfo,
    run_starts: &RunStarts,
    spans: &[Span],
    forks: &[runcore::host::Forked],
    now_ms: u64,
) -> String {
    let context_start = view.context_start;
    let on_page = crate::page::runs_on_page(run_starts, page);
    let mut body = format!(
        "<h1>Thread <code>{}</code></h1>\n<p class=\"meta\">version {} · {} runs · {} messages · {}</p>\n",
        escape(view.thread_id.as_str()),
        view.version,
        view.runs.len(),
        view.messages.len(),
        claim_html(view.claim.as_ref(), now_ms),
    );
    body.push_str(&lineage(view, forks));
    if view.version == 0 {
        body.push_str("<p class=\"empty\">Nothing is committed on this thread.</p>\n");
        return body;
    }
    if !view.tickets.is_empty() {
        body.push_str("<h2>Waiting for a person</h2>\n");
        for ticket in &view.tickets {
            body.push_str(&ticket_card(ticket, now_ms));
        }
    }
    let pager = pager(view.thread_id.as_str(), page);
    body.push_str(&pager);
    let spans: Vec<Span> = crate::page::spans_on_page(spans.to_vec(), &on_page);
    body.push_str(&timelines(&spans, now_ms));
    body.push_str(&decisions(&spans));
    body.push_str("<h2>Runs</h2>\n<table class=\"list\" id=\"runs\"><thead><tr><th>Run</th><th>State / end cause</th></tr></thead><tbody>\n");
    for run in view
        .runs
        .iter()
        .filter(|run| on_page.contains(run.id.as_str()))
    {
        let _ = writeln!(
            body,
            r#"<tr><td data-label="Run"><a href="/events?run={href}">{run}</a></td><td data-label="State">{state}</td></tr>"#,
            href = path_segment(run.id.as_str()),
            run = escape(run.id.as_str()),
            state = state_badge(&run.state),
        );
    }
    let (from, to) = (page.from, page.to());
    let _ = writeln!(
        body,
        "</tbody></table>\n<h2>Transcript</h2>\n<ol class=\"transcript\" start=\"{from}\">"
    );
    // Only the window's messages are turned into JSON values (and a tool call's result,
    // which may lie past the window); the results are found by one map over the transcript.
    let messages: Vec<Value> = view
        .messages
        .get(from..to)
        .unwrap_or_default()
        .iter()
        .map(|m| serde_json::to_value(m).unwrap_or(Value::Null))
        .collect();
    let mut result_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (at, message) in view.messages.iter().enumerate() {
        if let runcore::Message::ToolResult(result) = message {
            result_of.entry(result.call_id.as_str()).or_insert(at);
        }
    }
    // Tool results shown beside their call are not shown again on their own.
    let mut paired = vec![false; messages.len()];
    for (k, message) in messages.iter().enumerate() {
        let i = from + k;
        if i == context_start {
            let _ = writeln!(
                body,
                r#"<li class="marker context" value="{i}">model context starts here (context_start = {context_start}){summary}</li>"#,
                summary = summary_html(view.summary.as_ref(), context_start),
            );
        }
        for (_, run) in run_starts.iter().filter(|(at, _)| *at == i) {
            let state = view
                .runs
                .iter()
                .find(|r| r.id.as_str() == run)
                .map(|r| state_badge(&r.state))
                .unwrap_or_default();
            let _ = writeln!(
                body,
                r#"<li class="marker run" value="{i}">run <code>{}</code> starts {state}</li>"#,
                escape(run)
            );
        }
        if paired.get(k).copied().unwrap_or(false) {
            continue;
        }
        let role = message.get("role").and_then(Value::as_str).unwrap_or("?");
        let _ = write!(
            body,
            r#"<li class="message {role_class}" value="{i}"><div class="role">{role}</div>"#,
            role_class = css_class(role),
            role = escape(role),
        );
        let blocks = message
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for block in &blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                    let _ = write!(body, "<div class=\"text\">{}</div>", escape(text));
                }
                Some("tool_call") => {
                    let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                    let result = result_of
                        .get(id)
                        .copied()
                        .filter(|at| *at > i)
                        .and_then(|at| Some((at, view.messages.get(at)?)));
                    body.push_str("<div class=\"pair\">");
                    body.push_str(&call_box(block));
                    match result {
                        Some((at, result)) => {
                            if let Some(slot) = at.checked_sub(from).and_then(|k| paired.get_mut(k))
                            {
                                *slot = true;
                            }
                            let result = serde_json::to_value(result).unwrap_or(Value::Null);
                            body.push_str(&result_box(&result, Some(at)));
                        }
                        None => body.push_str(
                            "<div class=\"result open\"><div class=\"label\">no result committed yet</div></div>",
                        ),
                    }
                    body.push_str("</div>");
                }
                // Reasoning as text; its signature (opaque, for the provider) is not shown
                // (issue 43: the block showed as raw JSON, signature and all).
                Some("thinking") => {
                    let text = block.get("thinking").and_then(Value::as_str).unwrap_or("");
                    let _ = write!(
                        body,
                        "<div class=\"thinking\"><div class=\"label\">thinking</div><div class=\"text\">{}</div></div>",
                        escape(text)
                    );
                }
                Some("redacted_thinking") => {
                    let size = block
                        .get("data")
                        .and_then(Value::as_str)
                        .map_or(0, str::len);
                    let _ = write!(
                        body,
                        "<div class=\"thinking redacted\"><div class=\"label\">redacted thinking ({size} bytes, encrypted by the provider)</div></div>"
                    );
                }
                _ => {
                    let _ = write!(body, "<pre class=\"json\">{}</pre>", escape(&pretty(block)));
                }
            }
        }
        if role == "tool_result" {
            // A result whose call is not in the transcript before it: shown on its own.
            body.push_str(&result_box(message, None));
        }
        if let Some(reason) = message.get("stop_reason").and_then(Value::as_str) {
            let _ = write!(body, "<div class=\"stop\">stop: {}</div>", escape(reason));
        }
        if let Some(error) = message.get("error_message").and_then(Value::as_str) {
            let _ = write!(body, "<div class=\"stop\">error: {}</div>", escape(error));
        }
        body.push_str("</li>\n");
    }
    if context_start >= view.messages.len() && to == view.messages.len() {
        let _ = writeln!(
            body,
            r#"<li class="marker context">model context starts here (context_start = {context_start}){summary}</li>"#,
            summary = summary_html(view.summary.as_ref(), context_start),
        );
    }
    body.push_str("</ol>\n");
    body.push_str(&pager);
    body
}

/// Where the page is in the transcript, with links to the pages around it.
fn pager(thread: &str, page: &PageInfo) -> String {
    let href = |from: usize| {
        format!(
            "/threads/{}?from={from}&amp;limit={}",
            path_segment(thread),
            page.limit
        )
    };
    let mut links = Vec::new();
    if let Some(previous) = page.previous {
        links.push(format!(r#"<a href="{}">first</a>"#, href(0)));
        links.push(format!(
            r#"<a href="{}" rel="prev">← earlier</a>"#,
            href(previous)
        ));
    }
    if let Some(next) = page.next {
        links.push(format!(
            r#"<a href="{}" rel="next">later →</a>"#,
            href(next)
        ));
        links.push(format!(
            r#"<a href="/threads/{}">latest</a>"#,
            path_segment(thread)
        ));
    }
    let shown = if page.total == 0 {
        "no messages".to_owned()
    } else {
        format!(
            "messages {}–{} of {}",
            page.from,
            page.to().saturating_sub(1),
            page.total
        )
    };
    format!(
        "<nav class=\"pager\"><span class=\"meta\">{shown}</span> {}</nav>\n",
        links.join(" · ")
    )
}

/// The latest compaction's summary: what the model sees instead of the messages before the
/// context start.
fn summary_html(summary: Option<&runcore::Message>, context_start: usize) -> String {
    let Some(summary) = summary else {
        return String::new();
    };
    let value = serde_json::to_value(summary).unwrap_or(Value::Null);
    let text = value
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    format!(
        r#"<div class="summary"><div class="label">compaction summary: the model sees this instead of the {context_start} messages before here</div><div class="text">{}</div></div>"#,
        escape(&text)
    )
}

fn css_class(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn call_box(call: &Value) -> String {
    let name = call.get("name").and_then(Value::as_str).unwrap_or("");
    let id = call.get("id").and_then(Value::as_str).unwrap_or("");
    let arguments = call.get("arguments").cloned().unwrap_or(Value::Null);
    format!(
        "<div class=\"call\"><div class=\"label\">call <b>{}</b> <code>{}</code></div><pre class=\"json\">{}</pre></div>",
        escape(name),
        escape(id),
        escape(&pretty(&arguments))
    )
}

fn result_box(result: &Value, at: Option<usize>) -> String {
    let outcome = result.get("outcome").and_then(Value::as_str).unwrap_or("?");
    let is_error = result
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut text = String::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match block.get("text").and_then(Value::as_str) {
            Some(t) => text.push_str(t),
            None => text.push_str(&pretty(block)),
        }
    }
    let at = at.map(|i| format!(" [{i}]")).unwrap_or_default();
    format!(
        "<div class=\"result {cls}\"><div class=\"label\">result{at} <span class=\"badge outcome-{cls}\">{outcome}</span>{err}</div><div class=\"text\">{text}</div></div>",
        cls = css_class(outcome),
        outcome = escape(outcome),
        err = if is_error { " error" } else { "" },
        text = escape(&text),
    )
}

/// What a ticket waits for, in words, and its tool call when it has one.
fn ticket_summary(ticket: &ResumeTicket) -> (String, Option<(String, Value)>) {
    let target = serde_json::to_value(ticket.target()).unwrap_or(Value::Null);
    let kind = target.get("type").and_then(Value::as_str).unwrap_or("?");
    let reason = target
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or(kind)
        .to_owned();
    let tool = target.get("tool").map(|tool| {
        (
            tool.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            tool.get("arguments").cloned().unwrap_or(Value::Null),
        )
    });
    (reason, tool)
}

/// Whether the person can answer `ticket` here: a permission for a tool call.
pub fn is_permission(ticket: &ResumeTicket) -> bool {
    matches!(
        ticket.target(),
        runcore::AwaitTarget::ToolCall {
            reason: runcore::ToolWaitReason::Permission,
            ..
        }
    )
}

fn ticket_card(ticket: &ResumeTicket, now_ms: u64) -> String {
    let (reason, tool) = ticket_summary(ticket);
    let expired = ticket.deadline_ms.is_some_and(|d| now_ms > d);
    let deadline = match ticket.deadline_ms {
        Some(ms) => time_html(ms, now_ms),
        None => "none".into(),
    };
    let mut card = format!(
        "<section class=\"ticket\" data-run=\"{run}\"><div class=\"ticket-head\"><span class=\"badge awaiting\">{reason}</span> run <code>{run}</code> on <a href=\"/threads/{thread_href}\">{thread}</a></div>",
        run = escape(ticket.run_id.as_str()),
        reason = escape(&reason),
        thread_href = path_segment(ticket.thread_id.as_str()),
        thread = escape(ticket.thread_id.as_str()),
    );
    if let Some((name, arguments)) = &tool {
        let _ = write!(
            card,
            "<div class=\"tool\">tool <b class=\"tool-name\">{}</b></div><pre class=\"json arguments\">{}</pre>",
            escape(name),
            escape(&pretty(arguments))
        );
    }
    let _ = write!(
        card,
        "<dl><dt>deadline</dt><dd>{}</dd><dt>ticket</dt><dd><code>{}</code></dd></dl>",
        deadline,
        escape(&ticket.correlation_id)
    );
    if expired {
        card.push_str(
            "<p class=\"expired\" role=\"status\"><span class=\"badge expired\">expired</span> \
             The deadline has passed: answering now is refused (<code>expired</code>) and nothing \
             is written. The run ends <code>stopped: wait_expired</code> (the call gets an \
             <code>expired</code> result) when a worker or <code>runcore sweep</code> applies the \
             deadline.</p>",
        );
    }
    if is_permission(ticket) {
        let action = format!("/runs/{}/decision", path_segment(ticket.run_id.as_str()));
        // Past its deadline an answer is refused (409 `expired`): the buttons say so rather
        // than invite a click that cannot work.
        let off = if expired {
            r#" disabled title="the deadline has passed""#
        } else {
            ""
        };
        let _ = write!(
            card,
            r#"<div class="decide"><form method="post" action="{action}" class="decision"><input type="hidden" name="decision" value="allow"><input type="hidden" name="token" value=""><input type="text" name="note" placeholder="note (optional)"{off}><button type="submit" class="approve"{off}>Approve</button></form><form method="post" action="{action}" class="decision"><input type="hidden" name="decision" value="deny"><input type="hidden" name="token" value=""><input type="text" name="reason" placeholder="reason (optional)"{off}><button type="submit" class="deny"{off}>Deny</button></form></div>"#
        );
    } else {
        card.push_str("<p class=\"meta\">Not a permission: answer it from the host (a <code>resume_ticket</code> line to <code>runcore drive --store</code>).</p>");
    }
    card.push_str("</section>\n");
    card
}

/// Pending approvals, with Approve and Deny; `notice` is the outcome of the last decision.
pub fn pending_page(tickets: &[ResumeTicket], notice: Option<&str>, now_ms: u64) -> String {
    let mut body = String::from("<h1>Pending</h1>\n");
    if let Some(notice) = notice {
        let _ = writeln!(
            body,
            "<p class=\"notice\" role=\"status\">{}</p>",
            escape(notice)
        );
    }
    if tickets.is_empty() {
        body.push_str("<p class=\"empty\">No run is waiting for a person.</p>\n");
    }
    for ticket in tickets {
        body.push_str(&ticket_card(ticket, now_ms));
    }
    body
}

/// What the events page lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventsQuery {
    /// Only this thread's events.
    pub thread: Option<String>,
    /// Only this run's events.
    pub run: Option<String>,
    /// After this sequence (exclusive).
    pub from: Option<u64>,
    /// At most this many.
    pub limit: u64,
}

impl EventsQuery {
    /// The page's address with another `from`.
    fn href(&self, from: Option<u64>) -> String {
        let mut parts = Vec::new();
        if let Some(thread) = &self.thread {
            parts.push(format!("thread={}", path_segment(thread)));
        }
        if let Some(run) = &self.run {
            parts.push(format!("run={}", path_segment(run)));
        }
        if let Some(from) = from {
            parts.push(format!("from={from}"));
        }
        parts.push(format!("limit={}", self.limit));
        format!("/events?{}", parts.join("&"))
    }
}

/// One page of audit events, with a link to the next.
/// The audit events of `query`, one row each; an event whose payload carries the agent's
/// clock (`now_ms`) shows it as a time (`now_ms`: the server's clock, for "3 min ago").
pub fn events_page(events: &[EventRecord], query: &EventsQuery, now_ms: u64) -> String {
    let mut body = String::from("<h1>Events</h1>\n");
    let scope = match (&query.thread, &query.run) {
        (Some(thread), _) => format!("thread <code>{}</code>", escape(thread)),
        (None, Some(run)) => format!("run <code>{}</code>", escape(run)),
        (None, None) => "every thread".into(),
    };
    let _ = writeln!(
        body,
        "<p class=\"meta\">{scope}, after sequence {} · {} per page · <a href=\"/events\">all</a></p>",
        query.from.unwrap_or(0),
        query.limit
    );
    if events.is_empty() {
        body.push_str("<p class=\"empty\">No more events.</p>\n");
    } else {
        body.push_str("<table class=\"list events\"><thead><tr><th>#</th><th>Commit</th><th>Thread</th><th>Run</th><th>Kind</th><th>When</th><th>Payload</th></tr></thead><tbody>\n");
        for event in events {
            // issue 43: the agent's clock was only in the payload, as raw ms.
            let when = event
                .payload
                .get("now_ms")
                .and_then(Value::as_u64)
                .map_or_else(|| "–".to_owned(), |ms| time_html(ms, now_ms));
            let _ = writeln!(
                body,
                r##"<tr><td data-label="Seq">{seq}</td><td data-label="Commit">{commit}</td><td data-label="Thread"><a href="/threads/{thread_href}">{thread}</a></td><td data-label="Run"><a href="/events?run={run_href}">{run}</a></td><td data-label="Kind">{kind}</td><td data-label="When">{when}</td><td data-label="Payload"><pre class="json">{payload}</pre></td></tr>"##,
                seq = event.sequence,
                commit = event.commit_sequence,
                thread_href = path_segment(event.thread_id.as_str()),
                thread = escape(event.thread_id.as_str()),
                run_href = path_segment(event.run_id.as_str()),
                run = escape(event.run_id.as_str()),
                kind = escape(&event.kind),
                payload = escape(&serde_json::to_string(&event.payload).unwrap_or_default()),
            );
        }
        body.push_str("</tbody></table>\n");
    }
    let mut links = Vec::new();
    if query.from.is_some() {
        links.push(format!(
            "<a href=\"{}\">first page</a>",
            escape(&query.href(None))
        ));
    }
    if let Some(last) = events.last()
        && events.len() as u64 >= query.limit
    {
        links.push(format!(
            "<a href=\"{}\" rel=\"next\">next page →</a>",
            escape(&query.href(Some(last.sequence)))
        ));
    }
    if !links.is_empty() {
        let _ = writeln!(body, "<p class=\"paging\">{}</p>", links.join(" · "));
    }
    body
}

/// A page that says what went wrong.
pub fn error_page(status: u16, message: &str) -> String {
    // A page refused for want of the token (a console started with --allow-remote): the
    // script fills the token in from the start line's `#token=` URL and loads it again.
    let marker = if status == 401 {
        "<p id=\"needs-token\" class=\"meta\">Open the URL the console printed on stderr at start (it ends in <code>#token=…</code>), or paste the token in the box above and reload.</p>\n"
    } else {
        ""
    };
    format!(
        "<h1>{status}</h1>\n<p class=\"error\" role=\"alert\">{}</p>\n{marker}<p><a href=\"/pending\">back to pending</a></p>\n",
        escape(message)
    )
}
