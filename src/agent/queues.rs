//! The queue-boundary rules (SPEC §8.2), as pure functions.
//!
//! Two queues feed a run from outside: *steering* (corrections to the current task) and
//! *follow-ups* (more work for when the run is done). A queued message enters the transcript
//! only at a complete protocol boundary, decided by [`decide_boundary`]:
//!
//! 1. An abort or stop request ends the run first — *because* a cancelled run must not act on
//!    more input; the abort check comes before any queue is taken.
//! 2. A pause request is honoured next, before any queue is taken — *because* the host asked
//!    the run to wait, whatever is queued.
//! 3. A text stop with both queues empty is a natural end.
//! 4. Once the step budget is spent, nothing is taken — *because* no model call would answer
//!    it; the queues come back in `run_end.unconsumed`.
//! 5. Steering is taken first, FIFO — *because* it corrects the current task.
//! 6. Follow-ups are taken only after a text stop with no steering — *because* they mean
//!    "when you are done".
//!
//! Steering enters only at a boundary (after a whole tool batch, or after a text stop) —
//! *because* a user message between a tool call and its result breaks every provider's
//! protocol. Queued input of a run never enters another run: when a run finishes, both queues
//! are drained into `run_end.unconsumed` (nothing is silently lost) and nothing is injected
//! anywhere. `steer` / `follow_up` while no run is active, or after the run's input closed, is
//! `NotAccepting`.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::commit::WaitBoundary;
use crate::message::Message;
use crate::run::EndCause;

/// How many messages one boundary takes from a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum QueueMode {
    /// Every queued message at once (the default).
    #[default]
    All,
    /// The oldest queued message only.
    OneAtATime,
}

/// The two input queues of one run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Queues {
    /// Steering messages, oldest first.
    pub steering: VecDeque<Message>,
    /// Follow-up messages, oldest first.
    pub follow_ups: VecDeque<Message>,
}

impl Queues {
    /// Empties both queues, steering first, for `run_end.unconsumed`.
    pub(crate) fn drain_unconsumed(&mut self) -> Vec<Message> {
        self.steering
            .drain(..)
            .chain(self.follow_ups.drain(..))
            .collect()
    }
}

/// Takes messages from the front of `queue` according to `mode`.
pub(crate) fn take_queued(queue: &mut VecDeque<Message>, mode: QueueMode) -> Vec<Message> {
    match mode {
        QueueMode::All => queue.drain(..).collect(),
        QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
    }
}

/// Which boundary the run reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum BoundaryKind {
    /// The model answered without tool calls (stop, length or tool_use without calls).
    TextStop,
    /// Every result of a tool batch is in.
    AfterToolBatch,
}

/// The public name of a boundary, as an agent's `run_awaiting` draft records it.
impl From<BoundaryKind> for WaitBoundary {
    fn from(kind: BoundaryKind) -> Self {
        match kind {
            BoundaryKind::TextStop => WaitBoundary::TextStop,
            BoundaryKind::AfterToolBatch => WaitBoundary::AfterToolBatch,
        }
    }
}

/// The boundary a recorded `run_awaiting` draft names.
impl From<WaitBoundary> for BoundaryKind {
    fn from(boundary: WaitBoundary) -> Self {
        match boundary {
            WaitBoundary::TextStop => BoundaryKind::TextStop,
            WaitBoundary::AfterToolBatch => BoundaryKind::AfterToolBatch,
        }
    }
}

/// What the run knows at a boundary.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BoundaryInput {
    /// The boundary reached.
    pub kind: BoundaryKind,
    /// The end an abort or stop asked for, if any.
    pub end_requested: Option<EndCause>,
    /// Whether a pause was asked for.
    pub pause_requested: bool,
    /// Queued steering messages.
    pub steering: usize,
    /// Queued follow-ups.
    pub follow_ups: usize,
    /// Model calls made so far.
    pub steps: u32,
    /// The step budget.
    pub max_steps: u32,
}

/// What to do at a boundary.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BoundaryDecision {
    /// End the run.
    Finish(EndCause),
    /// Commit a `Pause(Manual)` ticket and wait.
    Pause,
    /// Take these queues (by mode) and call the model again.
    Continue {
        /// Take steering.
        take_steering: bool,
        /// Take follow-ups.
        take_follow_ups: bool,
    },
}

/// The boundary rules, in their order (see the module docs).
pub(crate) fn decide_boundary(input: &BoundaryInput) -> BoundaryDecision {
    if let Some(cause) = &input.end_requested {
        return BoundaryDecision::Finish(cause.clone());
    }
    if input.pause_requested {
        return BoundaryDecision::Pause;
    }
    if input.kind == BoundaryKind::TextStop && input.steering == 0 && input.follow_ups == 0 {
        return BoundaryDecision::Finish(EndCause::NaturalEnd);
    }
    if input.steps >= input.max_steps {
        return BoundaryDecision::Finish(EndCause::MaxSteps);
    }
    BoundaryDecision::Continue {
        take_steering: input.steering > 0,
        take_follow_ups: input.kind == BoundaryKind::TextStop && input.steering == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(kind: BoundaryKind) -> BoundaryInput {
        BoundaryInput {
            kind,
            end_requested: None,
            pause_requested: false,
            steering: 0,
            follow_ups: 0,
            steps: 1,
            max_steps: 5,
        }
    }

    #[test]
    fn abort_wins_over_everything() {
        let i = BoundaryInput {
            end_requested: Some(EndCause::Cancelled),
            pause_requested: true,
            steering: 3,
            ..input(BoundaryKind::AfterToolBatch)
        };
        assert_eq!(
            decide_boundary(&i),
            BoundaryDecision::Finish(EndCause::Cancelled)
        );
    }

    #[test]
    fn pause_comes_before_queues_and_natural_end() {
        let i = BoundaryInput {
            pause_requested: true,
            ..input(BoundaryKind::TextStop)
        };
        assert_eq!(decide_boundary(&i), BoundaryDecision::Pause);
    }

    #[test]
    fn text_stop_with_nothing_queued_is_natural_even_on_the_last_step() {
        let i = BoundaryInput {
            steps: 5,
            ..input(BoundaryKind::TextStop)
        };
        assert_eq!(
            decide_boundary(&i),
            BoundaryDecision::Finish(EndCause::NaturalEnd)
        );
    }

    #[test]
    fn spent_budget_takes_nothing() {
        let i = BoundaryInput {
            steps: 5,
            steering: 1,
            ..input(BoundaryKind::AfterToolBatch)
        };
        assert_eq!(
            decide_boundary(&i),
            BoundaryDecision::Finish(EndCause::MaxSteps)
        );
    }

    #[test]
    fn follow_ups_only_after_a_text_stop_without_steering() {
        let after_batch = BoundaryInput {
            follow_ups: 2,
            ..input(BoundaryKind::AfterToolBatch)
        };
        assert_eq!(
            decide_boundary(&after_batch),
            BoundaryDecision::Continue {
                take_steering: false,
                take_follow_ups: false
            }
        );
        let with_steering = BoundaryInput {
            steering: 1,
            follow_ups: 2,
            ..input(BoundaryKind::TextStop)
        };
        assert_eq!(
            decide_boundary(&with_steering),
            BoundaryDecision::Continue {
                take_steering: true,
                take_follow_ups: false
            }
        );
        let only_follow = BoundaryInput {
            follow_ups: 2,
            ..input(BoundaryKind::TextStop)
        };
        assert_eq!(
            decide_boundary(&only_follow),
            BoundaryDecision::Continue {
                take_steering: false,
                take_follow_ups: true
            }
        );
    }

    #[test]
    fn one_at_a_time_takes_the_oldest() {
        let mut q: VecDeque<Message> = ["a", "b"].into_iter().map(Message::user).collect();
        assert_eq!(
            take_queued(&mut q, QueueMode::OneAtATime),
            vec![Message::user("a")]
        );
        assert_eq!(
            take_queued(&mut q, QueueMode::All),
            vec![Message::user("b")]
        );
        assert!(take_queued(&mut q, QueueMode::All).is_empty());
    }
}
