//! The per-start write token: every request that changes something must carry it.

use crate::ConsoleError;

/// A secret made fresh at each start: 32 bytes from the operating system's random source,
/// as 64 lowercase hex digits.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// A fresh random token.
    pub fn generate() -> Result<Token, ConsoleError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| ConsoleError::Token(e.to_string()))?;
        let mut text = String::with_capacity(64);
        for byte in bytes {
            text.push_str(&format!("{byte:02x}"));
        }
        Ok(Token(text))
    }

    /// A token with a known value (tests).
    #[doc(hidden)]
    pub fn from_string(value: &str) -> Token {
        Token(value.to_owned())
    }

    /// The token's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token, in time that does not depend on where they differ.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_hex_and_match_only_themselves() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 64);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(""));
        assert!(!a.matches(&a.as_str()[1..]));
        assert_eq!(format!("{a:?}"), "Token(…)");
    }
}
