//! A `commit` output line read back into what a store applies: the one reading every binding's
//! `store.commit(output)` uses, so the check that the commit was not changed after the agent
//! emitted it is written once.

use serde_json::Value;

use crate::commit::{CommitOperation, ThreadCommit};

/// What a store applies for one `commit` output line.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreWrite {
    /// A fenced, idempotent commit (SPEC §7.1): the line carried `ordinal` and
    /// `expected_thread_version`.
    Fenced(CommitOperation),
    /// A plain commit: the line carried only its `commit`.
    Plain(ThreadCommit),
}

/// Why a value is not a `commit` output line a store can apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitLineError {
    /// The value is not a JSON object.
    #[error("commit() takes a commit output ({{\"type\": \"commit\", \"commit\": ...}})")]
    NotAnObject,
    /// The object has no string `type`.
    #[error("commit() takes a commit output ({{\"type\": \"commit\", \"commit\": ...}})")]
    NoType,
    /// The object is another kind of output line.
    #[error("commit() takes a commit output, got a {0:?} output")]
    OtherType(String),
    /// Its `commit` is missing or is not a valid commit.
    #[error("not a valid commit: {0}")]
    InvalidCommit(String),
    /// Its `payload_hash` is not the commit's own: the commit was changed after the agent
    /// emitted it.
    #[error(
        "the output's payload_hash {given} is not its commit's hash {computed}: the commit was \
         changed after the agent emitted it"
    )]
    HashMismatch {
        /// The hash the line carried.
        given: String,
        /// The hash of the commit it carried.
        computed: String,
    },
}

impl StoreWrite {
    /// Reads a `commit` output line (`{"type": "commit", "commit": …, "ordinal": …,
    /// "expected_thread_version": …, "payload_hash": …}`, as the driver writes it) back into
    /// what a store applies: fenced when it carries both operation fields, plain otherwise. A
    /// `payload_hash` that is not the commit's own is refused; a line without one is taken
    /// as it is.
    pub fn from_output_line(line: Value) -> Result<StoreWrite, CommitLineError> {
        let Value::Object(mut line) = line else {
            return Err(CommitLineError::NotAnObject);
        };
        match line.get("type") {
            Some(Value::String(kind)) if kind == "commit" => {}
            Some(Value::String(kind)) => return Err(CommitLineError::OtherType(kind.clone())),
            _ => return Err(CommitLineError::NoType),
        }
        let commit = line.remove("commit").unwrap_or_default();
        let commit: ThreadCommit = serde_json::from_value(commit)
            .map_err(|error| CommitLineError::InvalidCommit(error.to_string()))?;
        Self::from_parts(
            commit,
            line.get("ordinal"),
            line.get("expected_thread_version"),
            line.get("payload_hash"),
        )
    }

    /// [`from_output_line`](Self::from_output_line) from the line's JSON text, read exactly:
    /// a `meta` in the commit keeps its key order and integers beyond 64 bits (SPEC §2.1),
    /// which a `serde_json::Value` of the line has already lost. What a host that holds the
    /// line as text applies.
    pub fn from_output_text(text: &str) -> Result<StoreWrite, CommitLineError> {
        #[derive(serde::Deserialize)]
        struct Line {
            #[serde(rename = "type")]
            kind: Option<Value>,
            commit: Option<Box<serde_json::value::RawValue>>,
            ordinal: Option<Value>,
            expected_thread_version: Option<Value>,
            payload_hash: Option<Value>,
        }
        if !text.trim_start().starts_with('{') {
            return Err(CommitLineError::NotAnObject);
        }
        let line: Line = crate::message::from_json_exact(text)
            .map_err(|error| CommitLineError::InvalidCommit(error.to_string()))?;
        match line.kind {
            Some(Value::String(kind)) if kind == "commit" => {}
            Some(Value::String(kind)) => return Err(CommitLineError::OtherType(kind)),
            _ => return Err(CommitLineError::NoType),
        }
        let commit: ThreadCommit = match &line.commit {
            Some(commit) => crate::message::from_json_exact(commit.get()),
            None => serde_json::from_value(Value::Null),
        }
        .map_err(|error| CommitLineError::InvalidCommit(error.to_string()))?;
        Self::from_parts(
            commit,
            line.ordinal.as_ref(),
            line.expected_thread_version.as_ref(),
            line.payload_hash.as_ref(),
        )
    }

    fn from_parts(
        commit: ThreadCommit,
        ordinal: Option<&Value>,
        version: Option<&Value>,
        payload_hash: Option<&Value>,
    ) -> Result<StoreWrite, CommitLineError> {
        let (Some(ordinal), Some(version)) = (
            ordinal.and_then(Value::as_u64),
            version.and_then(Value::as_u64),
        ) else {
            return Ok(StoreWrite::Plain(commit));
        };
        let operation = CommitOperation::new(commit, ordinal, version);
        match payload_hash {
            Some(Value::String(given)) if *given != operation.payload_hash => {
                Err(CommitLineError::HashMismatch {
                    given: given.clone(),
                    computed: operation.payload_hash,
                })
            }
            _ => Ok(StoreWrite::Fenced(operation)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{Agent, AgentConfig, Output};
    use crate::driver::{ContextMode, SentContext, output_line};
    use crate::message::UserMessage;

    /// The commit lines of a prompt's first drain, as the driver writes them.
    fn commit_lines() -> Vec<Value> {
        let mut agent = Agent::new(AgentConfig::default()).unwrap();
        agent.prompt(UserMessage::text("hi"), 0).unwrap();
        let outputs = agent.drain();
        let mut sent = SentContext::default();
        outputs
            .iter()
            .filter(|output| matches!(output, Output::Commit(_)))
            .map(|output| {
                let line = output_line(
                    &agent,
                    output,
                    ContextMode::Full,
                    &mut sent,
                    &mut Vec::new(),
                );
                serde_json::to_value(&line).unwrap()
            })
            .collect()
    }

    #[test]
    fn a_commit_line_reads_back_fenced_with_its_own_hash() {
        let line = commit_lines().remove(0);
        let hash = line["payload_hash"].as_str().unwrap().to_owned();
        let ordinal = line["ordinal"].as_u64().unwrap();
        match StoreWrite::from_output_line(line).unwrap() {
            StoreWrite::Fenced(operation) => {
                assert_eq!(operation.payload_hash, hash);
                assert_eq!(operation.operation_id.ordinal, ordinal);
            }
            plain => panic!("expected a fenced write, got {plain:?}"),
        }
    }

    #[test]
    fn without_its_operation_fields_a_commit_line_is_plain() {
        let mut line = commit_lines().remove(0);
        line.as_object_mut().unwrap().remove("ordinal");
        assert!(matches!(
            StoreWrite::from_output_line(line),
            Ok(StoreWrite::Plain(_))
        ));
    }

    #[test]
    fn a_changed_commit_or_a_wrong_line_is_refused_with_its_reason() {
        let mut changed = commit_lines().remove(0);
        changed["payload_hash"] = Value::from("0".repeat(64));
        let error = StoreWrite::from_output_line(changed).unwrap_err();
        assert!(matches!(&error, CommitLineError::HashMismatch { given, .. } if given.len() == 64));
        assert!(
            error
                .to_string()
                .contains("changed after the agent emitted it"),
            "{error}"
        );

        let cases = [
            (Value::from(3), CommitLineError::NotAnObject),
            (serde_json::json!({"commit": {}}), CommitLineError::NoType),
            (
                serde_json::json!({"type": "event"}),
                CommitLineError::OtherType("event".into()),
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(StoreWrite::from_output_line(line), Err(expected));
        }
        let bad = StoreWrite::from_output_line(serde_json::json!({"type": "commit", "commit": 1}));
        assert!(
            matches!(bad, Err(CommitLineError::InvalidCommit(_))),
            "{bad:?}"
        );
    }
}
