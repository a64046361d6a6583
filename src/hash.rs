//! The contract's hash (SPEC §7.1): SHA-256, as 64 lowercase hex digits, of canonical JSON
//! ([`crate::canonical`]). Payload hashes of commits and the chained transcript digest are
//! both this function; `sha2` computes it (see `Cargo.toml` for why it earns its place).

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::canonical::write_canonical_json;

/// SHA-256 of `data`, as 64 lowercase hex digits.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// SHA-256 of `prefix` followed by `data`, as 64 lowercase hex digits (no concatenated copy).
pub(crate) fn sha256_hex_of_parts(prefix: &[u8], data: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prefix);
    hasher.update(data);
    hex(&hasher.finalize())
}

/// The contract's hash of `value`: SHA-256 of its canonical JSON, written into `scratch`
/// (cleared first; a caller that hashes many values reuses one buffer).
pub(crate) fn hash_canonical<T: Serialize + ?Sized>(
    value: &T,
    scratch: &mut Vec<u8>,
) -> Result<String, serde_json::Error> {
    scratch.clear();
    write_canonical_json(value, scratch)?;
    Ok(sha256_hex(scratch))
}

fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(digest.len() * 2);
    for &byte in digest {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_standard_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        let million_a = vec![b'a'; 1_000_000];
        assert_eq!(
            sha256_hex(&million_a),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    #[test]
    fn parts_hash_as_their_concatenation() {
        assert_eq!(sha256_hex_of_parts(b"ab", b"c"), sha256_hex(b"abc"));
        assert_eq!(sha256_hex_of_parts(b"", b""), sha256_hex(b""));
    }
}
