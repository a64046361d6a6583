//! Thread claims and due work (SPEC §7.2, §7.3) against a real PostgreSQL server.
//!
//! - **`commit`: the claim check's cost per commit.** The `commits` bench's commit (one 1 KB
//!   assistant message and its audit drafts, a fenced `commit_operation` built and hashed
//!   before the clock starts) on three threads through one connection: one never claimed
//!   (unclaimed operations), one claimed with a live lease of 10 minutes (the same operations
//!   `.claimed(token, now)`), one claimed once and released (unclaimed operations). They take
//!   turns commit by commit, the first of each turn rotating, each commit timed on its own;
//!   thread names rotate between the kinds from round to round. Reported: each kind's median
//!   and mean per-commit time and its ratio to the unclaimed one, per round and overall.
//! - **`wire`: round trips per call.** The store connects through a TCP proxy in this process
//!   that forwards every byte and counts the protocol's messages on the wire: from the client
//!   `Parse` (P), `Bind` (B: one per statement executed through the extended protocol),
//!   simple `Query` (Q: `BEGIN`/`COMMIT`), `Close` (C) and `Sync` (S); from the server
//!   `ReadyForQuery` (Z: one per round trip the client completed). Counted over 200 unclaimed
//!   commits, 200 claimed commits, and 200 each of the claim calls and `due_work`.
//! - **`claims`: claims and renews per second**: `claim_thread` on distinct never-claimed
//!   threads, then `renew_claim` of one held claim over and over.
//! - **`due`: `due_work` on 100,000 tickets, 1% due**: 100,000 threads, each with one run
//!   Awaiting a permission ticket with a deadline (every hundredth deadline passed, spread over
//!   the last 1,000 s of the server's clock; the others 1–2 hours ahead), written by real
//!   commits from 4 connections. Then `due_work(now, limit)` for limits 100, 1,000 and 2,000
//!   (median of 30 calls after a warm-up) and `EXPLAIN (ANALYZE, BUFFERS)` of the store's
//!   deadline query, right after the fill and again after `ANALYZE`; then the same once every
//!   thread has been claimed and released (as a durable host leaves each thread it handled),
//!   which the orphan scan reads.
//!
//! ```sh
//! scripts/with-postgres.sh cargo bench -p runcore-postgres --bench claims
//! RUNCORE_PG_DURABLE=1 scripts/with-postgres.sh cargo bench -p runcore-postgres --bench claims -- commit wire claims
//! ```
//! Arguments: any of `commit`, `wire`, `claims`, `due` (default: all). `RUNCORE_BENCH_COMMITS`
//! sets the commits per thread per round of `commit` (default 2,000; 5 rounds).
//!
//! Figures: see `RESULTS.md` beside this file.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use postgres::config::Host;
use postgres::{Client, Config, NoTls};
use runcore::store::{ClaimRequest, CommitLog, StoreHandles, ThreadClaims};
use runcore::{
    AssistantMessage, AuditDraft, CallId, CommitOperation, Message, PendingTool, ResumeTicket,
    RunDisposition, RunId, ThreadCommit, ThreadId, ToolWaitReason, WaitIdentity,
};
use runcore_postgres::{PostgresStore, URL_ENV};
use serde_json::json;

/// A lease that outlasts the bench.
const LEASE_MS: u64 = 600_000;

/// Wall-clock milliseconds since the Unix epoch (the server, on this machine, reads the same
/// clock).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A model step's commit: one assistant message of 1 KB and three audit drafts.
fn step_commit(thread: &ThreadId, run: &RunId, k: u64) -> ThreadCommit {
    let text: String = format!("step {k}: ")
        .chars()
        .chain(std::iter::repeat('x'))
        .take(1024)
        .collect();
    ThreadCommit::assemble(
        thread.clone(),
        RunDisposition::Running {
            run_id: run.clone(),
        },
        true,
        vec![Message::from(AssistantMessage::text(text))],
        vec![],
        vec![
            AuditDraft::new("model_called", json!({ "step": k, "input_tokens": 1200 })),
            AuditDraft::new(
                "usage",
                json!({ "step": k, "output_tokens": 256, "cost": 0.0031 }),
            ),
        ],
    )
}

/// `n` step commits of one run on `thread`, as unclaimed fenced operations.
fn operations(thread: &str, n: usize) -> Vec<CommitOperation> {
    let thread = ThreadId::new(thread);
    let run = RunId::new(format!("{thread}/run-1"));
    (0..n as u64)
        .map(|k| CommitOperation::new(step_commit(&thread, &run, k), k, k))
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

fn main() {
    let Ok(url) = std::env::var(URL_ENV) else {
        println!("skipped: {URL_ENV} is not set (run through scripts/with-postgres.sh)");
        return;
    };
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let all = args.is_empty();
    let wants = |part: &str| all || args.iter().any(|a| a == part);
    let mut admin = Client::connect(&url, NoTls).expect("connect");
    let settings: Vec<String> = ["server_version", "fsync", "synchronous_commit"]
        .iter()
        .map(|name| {
            let value: String = admin
                .query_one(&format!("SHOW {name}"), &[])
                .map(|row| row.get(0))
                .unwrap_or_default();
            format!("{name}={value}")
        })
        .collect();
    println!(
        "PostgreSQL at {URL_ENV} ({}); {} CPUs; load average {}",
        settings.join(", "),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let pid = std::process::id();
    if wants("commit") {
        let n = std::env::var("RUNCORE_BENCH_COMMITS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2_000);
        commit_part(&url, &mut admin, pid, n);
    }
    if wants("wire") {
        wire_part(&url, &mut admin, pid);
    }
    if wants("claims") {
        claims_part(&url, &mut admin, pid);
    }
    if wants("due") {
        due_part(&url, &mut admin, pid);
    }
}

fn drop_schema(admin: &mut Client, schema: &str) {
    let _ = admin.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"));
}

// ---- commit: the claim check's cost ----

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

fn commit_part(url: &str, admin: &mut Client, pid: u32, n: usize) {
    const ROUNDS: usize = 6;
    println!(
        "\nclaim check per commit: unclaimed, claimed and released-claim commits, interleaved on \
         one connection, 1 KB message + 3 audit drafts"
    );
    let schema = |round: usize| format!("runcore_bench_claim_cost_{pid}_{round}");
    claim_cost(
        &format!("PostgreSQL ({ROUNDS} rounds x 3 x {n})"),
        ROUNDS,
        n,
        &mut |round| PostgresStore::connect_in_schema(url, &schema(round)).expect("open"),
    );
    for round in 0..ROUNDS {
        drop_schema(admin, &schema(round));
    }
}

// ---- wire: round trips, counted by a proxy ----

/// Protocol messages seen on the wire, by type byte, for every connection through the proxy.
struct Wire {
    from_client: [AtomicU64; 256],
    from_server: [AtomicU64; 256],
}

impl Wire {
    fn new() -> Wire {
        Wire {
            from_client: std::array::from_fn(|_| AtomicU64::new(0)),
            from_server: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn snapshot(&self) -> Counts {
        let load = |side: &[AtomicU64; 256]| {
            let mut out = [0u64; 256];
            for (o, a) in out.iter_mut().zip(side) {
                *o = a.load(Ordering::SeqCst);
            }
            out
        };
        Counts {
            client: load(&self.from_client),
            server: load(&self.from_server),
        }
    }
}

#[derive(Clone, Copy)]
struct Counts {
    client: [u64; 256],
    server: [u64; 256],
}

impl Counts {
    /// Per call, from `before` to `self`, over `calls` calls.
    fn per_call(&self, before: &Counts, calls: u64) -> String {
        let c = |t: u8| (self.client[t as usize] - before.client[t as usize]) as f64 / calls as f64;
        let s = |t: u8| (self.server[t as usize] - before.server[t as usize]) as f64 / calls as f64;
        format!(
            "round trips (Z) {:.2} | P {:.2} B {:.2} Q {:.2} C {:.2} S {:.2}",
            s(b'Z'),
            c(b'P'),
            c(b'B'),
            c(b'Q'),
            c(b'C'),
            c(b'S')
        )
    }
}

/// Splits a protocol byte stream into messages: `type` byte and `i32` length (which counts
/// itself), or, for the client's first message, the startup packet (length only).
struct Framer {
    startup: bool,
    header: [u8; 5],
    have: usize,
    skip: usize,
}

impl Framer {
    fn feed(&mut self, mut bytes: &[u8], count: &[AtomicU64; 256]) {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let header_len = if self.startup { 4 } else { 5 };
            let take = (header_len - self.have).min(bytes.len());
            self.header[self.have..self.have + take].copy_from_slice(&bytes[..take]);
            self.have += take;
            bytes = &bytes[take..];
            if self.have == header_len {
                let at = header_len - 4;
                let length = u32::from_be_bytes([
                    self.header[at],
                    self.header[at + 1],
                    self.header[at + 2],
                    self.header[at + 3],
                ]) as usize;
                self.skip = length.saturating_sub(4);
                self.have = 0;
                if self.startup {
                    self.startup = false;
                } else {
                    count[self.header[0] as usize].fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, startup: bool, count: &[AtomicU64; 256]) {
    let mut framer = Framer {
        startup,
        header: [0; 5],
        have: 0,
        skip: 0,
    };
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                // Counted before forwarding, so a reply is never seen before its request.
                framer.feed(&buffer[..n], count);
                if to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// Starts the counting proxy in front of the server of `url`; returns a connection string
/// for it and the counters.
fn proxy(url: &str) -> (String, Arc<Wire>) {
    let config: Config = url.parse().expect("a connection URL");
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let upstream = format!("{host}:{port}");
    let listener = TcpListener::bind("127.0.0.1:0").expect("a proxy port");
    let local = listener.local_addr().expect("the proxy's address");
    let wire = Arc::new(Wire::new());
    let counters = wire.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(&upstream) else {
                continue;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (c2, s2) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            let up = counters.clone();
            std::thread::spawn(move || pump(client, server, true, &up.from_client));
            let down = counters.clone();
            std::thread::spawn(move || pump(s2, c2, false, &down.from_server));
        }
    });
    let mut through = format!("host=127.0.0.1 port={} sslmode=disable", local.port());
    if let Some(user) = config.get_user() {
        through.push_str(&format!(" user={user}"));
    }
    if let Some(db) = config.get_dbname() {
        through.push_str(&format!(" dbname={db}"));
    }
    (through, wire)
}

fn wire_part(url: &str, admin: &mut Client, pid: u32) {
    const N: usize = 200;
    println!("\nmessages on the wire per call (counting proxy; {N} calls each)");
    let (through, wire) = proxy(url);
    let schema = format!("runcore_bench_wire_{pid}");
    let mut store = PostgresStore::connect_in_schema(&through, &schema).expect("open via proxy");
    let claim = store
        .claim_thread(&request("c", "bench-owner", "c-1"), now_ms())
        .expect("claim c");
    let unclaimed = operations("u", N);
    let claimed: Vec<CommitOperation> = operations("c", N)
        .into_iter()
        .map(|op| op.claimed(claim.token(), now_ms()))
        .collect();
    let mut to_release = Vec::new();
    for i in 0..N {
        to_release.push(
            store
                .claim_thread(&request(&format!("r-{i}"), "bench-owner", "1"), now_ms())
                .expect("claim"),
        );
    }
    // Let the connection's start-up traffic settle before counting.
    std::thread::sleep(Duration::from_millis(100));
    let mut measure = |label: &str, work: &mut dyn FnMut(&mut PostgresStore)| {
        let before = wire.snapshot();
        work(&mut store);
        // Replies still in flight through the proxy (a Close's, say) arrive meanwhile.
        std::thread::sleep(Duration::from_millis(100));
        println!(
            "  {label:<36} {}",
            wire.snapshot().per_call(&before, N as u64)
        );
    };
    measure("commit_operation, unclaimed", &mut |s| {
        for op in unclaimed.clone() {
            s.commit_operation(op).expect("commit");
        }
    });
    measure("commit_operation, claimed", &mut |s| {
        for op in claimed.clone() {
            s.commit_operation(op).expect("commit");
        }
    });
    measure("claim_thread (fresh thread)", &mut |s| {
        for i in 0..N {
            s.claim_thread(&request(&format!("w-{i}"), "bench-owner", "1"), now_ms())
                .expect("claim");
        }
    });
    let mut held = claim.clone();
    measure("renew_claim", &mut |s| {
        for _ in 0..N {
            held = s.renew_claim(&held, LEASE_MS, now_ms()).expect("renew");
        }
    });
    measure("thread_claim", &mut |s| {
        for _ in 0..N {
            s.thread_claim(&ThreadId::new("c"), now_ms()).expect("read");
        }
    });
    measure("due_work (limit 1,000)", &mut |s| {
        for _ in 0..N {
            s.due_work(now_ms(), 1_000).expect("due work");
        }
    });
    measure("release_claim", &mut |s| {
        for claim in &to_release {
            s.release_claim(claim, now_ms()).expect("release");
        }
    });
    drop(store);
    drop_schema(admin, &schema);
}

// ---- claims: claims and renews per second ----

fn claims_part(url: &str, admin: &mut Client, pid: u32) {
    const N: usize = 5_000;
    println!(
        "\nclaims/s (claim_thread on {N} distinct fresh threads) and renews/s ({N} renews of \
         one held claim), one connection"
    );
    let schema = format!("runcore_bench_claims_{pid}");
    let mut store = PostgresStore::connect_in_schema(url, &schema).expect("open");
    let requests: Vec<ClaimRequest> = (0..N)
        .map(|i| request(&format!("claimed-{i}"), "bench-owner", "1"))
        .collect();
    let started = Instant::now();
    for r in &requests {
        store.claim_thread(r, now_ms()).expect("a grant");
    }
    let claims = N as f64 / started.elapsed().as_secs_f64();
    let mut claim = store
        .claim_thread(&request("renewed", "bench-owner", "1"), now_ms())
        .expect("a grant");
    let started = Instant::now();
    for _ in 0..N {
        claim = store
            .renew_claim(&claim, LEASE_MS, now_ms())
            .expect("a renew");
    }
    let renews = N as f64 / started.elapsed().as_secs_f64();
    println!("  PostgreSQL: claims/s {claims:>7.0}  renews/s {renews:>7.0}");
    drop(store);
    drop_schema(admin, &schema);
}

// ---- due: due_work on 100,000 tickets ----

const TICKETS: usize = 100_000;
const DUE: usize = 1_000;

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

fn deadline(i: usize, now: u64) -> u64 {
    if i.is_multiple_of(TICKETS / DUE) {
        now - 1_000_000 + (i / (TICKETS / DUE)) as u64 * 1_000
    } else {
        now + 3_600_000 + (i as u64 * 36) % 3_600_000
    }
}

/// Runs `work(i, handle)` for every `i` in `0..n`, split over `writers` connections.
fn spread(
    store: &PostgresStore,
    writers: usize,
    n: usize,
    work: &(dyn Fn(usize, &mut PostgresStore) + Sync),
) -> Duration {
    let handles: Vec<PostgresStore> = (0..writers)
        .map(|_| store.open_handle().expect("a handle"))
        .collect();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for (w, mut handle) in handles.into_iter().enumerate() {
            scope.spawn(move || {
                for i in (w..n).step_by(writers) {
                    work(i, &mut handle);
                }
            });
        }
    });
    started.elapsed()
}

/// The store's deadline query (`src/claims.rs`), with the limit written in.
fn deadline_sql(limit: usize) -> String {
    format!(
        "SELECT thread_id, run_id, deadline_ms FROM runcore_runs \
         WHERE deadline_ms IS NOT NULL \
         AND deadline_ms <= (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint) \
         ORDER BY deadline_ms, thread_id, run_id LIMIT {limit}"
    )
}

/// The store's orphan query (`src/claims.rs`), with the limit written in.
fn orphan_sql(limit: usize) -> String {
    format!(
        "SELECT t.thread_id, t.latest_run, c.ends_at_ms FROM runcore_runs r \
         JOIN runcore_threads t ON t.thread_id = r.thread_id AND t.latest_run = r.run_id \
         JOIN runcore_claims c ON c.thread_id = r.thread_id \
         WHERE r.state = '{{\"type\":\"running\"}}' \
         AND c.epoch > 0 \
         AND c.ends_at_ms <= (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint) \
         ORDER BY c.ends_at_ms, c.thread_id LIMIT {limit}"
    )
}

fn explain(admin: &mut Client, label: &str, sql: &str) {
    println!("  EXPLAIN (ANALYZE, BUFFERS) {label}:");
    match admin.query(&format!("EXPLAIN (ANALYZE, BUFFERS) {sql}"), &[]) {
        Ok(rows) => {
            for row in rows {
                let line: String = row.get(0);
                println!("      {line}");
            }
        }
        Err(e) => println!("      failed: {e}"),
    }
}

fn due_timings(store: &PostgresStore, label: &str) {
    for limit in [100usize, 1_000, 2_000] {
        let call = || {
            let started = Instant::now();
            let due = store.due_work(now_ms(), limit).expect("due work");
            let elapsed = started.elapsed();
            assert_eq!(due.len(), DUE.min(limit), "due items at limit {limit}");
            elapsed
        };
        let first = call();
        let samples: Vec<Duration> = (0..30).map(|_| call()).collect();
        let min = samples.iter().min().copied().unwrap_or_default();
        println!(
            "  {label}: due_work(now, {limit:>5}): first {first:>9.2?}  min {min:>9.2?}  median {:>9.2?}",
            median(samples)
        );
    }
}

fn due_part(url: &str, admin: &mut Client, pid: u32) {
    const WRITERS: usize = 4;
    println!(
        "\ndue_work on {TICKETS} tickets (awaiting runs with deadlines), {DUE} due, server clock"
    );
    let schema = format!("runcore_bench_due_{pid}");
    let store = PostgresStore::connect_in_schema(url, &schema).expect("open");
    let now = now_ms();
    let filled = spread(&store, WRITERS, TICKETS, &|i, handle| {
        handle
            .commit_operation(awaiting_commit(i, deadline(i, now)))
            .expect("a ticket commit");
    });
    println!(
        "  filled by {TICKETS} commits from {WRITERS} connections in {filled:.1?} ({:.0} commits/s)",
        TICKETS as f64 / filled.as_secs_f64()
    );
    admin
        .batch_execute(&format!("SET search_path TO \"{schema}\""))
        .expect("search_path");
    due_timings(&store, "no claims, before ANALYZE");
    explain(
        admin,
        "the deadline query, LIMIT 1000",
        &deadline_sql(1_000),
    );
    admin.batch_execute("ANALYZE").expect("analyze");
    due_timings(&store, "no claims, after ANALYZE ");
    explain(
        admin,
        "the deadline query, LIMIT 1000",
        &deadline_sql(1_000),
    );
    explain(admin, "the deadline query, LIMIT 100", &deadline_sql(100));
    explain(admin, "the orphan query, no claims", &orphan_sql(1_000));

    // Every thread claimed once and released, as a durable host leaves each thread it handled.
    let claimed = spread(&store, WRITERS, TICKETS, &|i, handle| {
        let claim = handle
            .claim_thread(&request(&format!("t-{i:06}"), "bench-owner", "1"), now_ms())
            .expect("a grant");
        handle.release_claim(&claim, now_ms()).expect("a release");
    });
    println!("  claimed and released every thread from {WRITERS} connections in {claimed:.1?}");
    admin.batch_execute("ANALYZE").expect("analyze");
    due_timings(&store, "every thread claimed once");
    explain(
        admin,
        "the orphan query, every thread claimed once",
        &orphan_sql(1_000),
    );
    drop(store);
    drop_schema(admin, &schema);
}
