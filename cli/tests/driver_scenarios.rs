//! The acceptance scenarios of SPEC §11 (A1–A11, T5, T6) as JSON-lines files under
//! `tests/scenarios/`, driven through the real `runcore drive` binary (SPEC §12).
//!
//! Every file gets the same checks, then its own: one `idle` per input line, last for that line
//! and numbered by it; `error` lines exactly where the scenario expects them (and an error line
//! is followed only by its `idle`: a rejected line changes nothing); per input line, commits
//! before events before at most one action; `run_end` after its run's terminal commit; the
//! expected `run_end` causes in order; and the events folded through the reducer (§9) give the
//! committed transcript at every `run_end`. Only then is the output snapshotted, one snapshot
//! per file, each input line (`> …`) followed by the lines it produced.
//!
//! T6 (recovery) has no driver line: `t6_recovery_warm.jsonl` runs up to the crash point, the
//! test rebuilds an agent from a `MemoryStore` holding the emitted commits, wraps it in a
//! `Driver` and feeds `t6_recovery_cold.jsonl`, comparing with the warm path.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use runcore::driver::{ContextMode, Driver, InputLine};
use runcore::store::{CommitLog, MemoryStore};
use runcore::{
    Agent, AgentEvent, AgentState, AgentStatus, Message, RecoveryPolicy, ThreadCommit, ThreadId,
    reduce,
};
use serde_json::Value;

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scenarios");

/// What a scenario file must produce, beyond the checks every file gets.
struct Expected {
    file: &'static str,
    /// `(input line, kind)`; a resume error is `resume:<resume_error>`.
    errors: &'static [(u64, &'static str)],
    /// The `run_end` causes in order: `natural_end`, `cancelled`, `error:<code>`,
    /// `stopped:<reason>`, …
    causes: &'static [&'static str],
}

const EXPECTED: &[Expected] = &[
    Expected {
        file: "a01_reducer.jsonl",
        errors: &[],
        causes: &["natural_end"],
    },
    Expected {
        file: "a02_older_run_ignored.jsonl",
        errors: &[(4, "unexpected_outcome"), (5, "unexpected_outcome")],
        causes: &["natural_end", "natural_end"],
    },
    Expected {
        file: "a03_busy_guard.jsonl",
        errors: &[(2, "busy")],
        causes: &["natural_end", "error:overloaded", "natural_end"],
    },
    Expected {
        file: "a04_run_after_run_end.jsonl",
        errors: &[(4, "busy")],
        causes: &["natural_end", "natural_end"],
    },
    Expected {
        file: "a05_observed_event_stream.jsonl",
        errors: &[],
        causes: &["natural_end"],
    },
    Expected {
        file: "a06_malformed_tool_output.jsonl",
        errors: &[],
        causes: &["natural_end"],
    },
    Expected {
        file: "a07_abort_before_model_answer.jsonl",
        errors: &[],
        causes: &["cancelled", "natural_end"],
    },
    Expected {
        file: "a08_abort_during_tools.jsonl",
        errors: &[],
        causes: &["cancelled", "cancelled"],
    },
    Expected {
        file: "a09_out_of_order_and_fifo_steering.jsonl",
        errors: &[],
        causes: &["natural_end"],
    },
    Expected {
        file: "a10_steering.jsonl",
        errors: &[],
        causes: &["natural_end", "cancelled", "natural_end"],
    },
    Expected {
        file: "a11_follow_ups_and_queues.jsonl",
        errors: &[
            (1, "not_accepting"),
            (2, "not_accepting"),
            (10, "not_accepting"),
            (19, "not_accepting"),
        ],
        causes: &[
            "natural_end",
            "error:rate_limited",
            "cancelled",
            "natural_end",
        ],
    },
    Expected {
        file: "a12_clear_queues_and_modes.jsonl",
        errors: &[(2, "invalid_input")],
        causes: &["natural_end"],
    },
    Expected {
        file: "t5_approval.jsonl",
        errors: &[
            (5, "resume:not_waiting"),
            (8, "resume:correlation_mismatch"),
            (11, "not_expired"),
            (13, "resume:not_waiting"),
        ],
        causes: &["stopped:wait_expired"],
    },
    Expected {
        file: "t6_recovery_warm.jsonl",
        errors: &[],
        causes: &[],
    },
];

/// The cold half of T6 is fed to a recovered agent, not to a fresh binary.
const COLD_FILE: &str = "t6_recovery_cold.jsonl";

// ----- running and parsing ---------------------------------------------------------------------

/// One input line and the output lines it produced.
struct Step {
    input: String,
    /// The lines exactly as written, `idle` included.
    raw: Vec<String>,
    /// The lines parsed, `idle` excluded.
    outputs: Vec<Value>,
}

fn read_scenario(file: &str) -> String {
    let path = format!("{SCENARIOS}/{file}");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

fn input_lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

/// Runs `runcore drive` on `input` and returns its stdout lines (asserting exit 0, no stderr).
fn run_binary(input: &str) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_runcore"))
        .arg("drive")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn runcore drive");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_owned();
    // Written from another thread so a large output can never fill the pipe and deadlock.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("wait for runcore drive");
    writer.join().expect("writer thread").expect("write stdin");
    assert!(output.status.success(), "exit status {}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "stderr is not empty: {stderr}");
    String::from_utf8(output.stdout)
        .expect("stdout is UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn parse(line: &str) -> Value {
    let value: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    assert!(value.is_object(), "not an object: {line}");
    value
}

fn kind(value: &Value) -> &str {
    value["type"].as_str().unwrap_or("")
}

/// Splits the output into input lines by their `idle` lines, checking that every input line
/// gets exactly one `idle`, numbered by it, and that it is the last line for that input.
fn split_by_idle(inputs: &[&str], output: &[String]) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut current = Vec::new();
    let mut raw = Vec::new();
    for line in output {
        let value = parse(line);
        raw.push(line.clone());
        if kind(&value) == "idle" {
            let n = steps.len() + 1;
            assert_eq!(value["line"], n, "idle out of order: {line}");
            let input = inputs.get(n - 1).expect("more idle lines than input lines");
            steps.push(Step {
                input: (*input).to_owned(),
                raw: std::mem::take(&mut raw),
                outputs: std::mem::take(&mut current),
            });
        } else {
            current.push(value);
        }
    }
    assert!(current.is_empty(), "lines after the last idle: {current:?}");
    assert_eq!(steps.len(), inputs.len(), "one idle per input line");
    steps
}

fn render_cause(cause: &Value) -> String {
    match kind(cause) {
        "error" => format!(
            "error:{}",
            cause["failure"]["code"]
                .as_str()
                .unwrap_or(kind(&cause["failure"]))
        ),
        "stopped" => format!("stopped:{}", cause["reason"].as_str().unwrap_or("")),
        other => other.to_owned(),
    }
}

fn error_kind(error: &Value) -> String {
    match error["kind"].as_str().unwrap_or("") {
        "resume" => format!("resume:{}", error["resume_error"].as_str().unwrap_or("")),
        other => other.to_owned(),
    }
}

fn events(steps: &[Step]) -> impl Iterator<Item = &Value> {
    steps
        .iter()
        .flat_map(|s| &s.outputs)
        .filter(|v| kind(v) == "event")
        .map(|v| &v["event"])
}

/// `(run_id, result)` of every `run_end`, in order.
fn run_ends(steps: &[Step]) -> Vec<(String, Value)> {
    events(steps)
        .filter(|e| kind(e) == "run_end")
        .map(|e| {
            (
                e["run_id"].as_str().unwrap_or("").to_owned(),
                e["result"].clone(),
            )
        })
        .collect()
}

fn loop_kinds(steps: &[Step]) -> Vec<String> {
    events(steps)
        .map(|e| match kind(e) {
            "loop" => kind(&e["event"]).to_owned(),
            other => other.to_owned(),
        })
        .collect()
}

fn call_models(steps: &[Step]) -> Vec<&Value> {
    steps
        .iter()
        .flat_map(|s| &s.outputs)
        .filter(|v| kind(v) == "call_model")
        .collect()
}

/// A message as `role:text` (tool results as `tool_result:call_id:outcome`).
fn render_message(message: &Value) -> String {
    let role = message["role"].as_str().unwrap_or("assistant");
    match role {
        "tool_result" => format!(
            "tool_result:{}:{}",
            message["call_id"].as_str().unwrap_or(""),
            message["outcome"].as_str().unwrap_or("")
        ),
        _ => {
            let text: Vec<String> = message["content"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|block| match kind(block) {
                    "text" => block["text"].as_str().unwrap_or("").to_owned(),
                    "tool_call" => format!("call({})", block["id"].as_str().unwrap_or("")),
                    other => format!("[{other}]"),
                })
                .collect();
            format!("{role}:{}", text.join("+"))
        }
    }
}

fn rendered(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .map(render_message)
        .collect()
}

/// Every committed message, in commit order.
fn committed_messages(steps: &[Step]) -> Vec<Message> {
    steps
        .iter()
        .flat_map(|s| &s.outputs)
        .filter(|v| kind(v) == "commit")
        .flat_map(|v| {
            v["commit"]["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|m| serde_json::from_value(m).expect("a committed message deserializes"))
        .collect()
}

/// Each input line (`> …`) followed by the lines it produced, exactly as written.
fn snapshot_text(steps: &[Step]) -> String {
    let mut text = String::new();
    for step in steps {
        text.push_str("> ");
        text.push_str(&step.input);
        text.push('\n');
        for line in &step.raw {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

// ----- the checks every file gets --------------------------------------------------------------

/// Runs one scenario file through the binary and checks what every scenario must satisfy.
fn run_scenario(expected: &Expected) -> Vec<Step> {
    let text = read_scenario(expected.file);
    let inputs = input_lines(&text);
    let output = run_binary(&text);
    let steps = split_by_idle(&inputs, &output);
    let file = expected.file;

    let mut errors = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let n = i as u64 + 1;
        let kinds: Vec<&str> = step.outputs.iter().map(kind).collect();
        if let Some(first) = step.outputs.first().filter(|v| kind(v) == "error") {
            assert_eq!(first["line"], n, "{file}: error line number");
            assert!(
                !first["error"]["message"].as_str().unwrap_or("").is_empty(),
                "{file}: an error says what went wrong"
            );
            assert_eq!(
                kinds.len(),
                1,
                "{file} line {n}: a rejected line changes nothing"
            );
            errors.push((n, error_kind(&first["error"])));
            continue;
        }
        assert!(
            !kinds.contains(&"error"),
            "{file} line {n}: error not first"
        );
        // §8.2: for one input, its commits first, then its events, then at most one action.
        let rank = |k: &str| match k {
            "commit" => 0,
            "event" => 1,
            "call_model" | "execute_tools" => 2,
            other => panic!("{file} line {n}: unknown output type {other}"),
        };
        let ranks: Vec<u8> = kinds.iter().map(|k| rank(k)).collect();
        assert!(
            ranks.windows(2).all(|w| w[0] <= w[1]),
            "{file} line {n}: commits, then events, then the action: {kinds:?}"
        );
        assert!(
            ranks.iter().filter(|&&r| r == 2).count() <= 1,
            "{file} line {n}: one action"
        );
        // run_end follows its run's terminal commit.
        for event in step.outputs.iter().filter(|v| kind(v) == "event") {
            let event = &event["event"];
            if kind(event) == "run_end" {
                let terminal = step.outputs.iter().any(|v| {
                    kind(v) == "commit"
                        && v["commit"]["run"]["type"] == "ended"
                        && v["commit"]["run"]["run_id"] == event["run_id"]
                        && v["commit"]["run"]["cause"] == event["result"]["cause"]
                });
                assert!(
                    terminal,
                    "{file} line {n}: run_end without its terminal commit"
                );
            }
        }
    }
    let expected_errors: Vec<(u64, String)> = expected
        .errors
        .iter()
        .map(|(n, k)| (*n, (*k).to_owned()))
        .collect();
    assert_eq!(errors, expected_errors, "{file}: error lines");

    let causes: Vec<String> = run_ends(&steps)
        .iter()
        .map(|(_, result)| render_cause(&result["cause"]))
        .collect();
    assert_eq!(causes, expected.causes, "{file}: run_end causes");

    // §9: the reducer, fed the events, holds the committed transcript after every run_end.
    let mut state = AgentState::default();
    let mut committed = 0usize;
    for step in &steps {
        for output in &step.outputs {
            match kind(output) {
                "commit" => {
                    committed += output["commit"]["messages"].as_array().map_or(0, Vec::len);
                }
                "event" => {
                    let event: AgentEvent = serde_json::from_value(output["event"].clone())
                        .unwrap_or_else(|e| panic!("{file}: event does not deserialize: {e}"));
                    state = reduce(state, &event);
                    if matches!(event, AgentEvent::RunEnd { .. }) {
                        assert_eq!(state.status, AgentStatus::Idle, "{file}");
                        let all = committed_messages(&steps);
                        assert_eq!(
                            state.messages,
                            all[..committed],
                            "{file}: reducer transcript"
                        );
                    }
                }
                _ => {}
            }
        }
    }

    // Every call_model of a run counts its steps from 1 and carries the full transcript so far.
    for call in call_models(&steps) {
        assert!(
            call["step"].as_u64().unwrap_or(0) >= 1,
            "{file}: step from 1"
        );
        assert_eq!(
            call["final_step"], false,
            "{file}: 32 steps are never spent here"
        );
        assert!(call.get("base").is_none(), "{file}: full mode has no base");
    }
    steps
}

fn expected(file: &str) -> &'static Expected {
    EXPECTED
        .iter()
        .find(|e| e.file == file)
        .unwrap_or_else(|| panic!("no expectations for {file}"))
}

/// Runs the scenario, checks it, and snapshots it; returns the steps for specific checks.
fn scenario(file: &str) -> Vec<Step> {
    let steps = run_scenario(expected(file));
    let name = file.trim_end_matches(".jsonl");
    common::snapshot!(name, snapshot_text(&steps));
    steps
}

#[test]
fn every_scenario_file_has_expectations() {
    let mut files: Vec<String> = std::fs::read_dir(SCENARIOS)
        .expect("tests/scenarios")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|f| f.ends_with(".jsonl") && f != COLD_FILE)
        .collect();
    files.sort();
    let mut known: Vec<&str> = EXPECTED.iter().map(|e| e.file).collect();
    known.sort();
    assert_eq!(files, known);
    for file in EXPECTED.iter().map(|e| e.file).chain([COLD_FILE]) {
        for (i, line) in input_lines(&read_scenario(file)).iter().enumerate() {
            let parsed = InputLine::parse(line);
            assert!(parsed.is_ok(), "{file}:{}: {parsed:?}", i + 1);
        }
    }
}

// ----- one test per scenario: the common checks, its own facts, a snapshot ---------------------

#[test]
fn a01_events_derive_the_state() {
    let steps = scenario("a01_reducer.jsonl");
    assert_eq!(
        loop_kinds(&steps),
        [
            "run_start",
            "text_delta",
            "assistant_message",
            "tool_start",
            "tool_end",
            "message_appended",
            "text_delta",
            "assistant_message",
            "input_closed",
            "run_end",
        ]
    );
    let mut state = AgentState::default();
    for event in events(&steps) {
        let event: AgentEvent = serde_json::from_value(event.clone()).expect("event");
        let before = event.clone();
        state = reduce(state, &event);
        assert_eq!(event, before, "reduce does not mutate its input");
        if let AgentEvent::Loop { .. } = event {
            assert_eq!(state.status, AgentStatus::Running);
        }
    }
    assert_eq!(state.status, AgentStatus::Idle);
    assert!(state.pending_tool_call_ids.is_empty());
    assert!(state.streaming_text.is_empty());
    assert_eq!(state.messages.len(), 4);
}

#[test]
fn a02_outcomes_of_an_older_run_are_rejected_and_change_nothing() {
    let steps = scenario("a02_older_run_ignored.jsonl");
    for n in [4, 5] {
        let error = &steps[n - 1].outputs[0]["error"];
        assert!(
            error["got"]
                .as_str()
                .unwrap_or("")
                .contains("thread-1/run-1")
        );
        assert!(
            error["expected"]
                .as_str()
                .unwrap_or("")
                .contains("thread-1/run-2")
        );
    }
    let ends = run_ends(&steps);
    assert_eq!(ends[1].0, "thread-1/run-2");
    let last = call_models(&steps).last().copied().expect("a call_model");
    assert!(!last.to_string().contains("late"), "nothing of run 1 leaks");
}

#[test]
fn a03_busy_guard_shared_transcript_and_model_failure() {
    let steps = scenario("a03_busy_guard.jsonl");
    assert_eq!(steps[1].outputs[0]["error"]["active_run"], "thread-1/run-1");
    let calls = call_models(&steps);
    // The second run's first request sees user, assistant, user.
    assert_eq!(
        rendered(&calls[1]["messages"]),
        [
            "user:first question",
            "assistant:first answer",
            "user:second question"
        ]
    );
    // The failure on step 2 keeps step 1's call and result; the third run sees them.
    let third = rendered(&calls[3]["messages"]);
    assert!(third.contains(&"assistant:call(call-1)".to_owned()));
    assert!(third.contains(&"tool_result:call-1:executed".to_owned()));
    let ends = run_ends(&steps);
    assert_eq!(ends[1].1["steps"], 2);
    assert_eq!(
        ends[1].1["cause"]["failure"],
        serde_json::json!({"type":"inference","code":"overloaded","message":"the provider is overloaded"})
    );
}

#[test]
fn a04_run_started_after_run_end_keeps_fifo_order() {
    let steps = scenario("a04_run_after_run_end.jsonl");
    let bounds: Vec<String> = events(&steps)
        .filter(|e| matches!(kind(e), "run_start" | "run_end"))
        .map(|e| format!("{}({})", kind(e), e["run_id"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        bounds,
        [
            "run_start(thread-1/run-1)",
            "run_end(thread-1/run-1)",
            "run_start(thread-1/run-2)",
            "run_end(thread-1/run-2)",
        ]
    );
    assert_eq!(steps[3].outputs[0]["error"]["active_run"], "thread-1/run-2");
}

#[test]
fn a05_the_event_stream_an_observer_sees() {
    let steps = scenario("a05_observed_event_stream.jsonl");
    let kinds = loop_kinds(&steps);
    for expected in [
        "text_delta",
        "tool_progress",
        "tool_end",
        "assistant_message",
    ] {
        assert!(kinds.iter().any(|k| k == expected), "missing {expected}");
    }
    // The catalog reaches the model; progress is live only, never committed.
    let first = call_models(&steps)[0];
    assert_eq!(first["tools"][0]["name"], "search");
    assert_eq!(first["tools"][0]["description"], "Search the index");
    assert!(
        committed_messages(&steps)
            .iter()
            .all(|m| { !serde_json::to_string(m).expect("serialize").contains("50%") })
    );
}

#[test]
fn a06_malformed_output_becomes_a_malformed_result() {
    let steps = scenario("a06_malformed_tool_output.jsonl");
    let results: Vec<Message> = committed_messages(&steps)
        .into_iter()
        .filter(|m| matches!(m, Message::ToolResult(_)))
        .collect();
    let [Message::ToolResult(result)] = results.as_slice() else {
        panic!("one tool result: {results:?}");
    };
    assert_eq!(result.call_id.as_str(), "call-1");
    assert_eq!(result.tool_name, "read_file");
    assert!(result.is_error);
    assert_eq!(
        serde_json::to_value(result.outcome).expect("outcome"),
        "malformed"
    );
}

#[test]
fn a07_abort_before_the_model_answers() {
    // The driver drains after every line, so the first `call_model` is already out when the
    // abort line arrives: the run waits for the host's outcome, then ends Cancelled once.
    let steps = scenario("a07_abort_before_model_answer.jsonl");
    for n in [2, 3, 5] {
        assert!(steps[n - 1].outputs.is_empty(), "abort {n} emits nothing");
    }
    let ends = run_ends(&steps);
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0].0, "thread-1/run-1");
    assert_eq!(ends[0].1["steps"], 1);
    assert_eq!(call_models(&steps).len(), 2, "one model call per run");
}

#[test]
fn a08_abort_during_tools_still_pairs_the_result() {
    let steps = scenario("a08_abort_during_tools.jsonl");
    let terminal = steps[3]
        .outputs
        .iter()
        .find(|v| kind(v) == "commit" && v["commit"]["run"]["type"] == "ended")
        .expect("the terminal commit");
    assert_eq!(
        rendered(&terminal["commit"]["messages"]),
        ["tool_result:call-1:executed"]
    );
    // The model that ignores abort still gets its message into the transcript.
    let all: Vec<String> = committed_messages(&steps)
        .iter()
        .map(|m| render_message(&serde_json::to_value(m).expect("message")))
        .collect();
    assert_eq!(
        all.last().map(String::as_str),
        Some("assistant:I ignore the abort")
    );
}

#[test]
fn a09_results_in_call_order_then_steering_in_fifo_order() {
    let steps = scenario("a09_out_of_order_and_fifo_steering.jsonl");
    let ends: Vec<String> = events(&steps)
        .filter(|e| kind(&e["event"]) == "tool_end")
        .map(|e| e["event"]["call_id"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(ends, ["call-b", "call-a"], "tool_end in completion order");
    let second = call_models(&steps)[1];
    assert_eq!(
        rendered(&second["messages"]),
        [
            "user:compare two files",
            "assistant:call(call-a)+call(call-b)",
            "tool_result:call-a:executed",
            "tool_result:call-b:executed",
            "user:steer one",
            "user:steer two",
        ]
    );
}

#[test]
fn a10_steering_continues_the_run_and_never_leaks_after_abort() {
    let steps = scenario("a10_steering.jsonl");
    let calls = call_models(&steps);
    assert_eq!(calls[1]["run_id"], "thread-1/run-1");
    assert_eq!(calls[1]["step"], 2);
    assert_eq!(
        rendered(&calls[1]["messages"]).last().map(String::as_str),
        Some("user:make it short")
    );
    let ends = run_ends(&steps);
    assert_eq!(
        rendered(&ends[1].1["unconsumed"]),
        ["user:this steering must not leak"]
    );
    let last = calls.last().copied().expect("a call_model");
    assert!(!last.to_string().contains("must not leak"));
}

#[test]
fn a12_clear_queues_withdraws_what_the_run_has_not_taken_and_modes_change_mid_run() {
    let steps = scenario("a12_clear_queues_and_modes.jsonl");
    let cleared: Vec<&Value> = events(&steps)
        .filter(|e| e["type"] == "queues_cleared")
        .collect();
    assert_eq!(cleared.len(), 2, "idle and mid-run");
    // Idle: no run, nothing to withdraw.
    assert!(cleared[0].get("run_id").is_none());
    assert_eq!(rendered(&cleared[0]["steering"]), Vec::<String>::new());
    // Mid-run: every queued message, by queue, oldest first; none of them ever enters.
    assert_eq!(cleared[1]["run_id"], "thread-1/run-1");
    assert_eq!(
        rendered(&cleared[1]["steering"]),
        ["user:withdrawn steer 1", "user:withdrawn steer 2"]
    );
    assert_eq!(
        rendered(&cleared[1]["follow_ups"]),
        ["user:withdrawn follow-up"]
    );
    let calls = call_models(&steps);
    assert_eq!(calls.len(), 3);
    // one_at_a_time (set while idle): the first boundary takes one steering message …
    let second = rendered(&calls[1]["messages"]);
    assert_eq!(
        second[second.len() - 2..],
        ["assistant:one", "user:steer 3"]
    );
    // … and `all`, set mid-run, applies from the next boundary: both the rest.
    let third = rendered(&calls[2]["messages"]);
    assert_eq!(
        third[third.len() - 3..],
        ["assistant:two", "user:steer 4", "user:steer 5"]
    );
    assert!(
        !third.iter().any(|m| m.contains("withdrawn")),
        "a withdrawn message never enters: {third:?}"
    );
    assert_eq!(
        rendered(&run_ends(&steps)[0].1["unconsumed"]),
        Vec::<String>::new()
    );
}

#[test]
fn a11_follow_ups_after_a_natural_stop_and_queues_never_cross_runs() {
    let steps = scenario("a11_follow_ups_and_queues.jsonl");
    let calls = call_models(&steps);
    // After the tool batch the follow-ups wait; after the text stop they enter all at once.
    assert_eq!(
        rendered(&calls[1]["messages"]).last().map(String::as_str),
        Some("tool_result:call-1:executed")
    );
    let third = rendered(&calls[2]["messages"]);
    assert_eq!(
        third[third.len() - 3..],
        [
            "assistant:first task done",
            "user:then this",
            "user:and this"
        ]
    );
    let ends = run_ends(&steps);
    assert_eq!(
        rendered(&ends[1].1["unconsumed"]),
        [
            "user:queued steer of an error run",
            "user:queued follow-up of an error run"
        ]
    );
    assert_eq!(
        rendered(&ends[2].1["unconsumed"]),
        ["user:queued follow-up of an aborted run"]
    );
    let last = calls.last().copied().expect("a call_model");
    assert!(
        !last.to_string().contains("queued"),
        "queues never reach the next run"
    );
}

#[test]
fn t5_approval_allow_deny_duplicate_stale_and_expiry() {
    let steps = scenario("t5_approval.jsonl");
    // One run throughout: resumes continue the same run id.
    let starts = events(&steps).filter(|e| kind(e) == "run_start").count();
    assert_eq!(starts, 1);
    let results: Vec<String> = committed_messages(&steps)
        .iter()
        .map(|m| render_message(&serde_json::to_value(m).expect("message")))
        .filter(|m| m.starts_with("tool_result"))
        .collect();
    assert_eq!(
        results,
        [
            "tool_result:call-1:executed",
            "tool_result:call-2:denied",
            "tool_result:call-3:expired",
            "tool_result:call-4:skipped",
        ]
    );
    // Each decision is committed as a permission_decided draft before anything acts on it.
    let decisions: Vec<String> = steps
        .iter()
        .flat_map(|s| &s.outputs)
        .filter(|v| kind(v) == "commit")
        .flat_map(|v| {
            v["commit"]["events"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|d| d["kind"] == "permission_decided")
        .map(|d| {
            format!(
                "{}:{}",
                d["payload"]["call_id"].as_str().unwrap_or(""),
                d["payload"]["decision"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(decisions, ["call-1:allow", "call-2:deny"]);
    // Allow executes the call; the resume context enters the transcript.
    let allow = &steps[3].outputs;
    assert_eq!(allow.last().map(kind), Some("execute_tools"));
    assert!(
        rendered(&call_models(&steps)[1]["messages"])
            .contains(&"system:alice approved deleting old.txt".to_owned())
    );
    // Equal to the deadline is not expired; one past it is.
    assert_eq!(steps[10].outputs[0]["error"]["deadline_ms"], 8000);
}

// ----- T6: recovery ----------------------------------------------------------------------------

/// Feeds `lines` to `driver`, returning each line's outputs (parsed, idle included).
fn feed(driver: &mut Driver, lines: &[&str]) -> Vec<Vec<Value>> {
    feed_raw(driver, lines)
        .iter()
        .map(|raw| raw.iter().map(|l| parse(l)).collect())
        .collect()
}

/// Feeds `lines` to `driver`, returning each line's output lines as written.
fn feed_raw(driver: &mut Driver, lines: &[&str]) -> Vec<Vec<String>> {
    lines
        .iter()
        .map(|line| driver.handle_line(line.as_bytes()))
        .collect()
}

/// A store holding every commit of `outputs`.
fn store_of<'a>(outputs: impl IntoIterator<Item = &'a Value>) -> MemoryStore {
    let mut store = MemoryStore::new();
    for value in outputs.into_iter().filter(|v| kind(v) == "commit") {
        let commit: ThreadCommit =
            serde_json::from_value(value["commit"].clone()).expect("a commit deserializes");
        store
            .commit(commit)
            .expect("the store accepts the driver's commits");
    }
    store
}

fn warm_config(warm: &[&str]) -> runcore::AgentConfig {
    match InputLine::parse(warm[0]) {
        Ok(InputLine {
            input: runcore::Input::Config(config),
            ..
        }) => config,
        other => panic!("the warm file starts with its config line: {other:?}"),
    }
}

fn without_line_numbers(outputs: &[Value]) -> Vec<&Value> {
    outputs
        .iter()
        .filter(|v| !matches!(kind(v), "idle" | "error"))
        .collect()
}

#[test]
fn t6_recovery_behaves_like_the_warm_path() {
    let warm_text = read_scenario("t6_recovery_warm.jsonl");
    let warm: Vec<&str> = input_lines(&warm_text);
    let cold_text = read_scenario(COLD_FILE);
    let cold: Vec<&str> = input_lines(&cold_text);

    // The warm part runs through the binary up to the crash point.
    let warm_steps = run_scenario(expected("t6_recovery_warm.jsonl"));
    let store = store_of(warm_steps.iter().flat_map(|s| &s.outputs));
    let thread = ThreadId::new("thread-1");
    let agent = Agent::recover(warm_config(&warm), &store, &thread, RecoveryPolicy::Replay)
        .expect("recover");
    let mut driver = Driver::from_agent(agent, ContextMode::Full);
    let mut recovered_raw = Vec::new();
    driver.drain_into(&mut |line| recovered_raw.push(line));
    let recovered: Vec<Value> = recovered_raw.iter().map(|l| parse(l)).collect();
    // The allow decision was committed: both calls are replayed, none is asked again.
    let replay = recovered.last().expect("recovery decides an action");
    assert_eq!(kind(replay), "execute_tools");
    assert_eq!(replay["run_id"], "thread-1/run-1");
    let ids: Vec<&str> = replay["calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(ids, ["call-1", "call-2"]);

    let cold_raw = feed_raw(&mut driver, &cold);
    let cold_outputs: Vec<Vec<Value>> = cold_raw
        .iter()
        .map(|raw| raw.iter().map(|l| parse(l)).collect())
        .collect();
    for (i, outputs) in cold_outputs.iter().enumerate() {
        assert_eq!(
            outputs.last().map(kind),
            Some("idle"),
            "cold line {}",
            i + 1
        );
        assert_eq!(
            outputs.last().map(|v| &v["line"]),
            Some(&Value::from(i + 1))
        );
    }
    let errors: Vec<String> = cold_outputs
        .iter()
        .flatten()
        .filter(|v| kind(v) == "error")
        .map(|v| error_kind(&v["error"]))
        .collect();
    assert_eq!(
        errors,
        ["not_accepting"],
        "only the steer after the end is rejected"
    );

    // The warm path, never crashed: call-1 was answered before the crash, so its replayed
    // answer is a duplicate there; everything after it is the same, line for line.
    let mut warm_driver = Driver::new();
    let warm_outputs = feed(&mut warm_driver, &warm);
    let warm_rest = feed(&mut warm_driver, &cold[1..]);
    // Operation fields included: the recovered agent continues the run's ordinals and the
    // thread's version from the store (SPEC §7.1).
    for (cold_line, warm_line) in cold_outputs[1..].iter().zip(&warm_rest) {
        assert_eq!(
            without_line_numbers(cold_line),
            without_line_numbers(warm_line)
        );
    }
    assert_eq!(
        driver.agent().transcript(),
        warm_driver.agent().transcript()
    );
    // The binary and the library agree on the warm part.
    let binary_warm: Vec<&Value> = warm_steps.iter().flat_map(|s| &s.outputs).collect();
    let library_warm: Vec<&Value> = warm_outputs
        .iter()
        .flatten()
        .filter(|v| kind(v) != "idle")
        .collect();
    assert_eq!(binary_warm, library_warm);

    let run_end = cold_outputs
        .iter()
        .flatten()
        .find(|v| kind(v) == "event" && kind(&v["event"]) == "run_end")
        .expect("the recovered run ends");
    assert_eq!(run_end["event"]["result"]["cause"]["type"], "natural_end");
    assert_eq!(
        run_end["event"]["result"]["steps"], 2,
        "the step count is restored"
    );

    let mut text = String::from("# recovered from the store; outputs before any input\n");
    for line in &recovered_raw {
        text.push_str(line);
        text.push('\n');
    }
    let cold_steps: Vec<Step> = cold
        .iter()
        .zip(cold_raw)
        .map(|(input, raw)| Step {
            input: (*input).to_owned(),
            raw,
            outputs: Vec::new(),
        })
        .collect();
    text.push_str(&snapshot_text(&cold_steps));
    common::snapshot!("t6_recovery_cold", text);
}

#[test]
fn t6_a_crash_after_any_warm_line_recovers_the_committed_state() {
    let warm_text = read_scenario("t6_recovery_warm.jsonl");
    let warm: Vec<&str> = input_lines(&warm_text);
    let config = warm_config(&warm);
    let thread = ThreadId::new("thread-1");
    for crash_after in 1..=warm.len() {
        let mut driver = Driver::new();
        let outputs = feed(&mut driver, &warm[..crash_after]);
        let store = store_of(outputs.iter().flatten());
        let agent = Agent::recover(config.clone(), &store, &thread, RecoveryPolicy::Replay)
            .expect("recover");
        // Outputs are decided when polled: drain what recovery decided before comparing.
        let mut cold = Driver::from_agent(agent, ContextMode::Full);
        let mut recovered = Vec::new();
        cold.drain_into(&mut |line| recovered.push(parse(&line)));
        let (agent, warm_agent) = (cold.agent(), driver.agent());
        let at = format!("crash after line {crash_after}");
        assert_eq!(agent.transcript(), warm_agent.transcript(), "{at}");
        assert_eq!(agent.run_state(), warm_agent.run_state(), "{at}");
        assert_eq!(agent.current_ticket(), warm_agent.current_ticket(), "{at}");
        assert_eq!(agent.active_run_id(), warm_agent.active_run_id(), "{at}");
        // The recovered agent asks for exactly the work the warm one has outstanding.
        let is_action = |v: &&Value| matches!(kind(v), "call_model" | "execute_tools");
        let recovered_action = recovered.iter().rev().find(is_action);
        let warm_action = outputs.iter().flatten().rev().find(is_action);
        match warm_agent.current_ticket() {
            Some(_) => assert_eq!(recovered_action, None, "{at}: awaiting asks nothing"),
            None if warm_agent.active_run_id().is_some() => {
                assert_eq!(recovered_action, warm_action, "{at}")
            }
            None => assert_eq!(recovered_action, None, "{at}: idle asks nothing"),
        }
        assert_eq!(agent.steps(), warm_agent.steps(), "{at}");
    }
}
