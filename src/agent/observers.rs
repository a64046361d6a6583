//! A small fan-out helper: deliver each drained event to several observers.
//!
//! [`Observers::deliver`] reduces the state first, then shows every observer the updated state
//! and the event, in subscription order. An observer that fails does not stop the others; its
//! failure is recorded in [`AgentState::diagnostics`] as `"observer: <message>"`.

use super::events::AgentEvent;
use super::reducer::{AgentState, reduce};

/// Something that watches events (a UI, a logger, a metrics sink).
pub trait Observer {
    /// Sees `event` after `state` was updated by it. An `Err` is recorded in diagnostics.
    fn observe(&mut self, state: &AgentState, event: &AgentEvent) -> Result<(), String>;
}

impl<F> Observer for F
where
    F: FnMut(&AgentState, &AgentEvent) -> Result<(), String>,
{
    fn observe(&mut self, state: &AgentState, event: &AgentEvent) -> Result<(), String> {
        self(state, event)
    }
}

/// A subscription handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObserverId(u64);

/// The observers of one agent's events.
#[derive(Default)]
pub struct Observers {
    next_id: u64,
    entries: Vec<(ObserverId, Box<dyn Observer>)>,
}

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observers")
            .field("subscribed", &self.entries.len())
            .finish()
    }
}

impl Observers {
    /// No observers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an observer; it sees every event delivered from now on.
    pub fn subscribe(&mut self, observer: impl Observer + 'static) -> ObserverId {
        let id = ObserverId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        self.entries.push((id, Box::new(observer)));
        id
    }

    /// Removes an observer; false if it was not subscribed.
    pub fn unsubscribe(&mut self, id: ObserverId) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(entry, _)| *entry != id);
        self.entries.len() != before
    }

    /// How many observers are subscribed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is subscribed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Reduces `state` by `event`, then shows every observer the new state and the event.
    #[must_use]
    pub fn deliver(&mut self, state: AgentState, event: &AgentEvent) -> AgentState {
        let mut state = reduce(state, event);
        let mut failures = Vec::new();
        for (_, observer) in &mut self.entries {
            if let Err(message) = observer.observe(&state, event) {
                failures.push(format!("observer: {message}"));
            }
        }
        state.diagnostics.extend(failures);
        state
    }
}
