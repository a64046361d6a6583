//! The run lifecycle (SPEC §3): [`RunState`], [`EndCause`], [`Failure`], [`RunDisposition`].
//!
//! `RunState` is the single authority on where a run is. Nothing beside it stores a
//! `status` string or an `is_done` flag; those are derived.
//!
//! | from \ to  | Running | Awaiting | Ended(_) |
//! |------------|---------|----------|----------|
//! | (no fact)  | yes     | yes      | yes      |
//! | Running    | yes (per-step progress commit) | yes | yes |
//! | Awaiting   | yes (accepted resume) | yes (replaces the ticket) | yes |
//! | Ended(_)   | no      | no       | no (not even the same Ended) |
//!
//! `permits(next) == !is_terminal()`: a run's first fact may be any state (a queued run that is
//! cancelled before it executes is born `Ended`), and `Ended` absorbs everything. The table is
//! snapshot-tested so any change to it is a reviewed diff.

use serde::{Deserialize, Serialize};

use crate::ids::{RunId, ThreadId};
use crate::resume::ResumeTicket;
use crate::schema_via::schema_via_repr;

/// Where a run is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "RunStateRepr", from = "RunStateRepr")]
pub enum RunState {
    /// Executing: a model call, tool batch or boundary is in progress.
    Running,
    /// Waiting on a resume ticket (human in the loop, pause).
    Awaiting,
    /// Finished; absorbing.
    Ended(EndCause),
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum RunStateRepr {
    Running,
    Awaiting,
    Ended { cause: EndCause },
}

impl From<RunState> for RunStateRepr {
    fn from(state: RunState) -> Self {
        match state {
            RunState::Running => RunStateRepr::Running,
            RunState::Awaiting => RunStateRepr::Awaiting,
            RunState::Ended(cause) => RunStateRepr::Ended { cause },
        }
    }
}

impl From<RunStateRepr> for RunState {
    fn from(repr: RunStateRepr) -> Self {
        match repr {
            RunStateRepr::Running => RunState::Running,
            RunStateRepr::Awaiting => RunState::Awaiting,
            RunStateRepr::Ended { cause } => RunState::Ended(cause),
        }
    }
}

schema_via_repr!(RunState => RunStateRepr, "RunState");

impl RunState {
    /// True for `Ended(_)`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, RunState::Ended(_))
    }

    /// Whether a commit may move a run from `self` to `next`: always, unless `self` is ended.
    pub fn permits(&self, next: &RunState) -> bool {
        let _ = next;
        !self.is_terminal()
    }

    /// The end cause, when ended.
    pub fn end_cause(&self) -> Option<&EndCause> {
        match self {
            RunState::Ended(cause) => Some(cause),
            _ => None,
        }
    }
}

/// Why a run ended. The end of a run, failure included, is data, never an `Err`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "EndCauseRepr", from = "EndCauseRepr")]
pub enum EndCause {
    /// The model stopped with nothing left to do.
    NaturalEnd,
    /// The step budget was spent.
    MaxSteps,
    /// Cancelled from outside (abort, cancel of a wait).
    Cancelled,
    /// Ended by a host policy decision (e.g. a budget), with its reason.
    Stopped(String),
    /// Failed.
    Error(Failure),
    /// An external effect's outcome cannot be known; never to be presented as success.
    Indeterminate,
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum EndCauseRepr {
    NaturalEnd,
    MaxSteps,
    Cancelled,
    Stopped { reason: String },
    Error { failure: Failure },
    Indeterminate,
}

impl From<EndCause> for EndCauseRepr {
    fn from(cause: EndCause) -> Self {
        match cause {
            EndCause::NaturalEnd => EndCauseRepr::NaturalEnd,
            EndCause::MaxSteps => EndCauseRepr::MaxSteps,
            EndCause::Cancelled => EndCauseRepr::Cancelled,
            EndCause::Stopped(reason) => EndCauseRepr::Stopped { reason },
            EndCause::Error(failure) => EndCauseRepr::Error { failure },
            EndCause::Indeterminate => EndCauseRepr::Indeterminate,
        }
    }
}

impl From<EndCauseRepr> for EndCause {
    fn from(repr: EndCauseRepr) -> Self {
        match repr {
            EndCauseRepr::NaturalEnd => EndCause::NaturalEnd,
            EndCauseRepr::MaxSteps => EndCause::MaxSteps,
            EndCauseRepr::Cancelled => EndCause::Cancelled,
            EndCauseRepr::Stopped { reason } => EndCause::Stopped(reason),
            EndCauseRepr::Error { failure } => EndCause::Error(failure),
            EndCauseRepr::Indeterminate => EndCause::Indeterminate,
        }
    }
}

schema_via_repr!(EndCause => EndCauseRepr, "EndCause");

impl EndCause {
    /// The snake_case tag used on the wire (`natural_end`, `stopped`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            EndCause::NaturalEnd => "natural_end",
            EndCause::MaxSteps => "max_steps",
            EndCause::Cancelled => "cancelled",
            EndCause::Stopped(_) => "stopped",
            EndCause::Error(_) => "error",
            EndCause::Indeterminate => "indeterminate",
        }
    }
}

impl std::fmt::Display for EndCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndCause::Stopped(reason) => write!(f, "stopped: {reason}"),
            EndCause::Error(Failure::Inference { code, message }) => {
                write!(f, "error: inference {code}: {message}")
            }
            EndCause::Error(failure) => write!(f, "error: {}", failure.code()),
            other => f.write_str(other.kind()),
        }
    }
}

/// Why a run failed. Branch on [`Failure::code`], never on message text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Failure {
    /// The model provider failed.
    Inference {
        /// The provider's stable error code.
        code: String,
        /// Human-readable text; not for branching.
        message: String,
    },
    /// A capability bound (e.g. a context or tool limit) was hit.
    CapabilityBound,
    /// The run's committed state conflicted with what it expected.
    StateConflict,
}

impl Failure {
    /// The stable code: the provider's code for `Inference`, else `capability_bound` or
    /// `state_conflict`.
    pub fn code(&self) -> &str {
        match self {
            Failure::Inference { code, .. } => code,
            Failure::CapabilityBound => "capability_bound",
            Failure::StateConflict => "state_conflict",
        }
    }
}

/// What one commit says about its run. Only `Awaiting` carries a ticket, and it always does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "RunDispositionRepr", from = "RunDispositionRepr")]
pub enum RunDisposition {
    /// The run is executing.
    Running {
        /// The run.
        run_id: RunId,
    },
    /// The run waits on this ticket (which names the run).
    Awaiting(Box<ResumeTicket>),
    /// The run ended.
    Ended {
        /// The run.
        run_id: RunId,
        /// Why it ended.
        cause: EndCause,
    },
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum RunDispositionRepr {
    Running { run_id: RunId },
    Awaiting { ticket: Box<ResumeTicket> },
    Ended { run_id: RunId, cause: EndCause },
}

impl From<RunDisposition> for RunDispositionRepr {
    fn from(d: RunDisposition) -> Self {
        match d {
            RunDisposition::Running { run_id } => RunDispositionRepr::Running { run_id },
            RunDisposition::Awaiting(ticket) => RunDispositionRepr::Awaiting { ticket },
            RunDisposition::Ended { run_id, cause } => RunDispositionRepr::Ended { run_id, cause },
        }
    }
}

impl From<RunDispositionRepr> for RunDisposition {
    fn from(r: RunDispositionRepr) -> Self {
        match r {
            RunDispositionRepr::Running { run_id } => RunDisposition::Running { run_id },
            RunDispositionRepr::Awaiting { ticket } => RunDisposition::Awaiting(ticket),
            RunDispositionRepr::Ended { run_id, cause } => RunDisposition::Ended { run_id, cause },
        }
    }
}

schema_via_repr!(RunDisposition => RunDispositionRepr, "RunDisposition");

impl RunDisposition {
    /// The run this disposition is about.
    pub fn run_id(&self) -> &RunId {
        match self {
            RunDisposition::Running { run_id } | RunDisposition::Ended { run_id, .. } => run_id,
            RunDisposition::Awaiting(ticket) => &ticket.run_id,
        }
    }

    /// The run state this disposition records.
    pub fn state(&self) -> RunState {
        match self {
            RunDisposition::Running { .. } => RunState::Running,
            RunDisposition::Awaiting(_) => RunState::Awaiting,
            RunDisposition::Ended { cause, .. } => RunState::Ended(cause.clone()),
        }
    }

    /// The ticket, when awaiting.
    pub fn ticket(&self) -> Option<&ResumeTicket> {
        match self {
            RunDisposition::Awaiting(ticket) => Some(ticket),
            _ => None,
        }
    }
}

/// The committed record of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    /// The run.
    pub id: RunId,
    /// The thread it belongs to.
    pub thread_id: ThreadId,
    /// Its latest committed state.
    pub state: RunState,
    /// How many commits of this run are stored (SPEC §7.1): the `ordinal` of its next commit.
    #[serde(default)]
    pub commits: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ended_is_absorbing_and_the_rest_permit_everything() {
        let ended = RunState::Ended(EndCause::NaturalEnd);
        assert!(!ended.permits(&RunState::Running));
        assert!(!ended.permits(&ended.clone()));
        assert!(RunState::Running.permits(&RunState::Running));
        assert!(RunState::Awaiting.permits(&ended));
    }

    #[test]
    fn wire_shapes() {
        assert_eq!(
            serde_json::to_value(RunState::Ended(EndCause::Stopped("budget".into()))).unwrap(),
            json!({"type":"ended","cause":{"type":"stopped","reason":"budget"}})
        );
        assert_eq!(
            serde_json::to_value(EndCause::Error(Failure::Inference {
                code: "rate_limit".into(),
                message: "slow down".into()
            }))
            .unwrap(),
            json!({"type":"error","failure":{"type":"inference","code":"rate_limit","message":"slow down"}})
        );
    }

    #[test]
    fn impossible_dispositions_do_not_deserialize() {
        let no_ticket = json!({"type":"awaiting","run_id":"r"});
        assert!(serde_json::from_value::<RunDisposition>(no_ticket).is_err());
        let running_with_ticket = json!({"type":"running","run_id":"r","ticket":{}});
        assert!(serde_json::from_value::<RunDisposition>(running_with_ticket).is_err());
        let ended_without_cause = json!({"type":"ended","run_id":"r"});
        assert!(serde_json::from_value::<RunDisposition>(ended_without_cause).is_err());
    }

    /// The `Display` text is what the CLI and the driver's people-facing lines show; every
    /// variant's text is pinned, and the match breaks the build when a variant is added.
    #[test]
    fn end_cause_display_text_is_stable() {
        let cases = [
            (EndCause::NaturalEnd, "natural_end"),
            (EndCause::MaxSteps, "max_steps"),
            (EndCause::Cancelled, "cancelled"),
            (
                EndCause::Stopped("budget exhausted".into()),
                "stopped: budget exhausted",
            ),
            (
                EndCause::Error(Failure::Inference {
                    code: "rate_limit".into(),
                    message: "slow down".into(),
                }),
                "error: inference rate_limit: slow down",
            ),
            (
                EndCause::Error(Failure::CapabilityBound),
                "error: capability_bound",
            ),
            (
                EndCause::Error(Failure::StateConflict),
                "error: state_conflict",
            ),
            (EndCause::Indeterminate, "indeterminate"),
        ];
        for (cause, text) in &cases {
            match cause {
                EndCause::NaturalEnd
                | EndCause::MaxSteps
                | EndCause::Cancelled
                | EndCause::Stopped(_)
                | EndCause::Indeterminate
                | EndCause::Error(
                    Failure::Inference { .. } | Failure::CapabilityBound | Failure::StateConflict,
                ) => {}
            }
            assert_eq!(cause.to_string(), *text, "{cause:?}");
        }
    }

    #[test]
    fn failure_codes_are_stable() {
        assert_eq!(Failure::CapabilityBound.code(), "capability_bound");
        assert_eq!(Failure::StateConflict.code(), "state_conflict");
        let f = Failure::Inference {
            code: "overloaded".into(),
            message: "x".into(),
        };
        assert_eq!(f.code(), "overloaded");
    }
}
