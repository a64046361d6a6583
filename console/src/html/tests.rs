//! Unit tests of the console's HTML pages: escaping, timelines, pager and page contents.

use runcore_traces::SpanStatus;

use super::*;

#[test]
fn escaping_leaves_no_markup() {
    assert_eq!(
        escape(r#"<script>alert("x")</script> & 'y'"#),
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
    );
}

#[test]
fn path_segments_encode_slashes() {
    assert_eq!(path_segment("thread-1/run-1"), "thread-1%2Frun-1");
    assert_eq!(path_segment("a b?c#d"), "a%20b%3Fc%23d");
    assert_eq!(path_segment("é"), "%C3%A9");
}

fn span(id: &str, parent: Option<&str>, name: &str, start_ms: u64, end_ms: u64) -> Span {
    let mut attributes = runcore_traces::Attributes::new();
    attributes.insert("runcore.run.id".into(), "<r>".into());
    Span {
        trace_id: "t".into(),
        span_id: id.into(),
        parent_span_id: parent.map(str::to_owned),
        name: name.into(),
        kind: runcore_traces::SpanKind::Internal,
        start_ms,
        end_ms,
        attributes,
        events: Vec::new(),
        status: SpanStatus::Error {
            message: "<boom>".into(),
        },
    }
}

#[test]
fn timelines_escape_names_and_take_any_times() {
    let spans = [
        span("a", None, "invoke_agent", 0, u64::MAX),
        span("b", Some("a"), "<chat>", u64::MAX - 1, u64::MAX),
        span("c", Some("a"), "execute_tool x", 5, 5),
    ];
    let html = timelines(&spans, 0);
    assert!(html.contains("&lt;chat&gt;"), "{html}");
    assert!(!html.contains("<chat>"), "{html}");
    assert!(html.contains("run <code>&lt;r&gt;</code>"), "{html}");
    assert_eq!(html.matches("<rect").count(), 3);
    assert!(timelines(&[], 0).is_empty());
}

#[test]
fn thinking_shows_as_text_without_its_signature() {
    let answer: runcore::Message = serde_json::from_value(serde_json::json!({
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me <check>.", "signature": "SIG-opaque-123"},
            {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
            {"type": "text", "text": "Done."}
        ],
        "stop_reason": "stop"
    }))
    .expect("a message");
    let view = ThreadView {
        thread_id: runcore::ThreadId::new("t"),
        version: 1,
        messages: vec![runcore::Message::user("hi"), answer],
        context_start: 0,
        summary: None,
        runs: Vec::new(),
        tickets: Vec::new(),
        claim: None,
        forked_from: None,
    };
    let page = PageInfo::of(crate::page::PageQuery::default(), 2, 0);
    let html = thread_page(&view, &page, &Vec::new(), &[], &[], 0);
    assert!(html.contains("Let me &lt;check&gt;."), "{html}");
    assert!(
        html.contains("<div class=\"label\">thinking</div>"),
        "{html}"
    );
    assert!(!html.contains("SIG-opaque-123"), "{html}");
    assert!(html.contains("redacted thinking (12 bytes"), "{html}");
    assert!(!html.contains("ZW5jcnlwdGVk"), "{html}");
}

#[test]
fn an_open_wait_runs_up_to_now() {
    // The run's span and its open wait end at the Awaiting commit (1,000); it is 61,000.
    let mut wait = span("w", Some("a"), "await deploy", 1_000, 1_000);
    wait.attributes
        .insert("runcore.await.open".into(), true.into());
    let chat = span("c", Some("a"), "chat", 0, 1_000);
    let spans = [span("a", None, "invoke_agent", 0, 1_000), chat, wait];
    let html = timelines(&spans, 61_000);
    let widths: Vec<u64> = html
        .match_indices("width=\"")
        .skip(1) // the svg's own width="100%"
        .filter_map(|(at, found)| {
            let rest = &html[at + found.len()..];
            rest[..rest.find('"')?].parse().ok()
        })
        .collect();
    // Before: the wait was a 2-unit sliver. Now it spans from its start to now: almost the
    // whole plot, as does the run; the chat ends at 1,000 of 61,000.
    let [run, chat, wait] = widths.as_slice() else {
        panic!("{widths:?} in {html}");
    };
    assert!(*wait > 500 && *run > 500, "{widths:?}");
    assert!(*chat < 20, "{widths:?}");
    assert!(html.contains("still waiting"), "{html}");
    assert!(html.contains(">1 min 1 s</text>"), "{html}");
}
