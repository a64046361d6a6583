"""Typing stub shared by the three codec modules (not a runtime module)."""

from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from typing_extensions import Literal, NotRequired, TypedDict

class Options(TypedDict):
    """Request options (SPEC §13); `model` is required."""

    model: str
    max_tokens: NotRequired[int]
    stream: NotRequired[bool]
    reasoning: NotRequired[Any]
    tool_choice: NotRequired[Any]
    extra: NotRequired[Dict[str, Any]]

class LeftOut(TypedDict):
    """A piece of the context the body does not carry, and why."""

    message: int
    block: NotRequired[int]
    what: str
    reason: str

class Encoded(TypedDict):
    """An encoded request: the body to POST and what was left out of it."""

    body: Dict[str, Any]
    left_out: List[LeftOut]

class ModelDeltaInput(TypedDict):
    """A streamed piece of the answer (text or thinking)."""

    type: Literal["model_delta"]
    run_id: str
    step: int
    text: str
    kind: NotRequired[Literal["text", "thinking"]]

class ModelDoneInput(TypedDict):
    """The whole answer: an assistant message with every block, usage and stop reason."""

    type: Literal["model_done"]
    run_id: str
    step: int
    message: Dict[str, Any]

class ModelFailedInput(TypedDict):
    """The call failed: a stable `code` (`rate_limited`, `incomplete_stream`, …) and a message."""

    type: Literal["model_failed"]
    run_id: str
    step: int
    code: str
    message: str
    retry_after_ms: NotRequired[int]

DecodedInput = Union[ModelDeltaInput, ModelDoneInput, ModelFailedInput]
"""An input a decoder yields, in the driver's input-line shape (`Agent.handle` takes it)."""

Headers = Union[
    Mapping[str, str],
    Mapping[bytes, bytes],
    Iterable[Tuple[Union[str, bytes], Union[str, bytes]]],
]
"""A response's headers: a mapping (`httpx.Headers`, `dict`) or `(name, value)` pairs."""

CallModel = Mapping[str, Any]
"""A `call_model` output in full-context mode (`runcore.CallModelOutput`)."""

class BaseDecoder:
    """A stream decoder of one model call's response."""

    @property
    def api(self) -> str: ...
    @property
    def format_error(self) -> Optional[str]: ...
    def feed(self, data: bytes) -> List[DecodedInput]: ...
    def finish(self) -> List[DecodedInput]: ...
