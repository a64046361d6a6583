//! Threads that begin with history (SPEC §8.10): the completeness rules an imported (or forked)
//! transcript must keep, and the `import` input.
//!
//! An import appends existing messages to an idle agent's transcript as one committed fact: a
//! run of its own that starts and ends in one commit, `Ended(Stopped("imported"))`, with an
//! `imported {count}` audit draft. Its events are `run_start` (carrying the messages, so a
//! reducer's transcript stays the committed one) and `run_end`.
//!
//! The rules, each with its reason:
//! - Every tool call has exactly one result, after it and before the next assistant message,
//!   in call order — *because* that is what every provider's protocol requires of the context,
//!   and what every run of the core leaves behind (§0.4).
//! - No result lacks its call — *because* a provider refuses a result it cannot pair.
//! - Message ids are unique in the thread — *because* hosts deduplicate by them.
//! - Tool calls keep the shape the loop relies on (non-blank, unique ids and names).
//!
//! A rule broken is an `InvalidInput` that names the rule and the message index, and nothing
//! changes.

use serde::{Deserialize, Serialize};

use crate::commit::AuditDraft;
use crate::error::AgentError;
use crate::ids::{CallId, RunId, ThreadId};
use crate::message::{Message, ToolCall};
use crate::run::EndCause;

use super::Agent;

/// The `stopped` reason of an import's run.
pub(crate) const IMPORTED: &str = "imported";

/// The audit kind of an import's fact, `imported {count, now_ms?}`.
pub(crate) const IMPORTED_KIND: &str = "imported";

/// The audit kind of a fork's fact, `forked_from {thread_id, version}` (SPEC §8.10).
pub(crate) const FORKED_FROM_KIND: &str = "forked_from";

/// A thread's origin: the parent it was forked from, at which version (SPEC §8.10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ForkOrigin {
    /// The parent thread.
    pub thread_id: ThreadId,
    /// The parent's version the fork holds.
    pub version: u64,
}

/// Where an incomplete transcript breaks a rule: what an import refuses and what a fork names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Incomplete {
    /// The call at `index` (an assistant message) has no result before `before` (the next
    /// assistant message's index) or the end.
    Unanswered {
        index: usize,
        call: CallId,
        before: Option<usize>,
    },
    /// The result at `index` answers `call`, which the open batch does not hold.
    NoCall { index: usize, call: CallId },
    /// The result at `index` answers `call`, whose result is already at `first`.
    Duplicate {
        index: usize,
        call: CallId,
        first: usize,
    },
    /// The result at `index` answers `call` out of call order (`expected` is next).
    OutOfOrder {
        index: usize,
        call: CallId,
        expected: CallId,
    },
    /// The result at `index` names `got` as the tool; its call was to `expected`.
    ToolName {
        index: usize,
        expected: String,
        got: String,
    },
    /// The assistant message at `index` has a bad tool call (`why`).
    Shape { index: usize, why: String },
}

impl Incomplete {
    /// The message, naming the rule and the index (`what` names the list: "import", "fork").
    pub(crate) fn describe(&self, what: &str) -> String {
        match self {
            Incomplete::Unanswered {
                index,
                call,
                before: Some(next),
            } => format!(
                "{what}: messages[{index}]: tool call {call} has no result before the next \
                 assistant message (messages[{next}]); every tool call needs exactly one result \
                 after it and before the next assistant message"
            ),
            Incomplete::Unanswered {
                index,
                call,
                before: None,
            } => format!(
                "{what}: messages[{index}]: tool call {call} has no result; every tool call \
                 needs exactly one result after it and before the next assistant message"
            ),
            Incomplete::NoCall { index, call } => format!(
                "{what}: messages[{index}]: the tool result for call {call} has no call before \
                 it; no result may lack its call"
            ),
            Incomplete::Duplicate { index, call, first } => format!(
                "{what}: messages[{index}]: a second result for call {call} (its result is \
                 messages[{first}]); every tool call has exactly one result"
            ),
            Incomplete::OutOfOrder {
                index,
                call,
                expected,
            } => format!(
                "{what}: messages[{index}]: the result for call {call} comes before the result \
                 for call {expected}; results follow their calls in call order"
            ),
            Incomplete::ToolName {
                index,
                expected,
                got,
            } => format!(
                "{what}: messages[{index}]: the tool result names tool {got:?}, but its call is \
                 to {expected:?}"
            ),
            Incomplete::Shape { index, why } => format!("{what}: messages[{index}]: {why}"),
        }
    }
}

/// Checks the completeness rules over `messages` (indexes are into `messages`, offset by
/// `base` so an error names the index the caller's list has).
pub(crate) fn check_complete(messages: &[Message], base: usize) -> Result<(), Incomplete> {
    // The batch of the latest assistant message: its calls, its index, and how many of them
    // have their result.
    let mut open: Vec<ToolCall> = Vec::new();
    let mut open_at = 0;
    let mut answered = 0;
    // Where each answered call of the open batch has its result.
    let mut results: Vec<usize> = Vec::new();
    for (offset, message) in messages.iter().enumerate() {
        let index = base + offset;
        match message {
            Message::Assistant(answer) => {
                if let Some(call) = open.get(answered) {
                    return Err(Incomplete::Unanswered {
                        index: open_at,
                        call: call.id.clone(),
                        before: Some(index),
                    });
                }
                answer
                    .check_shape()
                    .map_err(|why| Incomplete::Shape { index, why })?;
                open = answer.tool_calls().collect();
                open_at = index;
                answered = 0;
                results.clear();
            }
            Message::ToolResult(result) => match open.get(answered) {
                Some(call) if call.id == result.call_id => {
                    if call.name != result.tool_name {
                        return Err(Incomplete::ToolName {
                            index,
                            expected: call.name.to_string(),
                            got: result.tool_name.to_string(),
                        });
                    }
                    answered += 1;
                    results.push(index);
                }
                Some(expected) if open.iter().skip(answered).any(|c| c.id == result.call_id) => {
                    return Err(Incomplete::OutOfOrder {
                        index,
                        call: result.call_id.clone(),
                        expected: expected.id.clone(),
                    });
                }
                _ => {
                    let first = open
                        .iter()
                        .take(answered)
                        .zip(&results)
                        .find(|(call, _)| call.id == result.call_id);
                    if let Some((_, &first)) = first {
                        return Err(Incomplete::Duplicate {
                            index,
                            call: result.call_id.clone(),
                            first,
                        });
                    }
                    return Err(Incomplete::NoCall {
                        index,
                        call: result.call_id.clone(),
                    });
                }
            },
            Message::User(_) | Message::System(_) => {}
        }
    }
    match open.get(answered) {
        Some(call) => Err(Incomplete::Unanswered {
            index: open_at,
            call: call.id.clone(),
            before: None,
        }),
        None => Ok(()),
    }
}

/// The `imported {count, now_ms}` draft.
pub(crate) fn imported_draft(count: usize, now_ms: u64) -> AuditDraft {
    AuditDraft::Custom {
        kind: IMPORTED_KIND.to_owned(),
        payload: serde_json::json!({ "count": count, "now_ms": now_ms }),
    }
}

impl Agent {
    /// `import` (see the module docs): checks, then commits the messages as one ended run.
    pub(crate) fn on_import(&mut self, messages: Vec<Message>) -> Result<RunId, AgentError> {
        if let Some(active) = &self.active {
            return Err(AgentError::Busy {
                active_run: active.run.run_id().clone(),
            });
        }
        if messages.is_empty() {
            return Err(AgentError::invalid(
                "import: no messages; give a non-empty `messages` list",
            ));
        }
        check_complete(&messages, 0).map_err(|e| AgentError::invalid(e.describe("import")))?;
        self.thread
            .check_new_ids(messages.iter().map(Message::id), "import: messages")?;
        let run_id = self.mint_run_id(None)?;
        let draft = imported_draft(messages.len(), self.thread.clock_ms);
        self.commit_imported(
            run_id.clone(),
            messages,
            draft,
            EndCause::Stopped(IMPORTED.to_owned()),
        );
        Ok(run_id)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::message::{AssistantBlock, AssistantMessage, StopReason, ToolResultMessage};

    fn calls(ids: &[&str]) -> Message {
        Message::from(AssistantMessage::new(
            ids.iter()
                .map(|id| AssistantBlock::tool_call(*id, "t", json!({})))
                .collect(),
            StopReason::ToolUse,
        ))
    }

    fn result(id: &str) -> Message {
        Message::from(ToolResultMessage::synthetic(
            CallId::new(id),
            "t",
            crate::message::ResultOutcome::Executed,
            "ok",
        ))
    }

    #[test]
    fn each_rule_names_its_index() {
        let user = Message::user("hi");
        let ok = [
            user.clone(),
            calls(&["a", "b"]),
            result("a"),
            result("b"),
            Message::from(AssistantMessage::text("done")),
        ];
        assert_eq!(check_complete(&ok, 0), Ok(()));
        let cases: Vec<(Vec<Message>, Incomplete)> = vec![
            (
                vec![calls(&["a"])],
                Incomplete::Unanswered {
                    index: 0,
                    call: "a".into(),
                    before: None,
                },
            ),
            (
                vec![calls(&["a"]), Message::from(AssistantMessage::text("x"))],
                Incomplete::Unanswered {
                    index: 0,
                    call: "a".into(),
                    before: Some(1),
                },
            ),
            (
                vec![user.clone(), result("a")],
                Incomplete::NoCall {
                    index: 1,
                    call: "a".into(),
                },
            ),
            (
                vec![calls(&["a", "b"]), result("b"), result("a")],
                Incomplete::OutOfOrder {
                    index: 1,
                    call: "b".into(),
                    expected: "a".into(),
                },
            ),
            (
                // A second result for an answered call breaks "exactly one result", not "no
                // result lacks its call".
                vec![calls(&["a"]), result("a"), result("a")],
                Incomplete::Duplicate {
                    index: 2,
                    call: "a".into(),
                    first: 1,
                },
            ),
        ];
        for (messages, want) in cases {
            assert_eq!(
                check_complete(&messages, 0),
                Err(want.clone()),
                "{messages:?}"
            );
            assert!(want.describe("import").contains("messages["));
        }
        assert_eq!(
            check_complete(&[result("z")], 7),
            Err(Incomplete::NoCall {
                index: 7,
                call: "z".into()
            })
        );
    }
}
