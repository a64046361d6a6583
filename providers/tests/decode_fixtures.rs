//! Every recorded response decodes: streamed bodies to the reviewed snapshot of their inputs,
//! JSON bodies to a `model_done`, error envelopes to the failure code of their status. Any
//! split of a body yields the same inputs.

#[macro_use]
mod common;

use common::{assert_one_terminal, decode, decode_chunked, exchanges, failure_code};
use proptest::prelude::*;
use runcore::{AssistantBlock, DeltaKind, Input};
use runcore_providers::Api;
use serde_json::json;

/// The joined text (or thinking) deltas.
fn joined(inputs: &[Input], wanted: DeltaKind) -> String {
    inputs
        .iter()
        .filter_map(|input| match input {
            Input::ModelDelta { text, kind, .. } if *kind == wanted => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn streamed_fixtures_decode(api: Api) {
    let mut decoded = 0;
    for exchange in exchanges(api)
        .iter()
        .filter(|e| e.streamed() && e.status == 200)
    {
        let (inputs, report) = decode(api, exchange.status, exchange.response.as_bytes());
        assert_one_terminal(&inputs);
        assert_eq!(report.format_error, None, "{}", exchange.name());
        let Some(Input::ModelDone { message, .. }) = inputs.last() else {
            panic!(
                "{}: every recorded stream is a complete answer: {inputs:?}",
                exchange.name()
            );
        };
        // The live deltas add up to the committed text.
        let text: String = message
            .content
            .iter()
            .filter_map(|b| match b {
                AssistantBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            joined(&inputs, DeltaKind::Text),
            text,
            "{}",
            exchange.name()
        );
        if api == Api::Anthropic {
            let thinking: String = message
                .content
                .iter()
                .filter_map(|b| match b {
                    AssistantBlock::Thinking { thinking, .. } => Some(thinking.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(
                joined(&inputs, DeltaKind::Thinking),
                thinking,
                "{}",
                exchange.name()
            );
        }
        snapshot_json!(
            format!("{}__{}", api.name(), exchange.name()),
            json!({
                "deltas": inputs.len() - 1,
                "ignored": report.ignored,
                "message": message,
            })
        );
        decoded += 1;
    }
    assert!(decoded > 40, "{decoded} streamed fixtures");
}

#[test]
fn anthropic_streamed_fixtures() {
    streamed_fixtures_decode(Api::Anthropic);
}

#[test]
fn openai_chat_streamed_fixtures() {
    streamed_fixtures_decode(Api::OpenAiChat);
}

#[test]
fn openai_responses_streamed_fixtures() {
    streamed_fixtures_decode(Api::OpenAiResponses);
}

/// Every 200 JSON body is a complete answer; every error envelope a failure with its status's
/// code (reviewed as one snapshot per API).
#[test]
fn json_bodies_and_error_envelopes() {
    for api in Api::ALL {
        let mut failures = Vec::new();
        for exchange in exchanges(api)
            .iter()
            .filter(|e| !e.streamed() || e.status != 200)
        {
            let (inputs, report) = decode(api, exchange.status, exchange.response.as_bytes());
            assert_one_terminal(&inputs);
            if exchange.status == 200 {
                assert_eq!(report.format_error, None, "{}", exchange.name());
                assert!(
                    matches!(inputs.last(), Some(Input::ModelDone { .. })),
                    "{}: {inputs:?}",
                    exchange.name()
                );
            } else {
                let expected = match exchange.status {
                    400 => "invalid_request",
                    401 => "authentication",
                    404 => "not_found",
                    other => panic!("unexpected status {other}"),
                };
                assert_eq!(failure_code(&inputs), Some(expected), "{}", exchange.name());
                if let Some(Input::ModelFailed { code, message, .. }) = inputs.last() {
                    failures.push(json!({"exchange": exchange.name(), "status": exchange.status, "code": code, "message": message}));
                }
            }
        }
        snapshot_json!(format!("{}__error_envelopes", api.name()), failures);
    }
}

/// Fed one byte at a time (every chunk boundary at every offset at once), every recorded body
/// (streamed, JSON, error envelope) yields exactly the inputs it yields whole.
#[test]
fn byte_at_a_time_is_the_same() {
    for api in Api::ALL {
        for exchange in exchanges(api).iter() {
            let body = exchange.response.as_bytes();
            let whole = decode(api, exchange.status, body);
            assert_eq!(
                decode_chunked(api, exchange.status, body, &[1]),
                whole,
                "{}",
                exchange.name()
            );
        }
    }
}

/// Split in two at every byte offset, the smaller bodies yield the same inputs.
#[test]
fn every_two_way_split_is_the_same() {
    for api in Api::ALL {
        for exchange in exchanges(api)
            .iter()
            .filter(|e| e.streamed() && e.response.len() <= 2_500)
        {
            let body = exchange.response.as_bytes();
            let whole = decode(api, exchange.status, body);
            for at in 1..body.len() {
                assert_eq!(
                    decode_chunked(api, exchange.status, body, &[at, usize::MAX]),
                    whole,
                    "{} split at {at}",
                    exchange.name()
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random chunk sizes over any streamed body change nothing.
    #[test]
    fn random_chunks_are_the_same(which in 0usize..1_000, sizes in proptest::collection::vec(1usize..97, 1..8)) {
        let all: Vec<(Api, common::Exchange)> = Api::ALL
            .into_iter()
            .flat_map(|api| exchanges(api).into_iter().filter(|e| e.streamed()).map(move |e| (api, e)))
            .collect();
        let (api, exchange) = &all[which % all.len()];
        let body = exchange.response.as_bytes();
        prop_assert_eq!(decode_chunked(*api, exchange.status, body, &sizes), decode(*api, exchange.status, body));
    }
}
