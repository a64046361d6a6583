"""Provider codecs (SPEC §13): a `call_model` output to a request body, and a response body
back to inputs, for three APIs, one module each: :mod:`runcore.providers.anthropic` (Messages),
:mod:`runcore.providers.openai_chat` (Chat Completions), :mod:`runcore.providers.openai_responses`
(Responses).

Each has ``encode(call_model, options) -> {"body": ..., "left_out": [...]}`` and a
``Decoder(run_id, step, status=None)`` whose ``feed(bytes)`` returns the inputs the bytes
complete and ``finish()`` the last ones (exactly one ``model_done`` or ``model_failed``), as the
dicts ``agent.handle`` takes. No I/O: the host sends the body and reads the response. The rules
live in the Rust crate ``runcore-providers``; this package only translates.
"""

from runcore.providers import anthropic, openai_chat, openai_responses

__all__ = ["anthropic", "openai_chat", "openai_responses"]
