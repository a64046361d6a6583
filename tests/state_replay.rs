//! State replay (SPEC §5): materializing commands one by one as commits land in a
//! `MemoryStore` equals rebuilding from the whole `committed_state` history, for every viewer;
//! and both equal a deliberately naive reference of the merge rules.

mod common;

use std::collections::BTreeMap;

use proptest::prelude::*;
use runcore::store::{CommitLog, CommittedThreadView, MemoryStore};
use runcore::{
    EndCause, MaterializedState, MergePolicy, RunDisposition, RunId, StateAction, StateCommand,
    StateScope, ThreadCommit, ThreadId,
};
use serde_json::{Map, Value, json};

const RUNS: [&str; 3] = ["r0", "r1", "r2"];

fn scope() -> impl Strategy<Value = StateScope> {
    prop_oneof![
        Just(StateScope::Run),
        Just(StateScope::Thread),
        Just(StateScope::Shared),
        Just(StateScope::Profile),
    ]
}

fn merge() -> impl Strategy<Value = MergePolicy> {
    prop_oneof![
        2 => Just(MergePolicy::Disjoint),
        3 => Just(MergePolicy::Commutative),
        1 => Just(MergePolicy::Exclusive),
    ]
}

/// Mostly small objects over few keys, so shallow merges overlap; sometimes scalars, so a merge
/// meets a non-object.
fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop::collection::btree_map("[abc]", 0..4i64, 0..3).prop_map(|m| {
            Value::Object(m.into_iter().map(|(k, v)| (k, json!(v))).collect::<Map<_, _>>())
        }),
        1 => (0..3i64).prop_map(Value::from),
        1 => Just(Value::Null),
    ]
}

fn command() -> impl Strategy<Value = StateCommand> {
    (
        "[xy]",
        scope(),
        merge(),
        prop_oneof![4 => value().prop_map(StateAction::Set), 1 => Just(StateAction::Remove)],
    )
        .prop_map(|(key, scope, merge, action)| StateCommand {
            key,
            scope,
            merge,
            run_id: None,
            action,
        })
}

/// One commit of the stream: which thread and run, whether it ends the run, and its commands.
#[derive(Debug, Clone)]
struct Planned {
    thread: usize,
    run: usize,
    ends: bool,
    commands: Vec<StateCommand>,
}

fn planned() -> impl Strategy<Value = Planned> {
    (
        0..2usize,
        0..RUNS.len(),
        prop::bool::weighted(0.15),
        prop::collection::vec(command(), 0..4),
    )
        .prop_map(|(thread, run, ends, commands)| Planned {
            thread,
            run,
            ends,
            commands,
        })
}

/// The SPEC §5 rules, written as plainly as possible over a flat map.
fn naive(
    history: &[StateCommand],
    viewer: Option<&RunId>,
) -> BTreeMap<(StateScope, String), Value> {
    let mut state: BTreeMap<(StateScope, String), Value> = BTreeMap::new();
    for command in history {
        let visible = match command.scope {
            StateScope::Run => viewer.is_some() && command.run_id.as_ref() == viewer,
            _ => true,
        };
        if !visible {
            continue;
        }
        let slot = (command.scope, command.key.clone());
        match &command.action {
            StateAction::Remove => {
                state.remove(&slot);
            }
            StateAction::Set(incoming) => {
                let merged = match (command.merge, state.get(&slot), incoming) {
                    (MergePolicy::Commutative, Some(Value::Object(old)), Value::Object(new)) => {
                        let mut out = old.clone();
                        for (k, v) in new {
                            out.insert(k.clone(), v.clone());
                        }
                        Value::Object(out)
                    }
                    _ => incoming.clone(),
                };
                state.insert(slot, merged);
            }
        }
    }
    state
}

fn flatten(state: &MaterializedState) -> BTreeMap<(StateScope, String), Value> {
    state
        .entries
        .iter()
        .flat_map(|(scope, keys)| {
            keys.iter()
                .map(move |(k, v)| ((*scope, k.clone()), v.clone()))
        })
        .collect()
}

fn viewers() -> Vec<Option<RunId>> {
    let mut all = vec![None];
    all.extend(RUNS.iter().map(|r| Some(RunId::new(*r))));
    all
}

proptest! {
    #![proptest_config(common::proptest_config("proptest-regressions/state_replay.txt", 96))]

    #[test]
    fn incremental_materialization_equals_rebuild_from_history(
        plan in prop::collection::vec(planned(), 1..16),
    ) {
        let threads = [ThreadId::new("t0"), ThreadId::new("t1")];
        let viewers = viewers();
        let mut store = MemoryStore::new();
        // thread → viewer → state, applied command by command as commits are accepted.
        let mut incremental: Vec<Vec<MaterializedState>> =
            threads.iter().map(|_| viewers.iter().map(|_| MaterializedState::new()).collect()).collect();
        let mut accepted_commands: Vec<Vec<StateCommand>> = vec![Vec::new(), Vec::new()];
        // Runs are pinned to the thread of their first commit so most commits are accepted.
        let mut home: BTreeMap<usize, usize> = BTreeMap::new();
        for step in plan {
            let thread = *home.entry(step.run).or_insert(step.thread);
            let run_id = RunId::new(RUNS[step.run]);
            let disposition = if step.ends {
                RunDisposition::Ended { run_id: run_id.clone(), cause: EndCause::NaturalEnd }
            } else {
                RunDisposition::Running { run_id: run_id.clone() }
            };
            let commit = ThreadCommit::assemble(
                threads[thread].clone(), disposition, true, vec![], step.commands, vec![],
            );
            let stamped = commit.state.clone();
            let before = store.committed_state(&threads[thread]).unwrap();
            match store.commit(commit) {
                Ok(_) => {
                    for command in &stamped {
                        for (state, viewer) in incremental[thread].iter_mut().zip(&viewers) {
                            state.apply(command, viewer.as_ref());
                        }
                    }
                    accepted_commands[thread].extend(stamped);
                }
                Err(_) => {
                    // A rejected commit (exclusive conflict, ended run) adds no state.
                    prop_assert_eq!(store.committed_state(&threads[thread]).unwrap(), before);
                }
            }
            for (t, thread_id) in threads.iter().enumerate() {
                let history = store.committed_state(thread_id).unwrap();
                prop_assert_eq!(&history, &accepted_commands[t]);
                for (state, viewer) in incremental[t].iter().zip(&viewers) {
                    let rebuilt = MaterializedState::rebuild(&history, viewer.as_ref());
                    prop_assert_eq!(&rebuilt, state, "thread {} viewer {:?}", thread_id, viewer);
                    prop_assert_eq!(flatten(&rebuilt), naive(&history, viewer.as_ref()));
                    // Empty scopes are dropped, so equal content means equal JSON.
                    prop_assert!(rebuilt.entries.values().all(|keys| !keys.is_empty()));
                }
            }
        }
    }
}

#[test]
fn run_scoped_state_is_visible_only_to_its_run_after_a_store_round_trip() {
    let mut store = MemoryStore::new();
    let thread = ThreadId::new("t");
    for (run, value) in [("r0", 0), ("r1", 1)] {
        let commit = ThreadCommit::assemble(
            thread.clone(),
            RunDisposition::Running { run_id: run.into() },
            true,
            vec![],
            vec![
                StateCommand::set(StateScope::Run, "mine", json!(value)),
                StateCommand::set(StateScope::Thread, "last", json!({ run: value }))
                    .with_merge(MergePolicy::Commutative),
            ],
            vec![],
        );
        store.commit(commit).unwrap();
    }
    let history = store.committed_state(&thread).unwrap();
    let r0 = RunId::new("r0");
    let r1 = RunId::new("r1");
    let seen = |viewer: Option<&RunId>| {
        let state = MaterializedState::rebuild(&history, viewer);
        (
            state.get(StateScope::Run, "mine").cloned(),
            state.get(StateScope::Thread, "last").cloned(),
        )
    };
    let shared = Some(json!({ "r0": 0, "r1": 1 }));
    assert_eq!(seen(None), (None, shared.clone()));
    assert_eq!(seen(Some(&r0)), (Some(json!(0)), shared.clone()));
    assert_eq!(seen(Some(&r1)), (Some(json!(1)), shared));
    assert_eq!(seen(Some(&RunId::new("r2"))).0, None);
}
