//! The `runcore` binary (package `runcore-cli`): the one place that reads stdin and writes stdout.
//!
//! - `runcore drive [--config FILE] [--store URL [--thread ID] [--recover replay|seal]]`: the
//!   JSON-lines driver (SPEC §12), in memory or durable (§12.2).
//! - `runcore threads | show THREAD | pending | events` with `--store URL`: looking into a
//!   store (§12.3).
//! - `runcore approve RUN | deny RUN` with `--store URL`: a person answers a permission
//!   ticket; `runcore console --store URL`: the operator console in the browser (§12.5).
//! - `runcore trace THREAD --store URL`: the thread's OpenTelemetry GenAI spans, derived from
//!   its commits (§14), printed or exported over OTLP/HTTP; `drive --otlp URL` exports each
//!   run's spans when it ends.
//! - `runcore schema`: JSON Schema (draft 2020-12) of the driver's lines.
//! - `runcore codec encode|decode --api API`: the provider codecs (SPEC §12.6, §13).
//! - `runcore demo [--json] [--store URL | --memory]`: a scripted session whose crash is real.
//!
//! Exit status: 0 success; 1 stdout or stdin failed; 2 a usage error or a bad `--store`
//! (nothing created or changed); 3 the store rejected or failed a commit, or failed a read.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use runcore::driver::{input_line_schema, json_schema, output_line_schema};
use runcore::store::EventScope;
use runcore::{PermissionDecision, RunId, ThreadId};

mod approve;
mod args;
mod codec;
mod console;
mod demo;
mod drive;
mod fork;
mod inspect;
mod sweep;
mod text;
mod trace;

use args::{Cli, Command, DriveArgs, EventsArgs, SchemaPart, SweepArgs};
use runcore_store_url::{self as store, Access, StoreUrl};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A usage error (stderr, exit 2, as before clap) or the help (stdout, exit 0).
        Err(error) => return clap_exit(&error),
    };
    let Some(command) = cli.command else {
        // `runcore` alone prints the overview, exit 0.
        return write_stdout(&Cli::command().render_long_help().to_string());
    };
    match command {
        Command::Drive(args) => drive(args),
        Command::Schema(args) => {
            let schema = match args.part {
                None => json_schema(),
                Some(SchemaPart::Input) => input_line_schema(),
                Some(SchemaPart::Output) => output_line_schema(),
            };
            // A `Value` writes infallibly; `{:#}` is serde_json's pretty form.
            write_stdout(&format!("{schema:#}\n"))
        }
        Command::Demo(args) => demo::main(args),
        Command::Threads(args) => inspect(Inspect::Threads, &args.store, args.json),
        Command::Show(args) => inspect(
            Inspect::Show(ThreadId::new(args.thread)),
            &args.store,
            args.json,
        ),
        Command::Pending(args) => inspect(Inspect::Pending, &args.store, args.json),
        Command::Events(args) => events(args),
        Command::Sweep(args) => sweep(args),
        Command::Due(args) => match open_store("due", &args.store) {
            Ok(store) => sweep::due_command(&store, args.limit, args.json),
            Err(exit) => exit,
        },
        Command::Approve(args) => approve::main(
            "approve",
            &args.run,
            &args.store,
            PermissionDecision::Allow {
                note: approve::given(args.note),
            },
        ),
        Command::Deny(args) => approve::main(
            "deny",
            &args.run,
            &args.store,
            PermissionDecision::Deny {
                reason: approve::given(args.reason),
            },
        ),
        Command::Fork(args) => fork::main(args),
        Command::Console(args) => console::main(args),
        Command::Codec(args) => codec::main(args),
        Command::Trace(args) => trace::main(args),
    }
}

/// Prints clap's error or help where it belongs and returns its exit status: 2 for a usage
/// error (the status it had before clap), 0 for the help.
fn clap_exit(error: &clap::Error) -> ExitCode {
    let _ = error.print();
    ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2))
}

/// A usage error found after parsing (the core refused the claim's owner or lease): reported
/// as clap reports its own, with the command's usage line, exit status 2.
fn usage_error(command: &str, kind: ErrorKind, message: &str) -> ExitCode {
    let mut cli = Cli::command();
    cli.build();
    let error = match cli.find_subcommand_mut(command) {
        Some(subcommand) => subcommand.error(kind, message),
        None => cli.error(kind, message),
    };
    clap_exit(&error)
}

/// Writes `text` to stdout; a closed pipe (e.g. `| head`) is not an error.
pub(crate) fn write_stdout(text: &str) -> ExitCode {
    write_stdout_bytes(text.as_bytes())
}

/// [`write_stdout`] of bytes (a body written as bytes, e.g. OTLP/JSON).
pub(crate) fn write_stdout_bytes(bytes: &[u8]) -> ExitCode {
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runcore: writing stdout failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A bad --store or another start-up failure of a command: one line, exit status 2.
fn start_error(command: &str, message: &str) -> ExitCode {
    eprintln!("runcore {command}: {message}");
    ExitCode::from(2)
}

/// Parses and opens `url` for reading (a store that does not exist is refused, nothing is
/// created); a bad one is a start-up error.
pub(crate) fn open_store(command: &str, url: &str) -> Result<store::Backend, ExitCode> {
    let url = StoreUrl::parse(url).map_err(|message| start_error(command, &message))?;
    store::open(&url, Access::Read).map_err(|message| start_error(command, &message))
}

fn drive(args: DriveArgs) -> ExitCode {
    let store_url = match args.store.as_deref().map(StoreUrl::parse).transpose() {
        Ok(url) => url,
        Err(message) => return start_error("drive", &message),
    };
    let config = match args
        .config
        .as_deref()
        .map(drive::ConfigFile::read)
        .transpose()
    {
        Ok(config) => config,
        Err(message) => return start_error("drive", &message),
    };
    let thread = match args.thread {
        Some(id) => ThreadId::new(id),
        None => config
            .as_ref()
            .and_then(|c| c.thread.clone())
            .unwrap_or_else(|| ThreadId::new("thread-1")),
    };
    let owner = args.owner.unwrap_or_else(runcore_clock::default_owner);
    let mut claim_options = runcore::host::ClaimOptions::new(owner, args.lease_ms);
    // Unique to this process start, so a restart that reuses --owner does not inherit the
    // claim its previous start left live.
    claim_options.request_id = runcore_clock::request_id("drive");
    if let Err(error) = runcore::store::check_claim_request(&claim_options.request(&thread)) {
        return usage_error(
            "drive",
            ErrorKind::ValueValidation,
            &format!("--owner/--lease-ms: {error}"),
        );
    }
    // Built before anything is driven: a bad --otlp URL is a start-up error, not one stderr
    // line per run.
    let otlp = match args
        .otlp
        .as_deref()
        .map(trace::DriveExporter::new)
        .transpose()
    {
        Ok(otlp) => otlp,
        Err(error) => return start_error("drive", &format!("--otlp: {error}")),
    };
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
                policy: args.recover,
                claim: drive::ClaimStart {
                    options: claim_options,
                    wait_ms: args.wait_claim,
                },
                otlp,
            };
            drive::run_session(config, Some(start), stdin, stdout.lock())
        }
    };
    drive::exit(result)
}

fn sweep(args: SweepArgs) -> ExitCode {
    let mut store = match open_store("sweep", &args.store) {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let owner = args.owner.unwrap_or_else(runcore_clock::default_owner);
    sweep::sweep_command(&mut store, owner, args.limit, args.recover)
}

/// The inspection commands that print one text (or JSON) answer.
enum Inspect {
    Threads,
    Show(ThreadId),
    Pending,
}

/// `threads`, `show`, `pending`.
fn inspect(what: Inspect, url: &str, json: bool) -> ExitCode {
    let command = match what {
        Inspect::Threads => "threads",
        Inspect::Show(_) => "show",
        Inspect::Pending => "pending",
    };
    let store = match open_store(command, url) {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let text = match what {
        Inspect::Threads => inspect::threads(&store).map(|lines| {
            if json {
                inspect::json_lines(&lines)
            } else {
                inspect::threads_text(&lines)
            }
        }),
        Inspect::Show(thread) => inspect::show(&store, &thread).map(|view| {
            if json {
                inspect::json_lines(&[view])
            } else {
                inspect::show_text(&view)
            }
        }),
        Inspect::Pending => inspect::pending(&store).map(|tickets| {
            if json {
                inspect::json_lines(&tickets)
            } else {
                inspect::pending_text(&tickets, runcore_clock::wall_clock_ms())
            }
        }),
    };
    match text {
        Ok(text) => write_stdout(&text),
        Err(e) => store_failed(command, &e),
    }
}

/// `events`: streamed, one JSON line per event.
fn events(args: EventsArgs) -> ExitCode {
    // clap refuses --thread with --run.
    let scope = match (args.thread, args.run) {
        (Some(t), _) => EventScope::Thread(ThreadId::new(t)),
        (None, Some(r)) => EventScope::Run(RunId::new(r)),
        (None, None) => EventScope::All,
    };
    let store = match open_store("events", &args.store) {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = inspect::write_events(&store, &scope, args.from, args.limit, &mut out)
        .and_then(|()| std::io::Write::flush(&mut out).map_err(inspect::EventsError::Io));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(inspect::EventsError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(inspect::EventsError::Io(e)) => {
            eprintln!("runcore events: writing stdout failed: {e}");
            ExitCode::FAILURE
        }
        Err(inspect::EventsError::Store(e)) => store_failed("events", &e),
    }
}

pub(crate) fn store_failed(command: &str, error: &runcore::store::StoreError) -> ExitCode {
    eprintln!("runcore {command}: reading the store failed: {error}");
    ExitCode::from(drive::EXIT_STORE)
}
