"""The codec of the Anthropic Messages API (`POST /v1/messages`) (SPEC §13)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from runcore._runcore import ProviderDecoder as _ProviderDecoder
from runcore._runcore import _provider_encode

API = "anthropic"
"""The API's name, as `runcore codec --api` and a decoded message's `meta.codec.api` write it."""


def encode(call_model: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """The request body for a `call_model` output (full-context mode, as `Agent.poll()` gives
    it): `{"body": ..., "left_out": [...]}`. `options`: `model` (required), `max_tokens`,
    `stream` (default True), `reasoning`, `tool_choice`, `extra`. Raises
    `runcore.CodecError` for bad options or a context that does not read."""
    return _provider_encode(API, call_model, options)


class Decoder(_ProviderDecoder):
    """A decoder of one response: `feed(bytes)` in chunks split anywhere, then `finish()`;
    both return input dicts for `Agent.handle` (`model_delta`s, then exactly one
    `model_done` or `model_failed`). `status`: the HTTP status (default 200)."""

    def __new__(cls, run_id: str, step: int, status: Optional[int] = None) -> "Decoder":
        return super().__new__(cls, API, run_id, step, status)  # type: ignore[call-arg]


__all__ = ["API", "Decoder", "encode"]
