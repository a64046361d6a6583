//! Thread claims and due work (SPEC §7.2, §7.3): SQLite beside `MemoryStore`.
//!
//! - **`commit`: the claim check's cost per commit.** The commit of the `commits` bench (one
//!   1 KB assistant message and its audit drafts, a fenced `commit_operation` built and hashed
//!   before the clock starts) on three threads of one store: one never claimed (unclaimed
//!   operations), one claimed with a live lease of 10 minutes (the same operations
//!   `.claimed(token, now)`), one claimed once and released (unclaimed operations). They take
//!   turns commit by commit, the first of each turn rotating, each commit timed on its own;
//!   the thread names rotate between the kinds from round to round, so no kind always has the
//!   id that sorts last (cheaper to append to the indexes). Reported: each kind's median and
//!   mean per-commit time and its ratio to the unclaimed one, per round and overall.
//! - **`claims`: claims and renews per second**: `claim_thread` on distinct never-claimed
//!   threads, then `renew_claim` of one held claim over and over.
//! - **`due`: `due_work` on a store of 100,000 tickets, 1% due**: 100,000 threads, each with
//!   one run Awaiting a permission ticket with a deadline (every hundredth deadline has passed,
//!   spread over the last 1,000 s; the others are 1–2 hours ahead), written by real commits.
//!   Then `due_work(now, limit)` for limits 100, 1,000 and 2,000, each the median of 30 calls
//!   (after one warm-up), and the query plan of the store's two due-work queries.
//! - **`due`, too, every thread claimed once**: after the first measurements every thread is
//!   claimed and released (as a durable host leaves each thread it handled) and `due_work` is
//!   measured again; the orphan scan reads those claim rows.
//!
//! ```sh
//! cargo bench -p runcore-sqlite --bench claims            # all three, about 2 minutes
//! cargo bench -p runcore-sqlite --bench claims -- commit  # one part: commit, claims, due
//! ```
//!
//! Figures: see `RESULTS.md` beside this file.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use runcore::store::{ClaimRequest, CommitLog, MemoryStore, ThreadClaims};
use runcore::{
    AssistantMessage, AuditDraft, CallId, CommitOperation, Message, PendingTool, ResumeTicket,
    RunDisposition, RunId, ThreadCommit, ThreadId, ToolWaitReason, WaitIdentity,
};
use runcore_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use serde_json::json;
use tempfile::TempDir;

/// A lease that outlasts the bench.
const LEASE_MS: u64 = 600_000;

/// Wall-clock milliseconds since the Unix epoch: the store time the bench passes.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// About 1 KB of assistant text.
fn kilobyte(i: usize) -> String {
    let mut text = format!("Step {i}: ");
    while text.len() < 1024 {
        text.push_str("the quick brown fox jumps over the lazy dog; ");
    }
    text.truncate(1024);
    text
}

/// `n` realistic commits of one run on `thread`, as unclaimed fenced operations (the
/// `commits` bench's commit).
fn operations(thread: &str, n: usize) -> Vec<CommitOperation> {
    let run = format!("{thread}/run-1");
    (0..n)
        .map(|i| {
            let commit = ThreadCommit::assemble(
                ThreadId::new(thread),
                RunDisposition::Running {
                    run_id: run.as_str().into(),
                },
                true,
                vec![Message::from(AssistantMessage::text(kilobyte(i)))],
                vec![],
                vec![
                    AuditDraft::new(
                        "model_usage",
                        json!({"step": i, "input_tokens": 1200 + i, "output_tokens": 256}),
                    ),
                    AuditDraft::new("step_finished", json!({"step": i, "now_ms": i * 1000})),
                ],
            );
            CommitOperation::new(commit, i as u64, i as u64)
        })
        .collect()
}

fn request(thread: &str, owner: &str, request_id: &str) -> ClaimRequest {
    ClaimRequest {
        thread_id: ThreadId::new(thread),
        owner: owner.to_owned(),
        request_id: request_id.to_owned(),
        lease_ms: LEASE_MS,
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn mean(samples: &[Duration]) -> Duration {
    samples.iter().sum::<Duration>() / u32::try_from(samples.len().max(1)).unwrap_or(u32::MAX)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The three kinds of commit the side-by-side interleaves.
const KINDS: [&str; 3] = ["unclaimed", "claimed", "released"];

/// The thread names of round `round`: `[unclaimed, claimed, released]`, rotated from round to
/// round so that each kind's keys land at each position of the store's B-trees (ids sorting
/// last are appended at an index's right edge, which is cheaper than inserting in the middle).
fn round_names(round: usize) -> [&'static str; 3] {
    const NAMES: [&str; 3] = ["a", "m", "z"];
    [
        NAMES[round % 3],
        NAMES[(round + 1) % 3],
        NAMES[(round + 2) % 3],
    ]
}

/// One round of the side-by-side: per-commit times of `n` commits of each kind: on a thread
/// never claimed (unclaimed operations), on a thread with a live claim (`.claimed(token,
/// now)`), and on a thread claimed once and released (unclaimed operations: the claim row is
/// there to read, but not live). The kinds take turns, the first of each turn rotating.
fn claim_cost_round<S: CommitLog + ThreadClaims>(
    store: &mut S,
    n: usize,
    [u, c, r]: [&str; 3],
) -> [Vec<Duration>; 3] {
    let claim = store
        .claim_thread(&request(c, "bench-owner", "c-1"), now_ms())
        .expect("claim");
    let released = store
        .claim_thread(&request(r, "bench-owner", "r-1"), now_ms())
        .expect("claim");
    store.release_claim(&released, now_ms()).expect("release");
    let now = now_ms();
    let mut queues: [std::vec::IntoIter<CommitOperation>; 3] = [
        operations(u, n).into_iter(),
        operations(c, n)
            .into_iter()
            .map(|op| op.claimed(claim.token(), now))
            .collect::<Vec<_>>()
            .into_iter(),
        operations(r, n).into_iter(),
    ];
    let mut times: [Vec<Duration>; 3] = std::array::from_fn(|_| Vec::with_capacity(n));
    for i in 0..n {
        for k in 0..3 {
            let kind = (i + k) % 3;
            let op = queues[kind].next().expect("an operation");
            let started = Instant::now();
            store.commit_operation(op).expect("a benchmark commit");
            times[kind].push(started.elapsed());
        }
    }
    times
}

/// Rounds of the side-by-side on fresh stores from `open`; prints each and the overall figures.
fn claim_cost<S: CommitLog + ThreadClaims>(
    label: &str,
    rounds: usize,
    n: usize,
    open: &mut dyn FnMut(usize) -> S,
) {
    println!("  {label}");
    let mut all: [Vec<Duration>; 3] = Default::default();
    for round in 0..rounds {
        let names = round_names(round);
        let mut store = open(round);
        let times = claim_cost_round(&mut store, n, names);
        let medians: Vec<f64> = times.iter().map(|t| micros(median(t.clone()))).collect();
        println!(
            "    round {round} (threads u={} c={} r={}): median µs unclaimed {:.1}, claimed {:.1} \
             ({:.3}x), released {:.1} ({:.3}x)",
            names[0],
            names[1],
            names[2],
            medians[0],
            medians[1],
            medians[1] / medians[0],
            medians[2],
            medians[2] / medians[0]
        );
        for (a, t) in all.iter_mut().zip(times) {
            a.extend(t);
        }
    }
    let medians: Vec<f64> = all.iter().map(|t| micros(median(t.clone()))).collect();
    let means: Vec<f64> = all.iter().map(|t| micros(mean(t))).collect();
    println!(
        "    all rounds, median µs: {} {:.1}, {} {:.1} ({:.3}x), {} {:.1} ({:.3}x); mean µs: \
         {:.1}, {:.1} ({:.3}x), {:.1} ({:.3}x)",
        KINDS[0],
        medians[0],
        KINDS[1],
        medians[1],
        medians[1] / medians[0],
        KINDS[2],
        medians[2],
        medians[2] / medians[0],
        means[0],
        means[1],
        means[1] / means[0],
        means[2],
        means[2] / means[0]
    );
}

fn sqlite_file(dir: &TempDir, name: &str, level: Synchronous) -> SqliteStore {
    let path = dir.path().join(format!("{name}.sqlite"));
    SqliteStore::open(&path, SqliteOptions::default().with_synchronous(level))
        .expect("a fresh store")
}

fn commit_part(dir: &TempDir) {
    println!(
        "claim check per commit: unclaimed vs claimed commits, interleaved, 1 KB message + \
         3 audit drafts"
    );
    claim_cost(
        "MemoryStore (6 rounds x 3 x 20,000)",
        6,
        20_000,
        &mut |_| MemoryStore::new(),
    );
    claim_cost(
        "SQLite in memory (6 rounds x 3 x 5,000)",
        6,
        5_000,
        &mut |_| SqliteStore::open_in_memory().expect("an in-memory store"),
    );
    claim_cost(
        "SQLite file, NORMAL (6 rounds x 3 x 5,000)",
        6,
        5_000,
        &mut |round| sqlite_file(dir, &format!("cost-normal-{round}"), Synchronous::Normal),
    );
    claim_cost(
        "SQLite file, FULL (3 rounds x 3 x 300)",
        3,
        300,
        &mut |round| sqlite_file(dir, &format!("cost-full-{round}"), Synchronous::Full),
    );
}

/// Claims per second on `n` distinct fresh threads, then renews per second of one claim.
fn claims_rates<S: ThreadClaims>(store: &mut S, n: usize) -> (f64, f64) {
    let requests: Vec<ClaimRequest> = (0..n)
        .map(|i| request(&format!("claimed-{i}"), "bench-owner", "1"))
        .collect();
    let started = Instant::now();
    for r in &requests {
        store.claim_thread(r, now_ms()).expect("a grant");
    }
    let claims = n as f64 / started.elapsed().as_secs_f64();
    let mut claim = store
        .claim_thread(&request("renewed", "bench-owner", "1"), now_ms())
        .expect("a grant");
    let started = Instant::now();
    for _ in 0..n {
        claim = store
            .renew_claim(&claim, LEASE_MS, now_ms())
            .expect("a renew");
    }
    let renews = n as f64 / started.elapsed().as_secs_f64();
    (claims, renews)
}

fn claims_part(dir: &TempDir) {
    println!("\nclaims/s (claim_thread on distinct fresh threads) and renews/s (one held claim)");
    let report = |label: &str, (claims, renews): (f64, f64)| {
        println!("  {label:<34} claims/s {claims:>9.0}  renews/s {renews:>9.0}");
    };
    report(
        "MemoryStore (100,000)",
        claims_rates(&mut MemoryStore::new(), 100_000),
    );
    report(
        "SQLite in memory (20,000)",
        claims_rates(
            &mut SqliteStore::open_in_memory().expect("an in-memory store"),
            20_000,
        ),
    );
    report(
        "SQLite file, NORMAL (20,000)",
        claims_rates(
            &mut sqlite_file(dir, "claims-normal", Synchronous::Normal),
            20_000,
        ),
    );
    report(
        "SQLite file, FULL (1,000)",
        claims_rates(
            &mut sqlite_file(dir, "claims-full", Synchronous::Full),
            1_000,
        ),
    );
}

/// The first commit of a thread whose run awaits a permission on a tool call until
/// `deadline_ms`: a prompt, the assistant's call, and the run's start.
fn awaiting_commit(i: usize, deadline_ms: u64) -> CommitOperation {
    let thread = format!("t-{i:06}");
    let run = RunId::new(format!("{thread}/run-1"));
    let ticket = ResumeTicket::tool_call(
        WaitIdentity {
            correlation_id: format!("{run}:wait-1"),
            run_id: run.clone(),
            thread_id: ThreadId::new(&thread),
            snapshot_id: "snapshot-1".to_owned(),
            catalog_fingerprint: "catalog-1".to_owned(),
        },
        ToolWaitReason::Permission,
        CallId::new("call-1"),
        PendingTool {
            name: "deploy".into(),
            arguments: json!({"service": "api", "version": i}).into(),
        },
        Some(deadline_ms),
    );
    let commit = ThreadCommit::assemble(
        ThreadId::new(&thread),
        RunDisposition::Awaiting(Box::new(ticket)),
        true,
        vec![Message::user(format!("deploy api version {i}"))],
        vec![],
        vec![AuditDraft::run_started(&run, 0).with_now_ms(deadline_ms)],
    );
    CommitOperation::new(commit, 0, 0)
}

/// 100,000 tickets, every hundredth due at `now` (spread over the last 1,000 s), the others
/// 1–2 hours ahead.
fn tickets(now: u64) -> Vec<CommitOperation> {
    (0..TICKETS)
        .map(|i| {
            let deadline = if i.is_multiple_of(100) {
                now - 1_000_000 + (i as u64 / 100) * 1_000
            } else {
                now + 3_600_000 + (i as u64 * 36) % 3_600_000
            };
            awaiting_commit(i, deadline)
        })
        .collect()
}

fn fill<S: CommitLog>(store: &mut S, ops: &[CommitOperation]) -> Duration {
    let started = Instant::now();
    for op in ops {
        store.commit_operation(op.clone()).expect("a ticket commit");
    }
    started.elapsed()
}

/// `due_work(now, limit)` timed: (first call, median of 30 after it), checking the count.
fn due_timings<S: ThreadClaims>(store: &S, limit: usize, expected: usize) -> (Duration, Duration) {
    let call = || {
        let started = Instant::now();
        let due = store.due_work(now_ms(), limit).expect("due work");
        let elapsed = started.elapsed();
        assert_eq!(due.len(), expected.min(limit), "due items at limit {limit}");
        elapsed
    };
    let first = call();
    let rest = (0..30).map(|_| call()).collect();
    (first, median(rest))
}

/// The store's two due-work queries (as in `src/claims.rs`), for their plans.
const DEADLINE_SQL: &str = "SELECT thread_id, run_id, deadline_ms FROM runs \
     WHERE deadline_ms IS NOT NULL AND deadline_ms <= ?1 \
     ORDER BY deadline_ms, thread_id, run_id LIMIT ?2";
const ORPHAN_SQL: &str = "SELECT c.thread_id, t.latest_run, c.ends_at_ms \
     FROM runs r INDEXED BY runs_running \
     CROSS JOIN threads t ON t.thread_id = r.thread_id AND t.latest_run = r.run_id \
     CROSS JOIN thread_claims c ON c.thread_id = r.thread_id \
     WHERE r.state = '{\"type\":\"running\"}' AND c.ends_at_ms <= ?1 \
     ORDER BY c.ends_at_ms, c.thread_id LIMIT ?2";

fn query_plan(conn: &rusqlite::Connection, sql: &str, now: i64) -> Vec<String> {
    let mut statement = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .expect("explain");
    statement
        .query_map(rusqlite::params![now, 1000], |r| r.get::<_, String>(3))
        .expect("plan rows")
        .map(|row| row.expect("a plan row"))
        .collect()
}

fn due_part(dir: &TempDir) {
    println!("\ndue_work on 100,000 tickets (100,000 awaiting runs with deadlines), 1,000 due");
    let now = now_ms();
    let ops = tickets(now);
    let mut memory = MemoryStore::new();
    let memory_fill = fill(&mut memory, &ops);
    let path = dir.path().join("due.sqlite");
    let options = SqliteOptions::default().with_synchronous(Synchronous::Normal);
    let mut sqlite = SqliteStore::open(&path, options.clone()).expect("a fresh store");
    let sqlite_fill = fill(&mut sqlite, &ops);
    drop(sqlite);
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "  filled by {} commits: MemoryStore in {memory_fill:.1?}; SQLite (NORMAL) in \
         {sqlite_fill:.1?} ({:.0} commits/s, file {:.1} MB)",
        ops.len(),
        ops.len() as f64 / sqlite_fill.as_secs_f64(),
        size as f64 / 1e6
    );
    drop(ops);
    let mut sqlite = SqliteStore::open(&path, options).expect("reopens");
    let conn = rusqlite::Connection::open(&path).expect("a second connection");
    due_report("no claims", &memory, &sqlite, &conn);
    // Every thread claimed once and released, as a durable host leaves each thread it handled
    // (it claims before it acts, SPEC §7.2): the claim rows the orphan scan reads.
    let started = Instant::now();
    for i in 0..TICKETS {
        let r = request(&format!("t-{i:06}"), "bench-owner", "1");
        let claim = memory.claim_thread(&r, now_ms()).expect("a grant");
        memory.release_claim(&claim, now_ms()).expect("a release");
    }
    let memory_claims = started.elapsed();
    let started = Instant::now();
    for i in 0..TICKETS {
        let r = request(&format!("t-{i:06}"), "bench-owner", "1");
        let claim = sqlite.claim_thread(&r, now_ms()).expect("a grant");
        sqlite.release_claim(&claim, now_ms()).expect("a release");
    }
    println!(
        "\n  claimed and released every thread: MemoryStore in {memory_claims:.1?}, SQLite in \
         {:.1?}",
        started.elapsed()
    );
    due_report("every thread claimed once", &memory, &sqlite, &conn);
}

const TICKETS: usize = 100_000;

/// `due_work` timings of both stores at three limits, the two queries' plans, and the time
/// of each query alone (SQLite).
fn due_report(
    label: &str,
    memory: &MemoryStore,
    sqlite: &SqliteStore,
    conn: &rusqlite::Connection,
) {
    println!("  {label}:");
    for limit in [100usize, 1_000, 2_000] {
        let (m_first, m_median) = due_timings(memory, limit, 1_000);
        let (s_first, s_median) = due_timings(sqlite, limit, 1_000);
        println!(
            "    due_work(now, {limit:>5}): MemoryStore first {m_first:>9.2?} median \
             {m_median:>9.2?}   SQLite first {s_first:>9.2?} median {s_median:>9.2?}"
        );
    }
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    for (what, sql) in [("deadline", DEADLINE_SQL), ("orphan", ORPHAN_SQL)] {
        let time = median(
            (0..10)
                .map(|_| {
                    let started = Instant::now();
                    let mut statement = conn.prepare_cached(sql).expect("prepare");
                    let rows = statement
                        .query_map(rusqlite::params![now, 1000], |_| Ok(()))
                        .expect("query")
                        .count();
                    std::hint::black_box(rows);
                    started.elapsed()
                })
                .collect(),
        );
        println!("    the {what} scan alone (LIMIT 1000): median {time:.2?}; EXPLAIN QUERY PLAN:");
        for line in query_plan(conn, sql, now) {
            println!("        {line}");
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let all = args.is_empty();
    let wants = |part: &str| all || args.iter().any(|a| a == part);
    let dir =
        TempDir::with_prefix_in("sqlite-claims-", env!("CARGO_TARGET_TMPDIR")).expect("a temp dir");
    println!(
        "{} CPUs; load average {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    if wants("commit") {
        commit_part(&dir);
    }
    if wants("claims") {
        claims_part(&dir);
    }
    if wants("due") {
        due_part(&dir);
    }
}
