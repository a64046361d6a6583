//! Properties of the JSON-lines driver (SPEC §12) over random sequences of valid and
//! malformed lines, on the library `Driver` (no process per case, so many cases are cheap).
//!
//! For every input line: the driver never panics; it writes exactly one `idle`, numbered by
//! the line, and last. A valid line writes exactly what the library writes when driven
//! directly: a reference `Agent` fed the equivalent `Input` through `Agent::handle`, its outputs
//! rendered with `render_output_line`, a rejection with `error_line`, then `idle_line`. A
//! malformed line writes one `invalid_json` error and its `idle`, and changes nothing (the
//! reference is not fed at all, and the two agents still agree at the end).
//!
//! Valid lines either name runs, steps and calls at random (mostly misuse) or answer what the
//! active run is waiting for (so sequences get deep into runs: tool batches, approvals,
//! steering, pauses, max steps).

mod common;

use proptest::prelude::*;
use proptest::sample::Index;
use runcore::driver::{ContextMode, Driver, error_line, idle_line, render_output_line};
use runcore::{
    Agent, AgentConfig, AssistantBlock, AssistantMessage, DeltaKind, Input, PermissionDecision,
    ResumeResult, RunId, StopReason, ToolOutput, ToolSpec, UserMessage,
};
use serde_json::{Value, json};

/// Which run (and step) an outcome names.
#[derive(Debug, Clone)]
enum Target {
    /// The active run and its current step (what the agent waits for, if anything).
    Current,
    /// `thread-1/run-{run}`, step `step`: usually stale or premature.
    Other { run: u8, step: u32 },
}

/// One valid input line.
#[derive(Debug, Clone)]
enum Cmd {
    Config {
        max_steps: u32,
        gated: bool,
        context: Option<ContextMode>,
        now_ms: Option<u64>,
    },
    Prompt {
        text: String,
        now_ms: Option<u64>,
    },
    Steer(String),
    FollowUp(String),
    Abort,
    Pause,
    /// A streamed piece: reasoning when the flag is set (§2.1), else text.
    ModelDelta(Target, String, bool),
    ModelText(Target, StopReason),
    /// Tool calls `call-{i}`; `true` names the gated tool.
    ModelCalls(Target, Vec<(u8, bool)>),
    ModelFailed(Target, String),
    ToolProgress(Target, u8),
    ToolDone {
        target: Target,
        call: u8,
        is_error: bool,
    },
    Permission {
        allow: bool,
        now_ms: Option<u64>,
    },
    ResumeInput(String),
    CancelWait,
    Stop(String),
    ExpireWait(u64),
    AbandonTools,
    Continue(Option<u64>),
    Timeout(u64),
}

/// One line the driver must reject as `invalid_json`.
#[derive(Debug, Clone)]
enum Malformed {
    /// Bytes that are not a JSON object.
    Bytes(Vec<u8>),
    /// A valid line cut short.
    Truncated(Cmd, Index),
    /// A valid line with another `type`.
    UnknownType(Cmd, String),
    /// A valid line with a field no input has.
    ExtraField(Cmd),
    /// A valid line whose `type` is a number.
    TypeNotString(Cmd),
    /// A valid line without `type`.
    NoType(Cmd),
}

#[derive(Debug, Clone)]
enum Line {
    Valid(Cmd),
    Malformed(Malformed),
}

const GATED_TOOL: &str = "delete";
const AUTO_TOOL: &str = "search";

fn run_id(n: u8) -> RunId {
    RunId::new(format!("thread-1/run-{n}"))
}

/// The run and step `target` names, given the reference agent's state.
fn resolve(target: &Target, agent: &Agent) -> (RunId, u32) {
    match target {
        Target::Current => (
            agent.active_run_id().cloned().unwrap_or_else(|| run_id(1)),
            agent.steps().unwrap_or(1),
        ),
        Target::Other { run, step } => (run_id(*run), *step),
    }
}

fn stop_reason_name(stop: StopReason) -> Value {
    serde_json::to_value(stop).expect("a stop reason serializes")
}

fn call_blocks(calls: &[(u8, bool)]) -> Vec<AssistantBlock> {
    calls
        .iter()
        .map(|(i, gated)| {
            let name = if *gated { GATED_TOOL } else { AUTO_TOOL };
            AssistantBlock::tool_call(format!("call-{i}"), name, json!({ "i": i }))
        })
        .collect()
}

fn text_answer(stop: StopReason) -> AssistantMessage {
    let mut message = AssistantMessage::new(vec![AssistantBlock::text("an answer")], stop);
    if stop == StopReason::Error {
        message.error_message = Some("the provider failed".into());
    }
    message
}

impl Cmd {
    fn agent_config(max_steps: u32, gated: bool) -> AgentConfig {
        let mut config = AgentConfig {
            max_steps,
            ..AgentConfig::default()
        };
        config
            .tools
            .insert(AUTO_TOOL.into(), ToolSpec::auto("Search the index"));
        if gated {
            config.tools.insert(
                GATED_TOOL.into(),
                ToolSpec::gated("Delete a file", Some(1000)),
            );
        }
        config
    }

    /// The line as the host writes it.
    fn to_json(&self, agent: &Agent) -> Value {
        match self {
            Cmd::Config {
                max_steps,
                gated,
                context,
                now_ms,
            } => {
                let mut tools = json!({ AUTO_TOOL: { "description": "Search the index" } });
                if *gated {
                    tools[GATED_TOOL] = json!({
                        "description": "Delete a file",
                        "policy": "require_approval",
                        "deadline_after_ms": 1000,
                    });
                }
                let mut line = json!({"type": "config", "max_steps": max_steps, "tools": tools});
                if let Some(context) = context {
                    line["context"] = serde_json::to_value(context).expect("context");
                }
                if let Some(now) = now_ms {
                    line["now_ms"] = json!(now);
                }
                line
            }
            Cmd::Prompt { text, now_ms } => match now_ms {
                Some(now) => json!({"type": "prompt", "text": text, "now_ms": now}),
                None => json!({"type": "prompt", "text": text}),
            },
            Cmd::Steer(text) => json!({"type": "steer", "text": text}),
            Cmd::FollowUp(text) => json!({"type": "follow_up", "text": text}),
            Cmd::Abort => json!({"type": "abort"}),
            Cmd::Pause => json!({"type": "pause"}),
            Cmd::ModelDelta(target, text, thinking) => {
                let (run, step) = resolve(target, agent);
                let mut line =
                    json!({"type": "model_delta", "run_id": run, "step": step, "text": text});
                if *thinking {
                    line["kind"] = json!("thinking");
                }
                line
            }
            Cmd::ModelText(target, stop) => {
                let (run, step) = resolve(target, agent);
                let mut message = json!({
                    "role": "assistant",
                    "content": [{"type": "text", "text": "an answer"}],
                    "stop_reason": stop_reason_name(*stop),
                });
                if *stop == StopReason::Error {
                    message["error_message"] = json!("the provider failed");
                }
                json!({"type": "model_done", "run_id": run, "step": step, "message": message})
            }
            Cmd::ModelCalls(target, calls) => {
                let (run, step) = resolve(target, agent);
                // Written by hand (not serialized from the blocks) to keep the check honest.
                let content: Vec<Value> = calls
                    .iter()
                    .map(|(i, gated)| {
                        let name = if *gated { GATED_TOOL } else { AUTO_TOOL };
                        json!({"type": "tool_call", "id": format!("call-{i}"), "name": name,
                               "arguments": {"i": i}})
                    })
                    .collect();
                json!({"type": "model_done", "run_id": run, "step": step,
                       "message": {"content": content, "stop_reason": "tool_use"}})
            }
            Cmd::ModelFailed(target, code) => {
                let (run, step) = resolve(target, agent);
                json!({"type": "model_failed", "run_id": run, "step": step, "code": code,
                       "message": "it failed"})
            }
            Cmd::ToolProgress(target, call) => {
                let (run, _) = resolve(target, agent);
                json!({"type": "tool_progress", "run_id": run, "call_id": format!("call-{call}"),
                       "content": "working"})
            }
            Cmd::ToolDone {
                target,
                call,
                is_error,
            } => {
                let (run, _) = resolve(target, agent);
                json!({"type": "tool_done", "run_id": run, "call_id": format!("call-{call}"),
                       "content": [{"type": "text", "text": format!("result {call}")}],
                       "is_error": is_error})
            }
            Cmd::Permission { allow, now_ms } => {
                let result = if *allow {
                    json!({"type": "permission", "decision": "allow"})
                } else {
                    json!({"type": "permission", "decision": "deny", "reason": "no"})
                };
                match now_ms {
                    Some(now) => json!({"type": "resume_ticket", "result": result, "now_ms": now}),
                    None => json!({"type": "resume_ticket", "result": result}),
                }
            }
            Cmd::ResumeInput(text) => {
                json!({"type": "resume_ticket", "result": {"type": "input", "text": text}})
            }
            Cmd::CancelWait => json!({"type": "cancel_wait"}),
            Cmd::Stop(reason) => json!({"type": "stop", "reason": reason}),
            Cmd::ExpireWait(now) => json!({"type": "expire_wait", "now_ms": now}),
            Cmd::AbandonTools => json!({"type": "abandon_tools"}),
            Cmd::Continue(None) => json!({"type": "continue"}),
            Cmd::Continue(Some(now)) => json!({"type": "continue", "now_ms": now}),
            Cmd::Timeout(now) => json!({"type": "timeout", "now_ms": now}),
        }
    }

    /// The same line as the library input it stands for, with the clock reading it carries.
    fn to_input(&self, agent: &Agent) -> (Input, Option<u64>) {
        match self {
            Cmd::Config {
                max_steps,
                gated,
                now_ms,
                ..
            } => (
                Input::Config(Self::agent_config(*max_steps, *gated)),
                *now_ms,
            ),
            Cmd::Prompt { text, now_ms } => (
                Input::Prompt {
                    message: Some(UserMessage::text(text.clone())),
                    run_id: None,
                    messages: Vec::new(),
                },
                *now_ms,
            ),
            Cmd::Steer(text) => (
                Input::Steer {
                    message: UserMessage::text(text.clone()),
                },
                None,
            ),
            Cmd::FollowUp(text) => (
                Input::FollowUp {
                    message: UserMessage::text(text.clone()),
                },
                None,
            ),
            Cmd::Abort => (Input::Abort, None),
            Cmd::Pause => (Input::Pause, None),
            Cmd::ModelDelta(target, text, thinking) => {
                let (run_id, step) = resolve(target, agent);
                (
                    Input::ModelDelta {
                        run_id,
                        step,
                        text: text.clone(),
                        kind: if *thinking {
                            DeltaKind::Thinking
                        } else {
                            DeltaKind::Text
                        },
                    },
                    None,
                )
            }
            Cmd::ModelText(target, stop) => {
                let (run_id, step) = resolve(target, agent);
                (
                    Input::ModelDone {
                        run_id,
                        step,
                        message: text_answer(*stop),
                    },
                    None,
                )
            }
            Cmd::ModelCalls(target, calls) => {
                let (run_id, step) = resolve(target, agent);
                (
                    Input::ModelDone {
                        run_id,
                        step,
                        message: AssistantMessage::new(call_blocks(calls), StopReason::ToolUse),
                    },
                    None,
                )
            }
            Cmd::ModelFailed(target, code) => {
                let (run_id, step) = resolve(target, agent);
                (
                    Input::ModelFailed {
                        run_id,
                        step,
                        code: code.clone(),
                        message: "it failed".into(),
                        retry_after_ms: None,
                    },
                    None,
                )
            }
            Cmd::ToolProgress(target, call) => {
                let (run_id, _) = resolve(target, agent);
                (
                    Input::ToolProgress {
                        run_id,
                        call_id: format!("call-{call}").into(),
                        content: vec![runcore::ContentBlock::text("working")],
                    },
                    None,
                )
            }
            Cmd::ToolDone {
                target,
                call,
                is_error,
            } => {
                let (run_id, _) = resolve(target, agent);
                let call_id = format!("call-{call}");
                let mut output = ToolOutput::text(call_id.clone(), format!("result {call}"));
                output.is_error = *is_error;
                (Input::tool_done(run_id, output), None)
            }
            Cmd::Permission { allow, now_ms } => {
                let decision = if *allow {
                    PermissionDecision::Allow { note: None }
                } else {
                    PermissionDecision::Deny {
                        reason: Some("no".into()),
                    }
                };
                (
                    Input::ResumeTicket {
                        result: ResumeResult::Permission(decision),
                    },
                    *now_ms,
                )
            }
            Cmd::ResumeInput(text) => (
                Input::ResumeTicket {
                    result: ResumeResult::Input(text.clone()),
                },
                None,
            ),
            Cmd::CancelWait => (Input::CancelWait, None),
            Cmd::Stop(reason) => (
                Input::Stop {
                    reason: reason.clone(),
                },
                None,
            ),
            Cmd::ExpireWait(now) => (Input::ExpireWait, Some(*now)),
            Cmd::AbandonTools => (Input::AbandonTools, None),
            Cmd::Continue(now_ms) => (Input::Continue, *now_ms),
            Cmd::Timeout(now) => (Input::Timeout, Some(*now)),
        }
    }
}

impl Malformed {
    fn bytes(&self, agent: &Agent) -> Vec<u8> {
        let edit = |cmd: &Cmd, f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
            let mut line = cmd.to_json(agent);
            if let Value::Object(object) = &mut line {
                f(object);
            }
            line.to_string().into_bytes()
        };
        match self {
            Malformed::Bytes(bytes) => bytes.clone(),
            Malformed::Truncated(cmd, cut) => {
                let mut bytes = cmd.to_json(agent).to_string().into_bytes();
                bytes.truncate(cut.index(bytes.len()));
                bytes
            }
            Malformed::UnknownType(cmd, tag) => edit(cmd, &|o| {
                o.insert("type".into(), json!(tag));
            }),
            Malformed::ExtraField(cmd) => edit(cmd, &|o| {
                o.insert("bogus".into(), json!(true));
            }),
            Malformed::TypeNotString(cmd) => edit(cmd, &|o| {
                o.insert("type".into(), json!(7));
            }),
            Malformed::NoType(cmd) => edit(cmd, &|o| {
                o.remove("type");
            }),
        }
    }
}

// ----- strategies ------------------------------------------------------------------------------

fn short_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("hi".to_owned()),
        Just("steer: be brief".to_owned()),
        "[a-z ]{1,12}",
        "\\PC{0,8}",
    ]
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => Just(Target::Current),
        1 => (1u8..=3, 0u32..=4).prop_map(|(run, step)| Target::Other { run, step }),
    ]
}

fn stop_reason() -> impl Strategy<Value = StopReason> {
    prop_oneof![
        6 => Just(StopReason::Stop),
        1 => Just(StopReason::Length),
        1 => Just(StopReason::ToolUse),
        1 => Just(StopReason::Error),
        1 => Just(StopReason::Aborted),
    ]
}

fn now() -> impl Strategy<Value = Option<u64>> {
    prop::option::of(0u64..5000)
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let context = prop::option::of(prop_oneof![
        Just(ContextMode::Full),
        Just(ContextMode::Delta)
    ]);
    prop_oneof![
        1 => (1u32..=4, any::<bool>(), context, now()).prop_map(|(max_steps, gated, context, now_ms)| {
            Cmd::Config { max_steps, gated, context, now_ms }
        }),
        4 => (short_text(), now()).prop_map(|(text, now_ms)| Cmd::Prompt { text, now_ms }),
        2 => short_text().prop_map(Cmd::Steer),
        2 => short_text().prop_map(Cmd::FollowUp),
        1 => Just(Cmd::Abort),
        1 => Just(Cmd::Pause),
        2 => (target(), short_text(), any::<bool>())
            .prop_map(|(t, text, thinking)| Cmd::ModelDelta(t, text, thinking)),
        5 => (target(), stop_reason()).prop_map(|(t, stop)| Cmd::ModelText(t, stop)),
        5 => (target(), prop::collection::vec((1u8..=3, any::<bool>()), 1..=3))
            .prop_map(|(t, calls)| Cmd::ModelCalls(t, calls)),
        1 => (target(), "[a-z_]{1,10}").prop_map(|(t, code)| Cmd::ModelFailed(t, code)),
        1 => (target(), 1u8..=3).prop_map(|(t, call)| Cmd::ToolProgress(t, call)),
        6 => (target(), 1u8..=3, prop::bool::weighted(0.2))
            .prop_map(|(target, call, is_error)| Cmd::ToolDone { target, call, is_error }),
        3 => (prop::bool::weighted(0.7), now()).prop_map(|(allow, now_ms)| Cmd::Permission { allow, now_ms }),
        1 => short_text().prop_map(Cmd::ResumeInput),
        1 => Just(Cmd::CancelWait),
        1 => "[a-z_]{1,10}".prop_map(Cmd::Stop),
        1 => (0u64..8000).prop_map(Cmd::ExpireWait),
        1 => Just(Cmd::AbandonTools),
    ]
}

fn malformed() -> impl Strategy<Value = Malformed> {
    let not_an_object = prop::collection::vec(any::<u8>(), 0..48)
        .prop_filter("bytes that happen to be a JSON object", |bytes| {
            !serde_json::from_slice::<Value>(bytes).is_ok_and(|v| v.is_object())
        });
    let unknown_tag = "[a-z_]{1,12}".prop_filter("a known input type", |tag| {
        !matches!(
            tag.as_str(),
            "config"
                | "prompt"
                | "steer"
                | "follow_up"
                | "abort"
                | "pause"
                | "model_delta"
                | "model_done"
                | "model_failed"
                | "tool_progress"
                | "tool_done"
                | "resume"
                | "resume_ticket"
                | "cancel_wait"
                | "stop"
                | "expire_wait"
                | "abandon_tools"
                | "continue"
                | "timeout"
        )
    });
    prop_oneof![
        not_an_object.prop_map(Malformed::Bytes),
        (cmd(), any::<Index>()).prop_map(|(c, cut)| Malformed::Truncated(c, cut)),
        (cmd(), unknown_tag).prop_map(|(c, tag)| Malformed::UnknownType(c, tag)),
        cmd().prop_map(Malformed::ExtraField),
        cmd().prop_map(Malformed::TypeNotString),
        cmd().prop_map(Malformed::NoType),
    ]
}

fn lines() -> impl Strategy<Value = Vec<Line>> {
    prop::collection::vec(
        prop_oneof![
            5 => cmd().prop_map(Line::Valid),
            1 => malformed().prop_map(Line::Malformed),
        ],
        1..48,
    )
}

/// Sessions that also continue runs and deliver timeouts (SPEC §8.5, §8.8), generated apart so
/// the deterministic sessions of [`generated_sessions_reach_deep_states`] keep their coverage.
fn lines_with_timers() -> impl Strategy<Value = Vec<Line>> {
    prop::collection::vec(
        prop_oneof![
            10 => cmd().prop_map(Line::Valid),
            1 => prop::option::of(0u64..8000).prop_map(|now| Line::Valid(Cmd::Continue(now))),
            1 => (0u64..8000).prop_map(|now| Line::Valid(Cmd::Timeout(now))),
            1 => malformed().prop_map(Line::Malformed),
        ],
        1..48,
    )
}

// ----- the property ----------------------------------------------------------------------------

/// The driver's lines for a valid command, computed from the library directly.
fn reference_lines(
    cmd: &Cmd,
    n: u64,
    agent: &mut Agent,
    context: &mut ContextMode,
    sent: &mut runcore::driver::SentContext,
) -> Vec<String> {
    let (input, now_ms) = cmd.to_input(agent);
    let mut lines = Vec::new();
    match agent.handle(input, now_ms.unwrap_or(agent.clock_ms())) {
        Err(error) => lines.push(error_line(n, &error)),
        Ok(()) => {
            if let Cmd::Config { context: mode, .. } = cmd {
                *context = mode.unwrap_or_default();
            }
        }
    }
    while let Some(output) = agent.poll() {
        lines.push(render_output_line(agent, &output, *context, sent));
    }
    lines.push(idle_line(n, agent.poll_timeout()));
    lines
}

fn check(lines: &[Line]) -> Result<(), TestCaseError> {
    let mut driver = Driver::new();
    let mut agent = Agent::new(AgentConfig::default()).expect("the default config is valid");
    let mut context = ContextMode::Full;
    let mut sent = runcore::driver::SentContext::default();
    for (i, line) in lines.iter().enumerate() {
        let n = i as u64 + 1;
        let (bytes, expected) = match line {
            Line::Valid(cmd) => {
                let bytes = cmd.to_json(&agent).to_string().into_bytes();
                let expected = reference_lines(cmd, n, &mut agent, &mut context, &mut sent);
                (bytes, Some(expected))
            }
            Line::Malformed(bad) => (bad.bytes(&agent), None),
        };
        let out = driver.handle_line(&bytes);
        let idle = idle_line(n, agent.poll_timeout());
        prop_assert_eq!(out.last(), Some(&idle), "line {} ends with its idle", n);
        let idles = out
            .iter()
            .filter(|l| l.starts_with(r#"{"type":"idle""#))
            .count();
        prop_assert_eq!(idles, 1, "exactly one idle for line {}", n);
        match expected {
            Some(expected) => prop_assert_eq!(out, expected, "line {}", n),
            None => {
                prop_assert_eq!(out.len(), 2, "line {}: one error, then idle: {:?}", n, out);
                let error: Value = serde_json::from_str(&out[0]).expect("JSON");
                prop_assert_eq!(&error["type"], "error");
                prop_assert_eq!(&error["line"], &json!(n));
                prop_assert_eq!(&error["error"]["kind"], "invalid_json", "{:?}", bytes);
                prop_assert!(
                    error["error"]["message"]
                        .as_str()
                        .is_some_and(|m| !m.is_empty())
                );
            }
        }
    }
    prop_assert_eq!(driver.lines_handled(), lines.len() as u64);
    // Malformed lines changed nothing: the driven agent is the reference agent.
    prop_assert_eq!(driver.agent().snapshot_json(), agent.snapshot_json());
    Ok(())
}

proptest! {
    #![proptest_config(common::proptest_config("proptest-regressions/driver_properties.txt", 256))]

    #[test]
    fn driver_lines_equal_the_library_driven_directly(lines in lines()) {
        check(&lines)?;
    }

    #[test]
    fn driver_lines_equal_the_library_with_continue_and_timeouts(lines in lines_with_timers()) {
        check(&lines)?;
    }
}

/// The generator reaches the states that matter, so the property is not vacuous.
#[test]
fn generated_sessions_reach_deep_states() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::BTreeSet::new();
    let expected = [
        "call_model",
        "execute_tools",
        "commit",
        "awaiting",
        "resumed",
        "tool_end",
        "natural_end",
        "cancelled",
        "invalid_json",
        "unexpected_outcome",
        "busy",
        "max_steps",
        "stopped",
        "indeterminate",
        "message_appended",
        "thinking_delta",
    ];
    // Sessions until every expected kind was seen (a bounded number: the generator is
    // deterministic, so this always ends the same way).
    for _ in 0..512 {
        if expected.iter().all(|kind| seen.contains(*kind)) {
            break;
        }
        let lines = lines().new_tree(&mut runner).expect("a tree").current();
        let mut driver = Driver::new();
        for line in &lines {
            let bytes = match line {
                Line::Valid(cmd) => cmd.to_json(driver.agent()).to_string().into_bytes(),
                Line::Malformed(bad) => bad.bytes(driver.agent()),
            };
            for out in driver.handle_line(&bytes) {
                let value: Value = serde_json::from_str(&out).expect("JSON");
                let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
                let kind = match value["type"].as_str() {
                    Some("event") => match value["event"]["type"].as_str() {
                        Some("loop") => text(&value["event"]["event"]["type"]),
                        Some("run_end") => text(&value["event"]["result"]["cause"]["type"]),
                        _ => text(&value["event"]["type"]),
                    },
                    Some("error") => text(&value["error"]["kind"]),
                    _ => text(&value["type"]),
                };
                seen.insert(kind);
            }
        }
    }

    for expected in expected {
        assert!(
            seen.contains(expected),
            "never reached {expected}: {seen:?}"
        );
    }
}
