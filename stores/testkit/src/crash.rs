//! Real crash tests: a child process drives the scripted session against a store and is
//! killed with `SIGKILL` at pseudo-random points; the parent then checks what the store kept.
//!
//! # The two halves
//!
//! - **Child** ([`child_main`]): opens the store at the location named by the environment
//!   variable [`CHILD_ENV`], starts the session (or continues it with `Agent::recover`,
//!   Replay, when the thread has history) and prints one progress line per commit whose
//!   `commit_operation` returned: the operation and its receipt, as JSON. It prints
//!   [`DONE`] when the session ended. Without [`CHILD_ENV`] it does nothing.
//! - **Parent** ([`CrashTest::run`]): re-executes the current test binary with only the child
//!   test selected (`<child> --exact --ignored --nocapture`), reads the progress lines, and
//!   after a pseudo-random number of them (plus a random delay of up to a few milliseconds,
//!   so kills land inside commits too) kills the child with `SIGKILL`. After every kill it
//!   reopens the store and runs [`verify_after_kill`]; after one to three kills on the same
//!   store it runs [`finish_with_recover`], which continues the session in-process and
//!   compares the end with an uncrashed run. Then the next cycle starts on a fresh location.
//!
//! The kill points come from a fixed-seed LCG; the seed is printed and can be set with
//! [`SEED_ENV`]. The number of kills is [`DEFAULT_KILLS`] unless [`KILLS_ENV`] says otherwise
//! (a long run: `RUNCORE_CRASH_KILLS=200 cargo test -p <backend> --test crash --release --
//! --nocapture`).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use runcore::store::{CheckpointReader, CommitLog, EventRecord, EventScope};
use runcore::{CommitOperation, CommitReceipt, Message, RunId, RunState};
use serde_json::Value;

use crate::session::{self, KitError, PROMPTS, Reference, THREAD};

/// The environment variable that makes [`child_main`] run: the store location to open.
pub const CHILD_ENV: &str = "RUNCORE_CRASH_CHILD_LOCATION";
/// How many kills the parent makes (default [`DEFAULT_KILLS`]).
pub const KILLS_ENV: &str = "RUNCORE_CRASH_KILLS";
/// The LCG seed of the kill points (default [`DEFAULT_SEED`]).
pub const SEED_ENV: &str = "RUNCORE_CRASH_SEED";
/// Kills in a default run (the issue asks for at least 20 per backend).
pub const DEFAULT_KILLS: usize = 24;
/// The default seed.
pub const DEFAULT_SEED: u64 = 0x00C0_FFEE_2026;
/// The prefix of a progress line.
pub const ACK: &str = "runcore-crash-ack ";
/// The line the child prints when the session ended.
pub const DONE: &str = "runcore-crash-done";

/// A commit whose `commit_operation` call had returned in the child: what was sent and what
/// came back.
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    /// The operation the child committed.
    pub operation: CommitOperation,
    /// The receipt it got back.
    pub receipt: CommitReceipt,
}

impl Ack {
    fn line(operation: &CommitOperation, receipt: &CommitReceipt) -> String {
        let value = serde_json::json!({ "operation": operation, "receipt": receipt });
        format!("{ACK}{value}")
    }

    /// Reads the acknowledgement inside a line of the child's output, if there is one.
    /// (libtest may print `test name ... ` in front of the first line.)
    fn parse(line: &str) -> Option<Result<Ack, KitError>> {
        let at = line.find(ACK)?;
        let json = line.get(at + ACK.len()..)?;
        Some(Self::from_json(json))
    }

    fn from_json(json: &str) -> Result<Ack, KitError> {
        let mut value: Value = serde_json::from_str(json)
            .map_err(|e| KitError(format!("a progress line is not JSON ({e}): {json}")))?;
        let field = |value: &mut Value, name: &str| {
            value
                .get_mut(name)
                .map(Value::take)
                .ok_or_else(|| KitError(format!("a progress line lacks {name:?}: {json}")))
        };
        let operation = serde_json::from_value(field(&mut value, "operation")?)
            .map_err(|e| KitError(format!("a progress line's operation does not read: {e}")))?;
        let receipt = serde_json::from_value(field(&mut value, "receipt")?)
            .map_err(|e| KitError(format!("a progress line's receipt does not read: {e}")))?;
        Ok(Ack { operation, receipt })
    }
}

/// The child's half. Call it from an `#[ignore]`d test that the parent names in
/// [`CrashTest::new`]; it returns at once unless [`CHILD_ENV`] is set. It panics (failing the
/// child, which the parent reports with the child's stderr) if the session fails.
pub fn child_main<S, E, F>(open: F)
where
    S: CommitLog + CheckpointReader,
    E: fmt::Display,
    F: FnOnce(&str) -> Result<S, E>,
{
    let Ok(location) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut store = match open(&location) {
        Ok(store) => store,
        Err(error) => panic!("crash child: cannot open {location}: {error}"),
    };
    let stdout = std::io::stdout();
    // A blank line first, so the first progress line does not share libtest's line.
    let _ = writeln!(stdout.lock());
    let mut print = |operation: &CommitOperation, receipt: &CommitReceipt| {
        let mut out = stdout.lock();
        // The parent reads this line as "this commit had returned": write it whole, now.
        let _ = writeln!(out, "{}", Ack::line(operation, receipt));
        let _ = out.flush();
    };
    if let Err(error) = session::run_session(&mut store, &mut print) {
        panic!("crash child: the session failed: {error}");
    }
    let mut out = stdout.lock();
    let _ = writeln!(out, "{DONE}");
    let _ = out.flush();
}

/// A small deterministic generator for kill points (Knuth's MMIX LCG).
#[derive(Debug, Clone)]
pub struct Lcg(u64);

impl Lcg {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Lcg(seed)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 16
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        match n {
            0 => 0,
            n => self.next_u64() % n,
        }
    }
}

/// What [`verify_after_kill`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillCheck {
    /// The thread's version (commits kept).
    pub version: u64,
    /// Commits kept beyond the last acknowledged one: they landed, but the child died before
    /// it could say so (a kill between the store's commit and the progress line).
    pub landed_unacknowledged: u64,
}

/// Every event of the store, paged.
fn all_events<S: CheckpointReader>(store: &S) -> Result<Vec<EventRecord>, KitError> {
    let mut events = Vec::new();
    let mut from = None;
    loop {
        let page = store.list_events(&EventScope::All, from, 256)?;
        let Some(last) = page.last() else { break };
        from = Some(last.sequence);
        events.extend(page);
    }
    Ok(events)
}

fn run_id(n: usize) -> RunId {
    RunId::new(format!("{THREAD}/run-{n}"))
}

/// Checks a store after a kill:
/// - every acknowledged commit is there, exactly: re-sending its operation returns the stored
///   receipt (`duplicate = true`, the same sequence and version) and appends nothing;
/// - the committed transcript is a prefix of the uncrashed one (nothing half-written, nothing
///   out of order);
/// - event sequences are dense from 1, commit sequences ascend and stay within the thread's
///   version (one thread: commit sequence = thread version);
/// - runs: those with a record are exactly the runs whose prompt is in the transcript, each
///   with its `run_started` event pointing at its prompt; every run but the latest ended, as
///   in the uncrashed session; a run has a ticket exactly while it is Awaiting, and
///   `pending_tickets` lists exactly those; `latest_run` and `threads` agree.
pub fn verify_after_kill<S: CommitLog + CheckpointReader>(
    store: &mut S,
    reference: &Reference,
    acknowledged: &[Ack],
) -> Result<KillCheck, KitError> {
    let thread = session::thread_id();
    let version = store.thread_version(&thread)?;
    let mut last_acked = 0u64;
    for ack in acknowledged {
        let id = &ack.operation.operation_id;
        let probe = store.commit_operation(ack.operation.clone()).map_err(|e| {
            KitError(format!(
                "acknowledged commit ({}, {}) at sequence {}: re-sending it was refused: {e}",
                id.run_id, id.ordinal, ack.receipt.record.sequence
            ))
        })?;
        if !probe.duplicate || probe.record != ack.receipt.record {
            return Err(KitError(format!(
                "acknowledged commit ({}, {}) is not there as acknowledged: the child got \
                 {:?}, re-sending it now gives {:?}",
                id.run_id, id.ordinal, ack.receipt, probe
            )));
        }
        last_acked = last_acked.max(ack.receipt.record.thread_version);
    }
    if store.thread_version(&thread)? != version {
        return Err("re-sending acknowledged commits changed the thread version".into());
    }
    let landed_unacknowledged = version.checked_sub(last_acked).ok_or_else(|| {
        KitError(format!(
            "the thread is at version {version}, below the acknowledged {last_acked}"
        ))
    })?;

    // The transcript is a prefix of the uncrashed one.
    let messages = store.committed_messages(&thread)?;
    if messages.len() > reference.messages.len() {
        return Err(KitError(format!(
            "the store holds {} messages, the whole uncrashed session has {}",
            messages.len(),
            reference.messages.len()
        )));
    }
    if let Some(i) = (0..messages.len()).find(|&i| messages.get(i) != reference.messages.get(i)) {
        return Err(KitError(format!(
            "message {i} differs from the uncrashed session: stored {:?}, expected {:?}",
            messages.get(i),
            reference.messages.get(i)
        )));
    }

    // Sequences.
    let events = all_events(store)?;
    for (i, event) in events.iter().enumerate() {
        if event.sequence != i as u64 + 1 {
            return Err(KitError(format!(
                "event sequences are not dense: position {i} holds sequence {}",
                event.sequence
            )));
        }
        if event.thread_id != thread {
            return Err(KitError(format!(
                "an event of thread {} in a one-thread store",
                event.thread_id
            )));
        }
        if event.commit_sequence == 0 || event.commit_sequence > version {
            return Err(KitError(format!(
                "event {} has commit sequence {}, outside 1..={version}",
                event.sequence, event.commit_sequence
            )));
        }
    }
    if events
        .windows(2)
        .any(|w| matches!(w, [a, b] if a.commit_sequence > b.commit_sequence))
    {
        return Err("commit sequences of events do not ascend".into());
    }
    for ack in acknowledged {
        if ack.receipt.record.sequence != ack.receipt.record.thread_version {
            return Err(KitError(format!(
                "in a one-thread store a commit's sequence is its thread version: {:?}",
                ack.receipt.record
            )));
        }
    }
    let summaries = store.threads(None, 10)?;
    let listed: Vec<(String, u64)> = summaries
        .iter()
        .map(|s| (s.thread_id.as_str().to_owned(), s.version))
        .collect();
    let expected: Vec<(String, u64)> = if version == 0 {
        Vec::new()
    } else {
        vec![(THREAD.to_owned(), version)]
    };
    if listed != expected {
        return Err(KitError(format!(
            "threads() lists {listed:?}, expected {expected:?}"
        )));
    }

    // Runs: a record for exactly the runs whose prompt is committed.
    let prompts_committed = PROMPTS
        .iter()
        .filter(|prompt| {
            messages
                .iter()
                .any(|m| matches!(m, Message::User(_)) && user_text(m) == **prompt)
        })
        .count();
    let mut records = Vec::new();
    for n in 1..=PROMPTS.len() {
        if let Some(record) = store.run(&run_id(n))? {
            records.push(record);
        }
    }
    if records.len() != prompts_committed {
        return Err(KitError(format!(
            "{} prompts are committed but {} runs have a record",
            prompts_committed,
            records.len()
        )));
    }
    let mut awaiting = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let n = i + 1;
        if record.id != run_id(n) || record.thread_id != thread || record.commits == 0 {
            return Err(KitError(format!(
                "run record {n} is not as written: {record:?}"
            )));
        }
        let run_events = store.list_events(&EventScope::Run(record.id.clone()), None, 1_000)?;
        let start = run_events
            .iter()
            .find(|e| e.kind == "run_started")
            .and_then(|e| e.payload.get("transcript_start"))
            .and_then(Value::as_u64)
            .ok_or_else(|| KitError(format!("run {} has no run_started event", record.id)))?;
        let prompt = usize::try_from(start)
            .ok()
            .and_then(|s| messages.get(s))
            .map(user_text);
        if prompt.as_deref() != PROMPTS.get(i).copied() {
            return Err(KitError(format!(
                "run {} starts at message {start}, which is {prompt:?}, not its prompt",
                record.id
            )));
        }
        let latest = n == records.len();
        let ended_as_uncrashed = reference.runs.get(&record.id) == Some(&record.state);
        match &record.state {
            RunState::Ended(_) if !ended_as_uncrashed => {
                return Err(KitError(format!(
                    "run {} ended {:?}; the uncrashed session ended it {:?}",
                    record.id,
                    record.state,
                    reference.runs.get(&record.id)
                )));
            }
            RunState::Ended(_) => {}
            _ if !latest => {
                return Err(KitError(format!(
                    "run {} is {:?} but a later run started",
                    record.id, record.state
                )));
            }
            _ => {}
        }
        let ticket = store.resume_ticket(&record.id)?;
        match (&record.state, ticket) {
            (RunState::Awaiting, Some(ticket)) => {
                if ticket.run_id != record.id || ticket.thread_id != thread {
                    return Err(KitError(format!(
                        "run {} waits on a ticket of another run or thread: {ticket:?}",
                        record.id
                    )));
                }
                awaiting.push(ticket);
            }
            (RunState::Awaiting, None) => {
                return Err(KitError(format!(
                    "run {} is Awaiting without a ticket",
                    record.id
                )));
            }
            (_, Some(ticket)) => {
                return Err(KitError(format!(
                    "run {} is {:?} but still has a ticket: {ticket:?}",
                    record.id, record.state
                )));
            }
            (_, None) => {}
        }
    }
    let pending = store.pending_tickets(None, 100)?;
    if pending != awaiting {
        return Err(KitError(format!(
            "pending_tickets lists {pending:?}, the Awaiting runs hold {awaiting:?}"
        )));
    }
    let head = store.latest_run(&thread)?;
    if head.as_ref() != records.last() {
        return Err(KitError(format!(
            "latest_run is {head:?}, the latest run record is {:?}",
            records.last()
        )));
    }
    Ok(KillCheck {
        version,
        landed_unacknowledged,
    })
}

fn user_text(message: &Message) -> String {
    match message {
        Message::User(user) => user
            .content
            .iter()
            .filter_map(|block| match block {
                runcore::ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect(),
        _ => String::new(),
    }
}

/// Continues the session in-process with `Agent::recover` (Replay) — or starts it, if the
/// kill came before the first commit — drives it to its end, and checks that the store then
/// holds exactly the uncrashed session's transcript and end causes, with every acknowledged
/// commit still there.
pub fn finish_with_recover<S: CommitLog + CheckpointReader>(
    store: &mut S,
    reference: &Reference,
    acknowledged: &[Ack],
) -> Result<(), KitError> {
    session::run_session(store, &mut |_, _| {})?;
    let facts = session::facts(store)?;
    if facts.messages != reference.messages {
        let first = (0..facts.messages.len().max(reference.messages.len()))
            .find(|&i| facts.messages.get(i) != reference.messages.get(i))
            .unwrap_or(0);
        return Err(KitError(format!(
            "after recovery the transcript differs from the uncrashed session at message \
             {first} ({} messages vs {}): got {:?}, expected {:?}",
            facts.messages.len(),
            reference.messages.len(),
            facts.messages.get(first),
            reference.messages.get(first)
        )));
    }
    if facts.runs != reference.runs {
        return Err(KitError(format!(
            "after recovery the runs ended {:?}; the uncrashed session ended them {:?}",
            facts.runs, reference.runs
        )));
    }
    verify_after_kill(store, reference, acknowledged).map(drop)
}

/// How a crash test went, for the test's output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// The LCG seed.
    pub seed: u64,
    /// Children killed with `SIGKILL`.
    pub kills: usize,
    /// Kills before the child acknowledged any commit (while opening, recovering, or in its
    /// first commit).
    pub kills_before_first_ack: usize,
    /// Children that finished the session before their kill point.
    pub finished: usize,
    /// Stores driven to the end (each after one to three kills).
    pub cycles: usize,
    /// Commits acknowledged by children.
    pub acknowledged: u64,
    /// Commits found in a store after a kill that the child had not acknowledged (killed
    /// between the commit returning and its progress line).
    pub landed_unacknowledged: u64,
    /// Wall time of the whole test.
    pub elapsed: Duration,
}

impl fmt::Display for CrashReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "crash test (seed {:#x}): {} SIGKILLs over {} stores driven to the end \
             ({} before the child's first acknowledged commit, {} children finished first); \
             {} acknowledged commits all found; {} commits landed unacknowledged; {:.1?}",
            self.seed,
            self.kills,
            self.cycles,
            self.kills_before_first_ack,
            self.finished,
            self.acknowledged,
            self.landed_unacknowledged,
            self.elapsed
        )
    }
}

/// The number in the environment variable `name`: `None` when it is unset or empty, the
/// value when it reads as a decimal or a `0x` hexadecimal `u64`, and an error naming the
/// variable and its value otherwise.
pub fn env_number(name: &str) -> Result<Option<u64>, String> {
    let raw = match std::env::var(name) {
        Ok(raw) => raw,
        Err(std::env::VarError::NotPresent) => return Ok(None),
        Err(std::env::VarError::NotUnicode(raw)) => {
            return Err(format!("{name}={raw:?} is not a number"));
        }
    };
    parse_number(raw.trim()).map_err(|why| {
        format!("{name}={raw:?} is not a number ({why}); write it in decimal or as 0x...")
    })
}

/// A decimal or `0x`/`0X` hexadecimal `u64`; `Ok(None)` for the empty string.
fn parse_number(text: &str) -> Result<Option<u64>, std::num::ParseIntError> {
    if text.is_empty() {
        return Ok(None);
    }
    let hex = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"));
    match hex {
        Some(digits) => u64::from_str_radix(&digits.replace('_', ""), 16).map(Some),
        None => text.replace('_', "").parse::<u64>().map(Some),
    }
}

/// The parent's half: see the module docs.
#[derive(Debug, Clone)]
pub struct CrashTest {
    child_test: String,
    kills: usize,
    seed: u64,
    child_timeout: Duration,
}

/// One line of the child's stdout, or its end.
enum ChildLine {
    Ack(Box<Ack>),
    Done,
    Bad(KitError),
}

impl CrashTest {
    /// A crash test whose child is the test named `child_test` in the current test binary
    /// (an `#[ignore]`d test calling [`child_main`]). Kills and seed come from [`KILLS_ENV`]
    /// and [`SEED_ENV`] when set.
    ///
    /// # Panics
    ///
    /// When either variable is set to something that is not a number (decimal, or hex with
    /// `0x` as the seed is printed): a failure printed as `seed 0x3ade68b1` must replay as
    /// printed, never silently run the default instead.
    pub fn new(child_test: &str) -> Self {
        let env = |name: &str| match env_number(name) {
            Ok(value) => value,
            Err(message) => panic!("{message}"),
        };
        CrashTest {
            child_test: child_test.to_owned(),
            kills: env(KILLS_ENV).map_or(DEFAULT_KILLS, |k| {
                usize::try_from(k).unwrap_or_else(|_| panic!("{KILLS_ENV}={k} is too large"))
            }),
            seed: env(SEED_ENV).unwrap_or(DEFAULT_SEED),
            child_timeout: Duration::from_secs(120),
        }
    }

    /// Sets the number of kills.
    pub fn kills(mut self, kills: usize) -> Self {
        self.kills = kills;
        self
    }

    /// Sets the seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    fn spawn(&self, location: &str) -> Result<Child, KitError> {
        let exe = std::env::current_exe()
            .map_err(|e| KitError(format!("cannot find the test binary: {e}")))?;
        Command::new(exe)
            .args([
                self.child_test.as_str(),
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, location)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| KitError(format!("cannot start the child: {e}")))
    }

    /// Runs the test: cycles of one to three kills on a fresh location from
    /// `fresh_location(cycle)`, each kill checked with [`verify_after_kill`], each cycle
    /// ended with [`finish_with_recover`], until the number of kills is reached. `open` opens
    /// a location in the parent (the child opens it with its own `open`).
    pub fn run<S, E, L, O>(&self, mut fresh_location: L, open: O) -> Result<CrashReport, KitError>
    where
        S: CommitLog + CheckpointReader,
        E: fmt::Display,
        L: FnMut(usize) -> String,
        O: Fn(&str) -> Result<S, E>,
    {
        let started = Instant::now();
        let reference = session::reference()?;
        let mut lcg = Lcg::new(self.seed);
        let mut report = CrashReport {
            seed: self.seed,
            ..CrashReport::default()
        };
        println!(
            "crash test: seed {:#x} ({SEED_ENV}), {} kills ({KILLS_ENV}); an uncrashed session \
             makes {} commits",
            self.seed, self.kills, reference.commits
        );
        let open_store = |location: &str| {
            open(location).map_err(|e| KitError(format!("cannot reopen {location}: {e}")))
        };
        while report.kills < self.kills {
            report.cycles += 1;
            let location = fresh_location(report.cycles);
            let mut acks: Vec<Ack> = Vec::new();
            let kills_this_cycle = 1 + lcg.below(3);
            for _ in 0..kills_this_cycle {
                let acked_before = acks.len();
                // One kill in six lands early (while the child starts, opens the store,
                // recovers, or makes its first commit); the others after a random number of
                // acknowledged commits, plus up to 3 ms so some land inside a commit.
                let remaining = reference.commits.saturating_sub(acks.len() as u64);
                let (target, jitter_us) = if lcg.below(6) == 0 {
                    (0, lcg.below(40_000))
                } else {
                    (1 + lcg.below(remaining.max(1)) as usize, lcg.below(3_000))
                };
                let outcome = self.kill_child(&location, target, jitter_us, &mut acks)?;
                check_child_acks(acks.get(acked_before..).unwrap_or_default())?;
                let mut store = open_store(&location)?;
                let check = verify_after_kill(&mut store, &reference, &acks).map_err(|e| {
                    KitError(format!(
                        "after kill {} (cycle {}, {} acks, {location}): {e}",
                        report.kills + 1,
                        report.cycles,
                        acks.len()
                    ))
                })?;
                report.landed_unacknowledged += check.landed_unacknowledged;
                report.acknowledged += (acks.len() - acked_before) as u64;
                match outcome {
                    ChildEnd::Killed => {
                        report.kills += 1;
                        if acks.len() == acked_before {
                            report.kills_before_first_ack += 1;
                        }
                    }
                    ChildEnd::Finished => {
                        report.finished += 1;
                        break;
                    }
                }
            }
            let mut store = open_store(&location)?;
            finish_with_recover(&mut store, &reference, &acks).map_err(|e| {
                KitError(format!(
                    "finishing cycle {} ({location}) after its kills: {e}",
                    report.cycles
                ))
            })?;
        }
        report.elapsed = started.elapsed();
        println!("{report}");
        Ok(report)
    }

    /// Starts a child on `location`, kills it after `target` acknowledgements plus
    /// `jitter_us`, and collects every acknowledgement it printed.
    fn kill_child(
        &self,
        location: &str,
        target: usize,
        jitter_us: u64,
        acks: &mut Vec<Ack>,
    ) -> Result<ChildEnd, KitError> {
        let mut child = self.spawn(location)?;
        let stdout = child.stdout.take().ok_or("the child has no stdout")?;
        let mut stderr = child.stderr.take().ok_or("the child has no stderr")?;
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let (sender, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let parsed = if line.contains(DONE) {
                    Some(ChildLine::Done)
                } else {
                    Ack::parse(&line).map(|ack| match ack {
                        Ok(ack) => ChildLine::Ack(Box::new(ack)),
                        Err(e) => ChildLine::Bad(e),
                    })
                };
                if let Some(parsed) = parsed
                    && sender.send(parsed).is_err()
                {
                    break;
                }
            }
        });
        let deadline = Instant::now() + self.child_timeout;
        let mut seen = 0usize;
        let mut done = false;
        let mut failure = None;
        while seen < target && !done {
            let wait = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(wait) {
                Ok(ChildLine::Ack(ack)) => {
                    acks.push(*ack);
                    seen += 1;
                }
                Ok(ChildLine::Done) => done = true,
                Ok(ChildLine::Bad(e)) => {
                    failure = Some(e);
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    failure = Some(KitError(format!(
                        "the child made no progress for {:?}",
                        self.child_timeout
                    )));
                    break;
                }
            }
        }
        if !done && failure.is_none() {
            std::thread::sleep(Duration::from_micros(jitter_us));
        }
        // SIGKILL: no destructor, no flush, no clean close of the store.
        let _ = child.kill();
        let status = child
            .wait()
            .map_err(|e| KitError(format!("cannot wait for the child: {e}")))?;
        for line in lines.iter() {
            match line {
                ChildLine::Ack(ack) => acks.push(*ack),
                ChildLine::Done => done = true,
                ChildLine::Bad(e) => failure = failure.or(Some(e)),
            }
        }
        let _ = reader.join();
        let stderr = errors.join().unwrap_or_default();
        if let Some(failure) = failure {
            return Err(KitError(format!("{failure}\nchild stderr:\n{stderr}")));
        }
        if status.signal() == Some(9) {
            Ok(ChildEnd::Killed)
        } else if status.success() && done {
            Ok(ChildEnd::Finished)
        } else {
            Err(KitError(format!(
                "the child failed before it was killed ({status}); stderr:\n{stderr}"
            )))
        }
    }
}

/// How a child ended.
enum ChildEnd {
    Killed,
    Finished,
}

/// Within one child, each acknowledged commit is the next on the thread and the next of its
/// run.
fn check_child_acks(acks: &[Ack]) -> Result<(), KitError> {
    let mut ordinals: BTreeMap<&RunId, u64> = BTreeMap::new();
    for pair in acks.windows(2) {
        if let [a, b] = pair {
            let (a, b) = (&a.receipt.record, &b.receipt.record);
            if b.sequence != a.sequence + 1 || b.thread_version != a.thread_version + 1 {
                return Err(KitError(format!(
                    "one child's acknowledged commits are not consecutive: {a:?} then {b:?}"
                )));
            }
        }
    }
    for ack in acks {
        let id = &ack.operation.operation_id;
        if let Some(previous) = ordinals.insert(&id.run_id, id.ordinal)
            && id.ordinal != previous + 1
        {
            return Err(KitError(format!(
                "run {} went from ordinal {previous} to {}",
                id.run_id, id.ordinal
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_the_seed_is_printed() {
        assert_eq!(parse_number("0x3ade68b1"), Ok(Some(0x3ade_68b1)));
        assert_eq!(parse_number("0X00C0_FFEE_2026"), Ok(Some(0x00C0_FFEE_2026)));
        assert_eq!(parse_number("987654321"), Ok(Some(987_654_321)));
        assert_eq!(parse_number(""), Ok(None));
        assert_eq!(
            parse_number(&format!("{:#x}", DEFAULT_SEED)),
            Ok(Some(DEFAULT_SEED))
        );
        for bad in ["0x", "seed", "0xZZ", "-1", "1.5", "0x1_0000_0000_0000_0000"] {
            assert!(parse_number(bad).is_err(), "{bad} must not parse");
        }
    }

    #[test]
    fn lcg_is_deterministic_and_bounded() {
        let mut a = Lcg::new(7);
        let mut b = Lcg::new(7);
        for _ in 0..100 {
            let x = a.below(10);
            assert!(x < 10);
            assert_eq!(x, b.below(10));
        }
        assert_eq!(Lcg::new(1).below(0), 0);
    }

    #[test]
    fn progress_lines_read_back_even_behind_libtest_output() {
        let mut store = runcore::store::MemoryStore::new();
        let mut lines = Vec::new();
        session::run_session(&mut store, &mut |op, receipt| {
            lines.push(Ack::line(op, receipt));
        })
        .unwrap();
        let first = format!("test crash_child ... {}", lines[0]);
        let ack = Ack::parse(&first).unwrap().unwrap();
        assert_eq!(ack.receipt.record.sequence, 1);
        assert!(Ack::parse("running 1 test").is_none());
        assert!(Ack::parse(&format!("{ACK}{{")).unwrap().is_err());
    }

    #[test]
    fn an_uncrashed_store_passes_every_check() {
        let reference = session::reference().unwrap();
        let mut store = runcore::store::MemoryStore::new();
        let mut acks = Vec::new();
        session::run_session(&mut store, &mut |operation, receipt| {
            acks.push(Ack {
                operation: operation.clone(),
                receipt: receipt.clone(),
            });
        })
        .unwrap();
        check_child_acks(&acks).unwrap();
        let check = verify_after_kill(&mut store, &reference, &acks).unwrap();
        assert_eq!(check.landed_unacknowledged, 0);
        finish_with_recover(&mut store, &reference, &acks).unwrap();
        // A store that lost an acknowledged commit is caught.
        let mut short = runcore::store::MemoryStore::new();
        let mut first = Vec::new();
        session::run_session(&mut short, &mut |operation, receipt| {
            if first.is_empty() {
                first.push(Ack {
                    operation: operation.clone(),
                    receipt: receipt.clone(),
                });
            }
        })
        .unwrap();
        let mut other = acks.clone();
        if let Some(ack) = other.first_mut() {
            ack.operation.payload_hash = "0".repeat(64);
        }
        assert!(verify_after_kill(&mut short, &reference, &other).is_err());
    }
}
