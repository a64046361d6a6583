//! The `runcore` binary (package `runcore-cli`): the one place that reads stdin and writes stdout.
//!
//! - `runcore drive [--config FILE]`: the JSON-lines driver (SPEC §12).
//! - `runcore schema`: JSON Schema (draft 2020-12) of the driver's lines.
//! - `runcore demo [--json]`: a scripted session, as a timeline or as driver lines.

use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::process::ExitCode;

use runcore::driver::{
    Driver, InputLine, MAX_LINE_BYTES, input_line_schema, json_schema, output_line_schema,
};

mod demo;

const HELP: &str = "\
runcore — the deterministic core of AI agent runs

USAGE:
    runcore <COMMAND> [OPTIONS]

COMMANDS:
    drive     Drive an agent with JSON lines on stdin; outputs go to stdout as JSON lines
    schema    Print the JSON Schema (draft 2020-12) of the driver's input and output lines
    demo      Run a scripted session against the in-memory store and print its timeline
    help      Print this help, or the help of a command (`runcore help drive`)

Run `runcore <COMMAND> --help` for a command's options.
";

const DRIVE_HELP: &str = "\
runcore drive — the JSON-lines driver

USAGE:
    runcore drive [--config FILE]

Reads one JSON object per line on stdin (lines split on \\n only) and, after each input line N,
writes its outputs as JSON lines and then {\"type\":\"idle\",\"line\":N}, flushing stdout so a
host can converse line by line through pipes. A bad line gives one {\"type\":\"error\",...} line
and the driver goes on; nothing the agent held is lost. EOF ends the process with status 0.

OPTIONS:
    --config FILE   A JSON object used as if it were a first {\"type\":\"config\",...} line
    -h, --help      Print this help

EXAMPLE:
    printf '%s\\n' '{\"type\":\"prompt\",\"text\":\"hi\"}' | runcore drive

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
runcore demo — a scripted session, no network needed

USAGE:
    runcore demo [--json]

Runs two runs on one thread against the in-memory store: parallel tools answered out of order
with steering queued meanwhile, a follow-up, a gated tool approved and another denied, a stale
resume rejected, a crash after a commit and recovery from the store, a fenced post-terminal
commit and paged audit events, then a summary.

OPTIONS:
    --json       Print the session as the driver's output lines instead of a timeline
    -h, --help   Print this help
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let wants_help = args.iter().any(|a| a == "-h" || a == "--help");
    match args.first().map(String::as_str) {
        None | Some("help") | Some("-h") | Some("--help") => {
            let topic = args.get(1).map(String::as_str);
            write_stdout(match topic {
                Some("drive") => DRIVE_HELP,
                Some("schema") => SCHEMA_HELP,
                Some("demo") => DEMO_HELP,
                _ => HELP,
            })
        }
        Some("drive") if wants_help => print_ok(DRIVE_HELP),
        Some("schema") if wants_help => print_ok(SCHEMA_HELP),
        Some("demo") if wants_help => print_ok(DEMO_HELP),
        Some("drive") => drive(&args[1..]),
        Some("schema") => {
            let schema = match (args.get(1).map(String::as_str), args.len()) {
                (None, _) => json_schema(),
                (Some("input"), 2) => input_line_schema(),
                (Some("output"), 2) => output_line_schema(),
                _ => return usage_error("schema takes at most one argument: input or output"),
            };
            let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
            text.push('\n');
            write_stdout(&text)
        }
        Some("demo") => match args.get(1).map(String::as_str) {
            None => demo::run(false),
            Some("--json") if args.len() == 2 => demo::run(true),
            Some(other) => usage_error(&format!("unknown demo option {other:?}")),
        },
        Some(other) => usage_error(&format!("unknown command {other:?}")),
    }
}

fn print_ok(text: &str) -> ExitCode {
    write_stdout(text)
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

fn usage_error(message: &str) -> ExitCode {
    eprintln!("runcore: {message}\n\n{HELP}");
    ExitCode::from(2)
}

fn drive(args: &[String]) -> ExitCode {
    let mut driver = Driver::new();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match args {
        [] => {}
        [flag, path] if flag == "--config" => {
            let text = match std::fs::read(path) {
                Ok(text) => text,
                Err(e) => {
                    eprintln!("runcore drive: cannot read --config {path:?}: {e}");
                    return ExitCode::from(2);
                }
            };
            // The file configures the driver before input line 1: it is not an input line
            // itself, so stdin's first line is still line 1 (SPEC §12 numbers input lines).
            let config = match serde_json::from_slice::<serde_json::Value>(&text) {
                Ok(serde_json::Value::Object(mut object)) => {
                    object.insert("type".into(), serde_json::Value::from("config"));
                    serde_json::from_value::<InputLine>(serde_json::Value::Object(object))
                        .map_err(|e| e.to_string())
                }
                _ => Err("it must hold one JSON object".to_owned()),
            };
            if let Err(e) = config.and_then(|line| driver.apply(line).map_err(|e| e.to_string())) {
                eprintln!("runcore drive: --config {path:?} was rejected: {e}");
                return ExitCode::from(2);
            }
        }
        _ => return usage_error("drive takes only --config FILE"),
    }
    let stdin = io::stdin();
    let mut reader = BufReader::with_capacity(1 << 16, stdin.lock());
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match read_line_capped(&mut reader, &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("runcore drive: reading stdin failed: {e}");
                return ExitCode::FAILURE;
            }
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        let mut write_error = None;
        driver.handle_line_into(&buf, &mut |line| {
            if write_error.is_none()
                && let Err(e) = writeln!(out, "{line}")
            {
                write_error = Some(e);
            }
        });
        if write_error.is_none()
            && let Err(e) = out.flush()
        {
            write_error = Some(e);
        }
        if let Some(e) = write_error {
            if e.kind() == io::ErrorKind::BrokenPipe {
                return ExitCode::SUCCESS;
            }
            eprintln!("runcore drive: writing stdout failed: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// Reads one line (through `\n`) into `buf`, keeping at most `MAX_LINE_BYTES + 1` bytes of it
/// (the driver rejects longer lines) while still consuming the rest.
fn read_line_capped(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut total = 0usize;
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let room = (MAX_LINE_BYTES + 1).saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if done && buf.last() != Some(&b'\n') && chunk.len() > room {
            // The line was cut: keep the newline so the caller strips it consistently.
            buf.push(b'\n');
        }
        let used = chunk.len();
        total += used;
        reader.consume(used);
        if done {
            return Ok(total);
        }
    }
}
