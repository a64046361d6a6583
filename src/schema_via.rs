//! Serde and JSON Schema through a private wire representation.
//!
//! Several public enums keep the SPEC's Rust shape (`RunState::Ended(EndCause)`,
//! `EndCause::Stopped(String)`, `RunDisposition::Awaiting(Box<ResumeTicket>)`) while their JSON
//! is an internally tagged object (`{"type":"ended","cause":…}`). Serde cannot tag a tuple
//! variant that holds a string, so each such type converts to and from a private `*Repr` enum
//! that has the wire shape; this macro makes the JSON Schema follow the same repr, so the schema
//! always describes exactly what is written.

/// Implements `JsonSchema` for `$public` by describing `$repr` (with the `schema` feature;
/// without it, nothing).
macro_rules! schema_via_repr {
    ($public:ty => $repr:ty, $name:literal) => {
        #[cfg(feature = "schema")]
        impl schemars::JsonSchema for $public {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed($name)
            }

            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                <$repr as schemars::JsonSchema>::json_schema(generator)
            }
        }
    };
}

pub(crate) use schema_via_repr;
