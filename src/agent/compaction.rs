//! Compaction (SPEC §8.9): a bounded model context over an append-only transcript.
//!
//! The host decides when (it measures a `CallModel`'s context and, instead of calling the
//! model, compacts); the core keeps the history and the pairing rules. After a compaction the
//! model context is `[summary] ++ transcript[keep_from..]`, and the transcript itself is never
//! rewritten: every message stays committed and readable.
//!
//! Rules, each with its reason:
//! - Only while the active run's model call is out and nothing of its answer has arrived —
//!   *because* a compaction replaces that call: the same step is called again over the new
//!   context, and an answer already streaming belongs to the old one.
//! - `keep_from` grows with every compaction — *because* a later summary stands for
//!   everything an earlier one did, and the context never takes back messages it dropped.
//! - `keep_from` is at most the transcript's length — *because* it indexes the transcript.
//! - `transcript[keep_from]` is not a tool result, and no tool call before `keep_from` has its
//!   result at or after it — *because* every tool call in the model context must have its
//!   result there and every result its call: a provider rejects a context that splits them.
//!
//! The compaction is a committed fact (a Running commit with no messages and a `compacted`
//! audit draft), so recovery, continue and snapshots rebuild the same model context.

use std::sync::Arc;

use crate::error::AgentError;
use crate::message::{Message, UserMessage};

use super::Agent;
use super::run_loop::{ActiveRun, Phase, Transition};
use super::thread::Compaction;

/// Why `keep_from` cannot be where the model context starts in `transcript`, if it cannot
/// (the rules of the module docs; `previous` is the current compaction's `keep_from`).
pub(crate) fn keep_from_violation(
    transcript: &[Message],
    previous: Option<usize>,
    keep_from: usize,
) -> Option<String> {
    if let Some(previous) = previous
        && keep_from <= previous
    {
        return Some(format!(
            "compact: keep_from {keep_from} must be greater than the previous compaction's \
             keep_from {previous}"
        ));
    }
    if keep_from > transcript.len() {
        return Some(format!(
            "compact: keep_from {keep_from} is past the end of the transcript ({} messages)",
            transcript.len()
        ));
    }
    if let Some(Message::ToolResult(result)) = transcript.get(keep_from) {
        return Some(format!(
            "compact: keep_from {keep_from} is not at a complete boundary: message {keep_from} \
             is the tool_result of call {}, which must stay with its call",
            result.call_id
        ));
    }
    // Batches close in order, so only the last assistant message before `keep_from` can have a
    // result at or after it: its results are the tool results that follow it.
    let head = transcript.get(..keep_from).unwrap_or_default();
    if let Some((at, Message::Assistant(answer))) = head
        .iter()
        .enumerate()
        .rev()
        .find(|(_, m)| matches!(m, Message::Assistant(_)))
    {
        let results_before = head
            .get(at + 1..)
            .unwrap_or_default()
            .iter()
            .filter(|m| matches!(m, Message::ToolResult(_)))
            .count();
        if let Some(call) = answer.tool_calls().nth(results_before) {
            return Some(format!(
                "compact: keep_from {keep_from} is not at a complete boundary: tool call {} \
                 (message {at}) has its result at or after it",
                call.id
            ));
        }
    }
    None
}

impl Agent {
    /// Where the model context's transcript part begins: the latest compaction's `keep_from`,
    /// 0 when the thread was never compacted (SPEC §8.9).
    pub fn context_start(&self) -> usize {
        self.thread.context_start()
    }

    /// The latest compaction of the thread, if any.
    pub fn compaction(&self) -> Option<&Compaction> {
        self.thread.compaction.as_ref()
    }

    /// The transcript from the context start on.
    pub(crate) fn context_tail(&self) -> &[Message] {
        self.thread.context_tail()
    }

    pub(crate) fn set_compaction(&mut self, compaction: Option<Compaction>) {
        self.thread.compaction = compaction;
    }

    pub(super) fn on_compact(
        &mut self,
        summary: UserMessage,
        keep_from: usize,
    ) -> Result<(), AgentError> {
        self.transition(|thread, active, tx| match active {
            Some(ActiveRun {
                run,
                phase:
                    phase @ Phase::ModelOut {
                        streamed: false, ..
                    },
            }) => {
                let checked = super::check_user_message(&summary, "the compaction summary")
                    .and_then(|()| {
                        let previous = thread.compaction.as_ref().map(Compaction::keep_from);
                        match keep_from_violation(&thread.messages, previous, keep_from) {
                            Some(why) => Err(AgentError::invalid(why)),
                            None => Ok(()),
                        }
                    });
                match checked {
                    Ok(()) => {
                        let summary = Arc::new(summary);
                        Transition::Moved(thread.compacted(run, keep_from, summary, tx))
                    }
                    Err(error) => Transition::Kept(Some(ActiveRun { run, phase }), Err(error)),
                }
            }
            active => {
                let actual = match &active {
                    None => "no run is active".to_owned(),
                    Some(active) => {
                        format!("run {}: {}", active.run.run_id(), active.phase.describe())
                    }
                };
                let error = AgentError::state(
                    "the active run's model call out, with nothing of its answer arrived",
                    actual,
                );
                Transition::Kept(active, Err(error))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AssistantBlock, AssistantMessage, StopReason, ToolOutput};
    use serde_json::json;

    fn calls(ids: &[&str]) -> Message {
        let content = ids
            .iter()
            .map(|id| AssistantBlock::tool_call(*id, "t", json!({})))
            .collect();
        Message::Assistant(Arc::new(AssistantMessage::new(
            content,
            StopReason::ToolUse,
        )))
    }

    fn result(id: &str) -> Message {
        Message::from(ToolOutput::text(id, "ok").into_result("t"))
    }

    #[test]
    fn keep_from_rules_each_name_their_rule() {
        // user, assistant(a, b), result a, system, result b, assistant text, user
        let transcript = vec![
            Message::user("go"),
            calls(&["a", "b"]),
            result("a"),
            Message::system("context"),
            result("b"),
            Message::Assistant(Arc::new(AssistantMessage::text("done"))),
            Message::user("more"),
        ];
        let verdict = |previous, keep_from| keep_from_violation(&transcript, previous, keep_from);
        for ok in [0, 1, 5, 6, 7] {
            assert_eq!(verdict(None, ok), None, "keep_from {ok}");
        }
        assert!(verdict(None, 2).unwrap().contains("tool_result of call a"));
        assert!(verdict(None, 4).unwrap().contains("tool_result of call b"));
        assert!(
            verdict(None, 3)
                .unwrap()
                .contains("tool call b (message 1) has its result at or after it")
        );
        assert!(verdict(None, 8).unwrap().contains("past the end"));
        assert!(verdict(Some(5), 5).unwrap().contains("greater than"));
        assert!(verdict(Some(5), 1).unwrap().contains("greater than"));
        assert_eq!(verdict(Some(5), 6), None);
    }
}
