//! The tool batch of one assistant message: its calls' progress, and the transitions that
//! move it on (`advance_batch`, `tool_done`, `after_batch`).

use serde::{Deserialize, Serialize};

use crate::error::AgentError;
use crate::ids::{CallId, Step};
use crate::message::{ResultOutcome, ToolCall, ToolResultMessage};
use crate::resume::{AwaitTarget, PendingTool, ToolWaitReason};

use super::super::config::ToolPolicy;
use super::super::events::LoopEvent;
use super::super::queues::BoundaryKind;
use super::{ActiveRun, Next, Phase, Run, Thread, Tx, Wait};

/// The tool calls of one assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Batch {
    pub(crate) step: Step,
    pub(crate) calls: Vec<BatchCall>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BatchCall {
    pub(crate) call: ToolCall,
    pub(crate) policy: ToolPolicy,
    pub(crate) slot: Slot,
}

/// One call's progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Slot {
    /// Approval-gated, no decision yet.
    Undecided,
    /// Will execute (auto, or allowed).
    Ready,
    /// Handed to the host.
    Executing,
    /// Has its result (executed, malformed, denied, truncated).
    Done(ToolResultMessage),
}

impl Batch {
    /// A batch of `calls`, gated calls undecided and the rest ready.
    pub(crate) fn gated(
        step: Step,
        calls: Vec<ToolCall>,
        policy_of: impl Fn(&str) -> ToolPolicy,
    ) -> Self {
        Self::build(step, calls, policy_of, false)
    }

    /// The batch of a completed answer's `calls`: as [`Batch::gated`], except that a call whose
    /// arguments are not a JSON object (a codec passes unparseable arguments on as their raw
    /// text, SPEC §13) already has its `malformed` result: it is never executed or asked about.
    pub(crate) fn answered(
        step: Step,
        calls: Vec<ToolCall>,
        policy_of: impl Fn(&str) -> ToolPolicy,
    ) -> Self {
        Self::build(step, calls, policy_of, true)
    }

    /// [`Batch::gated`], or [`Batch::answered`] when `answered`: each slot decided as the call
    /// goes in (one pass, no slot written twice).
    #[inline(always)]
    fn build(
        step: Step,
        calls: Vec<ToolCall>,
        policy_of: impl Fn(&str) -> ToolPolicy,
        answered: bool,
    ) -> Self {
        let calls = calls
            .into_iter()
            .map(|call| {
                let policy = policy_of(&call.name);
                let slot = if answered && !call.arguments.is_object() {
                    Slot::Done(ToolResultMessage::malformed_arguments(&call))
                } else {
                    match policy {
                        ToolPolicy::Auto => Slot::Ready,
                        ToolPolicy::RequireApproval { .. } => Slot::Undecided,
                    }
                };
                BatchCall { call, policy, slot }
            })
            .collect();
        Batch { step, calls }
    }

    /// The calls answered `malformed` when the batch was made (see [`Batch::answered`]).
    pub(crate) fn malformed_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.calls.iter().filter_map(|entry| match &entry.slot {
            Slot::Done(result) if result.outcome == ResultOutcome::Malformed => Some(&entry.call),
            _ => None,
        })
    }

    pub(crate) fn find(&self, call_id: &CallId) -> Option<&BatchCall> {
        self.calls.iter().find(|c| c.call.id == *call_id)
    }

    pub(super) fn find_mut(&mut self, call_id: &CallId) -> Option<&mut BatchCall> {
        self.calls.iter_mut().find(|c| c.call.id == *call_id)
    }

    pub(crate) fn executing_ids(&self) -> Vec<CallId> {
        self.calls
            .iter()
            .filter(|c| c.slot == Slot::Executing)
            .map(|c| c.call.id.clone())
            .collect()
    }

    pub(super) fn all_answered(&self) -> bool {
        self.calls.iter().all(|c| matches!(c.slot, Slot::Done(_)))
    }

    /// Hands the ready calls to the host: each becomes executing; they are returned in call
    /// order.
    pub(super) fn start_ready(&mut self) -> Vec<ToolCall> {
        // Allocated at its size: growing an empty vector call by call takes the slow path.
        let ready = self
            .calls
            .iter()
            .filter(|entry| entry.slot == Slot::Ready)
            .count();
        let mut calls = Vec::with_capacity(ready);
        for entry in &mut self.calls {
            if entry.slot == Slot::Ready {
                entry.slot = Slot::Executing;
                calls.push(entry.call.clone());
            }
        }
        calls
    }

    /// Every call's result in call order once each call has one; else the batch, as it was.
    fn into_results(self) -> Result<impl Iterator<Item = ToolResultMessage>, Batch> {
        if !self.all_answered() {
            return Err(self);
        }
        Ok(self.calls.into_iter().filter_map(|entry| match entry.slot {
            Slot::Done(result) => Some(result),
            Slot::Undecided | Slot::Ready | Slot::Executing => None,
        }))
    }
}

/// Checks a `tool_done` against the executing batch without changing anything.
pub(crate) fn check_tool_call<'a>(
    batch: &'a Batch,
    call_id: &CallId,
) -> Result<&'a BatchCall, AgentError> {
    let entry = batch.find(call_id).ok_or_else(|| AgentError::UnknownCall {
        call_id: call_id.clone(),
        executing: batch.executing_ids(),
    })?;
    match &entry.slot {
        Slot::Executing => Ok(entry),
        Slot::Done(result)
            if matches!(
                result.outcome,
                ResultOutcome::Executed | ResultOutcome::Malformed
            ) =>
        {
            Err(AgentError::DuplicateOutcome {
                call_id: call_id.clone(),
            })
        }
        _ => Err(AgentError::UnknownCall {
            call_id: call_id.clone(),
            executing: batch.executing_ids(),
        }),
    }
}

impl Thread {
    /// Asks the next approval, or makes the ready calls ready to hand out, or (every call
    /// answered) closes the batch.
    pub(super) fn advance_batch(&mut self, run: Run, batch: Batch, tx: &mut Tx<'_>) -> Next {
        let undecided = batch
            .calls
            .iter()
            .find(|c| c.slot == Slot::Undecided)
            .map(|c| (c.call.clone(), c.policy));
        if let Some((call, policy)) = undecided {
            let deadline_after_ms = match policy {
                ToolPolicy::RequireApproval { deadline_after_ms } => deadline_after_ms,
                ToolPolicy::Auto => None,
            };
            let target = AwaitTarget::ToolCall {
                reason: ToolWaitReason::Permission,
                call_id: call.id,
                tool: PendingTool {
                    name: call.name,
                    arguments: call.arguments,
                },
            };
            let wait = |ticket| Wait::Call { ticket, batch };
            return self.open_wait(run, target, deadline_after_ms, wait, tx);
        }
        // Nothing undecided: the calls without a result are ready.
        match batch.into_results() {
            Ok(results) => self.after_batch(run, results, tx),
            Err(batch) => {
                for entry in batch.calls.iter().filter(|c| c.slot == Slot::Ready) {
                    tx.event(
                        &run.run_id,
                        LoopEvent::ToolStart {
                            step: batch.step,
                            call_id: entry.call.id.clone(),
                            name: entry.call.name.clone(),
                            arguments: entry.call.arguments.clone(),
                        },
                    );
                }
                Next::Continue(ActiveRun {
                    run,
                    phase: Phase::ToolsReady(batch),
                })
            }
        }
    }

    /// One `tool_done` of an executing call of `batch` (checked by the caller): records the
    /// result; closes the batch when every call is answered.
    pub(crate) fn tool_answered(
        &mut self,
        run: Run,
        mut batch: Batch,
        result: ToolResultMessage,
        tx: &mut Tx<'_>,
    ) -> Next {
        tx.event(
            &run.run_id,
            LoopEvent::ToolEnd {
                call_id: result.call_id.clone(),
                tool_name: result.tool_name.clone(),
                is_error: result.is_error,
                outcome: result.outcome,
            },
        );
        if let Some(entry) = batch.find_mut(&result.call_id) {
            entry.slot = Slot::Done(result);
        }
        match batch.into_results() {
            Ok(results) => self.after_batch(run, results, tx),
            Err(batch) => Next::Continue(ActiveRun {
                run,
                phase: Phase::ToolsOut(batch),
            }),
        }
    }

    /// Appends every result of a batch in call order, then takes the boundary.
    pub(super) fn after_batch(
        &mut self,
        run: Run,
        results: impl IntoIterator<Item = ToolResultMessage>,
        tx: &mut Tx<'_>,
    ) -> Next {
        self.append_results(tx, &run.run_id, results);
        self.boundary(run, BoundaryKind::AfterToolBatch, tx)
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolOutput;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: CallId::new(id),
            name: "t".into(),
            arguments: json!({}).into(),
        }
    }

    /// Which answer a `tool_done` gets for a call in each slot: only an executing call takes
    /// an outcome; a call that already has its own outcome is a duplicate; a call the host
    /// never got (undecided, ready, or answered for it: denied, skipped, truncated) is unknown.
    #[test]
    fn check_tool_call_answers_by_slot() {
        let executed = ToolOutput::text("executed", "ok").into_result("t");
        let slots = [
            ("executing", Slot::Executing),
            ("executed", Slot::Done(executed)),
            (
                "malformed",
                Slot::Done(ToolResultMessage::malformed(&call("malformed"), "bad")),
            ),
            (
                "denied",
                Slot::Done(ToolResultMessage::denied(&call("denied"), None)),
            ),
            (
                "skipped",
                Slot::Done(ToolResultMessage::skipped(&call("skipped"))),
            ),
            (
                "truncated",
                Slot::Done(ToolResultMessage::truncated(&call("truncated"))),
            ),
            ("undecided", Slot::Undecided),
            ("ready", Slot::Ready),
        ];
        let batch = Batch {
            step: 1,
            calls: slots
                .iter()
                .map(|(id, slot)| BatchCall {
                    call: call(id),
                    policy: ToolPolicy::Auto,
                    slot: slot.clone(),
                })
                .collect(),
        };
        let answer = |id: &str| match check_tool_call(&batch, &CallId::new(id)) {
            Ok(_) => "ok",
            Err(AgentError::DuplicateOutcome { .. }) => "duplicate_outcome",
            Err(AgentError::UnknownCall { executing, .. }) => {
                assert_eq!(executing, [CallId::new("executing")]);
                "unknown_call"
            }
            Err(other) => panic!("{id}: {other:?}"),
        };
        let got: Vec<(&str, &str)> = ["executing", "executed", "malformed", "denied", "skipped"]
            .into_iter()
            .chain(["truncated", "undecided", "ready", "absent"])
            .map(|id| (id, answer(id)))
            .collect();
        assert_eq!(
            got,
            [
                ("executing", "ok"),
                ("executed", "duplicate_outcome"),
                ("malformed", "duplicate_outcome"),
                ("denied", "unknown_call"),
                ("skipped", "unknown_call"),
                ("truncated", "unknown_call"),
                ("undecided", "unknown_call"),
                ("ready", "unknown_call"),
                ("absent", "unknown_call"),
            ]
        );
    }
}
