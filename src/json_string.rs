//! A JSON string written as serde_json writes it: the one string escaper that both the
//! canonical form (`canonical.rs`, the hash of SPEC §7.1) and a `meta`'s exact text
//! (`message/meta.rs`, SPEC §2.1) write with. A module of its own so that neither of them
//! imports the other for it.

/// `text` as a JSON string, escaped exactly as serde_json escapes it (`\"`, `\\`, the short
/// escapes `\b \f \n \r \t`, and `\u00XX` with lowercase hex for other control characters),
/// copying the runs between escapes whole. Plain text is checked 64 bytes at a time, in vector
/// registers, and copied in one piece.
pub(crate) fn write_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Short strings (keys, kinds, ids) are checked byte by byte, which is quicker for them.
    if bytes.len() <= 24 && bytes.iter().all(|&byte| plain(byte)) {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let mut run = 0;
    let mut at = 0;
    for chunk in bytes.chunks(64) {
        // No early exit, so the check runs over whole vector registers.
        if chunk
            .iter()
            .fold(false, |dirty, &byte| dirty | !plain(byte))
        {
            for (offset, &byte) in chunk.iter().enumerate() {
                if !plain(byte) {
                    escape_byte(out, bytes, &mut run, at + offset, byte);
                }
            }
        }
        at += chunk.len();
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// Whether `byte` goes into a JSON string as it is.
#[inline]
fn plain(byte: u8) -> bool {
    // Bitwise, not short-circuit: no branch, so a loop over bytes vectorizes.
    !((byte < 0x20) | (byte == b'"') | (byte == b'\\'))
}

/// Writes the run of plain bytes before `at`, then the escape of `byte` (at `at` in `bytes`).
#[cold]
fn escape_byte(out: &mut Vec<u8>, bytes: &[u8], run: &mut usize, at: usize, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(&bytes[*run..at]);
    *run = at + 1;
    match byte {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0c => out.extend_from_slice(b"\\f"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        control => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(control >> 4)],
            HEX[usize::from(control & 0x0f)],
        ]),
    }
}
