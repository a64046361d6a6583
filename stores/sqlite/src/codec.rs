//! Conversions between the core's types and SQLite columns: JSON text, and counters that
//! SQLite keeps as signed 64-bit integers.

use runcore::store::StoreError;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A counter as a column value (admission kept it within `i64::MAX`, or it was read from a
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
    // Exact: a message's `meta` keeps an integer beyond 64 bits (SPEC §2.1).
    runcore::from_json_exact(text).map_err(|e| {
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
    fn column_values_stop_at_what_sqlite_stores() {
        assert_eq!(bound(u64::MAX), i64::MAX);
        assert_eq!(limit(usize::MAX), i64::MAX);
        assert!(count(-1, "version").is_err());
    }
}
