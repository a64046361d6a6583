//! T3: `ThreadCommit::assemble` binds only Run-scoped state to the run and emits its drafts in
//! the stated order; `validate` rejects each invalid shape; impossible shapes do not even
//! deserialize (SPEC §6).

mod common;

use common::strategies::{audit_draft, run_disposition, state_command};
use proptest::prelude::*;
use runcore::store::{canonical_json, sha256_hex};
use runcore::{
    AuditDraft, COMMIT_SCHEMA_VERSION, CallId, CommitError, CommitOperation, EndCause, MergePolicy,
    Message, PauseReason, PendingTool, ResumeTicket, RunDisposition, RunId, RunState, StateCommand,
    StateScope, ThreadCommit, ThreadId, ToolWaitReason, WaitBoundary, WaitIdentity,
};
use serde_json::{Value, json};

fn identity(thread: &str) -> WaitIdentity {
    WaitIdentity {
        correlation_id: "r:wait-1".into(),
        run_id: "r".into(),
        thread_id: thread.into(),
        snapshot_id: "s".into(),
        catalog_fingerprint: "f".into(),
    }
}

fn permission_ticket(thread: &str) -> ResumeTicket {
    ResumeTicket::tool_call(
        identity(thread),
        ToolWaitReason::Permission,
        CallId::new("c1"),
        PendingTool {
            name: "rm".into(),
            arguments: json!({ "path": "/" }).into(),
        },
        Some(5),
    )
}

fn running() -> RunDisposition {
    RunDisposition::Running { run_id: "r".into() }
}

fn awaiting() -> RunDisposition {
    RunDisposition::Awaiting(Box::new(permission_ticket("t")))
}

fn ended() -> RunDisposition {
    RunDisposition::Ended {
        run_id: "r".into(),
        cause: EndCause::Stopped("budget".into()),
    }
}

fn every_scope() -> [StateScope; 4] {
    [
        StateScope::Run,
        StateScope::Thread,
        StateScope::Shared,
        StateScope::Profile,
    ]
}

#[test]
fn assemble_binds_only_run_scoped_commands() {
    for preset in [None, Some(RunId::new("someone-else"))] {
        let state: Vec<StateCommand> = every_scope()
            .into_iter()
            .map(|scope| StateCommand {
                run_id: preset.clone(),
                ..StateCommand::set(scope, scope.as_str(), json!(1))
            })
            .collect();
        for disposition in [running(), awaiting(), ended()] {
            let commit = ThreadCommit::assemble(
                "t".into(),
                disposition,
                true,
                vec![],
                state.clone(),
                vec![],
            );
            for (before, after) in state.iter().zip(&commit.state) {
                let want = if before.scope == StateScope::Run {
                    Some(RunId::new("r"))
                } else {
                    preset.clone()
                };
                assert_eq!(
                    after.run_id, want,
                    "{:?} with preset {preset:?}",
                    before.scope
                );
                assert_eq!(
                    StateCommand {
                        run_id: None,
                        ..after.clone()
                    },
                    StateCommand {
                        run_id: None,
                        ..before.clone()
                    },
                    "assemble changed more than the run id"
                );
            }
        }
    }
}

/// The drafts `assemble` must synthesize, by SPEC §6 rule 2, as (kind, payload).
fn expected_drafts(
    disposition: &RunDisposition,
    state_changed: bool,
    commands: usize,
    extra: &[AuditDraft],
) -> Vec<(String, Value)> {
    let mut drafts = Vec::new();
    if state_changed {
        let mut payload = json!({ "state": serde_json::to_value(disposition.state()).unwrap() });
        if let Some(ticket) = disposition.ticket() {
            payload["await_reason"] = json!(ticket.target().reason_name());
            payload["await_target"] = serde_json::to_value(ticket.target()).unwrap();
        }
        drafts.push(("run_state_changed".to_owned(), payload));
    }
    if commands > 0 {
        drafts.push(("state_changed".to_owned(), json!({ "commands": commands })));
    }
    if let Some(ticket) = disposition.ticket() {
        drafts.push((
            "run_awaiting".to_owned(),
            json!({ "run_id": ticket.run_id }),
        ));
    }
    drafts.extend(extra.iter().map(|d| (d.kind().to_owned(), d.payload())));
    drafts
}

fn drafts_of(commit: &ThreadCommit) -> Vec<(String, Value)> {
    commit
        .events
        .iter()
        .map(|d| (d.kind().to_owned(), d.payload()))
        .collect()
}

#[test]
fn drafts_come_in_the_stated_order_for_every_combination() {
    let extra = [
        AuditDraft::new("permission_decided", json!({ "n": 1 })),
        AuditDraft::new("custom", json!({ "n": 2 })),
    ];
    let state = [
        StateCommand::set(StateScope::Thread, "a", json!(1)),
        StateCommand::remove(StateScope::Run, "b"),
    ];
    for disposition in [running(), awaiting(), ended()] {
        for state_changed in [false, true] {
            for commands in [0, 2] {
                for extras in [0, 2] {
                    let commit = ThreadCommit::assemble(
                        "t".into(),
                        disposition.clone(),
                        state_changed,
                        vec![Message::user("x")],
                        state[..commands].to_vec(),
                        extra[..extras].to_vec(),
                    );
                    assert_eq!(
                        drafts_of(&commit),
                        expected_drafts(&disposition, state_changed, commands, &extra[..extras]),
                        "{disposition:?} state_changed={state_changed} commands={commands} extras={extras}"
                    );
                    assert_eq!(commit.schema_version, COMMIT_SCHEMA_VERSION);
                    assert_eq!(commit.messages, vec![Message::user("x")]);
                }
            }
        }
    }
}

#[test]
fn a_further_running_commit_has_no_run_state_changed() {
    let progress = ThreadCommit::assemble("t".into(), running(), false, vec![], vec![], vec![]);
    assert!(progress.events.is_empty());
    let with_state = ThreadCommit::assemble(
        "t".into(),
        running(),
        false,
        vec![Message::user("x")],
        vec![StateCommand::set(StateScope::Thread, "k", json!(1))],
        vec![],
    );
    let kinds: Vec<&str> = with_state.events.iter().map(|e| e.kind()).collect();
    assert_eq!(kinds, ["state_changed"]);
}

#[test]
fn an_awaiting_commit_announces_its_target() {
    let commit = ThreadCommit::assemble("t".into(), awaiting(), true, vec![], vec![], vec![]);
    common::snapshot_json!("awaiting_commit", commit);
}

proptest! {
    #![proptest_config(common::proptest_config("proptest-regressions/commit.txt", 128))]

    /// A commit's canonical JSON, written straight from the commit, is the canonical JSON of
    /// its `serde_json::Value`, and the payload hash is SHA-256 of that text.
    #[test]
    fn a_commits_canonical_json_is_that_of_its_value(commit in common::strategies::thread_commit()) {
        let value = serde_json::to_value(&commit).unwrap();
        let text = commit.canonical_json();
        prop_assert_eq!(&text, &canonical_json(&value));
        prop_assert_eq!(commit.payload_hash(), sha256_hex(text.as_bytes()));
        // With a scratch buffer that already holds text, and again with the reused buffer.
        let mut buffer = b"[1,".to_vec();
        prop_assert_eq!(commit.payload_hash_with(&mut buffer), commit.payload_hash());
        prop_assert_eq!(&buffer[..], text.as_bytes());
        prop_assert_eq!(commit.payload_hash_with(&mut buffer), commit.payload_hash());
    }

    /// Canonical JSON is compact JSON with every object's keys in byte order: it reads back as
    /// the same value, and it is what serde_json writes for a map that keeps keys sorted.
    #[test]
    fn canonical_json_is_compact_json_with_sorted_keys(value in common::strategies::json_value()) {
        let text = canonical_json(&value);
        prop_assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value.clone());
        fn sorted(value: &Value) -> String {
            match value {
                Value::Object(map) => {
                    let mut entries: Vec<_> = map.iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                    let body: Vec<String> = entries
                        .into_iter()
                        .map(|(k, v)| format!("{}:{}", Value::String(k.clone()), sorted(v)))
                        .collect();
                    format!("{{{}}}", body.join(","))
                }
                Value::Array(items) => {
                    let body: Vec<String> = items.iter().map(sorted).collect();
                    format!("[{}]", body.join(","))
                }
                scalar => scalar.to_string(),
            }
        }
        prop_assert_eq!(text, sorted(&value));
    }

    #[test]
    fn assemble_follows_the_rules_for_generated_inputs(
        disposition in run_disposition(),
        state_changed in any::<bool>(),
        state in prop::collection::vec(state_command(), 0..4),
        extra in prop::collection::vec(audit_draft(), 0..3),
    ) {
        let commit = ThreadCommit::assemble(
            "t".into(),
            disposition.clone(),
            state_changed,
            vec![],
            state.clone(),
            extra.clone(),
        );
        prop_assert_eq!(commit.state.len(), state.len());
        for (before, after) in state.iter().zip(&commit.state) {
            let want = if before.scope == StateScope::Run {
                Some(disposition.run_id().clone())
            } else {
                before.run_id.clone()
            };
            prop_assert_eq!(&after.run_id, &want);
        }
        prop_assert_eq!(drafts_of(&commit), expected_drafts(&disposition, state_changed, state.len(), &extra));
        prop_assert_eq!(&commit.run, &disposition);
    }
}

fn valid() -> ThreadCommit {
    ThreadCommit::assemble(
        "t".into(),
        running(),
        true,
        vec![Message::user("x")],
        vec![StateCommand::set(StateScope::Thread, "k", json!(1))],
        vec![],
    )
}

#[test]
fn validate_accepts_well_formed_commits() {
    assert_eq!(valid().validate(), Ok(()));
    for disposition in [awaiting(), ended()] {
        let mut commit = valid();
        commit.run = disposition;
        assert_eq!(commit.validate(), Ok(()));
    }
    let mut old = valid();
    old.schema_version = 0;
    assert_eq!(old.validate(), Ok(()), "an older envelope is still read");
}

#[test]
fn validate_rejects_each_invalid_shape() {
    let with = |edit: &dyn Fn(&mut ThreadCommit)| {
        let mut commit = valid();
        edit(&mut commit);
        commit.validate()
    };
    assert_eq!(
        with(&|c| c.schema_version = COMMIT_SCHEMA_VERSION + 1),
        Err(CommitError::UnsupportedSchemaVersion {
            found: COMMIT_SCHEMA_VERSION + 1,
            supported: COMMIT_SCHEMA_VERSION,
        })
    );
    for blank in ["", " ", "\t\n"] {
        assert_eq!(
            with(&|c| c.thread_id = ThreadId::new(blank)),
            Err(CommitError::EmptyThreadId),
            "{blank:?}"
        );
        assert_eq!(
            with(&|c| c.run = RunDisposition::Running {
                run_id: blank.into()
            }),
            Err(CommitError::EmptyRunId)
        );
        assert_eq!(
            with(&|c| {
                c.run = RunDisposition::Ended {
                    run_id: blank.into(),
                    cause: EndCause::Cancelled,
                }
            }),
            Err(CommitError::EmptyRunId)
        );
        assert_eq!(
            with(&|c| {
                let mut ticket = permission_ticket("t");
                ticket.run_id = blank.into();
                c.run = RunDisposition::Awaiting(Box::new(ticket));
            }),
            Err(CommitError::EmptyRunId)
        );
        assert_eq!(
            with(&|c| {
                let mut ticket = permission_ticket("t");
                ticket.correlation_id = blank.into();
                c.run = RunDisposition::Awaiting(Box::new(ticket));
            }),
            Err(CommitError::EmptyCorrelationId)
        );
    }
    assert_eq!(
        with(&|c| c.run = RunDisposition::Awaiting(Box::new(permission_ticket("other")))),
        Err(CommitError::TicketThreadMismatch {
            commit_thread: "t".into(),
            ticket_thread: "other".into(),
        })
    );
    let exclusive =
        StateCommand::set(StateScope::Shared, "lock", json!(1)).with_merge(MergePolicy::Exclusive);
    let disjoint = StateCommand::set(StateScope::Shared, "lock", json!(2));
    let commutative = disjoint.clone().with_merge(MergePolicy::Commutative);
    let conflict = Err(CommitError::ExclusiveConflict {
        scope: StateScope::Shared,
        key: "lock".into(),
    });
    for pair in [
        [exclusive.clone(), exclusive.clone()],
        [disjoint.clone(), exclusive.clone()],
        [exclusive.clone(), commutative.clone()],
    ] {
        assert_eq!(with(&|c| c.state = pair.to_vec()), conflict, "{pair:?}");
    }
    // Not conflicts: a removal, another scope, another key, two non-exclusive sets.
    for pair in [
        [
            exclusive.clone(),
            StateCommand::remove(StateScope::Shared, "lock"),
        ],
        [
            exclusive.clone(),
            StateCommand {
                scope: StateScope::Thread,
                ..exclusive.clone()
            },
        ],
        [
            exclusive.clone(),
            StateCommand {
                key: "other".into(),
                ..exclusive.clone()
            },
        ],
        [disjoint.clone(), commutative.clone()],
    ] {
        assert_eq!(with(&|c| c.state = pair.to_vec()), Ok(()), "{pair:?}");
    }
}

#[test]
fn impossible_shapes_do_not_deserialize() {
    let good = serde_json::to_value(valid()).unwrap();
    let ticket = serde_json::to_value(permission_ticket("t")).unwrap();
    let with_run = |run: Value| {
        let mut commit = good.clone();
        commit["run"] = run;
        serde_json::from_value::<ThreadCommit>(commit)
    };
    assert!(with_run(good["run"].clone()).is_ok());
    assert!(with_run(json!({ "type": "awaiting", "ticket": ticket.clone() })).is_ok());
    let impossible = [
        json!({ "type": "awaiting", "run_id": "r" }),
        json!({ "type": "awaiting" }),
        json!({ "type": "running", "run_id": "r", "ticket": ticket.clone() }),
        json!({ "type": "ended", "run_id": "r", "cause": { "type": "cancelled" }, "ticket": ticket.clone() }),
        json!({ "type": "ended", "run_id": "r" }),
        json!({ "type": "paused", "run_id": "r" }),
        json!({ "run_id": "r" }),
    ];
    for run in impossible {
        assert!(with_run(run.clone()).is_err(), "{run} deserialized");
    }

    let with_target = |target: Value| {
        let mut t = ticket.clone();
        t["target"] = target;
        with_run(json!({ "type": "awaiting", "ticket": t }))
    };
    assert!(with_target(json!({ "type": "pause", "reason": "manual" })).is_ok());
    let mixed = [
        json!({ "type": "pause", "reason": "manual", "call_id": "c" }),
        json!({ "type": "pause", "reason": "manual", "tool": { "name": "x", "arguments": {} } }),
        json!({ "type": "remote_input", "reason": "user_input", "call_id": "c",
                "tool": { "name": "x", "arguments": {} } }),
        json!({ "type": "tool_call", "reason": "permission", "call_id": "c" }),
        json!({ "type": "tool_call", "reason": "user_input", "call_id": "c",
                "tool": { "name": "x", "arguments": {} } }),
        json!({ "type": "remote_input", "reason": "manual", "call_id": "c" }),
        json!({ "type": "pause", "reason": "permission" }),
        json!({ "type": "pause" }),
    ];
    for target in mixed {
        assert!(
            with_target(target.clone()).is_err(),
            "{target} deserialized"
        );
    }
    let mut no_target = ticket.clone();
    no_target.as_object_mut().unwrap().remove("target");
    assert!(with_run(json!({ "type": "awaiting", "ticket": no_target })).is_err());
    let mut unknown_field = good.clone();
    unknown_field["status"] = json!("done");
    assert!(
        serde_json::from_value::<ThreadCommit>(unknown_field).is_err(),
        "a status field beside RunState must not be accepted"
    );
}

#[test]
fn the_payload_hash_is_sha256_of_canonical_json() {
    let commit = valid();
    let value = serde_json::to_value(&commit).unwrap();
    assert_eq!(
        commit.payload_hash(),
        sha256_hex(canonical_json(&value).as_bytes())
    );
    // Key order inside values does not matter; content does.
    let mut a = valid();
    a.state = vec![StateCommand::set(
        StateScope::Thread,
        "k",
        serde_json::from_str(r#"{"x":1,"y":2}"#).unwrap(),
    )];
    let mut b = valid();
    b.state = vec![StateCommand::set(
        StateScope::Thread,
        "k",
        serde_json::from_str(r#"{"y":2,"x":1}"#).unwrap(),
    )];
    assert_eq!(a.payload_hash(), b.payload_hash());
    b.state = vec![StateCommand::set(
        StateScope::Thread,
        "k",
        json!({ "x": 1, "y": 3 }),
    )];
    assert_ne!(a.payload_hash(), b.payload_hash());
    let op = CommitOperation::new(a.clone(), 3, 7);
    assert_eq!(op.payload_hash, a.payload_hash());
    assert_eq!(op.operation_id.run_id, RunId::new("r"));
    assert_eq!(
        (op.operation_id.ordinal, op.expected_thread_version),
        (3, 7)
    );
}

#[test]
fn the_disposition_is_the_single_authority_on_run_state() {
    assert_eq!(running().state(), RunState::Running);
    assert_eq!(awaiting().state(), RunState::Awaiting);
    assert_eq!(
        ended().state(),
        RunState::Ended(EndCause::Stopped("budget".into()))
    );
    assert!(running().ticket().is_none() && ended().ticket().is_none());
    assert_eq!(awaiting().ticket(), Some(&permission_ticket("t")));
    let pause = RunDisposition::Awaiting(Box::new(ResumeTicket::pause(
        identity("t"),
        PauseReason::Manual,
        None,
    )));
    assert_eq!(pause.run_id(), &RunId::new("r"));
}

/// The agent's own `run_awaiting` draft (SPEC §8.7: where the run waits) takes the place of the
/// synthesized one; a host's commit without one still gets `run_awaiting {run_id}`.
#[test]
fn an_awaiting_commit_keeps_the_callers_own_run_awaiting_draft_in_its_place() {
    let own = AuditDraft::run_awaiting_at(&RunId::new("r"), 2, Some(WaitBoundary::TextStop));
    let host = AuditDraft::new("custom", json!({ "n": 1 }));
    let commit = ThreadCommit::assemble(
        "t".into(),
        awaiting(),
        true,
        vec![],
        vec![StateCommand::set(StateScope::Thread, "k", json!(1))],
        vec![host.clone(), own.clone()],
    );
    let kinds: Vec<&str> = commit.events.iter().map(AuditDraft::kind).collect();
    assert_eq!(
        kinds,
        [
            "run_state_changed",
            "state_changed",
            "run_awaiting",
            "custom"
        ]
    );
    assert_eq!(
        commit.events[2], own,
        "the caller's draft, not a synthesized one"
    );
    assert_eq!(commit.events[3], host);
    assert_eq!(
        commit.events[2].payload(),
        json!({ "boundary": "text_stop", "run_id": "r", "step": 2 })
    );

    // A `run_awaiting` draft of another run is an ordinary extra draft: the commit's own is
    // synthesized, as for any host.
    let other = AuditDraft::run_awaiting_at(&RunId::new("other"), 1, None);
    let commit = ThreadCommit::assemble(
        "t".into(),
        awaiting(),
        false,
        vec![],
        vec![],
        vec![other.clone()],
    );
    assert_eq!(
        commit.events,
        [AuditDraft::run_awaiting(&RunId::new("r")), other]
    );

    // Not Awaiting: the caller's draft stays where the caller put it.
    let commit = ThreadCommit::assemble(
        "t".into(),
        running(),
        false,
        vec![],
        vec![],
        vec![own.clone()],
    );
    assert_eq!(commit.events, [own]);
}

/// `run_awaiting`'s recorded fields round-trip through serialization and
/// `AuditDraft::from_stored`; absent fields are not written; a payload of another shape stays
/// a custom draft, unchanged.
#[test]
fn run_awaiting_fields_round_trip_through_their_stored_shape() {
    let run = RunId::new("thread-1/run-1");
    let cases = [
        (
            AuditDraft::run_awaiting_at(&run, 3, Some(WaitBoundary::AfterToolBatch)),
            r#"{"kind":"run_awaiting","payload":{"boundary":"after_tool_batch","run_id":"thread-1/run-1","step":3}}"#,
        ),
        (
            AuditDraft::run_awaiting_at(&run, 1, Some(WaitBoundary::TextStop)),
            r#"{"kind":"run_awaiting","payload":{"boundary":"text_stop","run_id":"thread-1/run-1","step":1}}"#,
        ),
        (
            AuditDraft::run_awaiting_at(&run, 0, None),
            r#"{"kind":"run_awaiting","payload":{"run_id":"thread-1/run-1","step":0}}"#,
        ),
        (
            AuditDraft::run_awaiting(&run),
            r#"{"kind":"run_awaiting","payload":{"run_id":"thread-1/run-1"}}"#,
        ),
        (
            AuditDraft::RunAwaiting {
                run_id: run.clone(),
                step: None,
                boundary: Some(WaitBoundary::TextStop),
            },
            r#"{"kind":"run_awaiting","payload":{"boundary":"text_stop","run_id":"thread-1/run-1"}}"#,
        ),
    ];
    for (draft, wire) in cases {
        assert_eq!(serde_json::to_string(&draft).unwrap(), wire);
        assert_eq!(serde_json::from_str::<AuditDraft>(wire).unwrap(), draft);
        let payload: Value = serde_json::from_str::<Value>(wire).unwrap()["payload"].clone();
        assert_eq!(draft.payload(), payload);
        assert_eq!(AuditDraft::from_stored("run_awaiting", payload), draft);
    }
    for odd in [
        json!({ "run_id": "r", "step": -1 }),
        json!({ "run_id": "r", "step": "1" }),
        json!({ "run_id": "r", "step": 1.5 }),
        json!({ "run_id": "r", "step": u64::from(u32::MAX) + 1 }),
        json!({ "run_id": "r", "step": null }),
        json!({ "run_id": "r", "boundary": "sideways" }),
        json!({ "run_id": "r", "boundary": null }),
        json!({ "run_id": "r", "step": 1, "where": "here" }),
        json!({ "step": 1 }),
    ] {
        let draft = AuditDraft::from_stored("run_awaiting", odd.clone());
        assert_eq!(draft, AuditDraft::new("run_awaiting", odd.clone()), "{odd}");
        assert_eq!(draft.payload(), odd);
    }
}
