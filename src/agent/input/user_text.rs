//! A user message written as a string when it is one plain text block, else as the message
//! object; read from either (the object's `role`, if given, `"user"`).

#[cfg(feature = "schema")]
use schemars::{Schema, SchemaGenerator, json_schema};
use serde::de::Error;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::message::{ContentBlock, UserMessage};

const EXPECTING: &str = "a string or a user message {\"content\":[…],\"id\"?,\"role\"?:\"user\"}";

#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "a string or a user message {\"content\":[…],\"id\"?,\"role\"?:\"user\"}"
)]
enum Repr {
    Text(String),
    Message(Map<String, Value>),
}

pub(super) fn serialize<S: Serializer>(
    message: &UserMessage,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match (message.content.as_slice(), &message.id) {
        // The shorthand only when it says it all: no id, no meta.
        ([ContentBlock::Text { text }], None) if message.meta.is_empty() => {
            serializer.serialize_str(text)
        }
        _ => message.serialize(serializer),
    }
}

pub(super) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<UserMessage, D::Error> {
    match Repr::deserialize(deserializer)? {
        Repr::Text(text) => Ok(UserMessage::text(text)),
        Repr::Message(mut object) => {
            super::take_user_role(&mut object).map_err(D::Error::custom)?;
            serde_json::from_value(Value::Object(object)).map_err(|_| D::Error::custom(EXPECTING))
        }
    }
}

/// `prompt.messages`: user message objects, each `role` (if given) `"user"`.
pub(super) fn messages<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<UserMessage>, D::Error> {
    Vec::<Value>::deserialize(deserializer)?
        .into_iter()
        .enumerate()
        .map(|(index, message)| match message {
            Value::Object(object) => super::user_message_from_object(object)
                .map_err(|e| D::Error::custom(format!("messages[{index}]: {e}"))),
            other => Err(D::Error::custom(format!(
                "messages[{index}]: expected a user message object, got {}",
                crate::error::json_kind(&other)
            ))),
        })
        .collect()
}

/// A user message as an input reads it: its schema with the optional `"role": "user"`.
#[cfg(feature = "schema")]
struct UserMessageInput;

#[cfg(feature = "schema")]
impl schemars::JsonSchema for UserMessageInput {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "UserMessageInput".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = <UserMessage as schemars::JsonSchema>::json_schema(generator);
        let object = schema.ensure_object();
        object.insert(
            "description".into(),
            Value::from("A user message as an input reads it: `role` absent or \"user\"."),
        );
        if let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) {
            properties.insert("role".into(), serde_json::json!({ "const": "user" }));
        }
        schema
    }
}

/// A reference to [`UserMessageInput`]'s schema.
#[cfg(feature = "schema")]
pub(super) fn message_schema(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<UserMessageInput>()
}

#[cfg(feature = "schema")]
pub(super) fn schema(generator: &mut SchemaGenerator) -> Schema {
    let message = message_schema(generator);
    json_schema!({
        "description": "The text (one text block), or a user message object.",
        "anyOf": [{"type": "string"}, message],
    })
}

#[cfg(feature = "schema")]
pub(super) fn messages_schema(generator: &mut SchemaGenerator) -> Schema {
    let message = message_schema(generator);
    json_schema!({
        "description": "Several user messages, in order.",
        "type": "array",
        "items": message,
    })
}

/// The same for an optional field (`prompt`'s `text`, absent when `messages` is given).
pub(super) mod option {
    use serde::{Deserializer, Serializer};

    use crate::message::UserMessage;

    pub(in super::super) fn serialize<S: Serializer>(
        message: &Option<UserMessage>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match message {
            Some(message) => super::serialize(message, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<UserMessage>, D::Error> {
        super::deserialize(deserializer).map(Some)
    }
}
