//! # runcore — the deterministic core of AI agent runs
//!
//! runcore decides *what happens next* in an agent run; the host does every piece of I/O: it
//! calls the model, runs tools, persists commits, keeps time and shows events to people. The
//! crate has no async, no threads, no clock, no randomness and no file or network access: time
//! enters as `now_ms` arguments and ids are minted from counters, so the same inputs give
//! byte-identical outputs on every platform.
//!
//! ## The driving contract
//!
//! **One mutation, then drain.** Call one input method on the [`Agent`], then call
//! [`Agent::poll`] until it returns `None`, acting on each [`Output`] in order:
//!
//! - [`Output::Commit`]: persist the [`ThreadCommit`] *before* acting on anything after it
//!   (facts before notifications), fenced by the operation fields the agent attaches
//!   ([`AgentCommit::into_operation`], SPEC §7.1);
//! - [`Output::Event`]: show it, or fold it into an [`AgentState`] with [`reduce`];
//! - [`Output::Action`]: do the work ([`Action::CallModel`], [`Action::ExecuteTools`]) and
//!   answer with the outcome input that names the run and step (or call) it answers.
//!
//! For one input, its commits come first, then its events, then at most one action. Misuse
//! returns a typed [`AgentError`] and changes nothing; the end of a run, failure included, is
//! an [`EndCause`] in the terminal commit and in `run_end`, never an `Err`.
//!
//! ```
//! use runcore::store::{CommitLog, CommittedThreadView, MemoryStore};
//! use runcore::{
//!     Action, Agent, AgentConfig, AgentEvent, AssistantBlock, AssistantMessage, EndCause,
//!     Output, StopReason, ToolOutput, UserMessage,
//! };
//! use serde_json::json;
//!
//! let mut agent = Agent::new(AgentConfig::default())?;
//! let mut store = MemoryStore::new();
//! let mut ended = None;
//!
//! agent.prompt(UserMessage::text("What is 6 x 7?"), 0)?;
//! while let Some(output) = agent.poll() {
//!     match output {
//!         Output::Commit(commit) => {
//!             store.commit_operation(commit.into_operation())?;
//!         }
//!         Output::Action(Action::CallModel { run_id, step, .. }) => {
//!             // A scripted model: first ask for a tool, then answer.
//!             let request = agent.model_request().expect("the call is outstanding");
//!             assert_eq!(request.step, step);
//!             let reply = if step == 1 {
//!                 let call = AssistantBlock::tool_call("c1", "calc", json!({"expr": "6*7"}));
//!                 AssistantMessage::new(vec![call], StopReason::ToolUse)
//!             } else {
//!                 AssistantMessage::text("42")
//!             };
//!             agent.model_done(&run_id, step, reply)?;
//!         }
//!         Output::Action(Action::ExecuteTools { run_id, calls, .. }) => {
//!             for call in calls {
//!                 agent.tool_done(&run_id, &call.id, ToolOutput::text(call.id.clone(), "42"))?;
//!             }
//!         }
//!         Output::Event(AgentEvent::RunEnd { result, .. }) => ended = Some(result.cause),
//!         Output::Event(_) => {}
//!     }
//! }
//!
//! assert_eq!(ended, Some(EndCause::NaturalEnd));
//! // The committed facts alone reproduce the transcript: user, call, result, answer.
//! assert_eq!(store.committed_messages(agent.thread_id())?, agent.transcript());
//! assert_eq!(agent.transcript().len(), 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Map of the crate
//!
//! Every public type has **one path**. The root holds what an embedder of the agent needs (the
//! contract types, each re-exported by name from private source modules); four public modules
//! hold what belongs together and apart from it:
//!
//! - [`limits`]: the input limits every door applies, each rule once (the line cap, the
//!   nesting depth, the clock's range), used by the driver, `Agent::handle` and the bindings.
//! - [`driver`]: the JSON-lines driver of SPEC §12 as a pure state machine over lines
//!   ([`driver::Driver`]), its line types and line builders, the §10 error body
//!   ([`driver::error_body`]) and (with the `schema` feature) the JSON Schema of its lines.
//! - [`host`]: host operations on a store, each taking the host's clock as an argument — one
//!   claimed session ([`host::ClaimedSession`], [`host::ClaimHeld`]), answering an approval
//!   ([`host::answer_permission`]), sweeping due work ([`host::sweep`]), the durable driver
//!   ([`host::DurableDriver`]), forking ([`host::fork_thread`]) and the scripted host
//!   ([`host::script`]) the tests, the demo and the benchmarks share.
//! - [`store`]: what a backend author needs — the ports ([`store::CommitLog`],
//!   [`store::CommittedThreadView`], [`store::CheckpointReader`], [`store::ThreadClaims`]),
//!   [`store::StoreError`], the in-memory reference [`store::MemoryStore`], the admission rule
//!   ([`store::admit`]), the claim decisions, the digests and the payload hash
//!   ([`store::canonical_json`], [`store::sha256_hex`]).
//! - `conformance` (with the `conformance` feature): the backend conformance suite, every case
//!   a function over the store ports, and its `runcore::conformance_tests!` macro. Its own
//!   module, not under `store`: its cases drive the agent and the host operations too.
//!
//! At the root, by concern:
//!
//! - Identifiers and messages: [`ThreadId`], [`RunId`], [`CallId`], [`ToolName`], [`Step`],
//!   [`Message`] and its kinds, content blocks, [`ToolCall`], [`ToolOutput`] and the synthetic
//!   results of SPEC §8.6 ([`ToolResultMessage`]).
//! - The run lifecycle: [`RunState`], [`EndCause`], [`Failure`], [`RunDisposition`] and
//!   [`RunRecord`].
//! - Human in the loop: [`ResumeTicket`], [`AwaitTarget`], [`ResumeCommand`],
//!   [`ResumeResult`], [`validate_resume`] and its [`ResumeError`].
//! - State: [`StateCommand`], [`StateScope`], [`MergePolicy`], [`MaterializedState`].
//! - Commits: [`ThreadCommit`] (assemble, validate), [`AuditDraft`], [`CommitOperation`] with
//!   its [`CommitRecord`] and [`CommitReceipt`], and [`CommitError`].
//! - Threads that begin with history (SPEC §8.10): [`Agent::import`],
//!   [`Agent::prompt_messages`]; the read port
//!   [`store::CommittedThreadView::thread_as_of`] and the host operation
//!   [`host::fork_thread`]; the lossless content of §2.1 lives on the message types ([`Meta`],
//!   [`DeltaKind`], [`Usage`]).
//! - The agent: [`Agent`], [`AgentConfig`], [`Input`], [`Output`] ([`AgentCommit`],
//!   [`AgentEvent`], [`Action`]), [`AgentError`], the reducer ([`reduce`], [`AgentState`]),
//!   [`Observers`], snapshots ([`AgentSnapshot`]) and recovery ([`RecoveryPolicy`],
//!   [`RecoverError`]).
//!
//! The whole surface is listed, item by item, in `snapshots/public_api__public_api.snap`
//! (kept by `tests/public_api.rs`, which also fails on a second path to an item or a glob
//! re-export), so any change to it is a reviewed diff.
//!
//! ## Shared, not copied
//!
//! One message has several owners: the transcript, the commit that persists it and the event
//! that announces it (and a tool call also lives in its batch, its `tool_start` event and the
//! `execute_tools` action). So the heavy parts are shared, and a clone costs a reference count,
//! never a copy of the content:
//!
//! - [`Message`]'s variants hold their message in an [`Arc`](std::sync::Arc)
//!   (`Message::from(UserMessage::text("hi"))` builds one; a match on `Message::Assistant(m)`
//!   reads `m.content` as through a reference; [`Arc::make_mut`](std::sync::Arc::make_mut)
//!   changes one, copying it first if anyone else holds it), and so does the
//!   `assistant_message` event.
//! - Ids and tool names ([`ThreadId`], [`RunId`], [`CallId`], [`ToolName`]) are shared
//!   strings; tool-call arguments are an `Arc<serde_json::Value>`.
//! - [`Output::Commit`] and the ticket of the `awaiting` event are boxed, so an [`Output`] is
//!   small to move (96 bytes on 64-bit targets).
//!
//! On the wire none of this shows: JSON is exactly what it would be for plain values.
//!
//! ## Cargo features
//!
//! Both are off by default: an embedder compiles neither.
//!
//! - `schema`: JSON Schema (draft 2020-12) for the public data types (`schemars::JsonSchema`)
//!   and the driver's schema functions (`driver::json_schema` and the like). The `runcore`
//!   binary turns it on for `runcore schema`.
//! - `conformance`: the backend conformance suite, `runcore::conformance`, and
//!   `runcore::conformance_tests!`. A backend crate turns it on in its dev-dependencies.
//!
//! ## Decisions where the contract is silent
//!
//! - Ids may be empty as values (so a malformed commit still deserializes and is then rejected
//!   with a clear error); every place that requires an id rejects a blank one.
//! - Unknown JSON fields are rejected everywhere (`deny_unknown_fields`): a misspelt field is
//!   an error, not silently dropped data.
//! - `abort()` and `stop()` requests: the first one wins; later ones are harmless no-ops.
//! - A resume `Input` at a pause when the step budget is spent cannot be answered by a model
//!   call: the run ends `MaxSteps` and the input comes back in `unconsumed`.
//! - A `Continue` resume of a pause re-takes the boundary the pause interrupted.
//! - The agent's clock is the latest `now_ms` of an accepted input; `resume` and
//!   `expire_wait` compare deadlines against `max(clock, now_ms)`.
//! - A recovered agent's clock is the latest time recorded in the run's committed facts
//!   (`run_started` and `permission_decided` drafts carry `now_ms`); queued input that was
//!   never committed cannot be recovered (take an [`AgentSnapshot`] for that).
//! - Resume context messages are committed with the resume's Running commit, as §8.5 says,
//!   even at a permission wait in the middle of a tool batch: there they stand between the
//!   batch's calls and its results (every call still gets exactly one result, in call order).
//!   If your provider rejects a system message in that position, send context at a pause.
//! - Tool outputs over [`AgentConfig::max_tool_output_bytes`] (default 1 MiB) or with an
//!   image that is not valid base64 of an `image/*` type become `malformed` results.
//! - A tool call whose `arguments` are not a JSON object is answered `malformed` when its
//!   answer arrives (never executed, never asked about); in a `length` answer every call is
//!   `truncated` first (SPEC §13: a codec passes unparseable arguments on as their raw text).
//! - `meta` is normalized: an empty object and an absent one are the same (absent on the
//!   wire). A shape error in a message (`meta` that is not an object, a `signature` on a text
//!   block) is refused by the JSON reader, so the driver answers it `invalid_json` (the Rust
//!   types cannot express it at all).
//! - An import's completeness rules also check that a result names the tool of its call; a
//!   system message may stand anywhere (resume context does, between a batch's calls and
//!   results). A multi-message prompt's ids must be unique in the thread; a one-message
//!   prompt's id is not checked against the transcript (as before).
//! - An import is its own run: `run_start` carries the imported messages (`message` for one,
//!   `messages` for several) and `run_end` follows with `Stopped("imported")` and 0 steps, so
//!   a reducer's transcript is the committed one.
//! - A fork is an import of the parent's messages as of the version into a new thread: the
//!   fork's first run is `"{new_thread}/run-1"`, `Ended(Stopped("imported"))`, with the audit
//!   events `imported {count}`, `forked_from {thread_id, version}` and the inherited
//!   `compacted`. A fork is idle: where the parent's run was still going at that version (a
//!   model call out), the fork goes on with `continue`.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod agent;
mod canonical;
mod commit;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod driver;
mod error;
pub mod facts;
mod hash;
pub mod host;
mod ids;
mod json_string;
pub mod limits;
mod message;
mod model_call;
mod named;
mod resume;
mod run;
mod schema_via;
mod state;
pub mod store;

pub use agent::{
    AGENT_SCHEMA_VERSION, Action, Agent, AgentCommit, AgentConfig, AgentEvent, AgentSnapshot,
    AgentState, AgentStatus, Compaction, Input, LoopEvent, MessageOrigin, ModelRequest, Observer,
    ObserverId, Observers, Output, QueueMode, RecoverError, RecoveryPolicy, RunResult,
    SnapshotError, ToolPolicy, ToolSpec, reduce,
};
pub use agent::{
    CallAction, CallDecision, HeadDecision, NextStep, RecoveryDecision, ResumedRun, decide_recovery,
};
pub use commit::{
    AuditDraft, COMMIT_SCHEMA_VERSION, CommitError, CommitOperation, CommitReceipt, CommitRecord,
    OperationId, ThreadCommit, WaitBoundary,
};
pub use error::AgentError;
pub use ids::{CallId, RunId, Step, ThreadId, ToolName};
pub use message::{
    AssistantBlock, AssistantMessage, ContentBlock, DeltaKind, Message, Meta, MetaError,
    ResultOutcome, Role, StopReason, SystemMessage, ToolCall, ToolOutput, ToolResultMessage, Usage,
    UserMessage, from_json_exact, protect_big_integers,
};
pub use model_call::{ModelCall, ToolDefinition};
pub use named::UnknownName;
pub use resume::{
    AwaitTarget, PauseReason, PendingTool, PermissionDecision, RemoteInputReason, ResultKind,
    ResumeCommand, ResumeError, ResumeResult, ResumeTicket, ToolWaitReason, WaitIdentity,
    validate_resume,
};
pub use run::{EndCause, Failure, RunDisposition, RunRecord, RunState};
pub use state::{MaterializedState, MergePolicy, StateAction, StateCommand, StateScope};
