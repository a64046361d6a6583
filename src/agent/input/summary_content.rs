//! A compaction summary (SPEC §8.9, §12.4): a string (one text block) or a list of content
//! blocks, as the SPEC writes it, or a user message object (to give it an `id`). Written as
//! the shortest of the three that says it all.

#[cfg(feature = "schema")]
use schemars::{Schema, SchemaGenerator, json_schema};
use serde::de::Error;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::message::{ContentBlock, UserMessage};

const EXPECTING: &str = "`summary` must be a string, a list of content blocks, or a user \
                         message {\"content\":[…],\"id\"?,\"role\"?:\"user\"}";

#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "`summary` must be a string, a list of content blocks, or a user message \
                 {\"content\":[…],\"id\"?,\"role\"?:\"user\"}"
)]
enum Repr {
    Text(String),
    Blocks(Vec<ContentBlock>),
    Message(Map<String, Value>),
}

pub(super) fn serialize<S: Serializer>(
    message: &UserMessage,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match (message.content.as_slice(), &message.id) {
        // The shorter forms only when they say it all: no id, no meta.
        ([ContentBlock::Text { text }], None) if message.meta.is_empty() => {
            serializer.serialize_str(text)
        }
        (blocks, None) if message.meta.is_empty() => blocks.serialize(serializer),
        _ => message.serialize(serializer),
    }
}

pub(super) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<UserMessage, D::Error> {
    Ok(match Repr::deserialize(deserializer)? {
        Repr::Text(text) => UserMessage::text(text),
        Repr::Blocks(content) => UserMessage {
            content,
            id: None,
            meta: crate::message::Meta::new(),
        },
        Repr::Message(mut object) => {
            super::take_user_role(&mut object).map_err(D::Error::custom)?;
            serde_json::from_value(Value::Object(object))
                .map_err(|_| D::Error::custom(EXPECTING))?
        }
    })
}

#[cfg(feature = "schema")]
pub(super) fn schema(generator: &mut SchemaGenerator) -> Schema {
    let blocks = generator.subschema_for::<Vec<ContentBlock>>();
    let message = super::user_text::message_schema(generator);
    json_schema!({
        "description": "The summary: a string (one text block), content blocks, or a user message object.",
        "anyOf": [{"type": "string"}, blocks, message],
    })
}
