//! OpenTelemetry GenAI spans derived from a runcore thread's commits (SPEC §14).
//!
//! What happened in a run is already committed; a trace is a view of it, not a second record.
//! [`derive_spans`] is a pure function of a thread's committed messages and audit events
//! (what [`CommittedThreadView::committed_messages`](runcore::store::CommittedThreadView) and
//! `list_events(EventScope::Thread(..))` return); [`spans_from_store`] reads both from any
//! [`CheckpointReader`](runcore::store::CheckpointReader). No I/O, no clock: a trace read from the
//! store after a crash is the trace of the run that crashed, identical on every backend.
//!
//! # Spans
//! - one `invoke_agent` span per run (INTERNAL; `invoke_agent {agent}` when
//!   [`TraceOptions::agent_name`] is set), the root of the run's trace;
//! - one `chat {model}` span per model step (CLIENT): each committed assistant message is one
//!   step, in order;
//! - one `execute_tool {tool}` span per call handed to the host (INTERNAL): results with
//!   outcome `executed`, `interrupted` (the outcome was lost in a crash: status ERROR), or
//!   `malformed` output of an executed call; calls never executed (`denied`, `expired`,
//!   `skipped`, `truncated`, malformed arguments) are `runcore.tool.not_executed` events on
//!   the run's span;
//! - one `await {tool | reason}` span per wait for a person (INTERNAL), from the Awaiting
//!   commit to the commit that answered it, with a `runcore.decision` event and attributes:
//!   `allow` (with `runcore.decision.note`), `deny` (with `runcore.decision.reason`),
//!   `expired`, `cancelled`, `stopped`, `resumed`; `runcore.decision.by` names who answered
//!   (the claim owner of `runcore approve`/`deny`, the console or a binding: their
//!   `decided_by` draft) when known; an open wait has `runcore.await.open`.
//!
//! An import or a fork (SPEC §8.10: a run that starts and ends in one commit with an
//! `imported {count}` draft) brought its messages in without a model call: it yields its run's
//! span only (`runcore.run.imported` = the count; a fork's also `runcore.forked_from.thread_id`
//! / `.version`), no `chat` or `execute_tool` span and no token usage, however many answers
//! the messages hold.
//!
//! Every child's parent is its run's span. Attributes follow the GenAI semantic
//! conventions: `gen_ai.operation.name`, `gen_ai.provider.name` ([`TraceOptions::provider`]
//! when given, else the API a runcore codec wrote in the answer's `meta.codec.api`, SPEC §2.1:
//! `anthropic`, or `openai` for both OpenAI APIs; absent when neither says), `gen_ai.request.model` /
//! `gen_ai.response.model` (the answer's `model`), `gen_ai.response.id`,
//! `gen_ai.response.finish_reasons` (the provider's stop reason when committed, else the
//! §2 `stop_reason`), `gen_ai.usage.input_tokens` / `output_tokens` /
//! `cache_read.input_tokens` / `cache_creation.input_tokens` / `reasoning.output_tokens`,
//! `gen_ai.conversation.id` (the thread id), `gen_ai.tool.name`, `gen_ai.tool.call.id`,
//! `error.type` (the failure code; `tool_error`, `interrupted` or `malformed` for a tool);
//! status ERROR where the run (`error`, `indeterminate`), the step or the call failed (a
//! failed tool's status message is its error type; its text, which is the tool's output, only
//! with [`TraceOptions::content`], capped at 1 KiB). With
//! [`TraceOptions::content`], `gen_ai.input.messages` / `gen_ai.output.messages` (the
//! conventions' `{role, parts}` JSON) and `gen_ai.tool.call.arguments` / `result`.
//!
//! # Ids
//! One trace per run: the trace id is SHA-256 over (thread, run), span ids over (thread, run,
//! kind, step or call or wait ordinal), each part length-prefixed. Deriving twice gives the
//! same ids.
//!
//! # Times: which are exact and which are bounds
//! The agent writes a `commit_clock {now_ms, transcript_len}` draft, last, in every commit it
//! emits: its clock when it emitted the commit and the transcript length after it. The agent
//! decides its next action (a model call, a tool batch) in the same drain as the commit
//! before it, at the same clock. So, for commits that carry it:
//! - a run starts at its `run_started.now_ms` and ends at its last commit (the Ended commit
//!   for an ended run): **exact**;
//! - a model step ends when its answer was committed (**exact**) and starts at the run's
//!   previous commit: **exact** — unless the process crashed during the call, when the
//!   recovered agent asked again later: then a **lower bound**;
//! - a tool call starts at the run's commit before its result's commit (the one that handed
//!   the batch out, or the accepted resume): **exact** (a lower bound after a crash, as
//!   above); it ends when the batch's results were committed, all together after the last
//!   one: **exact** for a batch of one executed call, an **upper bound** for the others of a
//!   larger batch (`runcore.time.exact = false`), since per-call completion is not committed;
//! - a wait starts at its Awaiting commit and ends at the commit that answered it, and the
//!   decision's time is its `permission_decided.now_ms`: **exact**.
//!
//! The times are the agent's clock: the `now_ms` the host passed with its inputs.
//!
//! Commits written before `commit_clock` existed (SPEC §2.1: absent means unchanged) still
//! read: their times come from the drafts that carry `now_ms` (`run_started`,
//! `permission_decided`, `compacted`), carried forward as lower bounds, and messages are
//! placed by run (`run_started.transcript_start`); such spans carry
//! `runcore.time.exact = false`.

#![warn(missing_docs)]

mod derive;
mod otlp;
mod span;

pub use derive::{
    TraceError, TraceOptions, derive_spans, derive_spans_of, spans_from_store, thread_spans,
    trace_id,
};
pub use otlp::{SCOPE_NAME, SCOPE_VERSION, to_otlp_json, write_otlp_json};
pub use span::{AttributeValue, Attributes, Span, SpanEvent, SpanKind, SpanStatus};
