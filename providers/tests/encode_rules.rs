//! The encode rules of SPEC §13 on small, named contexts, and the way in: a `call_model` line
//! of the real driver.

use runcore::driver::Driver;
use runcore::{Input, Message};
use runcore_providers::{
    Api, CallModelContext, EncodeError, Options, anthropic, openai_chat, openai_responses,
};
use serde_json::{Value, json};

fn messages(values: Value) -> Vec<Message> {
    serde_json::from_value(values).expect("messages")
}

/// A user turn, an assistant turn from `api`/`model` with thinking and two calls, two results.
fn two_call_context(api: &str, model: &str) -> CallModelContext {
    CallModelContext {
        run_id: "run-1".into(),
        step: 1,
        final_step: false,
        system_prompt: Some("be brief".into()),
        messages: messages(json!([
            {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "let me look", "signature": "sig",
                 "meta": {"openai_responses": {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"}}},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Looking.", "meta": {"openai_responses": {"type": "message", "id": "msg_1", "status": "completed"}}},
                {"type": "tool_call", "id": "c1", "name": "weather", "arguments": {"city": "Oslo"},
                 "meta": {"openai_responses": {"type": "function_call", "id": "fc_1", "status": "completed"}}},
                {"type": "tool_call", "id": "c2", "name": "weather", "arguments": {"city": "Rome"},
                 "meta": {"openai_responses": {"type": "function_call", "id": "fc_2", "status": "completed"}}}
            ], "stop_reason": "tool_use", "model": model, "meta": {"codec": {"api": api}}},
            {"role": "tool_result", "call_id": "c1", "tool_name": "weather", "content": [{"type": "text", "text": "cold"}], "is_error": false, "outcome": "executed"},
            {"role": "tool_result", "call_id": "c2", "tool_name": "weather", "content": [{"type": "text", "text": "failed"}], "is_error": true, "outcome": "executed"}
        ])),
        tools: vec![runcore_providers::ToolDefinition::new(
            "weather",
            Some("the weather".into()),
            Some(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
        )],
    }
}

#[test]
fn anthropic_same_model_sends_signed_thinking_and_groups_results() {
    let encoded = anthropic::encode(
        &two_call_context("anthropic", "claude-x"),
        &Options::new("claude-x"),
    )
    .expect("encodes");
    assert!(encoded.left_out.is_empty(), "{:?}", encoded.left_out);
    assert_eq!(
        encoded.body["system"],
        json!([{"type": "text", "text": "be brief"}])
    );
    assert_eq!(
        encoded.body["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "let me look", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "c2", "name": "weather", "input": {"city": "Rome"}},
        ])
    );
    assert_eq!(
        encoded.body["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "cold"}]},
            {"type": "tool_result", "tool_use_id": "c2", "content": [{"type": "text", "text": "failed"}], "is_error": true},
        ]})
    );
    assert_eq!(encoded.body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(encoded.body["max_tokens"], 4096);
    assert_eq!(encoded.body["stream"], true);
}

#[test]
fn anthropic_other_model_or_api_leaves_opaque_content_out() {
    for (api, model) in [("anthropic", "claude-y"), ("openai-responses", "claude-x")] {
        let encoded = anthropic::encode(&two_call_context(api, model), &Options::new("claude-x"))
            .expect("encodes");
        let what: Vec<_> = encoded
            .left_out
            .iter()
            .map(|l| (l.message, l.block, l.what))
            .collect();
        assert_eq!(
            what,
            vec![(1, Some(0), "thinking"), (1, Some(1), "redacted_thinking")]
        );
        assert_eq!(
            encoded.body["messages"][1]["content"][0],
            json!({"type": "text", "text": "Looking."})
        );
    }
}

#[test]
fn chat_one_tool_message_per_result_and_no_reasoning() {
    let encoded = openai_chat::encode(
        &two_call_context("openai-chat", "gpt"),
        &Options::new("gpt"),
    )
    .expect("encodes");
    let body = &encoded.body;
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": [{"type": "text", "text": "be brief"}]})
    );
    assert_eq!(
        body["messages"][2]["tool_calls"][1],
        json!({"id": "c2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}})
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "cold"})
    );
    assert_eq!(
        body["messages"][4],
        json!({"role": "tool", "tool_call_id": "c2", "content": "failed"})
    );
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    let what: Vec<_> = encoded.left_out.iter().map(|l| l.what).collect();
    assert_eq!(what, vec!["thinking", "thinking"]);
}

#[test]
fn responses_same_model_keeps_items_adjacent() {
    let encoded = openai_responses::encode(
        &two_call_context("openai-responses", "gpt-5-2025-01-01"),
        &Options::new("gpt-5"),
    )
    .expect("encodes");
    assert!(
        encoded.left_out.iter().all(|l| l.what == "thinking"),
        "{:?}",
        encoded.left_out
    );
    let input = &encoded.body["input"];
    assert_eq!(encoded.body["instructions"], "be brief");
    assert_eq!(
        input[1],
        json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"})
    );
    assert_eq!(
        input[2],
        json!({"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [{"type": "output_text", "text": "Looking."}]})
    );
    assert_eq!(input[3]["id"], "fc_1");
    assert_eq!(
        input[5],
        json!({"type": "function_call_output", "call_id": "c1", "output": "cold"})
    );
    assert_eq!(input[6]["call_id"], "c2");
}

#[test]
fn responses_other_model_drops_reasoning_and_item_ids() {
    let encoded = openai_responses::encode(
        &two_call_context("openai-responses", "gpt-5"),
        &Options::new("gpt-4o"),
    )
    .expect("encodes");
    let input = encoded.body["input"].as_array().expect("items");
    assert!(
        input
            .iter()
            .all(|item| item["type"] != "reasoning" && item.get("id").is_none())
    );
    let what: Vec<_> = encoded.left_out.iter().map(|l| l.what).collect();
    assert_eq!(
        what,
        vec!["reasoning_item", "thinking", "item_id", "item_id"]
    );
}

/// The body never has a call without its result nor a result without its call.
#[test]
fn orphans_are_left_out_and_reported() {
    let context = CallModelContext {
        run_id: "run-1".into(),
        step: 1,
        final_step: false,
        system_prompt: None,
        messages: messages(json!([
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [{"type": "tool_call", "id": "lonely", "name": "t", "arguments": {}}], "stop_reason": "tool_use"},
            {"role": "tool_result", "call_id": "ghost", "tool_name": "t", "content": [], "is_error": false, "outcome": "executed"},
            {"role": "user", "content": [{"type": "text", "text": "again"}]}
        ])),
        tools: vec![],
    };
    for api in Api::ALL {
        let encoded = api.encode(&context, &Options::new("m")).expect("encodes");
        let text = encoded.body.to_string();
        assert!(
            !text.contains("lonely") && !text.contains("ghost"),
            "{api:?}: {text}"
        );
        let what: Vec<_> = encoded.left_out.iter().map(|l| l.what).collect();
        assert!(
            what.starts_with(&["tool_call", "tool_result"]),
            "{api:?}: {what:?}"
        );
    }
}

#[test]
fn options_and_errors() {
    let context = two_call_context("anthropic", "m");
    assert_eq!(
        Api::Anthropic.encode(&context, &Options::new(" ")),
        Err(EncodeError::MissingModel)
    );
    let mut options = Options::new("m");
    options.extra.insert("messages".into(), json!([]));
    assert!(matches!(
        Api::OpenAiChat.encode(&context, &options),
        Err(EncodeError::ExtraReplacesContext { .. })
    ));
    let options: Options = serde_json::from_value(json!({
        "model": "m", "max_tokens": 10, "stream": false, "reasoning": {"effort": "low"},
        "tool_choice": "required", "extra": {"temperature": 0.5, "store": false}
    }))
    .expect("options");
    let body = Api::OpenAiResponses
        .encode(&context, &options)
        .expect("encodes")
        .body;
    assert_eq!(body["max_output_tokens"], 10);
    assert_eq!(body["reasoning"], json!({"effort": "low"}));
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(body["temperature"], 0.5);
    assert!(body.get("stream").is_none());
}

/// The context comes straight from the driver's `call_model` line; the decoded answer goes
/// straight back in as a `model_done` line.
#[test]
fn driver_round_trip() {
    let mut driver = Driver::new();
    driver.handle_line(br#"{"type":"config","system_prompt":"sys","tools":{"echo":{"description":"echoes","parameters":{"type":"object"}}}}"#);
    let lines = driver.handle_line(br#"{"type":"prompt","text":"hi"}"#);
    let line = lines
        .iter()
        .find(|l| l.starts_with(r#"{"type":"call_model""#))
        .expect("a call_model line");
    let context: CallModelContext = serde_json::from_str(line).expect("a full-context line");
    assert_eq!(context.system_prompt.as_deref(), Some("sys"));
    assert_eq!(context.tools[0].name, "echo");
    let body = anthropic::encode(&context, &Options::new("c"))
        .expect("encodes")
        .body;
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    );

    let mut decoder = anthropic::Decoder::new("thread-1/run-1", 1);
    let mut inputs = decoder.feed(b"data: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"c\"}}\n\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello\"}}\n\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\ndata: {\"type\":\"message_stop\"}\n\n");
    inputs.extend(decoder.finish());
    let mut ended = false;
    for input in &inputs {
        let line = serde_json::to_string(input).expect("serializes");
        let out = driver.handle_line(line.as_bytes());
        assert!(
            !out.iter().any(|l| l.contains(r#""type":"error""#)),
            "{line} → {out:?}"
        );
        ended |= out.iter().any(|l| l.contains("natural_end"));
    }
    assert!(ended);
    assert!(matches!(inputs.last(), Some(Input::ModelDone { .. })));

    let delta = r#"{"type":"call_model","run_id":"r","step":2,"final_step":false,"base":3,"messages":[],"tools":[]}"#;
    assert!(serde_json::from_str::<CallModelContext>(delta).is_err());
}

/// The library path: the agent's request in, its answer back through `Agent::handle`.
#[test]
fn agent_round_trip() {
    use runcore::{Action, Agent, AgentConfig, Output, UserMessage};
    let mut agent = Agent::new(AgentConfig::default()).expect("an agent");
    agent.prompt(UserMessage::text("hi"), 0).expect("a prompt");
    let mut call = None;
    while let Some(output) = agent.poll() {
        if let Output::Action(Action::CallModel { run_id, step, .. }) = output {
            call = Some((run_id, step));
        }
    }
    let (run_id, step) = call.expect("a model call");
    let request = agent.model_request().expect("an outstanding request");
    let context = request.to_call();
    let body = openai_chat::encode(&context, &Options::new("gpt-4o-mini"))
        .expect("encodes")
        .body;
    assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));

    let mut decoder = openai_chat::Decoder::new(run_id, step);
    let mut inputs = decoder.feed(b"data: {\"id\":\"c\",\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    inputs.extend(decoder.finish());
    for input in inputs {
        agent.handle(input, 1).expect("the agent takes it");
        while agent.poll().is_some() {}
    }
    assert!(agent.active_run_id().is_none(), "the run ended");
    let last = agent
        .transcript()
        .last()
        .and_then(Message::as_assistant)
        .expect("the answer");
    assert_eq!(last.model.as_deref(), Some("gpt-4o-mini-2024-07-18"));
}

/// `extra` may replace what the codec built (prompt caching on the system field), never the
/// transcript.
#[test]
fn extra_replaces_all_but_the_transcript() {
    let context = two_call_context("anthropic", "m");
    let mut options = Options::new("m");
    options.extra.insert(
        "system".into(),
        json!([{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]),
    );
    let body = anthropic::encode(&context, &options).expect("encodes").body;
    assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
    for (api, key) in [
        (Api::Anthropic, "messages"),
        (Api::OpenAiChat, "messages"),
        (Api::OpenAiResponses, "input"),
    ] {
        let mut options = Options::new("m");
        options.extra.insert(key.into(), json!([]));
        assert_eq!(
            api.encode(&context, &options),
            Err(EncodeError::ExtraReplacesContext { key: key.into() })
        );
    }
}

/// Every empty text block and every empty `content` in a body, by JSON path.
fn empties(value: &Value, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            let kind = object.get("type").and_then(Value::as_str);
            let text = object.get("text").and_then(Value::as_str);
            if matches!(kind, Some("text" | "input_text" | "output_text"))
                && text.is_some_and(|t| t.trim().is_empty())
            {
                found.push(format!("{path}: empty text block"));
            }
            if object.get("content") == Some(&json!([])) {
                found.push(format!("{path}: empty content"));
            }
            for (key, child) in object {
                empties(child, &format!("{path}.{key}"), found);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                empties(child, &format!("{path}[{index}]"), found);
            }
        }
        _ => {}
    }
}

/// A tool with no output, an empty user message, empty text in system, user and tool-result
/// content: an encoder never sends an empty text block nor an empty message (Anthropic refuses
/// them with 400, SPEC §13); a tool result with no content is the API's empty result.
#[test]
fn a_tool_with_no_output_and_empty_text_are_never_sent_empty() {
    let context = CallModelContext {
        run_id: "run-1".into(),
        step: 1,
        final_step: false,
        system_prompt: None,
        messages: messages(json!([
            {"role": "system", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "rules"}]},
            {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [
                {"type": "tool_call", "id": "c1", "name": "touch", "arguments": {}},
                {"type": "tool_call", "id": "c2", "name": "touch", "arguments": {}}
            ], "stop_reason": "tool_use"},
            {"role": "tool_result", "call_id": "c1", "tool_name": "touch", "content": [], "is_error": false, "outcome": "executed"},
            {"role": "tool_result", "call_id": "c2", "tool_name": "touch", "content": [{"type": "text", "text": ""}], "is_error": false, "outcome": "executed"},
            {"role": "user", "content": []},
            {"role": "user", "content": [{"type": "text", "text": ""}]},
            {"role": "user", "content": [{"type": "text", "text": "next"}]}
        ])),
        tools: vec![],
    };
    for api in Api::ALL {
        let encoded = api.encode(&context, &Options::new("m")).expect("encodes");
        let mut found = Vec::new();
        empties(&encoded.body, "body", &mut found);
        assert_eq!(
            found,
            Vec::<String>::new(),
            "{}: {}",
            api.name(),
            encoded.body
        );
        let left: Vec<_> = encoded
            .left_out
            .iter()
            .map(|l| (l.message, l.what))
            .collect();
        assert!(left.contains(&(5, "message")), "{}: {left:?}", api.name());
    }
    let anthropic = anthropic::encode(&context, &Options::new("m"))
        .unwrap()
        .body;
    assert_eq!(
        anthropic["system"],
        json!([{"type": "text", "text": "rules"}])
    );
    assert_eq!(
        anthropic["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1"},
            {"type": "tool_result", "tool_use_id": "c2"}
        ]})
    );
    assert_eq!(
        anthropic["messages"][3],
        json!({"role": "user", "content": [{"type": "text", "text": "next"}]})
    );
    let chat = openai_chat::encode(&context, &Options::new("m"))
        .unwrap()
        .body;
    assert_eq!(
        chat["messages"][1],
        json!({"role": "user", "content": "go"})
    );
    assert_eq!(
        chat["messages"][3],
        json!({"role": "tool", "tool_call_id": "c1", "content": ""})
    );
    assert_eq!(
        chat["messages"][5],
        json!({"role": "user", "content": "next"})
    );
    assert_eq!(chat["messages"].as_array().map(Vec::len), Some(6));
    let responses = openai_responses::encode(&context, &Options::new("m"))
        .unwrap()
        .body;
    assert_eq!(
        responses["input"][4],
        json!({"type": "function_call_output", "call_id": "c1", "output": ""})
    );
    assert_eq!(responses["input"].as_array().map(Vec::len), Some(7));
}

/// Responses: `detail` on images and `strict` on tools, as the published schema asks.
#[test]
fn responses_images_have_detail_and_tools_strict() {
    let context = CallModelContext {
        run_id: "run-1".into(),
        step: 1,
        final_step: false,
        system_prompt: None,
        messages: messages(json!([
            {"role": "user", "content": [{"type": "image", "data": "AAAA", "mime_type": "image/png"}]}
        ])),
        tools: vec![runcore_providers::ToolDefinition::new("t", None, None)],
    };
    let body = openai_responses::encode(&context, &Options::new("m"))
        .unwrap()
        .body;
    assert_eq!(
        body["input"][0]["content"][0],
        json!({"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"})
    );
    assert_eq!(body["tools"][0]["strict"], json!(false));
}

/// One model-call shape: the agent's owned call serializes byte for byte as the full-context
/// `call_model` line the driver prints (system prompt and tools included), and reads back from
/// it unchanged.
#[test]
fn the_agent_call_is_the_driver_line() {
    let mut driver = Driver::new();
    let config = json!({"type": "config", "system_prompt": "be brief", "tools": {
        "weather": {"description": "the weather", "parameters": {"type": "object"}},
        "ping": {}
    }});
    driver.handle_line(config.to_string().as_bytes());
    let lines = driver.handle_line(br#"{"type":"prompt","text":"hi"}"#);
    let line = lines
        .iter()
        .find(|line| line.contains(r#""type":"call_model""#))
        .expect("a call_model line");
    let call = driver.agent().model_call().expect("an outstanding call");
    assert_eq!(&serde_json::to_string(&call).unwrap(), line);
    let back: runcore::ModelCall = serde_json::from_str(line).unwrap();
    assert_eq!(back, call);
    assert_eq!(call.tools.len(), 2);
}
