"""Typing stub of the `runcore` package (kept in sync with the native module by
`tests/test_stub.py`). Dict shapes are the JSON shapes of SPEC §12: every output is the object
`runcore drive` prints."""

from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from typing_extensions import Literal, NotRequired, TypedDict

from runcore import providers as providers

__version__: str

# ----- JSON shapes ----------------------------------------------------------------------------

JSON = Any
"""A JSON value: dict, list, str, int, float, bool or None."""

ContentBlock = Dict[str, Any]
"""`{"type": "text", "text"}`, `{"type": "image", "data", "mime_type"}`, `{"type": "thinking",
"thinking", "signature"?}`, `{"type": "redacted_thinking", "data"}` or `{"type": "tool_call",
"id", "name", "arguments"}`; every assistant block may carry `"meta"` (a dict the core keeps and
returns exactly, SPEC §2.1)."""

class Usage(TypedDict):
    """Token usage (SPEC §2.1): `input_tokens` counts every prompt token, cached ones included."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: NotRequired[int]
    cache_write_tokens: NotRequired[int]
    reasoning_tokens: NotRequired[int]

Message = Dict[str, Any]
"""A message (SPEC §2): `{"role": "user" | "assistant" | "system" | "tool_result", ...}`."""

Content = Union[str, Sequence[ContentBlock]]
"""Tool output content: a string (one text block) or content blocks."""

class AssistantMessage(TypedDict):
    """What `model_done` takes: the model's answer."""

    content: List[ContentBlock]
    stop_reason: Literal["stop", "length", "tool_use", "error", "aborted"]
    role: NotRequired[Literal["assistant"]]
    error_message: NotRequired[str]
    usage: NotRequired[Usage]
    id: NotRequired[str]
    model: NotRequired[str]
    response_id: NotRequired[str]
    provider_stop_reason: NotRequired[str]
    meta: NotRequired[Dict[str, Any]]

class ToolCall(TypedDict):
    """One call of an `execute_tools` batch."""

    id: str
    name: str
    arguments: JSON

class ToolDefinition(TypedDict):
    """A tool as `call_model` lists it."""

    name: str
    description: NotRequired[str]
    parameters: NotRequired[JSON]

class AuditDraft(TypedDict):
    """An audit event inside a commit."""

    kind: str
    payload: JSON

class ThreadCommit(TypedDict):
    """The one write unit (SPEC §6)."""

    schema_version: int
    thread_id: str
    run: Dict[str, Any]
    messages: List[Message]
    state: List[Dict[str, Any]]
    events: List[AuditDraft]

class CommitOutput(TypedDict):
    """Persist this commit (fenced: SPEC §7.1) before acting on anything after it."""

    type: Literal["commit"]
    commit: ThreadCommit
    ordinal: int
    expected_thread_version: int
    payload_hash: str

class EventOutput(TypedDict):
    """A notification: `run_start`, `loop` (with its `event`) or `run_end`."""

    type: Literal["event"]
    event: Dict[str, Any]

class CallModelOutput(TypedDict):
    """Call the model with this context; answer with `model_done` or `model_failed`."""

    type: Literal["call_model"]
    run_id: str
    step: int
    final_step: bool
    system_prompt: NotRequired[str]
    base: NotRequired[int]
    messages: List[Message]
    tools: List[ToolDefinition]

class ExecuteToolsOutput(TypedDict):
    """Run these calls (concurrently if you like); answer each with `tool_done`."""

    type: Literal["execute_tools"]
    run_id: str
    step: int
    calls: List[ToolCall]

Output = Union[CommitOutput, EventOutput, CallModelOutput, ExecuteToolsOutput]
"""What `Agent.poll()` returns."""

class ErrorBody(TypedDict):
    """An error line's body: `kind`, `message` and the error's own fields."""

    kind: str
    message: str

class ErrorOutput(TypedDict):
    """The input line was rejected; nothing changed."""

    type: Literal["error"]
    line: int
    error: ErrorBody

class IdleOutput(TypedDict):
    """The last line written for input line `line`."""

    type: Literal["idle"]
    line: int
    timeout_ms: NotRequired[int]

DriverOutput = Union[Output, ErrorOutput, IdleOutput]
"""What `Driver.send()` returns, line by line (and `Driver.startup`)."""

class ResumeTicket(TypedDict):
    """What an awaiting run waits on (SPEC §4)."""

    correlation_id: str
    run_id: str
    thread_id: str
    snapshot_id: str
    catalog_fingerprint: str
    target: Dict[str, Any]
    deadline_ms: Optional[int]

class RunRecord(TypedDict):
    """A run as the store knows it."""

    id: str
    thread_id: str
    state: Dict[str, Any]
    commits: int

class ThreadSummary(TypedDict):
    """One thread in `Store.threads()`."""

    thread_id: str
    version: int
    latest_run: Optional[RunRecord]

class EventRecord(TypedDict):
    """A committed audit event."""

    sequence: int
    commit_sequence: int
    thread_id: str
    run_id: str
    kind: str
    payload: JSON

class TranscriptSnapshotRef(TypedDict):
    """A pinned committed prefix of a thread's transcript."""

    thread_id: str
    end: int
    digest: str

class CommitRecord(TypedDict):
    """Where a commit landed."""

    sequence: int
    thread_version: int

class CommitReceipt(TypedDict):
    """The receipt of a fenced commit; `duplicate` when a retry found it already stored."""

    operation_id: Dict[str, Any]
    payload_hash: str
    record: CommitRecord
    duplicate: bool

EventScope = Dict[str, Any]
"""`{"type": "all"}`, `{"type": "thread", "id": THREAD}` or `{"type": "run", "id": RUN}`."""

# ----- the agent ------------------------------------------------------------------------------

class Agent:
    """One agent per thread: call one input method, then `poll()` until `None`."""

    def __init__(self, config: Optional[Mapping[str, Any]] = None) -> None: ...
    def handle(self, line: Union[Mapping[str, Any], str]) -> None: ...
    def prompt(
        self, text: Union[str, Sequence[Mapping[str, Any]]], *, run_id: Optional[str] = None,
        now_ms: Optional[int] = None,
    ) -> str: ...
    def import_messages(
        self, messages: Sequence[Mapping[str, Any]], *, now_ms: Optional[int] = None
    ) -> str: ...
    def steer(self, text: str, *, now_ms: Optional[int] = None) -> None: ...
    def follow_up(self, text: str, *, now_ms: Optional[int] = None) -> None: ...
    def abort(self, *, now_ms: Optional[int] = None) -> None: ...
    def pause(self, *, now_ms: Optional[int] = None) -> None: ...
    def clear_queues(self, *, now_ms: Optional[int] = None) -> None: ...
    def set_queue_modes(
        self, steering_mode: Optional[Literal["all", "one_at_a_time"]] = None,
        follow_up_mode: Optional[Literal["all", "one_at_a_time"]] = None, *,
        now_ms: Optional[int] = None,
    ) -> None: ...
    def model_delta(
        self, run_id: str, step: int, text: str, *, kind: Literal["text", "thinking"] = "text",
        now_ms: Optional[int] = None,
    ) -> None: ...
    def model_done(
        self, run_id: str, step: int, message: Union[AssistantMessage, Mapping[str, Any]], *,
        now_ms: Optional[int] = None,
    ) -> None: ...
    def model_failed(
        self, run_id: str, step: int, code: str, message: str, *,
        retry_after_ms: Optional[int] = None, now_ms: Optional[int] = None,
    ) -> None: ...
    def tool_progress(
        self, run_id: str, call_id: str, content: Content, *, now_ms: Optional[int] = None
    ) -> None: ...
    def tool_done(
        self, run_id: str, call_id: str, content: Content, *, is_error: bool = False,
        details: JSON = None, meta: Optional[Mapping[str, Any]] = None,
        now_ms: Optional[int] = None,
    ) -> None: ...
    def resume(self, command: Mapping[str, Any], *, now_ms: Optional[int] = None) -> None: ...
    def resume_ticket(self, result: Mapping[str, Any], *, now_ms: Optional[int] = None) -> None: ...
    def cancel_wait(self, *, now_ms: Optional[int] = None) -> None: ...
    def stop(self, reason: str, *, now_ms: Optional[int] = None) -> None: ...
    def expire_wait(self, now_ms: int) -> None: ...
    def abandon_tools(self, *, now_ms: Optional[int] = None) -> None: ...
    def handle_timeout(self, now_ms: int) -> None: ...
    def continue_run(self, *, now_ms: Optional[int] = None) -> str: ...
    def compact(
        self, summary: Union[str, Sequence[ContentBlock], Mapping[str, Any]], keep_from: int, *,
        now_ms: Optional[int] = None,
    ) -> None: ...
    def poll_timeout(self) -> Optional[int]: ...
    def poll(self) -> Optional[Output]: ...
    def drain(self) -> Drain: ...
    def model_request(self) -> Optional[CallModelOutput]: ...
    def snapshot(self) -> str: ...
    @classmethod
    def restore(cls, snapshot: str, *, context: Optional[Literal["full", "delta"]] = None) -> Agent: ...
    @classmethod
    def recover(
        cls, store: Store, thread_id: str, policy: Literal["replay", "seal"] = "replay", *,
        config: Optional[Mapping[str, Any]] = None,
    ) -> Agent: ...
    def current_ticket(self) -> Optional[ResumeTicket]: ...
    def transcript(self) -> List[Message]: ...
    @property
    def thread_id(self) -> str: ...
    @property
    def active_run_id(self) -> Optional[str]: ...
    @property
    def clock_ms(self) -> int: ...
    @property
    def context_start(self) -> int: ...
    @property
    def is_idle(self) -> bool: ...

class Drain:
    """The lazy iterator of `Agent.drain()`."""

    def __iter__(self) -> Iterator[Output]: ...
    def __next__(self) -> Output: ...

# ----- the driver -----------------------------------------------------------------------------

class Driver:
    """`runcore drive` in process: `send(line)` returns the lines the binary writes.

    With `store=` it is `runcore drive --store` (SPEC §12.2) on the config's `thread_id`:
    construction recovers the thread under `policy` and `startup` holds the lines written
    before any input (ending with `{"type": "idle", "line": 0}`); every commit is stored
    before `send` returns its line; a refused commit is one `store` error dict, after which
    the driver is `closed` and `send` raises `StoreError`.

    With `owner=` or `lease_ms=` as well it is `runcore drive --store --owner` (SPEC §12.4):
    it claims the thread first (a thread another owner holds raises `ClaimHeld`), renews
    the claim before each `send` (or at `tick()`), and releases it at `close()`, at the end
    of a `with` block or at garbage collection. A lost claim makes `send` return the one
    `claim_lost` store error dict; the driver is then closed."""

    def __init__(
        self,
        config: Optional[Mapping[str, Any]] = None,
        store: Optional[Store] = None,
        *,
        policy: Literal["replay", "seal"] = "replay",
        owner: Optional[str] = None,
        lease_ms: Optional[int] = None,
    ) -> None: ...
    def __enter__(self) -> Driver: ...
    def __exit__(self, exc_type: object, exc_value: object, traceback: object) -> bool: ...
    def tick(self) -> List[DriverOutput]: ...
    def close(self) -> None: ...
    def release(self) -> None: ...
    @property
    def claim(self) -> Optional[Claim]: ...
    @property
    def renew_at_ms(self) -> Optional[int]: ...
    def send(self, line: Union[str, bytes, Mapping[str, Any]]) -> List[DriverOutput]: ...
    def send_raw(self, line: Union[str, bytes, Mapping[str, Any]]) -> List[str]: ...
    @staticmethod
    def from_agent(agent: Agent) -> Driver: ...
    def snapshot(self) -> str: ...
    @property
    def startup(self) -> List[DriverOutput]: ...
    @property
    def closed(self) -> bool: ...
    @property
    def lines_handled(self) -> int: ...
    @property
    def context(self) -> Literal["full", "delta"]: ...

# ----- stores ---------------------------------------------------------------------------------

class Claim(TypedDict):
    """A granted thread claim (SPEC §7.2); times in store time (Unix-epoch ms)."""

    thread_id: str
    owner: str
    epoch: int
    expires_at_ms: int

class DueWork(TypedDict):
    """One line of `runcore due --json` (SPEC §12.4): `reason` is `{"type": "deadline",
    "deadline_ms"}` or `{"type": "orphaned", "claim_expired_at_ms"}`."""

    thread_id: str
    run_id: str
    reason: Dict[str, Any]

class SweepItem(TypedDict):
    """One line of `runcore sweep` (SPEC §12.4)."""

    thread_id: str
    run_id: str
    reason: Literal["deadline", "orphaned"]
    action: Literal["expired", "sealed", "left", "skipped"]
    detail: NotRequired[str]

class Answered(TypedDict):
    """What `approve` / `deny` committed: the thread's version after the answer."""

    thread_id: str
    version: int

class ThreadAsOf(TypedDict):
    """A thread as of one of its versions (SPEC §8.10)."""

    thread_id: str
    version: int
    commit_sequence: int
    messages: List[Message]

class ForkOrigin(TypedDict):
    """The parent a thread was forked from, and at which version."""

    thread_id: str
    version: int

class Forked(TypedDict):
    """What `Store.fork` committed: the new thread, its version, and its origin."""

    thread_id: str
    version: int
    forked_from: ForkOrigin

class Store:
    """The commit log and read ports of a store (SPEC §7, §7.1)."""

    @staticmethod
    def open(url: str, *, create: bool = True) -> "Store":
        """Opens the store at `url` (`sqlite:PATH`, `postgres://…`) through the backend
        registry; `create=False` refuses a place that holds no runcore store."""
        ...

    def commit(self, output: Union[CommitOutput, Mapping[str, Any]]) -> Union[CommitReceipt, CommitRecord]: ...
    def committed_messages(self, thread_id: str) -> List[Message]: ...
    def run(self, run_id: str) -> Optional[RunRecord]: ...
    def latest_run(self, thread_id: str) -> Optional[RunRecord]: ...
    def resume_ticket(self, run_id: str) -> Optional[ResumeTicket]: ...
    def run_state(self, run_id: str) -> Optional[Dict[str, Any]]: ...
    def committed_state(self, thread_id: str) -> List[Dict[str, Any]]: ...
    def thread_version(self, thread_id: str) -> int: ...
    def thread_as_of(self, thread_id: str, version: int) -> Optional[ThreadAsOf]: ...
    def fork(
        self, thread_id: str, at_version: int, new_thread_id: str, *, now_ms: Optional[int] = None
    ) -> Forked: ...
    def forked_from(self, thread_id: str) -> Optional[ForkOrigin]: ...
    def threads(self, after: Optional[str] = None, limit: int = 100) -> List[ThreadSummary]: ...
    def pending_tickets(self, after: Optional[str] = None, limit: int = 100) -> List[ResumeTicket]: ...
    def list_events(
        self, scope: Optional[EventScope] = None, after: Optional[int] = None, limit: int = 100
    ) -> List[EventRecord]: ...
    def transcript_snapshot(self, thread_id: str) -> TranscriptSnapshotRef: ...
    def verify_transcript_snapshot(self, snapshot: TranscriptSnapshotRef) -> None: ...
    def transcript_slice(
        self, snapshot: TranscriptSnapshotRef, ranges: Sequence[Tuple[int, int]]
    ) -> List[Message]: ...
    def claim_thread(
        self, thread_id: str, owner: str, request_id: str, lease_ms: int, now_ms: Optional[int] = None
    ) -> Claim: ...
    def renew_claim(self, claim: Claim, lease_ms: int, now_ms: Optional[int] = None) -> Claim: ...
    def release_claim(self, claim: Claim, now_ms: Optional[int] = None) -> None: ...
    def thread_claim(self, thread_id: str, now_ms: Optional[int] = None) -> Optional[Claim]: ...
    def due_work(self, now_ms: Optional[int] = None, limit: int = 100) -> List[DueWork]: ...

class MemoryStore(Store):
    """The in-memory reference store."""

    def __init__(self) -> None: ...

class SqliteStore(Store):
    """A store in one SQLite file (created if missing; its directory must exist)."""

    def __init__(self, path: str, *, synchronous: Literal["full", "normal"] = "full") -> None: ...
    @property
    def path(self) -> str: ...

class PostgresStore(Store):
    """A store in a PostgreSQL database (`postgres://` / `postgresql://` URL)."""

    def __init__(self, url: str, *, schema: Optional[str] = None) -> None: ...
    @property
    def schema(self) -> Optional[str]: ...

# ----- errors ---------------------------------------------------------------------------------

class AgentError(Exception):
    """An input the agent rejected (SPEC §10); the agent is unchanged."""

    kind: str
    message: str
    details: Dict[str, Any]

class BusyError(AgentError):
    """`prompt` while a run is active."""

    active_run: str

class NotAcceptingError(AgentError):
    """`steer` / `follow_up` while idle or after input closed."""

    reason: str

class UnexpectedOutcomeError(AgentError):
    """An outcome for another run, step, or nothing outstanding."""

    expected: str
    got: str

class UnknownCallError(AgentError):
    """`tool_done` for a call not in the executing batch."""

    call_id: str
    executing: List[str]

class DuplicateOutcomeError(AgentError):
    """A second `tool_done` for the same call."""

    call_id: str

class ResumeError(AgentError):
    """A resume failing SPEC §4; `resume_error` names the check."""

    resume_error: str

class InvalidStateError(AgentError):
    """An input that means nothing now."""

    expected: str
    actual: str

class NotExpiredError(AgentError):
    """`expire_wait` too early (or for a wait without a deadline)."""

    deadline_ms: Optional[int]
    now_ms: int

class InvalidInputError(AgentError):
    """A structurally bad input."""

    reason: str

class InvalidJsonError(AgentError):
    """Arguments that do not make a valid input line."""

class InternalError(AgentError):
    """A runcore bug (a Rust panic included)."""

class StoreError(Exception):
    """A store call failed; `.reason` is the rejection's code (e.g. "version_conflict"),
    "transcript", "unavailable", or "open" for a store that cannot be opened (the `reason` of
    the store error body); `.code` is the same, its older name. A closed durable `Driver`
    raises it from `send` with the code of the commit its store refused."""

    reason: str
    code: str
    message: str

class CodecError(Exception):
    """A provider codec (`runcore.providers`) refused its arguments. `.code`: "options" (bad
    options), "call_model" (not a full-context `call_model` output), "api" (unknown API) or
    "finished" (a decoder used after `finish()`)."""

    code: str
    message: str

class ClaimHeld(StoreError):
    """Another owner holds the thread's claim, live (code "claim_held")."""

    owner: str
    expires_at_ms: int
    thread_id: Optional[str]

class SnapshotError(Exception):
    """A snapshot that cannot be restored; `.kind`: newer_version, unsupported_version, malformed, inconsistent."""

    kind: str
    message: str

# ----- claims and due work (SPEC §7.2, §12.4, §12.5) -------------------------------------------

def sweep(
    store: Store,
    *,
    owner: Optional[str] = None,
    limit: int = 1000,
    policy: Literal["replay", "seal"] = "replay",
) -> List[SweepItem]: ...
def approve(store: Store, run_id: str, note: Optional[str] = None, *, owner: Optional[str] = None) -> Answered: ...
def deny(store: Store, run_id: str, reason: Optional[str] = None, *, owner: Optional[str] = None) -> Answered: ...

# ----- traces (SPEC §14) -------------------------------------------------------------------------

def trace(
    store: Store, thread_id: str, *, run_id: Optional[str] = None, content: bool = False
) -> Dict[str, Any]:
    """The thread's spans derived from its commits, as the OTLP/JSON export body
    (`{"resourceSpans": [...]}`), as `runcore trace THREAD --json` prints it."""
    ...
