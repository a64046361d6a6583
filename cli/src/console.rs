//! `runcore console --store URL [--listen ADDR] [--allow-remote]` (SPEC §12.5): the operator
//! console, served by the `runcore-console` crate over the opened store.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use runcore_console::{ConsoleError, ConsoleOptions, DEFAULT_LISTEN};

use crate::args::{Args, Spec};
use crate::store::{self, Access, StoreUrl};

/// `runcore console --help`.
pub const CONSOLE_HELP: &str = "\
runcore console — a web page where a person looks into a store and answers approvals

USAGE:
    runcore console --store URL [--listen ADDR] [--allow-remote]

Serves pages for the threads (version, latest run, state), one thread's transcript (roles,
tool calls beside their results and outcomes, runs and end causes, where the model context
starts), the pending approvals with Approve and Deny, and the audit events, paged; each page
refreshes while it is open. The JSON API the pages use: GET /api/threads,
/api/threads/{thread_id}, /api/pending, /api/events?thread=&run=&from=&limit=, and
POST /api/runs/{run_id}/decision with {\"decision\":\"allow\",\"note\"?} or
{\"decision\":\"deny\",\"reason\"?} (ids in paths are one percent-encoded segment).

At start it prints one line, `console: http://HOST:PORT/ token: TOKEN`, and serves until
SIGINT or SIGTERM. Every request that changes something needs the token (a fresh random one
per start): `Authorization: Bearer TOKEN`, or the page's token box (open
http://HOST:PORT/#token=TOKEN to fill it). Reads do not.

OPTIONS:
    --store URL       sqlite:PATH or postgres://… (it must exist; nothing is created)
    --listen ADDR     IP:PORT to listen on (default 127.0.0.1:8420; port 0 takes a free one)
    --allow-remote    Allow an address other than loopback (other machines could reach it)
    -h, --help        Print this help
";

/// `runcore console`.
pub fn main(args: &[String]) -> ExitCode {
    let spec = Spec {
        command: "console",
        values: &["--store", "--listen"],
        switches: &["--allow-remote"],
        max_positional: 0,
    };
    let args = match Args::parse(args, &spec) {
        Ok(args) => args,
        Err(message) => return crate::usage_error(&message),
    };
    let Some(raw_url) = args.value("--store") else {
        return crate::usage_error("console needs --store URL");
    };
    let listen = args.value("--listen").unwrap_or(DEFAULT_LISTEN);
    let Ok(listen) = listen.parse::<SocketAddr>() else {
        return crate::usage_error(&format!(
            "console --listen takes IP:PORT (e.g. 127.0.0.1:8420), not {listen:?}"
        ));
    };
    let options = ConsoleOptions {
        listen,
        allow_remote: args.has("--allow-remote"),
    };
    // Refuse a remote address before the store is opened.
    if let Err(error) = runcore_console::check_listen(options.listen, options.allow_remote) {
        return crate::start_error("console", &error.to_string());
    }
    let url = match StoreUrl::parse(raw_url) {
        Ok(url) => url,
        Err(message) => return crate::start_error("console", &message),
    };
    let backend = match store::open(&url, Access::Read) {
        Ok(backend) => backend,
        Err(message) => return crate::start_error("console", &message),
    };
    let announce = |line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    };
    match runcore_console::serve(backend, raw_url, &options, announce) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error @ (ConsoleError::Bind { .. } | ConsoleError::NotLoopback(_))) => {
            crate::start_error("console", &error.to_string())
        }
        Err(error) => {
            eprintln!("runcore console: {error}");
            ExitCode::FAILURE
        }
    }
}
