//! Committed facts → spans (see the crate docs for the rules).

use std::collections::BTreeMap;
use std::sync::Arc;

use runcore::facts::{CommitFacts, RunFacts, ThreadFacts};
use runcore::store::{CheckpointReader, EventRecord, StoreError};
use runcore::{
    AssistantBlock, AssistantMessage, AuditDraft, AwaitTarget, EndCause, Message, ResultOutcome,
    RunId, RunState, ThreadId, ToolResultMessage, UserMessage,
};
use serde_json::Value;

use crate::span::{AttributeValue, Attributes, Span, SpanEvent, SpanKind, SpanStatus};

mod reading;

use reading::{
    STATUS_MESSAGE_MAX, capped, decision_of, executed, message_parts, provider_of,
    stop_reason_name, text_of,
};

/// What the caller knows that the commits do not say, and whether content goes in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceOptions {
    /// `gen_ai.agent.name`; the run span is then named `invoke_agent {agent}`.
    pub agent_name: Option<String>,
    /// `gen_ai.provider.name` (`anthropic`, `openai`, `aws.bedrock`, …) of every span. When
    /// `None`, each run's spans take the provider its answers' `meta.codec.api` names (what
    /// the runcore codecs write, SPEC §2.1); answers without it leave the attribute out.
    pub provider: Option<String>,
    /// Put message content in spans (`gen_ai.input.messages`, `gen_ai.output.messages`,
    /// `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`). Off by default: content may
    /// be private and is large.
    pub content: bool,
}

/// Why spans could not be derived from a store.
#[derive(Debug)]
pub enum TraceError {
    /// The store could not be read.
    Store(StoreError),
    /// `--run` named a run that has no commit on this thread.
    UnknownRun {
        /// The thread.
        thread_id: ThreadId,
        /// The run asked for.
        run_id: RunId,
    },
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceError::Store(error) => write!(f, "trace: reading the store failed: {error}"),
            TraceError::UnknownRun { thread_id, run_id } => write!(
                f,
                "trace: run {:?} has no commit on thread {:?}",
                run_id.as_str(),
                thread_id.as_str()
            ),
        }
    }
}

impl std::error::Error for TraceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TraceError::Store(error) => Some(error),
            TraceError::UnknownRun { .. } => None,
        }
    }
}

impl From<StoreError> for TraceError {
    fn from(error: StoreError) -> Self {
        TraceError::Store(error)
    }
}

/// The spans of `thread` read straight from a store: its committed history, read once
/// ([`ThreadFacts::read`]). With `run`, only that run's spans (an error if the thread has no
/// such run).
pub fn spans_from_store(
    reader: &(impl CheckpointReader + ?Sized),
    thread: &ThreadId,
    run: Option<&RunId>,
    options: &TraceOptions,
) -> Result<Vec<Span>, TraceError> {
    let facts = ThreadFacts::read(reader, thread)?;
    if let Some(run_id) = run
        && facts.run(run_id).is_none()
    {
        return Err(TraceError::UnknownRun {
            thread_id: thread.clone(),
            run_id: run_id.clone(),
        });
    }
    // Only the run asked for is derived (`drive --otlp` asks for each run as it ends).
    Ok(derive(thread, &facts.messages, &facts, options, run))
}

/// Every span of `thread` read straight from a store ([`spans_from_store`] without a run
/// filter, whose only failure is the store's).
pub fn thread_spans(
    reader: &(impl CheckpointReader + ?Sized),
    thread: &ThreadId,
    options: &TraceOptions,
) -> Result<Vec<Span>, StoreError> {
    let facts = ThreadFacts::read(reader, thread)?;
    Ok(derive_spans_of(&facts, options))
}

/// The spans of `thread`, derived from its committed `messages` (commit order) and its audit
/// `events` (what `list_events(EventScope::Thread(..))` returns, ascending; events of other
/// threads are ignored), decoded as [`ThreadFacts::from_records`] decodes them. Pure: the same
/// facts give the same spans, byte for byte.
pub fn derive_spans(
    thread: &ThreadId,
    messages: &[Message],
    events: &[EventRecord],
    options: &TraceOptions,
) -> Vec<Span> {
    let facts = ThreadFacts::from_records(
        thread.clone(),
        0,
        Vec::new(),
        None,
        None,
        events.iter().cloned(),
    );
    derive(thread, messages, &facts, options, None)
}

/// The spans of a thread's committed history ([`ThreadFacts`]): runs in the order they first
/// committed; within a run, its span first, then its model steps, tool calls and waits in
/// commit order. Pure: the same facts give the same spans, byte for byte.
pub fn derive_spans_of(facts: &ThreadFacts, options: &TraceOptions) -> Vec<Span> {
    derive(&facts.thread_id, &facts.messages, facts, options, None)
}

/// The spans of `facts`' runs over `messages`; of the run `only` when given.
fn derive(
    thread: &ThreadId,
    messages: &[Message],
    facts: &ThreadFacts,
    options: &TraceOptions,
    only: Option<&RunId>,
) -> Vec<Span> {
    let runs = &facts.runs;
    let compactions = compactions(facts);
    let mut spans = Vec::new();
    for (index, run) in runs.iter().enumerate() {
        if only.is_some_and(|only| *only != run.run_id) {
            continue;
        }
        let next_start = runs.get(index + 1).and_then(|next| next.transcript_start);
        RunTrace::new(thread, run, messages, next_start, &compactions, options).push(&mut spans);
    }
    spans
}

/// The trace id of one run: 32 hex digits of SHA-256 over the thread and run ids.
pub fn trace_id(thread: &ThreadId, run: &RunId) -> String {
    hashed(&["trace", thread.as_str(), run.as_str()], 32)
}

/// `len` hex digits of SHA-256 over `parts`, each length-prefixed so no two part lists
/// collide.
fn hashed(parts: &[&str], len: usize) -> String {
    let mut bytes = Vec::with_capacity(parts.iter().map(|part| part.len() + 8).sum());
    for part in parts {
        bytes.extend_from_slice(&(part.len() as u64).to_be_bytes());
        bytes.extend_from_slice(part.as_bytes());
    }
    let mut hex = runcore::store::sha256_hex(&bytes);
    hex.truncate(len);
    hex
}

// ----- committed facts, grouped -------------------------------------------------------------

/// The audit kind of an import's fact, `imported {count, now_ms}` (SPEC §8.10); a fork's
/// first commit carries it too.
const IMPORTED: &str = "imported";

/// The audit kind of a fork's fact, `forked_from {thread_id, version}` (SPEC §8.10).
const FORKED_FROM: &str = "forked_from";

/// What the derivation asks of one commit of [`ThreadFacts`].
trait CommitView {
    /// The best time the commit itself says: its `commit_clock`, else the latest `now_ms` of
    /// a draft decided in it (the same clock: one input's drafts share it).
    fn own_time(&self) -> Option<u64>;
    /// The run state it committed, and what it awaits.
    fn state(&self) -> Option<(&RunState, Option<&AwaitTarget>)>;
    /// The `imported {count}` draft of an import or a fork (SPEC §8.10).
    fn imported(&self) -> Option<u64>;
    /// The `forked_from {thread_id, version}` draft of a fork's commit.
    fn forked_from(&self) -> Option<(&str, Option<u64>)>;
}

impl CommitView for CommitFacts {
    fn own_time(&self) -> Option<u64> {
        if let Some((now, _)) = self.clock {
            return Some(now);
        }
        self.drafts
            .iter()
            .filter_map(|draft| match draft {
                AuditDraft::RunStarted { now_ms, .. }
                | AuditDraft::PermissionDecided { now_ms, .. }
                | AuditDraft::Compacted { now_ms, .. } => *now_ms,
                // A fork's commit is the host's, without `commit_clock`: its `imported`
                // draft carries the time.
                AuditDraft::Custom { kind, payload } if kind == IMPORTED => {
                    payload.get("now_ms").and_then(Value::as_u64)
                }
                _ => None,
            })
            .max()
    }

    /// The `imported {count}` draft of an import or a fork (SPEC §8.10): how many messages
    /// the commit brought in without a model call.
    fn imported(&self) -> Option<u64> {
        self.drafts.iter().find_map(|draft| match draft {
            AuditDraft::Custom { kind, payload } if kind == IMPORTED => {
                Some(payload.get("count").and_then(Value::as_u64).unwrap_or(0))
            }
            _ => None,
        })
    }

    /// The `forked_from {thread_id, version}` draft of a fork's commit.
    fn forked_from(&self) -> Option<(&str, Option<u64>)> {
        self.drafts.iter().find_map(|draft| match draft {
            AuditDraft::Custom { kind, payload } if kind == FORKED_FROM => Some((
                payload
                    .get("thread_id")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                payload.get("version").and_then(Value::as_u64),
            )),
            _ => None,
        })
    }

    fn state(&self) -> Option<(&RunState, Option<&AwaitTarget>)> {
        self.drafts.iter().find_map(|draft| match draft {
            AuditDraft::RunStateChanged { state, awaiting } => Some((state, awaiting.as_ref())),
            _ => None,
        })
    }
}

/// Every compaction of the thread: (commit sequence, keep_from, summary), in commit order.
fn compactions(facts: &ThreadFacts) -> Vec<(u64, usize, Arc<UserMessage>)> {
    facts
        .compactions
        .iter()
        .map(|c| (c.commit_sequence, c.keep_from, c.summary.clone()))
        .collect()
}

// ----- one run -------------------------------------------------------------------------------

/// A moment and whether it is exact (see the crate docs) or a bound.
#[derive(Clone, Copy)]
struct At {
    ms: u64,
    exact: bool,
}

struct RunTrace<'a> {
    thread: &'a ThreadId,
    run: &'a RunFacts,
    messages: &'a [Message],
    compactions: &'a [(u64, usize, Arc<UserMessage>)],
    options: &'a TraceOptions,
    trace_id: String,
    run_span_id: String,
    /// Each commit's time, carried forward (a bound) where the commit says none.
    times: Vec<At>,
    /// The run's message range in the transcript.
    range: std::ops::Range<usize>,
    /// For each commit, the longest transcript any commit up to it says it left (its
    /// `commit_clock.transcript_len`; 0 before the first): non-decreasing, so the commit that
    /// carried a message is found by binary search ([`Self::commit_of`]).
    reached: Vec<usize>,
    /// For each commit, how many results of calls handed to the host it carried (the size of
    /// the tool batch it closed), counted once.
    batch_sizes: Vec<usize>,
    /// The run's last assistant message, where a run's failure code belongs.
    last_answer: Option<usize>,
    /// `imported {count}`: the run is an import or a fork (SPEC §8.10), whose messages were
    /// brought in, not produced: no model call, no tool call, no token usage of its own.
    imported: Option<u64>,
    /// The provider the run's first decoded answer names (`meta.codec.api`, SPEC §2.1), for
    /// its spans when [`TraceOptions::provider`] is not given.
    provider: Option<&'static str>,
}

impl<'a> RunTrace<'a> {
    fn new(
        thread: &'a ThreadId,
        run: &'a RunFacts,
        messages: &'a [Message],
        next_start: Option<usize>,
        compactions: &'a [(u64, usize, Arc<UserMessage>)],
        options: &'a TraceOptions,
    ) -> Self {
        let mut times = Vec::with_capacity(run.commits.len());
        let mut last = run.started_ms.unwrap_or(0);
        for commit in &run.commits {
            let at = match commit.own_time() {
                Some(ms) => At {
                    ms: ms.max(last),
                    exact: true,
                },
                None => At {
                    ms: last,
                    exact: false,
                },
            };
            last = at.ms;
            times.push(at);
        }
        let imported = run.commits.iter().find_map(CommitFacts::imported);
        let start = run.transcript_start.unwrap_or(0).min(messages.len());
        let end = run
            .commits
            .iter()
            .filter_map(|commit| commit.clock.map(|(_, len)| len))
            .max()
            .or(next_start)
            .unwrap_or(messages.len())
            .clamp(start, messages.len());
        // An import has no `run_started`, so its range would reach back to the start of the
        // transcript and take every earlier answer for one of its model calls (issue 42: N
        // imports gave N(N+1)/2 chat spans). Its messages were not produced by this run: it
        // gets no span for them, so none are visited.
        let start = if imported.is_some() { end } else { start };
        let mut reached = Vec::with_capacity(run.commits.len());
        let mut longest = 0;
        for commit in &run.commits {
            if let Some((_, len)) = commit.clock {
                longest = longest.max(len);
            }
            reached.push(longest);
        }
        let mut trace = RunTrace {
            thread,
            run,
            messages,
            compactions,
            options,
            trace_id: trace_id(thread, &run.run_id),
            run_span_id: hashed(&["invoke_agent", thread.as_str(), run.run_id.as_str()], 16),
            times,
            range: start..end,
            reached,
            batch_sizes: vec![0; run.commits.len()],
            last_answer: None,
            imported,
            provider: None,
        };
        // One pass over the run's messages for what each span would otherwise scan the run
        // for (a quadratic cost on long runs).
        let mut batch_sizes = vec![0; run.commits.len()];
        for index in trace.range.clone() {
            match messages.get(index) {
                Some(Message::Assistant(answer)) => {
                    trace.last_answer = Some(index);
                    if trace.provider.is_none() {
                        trace.provider = provider_of(answer);
                    }
                }
                Some(Message::ToolResult(result)) if result.outcome != ResultOutcome::Denied => {
                    if let Some(size) = trace
                        .commit_of(index)
                        .and_then(|commit| batch_sizes.get_mut(commit))
                    {
                        *size += 1;
                    }
                }
                _ => {}
            }
        }
        trace.batch_sizes = batch_sizes;
        trace
    }

    fn run_start(&self) -> At {
        match (self.run.started_ms, self.times.first()) {
            (Some(ms), _) => At { ms, exact: true },
            (None, Some(first)) => *first,
            (None, None) => At {
                ms: 0,
                exact: false,
            },
        }
    }

    fn run_end(&self) -> At {
        self.times
            .last()
            .copied()
            .unwrap_or_else(|| self.run_start())
    }

    /// The commit (index into the run's commits) that carried transcript message `index`.
    /// The first commit whose `commit_clock` says the transcript reached past `index`: the
    /// first `i` with `reached[i] > index` (`reached` is non-decreasing, so a binary search).
    fn commit_of(&self, index: usize) -> Option<usize> {
        let commit = self.reached.partition_point(|&len| len <= index);
        (commit < self.reached.len()).then_some(commit)
    }

    /// When the message at `index` was committed, and when the action that produced it was
    /// handed out (the run's previous commit: the agent decides its next action in the same
    /// drain as the commit before it).
    fn span_of_message(&self, index: usize) -> (At, At) {
        match self.commit_of(index) {
            Some(commit) => {
                let end = self.times.get(commit).copied().unwrap_or(self.run_end());
                let start = commit
                    .checked_sub(1)
                    .and_then(|previous| self.times.get(previous).copied())
                    .unwrap_or(At {
                        ms: end.ms,
                        exact: false,
                    });
                (start, end)
            }
            None => {
                let start = self.run_start();
                (
                    At {
                        ms: start.ms,
                        exact: false,
                    },
                    At {
                        ms: start.ms,
                        exact: false,
                    },
                )
            }
        }
    }

    fn span(&self, id_parts: &[&str], name: String, kind: SpanKind, start: At, end: At) -> Span {
        let mut parts = vec![self.thread.as_str(), self.run.run_id.as_str()];
        parts.extend_from_slice(id_parts);
        let mut attributes = Attributes::new();
        attributes.insert("gen_ai.conversation.id".into(), self.thread.as_str().into());
        let provider = self.options.provider.as_deref().or(self.provider);
        if let Some(provider) = provider {
            attributes.insert("gen_ai.provider.name".into(), provider.into());
        }
        if !(start.exact && end.exact) {
            attributes.insert("runcore.time.exact".into(), false.into());
        }
        Span {
            trace_id: self.trace_id.clone(),
            span_id: hashed(&parts, 16),
            parent_span_id: Some(self.run_span_id.clone()),
            name,
            kind,
            start_ms: start.ms,
            end_ms: end.ms.max(start.ms),
            attributes,
            events: Vec::new(),
            status: SpanStatus::Unset,
        }
    }

    fn final_state(&self) -> Option<&RunState> {
        self.run
            .commits
            .iter()
            .rev()
            .find_map(|commit| commit.state().map(|(state, _)| state))
    }

    fn push(&self, spans: &mut Vec<Span>) {
        let mut run_span = self.run_span();
        let mut children = Vec::new();
        let mut usage = (0u64, 0u64, false);
        let mut step = 0u32;
        // call id → (step, arguments), for the tool spans.
        let mut calls: BTreeMap<String, (u32, Arc<Value>)> = BTreeMap::new();
        for index in self.range.clone() {
            let Some(message) = self.messages.get(index) else {
                break;
            };
            match message {
                Message::Assistant(answer) => {
                    step = step.saturating_add(1);
                    for block in &answer.content {
                        if let AssistantBlock::ToolCall { id, arguments, .. } = block {
                            calls.insert(id.as_str().to_owned(), (step, Arc::clone(arguments)));
                        }
                    }
                    if let Some(used) = &answer.usage {
                        usage.0 = usage.0.saturating_add(used.input_tokens);
                        usage.1 = usage.1.saturating_add(used.output_tokens);
                        usage.2 = true;
                    }
                    children.push(self.chat_span(index, step, answer));
                }
                Message::ToolResult(result) => {
                    let (call_step, arguments) = calls
                        .get(result.call_id.as_str())
                        .cloned()
                        .unwrap_or((step, Arc::new(Value::Null)));
                    if executed(result, &arguments) {
                        children.push(self.tool_span(index, call_step, result, &arguments));
                    } else {
                        let (_, at) = self.span_of_message(index);
                        let mut attributes = Attributes::new();
                        attributes
                            .insert("gen_ai.tool.name".into(), result.tool_name.as_str().into());
                        attributes
                            .insert("gen_ai.tool.call.id".into(), result.call_id.as_str().into());
                        attributes.insert(
                            "runcore.tool.outcome".into(),
                            result.outcome.as_str().into(),
                        );
                        run_span.events.push(SpanEvent {
                            name: "runcore.tool.not_executed".into(),
                            time_ms: at.ms,
                            attributes,
                        });
                    }
                }
                Message::System(_) | Message::User(_) => {}
            }
        }
        children.extend(self.await_spans());
        if usage.2 {
            run_span
                .attributes
                .insert("gen_ai.usage.input_tokens".into(), usage.0.into());
            run_span
                .attributes
                .insert("gen_ai.usage.output_tokens".into(), usage.1.into());
        }
        // Children in time order; ties keep commit order (a stable sort).
        children.sort_by_key(|span| span.start_ms);
        spans.push(run_span);
        spans.extend(children);
    }

    fn run_span(&self) -> Span {
        let start = self.run_start();
        let end = self.run_end();
        let name = match &self.options.agent_name {
            Some(agent) => format!("invoke_agent {agent}"),
            None => "invoke_agent".to_owned(),
        };
        let mut span = self.span(&[], name, SpanKind::Internal, start, end);
        span.span_id = self.run_span_id.clone();
        span.parent_span_id = None;
        let attributes = &mut span.attributes;
        attributes.insert("gen_ai.operation.name".into(), "invoke_agent".into());
        if let Some(agent) = &self.options.agent_name {
            attributes.insert("gen_ai.agent.name".into(), agent.as_str().into());
        }
        attributes.insert("runcore.run.id".into(), self.run.run_id.as_str().into());
        if let Some(count) = self.imported {
            attributes.insert("runcore.run.imported".into(), count.into());
        }
        if let Some((parent, version)) = self.run.commits.iter().find_map(CommitFacts::forked_from)
        {
            attributes.insert("runcore.forked_from.thread_id".into(), parent.into());
            if let Some(version) = version {
                attributes.insert("runcore.forked_from.version".into(), version.into());
            }
        }
        match self.final_state() {
            Some(RunState::Running) => {
                attributes.insert("runcore.run.state".into(), "running".into());
            }
            Some(RunState::Awaiting) => {
                attributes.insert("runcore.run.state".into(), "awaiting".into());
            }
            Some(RunState::Ended(cause)) => {
                attributes.insert("runcore.run.state".into(), "ended".into());
                attributes.insert("runcore.run.end_cause".into(), cause.kind().into());
                let failed = match cause {
                    EndCause::Error(failure) => Some(failure.code().to_owned()),
                    EndCause::Indeterminate => Some("indeterminate".to_owned()),
                    _ => None,
                };
                if let Some(code) = failed {
                    attributes.insert("error.type".into(), code.into());
                    span.status = SpanStatus::Error {
                        message: cause.to_string(),
                    };
                }
            }
            None => {}
        }
        span
    }

    fn chat_span(&self, index: usize, step: u32, answer: &AssistantMessage) -> Span {
        let (start, end) = self.span_of_message(index);
        let name = match &answer.model {
            Some(model) => format!("chat {model}"),
            None => "chat".to_owned(),
        };
        let step_text = step.to_string();
        let mut span = self.span(&["chat", &step_text], name, SpanKind::Client, start, end);
        let attributes = &mut span.attributes;
        attributes.insert("gen_ai.operation.name".into(), "chat".into());
        attributes.insert("runcore.step".into(), u64::from(step).into());
        // The step's own answer names its API; a run may change provider between steps.
        if self.options.provider.is_none()
            && let Some(provider) = provider_of(answer)
        {
            attributes.insert("gen_ai.provider.name".into(), provider.into());
        }
        if let Some(model) = &answer.model {
            // The request's model is not committed; the answer names the model that answered,
            // which is what the host asked for unless the provider aliases it.
            attributes.insert("gen_ai.request.model".into(), model.as_str().into());
            attributes.insert("gen_ai.response.model".into(), model.as_str().into());
        }
        if let Some(id) = &answer.response_id {
            attributes.insert("gen_ai.response.id".into(), id.as_str().into());
        }
        let finish = answer
            .provider_stop_reason
            .clone()
            .unwrap_or_else(|| stop_reason_name(answer));
        attributes.insert(
            "gen_ai.response.finish_reasons".into(),
            AttributeValue::Strings(vec![finish]),
        );
        if let Some(usage) = &answer.usage {
            attributes.insert(
                "gen_ai.usage.input_tokens".into(),
                usage.input_tokens.into(),
            );
            attributes.insert(
                "gen_ai.usage.output_tokens".into(),
                usage.output_tokens.into(),
            );
            if let Some(read) = usage.cache_read_tokens {
                attributes.insert("gen_ai.usage.cache_read.input_tokens".into(), read.into());
            }
            if let Some(write) = usage.cache_write_tokens {
                attributes.insert(
                    "gen_ai.usage.cache_creation.input_tokens".into(),
                    write.into(),
                );
            }
            if let Some(reasoning) = usage.reasoning_tokens {
                attributes.insert(
                    "gen_ai.usage.reasoning.output_tokens".into(),
                    reasoning.into(),
                );
            }
        }
        if matches!(answer.stop_reason, runcore::StopReason::Error) {
            let code = self.failure_code_of_last(index).unwrap_or("model_error");
            attributes.insert("error.type".into(), code.into());
            span.status = SpanStatus::Error {
                message: answer
                    .error_message
                    .clone()
                    .unwrap_or_else(|| "the model call failed".to_owned()),
            };
        }
        if self.options.content {
            let input = self.context_before(index);
            span.attributes.insert(
                "gen_ai.input.messages".into(),
                Value::Array(input).to_string().into(),
            );
            let mut output = message_parts(&Message::Assistant(Arc::new(answer.clone())));
            if let Value::Object(map) = &mut output {
                map.insert("finish_reason".into(), stop_reason_name(answer).into());
            }
            span.attributes.insert(
                "gen_ai.output.messages".into(),
                Value::Array(vec![output]).to_string().into(),
            );
        }
        span
    }

    /// The run's failure code, when `index` is the run's last assistant message and the run
    /// ended in an inference error (the code the model step failed with).
    fn failure_code_of_last(&self, index: usize) -> Option<&str> {
        if self.last_answer? != index {
            return None;
        }
        match self.final_state()? {
            RunState::Ended(EndCause::Error(failure)) => Some(failure.code()),
            _ => None,
        }
    }

    /// The model context the step at `index` was sent: the latest compaction committed
    /// before the step's answer (its summary, then the kept transcript), else the whole
    /// transcript before it. The system prompt is configuration, not a committed fact.
    fn context_before(&self, index: usize) -> Vec<Value> {
        let sequence = self
            .commit_of(index)
            .and_then(|commit| self.run.commits.get(commit))
            .map_or(u64::MAX, |commit| commit.sequence);
        let compaction = self
            .compactions
            .iter()
            .rev()
            .find(|(at, keep_from, _)| *at < sequence && *keep_from <= index);
        let mut parts = Vec::new();
        let from = match compaction {
            Some((_, keep_from, summary)) => {
                parts.push(message_parts(&Message::User(Arc::clone(summary))));
                *keep_from
            }
            None => 0,
        };
        for message in self.messages.get(from..index).unwrap_or_default() {
            parts.push(message_parts(message));
        }
        parts
    }

    fn tool_span(
        &self,
        index: usize,
        step: u32,
        result: &ToolResultMessage,
        arguments: &Value,
    ) -> Span {
        let (start, mut end) = self.span_of_message(index);
        // Results are committed together after the batch's last one: the commit's time is
        // exact for the call that finished last and an upper bound for the others.
        let batch_size = self
            .commit_of(index)
            .and_then(|commit| self.batch_sizes.get(commit).copied())
            .unwrap_or(0);
        if batch_size > 1 {
            end.exact = false;
        }
        let step_text = step.to_string();
        let name = format!("execute_tool {}", result.tool_name.as_str());
        let mut span = self.span(
            &["execute_tool", &step_text, result.call_id.as_str()],
            name,
            SpanKind::Internal,
            start,
            end,
        );
        let attributes = &mut span.attributes;
        attributes.insert("gen_ai.operation.name".into(), "execute_tool".into());
        attributes.insert("gen_ai.tool.name".into(), result.tool_name.as_str().into());
        attributes.insert("gen_ai.tool.call.id".into(), result.call_id.as_str().into());
        attributes.insert("gen_ai.tool.type".into(), "function".into());
        attributes.insert("runcore.step".into(), u64::from(step).into());
        attributes.insert(
            "runcore.tool.outcome".into(),
            result.outcome.as_str().into(),
        );
        if result.is_error {
            let kind = match result.outcome {
                ResultOutcome::Executed => "tool_error",
                other => other.as_str(),
            };
            attributes.insert("error.type".into(), kind.into());
            // The result's text is the tool's output, which may be private and is of any
            // size: it is content, so it goes out only when content is asked for (capped; the
            // whole text is `gen_ai.tool.call.result`). Otherwise the status says the type.
            let message = if self.options.content {
                capped(text_of(&result.content), STATUS_MESSAGE_MAX)
            } else {
                kind.to_owned()
            };
            span.status = SpanStatus::Error { message };
        }
        if self.options.content {
            span.attributes.insert(
                "gen_ai.tool.call.arguments".into(),
                arguments.to_string().into(),
            );
            span.attributes.insert(
                "gen_ai.tool.call.result".into(),
                text_of(&result.content).into(),
            );
        }
        span
    }

    fn await_spans(&self) -> Vec<Span> {
        let mut spans = Vec::new();
        let mut waits = 0u32;
        for (index, commit) in self.run.commits.iter().enumerate() {
            let Some((RunState::Awaiting, Some(target))) = commit.state() else {
                continue;
            };
            waits = waits.saturating_add(1);
            let start = self.times.get(index).copied().unwrap_or(self.run_end());
            let next = self.run.commits.get(index + 1);
            let end = match next {
                Some(_) => self.times.get(index + 1).copied().unwrap_or(start),
                None => start,
            };
            let (what, tool, call_id) = match target {
                AwaitTarget::ToolCall { call_id, tool, .. } => (
                    tool.name.as_str().to_owned(),
                    Some(tool.name.as_str()),
                    Some(call_id.as_str()),
                ),
                AwaitTarget::RemoteInput { call_id, .. } => (
                    target.reason_name().to_owned(),
                    None,
                    Some(call_id.as_str()),
                ),
                AwaitTarget::Pause(_) => (target.reason_name().to_owned(), None, None),
            };
            let wait_text = waits.to_string();
            let mut span = self.span(
                &["await", &wait_text],
                format!("await {what}"),
                SpanKind::Internal,
                start,
                end,
            );
            span.attributes
                .insert("gen_ai.operation.name".into(), "await".into());
            span.attributes
                .insert("runcore.await.reason".into(), target.reason_name().into());
            if let Some(tool) = tool {
                span.attributes
                    .insert("gen_ai.tool.name".into(), tool.into());
            }
            if let Some(call_id) = call_id {
                span.attributes
                    .insert("gen_ai.tool.call.id".into(), call_id.into());
            }
            match next.map(|commit| decision_of(commit, end.ms)) {
                Some((decision, at, details)) => {
                    span.attributes
                        .insert("runcore.decision".into(), decision.as_str().into());
                    let mut attributes = Attributes::new();
                    attributes.insert("runcore.decision".into(), decision.into());
                    for (key, value) in details {
                        span.attributes.insert(key.clone(), value.clone().into());
                        attributes.insert(key, value.into());
                    }
                    span.events.push(SpanEvent {
                        name: "runcore.decision".into(),
                        time_ms: at.max(span.start_ms),
                        attributes,
                    });
                }
                None => {
                    span.attributes
                        .insert("runcore.await.open".into(), true.into());
                }
            }
            spans.push(span);
        }
        spans
    }
}
