//! # runcore-restate — runcore inside Restate
//!
//! A [Restate](https://restate.dev) Virtual Object per thread (key = thread id) hosts a
//! runcore [`Agent`](runcore::Agent). Restate gives what one machine cannot: one writer per
//! thread across a cluster (a Virtual Object runs one exclusive handler per key at a time),
//! an inbox any node accepts input for, durable timers that fire after every worker died,
//! retries, and an HTTP ingress with idempotency keys. runcore gives what the engine needs of
//! handler code: it is deterministic, so a replayed handler makes the same commits and asks
//! for the same actions, and every commit is a fenced, idempotent operation (SPEC §7.1), so an
//! at-least-once persist step is a harmless duplicate.
//!
//! ## The object
//!
//! [`ThreadObject`] (Restate service `RuncoreThread`) has exclusive handlers `prompt`,
//! `steer`, `follow_up`, `abort`, `resume`, `cancel_wait`, `stop` and `timeout`, and the
//! shared, read-only `state`. Each exclusive handler:
//!
//! 1. reads the object's saved agent (`ctx.get`, journaled);
//! 2. reads the wall clock once, in a journaled step (`clock`): this is the input's `now_ms`;
//! 3. `load` (journaled): compares the store's thread version with the saved one; when they
//!    differ (no saved agent, a state lost, another writer such as `runcore approve`), it
//!    rebuilds the agent with [`Agent::recover`](runcore::Agent::recover) under `replay`;
//!    work recovery leaves pending (an orphaned run) is drained first;
//! 4. applies the input; a misuse is a terminal error carrying the §10 body
//!    (`{"kind","message",…}`: HTTP 409, or 400 for a body that does not parse), and nothing
//!    is saved: the thread is unchanged;
//! 5. drains the agent: each commit is a journaled `commit` step doing
//!    [`commit_operation`](runcore::store::CommitLog::commit_operation) on the store; each model
//!    call is a journaled `model` step through the host's [`Model`]; each tool call a
//!    journaled `tool {call_id}` step through the host's [`Tools`], one after the other in
//!    call order;
//! 6. saves the agent ([`runcore::AgentSnapshot`], with the store version it matches) and,
//!    when the agent has a deadline ([`poll_timeout`](runcore::Agent::poll_timeout)) that no
//!    call is scheduled for yet, sends itself a durable delayed `timeout` call;
//! 7. answers the [`ThreadView`].
//!
//! An approval wait returns from the handler (the object is free for `steer`, `state` and
//! the decision); the decision arrives as a `resume` call, which a caller sends with an
//! `idempotency-key` header so a retried request is the same decision.
//!
//! ## Why each choice keeps the run exactly-once where it must be
//!
//! - **One writer per thread.** Restate runs one exclusive handler per object key at a time,
//!   cluster-wide, and a retried invocation replaces the failed attempt instead of running
//!   beside it. A zombie attempt (a worker cut off, still running) meets the store's version
//!   fence: a commit byte-identical to one already stored gets that receipt (the same fact),
//!   any other gets `version_conflict` (§7.1) and writes nothing.
//! - **Handler code is replayed, so it must be deterministic.** Everything the agent sees
//!   from the outside world comes out of the journal on a replay: the saved agent (`ctx.get`),
//!   the clock (`clock` step), the recovered agent (`load` step), every model answer and every
//!   tool result. The agent is deterministic (SPEC §0), so a replay makes the same commits,
//!   byte for byte, and asks for the same calls with the same ids, in the same order: the
//!   journal entries line up.
//! - **`now_ms` only from journaled values.** The clock is read once per input inside a
//!   journaled step; deadlines (`now_ms + deadline_after_ms`) and the delay of the timer are
//!   computed from it, so a replay computes the same deadline and the same timer.
//! - **Commits: at-least-once step, exactly-once fact.** A crash after the store accepted a
//!   commit but before the journal holds the step's result runs the step again; the same
//!   operation with the same payload hash gets the stored receipt (`duplicate = true`) and
//!   appends nothing. A commit the store refuses (a fence, a conflict) ends the invocation
//!   with a terminal error naming it: the agent is then ahead of the store, and the next
//!   invocation recovers from what is committed (the `load` step sees the versions differ).
//!   A backend failure (`unavailable`) is retried.
//! - **The calls are durable before any effect.** The agent commits the assistant message
//!   holding a batch's calls before it asks for them to run (SPEC §8.2), and the `commit`
//!   step is journaled before the first `tool` step starts.
//! - **Model and tool calls: at-least-once, and said so.** A journaled step whose result was
//!   journaled is never run again. A crash between a step's effect and its journal entry runs
//!   it again: for the model that is a second read nobody saw; for a tool it is why tools must
//!   be idempotent by `"{run_id}:{call_id}"` (SPEC §8.7), or answer `interrupted` when they
//!   refuse a second completion. The end-to-end test's tools refuse and record, and the test
//!   asserts that none completed twice.
//! - **Failures become data, never a stuck invocation.** A transient failure
//!   ([`StepError::Transient`]) is retried by the step's policy
//!   ([`ThreadHost::step_attempts`]); the final failure is journaled and becomes
//!   `model_failed` (the run ends `error` with code `step_retries_exhausted`, or the
//!   permanent failure's code) or an error tool result, the same on every replay.
//! - **Deadlines fire with no process alive.** The delayed `timeout` call is a journal entry
//!   of the invocation that opened the wait, held by the Restate server, so it survives the
//!   crash of every worker and a restart of the server. A `timeout` that arrives early (clock
//!   skew between workers) is a no-op and schedules the next one; one that arrives after the
//!   wait was answered is a no-op.
//! - **Decisions once.** `resume` validates against the agent's current ticket (§4): a repeat
//!   with the same idempotency key gets the first answer from the ingress; a repeat with
//!   another key gets `not_waiting`; a decision for an earlier wait (its `correlation_id`)
//!   gets `correlation_mismatch`.
//!
//! Limits of this design, chosen on purpose: inputs to one thread are serialized by Restate,
//! so a `steer` or `abort` sent while a run is executing waits until the handler returns (at
//! the run's end or its next approval wait); the saved agent is the whole snapshot (its size
//! grows with the transcript); tool calls of one batch run one after the other.
//!
//! ## The store
//!
//! [`open_store`]: `sqlite:PATH` for one node (several worker processes on one machine may
//! share the file) or `postgres://…` for a cluster, through the public APIs of
//! `runcore-sqlite` and `runcore-postgres`. Any other store ([`runcore::store::Store`]) joins
//! through [`shared`], boxed as the workspace's one boxed store
//! ([`runcore::store::BoxedStore`]).
//!
//! The store ports are synchronous; the handlers are async. They meet in one place, the
//! workspace's crossing `runcore-store-blocking` ([`SharedStore`]): the `load` and `commit`
//! steps run their store call on tokio's blocking pool, never on the worker's async thread
//! (where the PostgreSQL client, which drives a runtime of its own, would panic). A store call
//! that panics or fails (`unavailable`: the database went away) fails that step, so Restate
//! retries the invocation by its policy; the panic is caught with the store's lock held, so
//! nothing shared is poisoned and every other thread goes on, and a store opened by
//! [`open_store`] is reopened before its next call.
//!
//! ## Versions
//!
//! `restate-sdk` 0.13.0 (service protocol 5–7) against the server `@restatedev/restate-server`
//! 1.7.12 from the npm registry, pinned in `package-lock.json` beside this crate: the newest
//! of each, tested together by `tests/e2e.rs`.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod host;
mod object;
pub mod script;
mod store;
mod wire;

pub use host::{Model, ModelCall, StepError, StepFuture, Tools};
pub use object::{ThreadHost, ThreadObject};
pub use store::{OpenStoreError, SharedStore, open_store, shared};
pub use wire::{ResumeRequest, RunEnd, ThreadView, agent_error_body};
