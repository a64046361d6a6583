//! State commands and their materialization (SPEC §5).
//!
//! A [`StateCommand`] is a durable fact about key/value state, committed with the messages of
//! one transition. Materialization replays commands in commit order:
//! - `Remove` deletes the key (removing an absent key is a no-op);
//! - a `Set` with `Commutative` merge of an object onto an object merges shallowly, incoming
//!   keys winning;
//! - any other `Set` replaces the value.
//!
//! Rebuilding from history replays without re-validating (history was validated when it was
//! committed). Visibility: `Run`-scoped commands are visible only to the run whose id they
//! carry; `Thread`, `Shared` and `Profile` commands are visible to every run of the thread. A
//! view with no run (`viewer = None`) sees no `Run`-scoped command.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::RunId;
use crate::schema_via::schema_via_repr;

/// Where a state key lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StateScope {
    /// One run; stamped with the run id at assembly.
    Run,
    /// The thread.
    Thread,
    /// Shared beyond the thread.
    Shared,
    /// The user's profile.
    Profile,
}

impl StateScope {
    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            StateScope::Run => "run",
            StateScope::Thread => "thread",
            StateScope::Shared => "shared",
            StateScope::Profile => "profile",
        }
    }
}

/// How concurrent writers of one key combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MergePolicy {
    /// Writers touch different keys; last write wins.
    Disjoint,
    /// Object values merge shallowly; order of merges does not matter for distinct keys.
    Commutative,
    /// Only one writer per commit; a second `Set` in the same commit invalidates it.
    Exclusive,
}

/// What a command does to its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "StateActionRepr", from = "StateActionRepr")]
pub enum StateAction {
    /// Set (or merge, for `Commutative`) a value.
    Set(Value),
    /// Delete the key.
    Remove,
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum StateActionRepr {
    Set { value: Value },
    Remove,
}

impl From<StateAction> for StateActionRepr {
    fn from(a: StateAction) -> Self {
        match a {
            StateAction::Set(value) => StateActionRepr::Set { value },
            StateAction::Remove => StateActionRepr::Remove,
        }
    }
}

impl From<StateActionRepr> for StateAction {
    fn from(r: StateActionRepr) -> Self {
        match r {
            StateActionRepr::Set { value } => StateAction::Set(value),
            StateActionRepr::Remove => StateAction::Remove,
        }
    }
}

schema_via_repr!(StateAction => StateActionRepr, "StateAction");

/// One durable change to key/value state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct StateCommand {
    /// The key.
    pub key: String,
    /// Where it lives.
    pub scope: StateScope,
    /// How writers combine.
    pub merge: MergePolicy,
    /// The owning run; set by `ThreadCommit::assemble` for `Run` scope, `None` otherwise.
    #[serde(default)]
    pub run_id: Option<RunId>,
    /// Set or remove.
    pub action: StateAction,
}

impl StateCommand {
    /// A `Disjoint` set of `key` in `scope`.
    pub fn set(scope: StateScope, key: impl Into<String>, value: Value) -> Self {
        StateCommand {
            key: key.into(),
            scope,
            merge: MergePolicy::Disjoint,
            run_id: None,
            action: StateAction::Set(value),
        }
    }

    /// A removal of `key` in `scope`.
    pub fn remove(scope: StateScope, key: impl Into<String>) -> Self {
        StateCommand {
            key: key.into(),
            scope,
            merge: MergePolicy::Disjoint,
            run_id: None,
            action: StateAction::Remove,
        }
    }

    /// The same command with another merge policy.
    pub fn with_merge(mut self, merge: MergePolicy) -> Self {
        self.merge = merge;
        self
    }

    /// Whether `viewer` sees this command (see the module docs).
    pub fn is_visible_to(&self, viewer: Option<&RunId>) -> bool {
        match self.scope {
            StateScope::Run => viewer.is_some() && self.run_id.as_ref() == viewer,
            StateScope::Thread | StateScope::Shared | StateScope::Profile => true,
        }
    }
}

/// Finds the first repeated `Set` to one (scope, key) within one commit where either write is
/// `Exclusive` (SPEC §5): such a commit is invalid as a whole.
pub(crate) fn exclusive_conflict(commands: &[StateCommand]) -> Option<(StateScope, String)> {
    // slot -> whether any earlier Set to it was Exclusive
    let mut seen: BTreeMap<(StateScope, &str), bool> = BTreeMap::new();
    for command in commands {
        if !matches!(command.action, StateAction::Set(_)) {
            continue;
        }
        let exclusive = command.merge == MergePolicy::Exclusive;
        let slot = (command.scope, command.key.as_str());
        match seen.get(&slot) {
            Some(&earlier_exclusive) if exclusive || earlier_exclusive => {
                return Some((command.scope, command.key.clone()));
            }
            Some(_) => {}
            None => {
                seen.insert(slot, exclusive);
            }
        }
    }
    None
}

/// Key/value state as one viewer sees it after replaying commands.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MaterializedState {
    /// scope → key → value.
    pub entries: BTreeMap<StateScope, BTreeMap<String, Value>>,
}

impl MaterializedState {
    /// Empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replays `history` in order for `viewer`.
    pub fn rebuild<'a>(
        history: impl IntoIterator<Item = &'a StateCommand>,
        viewer: Option<&RunId>,
    ) -> Self {
        let mut state = Self::new();
        for command in history {
            state.apply(command, viewer);
        }
        state
    }

    /// Applies one command if `viewer` sees it.
    pub fn apply(&mut self, command: &StateCommand, viewer: Option<&RunId>) {
        if !command.is_visible_to(viewer) {
            return;
        }
        match &command.action {
            StateAction::Remove => {
                if let Some(keys) = self.entries.get_mut(&command.scope) {
                    keys.remove(&command.key);
                    if keys.is_empty() {
                        self.entries.remove(&command.scope);
                    }
                }
            }
            StateAction::Set(value) => {
                let keys = self.entries.entry(command.scope).or_default();
                match (command.merge, keys.get_mut(&command.key), value) {
                    (
                        MergePolicy::Commutative,
                        Some(Value::Object(current)),
                        Value::Object(incoming),
                    ) => {
                        for (k, v) in incoming {
                            current.insert(k.clone(), v.clone());
                        }
                    }
                    _ => {
                        keys.insert(command.key.clone(), value.clone());
                    }
                }
            }
        }
    }

    /// The value of `key` in `scope`.
    pub fn get(&self, scope: StateScope, key: &str) -> Option<&Value> {
        self.entries.get(&scope).and_then(|keys| keys.get(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn commutative_merges_objects_shallowly() {
        let a = StateCommand::set(StateScope::Thread, "k", json!({"a":1,"b":1}));
        let b = StateCommand::set(StateScope::Thread, "k", json!({"b":2,"c":{"x":1}}))
            .with_merge(MergePolicy::Commutative);
        let s = MaterializedState::rebuild([&a, &b], None);
        assert_eq!(
            s.get(StateScope::Thread, "k"),
            Some(&json!({"a":1,"b":2,"c":{"x":1}}))
        );
        let replace = StateCommand::set(StateScope::Thread, "k", json!(5));
        let s = MaterializedState::rebuild([&a, &b, &replace], None);
        assert_eq!(s.get(StateScope::Thread, "k"), Some(&json!(5)));
    }

    #[test]
    fn remove_of_absent_key_is_a_no_op() {
        let r = StateCommand::remove(StateScope::Shared, "nope");
        assert_eq!(
            MaterializedState::rebuild([&r], None),
            MaterializedState::new()
        );
    }

    #[test]
    fn run_scope_is_visible_only_to_its_run() {
        let mut c = StateCommand::set(StateScope::Run, "k", json!(1));
        c.run_id = Some("r1".into());
        let r1 = RunId::new("r1");
        let r2 = RunId::new("r2");
        assert!(
            MaterializedState::rebuild([&c], Some(&r1))
                .get(StateScope::Run, "k")
                .is_some()
        );
        assert!(
            MaterializedState::rebuild([&c], Some(&r2))
                .get(StateScope::Run, "k")
                .is_none()
        );
        assert!(
            MaterializedState::rebuild([&c], None)
                .get(StateScope::Run, "k")
                .is_none()
        );
    }

    #[test]
    fn repeated_exclusive_set_conflicts() {
        let e =
            StateCommand::set(StateScope::Thread, "k", json!(1)).with_merge(MergePolicy::Exclusive);
        assert_eq!(exclusive_conflict(std::slice::from_ref(&e)), None);
        assert_eq!(
            exclusive_conflict(&[e.clone(), e.clone()]),
            Some((StateScope::Thread, "k".to_owned()))
        );
        let other_scope = StateCommand {
            scope: StateScope::Shared,
            ..e.clone()
        };
        assert_eq!(exclusive_conflict(&[e.clone(), other_scope]), None);
        let d = StateCommand::set(StateScope::Thread, "k", json!(2));
        assert_eq!(exclusive_conflict(&[d.clone(), d]), None);
    }

    #[test]
    fn materialized_state_serializes_with_string_keys() {
        let c = StateCommand::set(StateScope::Profile, "lang", json!("zh"));
        let s = MaterializedState::rebuild([&c], None);
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"entries":{"profile":{"lang":"zh"}}})
        );
    }
}
