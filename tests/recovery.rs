//! Crash recovery (SPEC §8.7, §11 T6) and the snapshot envelope.
//!
//! Each recovery scenario records a warm part through the harness, then "crashes": the agent
//! is dropped (with every output it had not handed out yet) and only the store survives. A new
//! agent is rebuilt with [`Agent::recover`] from the store's committed facts, a harness is put
//! around it over the SAME store, and driving continues. Every scenario asserts what the
//! recovered agent does first, then that the cold path ends in the same committed facts as the
//! same scenario driven warm (no crash), and only then snapshots the trace of both parts.

mod common;

use common::harness::{Harness, Reply};
use runcore::store::*;
use runcore::*;
use serde_json::json;

// ----- helpers ---------------------------------------------------------------------------------

fn run(n: u64) -> RunId {
    RunId::new(format!("thread-1/run-{n}"))
}

fn thread() -> ThreadId {
    ThreadId::new("thread-1")
}

/// `rm` needs approval within 1 s; `ask` needs approval and never expires; `echo` is auto.
fn config() -> AgentConfig {
    AgentConfig::default()
        .with_tool("rm", ToolSpec::gated("remove", Some(1000)))
        .with_tool("ask", ToolSpec::gated("ask a person", None))
}

/// The crash: the agent and its undelivered outputs are gone; only the store survives (the
/// warm harness may go on, as the same scenario without a crash).
fn crash(h: &Harness) -> MemoryStore {
    h.store.clone()
}

/// A harness around the agent recovered from `store` with `policy`.
fn recover(store: MemoryStore, policy: RecoveryPolicy) -> Harness {
    Harness::recover(config(), store, policy).expect("recovery succeeds")
}

/// The two parts of a scenario as one readable trace.
fn trace(warm_part: &str, cold: &Harness) -> String {
    format!(
        "{warm_part}~~~ crash: the agent is dropped, the store survives ~~~\n{}",
        cold.rendered()
    )
}

/// `(call id, outcome)` of every committed tool result.
fn outcomes(store: &MemoryStore) -> Vec<(String, ResultOutcome)> {
    store
        .committed_messages(&thread())
        .unwrap()
        .iter()
        .filter_map(Message::as_tool_result)
        .map(|r| (r.call_id.as_str().to_owned(), r.outcome))
        .collect()
}

/// The committed facts a cold path must share with the warm one: the transcript and how each
/// run ended.
fn facts(store: &MemoryStore) -> (Vec<Message>, Vec<(RunId, RunState)>) {
    let messages = store.committed_messages(&thread()).unwrap();
    let mut runs = Vec::new();
    for n in 1.. {
        match store.run_state(&run(n)).unwrap() {
            Some(state) => runs.push((run(n), state)),
            None => break,
        }
    }
    (messages, runs)
}

fn pending_ids(h: &Harness) -> Vec<String> {
    h.pending_tools
        .iter()
        .map(|(_, c)| c.id.as_str().to_owned())
        .collect()
}

fn model_steps(h: &Harness) -> Vec<(RunId, Step)> {
    h.model_calls
        .iter()
        .map(|(run, step, _)| (run.clone(), *step))
        .collect()
}

fn execute_tools_count(h: &Harness) -> usize {
    h.trace
        .iter()
        .filter(|line| line.starts_with("  action execute_tools"))
        .count()
}

/// The active run of `agent` (its counters, queues and phase) as its snapshot stores it.
fn active_run(agent: &Agent) -> serde_json::Value {
    let snapshot: serde_json::Value = serde_json::from_str(&agent.snapshot_json()).unwrap();
    snapshot["agent"]["active"].clone()
}

fn waiting_call(h: &Harness) -> Option<String> {
    h.agent
        .current_ticket()
        .and_then(|t| t.target().call_id())
        .map(|c| c.as_str().to_owned())
}

// ----- §8.7: no run, latest run ended -------------------------------------------------------------

#[test]
fn recover_with_no_run_is_idle_with_an_empty_transcript() {
    let h = recover(MemoryStore::new(), RecoveryPolicy::Replay);
    assert!(h.agent.is_idle());
    assert!(h.agent.transcript().is_empty());
    assert_eq!(h.agent.last_end(), None);
    assert!(h.commits.is_empty() && h.events.is_empty());

    let mut h = h;
    h.script([Reply::text("hello")]);
    h.prompt("hi").unwrap();
    h.drive();
    assert_eq!(h.run_starts, [run(1)], "the first run is run-1");
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("recover_no_run", h.rendered());
}

#[test]
fn recover_after_the_latest_run_ended_is_idle_and_the_next_prompt_mints_run_2() {
    let script = || {
        [
            Reply::call("c1", "echo", json!({"x": 1})),
            Reply::text("first done"),
            Reply::text("second done"),
        ]
    };
    let mut h = Harness::new(config());
    h.script(script());
    h.prompt("first").unwrap();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    let warm_transcript = h.agent.transcript().to_vec();
    let warm_part = h.rendered();

    let mut cold = recover(crash(&h), RecoveryPolicy::Replay);
    assert!(cold.agent.is_idle());
    assert_eq!(cold.agent.transcript(), warm_transcript.as_slice());
    assert_eq!(
        cold.agent.last_end(),
        Some((&run(1), &EndCause::NaturalEnd))
    );
    assert!(
        cold.commits.is_empty(),
        "recovering an ended run commits nothing"
    );

    cold.script([Reply::text("second done")]);
    cold.prompt("second").unwrap();
    cold.drive();
    assert_eq!(cold.run_starts, [run(2)], "run ids keep counting");
    let request = cold.requests.first().expect("run-2 called the model");
    assert_eq!(request.len(), warm_transcript.len() + 1);
    assert_eq!(
        &request[..warm_transcript.len()],
        warm_transcript.as_slice()
    );

    // The same two prompts, warm.
    h.prompt("second").unwrap();
    h.drive();
    assert_eq!(facts(&cold.store), facts(&h.store));
    common::snapshot!("recover_latest_run_ended", trace(&warm_part, &cold));
}

// ----- §8.7: Awaiting -----------------------------------------------------------------------------

#[test]
fn recover_awaiting_keeps_the_same_ticket_and_resume_works_as_if_nothing_stopped() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "echo")]),
        Reply::text("done"),
    ]);
    h.clock_ms = 300;
    h.prompt("tidy up").unwrap();
    h.drive();
    let ticket = h.agent.current_ticket().cloned().expect("awaiting");
    assert_eq!(ticket.deadline_ms, Some(1_300));
    // A command the person built before the crash, from the committed ticket.
    let answer = ResumeCommand::from_ticket(&ticket, ResumeResult::allow(), 900);
    let warm_part = h.rendered();

    let mut cold = recover(crash(&h), RecoveryPolicy::Replay);
    assert_eq!(cold.agent.run_state(), Some(RunState::Awaiting));
    assert_eq!(
        cold.agent.current_ticket(),
        Some(&ticket),
        "the same ticket"
    );
    assert_eq!(
        cold.store.resume_ticket(&run(1)).unwrap(),
        Some(ticket.clone())
    );
    assert!(cold.commits.is_empty() && cold.pending_tools.is_empty());
    assert_eq!(cold.agent.steps(), Some(1));
    assert_eq!(
        active_run(&cold.agent),
        active_run(&h.agent),
        "the recovered run and its wait are the live ones (the batch's approval deadlines \
         included)"
    );

    cold.script([Reply::text("done")]);
    cold.input(
        "resume allow (built before the crash)",
        Input::Resume { command: answer },
    )
    .expect("the pre-crash command is accepted");
    assert_eq!(pending_ids(&cold), ["c1", "c2"]);
    cold.drive();
    assert_eq!(model_steps(&cold), [(run(1), 2)]);
    assert_eq!(cold.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(cold.run_starts, [run(1)], "no new run");

    h.clock_ms = 900;
    h.resume(ResumeResult::allow()).unwrap();
    h.drive();
    assert_eq!(facts(&cold.store), facts(&h.store));
    common::snapshot!("recover_awaiting", trace(&warm_part, &cold));
}

#[test]
fn recover_awaiting_an_expired_ticket_still_expires_it() {
    let mut h = Harness::new(config());
    h.script([Reply::call("c1", "rm", json!({}))]);
    h.prompt("remove").unwrap();
    h.drive();
    let mut cold = recover(crash(&h), RecoveryPolicy::Replay);
    cold.clock_ms = 1_001;
    let err = cold.resume(ResumeResult::allow()).unwrap_err();
    assert_eq!(
        err,
        AgentError::Resume(ResumeError::Expired {
            deadline_ms: 1_000,
            now_ms: 1_001,
        })
    );
    cold.input_at("expire_wait 1001", Input::ExpireWait, 1_001)
        .unwrap();
    assert_eq!(cold.last_cause(), &EndCause::Stopped("wait_expired".into()));
    assert_eq!(
        outcomes(&cold.store),
        [("c1".to_owned(), ResultOutcome::Expired)]
    );
}

// ----- §8.7: Running between steps ----------------------------------------------------------------

#[test]
fn recover_running_between_steps_calls_the_model_again_with_the_step_count_restored() {
    let script = || {
        [
            Reply::call("c1", "echo", json!({})),
            Reply::call("c2", "echo", json!({})),
            Reply::text("done"),
        ]
    };
    let mut h = Harness::new(config());
    h.script(script());
    h.prompt("two steps of tools").unwrap();
    // Answer step 1 and its tools, step 2 and its tools; step 3's call is handed out and lost.
    h.drive_bounded(4);
    assert_eq!(h.pending_model, Some((run(1), 3)));
    let warm_part = h.rendered();

    let mut cold = recover(crash(&h), RecoveryPolicy::Replay);
    assert_eq!(cold.agent.run_state(), Some(RunState::Running));
    assert_eq!(cold.agent.steps(), Some(3), "step 3 is handed out again");
    assert_eq!(
        model_steps(&cold),
        [(run(1), 3)],
        "the next model call of the same run, step count restored"
    );
    assert!(cold.commits.is_empty(), "nothing new to commit");
    cold.script([Reply::text("done")]);
    cold.drive();
    assert_eq!(cold.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(cold.last_result().steps, 3);

    h.drive();
    assert_eq!(facts(&cold.store), facts(&h.store));
    common::snapshot!("recover_running_between_steps", trace(&warm_part, &cold));
}

#[test]
fn recover_running_right_after_the_prompt_makes_the_first_model_call() {
    let mut h = Harness::new(config());
    h.crash_after_commits = Some(1);
    h.prompt("hello").unwrap();
    assert!(h.crashed && h.pending_model.is_none());
    let mut cold = recover(crash(&h), RecoveryPolicy::Replay);
    assert_eq!(model_steps(&cold), [(run(1), 1)]);
    cold.script([Reply::text("hi")]);
    cold.drive();
    assert_eq!(cold.last_cause(), &EndCause::NaturalEnd);
    assert_eq!(cold.last_result().steps, 1);
}

// ----- §8.7: Running with unanswered tool calls ---------------------------------------------------

/// `[c1 echo, c2 rm, c3 echo]`, c2 denied, c1 and c3 executing, c3 answered (not committed yet).
fn tools_in_flight(h: &mut Harness) {
    h.script([
        Reply::calls(&[("c1", "echo"), ("c2", "rm"), ("c3", "echo")]),
        Reply::text("done"),
    ]);
    h.prompt("three tools").unwrap();
    h.drive();
    h.resume(ResumeResult::deny("not that")).unwrap();
    assert_eq!(pending_ids(h), ["c1", "c3"]);
    h.answer_call("c3");
}

#[test]
fn recover_unanswered_tool_calls_with_replay_executes_exactly_them_again() {
    let mut h = Harness::new(config());
    tools_in_flight(&mut h);
    let warm_part = h.rendered();

    let mut cold = recover(crash(&h), RecoveryPolicy::Replay);
    assert_eq!(cold.agent.run_state(), Some(RunState::Running));
    assert_eq!(
        pending_ids(&cold),
        ["c1", "c3"],
        "exactly the unanswered executable calls; the denied c2 is not executed"
    );
    assert!(cold.commits.is_empty());
    cold.script([Reply::text("done")]);
    cold.tool_order = common::harness::ToolOrder::Reversed;
    cold.drive();
    assert_eq!(
        outcomes(&cold.store),
        [
            ("c1".to_owned(), ResultOutcome::Executed),
            ("c2".to_owned(), ResultOutcome::Denied),
            ("c3".to_owned(), ResultOutcome::Executed),
        ]
    );
    assert_eq!(model_steps(&cold), [(run(1), 2)]);
    assert_eq!(cold.last_cause(), &EndCause::NaturalEnd);

    h.drive();
    assert_eq!(facts(&cold.store), facts(&h.store));
    common::snapshot!("recover_tools_replay", trace(&warm_part, &cold));
}

#[test]
fn recover_unanswered_tool_calls_with_seal_interrupts_them_and_ends_indeterminate() {
    let mut h = Harness::new(config());
    tools_in_flight(&mut h);
    let warm_part = h.rendered();

    let cold = recover(crash(&h), RecoveryPolicy::Seal);
    assert!(cold.agent.is_idle());
    assert_eq!(execute_tools_count(&cold), 0, "nothing is executed again");
    assert_eq!(
        outcomes(&cold.store),
        [
            ("c1".to_owned(), ResultOutcome::Interrupted),
            ("c2".to_owned(), ResultOutcome::Denied),
            ("c3".to_owned(), ResultOutcome::Interrupted),
        ],
        "the denied call keeps its decision; the others' outcome is unknown"
    );
    assert_eq!(cold.last_cause(), &EndCause::Indeterminate);
    assert_eq!(cold.run_ends.len(), 1);
    assert_eq!(
        cold.store.run_state(&run(1)).unwrap(),
        Some(RunState::Ended(EndCause::Indeterminate))
    );
    common::snapshot!("recover_tools_seal", trace(&warm_part, &cold));
}

// ----- §8.7: gated calls with a committed decision -------------------------------------------------

/// `[c1 rm, c2 ask, c3 echo]`: c1 is decided with `first`, and the process crashes right after
/// that decision is committed (before c2's ticket is).
fn decided_then_crash(first: ResumeResult) -> Harness {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "ask"), ("c3", "echo")]),
        Reply::text("done"),
    ]);
    h.prompt("three tools").unwrap();
    h.drive();
    h.crash_after_commits = Some(h.commits.len() + 1);
    h.resume(first).unwrap();
    assert!(h.crashed);
    assert_eq!(
        h.store
            .list_events(&EventScope::Run(run(1)), None, 100)
            .unwrap()
            .iter()
            .filter(|e| e.kind == "permission_decided")
            .count(),
        1,
        "exactly one decision is committed"
    );
    assert_eq!(h.store.resume_ticket(&run(1)).unwrap(), None);
    h
}

fn decided_warm(first: ResumeResult, second: ResumeResult) -> Harness {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "ask"), ("c3", "echo")]),
        Reply::text("done"),
    ]);
    h.prompt("three tools").unwrap();
    h.drive();
    h.resume(first).unwrap();
    h.resume(second).unwrap();
    h.drive();
    h
}

#[test]
fn recover_after_a_committed_denial_keeps_it_and_asks_the_undecided_call_again() {
    let h = decided_then_crash(ResumeResult::deny("no"));
    let warm_part = h.rendered();

    let mut cold = recover(crash(&h), RecoveryPolicy::Replay);
    assert_eq!(
        waiting_call(&cold).as_deref(),
        Some("c2"),
        "c2 is asked again"
    );
    let ticket = cold.agent.current_ticket().cloned().expect("awaiting");
    assert_eq!(
        ticket.correlation_id, "thread-1/run-1:wait-2",
        "a fresh ticket: the old wait-1 never matches it"
    );
    assert_eq!(cold.store.resume_ticket(&run(1)).unwrap(), Some(ticket));
    assert!(
        cold.pending_tools.is_empty(),
        "Awaiting ⇒ nothing executing"
    );

    cold.script([Reply::text("done")]);
    cold.resume(ResumeResult::allow()).unwrap();
    assert_eq!(
        pending_ids(&cold),
        ["c2", "c3"],
        "the denied c1 is not executed"
    );
    cold.drive();
    assert_eq!(
        outcomes(&cold.store),
        [
            ("c1".to_owned(), ResultOutcome::Denied),
            ("c2".to_owned(), ResultOutcome::Executed),
            ("c3".to_owned(), ResultOutcome::Executed),
        ]
    );
    let warm = decided_warm(ResumeResult::deny("no"), ResumeResult::allow());
    assert_eq!(facts(&cold.store), facts(&warm.store));
    common::snapshot!("recover_gated_after_denial", trace(&warm_part, &cold));
}

#[test]
fn recover_after_a_committed_approval_executes_it_and_asks_the_undecided_call_again() {
    let h = decided_then_crash(ResumeResult::allow());
    let warm_part = h.rendered();

    let mut cold = recover(crash(&h), RecoveryPolicy::Replay);
    assert_eq!(waiting_call(&cold).as_deref(), Some("c2"));
    assert_eq!(
        cold.agent
            .current_ticket()
            .map(|t| t.correlation_id.as_str()),
        Some("thread-1/run-1:wait-2")
    );
    cold.script([Reply::text("done")]);
    cold.resume(ResumeResult::deny("not now")).unwrap();
    assert_eq!(
        pending_ids(&cold),
        ["c1", "c3"],
        "the allowed c1 is executed"
    );
    cold.drive();
    assert_eq!(
        outcomes(&cold.store),
        [
            ("c1".to_owned(), ResultOutcome::Executed),
            ("c2".to_owned(), ResultOutcome::Denied),
            ("c3".to_owned(), ResultOutcome::Executed),
        ]
    );
    let warm = decided_warm(ResumeResult::allow(), ResumeResult::deny("not now"));
    assert_eq!(facts(&cold.store), facts(&warm.store));
    common::snapshot!("recover_gated_after_approval", trace(&warm_part, &cold));
}

#[test]
fn recover_with_seal_still_asks_an_undecided_call_before_anything_runs() {
    // Nothing of the batch was handed out while a decision was open, so nothing is
    // indeterminate: Seal asks again like Replay.
    let h = decided_then_crash(ResumeResult::allow());
    let mut cold = recover(crash(&h), RecoveryPolicy::Seal);
    assert_eq!(waiting_call(&cold).as_deref(), Some("c2"));
    cold.script([Reply::text("done")]);
    cold.resume(ResumeResult::allow()).unwrap();
    assert_eq!(pending_ids(&cold), ["c1", "c2", "c3"]);
    cold.drive();
    assert_eq!(cold.last_cause(), &EndCause::NaturalEnd);
}

/// A resume with context messages in the middle of a batch commits them between the calls and
/// their results (SPEC §8.5). A crash right after that commit must still find the batch open:
/// the next gated call is asked again (before the fix in `recover.rs`, recovery saw the
/// trailing system message, treated the run as "between steps" and called the model with the
/// calls unanswered). The harness's pairing invariant wants results right after their calls,
/// so this scenario drives the agent by hand.
#[test]
fn recover_after_a_resume_with_context_in_the_middle_of_a_batch() {
    fn drain(agent: &mut Agent, store: &mut MemoryStore, crash_after: Option<u64>) -> Vec<Action> {
        let mut actions = Vec::new();
        while let Some(output) = agent.poll() {
            match output {
                Output::Commit(commit) => {
                    store
                        .commit_operation(commit.into_operation())
                        .expect("the store accepts the commit");
                    if Some(store.last_sequence()) == crash_after {
                        return actions;
                    }
                }
                Output::Action(action) => actions.push(action),
                Output::Event(_) => {}
            }
        }
        actions
    }
    let context = || {
        vec![Message::System(
            SystemMessage::text("Approved by the on-call engineer.")
                .with_id("ctx-1")
                .into(),
        )]
    };
    let calls = AssistantMessage::new(
        vec![
            AssistantBlock::tool_call("c1", "rm", json!({})),
            AssistantBlock::tool_call("c2", "ask", json!({})),
        ],
        StopReason::ToolUse,
    );
    // Warm: allow c1 with context, allow c2, execute both, answer.
    let finish = |agent: &mut Agent, store: &mut MemoryStore| {
        agent.resume_ticket(ResumeResult::allow(), None).unwrap();
        let actions = drain(agent, store, None);
        assert!(
            matches!(actions.as_slice(), [Action::ExecuteTools { calls, .. }] if calls.len() == 2),
            "{actions:?}"
        );
        for id in ["c1", "c2"] {
            agent
                .tool_done(&run(1), &CallId::new(id), ToolOutput::text(id, "ok"))
                .unwrap();
            drain(agent, store, None);
        }
        agent
            .model_done(&run(1), 2, AssistantMessage::text("done"))
            .unwrap();
        drain(agent, store, None);
    };
    let start = |agent: &mut Agent, store: &mut MemoryStore| {
        agent.prompt(UserMessage::text("two gated"), 0).unwrap();
        drain(agent, store, None);
        agent.model_done(&run(1), 1, calls.clone()).unwrap();
        drain(agent, store, None);
        let ticket = agent.current_ticket().cloned().unwrap();
        agent
            .resume(
                ResumeCommand::from_ticket(&ticket, ResumeResult::allow(), 0)
                    .with_context(context()),
            )
            .unwrap();
    };

    let (mut warm, mut warm_store) = (Agent::new(config()).unwrap(), MemoryStore::new());
    start(&mut warm, &mut warm_store);
    drain(&mut warm, &mut warm_store, None);
    finish(&mut warm, &mut warm_store);

    let (mut agent, mut store) = (Agent::new(config()).unwrap(), MemoryStore::new());
    start(&mut agent, &mut store);
    let crash_at = store.last_sequence() + 1;
    drain(&mut agent, &mut store, Some(crash_at));
    drop(agent);
    let roles: Vec<Role> = store
        .committed_messages(&thread())
        .unwrap()
        .iter()
        .map(Message::role)
        .collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::System]);

    let mut cold = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).unwrap();
    let actions = drain(&mut cold, &mut store, None);
    assert!(
        actions.is_empty(),
        "no model call with calls unanswered: {actions:?}"
    );
    let ticket = cold.current_ticket().expect("c2 is asked again");
    assert_eq!(ticket.target().call_id(), Some(&CallId::new("c2")));
    assert_eq!(ticket.correlation_id, "thread-1/run-1:wait-2");
    finish(&mut cold, &mut store);
    assert_eq!(facts(&store), facts(&warm_store));
}

// ----- the snapshot envelope ------------------------------------------------------------------------

#[test]
fn snapshot_round_trip_restores_an_identical_agent_with_identical_future_outputs() {
    let drive = |restore_at_poll: Option<usize>| {
        let mut h = Harness::new(config());
        h.output_log = Some(Vec::new());
        h.restore_at_poll = restore_at_poll;
        h.script([
            Reply::calls(&[("c1", "rm"), ("c2", "echo")]),
            Reply::text("paused"),
            Reply::text("done"),
        ]);
        h.clock_ms = 42;
        h.prompt("go").unwrap();
        h.drive();
        h.resume(ResumeResult::allow()).unwrap();
        h.steer("also this").unwrap();
        h.input("pause", Input::Pause).unwrap();
        h.tool_order = common::harness::ToolOrder::Reversed;
        h.drive();
        h.resume(ResumeResult::Input("go on".into())).unwrap();
        h.drive();
        h
    };
    let live = drive(None);
    let live_log = live.output_log.clone().expect("logged");
    assert_eq!(live.last_cause(), &EndCause::NaturalEnd);
    // Every poll boundary: before any output, mid-drain (outbox not empty), before an action
    // is decided, while awaiting, with steering queued and a pause requested.
    for at in 0..=live.polls {
        let restored = drive(Some(at));
        assert_eq!(
            restored.output_log.as_ref(),
            Some(&live_log),
            "outputs differ after a round trip at poll {at}"
        );
        assert_eq!(
            serde_json::to_string(&restored.agent).unwrap(),
            serde_json::to_string(&live.agent).unwrap()
        );
    }

    // The envelope itself, at a point with queued steering and a requested pause.
    let mut h = Harness::new(config());
    h.script([Reply::calls(&[("c1", "echo")])]);
    h.prompt("go").unwrap();
    h.drive_bounded(1);
    h.steer("queued").unwrap();
    h.input("pause", Input::Pause).unwrap();
    let json = h.agent.snapshot_json();
    let envelope: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(envelope["schema_version"], AGENT_SCHEMA_VERSION);
    let restored = Agent::restore_json(&json).expect("restores");
    assert_eq!(restored, h.agent);
    assert_eq!(
        restored.queued(),
        (1, 0),
        "queued steering survives a snapshot"
    );
    assert_eq!(Agent::restore(h.agent.snapshot()).as_ref(), Ok(&h.agent));
}

#[test]
fn snapshot_envelope_errors() {
    let agent = Agent::new(config()).unwrap();
    let json = agent.snapshot_json();
    let mut lines = Vec::new();

    // A newer version is refused before the rest is read, even when the rest is unreadable.
    let newer = AGENT_SCHEMA_VERSION + 1;
    let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
    value["schema_version"] = json!(newer);
    let cases = [
        ("a newer version", value.to_string()),
        (
            "a newer version with a body from the future",
            json!({"schema_version": newer, "agent": {"hologram": true}}).to_string(),
        ),
    ];
    for (label, text) in cases {
        let err = Agent::restore_json(&text).unwrap_err();
        assert_eq!(
            err,
            SnapshotError::NewerVersion {
                found: newer,
                supported: AGENT_SCHEMA_VERSION,
            },
            "{label}"
        );
        assert_eq!(err.code(), "newer_version");
        lines.push(format!("{label}: {err}"));
    }
    let err = Agent::restore(AgentSnapshot {
        schema_version: newer,
        agent: agent.clone(),
    })
    .unwrap_err();
    assert!(matches!(err, SnapshotError::NewerVersion { .. }));

    // A version-1 snapshot (before typed phases) is refused by version, not half-read.
    let mut older: serde_json::Value = serde_json::from_str(&json).unwrap();
    older["schema_version"] = json!(1);
    let err = Agent::restore_json(&older.to_string()).unwrap_err();
    assert_eq!(
        err,
        SnapshotError::UnsupportedVersion {
            found: 1,
            supported: AGENT_SCHEMA_VERSION,
        }
    );
    assert_eq!(err.code(), "unsupported_version");
    lines.push(format!("an older version: {err}"));

    // The envelope deserializes only through the same checks: an inconsistent agent or a
    // wrong version does not decode as an `AgentSnapshot` either.
    let mut inconsistent: serde_json::Value = serde_json::from_str(&json).unwrap();
    inconsistent["agent"]["committed"] = json!(5);
    let err = Agent::restore_json(&inconsistent.to_string()).unwrap_err();
    assert!(matches!(err, SnapshotError::Inconsistent(_)), "{err:?}");
    assert_eq!(err.code(), "inconsistent");
    lines.push(format!("an inconsistent agent: {err}"));
    for (label, text) in [
        ("inconsistent", inconsistent.to_string()),
        ("older", older.to_string()),
    ] {
        let decoded = serde_json::from_str::<AgentSnapshot>(&text);
        assert!(decoded.is_err(), "{label} decoded as an AgentSnapshot");
    }
    let decoded: AgentSnapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(Agent::restore(decoded), Ok(agent.clone()));

    let malformed = [
        ("empty text", String::new()),
        ("not JSON", "agent, please".to_owned()),
        ("no version", json!({"agent": {}}).to_string()),
        (
            "a version that is not a number",
            json!({"schema_version": "1"}).to_string(),
        ),
        (
            "a current version with no agent",
            json!({"schema_version": AGENT_SCHEMA_VERSION}).to_string(),
        ),
        (
            "a current version with an unreadable agent",
            json!({"schema_version": AGENT_SCHEMA_VERSION, "agent": {"hologram": true}})
                .to_string(),
        ),
        (
            "a truncated snapshot",
            json.get(..json.len() / 2).unwrap_or_default().to_owned(),
        ),
    ];
    for (label, text) in malformed {
        let err = Agent::restore_json(&text).unwrap_err();
        assert!(
            matches!(err, SnapshotError::Malformed(_)),
            "{label}: expected Malformed, got {err:?}"
        );
        assert_eq!(err.code(), "malformed");
        lines.push(format!("{label}: malformed"));
    }
    assert_eq!(Agent::restore_json(&json), Ok(agent));
    common::snapshot!("snapshot_envelope_errors", lines.join("\n") + "\n");
}

/// Drains only what is queued: an action a `poll` would decide is not handed out.
fn drain_queued(agent: &mut Agent) {
    while agent.pending_outputs() > 0 {
        let _ = agent.poll();
    }
}

/// A live agent whose run's model answered with one call of `tool`; the action it decided is
/// handed out when `hand_out`.
fn with_a_call(tool: &str, hand_out: bool) -> Agent {
    let mut agent = Agent::new(config()).unwrap();
    agent.prompt(UserMessage::text("go"), 0).unwrap();
    let _ = agent.drain();
    let call = AssistantBlock::tool_call("c1", tool, json!({}));
    let reply = AssistantMessage::new(vec![call], StopReason::ToolUse);
    agent.model_done(&run(1), 1, reply).unwrap();
    if hand_out {
        let _ = agent.drain();
    } else {
        drain_queued(&mut agent);
    }
    agent
}

/// A snapshot restores only into a phase a live agent can be in. Each case takes the snapshot
/// of a live agent (which restores), edits its phase into one no transition makes, and checks
/// the envelope is refused as `Inconsistent` (and does not decode as an `AgentSnapshot`)
/// rather than restored into a run that waits for an answer no host can give.
#[test]
fn a_snapshot_whose_phase_cannot_happen_is_refused() {
    let snapshot = |agent: &Agent| -> serde_json::Value {
        let text = agent.snapshot_json();
        assert_eq!(
            Agent::restore_json(&text).as_ref(),
            Ok(agent),
            "the live snapshot"
        );
        serde_json::from_str(&text).unwrap()
    };
    let ready = snapshot(&with_a_call("echo", false));
    let out = snapshot(&with_a_call("echo", true));
    let permission = snapshot(&with_a_call("rm", true));
    let pause = snapshot(&paused(false).0);
    let phase = "/agent/active/phase";
    let answered = serde_json::to_value(ToolOutput::text("c1", "ok").into_result("echo")).unwrap();
    let permission_ticket = permission
        .pointer(&format!("{phase}/waiting/call/ticket"))
        .cloned()
        .expect("a call wait holds its ticket");
    let pause_wait = pause
        .pointer(&format!("{phase}/waiting/pause"))
        .cloned()
        .expect("a pause wait");

    let cases = [
        (
            "tools about to execute with no call ready",
            &ready,
            "tools_ready/calls/0/slot",
            json!("executing"),
        ),
        (
            "tools executing with every result in",
            &out,
            "tools_out/calls/0/slot",
            json!({ "done": answered }),
        ),
        (
            "a call wait whose call is already allowed",
            &permission,
            "waiting/call/batch/calls/0/slot",
            json!("ready"),
        ),
        (
            "a pause on a permission ticket",
            &pause,
            "waiting/pause/ticket",
            permission_ticket,
        ),
        (
            "a remote-input wait on a pause ticket",
            &pause,
            "waiting",
            json!({ "remote": pause_wait }),
        ),
    ];
    for (label, live, path, value) in cases {
        let mut edited = live.clone();
        let path = format!("{phase}/{path}");
        *edited.pointer_mut(&path).expect(&path) = value;
        let text = edited.to_string();
        let err = Agent::restore_json(&text).unwrap_err();
        assert!(
            matches!(err, SnapshotError::Inconsistent(_)),
            "{label}: expected Inconsistent, got {err:?}"
        );
        assert!(
            serde_json::from_str::<AgentSnapshot>(&text).is_err(),
            "{label}: decoded as an AgentSnapshot"
        );
    }
}

// ----- §7.1: fenced commits after recovery --------------------------------------------------------

/// Two processes recover the same thread from the same version. The first to commit wins; the
/// second is fenced with `VersionConflict` and nothing of it is written. The recovered agent's
/// ordinal continues from the run's stored commit count.
#[test]
fn two_writers_recovered_from_one_version_the_second_is_fenced() {
    let mut h = Harness::new(config());
    h.script([Reply::call("c1", "echo", json!({})), Reply::text("done")]);
    h.prompt("one step of tools").unwrap();
    h.drive_bounded(2);
    assert_eq!(h.pending_model, Some((run(1), 2)));
    let store = crash(&h);
    let version = store.thread_version(&thread()).unwrap();
    let stored = store.run(&run(1)).unwrap().expect("run 1").commits;

    let answer = |store: &MemoryStore| {
        let mut agent =
            Agent::recover(config(), store, &thread(), RecoveryPolicy::Replay).expect("recovers");
        let _ = agent.drain(); // the model call of step 2, handed out again
        agent
            .model_done(&run(1), 2, AssistantMessage::text("done"))
            .unwrap();
        agent
            .drain()
            .into_iter()
            .filter_map(|output| match output {
                Output::Commit(commit) => Some(commit),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let first = answer(&store);
    let second = answer(&store);
    assert_eq!(first[0].expected_thread_version, version);
    assert_eq!(first[0].ordinal, stored);

    let mut shared = store;
    for commit in first {
        shared.commit_operation(commit.into_operation()).unwrap();
    }
    let after_first = serde_json::to_string(&shared).unwrap();
    // The second writer's commit is byte-identical here, so it gets the stored receipt (the
    // same fact, harmless); had it said anything else it is rejected. Either way nothing of it
    // is written.
    let receipt = shared
        .commit_operation(second[0].clone().into_operation())
        .unwrap();
    assert!(receipt.duplicate);
    let mut zombie = second[0].clone();
    zombie.commit.messages = vec![Message::from(AssistantMessage::text("other"))];
    let err = shared
        .commit_operation(zombie.into_operation())
        .unwrap_err();
    assert!(
        matches!(err.rejection(), Some(CommitError::PayloadMismatch { .. })),
        "{err}"
    );
    assert_eq!(serde_json::to_string(&shared).unwrap(), after_first);

    // Two idle writers recovered from the same version start runs of their own: the first
    // commit wins, the other is fenced by the thread version.
    let prompt = |store: &MemoryStore, run_id: &str| {
        let mut agent =
            Agent::recover(config(), store, &thread(), RecoveryPolicy::Replay).expect("recovers");
        agent
            .prompt_with_run_id(RunId::new(run_id), UserMessage::text("next"), 0)
            .unwrap();
        match agent.poll() {
            Some(Output::Commit(commit)) => commit,
            other => panic!("expected the run's first commit, got {other:?}"),
        }
    };
    let a = prompt(&shared, "writer-a");
    let b = prompt(&shared, "writer-b");
    assert_eq!(a.expected_thread_version, b.expected_thread_version);
    assert_eq!((a.ordinal, b.ordinal), (0, 0));
    shared.commit_operation(a.into_operation()).unwrap();
    let before_b = serde_json::to_string(&shared).unwrap();
    let err = shared.commit_operation(b.into_operation()).unwrap_err();
    assert!(
        matches!(err.rejection(), Some(CommitError::VersionConflict { .. })),
        "{err}"
    );
    assert_eq!(serde_json::to_string(&shared).unwrap(), before_b);
}

// ----- §8.7: a wait at a boundary ------------------------------------------------------------------

/// Drains `agent`, applying every commit to `store` (fenced) before going on, and returns the
/// other outputs as JSON, in order.
fn pump(agent: &mut Agent, store: &mut MemoryStore) -> Vec<serde_json::Value> {
    let mut outputs = Vec::new();
    while let Some(output) = agent.poll() {
        match output {
            Output::Commit(commit) => {
                store.commit_operation(commit.into_operation()).unwrap();
            }
            other => outputs.push(serde_json::to_value(&other).unwrap()),
        }
    }
    outputs
}

fn model_calls(outputs: &[serde_json::Value]) -> Vec<u64> {
    outputs
        .iter()
        .filter(|o| o["type"] == "action" && o["value"]["type"] == "call_model")
        .filter_map(|o| o["value"]["step"].as_u64())
        .collect()
}

/// [`pump`], but every commit is written as the release before recorded facts wrote it: its
/// `run_awaiting` draft says only `{run_id}` (an old-shape store).
fn pump_old_shape(agent: &mut Agent, store: &mut MemoryStore) -> Vec<serde_json::Value> {
    let mut outputs = Vec::new();
    while let Some(output) = agent.poll() {
        match output {
            Output::Commit(commit) => {
                let AgentCommit {
                    mut commit,
                    ordinal,
                    expected_thread_version,
                } = *commit;
                for draft in &mut commit.events {
                    if let AuditDraft::RunAwaiting { run_id, .. } = draft {
                        *draft = AuditDraft::run_awaiting(run_id);
                    }
                }
                let operation = CommitOperation::new(commit, ordinal, expected_thread_version);
                store.commit_operation(operation).unwrap();
            }
            other => outputs.push(serde_json::to_value(&other).unwrap()),
        }
    }
    outputs
}

type Pump = fn(&mut Agent, &mut MemoryStore) -> Vec<serde_json::Value>;

/// Brings a live agent to a pause taken at the boundary after a tool batch (`after_batch`) or
/// after a text answer; returns it with its store.
fn paused(after_batch: bool) -> (Agent, MemoryStore) {
    paused_with(after_batch, pump)
}

/// [`paused`], its commits applied with `pump`.
fn paused_with(after_batch: bool, pump: Pump) -> (Agent, MemoryStore) {
    let mut store = MemoryStore::new();
    let mut agent = Agent::new(config()).unwrap();
    agent.prompt(UserMessage::text("go"), 0).unwrap();
    assert_eq!(model_calls(&pump(&mut agent, &mut store)), [1]);
    if after_batch {
        let call = AssistantBlock::tool_call("c1", "echo", json!({}));
        let reply = AssistantMessage::new(vec![call], StopReason::ToolUse);
        agent.model_done(&run(1), 1, reply).unwrap();
        pump(&mut agent, &mut store);
        agent.pause().unwrap();
        agent
            .tool_done(&run(1), &CallId::new("c1"), ToolOutput::text("c1", "ok"))
            .unwrap();
    } else {
        agent.pause().unwrap();
        agent
            .model_done(&run(1), 1, AssistantMessage::text("half way"))
            .unwrap();
    }
    pump(&mut agent, &mut store);
    assert!(matches!(
        agent.current_ticket().map(|t| t.target()),
        Some(AwaitTarget::Pause(PauseReason::Manual))
    ));
    (agent, store)
}

/// A pause stores the boundary it interrupted; a recovered agent finds the same boundary in
/// the committed facts (its phase is identical to the live agent's). The pause's `Input` is
/// then answered by the next model call, warm and recovered alike.
#[test]
fn recover_a_pause_keeps_the_boundary_it_interrupted() {
    for (after_batch, boundary) in [(true, "after_tool_batch"), (false, "text_stop")] {
        let (mut warm, mut warm_store) = paused(after_batch);
        let mut cold_store = warm_store.clone();
        let mut cold = Agent::recover(config(), &cold_store, &thread(), RecoveryPolicy::Replay)
            .expect("recovers");
        assert_eq!(cold.current_ticket(), warm.current_ticket());
        assert!(pump(&mut cold, &mut cold_store).is_empty(), "nothing to do");
        let phase = |agent: &Agent| {
            let snapshot: serde_json::Value = serde_json::from_str(&agent.snapshot_json()).unwrap();
            snapshot["agent"]["active"]["phase"].clone()
        };
        assert_eq!(phase(&warm)["waiting"]["pause"]["interrupted"], boundary);
        assert_eq!(phase(&cold), phase(&warm), "after_batch={after_batch}");

        let more = ResumeResult::Input("and the rest".into());
        warm.resume_ticket(more.clone(), Some(5)).unwrap();
        cold.resume_ticket(more, Some(5)).unwrap();
        let warm_out = pump(&mut warm, &mut warm_store);
        let cold_out = pump(&mut cold, &mut cold_store);
        assert_eq!(model_calls(&cold_out), [2], "after_batch={after_batch}");
        assert_eq!(cold_out, warm_out, "after_batch={after_batch}");
        assert_eq!(facts(&cold_store), facts(&warm_store));
    }
}

/// A store holding what another writer committed for run 1: a Running commit with `messages`
/// (and the `run_started` fact), then an Awaiting commit on a ticket for `target`.
fn written_elsewhere(messages: Vec<Message>, target: AwaitTarget) -> (MemoryStore, ResumeTicket) {
    written_with(messages, target, Vec::new())
}

/// [`written_elsewhere`], the Awaiting commit carrying `awaiting_drafts` (an agent's own
/// `run_awaiting` draft takes the synthesized one's place).
fn written_with(
    messages: Vec<Message>,
    target: AwaitTarget,
    awaiting_drafts: Vec<AuditDraft>,
) -> (MemoryStore, ResumeTicket) {
    let cfg = config();
    let mut store = MemoryStore::new();
    let running = ThreadCommit::assemble(
        thread(),
        RunDisposition::Running { run_id: run(1) },
        true,
        messages,
        Vec::new(),
        vec![AuditDraft::run_started(&run(1), 0)],
    );
    store.commit(running).unwrap();
    let identity = WaitIdentity {
        correlation_id: "thread-1/run-1:wait-1".into(),
        run_id: run(1),
        thread_id: thread(),
        snapshot_id: cfg.snapshot_id,
        catalog_fingerprint: cfg.catalog_fingerprint,
    };
    let ticket = ResumeTicket::new(identity, target, None);
    let awaiting = ThreadCommit::assemble(
        thread(),
        RunDisposition::Awaiting(Box::new(ticket.clone())),
        true,
        Vec::new(),
        Vec::new(),
        awaiting_drafts,
    );
    store.commit(awaiting).unwrap();
    (store, ticket)
}

/// The run's committed `run_awaiting` payloads, in order.
fn run_awaiting_payloads(store: &MemoryStore) -> Vec<serde_json::Value> {
    store
        .list_events(&EventScope::Thread(thread()), None, usize::MAX)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "run_awaiting")
        .map(|e| e.payload)
        .collect()
}

/// The boundary the recovered (or live) agent's pause waits at.
fn pause_boundary(agent: &Agent) -> serde_json::Value {
    active_run(agent)["phase"]["waiting"]["pause"]["interrupted"].clone()
}

/// The messages of a step that ran one `echo` call: the answer with the call, then its result.
fn echo_batch() -> Vec<Message> {
    let call = AssistantBlock::tool_call("c1", "echo", json!({}));
    vec![
        Message::from(AssistantMessage::new(vec![call], StopReason::ToolUse)),
        Message::from(ToolOutput::text("c1", "ok").into_result("echo")),
    ]
}

/// Recovery reads the boundary a pause's Awaiting commit recorded, not the message it ended
/// with: here each recorded boundary is the one the last message would NOT suggest.
#[test]
fn recover_a_pause_takes_the_boundary_its_commit_recorded() {
    let text_answer = vec![
        Message::user("go"),
        Message::from(AssistantMessage::text("half way")),
    ];
    let after_tools = [vec![Message::user("go")], echo_batch()].concat();
    for (messages, recorded, expected) in [
        (
            text_answer,
            WaitBoundary::AfterToolBatch,
            "after_tool_batch",
        ),
        (after_tools, WaitBoundary::TextStop, "text_stop"),
    ] {
        let waits_at = AuditDraft::run_awaiting_at(&run(1), 1, Some(recorded));
        let (store, ticket) = written_with(
            messages,
            AwaitTarget::Pause(PauseReason::Manual),
            vec![waits_at],
        );
        let agent =
            Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).expect("recovers");
        assert_eq!(agent.current_ticket(), Some(&ticket));
        assert_eq!(pause_boundary(&agent), expected);
        assert_eq!(agent.steps(), Some(1));
    }
}

/// A live agent's pause records its step and boundary; a store whose `run_awaiting` drafts say
/// only `{run_id}` (written before they were recorded) recovers exactly as the new shape does:
/// the same phase, and the same outputs and facts once the pause is answered.
#[test]
fn an_old_shape_store_recovers_a_pause_exactly_as_before() {
    for (after_batch, boundary) in [(true, "after_tool_batch"), (false, "text_stop")] {
        let (_, mut new_store) = paused(after_batch);
        let (_, mut old_store) = paused_with(after_batch, pump_old_shape);
        assert_eq!(
            run_awaiting_payloads(&new_store),
            [json!({ "boundary": boundary, "run_id": "thread-1/run-1", "step": 1 })]
        );
        assert_eq!(
            run_awaiting_payloads(&old_store),
            [json!({ "run_id": "thread-1/run-1" })]
        );
        let recover = |store: &MemoryStore| {
            Agent::recover(config(), store, &thread(), RecoveryPolicy::Replay).expect("recovers")
        };
        let mut new = recover(&new_store);
        let mut old = recover(&old_store);
        assert_eq!(pause_boundary(&old), boundary, "after_batch={after_batch}");
        assert_eq!(
            active_run(&old),
            active_run(&new),
            "after_batch={after_batch}"
        );
        for agent in [&mut new, &mut old] {
            let more = ResumeResult::Input("and the rest".into());
            agent.resume_ticket(more, Some(5)).unwrap();
        }
        let new_out = pump(&mut new, &mut new_store);
        let old_out = pump(&mut old, &mut old_store);
        assert_eq!(model_calls(&new_out), [2], "after_batch={after_batch}");
        assert_eq!(old_out, new_out, "after_batch={after_batch}");
        assert_eq!(facts(&old_store), facts(&new_store));
    }
}

/// The recorded step must agree with the run's committed answers: equal while its wait is the
/// open one, never more once the run went on. Facts that disagree are refused, naming both.
#[test]
fn recover_refuses_a_recorded_step_the_committed_answers_contradict() {
    let answered_once = || {
        vec![
            Message::user("go"),
            Message::from(AssistantMessage::text("half way")),
        ]
    };
    let pause = AwaitTarget::Pause(PauseReason::Manual);
    for recorded in [0, 2] {
        let waits_at = AuditDraft::run_awaiting_at(&run(1), recorded, Some(WaitBoundary::TextStop));
        let (store, _) = written_with(answered_once(), pause.clone(), vec![waits_at]);
        let err = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).unwrap_err();
        assert!(matches!(&err, RecoverError::Invalid(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("at step {recorded}")) && text.contains("1 assistant"),
            "{text}"
        );
    }

    // Resumed and Running again: a wait recorded at step 1 with one answer committed is
    // consistent; one recorded at step 3 is not.
    for (recorded, accepted) in [(1, true), (3, false)] {
        let waits_at = AuditDraft::run_awaiting_at(&run(1), recorded, Some(WaitBoundary::TextStop));
        let (mut store, _) = written_with(answered_once(), pause.clone(), vec![waits_at]);
        let resumed = ThreadCommit::assemble(
            thread(),
            RunDisposition::Running { run_id: run(1) },
            true,
            vec![Message::user("and the rest")],
            Vec::new(),
            Vec::new(),
        );
        store.commit(resumed).unwrap();
        let recovered = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay);
        match recovered {
            Ok(agent) => {
                assert!(accepted, "a wait recorded at step {recorded} was accepted");
                assert_eq!(agent.steps(), Some(1));
            }
            Err(err) => {
                assert!(!accepted, "{err}");
                assert!(matches!(&err, RecoverError::Invalid(_)), "{err:?}");
                assert!(
                    err.to_string().contains("at step 3, but 1 assistant"),
                    "{err}"
                );
            }
        }
    }
}

/// A thread whose run waits on remote input (a ticket another writer committed): the recovered
/// agent waits on it; `Input` is appended and answered by the next model call.
#[test]
fn recover_a_remote_input_wait_answers_it_with_a_model_call() {
    let (mut store, ticket) = written_elsewhere(
        vec![
            Message::user("summarise my file"),
            Message::from(AssistantMessage::text("which file?")),
        ],
        AwaitTarget::RemoteInput {
            reason: RemoteInputReason::UserInput,
            call_id: CallId::new("q1"),
        },
    );
    let mut agent =
        Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).expect("recovers");
    assert_eq!(agent.current_ticket(), Some(&ticket));
    assert_eq!(agent.steps(), Some(1));
    assert!(pump(&mut agent, &mut store).is_empty());
    // The wait is one a snapshot keeps: the recovered agent round-trips through its envelope.
    assert_eq!(
        Agent::restore_json(&agent.snapshot_json()),
        Ok(agent.clone())
    );
    agent
        .resume_ticket(ResumeResult::Input("notes.txt".into()), Some(10))
        .unwrap();
    let outputs = pump(&mut agent, &mut store);
    assert_eq!(model_calls(&outputs), [2]);
    assert_eq!(
        store.committed_messages(&thread()).unwrap().last(),
        Some(&Message::user("notes.txt"))
    );
    // A second wait on the same run gets the next correlation id (counted from the committed
    // `run_awaiting` facts, not parsed from the old id).
    agent.pause().unwrap();
    agent
        .model_done(&run(1), 2, AssistantMessage::text("reading it"))
        .unwrap();
    pump(&mut agent, &mut store);
    assert_eq!(
        agent.current_ticket().map(|t| t.correlation_id.as_str()),
        Some("thread-1/run-1:wait-2")
    );
}

/// Committed facts that no runcore agent writes — a run awaiting a tool call that its last
/// assistant message does not make — are refused, not rebuilt into an impossible wait.
#[test]
fn recover_refuses_a_call_wait_on_a_call_that_is_not_open() {
    let call = AssistantBlock::tool_call("c1", "rm", json!({}));
    let (store, _) = written_elsewhere(
        vec![
            Message::user("tidy"),
            Message::from(AssistantMessage::new(vec![call], StopReason::ToolUse)),
        ],
        AwaitTarget::ToolCall {
            reason: ToolWaitReason::Permission,
            call_id: CallId::new("c9"),
            tool: PendingTool {
                name: "rm".into(),
                arguments: json!({}).into(),
            },
        },
    );
    let err = Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).unwrap_err();
    assert!(matches!(&err, RecoverError::Invalid(_)), "{err:?}");
    assert!(err.to_string().contains("call c9"), "{err}");
}

// ----- run ids never repeat --------------------------------------------------------------------

/// Prompts with `run_id` (minted when `None`) and lets the model answer with text; returns the
/// run's id, or the prompt's error.
fn one_run(
    agent: &mut Agent,
    store: &mut MemoryStore,
    run_id: Option<&str>,
) -> Result<RunId, AgentError> {
    let message = UserMessage::text("hi");
    let id = match run_id {
        Some(id) => agent.prompt_with_run_id(RunId::new(id), message, 0)?,
        None => agent.prompt(message, 0)?,
    };
    pump(agent, store);
    agent.model_done(&id, 1, AssistantMessage::text("hello"))?;
    pump(agent, store);
    assert!(agent.is_idle());
    Ok(id)
}

/// A host-supplied run id may not repeat a minted or supplied one (written exactly as it was),
/// minting skips supplied ids, and a recovered agent keeps both rules from committed facts.
#[test]
fn run_ids_never_repeat_live_or_recovered() {
    let mut store = MemoryStore::new();
    let mut agent = Agent::new(config()).unwrap();
    let run = |agent: &mut Agent, store: &mut MemoryStore, id: Option<&str>| {
        one_run(agent, store, id).map(|id| id.as_str().to_owned())
    };
    let used = |result: Result<String, AgentError>| match result {
        Err(AgentError::InvalidInput(reason)) => reason.contains("already used"),
        other => panic!("expected an already-used error, got {other:?}"),
    };
    assert_eq!(run(&mut agent, &mut store, None).unwrap(), "thread-1/run-1");
    assert!(used(run(&mut agent, &mut store, Some("thread-1/run-1"))));
    // Not the minted spelling: a different id.
    assert_eq!(
        run(&mut agent, &mut store, Some("thread-1/run-01")).unwrap(),
        "thread-1/run-01"
    );
    assert_eq!(
        run(&mut agent, &mut store, Some("thread-1/run-3")).unwrap(),
        "thread-1/run-3"
    );
    assert_eq!(run(&mut agent, &mut store, None).unwrap(), "thread-1/run-2");
    assert_eq!(
        run(&mut agent, &mut store, None).unwrap(),
        "thread-1/run-4",
        "minting skips the supplied run-3"
    );
    for id in ["thread-1/run-2", "thread-1/run-3", "thread-1/run-01"] {
        assert!(used(run(&mut agent, &mut store, Some(id))), "{id}");
    }

    let mut cold =
        Agent::recover(config(), &store, &thread(), RecoveryPolicy::Replay).expect("recovers");
    for id in [
        "thread-1/run-1",
        "thread-1/run-3",
        "thread-1/run-4",
        "thread-1/run-01",
    ] {
        assert!(
            used(run(&mut cold, &mut store, Some(id))),
            "{id} after recovery"
        );
    }
    assert_eq!(run(&mut cold, &mut store, None).unwrap(), "thread-1/run-5");
    assert_eq!(
        run(&mut cold, &mut store, Some("thread-1/run-7")).unwrap(),
        "thread-1/run-7"
    );
    assert_eq!(run(&mut cold, &mut store, None).unwrap(), "thread-1/run-6");
    assert_eq!(run(&mut cold, &mut store, None).unwrap(), "thread-1/run-8");
}

/// The active run's first message must lie within the transcript: a snapshot whose run starts
/// one past the end is refused as `Inconsistent`; one that starts exactly at the end (a run
/// whose prompt has not been appended yet cannot exist, but the bound is inclusive) restores.
#[test]
fn a_snapshot_whose_run_starts_past_the_transcript_is_refused() {
    let live = with_a_call("echo", true);
    let value: serde_json::Value = serde_json::from_str(&live.snapshot_json()).unwrap();
    let len = live.transcript().len();
    let path = "/agent/active/run/transcript_start";
    assert_eq!(
        value.pointer(path),
        Some(&json!(0)),
        "the live run starts at 0"
    );
    for (start, restores) in [(len, true), (len + 1, false), (len + 7, false)] {
        let mut edited = value.clone();
        *edited.pointer_mut(path).expect(path) = json!(start);
        let result = Agent::restore_json(&edited.to_string());
        match result {
            Ok(agent) => assert!(restores, "start {start} of {len} restored: {agent:?}"),
            Err(err) => {
                assert!(!restores, "start {start} of {len}: {err:?}");
                assert!(matches!(err, SnapshotError::Inconsistent(_)), "{err:?}");
            }
        }
    }
}

/// An `abort` while the model call is out records the end; a `stop` after it changes nothing,
/// so the run ends `Cancelled` when the call's outcome arrives, never `Stopped`.
#[test]
fn a_stop_after_a_recorded_abort_does_not_replace_it() {
    let mut agent = Agent::new(config()).unwrap();
    agent.prompt(UserMessage::text("go"), 0).unwrap();
    let _ = agent.drain();
    agent.abort().unwrap();
    agent.stop("later").unwrap();
    agent.abort().unwrap();
    agent
        .model_done(&run(1), 1, AssistantMessage::text("late"))
        .unwrap();
    let ends: Vec<EndCause> = agent
        .drain()
        .into_iter()
        .filter_map(|output| match output {
            Output::Commit(commit) => match &commit.commit.run {
                RunDisposition::Ended { cause, .. } => Some(cause.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![EndCause::Cancelled]);
}
