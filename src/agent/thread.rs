//! The thread part of the [`Agent`](super::Agent): what it keeps across runs (configuration,
//! transcript, counters, clock, the last end, the compaction, the run ids used).
//!
//! A transition gets this part, the active run and its phase by value, and the output buffer,
//! each apart (see [`run_loop`](super::run_loop)): it can change the thread and emit outputs,
//! but it cannot read the agent as a whole while the run is out of it.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::AgentError;
use crate::ids::RunId;
use crate::message::{Message, UserMessage};
use crate::run::EndCause;

use super::config::AgentConfig;

/// What the agent keeps of its thread across runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Thread {
    pub(crate) config: AgentConfig,
    /// The transcript: every committed message, plus (only while one input is being handled)
    /// messages about to be committed.
    pub(crate) messages: Vec<Message>,
    /// How many of `messages` have been emitted in commits.
    pub(crate) committed: usize,
    /// The latest `now_ms` seen on any accepted input.
    pub(crate) clock_ms: u64,
    /// The `n` of the latest minted run id `"{thread_id}/run-{n}"`: every minted id up to it
    /// is used (minting never repeats one).
    pub(crate) runs_started: u64,
    /// The thread's commit count the next commit builds on (SPEC §7.1): the store's version
    /// at creation or recovery, plus every commit emitted since.
    pub(crate) thread_version: u64,
    /// The run ids used on this thread that `runs_started` does not account for: every
    /// host-supplied id, and every id a recovered agent found in the committed facts. With
    /// the minted ones, no run id repeats; the agent was prompted (its configuration is
    /// locked) once this or `runs_started` is not empty.
    pub(crate) used_run_ids: BTreeSet<RunId>,
    /// The last run that ended, and how.
    pub(crate) last_end: Option<(RunId, EndCause)>,
    /// The latest compaction of the thread (SPEC §8.9): the model context is its summary
    /// followed by `messages[keep_from..]`. Absent (and not written in a snapshot) when the
    /// thread was never compacted.
    pub(crate) compaction: Option<Compaction>,
}

impl Thread {
    /// A thread with an empty transcript, at version 0.
    pub(crate) fn new(config: AgentConfig) -> Thread {
        Thread {
            config,
            messages: Vec::new(),
            committed: 0,
            clock_ms: 0,
            runs_started: 0,
            thread_version: 0,
            used_run_ids: BTreeSet::new(),
            last_end: None,
            compaction: None,
        }
    }

    /// Moves the clock to `now_ms` (never backwards).
    pub(crate) fn observe_clock(&mut self, now_ms: u64) {
        self.clock_ms = self.clock_ms.max(now_ms);
    }

    /// Where the model context's transcript part begins: the latest compaction's `keep_from`,
    /// 0 when the thread was never compacted (SPEC §8.9).
    pub(crate) fn context_start(&self) -> usize {
        self.compaction.as_ref().map_or(0, Compaction::keep_from)
    }

    /// Checks that the ids of messages about to join the transcript are unique: none blank,
    /// none repeated among them, none already in the transcript (§8.10). `what` names the
    /// messages in the error, with the index of the first offending one.
    pub(crate) fn check_new_ids<'a>(
        &self,
        ids: impl Iterator<Item = Option<&'a str>>,
        what: &str,
    ) -> Result<(), AgentError> {
        let seen: BTreeSet<&str> = self.messages.iter().filter_map(Message::id).collect();
        let mut fresh: BTreeSet<&str> = BTreeSet::new();
        for (index, id) in ids.enumerate() {
            let Some(id) = id else { continue };
            if id.trim().is_empty() {
                return Err(AgentError::invalid(format!(
                    "{what}[{index}] has a blank id; omit it or give a non-blank one"
                )));
            }
            if fresh.contains(id) {
                return Err(AgentError::invalid(format!(
                    "{what}[{index}]: message id {id:?} appears twice; message ids are unique \
                     in a thread"
                )));
            }
            if seen.contains(id) {
                return Err(AgentError::invalid(format!(
                    "{what}[{index}]: message id {id:?} is already in the thread's transcript; \
                     message ids are unique in a thread"
                )));
            }
            fresh.insert(id);
        }
        Ok(())
    }

    /// The transcript from the context start on.
    pub(crate) fn context_tail(&self) -> &[Message] {
        self.messages
            .get(self.context_start()..)
            .unwrap_or_default()
    }
}

/// The latest compaction of a thread: the model context is `summary` followed by
/// `transcript[keep_from..]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compaction {
    keep_from: usize,
    /// Always a user message (built only from one).
    summary: Message,
}

impl Compaction {
    pub(crate) fn new(keep_from: usize, summary: Arc<UserMessage>) -> Self {
        Compaction {
            keep_from,
            summary: Message::User(summary),
        }
    }

    /// Where the kept transcript begins.
    pub fn keep_from(&self) -> usize {
        self.keep_from
    }

    /// The summary, the model context's first message (a user message).
    pub fn summary(&self) -> &Message {
        &self.summary
    }
}
