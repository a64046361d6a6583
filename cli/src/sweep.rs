//! `runcore sweep` and `runcore due` (SPEC §12.4): due work with no process holding the
//! thread. The sweep itself is the library's ([`runcore::host::sweep`]); this file opens the
//! store, reads the wall clock, and prints one JSON line per item.

use std::process::ExitCode;

use runcore::host::{ClaimOptions, SweepOptions, sweep};
use runcore::store::DueReason;
use runcore::{AgentConfig, RecoveryPolicy};
use serde_json::json;

use crate::write_stdout;
use runcore_clock::wall_clock_ms;

/// The lease a sweeper takes on each item it handles: long enough for one recovery and commit.
pub const SWEEP_LEASE_MS: u64 = 30_000;

/// The default number of items one sweep handles.
pub const DEFAULT_LIMIT: u64 = 1_000;

/// `runcore sweep`: handles due work once; one JSON line per item; exit 0.
pub fn sweep_command(
    store: &mut runcore_store_url::Backend,
    owner: String,
    limit: u64,
    policy: RecoveryPolicy,
) -> ExitCode {
    let mut claim = ClaimOptions::new(owner, SWEEP_LEASE_MS);
    claim.request_id = runcore_clock::request_id("sweep");
    let options = SweepOptions {
        claim,
        limit: usize::try_from(limit).unwrap_or(usize::MAX),
        policy,
        config: AgentConfig::default(),
    };
    match sweep(store.as_mut(), &options, wall_clock_ms()) {
        Ok(items) => write_stdout(&crate::inspect::json_lines(&items)),
        Err(error) => {
            eprintln!("runcore sweep: cannot list due work: {error}");
            ExitCode::from(3)
        }
    }
}

/// `runcore due`: lists due work without acting, in due order.
pub fn due_command(store: &runcore_store_url::Backend, limit: u64, as_json: bool) -> ExitCode {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let items = match store.due_work(wall_clock_ms(), limit) {
        Ok(items) => items,
        Err(error) => {
            eprintln!("runcore due: cannot list due work: {error}");
            return ExitCode::from(3);
        }
    };
    let mut text = String::new();
    if as_json {
        for item in &items {
            text.push_str(
                &json!({"thread_id": item.thread_id, "run_id": item.run_id, "reason": item.reason})
                    .to_string(),
            );
            text.push('\n');
        }
    } else if items.is_empty() {
        text.push_str("nothing is due\n");
    } else {
        for item in &items {
            let why = match &item.reason {
                DueReason::Deadline { deadline_ms } => format!("deadline passed at {deadline_ms}"),
                DueReason::Orphaned {
                    claim_expired_at_ms,
                } => format!("orphaned: no live claim since {claim_expired_at_ms}"),
            };
            text.push_str(&format!("{}  {}  {why}\n", item.thread_id, item.run_id));
        }
    }
    write_stdout(&text)
}
