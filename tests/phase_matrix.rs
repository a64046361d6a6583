//! The table is code (issue 8): every input kind of [`Input`] in every phase an agent can be
//! in between inputs, each cell from a fresh agent brought into its phase through the public
//! API. A cell records the error kind of a rejected input (and checks the snapshot is
//! byte-identical, the clock included) or, on success, the kinds of the outputs drained and
//! the phase after them. The whole matrix is snapshotted as `phase_matrix__phase_matrix.snap`;
//! the transition table at the top of `src/agent/run_loop.rs` lists the same outcomes.

mod common;

use runcore::*;
use serde_json::json;

/// The time of every setup input.
const SETUP_MS: u64 = 0;
/// The permission tool's deadline, counted from its ticket's minting at `SETUP_MS`.
const DEADLINE_AFTER_MS: u64 = 1_000;

fn config() -> AgentConfig {
    AgentConfig::default()
        .with_tool("echo", ToolSpec::auto("echo"))
        .with_tool("rm", ToolSpec::gated("remove", Some(DEADLINE_AFTER_MS)))
}

fn run1() -> RunId {
    RunId::new("thread-1/run-1")
}

fn calls(name: &str) -> AssistantMessage {
    AssistantMessage::new(
        vec![AssistantBlock::tool_call("c1", name, json!({}))],
        StopReason::ToolUse,
    )
}

/// Drains only what is queued: the action a `poll` would decide is not handed out.
fn drain_queued(agent: &mut Agent) {
    while agent.pending_outputs() > 0 {
        let _ = agent.poll();
    }
}

/// A phase: its name, how to reach it, and the time its inputs arrive at.
struct Setup {
    name: &'static str,
    reach: fn(&mut Agent),
    now_ms: u64,
}

fn phases() -> Vec<Setup> {
    vec![
        Setup {
            name: "idle, empty transcript",
            reach: |_| {},
            now_ms: 100,
        },
        Setup {
            name: "idle after a run (natural end)",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                let _ = a.drain();
                a.model_done(&run1(), 1, AssistantMessage::text("hello"))
                    .unwrap();
                let _ = a.drain();
            },
            now_ms: 100,
        },
        Setup {
            name: "Running: CallModel (action not yet polled)",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                drain_queued(a);
            },
            now_ms: 100,
        },
        Setup {
            name: "Running: ModelOutstanding (step 1)",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                let _ = a.drain();
            },
            now_ms: 100,
        },
        Setup {
            name: "Running: ModelOutstanding (step 1), a delta of its answer arrived",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                let _ = a.drain();
                a.model_delta(&run1(), 1, "hel").unwrap();
                let _ = a.drain();
            },
            now_ms: 100,
        },
        Setup {
            name: "Running: Tools not dispatched (ExecuteTools not yet polled)",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                let _ = a.drain();
                a.model_done(&run1(), 1, calls("echo")).unwrap();
                drain_queued(a);
            },
            now_ms: 100,
        },
        Setup {
            name: "Running: Tools dispatched (c1 executing)",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                let _ = a.drain();
                a.model_done(&run1(), 1, calls("echo")).unwrap();
                let _ = a.drain();
            },
            now_ms: 100,
        },
        Setup {
            name: "Awaiting: permission ticket (before deadline)",
            reach: reach_permission,
            now_ms: 100,
        },
        Setup {
            name: "Awaiting: permission ticket (past deadline)",
            reach: reach_permission,
            now_ms: 5_000,
        },
        Setup {
            name: "Awaiting: manual pause",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                let _ = a.drain();
                a.pause().unwrap();
                a.model_done(&run1(), 1, AssistantMessage::text("paused here"))
                    .unwrap();
                let _ = a.drain();
            },
            now_ms: 100,
        },
    ]
}

fn reach_permission(a: &mut Agent) {
    a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
    let _ = a.drain();
    a.model_done(&run1(), 1, calls("rm")).unwrap();
    let _ = a.drain();
}

const KINDS: [&str; 20] = [
    "prompt",
    "steer",
    "follow_up",
    "abort",
    "pause",
    "model_delta",
    "model_done",
    "model_failed",
    "tool_progress",
    "tool_done",
    "resume",
    "resume_ticket",
    "cancel_wait",
    "stop",
    "expire_wait",
    "abandon_tools",
    "continue",
    "timeout",
    "config",
    "compact",
];

/// The answer that fits the agent's wait (text input when there is none).
fn fitting_result(agent: &Agent) -> ResumeResult {
    match agent.current_ticket().map(|t| t.target()) {
        Some(AwaitTarget::ToolCall { .. }) => {
            ResumeResult::Permission(PermissionDecision::Allow { note: None })
        }
        _ => ResumeResult::Input("go on".into()),
    }
}

/// The input of `kind`, addressed to what the agent has out (run 1, step 1, call c1 when it
/// has nothing of that kind out).
fn input(kind: &str, agent: &Agent, now_ms: u64) -> Input {
    let run_id = agent.active_run_id().cloned().unwrap_or_else(run1);
    let step = agent.steps().filter(|s| *s > 0).unwrap_or(1);
    match kind {
        "prompt" => Input::Prompt {
            message: UserMessage::text("new prompt"),
            run_id: None,
        },
        "steer" => Input::Steer {
            message: UserMessage::text("steer"),
        },
        "follow_up" => Input::FollowUp {
            message: UserMessage::text("follow"),
        },
        "abort" => Input::Abort,
        "pause" => Input::Pause,
        "model_delta" => Input::ModelDelta {
            run_id,
            step,
            text: "delta".into(),
        },
        "model_done" => Input::ModelDone {
            run_id,
            step,
            message: AssistantMessage::text("answer"),
        },
        "model_failed" => Input::ModelFailed {
            run_id,
            step,
            code: "overloaded".into(),
            message: "try later".into(),
        },
        "tool_progress" => Input::ToolProgress {
            run_id,
            call_id: CallId::new("c1"),
            content: vec![ContentBlock::text("50%")],
        },
        "tool_done" => Input::ToolDone {
            run_id,
            call_id: CallId::new("c1"),
            content: vec![ContentBlock::text("ok")],
            is_error: false,
            details: None,
        },
        "resume" => Input::Resume {
            command: match agent.current_ticket() {
                Some(ticket) => ResumeCommand::from_ticket(ticket, fitting_result(agent), now_ms),
                // No ticket: a command with a plausible identity.
                None => ResumeCommand {
                    correlation_id: "thread-1/run-1:wait-1".into(),
                    run_id,
                    thread_id: ThreadId::new("thread-1"),
                    snapshot_id: "default".into(),
                    catalog_fingerprint: "none".into(),
                    result: ResumeResult::Input("go on".into()),
                    context_messages: vec![],
                    now_ms,
                },
            },
        },
        "resume_ticket" => Input::ResumeTicket {
            result: fitting_result(agent),
        },
        "cancel_wait" => Input::CancelWait,
        "stop" => Input::Stop {
            reason: "policy".into(),
        },
        "expire_wait" => Input::ExpireWait,
        "abandon_tools" => Input::AbandonTools,
        "continue" => Input::Continue,
        "timeout" => Input::Timeout,
        "config" => Input::Config(config()),
        // The whole transcript kept: valid wherever compaction is allowed at all.
        "compact" => Input::Compact {
            summary: UserMessage::text("summary"),
            keep_from: agent.transcript().len().min(1),
        },
        other => panic!("unknown input kind {other}"),
    }
}

fn cause(cause: &EndCause) -> String {
    match cause {
        EndCause::NaturalEnd => "natural_end".into(),
        EndCause::MaxSteps => "max_steps".into(),
        EndCause::Cancelled => "cancelled".into(),
        EndCause::Stopped(reason) => format!("stopped({reason})"),
        EndCause::Error(_) => "error".into(),
        EndCause::Indeterminate => "indeterminate".into(),
    }
}

fn render_output(output: &Output) -> String {
    match output {
        Output::Commit(commit) => {
            let run = match &commit.commit.run {
                RunDisposition::Running { .. } => "running".to_owned(),
                RunDisposition::Awaiting(_) => "awaiting".to_owned(),
                RunDisposition::Ended { cause: c, .. } => format!("ended:{}", cause(c)),
            };
            format!("commit[{run}]")
        }
        Output::Event(event) => {
            let value = serde_json::to_value(event).unwrap();
            match value["type"].as_str().unwrap() {
                // A loop event names its inner kind.
                "loop" => value["event"]["type"].as_str().unwrap().to_owned(),
                kind => kind.to_owned(),
            }
        }
        Output::Action(action) => {
            let value = serde_json::to_value(action).unwrap();
            format!("action[{}]", value["type"].as_str().unwrap())
        }
    }
}

/// The phase the agent is in between inputs, from its getters; for a Running run without a
/// model call out, the snapshot's phase tells a model call about to be handed out from a tool
/// batch (dispatched or not), and its pending end or pause request is shown.
fn phase(agent: &Agent) -> String {
    let snapshot: serde_json::Value = serde_json::from_str(&agent.snapshot_json()).unwrap();
    let active = &snapshot["agent"]["active"];
    let mut text = match agent.run_state() {
        None if agent.transcript().is_empty() => "idle(empty)".to_owned(),
        None => match agent.last_end() {
            Some((_, c)) => format!("idle(last={})", cause(c)),
            None => "idle".to_owned(),
        },
        Some(RunState::Awaiting) => match agent.current_ticket().map(|t| t.target()) {
            Some(AwaitTarget::ToolCall { .. }) => "awaiting(permission)".to_owned(),
            Some(AwaitTarget::Pause(_)) => "awaiting(pause)".to_owned(),
            other => format!("awaiting({other:?})"),
        },
        Some(_) => match agent.model_request() {
            Some(request) => format!("model_out(step {})", request.step),
            None => match &active["phase"] {
                serde_json::Value::String(phase) if phase == "call_model" => {
                    "call_model".to_owned()
                }
                phase if phase["tools_out"].is_object() => "tools_out".to_owned(),
                phase if phase["tools_ready"].is_object() => "tools_ready".to_owned(),
                phase => panic!("unexpected running phase {phase}"),
            },
        },
    };
    let (steering, follow_ups) = agent.queued();
    if steering + follow_ups > 0 {
        text.push_str(&format!(" queued=({steering},{follow_ups})"));
    }
    let run = &active["run"];
    if let Some(end) = run.get("end_request").filter(|e| !e.is_null()) {
        text.push_str(&format!(" end_request={end}"));
    }
    if run["pause_requested"] == true {
        text.push_str(" pause_requested");
    }
    text
}

#[test]
fn every_input_in_every_phase() {
    let mut text = String::new();
    let mut cells = 0;
    for setup in phases() {
        let mut probe = Agent::new(config()).unwrap();
        (setup.reach)(&mut probe);
        text.push_str(&format!(
            "== {} [{}] (inputs at now_ms={})\n",
            setup.name,
            phase(&probe),
            setup.now_ms
        ));
        for kind in KINDS {
            let mut agent = Agent::new(config()).unwrap();
            (setup.reach)(&mut agent);
            assert_eq!(agent.pending_outputs(), 0, "{}: setup drained", setup.name);
            let input = input(kind, &agent, setup.now_ms);
            assert_eq!(input.kind(), kind);
            let before = agent.snapshot_json();
            let clock_before = agent.clock_ms();
            let outcome = match agent.handle(input, setup.now_ms) {
                Err(err) => {
                    assert_eq!(
                        agent.snapshot_json(),
                        before,
                        "{} × {kind}: a rejected input changed the agent",
                        setup.name
                    );
                    assert_eq!(agent.clock_ms(), clock_before);
                    match &err {
                        AgentError::Resume(resume) => format!("ERR resume({})", resume.code()),
                        _ => format!("ERR {}", err.kind()),
                    }
                }
                Ok(()) => {
                    let outputs: Vec<String> = agent.drain().iter().map(render_output).collect();
                    let outputs = if outputs.is_empty() {
                        "(no output)".to_owned()
                    } else {
                        outputs.join(", ")
                    };
                    format!("ok → {} | {outputs}", phase(&agent))
                }
            };
            text.push_str(&format!("  {kind:<14} {outcome}\n"));
            cells += 1;
        }
        text.push('\n');
    }
    text.push_str(&format!("{cells} cells\n"));
    assert_eq!(cells, KINDS.len() * phases().len());
    common::snapshot!("phase_matrix", text);
}
