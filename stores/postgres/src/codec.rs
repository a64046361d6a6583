//! Turning the core's values into column values and back, and database errors into
//! [`StoreError`]s. Nothing read from the database is trusted: a row that does not decode is a
//! [`StoreError::Unavailable`] that names what was being read, never a panic.

use postgres::Row;
use postgres::types::FromSql;
use runcore::store::StoreError;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A database failure while doing `what`, with the driver's error as the source.
pub(crate) fn db_error(what: &str, error: postgres::Error) -> StoreError {
    StoreError::backend(format!("{what}: {error}"), error)
}

/// The core's value as the JSON text stored for it.
pub(crate) fn to_json<T: Serialize>(what: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::backend(format!("encode {what} as JSON: {e}"), e))
}

/// A stored JSON text read back as the core's value.
pub(crate) fn from_json<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, StoreError> {
    // Exact: a message's `meta` keeps an integer beyond 64 bits (SPEC §2.1).
    runcore::from_json_exact(text).map_err(|e| {
        StoreError::backend(
            format!("the stored {what} is not valid runcore JSON: {e}"),
            e,
        )
    })
}

/// Column `index` of `row`, typed; a wrong type or a NULL where none may be is an error that
/// names the column.
pub(crate) fn column<'a, T: FromSql<'a>>(
    row: &'a Row,
    index: usize,
    what: &str,
) -> Result<T, StoreError> {
    row.try_get(index)
        .map_err(|e| db_error(&format!("read column {index} ({what})"), e))
}

/// A stored `bytea` id or kind read back as the string it was written from.
pub(crate) fn text_of(what: &str, bytes: Vec<u8>) -> Result<String, StoreError> {
    String::from_utf8(bytes)
        .map_err(|e| StoreError::backend(format!("the stored {what} is not UTF-8"), e))
}

/// A stored count or sequence (never negative) as the core's `u64`.
pub(crate) fn count(what: &str, value: i64) -> Result<u64, StoreError> {
    u64::try_from(value)
        .map_err(|e| StoreError::backend(format!("the stored {what} is negative ({value})"), e))
}

/// A `u64` from the caller as a `bigint` bound, or `None` when it is beyond every stored
/// value (`bigint` holds at most `i64::MAX`).
pub(crate) fn bound(value: u64) -> Option<i64> {
    i64::try_from(value).ok()
}

/// A page size as a `LIMIT` (a `usize` beyond `i64::MAX` means "all").
pub(crate) fn limit(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// `name` quoted as an SQL identifier (`"` doubled), so any schema name is taken literally.
pub(crate) fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A 64-bit advisory-lock key for `bytes` (FNV-1a): the same in every process and every
/// build, which `std`'s hasher does not promise, so processes built apart still meet on one
/// lock.
pub(crate) fn stable_key(bytes: &[u8]) -> i64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = bytes
        .iter()
        .fold(OFFSET, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(PRIME));
    i64::from_ne_bytes(hash.to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_literally() {
        assert_eq!(quote_identifier("plain"), "\"plain\"");
        assert_eq!(quote_identifier("a\"; DROP"), "\"a\"\"; DROP\"");
    }

    #[test]
    fn stable_key_is_fnv1a() {
        // FNV-1a 64 test vectors: "" and "a".
        assert_eq!(stable_key(b"") as u64, 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_key(b"a") as u64, 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn out_of_range_values_are_bounded_not_wrapped() {
        assert_eq!(bound(u64::MAX), None);
        assert_eq!(bound(5), Some(5));
        assert_eq!(limit(usize::MAX), i64::MAX);
        assert!(count("x", -1).is_err());
    }
}
