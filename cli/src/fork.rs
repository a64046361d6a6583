//! `runcore fork THREAD --at VERSION --to NEW_THREAD --store URL` (SPEC §8.10, §12.6): a thin
//! I/O shell over [`runcore::host::fork_thread`].
//!
//! Output: one JSON line `{"thread_id","version","forked_from":{"thread_id","version"}}`.
//! Exit status: 0 forked; 1 refused (the §10 error as one JSON line on stderr, nothing
//! written); 2 a usage error or a bad `--store` (a store that does not exist is not created);
//! 3 the store failed or refused the commit.

use std::process::ExitCode;

use runcore::ThreadId;
use runcore::host::ForkError;

use crate::args::ForkArgs;
use crate::store::{self, Access, StoreUrl};
use runcore_clock::wall_clock_ms;

/// Exit status when the fork is refused.
const EXIT_REFUSED: u8 = 1;

/// `runcore fork`.
pub fn main(args: ForkArgs) -> ExitCode {
    let url = match StoreUrl::parse(&args.store) {
        Ok(url) => url,
        Err(message) => return crate::start_error("fork", &message),
    };
    // Read access: only an existing store is opened; nothing is created by a fork from it.
    let mut backend = match store::open(&url, Access::Read) {
        Ok(backend) => backend,
        Err(message) => return crate::start_error("fork", &message),
    };
    let parent = ThreadId::new(args.thread);
    let new_thread = ThreadId::new(args.to);
    match runcore::host::fork_thread(
        backend.as_mut(),
        &parent,
        args.at,
        &new_thread,
        wall_clock_ms(),
    ) {
        Ok(forked) => {
            let mut line = crate::inspect::json_line(&forked);
            line.push('\n');
            crate::write_stdout(&line)
        }
        Err(error) => {
            eprintln!("{}", crate::inspect::json_line(&error.body()));
            match error {
                ForkError::Invalid(_) => ExitCode::from(EXIT_REFUSED),
                _ => ExitCode::from(crate::drive::EXIT_STORE),
            }
        }
    }
}
