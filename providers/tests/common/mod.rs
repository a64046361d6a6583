//! Shared test support: the recorded exchanges, decoding helpers and snapshot settings.
#![allow(dead_code, unused_macros)]

use runcore::Input;
use runcore_providers::{Api, DecodeReport};
use serde::Deserialize;
use serde_json::Value;

/// One recorded exchange (see tests/fixtures/README.md).
#[derive(Debug, Clone, Deserialize)]
pub struct Exchange {
    pub api: String,
    pub cassette: String,
    pub index: u64,
    pub request: Option<Value>,
    pub status: u16,
    pub content_type: String,
    pub response: String,
}

impl Exchange {
    /// Whether the response is an SSE stream.
    pub fn streamed(&self) -> bool {
        self.content_type.starts_with("text/event-stream")
    }

    /// A short, file-name-safe name: cassette path without its common prefix, and the index.
    pub fn name(&self) -> String {
        let short = self
            .cassette
            .trim_start_matches("tests/")
            .trim_start_matches("cassettes/")
            .trim_start_matches("providers/")
            .trim_end_matches(".yaml");
        let slug: String = short
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!("{slug}_{}", self.index)
    }
}

/// The fixture file of `api`.
pub fn exchanges(api: Api) -> Vec<Exchange> {
    let path = format!(
        "{}/tests/fixtures/{}.jsonl",
        env!("CARGO_MANIFEST_DIR"),
        api.name()
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect()
}

/// Decodes `body` fed in the given chunk sizes (cycled), with `status`.
pub fn decode_chunked(
    api: Api,
    status: u16,
    body: &[u8],
    sizes: &[usize],
) -> (Vec<Input>, DecodeReport) {
    let mut decoder = api.decoder("run-1", 1, status);
    let mut inputs = Vec::new();
    let mut rest = body;
    let mut turn = 0;
    while !rest.is_empty() {
        let size = sizes
            .get(turn % sizes.len().max(1))
            .copied()
            .unwrap_or(usize::MAX)
            .max(1);
        let (chunk, tail) = rest.split_at(size.min(rest.len()));
        inputs.extend(decoder.feed(chunk));
        rest = tail;
        turn += 1;
    }
    let (end, report) = decoder.finish_with_report();
    inputs.extend(end);
    (inputs, report)
}

/// Decodes `body` whole.
pub fn decode(api: Api, status: u16, body: &[u8]) -> (Vec<Input>, DecodeReport) {
    decode_chunked(api, status, body, &[usize::MAX])
}

/// Checks the shape every decode must have: deltas, then exactly one terminal input, last.
pub fn assert_one_terminal(inputs: &[Input]) {
    let terminals = inputs
        .iter()
        .filter(|i| matches!(i, Input::ModelDone { .. } | Input::ModelFailed { .. }))
        .count();
    assert_eq!(terminals, 1, "exactly one terminal input: {inputs:?}");
    assert!(
        matches!(
            inputs.last(),
            Some(Input::ModelDone { .. } | Input::ModelFailed { .. })
        ),
        "the terminal input comes last"
    );
    assert!(
        inputs[..inputs.len() - 1]
            .iter()
            .all(|i| matches!(i, Input::ModelDelta { .. }))
    );
}

/// The failure code, if the decode failed.
pub fn failure_code(inputs: &[Input]) -> Option<&str> {
    match inputs.last() {
        Some(Input::ModelFailed { code, .. }) => Some(code),
        _ => None,
    }
}

/// Snapshots a serializable value as pretty JSON under providers/snapshots.
macro_rules! snapshot_json {
    ($name:expr, $value:expr) => {
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            let name = format!("{}__{}", env!("CARGO_CRATE_NAME"), $name);
            insta::assert_json_snapshot!(name, $value);
        })
    };
}
