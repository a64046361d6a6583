//! The operator console's JSON API and pages (SPEC §12.5), over a store made by a scripted
//! session through `runcore drive --store`, with `runcore console` running for real: every
//! route; shapes equal to `show --json` / `pending --json` / `threads --json` / `events`; a
//! decision commits exactly one Running commit with the `permission_decided` draft; a bad
//! token, a run not awaiting, a malformed body → their status and the store unchanged; two
//! decisions at once for one ticket → exactly one commits; after an approval a `drive --store`
//! restart runs the approved call and finishes the run, after a denial the denied result is
//! paired and the run goes on. Against SQLite, and PostgreSQL (`RUNCORE_PG_URL`; under
//! `CI=true` its absence fails).

mod common;

use common::console::{
    Console, HOSTILE_ARGUMENT, cli_json_lines, config_file, encode, postgres_store,
    scripted_session,
};
use common::process::{Drive, TempDir, causes, first, kinds, model_text, runcore, show_json};
use serde_json::{Value, json};

/// Everything a write could change: each thread's `show --json` and every event.
fn store_state(url: &str) -> Value {
    json!({
        "alpha": show_json(url, "alpha"),
        "beta": show_json(url, "beta"),
        "gamma": show_json(url, "gamma"),
        "events": cli_json_lines(&["events"], url),
    })
}

fn check_reads(console: &Console, url: &str) {
    assert_eq!(
        console.get_json("/api/threads"),
        cli_json_lines(&["threads"], url)
    );
    // A thread's API is one page of `show --json` (these threads fit in one), with "page".
    for thread in ["alpha", "beta", "gamma"] {
        let mut page = console.get_json(&format!("/api/threads/{thread}"));
        let info = page.as_object_mut().and_then(|o| o.remove("page"));
        let show = show_json(url, thread);
        assert_eq!(page, show, "{thread}");
        let total = show["messages"].as_array().map_or(0, Vec::len);
        let runs = show["runs"].as_array().map_or(0, Vec::len);
        assert_eq!(
            info,
            Some(
                json!({"from":0,"limit":200,"total":total,"previous":null,"next":null,
                "runs_total":runs})
            ),
            "{thread}"
        );
    }
    // A thread the store knows nothing of is 404 (issue 43: it was 200 with an empty thread).
    let nope = console.get("/api/threads/nope");
    assert_eq!(nope.status, 404, "{}", nope.body);
    assert_eq!(nope.json()["kind"], "not_found");
    assert!(
        nope.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"nope\""))
    );
    let page = console.get("/threads/nope");
    assert_eq!(page.status, 404);
    assert!(
        page.body.contains("no commit and no live claim"),
        "{}",
        page.body
    );
    let pending = console.get_json("/api/pending");
    assert_eq!(pending, cli_json_lines(&["pending"], url));
    let runs: Vec<&str> = pending
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ["alpha/run-2", "beta/run-1"]);

    // Events: everything, a thread, a run (a `/` in a query value), and pages.
    assert_eq!(
        console.get_json("/api/events?limit=1000"),
        cli_json_lines(&["events"], url)
    );
    assert_eq!(
        console.get_json("/api/events?thread=beta"),
        cli_json_lines(&["events", "--thread", "beta"], url)
    );
    assert_eq!(
        console.get_json("/api/events?run=alpha%2Frun-1&from=1&limit=2"),
        cli_json_lines(
            &[
                "events",
                "--run",
                "alpha/run-1",
                "--from",
                "1",
                "--limit",
                "2"
            ],
            url
        )
    );
    let all = console.get_json("/api/events?limit=1000");
    let first_page = console.get_json("/api/events?limit=3");
    let last = first_page[2]["sequence"].as_u64().unwrap();
    let second_page = console.get_json(&format!("/api/events?from={last}&limit=3"));
    assert_eq!(
        first_page.as_array().unwrap()[..],
        all.as_array().unwrap()[..3]
    );
    assert_eq!(
        second_page.as_array().unwrap()[..],
        all.as_array().unwrap()[3..6]
    );
    for bad in [
        "/api/events?thread=a&run=b",
        "/api/events?from=x",
        "/api/events?limit=-1",
        "/api/threads/alpha?from=x",
        "/api/threads/alpha?limit=-1",
    ] {
        assert_eq!(console.get(bad).status, 400, "{bad}");
    }

    // Pages: 200, HTML, every hostile text escaped, the approval with its tool and arguments.
    for path in [
        "/",
        "/threads/alpha",
        "/threads/beta",
        "/pending",
        "/events",
        "/events?thread=alpha&limit=2",
    ] {
        let page = console.get(path);
        assert_eq!(page.status, 200, "{path}");
        assert_eq!(
            page.header("content-type"),
            Some("text/html; charset=utf-8")
        );
        assert!(
            page.header("content-security-policy")
                .is_some_and(|c| c.contains("script-src 'self'"))
        );
        assert!(
            !page.body.contains("<script>window"),
            "{path} runs a message"
        );
        assert!(
            !page.body.contains("<img src=x"),
            "{path} renders an argument"
        );
        assert!(!page.body.contains("s3cret"), "{path} shows a secret");
    }
    let thread = console.get("/threads/alpha").body;
    assert!(
        thread.contains(
            "Deploy &lt;script&gt;window.HACKED=1&lt;/script&gt; now &amp; &quot;quote&quot;"
        ),
        "{thread}"
    );
    assert!(thread.contains("model context starts here (context_start = 0)"));
    assert!(thread.contains("run <code>alpha/run-1</code> starts"));
    assert!(thread.contains("ended: natural_end"));
    // The weather call beside its executed result.
    assert!(thread.contains("call <b>weather</b>"));
    assert!(thread.contains("outcome-executed"));
    assert!(thread.contains("18 C, sunny"));
    // The thread list (issue 43): the threads waiting for a person first, a search, pages.
    let list = console.get("/").body;
    let waiting = list
        .split(r#"<table class="list threads" id="waiting">"#)
        .nth(1)
        .and_then(|rest| rest.split("</table>").next())
        .unwrap_or_default();
    assert!(
        waiting.contains(">alpha</a>") && waiting.contains(">beta</a>"),
        "{list}"
    );
    assert!(!waiting.contains(">gamma</a>"), "{list}");
    assert!(list.contains("3 threads"), "{list}");
    let found = console.get("/?q=AMM").body;
    assert!(
        found.contains("1 threads matching <code>AMM</code>"),
        "{found}"
    );
    assert!(
        found.contains(">gamma</a>") && !found.contains(">alpha</a>"),
        "{found}"
    );
    let none = console.get("/?q=zzz").body;
    assert!(none.contains("No thread id contains"), "{none}");
    let later = console.get("/?after=alpha").body;
    let all = later.split(r#"id="threads""#).nth(1).unwrap_or_default();
    assert!(
        !all.contains(">alpha</a>") && all.contains(">beta</a>"),
        "{later}"
    );
    assert!(later.contains("first page"), "{later}");
    // The events table shows the agent's clock of an event as a time (issue 43: raw now_ms
    // in the payload only).
    let events = console.get("/events?thread=alpha").body;
    assert!(events.contains("<th>When</th>"), "{events}");
    assert!(
        events.contains(r#"<td data-label="When"><time datetime=""#),
        "{events}"
    );
    let pending = console.get("/pending").body;
    assert!(pending.contains("tool <b class=\"tool-name\">deploy</b>"));
    assert!(
        pending.contains("&lt;img src=x onerror=\\&quot;window.HACKED=2\\&quot;&gt;"),
        "{pending}"
    );
    assert!(pending.contains("/runs/alpha%2Frun-2/decision"));
    assert_eq!(console.get("/console.js").status, 200);
    assert_eq!(console.get("/console.css").status, 200);
    assert_eq!(console.get("/api/nothing-here").status, 404);
}

fn check_refused_writes(console: &Console, url: &str) {
    let before = store_state(url);
    let run = encode("alpha/run-2");
    let path = format!("/api/runs/{run}/decision");
    let allow = br#"{"decision":"allow"}"#;
    // No token, a wrong one, a token in another scheme.
    let wrong = format!("Bearer {}x", console.token);
    let basic = format!("Basic {}", console.token);
    for headers in [
        vec![],
        vec![("Authorization", wrong.as_str())],
        vec![("Authorization", basic.as_str())],
    ] {
        let response = console.post(&path, &headers, allow);
        assert_eq!(response.status, 401, "{headers:?}");
        assert_eq!(response.json()["kind"], "unauthorized");
    }
    // The form with a wrong token.
    let response = console.post(
        &format!("/runs/{run}/decision"),
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"decision=allow&token=nope",
    );
    assert_eq!(response.status, 401);
    // Malformed bodies.
    for body in [
        "",
        "not json",
        r#"{"decision":"maybe"}"#,
        r#"{"decision":"allow","note":3}"#,
        r#"{"decision":"allow","extra":true}"#,
        r#"["allow"]"#,
    ] {
        let response = console.decide("alpha/run-2", body);
        assert_eq!(response.status, 400, "{body:?}: {}", response.body);
        assert_eq!(response.json()["kind"], "invalid_json");
    }
    // Runs that do not await a permission.
    for run in ["gamma/run-1", "no/such-run"] {
        let response = console.decide(run, r#"{"decision":"allow"}"#);
        assert_eq!(response.status, 409, "{run}");
        assert_eq!(
            response.json(),
            json!({"kind":"resume","message":"resume rejected: no run is waiting on a resume ticket",
                   "resume_error":"not_waiting"})
        );
    }
    assert_eq!(
        store_state(url),
        before,
        "a refused write changed the store"
    );
}

/// The events of `run` after the first `before` of them.
fn new_events(url: &str, run: &str, before: usize) -> Vec<Value> {
    let events = cli_json_lines(&["events", "--run", run], url);
    events.as_array().unwrap()[before..].to_vec()
}

fn check_decisions(console: &Console, url: &str) {
    // Allow alpha's deploy through the API.
    let before = show_json(url, "alpha");
    let events_before = cli_json_lines(&["events", "--run", "alpha/run-2"], url)
        .as_array()
        .unwrap()
        .len();
    let response = console.decide("alpha/run-2", r#"{"decision":"allow","note":"go ahead"}"#);
    assert_eq!(response.status, 200, "{}", response.body);
    let version = before["version"].as_u64().unwrap() + 1;
    assert_eq!(
        response.json(),
        json!({"thread_id":"alpha","version":version})
    );
    let after = show_json(url, "alpha");
    assert_eq!(after["version"], version, "exactly one commit");
    assert_eq!(
        after["messages"], before["messages"],
        "the decision appends no message"
    );
    assert_eq!(after["tickets"], json!([]));
    assert_eq!(after["runs"][1]["state"], json!({"type":"running"}));
    let new = new_events(url, "alpha/run-2", events_before);
    let new_kinds: Vec<&str> = new.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        new_kinds,
        [
            "run_state_changed",
            "permission_decided",
            "decided_by",
            "commit_clock"
        ],
        "{new:?}"
    );
    assert!(
        new.iter()
            .all(|e| e["commit_sequence"] == new[0]["commit_sequence"])
    );
    assert_eq!(new[0]["payload"]["state"], json!({"type":"running"}));
    assert_eq!(new[1]["payload"]["call_id"], "call-d");
    assert_eq!(new[1]["payload"]["decision"], "allow");
    assert_eq!(new[1]["payload"]["note"], "go ahead");
    // Who answered: the console's claim owner.
    assert_eq!(new[2]["payload"]["call_id"], "call-d");
    assert!(
        new[2]["payload"]["owner"]
            .as_str()
            .is_some_and(|o| o.starts_with("console:")),
        "{new:?}"
    );
    // Answered once: a second decision finds no ticket.
    let again = console.decide("alpha/run-2", r#"{"decision":"deny"}"#);
    assert_eq!(again.status, 409);
    assert_eq!(again.json()["resume_error"], "not_waiting");
    assert_eq!(show_json(url, "alpha")["version"], version);

    // Deny beta's deploy through the page's form.
    let beta_version = show_json(url, "beta")["version"].as_u64().unwrap();
    let form = format!(
        "decision=deny&reason=not+on+a+Friday&token={}",
        console.token
    );
    let response = console.post(
        &format!("/runs/{}/decision", encode("beta/run-1")),
        &[("Content-Type", "application/x-www-form-urlencoded")],
        form.as_bytes(),
    );
    assert_eq!(response.status, 303, "{}", response.body);
    let location = response.header("location").unwrap();
    assert_eq!(
        location,
        format!(
            "/pending?answered=beta%2Frun-1&decision=deny&version={}",
            beta_version + 1
        )
    );
    let page = console.get(location).body;
    assert!(page.contains("Run beta/run-1 denied"), "{page}");
    assert!(page.contains("No run is waiting for a person."));
    let decided = new_events(url, "beta/run-1", 0);
    let decided = decided
        .iter()
        .find(|e| e["kind"] == "permission_decided")
        .unwrap();
    assert_eq!(decided["payload"]["decision"], "deny");
    assert_eq!(decided["payload"]["reason"], "not on a Friday");
    assert_eq!(console.get_json("/api/pending"), json!([]));
}

/// After the approval a `drive --store` restart executes the approved call and finishes the
/// run; after the denial the denied result is paired and the run goes on.
fn check_restarts(url: &str, dir: &TempDir) {
    let config = config_file(dir, "alpha");
    let mut alpha = Drive::spawn(&["--store", url, "--config", &config]);
    let tools = first(&alpha.start, "execute_tools").clone();
    assert_eq!(tools["run_id"], "alpha/run-2");
    assert_eq!(tools["calls"][0]["id"], "call-d");
    assert_eq!(tools["calls"][0]["name"], "deploy");
    assert_eq!(tools["calls"][0]["arguments"]["note"], HOSTILE_ARGUMENT);
    let out = alpha.send(
        json!({"type":"tool_done","run_id":"alpha/run-2","call_id":"call-d",
                                "content":"deployed"}),
    );
    let out = alpha.send(model_text(first(&out, "call_model"), "Deployed."));
    assert_eq!(causes(&out), ["natural_end"]);
    assert!(alpha.finish().0.success());
    let shown = show_json(url, "alpha");
    assert_eq!(
        shown["runs"][1]["state"],
        json!({"type":"ended","cause":{"type":"natural_end"}})
    );
    let result = &shown["messages"].as_array().unwrap()[6];
    assert_eq!(
        (result["call_id"].as_str(), result["outcome"].as_str()),
        (Some("call-d"), Some("executed"))
    );

    let config = config_file(dir, "beta");
    let mut beta = Drive::spawn(&["--store", url, "--config", &config]);
    assert!(
        !kinds(&beta.start).contains(&"execute_tools".to_owned()),
        "{:?}",
        beta.start
    );
    let call = first(&beta.start, "call_model").clone();
    let messages = call["messages"].as_array().unwrap();
    let denied = messages.last().unwrap();
    assert_eq!(denied["role"], "tool_result");
    assert_eq!(denied["call_id"], "call-b");
    assert_eq!(denied["outcome"], "denied");
    assert!(
        denied["content"].to_string().contains("not on a Friday"),
        "{denied}"
    );
    let out = beta.send(model_text(&call, "I did not deploy."));
    assert_eq!(causes(&out), ["natural_end"]);
    assert!(beta.finish().0.success());
}

/// `console_url` is `url`, or the same store with a password the pages must never show.
fn every_route(url: &str, console_url: &str, dir: &TempDir) {
    scripted_session(url, dir);
    let console = Console::start(console_url);
    if console_url.contains("s3cret") {
        assert!(!console.start_line.contains("s3cret"));
        let page = console.get("/").body;
        assert!(page.contains(":***@"), "{page}");
    }
    check_reads(&console, url);
    check_refused_writes(&console, url);
    check_decisions(&console, url);
    console.stop();
    check_restarts(url, dir);
}

#[test]
fn every_route_over_a_sqlite_store() {
    let dir = TempDir::new("console-sqlite");
    let url = dir.sqlite("runs.db");
    every_route(&url, &url, &dir);
}

#[test]
fn every_route_over_a_postgres_store() {
    let Some(url) = postgres_store("routes") else {
        return;
    };
    let dir = TempDir::new("console-postgres");
    // The test server trusts loopback connections, so a password in the URL is accepted (and
    // ignored): the console gets one, and must never show it.
    let with_password = url.replacen("://runcore@", "://runcore:s3cret@", 1);
    assert_ne!(
        with_password, url,
        "RUNCORE_PG_URL names the user runcore: {url}"
    );
    every_route(&url, &with_password, &dir);
}

/// Two consoles (two processes) on one store, each sent a decision for the same ticket at
/// the same time: exactly one commits; the other gets 409 and writes nothing.
fn two_decisions_at_once(url: &str, dir: &TempDir) {
    scripted_session(url, dir);
    let version = show_json(url, "beta")["version"].as_u64().unwrap();
    let events = cli_json_lines(&["events"], url).as_array().unwrap().len();
    let consoles = [Console::start(url), Console::start(url)];
    let barrier = std::sync::Barrier::new(2);
    let statuses: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = consoles
            .iter()
            .zip([
                r#"{"decision":"allow"}"#,
                r#"{"decision":"deny","reason":"no"}"#,
            ])
            .map(|(console, body)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let response = console.decide("beta/run-1", body);
                    (response.status, response.json())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut codes: Vec<u16> = statuses.iter().map(|(s, _)| *s).collect();
    codes.sort_unstable();
    assert_eq!(codes, [200, 409], "{statuses:?}");
    let (_, loser) = statuses.iter().find(|(s, _)| *s == 409).unwrap();
    // The loser met the winner's claim (claim_held), or came after it and found the ticket
    // answered (not_waiting), or was fenced by the version.
    let why = loser["resume_error"]
        .as_str()
        .or(loser["reason"].as_str())
        .or(loser["kind"].as_str());
    assert!(
        matches!(
            why,
            Some(
                "claim_held"
                    | "not_waiting"
                    | "version_conflict"
                    | "payload_mismatch"
                    | "ordinal_conflict"
            )
        ),
        "{loser}"
    );
    assert_eq!(show_json(url, "beta")["version"], version + 1);
    let decided: Vec<Value> = cli_json_lines(&["events"], url).as_array().unwrap()[events..]
        .iter()
        .filter(|e| e["kind"] == "permission_decided")
        .cloned()
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    for console in consoles {
        console.stop();
    }
}

#[test]
fn two_decisions_at_once_commit_once_on_sqlite() {
    let dir = TempDir::new("console-race-sqlite");
    two_decisions_at_once(&dir.sqlite("runs.db"), &dir);
}

#[test]
fn two_decisions_at_once_commit_once_on_postgres() {
    let Some(url) = postgres_store("race") else {
        return;
    };
    let dir = TempDir::new("console-race-postgres");
    two_decisions_at_once(&url, &dir);
}

#[test]
fn approve_and_deny_on_the_command_line() {
    let dir = TempDir::new("console-cli");
    let url = dir.sqlite("runs.db");
    scripted_session(&url, &dir);
    let version = show_json(&url, "alpha")["version"].as_u64().unwrap();
    let output = runcore(&["approve", "alpha/run-2", "--store", &url, "--note", "ok"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(line, json!({"thread_id":"alpha","version":version + 1}));
    // Not awaiting any more: exit 1, the §10 error on stderr, nothing written.
    let before = store_state(&url);
    for args in [
        &["approve", "alpha/run-2"][..],
        &["deny", "gamma/run-1", "--reason", "no"][..],
        &["deny", "no/such-run"][..],
    ] {
        let mut full = args.to_vec();
        full.extend(["--store", &url]);
        let output = runcore(&full);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(output.stdout.is_empty());
        let error: Value = serde_json::from_slice(&output.stderr).expect("one JSON line");
        assert_eq!(
            (error["kind"].as_str(), error["resume_error"].as_str()),
            (Some("resume"), Some("not_waiting"))
        );
    }
    assert_eq!(store_state(&url), before);
    let output = runcore(&["deny", "beta/run-1", "--store", &url, "--reason", "later"]);
    assert!(output.status.success());
    // Usage errors and a missing store: exit 2, nothing created.
    for args in [
        &["approve", "--store", url.as_str()][..],
        &["approve", "x/run-1"][..],
        &[
            "approve",
            "x/run-1",
            "--store",
            url.as_str(),
            "--reason",
            "r",
        ][..],
        &["deny", "x/run-1", "--store", "sqlite:/nonexistent-dir/x.db"][..],
    ] {
        assert_eq!(runcore(args).status.code(), Some(2), "{args:?}");
    }
    let missing = dir.sqlite("missing.db");
    assert_eq!(
        runcore(&["approve", "x/run-1", "--store", &missing])
            .status
            .code(),
        Some(2)
    );
    assert!(!dir.join("missing.db").exists());
}

#[test]
fn the_console_refuses_remote_addresses_and_hides_secrets() {
    let dir = TempDir::new("console-security");
    let url = dir.sqlite("runs.db");
    scripted_session(&url, &dir);
    for listen in ["0.0.0.0:0", "192.0.2.1:8420"] {
        let output = runcore(&["console", "--store", &url, "--listen", listen]);
        assert_eq!(output.status.code(), Some(2), "{listen}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--allow-remote"), "{stderr}");
        assert!(output.stdout.is_empty());
    }
    assert_eq!(
        runcore(&["console", "--store", &url, "--listen", "nope"])
            .status
            .code(),
        Some(2)
    );
    let console = Console::start(&url);
    assert!(console.start_line.starts_with("console: http://127.0.0.1:"));
    assert_eq!(console.token.len(), 64);
    let other = Console::start(&url);
    assert_ne!(console.token, other.token, "a fresh token per start");
    other.stop();
    let page = console.get("/").body;
    assert!(page.contains(&url), "the page names the store");
    // Only loopback names in Host (a rebound DNS name is refused), reads and writes alike.
    let port = console.addr.rsplit(':').next().unwrap().to_owned();
    for host in [
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        console.addr.clone(),
    ] {
        let response = common::console::request(
            &console.addr,
            "GET",
            "/api/threads",
            &[("Host", &host)],
            b"",
        );
        assert_eq!(response.status, 200, "{host}");
    }
    let before = store_state(&url);
    let evil = format!("evil.example:{port}");
    let response = common::console::request(
        &console.addr,
        "GET",
        "/api/pending",
        &[("Host", &evil)],
        b"",
    );
    assert_eq!(response.status, 403);
    assert_eq!(response.json()["kind"], "forbidden_host");
    let auth = format!("Bearer {}", console.token);
    let response = common::console::request(
        &console.addr,
        "POST",
        "/api/runs/alpha%2Frun-2/decision",
        &[("Host", &evil), ("Authorization", &auth)],
        br#"{"decision":"allow"}"#,
    );
    assert_eq!(response.status, 403);
    assert_eq!(store_state(&url), before);
    console.stop();
}

/// A thread a live owner holds: the console answers 409 `claim_held` and `runcore approve`
/// exits 4, both naming the owner, and nothing is written.
#[test]
fn a_thread_held_by_a_live_owner_is_refused_and_nothing_is_written() {
    let dir = TempDir::new("console-held");
    let url = dir.sqlite("runs.db");
    scripted_session(&url, &dir);
    // A worker takes the thread and keeps it (a long lease; it is still running).
    let worker = Drive::spawn(&[
        "--store",
        &url,
        "--thread",
        "beta",
        "--owner",
        "live-worker",
        "--lease-ms",
        "60000",
    ]);
    let before = store_state(&url);
    let console = Console::start(&url);
    let response = console.decide("beta/run-1", r#"{"decision":"allow"}"#);
    assert_eq!(response.status, 409);
    let body = response.json();
    assert_eq!(body["kind"], "claim_held", "{body}");
    assert_eq!(body["owner"], "live-worker", "{body}");
    let output = runcore(&["approve", "beta/run-1", "--store", &url]);
    assert_eq!(output.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("live-worker"), "{stderr}");
    assert_eq!(store_state(&url), before, "nothing written");
    console.stop();
    worker.kill();
}

// ----- a large thread: every page bounded (issue 42) -------------------------------------------

/// A model that answers every step but the last with 1 KB of text and one `echo` call.
struct Long {
    steps: u32,
}

impl runcore::host::script::Script for Long {
    fn model(&mut self, request: &runcore::ModelRequest<'_>) -> runcore::host::script::ModelTurn {
        use runcore::{AssistantBlock, AssistantMessage, StopReason};
        if request.step >= self.steps {
            return runcore::host::script::ModelTurn::answer(AssistantMessage::text("done"));
        }
        let call = AssistantBlock::tool_call(
            format!("call-{}", request.step),
            "echo",
            serde_json::json!({"n": request.step}),
        );
        runcore::host::script::ModelTurn::answer(AssistantMessage::new(
            vec![AssistantBlock::text("x".repeat(1000)), call],
            StopReason::ToolUse,
        ))
    }

    fn tool(&mut self, _run: &runcore::RunId, call: &runcore::ToolCall) -> runcore::ToolOutput {
        runcore::ToolOutput::text(call.id.clone(), "y".repeat(100))
    }
}

/// Thread `big` in SQLite: a run of `steps` model steps (1 KB answers), then `imports`
/// imports of a question and its answer.
fn large_thread(path: &std::path::Path, steps: u32, imports: u32) {
    use runcore::store::CommitLog;
    let mut store = runcore_sqlite::SqliteStore::open(
        path,
        runcore_sqlite::SqliteOptions::default()
            .with_synchronous(runcore_sqlite::Synchronous::Normal),
    )
    .expect("open");
    let config = runcore::AgentConfig {
        max_steps: steps + 10,
        ..runcore::AgentConfig::for_thread("big")
    };
    let mut agent = runcore::Agent::new(config).expect("config");
    let mut sink = |_: &runcore::Agent, output: &runcore::Output| match output {
        runcore::Output::Commit(commit) => store
            .commit_operation(commit.as_ref().clone().into_operation())
            .map(drop),
        _ => Ok(()),
    };
    agent
        .prompt(runcore::UserMessage::text("go"), 1_000)
        .expect("prompt");
    let stop = runcore::host::script::serve(&mut agent, &mut Long { steps }, &mut sink);
    assert!(
        matches!(stop, Ok(runcore::host::script::Stop::Idle)),
        "{stop:?}"
    );
    for n in 0..imports {
        let messages = vec![
            runcore::Message::user(format!("imported question {n}")),
            runcore::Message::Assistant(std::sync::Arc::new(runcore::AssistantMessage::text(
                format!("imported answer {n}"),
            ))),
        ];
        agent
            .import(messages, 2_000 + u64::from(n))
            .expect("import");
        while let Some(output) = agent.poll() {
            sink(&agent, &output).expect("stored");
        }
    }
}

#[test]
fn every_page_of_a_large_thread_is_bounded_and_the_pages_hold_every_message() {
    const STEPS: u32 = 1_500;
    const IMPORTS: u32 = 600;
    let dir = TempDir::new("console-large");
    large_thread(&dir.join("runs.db"), STEPS, IMPORTS);
    let url = dir.sqlite("runs.db");
    let console = Console::start(&url);
    let show = show_json(&url, "big");
    let total = show["messages"].as_array().map_or(0, Vec::len);
    // The prompt, an answer and a result per step but the last, then two per import.
    assert_eq!(total, 1 + 2 * STEPS as usize - 1 + 2 * IMPORTS as usize);
    let whole = show.to_string().len();
    assert!(whole > 1_500_000, "the thread is large: {whole} bytes");

    // The API: the latest page by default; following "previous" from there, and "next"
    // from 0, gives every message once, in order, each page at most 200 messages.
    let latest = console.get("/api/threads/big");
    assert_eq!(latest.status, 200);
    assert!(latest.body.len() < 400_000, "{} bytes", latest.body.len());
    let latest = latest.json();
    assert_eq!(latest["page"]["from"], total - 200);
    assert_eq!(latest["page"]["next"], Value::Null);
    assert_eq!(latest["page"]["runs_total"], 1 + IMPORTS);
    // Only the runs of the page: its 100 imports.
    assert_eq!(latest["runs"].as_array().map(Vec::len), Some(100));
    let mut messages: Vec<Value> = Vec::new();
    let mut from = Some(0u64);
    let mut pages = 0;
    while let Some(at) = from {
        let page = console.get(&format!("/api/threads/big?from={at}&limit=500"));
        assert_eq!(page.status, 200);
        assert!(
            page.body.len() < 800_000,
            "page {at}: {} bytes",
            page.body.len()
        );
        let page = page.json();
        let got = page["messages"].as_array().expect("messages");
        assert!(got.len() <= 500);
        messages.extend(got.iter().cloned());
        from = page["page"]["next"].as_u64();
        pages += 1;
    }
    assert_eq!(pages, total.div_ceil(500));
    assert_eq!(Value::Array(messages), show["messages"]);
    // A limit past the maximum is the maximum.
    let capped = console.get_json("/api/threads/big?from=0&limit=100000");
    assert_eq!(capped["messages"].as_array().map(Vec::len), Some(1000));

    // The page: bounded wherever it is (before: the whole thread, every span, in one page).
    for path in [
        "/threads/big".to_owned(),
        "/threads/big?from=0".to_owned(),
        format!("/threads/big?from={}", total / 2),
        "/threads/big?from=0&limit=1000".to_owned(),
    ] {
        let page = console.get(&path);
        assert_eq!(page.status, 200, "{path}");
        assert!(
            page.body.len() < 1_000_000,
            "{path}: {} bytes",
            page.body.len()
        );
    }
    let first = console.get("/threads/big?from=0").body;
    assert!(first.contains("messages 0–199 of"), "{}", &first[..2_000]);
    assert!(first.contains("rel=\"next\""));
    assert!(first.contains("run <code>big/run-1</code> starts"));
    // The long run's timeline is drawn in part, and says so.
    assert!(first.contains("more spans of this run are not drawn"));
    let last = console.get("/threads/big").body;
    assert!(last.contains("rel=\"prev\""));
    assert!(!last.contains("rel=\"next\""));
    // An import's run starts where its messages do.
    assert!(
        last.contains(&format!("run <code>big/run-{}</code> starts", IMPORTS + 1)),
        "the last import's marker"
    );
    console.stop();
}
