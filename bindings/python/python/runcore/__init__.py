"""runcore: the deterministic, sans-IO core of AI agent runs, for Python hosts.

The core decides *what happens next*; your host does every piece of I/O. Call one input
method on an :class:`Agent`, then poll its outputs until there are none, acting on each in
order: persist a ``commit`` before anything after it, show an ``event``, answer a
``call_model`` or ``execute_tools`` action with the matching outcome input.

Outputs are the dicts ``runcore drive`` prints (SPEC §12); inputs take the same fields as
keyword arguments. Misuse raises an :class:`AgentError` subclass and leaves the agent
unchanged.
"""

from runcore._runcore import (
    Agent,
    AgentError,
    BusyError,
    ClaimHeld,
    CodecError,
    Drain,
    Driver,
    DuplicateOutcomeError,
    InternalError,
    InvalidInputError,
    InvalidJsonError,
    InvalidStateError,
    MemoryStore,
    NotAcceptingError,
    NotExpiredError,
    PostgresStore,
    ResumeError,
    SnapshotError,
    SqliteStore,
    Store,
    StoreError,
    UnexpectedOutcomeError,
    UnknownCallError,
    __version__,
    approve,
    deny,
    sweep,
    trace,
)
from runcore import providers  # noqa: E402  (runcore.providers.anthropic, …)

__all__ = [
    "Agent",
    "AgentError",
    "BusyError",
    "ClaimHeld",
    "CodecError",
    "Drain",
    "Driver",
    "DuplicateOutcomeError",
    "InternalError",
    "InvalidInputError",
    "InvalidJsonError",
    "InvalidStateError",
    "MemoryStore",
    "NotAcceptingError",
    "NotExpiredError",
    "PostgresStore",
    "ResumeError",
    "SnapshotError",
    "SqliteStore",
    "Store",
    "StoreError",
    "UnexpectedOutcomeError",
    "UnknownCallError",
    "__version__",
    "approve",
    "deny",
    "sweep",
    "trace",
]
