//! Identifiers (SPEC §1).
//!
//! Ids are plain strings wrapped in distinct types so a run id can never be passed where a
//! thread id is expected. An id may be empty as a *value* (so that a malformed commit can be
//! deserialized and then rejected with a clear error), but every place that requires an id
//! rejects the empty string: [`ThreadCommit::validate`](crate::ThreadCommit::validate), the
//! agent's inputs and its configuration.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Whether `text` is empty or only whitespace (`text.trim().is_empty()`), decided by its
/// first byte when that is ASCII and not whitespace (every id, name and text the hot paths
/// check), without `trim`'s walk over characters from both ends.
#[inline]
pub(crate) fn is_blank(text: &str) -> bool {
    match text.as_bytes().first() {
        None => true,
        // `char::is_whitespace` in ASCII: tab, line feed, vertical tab, form feed, carriage
        // return and space.
        Some(&byte) if byte.is_ascii() && !matches!(byte, b'\t'..=b'\r' | b' ') => false,
        Some(_) => text.trim().is_empty(),
    }
}

macro_rules! string_id {
    ($description:literal, $name:ident) => {
        #[doc = $description]
        ///
        /// The string is shared: cloning an id (the agent does so for every event it emits)
        /// does not copy it.
        #[derive(Debug, Clone, Eq, PartialOrd, Ord, Default)]
        pub struct $name(Arc<str>);

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                // As the string hashes, consistent with `Eq`.
                self.0.hash(state);
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                // Clones share their string, so most comparisons end at the pointer.
                Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }

        impl $name {
            /// Wraps a string as this id type. Emptiness is checked where the id is used.
            pub fn new(id: impl Into<String>) -> Self {
                Self(Arc::from(id.into()))
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// True when the id is empty or only whitespace, which no required id may be.
            pub fn is_blank(&self) -> bool {
                $crate::ids::is_blank(&self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(Arc::from(id))
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(Arc::from(id))
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                String::deserialize(deserializer).map(Self::from)
            }
        }

        #[cfg(feature = "schema")]
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }

            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                let mut schema = String::json_schema(generator);
                schema.insert("description".into(), $description.into());
                schema
            }
        }
    };
}

string_id!(
    "The identity of a conversation. Never use a run id in its place.",
    ThreadId
);
string_id!(
    "One bounded execution on a thread; unique across all threads.\n\nWhen the host supplies none, the agent mints `\"{thread_id}/run-{n}\"` with `n` counting\nfrom 1 per agent.",
    RunId
);
string_id!("A tool call id exactly as the model produced it.", CallId);
string_id!(
    "The name of a tool, as the model called it and the catalog lists it.",
    ToolName
);

/// Step numbers count model calls within a run, from 1.
pub type Step = u32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_serialize_as_bare_strings() {
        let id = RunId::new("t/run-1");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"t/run-1\"");
        let back: RunId = serde_json::from_str("\"t/run-1\"").unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn blank_ids_are_detected() {
        assert!(ThreadId::new("").is_blank());
        for text in [
            "",
            " ",
            "\t\n\x0b\x0c\r ",
            "\u{a0}\u{3000}",
            "x",
            " x",
            "\u{e9}",
            "\u{a0}x",
            "\x1f",
        ] {
            assert_eq!(is_blank(text), text.trim().is_empty(), "{text:?}");
        }
        assert!(CallId::new("  ").is_blank());
        assert!(!CallId::new("c1").is_blank());
    }
}
