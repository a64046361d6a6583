//! A deterministic, scripted agent session and the host loop that drives it against any store.
//!
//! The session is six prompts on one thread. What the model answers depends only on the run
//! and the step, what a tool returns only on the run and the call, and every host input that
//! is not committed (a steer, a follow-up, a permission answer) is tied to an action or ticket
//! that recovery hands out again. So a session that is killed anywhere and continued with
//! [`Agent::recover`] under [`RecoveryPolicy::Replay`] must end in exactly the transcript and
//! end causes of a session that never stopped. The runs cover:
//!
//! | run | what happens | ends |
//! |-----|--------------|------|
//! | 1 | a batch of two tool calls, then a 1 KB answer streamed as deltas | `natural_end` |
//! | 2 | a batch of three calls with a steer taken at its boundary, a failing tool, then text | `natural_end` |
//! | 3 | an approval-gated call (allowed) beside an auto call, then a gated call that is denied | `natural_end` |
//! | 4 | one call, then the model fails | `error(inference)` |
//! | 5 | a tool call at every step until the budget is spent | `max_steps` |
//! | 6 | a text answer, a follow-up taken at that stop, a second answer | `natural_end` |
//!
//! [`drive`] is the host: the crate's scripted host ([`runcore::host::script::serve`]) over
//! [`SessionScript`], committing every [`Output::Commit`] through [`commit_output`] *before*
//! anything after it is acted on.

use std::collections::BTreeMap;
use std::fmt;

use runcore::host::script::{self, ModelTurn, Script, ServeError, Stop};
use runcore::store::{CheckpointReader, CommitLog, CommittedThreadView, MemoryStore, StoreError};
use runcore::{
    Action, Agent, AgentConfig, AssistantBlock, AssistantMessage, AwaitTarget, CommitOperation,
    CommitReceipt, Input, Message, ModelRequest, Output, RecoverError, RecoveryPolicy,
    ResumeResult, ResumeTicket, RunId, RunState, StopReason, ThreadCommit, ThreadId, ToolCall,
    ToolOutput, ToolSpec, UserMessage,
};
use serde_json::json;

/// The session's thread.
pub const THREAD: &str = "crash-session";

/// The prompts, one run each, in order.
pub const PROMPTS: [&str; 6] = [
    "Look up alpha and beta and summarise them.",
    "Read the three config files and fix what is wrong.",
    "Deploy the service, then check it.",
    "Check the queue depth.",
    "Keep polling the job until it finishes.",
    "Write the release notes.",
];

/// The step budget of every run (run 5 spends it).
pub const MAX_STEPS: u32 = 5;

/// The session's thread id.
pub fn thread_id() -> ThreadId {
    ThreadId::new(THREAD)
}

/// The session's configuration: `deploy` needs approval (no deadline, so time cannot change
/// the outcome); every other tool is auto.
pub fn config() -> AgentConfig {
    AgentConfig {
        max_steps: MAX_STEPS,
        ..AgentConfig::for_thread(THREAD)
    }
    .with_tool("lookup", ToolSpec::auto("look a term up"))
    .with_tool("read", ToolSpec::auto("read a file"))
    .with_tool("write", ToolSpec::auto("write a file"))
    .with_tool("poll", ToolSpec::auto("poll a job"))
    .with_tool("deploy", ToolSpec::gated("deploy a service", None))
}

/// A failure of the session or of a check, with what was expected and what arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KitError(pub String);

impl fmt::Display for KitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KitError {}

impl From<String> for KitError {
    fn from(message: String) -> Self {
        KitError(message)
    }
}

impl From<&str> for KitError {
    fn from(message: &str) -> Self {
        KitError(message.to_owned())
    }
}

impl From<StoreError> for KitError {
    fn from(error: StoreError) -> Self {
        KitError(format!("a store call failed: {error}"))
    }
}

impl From<runcore::AgentError> for KitError {
    fn from(error: runcore::AgentError) -> Self {
        KitError(format!("the agent rejected a scripted input: {error}"))
    }
}

impl From<RecoverError> for KitError {
    fn from(error: RecoverError) -> Self {
        KitError(format!("recovery failed: {error}"))
    }
}

/// The `n` of a minted run id `"{THREAD}/run-{n}"`.
pub fn run_number(run_id: &RunId) -> Option<usize> {
    run_id
        .as_str()
        .strip_prefix(THREAD)?
        .strip_prefix("/run-")?
        .parse()
        .ok()
}

/// About 1 KB of text, different for every run and step.
fn long_text(run: usize, step: u32) -> String {
    let mut text = format!("Answer of run {run} at step {step}.");
    let mut i = 0u32;
    while text.len() < 1000 {
        i += 1;
        text.push_str(&format!(
            " Finding {i}: the value for item {i} of run {run} is {}.",
            (run as u32 * 31 + step * 7 + i * 13) % 97
        ));
    }
    text
}

fn calls(run: usize, step: u32, tools: &[(&str, serde_json::Value)]) -> ModelTurn {
    let blocks = tools
        .iter()
        .enumerate()
        .map(|(k, (name, args))| {
            AssistantBlock::tool_call(format!("c{run}-{step}-{}", k + 1), *name, args.clone())
        })
        .collect();
    ModelTurn::answer(AssistantMessage::new(blocks, StopReason::ToolUse))
}

fn text(run: usize, step: u32) -> ModelTurn {
    let text = long_text(run, step);
    let third = text.len() / 3;
    let deltas = vec![
        text.get(..third).unwrap_or_default().to_owned(),
        text.get(third..2 * third).unwrap_or_default().to_owned(),
        text.get(2 * third..).unwrap_or_default().to_owned(),
    ];
    ModelTurn::streamed(deltas, AssistantMessage::text(text))
}

/// The scripted model: the answer depends only on the run and the step.
pub fn model_turn(run_id: &RunId, step: u32) -> ModelTurn {
    let run = run_number(run_id).unwrap_or(0);
    match (run, step) {
        (1, 1) => calls(
            run,
            step,
            &[
                ("lookup", json!({"term": "alpha"})),
                ("lookup", json!({"term": "beta"})),
            ],
        ),
        (2, 1) => calls(
            run,
            step,
            &[
                ("read", json!({"path": "a.toml"})),
                ("read", json!({"path": "b.toml"})),
                ("read", json!({"path": "c.toml"})),
            ],
        ),
        (2, 2) => calls(
            run,
            step,
            &[("write", json!({"path": "b.toml", "text": "fixed"}))],
        ),
        (3, 1) => calls(
            run,
            step,
            &[
                ("deploy", json!({"service": "api"})),
                ("lookup", json!({"term": "api health"})),
            ],
        ),
        (3, 2) => calls(run, step, &[("deploy", json!({"service": "db"}))]),
        (4, 1) => calls(run, step, &[("lookup", json!({"term": "queue"}))]),
        (4, 2) => ModelTurn::fail("overloaded", "the model is overloaded"),
        (5, _) => calls(run, step, &[("poll", json!({"job": 7, "attempt": step}))]),
        _ => text(run, step),
    }
}

/// The scripted tool: the output depends only on the run, the call and the tool.
pub fn tool_output(run_id: &RunId, call: &ToolCall) -> ToolOutput {
    let text = format!(
        "{} {} for {run_id}:{} -> ok",
        call.name, call.arguments, call.id
    );
    if call.name == "write" {
        ToolOutput::error(
            call.id.clone(),
            format!("{text} (but the disk is read-only)"),
        )
    } else {
        ToolOutput::text(call.id.clone(), text)
    }
}

/// The scripted person answering a permission ticket: the second deploy is denied.
pub fn permission(ticket: &ResumeTicket) -> ResumeResult {
    match ticket.target() {
        AwaitTarget::ToolCall { call_id, .. } if call_id.as_str().ends_with("-2-1") => {
            ResumeResult::deny("not during business hours")
        }
        _ => ResumeResult::allow(),
    }
}

/// The session's script: the model's turns ([`model_turn`]), the tools' outputs
/// ([`tool_output`]), the person's answers ([`permission`]), and the two host inputs tied to
/// an action (so a recovered agent that hands the action out again gets them again): a
/// follow-up while run 6 calls its model at step 1, a steer while run 2 runs its first batch.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionScript;

impl Script for SessionScript {
    fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn {
        model_turn(request.run_id, request.step)
    }

    fn tool(&mut self, run_id: &RunId, call: &ToolCall) -> ToolOutput {
        tool_output(run_id, call)
    }

    fn resume(&mut self, ticket: &ResumeTicket) -> Option<ResumeResult> {
        Some(permission(ticket))
    }

    fn alongside(&mut self, action: &Action, inputs: &mut Vec<Input>) {
        match action {
            Action::CallModel { run_id, step, .. }
                if run_number(run_id) == Some(6) && *step == 1 =>
            {
                inputs.push(Input::FollowUp {
                    message: UserMessage::text("Also list the known issues."),
                });
            }
            Action::ExecuteTools { run_id, step, .. }
                if run_number(run_id) == Some(2) && *step == 1 =>
            {
                inputs.push(Input::Steer {
                    message: UserMessage::text("Also check d.toml while you are at it."),
                });
            }
            _ => {}
        }
    }
}

/// What the host knows about where the next commit lands: the thread version it builds on
/// and each run's commit count (SPEC §7.1), read once from the store and then counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    thread: ThreadId,
    thread_version: u64,
    run_commits: BTreeMap<RunId, u64>,
}

impl Fence {
    /// The fence of `thread` as the store has it now (at start or after recovery).
    pub fn read(store: &impl CommittedThreadView, thread: &ThreadId) -> Result<Fence, StoreError> {
        Ok(Fence {
            thread: thread.clone(),
            thread_version: store.thread_version(thread)?,
            run_commits: BTreeMap::new(),
        })
    }

    /// The thread version the next commit builds on.
    pub fn thread_version(&self) -> u64 {
        self.thread_version
    }

    /// The operation for `commit`: its ordinal is the run's commit count (read from the store
    /// the first time this host sees the run), its expected version the counted one.
    pub fn operation(
        &mut self,
        store: &impl CommittedThreadView,
        commit: ThreadCommit,
    ) -> Result<CommitOperation, KitError> {
        if commit.thread_id != self.thread {
            return Err(KitError(format!(
                "the agent committed to thread {}, the fence is for {}",
                commit.thread_id, self.thread
            )));
        }
        let run_id = commit.run_id().clone();
        let ordinal = match self.run_commits.get(&run_id) {
            Some(count) => *count,
            None => store.run(&run_id)?.map_or(0, |record| record.commits),
        };
        Ok(CommitOperation::new(commit, ordinal, self.thread_version))
    }

    /// Counts an accepted operation.
    fn accepted(&mut self, operation: &CommitOperation) {
        self.thread_version = self.thread_version.saturating_add(1);
        self.run_commits.insert(
            operation.operation_id.run_id.clone(),
            operation.operation_id.ordinal.saturating_add(1),
        );
    }
}

/// Applies one agent commit to the store as a fenced operation, before the host acts on
/// anything after it. This is the one place that turns an [`Output::Commit`] into a
/// [`CommitOperation`]: once the agent's commit output carries its own `ordinal` and
/// `expected_thread_version`, only this function changes.
///
/// A duplicate receipt or a rejection is an error: a single writer that counted right never
/// gets either.
pub fn commit_output<S: CommitLog + CommittedThreadView>(
    store: &mut S,
    fence: &mut Fence,
    commit: ThreadCommit,
) -> Result<(CommitOperation, CommitReceipt), KitError> {
    let operation = fence.operation(store, commit)?;
    let receipt = store
        .commit_operation(operation.clone())
        .map_err(|error| KitError(format!("commit_operation was refused: {error}")))?;
    if receipt.duplicate {
        return Err(KitError(format!(
            "a fresh commit came back as a duplicate: {receipt:?}"
        )));
    }
    fence.accepted(&operation);
    Ok((operation, receipt))
}

/// Called after every commit whose `commit_operation` returned (the operation and receipt).
pub type OnCommit<'a> = &'a mut dyn FnMut(&CommitOperation, &CommitReceipt);

/// The next prompt's index: one per run already started (run ids are minted in order).
fn next_prompt(agent: &Agent) -> usize {
    agent
        .last_end()
        .and_then(|(run, _)| run_number(run))
        .unwrap_or(0)
}

/// Drives `agent` (new or recovered) to the end of the session with the crate's scripted host
/// ([`script::serve`] over [`SessionScript`]), committing every commit into `store` through
/// [`commit_output`] and calling `on_commit` after each one returned. A prompt is given at
/// its own time (`1000 × n` ms for run n); every other input at the agent's clock.
pub fn drive<S: CommitLog + CommittedThreadView>(
    agent: &mut Agent,
    store: &mut S,
    on_commit: OnCommit<'_>,
) -> Result<(), KitError> {
    let mut fence = Fence::read(store, agent.thread_id())?;
    let mut sink = |_: &Agent, output: &Output| -> Result<(), KitError> {
        if let Output::Commit(commit) = output {
            let (operation, receipt) = commit_output(store, &mut fence, commit.commit.clone())?;
            on_commit(&operation, &receipt);
        }
        Ok(())
    };
    loop {
        match script::serve(agent, &mut SessionScript, &mut sink) {
            Ok(Stop::Idle) => {}
            Ok(Stop::Waiting) => {
                return Err(KitError(format!(
                    "the agent is stuck: run {:?} is active with no action and no ticket",
                    agent.active_run_id()
                )));
            }
            Err(ServeError::Sink(error)) => return Err(error),
            Err(ServeError::Rejected { error, .. }) => return Err(error.into()),
        }
        let next = next_prompt(agent);
        let Some(text) = PROMPTS.get(next) else {
            return Ok(());
        };
        agent.handle(
            Input::Prompt {
                message: Some(UserMessage::text(*text)),
                run_id: None,
                messages: Vec::new(),
            },
            (next as u64 + 1) * 1_000,
        )?;
    }
}

/// Starts the session on `store`, or continues it with [`Agent::recover`] (Replay) when the
/// thread has history, and drives it to its end.
pub fn run_session<S: CommitLog + CheckpointReader>(
    store: &mut S,
    on_commit: OnCommit<'_>,
) -> Result<(), KitError> {
    let thread = thread_id();
    let mut agent = if store.thread_version(&thread)? == 0 {
        Agent::new(config())?
    } else {
        Agent::recover(config(), store, &thread, RecoveryPolicy::Replay)?
    };
    drive(&mut agent, store, on_commit)
}

/// What an uncrashed session commits, to compare a crashed one against.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// The final transcript.
    pub messages: Vec<Message>,
    /// How every run ended, by run id.
    pub runs: BTreeMap<RunId, RunState>,
    /// How many commits the session made.
    pub commits: u64,
}

/// The session's facts as `store` holds them: transcript and every run's state.
pub fn facts<S: CommittedThreadView>(store: &S) -> Result<Reference, KitError> {
    let thread = thread_id();
    let messages = store.committed_messages(&thread)?;
    let mut runs = BTreeMap::new();
    for n in 1..=PROMPTS.len() {
        let run_id = RunId::new(format!("{THREAD}/run-{n}"));
        if let Some(record) = store.run(&run_id)? {
            runs.insert(run_id, record.state);
        }
    }
    Ok(Reference {
        messages,
        runs,
        commits: store.thread_version(&thread)?,
    })
}

/// Runs the session once, uncrashed, on a [`MemoryStore`].
pub fn reference() -> Result<Reference, KitError> {
    let mut store = MemoryStore::new();
    run_session(&mut store, &mut |_, _| {})?;
    facts(&store)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runcore::store::{Intercept, Intercepted};
    use runcore::{EndCause, Failure};

    #[test]
    fn the_reference_session_covers_every_planned_ending() {
        let reference = reference().unwrap();
        let causes: Vec<Option<&EndCause>> =
            reference.runs.values().map(RunState::end_cause).collect();
        assert_eq!(
            causes,
            vec![
                Some(&EndCause::NaturalEnd),
                Some(&EndCause::NaturalEnd),
                Some(&EndCause::NaturalEnd),
                Some(&EndCause::Error(Failure::Inference {
                    code: "overloaded".into(),
                    message: "the model is overloaded".into()
                })),
                Some(&EndCause::MaxSteps),
                Some(&EndCause::NaturalEnd),
            ]
        );
        let outcomes: Vec<&str> = reference
            .messages
            .iter()
            .filter_map(Message::as_tool_result)
            .map(|r| r.outcome.as_str())
            .collect();
        assert!(outcomes.contains(&"denied"), "{outcomes:?}");
        let texts: Vec<String> = reference
            .messages
            .iter()
            .filter(|m| matches!(m, Message::User(_)))
            .map(|m| serde_json::to_string(m).unwrap())
            .collect();
        assert!(texts.iter().any(|t| t.contains("d.toml")), "the steer");
        assert!(
            texts.iter().any(|t| t.contains("known issues")),
            "the follow-up"
        );
        assert_eq!(reference, super::reference().unwrap(), "deterministic");
    }

    /// Not a crash test (those kill real processes): proof that the script converges, i.e.
    /// that stopping after any number of commits and recovering from a MemoryStore ends in
    /// the reference facts.
    #[test]
    fn stopping_after_any_commit_and_recovering_converges() {
        let reference = reference().unwrap();
        for stop_after in 0..reference.commits {
            let mut store = MemoryStore::new();
            let mut seen = 0u64;
            let mut agent = Agent::new(config()).unwrap();
            let stopped = drive_until(&mut agent, &mut store, stop_after, &mut seen);
            assert!(stopped, "stopping after {stop_after}");
            run_session(&mut store, &mut |_, _| {}).unwrap();
            assert_eq!(facts(&store).unwrap().messages, reference.messages);
            assert_eq!(facts(&store).unwrap().runs, reference.runs);
        }
    }

    /// Drives until `limit` commits were made, then drops out (the "crash").
    fn drive_until(agent: &mut Agent, store: &mut MemoryStore, limit: u64, seen: &mut u64) -> bool {
        let mut gate = Intercepted(StopGate { store, limit, seen });
        drive(agent, &mut gate, &mut |_, _| {}).is_err()
    }

    /// A store that refuses commits past a limit, standing in for a host that stopped.
    struct StopGate<'a> {
        store: &'a mut MemoryStore,
        limit: u64,
        seen: &'a mut u64,
    }

    impl Intercept for StopGate<'_> {
        type Inner = MemoryStore;
        fn inner(&self) -> &MemoryStore {
            self.store
        }
        fn inner_mut(&mut self) -> &mut MemoryStore {
            self.store
        }
        fn commit_operation(
            &mut self,
            operation: CommitOperation,
        ) -> Result<CommitReceipt, StoreError> {
            if *self.seen >= self.limit {
                return Err(StoreError::unavailable("stopped"));
            }
            *self.seen += 1;
            self.store.commit_operation(operation)
        }
    }
}
