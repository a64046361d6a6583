//! The cases where agent frameworks break: a cut-off stream, an error event mid-stream, an
//! error envelope per status, truncated tool-call arguments, parallel and interleaved calls.
//! None of them is ever a `stop`.

#[macro_use]
mod common;

use common::{assert_one_terminal, decode, exchanges, failure_code};
use runcore::{AssistantBlock, AssistantMessage, Input, StopReason};
use runcore_providers::Api;
use serde_json::{Value, json};

fn done(inputs: &[Input]) -> &AssistantMessage {
    match inputs.last() {
        Some(Input::ModelDone { message, .. }) => message,
        other => panic!("expected model_done, got {other:?}"),
    }
}

fn calls(message: &AssistantMessage) -> Vec<(String, String, Value)> {
    message
        .tool_calls()
        .map(|c| {
            (
                c.id.to_string(),
                c.name.to_string(),
                Value::clone(&c.arguments),
            )
        })
        .collect()
}

fn sse(events: &[Value]) -> String {
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

/// Where each API's terminal event starts in a recorded body.
fn terminal_at(api: Api, body: &str) -> Option<usize> {
    match api {
        Api::Anthropic => body.find("event: message_stop"),
        Api::OpenAiChat => body
            .find("\"finish_reason\":\"")
            .or_else(|| body.find("data: [DONE]")),
        Api::OpenAiResponses => body
            .find("event: response.completed")
            .or_else(|| body.find("event: response.incomplete")),
    }
}

/// Every recorded stream cut anywhere before its terminal event is `incomplete_stream`.
#[test]
fn every_recorded_stream_cut_short_fails_incomplete() {
    let mut cuts = 0;
    for api in Api::ALL {
        for exchange in exchanges(api)
            .iter()
            .filter(|e| e.streamed() && e.status == 200)
        {
            let body = exchange.response.as_str();
            let Some(end) = terminal_at(api, body) else {
                panic!("{}: no terminal event", exchange.name());
            };
            for cut in [0, end / 4, end / 2, end.saturating_sub(1), end] {
                let (inputs, _) = decode(api, 200, &body.as_bytes()[..cut]);
                assert_one_terminal(&inputs);
                assert_eq!(
                    failure_code(&inputs),
                    Some("incomplete_stream"),
                    "{} cut at {cut}",
                    exchange.name()
                );
                cuts += 1;
            }
        }
    }
    assert!(cuts > 1000);
}

#[test]
fn chat_finish_reason_without_done_is_complete() {
    let body = sse(&[
        json!({"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}),
        json!({"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
    ]);
    let (inputs, _) = decode(Api::OpenAiChat, 200, body.as_bytes());
    assert_eq!(done(&inputs).stop_reason, StopReason::Stop);
}

#[test]
fn anthropic_error_event_mid_stream() {
    let body = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n\
        event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n\
        event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n\
        event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let (inputs, _) = decode(Api::Anthropic, 200, body.as_bytes());
    assert_one_terminal(&inputs);
    assert!(matches!(&inputs[0], Input::ModelDelta { text, .. } if text == "Hel"));
    assert!(
        matches!(inputs.last(), Some(Input::ModelFailed { code, message, .. })
        if code == "overloaded" && message == "overloaded_error: Overloaded")
    );
    let other = body.replace("overloaded_error", "some_new_error");
    let (inputs, _) = decode(Api::Anthropic, 200, other.as_bytes());
    assert_eq!(failure_code(&inputs), Some("stream_error"));
}

#[test]
fn chat_error_chunk_mid_stream() {
    let body = sse(&[
        json!({"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}),
        json!({"error":{"type":"server_error","message":"boom"}}),
    ]) + "data: [DONE]\n\n";
    let (inputs, _) = decode(Api::OpenAiChat, 200, body.as_bytes());
    assert_eq!(failure_code(&inputs), Some("server_error"));
    let body = body.replace("server_error", "weird");
    let (inputs, _) = decode(Api::OpenAiChat, 200, body.as_bytes());
    assert_eq!(failure_code(&inputs), Some("stream_error"));
}

#[test]
fn responses_error_and_failed_events() {
    let body = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"model\":\"m\",\"status\":\"in_progress\",\"output\":[]}}\n\n\
        event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\"}\n\n";
    let (inputs, _) = decode(Api::OpenAiResponses, 200, body.as_bytes());
    assert!(
        matches!(inputs.last(), Some(Input::ModelFailed { code, message, .. })
        if code == "rate_limited" && message == "rate_limit_exceeded: slow down")
    );
    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"status\":\"failed\",\"output\":[],\"error\":{\"code\":\"server_error\",\"message\":\"oops\"}}}\n\n";
    let (inputs, _) = decode(Api::OpenAiResponses, 200, failed.as_bytes());
    assert_eq!(failure_code(&inputs), Some("server_error"));
}

/// An error envelope for each status, in each API's shape, is that status's code.
#[test]
fn error_envelope_for_each_status() {
    let cases = [
        (400, "invalid_request"),
        (401, "authentication"),
        (403, "authentication"),
        (404, "not_found"),
        (413, "invalid_request"),
        (429, "rate_limited"),
        (500, "server_error"),
        (502, "server_error"),
        (503, "server_error"),
        (529, "overloaded"),
    ];
    for api in Api::ALL {
        for (status, code) in cases {
            for body in [
                r#"{"type":"error","error":{"type":"some_error","message":"m"}}"#,
                r#"{"error":{"message":"m","type":"t","code":null}}"#,
                "<html>Bad Gateway</html>",
                "",
                "data: {\"type\":\"message_stop\"}\n\n",
            ] {
                let (inputs, _) = decode(api, status, body.as_bytes());
                assert_one_terminal(&inputs);
                assert_eq!(failure_code(&inputs), Some(code), "{api:?} {status} {body}");
                let Some(Input::ModelFailed { message, .. }) = inputs.last() else {
                    unreachable!()
                };
                assert!(message.starts_with(&format!("HTTP {status}")), "{message}");
            }
        }
        let too_long = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        let (inputs, _) = decode(api, 400, too_long.as_bytes());
        assert_eq!(failure_code(&inputs), Some("context_length_exceeded"));
        let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let (inputs, _) = decode(api, 400, openai.as_bytes());
        assert_eq!(failure_code(&inputs), Some("context_length_exceeded"));
        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let (inputs, _) = decode(api, 500, overloaded.as_bytes());
        assert_eq!(failure_code(&inputs), Some("overloaded"));
    }
}

/// `max_tokens` inside a tool call: the answer is `length`, the cut call keeps its raw text
/// (the core answers it `truncated`, never executes it).
#[test]
fn anthropic_max_tokens_inside_a_tool_call() {
    let body = "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":5,\"cache_creation_input_tokens\":7,\"cache_read_input_tokens\":11,\"output_tokens\":1}}}\n\n\
        data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"write\",\"input\":{}}}\n\n\
        data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"a.t\"}}\n\n\
        data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
        data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":9}}\n\n\
        data: {\"type\":\"message_stop\"}\n\n";
    let (inputs, _) = decode(Api::Anthropic, 200, body.as_bytes());
    let message = done(&inputs);
    assert_eq!(message.stop_reason, StopReason::Length);
    assert_eq!(message.provider_stop_reason.as_deref(), Some("max_tokens"));
    assert_eq!(
        calls(message),
        vec![("t1".into(), "write".into(), Value::from("{\"path\": \"a.t"))]
    );
    let usage = message.usage.expect("usage");
    assert_eq!(usage.input_tokens, 23);
    assert_eq!(usage.cache_write_tokens, Some(7));
    assert_eq!(usage.cache_read_tokens, Some(11));
    assert_eq!(usage.output_tokens, 9);
}

#[test]
fn chat_length_with_cut_arguments() {
    let body = sse(&[
        json!({"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":null}]}),
        json!({"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}),
    ]) + "data: [DONE]\n\n";
    let (inputs, _) = decode(Api::OpenAiChat, 200, body.as_bytes());
    let message = done(&inputs);
    assert_eq!(message.stop_reason, StopReason::Length);
    assert_eq!(calls(message)[0].2, Value::from("{\"a\":"));
}

#[test]
fn responses_incomplete_is_length_or_stop() {
    for (reason, stop) in [
        ("max_output_tokens", StopReason::Length),
        ("content_filter", StopReason::Stop),
    ] {
        let body = format!(
            "event: response.incomplete\ndata: {}\n\n",
            json!({"type":"response.incomplete","response":{"id":"r","model":"m","status":"incomplete","incomplete_details":{"reason":reason},"output":[{"type":"message","id":"msg_1","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"part","annotations":[]}]}]}})
        );
        let (inputs, _) = decode(Api::OpenAiResponses, 200, body.as_bytes());
        let message = done(&inputs);
        assert_eq!(message.stop_reason, stop);
        assert_eq!(message.provider_stop_reason.as_deref(), Some(reason));
    }
}

/// Chat: parallel calls whose deltas interleave by `index` keep their ids, names, arguments
/// and call order.
#[test]
fn chat_interleaved_parallel_calls() {
    let chunk = |calls: Value| json!({"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":calls},"finish_reason":null}]});
    let body = sse(&[
        chunk(
            json!([{"index":0,"id":"call_a","type":"function","function":{"name":"fa","arguments":""}}]),
        ),
        chunk(
            json!([{"index":1,"id":"call_b","type":"function","function":{"name":"fb","arguments":"{\"b\""}}]),
        ),
        chunk(json!([{"index":0,"function":{"arguments":"{\"a\":1}"}}])),
        chunk(json!([{"index":1,"function":{"arguments":":2}"}}])),
        json!({"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
    ]) + "data: [DONE]\n\n";
    let (inputs, _) = decode(Api::OpenAiChat, 200, body.as_bytes());
    let message = done(&inputs);
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(
        calls(message),
        vec![
            ("call_a".into(), "fa".into(), json!({"a": 1})),
            ("call_b".into(), "fb".into(), json!({"b": 2})),
        ]
    );
}

/// Responses: argument deltas that name only their item id land on their own call, and the
/// call order is the output order, also without the terminal event's output.
#[test]
fn responses_interleaved_calls_by_item_id() {
    let events = [
        json!({"type":"response.created","response":{"id":"r","model":"m","status":"in_progress","output":[]}}),
        json!({"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_a","call_id":"call_a","name":"fa","arguments":"","status":"in_progress"}}),
        json!({"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_b","call_id":"call_b","name":"fb","arguments":"","status":"in_progress"}}),
        json!({"type":"response.function_call_arguments.delta","item_id":"fc_b","delta":"{\"b\":"}),
        json!({"type":"response.function_call_arguments.delta","item_id":"fc_a","delta":"{\"a\":1}"}),
        json!({"type":"response.function_call_arguments.delta","item_id":"fc_b","delta":"2}"}),
        json!({"type":"response.completed","response":{"id":"r","model":"m","status":"completed","output":[],"usage":{"input_tokens":10,"output_tokens":3,"input_tokens_details":{"cached_tokens":4},"output_tokens_details":{"reasoning_tokens":1}}}}),
    ];
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect();
    let (inputs, _) = decode(Api::OpenAiResponses, 200, body.as_bytes());
    let message = done(&inputs);
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(
        calls(message),
        vec![
            ("call_a".into(), "fa".into(), json!({"a": 1})),
            ("call_b".into(), "fb".into(), json!({"b": 2})),
        ]
    );
    let fc_ids: Vec<_> = message
        .content
        .iter()
        .map(|b| {
            b.meta()
                .get("openai_responses")
                .map_or(Value::Null, |m| m["id"].clone())
        })
        .collect();
    assert_eq!(fc_ids, vec![json!("fc_a"), json!("fc_b")]);
    let usage = message.usage.expect("usage");
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.reasoning_tokens
        ),
        (10, Some(4), Some(1))
    );
}

/// Comments, `ping`, unknown event types and `\r\n` line ends change nothing; the ignored
/// ones are counted.
#[test]
fn noise_is_ignored_and_counted() {
    let body = ": keep-alive\r\nevent: ping\r\ndata: {\"type\":\"ping\"}\r\n\r\n\
        event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\"}}\r\n\r\n\
        event: brand_new\r\ndata: {\"type\":\"brand_new\"}\r\n\r\n\
        data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\r\n\r\n\
        data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"h\u{e9}\"}}\r\n\r\n\
        data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\r\n\r\n\
        data: {\"type\":\"message_stop\"}\r\n\r\n";
    let (inputs, report) = decode(Api::Anthropic, 200, body.as_bytes());
    assert_eq!(report.ignored, 3);
    let message = done(&inputs);
    assert_eq!(message.content, vec![AssistantBlock::text("hé")]);
}

/// A tool call the core could not take (no id, no name, a repeated id) makes the response
/// broken: `stream_error`, never a `model_done` the core would refuse.
#[test]
fn broken_tool_calls_are_a_stream_error() {
    let chunk = |calls: Value| json!({"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":calls},"finish_reason":null}]});
    for calls in [
        json!([{"index":0,"function":{"name":"f","arguments":"{}"}}]),
        json!([{"index":0,"id":"a","function":{"arguments":"{}"}}]),
        json!([{"index":0,"id":"a","function":{"name":"f"}},{"index":1,"id":"a","function":{"name":"g"}}]),
    ] {
        let body = sse(&[
            chunk(calls),
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
        ]);
        let (inputs, _) = decode(Api::OpenAiChat, 200, body.as_bytes());
        assert_eq!(failure_code(&inputs), Some("stream_error"));
    }
}

/// A bad line inside a stream that is otherwise the API's is ignored and counted, not a
/// format error.
#[test]
fn a_bad_line_inside_a_good_stream() {
    let body = "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\"}}\n\n\
        data: not json\n\n\
        data: {\"type\":\"message_stop\"}\n\n";
    let (inputs, report) = decode(Api::Anthropic, 200, body.as_bytes());
    assert_eq!(report.format_error, None);
    assert_eq!(report.ignored, 1);
    assert_eq!(done(&inputs).stop_reason, StopReason::Stop);
}

/// A 2xx body that is not the API's format is a failure, with the offset of the problem.
#[test]
fn not_the_format() {
    for api in Api::ALL {
        for (body, offset) in [
            ("hello world\n", 0),
            ("  {\"nope\": 1}", 2),
            ("data: {\"a\":\n\ndata: x\n\n", 0),
            ("{\"a\":", 5),
        ] {
            let (inputs, report) = decode(api, 200, body.as_bytes());
            assert_one_terminal(&inputs);
            assert!(failure_code(&inputs).is_some(), "{api:?} {body}");
            let error = report
                .format_error
                .unwrap_or_else(|| panic!("{api:?} {body:?}: a format error"));
            assert_eq!(error.offset, offset, "{api:?} {body:?}: {error}");
        }
    }
}

mod arbitrary_bytes {
    use super::*;
    use common::decode_chunked;
    use proptest::prelude::*;

    fn body() -> impl Strategy<Value = Vec<u8>> {
        let pieces = prop_oneof![
            Just(b"data: ".to_vec()),
            Just(b"event: ".to_vec()),
            Just(b"\n\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"{\"type\":\"message_stop\"}".to_vec()),
            Just(b"{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\xc3\xa9\"}}".to_vec()),
            Just(b"{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{\"}}]},\"finish_reason\":\"tool_calls\"}]}".to_vec()),
            Just(b"{\"type\":\"response.completed\",\"response\":{\"output\":[{\"type\":\"function_call\"}]}}".to_vec()),
            Just(b"[DONE]".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..12),
        ];
        proptest::collection::vec(pieces, 0..24).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        /// The fuzz target's property on stable: never a panic, exactly one terminal input,
        /// last, and the same inputs whatever the chunking.
        #[test]
        fn any_body_ends_in_one_terminal(body in body(), api in 0usize..3, status in prop_oneof![Just(200u16), Just(429u16), Just(500u16)], chunk in 1usize..9) {
            let api = Api::ALL[api];
            let whole = decode(api, status, &body);
            assert_one_terminal(&whole.0);
            prop_assert_eq!(decode_chunked(api, status, &body, &[chunk]), whole);
        }
    }
}

/// SPEC §13: a leading byte-order mark is ignored (WHATWG SSE), wherever the chunks split it:
/// every recorded response with a BOM before it decodes as it does without one.
#[test]
fn a_leading_byte_order_mark_is_ignored() {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let mut checked = 0;
    for api in Api::ALL {
        for exchange in exchanges(api) {
            let body = exchange.response.as_bytes();
            let plain = decode(api, exchange.status, body);
            let with_bom = [BOM, body].concat();
            for sizes in [&[usize::MAX][..], &[1], &[2, 7]] {
                let marked = common::decode_chunked(api, exchange.status, &with_bom, sizes);
                assert_eq!(marked, plain, "{} fed by {sizes:?}", exchange.name());
            }
            checked += 1;
        }
    }
    assert!(checked > 600, "{checked}");
    // Only a whole BOM is dropped: a body that starts like one is the body.
    let (inputs, report) = decode(Api::OpenAiChat, 200, b"\xEF\xBB");
    assert_eq!(failure_code(&inputs), Some("incomplete_stream"));
    assert!(report.format_error.is_some());
}

/// One rule for invalid UTF-8 (SPEC §13): `stream_error`, in a stream and in a JSON body alike,
/// never replaced with U+FFFD nor taken for a cut-short body. A body cut inside a character is
/// cut short (`incomplete_stream`).
#[test]
fn invalid_utf8_is_a_stream_error_in_a_stream_and_a_body() {
    let chat = |text: &[u8]| {
        [
            b"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"".as_slice(),
            text,
            b"\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        ]
        .concat()
    };
    let (inputs, report) = decode(Api::OpenAiChat, 200, &chat(b"h\xFFi"));
    assert_one_terminal(&inputs);
    assert_eq!(report.format_error, None);
    assert!(
        matches!(inputs.last(), Some(Input::ModelFailed { code, message, .. })
        if code == "stream_error" && message.contains("UTF-8")),
        "{inputs:?}"
    );
    assert!(
        !inputs.iter().any(|i| matches!(i, Input::ModelDelta { .. })),
        "nothing of the broken event is passed on: {inputs:?}"
    );
    let (inputs, _) = decode(Api::OpenAiChat, 200, &chat("hé".as_bytes()));
    assert!(matches!(inputs.last(), Some(Input::ModelDone { .. })));

    for api in Api::ALL {
        let exchange = exchanges(api)
            .into_iter()
            .find(|e| !e.streamed() && e.status == 200)
            .expect("a JSON body");
        // A lone continuation byte inside the first string of the body.
        let mut bytes = exchange.response.clone().into_bytes();
        let at = exchange.response.find('"').expect("a string") + 1;
        bytes.insert(at, 0x80);
        let (inputs, report) = decode(api, 200, &bytes);
        assert_eq!(report.format_error, None, "{}", api.name());
        assert_eq!(
            failure_code(&inputs),
            Some("stream_error"),
            "{}",
            api.name()
        );

        let cut = &exchange.response.as_bytes()[..exchange.response.len() / 2];
        let cut_in_char = [cut, &"é".as_bytes()[..1]].concat();
        let (inputs, _) = decode(api, 200, &cut_in_char);
        assert_eq!(
            failure_code(&inputs),
            Some("incomplete_stream"),
            "{}",
            api.name()
        );
    }
}

/// A 2xx stream that holds only comments or pings is the API's, cut short: `incomplete_stream`
/// with no format error (so `runcore codec decode` prints it and exits 0).
#[test]
fn a_stream_of_only_comments_or_pings_is_incomplete() {
    let bodies: [(Api, &str); 4] = [
        (Api::OpenAiChat, ": keep-alive\n\n"),
        (Api::OpenAiResponses, ": ping\n\n: ping\n\n"),
        (Api::Anthropic, "event: ping\ndata: {\"type\":\"ping\"}\n\n"),
        (
            Api::Anthropic,
            ": x\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
        ),
    ];
    for (api, body) in bodies {
        let (inputs, report) = decode(api, 200, body.as_bytes());
        assert_one_terminal(&inputs);
        assert_eq!(report.format_error, None, "{body:?}");
        assert_eq!(failure_code(&inputs), Some("incomplete_stream"), "{body:?}");
    }
    // Not the API's at all is still a format error.
    let (_, report) = decode(Api::OpenAiChat, 200, b"hello\n");
    assert!(report.format_error.is_some());
}

/// One SSE event (or a JSON body) over 64 MiB is `stream_error`; the bytes are dropped as they
/// come, and the stream does not go on as if nothing happened.
#[test]
fn an_event_over_64_mib_is_a_stream_error() {
    let mib = vec![b'a'; 1 << 20];
    for api in Api::ALL {
        let mut decoder = api.decoder("run-1", 1, 200);
        assert!(decoder.feed(b"data: {\"x\":\"").is_empty());
        for _ in 0..65 {
            assert!(decoder.feed(&mib).is_empty());
        }
        let rest = decoder.feed(b"\"}\n\ndata: [DONE]\n\n");
        let (end, report) = decoder.finish_with_report();
        let inputs: Vec<Input> = rest.into_iter().chain(end).collect();
        assert_one_terminal(&inputs);
        assert_eq!(report.format_error, None);
        assert!(
            matches!(inputs.last(), Some(Input::ModelFailed { code, message, .. })
            if code == "stream_error" && message.contains("64 MiB")),
            "{}: {:?}",
            api.name(),
            inputs.last()
        );
    }
    // A JSON body likewise.
    let mut decoder = Api::OpenAiChat.decoder("run-1", 1, 200);
    assert!(decoder.feed(b"{\"x\":\"").is_empty());
    for _ in 0..65 {
        assert!(decoder.feed(&mib).is_empty());
    }
    let (inputs, _) = decoder.finish_with_report();
    assert_eq!(failure_code(&inputs), Some("stream_error"));
}

/// A Chat refusal is its own text block marked `meta.refusal = true` (SPEC §13), streamed or
/// not; the answer's other text stays unmarked.
#[test]
fn a_chat_refusal_is_marked() {
    let streamed = sse(&[
        json!({"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Well. "},"finish_reason":null}]}),
        json!({"id":"c","model":"m","choices":[{"index":0,"delta":{"refusal":"I can't"},"finish_reason":null}]}),
        json!({"id":"c","model":"m","choices":[{"index":0,"delta":{"refusal":" help."},"finish_reason":"stop"}]}),
    ]) + "data: [DONE]\n\n";
    let body = json!({"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,
        "message":{"role":"assistant","content":"Well. ","refusal":"I can't help."},"finish_reason":"stop"}]})
    .to_string();
    for body in [streamed, body] {
        let (inputs, _) = decode(Api::OpenAiChat, 200, body.as_bytes());
        let content = serde_json::to_value(&done(&inputs).content).unwrap();
        assert_eq!(
            content,
            json!([
                {"type": "text", "text": "Well. "},
                {"type": "text", "text": "I can't help.", "meta": {"refusal": true}},
            ]),
            "{body}"
        );
    }
}

/// SPEC §13: given the response's headers, a `model_failed` carries the wait the provider asked
/// for in `retry_after_ms` — `retry-after` in seconds or as an HTTP date, `retry-after-ms`, the
/// providers' reset headers — and a decoder given none carries none.
#[test]
fn headers_fill_retry_after() {
    let decode_with =
        |api: Api, status: u16, body: &str, headers: &[(&str, &str)], now: Option<u64>| {
            let mut decoder = api.decoder("run-1", 1, status);
            decoder.set_headers(headers.iter().copied(), now);
            let mut inputs = decoder.feed(body.as_bytes());
            inputs.extend(decoder.finish_with_report().0);
            assert_one_terminal(&inputs);
            match inputs.last() {
                Some(Input::ModelFailed { retry_after_ms, .. }) => *retry_after_ms,
                other => panic!("expected model_failed, got {other:?}"),
            }
        };
    let anthropic_429 =
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    let openai_429 =
        r#"{"error":{"type":"requests","code":"rate_limit_exceeded","message":"slow down"}}"#;
    for (api, body) in [
        (Api::Anthropic, anthropic_429),
        (Api::OpenAiChat, openai_429),
        (Api::OpenAiResponses, openai_429),
    ] {
        assert_eq!(decode_with(api, 429, body, &[], None), None);
        assert_eq!(
            decode_with(api, 429, body, &[("Retry-After", "3")], None),
            Some(3000)
        );
        assert_eq!(
            decode_with(
                api,
                429,
                body,
                &[("retry-after", "3"), ("retry-after-ms", "2500")],
                None
            ),
            Some(2500)
        );
        // An HTTP date, against the caller's `now` or else the response's own `date`.
        let at = [("retry-after", "Wed, 21 Oct 2026 07:28:30 GMT")];
        assert_eq!(
            decode_with(api, 429, body, &at, Some(1_792_567_700_000)),
            Some(10_000)
        );
        let dated = [at[0], ("date", "Wed, 21 Oct 2026 07:28:00 GMT")];
        assert_eq!(decode_with(api, 429, body, &dated, None), Some(30_000));
        assert_eq!(decode_with(api, 429, body, &at, None), None);
        // A 529 / 503 with retry-after carries it too.
        assert_eq!(
            decode_with(api, 503, "", &[("retry-after", "1")], None),
            Some(1000)
        );
    }
    let openai_resets = [
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "20ms"),
        ("x-ratelimit-remaining-tokens", "100"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    ];
    assert_eq!(
        decode_with(Api::OpenAiChat, 429, openai_429, &openai_resets, None),
        Some(20)
    );
    // Reset headers are read for rate limits only.
    assert_eq!(
        decode_with(Api::OpenAiChat, 500, "", &openai_resets, None),
        None
    );
    let anthropic_resets = [
        ("anthropic-ratelimit-tokens-remaining", "0"),
        ("anthropic-ratelimit-tokens-reset", "2026-10-21T07:28:42Z"),
        ("date", "Wed, 21 Oct 2026 07:28:00 GMT"),
    ];
    assert_eq!(
        decode_with(Api::Anthropic, 429, anthropic_429, &anthropic_resets, None),
        Some(42_000)
    );
    // A rate-limit error event inside a 200 stream is a rate limit as well.
    let event = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"model\":\"m\",\"status\":\"in_progress\",\"output\":[]}}\n\n\
        event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\"}\n\n";
    assert_eq!(
        decode_with(
            Api::OpenAiResponses,
            200,
            event,
            &[("retry-after", "2")],
            None
        ),
        Some(2000)
    );
    // A success carries nothing: headers never turn an answer into a failure.
    let ok = sse(&[
        json!({"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}),
    ]);
    let mut decoder = Api::OpenAiChat.decoder("run-1", 1, 200);
    decoder.set_headers([("retry-after", "3")], None);
    let mut inputs = decoder.feed(ok.as_bytes());
    inputs.extend(decoder.finish_with_report().0);
    assert!(matches!(inputs.last(), Some(Input::ModelDone { .. })));
}
