//! The durable driver (SPEC §12.2): the JSON-lines driver with a store behind it.
//!
//! A [`DurableDriver`] does for a host in another language what a Rust host does itself: it
//! rebuilds the thread's agent from what is committed ([`Agent::recover`]) and applies every
//! commit to the store, fenced ([`CommitLog::commit_operation`], SPEC §7.1), *before* it
//! hands out that commit's line. So a line the host has read is a fact, and a host that is
//! killed at any point starts a new driver and goes on from what is committed.
//!
//! It reads and writes no bytes itself: the caller passes the store (any [`CommitLog`] +
//! [`CheckpointReader`]) and each input line, and gets the output lines back. `runcore drive
//! --store URL` is this type with stdin and stdout around it; the Python binding's
//! `Driver(store=...)` is this type with a Python store around it.
//!
//! The order of a durable session:
//! 1. [`DurableDriver::start`]: if the thread has history, recover it under the policy and
//!    hand out what the recovered agent emits (a pending `call_model` or `execute_tools` under
//!    replay; the sealing commit and `run_end` under seal; nothing more while awaiting); then
//!    `{"type":"idle","line":0}`, with or without history;
//! 2. [`DurableDriver::handle_line`] per input line, as [`Driver::handle_line`], except that a
//!    `config` line naming another thread, or any `config` line once the thread has history,
//!    is `invalid_state`, and that a commit the store rejects or fails gives one `store` error
//!    line ([`store_error_line`]) and nothing after it: the session has ended (the binary
//!    exits with status 3), because the agent is then ahead of the store. A driver started
//!    under a claim ([`DurableDriver::start_claimed`]) releases it then, so the next driver
//!    need not wait for the lease to pass. Later lines are refused with [`SessionEnded`]; a
//!    new driver recovers from what is committed.

use serde_json::Value;

use super::session::{ClaimHeld, ClaimOptions, ClaimedSession, OpenError, commit_operation_for};
use crate::agent::{Agent, AgentConfig, Input, Output, RecoverError, RecoveryPolicy};
use crate::commit::CommitError;
use crate::driver::{
    ContextMode, Driver, InputLine, OutputLine, error_line, idle_line, render_line,
};
use crate::error::AgentError;
use crate::ids::ThreadId;
use crate::store::claims::Claim;
use crate::store::{CheckpointReader, CommitLog, StoreError, ThreadClaims};

/// How a durable driver starts: the fields of a `config` line (what `runcore drive --config
/// FILE` reads) and the recovery policy.
#[derive(Debug, Clone)]
pub struct DurableOptions {
    /// The agent's configuration. Its `thread_id` is the driver's thread; for a thread with
    /// history it is the configuration the recovered agent runs with (tool policies are
    /// configuration, not committed facts).
    pub config: AgentConfig,
    /// How `call_model` lines carry the transcript.
    pub context: ContextMode,
    /// The host's clock when a thread without history is configured (a `config` line's
    /// `now_ms`); a recovered agent's clock comes from the committed facts instead.
    pub now_ms: Option<u64>,
    /// What recovery does with tool calls handed out but never answered.
    pub policy: RecoveryPolicy,
}

impl DurableOptions {
    /// Options for `config`: full context, no clock, [`RecoveryPolicy::Replay`] (the defaults
    /// of `runcore drive --store`).
    pub fn new(config: AgentConfig) -> Self {
        DurableOptions {
            config,
            context: ContextMode::Full,
            now_ms: None,
            policy: RecoveryPolicy::Replay,
        }
    }
}

impl DurableOptions {
    /// The options a `config` line stands for (its config, context mode and clock), under
    /// `policy`; `None` when it is not a config line.
    pub fn from_line(line: InputLine, policy: RecoveryPolicy) -> Option<Self> {
        match line.input {
            Input::Config(config) => Some(DurableOptions {
                config,
                context: line.context.unwrap_or_default(),
                now_ms: line.now_ms,
                policy,
            }),
            _ => None,
        }
    }
}

/// The default configuration (thread `"thread-1"`) with [`DurableOptions::new`]'s defaults.
impl Default for DurableOptions {
    fn default() -> Self {
        DurableOptions::new(AgentConfig::default())
    }
}

/// Why a durable driver could not start. Nothing was written to the store.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum DurableStartError {
    /// Reading the thread from the store failed (its version, or a read of recovery).
    #[error("cannot read thread {:?} from the store: {source}", thread.as_str())]
    Store {
        /// The driver's thread.
        thread: ThreadId,
        /// The store's error.
        source: StoreError,
    },
    /// The configuration was rejected for a thread without history.
    #[error("the configuration was rejected: {0}")]
    Config(#[source] AgentError),
    /// Another owner holds the thread's claim, live at store time (SPEC §12.4: `runcore
    /// drive` exits with status 4). Nothing was read or written.
    #[error(transparent)]
    ClaimHeld(ClaimHeld),
    /// The claim options are malformed (empty or oversized owner, zero or too long lease).
    #[error("invalid claim options: {0}")]
    InvalidClaim(String),
    /// The thread's committed history could not be recovered with this configuration.
    #[error("cannot recover thread {:?}: {error}", thread.as_str())]
    Recover {
        /// The driver's thread.
        thread: ThreadId,
        /// Why recovery refused.
        #[source]
        error: AgentError,
    },
}

/// A line sent to a durable driver whose session has ended: the store refused a commit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the durable driver's session ended at input line {line}: the store refused a commit \
     ({code}); start a new driver to recover from what is committed"
)]
pub struct SessionEnded {
    /// The input line whose commit was refused (0: during start).
    pub line: u64,
    /// The refusal's [`StoreError::code`] (e.g. `version_conflict`, `unavailable`).
    pub code: &'static str,
}

/// What a durable driver hands out at start or for one input line.
#[derive(Debug, PartialEq)]
#[must_use]
pub struct DurableLines {
    /// The output lines, in order. The last is `idle`, unless the store refused a commit:
    /// then it is that refusal's `store` error line.
    pub lines: Vec<String>,
    /// The commit the store rejected or failed, if it did. The session has then ended: write
    /// `lines` and stop (`runcore drive` exits with status 3).
    pub refused: Option<StoreError>,
}

/// The JSON-lines driver of one thread, persisting to and recovering from a store (SPEC
/// §12.2).
///
/// - Start: [`start`](DurableDriver::start) (recovery, then the lines up to `idle` 0).
/// - Input: [`handle_line`](DurableDriver::handle_line) (or
///   [`handle_line_into`](DurableDriver::handle_line_into)) per input line, until one reports
///   a refused commit; after that every line is refused with [`SessionEnded`].
/// - Getters: [`driver`](DurableDriver::driver) (its agent, context, lines handled),
///   [`store`](DurableDriver::store), [`thread`](DurableDriver::thread),
///   [`has_history`](DurableDriver::has_history), [`ended`](DurableDriver::ended);
///   [`into_store`](DurableDriver::into_store) gives the store back.
#[derive(Debug)]
pub struct DurableDriver<S> {
    store: S,
    driver: Driver,
    thread: ThreadId,
    /// Whether the thread has committed history (at start, or since).
    has_history: bool,
    /// Set when the store refused a commit: the session is over.
    ended: Option<SessionEnded>,
    /// The thread's claim, for a driver started with [`DurableDriver::start_claimed`].
    lease: Option<Lease>,
    /// How to give the claim back when the session ends on a refused commit: set by
    /// [`DurableDriver::start_claimed`], where the store is known to take claims (the commit
    /// path itself needs only [`CommitLog`]).
    release_on_refusal: Option<ReleaseClaim<S>>,
}

/// Releases a claim at store time `now_ms` ([`ThreadClaims::release_claim`] of the driver's
/// store).
type ReleaseClaim<S> = fn(&mut S, &Claim, u64) -> Result<(), StoreError>;

/// The claim a durable driver holds, and what its own clock trusts of it.
#[derive(Debug, Clone)]
struct Lease {
    session: ClaimedSession,
    options: ClaimOptions,
    /// Local time until which the driver may act: (local time when the claim or last renew
    /// was sent) + lease − margin.
    trusted_until: u64,
    /// Local time of the next renew: a third of the lease after the last one was sent.
    renew_at: u64,
    /// The latest local time the host reported ([`DurableDriver::tick`]): the `now_ms` of
    /// fenced commits (store time for stores whose time is the caller's).
    now_ms: u64,
}

impl Lease {
    fn granted(session: ClaimedSession, options: ClaimOptions, sent_at: u64) -> Self {
        let mut lease = Lease {
            session,
            options,
            trusted_until: 0,
            renew_at: 0,
            now_ms: sent_at,
        };
        lease.trust_from(sent_at);
        lease
    }

    fn trust_from(&mut self, sent_at: u64) {
        let lease = self.options.lease_ms;
        self.trusted_until = sent_at
            .saturating_add(lease)
            .saturating_sub(self.options.margin());
        self.renew_at = sent_at.saturating_add((lease / 3).max(1));
    }
}

impl<S: CommitLog + CheckpointReader> DurableDriver<S> {
    /// Opens the thread of `options.config` in `store`: recovers it under `options.policy`
    /// when it has history, else configures a fresh agent. Returns the driver and what it
    /// writes before input line 1: the recovered agent's outputs (each commit applied to the
    /// store first), then `{"type":"idle","line":0}`. A commit refused here (a sealing commit
    /// another writer beat) ends the session at once, at line 0.
    pub fn start(
        store: S,
        options: DurableOptions,
    ) -> Result<(Self, DurableLines), DurableStartError> {
        let (mut durable, ()) =
            DurableDriver::start_unclaimed_parts(store, options).map_err(|(_, error)| error)?;
        let mut lines = Vec::new();
        let refused = durable.drain(0, &mut |line| lines.push(line));
        Ok((durable, DurableLines { lines, refused }))
    }

    /// Handles one input line (bytes, without the `\n`) and returns its output lines: those
    /// [`Driver::handle_line`] gives, each commit applied to the store before its line (see
    /// [`DurableLines`] for a refusal). `Err` once the session has ended.
    pub fn handle_line(&mut self, bytes: &[u8]) -> Result<DurableLines, SessionEnded> {
        let mut lines = Vec::new();
        let refused = self.handle_line_into(bytes, &mut |line| lines.push(line))?;
        Ok(DurableLines { lines, refused })
    }

    /// Like [`handle_line`](DurableDriver::handle_line), handing each output line to `sink`
    /// as soon as it is decided (a commit's line after the store took it). Returns the
    /// refused commit's error when the store refused one (its `store` line was the last one
    /// handed out and the session has ended), `None` when the last line was `idle`.
    pub fn handle_line_into(
        &mut self,
        bytes: &[u8],
        sink: &mut dyn FnMut(String),
    ) -> Result<Option<StoreError>, SessionEnded> {
        if let Some(ended) = &self.ended {
            return Err(ended.clone());
        }
        let line = self.driver.next_line();
        let applied = match Driver::parse_line(bytes) {
            Err(error) => Err(render_line(&OutputLine::Error { line, error })),
            Ok(mut parsed) => {
                let names_thread = parsed.thread.is_some();
                let checked = match &mut parsed.input {
                    Input::Config(config) => self.check_config(config, names_thread),
                    _ => Ok(()),
                };
                checked
                    .and_then(|()| self.driver.apply(parsed))
                    .map_err(|e| error_line(line, &e))
            }
        };
        if let Err(text) = applied {
            sink(text);
        }
        Ok(self.drain(line, sink))
    }

    /// Drains the agent after input line `line`: each commit applied to the store before its
    /// line, then `idle`; or, at a refused commit, its `store` line and the end.
    fn drain(&mut self, line: u64, sink: &mut dyn FnMut(String)) -> Option<StoreError> {
        while let Some(output) = self.driver.poll() {
            let Output::Commit(commit) = output else {
                sink(self.driver.render(&output));
                continue;
            };
            let operation = match &self.lease {
                Some(lease) => {
                    commit_operation_for(*commit, Some(lease.session.claim()), lease.now_ms)
                }
                None => commit_operation_for(*commit, None, 0),
            };
            // The line is written from the operation: its payload hash is computed once (the
            // commit's canonical JSON is as long as the commit).
            let text = render_line(&OutputLine::Commit {
                commit: &operation.commit,
                ordinal: operation.operation_id.ordinal,
                expected_thread_version: operation.expected_thread_version,
                payload_hash: operation.payload_hash.clone(),
            });
            // A duplicate receipt is the same fact already stored (SPEC §7.1): harmless.
            if let Err(error) = self.store.commit_operation(operation) {
                // A commit refused because the claim is gone is the `claim_lost` line of
                // a refused renew (SPEC §12.4).
                let text = match (&error, &self.lease) {
                    (
                        StoreError::Rejected(CommitError::ClaimLost { current_epoch }),
                        Some(lease),
                    ) => claim_lost_line(line, lease.session.claim().epoch, Some(*current_epoch)),
                    _ => store_error_line(line, &error),
                };
                sink(text);
                self.ended = Some(SessionEnded {
                    line,
                    code: error.code(),
                });
                self.release_after_refusal();
                return Some(error);
            }
            self.has_history = true;
            sink(text);
        }
        sink(idle_line(line, self.driver.agent().poll_timeout()));
        None
    }

    /// A session that ends on a refused commit gives its claim back at once, so the next
    /// driver (which recovers from what is committed) need not wait for the lease to pass. A
    /// release that fails (the store is down, the claim was already lost) only delays that:
    /// the lease still runs out, and a stale claim's release is a no-op (SPEC §7.2).
    fn release_after_refusal(&mut self) {
        if let (Some(release), Some(lease)) = (self.release_on_refusal, self.lease.take()) {
            let _ = release(&mut self.store, lease.session.claim(), lease.now_ms);
        }
    }
}

impl<S: CommitLog + CheckpointReader + ThreadClaims> DurableDriver<S> {
    /// [`start`](DurableDriver::start) under a claim (SPEC §7.2, §12.4): claims the thread for
    /// `claim.owner` at local time `now_ms` *before* it reads the thread, so it never recovers
    /// a thread another owner holds live (that is [`DurableStartError::ClaimHeld`], and
    /// nothing is written). Every commit then carries the claim's token, and the host calls
    /// [`tick`](DurableDriver::tick) before each input line and at
    /// [`poll_renew`](DurableDriver::poll_renew), and [`release`](DurableDriver::release) at
    /// the end.
    pub fn start_claimed(
        mut store: S,
        options: DurableOptions,
        claim: ClaimOptions,
        now_ms: u64,
    ) -> Result<(Self, DurableLines), DurableStartError> {
        let thread = options.config.thread_id.clone();
        let granted =
            ClaimedSession::open(&mut store, &claim, &thread, now_ms).map_err(|e| match e {
                OpenError::Held(held) => DurableStartError::ClaimHeld(held),
                OpenError::Store(StoreError::Rejected(CommitError::InvalidClaim { reason })) => {
                    DurableStartError::InvalidClaim(reason)
                }
                OpenError::Store(source) => DurableStartError::Store {
                    thread: thread.clone(),
                    source,
                },
            })?;
        let lease = Lease::granted(granted, claim, now_ms);
        // Recovery reads under the claim; if it fails, the claim is released again.
        let (mut durable, _) = match DurableDriver::start_unclaimed_parts(store, options) {
            Ok(parts) => parts,
            Err((mut store, error)) => {
                let _ = lease.session.release(&mut store, now_ms);
                return Err(error);
            }
        };
        durable.lease = Some(lease);
        durable.release_on_refusal =
            Some(|store: &mut S, claim: &Claim, now_ms: u64| store.release_claim(claim, now_ms));
        let mut lines = Vec::new();
        let refused = durable.drain(0, &mut |line| lines.push(line));
        Ok((durable, DurableLines { lines, refused }))
    }

    /// Reports the host's local time: renews the claim when it is due, and ends the session
    /// when the claim is lost (a renew refused with `ClaimLost`) or when the trust window
    /// passed without a successful renew (the store unreachable meanwhile). Returns the
    /// `store` error line (`"reason":"claim_lost"`) when the session ends here; nothing after
    /// it may be written. A driver without a claim ignores it.
    pub fn tick(&mut self, now_ms: u64) -> Option<String> {
        if self.ended.is_some() {
            return None;
        }
        let line = self.driver.lines_handled();
        let lease = self.lease.as_mut()?;
        lease.now_ms = lease.now_ms.max(now_ms);
        if now_ms >= lease.renew_at {
            match lease
                .session
                .renew(&mut self.store, lease.options.lease_ms, now_ms)
            {
                Ok(()) => {
                    lease.trust_from(now_ms);
                }
                Err(StoreError::Rejected(CommitError::ClaimLost { current_epoch })) => {
                    return Some(self.lose_claim(line, Some(current_epoch)));
                }
                // The store may come back: keep trying until the trust window has passed.
                Err(_) => {}
            }
        }
        let lease = self.lease.as_ref()?;
        if now_ms >= lease.trusted_until {
            return Some(self.lose_claim(line, None));
        }
        None
    }

    /// Local time of the next renew, while the driver holds a claim and its session goes on:
    /// call [`tick`](DurableDriver::tick) then (or at the next input line, whichever is
    /// first).
    #[must_use]
    pub fn poll_renew(&self) -> Option<u64> {
        if self.ended.is_some() {
            return None;
        }
        self.lease.as_ref().map(|lease| lease.renew_at)
    }

    /// The claim the driver holds, if it was started claimed and still trusts it.
    pub fn claim(&self) -> Option<&Claim> {
        match self.ended {
            Some(_) => None,
            None => self.lease.as_ref().map(|lease| lease.session.claim()),
        }
    }

    /// Releases the claim (at EOF), so another owner can take the thread at once. The session
    /// ends; a later release is a no-op.
    pub fn release(&mut self, now_ms: u64) -> Result<(), StoreError> {
        let Some(lease) = self.lease.take() else {
            return Ok(());
        };
        self.ended.get_or_insert(SessionEnded {
            line: self.driver.lines_handled(),
            code: "released",
        });
        lease.session.release(&mut self.store, now_ms)
    }

    fn lose_claim(&mut self, line: u64, current_epoch: Option<u64>) -> String {
        self.ended = Some(SessionEnded {
            line,
            code: "claim_lost",
        });
        let epoch = self
            .lease
            .as_ref()
            .map_or(0, |lease| lease.session.claim().epoch);
        claim_lost_line(line, epoch, current_epoch)
    }
}

impl<S: CommitLog + CheckpointReader> DurableDriver<S> {
    /// `start` without draining, handing the store back if it fails.
    fn start_unclaimed_parts(
        store: S,
        options: DurableOptions,
    ) -> Result<(Self, ()), (S, DurableStartError)> {
        let thread = options.config.thread_id.clone();
        let unreadable = |source: StoreError| DurableStartError::Store {
            thread: thread.clone(),
            source,
        };
        let version = match store.thread_version(&thread) {
            Ok(version) => version,
            Err(e) => return Err((store, unreadable(e))),
        };
        let has_history = version > 0;
        let driver = if has_history {
            match Agent::recover(options.config, &store, &thread, options.policy) {
                Ok(agent) => Driver::from_agent(agent, options.context),
                Err(RecoverError::Store(source)) => return Err((store, unreadable(source))),
                Err(RecoverError::Invalid(error)) => {
                    let thread = thread.clone();
                    return Err((store, DurableStartError::Recover { thread, error }));
                }
            }
        } else {
            let mut driver = Driver::new();
            let thread = Some(options.config.thread_id.clone());
            let line = InputLine::new(Input::Config(options.config), options.now_ms)
                .with_config_fields(Some(options.context), thread);
            if let Err(e) = driver.apply(line) {
                return Err((store, DurableStartError::Config(e)));
            }
            driver
        };
        Ok((
            DurableDriver {
                store,
                driver,
                thread,
                has_history,
                ended: None,
                lease: None,
                release_on_refusal: None,
            },
            (),
        ))
    }
}

/// The `store` error line of a lost claim (SPEC §12.4): `"reason":"claim_lost"`.
fn claim_lost_line(line: u64, epoch: u64, current_epoch: Option<u64>) -> String {
    let message = match current_epoch {
        Some(current) => format!(
            "the thread's claim (epoch {epoch}) was lost: the thread is now at claim epoch {current}; this driver acts no further"
        ),
        None => format!(
            "the thread's claim (epoch {epoch}) could not be renewed within its lease; this driver acts no further"
        ),
    };
    let mut body = crate::driver::store_body("claim_lost", message);
    body.details.insert("epoch".into(), Value::from(epoch));
    if let Some(current) = current_epoch {
        body.details
            .insert("current_epoch".into(), Value::from(current));
    }
    render_line(&OutputLine::Error { line, error: body })
}

impl<S> DurableDriver<S> {
    /// The `invalid_state` error of a `config` line this driver cannot take, if it is one; a
    /// config line that names no thread (`names_thread` false: [`InputLine::thread`]) is for
    /// the driver's thread.
    fn check_config(&self, config: &mut AgentConfig, names_thread: bool) -> Result<(), AgentError> {
        if self.has_history {
            return Err(AgentError::InvalidState {
                expected: "no config line once the thread has history (configure with --config)"
                    .into(),
                actual: format!("thread {:?} has commits in the store", self.thread.as_str()),
            });
        }
        if names_thread && config.thread_id != self.thread {
            return Err(AgentError::InvalidState {
                expected: format!(
                    "a config for the driver's thread {:?}",
                    self.thread.as_str()
                ),
                actual: format!("a config for thread {:?}", config.thread_id.as_str()),
            });
        }
        config.thread_id = self.thread.clone();
        Ok(())
    }

    /// The in-memory driver inside: its agent, context mode and lines handled.
    pub fn driver(&self) -> &Driver {
        &self.driver
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The driver's thread.
    pub fn thread(&self) -> &ThreadId {
        &self.thread
    }

    /// Whether the thread has committed history (at start, or since): `config` lines are
    /// then `invalid_state`.
    pub fn has_history(&self) -> bool {
        self.has_history
    }

    /// Why the session has ended, once the store refused a commit.
    pub fn ended(&self) -> Option<&SessionEnded> {
        self.ended.as_ref()
    }

    /// Gives the store back, ending the driver.
    pub fn into_store(self) -> S {
        self.store
    }
}

/// The `store` error line a durable driver writes for input line `line` when the store
/// rejected or failed one of its commits: [`store_error_body`](crate::driver::store_error_body)
/// with a message saying nothing of the commit was written and what to do.
pub fn store_error_line(line: u64, error: &StoreError) -> String {
    let mut body = crate::driver::store_error_body(error);
    body.message = match error {
        StoreError::Rejected(rejection) => format!(
            "the store rejected the commit ({rejection}); nothing of it was written. Another \
             writer may hold this thread: restart the driver to recover from what is committed"
        ),
        other => format!(
            "the store failed to apply the commit ({other}); restart the driver to recover \
             from what is committed"
        ),
    };
    render_line(&OutputLine::Error { line, error: body })
}

#[cfg(test)]
mod tests;
