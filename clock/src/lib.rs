//! `runcore-clock`: the host's side of time and identity, in the one place every host (the
//! `runcore` binary, the console, the Python and Node packages, the Restate worker, the SQLite
//! store) takes them from.
//!
//! The core never reads a clock or a process id (SPEC §0): every host operation takes `now_ms`
//! and a claim owner as arguments. What a host passes is decided here:
//!
//! - [`wall_clock_ms`]: the machine's wall clock in Unix-epoch milliseconds — the time of
//!   claims and deadlines for every host sharing a store (SPEC §7.3), and a SQLite store's time
//!   when a caller gives none;
//! - [`default_owner`]: this process start's claim owner, unique per start (SPEC §7.2);
//! - [`request_id`]: a claim request id unique to this process start and to what asks.
//!
//! ```
//! let owner = runcore_clock::default_owner();
//! assert_eq!(owner.split(':').count(), 3);
//! assert!(runcore_clock::request_id("sweep").starts_with("sweep."));
//! assert!(runcore_clock::wall_clock_ms() > 1_600_000_000_000);
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::time::{SystemTime, UNIX_EPOCH};

/// The machine's wall clock in Unix-epoch milliseconds (0 if the clock is before 1970, the
/// largest value if it is past what fits).
pub fn wall_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// This process start's default claim owner (SPEC §7.2: unique per process start): the host
/// name, the pid and the start time, `host:pid:ms`.
pub fn default_owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "host".to_owned());
    format!(
        "{}:{}:{}",
        host.replace(':', "_"),
        std::process::id(),
        wall_clock_ms()
    )
}

/// A claim request id unique to this process start and to `what` asks (`drive`, `sweep`,
/// `approve`): `what.pid.ms`. A restarted process never reuses its predecessor's, so it never
/// inherits a live claim by retrying a request it did not make (SPEC §7.2).
pub fn request_id(what: &str) -> String {
    format!("{what}.{}.{}", std::process::id(), wall_clock_ms())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_names_this_process_and_a_request_id_what_asks() {
        let owner = default_owner();
        let parts: Vec<&str> = owner.split(':').collect();
        assert_eq!(parts.len(), 3, "{owner}");
        assert_eq!(parts[1], std::process::id().to_string());
        assert!(parts[2].parse::<u64>().unwrap() > 0);
        let id = request_id("approve");
        let parts: Vec<&str> = id.split('.').collect();
        assert_eq!(parts[..2], ["approve", &std::process::id().to_string()][..]);
    }

    #[test]
    fn the_clock_moves_forward() {
        let a = wall_clock_ms();
        let b = wall_clock_ms();
        assert!(b >= a && a > 1_600_000_000_000);
    }
}
