//! The agent's whole state as a versioned envelope.
//!
//! A snapshot holds everything: configuration, transcript, the active run with its queues and
//! in-flight action, the clock and the outputs not yet polled. Restoring it gives identical
//! future behaviour (byte-identical outputs for the same inputs). The envelope's
//! `schema_version` is checked before anything else is read, so a snapshot from a newer
//! crate is a clear error, not a half-restored agent.

use serde::{Deserialize, Serialize};

use super::Agent;

/// The snapshot envelope version this crate writes and the newest it reads.
pub const AGENT_SCHEMA_VERSION: u32 = 1;

/// A versioned agent snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSnapshot {
    /// [`AGENT_SCHEMA_VERSION`] when written.
    pub schema_version: u32,
    /// The agent.
    pub agent: Agent,
}

#[derive(Serialize)]
struct SnapshotRef<'a> {
    schema_version: u32,
    agent: &'a Agent,
}

#[derive(Deserialize)]
struct VersionProbe {
    schema_version: u32,
}

/// Why a snapshot could not be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The snapshot was written by a newer crate.
    #[error("agent snapshot schema_version {found} is newer than the supported {supported}")]
    NewerVersion {
        /// The snapshot's version.
        found: u32,
        /// The newest this crate reads.
        supported: u32,
    },
    /// The text is not a snapshot of this shape.
    #[error("malformed agent snapshot: {0}")]
    Malformed(String),
    /// The snapshot decodes but its contents are inconsistent.
    #[error("inconsistent agent snapshot: {0}")]
    Inconsistent(String),
}

impl Agent {
    /// The snapshot envelope (a copy of the whole state).
    pub fn snapshot(&self) -> AgentSnapshot {
        AgentSnapshot {
            schema_version: AGENT_SCHEMA_VERSION,
            agent: self.clone(),
        }
    }

    /// The snapshot envelope as JSON, written without copying the agent.
    pub fn snapshot_json(&self) -> String {
        let envelope = SnapshotRef {
            schema_version: AGENT_SCHEMA_VERSION,
            agent: self,
        };
        // Plain data with string keys: serialization cannot fail.
        serde_json::to_string(&envelope).unwrap_or_default()
    }

    /// Restores an agent from its envelope.
    pub fn restore(snapshot: AgentSnapshot) -> Result<Agent, SnapshotError> {
        check_version(snapshot.schema_version)?;
        snapshot.agent.check_consistency()?;
        Ok(snapshot.agent)
    }

    /// Restores an agent from [`snapshot_json`](Agent::snapshot_json) text. The version is
    /// checked before the rest is decoded.
    pub fn restore_json(text: &str) -> Result<Agent, SnapshotError> {
        let probe: VersionProbe =
            serde_json::from_str(text).map_err(|e| SnapshotError::Malformed(e.to_string()))?;
        check_version(probe.schema_version)?;
        let snapshot: AgentSnapshot =
            serde_json::from_str(text).map_err(|e| SnapshotError::Malformed(e.to_string()))?;
        Agent::restore(snapshot)
    }

    fn check_consistency(&self) -> Result<(), SnapshotError> {
        self.config
            .validate()
            .map_err(|e| SnapshotError::Inconsistent(e.to_string()))?;
        if self.committed > self.messages.len() {
            return Err(SnapshotError::Inconsistent(format!(
                "{} messages committed but the transcript holds {}",
                self.committed,
                self.messages.len()
            )));
        }
        if let Some(run) = &self.active {
            if run.transcript_start > self.messages.len() {
                return Err(SnapshotError::Inconsistent(
                    "the active run starts past the end of the transcript".into(),
                ));
            }
            if run.steps > self.config.max_steps {
                return Err(SnapshotError::Inconsistent(format!(
                    "the active run made {} model calls, over max_steps {}",
                    run.steps, self.config.max_steps
                )));
            }
        }
        Ok(())
    }
}

fn check_version(found: u32) -> Result<(), SnapshotError> {
    if found > AGENT_SCHEMA_VERSION {
        return Err(SnapshotError::NewerVersion {
            found,
            supported: AGENT_SCHEMA_VERSION,
        });
    }
    Ok(())
}
