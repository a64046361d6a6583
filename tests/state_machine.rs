//! Reference-model testing of the [`Agent`](runcore::Agent) (SPEC §8, §9, §10; STYLE item 11)
//! with `proptest-state-machine`.
//!
//! - [`transitions`]: one host input per [`Transition`](transitions::Transition) variant, a doc
//!   line each: prompt, steer, follow-up, abort, stop, pause and resume of the pause, model
//!   outcomes (delta, done with text / 1–3 calls / length / error / aborted, failed) for the
//!   right and for the wrong run or step, tool outcomes for pending calls in any order and for
//!   unknown or duplicate calls, tool progress, abandoning tools, and an abort or stop
//!   interjected while an input is being drained.
//! - [`generation`]: the reference state decides what a host would plausibly send now;
//!   deliberately wrong inputs come at a lower weight. Step budgets of 1–6 (sometimes 32) and
//!   `one_at_a_time` queues come up often.
//! - [`reference`]: a deliberately naive model of SPEC §8.2 that predicts acceptance (and the
//!   error kind), the status, the outstanding action, the committed transcript, every run end
//!   (cause, steps, unconsumed) and the queues.
//! - [`host`]: the agent driven exactly like a host (one input, drain `poll()`, persist every
//!   commit into a `MemoryStore`, fold every event into `reduce`), checked after every
//!   transition against the reference and against invariants (a)–(h): call/result pairing, one
//!   active run, balanced and ordered run_start/run_end, queued input never leaking into
//!   another run and always returned when unused, nothing committed after Ended, rejected
//!   inputs leaving the serialized agent unchanged, the reducer agreeing with the agent, the
//!   store reproducing the transcript.
//!
//! Every tool is `auto` here; the only wait is a `Pause(Manual)` answered with
//! `resume_ticket`. Failing seeds are kept in `proptest-regressions/state_machine.txt`.

mod common;
#[path = "state_machine/generation.rs"]
mod generation;
#[path = "state_machine/host.rs"]
mod host;
#[path = "state_machine/reference.rs"]
mod reference;
#[path = "state_machine/transitions.rs"]
mod transitions;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};

use generation::AgentMachine;
use host::{Host, config_for};
use reference::{RefConfig, RefState};
use transitions::Transition;

const THREAD: &str = "thread-1";
const REGRESSIONS: &str = "proptest-regressions/state_machine.txt";

struct AgentTest;

impl StateMachineTest for AgentTest {
    type SystemUnderTest = Host;
    type Reference = AgentMachine;

    fn init_test(reference: &RefState) -> Host {
        Host::new(config_for(&reference.config))
    }

    fn apply(mut host: Host, _reference: &RefState, transition: Transition) -> Host {
        host.apply(&transition);
        host
    }

    fn check_invariants(host: &Host, reference: &RefState) {
        host.check_invariants();
        host.check_against(reference);
    }
}

prop_state_machine! {
    #![proptest_config(common::proptest_config(REGRESSIONS, 256))]

    /// Random interleavings of host inputs agree with the reference and keep every invariant.
    #[test]
    fn agent_agrees_with_the_reference_model(sequential 1..=60 => AgentTest);
}

// ----- determinism ---------------------------------------------------------------------------

/// Applies `transitions` to a fresh agent; every output and error as JSON, and the final agent.
fn replay(config: &RefConfig, transitions: &[Transition]) -> (Vec<String>, String) {
    let mut host = Host::new(config_for(config));
    let lines = transitions.iter().flat_map(|t| host.apply(t)).collect();
    let agent = serde_json::to_string(&host.agent).expect("the agent serializes");
    (lines, agent)
}

proptest! {
    #![proptest_config(common::proptest_config(REGRESSIONS, 32))]

    /// Same inputs ⇒ byte-identical outputs and the same final agent (SPEC §0.1).
    #[test]
    fn same_inputs_give_byte_identical_outputs(
        (initial, transitions, _seen) in AgentMachine::sequential_strategy(1..=80)
    ) {
        let (first, first_agent) = replay(&initial.config, &transitions);
        let (second, second_agent) = replay(&initial.config, &transitions);
        prop_assert_eq!(first, second);
        prop_assert_eq!(first_agent, second_agent);
    }
}

#[test]
fn generation_is_deterministic_for_a_fixed_seed() {
    let generate = || {
        let mut runner = TestRunner::deterministic();
        let strategy = AgentMachine::sequential_strategy(1..=60);
        (0..8)
            .map(|_| {
                let tree = strategy.new_tree(&mut runner).expect("a case");
                let (initial, transitions, _seen) = tree.current();
                format!("{initial:?} {transitions:?}")
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(generate(), generate());
}
