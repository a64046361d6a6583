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
mod tests {
    use serde_json::json;

    use super::*;
    use crate::commit::{CommitError, CommitOperation, CommitReceipt};
    use crate::message::Message;
    use crate::store::{CommittedThreadView, EventRecord, EventScope, MemoryStore, StoreHandles};
    use crate::store::{Intercept, Intercepted, SharedStore};

    fn values(lines: &[String]) -> Vec<Value> {
        lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn types(lines: &[Value]) -> Vec<&str> {
        lines.iter().map(|l| l["type"].as_str().unwrap()).collect()
    }

    fn send<S: CommitLog + CheckpointReader>(
        driver: &mut DurableDriver<S>,
        line: Value,
    ) -> Vec<Value> {
        let handled = driver.handle_line(line.to_string().as_bytes()).unwrap();
        assert!(handled.refused.is_none(), "{:?}", handled.refused);
        values(&handled.lines)
    }

    fn start<S: CommitLog + CheckpointReader>(
        store: S,
        thread: &str,
        policy: RecoveryPolicy,
    ) -> (DurableDriver<S>, Vec<Value>) {
        let options = DurableOptions {
            policy,
            ..DurableOptions::new(AgentConfig::for_thread(thread))
        };
        let (driver, started) = DurableDriver::start(store, options).unwrap();
        assert!(started.refused.is_none(), "{:?}", started.refused);
        (driver, values(&started.lines))
    }

    fn prompt(text: &str) -> Value {
        json!({"type":"prompt","text":text,"now_ms":1000})
    }

    fn tool_call(run: &Value) -> Value {
        json!({"type":"model_done","run_id":run,"step":1,"message":{"role":"assistant",
               "content":[{"type":"tool_call","id":"c1","name":"search","arguments":{"q":"x"}}],
               "stop_reason":"tool_use"}})
    }

    /// Drives thread `t` up to an `execute_tools` that is never answered; returns its line.
    fn up_to_a_tool<S: CommitLog + CheckpointReader>(store: S) -> (S, Value) {
        let (mut driver, _) = start(store, "t", RecoveryPolicy::Replay);
        let out = send(&mut driver, prompt("find x"));
        let out = send(&mut driver, tool_call(&out[2]["run_id"]));
        assert_eq!(
            types(&out),
            ["commit", "event", "event", "execute_tools", "idle"]
        );
        let tools = out[3].clone();
        (driver.into_store(), tools)
    }

    /// Issue 42: a line through the durable driver is measured against the nesting limit
    /// once (on its text, as it is read); the agent is handed an input already measured.
    #[test]
    fn a_line_is_depth_checked_once() {
        let (mut driver, _) = start(MemoryStore::new(), "t", RecoveryPolicy::Replay);
        for line in [
            prompt("find x"),
            tool_call(&json!("t/run-1")),
            json!({"type":"tool_done","run_id":"t/run-1","call_id":"c1","content":"found",
                   "details":{"a":[1,{"b":2}]}}),
        ] {
            let before = crate::limits::depth_checks();
            let out = send(&mut driver, line.clone());
            assert!(!types(&out).contains(&"error"), "{line}: {out:?}");
            assert_eq!(crate::limits::depth_checks() - before, 1, "{line}");
        }
    }

    #[test]
    fn a_new_thread_starts_with_idle_0_and_each_commit_is_stored_before_its_line() {
        let store = SharedStore::new(MemoryStore::new());
        let thread = ThreadId::new("t");
        let (mut driver, started) =
            start(store.open_handle().unwrap(), "t", RecoveryPolicy::Replay);
        assert_eq!(started, [json!({"type":"idle","line":0})]);
        assert!(!driver.has_history());
        let mut seen = Vec::new();
        let refused = driver
            .handle_line_into(prompt("hi").to_string().as_bytes(), &mut |line| {
                // What the store holds when the line is handed out.
                let version = store.thread_version(&thread).unwrap();
                seen.push((serde_json::from_str::<Value>(&line).unwrap(), version));
            })
            .unwrap();
        assert!(refused.is_none());
        let kinds: Vec<&str> = seen
            .iter()
            .map(|(l, _)| l["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["commit", "event", "call_model", "idle"]);
        let (commit, version_at_commit_line) = &seen[0];
        assert_eq!(commit["expected_thread_version"], 0);
        assert_eq!(commit["commit"]["thread_id"], "t");
        assert_eq!(*version_at_commit_line, 1, "stored before its line");
        assert_eq!(seen[3].0, json!({"type":"idle","line":1}));
        assert!(driver.has_history());
        assert_eq!(driver.driver().lines_handled(), 1);
    }

    #[test]
    fn a_recovered_thread_hands_out_its_pending_work_before_idle_0() {
        let (store, tools) = up_to_a_tool(MemoryStore::new());
        let version = store.thread_version(&ThreadId::new("t")).unwrap();
        // Replay: the call's tool_start and the same execute_tools again, nothing stored.
        let (driver, started) = start(store, "t", RecoveryPolicy::Replay);
        assert_eq!(types(&started), ["event", "execute_tools", "idle"]);
        assert_eq!(started[0]["event"]["event"]["type"], "tool_start");
        assert_eq!(started[1], tools);
        assert_eq!(started[2], json!({"type":"idle","line":0}));
        assert!(driver.has_history());
        let store = driver.into_store();
        assert_eq!(store.thread_version(&ThreadId::new("t")).unwrap(), version);
        // Seal: the sealing commit (stored) and run_end, then idle 0.
        let (driver, started) = start(store, "t", RecoveryPolicy::Seal);
        assert_eq!(
            types(&started).iter().filter(|t| **t == "commit").count(),
            1
        );
        assert_eq!(started[0]["type"], "commit");
        assert_eq!(
            started[0]["commit"]["run"]["cause"]["type"],
            "indeterminate"
        );
        let end = &started[started.len() - 2];
        assert_eq!(end["event"]["type"], "run_end");
        assert_eq!(end["event"]["result"]["cause"]["type"], "indeterminate");
        assert_eq!(started.last(), Some(&json!({"type":"idle","line":0})));
        assert_eq!(
            driver.store().thread_version(&ThreadId::new("t")).unwrap(),
            version + 1
        );
    }

    #[test]
    fn a_refused_commit_is_one_store_line_and_ends_the_session() {
        let store = SharedStore::new(MemoryStore::new());
        let thread = ThreadId::new("t");
        let (mut first, _) = start(store.open_handle().unwrap(), "t", RecoveryPolicy::Replay);
        let (mut second, _) = start(store.open_handle().unwrap(), "t", RecoveryPolicy::Replay);
        // The second driver writes first; the first one's commit builds on version 0 too.
        let ahead = send(&mut second, prompt("from the second"));
        assert_eq!(ahead[0]["type"], "commit");
        let line = json!({"type":"prompt","text":"from the first","run_id":"mine"});
        let handled = first.handle_line(line.to_string().as_bytes()).unwrap();
        let expected = StoreError::Rejected(CommitError::VersionConflict {
            expected: 0,
            actual: 1,
        });
        assert_eq!(handled.refused.as_ref(), Some(&expected));
        assert_eq!(handled.lines, [store_error_line(1, &expected)]);
        let ended = SessionEnded {
            line: 1,
            code: "version_conflict",
        };
        assert_eq!(first.ended(), Some(&ended));
        assert_eq!(first.handle_line(b"{\"type\":\"abort\"}"), Err(ended));
        assert_eq!(first.driver().lines_handled(), 1);
        // Nothing of the first driver's was stored.
        assert_eq!(store.thread_version(&thread).unwrap(), 1);
        assert_eq!(
            store.committed_messages(&thread).unwrap(),
            [Message::user("from the second")]
        );
    }

    #[test]
    fn the_store_line_names_the_refusal() {
        let conflict = StoreError::Rejected(CommitError::VersionConflict {
            expected: 0,
            actual: 1,
        });
        let line: Value = serde_json::from_str(&store_error_line(4, &conflict)).unwrap();
        assert_eq!(line["type"], "error");
        assert_eq!(line["line"], 4);
        assert_eq!(line["error"]["kind"], "store");
        assert_eq!(line["error"]["reason"], "version_conflict");
        assert!(
            line["error"]["message"]
                .as_str()
                .unwrap()
                .contains("rejected")
        );
        let gone = StoreError::unavailable("disk gone");
        let line: Value = serde_json::from_str(&store_error_line(2, &gone)).unwrap();
        assert_eq!(line["error"]["reason"], "unavailable");
        assert!(
            line["error"]["message"]
                .as_str()
                .unwrap()
                .contains("disk gone")
        );
    }

    #[test]
    fn config_lines_for_another_thread_or_after_history_are_invalid_state() {
        let (mut driver, _) = start(MemoryStore::new(), "t", RecoveryPolicy::Replay);
        let out = send(&mut driver, json!({"type":"config","thread_id":"other"}));
        assert_eq!(types(&out), ["error", "idle"]);
        assert_eq!(out[0]["error"]["kind"], "invalid_state");
        // A config naming no thread is for the driver's thread.
        let out = send(&mut driver, json!({"type":"config","max_steps":3}));
        assert_eq!(out, [json!({"type":"idle","line":2})]);
        let out = send(&mut driver, prompt("hi"));
        assert_eq!(out[0]["commit"]["thread_id"], "t");
        let out = send(&mut driver, json!({"type":"config","max_steps":3}));
        assert_eq!(out[0]["error"]["kind"], "invalid_state");
        assert!(
            out[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("history")
        );
        // After a restart the thread has history from the start.
        let (mut driver, _) = start(driver.into_store(), "t", RecoveryPolicy::Replay);
        let out = send(&mut driver, json!({"type":"config","thread_id":"t"}));
        assert_eq!(out[0]["error"]["kind"], "invalid_state");
        assert_eq!(out[1], json!({"type":"idle","line":1}));
    }

    #[test]
    fn bad_lines_are_error_lines_as_in_memory() {
        let (mut durable, _) = start(MemoryStore::new(), "thread-1", RecoveryPolicy::Replay);
        let mut memory = Driver::new();
        for line in [
            &b"not json"[..],
            b"",
            b"{\"type\":\"nope\"}",
            b"\xff",
            b"{\"type\":\"abort\"}",
        ] {
            let handled = durable.handle_line(line).unwrap();
            assert!(handled.refused.is_none());
            assert_eq!(handled.lines, memory.handle_line(line));
        }
    }

    #[test]
    fn start_errors_are_typed() {
        let bad = AgentConfig {
            max_steps: 0,
            ..AgentConfig::for_thread("t")
        };
        // A fresh thread: the configuration is rejected.
        let error =
            DurableDriver::start(MemoryStore::new(), DurableOptions::new(bad.clone())).unwrap_err();
        assert!(
            matches!(
                error,
                DurableStartError::Config(AgentError::InvalidInput(_))
            ),
            "{error}"
        );
        // A thread with history: recovery refuses it.
        let (store, _) = up_to_a_tool(MemoryStore::new());
        let error = DurableDriver::start(store.clone(), DurableOptions::new(bad)).unwrap_err();
        assert!(
            matches!(&error, DurableStartError::Recover { thread, .. } if thread.as_str() == "t")
        );
        assert!(
            error
                .to_string()
                .starts_with("cannot recover thread \"t\": ")
        );
        // A store that cannot be read while recovering.
        let unreadable = Intercepted(Faulty {
            store,
            events_fail: true,
            commits_fail: false,
        });
        let error = DurableDriver::start(
            unreadable,
            DurableOptions::new(AgentConfig::for_thread("t")),
        )
        .unwrap_err();
        assert_eq!(
            error,
            DurableStartError::Store {
                thread: ThreadId::new("t"),
                source: StoreError::unavailable("events are gone"),
            }
        );
        assert!(
            error
                .to_string()
                .starts_with("cannot read thread \"t\" from the store: ")
        );
    }

    /// A store whose audit events (recovery reads them) or commits can fail.
    #[derive(Debug)]
    struct Faulty {
        store: MemoryStore,
        events_fail: bool,
        commits_fail: bool,
    }

    impl Intercept for Faulty {
        type Inner = MemoryStore;
        fn inner(&self) -> &MemoryStore {
            &self.store
        }
        fn inner_mut(&mut self) -> &mut MemoryStore {
            &mut self.store
        }
        fn commit_operation(
            &mut self,
            operation: CommitOperation,
        ) -> Result<CommitReceipt, StoreError> {
            if self.commits_fail {
                return Err(StoreError::unavailable("the disk is gone"));
            }
            self.store.commit_operation(operation)
        }
        fn list_events(
            &self,
            scope: &EventScope,
            from: Option<u64>,
            limit: usize,
        ) -> Result<Vec<EventRecord>, StoreError> {
            if self.events_fail {
                return Err(StoreError::unavailable("events are gone"));
            }
            self.store.list_events(scope, from, limit)
        }
    }

    #[test]
    fn a_sealing_commit_refused_at_start_ends_the_session_at_line_0() {
        let (store, _) = up_to_a_tool(MemoryStore::new());
        let failing = Intercepted(Faulty {
            store,
            events_fail: false,
            commits_fail: true,
        });
        let options = DurableOptions {
            policy: RecoveryPolicy::Seal,
            ..DurableOptions::new(AgentConfig::for_thread("t"))
        };
        let (mut driver, started) = DurableDriver::start(failing, options).unwrap();
        let gone = StoreError::unavailable("the disk is gone");
        assert_eq!(started.lines, [store_error_line(0, &gone)]);
        assert_eq!(started.refused, Some(gone));
        let ended = SessionEnded {
            line: 0,
            code: "unavailable",
        };
        assert_eq!(driver.handle_line(b"{\"type\":\"abort\"}"), Err(ended));
    }

    fn claimed(
        store: SharedStore<MemoryStore>,
        owner: &str,
        now_ms: u64,
    ) -> Result<(DurableDriver<SharedStore<MemoryStore>>, Vec<Value>), DurableStartError> {
        let options = DurableOptions::new(AgentConfig::for_thread("t"));
        DurableDriver::start_claimed(store, options, ClaimOptions::new(owner, 1_000), now_ms)
            .map(|(driver, started)| (driver, values(&started.lines)))
    }

    #[test]
    fn a_claimed_driver_claims_before_it_reads_and_fences_its_commits() {
        let store = SharedStore::new(MemoryStore::new());
        let (mut first, started) = claimed(store.open_handle().unwrap(), "w1", 0).unwrap();
        assert_eq!(started, [json!({"type":"idle","line":0})]);
        assert_eq!(first.claim().map(|c| c.epoch), Some(1));
        // A second owner is refused at start: nothing read, nothing written.
        let stored = |store: &SharedStore<MemoryStore>| {
            let mut value = serde_json::to_value(&*store.lock().unwrap()).unwrap();
            // Store time moves with every call; what is stored must not.
            value.as_object_mut().unwrap().remove("clock");
            value
        };
        let before = stored(&store);
        match claimed(store.open_handle().unwrap(), "w2", 10) {
            Err(DurableStartError::ClaimHeld(held)) => {
                assert_eq!((held.owner.as_str(), held.expires_at_ms), ("w1", 1_000))
            }
            other => panic!("expected ClaimHeld, got {other:?}"),
        }
        assert_eq!(stored(&store), before);
        // Commits under the claim land; a renew at a third of the lease extends it.
        assert_eq!(first.tick(100), None);
        let out = send(&mut first, prompt("hi"));
        assert_eq!(types(&out), ["commit", "event", "call_model", "idle"]);
        assert_eq!(first.poll_renew(), Some(333));
        assert_eq!(first.tick(400), None);
        assert_eq!(first.claim().map(|c| c.expires_at_ms), Some(1_400));
        // Released at EOF: the next owner takes the thread at once, with a new epoch.
        first.release(500).unwrap();
        let (second, started) = claimed(store.open_handle().unwrap(), "w2", 600).unwrap();
        assert_eq!(second.claim().map(|c| c.epoch), Some(2));
        assert_eq!(
            types(&started),
            ["call_model", "idle"],
            "the pending call, replayed"
        );
    }

    #[test]
    fn a_driver_whose_claim_was_taken_over_acts_no_further() {
        let store = SharedStore::new(MemoryStore::new());
        let (mut first, _) = claimed(store.open_handle().unwrap(), "w1", 0).unwrap();
        let out = send(&mut first, prompt("hi"));
        assert_eq!(types(&out), ["commit", "event", "call_model", "idle"]);
        // w1 stalls past its lease; w2 takes the thread over and recovers it.
        let (_second, started) = claimed(store.open_handle().unwrap(), "w2", 2_000).unwrap();
        assert_eq!(types(&started), ["call_model", "idle"]);
        let version = store.thread_version(&ThreadId::new("t")).unwrap();
        // w1 wakes up: its renew is refused, one claim_lost line, nothing after it.
        let lost = first.tick(2_100).expect("the claim is lost");
        let lost: Value = serde_json::from_str(&lost).unwrap();
        assert_eq!(lost["error"]["kind"], "store");
        assert_eq!(lost["error"]["reason"], "claim_lost");
        assert_eq!(lost["error"]["current_epoch"], 2);
        assert!(
            first
                .handle_line(prompt("again").to_string().as_bytes())
                .is_err()
        );
        assert_eq!(first.poll_renew(), None);
        assert_eq!(store.thread_version(&ThreadId::new("t")).unwrap(), version);
    }

    #[test]
    fn a_claimed_session_that_ends_on_a_refused_commit_releases_its_claim() {
        let failing = Intercepted(Faulty {
            store: MemoryStore::new(),
            events_fail: false,
            commits_fail: true,
        });
        let options = DurableOptions::new(AgentConfig::for_thread("t"));
        let (mut driver, _) =
            DurableDriver::start_claimed(failing, options, ClaimOptions::new("w1", 1_000), 0)
                .unwrap();
        assert_eq!(driver.tick(100), None);
        let handled = driver
            .handle_line(prompt("hi").to_string().as_bytes())
            .unwrap();
        assert_eq!(
            handled.refused,
            Some(StoreError::unavailable("the disk is gone"))
        );
        assert_eq!(driver.claim(), None);
        assert_eq!(driver.poll_renew(), None);
        // Well inside the lease, the thread has no live claim: the next driver takes it at
        // once instead of being refused until the lease passes.
        let store = driver.into_store();
        let thread = ThreadId::new("t");
        assert_eq!(store.thread_claim(&thread, 200).unwrap(), None);
    }

    #[test]
    fn a_driver_that_wakes_after_its_lease_ran_out_stops() {
        let store = SharedStore::new(MemoryStore::new());
        let (mut driver, _) = claimed(store.open_handle().unwrap(), "w1", 0).unwrap();
        // No tick until after the lease: the renew is refused even though no other owner
        // showed up, and the driver ends itself.
        let lost = driver.tick(1_100).expect("past the lease");
        assert!(lost.contains("claim_lost"), "{lost}");
        assert_eq!(driver.claim(), None);
    }
}
