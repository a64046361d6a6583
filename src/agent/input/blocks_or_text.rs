//! Content blocks, or a string as shorthand for one text block (SPEC §12.1).

#[cfg(feature = "schema")]
use schemars::{Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::message::ContentBlock;

#[derive(Deserialize)]
#[serde(
    untagged,
    // Without this, serde says "data did not match any variant of untagged enum", which
    // names neither the field nor what it takes.
    expecting = "`content` must be a string or a list of content blocks \
                 ({\"type\":\"text\",\"text\"} or {\"type\":\"image\",\"data\",\"mime_type\"})"
)]
enum Repr {
    Blocks(Vec<ContentBlock>),
    Text(String),
}

pub(super) fn serialize<S: Serializer>(
    content: &[ContentBlock],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    content.serialize(serializer)
}

pub(super) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ContentBlock>, D::Error> {
    Ok(match Repr::deserialize(deserializer)? {
        Repr::Blocks(blocks) => blocks,
        Repr::Text(text) => vec![ContentBlock::text(text)],
    })
}

#[cfg(feature = "schema")]
pub(super) fn schema(generator: &mut SchemaGenerator) -> Schema {
    let blocks = generator.subschema_for::<Vec<ContentBlock>>();
    json_schema!({
        "description": "Content blocks, or a string (one text block).",
        "anyOf": [blocks, {"type": "string"}],
    })
}
