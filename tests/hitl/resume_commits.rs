//! What an accepted resume commits: context messages first in the running commit (also at
//! a permission wait), the permission decision audited in the same commit, and the ticket
//! deleted by the first commit after the resume.

use crate::common;
use crate::common::harness::{Harness, Reply, render_output};
use crate::support::{
    command, config, draft_kinds, outcomes, reject, resume_error, resume_with, run1, system, ticket,
};
use runcore::store::*;
use runcore::*;
use serde_json::json;

// ----- what an accepted resume commits -------------------------------------------------------------

#[test]
fn context_messages_are_committed_first_in_the_running_commit() {
    let mut h = Harness::new(config());
    h.script([Reply::text("paused here"), Reply::text("done")]);
    h.prompt("start").unwrap();
    h.input("pause", Input::Pause).unwrap();
    h.drive();

    let context = vec![
        system("ctx-1", "The user is on a phone."),
        system("ctx-2", "Answer briefly."),
    ];
    let invalid: [(&str, Vec<Message>, &str); 3] = [
        (
            "a user context message",
            vec![system("ctx-1", "ok"), Message::user("sneaky")],
            "invalid_context_role",
        ),
        (
            "repeated context ids",
            vec![system("ctx-1", "one"), system("ctx-1", "two")],
            "invalid_context_message",
        ),
        (
            "a blank context id",
            vec![system(" ", "blank")],
            "invalid_context_message",
        ),
    ];
    for (label, messages, code) in invalid {
        let cmd = command(&h, ResumeResult::Input("go".into())).with_context(messages);
        let err = resume_error(reject(
            &mut h,
            &format!("resume with {label}"),
            Input::Resume { command: cmd },
        ));
        assert_eq!(err.code(), code, "{label}");
    }

    let commits = h.commits.len();
    let cmd = command(&h, ResumeResult::Input("go on".into())).with_context(context.clone());
    resume_with(&mut h, "resume input with two context messages", cmd).unwrap();
    let first = h.commits[commits].clone();
    assert!(matches!(first.run, RunDisposition::Running { .. }));
    assert_eq!(
        first.messages,
        [
            context[0].clone(),
            context[1].clone(),
            Message::user("go on")
        ],
        "context first, then the input"
    );
    assert_eq!(
        h.trace
            .iter()
            .skip_while(|l| !l.starts_with("> resume input"))
            .nth(1)
            .map(|l| l.starts_with("  commit running")),
        Some(true),
        "the Running commit is the first output of the resume"
    );
    h.drive();
    let request = h.requests.last().expect("a model call after the resume");
    assert_eq!(&request[request.len() - 3..], first.messages.as_slice());
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("context_messages", h.rendered());
}

#[test]
fn the_permission_decision_is_audited_in_the_same_running_commit() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "ask")]),
        Reply::text("done"),
    ]);
    h.clock_ms = 10;
    h.prompt("two gated").unwrap();
    h.drive();

    let before = h.commits.len();
    h.clock_ms = 20;
    h.resume(ResumeResult::Permission(PermissionDecision::Allow {
        note: Some("ops approved".into()),
    }))
    .unwrap();
    let decided = &h.commits[before];
    assert!(matches!(decided.run, RunDisposition::Running { .. }));
    assert!(decided.messages.is_empty());
    assert_eq!(
        draft_kinds(decided),
        ["run_state_changed", "permission_decided", "commit_clock"]
    );
    let payload = &decided.events[1].payload();
    assert_eq!(payload["call_id"], "c1");
    assert_eq!(payload["decision"], "allow");
    assert_eq!(payload["note"], "ops approved");
    assert_eq!(payload["step"], 1);

    let before = h.commits.len();
    h.resume(ResumeResult::deny("not now")).unwrap();
    let decided = &h.commits[before];
    assert!(matches!(decided.run, RunDisposition::Running { .. }));
    assert_eq!(
        draft_kinds(decided),
        ["run_state_changed", "permission_decided", "commit_clock"]
    );
    let payload = &decided.events[1].payload();
    assert_eq!(payload["call_id"], "c2");
    assert_eq!(payload["decision"], "deny");
    assert_eq!(payload["reason"], "not now");
    // The decision is durable before any call of its batch runs.
    let decision_line = h
        .trace
        .iter()
        .position(|l| l.contains("drafts=[run_state_changed,permission_decided,commit_clock]"))
        .expect("a decision commit");
    let execute_line = h
        .trace
        .iter()
        .position(|l| l.starts_with("  action execute_tools"))
        .expect("an execute_tools action");
    assert!(decision_line < execute_line);
    h.drive();

    // In the store, each decision shares its commit with the run's move back to Running.
    let events = h
        .store
        .list_events(&EventScope::Run(run1()), None, 100)
        .unwrap();
    let decisions: Vec<&EventRecord> = events
        .iter()
        .filter(|e| e.kind == "permission_decided")
        .collect();
    assert_eq!(decisions.len(), 2);
    for decision in decisions {
        assert!(
            events
                .iter()
                .any(|e| e.commit_sequence == decision.commit_sequence
                    && e.kind == "run_state_changed"
                    && e.payload["state"]["type"] == "running"),
            "decision {} is not in a Running commit",
            decision.payload
        );
    }
    assert_eq!(
        outcomes(&h),
        [
            ("c1".to_owned(), ResultOutcome::Executed),
            ("c2".to_owned(), ResultOutcome::Denied),
        ]
    );
    common::snapshot!("permission_decided_audit", h.rendered());
}

#[test]
fn the_first_commit_after_an_accepted_resume_deletes_the_ticket() {
    let mut h = Harness::new(config());
    h.script([
        Reply::calls(&[("c1", "rm"), ("c2", "ask")]),
        Reply::text("done"),
    ]);
    h.prompt("two gated").unwrap();
    h.drive();
    let first = ticket(&h);
    assert_eq!(h.store.resume_ticket(&run1()).unwrap(), Some(first));

    // Act on one output at a time, like a host that persists each commit as it comes.
    h.agent.resume_ticket(ResumeResult::allow(), None).unwrap();
    h.trace
        .push("> resume allow (polled one output at a time)".into());
    assert!(h.poll_one());
    assert!(matches!(
        h.commits.last().map(|c| &c.run),
        Some(RunDisposition::Running { .. })
    ));
    assert_eq!(
        h.store.resume_ticket(&run1()).unwrap(),
        None,
        "the first commit after the resume deletes the ticket"
    );
    h.note("the store holds no ticket now");
    h.drain();
    let second = ticket(&h);
    assert_eq!(second.correlation_id, "thread-1/run-1:wait-2");
    assert_eq!(h.store.resume_ticket(&run1()).unwrap(), Some(second));

    h.agent.resume_ticket(ResumeResult::allow(), None).unwrap();
    h.trace
        .push("> resume allow (polled one output at a time)".into());
    assert!(h.poll_one());
    assert_eq!(h.store.resume_ticket(&run1()).unwrap(), None);
    h.note("the store holds no ticket now");
    h.drain();
    h.drive();
    assert_eq!(h.last_cause(), &EndCause::NaturalEnd);
    common::snapshot!("ticket_deleted_by_first_commit", h.rendered());
}

/// Context messages given with a resume in the middle of a tool batch. SPEC §8.5 puts them in
/// the resume's Running commit, so they enter the transcript *between* the batch's calls and
/// its results (each call still gets exactly one result, in call order). The harness's
/// pairing invariant wants results right after their calls, so this scenario drives the agent
/// by hand.
#[test]
fn context_messages_at_a_permission_wait_are_committed_with_the_decision() {
    let mut agent = Agent::new(config()).unwrap();
    let mut store = MemoryStore::new();
    let mut trace: Vec<String> = Vec::new();
    let drain =
        |agent: &mut Agent, store: &mut MemoryStore, trace: &mut Vec<String>, label: &str| {
            trace.push(format!("> {label}"));
            let mut actions = Vec::new();
            while let Some(output) = agent.poll() {
                trace.push(format!("  {}", render_output(&output)));
                match output {
                    Output::Commit(commit) => {
                        store
                            .commit_operation(commit.into_operation())
                            .expect("the store accepts the commit");
                    }
                    Output::Action(action) => actions.push(action),
                    Output::Event(_) => {}
                }
            }
            actions
        };
    let run = agent.prompt(UserMessage::text("two gated"), 0).unwrap();
    drain(&mut agent, &mut store, &mut trace, "prompt");
    let assistant = AssistantMessage::new(
        vec![
            AssistantBlock::tool_call("c1", "rm", json!({})),
            AssistantBlock::tool_call("c2", "echo", json!({})),
        ],
        StopReason::ToolUse,
    );
    agent.model_done(&run, 1, assistant).unwrap();
    drain(&mut agent, &mut store, &mut trace, "model_done step 1");

    let ticket = agent.current_ticket().cloned().unwrap();
    let cmd = ResumeCommand::from_ticket(&ticket, ResumeResult::allow(), 0)
        .with_context(vec![system("ctx-1", "Approved by the on-call engineer.")]);
    agent.resume(cmd).unwrap();
    let before = store.last_sequence();
    let actions = drain(
        &mut agent,
        &mut store,
        &mut trace,
        "resume allow with one context message",
    );
    assert_eq!(store.last_sequence(), before + 1, "one commit");
    let decided = trace
        .iter()
        .rev()
        .find(|l| l.starts_with("  commit"))
        .cloned()
        .unwrap_or_default();
    assert!(decided.contains("running") && decided.contains("permission_decided"));
    assert!(decided.contains("system: \"Approved by the on-call engineer.\""));
    let [Action::ExecuteTools { calls, .. }] = actions.as_slice() else {
        panic!("expected ExecuteTools, got {actions:?}");
    };
    assert_eq!(calls.len(), 2);
    for id in ["c1", "c2"] {
        agent
            .tool_done(&run, &CallId::new(id), ToolOutput::text(id, "ok"))
            .unwrap();
        drain(
            &mut agent,
            &mut store,
            &mut trace,
            &format!("tool_done {id}"),
        );
    }
    let messages = store.committed_messages(agent.thread_id()).unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m.role().as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "system", "tool_result", "tool_result"]
    );
    // Each call still has exactly one result, in call order, once the context is set aside.
    let without_context: Vec<Message> = messages
        .iter()
        .filter(|m| m.role() != Role::System)
        .cloned()
        .collect();
    common::harness::check_pairing(&without_context, true).expect("paired in call order");
    let rendered: Vec<String> = messages
        .iter()
        .map(common::harness::render_message)
        .collect();
    trace.push(format!(
        "# committed transcript:\n#   {}",
        rendered.join("\n#   ")
    ));
    common::snapshot!(
        "context_messages_at_permission_wait",
        trace.join("\n") + "\n"
    );
}
