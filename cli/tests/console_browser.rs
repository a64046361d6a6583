//! The operator console in a real browser: Debian's headless Chromium, driven through
//! chromedriver (WebDriver) with fantoccini. It opens the console over a store made by the
//! scripted session, sees the pending approval with its tool and arguments, clicks Approve,
//! and sees the run move on (the open page refreshes by itself when a worker finishes the
//! run); a message and a tool argument carrying markup render as text and run nothing. A
//! second session shows time and causality as a person sees it: the run timeline drawn as an
//! SVG with a bar per span, times in the reader's local time with "… ago" (raw ms on hover),
//! the decisions table, the compaction marker, a live claim appearing on an open page, and an
//! expired ticket saying what answering it does. A screenshot of each page is saved under the
//! target directory (`target/tmp/console-screenshots/`); `thread-docs.png`, a thread driven
//! with wall-clock times, is docs/console.png.
//!
//! Needs `chromium` and `chromedriver` (Debian: `apt-get install chromium chromium-driver`).
//! Without them the test prints that it was skipped, except under `CI=true`, where it fails.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::console::{
    Console, HOSTILE_ARGUMENT, HOSTILE_TEXT, config_file, in_ci, scripted_session, time_session,
};
use common::process::{Drive, TempDir, causes, first, model_text};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// The first of `names` found on PATH or in /usr/bin and /usr/lib/chromium.
fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.extend([
        PathBuf::from("/usr/bin"),
        PathBuf::from("/usr/lib/chromium"),
    ]);
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// A running chromedriver, killed when dropped.
struct Chromedriver {
    child: Child,
    port: u16,
}

impl Chromedriver {
    fn start(program: &Path) -> Chromedriver {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(program)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen in 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Chromedriver { child, port }
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn screenshots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&dir).expect("create the screenshot directory");
    dir
}

async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let path = screenshots_dir().join(format!("{name}.png"));
    std::fs::write(&path, png).expect("save the screenshot");
    println!("screenshot: {}", path.display());
}

/// Waits up to 20 s for `script` (a function body returning a boolean) to return true.
async fn wait_for(client: &Client, what: &str, script: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let value = client.execute(script, vec![]).await.expect("run a script");
        if value == Value::Bool(true) {
            return;
        }
        assert!(Instant::now() < deadline, "waited 20 s for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn text_of(client: &Client, css: &str) -> String {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("find {css}: {e}"))
        .text()
        .await
        .expect("its text")
}

/// Nothing from the store ran: only our own script is on the page, and the hostile
/// texts' side effects never happened.
async fn assert_nothing_ran(client: &Client) {
    let ran = client
        .execute(
            "return [window.HACKED === undefined, document.scripts.length, \
             document.querySelectorAll('#main script, #main img').length];",
            vec![],
        )
        .await
        .expect("inspect the page");
    assert_eq!(ran, json!([true, 1, 0]), "a stored text ran as markup");
}

/// Chromium driven through a fresh chromedriver, or `None` (the test skips) when either is
/// missing outside CI.
async fn browser(dir: &TempDir) -> Option<(Chromedriver, Client)> {
    let (Some(chromium), Some(driver)) = (
        find_program(&["chromium", "chromium-browser"]),
        find_program(&["chromedriver"]),
    ) else {
        assert!(
            !in_ci(),
            "chromium and chromedriver are not installed and CI=true: the browser test must \
             run in CI (apt-get install chromium chromium-driver)"
        );
        println!("skipped: chromium or chromedriver is not installed");
        return None;
    };
    let chromedriver = Chromedriver::start(&driver);
    let profile = dir.join("chromium-profile");
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync",
                     "--window-size=1280,900",
                     format!("--user-data-dir={}", profile.display())],
        }),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{}", chromedriver.port))
        .await
        .expect("a WebDriver session with chromium");
    Some((chromedriver, client))
}

#[tokio::test]
async fn a_person_approves_in_a_real_browser() {
    let dir = TempDir::new("console-browser");
    let url = dir.sqlite("runs.db");
    let Some((chromedriver, client)) = browser(&dir).await else {
        return;
    };
    scripted_session(&url, &dir);
    let console = Console::start(&url);
    let base = console.base();

    // The thread list; the token comes in the address's fragment (never sent to the server).
    client
        .goto(&format!("{base}/#token={}", console.token))
        .await
        .expect("open the console");
    assert_eq!(text_of(&client, "h1").await, "Threads");
    let rows = text_of(&client, "table#threads tbody").await;
    for expected in ["alpha", "beta", "gamma", "awaiting", "ended: natural_end"] {
        assert!(rows.contains(expected), "{expected} in {rows}");
    }
    // The threads waiting for a person come first (issue 43: they sank under the rest).
    let waiting = text_of(&client, "table#waiting tbody").await;
    assert!(
        waiting.contains("alpha") && waiting.contains("beta") && !waiting.contains("gamma"),
        "{waiting}"
    );
    let current = client.current_url().await.expect("url");
    assert_eq!(current.fragment(), None, "the token leaves the address bar");
    screenshot(&client, "threads").await;

    // The transcript: the hostile message is text, the tool call beside its result.
    client
        .goto(&format!("{base}/threads/alpha"))
        .await
        .expect("thread");
    let transcript = text_of(&client, "ol.transcript").await;
    assert!(transcript.contains(HOSTILE_TEXT), "{transcript}");
    assert!(transcript.contains("model context starts here"));
    assert!(transcript.contains("18 C, sunny"));
    assert_nothing_ran(&client).await;
    screenshot(&client, "transcript").await;

    // Pending: the approval with its tool and arguments.
    client
        .goto(&format!("{base}/pending"))
        .await
        .expect("pending");
    let card = r#"section.ticket[data-run="alpha/run-2"]"#;
    assert_eq!(
        text_of(&client, &format!("{card} .tool-name")).await,
        "deploy"
    );
    let arguments = text_of(&client, &format!("{card} .arguments")).await;
    let parsed: Value = serde_json::from_str(&arguments).expect("the arguments as JSON");
    assert_eq!(
        parsed,
        json!({"target":"production","note":HOSTILE_ARGUMENT})
    );
    assert_nothing_ran(&client).await;
    let token_box = client
        .find(Locator::Id("token-box"))
        .await
        .expect("the token box");
    assert_eq!(
        token_box.prop("value").await.expect("value").as_deref(),
        Some(console.token.as_str())
    );
    screenshot(&client, "pending").await;
    // The same page on a phone.
    client.set_window_size(390, 844).await.expect("resize");
    screenshot(&client, "pending-phone").await;
    client.set_window_size(1280, 900).await.expect("resize");

    // Approve, with a note.
    client
        .find(Locator::Css(&format!("{card} input[name=note]")))
        .await
        .expect("the note field")
        .send_keys("looks right")
        .await
        .expect("type a note");
    client
        .find(Locator::Css(&format!("{card} button.approve")))
        .await
        .expect("the Approve button")
        .click()
        .await
        .expect("click Approve");
    wait_for(
        &client,
        "the answered notice",
        "const n = document.querySelector('.notice'); \
         return !!n && n.textContent.includes('alpha/run-2 approved');",
    )
    .await;
    let left = client
        .find_all(Locator::Css(card))
        .await
        .expect("find cards");
    assert!(left.is_empty(), "the answered ticket is gone");
    assert_eq!(
        client
            .find_all(Locator::Css("section.ticket"))
            .await
            .expect("cards")
            .len(),
        1,
        "beta still waits"
    );
    screenshot(&client, "approved").await;

    // The run moved on: Running with its call ready; a worker's restart runs it, and the
    // open thread page shows the end without a reload.
    client
        .goto(&format!("{base}/threads/alpha"))
        .await
        .expect("thread");
    let runs = text_of(&client, "table#runs").await;
    assert!(
        runs.contains("alpha/run-2") && runs.contains("running"),
        "{runs}"
    );
    let config = config_file(&dir, "alpha");
    let mut worker = Drive::spawn(&["--store", &url, "--config", &config]);
    let tools = first(&worker.start, "execute_tools").clone();
    assert_eq!(tools["calls"][0]["name"], "deploy");
    let out = worker.send(
        json!({"type":"tool_done","run_id":"alpha/run-2","call_id":"call-d",
                                 "content":"deployed"}),
    );
    let out = worker.send(model_text(first(&out, "call_model"), "Deployed."));
    assert_eq!(causes(&out), ["natural_end"]);
    assert!(worker.finish().0.success());
    wait_for(
        &client,
        "the page to refresh to the run's end",
        "const t = document.querySelector('table#runs'); \
         return !!t && !t.textContent.includes('running') && \
                document.querySelector('ol.transcript').textContent.includes('deployed');",
    )
    .await;
    assert_nothing_ran(&client).await;
    screenshot(&client, "transcript-after").await;

    // The audit events, paged.
    client
        .goto(&format!("{base}/events?limit=5"))
        .await
        .expect("events");
    let events = client
        .find_all(Locator::Css("table.events tbody tr"))
        .await
        .expect("rows");
    assert_eq!(events.len(), 5);
    client
        .find(Locator::Css("a[rel=next]"))
        .await
        .expect("a next page")
        .click()
        .await
        .expect("click next");
    wait_for(
        &client,
        "the second page",
        "return location.search.includes('from=5');",
    )
    .await;
    screenshot(&client, "events").await;

    client.close().await.expect("close the session");
    drop(chromedriver);
    console.stop();
}

#[tokio::test]
async fn time_and_causality_in_a_real_browser() {
    let dir = TempDir::new("console-browser-time");
    let Some((chromedriver, client)) = browser(&dir).await else {
        return;
    };
    let url = time_session(&dir);
    let console = Console::start(&url);
    let base = console.base();
    client
        .goto(&format!("{base}/#token={}", console.token))
        .await
        .expect("open the console");

    // The timeline: one figure per run, an SVG bar per span, each bar drawn with a width and
    // named in its tooltip.
    client
        .goto(&format!("{base}/threads/alpha"))
        .await
        .expect("thread");
    let figures = client
        .find_all(Locator::Css("figure.timeline svg"))
        .await
        .expect("timelines");
    assert_eq!(figures.len(), 2, "alpha has two runs");
    let bars = client
        .execute(
            "return Array.from(document.querySelectorAll('figure.timeline svg g')).map(function (g) { \
               var r = g.querySelector('rect').getBoundingClientRect(); \
               return [g.querySelector('title').textContent, r.width > 0 && r.height > 0]; });",
            vec![],
        )
        .await
        .expect("read the bars");
    let bars: Vec<(String, bool)> = serde_json::from_value(bars).expect("bars");
    assert!(
        bars.iter().all(|(_, drawn)| *drawn),
        "every bar is drawn: {bars:?}"
    );
    for name in [
        "chat: ",
        "execute_tool weather: 1000–1500 ms (500 ms)",
        "await deploy: ",
    ] {
        assert!(
            bars.iter().any(|(title, _)| title.starts_with(name)),
            "no bar {name:?} in {bars:?}"
        );
    }

    // Readable times: the page shows local time and "… ago", the raw ms on hover.
    wait_for(
        &client,
        "times in local time",
        "var t = document.querySelectorAll('time[datetime]'); \
         return t.length > 0 && Array.from(t).every(function (e) { return e.dataset.local === '1'; });",
    )
    .await;
    let times = client
        .execute(
            "return Array.from(document.querySelectorAll('time[datetime]')).map(function (e) { \
               return [e.textContent, e.title]; });",
            vec![],
        )
        .await
        .expect("read the times");
    let times: Vec<(String, String)> = serde_json::from_value(times).expect("times");
    for (text, title) in &times {
        assert!(title.ends_with(" ms since the Unix epoch"), "{title}");
        assert!(!text.contains("UTC"), "shown in local time: {text}");
    }
    assert!(
        times.iter().any(|(text, _)| text.contains(" ago")),
        "{times:?}"
    );

    // Who decided what: the decisions table.
    let decisions = text_of(&client, "table.decisions tbody").await;
    for expected in ["deploy", "allow", "console:", "go ahead"] {
        assert!(decisions.contains(expected), "{expected} in {decisions}");
    }
    screenshot(&client, "thread-timeline").await;

    // The compaction marker: where the model's context starts, with the summary.
    client
        .goto(&format!("{base}/threads/gamma"))
        .await
        .expect("thread");
    let marker = text_of(&client, "li.marker.context").await;
    assert!(
        marker.contains("model context starts here (context_start = 2)")
            && marker.contains("They said hello."),
        "{marker}"
    );
    // A live claim appears on the open page (it refreshes by itself) and goes when released.
    let holder = Drive::spawn(&["--store", &url, "--thread", "gamma", "--owner", "worker-7"]);
    wait_for(
        &client,
        "the live claim",
        "return document.getElementById('main').textContent.includes('held by worker-7');",
    )
    .await;
    screenshot(&client, "thread-claimed").await;
    assert!(holder.finish().0.success());
    wait_for(
        &client,
        "the claim released",
        "return !document.getElementById('main').textContent.includes('held by worker-7');",
    )
    .await;

    // An expired ticket says so, and what answering it does, on the thread and pending pages.
    client
        .goto(&format!("{base}/threads/delta"))
        .await
        .expect("thread");
    // A thread page says which window of the transcript it shows (issue 42: paged).
    let pager = text_of(&client, "nav.pager").await;
    assert!(pager.starts_with("messages 0–"), "{pager}");
    assert_eq!(text_of(&client, ".badge.expired").await, "expired");
    let main = text_of(&client, "#main").await;
    assert!(main.contains("answering now is refused"), "{main}");
    screenshot(&client, "thread-expired").await;
    client
        .goto(&format!("{base}/pending"))
        .await
        .expect("pending");
    let card = text_of(&client, r#"section.ticket[data-run="delta/run-1"]"#).await;
    assert!(card.contains("expired"), "{card}");
    // Its buttons cannot be clicked (issue 43: they stayed enabled and answered 409).
    for button in ["approve", "deny"] {
        let disabled = client
            .find(Locator::Css(&format!(
                r#"section.ticket[data-run="delta/run-1"] button.{button}"#
            )))
            .await
            .expect("the button")
            .attr("disabled")
            .await
            .expect("its attribute");
        assert!(disabled.is_some(), "{button} is disabled");
    }
    assert_nothing_ran(&client).await;

    // The README's picture: a thread driven with wall-clock times (a tool call, an approval
    // given in the console, the approved call, the answer).
    docs_thread(&dir, &url, &console);
    client
        .goto(&format!("{base}/threads/support-42"))
        .await
        .expect("thread");
    let figures = client
        .find_all(Locator::Css("figure.timeline svg"))
        .await
        .expect("timelines");
    assert_eq!(figures.len(), 1);
    let decisions = text_of(&client, "table.decisions tbody").await;
    assert!(decisions.contains("Friday deploys are fine"), "{decisions}");
    screenshot(&client, "thread-docs").await;

    client.close().await.expect("close the session");
    drop(chromedriver);
    console.stop();
}

/// Thread `support-42`, with times from the wall clock: a weather call, a deploy approved in
/// the console a few seconds after it was asked for, the deploy, the answer.
fn docs_thread(dir: &TempDir, url: &str, console: &Console) {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    };
    let base = now().saturating_sub(9_000);
    let config = config_file(dir, "support-42");
    let mut host = Drive::spawn(&["--store", url, "--config", &config]);
    let out = host.send(json!({"type":"prompt","now_ms":base,
        "text":"Check the weather in Paris, then deploy the site"}));
    let call = first(&out, "call_model").clone();
    let out = host.send(
        json!({"type":"model_done","run_id":call["run_id"],"step":call["step"],
        "now_ms":base + 1_400,
        "message":{"role":"assistant","model":"claude-sonnet-4-5","content":[
            {"type":"tool_call","id":"call-w","name":"weather","arguments":{"city":"Paris"}}],
            "stop_reason":"tool_use"}}),
    );
    let tools = first(&out, "execute_tools").clone();
    let out = host.send(
        json!({"type":"tool_done","run_id":tools["run_id"],"call_id":"call-w",
        "content":"18 C, sunny","now_ms":base + 2_300}),
    );
    let call = first(&out, "call_model").clone();
    host.send(
        json!({"type":"model_done","run_id":call["run_id"],"step":call["step"],
        "now_ms":base + 3_500,
        "message":{"role":"assistant","model":"claude-sonnet-4-5","content":[
            {"type":"text","text":"Sunny in Paris. Deploying."},
            {"type":"tool_call","id":"call-d","name":"deploy","arguments":{"target":"production"}}],
            "stop_reason":"tool_use"}}),
    );
    assert!(host.finish().0.success());

    let answer = console.decide(
        "support-42/run-1",
        r#"{"decision":"allow","note":"Friday deploys are fine"}"#,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);

    let mut worker = Drive::spawn(&["--store", url, "--config", &config]);
    let tools = first(&worker.start, "execute_tools").clone();
    assert_eq!(tools["calls"][0]["name"], "deploy");
    let decided = now();
    let out = worker.send(json!({"type":"tool_done","run_id":"support-42/run-1",
        "call_id":"call-d","content":"deployed","now_ms":decided + 2_600}));
    let call = first(&out, "call_model").clone();
    let out = worker.send(
        json!({"type":"model_done","run_id":call["run_id"],"step":call["step"],
        "now_ms":decided + 3_700,
        "message":{"role":"assistant","model":"claude-sonnet-4-5",
            "content":[{"type":"text","text":"Deployed; it is 18 C and sunny in Paris."}],
            "stop_reason":"stop"}}),
    );
    assert_eq!(causes(&out), ["natural_end"]);
    assert!(worker.finish().0.success());
}
