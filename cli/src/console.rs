//! `runcore console --store URL [--listen ADDR] [--allow-remote]` (SPEC §12.5): the operator
//! console, served by the `runcore-console` crate over the opened store.

use std::io::Write;
use std::process::ExitCode;

use runcore_console::{ConsoleError, ConsoleOptions};

use crate::args::ConsoleArgs;
use crate::store::{self, Access, StoreUrl};

/// `runcore console`.
pub fn main(args: ConsoleArgs) -> ExitCode {
    let raw_url = args.store.as_str();
    let options = ConsoleOptions {
        listen: args.listen,
        allow_remote: args.allow_remote,
    };
    // Refuse a remote address before the store is opened.
    if let Err(error) = runcore_console::check_listen(options.listen, options.allow_remote) {
        return crate::start_error("console", &error.to_string());
    }
    if options.allow_remote {
        eprintln!(
            "runcore console: warning: --allow-remote: the console listens on {} and other \
             machines may reach it over plain HTTP (not encrypted); every request, reads too, \
             needs the token",
            options.listen
        );
    }
    let url = match StoreUrl::parse(raw_url) {
        Ok(url) => url,
        Err(message) => return crate::start_error("console", &message),
    };
    let backend = match store::open(&url, Access::Read) {
        Ok(backend) => backend,
        Err(message) => return crate::start_error("console", &message),
    };
    // The SPEC's start line on stdout; the URL that opens the page with its token on stderr.
    let announce = |line: &str, url: &str| {
        eprintln!("runcore console: open {url}");
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
