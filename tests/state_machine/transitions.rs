//! The inputs a host sends ([`Transition`]), and how each becomes a [`runcore::Input`].

use runcore::{
    AssistantBlock, AssistantMessage, CallId, ContentBlock, Input, QueueMode, ResumeResult, RunId,
    StopReason, ToolCall, ToolOutput, UserMessage,
};
use serde_json::json;

/// One host input.
#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    /// `prompt(text, now_ms)`: starts a run when idle; `busy` while one is active;
    /// `invalid_input` for blank text.
    Prompt { text: String, now_ms: u64 },
    /// `steer(text)`: queued in the active run; `not_accepting` when idle.
    Steer { text: String },
    /// `follow_up(text)`: queued in the active run; `not_accepting` when idle.
    FollowUp { text: String },
    /// `abort()`: ends a paused run at once, otherwise waits for the outstanding outcome; a
    /// no-op when idle or when an end was already requested.
    Abort,
    /// `stop(reason)`: like `abort()` but ends `Stopped(reason)`; `invalid_state` when idle,
    /// `invalid_input` for a blank reason.
    Stop { reason: String },
    /// `pause()`: a `Pause(Manual)` wait at the next boundary; `invalid_state` unless Running.
    Pause,
    /// `resume_ticket(answer)` against the current ticket (here only ever a pause).
    Resume { answer: Answer },
    /// `cancel_wait()`: ends a paused run `Cancelled`; `invalid_state` when not Awaiting.
    CancelWait,
    /// `expire_wait(now_ms)`: a pause has no deadline, so `not_expired` (or `invalid_state`).
    ExpireWait { now_ms: u64 },
    /// `model_delta(run, step, text)`: live text of the outstanding model call.
    ModelDelta {
        run: String,
        step: u32,
        text: String,
    },
    /// `model_done(run, step, reply)`: the model's answer.
    ModelDone {
        run: String,
        step: u32,
        reply: Reply,
    },
    /// `model_failed(run, step, code, message)`: the model call failed.
    ModelFailed {
        run: String,
        step: u32,
        code: String,
        message: String,
    },
    /// `tool_progress(run, call)`: live progress of an executing call.
    ToolProgress { run: String, call: String },
    /// `tool_done(run, call, answer)`: the outcome of one call.
    ToolDone {
        run: String,
        call: String,
        answer: ToolAnswer,
    },
    /// `abandon_tools()`: executing calls `interrupted`, the run ends `Indeterminate`.
    AbandonTools,
    /// `clear_queues()`: both queues of the active run withdrawn (announced, never entering);
    /// accepted while idle too.
    ClearQueues,
    /// `set_queue_modes(steering?, follow_ups?)`: the modes from the next boundary on;
    /// `invalid_input` when neither is given.
    SetQueueModes {
        steering: Option<QueueMode>,
        follow_ups: Option<QueueMode>,
    },
    /// `inner`, then — while draining it, after its commits and events, before its action is
    /// polled — `abort()` (or `stop(reason)`): the action that was not handed out never is
    /// (SPEC §8.3).
    Interject {
        inner: Box<Transition>,
        stop: Option<String>,
    },
}

/// Short constructors for generation.
impl Transition {
    pub fn prompt(text: impl Into<String>, now_ms: u64) -> Self {
        Transition::Prompt {
            text: text.into(),
            now_ms,
        }
    }

    pub fn steer(text: impl Into<String>) -> Self {
        Transition::Steer { text: text.into() }
    }

    pub fn follow_up(text: impl Into<String>) -> Self {
        Transition::FollowUp { text: text.into() }
    }

    pub fn stop(reason: impl Into<String>) -> Self {
        Transition::Stop {
            reason: reason.into(),
        }
    }

    pub fn resume(text: impl Into<String>) -> Self {
        Transition::Resume {
            answer: Answer::Input(text.into()),
        }
    }

    pub fn model_delta(run: &str, step: u32, text: impl Into<String>) -> Self {
        Transition::ModelDelta {
            run: run.to_owned(),
            step,
            text: text.into(),
        }
    }

    pub fn model_done(run: &str, step: u32, reply: Reply) -> Self {
        Transition::ModelDone {
            run: run.to_owned(),
            step,
            reply,
        }
    }

    pub fn model_failed(
        run: &str,
        step: u32,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Transition::ModelFailed {
            run: run.to_owned(),
            step,
            code: code.into(),
            message: message.into(),
        }
    }

    pub fn tool_progress(run: &str, call: impl Into<String>) -> Self {
        Transition::ToolProgress {
            run: run.to_owned(),
            call: call.into(),
        }
    }

    pub fn tool_done(run: &str, call: impl Into<String>, answer: ToolAnswer) -> Self {
        Transition::ToolDone {
            run: run.to_owned(),
            call: call.into(),
            answer,
        }
    }
}

/// The answer of a `resume_ticket`.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// `Input(text)`: the only kind a `Pause(Manual)` accepts.
    Input(String),
    /// `Continue`: the wrong kind for a manual pause.
    Continue,
}

/// What the scripted model answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Text with `stop`.
    Text(String),
    /// Tool calls `(id, tool)` with `tool_use` (or with `stop` when `stop` is set).
    Calls {
        stop: bool,
        calls: Vec<(String, String)>,
    },
    /// Text and maybe tool calls with `length` (no calls: a text stop).
    Length {
        text: String,
        calls: Vec<(String, String)>,
    },
    /// `error` with the provider's message, maybe with tool calls.
    Error {
        message: String,
        calls: Vec<(String, String)>,
    },
    /// `aborted`, maybe with tool calls.
    Aborted { calls: Vec<(String, String)> },
    /// Two calls with the same id: a bad shape (`invalid_input`).
    DuplicateIds { id: String },
}

/// How a host reports a tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolAnswer {
    /// A text output.
    Ok,
    /// A text output with `is_error`.
    Error,
    /// An image that is not an image: replaced by a `malformed` result.
    Malformed,
    /// An output naming another call than the one it is delivered for (`invalid_input`).
    NamesAnotherCall,
}

fn call_arguments(id: &str) -> serde_json::Value {
    json!({ "for": id })
}

fn tool_call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: CallId::new(id),
        name: name.to_owned().into(),
        arguments: call_arguments(id).into(),
    }
}

impl Reply {
    fn call_list(&self) -> &[(String, String)] {
        match self {
            Reply::Text(_) | Reply::DuplicateIds { .. } => &[],
            Reply::Calls { calls, .. }
            | Reply::Length { calls, .. }
            | Reply::Error { calls, .. }
            | Reply::Aborted { calls } => calls,
        }
    }

    /// The calls of the answer, in content order.
    pub fn tool_calls(&self) -> Vec<ToolCall> {
        self.call_list()
            .iter()
            .map(|(id, name)| tool_call(id, name))
            .collect()
    }

    /// The assistant message the host delivers.
    pub fn message(&self) -> AssistantMessage {
        let blocks = |calls: &[(String, String)]| -> Vec<AssistantBlock> {
            calls
                .iter()
                .map(|(id, name)| {
                    AssistantBlock::tool_call(id.as_str(), name.as_str(), call_arguments(id))
                })
                .collect()
        };
        match self {
            Reply::Text(text) => AssistantMessage::text(text.as_str()),
            Reply::Calls { stop, calls } => AssistantMessage::new(
                blocks(calls),
                if *stop {
                    StopReason::Stop
                } else {
                    StopReason::ToolUse
                },
            ),
            Reply::Length { text, calls } => {
                let mut content = vec![AssistantBlock::text(text.as_str())];
                content.extend(blocks(calls));
                AssistantMessage::new(content, StopReason::Length)
            }
            Reply::Error { message, calls } => AssistantMessage {
                error_message: Some(message.clone()),
                ..AssistantMessage::new(blocks(calls), StopReason::Error)
            },
            Reply::Aborted { calls } => AssistantMessage::new(blocks(calls), StopReason::Aborted),
            Reply::DuplicateIds { id } => AssistantMessage::new(
                blocks(&[(id.clone(), "alpha".into()), (id.clone(), "beta".into())]),
                StopReason::ToolUse,
            ),
        }
    }
}

/// The output a host reports for `call`.
pub fn tool_output(call: &str, answer: ToolAnswer) -> ToolOutput {
    match answer {
        ToolAnswer::Ok => ToolOutput::text(call, format!("{call} ok")),
        ToolAnswer::Error => ToolOutput::error(call, format!("{call} failed")),
        ToolAnswer::Malformed => ToolOutput {
            call_id: CallId::new(call),
            content: vec![ContentBlock::Image {
                data: "aGk=".into(),
                mime_type: "text/plain".into(),
            }],
            is_error: false,
            details: None,
            meta: Default::default(),
        },
        ToolAnswer::NamesAnotherCall => ToolOutput::text(format!("{call}-other"), "misdelivered"),
    }
}

/// The input the host applies for a transition.
/// The input interjected by [`Transition::Interject`].
pub fn interjection(stop: &Option<String>) -> Transition {
    match stop {
        None => Transition::Abort,
        Some(reason) => Transition::Stop {
            reason: reason.clone(),
        },
    }
}

/// The input the host applies for a transition, and the time it carries (none: the agent's
/// own clock).
pub fn input_for(t: &Transition) -> (Input, Option<u64>) {
    match t {
        Transition::Prompt { text, now_ms } => (
            Input::Prompt {
                message: Some(UserMessage::text(text.as_str())),
                run_id: None,
                messages: Vec::new(),
            },
            Some(*now_ms),
        ),
        Transition::ExpireWait { now_ms } => (Input::ExpireWait, Some(*now_ms)),
        other => (untimed_input(other), None),
    }
}

fn untimed_input(t: &Transition) -> Input {
    match t {
        Transition::Prompt { .. } | Transition::ExpireWait { .. } => {
            unreachable!("timed inputs are built by input_for")
        }
        Transition::Steer { text } => Input::Steer {
            message: UserMessage::text(text.as_str()),
        },
        Transition::FollowUp { text } => Input::FollowUp {
            message: UserMessage::text(text.as_str()),
        },
        Transition::Abort => Input::Abort,
        Transition::Stop { reason } => Input::Stop {
            reason: reason.clone(),
        },
        Transition::Pause => Input::Pause,
        Transition::Resume { answer } => Input::ResumeTicket {
            result: match answer {
                Answer::Input(text) => ResumeResult::Input(text.clone()),
                Answer::Continue => ResumeResult::Continue,
            },
        },
        Transition::CancelWait => Input::CancelWait,
        Transition::ModelDelta { run, step, text } => Input::ModelDelta {
            run_id: RunId::new(run.as_str()),
            step: *step,
            text: text.clone(),
            kind: runcore::DeltaKind::Text,
        },
        Transition::ModelDone { run, step, reply } => Input::ModelDone {
            run_id: RunId::new(run.as_str()),
            step: *step,
            message: reply.message(),
        },
        Transition::ModelFailed {
            run,
            step,
            code,
            message,
        } => Input::ModelFailed {
            run_id: RunId::new(run.as_str()),
            step: *step,
            code: code.clone(),
            message: message.clone(),
            retry_after_ms: None,
        },
        Transition::ToolProgress { run, call } => Input::ToolProgress {
            run_id: RunId::new(run.as_str()),
            call_id: CallId::new(call.as_str()),
            content: vec![ContentBlock::text("working")],
        },
        Transition::ToolDone { run, call, answer } => {
            Input::tool_done(RunId::new(run.as_str()), tool_output(call, *answer))
        }
        Transition::AbandonTools => Input::AbandonTools,
        Transition::ClearQueues => Input::ClearQueues,
        Transition::SetQueueModes {
            steering,
            follow_ups,
        } => Input::SetQueueModes {
            steering_mode: *steering,
            follow_up_mode: *follow_ups,
        },
        Transition::Interject { .. } => unreachable!("an interjection is two inputs"),
    }
}
