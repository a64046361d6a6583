//! What the host supplies: the model ([`Model`]) and the tools ([`Tools`]), and how a failed
//! step reports itself ([`StepError`]). The store is any [`runcore::store::BoxedStore`]
//! (see [`crate::open_store`] and [`crate::shared`]).

use std::future::Future;
use std::pin::Pin;

use runcore::{AssistantMessage, RunId, ThreadId, ToolCall, ToolOutput};

/// A boxed future, so that [`Model`] and [`Tools`] stay object-safe (one worker hosts them as
/// `Arc<dyn Model>` / `Arc<dyn Tools>`).
pub type StepFuture<T> = Pin<Box<dyn Future<Output = Result<T, StepError>> + Send + 'static>>;

/// Why a model or tool step failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// Worth another try (a timeout, a 503, a dropped connection): the engine retries the
    /// step by the object's retry policy; once the attempts are spent the failure becomes
    /// data (`model_failed` with `code`, or an error tool result).
    #[error("{code}: {message}")]
    Transient {
        /// A stable code (the provider's, or the host's).
        code: String,
        /// For people.
        message: String,
    },
    /// Not worth retrying (a 400, a refused request): becomes data at once.
    #[error("{code}: {message}")]
    Permanent {
        /// A stable code.
        code: String,
        /// For people.
        message: String,
    },
}

impl StepError {
    /// A transient failure.
    pub fn transient(code: impl Into<String>, message: impl Into<String>) -> Self {
        StepError::Transient {
            code: code.into(),
            message: message.into(),
        }
    }

    /// A permanent failure.
    pub fn permanent(code: impl Into<String>, message: impl Into<String>) -> Self {
        StepError::Permanent {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// One model call of a thread, owned (a step runs inside a journaled closure that outlives the
/// borrow of the agent): the core's one model-call shape, [`runcore::ModelCall`] (the model
/// context with a compaction's summary first, the tools' definitions), and the thread it
/// belongs to. Messages are shared (`Arc`), so the copy costs reference counts.
#[derive(Debug, Clone)]
pub struct ModelCall {
    /// The thread.
    pub thread_id: ThreadId,
    /// The call: run, step, system prompt, model context and tools, as the driver's
    /// full-context `call_model` line and the provider codecs have it.
    pub call: runcore::ModelCall,
}

/// The host's model. Called once per `call_model` step, inside a journaled step: a retry of
/// the invocation after a crash that happens before the answer was journaled calls it again,
/// so a model call must be safe to repeat (it is a read: a second answer replaces the first,
/// which nobody saw).
pub trait Model: Send + Sync + 'static {
    /// Answers one model call.
    fn call(&self, call: ModelCall) -> StepFuture<AssistantMessage>;
}

/// The host's tools. Called once per tool call, inside a journaled step. A crash between a
/// tool's effect and the journal entry of its result runs the call again, so a tool must be
/// idempotent by `"{run_id}:{call_id}"` (SPEC §8.7), or answer `interrupted` when it sees a
/// second attempt it cannot make safe.
pub trait Tools: Send + Sync + 'static {
    /// Runs one call of run `run_id`.
    fn execute(&self, run_id: RunId, call: ToolCall) -> StepFuture<ToolOutput>;
}
