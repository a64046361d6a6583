//! `decide_recovery` without any store (SPEC §8.7): thread facts are generated directly (a
//! head run in every state the table names, its messages, drafts, decisions and ticket, an
//! earlier history, a compaction), and the decision is checked against a naive reference of
//! the §8.7 table written from what the generator made (not from the messages), so a wrong
//! arm in the decision shows up as a counterexample.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;
use runcore::facts::{CommitFacts, CompactionFact, RunFacts, ThreadFacts};
use runcore::*;
use serde_json::{Value, json};

const THREAD: &str = "t";

fn head_id() -> RunId {
    RunId::new("t/run-9")
}

fn message(value: Value) -> Message {
    serde_json::from_value(value).expect("a message")
}

fn user(text: &str) -> Message {
    message(json!({"role":"user","content":[{"type":"text","text":text}]}))
}

fn answer(text: &str) -> Message {
    message(
        json!({"role":"assistant","content":[{"type":"text","text":text}],
                   "stop_reason":"stop"}),
    )
}

/// The kinds of tool the generated calls use.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tool {
    /// Runs without asking.
    Auto,
    /// Needs approval.
    Gated,
    /// Arguments that are not a JSON object (the call is answered `malformed`).
    Malformed,
}

fn calls_message(step: usize, tools: &[Tool]) -> Message {
    let content: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let (name, arguments) = match tool {
                Tool::Auto => ("auto", json!({"i": i})),
                Tool::Gated => ("gated", json!({"i": i})),
                Tool::Malformed => ("auto", json!("{not json")),
            };
            json!({"type":"tool_call","id":format!("s{step}c{i}"),"name":name,
                   "arguments":arguments})
        })
        .collect();
    message(json!({"role":"assistant","content":content,"stop_reason":"tool_use"}))
}

fn result(call_id: &str) -> Message {
    message(
        json!({"role":"tool_result","call_id":call_id,"tool_name":"auto",
                   "content":[{"type":"text","text":"ok"}],"is_error":false,
                   "outcome":"executed"}),
    )
}

/// How the head run's messages end.
#[derive(Debug, Clone)]
enum Tail {
    /// Its last message is the user's or a tool result: a model call is next.
    Nothing,
    /// A text answer.
    Text,
    /// An answer with tool calls none of which has a result; `system` resume context after
    /// it when set.
    Calls { tools: Vec<Tool>, system: bool },
}

/// What the store holds for the head run.
#[derive(Debug, Clone)]
enum HeadState {
    None,
    Ended,
    Running,
    Awaiting(Target),
}

/// The ticket of an Awaiting head run.
#[derive(Debug, Clone)]
enum Target {
    /// No ticket stored.
    Missing,
    Pause,
    Remote,
    /// A wait on open call `n` (modulo their count), or on a call no message makes.
    Call(Option<usize>),
}

/// A decision committed for open call `call` (modulo their count).
#[derive(Debug, Clone)]
struct Decided {
    call: usize,
    allow: bool,
    /// At the current step (else at an earlier one, which does not count).
    this_step: bool,
    now_ms: u64,
}

#[derive(Debug, Clone)]
struct Case {
    earlier: usize,
    head: HeadState,
    started: bool,
    started_ms: u64,
    closed_steps: usize,
    tail: Tail,
    /// The head run's latest `run_awaiting`: (step offset from the true count, boundary).
    wait: Option<(Option<i64>, Option<WaitBoundary>)>,
    decisions: Vec<Decided>,
    compaction: Option<usize>,
    max_steps: u32,
    policy: RecoveryPolicy,
}

fn tool() -> impl Strategy<Value = Tool> {
    prop_oneof![Just(Tool::Auto), Just(Tool::Gated), Just(Tool::Malformed)]
}

fn case() -> impl Strategy<Value = Case> {
    let head = prop_oneof![
        1 => Just(HeadState::None),
        1 => Just(HeadState::Ended),
        3 => Just(HeadState::Running),
        4 => prop_oneof![
            1 => Just(Target::Missing),
            1 => Just(Target::Pause),
            1 => Just(Target::Remote),
            3 => proptest::option::weighted(0.9, 0usize..4).prop_map(Target::Call),
        ]
        .prop_map(HeadState::Awaiting),
    ];
    let tail = prop_oneof![
        1 => Just(Tail::Nothing),
        1 => Just(Tail::Text),
        3 => (proptest::collection::vec(tool(), 1..4), any::<bool>())
            .prop_map(|(tools, system)| Tail::Calls { tools, system }),
    ];
    let wait = proptest::option::of((
        proptest::option::of(-1i64..2),
        proptest::option::of(prop_oneof![
            Just(WaitBoundary::TextStop),
            Just(WaitBoundary::AfterToolBatch)
        ]),
    ));
    let decisions = proptest::collection::vec(
        (
            0usize..4,
            any::<bool>(),
            proptest::bool::weighted(0.8),
            0u64..5_000,
        )
            .prop_map(|(call, allow, this_step, now_ms)| Decided {
                call,
                allow,
                this_step,
                now_ms,
            }),
        0..4,
    );
    (
        (0usize..3, head, proptest::bool::weighted(0.9), 0u64..5_000),
        (0usize..3, tail, wait, decisions),
        (
            proptest::option::weighted(0.3, 0usize..12),
            prop_oneof![1 => Just(1u32), 1 => Just(3u32), 3 => Just(50u32)],
            prop_oneof![Just(RecoveryPolicy::Replay), Just(RecoveryPolicy::Seal)],
        ),
    )
        .prop_map(
            |(
                (earlier, head, started, started_ms),
                (closed_steps, tail, wait, decisions),
                (compaction, max_steps, policy),
            )| Case {
                earlier,
                head,
                started,
                started_ms,
                closed_steps,
                tail,
                wait,
                decisions,
                compaction,
                max_steps,
                policy,
            },
        )
}

impl Case {
    fn open_tools(&self) -> &[Tool] {
        match &self.tail {
            Tail::Calls { tools, .. } => tools,
            _ => &[],
        }
    }

    fn open_id(&self, n: usize) -> Option<CallId> {
        let tools = self.open_tools();
        (!tools.is_empty())
            .then(|| CallId::new(format!("s{}c{}", self.closed_steps, n % tools.len())))
    }

    /// The true step count: the head run's assistant messages.
    fn steps(&self) -> usize {
        self.closed_steps + usize::from(!matches!(self.tail, Tail::Nothing))
    }

    fn transcript_start(&self) -> usize {
        2 * self.earlier
    }

    fn messages(&self) -> Vec<Message> {
        let mut messages = Vec::new();
        for i in 0..self.earlier {
            messages.push(user(&format!("earlier {i}")));
            messages.push(answer("ok"));
        }
        if matches!(self.head, HeadState::None) {
            return messages;
        }
        messages.push(user("go"));
        for step in 0..self.closed_steps {
            messages.push(calls_message(step, &[Tool::Auto]));
            messages.push(result(&format!("s{step}c0")));
        }
        match &self.tail {
            Tail::Nothing => {}
            Tail::Text => messages.push(answer("done")),
            Tail::Calls { tools, system } => {
                messages.push(calls_message(self.closed_steps, tools));
                if *system {
                    messages.push(message(
                        json!({"role":"system","content":[{"type":"text","text":"resumed"}]}),
                    ));
                }
            }
        }
        messages
    }

    fn ticket(&self) -> Option<ResumeTicket> {
        let HeadState::Awaiting(target) = &self.head else {
            return None;
        };
        let identity = WaitIdentity {
            correlation_id: "t/run-9:wait-1".into(),
            run_id: head_id(),
            thread_id: ThreadId::new(THREAD),
            snapshot_id: String::new(),
            catalog_fingerprint: String::new(),
        };
        match target {
            Target::Missing => None,
            Target::Pause => Some(ResumeTicket::pause(identity, PauseReason::Manual, None)),
            Target::Remote => Some(ResumeTicket::remote_input(
                identity,
                RemoteInputReason::UserInput,
                CallId::new("r1"),
                None,
            )),
            Target::Call(n) => {
                let call_id = n
                    .and_then(|n| self.open_id(n))
                    .unwrap_or_else(|| CallId::new("nobody"));
                Some(ResumeTicket::tool_call(
                    identity,
                    ToolWaitReason::Permission,
                    call_id,
                    PendingTool {
                        name: ToolName::new("gated"),
                        arguments: Arc::new(json!({})),
                    },
                    None,
                ))
            }
        }
    }

    fn recorded_step(&self) -> Option<u32> {
        let (offset, _) = self.wait?;
        let step = i64::try_from(self.steps()).ok()? + offset?;
        u32::try_from(step.max(0)).ok()
    }

    /// The head run's drafts, in three commits (start; waits; decisions).
    fn head_commits(&self) -> Vec<CommitFacts> {
        let mut start = Vec::new();
        if self.started {
            start.push(AuditDraft::RunStarted {
                run_id: head_id(),
                transcript_start: self.transcript_start(),
                now_ms: Some(self.started_ms),
            });
        }
        let mut waits = Vec::new();
        if let Some((_, boundary)) = self.wait {
            waits.push(AuditDraft::RunAwaiting {
                run_id: head_id(),
                step: self.recorded_step(),
                boundary,
            });
        }
        let steps = u32::try_from(self.steps()).unwrap_or(u32::MAX);
        let decisions = self
            .decisions
            .iter()
            .filter_map(|d| {
                let call_id = self.open_id(d.call)?;
                let decision = if d.allow {
                    PermissionDecision::Allow { note: None }
                } else {
                    PermissionDecision::Deny {
                        reason: Some(format!("no {}", d.call)),
                    }
                };
                Some(AuditDraft::PermissionDecided {
                    step: if d.this_step { steps } else { steps + 7 },
                    call_id,
                    decision,
                    now_ms: Some(d.now_ms),
                })
            })
            .collect();
        [start, waits, decisions]
            .into_iter()
            .enumerate()
            .map(|(i, drafts)| CommitFacts {
                sequence: 100 + i as u64,
                clock: None,
                drafts,
            })
            .collect()
    }

    fn facts(&self) -> ThreadFacts {
        let messages = self.messages();
        let mut runs: Vec<RunFacts> = (0..self.earlier)
            .map(|i| RunFacts {
                run_id: RunId::new(format!("t/run-{}", i + 1)),
                record: None,
                ticket: None,
                transcript_start: Some(2 * i),
                started_ms: Some(1),
                commits: vec![CommitFacts {
                    sequence: i as u64 + 1,
                    clock: None,
                    drafts: vec![AuditDraft::RunStarted {
                        run_id: RunId::new(format!("t/run-{}", i + 1)),
                        transcript_start: 2 * i,
                        // Earlier runs' clocks are not the head run's.
                        now_ms: Some(1_000_000),
                    }],
                }],
            })
            .collect();
        let state = match &self.head {
            HeadState::None => None,
            HeadState::Ended => Some(RunState::Ended(EndCause::NaturalEnd)),
            HeadState::Running => Some(RunState::Running),
            HeadState::Awaiting(_) => Some(RunState::Awaiting),
        };
        let head = state.map(|state| RunRecord {
            id: head_id(),
            thread_id: ThreadId::new(THREAD),
            state,
            commits: 3,
        });
        if head.is_some() {
            runs.push(RunFacts {
                run_id: head_id(),
                record: None,
                ticket: None,
                transcript_start: self.started.then_some(self.transcript_start()),
                started_ms: None,
                commits: self.head_commits(),
            });
        }
        let compactions = self
            .compaction
            .map(|keep_from| CompactionFact {
                run_id: RunId::new("t/run-1"),
                commit_sequence: 1,
                keep_from,
                transcript_len: keep_from,
                summary: match user("summary") {
                    Message::User(summary) => summary,
                    other => panic!("not a user message: {other:?}"),
                },
                now_ms: None,
            })
            .into_iter()
            .collect();
        ThreadFacts {
            thread_id: ThreadId::new(THREAD),
            version: 5,
            messages,
            head,
            head_ticket: self.ticket(),
            runs,
            compactions,
            forked_from: None,
            imports: Vec::new(),
        }
    }

    fn config(&self) -> AgentConfig {
        let mut config = AgentConfig::for_thread(THREAD)
            .with_tool("auto", ToolSpec::auto("runs"))
            .with_tool("gated", ToolSpec::gated("asks", None));
        config.max_steps = self.max_steps;
        config
    }
}

/// What the table says, from what the generator made.
#[derive(Debug, PartialEq)]
enum Expected {
    Refused,
    Idle,
    Ended,
    Resume { steps: u32, next: NextStep },
}

/// The naive reference of SPEC §8.7, read off the case.
fn reference(case: &Case) -> Expected {
    let messages = case.messages();
    if case.compaction.is_some_and(|keep| keep > messages.len()) {
        return Expected::Refused;
    }
    let awaiting = match &case.head {
        HeadState::None => return Expected::Idle,
        HeadState::Ended => return Expected::Ended,
        HeadState::Running => false,
        HeadState::Awaiting(_) => true,
    };
    if !case.started {
        return Expected::Refused;
    }
    let steps = case.steps() as u32;
    if steps > case.max_steps {
        return Expected::Refused;
    }
    if let Some(recorded) = case.recorded_step()
        && (recorded > steps || (awaiting && recorded != steps))
    {
        return Expected::Refused;
    }
    // Each open call: the latest decision of this step, else its tool's kind.
    let calls: Vec<CallDecision> = case
        .open_tools()
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let call = match &messages[case.transcript_start() + 1 + 2 * case.closed_steps] {
                Message::Assistant(a) => a.tool_calls().nth(i).expect("the call"),
                other => panic!("not the calls: {other:?}"),
            };
            let latest = case
                .decisions
                .iter()
                .rev()
                .find(|d| d.this_step && d.call % case.open_tools().len() == i);
            let action = match (latest, tool) {
                (Some(d), _) if d.allow => CallAction::Execute,
                (Some(d), _) => CallAction::Denied {
                    reason: Some(format!("no {}", d.call)),
                },
                (None, Tool::Malformed) => CallAction::Malformed,
                (None, Tool::Auto) => CallAction::Execute,
                (None, Tool::Gated) => CallAction::Ask,
            };
            CallDecision { call, action }
        })
        .collect();
    let next = match (&case.head, &case.tail) {
        (HeadState::Awaiting(Target::Missing), _) => return Expected::Refused,
        (HeadState::Awaiting(Target::Call(_)), Tail::Nothing | Tail::Text) => {
            return Expected::Refused;
        }
        (HeadState::Awaiting(Target::Call(None)), _) => return Expected::Refused,
        (HeadState::Awaiting(Target::Call(Some(n))), Tail::Calls { tools, .. }) => {
            let mut calls = calls;
            calls[n % tools.len()].action = CallAction::Ask;
            NextStep::AwaitCall {
                ticket: Box::new(case.ticket().expect("a ticket")),
                calls,
            }
        }
        (HeadState::Awaiting(_), tail) => {
            let implied = match (tail, case.closed_steps) {
                (Tail::Nothing, n) if n > 0 => WaitBoundary::AfterToolBatch,
                _ => WaitBoundary::TextStop,
            };
            NextStep::AwaitAt {
                ticket: Box::new(case.ticket().expect("a ticket")),
                interrupted: case.wait.and_then(|(_, b)| b).unwrap_or(implied),
            }
        }
        (_, Tail::Calls { .. }) => {
            let seal = case.policy == RecoveryPolicy::Seal
                && !calls.iter().any(|c| c.action == CallAction::Ask)
                && calls.iter().any(|c| c.action == CallAction::Execute);
            NextStep::OpenCalls { calls, seal }
        }
        (_, Tail::Text) => NextStep::Boundary,
        (_, Tail::Nothing) => NextStep::CallModel,
    };
    Expected::Resume { steps, next }
}

proptest! {
    #![proptest_config(common::proptest_config("proptest-regressions/recovery_decision.txt", 2_000))]

    #[test]
    fn decide_recovery_follows_the_table(case in case()) {
        let facts = case.facts();
        let decided = decide_recovery(&facts, &case.config(), case.policy);
        let expected = reference(&case);
        let decision = match (decided, &expected) {
            (Err(error), Expected::Refused) => {
                prop_assert_eq!(error.kind(), "invalid_input");
                return Ok(());
            }
            (Err(error), _) => {
                return Err(TestCaseError::fail(format!("refused: {error}; expected {expected:?}")));
            }
            (Ok(decision), _) => decision,
        };
        match (&decision.head, expected) {
            (HeadDecision::Idle, Expected::Idle) => {}
            (HeadDecision::Ended { run_id, cause }, Expected::Ended) => {
                prop_assert_eq!(run_id, &head_id());
                prop_assert_eq!(cause, &EndCause::NaturalEnd);
            }
            (HeadDecision::Resume(run), Expected::Resume { steps, next }) => {
                prop_assert_eq!(&run.run_id, &head_id());
                prop_assert_eq!(run.steps, steps);
                prop_assert_eq!(run.transcript_start, case.transcript_start());
                prop_assert_eq!(run.commits, 3);
                prop_assert_eq!(run.waits, u32::from(case.wait.is_some()));
                prop_assert_eq!(&run.next, &next);
                // The clock: the latest time the head run's facts recorded.
                let decided_ms = case
                    .decisions
                    .iter()
                    .filter(|d| case.open_id(d.call).is_some())
                    .map(|d| d.now_ms);
                let clock = decided_ms.chain([case.started_ms]).max().unwrap_or(0);
                prop_assert_eq!(decision.clock_ms, clock);
            }
            (head, expected) => {
                return Err(TestCaseError::fail(format!("decided {head:?}; expected {expected:?}")));
            }
        }
        // Every run of the thread, and the head, count as used.
        let used: BTreeSet<RunId> = facts
            .runs
            .iter()
            .map(|r| r.run_id.clone())
            .chain(facts.head.as_ref().map(|h| h.id.clone()))
            .collect();
        prop_assert_eq!(&decision.used_run_ids, &used);
        prop_assert_eq!(
            decision.compaction.as_ref().map(|(keep, _)| *keep),
            case.compaction
        );
    }
}

/// A configuration for another thread is refused before anything is decided.
#[test]
fn decide_recovery_refuses_a_configuration_for_another_thread() {
    let facts = ThreadFacts::empty(ThreadId::new("t"));
    let error = decide_recovery(
        &facts,
        &AgentConfig::for_thread("u"),
        RecoveryPolicy::Replay,
    )
    .unwrap_err();
    assert!(error.to_string().contains("not \"t\""), "{error}");
}
