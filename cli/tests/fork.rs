//! `runcore fork` (SPEC §8.10, §12.6) over a SQLite store made by `runcore drive --store`: the
//! fork's line, `show` naming the parent, refusals that write nothing, and a fork that goes on
//! exactly as its parent did.

mod common;

use common::process::{Drive, TempDir, first, model_text, model_tool, prompt, runcore, show_json};
use serde_json::{Value, json};

fn fork(url: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["fork"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--store", url]);
    let output = runcore(&all);
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn fork_from_the_command_line() {
    let dir = TempDir::new("fork");
    let url = format!("sqlite:{}", dir.join("store.db").display());
    // main: v1 prompt, v2 answer; v3 prompt, v4 the call (open), v5 its result, v6 the answer.
    let mut main = Drive::spawn(&["--store", &url, "--thread", "main"]);
    let out = main.send(prompt("Hi", 1_000));
    main.send(model_text(first(&out, "call_model"), "Hello."));
    let out = main.send(prompt("Read a.txt", 2_000));
    let out = main.send(model_tool(first(&out, "call_model"), "c1", "read"));
    let tools = first(&out, "execute_tools").clone();
    let out = main.send(
        json!({"type":"tool_done","run_id":tools["run_id"],"call_id":"c1",
                                "content":"hello"}),
    );
    main.send(model_text(first(&out, "call_model"), "It says hello."));
    assert!(main.finish().0.success());
    let parent = show_json(&url, "main");
    assert_eq!(parent["version"], 6);
    assert_eq!(parent["forked_from"], Value::Null);

    // Refused, each with the §10 error on stderr, exit 1, nothing written.
    for (args, needle) in [
        (
            vec!["main", "--at", "4", "--to", "f"],
            "tool call c1 has no result",
        ),
        (vec!["main", "--at", "7", "--to", "f"], "version 7"),
        (vec!["main", "--at", "0", "--to", "f"], "version 0"),
        (vec!["nobody", "--at", "1", "--to", "f"], "no commits"),
        (vec!["main", "--at", "2", "--to", "main"], "differ"),
    ] {
        let (code, stdout, stderr) = fork(&url, &args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        let error: Value = serde_json::from_str(stderr.trim()).expect("one JSON line");
        assert_eq!(error["kind"], "invalid_input", "{args:?}");
        assert!(
            error["message"].as_str().unwrap().contains(needle),
            "{args:?}: {error}"
        );
        assert_eq!(
            show_json(&url, "f")["version"],
            0,
            "{args:?}: nothing written"
        );
    }
    assert_eq!(show_json(&url, "main"), parent, "the parent is unchanged");

    // Forked at version 3 (the second prompt committed, its call not yet made).
    let (code, stdout, stderr) = fork(&url, &["main", "--at", "3", "--to", "f"]);
    assert_eq!(code, 0, "{stderr}");
    common::snapshot!("fork_line", stdout.clone());
    let line: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        line,
        json!({"thread_id":"f","version":1,"forked_from":{"thread_id":"main","version":3}})
    );
    let forked = show_json(&url, "f");
    assert_eq!(
        forked["forked_from"],
        json!({"thread_id":"main","version":3})
    );
    assert_eq!(
        forked["messages"],
        json!(parent["messages"].as_array().unwrap()[..3])
    );
    let text = runcore(&["show", "f", "--store", &url]);
    common::snapshot!("show_fork", String::from_utf8_lossy(&text.stdout));
    // Onto a thread that exists now: refused.
    let (code, _, stderr) = fork(&url, &["main", "--at", "2", "--to", "f"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("already exists"), "{stderr}");
    assert_eq!(show_json(&url, "main"), parent, "the parent is unchanged");

    // The console links the fork and its parent both ways.
    let console = common::console::Console::start(&url);
    let fork_page = console.get("/threads/f");
    assert_eq!(fork_page.status, 200);
    assert!(
        fork_page
            .body
            .contains(r#"forked from <a href="/threads/main">main</a> at version 3"#),
        "{}",
        fork_page.body
    );
    let parent_page = console.get("/threads/main");
    assert!(
        parent_page
            .body
            .contains(r#"forks: <a href="/threads/f">f</a> (at version 3)"#),
        "{}",
        parent_page.body
    );
    assert_eq!(
        console.get_json("/api/threads/f")["forked_from"],
        json!({"thread_id":"main","version":3})
    );
    console.stop();

    // The fork goes on as the parent did: continue, the same answers, the same messages.
    let mut f = Drive::spawn(&["--store", &url, "--thread", "f"]);
    let out = f.send(json!({"type":"continue"}));
    let out = f.send(model_tool(first(&out, "call_model"), "c1", "read"));
    let tools = first(&out, "execute_tools").clone();
    let out = f.send(
        json!({"type":"tool_done","run_id":tools["run_id"],"call_id":"c1",
                             "content":"hello"}),
    );
    f.send(model_text(first(&out, "call_model"), "It says hello."));
    assert!(f.finish().0.success());
    assert_eq!(show_json(&url, "f")["messages"], parent["messages"]);
}
