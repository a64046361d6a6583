//! SPEC §8.8 (continue), §8.5 (timers: `poll_timeout` / `handle_timeout`, one door for time)
//! and §12.1 (the driver's `continue` and `timeout` lines, `idle.timeout_ms`).

mod common;

use common::harness::{Harness, Reply};
use runcore::driver::Driver;
use runcore::store::*;
use runcore::*;
use serde_json::{Value, json};

fn gated(deadline_after_ms: Option<u64>) -> AgentConfig {
    AgentConfig::default().with_tool("rm", ToolSpec::gated("remove a file", deadline_after_ms))
}

fn run(n: u32) -> RunId {
    RunId::new(format!("thread-1/run-{n}"))
}

// ----- §8.8 continue ----------------------------------------------------------------------------

#[test]
fn continue_after_max_steps_starts_a_new_run_over_the_transcript() {
    let config = AgentConfig {
        max_steps: 1,
        ..AgentConfig::default()
    };
    let mut h = Harness::new(config);
    h.script([Reply::call("c1", "echo", json!({})), Reply::text("done")]);
    h.prompt("go").unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::MaxSteps);
    // The transcript ends in the tool result: the run can be continued.
    assert!(matches!(
        h.agent.transcript().last(),
        Some(Message::ToolResult(_))
    ));
    let transcript_before = h.agent.transcript().len();

    h.input_at("continue", Input::Continue, 7).unwrap();
    // The new run's first commit carries no message and changes the state; run_start has no
    // message; the first action is the model call over the transcript as it stands.
    let first = h.commits[h.commits.len() - 1].clone();
    assert_eq!(first.run, RunDisposition::Running { run_id: run(2) });
    assert!(first.messages.is_empty());
    assert_eq!(first.events[0].kind(), "run_state_changed");
    assert_eq!(
        first.events[1],
        AuditDraft::RunStarted {
            run_id: run(2),
            transcript_start: transcript_before,
            now_ms: Some(7)
        }
    );
    let start = h
        .events
        .iter()
        .rev()
        .find(|e| matches!(e, AgentEvent::RunStart { .. }))
        .unwrap();
    assert_eq!(
        start,
        &AgentEvent::RunStart {
            run_id: run(2),
            message: None,
            messages: Vec::new()
        }
    );
    assert_eq!(
        serde_json::to_value(start).unwrap(),
        json!({"type": "run_start", "run_id": "thread-1/run-2"})
    );
    let request = h.agent.model_request().expect("the model is called");
    assert_eq!(request.step, 1);
    assert_eq!(request.messages.len(), transcript_before);
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    // The reducer, fed the events, agrees with the committed transcript.
    assert_eq!(h.reducer.messages, h.agent.transcript());
}

#[test]
fn continue_is_refused_with_a_reason_or_busy() {
    let mut agent = Agent::new(AgentConfig::default()).unwrap();
    let empty = agent.continue_run(0).unwrap_err();
    assert_eq!(empty.kind(), "invalid_state");
    assert!(empty.to_string().contains("transcript is empty"), "{empty}");

    agent.prompt(UserMessage::text("hi"), 0).unwrap();
    assert_eq!(
        agent.continue_run(0).unwrap_err(),
        AgentError::Busy { active_run: run(1) }
    );
    let _ = agent.drain();
    agent
        .model_done(&run(1), 1, AssistantMessage::text("hello"))
        .unwrap();
    let _ = agent.drain();
    let before = agent.snapshot_json();
    let answered = agent.continue_run(5).unwrap_err();
    assert_eq!(answered.kind(), "invalid_state");
    assert!(
        answered.to_string().contains("model's own answer"),
        "{answered}"
    );
    // Rejected: nothing changed, the clock included.
    assert_eq!(agent.snapshot_json(), before);
    assert_eq!(agent.clock_ms(), 0);
}

#[test]
fn continue_is_refused_after_a_system_message() {
    // A transcript ending in a system message, recovered from a store.
    let mut store = MemoryStore::new();
    let commit = ThreadCommit::assemble(
        "thread-1".into(),
        RunDisposition::Ended {
            run_id: "outside".into(),
            cause: EndCause::NaturalEnd,
        },
        true,
        vec![
            Message::user("hi"),
            Message::from(SystemMessage::text("a note")),
        ],
        vec![],
        vec![],
    );
    store.commit(commit).unwrap();
    let mut agent = Agent::recover(
        AgentConfig::default(),
        &store,
        &ThreadId::new("thread-1"),
        RecoveryPolicy::Replay,
    )
    .unwrap();
    let err = agent.continue_run(0).unwrap_err();
    assert_eq!(err.kind(), "invalid_state");
    assert!(err.to_string().contains("system message"), "{err}");
}

#[test]
fn a_sealed_run_can_be_continued() {
    // Recovery seals a run whose tools were out: the transcript ends in `interrupted` results
    // and the host may continue from there (SPEC §8.8).
    let mut h = Harness::new(AgentConfig::default());
    h.script([Reply::call("c1", "echo", json!({}))]);
    h.prompt("go").unwrap();
    h.step(); // the model asks for the tool
    h.drain();
    assert!(!h.pending_tools.is_empty(), "the tool is out");
    let store = h.store.clone();
    let mut cold = Harness::recover(AgentConfig::default(), store, RecoveryPolicy::Seal).unwrap();
    assert_eq!(cold.last_cause(), &EndCause::Indeterminate);
    cold.script([Reply::text("recovered")]);
    cold.input("continue", Input::Continue).unwrap();
    cold.drive();
    assert_eq!(cold.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(cold.agent.last_end().unwrap().0, &run(2));
}

// ----- §8.5 timers and one door for time --------------------------------------------------------

#[test]
fn poll_timeout_names_the_first_moment_a_wait_is_past_its_deadline() {
    let mut h = Harness::new(gated(Some(1_000)));
    h.script([Reply::call("c1", "rm", json!({})), Reply::text("done")]);
    assert_eq!(h.agent.poll_timeout(), None, "nothing is due while idle");
    h.clock_ms = 500;
    h.prompt("tidy").unwrap();
    h.drive();
    assert_eq!(h.agent.current_ticket().unwrap().deadline_ms, Some(1_500));
    assert_eq!(h.agent.poll_timeout(), Some(1_501));

    // Early or exactly at the deadline: a no-op (the clock still advances).
    for now in [900, 1_500] {
        let before = h.commits.len();
        h.input_at("timeout", Input::Timeout, now).unwrap();
        assert_eq!(h.commits.len(), before);
        assert_eq!(h.agent.clock_ms(), now);
        assert_eq!(h.agent.run_state(), Some(RunState::Awaiting));
    }
    // Due: the wait expires as `expire_wait` says.
    h.input_at("timeout", Input::Timeout, 1_501).unwrap();
    assert_eq!(h.last_cause(), &EndCause::Stopped("wait_expired".into()));
    let last = h.commits.last().unwrap();
    assert!(matches!(
        last.messages.last(),
        Some(Message::ToolResult(r)) if r.outcome == ResultOutcome::Expired
    ));
    assert_eq!(h.agent.poll_timeout(), None);
    // Nothing active: still a harmless no-op.
    h.input_at("timeout", Input::Timeout, 9_000).unwrap();
    assert_eq!(h.agent.clock_ms(), 9_000);
}

#[test]
fn a_wait_without_a_deadline_sets_no_timer() {
    let mut h = Harness::new(gated(None));
    h.script([Reply::call("c1", "rm", json!({}))]);
    h.prompt("tidy").unwrap();
    h.drive();
    assert_eq!(h.agent.run_state(), Some(RunState::Awaiting));
    assert_eq!(h.agent.poll_timeout(), None);
    // The latest time any door takes (`runcore::limits::MAX_NOW_MS`).
    h.input_at("timeout", Input::Timeout, runcore::limits::MAX_NOW_MS)
        .unwrap();
    assert_eq!(h.agent.run_state(), Some(RunState::Awaiting));
}

#[test]
fn every_input_carries_time_the_same_way() {
    // A ticket minted by an input gets its deadline from that input's time, whichever input
    // it is (here a tool result that ends the batch, then a model answer asking for rm).
    let mut agent = Agent::new(gated(Some(100))).unwrap();
    agent.prompt(UserMessage::text("go"), 10).unwrap();
    let _ = agent.drain();
    let ask = AssistantMessage::new(
        vec![AssistantBlock::tool_call("c1", "rm", json!({}))],
        StopReason::ToolUse,
    );
    agent
        .handle(
            Input::ModelDone {
                run_id: run(1),
                step: 1,
                message: ask,
            },
            250,
        )
        .unwrap();
    assert_eq!(agent.current_ticket().unwrap().deadline_ms, Some(350));
    // Time never runs backwards.
    agent.handle(Input::Pause, 5).unwrap_err();
    assert_eq!(agent.clock_ms(), 250, "a rejected input leaves the clock");
    agent.handle(Input::Abort, 5).unwrap();
    assert_eq!(agent.clock_ms(), 250);
}

// ----- §12.1 the driver's lines -----------------------------------------------------------------

fn lines(driver: &mut Driver, line: Value) -> Vec<Value> {
    driver
        .handle_line(line.to_string().as_bytes())
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn driver_idle_carries_timeout_ms_and_a_timeout_line_expires_the_wait() {
    let mut driver = Driver::new();
    let config = json!({"type": "config", "tools": {"rm": {"policy": "require_approval", "deadline_after_ms": 100}}});
    assert_eq!(
        lines(&mut driver, config),
        [json!({"type": "idle", "line": 1})]
    );
    lines(
        &mut driver,
        json!({"type": "prompt", "text": "go", "now_ms": 1000}),
    );
    let out = lines(
        &mut driver,
        json!({"type": "model_done", "run_id": "thread-1/run-1", "step": 1,
               "message": {"content": [{"type": "tool_call", "id": "c1", "name": "rm", "arguments": {}}],
                           "stop_reason": "tool_use"}}),
    );
    assert_eq!(
        out.last().unwrap(),
        &json!({"type": "idle", "line": 3, "timeout_ms": 1101})
    );
    // A timeout line needs its time.
    let out = lines(&mut driver, json!({"type": "timeout"}));
    assert_eq!(out[0]["error"]["kind"], "invalid_json");
    // Early: nothing happens, the timer stays.
    let out = lines(&mut driver, json!({"type": "timeout", "now_ms": 1100}));
    assert_eq!(
        out,
        [json!({"type": "idle", "line": 5, "timeout_ms": 1101})]
    );
    // Due: the wait ends; no timer is left.
    let out = lines(&mut driver, json!({"type": "timeout", "now_ms": 1101}));
    let end = out
        .iter()
        .find(|v| v["event"]["type"] == "run_end")
        .expect("run_end");
    assert_eq!(
        end["event"]["result"]["cause"],
        json!({"type": "stopped", "reason": "wait_expired"})
    );
    assert_eq!(out.last().unwrap(), &json!({"type": "idle", "line": 6}));
}

#[test]
fn driver_continue_line() {
    let mut driver = Driver::new();
    let out = lines(&mut driver, json!({"type": "continue"}));
    assert_eq!(out[0]["error"]["kind"], "invalid_state");
    let out = lines(&mut driver, json!({"type": "continue", "extra": 1}));
    assert_eq!(out[0]["error"]["kind"], "invalid_json");
    lines(&mut driver, json!({"type": "config", "max_steps": 1}));
    lines(&mut driver, json!({"type": "prompt", "text": "go"}));
    lines(
        &mut driver,
        json!({"type": "model_done", "run_id": "thread-1/run-1", "step": 1,
               "message": {"content": [{"type": "tool_call", "id": "c1", "name": "echo", "arguments": {}}],
                           "stop_reason": "tool_use"}}),
    );
    let out = lines(
        &mut driver,
        json!({"type": "tool_done", "run_id": "thread-1/run-1", "call_id": "c1", "content": "ok"}),
    );
    let end = out
        .iter()
        .find(|v| v["event"]["type"] == "run_end")
        .expect("run_end");
    assert_eq!(
        end["event"]["result"]["cause"],
        json!({"type": "max_steps"})
    );
    // The transcript ends in the tool result: continue.
    let out = lines(&mut driver, json!({"type": "continue", "now_ms": 3}));
    let kinds: Vec<&str> = out.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["commit", "event", "call_model", "idle"]);
    assert_eq!(
        out[1]["event"],
        json!({"type": "run_start", "run_id": "thread-1/run-2"})
    );
    assert_eq!(out[0]["commit"]["messages"], json!([]));
    assert_eq!(out[0]["ordinal"], 0);
    assert_eq!(out[0]["expected_thread_version"], 3);
    assert_eq!(out[2]["messages"].as_array().unwrap().len(), 3);
    // The model answers; the run ends naturally, and the transcript ends in its answer.
    lines(
        &mut driver,
        json!({"type": "model_done", "run_id": "thread-1/run-2", "step": 1,
               "message": {"content": [{"type": "text", "text": "done"}], "stop_reason": "stop"}}),
    );
    let out = lines(&mut driver, json!({"type": "continue"}));
    assert_eq!(out[0]["error"]["kind"], "invalid_state");
}
