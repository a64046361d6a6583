"""Differential test against the official SDKs: every recorded streamed body
(`providers/tests/fixtures/*.jsonl`, status 200, SSE) is fed to runcore's decoder and, offline,
to the SDK's own stream accumulator (`anthropic`'s `MessageStream`, `openai`'s
`ChatCompletionStreamState` and `ResponseStream`, over a fake HTTP response holding the bytes).
The answer's text, tool calls (id, name, parsed arguments), stop reason (the provider's word:
runcore keeps it in `provider_stop_reason`) and usage agree on every fixture, except the
differences listed in KNOWN, each with why."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

import pytest

from conftest import require
from mock_provider import FIXTURES

require("anthropic")
require("openai")

from sdk_streams import our_inputs, our_summary, sdk_final, sdk_summary  # noqa: E402

APIS = ["anthropic", "openai-chat", "openai-responses"]

# (api, cassette file name, index) -> why runcore and the SDK differ on that recording.
REFUSAL = ("runcore has no refusal block: Chat's `refusal` deltas are the answer's text (the "
           "codec reads `content` and `refusal` alike); the SDK keeps them in "
           "`message.refusal` and leaves `content` empty. The test checks the SDK's refusal "
           "is exactly our text.")
INCOMPLETE = ("the stream ends in `response.incomplete`, not `response.completed`: the SDK's "
              "`ResponseStream.get_final_response()` raises RuntimeError (\"Didn't receive a "
              "`response.completed` event\"); runcore yields `model_done` with stop_reason "
              "`length` and provider_stop_reason `max_output_tokens` (SPEC §13). The test checks "
              "ours.")
KNOWN: Dict[Tuple[str, str, int], str] = {
    ("openai-chat", "chat_streaming_and_blocking_each_deliver_their_refusal_in_full.yaml", 1):
        REFUSAL,
    ("openai-chat", "chat_streaming_raw_model_surfaces_refusal.yaml", 0): REFUSAL,
    ("openai-responses", "incomplete_max_output_tokens.yaml", 0): INCOMPLETE,
    ("openai-responses", "incomplete_mid_tool_call.yaml", 0): INCOMPLETE,
    ("openai-responses", "responses_streaming_reasoning_budget_exhausted.yaml", 0): INCOMPLETE,
}


def streamed(api: str) -> List[Dict[str, Any]]:
    with open(FIXTURES / f"{api}.jsonl") as f:
        exchanges = [json.loads(line) for line in f]
    return [e for e in exchanges
            if e["status"] == 200 and e["content_type"].startswith("text/event-stream")]


def key(exchange: Dict[str, Any]) -> Tuple[str, str, int]:
    return (exchange["api"], exchange["cassette"].rsplit("/", 1)[-1], exchange["index"])


@pytest.mark.parametrize("api", APIS)
def test_our_decoder_agrees_with_the_sdk_accumulator(api):
    differences = {}
    compared = 0
    for exchange in streamed(api):
        body = exchange["response"].encode()
        try:
            theirs = sdk_summary(api, body)
        except Exception as error:  # noqa: BLE001 - the SDK refusing a body is a difference
            theirs = {"sdk_error": f"{type(error).__name__}: {error}"}
        ours = our_summary(api, body)
        if ours is None:
            last = our_inputs(api, body)[-1]
            ours = {"model_failed": last["code"]}
        if ours != theirs:
            fields = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
            differences[key(exchange)] = (fields, ours, theirs)
            why = KNOWN.get(key(exchange))
            if why == REFUSAL:
                assert fields == ["text"] and theirs["text"] == ""
                assert sdk_final(api, body).choices[0].message.refusal == ours["text"]
            elif why == INCOMPLETE:
                assert "sdk_error" in theirs and "response.completed" in theirs["sdk_error"]
                done = our_inputs(api, body)[-1]
                assert done["type"] == "model_done"
                assert done["message"]["stop_reason"] == "length"
                assert done["message"]["provider_stop_reason"] == "max_output_tokens"
        else:
            compared += 1
    unexplained = {k: v for k, v in differences.items() if k not in KNOWN}
    assert unexplained == {}, json.dumps({str(k): v for k, v in unexplained.items()}, indent=1,
                                         default=str)[:6000]
    stale = [k for k in KNOWN if k[0] == api and k not in differences]
    assert stale == []
    assert compared >= 40
