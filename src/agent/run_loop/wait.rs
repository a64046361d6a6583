//! Waits: opening one (a ticket committed as `Awaiting`) and the `resume` that answers it
//! (SPEC §8.3).

use crate::commit::{AuditDraft, WaitBoundary};
use crate::message::{Message, ToolOutput, ToolResultMessage};
use crate::resume::{
    AwaitTarget, PermissionDecision, ResumeCommand, ResumeResult, ResumeTicket, WaitIdentity,
};
use crate::run::{EndCause, RunDisposition};

use super::super::events::{LoopEvent, MessageOrigin};
use super::{
    ActiveRun, CommittedAs, Next, Pairing, Phase, Run, Slot, Thread, Tx, Wait, waiting_call,
};

impl Thread {
    /// Opens a wait: mints the ticket, commits `Awaiting`, announces it, and waits in the
    /// variant `wait` builds around the ticket.
    pub(super) fn open_wait(
        &mut self,
        mut run: Run,
        target: AwaitTarget,
        deadline_after_ms: Option<u64>,
        wait: impl FnOnce(ResumeTicket) -> Wait,
        tx: &mut Tx<'_>,
    ) -> Next {
        run.waits = run.waits.saturating_add(1);
        let identity = WaitIdentity {
            correlation_id: format!("{}:wait-{}", run.run_id, run.waits),
            run_id: run.run_id.clone(),
            thread_id: self.config.thread_id.clone(),
            snapshot_id: self.config.snapshot_id.clone(),
            catalog_fingerprint: self.config.catalog_fingerprint.clone(),
        };
        let deadline_ms = deadline_after_ms.map(|after| self.clock_ms.saturating_add(after));
        let ticket = ResumeTicket::new(identity, target, deadline_ms);
        let wait = wait(ticket.clone());
        run.committed_as = CommittedAs::Awaiting;
        // The commit records where the run waits (its step count, the boundary a pause
        // interrupted), so recovery reads that fact instead of inferring it.
        let waits_at = AuditDraft::run_awaiting_at(
            &run.run_id,
            run.steps,
            wait.interrupted().map(WaitBoundary::from),
        );
        self.push_commit(
            tx,
            &mut run,
            RunDisposition::Awaiting(Box::new(ticket.clone())),
            true,
            vec![waits_at],
        );
        tx.event(
            &run.run_id,
            LoopEvent::Awaiting {
                ticket: Box::new(ticket),
            },
        );
        Next::Continue(ActiveRun {
            run,
            phase: Phase::Waiting(Box::new(wait)),
        })
    }

    /// `resume` of the run's `wait` (matched, validated and checked to apply by the caller):
    /// commits Running (which deletes the ticket) with any context messages, then goes on as
    /// the wait's kind says.
    pub(crate) fn resumed(
        &mut self,
        mut run: Run,
        wait: Wait,
        command: ResumeCommand,
        tx: &mut Tx<'_>,
    ) -> Next {
        tx.event(
            &run.run_id,
            LoopEvent::Resumed {
                correlation_id: wait.ticket().correlation_id.clone(),
                result: command.result.kind(),
            },
        );
        for message in command.context_messages {
            self.append(tx, &run.run_id, MessageOrigin::ResumeContext, message);
        }
        match wait {
            Wait::Call { ticket, mut batch } => {
                let mut extra = Vec::new();
                let max_bytes = self.config.max_tool_output_bytes;
                let step = batch.step;
                if let Some(call_id) = waiting_call(&ticket)
                    && let Some(entry) = batch.find_mut(call_id)
                {
                    let answer = |output: ToolOutput| match output.unrepresentable(max_bytes) {
                        Some(why) => output.into_malformed(&entry.call, &why),
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
                self.commit_running(&mut run, extra, tx);
                self.advance_batch(run, batch, tx)
            }
            Wait::Pause { interrupted, .. } | Wait::Remote { interrupted, .. } => {
                match command.result {
                    ResumeResult::Input(text) => {
                        let input = Message::user(text);
                        if run.steps >= self.config.max_steps {
                            // No model call is left to answer it: it comes back unconsumed.
                            run.queues.steering.push_front(input);
                            let cause = EndCause::MaxSteps;
                            Next::Ended(self.finish(run, None, cause, Pairing::Skip, tx))
                        } else {
                            self.append(tx, &run.run_id, MessageOrigin::ResumeInput, input);
                            self.commit_running(&mut run, Vec::new(), tx);
                            Next::Continue(ActiveRun {
                                run,
                                phase: Phase::CallModel,
                            })
                        }
                    }
                    // `Continue` (and any other answer) re-takes the boundary the wait
                    // interrupted; the boundary's own commit (Running, Awaiting or Ended) is
                    // the one that deletes the ticket.
                    _ => self.boundary(run, interrupted, tx),
                }
            }
        }
    }
}
