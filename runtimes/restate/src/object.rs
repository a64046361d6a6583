//! The Virtual Object: one per thread (key = thread id), its handlers, and the drain loop
//! that turns each agent output into a journaled step.

use std::sync::Arc;
use std::time::Duration;

use restate_sdk::prelude::*;
use runcore::host::commit_operation_for;
use runcore::store::{BoxedStore, CommittedThreadView, StoreError};
use runcore::{
    Action, Agent, AgentConfig, AgentError, AgentSnapshot, CommitOperation, CommitReceipt, Input,
    Output, RecoverError, RecoveryPolicy, ResumeCommand, RunDisposition, RunId, ThreadId,
    ToolOutput,
};
use runcore_clock::wall_clock_ms;
use runcore_otlp::OtlpExporter;
use runcore_store_blocking::BlockingError;
use runcore_traces::{TraceOptions, spans_from_store};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::host::{Model, ModelCall, StepError, Tools};
use crate::store::SharedStore;
use crate::wire::{self, ResumeRequest, ThreadView};

/// The object's state key: the saved agent.
const SAVED: &str = "thread";

/// How a worker hosts threads: the configuration of each thread, the model, the tools, the
/// store, and how model and tool steps are retried.
#[derive(Clone)]
pub struct ThreadHost {
    /// The configuration of a thread (tool policies are configuration, so every worker must
    /// give the same one for the same thread: recovery relies on it).
    pub config: Arc<dyn Fn(&ThreadId) -> AgentConfig + Send + Sync>,
    /// The host's model.
    pub model: Arc<dyn Model>,
    /// The host's tools.
    pub tools: Arc<dyn Tools>,
    /// The store every commit goes to.
    pub store: SharedStore,
    /// Retries of one model or tool step before its failure becomes data.
    pub step_attempts: u32,
    /// The first retry's delay (doubling after).
    pub step_retry_delay: Duration,
    /// Where each run's spans (SPEC §14) go once its terminal commit is stored (the worker's
    /// `--otlp URL`); `None` exports nothing.
    pub otlp: Option<Arc<OtlpExporter>>,
}

impl ThreadHost {
    /// A host with `config` for every thread (its `thread_id` replaced by the object's key),
    /// three attempts per step, 50 ms apart at first.
    pub fn new(
        config: AgentConfig,
        model: Arc<dyn Model>,
        tools: Arc<dyn Tools>,
        store: SharedStore,
    ) -> ThreadHost {
        ThreadHost {
            config: Arc::new(move |thread: &ThreadId| AgentConfig {
                thread_id: thread.clone(),
                ..config.clone()
            }),
            model,
            tools,
            store,
            step_attempts: 3,
            step_retry_delay: Duration::from_millis(50),
            otlp: None,
        }
    }

    fn step_policy(&self) -> RunRetryPolicy {
        RunRetryPolicy::default()
            .initial_delay(self.step_retry_delay)
            .exponentiation_factor(2.0)
            .max_delay(Duration::from_secs(2))
            .max_attempts(self.step_attempts.max(1))
    }
}

/// The Virtual Object `RuncoreThread`: exclusive handlers for the inputs a person or system
/// sends (`prompt`, `steer`, `follow_up`, `abort`, `resume`, `cancel_wait`, `stop`, and
/// `timeout` for deadlines) and the shared, read-only `state`.
///
/// Bodies: `prompt` `{"text", "run_id"?}`; `steer` / `follow_up` `{"text"}`; `resume` a
/// [`ResumeRequest`]; `stop` `{"reason"}`; the others none. Every handler answers the
/// [`ThreadView`] after it; a misuse input is a terminal error whose message is the §10 body
/// (`{"kind","message",…}`), and the thread is unchanged.
pub struct ThreadObject {
    host: ThreadHost,
}

impl ThreadObject {
    /// The object over `host`.
    pub fn new(host: ThreadHost) -> ThreadObject {
        ThreadObject { host }
    }
}

/// What the object saves after each exclusive handler: the agent (its queued steering
/// included, which the store does not hold), the store version it matches, and the deadline
/// a `timeout` call is already scheduled for.
#[derive(Serialize, Deserialize)]
struct Saved {
    snapshot: AgentSnapshot,
    version: u64,
    timer_ms: Option<u64>,
}

/// The agent the handler works on: the saved one when the store has nothing newer, else
/// the one recovered from the store (the journaled result of the `load` step).
#[derive(Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
enum Loaded {
    Saved,
    Store {
        snapshot: Option<Box<AgentSnapshot>>,
        version: u64,
    },
}

/// An input of a handler, before it is parsed against the thread.
enum Request {
    Line(&'static str, Vec<u8>),
    Resume(Vec<u8>),
    Plain(Box<Input>),
    Timeout,
}

#[restate_sdk::object(name = "RuncoreThread")]
impl ThreadObject {
    /// Starts a run: `{"text": "…", "run_id"?: "…"}`.
    #[handler]
    async fn prompt(
        &self,
        ctx: ObjectContext<'_>,
        body: Vec<u8>,
    ) -> Result<Json<ThreadView>, HandlerError> {
        self.exclusive(ctx, Request::Line("prompt", body)).await
    }

    /// Queues a steering message: `{"text": "…"}`.
    #[handler]
    async fn steer(
        &self,
        ctx: ObjectContext<'_>,
        body: Vec<u8>,
    ) -> Result<Json<ThreadView>, HandlerError> {
        self.exclusive(ctx, Request::Line("steer", body)).await
    }

    /// Queues a follow-up message: `{"text": "…"}`.
    #[handler]
    async fn follow_up(
        &self,
        ctx: ObjectContext<'_>,
        body: Vec<u8>,
    ) -> Result<Json<ThreadView>, HandlerError> {
        self.exclusive(ctx, Request::Line("follow_up", body)).await
    }

    /// Aborts the active run (a waiting run ends `cancelled` at once).
    #[handler]
    async fn abort(&self, ctx: ObjectContext<'_>) -> Result<Json<ThreadView>, HandlerError> {
        self.exclusive(ctx, Request::Plain(Box::new(Input::Abort)))
            .await
    }

    /// Answers the current wait: a [`ResumeRequest`].
    #[handler]
    async fn resume(
        &self,
        ctx: ObjectContext<'_>,
        body: Vec<u8>,
    ) -> Result<Json<ThreadView>, HandlerError> {
        self.exclusive(ctx, Request::Resume(body)).await
    }

    /// Ends the waiting run `cancelled`.
    #[handler]
    async fn cancel_wait(&self, ctx: ObjectContext<'_>) -> Result<Json<ThreadView>, HandlerError> {
        self.exclusive(ctx, Request::Plain(Box::new(Input::CancelWait)))
            .await
    }

    /// Ends the active run `stopped`: `{"reason": "…"}`.
    #[handler]
    async fn stop(
        &self,
        ctx: ObjectContext<'_>,
        body: Vec<u8>,
    ) -> Result<Json<ThreadView>, HandlerError> {
        self.exclusive(ctx, Request::Line("stop", body)).await
    }

    /// Whatever is due now: a wait past its deadline ends `stopped("wait_expired")`. The
    /// object schedules it itself (a durable delayed call); one that arrives early is a no-op.
    #[handler]
    async fn timeout(&self, ctx: ObjectContext<'_>) -> Result<Json<ThreadView>, HandlerError> {
        self.exclusive(ctx, Request::Timeout).await
    }

    /// The thread as the object last saved it (read-only; runs beside an exclusive handler).
    #[handler]
    async fn state(&self, ctx: SharedObjectContext<'_>) -> Result<Json<ThreadView>, HandlerError> {
        let thread = ThreadId::from(ctx.key());
        let Some(Json(saved)) = ctx.get::<Json<Saved>>(SAVED).await? else {
            return Ok(Json(ThreadView::unknown(thread)));
        };
        let agent = restore(saved.snapshot)?;
        Ok(Json(ThreadView::of(&agent, saved.version)))
    }
}

impl ThreadObject {
    async fn exclusive(
        &self,
        ctx: ObjectContext<'_>,
        request: Request,
    ) -> Result<Json<ThreadView>, HandlerError> {
        let thread = ThreadId::from(ctx.key());
        let saved = ctx.get::<Json<Saved>>(SAVED).await?.map(Json::into_inner);

        // The clock of this input: journaled, so a replay sees the same time.
        let now_ms: u64 = ctx
            .run(|| async { Ok(wall_clock_ms()) })
            .name("clock")
            .await?;

        // The agent: the saved one if the store holds nothing newer, else recovered.
        let saved_version = saved.as_ref().map(|s| s.version);
        let loaded = {
            let store = self.host.store.clone();
            let config = (self.host.config)(&thread);
            let thread = thread.clone();
            ctx.run(move || async move {
                store
                    .call(move |store| load(store, config, &thread, saved_version))
                    .await
                    .map_err(blocking_failed)?
            })
            .name("load")
            .await?
        };
        let (mut agent, mut version, mut timer_ms) = match (loaded.into_inner(), saved) {
            (Loaded::Saved, Some(saved)) => {
                (restore(saved.snapshot)?, saved.version, saved.timer_ms)
            }
            (Loaded::Saved, None) => {
                return Err(wire::unrecoverable("the saved agent is missing").into());
            }
            (Loaded::Store { snapshot, version }, _) => {
                let agent = match snapshot {
                    Some(snapshot) => restore(*snapshot)?,
                    None => Agent::new((self.host.config)(&thread))
                        .map_err(|e| wire::unrecoverable(e.to_string()))?,
                };
                (agent, version, None)
            }
        };

        // Work recovery left pending (an orphaned run under replay) is finished first, so
        // the input meets the thread as it would have on the warm path.
        let mut changed = false;
        if agent.pending_outputs() > 0 {
            self.drain(&ctx, &mut agent, &mut version).await?;
            changed = true;
        }

        if matches!(request, Request::Timeout) {
            // This timer has fired; if the wait is still not due, a new one is scheduled.
            timer_ms = None;
        }
        let applied = apply(&mut agent, request, now_ms);
        match applied {
            Ok(()) => self.drain(&ctx, &mut agent, &mut version).await?,
            Err(error) if changed => {
                // Keep recovery's work, then refuse the input.
                self.save(&ctx, &thread, &agent, version, timer_ms, now_ms);
                return Err(error.into());
            }
            Err(error) => return Err(error.into()),
        }
        self.save(&ctx, &thread, &agent, version, timer_ms, now_ms);
        Ok(Json(ThreadView::of(&agent, version)))
    }

    /// Saves the agent; schedules a durable delayed `timeout` when the agent has a deadline
    /// no call is scheduled for yet. Returns the deadline scheduled for.
    fn save(
        &self,
        ctx: &ObjectContext<'_>,
        thread: &ThreadId,
        agent: &Agent,
        version: u64,
        mut timer_ms: Option<u64>,
        now_ms: u64,
    ) -> Option<u64> {
        match agent.poll_timeout() {
            Some(due) if timer_ms != Some(due) => {
                let delay = Duration::from_millis(due.saturating_sub(now_ms));
                ctx.object_client::<ThreadObjectClient>(thread.as_str())
                    .timeout()
                    .send_after(delay);
                timer_ms = Some(due);
            }
            Some(_) => {}
            None => timer_ms = None,
        }
        ctx.set(
            SAVED,
            Json(Saved {
                snapshot: agent.snapshot(),
                version,
                timer_ms,
            }),
        );
        timer_ms
    }

    /// Drains the agent: each commit persisted (fenced) in a journaled step, each model call
    /// and each tool call a journaled step, until the agent has nothing more to say (idle, or
    /// awaiting a person).
    async fn drain(
        &self,
        ctx: &ObjectContext<'_>,
        agent: &mut Agent,
        version: &mut u64,
    ) -> Result<(), HandlerError> {
        while let Some(output) = agent.poll() {
            match output {
                Output::Commit(commit) => {
                    let ended = match &commit.commit.run {
                        RunDisposition::Ended { run_id, .. } => Some(run_id.clone()),
                        _ => None,
                    };
                    let thread = commit.commit.thread_id.clone();
                    // The one commit path of every host; the object is the thread's single
                    // writer (Restate keys it by thread), so it commits under no claim.
                    let operation = commit_operation_for(*commit, None, 0);
                    let store = self.host.store.clone();
                    let receipt = ctx
                        .run(move || async move {
                            store
                                .call(move |store| persist(store, operation))
                                .await
                                .map_err(blocking_failed)?
                        })
                        .name("commit")
                        .await?;
                    *version = receipt.into_inner().record.thread_version;
                    if let (Some(exporter), Some(run)) = (&self.host.otlp, ended) {
                        export_spans(&self.host.store, exporter, thread, run);
                    }
                }
                Output::Event(_) => {}
                Output::Action(Action::CallModel {
                    run_id,
                    step,
                    final_step,
                }) => {
                    let call = model_call(agent, final_step)?;
                    let model = self.host.model.clone();
                    let answer = ctx
                        .run(move || async move {
                            model.call(call).await.map(Json).map_err(step_failure)
                        })
                        .retry_policy(self.host.step_policy())
                        .name("model")
                        .await;
                    let outcome = match answer {
                        Ok(Json(message)) => agent.model_done(&run_id, step, message),
                        Err(failure) => {
                            let (code, message) = failure_parts(&failure);
                            agent.model_failed(&run_id, step, &code, &message)
                        }
                    };
                    outcome.map_err(internal)?;
                }
                Output::Action(Action::ExecuteTools { run_id, calls, .. }) => {
                    // One call after the other, in call order: each is its own journaled
                    // step, so a replay after a crash re-runs only the unanswered ones.
                    for call in calls {
                        let tools = self.host.tools.clone();
                        let id = call.id.clone();
                        let run = run_id.clone();
                        let result = ctx
                            .run(move || async move {
                                tools
                                    .execute(run, call)
                                    .await
                                    .map(Json)
                                    .map_err(step_failure)
                            })
                            .retry_policy(self.host.step_policy())
                            .name(format!("tool {}", id.as_str()))
                            .await;
                        let output = match result {
                            Ok(Json(output)) => output,
                            Err(failure) => {
                                let (code, message) = failure_parts(&failure);
                                ToolOutput::error(id.clone(), format!("{code}: {message}"))
                            }
                        };
                        agent.tool_done(&run_id, &id, output).map_err(internal)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Parses the handler's input against the thread and applies it; a misuse is a terminal
/// error with the §10 body and leaves the agent unchanged.
fn apply(agent: &mut Agent, request: Request, now_ms: u64) -> Result<(), TerminalError> {
    let input = match request {
        Request::Plain(input) => *input,
        Request::Timeout => Input::Timeout,
        Request::Line(kind, body) => parse_line(kind, &body)?,
        Request::Resume(body) => {
            let request: ResumeRequest = serde_json::from_slice(&body)
                .map_err(|e| wire::invalid_json(format!("not a resume request: {e}")))?;
            match agent.current_ticket() {
                Some(ticket) => {
                    let mut command = ResumeCommand::from_ticket(ticket, request.result, now_ms);
                    if let Some(correlation_id) = request.correlation_id {
                        command.correlation_id = correlation_id;
                    }
                    command.context_messages = request.context_messages;
                    Input::Resume { command }
                }
                None => Input::ResumeTicket {
                    result: request.result,
                },
            }
        }
    };
    agent
        .handle(input, now_ms)
        .map_err(|error| wire::misuse(&error))
}

fn parse_line(kind: &'static str, body: &[u8]) -> Result<Input, TerminalError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| wire::invalid_json(format!("the body is not valid JSON: {e}")))?;
    let Value::Object(mut object) = value else {
        return Err(wire::invalid_json(format!(
            "the body of {kind} must be a JSON object"
        )));
    };
    if object.contains_key("type") {
        return Err(wire::invalid_json(format!(
            "the body of {kind} has no \"type\": the handler names the input"
        )));
    }
    object.insert("type".into(), Value::String(kind.to_owned()));
    serde_json::from_value(Value::Object(object))
        .map_err(|e| wire::invalid_json(format!("not a valid {kind} body: {e}")))
}

/// The `load` step: compares the saved version with the store's and recovers when the store
/// holds something the saved agent has not seen (or there is no saved agent).
/// Exports the spans of `run`, whose terminal commit the store holds, in the background: the
/// handler does not wait for the collector. Not a journaled step (a worker without `--otlp`
/// must replay the same journal), so a replayed handler exports again: the same spans, with
/// the same ids. A failure is one line on stderr; the thread goes on.
fn export_spans(store: &SharedStore, exporter: &Arc<OtlpExporter>, thread: ThreadId, run: RunId) {
    let store = store.clone();
    let exporter = Arc::clone(exporter);
    tokio::spawn(async move {
        let (thread_text, run_text) = (thread.as_str().to_owned(), run.as_str().to_owned());
        let spans = store
            .call(move |store| {
                spans_from_store(&**store, &thread, Some(&run), &TraceOptions::default())
            })
            .await;
        let outcome = match spans {
            Ok(Ok(spans)) => tokio::task::spawn_blocking(move || exporter.export(&spans))
                .await
                .map_err(|error| format!("the export task failed: {error}"))
                .and_then(|exported| exported.map_err(|error| error.to_string())),
            Ok(Err(error)) => Err(error.to_string()),
            Err(error) => Err(format!("reading the store failed: {error}")),
        };
        if let Err(message) = outcome {
            eprintln!(
                "runcore-restate-worker: the spans of run {run_text:?} of thread {thread_text:?}: {message}"
            );
        }
    });
}

/// Runs on the blocking pool (see [`SharedStore`]).
fn load(
    store: &BoxedStore,
    config: AgentConfig,
    thread: &ThreadId,
    saved_version: Option<u64>,
) -> Result<Json<Loaded>, HandlerError> {
    let version = store.thread_version(thread).map_err(retryable)?;
    if saved_version == Some(version) {
        return Ok(Json(Loaded::Saved));
    }
    if version == 0 {
        return Ok(Json(Loaded::Store {
            snapshot: None,
            version,
        }));
    }
    let agent = Agent::recover(config, store, thread, RecoveryPolicy::Replay).map_err(
        |error| -> HandlerError {
            match error {
                RecoverError::Store(error) => retryable(error),
                RecoverError::Invalid(error) => wire::unrecoverable(error.to_string()).into(),
                other => wire::unrecoverable(other.to_string()).into(),
            }
        },
    )?;
    Ok(Json(Loaded::Store {
        snapshot: Some(Box::new(agent.snapshot())),
        version,
    }))
}

/// The `commit` step: one fenced operation. A retry of the step after a lost answer gets the
/// stored receipt (`duplicate`); a refusal is terminal; a backend failure is retried.
/// Runs on the blocking pool (see [`SharedStore`]).
fn persist(
    store: &mut BoxedStore,
    operation: CommitOperation,
) -> Result<Json<CommitReceipt>, HandlerError> {
    match store.commit_operation(operation) {
        Ok(receipt) => Ok(Json(receipt)),
        Err(StoreError::Unavailable { message, source }) => {
            Err(retryable(StoreError::Unavailable { message, source }))
        }
        Err(refusal) => Err(wire::store_refused(&refusal).into()),
    }
}

fn model_call(agent: &Agent, final_step: bool) -> Result<ModelCall, HandlerError> {
    let request = agent
        .model_request()
        .ok_or_else(|| internal(AgentError::Internal("call_model without a request".into())))?;
    let mut call = request.to_call();
    call.final_step = final_step;
    Ok(ModelCall {
        thread_id: agent.thread_id().clone(),
        call,
    })
}

/// A transient step failure is retried by the step's policy; a permanent one is terminal at
/// once. Either way the handler turns the final failure into data.
fn step_failure(error: StepError) -> HandlerError {
    match error {
        StepError::Transient { .. } => HandlerError::from(error),
        StepError::Permanent { code, message } => {
            TerminalError::new(serde_json::json!({"code": code, "message": message}).to_string())
                .into()
        }
    }
}

/// The code and message of a step's final failure: a permanent failure's own, or
/// `step_retries_exhausted` with the last attempt's text.
fn failure_parts(failure: &TerminalError) -> (String, String) {
    if let Ok(Value::Object(body)) = serde_json::from_str::<Value>(failure.message())
        && let (Some(Value::String(code)), Some(Value::String(message))) =
            (body.get("code"), body.get("message"))
    {
        return (code.clone(), message.clone());
    }
    (
        "step_retries_exhausted".to_owned(),
        failure.message().to_owned(),
    )
}

/// A store call that gave no answer (it panicked, the store could not be reopened after an
/// earlier panic, the runtime is stopping): this attempt fails and Restate retries the step by
/// its policy; nothing shared is left poisoned, so the other threads go on.
fn blocking_failed(error: BlockingError) -> HandlerError {
    HandlerError::from(error)
}

fn retryable(error: StoreError) -> HandlerError {
    HandlerError::from(error)
}

fn internal(error: AgentError) -> HandlerError {
    TerminalError::new(wire::agent_error_body(&error).to_string()).into()
}

fn restore(snapshot: AgentSnapshot) -> Result<Agent, HandlerError> {
    Agent::restore(snapshot).map_err(|e| wire::unrecoverable(e.to_string()).into())
}

#[cfg(test)]
mod tests {
    use runcore::{AgentConfig, Message, ToolSpec, UserMessage};

    use super::*;

    /// The model is handed the core's one model-call shape: after a compaction the context
    /// starts with the summary (it used to get the transcript tail without it), and the tools
    /// come with their definitions (they used to be names only).
    #[test]
    fn the_model_call_is_the_cores_with_the_summary_and_tool_definitions() {
        let mut config = AgentConfig::default();
        config.tools.insert(
            "lookup".into(),
            ToolSpec {
                description: Some("looks up".into()),
                parameters: Some(serde_json::json!({"type": "object"})),
                ..ToolSpec::default()
            },
        );
        let mut agent = Agent::new(config).expect("an agent");
        agent.prompt(UserMessage::text("hi"), 0).expect("a prompt");
        while agent.poll().is_some() {}
        agent
            .compact(UserMessage::text("the summary"), 1, 1)
            .expect("a compaction");
        while agent.poll().is_some() {}
        let call = model_call(&agent, true).expect("a model call").call;
        assert_eq!(call, {
            let mut expected = agent.model_call().expect("an outstanding call");
            expected.final_step = true;
            expected
        });
        assert_eq!(call.messages.len(), 1);
        assert!(matches!(call.messages.first(), Some(Message::User(_))));
        let first = serde_json::to_value(&call.messages[0]).expect("JSON");
        assert_eq!(first["content"][0]["text"], "the summary");
        assert_eq!(call.tools.len(), 1);
        assert_eq!(call.tools[0].description.as_deref(), Some("looks up"));
    }
}
