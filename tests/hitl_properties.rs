//! Properties of approvals, pauses, crash recovery and snapshots (SPEC §0, §8.5–§8.7).
//!
//! A scenario is a script of host answers, keyed by what the agent asks (so the same script
//! answers a warm agent and a recovered one alike):
//! - per run: the prompt, and per step (model call) the model's answer — text, tool calls of
//!   `echo` (auto), `rm` (approval, 1 s deadline) and `ask` (approval, no deadline), tool
//!   calls cut by the length limit, or an error stop;
//! - per step with tool calls: the order the executing calls are answered in (out of order),
//!   the approval decision of each gated call, and a steering message or a pause given while
//!   the tools execute;
//! - per step with a text, length or error answer: a steering message or a pause given while
//!   the model call is out;
//! - a manual pause is answered with text input and a system context message.
//!
//! [`drive`] plays a scenario against a harness: it answers whatever is outstanding from the
//! script, prompts the next run when the agent is idle, and stops when the script is done.
//!
//! Properties:
//! 1. **Warm equals cold.** A scenario is played uninterrupted; then, for every commit index
//!    k, it is played again up to the moment commit k is persisted, the process "crashes" (the
//!    agent and every output it had not handed out are dropped; the store survives), a new
//!    agent is recovered from the store with `RecoveryPolicy::Replay`, and the same script
//!    plays on. The committed commits (dispositions, messages, audit drafts), the store's
//!    transcript, audit events and run states must equal the uninterrupted run's.
//!
//!    Input the agent holds only in memory is lost in a crash by design (SPEC §8.7: recovery
//!    reads committed facts only): steering queued and a pause requested but not yet acted
//!    on. So the scripts give steering and pauses only where they are acted on by the same
//!    input that writes the next commit: while tools execute (the last tool outcome closes the
//!    batch and takes the boundary), or while a model call is out whose answer takes the
//!    boundary at once (text, length, error). Tool calls answered but not yet committed are
//!    lost too, and replayed — as the SPEC says for `Replay`. The clock is constant within a
//!    scenario, so tickets made after recovery get the same deadlines.
//! 2. **Snapshot equals live.** Round-tripping the agent through `snapshot_json` /
//!    `restore_json` at any poll (between inputs, mid-drain with outputs queued, before an
//!    action is decided) leaves every later output byte-identical (serialized JSON).
//! 3. **Pairing under every ending.** Scenarios ended by abort, `cancel_wait`, stop, expiry,
//!    `abandon_tools`, the step budget or a model failure: every tool call in the committed
//!    transcript has exactly one result, in call order, right after it, and no result exists
//!    without its call; the ended run ends with the ending's cause; `denied` results only for
//!    denied calls and `expired` only for an expired wait.

mod common;

use common::harness::{Harness, Reply, check_pairing};
use proptest::prelude::*;
use proptest::sample::Index;
use runcore::host::script::ModelTurn;
use runcore::store::*;
use runcore::*;
use serde_json::json;

const REGRESSIONS: &str = "proptest-regressions/hitl_properties.txt";
/// Case counts, chosen so the whole file runs in well under a minute in a debug build.
const WARM_COLD_CASES: u32 = 384;
const SNAPSHOT_CASES: u32 = 512;
const ENDING_CASES: u32 = 1024;

/// The tools a step may call: auto, gated with a deadline, gated without one.
const TOOLS: [&str; 3] = ["echo", "rm", "ask"];
const DEADLINE_AFTER_MS: u64 = 1_000;

fn config(max_steps: u32) -> AgentConfig {
    AgentConfig {
        max_steps,
        ..AgentConfig::default()
    }
    .with_tool("rm", ToolSpec::gated("remove", Some(DEADLINE_AFTER_MS)))
    .with_tool("ask", ToolSpec::gated("ask a person", None))
}

// ----- scenarios -------------------------------------------------------------------------------

/// What the model answers at one step.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    /// A text stop.
    Text,
    /// Tool calls (indexes into [`TOOLS`]) with `tool_use`.
    Calls(Vec<usize>),
    /// Tool calls cut by the length limit (paired `truncated`, never executed).
    Length(Vec<usize>),
    /// An assistant message with `stop_reason: error` (the run ends `Error`).
    ErrorStop,
}

/// Host input given while something is outstanding.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Extra {
    Steer,
    Pause,
}

#[derive(Debug, Clone)]
struct StepScript {
    answer: Answer,
    /// Given while the model call is out (only for answers that take a boundary at once).
    during_model: Option<Extra>,
    /// Sort keys of the executing calls: they are answered in key order (ties: call order).
    order: Vec<u8>,
    /// Given while the tools execute, before the answer at this position (mod the count).
    during_tools: Option<(usize, Extra)>,
    /// Per call: whether its approval (if it needs one) is granted.
    allow: Vec<bool>,
}

#[derive(Debug, Clone)]
struct RunScript {
    /// One per possible step (`max_steps` of them).
    steps: Vec<StepScript>,
}

#[derive(Debug, Clone)]
struct Scenario {
    max_steps: u32,
    clock_ms: u64,
    runs: Vec<RunScript>,
}

/// How a scenario of property 3 is ended.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    /// `abort()` when the host first meets an outstanding thing of this kind.
    Abort(At),
    /// `stop("host_policy")` likewise.
    Stop(At),
    /// `cancel_wait()` at the first wait.
    CancelWait,
    /// `expire_wait` just past the deadline of the first wait that has one.
    Expiry,
    /// `abandon_tools()` at the first batch, after answering some of its calls.
    AbandonTools,
    /// Every step of the first run calls tools, so the budget runs out.
    MaxSteps,
    /// `model_failed` for the first model call.
    ModelFailure,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum At {
    Model,
    Tools,
    Awaiting,
}

impl Ending {
    fn expected_cause(self) -> EndCause {
        match self {
            Ending::Abort(_) | Ending::CancelWait => EndCause::Cancelled,
            Ending::Stop(_) => EndCause::Stopped("host_policy".into()),
            Ending::Expiry => EndCause::Stopped("wait_expired".into()),
            Ending::AbandonTools => EndCause::Indeterminate,
            Ending::MaxSteps => EndCause::MaxSteps,
            Ending::ModelFailure => EndCause::Error(Failure::Inference {
                code: "overloaded".into(),
                message: "the model is overloaded".into(),
            }),
        }
    }
}

fn tool_indexes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..TOOLS.len(), 1..=3)
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        4 => Just(Answer::Text),
        6 => tool_indexes().prop_map(Answer::Calls),
        1 => tool_indexes().prop_map(Answer::Length),
        1 => Just(Answer::ErrorStop),
    ]
}

fn extra() -> impl Strategy<Value = Option<Extra>> {
    prop_oneof![
        4 => Just(None),
        1 => Just(Some(Extra::Steer)),
        1 => Just(Some(Extra::Pause)),
    ]
}

fn step_script() -> impl Strategy<Value = StepScript> {
    (
        answer(),
        extra(),
        prop::collection::vec(any::<u8>(), 3),
        (0..3usize, extra()),
        prop::collection::vec(prop::bool::weighted(0.7), 3),
    )
        .prop_map(|(answer, during_model, order, (at, tools_extra), allow)| {
            // Input given while the model is out is acted on by the same input that commits
            // only when the answer takes a boundary at once (see the module docs).
            let during_model = match answer {
                Answer::Calls(_) => None,
                _ => during_model,
            };
            StepScript {
                answer,
                during_model,
                order,
                during_tools: tools_extra.map(|extra| (at, extra)),
                allow,
            }
        })
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (1..=4u32, 0..5_000u64, 1..=3usize).prop_flat_map(|(max_steps, clock_ms, runs)| {
        let steps = prop::collection::vec(step_script(), max_steps as usize);
        prop::collection::vec(steps.prop_map(|steps| RunScript { steps }), runs).prop_map(
            move |runs| Scenario {
                max_steps,
                clock_ms,
                runs,
            },
        )
    })
}

fn ending() -> impl Strategy<Value = Ending> {
    let at = prop_oneof![Just(At::Model), Just(At::Tools), Just(At::Awaiting)];
    prop_oneof![
        at.clone().prop_map(Ending::Abort),
        at.prop_map(Ending::Stop),
        Just(Ending::CancelWait),
        Just(Ending::Expiry),
        Just(Ending::AbandonTools),
        Just(Ending::MaxSteps),
        Just(Ending::ModelFailure),
    ]
}

/// A scenario whose first step surely reaches every kind of opportunity (a model call, an
/// `rm` wait, an executing `echo`), ended by `ending` at the first opportunity at or after
/// host action `from`.
fn ended_scenario() -> impl Strategy<Value = (Scenario, Ending, usize)> {
    (scenario(), ending(), 0..6usize).prop_map(|(mut scenario, ending, from)| {
        let first = &mut scenario.runs[0].steps[0];
        let mut calls = vec![1, 0];
        if let Answer::Calls(more) | Answer::Length(more) = &first.answer {
            calls.extend(more.iter().copied().take(1));
        }
        first.answer = Answer::Calls(calls);
        first.during_model = None;
        if ending == Ending::MaxSteps {
            for step in &mut scenario.runs[0].steps {
                match &step.answer {
                    Answer::Calls(_) => {}
                    Answer::Length(calls) => step.answer = Answer::Calls(calls.clone()),
                    Answer::Text | Answer::ErrorStop => step.answer = Answer::Calls(vec![0]),
                }
                step.during_model = None;
            }
        }
        (scenario, ending, from)
    })
}

// ----- the scripted host ---------------------------------------------------------------------------

/// The `n` of `"thread-1/run-{n}"`.
fn run_number(run_id: &RunId) -> usize {
    run_id
        .as_str()
        .rsplit("run-")
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a minted run id: {run_id}"))
}

fn call_id(run: usize, step: Step, index: usize) -> String {
    format!("r{run}s{step}c{index}")
}

/// `(run, step, index)` of a call id made by [`call_id`].
fn parse_call_id(id: &CallId) -> (usize, Step, usize) {
    let parse = || {
        let rest = id.as_str().strip_prefix('r')?;
        let (run, rest) = rest.split_once('s')?;
        let (step, index) = rest.split_once('c')?;
        Some((run.parse().ok()?, step.parse().ok()?, index.parse().ok()?))
    };
    parse().unwrap_or_else(|| panic!("not a scripted call id: {id}"))
}

impl Scenario {
    fn step(&self, run: usize, step: Step) -> &StepScript {
        &self.runs[run - 1].steps[step as usize - 1]
    }

    fn reply(&self, run: usize, step: Step) -> ModelTurn {
        let calls = |tools: &[usize]| -> Vec<AssistantBlock> {
            tools
                .iter()
                .enumerate()
                .map(|(i, &tool)| {
                    AssistantBlock::tool_call(
                        call_id(run, step, i).as_str(),
                        TOOLS[tool],
                        json!({ "n": i }),
                    )
                })
                .collect()
        };
        match &self.step(run, step).answer {
            Answer::Text => Reply::text(&format!("answer r{run}s{step}")),
            Answer::Calls(tools) => {
                ModelTurn::answer(AssistantMessage::new(calls(tools), StopReason::ToolUse))
            }
            Answer::Length(tools) => {
                ModelTurn::answer(AssistantMessage::new(calls(tools), StopReason::Length))
            }
            Answer::ErrorStop => ModelTurn::answer(AssistantMessage {
                error_message: Some("the provider failed".into()),
                ..AssistantMessage::new(Vec::new(), StopReason::Error)
            }),
        }
    }

    /// Whether the script grants the approval of `call`.
    fn allows(&self, call: &CallId) -> bool {
        let (run, step, index) = parse_call_id(call);
        self.step(run, step).allow[index]
    }
}

/// What property 3 asks the host to do, and what happened.
#[derive(Debug, Default)]
struct EndingPlan {
    ending: Option<Ending>,
    /// The host applies the ending at the first opportunity at or after this action.
    from_action: usize,
    actions: usize,
    /// The run the ending was applied to.
    applied_to: Option<RunId>,
}

impl EndingPlan {
    fn armed(&self) -> Option<Ending> {
        match self.ending {
            Some(ending) if self.applied_to.is_none() && self.actions >= self.from_action => {
                Some(ending)
            }
            _ => None,
        }
    }
}

fn extra_input(h: &mut Harness, extra: Extra, label: &str) {
    match extra {
        Extra::Steer => h
            .steer(&format!("steer {label}"))
            .expect("steering accepted"),
        Extra::Pause => h.input("pause", Input::Pause).expect("pause accepted"),
    }
}

/// Plays `scenario` against `h` until the script is done (or the harness crashes).
fn drive(h: &mut Harness, scenario: &Scenario) {
    drive_with_ending(h, scenario, &mut EndingPlan::default());
}

fn drive_with_ending(h: &mut Harness, scenario: &Scenario, plan: &mut EndingPlan) {
    for _ in 0..10_000 {
        if h.crashed {
            return;
        }
        let armed = plan.armed();
        plan.actions += 1;
        if let Some((run_id, step)) = h.pending_model.clone() {
            let run = run_number(&run_id);
            match armed {
                Some(Ending::Abort(At::Model)) => {
                    h.abort().unwrap();
                    plan.applied_to = Some(run_id.clone());
                }
                Some(Ending::Stop(At::Model)) => {
                    stop(h);
                    plan.applied_to = Some(run_id.clone());
                }
                Some(Ending::ModelFailure) => {
                    h.pending_model = None;
                    plan.applied_to = Some(run_id.clone());
                    let reply = ModelTurn::fail("overloaded", "the model is overloaded");
                    h.answer_model(&run_id, step, reply);
                    continue;
                }
                _ => {}
            }
            if let Some(extra) = scenario.step(run, step).during_model {
                extra_input(h, extra, &format!("r{run}s{step}"));
            }
            h.pending_model = None;
            h.answer_model(&run_id, step, scenario.reply(run, step));
            continue;
        }
        if let Some((run_id, first)) = h.pending_tools.first().cloned() {
            let (run, step, _) = parse_call_id(&first.id);
            let script = scenario.step(run, step);
            let mut calls: Vec<(u8, usize, String)> = h
                .pending_tools
                .iter()
                .map(|(_, call)| {
                    let (_, _, index) = parse_call_id(&call.id);
                    (script.order[index], index, call.id.as_str().to_owned())
                })
                .collect();
            calls.sort();
            let abandon_after = match armed {
                Some(Ending::Abort(At::Tools)) => {
                    h.abort().unwrap();
                    plan.applied_to = Some(run_id.clone());
                    None
                }
                Some(Ending::Stop(At::Tools)) => {
                    stop(h);
                    plan.applied_to = Some(run_id.clone());
                    None
                }
                Some(Ending::AbandonTools) => Some(usize::from(script.order[0]) % calls.len()),
                _ => None,
            };
            let inject = script
                .during_tools
                .map(|(at, extra)| (at % calls.len(), extra));
            for (position, (_, _, id)) in calls.iter().enumerate() {
                if abandon_after == Some(position) {
                    h.input("abandon_tools", Input::AbandonTools)
                        .expect("abandon accepted");
                    h.pending_tools.clear();
                    plan.applied_to = Some(run_id.clone());
                    break;
                }
                if let Some((at, extra)) = inject
                    && at == position
                {
                    extra_input(h, extra, &format!("r{run}s{step}"));
                }
                h.answer_call(id);
                if h.crashed {
                    return;
                }
            }
            continue;
        }
        if let Some(ticket) = h.agent.current_ticket().cloned() {
            match armed {
                Some(Ending::Abort(At::Awaiting)) => {
                    h.abort().unwrap();
                    plan.applied_to = Some(ticket.run_id.clone());
                    continue;
                }
                Some(Ending::Stop(At::Awaiting)) => {
                    stop(h);
                    plan.applied_to = Some(ticket.run_id.clone());
                    continue;
                }
                Some(Ending::CancelWait) => {
                    h.input("cancel_wait", Input::CancelWait).unwrap();
                    plan.applied_to = Some(ticket.run_id.clone());
                    continue;
                }
                Some(Ending::Expiry) => {
                    if let Some(deadline) = ticket.deadline_ms {
                        h.clock_ms = deadline + 1;
                        h.input_at(
                            &format!("expire_wait {}", deadline + 1),
                            Input::ExpireWait,
                            deadline + 1,
                        )
                        .unwrap();
                        plan.applied_to = Some(ticket.run_id.clone());
                        continue;
                    }
                }
                _ => {}
            }
            match ticket.target() {
                AwaitTarget::ToolCall { call_id, .. } => {
                    let result = if scenario.allows(call_id) {
                        ResumeResult::allow()
                    } else {
                        ResumeResult::deny("denied by the script")
                    };
                    h.resume(result).expect("the scripted answer is accepted");
                }
                _ => {
                    // A pause is answered with text and a system context message.
                    let corr = &ticket.correlation_id;
                    let context = Message::System(
                        SystemMessage::text(format!("context for {corr}"))
                            .with_id(format!("ctx-{corr}"))
                            .into(),
                    );
                    let command = ResumeCommand::from_ticket(
                        &ticket,
                        ResumeResult::Input(format!("go on after {corr}")),
                        h.clock_ms,
                    )
                    .with_context(vec![context]);
                    h.input(
                        &format!("resume {corr} with input and context"),
                        Input::Resume { command },
                    )
                    .expect("the scripted answer is accepted");
                }
            }
            continue;
        }
        if h.agent.active_run_id().is_none() {
            let next = h
                .store
                .latest_run(h.agent.thread_id())
                .unwrap()
                .map_or(0, |run| run_number(&run.id));
            if next >= scenario.runs.len() {
                return;
            }
            h.prompt(&format!("prompt {}", next + 1))
                .expect("the prompt is accepted");
            continue;
        }
        panic!("the host is stuck:\n{}", h.rendered());
    }
    panic!("the scenario did not finish:\n{}", h.rendered());
}

fn stop(h: &mut Harness) {
    h.input(
        "stop host_policy",
        Input::Stop {
            reason: "host_policy".into(),
        },
    )
    .expect("stop accepted");
}

fn harness(scenario: &Scenario) -> Harness {
    let mut h = Harness::new(config(scenario.max_steps));
    h.clock_ms = scenario.clock_ms;
    h
}

// ----- what a run commits --------------------------------------------------------------------------

/// Everything the store knows about the thread: its transcript, every run's state (in run
/// order), and every audit event (kind and payload, in order).
#[derive(Debug, PartialEq)]
struct Committed {
    messages: Vec<Message>,
    runs: Vec<(RunId, RunState)>,
    events: Vec<(String, serde_json::Value)>,
}

fn committed(store: &MemoryStore) -> Committed {
    let thread = ThreadId::new("thread-1");
    let events = store
        .list_events(&EventScope::All, None, usize::MAX)
        .unwrap();
    let mut runs: Vec<(RunId, RunState)> = Vec::new();
    for event in &events {
        if !runs.iter().any(|(run, _)| *run == event.run_id) {
            let state = store
                .run_state(&event.run_id)
                .unwrap()
                .expect("a committed run");
            runs.push((event.run_id.clone(), state));
        }
    }
    Committed {
        messages: store.committed_messages(&thread).unwrap(),
        runs,
        events: events.into_iter().map(|e| (e.kind, e.payload)).collect(),
    }
}

fn commits_json(commits: &[ThreadCommit]) -> Vec<String> {
    commits
        .iter()
        .map(|c| serde_json::to_string(c).expect("commits serialize"))
        .collect()
}

// ----- properties ----------------------------------------------------------------------------------

proptest! {
    #![proptest_config(common::proptest_config(REGRESSIONS, WARM_COLD_CASES))]

    /// Property 1: a crash after any commit, then recovery with `Replay` and the same script,
    /// commits exactly what the uninterrupted run commits.
    #[test]
    fn warm_equals_cold_after_a_crash_at_any_commit(scenario in scenario()) {
        let mut warm = harness(&scenario);
        drive(&mut warm, &scenario);
        prop_assert!(warm.agent.is_idle());
        let warm_commits = commits_json(&warm.commits);
        let warm_facts = committed(&warm.store);
        prop_assert_eq!(&warm_facts.messages, &warm.agent.transcript().to_vec());

        for k in 1..=warm.commits.len() {
            let mut h = harness(&scenario);
            h.crash_after_commits = Some(k);
            drive(&mut h, &scenario);
            prop_assert!(h.crashed, "commit {k} was never reached");
            let mut all_commits = h.commits.clone();
            let store = h.store.clone();
            drop(h);

            let mut cold = Harness::recover(config(scenario.max_steps), store, RecoveryPolicy::Replay)
                .map_err(|e| TestCaseError::fail(format!("recovery after commit {k}: {e}")))?;
            cold.clock_ms = scenario.clock_ms;
            drive(&mut cold, &scenario);
            all_commits.extend(cold.commits.iter().cloned());

            prop_assert!(cold.agent.is_idle(), "after commit {k}:\n{}", cold.rendered());
            let cold_commits = commits_json(&all_commits);
            if let Some(i) = (0..warm_commits.len().max(cold_commits.len()))
                .find(|&i| warm_commits.get(i) != cold_commits.get(i))
            {
                return Err(TestCaseError::fail(format!(
                    "after a crash at commit {k}, commit {} differs:\n  warm: {:?}\n  cold: {:?}\n\
                     warm trace:\n{}\ncold trace (after recovery):\n{}",
                    i + 1,
                    warm_commits.get(i),
                    cold_commits.get(i),
                    warm.rendered(),
                    cold.rendered()
                )));
            }
            prop_assert_eq!(&committed(&cold.store), &warm_facts, "after a crash at commit {}", k);
            prop_assert_eq!(
                cold.agent.last_end(),
                warm.agent.last_end(),
                "end cause after a crash at commit {}", k
            );
            prop_assert_eq!(cold.agent.transcript(), warm.agent.transcript());
        }
    }
}

proptest! {
    #![proptest_config(common::proptest_config(REGRESSIONS, SNAPSHOT_CASES))]

    /// Property 2: a snapshot round trip at any poll changes no later output.
    #[test]
    fn snapshot_equals_live(scenario in scenario(), points in prop::collection::vec(any::<Index>(), 1..6)) {
        let mut live = harness(&scenario);
        live.output_log = Some(Vec::new());
        drive(&mut live, &scenario);
        let live_log = live.output_log.clone().unwrap_or_default();
        let live_agent = serde_json::to_string(&live.agent).expect("agent serializes");

        for point in points {
            let at = point.index(live.polls + 1);
            let mut restored = harness(&scenario);
            restored.output_log = Some(Vec::new());
            restored.restore_at_poll = Some(at);
            drive(&mut restored, &scenario);
            prop_assert_eq!(restored.restore_at_poll, None, "the round trip at poll {} happened", at);
            prop_assert_eq!(
                restored.output_log.as_ref(),
                Some(&live_log),
                "outputs differ after a snapshot round trip at poll {}", at
            );
            prop_assert_eq!(
                serde_json::to_string(&restored.agent).expect("agent serializes"),
                live_agent.clone()
            );
        }
    }

}

proptest! {
    #![proptest_config(common::proptest_config(REGRESSIONS, ENDING_CASES))]

    /// Property 3: whatever ends a run, every committed call has exactly one result, in call
    /// order, and the run ends with the ending's cause.
    #[test]
    fn every_call_is_paired_under_every_ending((scenario, ending, from) in ended_scenario()) {
        let mut h = harness(&scenario);
        let mut plan = EndingPlan {
            ending: Some(ending),
            from_action: from,
            ..EndingPlan::default()
        };
        if ending == Ending::MaxSteps {
            plan.applied_to = Some(RunId::new("thread-1/run-1"));
        }
        drive_with_ending(&mut h, &scenario, &mut plan);
        prop_assert!(h.agent.is_idle());

        let messages = h.store.committed_messages(h.agent.thread_id()).unwrap();
        if let Err(e) = check_pairing(&messages, false) {
            return Err(TestCaseError::fail(format!("{e}\n{}", h.rendered())));
        }
        // Synthetic results say what happened: `denied` only for a refused approval,
        // `expired` only for the expired wait.
        let results: Vec<&ToolResultMessage> =
            messages.iter().filter_map(Message::as_tool_result).collect();
        for result in &results {
            match result.outcome {
                ResultOutcome::Denied => prop_assert!(!scenario.allows(&result.call_id)),
                ResultOutcome::Expired => prop_assert_eq!(ending, Ending::Expiry),
                ResultOutcome::Interrupted => prop_assert_eq!(ending, Ending::AbandonTools),
                ResultOutcome::Executed => {
                    let tool = result.tool_name.as_str();
                    prop_assert!(tool == "echo" || scenario.allows(&result.call_id));
                }
                _ => {}
            }
        }
        prop_assert!(
            results.iter().filter(|r| r.outcome == ResultOutcome::Expired).count() <= 1
        );
        if from == 0 {
            prop_assert!(plan.applied_to.is_some(), "{:?} was never applied", ending);
        }
        if let Some(run) = &plan.applied_to {
            prop_assert_eq!(
                h.store.run_state(run).unwrap(),
                Some(RunState::Ended(ending.expected_cause())),
                "{:?} applied to {}:\n{}", ending, run, h.rendered()
            );
        }
    }
}

/// The scenario generator is deterministic: the same seed gives the same scenarios.
#[test]
fn scenario_generation_is_deterministic() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let sample = || {
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
        let mut runner = TestRunner::new_with_rng(Config::default(), rng);
        (0..8)
            .map(|_| format!("{:?}", scenario().new_tree(&mut runner).unwrap().current()))
            .collect::<Vec<_>>()
    };
    assert_eq!(sample(), sample());
}
