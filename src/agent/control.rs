//! Inputs that steer a run from outside: abort, stop, pause, and the answers to a wait
//! (resume, cancel, expiry), plus abandoning tools (SPEC §8.3, §8.5).

use crate::error::AgentError;
use crate::resume::{AwaitTarget, ResumeCommand, ResumeError, ResumeResult, validate_resume};
use crate::run::EndCause;

use super::Agent;
use super::events::{AgentEvent, Output};
use super::queues::QueueMode;
use super::run_loop::{ActiveRun, EndRequest, Pairing, Phase, Slot, Transition, Wait};

/// The end cause of an expired wait.
pub const WAIT_EXPIRED: &str = "wait_expired";

/// What the agent is doing, for an error that says what arrived instead of what was expected.
fn state_name(active: Option<&ActiveRun>) -> String {
    match active {
        None => "no run is active".into(),
        Some(active) => format!("run {}: {}", active.run.run_id(), active.phase.describe()),
    }
}

impl Agent {
    pub(super) fn on_abort(&mut self) -> Result<(), AgentError> {
        self.transition(|thread, active, tx| match active {
            Some(ActiveRun { run, phase }) if !run.end_requested() => {
                Transition::Moved(thread.end_or_request(run, phase, EndRequest::Abort, tx))
            }
            // Idle, or an end already recorded: nothing to do.
            active => Transition::Kept(active, Ok(())),
        })
    }

    pub(super) fn on_stop(&mut self, reason: &str) -> Result<(), AgentError> {
        if reason.trim().is_empty() {
            return Err(AgentError::invalid("stop: the reason is empty"));
        }
        self.transition(|thread, active, tx| match active {
            None => {
                let error = AgentError::state("an active run to stop", state_name(None));
                Transition::Kept(None, Err(error))
            }
            Some(ActiveRun { run, phase }) if !run.end_requested() => {
                let request = EndRequest::Stop(reason.to_owned());
                Transition::Moved(thread.end_or_request(run, phase, request, tx))
            }
            // An end already recorded wins.
            active => Transition::Kept(active, Ok(())),
        })
    }

    pub(super) fn on_pause(&mut self) -> Result<(), AgentError> {
        match self.active.as_mut() {
            Some(active) if !matches!(active.phase, Phase::Waiting(_)) => {
                active.run.request_pause();
                Ok(())
            }
            active => Err(AgentError::state(
                "a running run to pause",
                state_name(active.as_deref()),
            )),
        }
    }

    /// Withdraws both queues of the active run (idle: nothing) into a `queues_cleared` event.
    pub(super) fn on_clear_queues(&mut self) {
        let (run_id, (steering, follow_ups)) = match self.active.as_mut() {
            Some(active) => (
                Some(active.run.run_id().clone()),
                active.run.withdraw_queued(),
            ),
            None => (None, (Vec::new(), Vec::new())),
        };
        self.outbox
            .push_back(Output::Event(AgentEvent::QueuesCleared {
                run_id,
                steering,
                follow_ups,
            }));
    }

    pub(super) fn on_set_queue_modes(
        &mut self,
        steering_mode: Option<QueueMode>,
        follow_up_mode: Option<QueueMode>,
    ) -> Result<(), AgentError> {
        if steering_mode.is_none() && follow_up_mode.is_none() {
            return Err(AgentError::invalid(
                "set_queue_modes: give steering_mode, follow_up_mode or both",
            ));
        }
        let config = &mut self.thread.config;
        if let Some(mode) = steering_mode {
            config.steering_mode = mode;
        }
        if let Some(mode) = follow_up_mode {
            config.follow_up_mode = mode;
        }
        Ok(())
    }

    pub(super) fn on_cancel_wait(&mut self) -> Result<(), AgentError> {
        self.transition(|thread, active, tx| match active {
            Some(ActiveRun {
                run,
                phase: Phase::Waiting(wait),
            }) => {
                let cause = EndRequest::Abort.cause();
                Transition::Moved(thread.wait_ended(run, *wait, cause, Pairing::Skip, tx))
            }
            active => {
                let error = AgentError::state("an awaiting run", state_name(active.as_ref()));
                Transition::Kept(active, Err(error))
            }
        })
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
            Some(due) if self.thread.clock_ms >= due => self.on_expire_wait(),
            _ => Ok(()),
        }
    }

    pub(super) fn on_expire_wait(&mut self) -> Result<(), AgentError> {
        let now = self.thread.clock_ms;
        self.transition(|thread, active, tx| match active {
            Some(ActiveRun {
                run,
                phase: Phase::Waiting(wait),
            }) => match wait.ticket().deadline_ms {
                Some(deadline) if now > deadline => {
                    let cause = EndCause::Stopped(WAIT_EXPIRED.into());
                    Transition::Moved(thread.wait_ended(run, *wait, cause, Pairing::Expire, tx))
                }
                deadline_ms => {
                    let phase = Phase::Waiting(wait);
                    let error = AgentError::NotExpired {
                        deadline_ms,
                        now_ms: now,
                    };
                    Transition::Kept(Some(ActiveRun { run, phase }), Err(error))
                }
            },
            active => {
                let error = AgentError::state("an awaiting run", state_name(active.as_ref()));
                Transition::Kept(active, Err(error))
            }
        })
    }

    pub(super) fn on_abandon_tools(&mut self) -> Result<(), AgentError> {
        self.transition(|thread, active, tx| match active {
            Some(ActiveRun {
                run,
                phase: Phase::ToolsOut(batch),
            }) => Transition::Moved(thread.tools_abandoned(run, batch, tx)),
            active => {
                let error =
                    AgentError::state("a tool batch executing", state_name(active.as_ref()));
                Transition::Kept(active, Err(error))
            }
        })
    }

    pub(super) fn on_resume_ticket(&mut self, result: ResumeResult) -> Result<(), AgentError> {
        let ticket = self
            .current_ticket()
            .ok_or(AgentError::Resume(ResumeError::NotWaiting))?;
        let command = ResumeCommand::from_ticket(ticket, result, self.thread.clock_ms);
        self.on_resume(command)
    }

    pub(super) fn on_resume(&mut self, mut command: ResumeCommand) -> Result<(), AgentError> {
        command.now_ms = command.now_ms.max(self.thread.clock_ms);
        self.transition(|thread, active, tx| match active {
            Some(ActiveRun {
                run,
                phase: Phase::Waiting(wait),
            }) => match check_resume(&wait, &command) {
                Ok(()) => {
                    thread.observe_clock(command.now_ms);
                    Transition::Moved(thread.resumed(run, *wait, command, tx))
                }
                Err(error) => {
                    let phase = Phase::Waiting(wait);
                    Transition::Kept(Some(ActiveRun { run, phase }), Err(error))
                }
            },
            active => Transition::Kept(active, Err(AgentError::Resume(ResumeError::NotWaiting))),
        })
    }
}

/// Checks, without changing anything, that `command` answers `wait` and can be applied.
fn check_resume(wait: &Wait, command: &ResumeCommand) -> Result<(), AgentError> {
    validate_resume(Some(wait.ticket()), command)?;
    if let ResumeResult::Input(text) = &command.result
        && text.trim().is_empty()
    {
        return Err(AgentError::invalid("resume: the input text is empty"));
    }
    if let Wait::Call { ticket, batch } = wait
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
