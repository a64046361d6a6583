//! The model call's outcomes: its answer, its failure, and a compaction instead of an answer
//! (SPEC §8.2, §8.9).

use std::sync::Arc;

use crate::commit::AuditDraft;
use crate::ids::Step;
use crate::message::{
    AssistantBlock, AssistantMessage, Message, ResultOutcome, StopReason, ToolCall,
    ToolResultMessage, UserMessage,
};
use crate::run::{EndCause, Failure};

use super::super::config::ToolPolicy;
use super::super::events::LoopEvent;
use super::super::queues::BoundaryKind;
use super::super::thread::Compaction;
use super::{ActiveRun, Batch, EndRequest, Next, Open, Pairing, Phase, Run, Thread, Tx};

impl Thread {
    /// `model_done` for the outstanding call of `step` (matched by the caller).
    pub(crate) fn model_answered(
        &mut self,
        mut run: Run,
        step: Step,
        message: Arc<AssistantMessage>,
        tx: &mut Tx<'_>,
    ) -> Next {
        // Most answers hold no call: no list is built for them.
        let calls: Vec<ToolCall> = if message
            .content
            .iter()
            .any(|block| matches!(block, AssistantBlock::ToolCall { .. }))
        {
            message.tool_calls().collect()
        } else {
            Vec::new()
        };
        let stop_reason = message.stop_reason;
        let error_message = match stop_reason {
            StopReason::Error => message.error_message.clone(),
            _ => None,
        };
        self.messages.push(Message::Assistant(Arc::clone(&message)));
        tx.event(&run.run_id, LoopEvent::AssistantMessage { step, message });
        match stop_reason {
            StopReason::Error | StopReason::Aborted => {
                let cause = match (&run.end_request, stop_reason) {
                    (Some(request), _) => request.cause(),
                    (None, StopReason::Aborted) => EndCause::Cancelled,
                    (None, _) => EndCause::Error(Failure::Inference {
                        code: "model_error".into(),
                        message: error_message
                            .unwrap_or_else(|| "the model reported an error".into()),
                    }),
                };
                // Calls in a failed answer never run: each is paired `skipped`.
                let batch = Batch::gated(step, calls, |_| ToolPolicy::Auto);
                Next::Ended(self.finish(run, Open::batch(batch), cause, Pairing::Skip, tx))
            }
            _ if calls.is_empty() => self.boundary(run, BoundaryKind::TextStop, tx),
            StopReason::Length => {
                let mut results = Vec::with_capacity(calls.len());
                for call in &calls {
                    tx.event(
                        &run.run_id,
                        LoopEvent::SyntheticResult {
                            call_id: call.id.clone(),
                            tool_name: call.name.clone(),
                            outcome: ResultOutcome::Truncated,
                        },
                    );
                    results.push(ToolResultMessage::truncated(call));
                }
                self.after_batch(run, results, tx)
            }
            StopReason::Stop | StopReason::ToolUse => {
                // The calls are durable before any effect.
                self.commit_running(&mut run, Vec::new(), tx);
                let batch = Batch::answered(step, calls, |name| self.config.policy(name));
                for call in batch.malformed_calls() {
                    tx.event(
                        &run.run_id,
                        LoopEvent::SyntheticResult {
                            call_id: call.id.clone(),
                            tool_name: call.name.clone(),
                            outcome: ResultOutcome::Malformed,
                        },
                    );
                }
                match run.end_request.as_ref().map(EndRequest::cause) {
                    Some(cause) => {
                        Next::Ended(self.finish(run, Open::batch(batch), cause, Pairing::Skip, tx))
                    }
                    None => self.advance_batch(run, batch, tx),
                }
            }
        }
    }

    /// `model_failed` for the outstanding call of `step` (matched by the caller): the error
    /// becomes an assistant message and the run ends (with the cause an end request asked
    /// for, if any).
    pub(crate) fn model_gave_up(
        &mut self,
        run: Run,
        step: Step,
        code: &str,
        text: &str,
        tx: &mut Tx<'_>,
    ) -> Next {
        let assistant = Arc::new(AssistantMessage {
            error_message: Some(text.to_owned()),
            ..AssistantMessage::new(Vec::new(), StopReason::Error)
        });
        self.messages
            .push(Message::Assistant(Arc::clone(&assistant)));
        tx.event(
            &run.run_id,
            LoopEvent::AssistantMessage {
                step,
                message: assistant,
            },
        );
        let cause = match &run.end_request {
            Some(request) => request.cause(),
            None => EndCause::Error(Failure::Inference {
                code: code.to_owned(),
                message: text.to_owned(),
            }),
        };
        Next::Ended(self.finish(run, None, cause, Pairing::Skip, tx))
    }

    /// `compact` instead of the outstanding model call's answer (its untouched call matched,
    /// and the compaction checked, by the caller; SPEC §8.9): commits the compaction
    /// (Running, no messages), announces it, and decides the same step's call again over the
    /// new model context.
    pub(crate) fn compacted(
        &mut self,
        mut run: Run,
        keep_from: usize,
        summary: Arc<UserMessage>,
        tx: &mut Tx<'_>,
    ) -> Next {
        let removed = keep_from.saturating_sub(self.context_start());
        let draft = AuditDraft::compacted(keep_from, self.messages.len(), Arc::clone(&summary))
            .with_now_ms(self.clock_ms);
        self.compaction = Some(Compaction::new(keep_from, summary));
        self.commit_running(&mut run, vec![draft], tx);
        tx.event(&run.run_id, LoopEvent::Compacted { keep_from, removed });
        // The same step is handed out again: the call that was out is never answered.
        run.steps = run.steps.saturating_sub(1);
        Next::Continue(ActiveRun {
            run,
            phase: Phase::CallModel,
        })
    }
}
