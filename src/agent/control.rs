//! Inputs that steer a run from outside: abort, stop, pause, and the answers to a wait
//! (resume, cancel, expiry), plus abandoning tools (SPEC §8.3, §8.5).

use crate::commit::AuditDraft;
use crate::error::AgentError;
use crate::message::{Message, ToolOutput, ToolResultMessage, UserMessage};
use crate::resume::{
    AwaitTarget, PermissionDecision, ResumeCommand, ResumeError, ResumeResult, validate_resume,
};
use crate::run::EndCause;

use super::Agent;
use super::events::{LoopEvent, MessageOrigin};
use super::queues::BoundaryKind;
use super::run_loop::{EndRequest, Pairing, Phase, Slot, Tx};

/// The end cause of an expired wait.
pub const WAIT_EXPIRED: &str = "wait_expired";

impl Agent {
    fn state_name(&self) -> String {
        match &self.active {
            None => "no run is active".into(),
            Some(run) => format!("run {}: {}", run.run_id, run.phase.describe()),
        }
    }

    /// Ends the run now when nothing is outstanding; otherwise records the request, honoured
    /// when the outstanding outcome arrives.
    fn request_end(&mut self, request: EndRequest) {
        let Some(mut run) = self.active.take() else {
            return;
        };
        let ends_now = match &run.phase {
            Phase::Waiting(_) | Phase::CallModel | Phase::Between => true,
            Phase::Tools(batch) => !batch.dispatched,
            Phase::ModelOutstanding { .. } => false,
        };
        if ends_now {
            let mut tx = Tx::default();
            self.finish(run, request.cause(), Pairing::Skip, &mut tx);
            self.emit(tx);
        } else {
            run.end_request.get_or_insert(request);
            self.active = Some(run);
        }
    }

    pub(super) fn on_abort(&mut self) -> Result<(), AgentError> {
        match &self.active {
            Some(run) if run.end_request.is_none() => self.request_end(EndRequest::Abort),
            _ => {}
        }
        Ok(())
    }

    pub(super) fn on_stop(&mut self, reason: &str) -> Result<(), AgentError> {
        if reason.trim().is_empty() {
            return Err(AgentError::invalid("stop: the reason is empty"));
        }
        match &self.active {
            None => Err(AgentError::state(
                "an active run to stop",
                self.state_name(),
            )),
            Some(run) if run.end_request.is_some() => Ok(()),
            Some(_) => {
                self.request_end(EndRequest::Stop(reason.to_owned()));
                Ok(())
            }
        }
    }

    pub(super) fn on_pause(&mut self) -> Result<(), AgentError> {
        let actual = self.state_name();
        match self.active.as_mut() {
            Some(run) if !matches!(run.phase, Phase::Waiting(_)) => {
                run.pause_requested = true;
                Ok(())
            }
            _ => Err(AgentError::state("a running run to pause", actual)),
        }
    }

    pub(super) fn on_cancel_wait(&mut self) -> Result<(), AgentError> {
        if self.current_ticket().is_none() {
            return Err(AgentError::state("an awaiting run", self.state_name()));
        }
        self.request_end(EndRequest::Abort);
        Ok(())
    }

    /// The earliest `now_ms` at which something is due, `None` when nothing is (SPEC §8.5).
    /// Today that is the current ticket's deadline + 1: a resume at the deadline itself is
    /// still in time. Call it after draining [`poll`](Agent::poll); any input can change it.
    /// When the time comes, call [`handle_timeout`](Agent::handle_timeout).
    #[must_use = "a host must come back at this time"]
    pub fn poll_timeout(&self) -> Option<u64> {
        self.current_ticket()?.deadline_ms?.checked_add(1)
    }

    /// `timeout`: an expired wait ends as `expire_wait` says; anything else is a no-op.
    pub(super) fn on_timeout(&mut self) -> Result<(), AgentError> {
        match self.poll_timeout() {
            Some(due) if self.clock_ms >= due => self.on_expire_wait(),
            _ => Ok(()),
        }
    }

    pub(super) fn on_expire_wait(&mut self) -> Result<(), AgentError> {
        let Some(ticket) = self.current_ticket() else {
            return Err(AgentError::state("an awaiting run", self.state_name()));
        };
        let now = self.clock_ms;
        match ticket.deadline_ms {
            Some(deadline) if now > deadline => {}
            deadline_ms => {
                return Err(AgentError::NotExpired {
                    deadline_ms,
                    now_ms: now,
                });
            }
        }
        let Some(run) = self.active.take() else {
            return Err(AgentError::Internal("expire_wait: the run vanished".into()));
        };
        let mut tx = Tx::default();
        self.finish(
            run,
            EndCause::Stopped(WAIT_EXPIRED.into()),
            Pairing::Expire,
            &mut tx,
        );
        self.emit(tx);
        Ok(())
    }

    pub(super) fn on_abandon_tools(&mut self) -> Result<(), AgentError> {
        let executing = matches!(
            self.active.as_ref().map(|run| &run.phase),
            Some(Phase::Tools(batch)) if batch.dispatched
        );
        if !executing {
            return Err(AgentError::state(
                "a tool batch executing",
                self.state_name(),
            ));
        }
        let Some(run) = self.active.take() else {
            return Err(AgentError::Internal(
                "abandon_tools: the run vanished".into(),
            ));
        };
        let mut tx = Tx::default();
        self.finish(run, EndCause::Indeterminate, Pairing::Interrupt, &mut tx);
        self.emit(tx);
        Ok(())
    }

    pub(super) fn on_resume_ticket(&mut self, result: ResumeResult) -> Result<(), AgentError> {
        let ticket = self
            .current_ticket()
            .ok_or(AgentError::Resume(ResumeError::NotWaiting))?;
        let command = ResumeCommand::from_ticket(ticket, result, self.clock_ms);
        self.on_resume(command)
    }

    pub(super) fn on_resume(&mut self, mut command: ResumeCommand) -> Result<(), AgentError> {
        command.now_ms = command.now_ms.max(self.clock_ms);
        validate_resume(self.current_ticket(), &command)?;
        self.check_resume_applies(&command)?;
        let Some(mut run) = self.active.take() else {
            return Err(AgentError::Internal("resume: the run vanished".into()));
        };
        let Phase::Waiting(wait) = std::mem::replace(&mut run.phase, Phase::Between) else {
            self.active = Some(run);
            return Err(AgentError::Internal(
                "resume: the run is not waiting".into(),
            ));
        };
        self.observe_clock(command.now_ms);
        let mut tx = Tx::default();
        tx.event(
            &run.run_id,
            LoopEvent::Resumed {
                correlation_id: wait.ticket.correlation_id.clone(),
                result: command.result.kind(),
            },
        );
        // The boundary a pause interrupted, read before context messages are appended.
        let interrupted_boundary = match self.messages.last() {
            Some(Message::ToolResult(_)) => BoundaryKind::AfterToolBatch,
            _ => BoundaryKind::TextStop,
        };
        for message in command.context_messages {
            self.append(&mut tx, &run.run_id, MessageOrigin::ResumeContext, message);
        }
        match (wait.ticket.target(), wait.batch) {
            (AwaitTarget::ToolCall { call_id, .. }, Some(mut batch)) => {
                let mut extra = Vec::new();
                let max_bytes = self.config.max_tool_output_bytes;
                let step = batch.step;
                if let Some(entry) = batch.find_mut(call_id) {
                    let answer = |output: ToolOutput| match output.unrepresentable(max_bytes) {
                        Some(why) => ToolResultMessage::malformed(&entry.call, &why),
                        None => output.into_result(entry.call.name.clone()),
                    };
                    let slot = match command.result {
                        ResumeResult::Permission(decision) => {
                            extra.push(
                                AuditDraft::permission_decided(step, call_id, &decision)
                                    .with_now_ms(self.clock_ms),
                            );
                            match decision {
                                PermissionDecision::Allow { .. } => Slot::Ready,
                                PermissionDecision::Deny { reason } => {
                                    let denied =
                                        ToolResultMessage::denied(&entry.call, reason.as_deref());
                                    tx.event(
                                        &run.run_id,
                                        LoopEvent::SyntheticResult {
                                            call_id: denied.call_id.clone(),
                                            tool_name: denied.tool_name.clone(),
                                            outcome: denied.outcome,
                                        },
                                    );
                                    Slot::Done(denied)
                                }
                            }
                        }
                        ResumeResult::ToolResult(output) => Slot::Done(answer(output)),
                        ResumeResult::Input(text) => {
                            Slot::Done(answer(ToolOutput::text(call_id.clone(), text)))
                        }
                        ResumeResult::Continue => Slot::Ready,
                    };
                    entry.slot = slot;
                }
                self.commit_running(&mut run, extra, &mut tx);
                self.advance_batch(run, batch, &mut tx);
            }
            (_, _) => match command.result {
                ResumeResult::Input(text) => {
                    let input = Message::User(UserMessage::text(text));
                    if run.steps >= self.config.max_steps {
                        // No model call is left to answer it: it comes back unconsumed.
                        run.queues.steering.push_front(input);
                        self.finish(run, EndCause::MaxSteps, Pairing::Skip, &mut tx);
                    } else {
                        self.append(&mut tx, &run.run_id, MessageOrigin::ResumeInput, input);
                        self.commit_running(&mut run, Vec::new(), &mut tx);
                        run.phase = Phase::CallModel;
                        self.active = Some(run);
                    }
                }
                _ => {
                    // `Continue` re-takes the boundary the pause interrupted; the boundary's own
                    // commit (Running, Awaiting or Ended) is the one that deletes the ticket.
                    self.boundary(run, interrupted_boundary, &mut tx);
                }
            },
        }
        self.emit(tx);
        Ok(())
    }

    /// Checks, without changing anything, that a validated command can be applied.
    fn check_resume_applies(&self, command: &ResumeCommand) -> Result<(), AgentError> {
        let Some(run) = &self.active else {
            return Err(AgentError::Resume(ResumeError::NotWaiting));
        };
        let Phase::Waiting(wait) = &run.phase else {
            return Err(AgentError::Resume(ResumeError::NotWaiting));
        };
        if let ResumeResult::Input(text) = &command.result
            && text.trim().is_empty()
        {
            return Err(AgentError::invalid("resume: the input text is empty"));
        }
        if let AwaitTarget::ToolCall { call_id, .. } = wait.ticket.target() {
            let open = wait
                .batch
                .as_ref()
                .and_then(|batch| batch.find(call_id))
                .is_some_and(|entry| entry.slot == Slot::Undecided);
            if !open {
                return Err(AgentError::state(
                    format!("call {call_id} of the waiting batch to be undecided"),
                    "the run has no open decision for it",
                ));
            }
        }
        Ok(())
    }
}
