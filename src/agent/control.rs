//! Inputs that steer a run from outside: abort, stop, pause, and the answers to a wait
//! (resume, cancel, expiry), plus abandoning tools (SPEC §8.3, §8.5).

use crate::error::AgentError;
use crate::resume::{AwaitTarget, ResumeCommand, ResumeError, ResumeResult, validate_resume};
use crate::run::EndCause;

use super::Agent;
use super::run_loop::{EndRequest, Pairing, Phase, Slot, Wait};

/// The end cause of an expired wait.
pub const WAIT_EXPIRED: &str = "wait_expired";

impl Agent {
    fn state_name(&self) -> String {
        match &self.active {
            None => "no run is active".into(),
            Some(active) => format!("run {}: {}", active.run.run_id, active.phase.describe()),
        }
    }

    /// Ends the run now when nothing is outstanding; otherwise records the request, honoured
    /// when the outstanding outcome arrives. A no-op when no run is active.
    fn request_end(&mut self, request: EndRequest) -> Result<(), AgentError> {
        if self.active.is_none() {
            return Ok(());
        }
        self.transition(|agent, active, tx| agent.end_or_request(active, request, tx))
    }

    pub(super) fn on_abort(&mut self) -> Result<(), AgentError> {
        match &self.active {
            Some(active) if active.run.end_request.is_none() => self.request_end(EndRequest::Abort),
            _ => Ok(()),
        }
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
            Some(active) if active.run.end_request.is_some() => Ok(()),
            Some(_) => self.request_end(EndRequest::Stop(reason.to_owned())),
        }
    }

    pub(super) fn on_pause(&mut self) -> Result<(), AgentError> {
        let actual = self.state_name();
        match self.active.as_mut() {
            Some(active) if !matches!(active.phase, Phase::Waiting(_)) => {
                active.run.pause_requested = true;
                Ok(())
            }
            _ => Err(AgentError::state("a running run to pause", actual)),
        }
    }

    pub(super) fn on_cancel_wait(&mut self) -> Result<(), AgentError> {
        if self.current_ticket().is_none() {
            return Err(AgentError::state("an awaiting run", self.state_name()));
        }
        self.request_end(EndRequest::Abort)
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
        let cause = EndCause::Stopped(WAIT_EXPIRED.into());
        self.transition(|agent, active, tx| agent.end_now(active, cause, Pairing::Expire, tx))
    }

    pub(super) fn on_abandon_tools(&mut self) -> Result<(), AgentError> {
        let executing = matches!(
            self.active.as_ref().map(|active| &active.phase),
            Some(Phase::ToolsOut(_))
        );
        if !executing {
            return Err(AgentError::state(
                "a tool batch executing",
                self.state_name(),
            ));
        }
        let cause = EndCause::Indeterminate;
        self.transition(|agent, active, tx| agent.end_now(active, cause, Pairing::Interrupt, tx))
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
        self.observe_clock(command.now_ms);
        self.transition(|agent, active, tx| agent.resumed(active, command, tx))
    }

    /// Checks, without changing anything, that a validated command can be applied.
    fn check_resume_applies(&self, command: &ResumeCommand) -> Result<(), AgentError> {
        let Some(active) = &self.active else {
            return Err(AgentError::Resume(ResumeError::NotWaiting));
        };
        let Phase::Waiting(wait) = &active.phase else {
            return Err(AgentError::Resume(ResumeError::NotWaiting));
        };
        if let ResumeResult::Input(text) = &command.result
            && text.trim().is_empty()
        {
            return Err(AgentError::invalid("resume: the input text is empty"));
        }
        if let Wait::Call { ticket, batch } = wait.as_ref()
            && let AwaitTarget::ToolCall { call_id, .. } = ticket.target()
            && !batch
                .find(call_id)
                .is_some_and(|entry| entry.slot == Slot::Undecided)
        {
            debug_assert!(false, "a call wait whose call is not undecided");
            return Err(AgentError::Internal(format!(
                "the wait on call {call_id} has no open decision for it"
            )));
        }
        Ok(())
    }
}
