"""Typing stub of `runcore.providers`: the provider codecs (SPEC §13), one module per API."""

from runcore.providers import anthropic as anthropic
from runcore.providers import openai_chat as openai_chat
from runcore.providers import openai_responses as openai_responses

__all__ = ["anthropic", "openai_chat", "openai_responses"]
