"""The codec of the Anthropic Messages API (`POST /v1/messages`) (SPEC §13)."""

from runcore.providers._codec_module import codec_module

API = "anthropic"
"""The API's name, as `runcore codec --api` and a decoded message's `meta.codec.api` write it."""

encode, Decoder = codec_module(API, __name__)

__all__ = ["API", "Decoder", "encode"]
