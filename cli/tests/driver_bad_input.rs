//! `runcore drive` on bad input, through the real binary and real pipes (SPEC §12, §10).
//!
//! Every test converses line by line: write one line, read until its `idle` arrives, only then
//! write the next, so a driver that did not flush per line would fail here (a read that waits
//! longer than [`READ_TIMEOUT`] fails the test instead of hanging it). Each bad line must give
//! exactly one `error` line (its `kind` is `invalid_json` or the §10 kind, its message says
//! what was wrong) and then its `idle`, and change nothing: the same session without the bad
//! lines writes the same lines. At EOF the process exits 0 with nothing on stderr.
//!
//! Also here: `--config FILE` against a first `config` line, the help and usage exits, and the
//! `delta` context mode against the full one.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

/// How long one read may wait for the driver before the test fails (no test waits on a hang).
const READ_TIMEOUT: Duration = Duration::from_secs(30);

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scenarios");

/// A running `runcore drive` and the conversation with it.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Option<JoinHandle<String>>,
    sent: u64,
}

impl Session {
    fn drive(extra_args: &[&str]) -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_runcore"))
            .arg("drive")
            .args(extra_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn runcore drive");
        let stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        assert!(line.ends_with('\n'), "every output line ends with \\n");
                        line.pop();
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Session {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr: Some(stderr),
            sent: 0,
        }
    }

    /// Writes one line and returns every line the driver wrote for it, its `idle` included
    /// (checked to be last, and numbered by the line).
    fn send(&mut self, line: &[u8]) -> Vec<String> {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line).expect("write a line");
        stdin.write_all(b"\n").expect("write the newline");
        stdin.flush().expect("flush stdin");
        self.sent += 1;
        let idle = idle_line(self.sent);
        // An idle line may carry `timeout_ms` when something is due (SPEC §12.1).
        let idle_with_timeout = format!("{},\"timeout_ms\":", idle.trim_end_matches('}'));
        let mut out = Vec::new();
        loop {
            let next = self
                .lines
                .recv_timeout(READ_TIMEOUT)
                .unwrap_or_else(|e| panic!("no idle for line {} ({e})", self.sent));
            let done = next == idle || next.starts_with(&idle_with_timeout);
            if !done {
                assert!(!next.contains(r#""type":"idle""#), "a stray idle: {next}");
            }
            out.push(next);
            if done {
                return out;
            }
        }
    }

    fn send_json(&mut self, value: Value) -> Vec<String> {
        self.send(value.to_string().as_bytes())
    }

    /// Closes stdin and checks the exit: status 0, nothing more on stdout, empty stderr.
    fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("wait for runcore drive");
        let rest: Vec<String> = self.lines.try_iter().collect();
        let stderr = self.stderr.take().expect("stderr").join().expect("stderr");
        assert!(status.success(), "exit status {status}");
        assert!(rest.is_empty(), "output after the last idle: {rest:?}");
        assert!(stderr.is_empty(), "stderr: {stderr}");
    }
}

/// The `idle` line of input line `n`, byte for byte.
fn idle_line(n: u64) -> String {
    format!(r#"{{"type":"idle","line":{n}}}"#)
}

fn parse(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

fn kind(value: &Value) -> &str {
    value["type"].as_str().unwrap_or("")
}

/// Asserts `out` is exactly `error` (of `kind`, message containing `hint`) then `idle`.
fn assert_rejected(out: &[String], line: u64, error_kind: &str, hint: &str) {
    assert_eq!(out.len(), 2, "one error, then idle: {out:?}");
    let error = parse(&out[0]);
    assert_eq!(kind(&error), "error", "{out:?}");
    assert_eq!(error["line"], line);
    assert_eq!(error["error"]["kind"], error_kind, "{out:?}");
    let message = error["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(hint),
        "the message {message:?} should mention {hint:?}"
    );
}

fn model_text(run: &str, step: u32, text: &str) -> Value {
    json!({"type":"model_done","run_id":run,"step":step,
           "message":{"role":"assistant","content":[{"type":"text","text":text}],"stop_reason":"stop"}})
}

fn model_calls(run: &str, step: u32, ids: &[&str]) -> Value {
    let calls: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type":"tool_call","id":id,"name":"lookup","arguments":{"q":id}}))
        .collect();
    json!({"type":"model_done","run_id":run,"step":step,
           "message":{"role":"assistant","content":calls,"stop_reason":"tool_use"}})
}

fn tool_done(run: &str, call: &str) -> Value {
    json!({"type":"tool_done","run_id":run,"call_id":call,"content":format!("result of {call}")})
}

const RUN1: &str = "thread-1/run-1";

/// A run with a tool batch of two calls and a queued steer; `None` marks where the bad lines of
/// a test go.
fn good_session() -> Vec<Option<Value>> {
    vec![
        Some(json!({"type":"prompt","text":"hello"})),
        Some(json!({"type":"steer","text":"keep me"})),
        None,
        Some(model_calls(RUN1, 1, &["call-1", "call-2"])),
        None,
        Some(tool_done(RUN1, "call-2")),
        None,
        Some(tool_done(RUN1, "call-1")),
        None,
        Some(model_text(RUN1, 2, "done")),
    ]
}

/// The good lines' outputs without `idle` lines (their numbers depend on the bad lines).
fn without_idle(out: Vec<String>) -> Vec<String> {
    out.into_iter()
        .filter(|l| !l.starts_with(r#"{"type":"idle""#))
        .collect()
}

/// Runs the good session with `bad` lines (bytes, kind, hint) at each `None` slot, checking
/// each bad line is rejected alone, and that the good lines write exactly what they write in a
/// session without bad lines.
fn check_bad_lines_change_nothing(bad: &[(&[u8], &str, &str)]) {
    let mut clean = Session::drive(&[]);
    let expected: Vec<Vec<String>> = good_session()
        .into_iter()
        .flatten()
        .map(|line| without_idle(clean.send_json(line)))
        .collect();
    clean.finish();

    let mut session = Session::drive(&[]);
    let mut good = Vec::new();
    for slot in good_session() {
        match slot {
            Some(line) => good.push(without_idle(session.send_json(line))),
            None => {
                for (bytes, error_kind, hint) in bad {
                    let out = session.send(bytes);
                    assert_rejected(&out, session.sent, error_kind, hint);
                }
            }
        }
    }
    assert_eq!(
        good, expected,
        "the bad lines changed what the good ones do"
    );
    // The queued steer survived every bad line and entered the second request.
    let last_call = parse(good[4].last().expect("call_model"));
    assert_eq!(kind(&last_call), "call_model");
    assert!(last_call["messages"].to_string().contains("keep me"));
    session.finish();
}

#[test]
fn lines_that_are_not_input_lines_are_invalid_json() {
    check_bad_lines_change_nothing(&[
        (b"not json", "invalid_json", "not valid JSON"),
        (b"{\"type\":\"prompt\",", "invalid_json", "not valid JSON"),
        (b"[1,2,3]", "invalid_json", "got an array"),
        (b"\"a string\"", "invalid_json", "got a string"),
        (b"42", "invalid_json", "got a number"),
        (b"null", "invalid_json", "got null"),
        (
            br#"{"type":"dance"}"#,
            "invalid_json",
            "unknown variant `dance`",
        ),
        (br#"{"text":"no type"}"#, "invalid_json", "no \"type\""),
        (
            br#"{"type":7}"#,
            "invalid_json",
            "\"type\" must be a string",
        ),
        (
            br#"{"type":"model_done","run_id":"thread-1/run-1","step":1}"#,
            "invalid_json",
            "missing field `message`",
        ),
        (
            br#"{"type":"steer"}"#,
            "invalid_json",
            "missing field `text`",
        ),
        (
            br#"{"type":"model_delta","run_id":"thread-1/run-1","step":"one","text":"x"}"#,
            "invalid_json",
            "invalid type",
        ),
        (
            br#"{"type":"tool_done","run_id":"thread-1/run-1","call_id":"call-1","content":7}"#,
            "invalid_json",
            "`content` must be a string or a list of content blocks",
        ),
        (
            br#"{"type":"abort","extra":true}"#,
            "invalid_json",
            "unknown field `extra`",
        ),
        // Lines split on \n only: a \r does not end a line.
        (
            b"{\"type\":\"abort\"}\r{\"type\":\"abort\"}",
            "invalid_json",
            "trailing characters",
        ),
        (b"", "invalid_json", "empty"),
        (b"   \t ", "invalid_json", "empty"),
        (b"\xff\xfe\x00garbage", "invalid_json", "UTF-8"),
        (
            b"{\"type\":\"steer\",\"text\":\"caf\xe9\"}",
            "invalid_json",
            "UTF-8",
        ),
    ]);
}

#[test]
fn misuse_gets_its_spec_kind_and_changes_nothing() {
    check_bad_lines_change_nothing(&[
        (
            br#"{"type":"model_done","run_id":"thread-1/run-9","step":1,"message":{"content":[],"stop_reason":"stop"}}"#,
            "unexpected_outcome",
            "thread-1/run-9",
        ),
        (
            br#"{"type":"model_delta","run_id":"thread-1/run-1","step":7,"text":"x"}"#,
            "unexpected_outcome",
            "step 7",
        ),
        (br#"{"type":"prompt","text":"again"}"#, "busy", "thread-1/run-1"),
        (br#"{"type":"cancel_wait"}"#, "invalid_state", "awaiting"),
        (br#"{"type":"expire_wait","now_ms":5}"#, "invalid_state", "awaiting"),
        (br#"{"type":"config","max_steps":3}"#, "invalid_state", "first prompt"),
        (
            br#"{"type":"resume_ticket","result":{"type":"continue"}}"#,
            "resume",
            "no run is waiting",
        ),
    ]);
}

#[test]
fn tool_outcomes_for_the_wrong_run_call_or_twice_are_rejected() {
    let mut s = Session::drive(&[]);
    s.send_json(json!({"type":"prompt","text":"hello"}));
    // A tool outcome while the model call is out.
    let out = s.send_json(tool_done(RUN1, "call-1"));
    assert_rejected(&out, 2, "unexpected_outcome", "tool_done");
    let out = s.send_json(model_calls(RUN1, 1, &["call-1", "call-2"]));
    assert_eq!(kind(&parse(&out[out.len() - 2])), "execute_tools");
    let out = s.send_json(tool_done("thread-1/run-2", "call-1"));
    assert_rejected(&out, 4, "unexpected_outcome", "thread-1/run-2");
    let out = s.send_json(tool_done(RUN1, "call-x"));
    assert_rejected(&out, 5, "unknown_call", "call-x");
    let out = s.send_json(tool_done(RUN1, ""));
    assert_rejected(&out, 6, "invalid_input", "empty");
    let out = s.send_json(model_text(RUN1, 1, "too late"));
    assert_rejected(&out, 7, "unexpected_outcome", "model_done");
    let out = s.send_json(tool_done(RUN1, "call-1"));
    assert_eq!(out.len(), 2, "tool_end, idle: {out:?}");
    let out = s.send_json(tool_done(RUN1, "call-1"));
    assert_rejected(&out, 9, "duplicate_outcome", "call-1");
    // The batch still completes.
    let out = s.send_json(tool_done(RUN1, "call-2"));
    let call = parse(&out[out.len() - 2]);
    assert_eq!((kind(&call), &call["step"]), ("call_model", &json!(2)));
    s.finish();
}

#[test]
fn input_after_the_run_ended() {
    let mut s = Session::drive(&[]);
    s.send_json(json!({"type":"prompt","text":"hello"}));
    let out = s.send_json(model_text(RUN1, 1, "bye"));
    assert!(out.iter().any(|l| l.contains(r#""type":"run_end""#)));
    let n = |s: &Session| s.sent + 1;
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            model_text(RUN1, 1, "again"),
            "unexpected_outcome",
            "no run is active",
        ),
        (
            json!({"type":"model_failed","run_id":RUN1,"step":1,"code":"x","message":"y"}),
            "unexpected_outcome",
            "no run is active",
        ),
        (
            tool_done(RUN1, "call-1"),
            "unexpected_outcome",
            "no run is active",
        ),
        (
            json!({"type":"tool_progress","run_id":RUN1,"call_id":"call-1","content":"50%"}),
            "unexpected_outcome",
            "no run is active",
        ),
        (
            json!({"type":"steer","text":"late"}),
            "not_accepting",
            "closed",
        ),
        (
            json!({"type":"follow_up","text":"late"}),
            "not_accepting",
            "closed",
        ),
        (json!({"type":"pause"}), "invalid_state", "no run is active"),
        (
            json!({"type":"stop","reason":"late"}),
            "invalid_state",
            "no run is active",
        ),
        (
            json!({"type":"abandon_tools"}),
            "invalid_state",
            "no run is active",
        ),
        (
            json!({"type":"cancel_wait"}),
            "invalid_state",
            "no run is active",
        ),
        (
            json!({"type":"resume_ticket","result":{"type":"input","text":"x"}}),
            "resume",
            "no run is waiting",
        ),
    ];
    for (line, error_kind, hint) in cases {
        let at = n(&s);
        let out = s.send_json(line);
        assert_rejected(&out, at, error_kind, hint);
    }
    // abort when idle is a harmless no-op (§8.3), not an error.
    assert_eq!(s.send_json(json!({"type":"abort"})).len(), 1);
    // And the next run works.
    let out = s.send_json(json!({"type":"prompt","text":"next"}));
    let call = parse(&out[out.len() - 2]);
    assert_eq!(call["run_id"], "thread-1/run-2");
    s.finish();
}

#[test]
fn ten_megabyte_lines() {
    const TEN_MB: usize = 10 * 1024 * 1024;
    let mut s = Session::drive(&[]);
    s.send_json(json!({"type":"prompt","text":"hello"}));
    // Junk: rejected without disturbing the run.
    let junk = vec![b'x'; TEN_MB];
    let out = s.send(&junk);
    assert_rejected(&out, 2, "invalid_json", "not valid JSON");
    let out = s.send_json(model_text(RUN1, 1, "fine"));
    assert!(
        out.iter()
            .any(|l| l.contains(r#""cause":{"type":"natural_end"}"#))
    );
    // A valid prompt of 10 MB text: accepted and carried whole.
    let text = "y".repeat(TEN_MB);
    let out = s.send_json(json!({"type":"prompt","text":text}));
    let kinds: Vec<String> = out.iter().map(|l| kind(&parse(l)).to_owned()).collect();
    assert_eq!(kinds, ["commit", "event", "call_model", "idle"]);
    let call = parse(&out[2]);
    let last = &call["messages"][2]["content"][0]["text"];
    assert_eq!(last.as_str().map(str::len), Some(TEN_MB));
    let out = s.send_json(model_text("thread-1/run-2", 1, "long read"));
    assert!(
        out.iter()
            .any(|l| l.contains(r#""cause":{"type":"natural_end"}"#))
    );
    s.finish();
}

#[test]
fn a_last_line_without_newline_is_handled_and_eof_exits_0() {
    let output = Command::new(env!("CARGO_BIN_EXE_runcore"))
        .arg("drive")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(b"{\"type\":\"abort\"}\n{\"type\":\"prompt\",\"text\":\"hi\"}")?;
            drop(stdin);
            child.wait_with_output()
        })
        .expect("run runcore drive");
    assert!(output.status.success());
    assert!(output.stderr.is_empty());
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(
        stdout.ends_with("{\"type\":\"idle\",\"line\":2}\n"),
        "{stdout}"
    );
    assert!(stdout.contains(r#""type":"call_model""#));
}

#[test]
fn empty_input_exits_0_silently() {
    let mut s = Session::drive(&[]);
    drop(s.stdin.take());
    s.finish();
}

// ----- --config, help and usage ----------------------------------------------------------------

#[test]
fn config_file_equals_a_first_config_line() {
    let config = json!({
        "thread_id": "support-42",
        "max_steps": 2,
        "system_prompt": "Be brief.",
        "steering_mode": "one_at_a_time",
        "tools": {"lookup": {"description": "Look things up", "policy": "require_approval"}},
    });
    let dir = tempfile::Builder::new()
        .prefix("runcore-driver-config-")
        .tempdir()
        .expect("temp dir");
    let path = dir.path().join("config.json");
    std::fs::write(&path, config.to_string()).expect("write config");
    let run = "support-42/run-1";
    let lines = [
        json!({"type":"prompt","text":"hello"}),
        model_calls(run, 1, &["call-1"]),
        json!({"type":"resume_ticket","result":{"type":"permission","decision":"allow"}}),
        tool_done(run, "call-1"),
        model_text(run, 2, "done"),
    ];

    let mut with_file = Session::drive(&["--config", path.to_str().expect("UTF-8 path")]);
    let from_file: Vec<Vec<String>> = lines
        .iter()
        .map(|l| with_file.send_json(l.clone()))
        .collect();
    with_file.finish();

    let mut with_line = Session::drive(&[]);
    let mut config_line = config.clone();
    config_line["type"] = json!("config");
    assert_eq!(
        with_line.send_json(config_line),
        [r#"{"type":"idle","line":1}"#]
    );
    let from_line: Vec<Vec<String>> = lines
        .iter()
        .map(|l| with_line.send_json(l.clone()))
        .collect();
    with_line.finish();

    // The same lines, except that the file is not an input line: stdin starts at line 1.
    for (i, (a, b)) in from_file.iter().zip(&from_line).enumerate() {
        assert_eq!(a.last(), Some(&idle_line(i as u64 + 1)));
        assert_eq!(b.last(), Some(&idle_line(i as u64 + 2)));
        assert_eq!(a[..a.len() - 1], b[..b.len() - 1], "line {}", i + 1);
    }
    let first_call = parse(&from_file[0][2]);
    assert_eq!(first_call["system_prompt"], "Be brief.");
    assert_eq!(first_call["run_id"], run);
    // Two steps at most: the second request is the final one, and its text ends the run.
    let second_call = parse(&from_file[3][from_file[3].len() - 2]);
    assert_eq!(
        (&second_call["step"], &second_call["final_step"]),
        (&json!(2), &json!(true))
    );
    assert!(
        from_file[4]
            .iter()
            .any(|l| l.contains(r#""cause":{"type":"natural_end"}"#))
    );

    // A bad file is a usage error (exit 2) that names the file.
    std::fs::write(&path, r#"{"max_steps":0}"#).expect("write config");
    let output = Command::new(env!("CARGO_BIN_EXE_runcore"))
        .args(["drive", "--config", path.to_str().expect("UTF-8 path")])
        .stdin(Stdio::null())
        .output()
        .expect("run runcore");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("max_steps") && stderr.contains("config.json"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).expect("remove temp dir");
}

fn runcore(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_runcore"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run runcore")
}

#[test]
fn help_prints_usage_and_exits_0() {
    // The overview, then each command's help (`help CMD`, `CMD --help`, `CMD -h`): its usage
    // line and one of its options, as clap generates them from cli/src/args.rs.
    let overview = [
        "Usage: runcore [COMMAND]",
        "Commands:",
        "drive",
        "Exit status",
    ];
    let mut cases: Vec<(Vec<&str>, Vec<&str>)> = [&[][..], &["help"], &["--help"], &["-h"]]
        .iter()
        .map(|args| (args.to_vec(), overview.to_vec()))
        .collect();
    for (command, usage, option) in [
        ("drive", "Usage: runcore drive [OPTIONS]", "--config <FILE>"),
        (
            "threads",
            "Usage: runcore threads [OPTIONS] --store <URL>",
            "--json",
        ),
        (
            "show",
            "Usage: runcore show [OPTIONS] --store <URL> <THREAD>",
            "--json",
        ),
        (
            "pending",
            "Usage: runcore pending [OPTIONS] --store <URL>",
            "--json",
        ),
        (
            "events",
            "Usage: runcore events [OPTIONS] --store <URL>",
            "--run <R>",
        ),
        (
            "sweep",
            "Usage: runcore sweep [OPTIONS] --store <URL>",
            "--owner <W>",
        ),
        (
            "due",
            "Usage: runcore due [OPTIONS] --store <URL>",
            "--limit <N>",
        ),
        (
            "approve",
            "Usage: runcore approve [OPTIONS] --store <URL> <RUN>",
            "--note <TEXT>",
        ),
        (
            "deny",
            "Usage: runcore deny [OPTIONS] --store <URL> <RUN>",
            "--reason <TEXT>",
        ),
        (
            "console",
            "Usage: runcore console [OPTIONS] --store <URL>",
            "--listen <ADDR>",
        ),
        ("schema", "Usage: runcore schema [PART]", "input"),
        ("demo", "Usage: runcore demo [OPTIONS]", "--memory"),
        ("codec", "Usage: runcore codec <COMMAND>", "decode"),
    ] {
        for args in [
            vec!["help", command],
            vec![command, "--help"],
            vec![command, "-h"],
        ] {
            cases.push((args, vec![usage, option]));
        }
    }
    for (args, says) in &cases {
        let output = runcore(args);
        assert_eq!(output.status.code(), Some(0), "runcore {args:?}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        for text in says {
            assert!(
                stdout.contains(text),
                "runcore {args:?}: {text:?} in {stdout}"
            );
        }
        assert!(output.stderr.is_empty(), "runcore {args:?}");
    }
    // The demo's child process is the demo's own business.
    let demo = String::from_utf8_lossy(&runcore(&["demo", "--help"]).stdout).into_owned();
    assert!(!demo.contains("--child"), "{demo}");
}

#[test]
fn usage_errors_exit_2() {
    // Each mistake is named on stderr (clap's wording; the config file's is the driver's),
    // exit status 2, nothing on stdout.
    let cases: &[(&[&str], &[&str])] = &[
        (&["frobnicate"], &["unrecognized subcommand 'frobnicate'"]),
        (&["drive", "--bogus"], &["unexpected argument '--bogus'"]),
        (
            &["drive", "--config"],
            &["a value is required for '--config <FILE>'"],
        ),
        (
            &["drive", "--config", "/nonexistent/runcore.json"],
            &["cannot read"],
        ),
        (
            &["schema", "everything"],
            &["'everything'", "possible values: input, output"],
        ),
        (&["demo", "--yaml"], &["unexpected argument '--yaml'"]),
        (&["demo", "--line", "3"], &["--child"]),
        (
            &[
                "show",
                "t",
                "--store",
                "sqlite:a.db",
                "--store",
                "sqlite:b.db",
            ],
            &["'--store <URL>' cannot be used multiple times"],
        ),
        (
            &["due", "--store", "sqlite:a.db", "--limit", "-1"],
            &["invalid value '-1' for '--limit <N>'", "whole number"],
        ),
    ];
    for (args, messages) in cases {
        let output = runcore(args);
        assert_eq!(output.status.code(), Some(2), "runcore {args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        for message in *messages {
            assert!(stderr.contains(message), "runcore {args:?}: {stderr}");
        }
        assert!(output.stdout.is_empty(), "runcore {args:?}");
    }
}

// ----- the delta context mode ------------------------------------------------------------------

/// Runs a scenario file in one session, returning every output line except `idle`.
fn run_file(lines: &[String]) -> Vec<Value> {
    let mut s = Session::drive(&[]);
    let out: Vec<Value> = lines
        .iter()
        .flat_map(|l| s.send(l.as_bytes()))
        .map(|l| parse(&l))
        .filter(|v| kind(v) != "idle")
        .collect();
    s.finish();
    out
}

/// The scenario's lines in delta mode: `"context":"delta"` on its config line, or a config
/// line of its own in front.
fn in_delta_mode(lines: &[String]) -> Vec<String> {
    let mut lines = lines.to_vec();
    match lines.first().map(|l| parse(l)) {
        Some(mut config) if kind(&config) == "config" => {
            config["context"] = json!("delta");
            lines[0] = config.to_string();
        }
        _ => lines.insert(0, json!({"type":"config","context":"delta"}).to_string()),
    }
    lines
}

#[test]
fn delta_context_sends_each_message_once() {
    let mut files: Vec<_> = std::fs::read_dir(SCENARIOS)
        .expect("tests/scenarios")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl") && !p.ends_with("t6_recovery_cold.jsonl")
        })
        .collect();
    files.sort();
    assert!(files.len() >= 13);
    for path in files {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).expect("read scenario");
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let full = run_file(&lines);
        let delta = run_file(&in_delta_mode(&lines));
        assert_eq!(full.len(), delta.len(), "{name}");
        let mut sent: Vec<Value> = Vec::new();
        for (f, d) in full.iter().zip(&delta) {
            if kind(f) != "call_model" {
                // Only the line numbers of errors may differ (a prepended config line).
                let (mut f, mut d) = (f.clone(), d.clone());
                for v in [&mut f, &mut d] {
                    if let Some(object) = v.as_object_mut() {
                        object.remove("line");
                    }
                }
                assert_eq!(f, d, "{name}");
                continue;
            }
            assert_eq!(kind(d), "call_model", "{name}");
            assert_eq!(
                d["base"],
                sent.len(),
                "{name}: base is what earlier lines sent"
            );
            assert!(f.get("base").is_none(), "{name}");
            sent.extend(d["messages"].as_array().cloned().unwrap_or_default());
            // Concatenating everything sent so far gives the full-mode transcript.
            assert_eq!(Value::from(sent.clone()), f["messages"], "{name}");
            for field in ["run_id", "step", "final_step", "system_prompt", "tools"] {
                assert_eq!(f.get(field), d.get(field), "{name}: {field}");
            }
        }
    }
}
