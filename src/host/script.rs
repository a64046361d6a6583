//! A scripted host: the one host loop behind the tests, the demo, the benchmarks and the
//! comparison workloads.
//!
//! A real host calls a model, runs tools and asks people; a scripted one takes every answer
//! from a [`Script`], a plain value with no I/O, so the same script gives the same run in any
//! process. This module is the host side of the driving contract written once:
//!
//! - [`drain`] polls the agent until it is empty, hands every [`Output`] to a sink *in order*
//!   (so a sink that persists commits persists each one before anything after it is acted on)
//!   and returns the action handed out, if any;
//! - [`serve`] answers every action from the script (host inputs that arrive alongside first,
//!   then the model's deltas and its answer, or the tools' results in call order), draining
//!   after each input, answers tickets with [`Script::resume`], and returns when the agent is
//!   idle or waits on something the script does not answer.
//!
//! Starting runs stays with the caller (a prompt, a continue, a recovery): `serve` only answers
//! what the agent asks for. Every input is given at the agent's own clock
//! ([`Agent::clock_ms`]); a script that needs time to pass gives its inputs itself.
//!
//! ```
//! use std::convert::Infallible;
//! use runcore::host::script::{self, ModelTurn, Script, Stop};
//! use runcore::{
//!     Agent, AgentConfig, AssistantBlock, AssistantMessage, ModelRequest, Output, RunId,
//!     StopReason, ToolCall, ToolOutput, ToolSpec, UserMessage,
//! };
//! use serde_json::json;
//!
//! /// Calls `echo` once, then answers with the tool's text.
//! struct EchoOnce;
//!
//! impl Script for EchoOnce {
//!     fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn {
//!         match request.step {
//!             1 => ModelTurn::answer(AssistantMessage::new(
//!                 vec![AssistantBlock::tool_call("c1", "echo", json!({"text": "hi"}))],
//!                 StopReason::ToolUse,
//!             )),
//!             _ => ModelTurn::streamed(vec!["the tool said ".into(), "hi".into()],
//!                 AssistantMessage::text("the tool said hi")),
//!         }
//!     }
//!     fn tool(&mut self, _run: &RunId, call: &ToolCall) -> ToolOutput {
//!         ToolOutput::text(call.id.clone(), "hi")
//!     }
//! }
//!
//! let config = AgentConfig::default().with_tool("echo", ToolSpec::auto("echoes"));
//! let mut agent = Agent::new(config)?;
//! agent.prompt(UserMessage::text("say hi"), 0)?;
//! let mut commits = 0;
//! let stop = script::serve(&mut agent, &mut EchoOnce, &mut |_: &Agent, output: &Output| {
//!     if matches!(output, Output::Commit(_)) {
//!         commits += 1; // a real sink writes it to a store here
//!     }
//!     Ok::<(), Infallible>(())
//! })?;
//! assert_eq!(stop, Stop::Idle);
//! assert_eq!(agent.transcript().len(), 4); // prompt, call, result, answer
//! assert!(commits >= 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::agent::{Action, Agent, Input, ModelRequest, Output};
use crate::error::AgentError;
use crate::ids::{RunId, Step};
use crate::message::{AssistantMessage, DeltaKind, ToolCall, ToolOutput};
use crate::resume::{ResumeResult, ResumeTicket};

/// What a scripted model does for one call.
// An answer is moved once per model turn into the agent, which keeps it behind an `Arc`;
// boxing it here would cost an allocation per turn to save a few words in a short-lived value.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ModelTurn {
    /// Stream these deltas (`model_delta`, in order), then answer (`model_done`).
    Answer {
        /// The streamed pieces; live only, never committed.
        deltas: Vec<String>,
        /// The answer.
        message: AssistantMessage,
    },
    /// The call fails (`model_failed`) with the provider's code and text.
    Fail {
        /// The provider's code.
        code: String,
        /// Its text.
        message: String,
    },
}

impl ModelTurn {
    /// An answer with nothing streamed before it.
    pub fn answer(message: AssistantMessage) -> ModelTurn {
        ModelTurn::Answer {
            deltas: Vec::new(),
            message,
        }
    }

    /// An answer streamed as `deltas` first.
    pub fn streamed(deltas: Vec<String>, message: AssistantMessage) -> ModelTurn {
        ModelTurn::Answer { deltas, message }
    }

    /// A failed call.
    pub fn fail(code: impl Into<String>, message: impl Into<String>) -> ModelTurn {
        ModelTurn::Fail {
            code: code.into(),
            message: message.into(),
        }
    }

    /// Hands `f` the inputs that give this turn to the agent as the answer of `run_id`'s call
    /// `step`, in order: one `model_delta` per delta, then `model_done`; or one
    /// `model_failed`. The first error of `f` stops it and is returned.
    pub fn each_input<E>(
        self,
        run_id: &RunId,
        step: Step,
        mut f: impl FnMut(Input) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            ModelTurn::Answer { deltas, message } => {
                for text in deltas {
                    f(Input::ModelDelta {
                        run_id: run_id.clone(),
                        step,
                        text,
                        kind: DeltaKind::Text,
                    })?;
                }
                f(Input::ModelDone {
                    run_id: run_id.clone(),
                    step,
                    message,
                })
            }
            ModelTurn::Fail { code, message } => f(Input::ModelFailed {
                run_id: run_id.clone(),
                step,
                code,
                message,
                retry_after_ms: None,
            }),
        }
    }

    /// The inputs of [`each_input`](ModelTurn::each_input), collected.
    pub fn into_inputs(self, run_id: &RunId, step: Step) -> Vec<Input> {
        let mut inputs = Vec::new();
        let _ = self.each_input(run_id, step, |input| {
            inputs.push(input);
            Ok::<(), std::convert::Infallible>(())
        });
        inputs
    }
}

/// Where a scripted host's answers come from. Only [`model`](Script::model) and
/// [`tool`](Script::tool) must be written; the rest default to "nothing".
pub trait Script {
    /// What the model does for the call `request` describes (its run, step and context).
    fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn;

    /// What the tool returns for `call`, one of run `run_id`'s batch. The output must name
    /// `call`'s id.
    fn tool(&mut self, run_id: &RunId, call: &ToolCall) -> ToolOutput;

    /// The answer to the ticket the active run waits on, or `None` to leave it waiting
    /// ([`serve`] then returns [`Stop::Waiting`]). The default answers nothing.
    fn resume(&mut self, ticket: &ResumeTicket) -> Option<ResumeResult> {
        let _ = ticket;
        None
    }

    /// Host inputs that arrive while `action` is out, given before its answer: a steer during
    /// a tool batch, a follow-up during a model call, an abort. The default adds none.
    fn alongside(&mut self, action: &Action, inputs: &mut Vec<Input>) {
        let _ = (action, inputs);
    }
}

/// A script with a model and no tools: `F` makes every model turn. It suits a thread whose
/// config declares no tools (benchmarks, long threads); should the model call a tool anyway,
/// the call gets an error result saying so, and the run goes on.
///
/// ```
/// use std::convert::Infallible;
/// use runcore::host::script::{self, ModelOnly, ModelTurn, Stop};
/// use runcore::{Agent, AgentConfig, AssistantMessage, ModelRequest, Output, UserMessage};
///
/// let mut agent = Agent::new(AgentConfig::default())?;
/// agent.prompt(UserMessage::text("hello"), 0)?;
/// let mut replies =
///     ModelOnly(|_: &ModelRequest<'_>| ModelTurn::answer(AssistantMessage::text("hi")));
/// let stop = script::serve(&mut agent, &mut replies, &mut |_: &Agent, _: &Output| {
///     Ok::<(), Infallible>(())
/// })?;
/// assert_eq!(stop, Stop::Idle);
/// assert_eq!(agent.transcript().len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ModelOnly<F>(pub F);

impl<F: FnMut(&ModelRequest<'_>) -> ModelTurn> Script for ModelOnly<F> {
    fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn {
        (self.0)(request)
    }

    fn tool(&mut self, _run_id: &RunId, call: &ToolCall) -> ToolOutput {
        ToolOutput::error(
            call.id.clone(),
            format!(
                "this script runs no tools (the model called `{}`)",
                call.name
            ),
        )
    }
}

/// Polls `agent` until it is empty, handing every output to `sink` in order, and returns the
/// action handed out, if any (a host acts on it only after every output before it was
/// handled). An action is always the last output before the agent is empty, so the drain ends
/// with it.
/// The sink also sees the agent as it is once that output was polled, so it can render a line
/// that needs the agent (a model call's context, for one). The first error of `sink` stops the
/// drain and is returned; outputs after it stay queued.
pub fn drain<E>(
    agent: &mut Agent,
    sink: &mut impl FnMut(&Agent, &Output) -> Result<(), E>,
) -> Result<Option<Action>, E> {
    while let Some(output) = agent.poll() {
        sink(agent, &output)?;
        if let Output::Action(action) = output {
            // It is handed out only once every other output was polled, and the phase it
            // leaves (the call or the batch out) hands out nothing more: the agent is empty.
            return Ok(Some(action));
        }
    }
    Ok(None)
}

/// Why [`serve`] returned normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// No run is active.
    Idle,
    /// A run is active and nothing the script answers is asked for: a ticket the script left
    /// waiting, a remote wait, a timer, or a run whose action was handed out before `serve`
    /// was called.
    Waiting,
}

/// Why [`serve`] stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ServeError<E> {
    /// The sink failed on an output; nothing after that output was acted on.
    #[error("the host's sink failed: {0}")]
    Sink(#[source] E),
    /// The agent rejected an input the script gave.
    #[error("the agent rejected the scripted {kind} input: {error}")]
    Rejected {
        /// The input's kind (`model_done`, `tool_done`, …).
        kind: &'static str,
        /// What the agent said.
        #[source]
        error: AgentError,
    },
}

/// Drives `agent` from `script` until it is idle or waits on something the script does not
/// answer. It drains first (every output to `sink`, in order), then answers each action handed
/// out, in the order a host gives the inputs:
///
/// 1. what arrives [`alongside`](Script::alongside) the action;
/// 2. for a model call, the [`ModelTurn`] the script makes of the agent's
///    [`model_request`](Agent::model_request); for a tool batch, every tool's result in call
///    order;
///
/// and it answers a ticket with [`Script::resume`]. Every input is given at the agent's clock
/// and followed by a drain, except a `model_delta`: a delta never commits or hands out an
/// action, so the deltas of one turn are given back to back and their events come out with
/// the drain after the turn's answer. A run started before the call, or an action already
/// handed out but not polled, is picked up by the first drain.
///
/// Termination follows from the agent's own budget: every answered action moves a run on,
/// and a run ends within its `max_steps`.
pub fn serve<S: Script + ?Sized, E>(
    agent: &mut Agent,
    script: &mut S,
    sink: &mut impl FnMut(&Agent, &Output) -> Result<(), E>,
) -> Result<Stop, ServeError<E>> {
    let mut action = drain(agent, sink).map_err(ServeError::Sink)?;
    loop {
        let mut next = None;
        if let Some(action) = action.take() {
            let mut alongside = Vec::new();
            script.alongside(&action, &mut alongside);
            for input in alongside {
                give(agent, input, sink, &mut next)?;
            }
            match action {
                Action::CallModel { run_id, step, .. } => {
                    // No request (or another one) only when something given alongside ended
                    // or moved the call; what the agent asks for now is checked below.
                    let turn = agent
                        .model_request()
                        .filter(|request| *request.run_id == run_id && request.step == step)
                        .map(|request| script.model(&request));
                    match turn {
                        Some(ModelTurn::Answer { deltas, message }) => {
                            for text in deltas {
                                agent
                                    .on_model_delta(&run_id, step, DeltaKind::Text, text)
                                    .map_err(|error| ServeError::Rejected {
                                        kind: "model_delta",
                                        error,
                                    })?;
                            }
                            agent.model_done(&run_id, step, message).map_err(|error| {
                                ServeError::Rejected {
                                    kind: "model_done",
                                    error,
                                }
                            })?;
                            drained(agent, sink, &mut next)?;
                        }
                        Some(ModelTurn::Fail { code, message }) => {
                            let failed = Input::ModelFailed {
                                run_id,
                                step,
                                code,
                                message,
                                retry_after_ms: None,
                            };
                            give(agent, failed, sink, &mut next)?;
                        }
                        None => {}
                    }
                }
                Action::ExecuteTools { run_id, calls, .. } => {
                    for call in &calls {
                        let output = script.tool(&run_id, call);
                        // Delivered for the call the output names, as its `tool_done` line.
                        let call_id = output.call_id.clone();
                        agent
                            .tool_done(&run_id, &call_id, output)
                            .map_err(|error| ServeError::Rejected {
                                kind: "tool_done",
                                error,
                            })?;
                        drained(agent, sink, &mut next)?;
                    }
                }
            }
        } else if agent.is_idle() {
            return Ok(Stop::Idle);
        } else if let Some(result) = agent.current_ticket().and_then(|t| script.resume(t)) {
            give(agent, Input::ResumeTicket { result }, sink, &mut next)?;
        } else {
            return Ok(Stop::Waiting);
        }
        action = next;
    }
}

/// One input at the agent's clock, then a drain; an action the drain hands out lands in
/// `next`. (A model turn's deltas do not come here: see [`serve`].)
#[inline(always)]
fn give<E>(
    agent: &mut Agent,
    input: Input,
    sink: &mut impl FnMut(&Agent, &Output) -> Result<(), E>,
    next: &mut Option<Action>,
) -> Result<(), ServeError<E>> {
    let kind = input.kind();
    agent
        .handle(input, agent.clock_ms())
        .map_err(|error| ServeError::Rejected { kind, error })?;
    drained(agent, sink, &mut *next)
}

/// A drain after an input; an action it hands out lands in `next`.
#[inline(always)]
fn drained<E>(
    agent: &mut Agent,
    sink: &mut impl FnMut(&Agent, &Output) -> Result<(), E>,
    next: &mut Option<Action>,
) -> Result<(), ServeError<E>> {
    if let Some(action) = drain(agent, sink).map_err(ServeError::Sink)? {
        *next = Some(action);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentConfig;
    use crate::agent::ToolSpec;
    use crate::message::{AssistantBlock, StopReason, UserMessage};
    use crate::resume::AwaitTarget;
    use serde_json::json;

    /// Calls `tool` once with id `c1`, then answers "done"; tool outputs name `tool_id`.
    struct OneCall {
        tool: &'static str,
        tool_id: &'static str,
        allow: bool,
        turns: Vec<Step>,
    }

    impl Script for OneCall {
        fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn {
            self.turns.push(request.step);
            if request.step == 1 {
                ModelTurn::answer(AssistantMessage::new(
                    vec![AssistantBlock::tool_call("c1", self.tool, json!({}))],
                    StopReason::ToolUse,
                ))
            } else {
                ModelTurn::streamed(
                    vec!["do".into(), "ne".into()],
                    AssistantMessage::text("done"),
                )
            }
        }
        fn tool(&mut self, _run_id: &RunId, _call: &ToolCall) -> ToolOutput {
            ToolOutput::text(self.tool_id, "ok")
        }
        fn resume(&mut self, ticket: &ResumeTicket) -> Option<ResumeResult> {
            matches!(ticket.target(), AwaitTarget::ToolCall { .. })
                .then_some(())
                .filter(|()| self.allow)
                .map(|()| ResumeResult::allow())
        }
    }

    fn agent() -> Agent {
        let config = AgentConfig::default()
            .with_tool("echo", ToolSpec::auto("echo"))
            .with_tool("rm", ToolSpec::gated("rm", None));
        let mut agent = Agent::new(config).unwrap();
        agent.prompt(UserMessage::text("go"), 0).unwrap();
        agent
    }

    fn script(tool: &'static str, tool_id: &'static str, allow: bool) -> OneCall {
        OneCall {
            tool,
            tool_id,
            allow,
            turns: Vec::new(),
        }
    }

    /// Serves the one-`echo` script on a fresh [`agent`] to `sink`; it must end idle.
    fn serve_echo<E: std::fmt::Debug>(sink: &mut impl FnMut(&Agent, &Output) -> Result<(), E>) {
        let stop = serve(&mut agent(), &mut script("echo", "c1", false), sink).unwrap();
        assert_eq!(stop, Stop::Idle);
    }

    fn kinds(outputs: &[String]) -> String {
        outputs.join(" ")
    }

    fn recording(log: &mut Vec<String>) -> impl FnMut(&Agent, &Output) -> Result<(), ()> + '_ {
        |_, output| {
            log.push(match output {
                Output::Commit(_) => "commit".to_owned(),
                Output::Event(_) => "event".to_owned(),
                Output::Action(Action::CallModel { step, .. }) => format!("model{step}"),
                Output::Action(Action::ExecuteTools { .. }) => "tools".to_owned(),
            });
            Ok(())
        }
    }

    #[test]
    fn serve_answers_every_action_and_stops_idle() {
        let mut agent = agent();
        let mut s = script("echo", "c1", false);
        let mut log = Vec::new();
        let stop = serve(&mut agent, &mut s, &mut recording(&mut log)).unwrap();
        assert_eq!(stop, Stop::Idle);
        assert_eq!(s.turns, vec![1, 2]);
        assert_eq!(agent.transcript().len(), 4);
        let log = kinds(&log);
        assert!(log.contains("model1") && log.contains("tools") && log.contains("model2"));
        // Every output was handed to the sink before the next action: the last is a commit
        // or an event, never an unanswered action.
        assert!(!log.ends_with("model2"), "{log}");
    }

    #[test]
    fn serve_leaves_a_ticket_the_script_does_not_answer_waiting() {
        let mut agent = agent();
        let mut s = script("rm", "c1", false);
        let stop = serve(&mut agent, &mut s, &mut |_: &Agent, _: &Output| {
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(stop, Stop::Waiting);
        assert!(agent.current_ticket().is_some());
        // With the answer, the same agent goes on to the end.
        s.allow = true;
        let stop = serve(&mut agent, &mut s, &mut |_: &Agent, _: &Output| {
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(stop, Stop::Idle);
        assert_eq!(s.turns, vec![1, 2]);
    }

    /// [`OneCall`] with host inputs of its own given alongside an action.
    struct Alongside<F>(OneCall, F);

    impl<F: FnMut(&Action, &mut Vec<Input>)> Script for Alongside<F> {
        fn model(&mut self, request: &ModelRequest<'_>) -> ModelTurn {
            self.0.model(request)
        }
        fn tool(&mut self, run_id: &RunId, call: &ToolCall) -> ToolOutput {
            self.0.tool(run_id, call)
        }
        fn alongside(&mut self, action: &Action, inputs: &mut Vec<Input>) {
            (self.1)(action, inputs)
        }
    }

    /// An abort given alongside the first model call.
    fn abort_at_first_call(action: &Action, inputs: &mut Vec<Input>) {
        if matches!(action, Action::CallModel { step: 1, .. }) {
            inputs.push(Input::Abort);
        }
    }

    #[test]
    fn an_abort_given_alongside_a_model_call_ends_the_run_at_its_answer() {
        let mut agent = agent();
        let mut s = Alongside(script("echo", "c1", false), abort_at_first_call);
        let stop = serve(&mut agent, &mut s, &mut |_: &Agent, _: &Output| {
            Ok::<(), ()>(())
        })
        .unwrap();
        // The abort is cooperative: the call already out is still answered, and the run ends
        // at that boundary instead of running the tool the answer asked for.
        assert_eq!(stop, Stop::Idle);
        assert_eq!(s.0.turns, vec![1]);
        let (_, cause) = agent.last_end().expect("the run ended");
        assert_eq!(*cause, crate::EndCause::Cancelled);
    }

    /// The host answers step 1's call and its tool batch itself, alongside the call: when
    /// `serve` looks, the same run already asks for step 2.
    fn answer_step_one_alongside(action: &Action, inputs: &mut Vec<Input>) {
        if let Action::CallModel {
            run_id, step: 1, ..
        } = action
        {
            let message = AssistantMessage::new(
                vec![AssistantBlock::tool_call("c1", "echo", json!({}))],
                StopReason::ToolUse,
            );
            inputs.push(Input::ModelDone {
                run_id: run_id.clone(),
                step: 1,
                message,
            });
            inputs.push(Input::tool_done(
                run_id.clone(),
                ToolOutput::text("c1", "ok"),
            ));
        }
    }

    #[test]
    fn a_call_moved_on_alongside_is_answered_at_the_step_the_agent_asks_for() {
        let mut agent = agent();
        let mut s = Alongside(script("echo", "c1", false), answer_step_one_alongside);
        let mut log = Vec::new();
        let stop = serve(&mut agent, &mut s, &mut recording(&mut log)).unwrap();
        // Step 1 was answered alongside, so the script's model is asked once, for step 2 (the
        // same run's next call), never with step 1's answer given at step 2.
        assert_eq!(stop, Stop::Idle);
        assert_eq!(s.0.turns, vec![2]);
        assert_eq!(agent.transcript().len(), 4);
        assert!(kinds(&log).contains("model2"), "{log:?}");
    }

    #[test]
    fn a_rejected_input_and_a_failing_sink_stop_serve() {
        let mut first = agent();
        let err = serve(
            &mut first,
            &mut script("echo", "c9", false),
            &mut |_: &Agent, _: &Output| Ok::<(), ()>(()),
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                ServeError::Rejected {
                    kind: "tool_done",
                    ..
                }
            ),
            "{err:?}"
        );

        let mut second = agent();
        let mut seen = 0;
        let err = serve(
            &mut second,
            &mut script("echo", "c1", false),
            &mut |_: &Agent, _: &Output| {
                seen += 1;
                if seen == 3 { Err("full") } else { Ok(()) }
            },
        )
        .unwrap_err();
        assert!(matches!(err, ServeError::Sink("full")), "{err}");
        assert_eq!(seen, 3, "nothing after the failing output was handed on");
    }

    #[test]
    fn the_sink_sees_the_agent_after_each_output() {
        let mut requests = Vec::new();
        serve_echo(&mut |agent: &Agent, output: &Output| {
            if let Output::Action(Action::CallModel { step, .. }) = output {
                // The call just handed out is the one the agent describes.
                let request = agent.model_request().ok_or("no request")?;
                requests.push((*step, request.step, request.context().count()));
            }
            Ok::<(), &str>(())
        });
        assert_eq!(requests, vec![(1, 1, 1), (2, 2, 3)]);
    }

    #[test]
    fn a_model_only_script_answers_a_stray_tool_call_with_an_error() {
        let mut agent = agent();
        let mut turns = 0;
        let mut s = ModelOnly(|request: &ModelRequest<'_>| {
            turns += 1;
            if request.step == 1 {
                ModelTurn::answer(AssistantMessage::new(
                    vec![AssistantBlock::tool_call("c1", "echo", json!({}))],
                    StopReason::ToolUse,
                ))
            } else {
                ModelTurn::answer(AssistantMessage::text("done"))
            }
        });
        let stop = serve(&mut agent, &mut s, &mut |_: &Agent, _: &Output| {
            Ok::<(), ()>(())
        });
        assert_eq!(stop.unwrap(), Stop::Idle);
        assert_eq!(turns, 2);
        let result = agent.transcript()[2]
            .as_tool_result()
            .expect("a tool result");
        assert!(result.is_error, "{result:?}");
    }

    #[test]
    fn a_drain_ends_at_the_action_it_hands_out_and_leaves_the_agent_empty() {
        let mut agent = agent();
        let mut log = Vec::new();
        let action = drain(&mut agent, &mut recording(&mut log)).unwrap();
        assert!(matches!(action, Some(Action::CallModel { step: 1, .. })));
        assert_eq!(log.last().map(String::as_str), Some("model1"), "{log:?}");
        assert!(
            log.len() > 1,
            "the run's start comes before its call: {log:?}"
        );
        assert!(agent.poll().is_none());
        // Nothing to hand out now: an empty drain hands the sink nothing.
        let mut after = Vec::new();
        assert!(
            drain(&mut agent, &mut recording(&mut after))
                .unwrap()
                .is_none()
        );
        assert!(after.is_empty(), "{after:?}");
    }

    #[test]
    fn serve_streams_a_turns_deltas_in_order_before_its_answer() {
        use crate::agent::{AgentEvent, LoopEvent};
        let mut seen = Vec::new();
        serve_echo(&mut |_: &Agent, output: &Output| {
            if let Output::Event(AgentEvent::Loop { event, .. }) = output {
                match event {
                    LoopEvent::TextDelta { step, text } => seen.push(format!("{step}:{text}")),
                    LoopEvent::AssistantMessage { step, .. } => seen.push(format!("{step}:answer")),
                    _ => {}
                }
            }
            Ok::<(), ()>(())
        });
        assert_eq!(seen, ["1:answer", "2:do", "2:ne", "2:answer"]);
    }

    #[test]
    fn a_turn_becomes_deltas_then_its_answer() {
        let run = RunId::new("r");
        let kinds: Vec<&str> =
            ModelTurn::streamed(vec!["a".into(), "b".into()], AssistantMessage::text("ab"))
                .into_inputs(&run, 3)
                .iter()
                .map(Input::kind)
                .collect();
        assert_eq!(kinds, ["model_delta", "model_delta", "model_done"]);
        let failed = ModelTurn::fail("x", "y").into_inputs(&run, 3);
        assert!(matches!(&failed[..], [Input::ModelFailed { step: 3, .. }]));
    }
}
