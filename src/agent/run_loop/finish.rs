//! Every end of a run: an end now or recorded (`abort`, `stop`), the end of a wait
//! (`cancel_wait`, expiry), abandoned tools, and `finish`, which all of them reach.

use crate::ids::CallId;
use crate::message::ToolResultMessage;
use crate::run::{EndCause, RunDisposition};

use super::super::events::{AgentEvent, LoopEvent, RunResult};
use super::waiting_call;
use super::{ActiveRun, Batch, EndRequest, Next, Phase, Run, RunEnded, Slot, Thread, Tx, Wait};

/// How `finish` pairs calls that have no result yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pairing {
    /// Every open call: `skipped`.
    Skip,
    /// Executing calls: `interrupted` (outcome unknown); the rest `skipped`.
    Interrupt,
    /// The waiting call: `expired`; the rest `skipped`.
    Expire,
}

/// The calls a run that ends leaves without a result: a batch, and the call its wait (if
/// any) is about.
pub(crate) struct Open {
    batch: Batch,
    waiting: Option<CallId>,
}

impl Open {
    pub(super) fn batch(batch: Batch) -> Option<Open> {
        Some(Open {
            batch,
            waiting: None,
        })
    }

    /// The open calls of a wait a run ends in.
    fn of_wait(wait: Wait) -> Option<Open> {
        match wait {
            Wait::Call { ticket, batch } => Some(Open {
                waiting: waiting_call(&ticket).cloned(),
                batch,
            }),
            Wait::Pause { .. } | Wait::Remote { .. } => None,
        }
    }

    /// The open calls of a phase a run ends in.
    fn of(phase: Phase) -> Option<Open> {
        match phase {
            Phase::ToolsReady(batch) | Phase::ToolsOut(batch) => Open::batch(batch),
            Phase::Waiting(wait) => Open::of_wait(*wait),
            Phase::CallModel | Phase::ModelOut { .. } => None,
        }
    }
}

impl Thread {
    /// `abort` or `stop` in any phase: ends the run now when no outcome is out; otherwise
    /// records the request (the caller checked none is recorded yet), honoured when the
    /// outstanding outcome arrives.
    pub(crate) fn end_or_request(
        &mut self,
        mut run: Run,
        phase: Phase,
        request: EndRequest,
        tx: &mut Tx<'_>,
    ) -> Next {
        match phase {
            Phase::ModelOut { .. } | Phase::ToolsOut(_) => {
                run.end_request.get_or_insert(request);
                Next::Continue(ActiveRun { run, phase })
            }
            Phase::CallModel | Phase::ToolsReady(_) | Phase::Waiting(_) => {
                let cause = request.cause();
                Next::Ended(self.finish(run, Open::of(phase), cause, Pairing::Skip, tx))
            }
        }
    }

    /// Ends the run waiting on `wait` (matched by the caller) now: `cancel_wait` (open calls
    /// `skipped`) or an expired wait (the waiting call `expired`).
    pub(crate) fn wait_ended(
        &mut self,
        run: Run,
        wait: Wait,
        cause: EndCause,
        pairing: Pairing,
        tx: &mut Tx<'_>,
    ) -> Next {
        Next::Ended(self.finish(run, Open::of_wait(wait), cause, pairing, tx))
    }

    /// `abandon_tools` of the executing `batch` (matched by the caller): executing calls
    /// `interrupted`, the run ends `Indeterminate`.
    pub(crate) fn tools_abandoned(&mut self, run: Run, batch: Batch, tx: &mut Tx<'_>) -> Next {
        let open = Open::batch(batch);
        let cause = EndCause::Indeterminate;
        Next::Ended(self.finish(run, open, cause, Pairing::Interrupt, tx))
    }

    /// Ends the run: close input, return the queues, pair every open call, commit `Ended` with
    /// everything not yet committed, then `input_closed` and `run_end`.
    pub(crate) fn finish(
        &mut self,
        mut run: Run,
        open: Option<Open>,
        cause: EndCause,
        pairing: Pairing,
        tx: &mut Tx<'_>,
    ) -> RunEnded {
        let unconsumed = run.queues.drain_unconsumed();
        if let Some(Open { batch, waiting }) = open {
            let mut results = Vec::with_capacity(batch.calls.len());
            for entry in batch.calls {
                let result = match entry.slot {
                    Slot::Done(result) => result,
                    slot => {
                        let result = match (slot, pairing) {
                            (Slot::Executing, Pairing::Interrupt) => {
                                ToolResultMessage::interrupted(&entry.call)
                            }
                            (Slot::Undecided, Pairing::Expire)
                                if waiting.as_ref() == Some(&entry.call.id) =>
                            {
                                ToolResultMessage::expired(&entry.call)
                            }
                            _ => ToolResultMessage::skipped(&entry.call),
                        };
                        tx.event(
                            &run.run_id,
                            LoopEvent::SyntheticResult {
                                call_id: result.call_id.clone(),
                                tool_name: result.tool_name.clone(),
                                outcome: result.outcome,
                            },
                        );
                        result
                    }
                };
                results.push(result);
            }
            self.append_results(tx, &run.run_id, results);
        }
        let disposition = RunDisposition::Ended {
            run_id: run.run_id.clone(),
            cause: cause.clone(),
        };
        self.push_commit(tx, &mut run, disposition, true, Vec::new());
        self.last_end = Some((run.run_id.clone(), cause.clone()));
        tx.event(&run.run_id, LoopEvent::InputClosed);
        tx.push(AgentEvent::RunEnd {
            run_id: run.run_id,
            result: RunResult {
                cause,
                steps: run.steps,
                unconsumed,
            },
        });
        RunEnded(())
    }
}
