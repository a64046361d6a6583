//! The command line, declared with clap's derive: every command, flag and positional argument,
//! and the help clap generates from these doc comments (`runcore --help`, `runcore help
//! drive`, `runcore drive -h`).
//!
//! What is syntax is clap's: a flag's value, a whole number, a policy name (through the core's
//! `FromStr`, so every host reads the word the same way), a flag that needs `--store` or
//! excludes another. Each such mistake is a clap usage error that names the flag, on stderr,
//! exit status 2, before anything is opened. What needs the world (the store URL and the store
//! itself, the config file, the claim's owner and lease as the core checks them) is checked by
//! the command, after parsing.

use std::net::SocketAddr;

use clap::builder::NonEmptyStringValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use runcore::RecoveryPolicy;

/// The default lease of `runcore drive --store` (SPEC §12.4).
pub const DEFAULT_LEASE_MS: u64 = 30_000;

/// Printed after the overview's list of commands.
const AFTER_HELP: &str = "\
A store URL is sqlite:PATH or postgres://… (postgresql://…).

Exit status: 0 success; 1 reading stdin or writing stdout failed; 2 a usage error or a bad
--store (nothing is created or changed); 3 the store rejected or failed a commit, or a read, or
the thread's claim was lost; 4 another owner holds the thread";

/// runcore — the deterministic core of AI agent runs
#[derive(Debug, Parser)]
#[command(name = "runcore", after_help = AFTER_HELP)]
pub struct Cli {
    /// The command; none prints the help.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Drive an agent with JSON lines on stdin; outputs go to stdout as JSON lines
    /// (--store URL makes it durable: it persists and recovers for the host)
    ///
    /// Reads one JSON object per line on stdin (lines split on \n only) and, after each input
    /// line N, writes its outputs as JSON lines and then {"type":"idle","line":N}, flushing
    /// stdout so a host can converse line by line through pipes. A bad line gives one
    /// {"type":"error",...} line and the driver goes on; nothing the agent held is lost. EOF
    /// ends the process with status 0.
    ///
    /// Without --store everything is in memory: commits go to stdout and nowhere else.
    ///
    /// With --store the driver persists and recovers for the host (SPEC §12.2):
    ///   - at start it opens the store; if the thread has committed history it rebuilds the
    ///     agent from it (--recover) and writes what the recovered agent emits (a pending
    ///     call_model or execute_tools under replay; the sealing commit and run_end under seal;
    ///     nothing while a run awaits a person: answer with a resume_ticket line). Then,
    ///     history or not, it writes {"type":"idle","line":0} before reading any input;
    ///   - every commit is applied to the store, fenced, BEFORE its commit line is written: a
    ///     line the host has read is a fact;
    ///   - if the store rejects or fails a commit (another driver on the same thread, the
    ///     database gone), it writes one {"type":"error","line":N,"error":{"kind":"store",...}}
    ///     line, nothing after it, and exits with status 3; restart it to recover from what is
    ///     committed;
    ///   - a config line naming another thread, or any config line once the thread has
    ///     history, is an invalid_state error (configure with --config).
    ///
    /// --thread, --recover, --owner, --lease-ms and --wait-claim need --store.
    /// A bad --store is one line on stderr and exit status 2. Another owner holding the
    /// thread: exit status 4, nothing written. A lost claim (a renew refused, or the lease
    /// passed without one): one {"type":"error",...,"error":{"kind":"store","reason":
    /// "claim_lost",...}} line, nothing after it, exit status 3.
    ///
    /// Examples:
    ///     printf '%s\n' '{"type":"prompt","text":"hi"}' | runcore drive
    ///     runcore drive --store sqlite:runs.db --thread support-42 --recover seal
    ///
    /// See `runcore schema` for every line's shape.
    #[command(verbatim_doc_comment)]
    Drive(DriveArgs),
    /// List the threads of a store
    ///
    /// One row per thread, ordered by thread id: its version (commit count), its latest run
    /// and that run's state. With --json, one line per thread:
    ///     {"thread_id","version","latest_run":{"id","thread_id","state"}|null}
    ///
    /// A store that does not exist is an error (exit status 2, nothing is created).
    #[command(verbatim_doc_comment)]
    Threads(StoreArgs),
    /// Show one thread of a store: its runs, its transcript, its tickets
    ///
    /// Prints the thread's runs in start order with their states, its committed transcript,
    /// and the tickets of its runs that wait for a person. With --json, one object:
    ///     {"thread_id","version","messages":[…],"runs":[{"id","thread_id","state"}],
    ///      "tickets":[ResumeTicket…]}
    /// An unknown thread shows version 0 and nothing else. A store that does not exist is an
    /// error (exit status 2, nothing is created).
    #[command(verbatim_doc_comment)]
    Show(ShowArgs),
    /// List the runs that wait for a person (what to answer after a restart)
    ///
    /// After a restart, this is what needs a person: one row per awaiting run, ordered by run
    /// id, with its ticket and what it waits for (an approval, input, a pause). Answer an
    /// approval with `runcore approve RUN --store URL` or `runcore deny RUN --store URL` (or
    /// in the browser: `runcore console --store URL`); anything else with `runcore drive
    /// --store URL --thread THREAD` and a {"type":"resume_ticket","result":…} line. With
    /// --json, each run's ResumeTicket on its own line.
    ///
    /// A store that does not exist is an error (exit status 2, nothing is created).
    #[command(verbatim_doc_comment)]
    Pending(StoreArgs),
    /// Print a store's audit events as JSON lines
    ///
    /// One JSON line per event, ascending by sequence:
    ///     {"sequence","commit_sequence","thread_id","run_id","kind","payload"}
    /// Always JSON lines (--json is accepted and changes nothing).
    ///
    /// A store that does not exist is an error (exit status 2, nothing is created).
    #[command(verbatim_doc_comment)]
    Events(EventsArgs),
    /// Handle due work once: expire passed deadlines, leave or seal orphaned runs
    ///
    /// Lists the store's due work (passed deadlines, orphaned runs) and handles each item
    /// through a claim of its thread (SPEC §12.4): a passed deadline is applied as a timeout at
    /// store time; an orphan is left for a worker under replay (the default) or sealed under
    /// seal (in-flight work is thrown away). One JSON line per item:
    ///     {"thread_id","run_id","reason":"deadline"|"orphaned",
    ///      "action":"expired"|"sealed"|"left"|"skipped","detail"?}
    /// (skipped: another owner held it, or it was no longer due). Every claim it takes is
    /// released before it exits. Exit 0. Run it from cron or a loop on any machine: two sweeps
    /// at once handle each item once.
    #[command(verbatim_doc_comment)]
    Sweep(SweepArgs),
    /// List due work (passed deadlines, orphaned runs) without acting
    ///
    /// Passed deadlines and orphaned runs, in the order each became due (SPEC §12.4). With
    /// --json, one line per item:
    ///     {"thread_id","run_id","reason":{"type":"deadline","deadline_ms"} |
    ///      {"type":"orphaned","claim_expired_at_ms"}}
    #[command(verbatim_doc_comment)]
    Due(DueArgs),
    /// Approve the tool call a run waits for (one fenced commit)
    ///
    /// Answers RUN's current permission ticket with allow (and the note, for the audit trail):
    /// one commit, fenced, exactly as a host's resume_ticket line would make it. The run is
    /// then Running with its call ready; the next worker on the thread (a `runcore drive
    /// --store` restart, a fleet worker) executes it. Prints one JSON line:
    /// {"thread_id","version"}.
    ///
    /// Exit status: 0 answered; 1 the run does not await a permission (the error as one JSON
    /// line on stderr, e.g. {"kind":"resume","resume_error":"not_waiting",...} or "expired");
    /// 2 a usage error or a bad --store; 3 the store failed, or another writer moved the thread
    /// on first (nothing was written); 4 another owner holds the thread
    #[command(verbatim_doc_comment)]
    Approve(ApproveArgs),
    /// Deny the tool call a run waits for (one fenced commit)
    ///
    /// Answers RUN's current permission ticket with deny (and the reason, which the model sees
    /// in the call's denied result): one commit, fenced. The next worker on the thread pairs
    /// the denied result and the run goes on. Prints one JSON line: {"thread_id","version"}.
    ///
    /// Exit status: as `runcore approve`.
    #[command(verbatim_doc_comment)]
    Deny(DenyArgs),
    /// Fork a thread at a version onto a new thread (one fenced commit)
    ///
    /// The new thread's first commit holds exactly the messages THREAD had committed at
    /// --at VERSION (and its compaction, if it had compacted by then), with a forked_from
    /// audit event; THREAD itself is only read (SPEC §8.10). Prints one JSON line
    /// {"thread_id","version","forked_from":{"thread_id","version"}}. Exit status: 0 forked;
    /// 1 refused (an unknown thread or version, a version with a tool call unanswered, a
    /// --to thread that exists: the §10 error as one JSON line on stderr, nothing written);
    /// 2 a usage error or a bad --store; 3 the store failed.
    #[command(verbatim_doc_comment)]
    Fork(ForkArgs),
    /// Serve a local web page to look into a store and answer approvals
    ///
    /// Serves pages for the threads (version, latest run, state), one thread's transcript
    /// (roles, tool calls beside their results and outcomes, runs and end causes, where the
    /// model context starts), the pending approvals with Approve and Deny, and the audit
    /// events, paged; each page refreshes while it is open (SPEC §12.5). The JSON API the
    /// pages use: GET /api/threads, /api/threads/{thread_id}, /api/pending,
    /// /api/events?thread=&run=&from=&limit=, and POST /api/runs/{run_id}/decision with
    /// {"decision":"allow","note"?} or {"decision":"deny","reason"?} (ids in paths are one
    /// percent-encoded segment).
    ///
    /// At start it prints one line, `console: http://HOST:PORT/ token: TOKEN`, and serves
    /// until SIGINT or SIGTERM. Every request that changes something needs the token (a fresh
    /// random one per start): `Authorization: Bearer TOKEN`, or the page's token box (open
    /// http://HOST:PORT/#token=TOKEN, printed on stderr, to fill it). Reads do not (unless
    /// --allow-remote: then every request needs it).
    #[command(verbatim_doc_comment)]
    Console(ConsoleArgs),
    /// Print or export a thread's OpenTelemetry GenAI spans, derived from its commits
    ///
    /// Derives the thread's spans from what is committed (SPEC §14): one invoke_agent span
    /// per run, a chat span per model step, an execute_tool span per executed call, an await
    /// span per wait for a person with the decision. Times are the committed now_ms values;
    /// ids are hashed from the thread, run, step and call ids, so the same store always gives
    /// the same spans. Human-readable by default; --json prints the OTLP/JSON export body
    /// (one line); --otlp URL exports the spans with OpenTelemetry's OTLP exporter
    /// (OTLP/HTTP, protobuf; http:// only; a URL without a path gets /v1/traces) and
    /// prints {"spans":N,"endpoint":URL}.
    /// Message content is left out unless --content is given.
    ///
    /// Exit status: 0 printed or exported; 1 the export failed (stderr says why) or --run
    /// names no run of the thread; 2 a usage error or a bad --store; 3 the store failed.
    #[command(verbatim_doc_comment)]
    Trace(TraceArgs),
    /// Print the JSON Schema (draft 2020-12) of the driver's input and output lines
    ///
    /// With no argument, prints one compound JSON Schema document (draft 2020-12) with the
    /// input line schema under $defs.input_line and the output line schema under
    /// $defs.output_line (each an embedded resource with its own $id). `input` or `output`
    /// prints that line schema alone.
    #[command(verbatim_doc_comment)]
    Schema(SchemaArgs),
    /// Provider codecs: a call_model line → a request body; a response body → input lines
    ///
    /// `runcore codec encode --api API [--model M] [--options JSON]` reads one call_model
    /// output line (full context, as `runcore drive` prints it) on stdin and prints the
    /// provider request body as one JSON line. What the body leaves out of the context
    /// (thinking from another model, an unpaired tool call, …) is listed on stderr, one JSON
    /// line each.
    ///
    /// `runcore codec decode --api API [--status N] --run-id R --step S` reads a response body
    /// (SSE or JSON) on stdin and prints the input lines it yields: model_delta lines as they
    /// arrive, then one model_done or model_failed, ready for `runcore drive`. A body cut
    /// short, an error event inside it, or any body with a non-2xx --status is data
    /// (model_failed, exit status 0); a 2xx body that is not the API's format at all → one
    /// line on stderr naming the byte offset, nothing on stdout, exit status 1.
    ///
    /// API is anthropic, openai-chat or openai-responses (SPEC §13).
    ///
    /// Examples:
    ///     runcore codec encode --api anthropic --model claude-sonnet-4-6 < call_model.json
    ///     curl -sN … | runcore codec decode --api openai-chat --run-id thread-1/run-1 --step 1
    #[command(verbatim_doc_comment)]
    Codec(CodecArgs),
    /// Run a scripted session on a real SQLite file, with a real crash; print its timeline
    ///
    /// Runs two runs on one thread: parallel tools answered out of order with steering queued
    /// meanwhile, a follow-up, a gated tool approved and another denied, a stale resume
    /// rejected. The second run happens in a child process (this same binary), which the demo
    /// kills with SIGKILL while a tool is outstanding; the demo then recovers the agent from
    /// the store on disk and finishes the run. A fenced post-terminal commit and paged audit
    /// events follow, and the closing summary is read back from the store (what `runcore
    /// show` prints). No network is needed.
    ///
    /// By default the store is a SQLite file in a new temporary directory, removed at the end.
    #[command(verbatim_doc_comment)]
    Demo(DemoArgs),
}

/// `runcore drive`.
#[derive(Debug, Args)]
pub struct DriveArgs {
    /// A JSON object used as if it were a first {"type":"config",...} line
    /// (with --store, also the configuration a recovered agent runs with)
    #[arg(long, value_name = "FILE", verbatim_doc_comment)]
    pub config: Option<String>,
    /// sqlite:PATH (the file is created if missing; directories never are)
    /// or postgres://… / postgresql://…
    #[arg(long, value_name = "URL", verbatim_doc_comment)]
    pub store: Option<String>,
    /// The thread to drive (default: thread_id of --config, else thread-1)
    #[arg(
        long,
        value_name = "ID",
        requires = "store",
        value_parser = NonEmptyStringValueParser::new(),
    )]
    pub thread: Option<String>,
    /// This process's name as the thread's claim owner (default: host name,
    /// pid and start time); the driver claims the thread before it recovers,
    /// renews while it runs and waits, and releases at EOF
    #[arg(long, value_name = "ID", requires = "store", verbatim_doc_comment)]
    pub owner: Option<String>,
    /// How long a claim lasts unless renewed (1 to 86400000)
    #[arg(
        long,
        value_name = "MS",
        requires = "store",
        value_parser = whole_number,
        allow_hyphen_values = true,
        default_value_t = DEFAULT_LEASE_MS,
    )]
    pub lease_ms: u64,
    /// If another owner holds the thread, wait up to MS for it (default:
    /// exit 4 at once with one stderr line naming the owner)
    #[arg(
        long,
        value_name = "MS",
        requires = "store",
        value_parser = whole_number,
        allow_hyphen_values = true,
        verbatim_doc_comment,
    )]
    pub wait_claim: Option<u64>,
    /// For tool calls handed out but never answered before a crash: replay
    /// writes the same execute_tools again (tools must be idempotent by
    /// "{run_id}:{call_id}"); seal ends the run indeterminate with
    /// interrupted results
    #[arg(
        long,
        value_name = "POLICY",
        requires = "store",
        value_parser = policy,
        default_value = "replay",
        verbatim_doc_comment,
    )]
    pub recover: RecoveryPolicy,
    /// Export each run's spans (SPEC §14) over OTLP/HTTP to URL once its
    /// terminal commit is stored (http:// only; a URL without a path gets
    /// /v1/traces; protobuf; at most 512 spans a request). Exports run on a
    /// thread of their own: the driver never waits for the collector (at the
    /// end of input it waits at most 3 s for queued ones). A failed export is
    /// one stderr line; driving goes on; a URL that is not
    /// http://HOST[:PORT][/PATH] is a start-up error
    #[arg(long, value_name = "URL", requires = "store", verbatim_doc_comment)]
    pub otlp: Option<String>,
}

/// `runcore threads` and `runcore pending`.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The store: sqlite:PATH or postgres://… (it must exist; nothing is created)
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// One JSON line per row instead of text
    #[arg(long)]
    pub json: bool,
}

/// `runcore show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The thread
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub thread: String,
    /// The store: sqlite:PATH or postgres://… (it must exist; nothing is created)
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

/// `runcore trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The thread whose spans to derive
    pub thread: String,
    /// The store: sqlite:PATH or postgres://… (it must exist; nothing is created)
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// Only the spans of run RUN
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// Export over OTLP/HTTP to URL (e.g. http://127.0.0.1:4318) instead of printing
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// Print the OTLP/JSON export body
    #[arg(long, conflicts_with = "otlp")]
    pub json: bool,
    /// Put message content in the spans (gen_ai.input.messages, gen_ai.output.messages, tool
    /// arguments and results)
    #[arg(long)]
    pub content: bool,
    /// gen_ai.agent.name (the run spans are named `invoke_agent NAME`)
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// gen_ai.provider.name (anthropic, openai, …): the commits do not name the provider
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
}

/// `runcore events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The store: sqlite:PATH or postgres://… (it must exist; nothing is created)
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// Only the events of thread T
    #[arg(long, value_name = "T", conflicts_with = "run")]
    pub thread: Option<String>,
    /// Only the events of run R
    #[arg(long, value_name = "R")]
    pub run: Option<String>,
    /// Only events with a sequence above N (to page: the last sequence you got)
    #[arg(long, value_name = "N", value_parser = whole_number, allow_hyphen_values = true)]
    pub from: Option<u64>,
    /// At most K events (default: all of them)
    #[arg(long, value_name = "K", value_parser = whole_number, allow_hyphen_values = true)]
    pub limit: Option<u64>,
    /// Accepted; the output is JSON lines either way
    #[arg(long)]
    pub json: bool,
}

/// `runcore sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The store (sqlite:PATH or postgres://…)
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// The sweeper's claim owner (default: host name, pid and start time)
    #[arg(long, value_name = "W")]
    pub owner: Option<String>,
    /// At most N items
    #[arg(
        long,
        value_name = "N",
        value_parser = whole_number,
        allow_hyphen_values = true,
        default_value_t = crate::sweep::DEFAULT_LIMIT,
    )]
    pub limit: u64,
    /// replay: leave orphans for a worker; seal: end them
    #[arg(long, value_name = "POLICY", value_parser = policy, default_value = "replay")]
    pub recover: RecoveryPolicy,
}

/// `runcore due`.
#[derive(Debug, Args)]
pub struct DueArgs {
    /// The store (sqlite:PATH or postgres://…)
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// At most N items
    #[arg(
        long,
        value_name = "N",
        value_parser = whole_number,
        allow_hyphen_values = true,
        default_value_t = crate::sweep::DEFAULT_LIMIT,
    )]
    pub limit: u64,
    /// One JSON line per item instead of text
    #[arg(long)]
    pub json: bool,
}

/// `runcore approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The run whose permission ticket to answer
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub run: String,
    /// The store (sqlite:PATH or postgres://…; it must exist)
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// A note for the audit trail
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub note: Option<String>,
}

/// `runcore deny`.
#[derive(Debug, Args)]
pub struct DenyArgs {
    /// The run whose permission ticket to answer
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub run: String,
    /// The store (sqlite:PATH or postgres://…; it must exist)
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// Why, for the model (in the call's denied result) and the audit trail
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub reason: Option<String>,
}

/// `runcore fork`.
#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The thread to fork
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub thread: String,
    /// The parent's version to fork at (1 up to its current version)
    #[arg(long, value_name = "VERSION")]
    pub at: u64,
    /// The new thread's id (it must be unused)
    #[arg(long, value_name = "NEW_THREAD", value_parser = NonEmptyStringValueParser::new())]
    pub to: String,
    /// The store (sqlite:PATH or postgres://…; it must exist)
    #[arg(long, value_name = "URL")]
    pub store: String,
}

/// `runcore console`.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// sqlite:PATH or postgres://… (it must exist; nothing is created)
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// IP:PORT to listen on (port 0 takes a free one)
    #[arg(
        long,
        value_name = "ADDR",
        value_parser = socket_address,
        default_value = runcore_console::DEFAULT_LISTEN,
    )]
    pub listen: SocketAddr,
    /// Allow an address other than loopback (other machines could reach it)
    #[arg(long)]
    pub allow_remote: bool,
}

/// `runcore schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Only the input or only the output line schema
    pub part: Option<SchemaPart>,
}

/// `runcore schema input` / `runcore schema output`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SchemaPart {
    /// The schema of the lines the driver reads
    Input,
    /// The schema of the lines the driver writes
    Output,
}

/// `runcore demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print the session as the driver's output lines instead of a timeline
    #[arg(long)]
    pub json: bool,
    /// Use this store instead (sqlite:PATH or postgres://…; kept afterwards);
    /// the demo's thread must not exist there yet
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "memory",
        verbatim_doc_comment
    )]
    pub store: Option<String>,
    /// Keep everything in memory, in one process (the crash is simulated)
    #[arg(long)]
    pub memory: bool,
    /// The demo's own child process (run 2, until it is killed)
    #[arg(long, hide = true, requires = "store")]
    pub child: bool,
    /// The child's last input line number (with --child)
    #[arg(
        long,
        hide = true,
        requires = "child",
        value_parser = whole_number,
        allow_hyphen_values = true,
    )]
    pub line: Option<u64>,
}

/// A whole number (`--lease-ms`, `--limit`, ...), with a message that says so. Its flags take
/// the next argument whatever it starts with, so `--limit -1` is refused by this message
/// (naming the flag), as before clap.
fn whole_number(text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| "expected a whole number".to_owned())
}

/// `--recover`: the core's names of [`RecoveryPolicy`] and its message for any other word.
fn policy(text: &str) -> Result<RecoveryPolicy, runcore::UnknownName> {
    text.parse()
}

/// `--listen`.
fn socket_address(text: &str) -> Result<SocketAddr, String> {
    text.parse()
        .map_err(|_| format!("expected IP:PORT (e.g. 127.0.0.1:8420), got {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("runcore").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_switches_and_positionals() {
        let Ok(Cli {
            command: Some(Command::Show(show)),
        }) = parse(&["show", "t-1", "--json", "--store", "sqlite:x"])
        else {
            panic!("show parses");
        };
        assert_eq!(show.thread, "t-1");
        assert!(show.json);
        assert_eq!(show.store, "sqlite:x");
    }

    #[test]
    fn defaults_are_today_s() {
        let Ok(Cli {
            command: Some(Command::Sweep(sweep)),
        }) = parse(&["sweep", "--store", "sqlite:x"])
        else {
            panic!("sweep parses");
        };
        assert_eq!(sweep.limit, crate::sweep::DEFAULT_LIMIT);
        assert_eq!(sweep.recover, RecoveryPolicy::Replay);
        let Ok(Cli {
            command: Some(Command::Console(console)),
        }) = parse(&["console", "--store", "sqlite:x"])
        else {
            panic!("console parses");
        };
        assert_eq!(console.listen.to_string(), runcore_console::DEFAULT_LISTEN);
    }

    #[test]
    fn every_mistake_is_a_usage_error_naming_it() {
        for (args, kind, names) in [
            (&["show", "--store"][..], ErrorKind::InvalidValue, "--store"),
            (
                &["show", "t", "--store", "a", "--store", "b"],
                ErrorKind::ArgumentConflict,
                "--store",
            ),
            (&["show", "--yaml"], ErrorKind::UnknownArgument, "--yaml"),
            (
                &["show", "a", "b", "--store", "x"],
                ErrorKind::UnknownArgument,
                "'b'",
            ),
            (
                &["show", "--store", "x"],
                ErrorKind::MissingRequiredArgument,
                "<THREAD>",
            ),
            (
                &["drive", "--thread", "t"],
                ErrorKind::MissingRequiredArgument,
                "--store",
            ),
            (
                &["drive", "--store", "x", "--recover", "later"],
                ErrorKind::ValueValidation,
                r#"policy must be "replay" or "seal", got "later""#,
            ),
            (
                &["due", "--store", "x", "--limit", "-1"],
                ErrorKind::ValueValidation,
                "whole number",
            ),
            (
                &["events", "--store", "x", "--thread", "t", "--run", "r"],
                ErrorKind::ArgumentConflict,
                "--run",
            ),
            (
                &["demo", "--line", "3"],
                ErrorKind::MissingRequiredArgument,
                "--child",
            ),
        ] {
            let error = parse(args).expect_err(&format!("{args:?}"));
            assert_eq!(error.kind(), kind, "{args:?}: {error}");
            assert!(error.to_string().contains(names), "{args:?}: {error}");
            assert_eq!(error.exit_code(), 2, "{args:?}");
        }
    }
}

/// `runcore codec encode|decode`.
#[derive(Debug, Args)]
pub struct CodecArgs {
    /// Encode a call_model line, or decode a response body
    #[command(subcommand)]
    pub action: CodecAction,
}

/// The two directions of a codec.
#[derive(Debug, Subcommand)]
pub enum CodecAction {
    /// Read one call_model line on stdin; print the request body
    Encode(CodecEncodeArgs),
    /// Read a response body on stdin; print the input lines it yields
    Decode(CodecDecodeArgs),
}

/// The provider API of a codec (SPEC §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CodecApi {
    /// Anthropic Messages
    Anthropic,
    /// OpenAI Chat Completions
    OpenaiChat,
    /// OpenAI Responses
    OpenaiResponses,
}

impl CodecApi {
    /// The codec crate's API.
    pub fn api(self) -> runcore_providers::Api {
        match self {
            CodecApi::Anthropic => runcore_providers::Api::Anthropic,
            CodecApi::OpenaiChat => runcore_providers::Api::OpenAiChat,
            CodecApi::OpenaiResponses => runcore_providers::Api::OpenAiResponses,
        }
    }
}

/// `runcore codec encode`.
#[derive(Debug, Args)]
pub struct CodecEncodeArgs {
    /// The provider API
    #[arg(long, value_enum)]
    pub api: CodecApi,
    /// The model to call (or "model" in --options; --model wins)
    #[arg(long, value_parser = NonEmptyStringValueParser::new())]
    pub model: Option<String>,
    /// Request options as a JSON object: model, max_tokens, stream (default true),
    /// reasoning, tool_choice, extra (merged into the body last)
    #[arg(long)]
    pub options: Option<String>,
}

/// `runcore codec decode`.
#[derive(Debug, Args)]
pub struct CodecDecodeArgs {
    /// The provider API
    #[arg(long, value_enum)]
    pub api: CodecApi,
    /// The response's HTTP status (a status outside 2xx makes the body an error)
    #[arg(long, default_value_t = 200)]
    pub status: u16,
    /// The run the inputs answer
    #[arg(long, value_parser = NonEmptyStringValueParser::new())]
    pub run_id: String,
    /// The step the inputs answer
    #[arg(long)]
    pub step: u32,
    /// A response header, `'Name: value'` (repeatable): `retry-after`, `retry-after-ms` and the
    /// providers' rate-limit reset headers fill `model_failed.retry_after_ms`
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = parse_header)]
    pub headers: Vec<(String, String)>,
    /// A file of response headers, one `Name: value` a line (as `curl -D FILE` writes them; an
    /// `HTTP/…` status line and blank lines are skipped), read before any --header
    #[arg(long, value_name = "FILE")]
    pub headers_file: Option<std::path::PathBuf>,
    /// The time the response arrived, in milliseconds since the Unix epoch: what a date in
    /// `retry-after` or a reset header is a delay from (default: the response's `date` header,
    /// else now)
    #[arg(long)]
    pub now_ms: Option<u64>,
}

/// A `Name: value` header.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(format!("expected 'Name: value', got {text:?}")),
    }
}
