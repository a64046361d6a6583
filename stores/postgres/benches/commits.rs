//! Commit throughput and recovery time against a real PostgreSQL server.
//!
//! - **Writers**: 1, 4, 8 and 16 OS threads, each with its own connection, each committing on its
//!   own thread id for a fixed time; `MemoryStore` beside them, shared through one lock. A
//!   commit is what an agent's model step writes: one assistant message of 1 KB and its audit
//!   drafts (`run_state_changed` and two more), applied with `commit_operation`. While the
//!   writers run, a sampler reads `pg_stat_activity` every millisecond and reports where the
//!   writers' backends spend their time — above all, how often one waits for another's lock
//!   (`lock waits`: the share of samples in a heavyweight-lock wait, `wait_event_type =
//!   'Lock'`, of every kind: rows, transaction ids, tuples, the advisory commit mutex), and the
//!   CPU per commit of the writer threads and of their server backends.
//! - **Recovery**: `Agent::recover` of a thread of 100,000 messages (50,000 runs of a prompt
//!   and an answer, the shape of the core's own recovery bench), from PostgreSQL and from
//!   `MemoryStore` holding the same commits.
//!
//! ```sh
//! scripts/with-postgres.sh cargo bench -p runcore-postgres --bench commits
//! RUNCORE_PG_DURABLE=1 scripts/with-postgres.sh cargo bench -p runcore-postgres --bench commits -- writers
//! ```
//! Arguments: `writers`, `recovery` (default: both); `RUNCORE_BENCH_SECONDS` sets the time per
//! writer configuration (default 3).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls};
use runcore::store::SharedStore;
use runcore::store::{CommitLog, MemoryStore, StoreHandles};
use runcore::{
    Agent, AgentConfig, AssistantMessage, AuditDraft, CommitOperation, EndCause, Message,
    RecoveryPolicy, RunDisposition, RunId, ThreadCommit, ThreadId,
};
use runcore_postgres::{PostgresStore, URL_ENV};
use serde_json::json;

/// The application name of the bench's writer connections, for the sampler.
const APP: &str = "runcore-bench-writer";

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
    let seconds = std::env::var("RUNCORE_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(3);
    let mut admin = Client::connect(&url, NoTls).expect("connect");
    let settings: Vec<String> = ["fsync", "synchronous_commit", "max_connections"]
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
        "PostgreSQL at {URL_ENV} ({}); {} CPUs",
        settings.join(", "),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if all || args.iter().any(|a| a == "writers") {
        writers(&url, &mut admin, Duration::from_secs(seconds));
    }
    if all || args.iter().any(|a| a == "recovery") {
        recovery(&url, &mut admin);
    }
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

/// CPU time (user + system) of a process or thread from its `/proc/.../stat`, in clock ticks
/// of 10 ms (Linux's fixed USER_HZ of 100); `None` where there is no such file.
fn cpu_ticks(stat_path: &str) -> Option<u64> {
    let text = std::fs::read_to_string(stat_path).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 2..)?.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn ticks_to_duration(ticks: u64) -> Duration {
    Duration::from_millis(ticks * 10)
}

/// CPU ticks of the server backends of the bench's writers (readable when the server runs
/// on this machine and we may read its processes' `/proc` entries).
fn backend_ticks(client: &mut Client) -> Option<u64> {
    let pids: Vec<i32> = client
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
            &[&APP],
        )
        .ok()?
        .iter()
        .map(|row| row.get(0))
        .collect();
    pids.iter()
        .map(|pid| cpu_ticks(&format!("/proc/{pid}/stat")))
        .sum()
}

/// Commits on `thread` through `store` until `stop`; returns how many, and the CPU ticks this
/// OS thread spent doing it.
fn write_until<S: CommitLog>(store: &mut S, thread: &ThreadId, stop: &AtomicBool) -> (u64, u64) {
    let cpu_before = cpu_ticks("/proc/thread-self/stat").unwrap_or(0);
    let run = RunId::new(format!("{thread}/run-1"));
    let mut k = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let operation = CommitOperation::new(step_commit(thread, &run, k), k, k);
        store.commit_operation(operation).expect("commit");
        k += 1;
    }
    let cpu = cpu_ticks("/proc/thread-self/stat").map_or(0, |after| after - cpu_before);
    (k, cpu)
}

/// What one configuration of writers did.
struct Race {
    commits_per_second: f64,
    commits: u64,
    /// CPU spent by the writer threads.
    client_cpu: Duration,
    /// CPU spent by their server backends, when it can be read.
    server_cpu: Option<Duration>,
}

/// Runs `writers` threads for `duration`, each through its own handle; `server_ticks` reads
/// the CPU of the handles' server backends (before and after, while they are connected).
fn race<S: StoreHandles>(
    store: &S,
    writers: usize,
    duration: Duration,
    label: &str,
    server_ticks: &mut dyn FnMut() -> Option<u64>,
) -> Race {
    let handles: Vec<S> = (0..writers)
        .map(|_| store.open_handle().expect("a handle"))
        .collect();
    let server_before = server_ticks();
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let finished: Vec<(u64, u64, S)> = std::thread::scope(|scope| {
        let running: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(i, mut handle)| {
                let stop = &stop;
                scope.spawn(move || {
                    let thread = ThreadId::new(format!("{label}-{i}"));
                    let (commits, cpu) = write_until(&mut handle, &thread, stop);
                    // Handed back, so its connection is still open when the CPU is read.
                    (commits, cpu, handle)
                })
            })
            .collect();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        running
            .into_iter()
            .map(|t| t.join().expect("writer"))
            .collect()
    });
    let elapsed = started.elapsed();
    let server_after = server_ticks();
    let commits: u64 = finished.iter().map(|(n, _, _)| n).sum();
    let client: u64 = finished.iter().map(|(_, cpu, _)| cpu).sum();
    drop(finished);
    Race {
        commits_per_second: commits as f64 / elapsed.as_secs_f64(),
        commits,
        client_cpu: ticks_to_duration(client),
        server_cpu: server_before
            .zip(server_after)
            .map(|(before, after)| ticks_to_duration(after.saturating_sub(before))),
    }
}

/// Where the writers' backends are, sampled every 5 ms until `stop`: counts per
/// `wait_event_type:wait_event`, or the backend's state when it waits for nothing.
fn sample(url: &str, stop: &AtomicBool) -> BTreeMap<String, u64> {
    let mut client = Client::connect(url, NoTls).expect("connect the sampler");
    let mut counts = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        let rows = client
            .query(
                "SELECT coalesce(wait_event_type || ':' || wait_event, state)
                 FROM pg_stat_activity WHERE application_name = $1",
                &[&APP],
            )
            .unwrap_or_default();
        for row in rows {
            let what: Option<String> = row.get(0);
            *counts
                .entry(what.unwrap_or_else(|| "?".into()))
                .or_insert(0) += 1;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    counts
}

fn per_commit(cpu: Duration, commits: u64) -> String {
    format!("{:.0} µs", cpu.as_secs_f64() * 1e6 / commits.max(1) as f64)
}

fn writers(url: &str, admin: &mut Client, duration: Duration) {
    println!(
        "\ncommits/s, one 1 KB assistant message + 3 audit drafts per commit, {duration:?} each"
    );
    let mut base = None;
    for writers in [1usize, 4, 8, 16] {
        let schema = format!("runcore_bench_writers_{writers}_{}", std::process::id());
        let separator = if url.contains('?') { '&' } else { '?' };
        let store = PostgresStore::connect_in_schema(
            &format!("{url}{separator}application_name={APP}"),
            &schema,
        )
        .expect("open");
        let mut watcher = Client::connect(url, NoTls).expect("connect the watcher");
        let stop = AtomicBool::new(false);
        let (result, profile) = std::thread::scope(|scope| {
            let sampler = scope.spawn(|| sample(url, &stop));
            let result = race(&store, writers, duration, "w", &mut || {
                backend_ticks(&mut watcher)
            });
            stop.store(true, Ordering::Relaxed);
            (result, sampler.join().expect("sampler"))
        });
        drop(store);
        let rate = result.commits_per_second;
        let base_rate = *base.get_or_insert(rate);
        let samples: u64 = profile.values().sum();
        let share = |pick: &dyn Fn(&str) -> bool| {
            let n: u64 = profile
                .iter()
                .filter(|(what, _)| pick(what))
                .map(|(_, n)| n)
                .sum();
            100.0 * n as f64 / samples.max(1) as f64
        };
        let lock_waits = share(&|what| what.starts_with("Lock:"));
        let lwlock_waits = share(&|what| what.starts_with("LWLock:"));
        let mut shares: Vec<(u64, String)> = profile.into_iter().map(|(k, v)| (v, k)).collect();
        shares.sort_by(|a, b| b.cmp(a));
        let shares: Vec<String> = shares
            .iter()
            .take(5)
            .map(|(n, what)| format!("{what} {:.0}%", 100.0 * *n as f64 / samples.max(1) as f64))
            .collect();
        println!(
            "  PostgreSQL, {writers} writer(s): {rate:>6.0} commits/s ({:.2}x of 1 writer), \
             {:.2} ms per commit per writer",
            rate / base_rate,
            1000.0 * writers as f64 / rate
        );
        println!(
            "      CPU per commit: client {}, server {}",
            per_commit(result.client_cpu, result.commits),
            result
                .server_cpu
                .map_or("unknown".into(), |cpu| per_commit(cpu, result.commits))
        );
        println!(
            "      lock waits {lock_waits:.1}% (LWLock {lwlock_waits:.1}%); writers' backends: {}",
            shares.join(", ")
        );
        let _ = admin.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"));
    }
    for writers in [1usize, 4, 8] {
        let store = SharedStore::new(MemoryStore::new());
        let result = race(
            &store,
            writers,
            duration.min(Duration::from_secs(1)),
            "m",
            &mut || None,
        );
        println!(
            "  MemoryStore (one lock), {writers} writer(s): {:>6.0} commits/s",
            result.commits_per_second
        );
    }
}

/// The commits of `runs` runs of a prompt and an answer, as an agent writes them.
fn history(thread: &ThreadId, runs: u64) -> impl Iterator<Item = CommitOperation> + '_ {
    (0..runs).flat_map(move |n| {
        let run = RunId::new(format!("{thread}/run-{}", n + 1));
        let start = ThreadCommit::assemble(
            thread.clone(),
            RunDisposition::Running {
                run_id: run.clone(),
            },
            true,
            vec![Message::user(format!("question {n}"))],
            vec![],
            vec![AuditDraft::run_started(&run, 2 * n as usize).with_now_ms(n)],
        );
        let end = ThreadCommit::assemble(
            thread.clone(),
            RunDisposition::Ended {
                run_id: run,
                cause: EndCause::NaturalEnd,
            },
            true,
            vec![Message::from(AssistantMessage::text(format!("answer {n}")))],
            vec![],
            vec![],
        );
        [
            CommitOperation::new(start, 0, 2 * n),
            CommitOperation::new(end, 1, 2 * n + 1),
        ]
    })
}

fn recovery(url: &str, admin: &mut Client) {
    const RUNS: u64 = 50_000;
    let thread = ThreadId::new("big");
    let schema = format!("runcore_bench_recovery_{}", std::process::id());
    let store = PostgresStore::connect_in_schema(url, &schema).expect("open");
    println!("\nrecovery of a thread of {} messages", 2 * RUNS);
    // A thread's commits land one after another (each builds on the last version), so one
    // connection fills it.
    let mut memory = MemoryStore::new();
    let mut filler = store.open_handle().expect("a handle");
    let started = Instant::now();
    for operation in history(&thread, RUNS) {
        memory.commit_operation(operation.clone()).expect("memory");
        filler.commit_operation(operation).expect("postgres");
    }
    let fill = started.elapsed();
    println!(
        "  filled with {} commits from one connection in {fill:.1?} ({:.0} commits/s)",
        2 * RUNS,
        (2 * RUNS) as f64 / fill.as_secs_f64()
    );
    let config = AgentConfig::for_thread("big");
    let measure = |label: &str, recover: &dyn Fn() -> Agent| {
        let mut samples: Vec<Duration> = (0..5)
            .map(|_| {
                let started = Instant::now();
                let agent = recover();
                let elapsed = started.elapsed();
                assert_eq!(agent.transcript().len(), (2 * RUNS) as usize);
                elapsed
            })
            .collect();
        samples.sort();
        println!(
            "  {label:<44} min {:>9.1?}  median {:>9.1?}",
            samples[0], samples[2]
        );
    };
    measure("Agent::recover from PostgreSQL", &|| {
        Agent::recover(config.clone(), &store, &thread, RecoveryPolicy::Replay).expect("recover")
    });
    measure("Agent::recover from MemoryStore (same commits)", &|| {
        Agent::recover(config.clone(), &memory, &thread, RecoveryPolicy::Replay).expect("recover")
    });
    drop(filler);
    drop(store);
    let _ = admin.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"));
}
