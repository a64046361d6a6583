//! The agent's whole state as a versioned envelope.
//!
//! A snapshot holds everything: configuration, transcript, the active run with its queues and
//! in-flight action, the clock and the outputs not yet polled. Restoring it gives identical
//! future behaviour (byte-identical outputs for the same inputs). The envelope's
//! `schema_version` is checked before anything else is read, so a snapshot from a newer
//! crate is a clear error, not a half-restored agent.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::run_loop::ActiveRun;
use super::thread::Thread;
use super::{Agent, AgentConfig};
use crate::ids::RunId;
use crate::limits;
use crate::message::Message;
use crate::run::EndCause;

/// The snapshot envelope version this crate writes, and the only one it reads.
///
/// Version 2 stores the run's phase as typed states (tools ready and tools out apart; a wait
/// as a call wait with its batch, or a pause with the boundary it interrupted). Version 1
/// snapshots (runcore before that change) are refused with
/// [`SnapshotError::UnsupportedVersion`]: recover such an agent from its store instead.
pub const AGENT_SCHEMA_VERSION: u32 = 2;

/// A versioned agent snapshot.
///
/// It deserializes only through its checks: the version first, then the agent's shape, then
/// the consistency of its contents, so a snapshot that decodes is one [`Agent::restore`]
/// accepts. (The [`Agent`] itself is not `Deserialize`: an agent comes back only through
/// this envelope.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SnapshotRepr")]
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

/// The agent's fields as a snapshot stores them (the agent serializes to this shape).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentRepr {
    config: AgentConfig,
    messages: Vec<Message>,
    committed: usize,
    clock_ms: u64,
    runs_started: u64,
    thread_version: u64,
    used_run_ids: BTreeSet<RunId>,
    active: Option<ActiveRun>,
    last_end: Option<(RunId, EndCause)>,
    outbox: VecDeque<super::Output>,
    /// Absent in snapshots of agents never compacted (and of crates before compaction).
    #[serde(default)]
    compaction: Option<super::Compaction>,
}

/// The agent's fields as a snapshot writes them: the thread's, with the active run and the
/// outbox in their places among them.
#[derive(Serialize)]
struct AgentFields<'a> {
    config: &'a AgentConfig,
    messages: &'a [Message],
    committed: usize,
    clock_ms: u64,
    runs_started: u64,
    thread_version: u64,
    used_run_ids: &'a BTreeSet<RunId>,
    active: Option<&'a ActiveRun>,
    last_end: Option<&'a (RunId, EndCause)>,
    outbox: &'a VecDeque<super::Output>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compaction: Option<&'a super::Compaction>,
}

impl Serialize for Agent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let thread = &self.thread;
        AgentFields {
            config: &thread.config,
            messages: &thread.messages,
            committed: thread.committed,
            clock_ms: thread.clock_ms,
            runs_started: thread.runs_started,
            thread_version: thread.thread_version,
            used_run_ids: &thread.used_run_ids,
            active: self.active.as_ref(),
            last_end: thread.last_end.as_ref(),
            outbox: &self.outbox,
            compaction: thread.compaction.as_ref(),
        }
        .serialize(serializer)
    }
}

impl From<AgentRepr> for Agent {
    fn from(repr: AgentRepr) -> Agent {
        Agent {
            thread: Thread {
                config: repr.config,
                messages: repr.messages,
                committed: repr.committed,
                clock_ms: repr.clock_ms,
                runs_started: repr.runs_started,
                thread_version: repr.thread_version,
                used_run_ids: repr.used_run_ids,
                last_end: repr.last_end,
                compaction: repr.compaction,
            },
            active: repr.active,
            outbox: repr.outbox,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotRepr {
    schema_version: u32,
    agent: serde_json::Value,
}

impl TryFrom<SnapshotRepr> for AgentSnapshot {
    type Error = SnapshotError;

    fn try_from(repr: SnapshotRepr) -> Result<AgentSnapshot, SnapshotError> {
        check_version(repr.schema_version)?;
        // The envelope is level 1, its `agent` level 2.
        if !limits::nests_within(&repr.agent, limits::MAX_SNAPSHOT_DEPTH - 1) {
            return Err(SnapshotError::Malformed(limits::snapshot_too_deep()));
        }
        let agent: AgentRepr = serde_json::from_value(repr.agent)
            .map_err(|e| SnapshotError::Malformed(e.to_string()))?;
        let agent = Agent::from(agent);
        agent.check_consistency()?;
        Ok(AgentSnapshot {
            schema_version: repr.schema_version,
            agent,
        })
    }
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
    /// The snapshot was written by an older crate whose format this one no longer reads.
    #[error(
        "agent snapshot schema_version {found} is older than the supported {supported}; \
         recover the agent from its store instead"
    )]
    UnsupportedVersion {
        /// The snapshot's version.
        found: u32,
        /// The only version this crate reads.
        supported: u32,
    },
    /// The text is not a snapshot of this shape.
    #[error("malformed agent snapshot: {0}")]
    Malformed(String),
    /// The snapshot decodes but its contents are inconsistent.
    #[error("inconsistent agent snapshot: {0}")]
    Inconsistent(String),
}

impl SnapshotError {
    /// The error's stable code, as the bindings give it to their callers: `newer_version`,
    /// `unsupported_version`, `malformed` or `inconsistent`.
    pub fn code(&self) -> &'static str {
        match self {
            SnapshotError::NewerVersion { .. } => "newer_version",
            SnapshotError::UnsupportedVersion { .. } => "unsupported_version",
            SnapshotError::Malformed(_) => "malformed",
            SnapshotError::Inconsistent(_) => "inconsistent",
        }
    }
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
        // Plain data with string keys: serialization cannot fail. Were it to, a debug build
        // stops here, and a release build returns `null`, which `restore_json` refuses
        // (`malformed`) instead of restoring something else.
        serde_json::to_string(&envelope).unwrap_or_else(|error| {
            debug_assert!(false, "an agent snapshot failed to serialize: {error}");
            "null".to_owned()
        })
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
        // The reader's own nesting limit, below serde_json's (the same error from every door).
        if !limits::json_nests_within(text.as_bytes(), limits::MAX_SNAPSHOT_DEPTH) {
            return Err(SnapshotError::Malformed(limits::snapshot_too_deep()));
        }
        let probe: VersionProbe =
            serde_json::from_str(text).map_err(|e| SnapshotError::Malformed(e.to_string()))?;
        check_version(probe.schema_version)?;
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Envelope {
            #[serde(rename = "schema_version")]
            _version: u32,
            agent: AgentRepr,
        }
        // Exact: a message's `meta` keeps an integer beyond 64 bits (SPEC §2.1).
        let envelope: Envelope = crate::message::from_json_exact(text)
            .map_err(|e| SnapshotError::Malformed(e.to_string()))?;
        let agent = Agent::from(envelope.agent);
        agent.check_consistency()?;
        Ok(agent)
    }

    fn check_consistency(&self) -> Result<(), SnapshotError> {
        let thread = &self.thread;
        thread
            .config
            .validate()
            .map_err(|e| SnapshotError::Inconsistent(e.to_string()))?;
        if thread.committed > thread.messages.len() {
            return Err(SnapshotError::Inconsistent(format!(
                "{} messages committed but the transcript holds {}",
                thread.committed,
                thread.messages.len()
            )));
        }
        if let Some(compaction) = &thread.compaction {
            if compaction.keep_from() > thread.messages.len() {
                return Err(SnapshotError::Inconsistent(format!(
                    "the model context starts at message {} past the end of the transcript ({})",
                    compaction.keep_from(),
                    thread.messages.len()
                )));
            }
            if !matches!(compaction.summary(), Message::User(_)) {
                return Err(SnapshotError::Inconsistent(
                    "the compaction's summary is not a user message".into(),
                ));
            }
        }
        if let Some(active) = &self.active {
            let run = &active.run;
            if run.transcript_start() > thread.messages.len() {
                return Err(SnapshotError::Inconsistent(
                    "the active run starts past the end of the transcript".into(),
                ));
            }
            if run.steps() > thread.config.max_steps {
                return Err(SnapshotError::Inconsistent(format!(
                    "the active run made {} model calls, over max_steps {}",
                    run.steps(),
                    thread.config.max_steps
                )));
            }
            if let Some(why) = active.phase.inconsistency() {
                return Err(SnapshotError::Inconsistent(why));
            }
        }
        Ok(())
    }
}

fn check_version(found: u32) -> Result<(), SnapshotError> {
    let supported = AGENT_SCHEMA_VERSION;
    match found.cmp(&supported) {
        std::cmp::Ordering::Greater => Err(SnapshotError::NewerVersion { found, supported }),
        std::cmp::Ordering::Less => Err(SnapshotError::UnsupportedVersion { found, supported }),
        std::cmp::Ordering::Equal => Ok(()),
    }
}
