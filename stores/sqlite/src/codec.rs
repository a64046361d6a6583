//! Conversions between the core's types and SQLite columns: JSON text, and counters that
//! SQLite keeps as signed 64-bit integers.

use runcore::{CommitError, StoreError};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The next value of a counter, or `CounterOverflow` when it would pass what SQLite can
/// store (`i64::MAX`; the core's counters are `u64`, so this is the tighter bound).
pub(crate) fn next(current: u64, by: u64, counter: &str) -> Result<u64, CommitError> {
    current
        .checked_add(by)
        .filter(|n| i64::try_from(*n).is_ok())
        .ok_or_else(|| CommitError::CounterOverflow {
            counter: counter.to_owned(),
        })
}

/// A counter as a column value (callers passed it through [`next`], or read it from a
/// column, so it fits).
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A limit or `from` bound as a column value: anything past `i64::MAX` means "no bound".
pub(crate) fn bound(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A page size as a SQL `LIMIT`.
pub(crate) fn limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// A counter read from a column; a negative one means the file was not written by us.
pub(crate) fn count(value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| {
        StoreError::unavailable(format!("the store holds a negative {what} ({value})"))
    })
}

/// A value as JSON text.
pub(crate) fn encode<T: Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::backend(format!("cannot write {what} as JSON: {e}"), e))
}

/// JSON text read back; text that does not read means the file was damaged or written by
/// something else.
pub(crate) fn decode<T: DeserializeOwned>(
    text: &str,
    what: impl FnOnce() -> String,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| {
        StoreError::backend(
            format!("the store holds {} that does not read back: {e}", what()),
            e,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_stop_at_what_sqlite_stores() {
        assert_eq!(next(1, 2, "x"), Ok(3));
        assert_eq!(
            next(i64::MAX as u64, 1, "commit sequence"),
            Err(CommitError::CounterOverflow {
                counter: "commit sequence".into()
            })
        );
        assert!(next(u64::MAX, 1, "x").is_err());
        assert_eq!(bound(u64::MAX), i64::MAX);
        assert_eq!(limit(usize::MAX), i64::MAX);
        assert!(count(-1, "version").is_err());
    }
}
