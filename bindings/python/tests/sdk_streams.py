"""The official SDKs' own stream accumulators (`anthropic`, `openai`) run offline over recorded
bytes, and runcore's decoders over the same bytes, each summarised the same way: the answer's
text, its tool calls, its stop reason and its usage. Shared by the differential test and the
benchmark (bindings/python/benches/decode_vs_sdk.py)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from runcore.providers import anthropic as rc_anthropic
from runcore.providers import openai_chat as rc_chat
from runcore.providers import openai_responses as rc_responses

try:  # the SDKs' HTTP library: httpx2 in recent releases, httpx before
    import httpx2 as sdk_httpx  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    import httpx as sdk_httpx  # type: ignore[no-redef]

DECODERS = {"anthropic": rc_anthropic.Decoder, "openai-chat": rc_chat.Decoder,
            "openai-responses": rc_responses.Decoder}

Summary = Dict[str, Any]


def fake_response(body: bytes, content_type: str = "text/event-stream") -> Any:
    """An HTTP response over `body`, as the SDK's client would hand its stream (no network)."""
    request = sdk_httpx.Request("POST", "http://127.0.0.1:9/v1/x")
    return sdk_httpx.Response(200, headers={"content-type": content_type}, content=body,
                              request=request)


_CLIENTS: Dict[str, Any] = {}


def client(api: str) -> Any:
    """An SDK client that is never asked to send anything (the streams need one)."""
    if api not in _CLIENTS:
        if api == "anthropic":
            import anthropic

            _CLIENTS[api] = anthropic.Anthropic(api_key="offline", base_url="http://127.0.0.1:9")
        else:
            import openai

            _CLIENTS[api] = openai.OpenAI(api_key="offline", base_url="http://127.0.0.1:9")
    return _CLIENTS[api]


def sdk_final(api: str, body: bytes) -> Any:
    """The SDK's accumulated final object for a streamed body (its own stream classes)."""
    if api == "anthropic":
        from anthropic import Stream
        from anthropic.lib.streaming import MessageStream
        from anthropic.types import RawMessageStreamEvent

        raw = Stream(cast_to=RawMessageStreamEvent, response=fake_response(body),
                     client=client(api))
        from anthropic import NOT_GIVEN

        return MessageStream(raw, output_format=NOT_GIVEN).get_final_message()
    from openai import Stream as OpenAIStream
    from openai import omit

    if api == "openai-chat":
        from openai.lib.streaming.chat import ChatCompletionStreamState
        from openai.types.chat import ChatCompletionChunk

        # The accumulator `ChatCompletionStream` runs, read as its snapshot: its
        # `get_final_completion()` also parses content and raises on a `length` answer.
        raw = OpenAIStream(cast_to=ChatCompletionChunk, response=fake_response(body),
                           client=client(api))
        state: Any = ChatCompletionStreamState(response_format=omit, input_tools=omit)
        for chunk in raw:
            state.handle_chunk(chunk)
        return state.current_completion_snapshot
    from openai.lib.streaming.responses import ResponseStream
    from openai.types.responses import ResponseStreamEvent

    raw = OpenAIStream(cast_to=ResponseStreamEvent, response=fake_response(body),
                       client=client(api))
    return ResponseStream(raw_stream=raw, text_format=omit, input_tools=omit,
                          starting_after=None).get_final_response()


def _args(text: Any) -> Any:
    if isinstance(text, dict):
        return text
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def sdk_summary(api: str, body: bytes) -> Summary:
    """Text, tool calls, stop reason and usage of the SDK's final object."""
    final = sdk_final(api, body)
    if api == "anthropic":
        usage = final.usage
        return {
            "text": "".join(b.text for b in final.content if b.type == "text"),
            "tool_calls": [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"],
            "stop_reason": final.stop_reason,
            "input_tokens": (usage.input_tokens + (usage.cache_creation_input_tokens or 0)
                             + (usage.cache_read_input_tokens or 0)),
            "output_tokens": usage.output_tokens,
        }
    if api == "openai-chat":
        choice = final.choices[0]
        calls = choice.message.tool_calls or []
        usage = final.usage
        return {
            "text": choice.message.content or "",
            "tool_calls": [(c.id, c.function.name, _args(c.function.arguments)) for c in calls],
            "stop_reason": choice.finish_reason,
            "input_tokens": usage.prompt_tokens if usage else None,
            "output_tokens": usage.completion_tokens if usage else None,
        }
    text = ""
    calls = []
    for item in final.output:
        if item.type == "message":
            text += "".join(p.text for p in item.content if p.type == "output_text")
        elif item.type == "function_call":
            calls.append((item.call_id, item.name, _args(item.arguments)))
    usage = final.usage
    reason = final.status
    if final.incomplete_details is not None and final.incomplete_details.reason:
        reason = final.incomplete_details.reason
    return {
        "text": text,
        "tool_calls": calls,
        "stop_reason": reason,
        "input_tokens": usage.input_tokens if usage else None,
        "output_tokens": usage.output_tokens if usage else None,
    }


def our_inputs(api: str, body: bytes) -> List[Dict[str, Any]]:
    """runcore's inputs for the body."""
    decoder = DECODERS[api]("r", 1)
    return decoder.feed(body) + decoder.finish()


def our_summary(api: str, body: bytes) -> Optional[Summary]:
    """Text, tool calls, stop reason and usage of runcore's `model_done` (None if it failed)."""
    last = our_inputs(api, body)[-1]
    if last["type"] != "model_done":
        return None
    message = last["message"]
    usage = message.get("usage") or {}
    reason = message.get("provider_stop_reason")
    return {
        "text": "".join(b["text"] for b in message["content"] if b["type"] == "text"),
        "tool_calls": [(b["id"], b["name"], b["arguments"]) for b in message["content"]
                       if b["type"] == "tool_call"],
        "stop_reason": reason,
        "input_tokens": usage.get("input_tokens") if usage else None,
        "output_tokens": usage.get("output_tokens") if usage else None,
    }
