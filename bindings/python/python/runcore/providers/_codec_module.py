"""The runtime shared by the three codec modules (private): each module is its API's name, an
`encode` function and a `Decoder` class, made here for that name."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Tuple

from runcore._runcore import ProviderDecoder as _ProviderDecoder
from runcore._runcore import _provider_encode


def codec_module(api: str, module: str) -> Tuple[Callable[..., Any], type]:
    """`(encode, Decoder)` of the codec of `api`, named as members of `module`."""

    def encode(call_model: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
        """The request body for a `call_model` output (full-context mode, as `Agent.poll()`
        gives it): `{"body": ..., "left_out": [...]}`. `options`: `model` (required),
        `max_tokens`, `stream` (default True), `reasoning`, `tool_choice`, `extra`. Raises
        `runcore.CodecError` for bad options or a context that does not read."""
        return _provider_encode(api, call_model, options)

    class Decoder(_ProviderDecoder):
        """A decoder of one response: `feed(bytes)` in chunks split anywhere, then `finish()`;
        both return input dicts for `Agent.handle` (`model_delta`s, then exactly one
        `model_done` or `model_failed`). `status`: the HTTP status (default 200). `headers`:
        the response's headers (a mapping such as `httpx.Headers`, or `(name, value)` pairs), so
        that a `model_failed` carries `retry_after_ms` (`retry-after`, `retry-after-ms`, the
        rate-limit reset headers); a date in them is a delay from `now_ms`, else the response's
        `date` header, else now."""

        def __new__(
            cls,
            run_id: str,
            step: int,
            status: Optional[int] = None,
            *,
            headers: Any = None,
            now_ms: Optional[int] = None,
        ) -> "Decoder":
            return super().__new__(  # type: ignore[call-arg]
                cls, api, run_id, step, status, headers=headers, now_ms=now_ms
            )

    for member in (encode, Decoder):
        member.__module__ = module
        member.__qualname__ = member.__name__
    return encode, Decoder
