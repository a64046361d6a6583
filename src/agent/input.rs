//! Every input as data, and the one door through which each of them — and time — enters the
//! agent: [`Agent::handle`].
//!
//! The input methods ([`Agent::prompt`], [`Agent::steer`], …) are thin sugar over
//! [`Agent::handle`] (the three that start a run take its clock rule straight to the handler
//! it dispatches to, which returns the new run's id); the JSON-lines driver deserializes its input lines straight into
//! [`Input`] (the serde shape of `Input` *is* the line shape of SPEC §12, minus the line-level
//! `now_ms`), so a new input is added once, here.
//!
//! Time enters the same way for every input: `handle(input, now_ms)`. The agent's clock moves
//! to `max(clock, now_ms)` (it never runs backwards) before the input is handled, so a ticket
//! minted by this input gets its deadline from it; when the input is rejected the clock is
//! put back with everything else.

use serde::{Deserialize, Serialize};

use crate::error::AgentError;
use crate::ids::{CallId, RunId, Step};
use crate::message::{
    AssistantMessage, ContentBlock, DeltaKind, Message, Meta, ToolOutput, UserMessage,
};
use crate::resume::{ResumeCommand, ResumeResult};

use super::Agent;
use super::config::AgentConfig;
use super::queues::QueueMode;

mod blocks_or_text;
mod summary_content;
mod user_text;

/// One input. Exhaustive on purpose: a new kind must break an embedder's `match` loudly.
///
/// JSON: tagged by `"type"`, snake_case, unknown fields rejected — the driver's input lines
/// (SPEC §12) without their `now_ms`, which travels beside the input
/// ([`Agent::handle`]'s second argument).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Input {
    /// [`Agent::set_config`]: the configuration's fields sit beside `"type"` (every field has
    /// a default); only before the first run.
    Config(AgentConfig),
    /// [`Agent::prompt`] (or [`Agent::prompt_with_run_id`] when `run_id` is given).
    ///
    /// Exactly one of `text` and `messages` is given: one user message, or several (§8.10),
    /// all committed in the run's first commit in order. Neither or both → `InvalidInput`.
    Prompt {
        /// The user message: a string (one text block) or a user message object.
        #[serde(
            rename = "text",
            default,
            skip_serializing_if = "Option::is_none",
            with = "user_text::option"
        )]
        #[cfg_attr(feature = "schema", schemars(schema_with = "user_text::schema"))]
        message: Option<UserMessage>,
        /// Several user messages (SPEC §8.10), in order; instead of `text`. Each may carry
        /// `"role":"user"`, as every user message the driver writes does.
        #[serde(
            default,
            skip_serializing_if = "Vec::is_empty",
            deserialize_with = "user_text::messages"
        )]
        #[cfg_attr(
            feature = "schema",
            schemars(schema_with = "user_text::messages_schema")
        )]
        messages: Vec<UserMessage>,
        /// A host-supplied run id (unique across all threads).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<RunId>,
    },
    /// [`Agent::import`] (SPEC §8.10): existing messages appended as one committed, ended
    /// run, without a model call.
    Import {
        /// The messages, any roles, in order; they must form a complete transcript.
        messages: Vec<Message>,
    },
    /// [`Agent::steer`].
    Steer {
        /// The message: a string (one text block) or a user message object.
        #[serde(rename = "text", with = "user_text")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "user_text::schema"))]
        message: UserMessage,
    },
    /// [`Agent::follow_up`].
    FollowUp {
        /// The message: a string (one text block) or a user message object.
        #[serde(rename = "text", with = "user_text")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "user_text::schema"))]
        message: UserMessage,
    },
    /// [`Agent::abort`].
    #[serde(deserialize_with = "no_fields")]
    Abort,
    /// [`Agent::pause`].
    #[serde(deserialize_with = "no_fields")]
    Pause,
    /// [`Agent::clear_queues`]: withdraws what the active run has not taken yet.
    #[serde(deserialize_with = "no_fields")]
    ClearQueues,
    /// [`Agent::set_queue_modes`]: at any time, from the next boundary; at least one given.
    SetQueueModes {
        /// The new steering mode; unchanged when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        steering_mode: Option<QueueMode>,
        /// The new follow-up mode; unchanged when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        follow_up_mode: Option<QueueMode>,
    },
    /// [`Agent::model_delta`].
    ModelDelta {
        /// The run.
        run_id: RunId,
        /// The step.
        step: Step,
        /// The text piece.
        text: String,
        /// Answer text (the default) or reasoning (§2.1).
        #[serde(default, skip_serializing_if = "DeltaKind::is_text")]
        kind: DeltaKind,
    },
    /// [`Agent::model_done`].
    ModelDone {
        /// The run.
        run_id: RunId,
        /// The step.
        step: Step,
        /// The answer (an assistant message; `"role":"assistant"` may be given).
        #[serde(with = "crate::message::assistant_with_role")]
        #[cfg_attr(
            feature = "schema",
            schemars(schema_with = "crate::message::assistant_with_role::schema")
        )]
        message: AssistantMessage,
    },
    /// [`Agent::model_failed`].
    ModelFailed {
        /// The run.
        run_id: RunId,
        /// The step.
        step: Step,
        /// The provider's stable code.
        code: String,
        /// Its text.
        message: String,
        /// How long the provider asked to wait before a retry, in milliseconds (its
        /// `retry-after` / `retry-after-ms` / rate-limit reset headers, read by the codecs:
        /// SPEC §8.11, §13). Absent when not given (and then left out of the line). For now
        /// it is carried only: the run ends as it does without it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
    /// [`Agent::tool_progress`].
    ToolProgress {
        /// The run.
        run_id: RunId,
        /// The call.
        call_id: CallId,
        /// Progress content: content blocks, or a string (one text block).
        #[serde(with = "blocks_or_text")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "blocks_or_text::schema"))]
        content: Vec<ContentBlock>,
    },
    /// [`Agent::tool_done`]: the fields of a [`ToolOutput`] beside the run.
    ToolDone {
        /// The run.
        run_id: RunId,
        /// The call.
        call_id: CallId,
        /// The output: content blocks, or a string (one text block).
        #[serde(with = "blocks_or_text")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "blocks_or_text::schema"))]
        content: Vec<ContentBlock>,
        /// Whether the tool failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        /// Structured details for the host.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<serde_json::Value>,
        /// Host data (§2.1) for the result message, kept exactly; absent when empty.
        #[serde(
            default,
            skip_serializing_if = "crate::message::meta_is_empty",
            deserialize_with = "meta_object"
        )]
        meta: Meta,
    },
    /// [`Agent::resume`].
    Resume {
        /// The command.
        command: ResumeCommand,
    },
    /// [`Agent::resume_ticket`]: a command built from the current ticket at the input's time.
    ResumeTicket {
        /// The answer.
        result: ResumeResult,
    },
    /// [`Agent::cancel_wait`].
    #[serde(deserialize_with = "no_fields")]
    CancelWait,
    /// [`Agent::stop`].
    Stop {
        /// Why.
        reason: String,
    },
    /// [`Agent::expire_wait`]: strict, `NotExpired` when the wait is not past its deadline at
    /// the input's time.
    #[serde(deserialize_with = "no_fields")]
    ExpireWait,
    /// [`Agent::abandon_tools`].
    #[serde(deserialize_with = "no_fields")]
    AbandonTools,
    /// [`Agent::continue_run`] (SPEC §8.8).
    #[serde(deserialize_with = "no_fields")]
    Continue,
    /// [`Agent::handle_timeout`] (SPEC §8.5): whatever is due at the input's time; a no-op
    /// when nothing is.
    #[serde(deserialize_with = "no_fields")]
    Timeout,
    /// [`Agent::compact`] (SPEC §8.9): instead of answering the outstanding model call, the
    /// host replaces `transcript[..keep_from]` in the model context by `summary`.
    Compact {
        /// The summary: a string (one text block), a list of content blocks, or a user message
        /// object (`{"content", "id"?}`).
        #[serde(with = "summary_content")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "summary_content::schema"))]
        summary: UserMessage,
        /// Where the kept transcript begins.
        keep_from: usize,
    },
}

impl Input {
    /// The snake_case tag of this input.
    pub fn kind(&self) -> &'static str {
        match self {
            Input::Config { .. } => "config",
            Input::Prompt { .. } => "prompt",
            Input::Import { .. } => "import",
            Input::Steer { .. } => "steer",
            Input::FollowUp { .. } => "follow_up",
            Input::Abort => "abort",
            Input::Pause => "pause",
            Input::ClearQueues => "clear_queues",
            Input::SetQueueModes { .. } => "set_queue_modes",
            Input::ModelDelta { .. } => "model_delta",
            Input::ModelDone { .. } => "model_done",
            Input::ModelFailed { .. } => "model_failed",
            Input::ToolProgress { .. } => "tool_progress",
            Input::ToolDone { .. } => "tool_done",
            Input::Resume { .. } => "resume",
            Input::ResumeTicket { .. } => "resume_ticket",
            Input::CancelWait => "cancel_wait",
            Input::Stop { .. } => "stop",
            Input::ExpireWait => "expire_wait",
            Input::AbandonTools => "abandon_tools",
            Input::Continue => "continue",
            Input::Timeout => "timeout",
            Input::Compact { .. } => "compact",
        }
    }

    /// The `tool_done` input for `output`.
    pub fn tool_done(run_id: RunId, output: ToolOutput) -> Input {
        Input::ToolDone {
            run_id,
            call_id: output.call_id,
            content: output.content,
            is_error: output.is_error,
            details: output.details,
            meta: output.meta,
        }
    }
}

impl Agent {
    /// Handles one input that arrived at `now_ms`: the single mutation entry (every input
    /// method is sugar over it). The clock advances to `now_ms` first (never backwards); a
    /// rejected input returns an [`AgentError`] and changes nothing, the clock included.
    /// Then drain [`poll`](Agent::poll).
    ///
    /// A host without a clock reading for this input passes [`clock_ms`](Agent::clock_ms).
    ///
    /// The input limits of [`crate::limits`] apply here: `now_ms` past
    /// [`MAX_NOW_MS`](crate::limits::MAX_NOW_MS) and inputs nesting deeper than
    /// [`MAX_DEPTH`](crate::limits::MAX_DEPTH) are `InvalidInput`.
    // Inlined with `dispatch`, so an input method (which names its variant) goes straight to
    // its handler instead of moving a whole `Input` through the full match.
    #[inline(always)]
    pub fn handle(&mut self, input: Input, now_ms: u64) -> Result<(), AgentError> {
        if now_ms > crate::limits::MAX_NOW_MS || may_nest(&input) {
            check_limits(&input, now_ms)?;
        }
        self.handle_within_limits(input, now_ms)
    }

    /// [`handle`](Agent::handle) for an input already held to the limits of [`crate::limits`]
    /// (a driver line read by `Driver::parse_line` or `InputLine::from_value`, whose text or
    /// value was measured): the clock rule and the input's handler, the limits not measured
    /// again.
    #[inline(always)]
    pub(crate) fn handle_within_limits(
        &mut self,
        input: Input,
        now_ms: u64,
    ) -> Result<(), AgentError> {
        let before = self.thread.clock_ms;
        self.thread.observe_clock(now_ms);
        let result = self.dispatch(input);
        if result.is_err() {
            self.thread.clock_ms = before;
        }
        result
    }

    /// Runs `handler` for an input that arrived at `now_ms` under `handle`'s clock rule (the
    /// clock advances first and is put back when the input is rejected), for the inputs that
    /// start a run, once [`check_member_limits`] held them to `handle`'s limits. (`handle`
    /// spells the rule out itself: taking the closure instead changes how every input method
    /// is inlined, at a cost the instruction counts show.)
    fn at<T>(
        &mut self,
        now_ms: u64,
        handler: impl FnOnce(&mut Agent) -> Result<T, AgentError>,
    ) -> Result<T, AgentError> {
        let before = self.thread.clock_ms;
        self.thread.observe_clock(now_ms);
        let result = handler(self);
        if result.is_err() {
            self.thread.clock_ms = before;
        }
        result
    }

    #[inline(always)]
    fn dispatch(&mut self, input: Input) -> Result<(), AgentError> {
        match input {
            Input::Config(config) => self.on_config(config),
            Input::Prompt {
                message,
                messages,
                run_id,
            } => self.on_prompt(run_id, message, messages).map(drop),
            Input::Import { messages } => self.on_import(messages).map(drop),
            Input::Steer { message } => self.on_queue_input(message, true),
            Input::FollowUp { message } => self.on_queue_input(message, false),
            Input::Abort => self.on_abort(),
            Input::Pause => self.on_pause(),
            Input::ClearQueues => {
                self.on_clear_queues();
                Ok(())
            }
            Input::SetQueueModes {
                steering_mode,
                follow_up_mode,
            } => self.on_set_queue_modes(steering_mode, follow_up_mode),
            Input::ModelDelta {
                run_id,
                step,
                text,
                kind,
            } => self.on_model_delta(&run_id, step, kind, text),
            Input::ModelDone {
                run_id,
                step,
                message,
            } => self.on_model_done(&run_id, step, std::sync::Arc::new(message)),
            Input::ModelFailed {
                run_id,
                step,
                code,
                message,
                retry_after_ms: _,
            } => self.on_model_failed(&run_id, step, &code, &message),
            Input::ToolProgress {
                run_id,
                call_id,
                content,
            } => self.on_tool_progress(&run_id, &call_id, content),
            Input::ToolDone {
                run_id,
                call_id,
                content,
                is_error,
                details,
                meta,
            } => {
                let output = ToolOutput {
                    call_id: call_id.clone(),
                    content,
                    is_error,
                    details,
                    meta,
                };
                self.on_tool_done(&run_id, &call_id, output)
            }
            Input::Resume { command } => self.on_resume(command),
            Input::ResumeTicket { result } => self.on_resume_ticket(result),
            Input::CancelWait => self.on_cancel_wait(),
            Input::Stop { reason } => self.on_stop(&reason),
            Input::ExpireWait => self.on_expire_wait(),
            Input::AbandonTools => self.on_abandon_tools(),
            Input::Continue => self.on_continue().map(drop),
            Input::Timeout => self.on_timeout(),
            Input::Compact { summary, keep_from } => self.on_compact(summary, keep_from),
        }
    }

    // ----- the input methods: sugar over `handle` ------------------------------------------

    /// Replaces the configuration; only before the first run.
    pub fn set_config(&mut self, config: AgentConfig) -> Result<(), AgentError> {
        self.handle(Input::Config(config), self.thread.clock_ms)
    }

    /// Starts a run with a minted id `"{thread_id}/run-{n}"`. `Busy` while a run is active.
    // The run-starting methods take `handle`'s path to the `prompt` / `continue` handler
    // (`at`, then the handler `dispatch` calls) so that the handler's run id comes back.
    pub fn prompt(&mut self, message: UserMessage, now_ms: u64) -> Result<RunId, AgentError> {
        check_user_limits(&message, now_ms)?;
        self.at(now_ms, |agent| {
            agent.on_prompt(None, Some(message), Vec::new())
        })
    }

    /// Appends existing messages (any roles, `meta` and signatures included) to this idle
    /// agent's transcript as one committed fact, without a model call (SPEC §8.10): a run of
    /// its own that starts and ends in one commit, `Ended(Stopped("imported"))`, with an
    /// `imported {count}` audit draft. The messages must form a complete transcript (every
    /// tool call answered once, after it and before the next assistant message, in call
    /// order; no result without its call; message ids unique in the thread), else
    /// `InvalidInput` naming the rule and the message index; `Busy` while a run is active.
    /// Returns the import's run id.
    pub fn import(&mut self, messages: Vec<Message>, now_ms: u64) -> Result<RunId, AgentError> {
        check_member_limits(("messages", &messages), now_ms)?;
        self.at(now_ms, |agent| agent.on_import(messages))
    }

    /// Starts a run with several user messages (SPEC §8.10), all committed in the run's first
    /// commit in order; `run_id` as [`prompt_with_run_id`](Agent::prompt_with_run_id), or
    /// `None` for a minted one. `InvalidInput` for an empty list or a message without content;
    /// `Busy` while a run is active.
    pub fn prompt_messages(
        &mut self,
        run_id: Option<RunId>,
        messages: Vec<UserMessage>,
        now_ms: u64,
    ) -> Result<RunId, AgentError> {
        check_member_limits(("messages", &messages), now_ms)?;
        self.at(now_ms, |agent| agent.on_prompt(run_id, None, messages))
    }

    /// Starts a run with a host-supplied run id (unique across all threads).
    pub fn prompt_with_run_id(
        &mut self,
        run_id: RunId,
        message: UserMessage,
        now_ms: u64,
    ) -> Result<RunId, AgentError> {
        check_user_limits(&message, now_ms)?;
        self.at(now_ms, |agent| {
            agent.on_prompt(Some(run_id), Some(message), Vec::new())
        })
    }

    /// Starts a new run from the current transcript without a new message (SPEC §8.8): only
    /// when no run is active (`Busy` otherwise) and the transcript ends in a `user` or
    /// `tool_result` message (`InvalidState` otherwise, saying why).
    pub fn continue_run(&mut self, now_ms: u64) -> Result<RunId, AgentError> {
        check_now(now_ms)?;
        self.at(now_ms, Agent::on_continue)
    }

    /// Queues a steering message: it enters at the next complete boundary (after the whole
    /// tool batch, or after a text stop). `NotAccepting` while idle or after input closed.
    pub fn steer(&mut self, message: UserMessage) -> Result<(), AgentError> {
        self.handle(Input::Steer { message }, self.thread.clock_ms)
    }

    /// Queues a follow-up: it enters only after a natural text stop with no steering.
    pub fn follow_up(&mut self, message: UserMessage) -> Result<(), AgentError> {
        self.handle(Input::FollowUp { message }, self.thread.clock_ms)
    }

    /// Cancels the active run (no-op when idle; repeated calls are harmless). Before the
    /// model call is handed out, or while Awaiting, the run ends `Cancelled` at once (open
    /// calls `skipped`); while the model or tools are out, the core waits for every outcome,
    /// pairs every call, then ends `Cancelled`.
    pub fn abort(&mut self) -> Result<(), AgentError> {
        self.handle(Input::Abort, self.thread.clock_ms)
    }

    /// Asks for a `Pause(Manual)` wait at the next boundary (only while Running).
    pub fn pause(&mut self) -> Result<(), AgentError> {
        self.handle(Input::Pause, self.thread.clock_ms)
    }

    /// Withdraws every message queued for the active run and not taken yet (SPEC §8.2) and
    /// announces them in a `queues_cleared` event (possibly empty; idle: both empty, no run).
    /// Nothing committed changes: a queued message is not a fact until it is taken.
    pub fn clear_queues(&mut self) -> Result<(), AgentError> {
        self.handle(Input::ClearQueues, self.thread.clock_ms)
    }

    /// Changes how many messages a boundary takes from each queue, at any time, from the
    /// next boundary on (SPEC §8.2); `None` keeps a mode. Both `None` → `InvalidInput`.
    /// The modes are configuration, not facts: a recovered agent has its recovery config's.
    pub fn set_queue_modes(
        &mut self,
        steering_mode: Option<QueueMode>,
        follow_up_mode: Option<QueueMode>,
    ) -> Result<(), AgentError> {
        self.handle(
            Input::SetQueueModes {
                steering_mode,
                follow_up_mode,
            },
            self.thread.clock_ms,
        )
    }

    /// Streamed text of the outstanding model call (live only).
    pub fn model_delta(
        &mut self,
        run_id: &RunId,
        step: Step,
        text: &str,
    ) -> Result<(), AgentError> {
        // Checked before the text is copied, so a rejected delta costs no allocation. At the
        // agent's own clock, so `handle`'s clock rule has nothing to do.
        self.expect_model_streamed(run_id, step)?;
        self.push_delta(run_id.clone(), step, DeltaKind::Text, text.to_owned());
        Ok(())
    }

    /// Streamed reasoning of the outstanding model call (live only, §2.1): a `model_delta` of
    /// kind `thinking`, announced as a `thinking_delta` event.
    pub fn model_thinking_delta(
        &mut self,
        run_id: &RunId,
        step: Step,
        text: &str,
    ) -> Result<(), AgentError> {
        self.expect_model_streamed(run_id, step)?;
        self.push_delta(run_id.clone(), step, DeltaKind::Thinking, text.to_owned());
        Ok(())
    }

    /// The model's answer to the outstanding call.
    pub fn model_done(
        &mut self,
        run_id: &RunId,
        step: Step,
        message: AssistantMessage,
    ) -> Result<(), AgentError> {
        if assistant_shallow(&message) {
            crate::limits::count_depth_check();
            // `handle`'s rules, met: within the nesting limit, at the agent's own clock (which
            // does not move). The answer goes straight into its `Arc`.
            self.on_model_done(run_id, step, std::sync::Arc::new(message))
        } else {
            self.handle(
                Input::ModelDone {
                    run_id: run_id.clone(),
                    step,
                    message,
                },
                self.thread.clock_ms,
            )
        }
    }

    /// The outstanding model call failed: an error assistant message is appended and the run
    /// ends `Error(Inference{code, message})` (`Cancelled` / `Stopped` if an abort or stop was
    /// requested). Tool facts of earlier steps stay in the transcript.
    pub fn model_failed(
        &mut self,
        run_id: &RunId,
        step: Step,
        code: &str,
        message: &str,
    ) -> Result<(), AgentError> {
        self.handle(
            Input::ModelFailed {
                run_id: run_id.clone(),
                step,
                code: code.to_owned(),
                message: message.to_owned(),
                retry_after_ms: None,
            },
            self.thread.clock_ms,
        )
    }

    /// Live progress of an executing call (never committed).
    pub fn tool_progress(
        &mut self,
        run_id: &RunId,
        call_id: &CallId,
        content: Vec<ContentBlock>,
    ) -> Result<(), AgentError> {
        self.handle(
            Input::ToolProgress {
                run_id: run_id.clone(),
                call_id: call_id.clone(),
                content,
            },
            self.thread.clock_ms,
        )
    }

    /// The outcome of one executing call. Results enter the transcript in call order once the
    /// whole batch is answered; `tool_end` events come in completion order. An output whose
    /// content cannot be represented (bad image, over `max_tool_output_bytes`) is replaced by
    /// a `malformed` error result and the run continues. `InvalidInput` when `output` names
    /// another call than `call_id`.
    pub fn tool_done(
        &mut self,
        run_id: &RunId,
        call_id: &CallId,
        output: ToolOutput,
    ) -> Result<(), AgentError> {
        if output.call_id != *call_id {
            return Err(AgentError::invalid(format!(
                "tool_done: the output names call {:?} but was delivered for call {:?}",
                output.call_id.as_str(),
                call_id.as_str()
            )));
        }
        if tool_output_shallow(&output) {
            crate::limits::count_depth_check();
            // `handle`'s rules, met (as in `model_done`), without taking the output apart.
            self.on_tool_done(run_id, call_id, output)
        } else {
            self.handle(
                Input::tool_done(run_id.clone(), output),
                self.thread.clock_ms,
            )
        }
    }

    /// Answers the current wait. The command is validated against the current ticket (SPEC
    /// §4; its `now_ms` counts as no earlier than the agent's clock); on failure nothing
    /// changes and the ticket stays. On success the same run continues: one Running commit
    /// deletes the ticket and carries the context messages (and the `permission_decided`
    /// draft for a permission answer), then the next ticket of the batch, the batch's
    /// execution, or the next model call follows.
    pub fn resume(&mut self, command: ResumeCommand) -> Result<(), AgentError> {
        let now_ms = command.now_ms;
        self.handle(Input::Resume { command }, now_ms)
    }

    /// Answers the current wait with a command built from the committed ticket
    /// ([`ResumeCommand::from_ticket`]) at `now_ms` (default: the agent's clock).
    pub fn resume_ticket(
        &mut self,
        result: ResumeResult,
        now_ms: Option<u64>,
    ) -> Result<(), AgentError> {
        let now_ms = now_ms.unwrap_or(self.thread.clock_ms);
        self.handle(Input::ResumeTicket { result }, now_ms)
    }

    /// Ends the waiting run `Cancelled` (only while Awaiting).
    pub fn cancel_wait(&mut self) -> Result<(), AgentError> {
        self.handle(Input::CancelWait, self.thread.clock_ms)
    }

    /// A host policy end: like [`abort`](Agent::abort) but the run ends `Stopped(reason)`.
    /// `InvalidState` when no run is active.
    pub fn stop(&mut self, reason: &str) -> Result<(), AgentError> {
        self.handle(
            Input::Stop {
                reason: reason.to_owned(),
            },
            self.thread.clock_ms,
        )
    }

    /// Ends the waiting run `Stopped("wait_expired")` once its deadline has passed at
    /// `now_ms`: the waiting call gets an `expired` result and every other call without one
    /// `skipped`. `NotExpired` before the deadline (equal is not past) or for a wait without
    /// one. The strict form of [`handle_timeout`](Agent::handle_timeout).
    pub fn expire_wait(&mut self, now_ms: u64) -> Result<(), AgentError> {
        self.handle(Input::ExpireWait, now_ms)
    }

    /// For a host that cannot wait for its tools: every executing call is paired
    /// `interrupted` (outcome unknown) and the run ends `Indeterminate`; a late `tool_done`
    /// is `UnexpectedOutcome`.
    pub fn abandon_tools(&mut self) -> Result<(), AgentError> {
        self.handle(Input::AbandonTools, self.thread.clock_ms)
    }

    /// Does whatever is due at `now_ms` (SPEC §8.5): today, a wait past its deadline ends as
    /// [`expire_wait`](Agent::expire_wait) says. A harmless no-op when nothing is due (the
    /// clock still advances). Call it when [`poll_timeout`](Agent::poll_timeout) says.
    pub fn handle_timeout(&mut self, now_ms: u64) -> Result<(), AgentError> {
        self.handle(Input::Timeout, now_ms)
    }

    /// Compacts the thread (SPEC §8.9) instead of answering the outstanding model call: from
    /// now on the model context is `[summary] ++ transcript[keep_from..]`; the transcript
    /// stays whole and committed. Accepted only while the active run's model call is out and
    /// nothing of it (no delta) has arrived; `InvalidState` otherwise. `keep_from` must be
    /// greater than the previous compaction's, at most the transcript's length, and at a
    /// complete boundary (`transcript[keep_from]` is not a tool result, and no tool call
    /// before it has its result at or after it); `InvalidInput` naming the rule otherwise.
    ///
    /// The agent commits the compaction (Running, no messages, a `compacted` audit draft),
    /// announces `compacted`, and hands out `CallModel` for the same step again.
    pub fn compact(
        &mut self,
        summary: UserMessage,
        keep_from: usize,
        now_ms: u64,
    ) -> Result<(), AgentError> {
        self.handle(Input::Compact { summary, keep_from }, now_ms)
    }
}

/// The role a user message read by an input may carry: `"user"` (or none), as every user
/// message the driver writes carries it (SPEC §2), so a message copied from a transcript reads.
pub(crate) const USER_ROLE: &str = "user";

/// Takes a user message object's `role` out: absent or `"user"` reads; any other is refused,
/// saying which roles are accepted.
pub(crate) fn take_user_role(
    object: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    match object.remove("role") {
        None => Ok(()),
        Some(serde_json::Value::String(role)) if role == USER_ROLE => Ok(()),
        Some(other) => Err(wrong_user_role(&other)),
    }
}

/// Why a user message with role `role` is refused.
fn wrong_user_role(role: &serde_json::Value) -> String {
    format!("role {role} is not accepted here: a user message has role \"user\" (or none)")
}

/// A user message object (`role` absent or `"user"`) as its type.
pub(crate) fn user_message_from_object(
    mut object: serde_json::Map<String, serde_json::Value>,
) -> Result<UserMessage, String> {
    take_user_role(&mut object)?;
    serde_json::from_value(serde_json::Value::Object(object)).map_err(|e| e.to_string())
}

/// The user messages of an input line (`prompt.text` / `prompt.messages`, `steer.text`,
/// `follow_up.text`, `compact.summary`) whose `role` is given and is not `"user"`, refused as
/// `InvalidInput` naming the field and the role (what a line reader checks before the line is
/// read into an [`Input`], whose own reading can only say `invalid_json`).
pub(crate) fn check_user_roles(
    kind: &str,
    line: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), AgentError> {
    use serde_json::Value;
    let role_of = |value: &Value| match value {
        Value::Object(object) => object
            .get("role")
            .filter(|role| role.as_str() != Some(USER_ROLE))
            .cloned(),
        _ => None,
    };
    let single = match kind {
        "prompt" | "steer" | "follow_up" => "text",
        "compact" => "summary",
        _ => return Ok(()),
    };
    if let Some(role) = line.get(single).and_then(role_of) {
        return Err(AgentError::invalid(format!(
            "{kind}: {single}: {}",
            wrong_user_role(&role)
        )));
    }
    if kind == "prompt"
        && let Some(Value::Array(messages)) = line.get("messages")
        && let Some((index, role)) = messages
            .iter()
            .enumerate()
            .find_map(|(index, message)| role_of(message).map(|role| (index, role)))
    {
        return Err(AgentError::invalid(format!(
            "prompt: messages[{index}]: {}",
            wrong_user_role(&role)
        )));
    }
    Ok(())
}

/// Reads the (absent) fields of a field-less input, rejecting any: serde's
/// `deny_unknown_fields` does not reach the unit variants of an internally tagged enum, so
/// without this `{"type":"abort","bogus":1}` would read as `Abort`.
fn no_fields<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<(), D::Error> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct NoFields {}

    NoFields::deserialize(deserializer).map(|NoFields {}| ())
}

/// Reads `tool_done.meta`: a JSON object (§2.1). Anything else is refused with an error that
/// names the field (serde's own says only "expected a map", and an internally tagged enum's
/// buffered fields lose the path).
fn meta_object<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Meta, D::Error> {
    // `Meta`'s own error names the field; reading it as `Meta` keeps its text exact.
    Meta::deserialize(deserializer)
}

/// Whether `input` may hold nested JSON (the inputs made only of ids, numbers and plain text
/// cannot nest past [`MAX_DEPTH`](crate::limits::MAX_DEPTH)).
#[inline(always)]
fn may_nest(input: &Input) -> bool {
    !matches!(
        input,
        Input::ModelDelta { .. }
            | Input::ModelFailed { .. }
            | Input::Stop { .. }
            | Input::Abort
            | Input::Pause
            | Input::ClearQueues
            | Input::SetQueueModes { .. }
            | Input::CancelWait
            | Input::ExpireWait
            | Input::AbandonTools
            | Input::Continue
            | Input::Timeout
    )
}

/// How many levels of an input's JSON, at most, sit above a JSON value it holds in the inputs
/// [`shallow`] measures (the input, `message`, `content`, a block: 4), with room to spare.
const VALUE_OFFSET: usize = 8;

/// Whether `input` certainly nests within [`MAX_DEPTH`](crate::limits::MAX_DEPTH),
/// told by walking only the JSON values it holds: `model_done` and `tool_done`, whose typed
/// parts nest a fixed few levels (under [`VALUE_OFFSET`]), with every value nesting at most
/// `MAX_DEPTH - VALUE_OFFSET` levels. `false` means "not known": the exact walk decides. (Each
/// struct is taken apart field by field, so a field added later fails to compile here instead
/// of going unmeasured.)
fn shallow(input: &Input) -> bool {
    match input {
        Input::ModelDone {
            run_id: _,
            step: _,
            message,
        } => assistant_shallow(message),
        Input::ToolDone {
            run_id: _,
            call_id: _,
            content: _,
            is_error: _,
            details,
            meta,
        } => tool_parts_shallow(details.as_ref(), meta),
        _ => false,
    }
}

/// [`shallow`] for the message of a `model_done`.
#[inline]
fn assistant_shallow(message: &AssistantMessage) -> bool {
    use crate::message::AssistantBlock;
    let AssistantMessage {
        content,
        stop_reason: _,
        error_message: _,
        usage: _,
        id: _,
        model: _,
        response_id: _,
        provider_stop_reason: _,
        meta,
    } = message;
    if !meta_shallow(meta) {
        return false;
    }
    for block in content {
        let (value, meta) = match block {
            AssistantBlock::Text { text: _, meta }
            | AssistantBlock::Thinking {
                thinking: _,
                signature: _,
                meta,
            }
            | AssistantBlock::RedactedThinking { data: _, meta } => (None, meta),
            AssistantBlock::ToolCall {
                id: _,
                name: _,
                arguments,
                meta,
            } => (Some(&**arguments), meta),
        };
        if !(value.is_none_or(value_shallow) && meta_shallow(meta)) {
            return false;
        }
    }
    true
}

/// [`shallow`] for the output of a `tool_done`.
#[inline]
fn tool_output_shallow(output: &ToolOutput) -> bool {
    let ToolOutput {
        call_id: _,
        content: _,
        is_error: _,
        details,
        meta,
    } = output;
    tool_parts_shallow(details.as_ref(), meta)
}

/// [`shallow`] for a tool output's JSON values, as `tool_done` and [`ToolOutput`] hold them.
#[inline(always)]
fn tool_parts_shallow(details: Option<&serde_json::Value>, meta: &crate::message::Meta) -> bool {
    details.is_none_or(value_shallow) && meta_shallow(meta)
}

/// Whether a JSON value held by an input [`shallow`] measures nests at most
/// `MAX_DEPTH - VALUE_OFFSET` levels (by the one walker, [`crate::limits::nests_within`]).
fn value_shallow(value: &serde_json::Value) -> bool {
    crate::limits::nests_within(value, crate::limits::MAX_DEPTH - VALUE_OFFSET)
}

/// [`value_shallow`] for a `meta` object.
#[inline(always)]
fn meta_shallow(meta: &crate::message::Meta) -> bool {
    // Measured on its JSON text (the object itself counting 1), nothing parsed.
    meta.as_json().is_none_or(|text| {
        crate::limits::json_nests_within(text.as_bytes(), crate::limits::MAX_DEPTH - VALUE_OFFSET)
    })
}

/// The core's input limits ([`crate::limits`]) on one input.
#[inline(never)]
fn check_limits(input: &Input, now_ms: u64) -> Result<(), AgentError> {
    // Nesting first, then time: the order the driver reads a line in. The hot inputs are
    // measured by their JSON values alone; anything else, or anything near the limit, by the
    // exact walk.
    if shallow(input) {
        crate::limits::count_depth_check();
    } else {
        crate::limits::check_depth(input).map_err(AgentError::InvalidInput)?;
    }
    check_now(now_ms)
}

/// [`crate::limits::check_now_ms`], as `Agent::handle` refuses a time: `InvalidInput`.
#[inline(always)]
fn check_now(now_ms: u64) -> Result<(), AgentError> {
    if now_ms > crate::limits::MAX_NOW_MS {
        return Err(AgentError::InvalidInput(crate::limits::now_ms_over(now_ms)));
    }
    Ok(())
}

/// [`check_member_limits`] for a prompt's one user message: its content blocks are flat (text,
/// image), so without `meta` it nests a fixed 4 levels (the input, the message, its content,
/// a block) and only the time is checked; with `meta`, the walk measures it.
#[inline(always)]
fn check_user_limits(message: &UserMessage, now_ms: u64) -> Result<(), AgentError> {
    if message.meta.is_empty() {
        crate::limits::count_depth_check();
        check_now(now_ms)
    } else {
        check_member_limits(("text", message), now_ms)
    }
}

/// The core's input limits on an input whose one nesting field `name` holds `value` (the run-
/// starting methods, which take their fields apart): measured as the input's JSON,
/// `{"type":…,name:value}`, would be.
#[inline(never)]
fn check_member_limits<V: Serialize + ?Sized>(
    (name, value): (&'static str, &V),
    now_ms: u64,
) -> Result<(), AgentError> {
    /// `{name: value}`: the input object around its field.
    struct Member<'a, V: ?Sized>(&'static str, &'a V);

    impl<V: Serialize + ?Sized> Serialize for Member<'_, V> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeStruct;
            let mut object = serializer.serialize_struct("Input", 1)?;
            object.serialize_field(self.0, self.1)?;
            object.end()
        }
    }

    crate::limits::check_depth(&Member(name, value)).map_err(AgentError::InvalidInput)?;
    check_now(now_ms)
}
