"""Typing stub of `runcore.providers.openai_chat`: the `openai-chat` codec (SPEC §13)."""

from typing import Optional

from typing_extensions import Literal

from runcore.providers._codec import BaseDecoder, CallModel, Encoded, Headers, Options

API: Literal["openai-chat"]

def encode(call_model: CallModel, options: Options) -> Encoded: ...

class Decoder(BaseDecoder):
    """A decoder of one `openai-chat` response: `feed(bytes)`, then `finish()`."""

    def __new__(
        cls,
        run_id: str,
        step: int,
        status: Optional[int] = None,
        *,
        headers: Optional[Headers] = None,
        now_ms: Optional[int] = None,
    ) -> "Decoder": ...

__all__ = ["API", "Decoder", "encode"]
