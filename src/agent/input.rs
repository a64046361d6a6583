//! Every input method as data, for hosts that drive the agent from messages (the JSON-lines
//! driver, a durable-workflow history, a test script).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::AgentError;
use crate::ids::{CallId, RunId, Step};
use crate::message::{AssistantMessage, ContentBlock, ToolOutput, UserMessage};
use crate::resume::{ResumeCommand, ResumeResult};

use super::Agent;
use super::config::AgentConfig;

/// One input. Exhaustive on purpose: a new kind must break an embedder's `match` loudly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Input {
    /// [`Agent::set_config`].
    Config {
        /// The configuration.
        config: AgentConfig,
    },
    /// [`Agent::prompt`] (or [`Agent::prompt_with_run_id`] when `run_id` is given).
    Prompt {
        /// The user message.
        message: UserMessage,
        /// The host's clock.
        #[serde(default)]
        now_ms: u64,
        /// A host-supplied run id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<RunId>,
    },
    /// [`Agent::steer`].
    Steer {
        /// The message.
        message: UserMessage,
    },
    /// [`Agent::follow_up`].
    FollowUp {
        /// The message.
        message: UserMessage,
    },
    /// [`Agent::abort`].
    Abort,
    /// [`Agent::pause`].
    Pause,
    /// [`Agent::model_delta`].
    ModelDelta {
        /// The run.
        run_id: RunId,
        /// The step.
        step: Step,
        /// The text piece.
        text: String,
    },
    /// [`Agent::model_done`].
    ModelDone {
        /// The run.
        run_id: RunId,
        /// The step.
        step: Step,
        /// The answer.
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
    },
    /// [`Agent::tool_progress`].
    ToolProgress {
        /// The run.
        run_id: RunId,
        /// The call.
        call_id: CallId,
        /// Progress content.
        content: Vec<ContentBlock>,
    },
    /// [`Agent::tool_done`].
    ToolDone {
        /// The run.
        run_id: RunId,
        /// The call.
        call_id: CallId,
        /// The output.
        output: ToolOutput,
    },
    /// [`Agent::resume`].
    Resume {
        /// The command.
        command: ResumeCommand,
    },
    /// [`Agent::resume_ticket`].
    ResumeTicket {
        /// The answer.
        result: ResumeResult,
        /// The host's clock (default: the agent's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        now_ms: Option<u64>,
    },
    /// [`Agent::cancel_wait`].
    CancelWait,
    /// [`Agent::stop`].
    Stop {
        /// Why.
        reason: String,
    },
    /// [`Agent::expire_wait`].
    ExpireWait {
        /// The host's clock.
        now_ms: u64,
    },
    /// [`Agent::abandon_tools`].
    AbandonTools,
}

impl Input {
    /// The snake_case tag of this input.
    pub fn kind(&self) -> &'static str {
        match self {
            Input::Config { .. } => "config",
            Input::Prompt { .. } => "prompt",
            Input::Steer { .. } => "steer",
            Input::FollowUp { .. } => "follow_up",
            Input::Abort => "abort",
            Input::Pause => "pause",
            Input::ModelDelta { .. } => "model_delta",
            Input::ModelDone { .. } => "model_done",
            Input::ModelFailed { .. } => "model_failed",
            Input::ToolProgress { .. } => "tool_progress",
            Input::ToolDone { .. } => "tool_done",
            Input::Resume { .. } => "resume",
            Input::ResumeTicket { .. } => "resume_ticket",
            Input::CancelWait => "cancel_wait",
            Input::Stop { .. } => "stop",
            Input::ExpireWait { .. } => "expire_wait",
            Input::AbandonTools => "abandon_tools",
        }
    }
}

impl Agent {
    /// Applies one input (the same as calling its method).
    pub fn apply(&mut self, input: Input) -> Result<(), AgentError> {
        match input {
            Input::Config { config } => self.set_config(config),
            Input::Prompt {
                message,
                now_ms,
                run_id: None,
            } => self.prompt(message, now_ms).map(drop),
            Input::Prompt {
                message,
                now_ms,
                run_id: Some(run_id),
            } => self.prompt_with_run_id(run_id, message, now_ms).map(drop),
            Input::Steer { message } => self.steer(message),
            Input::FollowUp { message } => self.follow_up(message),
            Input::Abort => self.abort(),
            Input::Pause => self.pause(),
            Input::ModelDelta { run_id, step, text } => self.model_delta(&run_id, step, &text),
            Input::ModelDone {
                run_id,
                step,
                message,
            } => self.model_done(&run_id, step, message),
            Input::ModelFailed {
                run_id,
                step,
                code,
                message,
            } => self.model_failed(&run_id, step, &code, &message),
            Input::ToolProgress {
                run_id,
                call_id,
                content,
            } => self.tool_progress(&run_id, &call_id, content),
            Input::ToolDone {
                run_id,
                call_id,
                output,
            } => self.tool_done(&run_id, &call_id, output),
            Input::Resume { command } => self.resume(command),
            Input::ResumeTicket { result, now_ms } => self.resume_ticket(result, now_ms),
            Input::CancelWait => self.cancel_wait(),
            Input::Stop { reason } => self.stop(&reason),
            Input::ExpireWait { now_ms } => self.expire_wait(now_ms),
            Input::AbandonTools => self.abandon_tools(),
        }
    }

    /// Applies one input that arrived at `now_ms` (a host clock reading that may come with
    /// any input). The agent's clock advances to it first (it never runs backwards), so a
    /// ticket created by this input gets its deadline from it; if the input is rejected the
    /// clock is put back, and nothing has changed.
    pub fn apply_at(&mut self, input: Input, now_ms: Option<u64>) -> Result<(), AgentError> {
        let before = self.clock_ms;
        if let Some(now) = now_ms {
            self.observe_clock(now);
        }
        let result = self.apply(input);
        if result.is_err() {
            self.clock_ms = before;
        }
        result
    }

    /// Advances the agent's clock (it never runs backwards).
    pub fn observe_time(&mut self, now_ms: u64) {
        self.observe_clock(now_ms);
    }
}
