//! The thread page's span views: one SVG timeline per run and the table of permission
//! decisions, both drawn from the spans derived from the thread's commits.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use runcore_traces::{AttributeValue, Span, SpanStatus};

use super::{css_class, escape};
use crate::time::time_html;

fn string_attribute<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    match span.attributes.get(key) {
        Some(AttributeValue::String(value)) => Some(value),
        _ => None,
    }
}

/// Width of a timeline's drawing, in SVG units; the labels take the first `LABEL_WIDTH`.
const TIMELINE_WIDTH: u64 = 760;
const LABEL_WIDTH: u64 = 190;
const ROW_HEIGHT: u64 = 20;

/// One timeline per run: its model calls, tool calls and waits as bars on one time axis
/// (server-rendered SVG), from the spans derived from its commits. Each bar's tooltip gives
/// the span's times in raw ms.
pub(super) fn timelines(spans: &[Span], now_ms: u64) -> String {
    let mut out = String::new();
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_none())
        .collect();
    if roots.is_empty() {
        return out;
    }
    out.push_str("<h2>Timeline</h2>\n");
    // Each run's children, in one pass (not one scan of every span per run).
    let mut children_of: BTreeMap<&str, Vec<&Span>> = BTreeMap::new();
    for span in spans {
        if let Some(parent) = span.parent_span_id.as_deref() {
            children_of.entry(parent).or_default().push(span);
        }
    }
    for root in roots {
        let mut children = children_of
            .remove(root.span_id.as_str())
            .unwrap_or_default();
        // A bounded drawing: the first rows, and how many were left out.
        let left_out = children
            .len()
            .saturating_sub(crate::page::TIMELINE_ROWS.saturating_sub(1));
        children.truncate(crate::page::TIMELINE_ROWS.saturating_sub(1));
        let start = root.start_ms;
        // A wait still open runs up to now (issue 43: it was a 0 ms sliver at its start); the
        // run's axis reaches it. Spans are derived from commits alone, so this is the page's.
        let open = |span: &Span| {
            span.attributes.get("runcore.await.open") == Some(&AttributeValue::Bool(true))
        };
        let end_of = |span: &Span| {
            if open(span) {
                span.end_ms.max(now_ms)
            } else {
                span.end_ms
            }
        };
        let run_end = children
            .iter()
            .map(|span| end_of(span))
            .fold(root.end_ms, u64::max);
        let total = run_end.saturating_sub(start).max(1);
        let plot = TIMELINE_WIDTH - LABEL_WIDTH - 10;
        // In u128: a span of any length (committed times are host data) cannot overflow.
        let x = |ms: u64| {
            let offset = u128::from(ms.saturating_sub(start).min(total));
            let scaled = offset * u128::from(plot) / u128::from(total);
            LABEL_WIDTH + u64::try_from(scaled).unwrap_or(plot)
        };
        let rows = children.len() as u64 + 1;
        let height = (rows + 1) * ROW_HEIGHT;
        let run_id = string_attribute(root, "runcore.run.id").unwrap_or("");
        let _ = write!(
            out,
            r#"<figure class="timeline"><figcaption>run <code>{run}</code> · started {started} · {took}</figcaption><svg viewBox="0 0 {TIMELINE_WIDTH} {height}" width="100%" role="img" aria-label="timeline of run {run}">"#,
            run = escape(run_id),
            started = time_html(start, now_ms),
            took = crate::time::duration(total),
        );
        let all = std::iter::once(root).chain(children.iter().copied());
        for (row, span) in all.enumerate() {
            let y = row as u64 * ROW_HEIGHT + 4;
            let left = x(span.start_ms);
            let end = if row == 0 { run_end } else { end_of(span) };
            let width = x(end).saturating_sub(left).max(2);
            let op = string_attribute(span, "gen_ai.operation.name").unwrap_or("");
            let mut class = match op {
                "chat" => "bar chat",
                "execute_tool" => "bar tool",
                "await" => "bar await",
                _ => "bar run",
            }
            .to_owned();
            if matches!(span.status, SpanStatus::Error { .. }) {
                class.push_str(" error");
            }
            let mut note = String::new();
            if let Some(decision) = string_attribute(span, "runcore.decision") {
                let _ = write!(note, " · {decision}");
            }
            if let Some(error) = string_attribute(span, "error.type") {
                let _ = write!(note, " · {error}");
            }
            if open(span) {
                note.push_str(" · still waiting");
            }
            let _ = write!(
                out,
                r#"<g class="{class}"><title>{name}: {from}–{to} ms ({took} ms){note}</title><text x="4" y="{ty}">{name}</text><rect x="{left}" y="{y}" width="{width}" height="{h}" rx="2"></rect></g>"#,
                name = escape(&span.name),
                from = span.start_ms,
                to = span.end_ms,
                took = span.end_ms.saturating_sub(span.start_ms),
                note = escape(&note),
                ty = y + ROW_HEIGHT - 8,
                h = ROW_HEIGHT - 6,
            );
        }
        let axis_y = rows * ROW_HEIGHT + 14;
        let more = if left_out > 0 {
            format!(
                r#"<figcaption class="meta">{left_out} more spans of this run are not drawn (<code>runcore trace</code> lists them all)</figcaption>"#
            )
        } else {
            String::new()
        };
        let _ = write!(
            out,
            r#"<text class="axis" x="{LABEL_WIDTH}" y="{axis_y}">0 ms</text><text class="axis end" x="{end}" y="{axis_y}">{took}</text></svg>{more}</figure>"#,
            end = TIMELINE_WIDTH - 10,
            took = crate::time::duration(total),
        );
        out.push('\n');
    }
    out
}

/// Every permission decision of the thread: the call, the decision, who answered (the claim
/// owner a person's door records in `decided_by`; a host's own `resume_ticket` records none),
/// when, and the note or reason.
pub(super) fn decisions(spans: &[Span]) -> String {
    let decided: Vec<&Span> = spans
        .iter()
        .filter(|s| {
            string_attribute(s, "runcore.await.reason") == Some("permission")
                && s.attributes.contains_key("runcore.decision")
        })
        .collect();
    if decided.is_empty() {
        return String::new();
    }
    let left_out = decided.len().saturating_sub(crate::page::MAX_DECISIONS);
    let mut out = String::from(
        "<h2>Decisions</h2>\n<table class=\"list decisions\"><thead><tr><th>Tool call</th><th>Decision</th><th>By</th><th>When</th><th>Note / reason</th></tr></thead><tbody>\n",
    );
    for span in decided.into_iter().take(crate::page::MAX_DECISIONS) {
        let decision = string_attribute(span, "runcore.decision").unwrap_or("");
        let text = string_attribute(span, "runcore.decision.note")
            .or_else(|| string_attribute(span, "runcore.decision.reason"))
            .unwrap_or("");
        let at = span.events.first().map_or(span.end_ms, |e| e.time_ms);
        let _ = writeln!(
            out,
            r#"<tr><td data-label="Tool call"><b>{tool}</b> <code>{call}</code></td><td data-label="Decision"><span class="badge {cls}">{decision}</span></td><td data-label="By">{by}</td><td data-label="When"><time datetime="{iso}" data-ms="{at}" title="{at} ms since the Unix epoch">{civil}</time> (waited {waited})</td><td data-label="Note / reason">{text}</td></tr>"#,
            tool = escape(string_attribute(span, "gen_ai.tool.name").unwrap_or("")),
            call = escape(string_attribute(span, "gen_ai.tool.call.id").unwrap_or("")),
            by = match string_attribute(span, "runcore.decision.by") {
                Some(owner) => format!("<code>{}</code>", escape(owner)),
                None => "the host (not recorded)".to_owned(),
            },
            cls = css_class(decision),
            decision = escape(decision),
            iso = crate::time::iso_utc(at),
            civil = crate::time::iso_utc(at)
                .replace('T', " ")
                .replace('Z', " UTC"),
            waited = crate::time::duration(span.end_ms.saturating_sub(span.start_ms)),
            text = escape(text),
        );
    }
    out.push_str("</tbody></table>\n");
    if left_out > 0 {
        let _ = writeln!(
            out,
            r#"<p class="meta">{left_out} more decisions of these runs are not listed.</p>"#
        );
    }
    out
}
