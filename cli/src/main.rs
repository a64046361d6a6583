//! The `runcore` binary (package `runcore-cli`): the one place that reads stdin and writes stdout.
//!
//! - `runcore drive [--config FILE] [--store URL [--thread ID] [--recover replay|seal]]`: the
//!   JSON-lines driver (SPEC §12), in memory or durable (§12.2).
//! - `runcore threads | show THREAD | pending | events` with `--store URL`: looking into a
//!   store (§12.3).
//! - `runcore approve RUN | deny RUN` with `--store URL`: a person answers a permission
//!   ticket; `runcore console --store URL`: the operator console in the browser (§12.5).
//! - `runcore schema`: JSON Schema (draft 2020-12) of the driver's lines.
//! - `runcore demo [--json] [--store URL | --memory]`: a scripted session whose crash is real.
//!
//! Exit status: 0 success; 1 stdout or stdin failed; 2 a usage error or a bad `--store`
//! (nothing created or changed); 3 the store rejected or failed a commit, or failed a read.

use std::io::{self, Write};
use std::process::ExitCode;

use runcore::driver::{input_line_schema, json_schema, output_line_schema};
use runcore::{EventScope, RecoveryPolicy, RunId, ThreadId, UnknownName};

mod approve;
mod args;
mod console;
mod demo;
mod drive;
mod inspect;
mod sweep;
mod text;

use args::{Args, Spec};
use runcore_store_url::{self as store, Access, StoreUrl};

const HELP: &str = "\
runcore — the deterministic core of AI agent runs

USAGE:
    runcore <COMMAND> [OPTIONS]

COMMANDS:
    drive     Drive an agent with JSON lines on stdin; outputs go to stdout as JSON lines
              (--store URL makes it durable: it persists and recovers for the host)
    threads   List the threads of a store
    show      Show one thread of a store: its runs, its transcript, its tickets
    pending   List the runs that wait for a person (what to answer after a restart)
    events    Print a store's audit events as JSON lines
    sweep     Handle due work once: expire passed deadlines, leave or seal orphaned runs
    due       List due work (passed deadlines, orphaned runs) without acting
    approve   Approve the tool call a run waits for (one fenced commit)
    deny      Deny the tool call a run waits for (one fenced commit)
    console   Serve a local web page to look into a store and answer approvals
    schema    Print the JSON Schema (draft 2020-12) of the driver's input and output lines
    demo      Run a scripted session against a real SQLite file, with a real crash, and print
              its timeline
    help      Print this help, or the help of a command (`runcore help drive`)

A store URL is sqlite:PATH or postgres://… (postgresql://…).
Run `runcore <COMMAND> --help` for a command's options.

EXIT STATUS:
    0 success; 1 reading stdin or writing stdout failed; 2 a usage error or a bad --store
    (nothing is created or changed); 3 the store rejected or failed a commit, or a read, or
    the thread's claim was lost; 4 another owner holds the thread
";

const DRIVE_HELP: &str = "\
runcore drive — the JSON-lines driver

USAGE:
    runcore drive [--config FILE] [--store URL [--thread ID] [--recover replay|seal]]

Reads one JSON object per line on stdin (lines split on \\n only) and, after each input line N,
writes its outputs as JSON lines and then {\"type\":\"idle\",\"line\":N}, flushing stdout so a
host can converse line by line through pipes. A bad line gives one {\"type\":\"error\",...} line
and the driver goes on; nothing the agent held is lost. EOF ends the process with status 0.

Without --store everything is in memory: commits go to stdout and nowhere else.

With --store the driver persists and recovers for the host (SPEC §12.2):
  - at start it opens the store; if the thread has committed history it rebuilds the agent
    from it (--recover) and writes what the recovered agent emits (a pending call_model or
    execute_tools under replay; the sealing commit and run_end under seal; nothing while a
    run awaits a person: answer with a resume_ticket line). Then, history or not, it writes
    {\"type\":\"idle\",\"line\":0} before reading any input;
  - every commit is applied to the store, fenced, BEFORE its commit line is written: a line
    the host has read is a fact;
  - if the store rejects or fails a commit (another driver on the same thread, the database
    gone), it writes one {\"type\":\"error\",\"line\":N,\"error\":{\"kind\":\"store\",...}} line,
    nothing after it, and exits with status 3; restart it to recover from what is committed;
  - a config line naming another thread, or any config line once the thread has history, is
    an invalid_state error (configure with --config).

OPTIONS:
    --config FILE         A JSON object used as if it were a first {\"type\":\"config\",...} line
                          (with --store, also the configuration a recovered agent runs with)
    --store URL           sqlite:PATH (the file is created if missing; directories never are)
                          or postgres://… / postgresql://…
    --thread ID           The thread to drive (default: thread_id of --config, else thread-1)
    --owner ID            This process's name as the thread's claim owner (default: host name,
                          pid and start time); the driver claims the thread before it
                          recovers, renews while it runs and waits, and releases at EOF
    --lease-ms N          How long a claim lasts unless renewed (default 30000; 1 to 86400000)
    --wait-claim MS       If another owner holds the thread, wait up to MS for it (default:
                          exit 4 at once with one stderr line naming the owner)
    --recover POLICY      For tool calls handed out but never answered before a crash:
                          replay (default) writes the same execute_tools again (tools must be
                          idempotent by \"{run_id}:{call_id}\"); seal ends the run indeterminate
                          with interrupted results
    -h, --help            Print this help

--thread, --recover, --owner, --lease-ms and --wait-claim need --store. A bad --store is one
line on stderr and exit status 2. Another owner holding the thread: exit status 4, nothing
written. A lost claim (a renew refused, or the lease passed without one): one
{\"type\":\"error\",...,\"error\":{\"kind\":\"store\",\"reason\":\"claim_lost\",...}} line, nothing
after it, exit status 3.

EXAMPLES:
    printf '%s\\n' '{\"type\":\"prompt\",\"text\":\"hi\"}' | runcore drive
    runcore drive --store sqlite:runs.db --thread support-42 --recover seal

See `runcore schema` for every line's shape.
";

const SCHEMA_HELP: &str = "\
runcore schema — print the driver's JSON Schema

USAGE:
    runcore schema [input|output]

With no argument, prints one compound JSON Schema document (draft 2020-12) with the input line
schema under $defs.input_line and the output line schema under $defs.output_line (each an
embedded resource with its own $id). `input` or `output` prints that line schema alone.
";

const DEMO_HELP: &str = "\
runcore demo — a scripted session whose crash is real, no network needed

USAGE:
    runcore demo [--json] [--store URL | --memory]

Runs two runs on one thread: parallel tools answered out of order with steering queued
meanwhile, a follow-up, a gated tool approved and another denied, a stale resume rejected.
The second run happens in a child process (this same binary), which the demo kills with
SIGKILL while a tool is outstanding; the demo then recovers the agent from the store on disk
and finishes the run. A fenced post-terminal commit and paged audit events follow, and the
closing summary is read back from the store (what `runcore show` prints).

By default the store is a SQLite file in a new temporary directory, removed at the end.

OPTIONS:
    --json        Print the session as the driver's output lines instead of a timeline
    --store URL   Use this store instead (sqlite:PATH or postgres://…; kept afterwards); the
                  demo's thread must not exist there yet
    --memory      Keep everything in memory, in one process (the crash is simulated)
    -h, --help    Print this help
";

const THREADS_HELP: &str = "\
runcore threads — list the threads of a store

USAGE:
    runcore threads --store URL [--json]

One row per thread, ordered by thread id: its version (commit count), its latest run and that
run's state. With --json, one line per thread:
    {\"thread_id\",\"version\",\"latest_run\":{\"id\",\"thread_id\",\"state\"}|null}

A store that does not exist is an error (exit status 2, nothing is created).
";

const SHOW_HELP: &str = "\
runcore show — show one thread of a store

USAGE:
    runcore show THREAD --store URL [--json]

Prints the thread's runs in start order with their states, its committed transcript, and the
tickets of its runs that wait for a person. With --json, one object:
    {\"thread_id\",\"version\",\"messages\":[…],\"runs\":[{\"id\",\"thread_id\",\"state\"}],
     \"tickets\":[ResumeTicket…]}
An unknown thread shows version 0 and nothing else. A store that does not exist is an error
(exit status 2, nothing is created).
";

const PENDING_HELP: &str = "\
runcore pending — list the runs that wait for a person

USAGE:
    runcore pending --store URL [--json]

After a restart, this is what needs a person: one row per awaiting run, ordered by run id,
with its ticket and what it waits for (an approval, input, a pause). Answer an approval with
`runcore approve RUN --store URL` or `runcore deny RUN --store URL` (or in the browser:
`runcore console --store URL`); anything else with `runcore drive --store URL --thread
THREAD` and a {\"type\":\"resume_ticket\",\"result\":…} line. With --json, each run's
ResumeTicket on its own line.

A store that does not exist is an error (exit status 2, nothing is created).
";

const EVENTS_HELP: &str = "\
runcore events — print a store's audit events

USAGE:
    runcore events --store URL [--thread T | --run R] [--from N] [--limit K]

One JSON line per event, ascending by sequence:
    {\"sequence\",\"commit_sequence\",\"thread_id\",\"run_id\",\"kind\",\"payload\"}
Always JSON lines (--json is accepted and changes nothing).

OPTIONS:
    --thread T    Only the events of thread T
    --run R       Only the events of run R (not with --thread)
    --from N      Only events with a sequence above N (to page: the last sequence you got)
    --limit K     At most K events (default: all of them)
    --json        Accepted; the output is JSON lines either way

A store that does not exist is an error (exit status 2, nothing is created).
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let wants_help = args.iter().any(|a| a == "-h" || a == "--help");
    let command = args.first().map(String::as_str);
    let rest = args.get(1..).unwrap_or_default();
    if wants_help || matches!(command, None | Some("help" | "-h" | "--help")) {
        let topic = match command {
            None | Some("help" | "-h" | "--help") => args.get(1).map(String::as_str),
            other => other,
        };
        return write_stdout(help_of(topic));
    }
    match command.unwrap_or_default() {
        "drive" => drive(rest),
        "schema" => {
            let schema = match rest {
                [] => json_schema(),
                [kind] if kind == "input" => input_line_schema(),
                [kind] if kind == "output" => output_line_schema(),
                _ => return usage_error("schema takes at most one argument: input or output"),
            };
            let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
            text.push('\n');
            write_stdout(&text)
        }
        "demo" => demo::main(rest),
        "threads" => inspect("threads", rest),
        "show" => inspect("show", rest),
        "pending" => inspect("pending", rest),
        "events" => inspect("events", rest),
        "sweep" => sweep_or_due("sweep", rest),
        "due" => sweep_or_due("due", rest),
        "approve" => approve::main("approve", rest),
        "deny" => approve::main("deny", rest),
        "console" => console::main(rest),
        other => usage_error(&format!("unknown command {other:?}")),
    }
}

/// The help of a command, or the overview.
fn help_of(topic: Option<&str>) -> &'static str {
    match topic {
        Some("drive") => DRIVE_HELP,
        Some("schema") => SCHEMA_HELP,
        Some("demo") => DEMO_HELP,
        Some("threads") => THREADS_HELP,
        Some("show") => SHOW_HELP,
        Some("pending") => PENDING_HELP,
        Some("events") => EVENTS_HELP,
        Some("sweep") => SWEEP_HELP,
        Some("due") => DUE_HELP,
        Some("approve") => approve::APPROVE_HELP,
        Some("deny") => approve::DENY_HELP,
        Some("console") => console::CONSOLE_HELP,
        _ => HELP,
    }
}

/// Writes `text` to stdout; a closed pipe (e.g. `| head`) is not an error.
pub(crate) fn write_stdout(text: &str) -> ExitCode {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runcore: writing stdout failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A usage error: one line naming the mistake, the pointer to the help, exit status 2.
fn usage_error(message: &str) -> ExitCode {
    eprintln!("runcore: {message} (see `runcore --help`)");
    ExitCode::from(2)
}

/// A bad --store or another start-up failure of a command: one line, exit status 2.
fn start_error(command: &str, message: &str) -> ExitCode {
    eprintln!("runcore {command}: {message}");
    ExitCode::from(2)
}

const DRIVE_SPEC: Spec = Spec {
    command: "drive",
    values: &[
        "--config",
        "--store",
        "--thread",
        "--recover",
        "--owner",
        "--lease-ms",
        "--wait-claim",
    ],
    switches: &[],
    max_positional: 0,
};

/// The default lease of `runcore drive --store` (SPEC §12.4).
const DEFAULT_LEASE_MS: u64 = 30_000;

fn drive(args: &[String]) -> ExitCode {
    let args = match Args::parse(args, &DRIVE_SPEC) {
        Ok(args) => args,
        Err(message) => return usage_error(&message),
    };
    let store_url = match args.value("--store").map(StoreUrl::parse).transpose() {
        Ok(url) => url,
        Err(message) => return start_error("drive", &message),
    };
    if store_url.is_none() {
        for flag in [
            "--thread",
            "--recover",
            "--owner",
            "--lease-ms",
            "--wait-claim",
        ] {
            if args.value(flag).is_some() {
                return usage_error(&format!("drive {flag} needs --store URL"));
            }
        }
    }
    let policy = match args.value("--recover").map(str::parse).transpose() {
        Ok(policy) => policy.unwrap_or(RecoveryPolicy::Replay),
        Err(UnknownName { got, .. }) => {
            return usage_error(&format!(
                "drive --recover takes replay or seal, not {got:?}"
            ));
        }
    };
    let config = match args
        .value("--config")
        .map(drive::ConfigFile::read)
        .transpose()
    {
        Ok(config) => config,
        Err(message) => return start_error("drive", &message),
    };
    let thread = match args.value("--thread") {
        Some("") => return usage_error("drive --thread needs a non-empty thread id"),
        Some(id) => ThreadId::new(id),
        None => config
            .as_ref()
            .and_then(|c| c.thread.clone())
            .unwrap_or_else(|| ThreadId::new("thread-1")),
    };
    let owner = match args.value("--owner") {
        Some(owner) => owner.to_owned(),
        None => store::default_owner(),
    };
    let numbers = (args.number("--lease-ms"), args.number("--wait-claim"));
    let (lease_ms, wait_ms) = match numbers {
        (Ok(lease), Ok(wait)) => (lease.unwrap_or(DEFAULT_LEASE_MS), wait),
        (Err(message), _) | (_, Err(message)) => return usage_error(&format!("drive {message}")),
    };
    let mut claim_options = runcore::driver::ClaimOptions::new(owner, lease_ms);
    // Unique to this process start, so a restart that reuses --owner does not inherit the
    // claim its previous start left live.
    claim_options.request_id = store::request_id("drive");
    if let Err(error) = runcore::check_claim_request(&claim_options.request(&thread)) {
        return usage_error(&format!("drive --owner/--lease-ms: {error}"));
    }
    let stdin = std::io::BufReader::with_capacity(1 << 16, std::io::stdin());
    let stdout = std::io::stdout();
    let result = match store_url {
        None => drive::run_session::<store::Backend>(config, None, stdin, stdout.lock()),
        Some(url) => {
            let backend = match store::open(&url, Access::Write) {
                Ok(backend) => backend,
                Err(message) => return start_error("drive", &message),
            };
            let start = drive::DurableStart {
                store: backend,
                thread,
                policy,
                claim: drive::ClaimStart {
                    options: claim_options,
                    wait_ms,
                },
            };
            drive::run_session(config, Some(start), stdin, stdout.lock())
        }
    };
    drive::exit(result)
}

const SWEEP_HELP: &str = "\
runcore sweep — handle due work once (SPEC §12.4)

USAGE:
    runcore sweep --store URL [--owner W] [--limit N] [--recover replay|seal]

Lists the store's due work (passed deadlines, orphaned runs) and handles each item through a
claim of its thread: a passed deadline is applied as a timeout at store time; an orphan is
left for a worker under replay (the default) or sealed under seal (in-flight work is thrown
away). One JSON line per item: {\"thread_id\",\"run_id\",\"reason\":\"deadline\"|\"orphaned\",
\"action\":\"expired\"|\"sealed\"|\"left\"|\"skipped\",\"detail\"?} (skipped: another owner held
it, or it was no longer due). Every claim it takes is released before it exits. Exit 0. Run it
from cron or a loop on any machine: two sweeps at once handle each item once.

OPTIONS:
    --store URL        The store (sqlite:PATH or postgres://…)
    --owner W          The sweeper's claim owner (default: host name, pid and start time)
    --limit N          At most N items (default 1000)
    --recover POLICY   replay (default): leave orphans for a worker; seal: end them
";

const DUE_HELP: &str = "\
runcore due — list due work without acting (SPEC §12.4)

USAGE:
    runcore due --store URL [--limit N] [--json]

Passed deadlines and orphaned runs, in the order each became due. With --json, one line per
item: {\"thread_id\",\"run_id\",\"reason\":{\"type\":\"deadline\",\"deadline_ms\"} |
{\"type\":\"orphaned\",\"claim_expired_at_ms\"}}.
";

/// `sweep` and `due`.
fn sweep_or_due(command: &'static str, args: &[String]) -> ExitCode {
    let spec = Spec {
        command,
        values: if command == "sweep" {
            &["--store", "--owner", "--limit", "--recover"]
        } else {
            &["--store", "--limit"]
        },
        switches: if command == "due" { &["--json"] } else { &[] },
        max_positional: 0,
    };
    let args = match Args::parse(args, &spec) {
        Ok(args) => args,
        Err(message) => return usage_error(&message),
    };
    let Some(url) = args.value("--store") else {
        return usage_error(&format!("{command} needs --store URL"));
    };
    let limit = match args.number("--limit") {
        Ok(limit) => limit.unwrap_or(sweep::DEFAULT_LIMIT),
        Err(message) => return usage_error(&format!("{command} {message}")),
    };
    let policy = match args.value("--recover").map(str::parse).transpose() {
        Ok(policy) => policy.unwrap_or(RecoveryPolicy::Replay),
        Err(UnknownName { got, .. }) => {
            return usage_error(&format!(
                "sweep --recover takes replay or seal, not {got:?}"
            ));
        }
    };
    let url = match StoreUrl::parse(url) {
        Ok(url) => url,
        Err(message) => return start_error(command, &message),
    };
    let mut store = match store::open(&url, Access::Read) {
        Ok(store) => store,
        Err(message) => return start_error(command, &message),
    };
    if command == "sweep" {
        let owner = args
            .value("--owner")
            .map_or_else(store::default_owner, str::to_owned);
        sweep::sweep_command(&mut store, owner, limit, policy)
    } else {
        sweep::due_command(&store, limit, args.has("--json"))
    }
}

const INSPECT_VALUES: &[&str] = &["--store", "--thread", "--run", "--from", "--limit"];

/// `threads`, `show`, `pending`, `events`.
fn inspect(command: &'static str, args: &[String]) -> ExitCode {
    let spec = Spec {
        command,
        values: if command == "events" {
            INSPECT_VALUES
        } else {
            &INSPECT_VALUES[..1]
        },
        switches: &["--json"],
        max_positional: usize::from(command == "show"),
    };
    let args = match Args::parse(args, &spec) {
        Ok(args) => args,
        Err(message) => return usage_error(&message),
    };
    let Some(url) = args.value("--store") else {
        return usage_error(&format!("{command} needs --store URL"));
    };
    let thread = match (command, args.positional.first()) {
        ("show", None) => return usage_error("show needs a THREAD"),
        ("show", Some(t)) if t.is_empty() => return usage_error("show needs a non-empty THREAD"),
        (_, t) => t.map(|t| ThreadId::new(t.as_str())),
    };
    let scope = match (args.value("--thread"), args.value("--run")) {
        (Some(_), Some(_)) => return usage_error("events takes --thread or --run, not both"),
        (Some(t), None) => EventScope::Thread(ThreadId::new(t)),
        (None, Some(r)) => EventScope::Run(RunId::new(r)),
        (None, None) => EventScope::All,
    };
    let (from, limit) = match (args.number("--from"), args.number("--limit")) {
        (Ok(from), Ok(limit)) => (from, limit),
        (Err(message), _) | (_, Err(message)) => return usage_error(&message),
    };
    let url = match StoreUrl::parse(url) {
        Ok(url) => url,
        Err(message) => return start_error(command, &message),
    };
    let store = match store::open(&url, Access::Read) {
        Ok(store) => store,
        Err(message) => return start_error(command, &message),
    };
    let json = args.has("--json");
    let text = match (command, thread) {
        ("threads", _) => inspect::threads(&store).map(|lines| {
            if json {
                inspect::json_lines(&lines)
            } else {
                inspect::threads_text(&lines)
            }
        }),
        ("show", Some(thread)) => inspect::show(&store, &thread).map(|view| {
            if json {
                inspect::json_lines(&[view])
            } else {
                inspect::show_text(&view)
            }
        }),
        ("pending", _) => inspect::pending(&store).map(|tickets| {
            if json {
                inspect::json_lines(&tickets)
            } else {
                inspect::pending_text(&tickets)
            }
        }),
        _ => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let written = inspect::write_events(&store, &scope, from, limit, &mut out)
                .and_then(|()| std::io::Write::flush(&mut out).map_err(inspect::EventsError::Io));
            return match written {
                Ok(()) => ExitCode::SUCCESS,
                Err(inspect::EventsError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    ExitCode::SUCCESS
                }
                Err(inspect::EventsError::Io(e)) => {
                    eprintln!("runcore events: writing stdout failed: {e}");
                    ExitCode::FAILURE
                }
                Err(inspect::EventsError::Store(e)) => store_failed(command, &e),
            };
        }
    };
    match text {
        Ok(text) => write_stdout(&text),
        Err(e) => store_failed(command, &e),
    }
}

fn store_failed(command: &str, error: &runcore::StoreError) -> ExitCode {
    eprintln!("runcore {command}: reading the store failed: {error}");
    ExitCode::from(drive::EXIT_STORE)
}
