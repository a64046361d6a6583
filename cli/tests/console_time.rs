//! The console shows time and causality (issue 35), and is hardened:
//! - a thread's page draws each run's timeline (model calls, tool calls, waits as bars on one
//!   time axis, from the spans of SPEC §14), lists who-decided-what (decision, time, note or
//!   reason), shows times as `<time>` (UTC and "… ago", raw ms on hover), the live claim,
//!   the real context start with the compaction summary, and marks an expired ticket with
//!   what answering it does;
//! - the threads page has a claim column;
//! - a note or reason over 4 KiB is a 400 in the JSON error shape and nothing is written;
//!   every `/api` error (404, 405, 413 included) has the JSON error shape;
//! - with `--allow-remote` a warning goes to stderr and every request (reads too) needs the
//!   token (`Authorization: Bearer` or the page script's cookie); the two static files do not.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::console::{Console, encode, request, scripted_session, time_session};
use common::process::{Drive, RUNCORE, TempDir, show_json};
use serde_json::json;

#[test]
fn the_thread_page_shows_the_timeline_decisions_times_claims_and_context() {
    let dir = TempDir::new("console-time");
    let url = time_session(&dir);
    let console = Console::start(&url);

    let page = console.get("/threads/alpha").body;
    assert!(page.contains("<h2>Timeline</h2>"), "{page}");
    assert!(page.contains("<svg"), "{page}");
    for bar in [
        "<title>chat: ",
        "<title>execute_tool weather: 1000–1500 ms (500 ms)",
        "<title>await deploy: ",
    ] {
        assert!(page.contains(bar), "missing {bar:?} in {page}");
    }
    assert!(page.contains("<h2>Decisions</h2>"), "{page}");
    assert!(
        page.contains(r#"<span class="badge allow">allow</span>"#),
        "{page}"
    );
    assert!(page.contains("go ahead"), "{page}");
    // Durations read as people say them (issue 43: "waited 141599 ms"); raw ms on hover.
    assert!(page.contains("(waited "), "{page}");
    assert!(
        !regex_like_raw_wait(&page),
        "a wait of a second or more is not raw ms: {page}"
    );
    assert!(
        page.contains("<td data-label=\"By\"><code>console:"),
        "{page}"
    );
    assert!(
        page.contains("<time datetime=\"1970-01-01T00:00:02.000Z\" data-ms=\"2000\""),
        "{page}"
    );
    assert!(page.contains(" ago</time>"), "{page}");
    assert!(
        page.contains(r#"<span class="claim free">free</span>"#),
        "{page}"
    );

    // The real context start, with the summary that stands for what is before it.
    let gamma = show_json(&url, "gamma");
    assert_eq!(gamma["context_start"], 2);
    let page = console.get("/threads/gamma").body;
    assert!(
        page.contains("model context starts here (context_start = 2)"),
        "{page}"
    );
    assert!(page.contains("They said hello."), "{page}");

    // An expired ticket says so, and what answering it does.
    let page = console.get("/threads/delta").body;
    assert!(
        page.contains(r#"<span class="badge expired">expired</span>"#),
        "{page}"
    );
    assert!(page.contains("answering now is refused"), "{page}");
    // Its Approve and Deny are disabled (issue 43: they stayed enabled and answered 409).
    assert!(
        page.contains(r#"<button type="submit" class="approve" disabled title="the deadline has passed">Approve</button>"#),
        "{page}"
    );
    assert!(
        page.contains(r#"<button type="submit" class="deny" disabled title="the deadline has passed">Deny</button>"#),
        "{page}"
    );
    let pending = console.get("/pending").body;
    assert!(pending.contains("badge expired"), "{pending}");
    let answer = console.decide("delta/run-1", r#"{"decision":"allow"}"#);
    assert_eq!(answer.status, 409, "{}", answer.body);
    assert_eq!(answer.json()["resume_error"], "expired");

    // The threads page: a claim column, and a live claim while a driver holds the thread.
    let page = console.get("/").body;
    assert!(page.contains("<th>Claim</th>"), "{page}");
    let holder = Drive::spawn(&["--store", &url, "--thread", "gamma", "--owner", "worker-7"]);
    let page = console.get("/").body;
    assert!(page.contains("held by <code>worker-7</code>"), "{page}");
    let page = console.get("/threads/gamma").body;
    assert!(page.contains("held by <code>worker-7</code>"), "{page}");
    assert!(holder.finish().0.success());
    console.stop();
}

#[test]
fn long_notes_and_every_api_error_have_the_json_shape() {
    let dir = TempDir::new("console-errors");
    let url = dir.sqlite("runs.db");
    scripted_session(&url, &dir);
    let console = Console::start(&url);
    let version = show_json(&url, "beta")["version"].clone();

    let long = "x".repeat(4097);
    let body = json!({"decision":"deny","reason":long}).to_string();
    let response = console.decide("beta/run-1", &body);
    assert_eq!(response.status, 400, "{}", response.body);
    assert_eq!(response.json()["kind"], "invalid_body");
    assert!(
        response.json()["message"]
            .as_str()
            .unwrap()
            .contains("4097 bytes")
    );
    assert_eq!(
        show_json(&url, "beta")["version"],
        version,
        "nothing written"
    );
    // The form says the same on a page, and writes nothing either.
    let form = format!(
        "decision=allow&note={}&token={}",
        "y".repeat(5000),
        console.token
    );
    let response = console.post(
        &format!("/runs/{}/decision", encode("beta/run-1")),
        &[("Content-Type", "application/x-www-form-urlencoded")],
        form.as_bytes(),
    );
    assert_eq!(response.status, 400, "{}", response.body);
    assert_eq!(
        show_json(&url, "beta")["version"],
        version,
        "nothing written"
    );
    // Exactly 4 KiB is taken.
    let fits = json!({"decision":"deny","reason":"z".repeat(4096)}).to_string();
    assert_eq!(console.decide("beta/run-1", &fits).status, 200);

    let auth = format!("Bearer {}", console.token);
    let huge = vec![b' '; 3 * 1024 * 1024];
    let cases: Vec<(u16, &str, crate::common::console::Response)> = vec![
        (404, "not_found", console.get("/api/nothing-here")),
        (
            405,
            "method_not_allowed",
            console.post("/api/threads", &[], b""),
        ),
        (
            413,
            "payload_too_large",
            console.post(
                &format!("/api/runs/{}/decision", encode("alpha/run-2")),
                &[
                    ("Authorization", &auth),
                    ("Content-Type", "application/json"),
                ],
                &huge,
            ),
        ),
        (400, "invalid_query", console.get("/api/events?from=x")),
        (
            401,
            "unauthorized",
            console.post(
                &format!("/api/runs/{}/decision", encode("alpha/run-2")),
                &[],
                b"{}",
            ),
        ),
    ];
    for (status, kind, response) in cases {
        assert_eq!(response.status, status, "{}", response.body);
        assert_eq!(
            response.header("content-type"),
            Some("application/json"),
            "{status}"
        );
        let error = response.json();
        assert_eq!(error["kind"], kind, "{error}");
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{error}"
        );
    }
    console.stop();
}

#[test]
fn allow_remote_warns_and_every_request_needs_the_token() {
    let dir = TempDir::new("console-remote");
    let url = dir.sqlite("runs.db");
    scripted_session(&url, &dir);

    // The warning, on stderr, before the start line.
    let mut child = Command::new(RUNCORE)
        .args([
            "console",
            "--store",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--allow-remote",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stderr.take().expect("stderr"))
        .read_line(&mut line)
        .expect("a stderr line");
    assert!(line.contains("warning: --allow-remote"), "{line}");
    assert!(
        line.contains("every request, reads too, needs the token"),
        "{line}"
    );
    let _ = child.kill();
    let _ = child.wait();

    let console = Console::start_with(&url, &["--allow-remote"]);
    let auth = format!("Bearer {}", console.token);
    let cookie = format!("runcore_token={}", console.token);
    for path in [
        "/api/threads",
        "/api/pending",
        "/api/events",
        "/api/threads/alpha",
    ] {
        let refused = console.get(path);
        assert_eq!(refused.status, 401, "{path}: {}", refused.body);
        assert_eq!(refused.json()["kind"], "unauthorized");
        let wrong = request(
            &console.addr,
            "GET",
            path,
            &[("Authorization", "Bearer nope")],
            b"",
        );
        assert_eq!(wrong.status, 401, "{path}");
        let ok = request(&console.addr, "GET", path, &[("Authorization", &auth)], b"");
        assert_eq!(ok.status, 200, "{path}: {}", ok.body);
    }
    for path in ["/", "/threads/alpha", "/pending", "/events"] {
        let refused = console.get(path);
        assert_eq!(refused.status, 401, "{path}");
        assert!(
            refused.body.contains("id=\"needs-token\""),
            "{}",
            refused.body
        );
        let ok = request(&console.addr, "GET", path, &[("Cookie", &cookie)], b"");
        assert_eq!(ok.status, 200, "{path}: {}", ok.body);
    }
    // The static files hold no data: the script is what turns #token= into the cookie.
    assert_eq!(console.get("/console.js").status, 200);
    assert_eq!(console.get("/console.css").status, 200);
    // A cookie alone never writes: the API's writes need the Authorization header.
    let response = console.post(
        &format!("/api/runs/{}/decision", encode("beta/run-1")),
        &[("Cookie", &cookie), ("Content-Type", "application/json")],
        br#"{"decision":"allow"}"#,
    );
    assert_eq!(response.status, 401, "{}", response.body);
    console.stop();

    // Without --allow-remote, reads stay open (SPEC §12.5).
    let console = Console::start(&url);
    assert_eq!(console.get("/api/threads").status, 200);
    assert_eq!(console.get("/").status, 200);
    console.stop();
}

/// Whether `page` shows a wait of 1,000 ms or more in raw milliseconds (`(waited 1234 ms)`).
fn regex_like_raw_wait(page: &str) -> bool {
    page.match_indices("(waited ").any(|(at, found)| {
        let rest = &page[at + found.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.len() >= 4 && rest[digits.len()..].starts_with(" ms)")
    })
}
