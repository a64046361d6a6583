//! The commit: [`CommitLog`] for [`PostgresStore`].
//!
//! A commit is two statements, each its own transaction — no `BEGIN`, no `COMMIT`:
//! 1. **read** (one snapshot): the thread's head row, the run's row and the operation's
//!    receipt;
//! 2. **decide**: what was read becomes the core's [`CommitHead`] and the core's one admission
//!    function ([`admit`] / [`admit_commit`], the order of SPEC §7/§7.1 and the §7.2 claim
//!    check, as `MemoryStore` and SQLite use it) decides: a duplicate's receipt, a rejection,
//!    or the [`AppendPlan`] that the write carries out. The store-wide sequences are left to
//!    the database's own sequences (the head carries none);
//! 3. **write** (one statement, see `Statements::write`: the function `runcore_commit` of
//!    schema version 2), *conditional on the thread's version read in 1*: under the thread's
//!    lock the version is checked again, then the sequences are taken under the commit mutex
//!    (released at once), then every row of the commit is written.
//!
//! Every commit on a thread moves the thread's version, so if the write finds the version it
//! read, nothing the decision rested on has changed — the thread's rows, and the run's and the
//! operation's when they are on this thread (a run on another thread is only ever a reason to
//! reject). If another commit on the thread landed in between, the write changes nothing and
//! takes no sequence, and the commit starts over from 1 on the newer state; a fenced operation
//! then gets its `VersionConflict`, as it would have had it arrived second. The one race the
//! version cannot see — the same new run committed on two threads at once — ends on the run's
//! (or its first operation's) primary key: the second write fails whole, starts over, and is
//! rejected (`RunOnOtherThread`).
//!
//! Only the read and the write are this crate's: the rules are the core's; only the write
//! knows about locks and sequences.
//!
//! A rejection writes nothing: it is decided before the write is sent. A write that fails after
//! taking its sequences (the new-run race above, a lost connection) leaves a gap in them,
//! which SPEC §7.1 (amended) allows across threads.

use postgres::error::SqlState;
use runcore::store::{
    Admission, AppendPlan, ClaimRecord, CommitHead, CommitLog, RunHead, StoreError, admit,
    admit_commit,
};
use runcore::{
    CommitError, CommitOperation, CommitReceipt, CommitRecord, RunDisposition, RunState,
    ThreadCommit, ThreadId,
};

use crate::codec::{bound, column, count, db_error, from_json, text_of, to_json};
use crate::store::{PostgresStore, Session};

/// How many times a commit starts over because another commit on its thread landed between
/// its read and its write. Each time, another commit got through, so the store is moving;
/// only a thread hammered by other writers without pause could exhaust it.
const RACES: usize = 10_000;

/// The primary keys whose violation means "the same new run was committed concurrently on
/// another thread": start over, and be rejected on what that commit wrote.
const NEW_RUN_KEYS: [&str; 2] = ["runcore_runs_pkey", "runcore_operations_pkey"];

/// What is written: a plain commit or a fenced operation.
enum Write {
    Plain(ThreadCommit),
    Fenced(CommitOperation),
}

impl Write {
    fn commit(&self) -> &ThreadCommit {
        match self {
            Write::Plain(commit) => commit,
            Write::Fenced(operation) => &operation.commit,
        }
    }

    fn operation(&self) -> Option<&CommitOperation> {
        match self {
            Write::Plain(_) => None,
            Write::Fenced(operation) => Some(operation),
        }
    }
}

/// What an accepted commit or operation produced.
enum Written {
    Record(CommitRecord),
    Receipt(CommitReceipt),
}

/// The commit's values as column values, encoded once before any attempt.
struct Encoded {
    thread: Vec<u8>,
    run: Vec<u8>,
    messages: Vec<String>,
    state: Vec<String>,
    kinds: Vec<Vec<u8>>,
    payloads: Vec<String>,
    run_state: String,
    ticket: Option<String>,
}

impl Encoded {
    fn new(commit: &ThreadCommit) -> Result<Encoded, StoreError> {
        let ticket = match &commit.run {
            RunDisposition::Awaiting(ticket) => Some(to_json("the resume ticket", ticket)?),
            _ => None,
        };
        Ok(Encoded {
            thread: commit.thread_id.as_str().as_bytes().to_vec(),
            run: commit.run_id().as_str().as_bytes().to_vec(),
            messages: commit
                .messages
                .iter()
                .map(|m| to_json("a message", m))
                .collect::<Result<_, _>>()?,
            state: commit
                .state
                .iter()
                .map(|c| to_json("a state command", c))
                .collect::<Result<_, _>>()?,
            kinds: commit
                .events
                .iter()
                .map(|e| e.kind().as_bytes().to_vec())
                .collect(),
            payloads: commit
                .events
                .iter()
                .map(|e| to_json("an event payload", &e.payload()))
                .collect::<Result<_, _>>()?,
            run_state: to_json("the run state", &commit.run.state())?,
            ticket,
        })
    }
}

/// The thread's head row as read.
struct Head {
    version: i64,
    message_count: i64,
    state_count: i64,
    digest: String,
}

/// The run's row as read.
struct RunRow {
    thread_id: Vec<u8>,
    state: RunState,
    commits: i64,
}

/// The operation's stored receipt as read.
struct OperationRow {
    payload_hash: Vec<u8>,
    sequence: i64,
    thread_version: i64,
}

/// What step 1 read, in one snapshot.
struct Snapshot {
    head: Option<Head>,
    run: Option<RunRow>,
    operation: Option<OperationRow>,
    /// The thread's claim (live or not) and the server's time.
    claim: (Option<ClaimRecord>, u64),
}

impl CommitLog for PostgresStore {
    fn commit(&mut self, commit: ThreadCommit) -> Result<CommitRecord, StoreError> {
        match self.write(Write::Plain(commit))? {
            Written::Record(record) => Ok(record),
            Written::Receipt(receipt) => Ok(receipt.record),
        }
    }

    /// Store time is the server's clock: the operation's `now_ms` is not read.
    fn commit_operation(
        &mut self,
        operation: CommitOperation,
    ) -> Result<CommitReceipt, StoreError> {
        match self.write(Write::Fenced(operation))? {
            Written::Receipt(receipt) => Ok(receipt),
            Written::Record(record) => Err(StoreError::unavailable(format!(
                "internal: an operation produced a bare record ({record:?})"
            ))),
        }
    }
}

impl PostgresStore {
    /// Read, decide, write; start over when another commit on the thread got in between, or
    /// when the read found its connection closed (reading twice changes nothing).
    fn write(&mut self, write: Write) -> Result<Written, StoreError> {
        // A malformed commit is rejected before anything is encoded or read (the core's
        // admission checks it again, first, in the same words).
        write.commit().validate()?;
        let encoded = Encoded::new(write.commit())?;
        let operation = write.operation();
        // An ordinal no stored operation has (stored ordinals fit in bigint).
        let ordinal = operation
            .and_then(|o| bound(o.operation_id.ordinal))
            .unwrap_or(-1);
        let mut reconnected = false;
        for _ in 0..RACES {
            let (session, fresh) = self.session_for_write()?;
            let snapshot = match read(session, &encoded, ordinal) {
                Ok(snapshot) => snapshot,
                Err(error) => {
                    let closed = session.client.is_closed();
                    if closed {
                        self.drop_session();
                        if !fresh && !reconnected {
                            // Closed while idle (a server restart, an idle timeout): nothing of
                            // this commit was sent; read again on a new connection.
                            reconnected = true;
                            continue;
                        }
                    }
                    return Err(error);
                }
            };
            let read_version = snapshot.head.as_ref().map_or(0, |h| h.version);
            let head = commit_head(snapshot, operation)?;
            let admission = match operation {
                Some(operation) => admit(operation, &head),
                None => admit_commit(write.commit(), &head),
            };
            let plan = match admission {
                Admission::Duplicate(receipt) => return Ok(Written::Receipt(receipt)),
                Admission::Reject(CommitError::CounterOverflow { counter }) => {
                    // The store-wide sequences come first in the core's order; the head
                    // carries none, so ask the database whether one of them is at its end.
                    let counter =
                        overflowing_counter(session, &encoded)?.map_or(counter, str::to_owned);
                    return Err(CommitError::CounterOverflow { counter }.into());
                }
                Admission::Reject(rejection) => return Err(rejection.into()),
                Admission::Append(plan) => Columns::of(&plan, &head, read_version, &encoded)?,
            };
            let written = write_plan(session, &encoded, operation, ordinal, &plan);
            if written.is_err() && !session.client.is_closed() {
                // A write that failed while holding the session-level commit mutex (past the
                // sequences' end, a cancelled statement) would keep it past its transaction.
                session
                    .client
                    .query_one(&session.sql.release_mutex, &[])
                    .map_err(|e| db_error("commit: release the commit mutex", e))?;
            }
            match written {
                Ok(Some(sequence)) => {
                    let record = CommitRecord {
                        sequence: count("commit sequence", sequence)?,
                        thread_version: count("thread version", plan.new_version)?,
                    };
                    return Ok(match operation {
                        Some(operation) => Written::Receipt(CommitReceipt {
                            operation_id: operation.operation_id.clone(),
                            payload_hash: operation.payload_hash.clone(),
                            record,
                            duplicate: false,
                        }),
                        None => Written::Record(record),
                    });
                }
                // Another commit on the thread landed since the read: decide again.
                Ok(None) => continue,
                Err(error) if is_new_run_race(&error) => continue,
                Err(error) if claim_rejection(&error).is_some() => {
                    return Err(claim_rejection(&error)
                        .unwrap_or(CommitError::ClaimLost { current_epoch: 0 })
                        .into());
                }
                Err(error)
                    if error.code() == Some(&SqlState::NUMERIC_VALUE_OUT_OF_RANGE)
                        || error.code() == Some(&SqlState::SEQUENCE_GENERATOR_LIMIT_EXCEEDED) =>
                {
                    // Only the store's sequences are computed in SQL; the rest was checked.
                    if let Some(counter) = overflowing_counter(session, &encoded)? {
                        return Err(CommitError::CounterOverflow {
                            counter: counter.to_owned(),
                        }
                        .into());
                    }
                    return Err(db_error("commit: write", error));
                }
                Err(error) => {
                    if session.client.is_closed() {
                        self.drop_session();
                    }
                    return Err(db_error(
                        "commit: write (if the connection was lost while the write was in \
                         flight, the commit may have landed; retry the operation: a duplicate \
                         receipt says it did)",
                        error,
                    ));
                }
            }
        }
        Err(StoreError::unavailable(format!(
            "commit on thread {:?}: {RACES} other commits on the thread landed first, one \
             after another; gave up",
            write.commit().thread_id.as_str()
        )))
    }
}

/// Step 1: the thread's head, the run and the operation, in one snapshot.
fn read(session: &mut Session, encoded: &Encoded, ordinal: i64) -> Result<Snapshot, StoreError> {
    let row = session
        .client
        .query_one(
            &session.sql.read_for_commit,
            &[&encoded.thread, &encoded.run, &ordinal],
        )
        .map_err(|e| db_error("commit: read the thread, run and operation", e))?;
    let head = match column::<Option<i64>>(&row, 0, "the thread's version")? {
        None => None,
        Some(version) => Some(Head {
            version,
            message_count: column(&row, 1, "the thread's message count")?,
            state_count: column(&row, 2, "the thread's state count")?,
            digest: column(&row, 3, "the thread's transcript digest")?,
        }),
    };
    let run = match column::<Option<Vec<u8>>>(&row, 4, "the run's thread")? {
        None => None,
        Some(thread_id) => Some(RunRow {
            thread_id,
            state: from_json("run state", &column::<String>(&row, 5, "the run's state")?)?,
            commits: column(&row, 6, "the run's commits")?,
        }),
    };
    let operation = match column::<Option<Vec<u8>>>(&row, 7, "the operation's hash")? {
        None => None,
        Some(payload_hash) => Some(OperationRow {
            payload_hash,
            sequence: column(&row, 8, "the operation's sequence")?,
            thread_version: column(&row, 9, "the operation's thread version")?,
        }),
    };
    let claim = match column::<Option<i64>>(&row, 12, "the claim's epoch")? {
        None | Some(0) => None,
        Some(epoch) => Some(ClaimRecord {
            owner: column(&row, 10, "the claim's owner")?,
            request_id: column(&row, 11, "the claim's request id")?,
            epoch: count("claim epoch", epoch)?,
            expires_at_ms: count("claim expiry", column(&row, 13, "the claim's expiry")?)?,
            released_at_ms: column::<Option<i64>>(&row, 14, "the claim's release")?
                .map(|at| count("claim release", at))
                .transpose()?,
        }),
    };
    let now = count("server clock", column(&row, 15, "the server's clock")?)?;
    let claim = (claim, now);
    Ok(Snapshot {
        head,
        run,
        operation,
        claim,
    })
}

/// Step 2's input: what was read, as the core's [`CommitHead`] (the server's clock is store
/// time; the sequences are the database's, so the head carries none).
fn commit_head(
    snapshot: Snapshot,
    operation: Option<&CommitOperation>,
) -> Result<CommitHead, StoreError> {
    let Snapshot {
        head,
        run,
        operation: stored,
        claim: (claim, now_ms),
    } = snapshot;
    let mut commit_head = CommitHead::empty(i64::MAX.unsigned_abs());
    if let Some(head) = head {
        commit_head.thread_version = count("thread version", head.version)?;
        commit_head.message_count = count("message count", head.message_count)?;
        commit_head.state_count = count("state count", head.state_count)?;
        commit_head.transcript_digest = head.digest;
    }
    commit_head.run = run
        .map(|run| -> Result<RunHead, StoreError> {
            Ok(RunHead {
                thread_id: ThreadId::new(text_of("thread id", run.thread_id)?),
                state: run.state,
                commits: count("run commit count", run.commits)?,
            })
        })
        .transpose()?;
    commit_head.stored_operation = match (operation, stored) {
        (Some(operation), Some(stored)) => Some(CommitReceipt {
            operation_id: operation.operation_id.clone(),
            payload_hash: text_of("payload hash", stored.payload_hash)?,
            record: CommitRecord {
                sequence: count("commit sequence", stored.sequence)?,
                thread_version: count("thread version", stored.thread_version)?,
            },
            duplicate: false,
        }),
        _ => None,
    };
    commit_head.claim = claim;
    commit_head.now_ms = now_ms;
    Ok(commit_head)
}

/// The column values of an accepted commit's write, from the core's plan.
struct Columns {
    new_thread: bool,
    read_version: i64,
    new_version: i64,
    new_run: bool,
    run_commits: i64,
    message_positions: Vec<i64>,
    digests: Vec<String>,
    message_count: i64,
    state_positions: Vec<i64>,
    state_count: i64,
    transcript_digest: String,
}

impl Columns {
    fn of(
        plan: &AppendPlan,
        head: &CommitHead,
        read_version: i64,
        encoded: &Encoded,
    ) -> Result<Columns, StoreError> {
        // The plan's counters were checked against `bigint`'s end (the head's limit).
        let big = |what: &str, value: u64| {
            bound(value).ok_or_else(|| {
                StoreError::unavailable(format!("internal: the planned {what} passes bigint"))
            })
        };
        let message_start = big("message position", plan.message_start)?;
        let state_start = big("state position", plan.state_start)?;
        let message_count = message_start + big("message count", encoded.messages.len() as u64)?;
        let state_count = state_start + big("state count", encoded.state.len() as u64)?;
        Ok(Columns {
            new_thread: plan.new_thread,
            read_version,
            new_version: big("thread version", plan.thread_version)?,
            new_run: plan.new_run,
            run_commits: big("run commit count", plan.run_commits)?,
            // Plain ranges: they stop at their end without stepping past it.
            message_positions: (message_start..message_count).collect(),
            digests: plan.digests.clone(),
            message_count,
            state_positions: (state_start..state_count).collect(),
            state_count,
            transcript_digest: plan.transcript_digest(&head.transcript_digest).to_owned(),
        })
    }
}

/// Step 3: the write. `Ok(Some(sequence))` when it landed, `Ok(None)` when the thread had
/// moved on since the read (then nothing was written).
fn write_plan(
    session: &mut Session,
    encoded: &Encoded,
    operation: Option<&CommitOperation>,
    ordinal: i64,
    plan: &Columns,
) -> Result<Option<i64>, postgres::Error> {
    let events = i64::try_from(encoded.payloads.len()).unwrap_or(i64::MAX);
    let (is_operation, hash) = match operation {
        Some(o) => (true, o.payload_hash.as_bytes()),
        None => (false, &[][..]),
    };
    let thread_lock = session.thread_lock(&encoded.thread);
    let token = operation.and_then(|o| o.claim.as_ref());
    let (claim_owner, claim_epoch) = match token {
        Some(token) => (Some(token.owner.as_str()), Some(bound(token.epoch))),
        None => (None, None),
    };
    let row = session.client.query_one(
        &session.sql.write,
        &[
            &events,
            &encoded.thread,
            &encoded.run,
            &encoded.kinds,
            &encoded.payloads,
            &is_operation,
            &ordinal,
            &hash,
            &plan.new_version,
            &plan.message_positions,
            &encoded.messages,
            &plan.digests,
            &plan.state_positions,
            &encoded.state,
            &encoded.run_state,
            &plan.run_commits,
            &encoded.ticket,
            &plan.new_run,
            &plan.message_count,
            &plan.state_count,
            &plan.transcript_digest,
            &plan.new_thread,
            &plan.read_version,
            &thread_lock,
            &session.commit_mutex,
            &claim_owner,
            &claim_epoch,
        ],
    )?;
    // NULL exactly when the thread had moved on (see `Statements::write`).
    row.try_get(0)
}

/// The rejection of a claim that `runcore_commit_claimed` found changed since the decision.
fn claim_rejection(error: &postgres::Error) -> Option<CommitError> {
    let db = error.as_db_error()?;
    let number = |text: Option<&str>| text.and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
    match db.code().code() {
        "RCCL1" => Some(CommitError::ClaimLost {
            current_epoch: number(db.detail()),
        }),
        "RCCL2" => Some(CommitError::ClaimHeld {
            owner: db.hint().unwrap_or_default().to_owned(),
            expires_at_ms: number(db.detail()),
        }),
        _ => None,
    }
}

/// The same new run committed concurrently on another thread (see [`NEW_RUN_KEYS`]).
fn is_new_run_race(error: &postgres::Error) -> bool {
    error.as_db_error().is_some_and(|db| {
        db.code() == &SqlState::UNIQUE_VIOLATION
            && db
                .constraint()
                .is_some_and(|constraint| NEW_RUN_KEYS.contains(&constraint))
    })
}

/// The store-wide counter that one more commit with the encoded events would overflow, if any
/// (`MemoryStore` reports these before the thread's and run's).
fn overflowing_counter(
    session: &mut Session,
    encoded: &Encoded,
) -> Result<Option<&'static str>, StoreError> {
    let events = i64::try_from(encoded.payloads.len()).unwrap_or(i64::MAX);
    let row = session
        .client
        .query_one(&session.sql.counters, &[])
        .map_err(|e| db_error("commit: read the counters", e))?;
    let last_commit: i64 = column(&row, 0, "the last commit sequence")?;
    let last_event: i64 = column(&row, 1, "the last event sequence")?;
    // A `SEQUENCE` stops at `bigint`'s end: at it, `nextval` fails.
    Ok(if last_commit.checked_add(1).is_none() {
        Some("commit sequence")
    } else if last_event.checked_add(events).is_none() {
        Some("event sequence")
    } else {
        None
    })
}
