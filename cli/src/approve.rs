//! `runcore approve RUN` and `runcore deny RUN` (SPEC §12.5): a person answers a run's
//! current permission ticket from the command line, through the core's
//! [`answer_permission`](runcore::host::answer_permission) (the same function the console calls).
//!
//! Output: one JSON line `{"thread_id","version"}` (the thread's version after the answer's
//! commit). Exit status: 0 answered; 1 the run does not await a permission (the §10 error as
//! one JSON line on stderr: `resume` with `not_waiting`, `expired`, `result_kind_mismatch`…);
//! 2 a usage error or a bad `--store`; 3 the store failed, or another writer moved the thread
//! on first (fenced: nothing written). (4, a thread another owner holds live, comes with
//! thread claims.)

use std::process::ExitCode;

use runcore::host::AnswerError;
use runcore::{PermissionDecision, RunId};

use crate::store::{self, Access, StoreUrl};
use runcore_clock::wall_clock_ms;

/// Exit status when the run does not await a permission.
const EXIT_REFUSED: u8 = 1;

/// The text of `--note` or `--reason`, trimmed; blank is none.
pub fn given(text: Option<String>) -> Option<String> {
    text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
}

/// `approve` (allow) or `deny` of `run`'s permission ticket in the store at `url`.
pub fn main(command: &str, run: &str, url: &str, decision: PermissionDecision) -> ExitCode {
    let run = RunId::new(run);
    let url = match StoreUrl::parse(url) {
        Ok(url) => url,
        Err(message) => return crate::start_error(command, &message),
    };
    // Read access: a store that does not exist has no run to answer, and nothing is created.
    let mut backend = match store::open(&url, Access::Read) {
        Ok(backend) => backend,
        Err(message) => return crate::start_error(command, &message),
    };
    let now_ms = wall_clock_ms();
    let mut claim = runcore::host::ClaimOptions::new(runcore_clock::default_owner(), 30_000);
    claim.request_id = format!("{command}.{}.{now_ms}", std::process::id());
    match runcore::host::answer_permission(backend.as_mut(), &run, decision, &claim, now_ms) {
        Ok(answered) => {
            let mut line = crate::inspect::json_line(&answered);
            line.push('\n');
            crate::write_stdout(&line)
        }
        Err(error) => {
            eprintln!("{}", crate::inspect::json_line(&error.body()));
            match error {
                AnswerError::Refused(_) => ExitCode::from(EXIT_REFUSED),
                AnswerError::Held { .. } => ExitCode::from(crate::drive::EXIT_CLAIM_HELD),
                _ => ExitCode::from(crate::drive::EXIT_STORE),
            }
        }
    }
}
