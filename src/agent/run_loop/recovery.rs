//! The recovery entries (SPEC §8.7): a run rebuilt from committed facts is put in place in
//! the phase the facts say (see the recovery rows of the module table).

use crate::error::AgentError;
use crate::ids::CallId;
use crate::resume::AwaitTarget;
use crate::run::EndCause;

use super::super::Agent;
use super::super::config::ToolPolicy;
use super::super::queues::BoundaryKind;
use super::super::recover::RecoveredRun;
use super::{ActiveRun, Next, Open, Pairing, Phase, Run, Slot, Thread, Tx, Wait, waiting_call};

impl Agent {
    /// Puts a run rebuilt from committed facts (SPEC §8.7) in place, in the phase the facts
    /// say, and takes the step recovery decides (see the recovery rows of the module table).
    pub(crate) fn rebuild(&mut self, run: Run, facts: RecoveredRun) -> Result<(), AgentError> {
        let mut tx = Tx::over(&mut self.outbox);
        let next = rebuild_step(&mut self.thread, run, facts, &mut tx)?;
        self.active = next.into_active();
        Ok(())
    }
}

/// The step recovery takes for `facts` (see [`Agent::rebuild`]).
fn rebuild_step(
    thread: &mut Thread,
    run: Run,
    facts: RecoveredRun,
    tx: &mut Tx<'_>,
) -> Result<Next, AgentError> {
    let next = match facts {
        RecoveredRun::AtCall => Next::Continue(ActiveRun {
            run,
            phase: Phase::CallModel,
        }),
        RecoveredRun::AfterAnswer => thread.boundary(run, BoundaryKind::TextStop, tx),
        RecoveredRun::AwaitingCall { ticket, mut batch } => {
            let ticket = *ticket;
            let call_id = waiting_call(&ticket).cloned();
            let Some(entry) = call_id.as_ref().and_then(|id| batch.find_mut(id)) else {
                return Err(AgentError::invalid(format!(
                    "recover: run {} waits on call {}, which its last assistant message does \
                     not make",
                    run.run_id,
                    call_id.as_ref().map_or("(none)", CallId::as_str)
                )));
            };
            entry.slot = Slot::Undecided;
            if entry.policy == ToolPolicy::Auto {
                entry.policy = ToolPolicy::RequireApproval {
                    deadline_after_ms: None,
                };
            }
            Next::Continue(ActiveRun {
                run,
                phase: Phase::Waiting(Box::new(Wait::Call { ticket, batch })),
            })
        }
        RecoveredRun::AwaitingAt {
            ticket,
            interrupted,
        } => {
            let ticket = *ticket;
            let wait = match ticket.target() {
                AwaitTarget::Pause(_) => Wait::Pause {
                    ticket,
                    interrupted,
                },
                AwaitTarget::RemoteInput { .. } => Wait::Remote {
                    ticket,
                    interrupted,
                },
                AwaitTarget::ToolCall { call_id, .. } => {
                    return Err(AgentError::invalid(format!(
                        "recover: run {} waits on call {call_id} at a boundary, with no batch",
                        run.run_id
                    )));
                }
            };
            Next::Continue(ActiveRun {
                run,
                phase: Phase::Waiting(Box::new(wait)),
            })
        }
        RecoveredRun::OpenCalls { mut batch, seal } => {
            if seal {
                for entry in &mut batch.calls {
                    if entry.slot == Slot::Ready {
                        entry.slot = Slot::Executing;
                    }
                }
                let cause = EndCause::Indeterminate;
                let open = Open::batch(batch);
                Next::Ended(thread.finish(run, open, cause, Pairing::Interrupt, tx))
            } else {
                thread.advance_batch(run, batch, tx)
            }
        }
    };
    Ok(next)
}
