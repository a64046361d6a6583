//! `runcore approve RUN` and `runcore deny RUN` (SPEC §12.5): a person answers a run's
//! current permission ticket from the command line, through the core's
//! [`answer_permission`](runcore::answer_permission) (the same function the console calls).
//!
//! Output: one JSON line `{"thread_id","version"}` (the thread's version after the answer's
//! commit). Exit status: 0 answered; 1 the run does not await a permission (the §10 error as
//! one JSON line on stderr: `resume` with `not_waiting`, `expired`, `result_kind_mismatch`…);
//! 2 a usage error or a bad `--store`; 3 the store failed, or another writer moved the thread
//! on first (fenced: nothing written). (4, a thread another owner holds live, comes with
//! thread claims.)

use std::process::ExitCode;

use runcore::{AnswerError, PermissionDecision, RunId};

use crate::args::{Args, Spec};
use crate::store::{self, Access, StoreUrl, wall_clock_ms};

/// `runcore approve --help`.
pub const APPROVE_HELP: &str = "\
runcore approve — approve the tool call a run waits for

USAGE:
    runcore approve RUN --store URL [--note TEXT]

Answers RUN's current permission ticket with allow (and the note, for the audit trail): one
commit, fenced, exactly as a host's resume_ticket line would make it. The run is then Running
with its call ready; the next worker on the thread (a `runcore drive --store` restart, a fleet
worker) executes it. Prints one JSON line: {\"thread_id\",\"version\"}.

EXIT STATUS:
    0 answered; 1 the run does not await a permission (the error as one JSON line on stderr,
    e.g. {\"kind\":\"resume\",\"resume_error\":\"not_waiting\",...} or \"expired\"); 2 a usage
    error or a bad --store; 3 the store failed, or another writer moved the thread on first
    (nothing was written)
";

/// `runcore deny --help`.
pub const DENY_HELP: &str = "\
runcore deny — deny the tool call a run waits for

USAGE:
    runcore deny RUN --store URL [--reason TEXT]

Answers RUN's current permission ticket with deny (and the reason, which the model sees in
the call's denied result): one commit, fenced. The next worker on the thread pairs the denied
result and the run goes on. Prints one JSON line: {\"thread_id\",\"version\"}.

EXIT STATUS: as `runcore approve`.
";

/// Exit status when the run does not await a permission.
const EXIT_REFUSED: u8 = 1;

/// `approve` (allow) or `deny`.
pub fn main(command: &'static str, args: &[String]) -> ExitCode {
    let text_flag = if command == "approve" {
        "--note"
    } else {
        "--reason"
    };
    let values: &'static [&'static str] = if command == "approve" {
        &["--store", "--note"]
    } else {
        &["--store", "--reason"]
    };
    let spec = Spec {
        command,
        values,
        switches: &[],
        max_positional: 1,
    };
    let args = match Args::parse(args, &spec) {
        Ok(args) => args,
        Err(message) => return crate::usage_error(&message),
    };
    let run = match args.positional.first() {
        Some(run) if !run.is_empty() => RunId::new(run.as_str()),
        _ => return crate::usage_error(&format!("{command} needs a RUN")),
    };
    let Some(url) = args.value("--store") else {
        return crate::usage_error(&format!("{command} needs --store URL"));
    };
    let text = args
        .value(text_flag)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    let decision = if command == "approve" {
        PermissionDecision::Allow { note: text }
    } else {
        PermissionDecision::Deny { reason: text }
    };
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
    let mut claim = runcore::driver::ClaimOptions::new(runcore_store_url::default_owner(), 30_000);
    claim.request_id = format!("{command}.{}.{now_ms}", std::process::id());
    match runcore::answer_permission(backend.as_mut(), &run, decision, &claim, now_ms) {
        Ok(answered) => {
            let mut line = serde_json::to_string(&answered).unwrap_or_default();
            line.push('\n');
            crate::write_stdout(&line)
        }
        Err(error) => {
            eprintln!(
                "{}",
                serde_json::to_string(&error.body()).unwrap_or_default()
            );
            match error {
                AnswerError::Refused(_) => ExitCode::from(EXIT_REFUSED),
                AnswerError::Held { .. } => ExitCode::from(crate::drive::EXIT_CLAIM_HELD),
                _ => ExitCode::from(crate::drive::EXIT_STORE),
            }
        }
    }
}
