//! Generation: the reference state decides which inputs are plausible now; deliberately wrong
//! ones (wrong run or step, unknown or duplicate calls, inputs that mean nothing in the current
//! state) come at a lower weight.
//!
//! Texts and call ids carry the reference's transition counter, so every queued message and
//! every call id of a sequence is unique (shrinking deletes transitions, it never duplicates
//! them).

use proptest::prelude::*;
use proptest::strategy::Union;
use proptest_state_machine::ReferenceStateMachine;

use runcore::QueueMode;

use super::THREAD;
use super::reference::{RefConfig, RefPhase, RefState};
use super::transitions::{Reply, ToolAnswer, Transition};

const TOOLS: [&str; 3] = ["alpha", "beta", "gamma"];

/// `min`–3 calls with ids unique to this transition.
fn calls_strategy(serial: u32, min: usize) -> BoxedStrategy<Vec<(String, String)>> {
    proptest::collection::vec(proptest::sample::select(TOOLS.to_vec()), min..=3)
        .prop_map(move |names| {
            names
                .into_iter()
                .enumerate()
                .map(|(i, name)| (format!("c{serial}-{i}"), name.to_owned()))
                .collect()
        })
        .boxed()
}

/// A well-formed model answer: text, 1–3 calls, length (with or without calls), error or
/// aborted (with 0–3 calls).
fn reply_strategy(serial: u32) -> BoxedStrategy<Reply> {
    let text = format!("cut-{serial}");
    let error = format!("boom-{serial}");
    prop_oneof![
        6 => Just(Reply::Text(format!("answer-{serial}"))),
        8 => calls_strategy(serial, 1).prop_map(|calls| Reply::Calls { stop: false, calls }),
        1 => calls_strategy(serial, 1).prop_map(|calls| Reply::Calls { stop: true, calls }),
        1 => Just(Reply::Length { text: text.clone(), calls: Vec::new() }),
        2 => calls_strategy(serial, 1).prop_map(move |calls| Reply::Length { text: text.clone(), calls }),
        1 => calls_strategy(serial, 0).prop_map(move |calls| Reply::Error { message: error.clone(), calls }),
        1 => calls_strategy(serial, 0).prop_map(|calls| Reply::Aborted { calls }),
    ]
    .boxed()
}

fn tool_answer() -> BoxedStrategy<ToolAnswer> {
    prop_oneof![
        8 => Just(ToolAnswer::Ok),
        2 => Just(ToolAnswer::Error),
        1 => Just(ToolAnswer::Malformed),
        1 => Just(ToolAnswer::NamesAnotherCall),
    ]
    .boxed()
}

/// Weighted choices.
#[derive(Default)]
struct Arms(Vec<(u32, BoxedStrategy<Transition>)>);

impl Arms {
    fn just(&mut self, weight: u32, transition: Transition) {
        self.0.push((weight, Just(transition).boxed()));
    }

    fn add(&mut self, weight: u32, strategy: impl Strategy<Value = Transition> + 'static) {
        self.0.push((weight, strategy.boxed()));
    }

    /// The arms, plus (at a lower weight) one of them with an abort or stop interjected while
    /// it is drained.
    fn with_interjections(self, n: u32) -> BoxedStrategy<Transition> {
        let base = Union::new_weighted(self.0).boxed();
        let interjected = (
            base.clone(),
            proptest::option::weighted(0.3, Just(format!("halt-{n}"))),
        )
            .prop_map(|(inner, stop)| Transition::Interject {
                inner: Box::new(inner),
                stop,
            });
        prop_oneof![24 => base, 2 => interjected].boxed()
    }
}

/// Plausible next inputs for the reference state, with deliberately wrong ones at a lower
/// weight.
fn transitions_for(s: &RefState) -> BoxedStrategy<Transition> {
    let n = s.serial;
    let old_run = s
        .ends
        .last()
        .map_or_else(|| format!("{THREAD}/run-9"), |e| e.run.clone());
    let mut arms = Arms::default();

    // Valid or wrong depending on the state.
    arms.just(2, Transition::Abort);
    arms.just(1, Transition::stop(format!("policy-{n}")));
    arms.just(1, Transition::Pause);
    arms.just(1, Transition::CancelWait);
    arms.just(
        1,
        Transition::ExpireWait {
            now_ms: 1_000 + u64::from(n),
        },
    );
    arms.just(1, Transition::AbandonTools);
    arms.just(1, Transition::resume(format!("resume-{n}")));
    arms.just(1, Transition::ClearQueues);
    arms.just(
        1,
        Transition::SetQueueModes {
            steering: None,
            follow_ups: None,
        },
    );
    // Outcomes for an older (or unknown) run.
    let late = Reply::Text(format!("late-{n}"));
    arms.just(1, Transition::model_done(&old_run, 1, late.clone()));
    let old_call = format!("c{}-0", n.saturating_sub(1));
    arms.just(
        1,
        Transition::tool_done(&old_run, &old_call, ToolAnswer::Ok),
    );

    let Some(run) = &s.run else {
        arms.just(
            30,
            Transition::prompt(format!("prompt-{n}"), u64::from(n) * 10),
        );
        arms.just(1, Transition::prompt(" ", 0));
        arms.just(1, Transition::steer(format!("steer-{n}")));
        arms.just(1, Transition::follow_up(format!("follow-{n}")));
        arms.just(1, Transition::stop("\t"));
        return arms.with_interjections(n);
    };

    let id = run.id.as_str();
    arms.just(
        2,
        Transition::prompt(format!("prompt-{n}"), u64::from(n) * 10),
    );
    arms.just(7, Transition::steer(format!("steer-{n}")));
    arms.just(6, Transition::follow_up(format!("follow-{n}")));
    arms.just(2, Transition::ClearQueues);
    arms.add(
        2,
        (
            proptest::option::of(queue_mode()),
            proptest::option::of(queue_mode()),
        )
            .prop_map(|(steering, follow_ups)| Transition::SetQueueModes {
                steering,
                follow_ups,
            }),
    );
    arms.just(1, Transition::steer("  "));
    arms.just(1, Transition::Pause);
    match &run.phase {
        RefPhase::Model { step } => {
            let step = *step;
            let right = id.to_owned();
            arms.add(
                40,
                reply_strategy(n)
                    .prop_map(move |reply| Transition::model_done(&right, step, reply)),
            );
            arms.just(6, Transition::model_delta(id, step, format!("delta-{n}")));
            arms.just(
                3,
                Transition::model_failed(id, step, "overloaded", format!("busy-{n}")),
            );
            arms.just(1, Transition::model_failed(id, step, " ", "no code"));
            let duplicate = Reply::DuplicateIds {
                id: format!("c{n}-0"),
            };
            arms.just(1, Transition::model_done(id, step, duplicate));
            // Wrong step, wrong run, no tools out.
            arms.just(
                1,
                Transition::model_done(id, step + 1, Reply::Text(format!("early-{n}"))),
            );
            arms.just(
                1,
                Transition::model_done(id, step - 1, Reply::Text(format!("stale-{n}"))),
            );
            arms.just(1, Transition::model_delta(&old_run, step, "stale"));
            arms.just(
                1,
                Transition::model_failed(id, step + 1, "overloaded", "early"),
            );
            arms.just(1, Transition::tool_progress(id, format!("c{n}-0")));
        }
        RefPhase::Tools {
            step,
            calls,
            results,
        } => {
            let pending: Vec<String> = calls
                .iter()
                .map(|c| c.id.as_str().to_owned())
                .filter(|c| !results.contains_key(c))
                .collect();
            let answered: Vec<String> = results.keys().cloned().collect();
            if !pending.is_empty() {
                // Pending calls answered in any order.
                let right = id.to_owned();
                let select = proptest::sample::select(pending.clone());
                arms.add(
                    40,
                    (select, tool_answer()).prop_map(move |(call, answer)| {
                        Transition::tool_done(&right, call, answer)
                    }),
                );
                let right = id.to_owned();
                let select = proptest::sample::select(pending.clone());
                arms.add(
                    4,
                    select.prop_map(move |call| Transition::tool_progress(&right, call)),
                );
                let other = old_run.clone();
                let select = proptest::sample::select(pending);
                arms.add(
                    1,
                    select
                        .prop_map(move |call| Transition::tool_done(&other, call, ToolAnswer::Ok)),
                );
            }
            if !answered.is_empty() {
                // Duplicates.
                let right = id.to_owned();
                let select = proptest::sample::select(answered.clone());
                arms.add(
                    3,
                    (select, tool_answer()).prop_map(move |(call, answer)| {
                        Transition::tool_done(&right, call, answer)
                    }),
                );
                let right = id.to_owned();
                let select = proptest::sample::select(answered);
                arms.add(
                    1,
                    select.prop_map(move |call| Transition::tool_progress(&right, call)),
                );
            }
            // Unknown calls, abandoning, a model outcome while tools run.
            arms.just(
                2,
                Transition::tool_done(id, format!("ghost-{n}"), ToolAnswer::Ok),
            );
            arms.just(1, Transition::tool_progress(id, format!("ghost-{n}")));
            arms.just(2, Transition::AbandonTools);
            arms.just(1, Transition::model_done(id, *step, late));
        }
        RefPhase::Paused => {
            arms.just(25, Transition::resume(format!("resume-{n}")));
            arms.just(1, Transition::resume(" "));
            arms.just(
                2,
                Transition::Resume {
                    answer: super::transitions::Answer::Continue,
                },
            );
            arms.just(3, Transition::CancelWait);
            arms.just(
                2,
                Transition::ExpireWait {
                    now_ms: runcore::limits::MAX_NOW_MS,
                },
            );
            arms.just(1, Transition::model_done(id, run.steps, late));
        }
        RefPhase::Between => {}
    }
    arms.with_interjections(n)
}

fn queue_mode() -> BoxedStrategy<QueueMode> {
    prop_oneof![Just(QueueMode::All), Just(QueueMode::OneAtATime)].boxed()
}

/// The reference state machine: a config (small step budgets and one-at-a-time queues
/// sometimes), then transitions from [`transitions_for`].
pub struct AgentMachine;

impl ReferenceStateMachine for AgentMachine {
    type State = RefState;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<RefState> {
        (
            prop_oneof![4 => 1u32..=6, 1 => Just(32u32)],
            queue_mode(),
            queue_mode(),
        )
            .prop_map(|(max_steps, steering, follow_ups)| {
                RefState::new(RefConfig {
                    max_steps,
                    steering,
                    follow_ups,
                })
            })
            .boxed()
    }

    fn transitions(state: &RefState) -> BoxedStrategy<Transition> {
        transitions_for(state)
    }

    fn apply(state: RefState, transition: &Transition) -> RefState {
        state.apply(transition)
    }
}
