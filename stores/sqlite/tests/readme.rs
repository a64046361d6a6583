//! The README's "Using SQLite from Rust" example, run as written (in a temporary directory),
//! twice: the second run finds the history and recovers instead of starting fresh.

use runcore::store::{CommitLog, CommittedThreadView};
use runcore::{
    Action, Agent, AgentConfig, AssistantMessage, Output, RecoveryPolicy, ThreadId, ToolOutput,
    UserMessage,
};
use runcore_sqlite::{SqliteOptions, SqliteStore};
use tempfile::TempDir;

fn readme_example(path: &std::path::Path) -> Result<usize, Box<dyn std::error::Error>> {
    let thread = ThreadId::new("support-42");
    let config = AgentConfig::for_thread(thread.clone());
    // Created if missing (its directory must exist); WAL; synchronous = FULL by default.
    let mut store = SqliteStore::open(path, SqliteOptions::default())?;

    // A new thread gets a new agent; a thread with history is rebuilt from what is committed.
    let mut agent = if store.thread_version(&thread)? == 0 {
        Agent::new(config)?
    } else {
        Agent::recover(config, &store, &thread, RecoveryPolicy::Replay)?
    };

    agent.prompt(UserMessage::text("What is 6 x 7?"), 0)?;
    while let Some(output) = agent.poll() {
        match output {
            // Persist before acting on anything after it: fenced and idempotent (SPEC §7.1).
            // The agent supplies the operation's ordinal and expected thread version.
            Output::Commit(commit) => {
                store.commit_operation(commit.into_operation())?;
            }
            Output::Action(Action::CallModel { run_id, step, .. }) => {
                let answer = AssistantMessage::text("42"); // call your model here
                agent.model_done(&run_id, step, answer)?;
            }
            Output::Action(Action::ExecuteTools { run_id, calls, .. }) => {
                for call in calls {
                    // run your tool here
                    agent.tool_done(&run_id, &call.id, ToolOutput::text(call.id.clone(), "ok"))?;
                }
            }
            Output::Event(_) => {}
        }
    }
    Ok(store.committed_messages(&thread)?.len())
}

#[test]
fn the_readme_example_runs_and_a_second_process_recovers() {
    let dir = TempDir::with_prefix_in("sqlite-readme-", env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("agent.sqlite");
    assert_eq!(readme_example(&path).unwrap(), 2);
    assert_eq!(
        readme_example(&path).unwrap(),
        4,
        "the second run recovered the first"
    );
}
