"""`runcore.providers`: the codecs of `runcore-providers` (SPEC §13) from Python. `encode` takes
the `call_model` output as `poll()` gives it; a decoder's inputs go to `agent.handle` as they
are; bad arguments raise `runcore.CodecError`, never crash."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import runcore
from runcore.providers import anthropic, openai_chat, openai_responses

FIXTURES = Path(__file__).resolve().parents[3] / "providers" / "tests" / "fixtures"
MODULES = {"anthropic": anthropic, "openai-chat": openai_chat,
           "openai-responses": openai_responses}
TOOLS = {"add": {"description": "Add x and y together",
                 "parameters": {"type": "object", "properties": {"x": {"type": "number"},
                                                                 "y": {"type": "number"}}}}}
CASSETTE = {
    "anthropic": "anthropic/turn_termination_matrix/streaming_tool_turn_reports_tool_calls",
    "openai-chat": "openai/turn_termination_matrix/streaming_tool_turn_reports_tool_calls",
    "openai-responses":
        "openai/raw_capture_agent_matrix/responses_streamed_tool_run_records_distinct_raw",
}


def exchanges(api: str) -> list:
    with open(FIXTURES / f"{api}.jsonl") as f:
        return [json.loads(line) for line in f]


def cassette(api: str) -> list:
    found = [e for e in exchanges(api) if CASSETTE[api] in e["cassette"]]
    return sorted(found, key=lambda e: e["index"])


def call_model(agent: runcore.Agent) -> dict:
    for out in agent.drain():
        if out["type"] == "call_model":
            return out
    raise AssertionError("no call_model")


@pytest.mark.parametrize("api", list(MODULES))
def test_a_recorded_tool_turn_drives_the_agent(api):
    module = MODULES[api]
    agent = runcore.Agent({"system_prompt": "Use the tool.", "tools": TOOLS})
    run_id = agent.prompt("Calculate 2 + 3.")
    request = call_model(agent)
    encoded = module.encode(request, {"model": "m", "max_tokens": 100})
    assert encoded["left_out"] == []
    body = encoded["body"]
    assert body["stream"] is True
    assert [t.get("name") or t["function"]["name"] for t in body["tools"]] == ["add"]

    recorded = cassette(api)[0]["response"].encode()
    decoder = module.Decoder(run_id, request["step"])
    assert decoder.api == api
    inputs = []
    for i in range(0, len(recorded), 7):  # split anywhere
        inputs += decoder.feed(recorded[i:i + 7])
    inputs += decoder.finish()
    assert decoder.format_error is None
    assert [i["type"] for i in inputs][-1] == "model_done"
    done = inputs[-1]
    assert done["run_id"] == run_id and done["step"] == 1
    assert done["message"]["stop_reason"] == "tool_use"
    assert done["message"]["meta"] == {"codec": {"api": api}}
    [call] = [b for b in done["message"]["content"] if b["type"] == "tool_call"]
    assert call["name"] == "add" and call["arguments"] == {"x": 2, "y": 3}
    for line in inputs:
        agent.handle(line)
    batch = [out for out in agent.drain() if out["type"] == "execute_tools"]
    assert [c["id"] for c in batch[0]["calls"]] == [call["id"]]

    # The second request carries the call and its result, paired.
    agent.tool_done(run_id, call["id"], "5")
    second = module.encode(call_model(agent), {"model": "m"})["body"]
    text = json.dumps(second)
    assert call["id"] in text and '"5"' in text


def test_same_inputs_whatever_the_split():
    body = cassette("openai-chat")[1]["response"].encode()
    whole = openai_chat.Decoder("r", 2)
    expected = whole.feed(body) + whole.finish()
    deltas = [i["text"] for i in expected if i["type"] == "model_delta"]
    assert "".join(deltas).startswith("The result of")
    bytewise = openai_chat.Decoder("r", 2)
    got = []
    for i in range(len(body)):
        got += bytewise.feed(body[i:i + 1])
    assert got + bytewise.finish() == expected


def test_a_cut_stream_is_incomplete_never_a_stop():
    body = cassette("anthropic")[1]["response"].encode()
    decoder = anthropic.Decoder("r", 2)
    inputs = decoder.feed(body[: len(body) // 2]) + decoder.finish()
    assert inputs[-1]["type"] == "model_failed"
    assert inputs[-1]["code"] == "incomplete_stream"
    assert [i["type"] for i in inputs].count("model_failed") == 1


def test_an_error_status_is_a_typed_failure():
    decoder = openai_responses.Decoder("r", 1, status=429)
    assert decoder.feed(b'{"error": {"message": "slow down", "type": "rate_limit"}}') == []
    [failed] = decoder.finish()
    assert failed["type"] == "model_failed" and failed["code"] == "rate_limited"


def test_a_decoder_given_the_headers_carries_retry_after_ms():
    body = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'

    def failed(**options):
        decoder = anthropic.Decoder("r", 1, 429, **options)
        [last] = decoder.feed(body) + decoder.finish()
        assert last["type"] == "model_failed" and last["code"] == "rate_limited"
        return last.get("retry_after_ms")

    assert failed() is None
    assert failed(headers={"Retry-After": "3"}) == 3000
    assert failed(headers=[(b"retry-after-ms", b"1500")]) == 1500
    assert (
        failed(
            headers={
                "anthropic-ratelimit-tokens-remaining": "0",
                "anthropic-ratelimit-tokens-reset": "2026-10-21T07:28:42Z",
                "date": "Wed, 21 Oct 2026 07:28:00 GMT",
            }
        )
        == 42_000
    )
    date = {"retry-after": "Wed, 21 Oct 2026 07:28:30 GMT"}
    assert failed(headers=date, now_ms=1_792_567_700_000) == 10_000
    # The agent takes the line as it is, and model_failed takes it as an argument.
    agent = runcore.Agent()
    agent.prompt("hi")
    request = call_model(agent)
    decoder = anthropic.Decoder(
        request["run_id"], request["step"], 429, headers={"retry-after": "3"}
    )
    for line in decoder.feed(body) + decoder.finish():
        agent.handle(line)
    other = runcore.Agent()
    other.prompt("hi")
    request = call_model(other)
    other.model_failed(request["run_id"], request["step"], "rate_limited", "m", retry_after_ms=3000)
    with pytest.raises(runcore.CodecError):
        anthropic.Decoder("r", 1, 429, headers=5)
    with pytest.raises(runcore.CodecError):
        anthropic.Decoder("r", 1, 429, headers=[("a",)])


def test_a_body_not_of_the_api_is_reported():
    decoder = anthropic.Decoder("r", 1)
    inputs = decoder.feed(b"hello there\n\n") + decoder.finish()
    assert inputs[-1]["type"] == "model_failed"
    assert decoder.format_error is not None and "byte" in decoder.format_error


def test_bad_arguments_raise_codec_error():
    agent = runcore.Agent()
    agent.prompt("hi")
    request = call_model(agent)
    with pytest.raises(runcore.CodecError) as info:
        anthropic.encode(request, {})
    assert info.value.code == "options" and "model" in info.value.message
    with pytest.raises(runcore.CodecError, match="must not be empty"):
        openai_chat.encode(request, {"model": " "})
    with pytest.raises(runcore.CodecError, match="unknown field"):
        openai_chat.encode(request, {"model": "m", "temprature": 0})
    with pytest.raises(runcore.CodecError, match="may not replace"):
        openai_responses.encode(request, {"model": "m", "extra": {"input": []}})
    with pytest.raises(runcore.CodecError) as info:
        anthropic.encode({"type": "call_model", "base": 2, "messages": []}, {"model": "m"})
    assert info.value.code == "call_model" and "full-context" in info.value.message
    with pytest.raises(runcore.CodecError):
        anthropic.encode({"messages": [{"role": "wizard"}]}, {"model": "m"})
    with pytest.raises(runcore.CodecError):
        anthropic.encode(request, {"model": "m", "extra": {"x": object()}})
    with pytest.raises(runcore.CodecError, match="status"):
        anthropic.Decoder("r", 1, status=70000)
    with pytest.raises(runcore.CodecError, match="step"):
        anthropic.Decoder("r", -1)
    decoder = anthropic.Decoder("r", 1)
    decoder.finish()
    with pytest.raises(runcore.CodecError) as info:
        decoder.feed(b"x")
    assert info.value.code == "finished"
    with pytest.raises(runcore.CodecError):
        decoder.finish()
    with pytest.raises(TypeError):
        anthropic.Decoder("r", 1).feed("not bytes")  # type: ignore[arg-type]


def test_every_recorded_body_decodes_to_one_outcome_the_agent_takes():
    for api, module in MODULES.items():
        for exchange in exchanges(api):
            agent = runcore.Agent()
            run_id = agent.prompt("hi")
            step = call_model(agent)["step"]
            decoder = module.Decoder(run_id, step, status=exchange["status"])
            inputs = decoder.feed(exchange["response"].encode()) + decoder.finish()
            ends = [i["type"] for i in inputs if i["type"] != "model_delta"]
            assert ends in (["model_done"], ["model_failed"]), exchange["cassette"]
            for line in inputs:  # thinking deltas, meta, signatures, usage: all accepted
                agent.handle(line)
            assert agent.model_request() is None


def test_any_bytes_any_status_never_crash():
    rng = random.Random(33)
    pieces = [b"data: ", b"event: ", b"\n\n", b"{", b"}", b"[DONE]", b"\xff\xfe", b'"type":',
              b'"message_start"', b'"response.completed"', b'"choices":[', b"\r\n", b"\x00"]
    for case in range(300):
        body = b"".join(rng.choice(pieces) if rng.random() < 0.7 else bytes([rng.randrange(256)])
                        for _ in range(rng.randrange(40)))
        status = rng.choice([None, 200, 201, 400, 429, 500, 529])
        module = rng.choice(list(MODULES.values()))
        decoder = module.Decoder("r", 1, status=status)
        inputs = []
        for i in range(0, len(body), 3):
            inputs += decoder.feed(body[i:i + 3])
        inputs += decoder.finish()
        ends = [i["type"] for i in inputs if i["type"] != "model_delta"]
        assert ends in (["model_done"], ["model_failed"]), (case, body)
