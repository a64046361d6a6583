//! The table is code (issue 8): every input kind of [`Input`] in every phase an agent can be
//! in between inputs, each cell from a fresh agent brought into its phase through the public
//! API. A cell records the error kind of a rejected input (and checks the snapshot is
//! byte-identical, the clock included) or, on success, the kinds of the outputs drained and
//! the phase after them. The whole matrix is snapshotted as `phase_matrix__phase_matrix.snap`;
//! the transition table at the top of `src/agent/run_loop/mod.rs` lists the same outcomes.

mod common;

use std::collections::BTreeMap;

use runcore::store::*;
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
            name: "Awaiting: remote input (recovered)",
            reach: reach_remote_input,
            now_ms: 100,
        },
        Setup {
            name: "Running: ModelOutstanding (step 1), abort requested",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                let _ = a.drain();
                a.abort().unwrap();
                drain_queued(a);
            },
            now_ms: 100,
        },
        Setup {
            name: "Running: ModelOutstanding (step 1), pause requested",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                let _ = a.drain();
                a.pause().unwrap();
                drain_queued(a);
            },
            now_ms: 100,
        },
        Setup {
            name: "Running: Tools dispatched (c1 executing), abort requested",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                let _ = a.drain();
                a.model_done(&run1(), 1, calls("echo")).unwrap();
                let _ = a.drain();
                a.abort().unwrap();
                drain_queued(a);
            },
            now_ms: 100,
        },
        Setup {
            name: "Running: Tools dispatched (c1 executing), pause requested",
            reach: |a| {
                a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
                let _ = a.drain();
                a.model_done(&run1(), 1, calls("echo")).unwrap();
                let _ = a.drain();
                a.pause().unwrap();
                drain_queued(a);
            },
            now_ms: 100,
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

/// A run waiting on remote input ([`AwaitTarget::RemoteInput`]): no agent opens such a wait
/// itself, so the agent recovers it from what another writer committed (a Running commit and
/// an Awaiting commit on the ticket), as a host resuming that thread does.
fn reach_remote_input(a: &mut Agent) {
    let thread = ThreadId::new("thread-1");
    let cfg = config();
    let mut store = MemoryStore::new();
    let running = ThreadCommit::assemble(
        thread.clone(),
        RunDisposition::Running { run_id: run1() },
        true,
        vec![
            Message::user("summarise my file"),
            Message::from(AssistantMessage::text("which file?")),
        ],
        Vec::new(),
        vec![AuditDraft::run_started(&run1(), 0)],
    );
    store.commit(running).unwrap();
    let identity = WaitIdentity {
        correlation_id: "thread-1/run-1:wait-1".into(),
        run_id: run1(),
        thread_id: thread.clone(),
        snapshot_id: cfg.snapshot_id.clone(),
        catalog_fingerprint: cfg.catalog_fingerprint.clone(),
    };
    let target = AwaitTarget::RemoteInput {
        reason: RemoteInputReason::UserInput,
        call_id: CallId::new("q1"),
    };
    let ticket = ResumeTicket::new(identity, target, None);
    let awaiting = ThreadCommit::assemble(
        thread.clone(),
        RunDisposition::Awaiting(Box::new(ticket)),
        true,
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    store.commit(awaiting).unwrap();
    *a = Agent::recover(cfg, &store, &thread, RecoveryPolicy::Replay).unwrap();
    let _ = a.drain();
}

fn reach_permission(a: &mut Agent) {
    a.prompt(UserMessage::text("hi"), SETUP_MS).unwrap();
    let _ = a.drain();
    a.model_done(&run1(), 1, calls("rm")).unwrap();
    let _ = a.drain();
}

const KINDS: [&str; 23] = [
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
    "import",
    "clear_queues",
    "set_queue_modes",
];

/// The row of `input` in [`KINDS`], by an exhaustive `match` (no `_` arm): a new variant of
/// [`Input`] does not compile here until it has a row. Give it the next index, its name in
/// [`KINDS`] and an arm in [`input`]; `every_input_has_a_row` checks the three agree.
fn row(input: &Input) -> usize {
    match input {
        Input::Prompt { .. } => 0,
        Input::Steer { .. } => 1,
        Input::FollowUp { .. } => 2,
        Input::Abort => 3,
        Input::Pause => 4,
        Input::ModelDelta { .. } => 5,
        Input::ModelDone { .. } => 6,
        Input::ModelFailed { .. } => 7,
        Input::ToolProgress { .. } => 8,
        Input::ToolDone { .. } => 9,
        Input::Resume { .. } => 10,
        Input::ResumeTicket { .. } => 11,
        Input::CancelWait => 12,
        Input::Stop { .. } => 13,
        Input::ExpireWait => 14,
        Input::AbandonTools => 15,
        Input::Continue => 16,
        Input::Timeout => 17,
        Input::Config(_) => 18,
        Input::Compact { .. } => 19,
        Input::Import { .. } => 20,
        Input::ClearQueues => 21,
        Input::SetQueueModes { .. } => 22,
    }
}

#[test]
fn every_input_has_a_row() {
    let agent = Agent::new(config()).unwrap();
    for (index, kind) in KINDS.iter().enumerate() {
        let input = input(kind, &agent, 100);
        assert_eq!(input.kind(), *kind, "KINDS[{index}] builds its own kind");
        assert_eq!(row(&input), index, "{kind} is row {index}");
    }
}

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
            message: Some(UserMessage::text("new prompt")),
            run_id: None,
            messages: Vec::new(),
        },
        "steer" => Input::Steer {
            message: UserMessage::text("steer"),
        },
        "import" => Input::Import {
            messages: vec![runcore::Message::user("imported")],
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
            kind: runcore::DeltaKind::Text,
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
            retry_after_ms: None,
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
            meta: Default::default(),
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
        "clear_queues" => Input::ClearQueues,
        "set_queue_modes" => Input::SetQueueModes {
            steering_mode: Some(QueueMode::OneAtATime),
            follow_up_mode: None,
        },
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
                // With how many steering messages and follow-ups it withdrew.
                "queues_cleared" => format!(
                    "queues_cleared({},{})",
                    value["steering"].as_array().unwrap().len(),
                    value["follow_ups"].as_array().unwrap().len()
                ),
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
            Some(AwaitTarget::RemoteInput { .. }) => "awaiting(remote)".to_owned(),
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

/// Every cell of the matrix: `(phase name, input kind) → outcome`, and the rendered text.
fn matrix() -> (BTreeMap<(&'static str, &'static str), String>, String) {
    let mut cells = BTreeMap::new();
    let mut text = String::new();
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
            cells.insert((setup.name, kind), outcome);
        }
        text.push('\n');
    }
    text.push_str(&format!("{} cells\n", cells.len()));
    (cells, text)
}

#[test]
fn every_input_in_every_phase() {
    let (cells, text) = matrix();
    assert_eq!(cells.len(), KINDS.len() * phases().len());
    common::snapshot!("phase_matrix", text);
}

/// The phase a column of the doc tables in `src/agent/run_loop/mod.rs` stands for.
fn column_phase(column: &str) -> &'static str {
    match column {
        "idle0" => "idle, empty transcript",
        "idle" => "idle after a run (natural end)",
        "call_model" | "CallModel" => "Running: CallModel (action not yet polled)",
        "model_out" | "ModelOut" => "Running: ModelOutstanding (step 1)",
        "tools_ready" | "ToolsReady" => {
            "Running: Tools not dispatched (ExecuteTools not yet polled)"
        }
        "tools_out" | "ToolsOut" => "Running: Tools dispatched (c1 executing)",
        "perm" | "Wait::Call" => "Awaiting: permission ticket (before deadline)",
        "perm_late" => "Awaiting: permission ticket (past deadline)",
        "pause" | "Wait::Pause" => "Awaiting: manual pause",
        "remote" | "Wait::Remote" => "Awaiting: remote input (recovered)",
        other => panic!("the doc table names a phase the matrix does not have: {other}"),
    }
}

/// The names in backticks in `text`.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Checks one cell of the doc's phase × input table against the matrix's outcome.
fn check_doc_cell(doc: &str, outcome: &str) -> Result<(), String> {
    let doc = doc.trim();
    let error = |code: &str| {
        let expected = format!("ERR {code}");
        (outcome == expected)
            .then_some(())
            .ok_or_else(|| format!("the doc says {doc:?}, the matrix {outcome:?}"))
    };
    let first = quoted(doc).first().copied().unwrap_or("");
    if doc.starts_with('`') {
        match first {
            "UO" => return error("unexpected_outcome"),
            "IS" => return error("invalid_state"),
            "NA" => return error("not_accepting"),
            "busy" | "not_expired" => return error(first),
            code if code.starts_with("resume(") => return error(code),
            _ => {}
        }
    }
    let accepted = outcome.starts_with("ok → ");
    let (after, outputs) = outcome.split_once(" | ").unwrap_or((outcome, ""));
    let holds = if doc == "-" {
        outputs
            .split(", ")
            .all(|o| o == "(no output)" || o.starts_with("action["))
    } else if doc == "queued" {
        after.contains("queued=")
    } else if doc == "req" {
        after.contains("end_request=") || after.contains("pause_requested")
    } else if let Some(cause) = doc.strip_prefix("finish(") {
        // `finish(Stopped("wait_expired"))` → `stopped(wait_expired`.
        let cause = cause.trim_end_matches(')').replace('"', "").to_lowercase();
        outputs.contains("run_end") && after.contains(&format!("idle(last={cause}"))
    } else {
        // Anything else the doc says is an accepted input.
        true
    };
    (accepted && holds)
        .then_some(())
        .ok_or_else(|| format!("the doc says {doc:?}, the matrix {outcome:?}"))
}

#[test]
fn the_doc_tables_say_what_the_matrix_does() {
    let (cells, _) = matrix();
    let source = include_str!("../src/agent/run_loop/mod.rs");
    let rows: Vec<Vec<&str>> = source
        .lines()
        .filter_map(|line| line.strip_prefix("//! |"))
        .map(|row| {
            row.trim_end()
                .trim_end_matches('|')
                .split('|')
                .map(str::trim)
                .collect()
        })
        .collect();
    let mut failures = Vec::new();

    // The first table: an input per row, a phase per column.
    let header = rows
        .iter()
        .find(|row| row.first() == Some(&"input"))
        .expect("the phase × input table");
    let columns: Vec<&'static str> = header[1..].iter().map(|c| column_phase(c)).collect();
    let mut checked = 0;
    for row in rows.iter().filter(|row| row.len() == header.len()) {
        let Some(kind) = quoted(row[0])
            .first()
            .copied()
            .filter(|k| KINDS.contains(k))
        else {
            continue;
        };
        let kind = KINDS.iter().copied().find(|k| *k == kind).unwrap();
        for (cell, phase) in row[1..].iter().zip(&columns) {
            let mut doc = *cell;
            // `as `k``: the cell of input `k` in the same column.
            let mut outcome_kind = kind;
            if let Some(other) = doc.strip_prefix("as ") {
                let other = quoted(other)[0];
                outcome_kind = KINDS.iter().copied().find(|k| *k == other).unwrap();
                let other_row = rows
                    .iter()
                    .find(|r| r.len() == header.len() && quoted(r[0]).first() == Some(&other))
                    .expect("the row it refers to");
                doc = other_row[1 + columns.iter().position(|p| p == phase).unwrap()];
            }
            let outcome = &cells[&(*phase, outcome_kind)];
            if let Err(why) = check_doc_cell(doc, outcome) {
                failures.push(format!("{kind} × {phase}: {why}"));
            }
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        KINDS.len() * columns.len(),
        "every input has a row"
    );

    // The second table: `| phase | input | outputs → next phase |`. Every input it names in a
    // phase is accepted there, and an output it names is emitted.
    let mut steps = 0;
    for row in rows.iter().filter(|row| row.len() == 3) {
        let (phases_cell, inputs_cell, outputs_cell) = (row[0], row[1], row[2]);
        let phase_names: Vec<&str> = match phases_cell {
            "(idle)" => vec!["idle0", "idle"],
            "`Waiting`" => vec!["perm", "pause", "remote"],
            other => quoted(other)
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect(),
        };
        let kinds: Vec<&'static str> = quoted(inputs_cell)
            .into_iter()
            .filter_map(|k| KINDS.iter().copied().find(|known| *known == k))
            .collect();
        if phase_names.is_empty() || kinds.is_empty() || phases_cell == "phase" {
            continue;
        }
        let late = inputs_cell.contains("past deadline");
        for name in &phase_names {
            let phase = match (*name, late) {
                ("perm", true) => column_phase("perm_late"),
                (name, _) => column_phase(name),
            };
            if late && phase != column_phase("perm_late") {
                continue;
            }
            for kind in &kinds {
                // `continue` on idle needs a transcript that does not end in the answer.
                if *kind == "continue" {
                    continue;
                }
                let outcome = &cells[&(phase, *kind)];
                let mut problems = Vec::new();
                if !outcome.starts_with("ok → ") {
                    problems.push("refused");
                }
                if outputs_cell.contains("finish") && inputs_cell.contains('/') {
                    // `abort` / `stop` rows: each ends the run.
                    if !outcome.contains("run_end") {
                        problems.push("no run_end");
                    }
                }
                if !problems.is_empty() {
                    failures.push(format!(
                        "steps table: {name} × {kind} ({}): {outcome:?}",
                        problems.join(", ")
                    ));
                }
                steps += 1;
            }
        }
    }
    assert!(steps >= 20, "the steps table was read ({steps} cells)");
    assert!(
        failures.is_empty(),
        "the doc tables disagree with the matrix:\n{}",
        failures.join("\n")
    );
}
