"""`runcore.Driver(store=...)`: `runcore drive --store` in process (SPEC §12.2). Recovery at
construction (`startup`, ending with idle 0), every commit stored before `send` returns its
line, and a refused commit as one `store` error dict after which the driver is closed."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Callable, List

import pytest

import runcore
from conftest import runcore_binary
from test_stores import postgres_url

CONFIG = {"tools": {"weather": {"description": "Weather in a city"}}}
THREAD = "thread-1"
IDLE_0 = {"type": "idle", "line": 0}


def prompt(text: str, **fields) -> dict:
    return dict({"type": "prompt", "text": text, "now_ms": 1000}, **fields)


def reply(out: dict) -> dict:
    """The host's answer to an action: a scripted model that asks for the weather once, then
    answers; a weather tool."""
    if out["type"] == "execute_tools":
        call = out["calls"][0]
        return {"type": "tool_done", "run_id": out["run_id"], "call_id": call["id"],
                "content": "18 C, sunny"}
    assert out["type"] == "call_model", out
    if out["step"] == 1:
        content = [{"type": "tool_call", "id": "c1", "name": "weather",
                    "arguments": {"city": "Paris"}}]
        message = {"role": "assistant", "content": content, "stop_reason": "tool_use"}
    else:
        message = {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}],
                   "stop_reason": "stop"}
    return {"type": "model_done", "run_id": out["run_id"], "step": out["step"],
            "message": message}


def action(lines: List[dict]) -> dict:
    actions = [o for o in lines if o["type"] in ("call_model", "execute_tools")]
    assert len(actions) == 1, lines
    return actions[0]


def causes(lines: List[dict]) -> List[str]:
    return [o["event"]["result"]["cause"]["type"] for o in lines
            if o["type"] == "event" and o["event"]["type"] == "run_end"]


def commits(lines: List[dict]) -> List[dict]:
    return [o for o in lines if o["type"] == "commit"]


def send_checked(driver: runcore.Driver, store: runcore.Store, line: dict) -> List[dict]:
    """Sends `line`; the lines end with the line's idle, and the store already holds every
    commit returned (its version is the last commit's base plus one)."""
    out = driver.send(line)
    assert out[-1] == {"type": "idle", "line": driver.lines_handled}, out
    done = commits(out)
    if done:
        assert store.thread_version(THREAD) == done[-1]["expected_thread_version"] + 1
    return out


def run_to_the_end(driver: runcore.Driver, store: runcore.Store, first: List[dict]) -> List[dict]:
    """Answers each action until the run ends; every line the driver returned."""
    seen = list(first)
    out = first
    while not causes(out):
        out = send_checked(driver, store, reply(action(out)))
        seen += out
    return seen


def assert_store_holds(store: runcore.Store, written: List[dict]) -> None:
    """The store's rows are the commit lines: the version counts them, the transcript is their
    messages, the audit events are their drafts, commit by commit."""
    assert store.thread_version(THREAD) == len(written)
    assert store.committed_messages(THREAD) == [m for c in written for m in c["commit"]["messages"]]
    events = store.list_events({"type": "thread", "id": THREAD}, limit=10_000)
    by_commit: dict = {}
    for event in events:
        by_commit.setdefault(event["commit_sequence"], []).append(
            {"kind": event["kind"], "payload": event["payload"]})
    assert list(by_commit.values()) == [c["commit"]["events"] for c in written
                                        if c["commit"]["events"]]


def full_session(open_store: Callable[[], runcore.Store]) -> None:
    store = open_store()
    driver = runcore.Driver(CONFIG, store=store)
    assert driver.startup == [IDLE_0]
    assert driver.closed is False
    out = send_checked(driver, store, prompt("What is the weather in Paris?"))
    assert [o["type"] for o in out] == ["commit", "event", "call_model", "idle"]
    seen = run_to_the_end(driver, store, out)
    assert causes(seen) == ["natural_end"]
    assert "execute_tools" in [o["type"] for o in seen]
    assert_store_holds(store, commits(seen))
    # A second driver over the same store: the run ended, so nothing but idle 0, and a
    # config line is refused now that the thread has history.
    again = runcore.Driver(CONFIG, store=open_store())
    assert again.startup == [IDLE_0]
    out = again.send({"type": "config", "max_steps": 3})
    assert out[0]["type"] == "error" and out[0]["error"]["kind"] == "invalid_state"
    out = again.send(prompt("And tomorrow?"))
    assert out[0]["commit"]["run"]["run_id"] == f"{THREAD}/run-2"


def test_a_sqlite_driver_runs_a_session_and_stores_each_commit_first(tmp_path):
    path = str(tmp_path / "runs.db")
    full_session(lambda: runcore.SqliteStore(path))


def test_a_memory_store_driver_runs_the_same_session():
    store = runcore.MemoryStore()
    full_session(lambda: store)


def test_a_postgres_driver_runs_the_same_session():
    url, schema = postgres_url(), f"py_{uuid.uuid4().hex[:12]}"
    full_session(lambda: runcore.PostgresStore(url, schema=schema))


def binary_startup(path, tmp_path) -> List[str]:
    """What `runcore drive --store sqlite:PATH --config FILE` writes with no input."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    done = subprocess.run([runcore_binary(), "drive", "--store", f"sqlite:{path}",
                           "--config", str(config)],
                          input="", capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def test_a_second_driver_recovers_what_the_binary_recovers(tmp_path):
    path = tmp_path / "runs.db"
    store = runcore.SqliteStore(str(path))
    first = runcore.Driver(CONFIG, store=store)
    out = first.send(prompt("What is the weather in Paris?"))
    batch = first.send(reply(action(out)))
    tools = action(batch)
    assert tools["type"] == "execute_tools"  # handed out, never answered: a crash here
    written = commits(out + batch)

    binary = binary_startup(path, tmp_path)
    second = runcore.Driver(CONFIG, store=runcore.SqliteStore(str(path)))
    assert json.dumps(second.startup) == json.dumps([json.loads(line) for line in binary])
    assert second.startup[-1] == IDLE_0
    assert action(second.startup) == tools  # replay: the same calls again, nothing stored
    assert store.thread_version(THREAD) == len(written)

    seen = run_to_the_end(second, store, second.startup)
    assert causes(seen) == ["natural_end"]
    assert_store_holds(store, written + commits(seen))


def test_seal_ends_the_interrupted_run_at_construction(tmp_path):
    store = runcore.SqliteStore(str(tmp_path / "runs.db"))
    first = runcore.Driver(CONFIG, store=store)
    out = first.send(prompt("What is the weather in Paris?"))
    out += first.send(reply(action(out)))
    sealed = runcore.Driver(CONFIG, store=store, policy="seal")
    assert sealed.startup[-1] == IDLE_0
    assert causes(sealed.startup) == ["indeterminate"]
    seal = commits(sealed.startup)
    assert len(seal) == 1 and seal[0]["commit"]["run"]["type"] == "ended"
    assert_store_holds(store, commits(out) + seal)


def test_the_same_lines_as_the_binary_line_by_line(tmp_path):
    """A whole durable session through `Driver(store=...)` and through the binary, each on a
    new file: the same text, line for line, and the same rows in the two files."""
    ours = runcore.Driver(CONFIG, store=runcore.SqliteStore(str(tmp_path / "ours.db")))
    sent = [prompt("What is the weather in Paris?")]
    raw: List[str] = []
    while True:
        got = ours.send_raw(json.dumps(sent[-1]))
        raw += got
        out = [json.loads(line) for line in got]
        if causes(out):
            break
        sent.append(reply(action(out)))
    assert len(sent) == 4  # prompt, the tool call, the tool's result, the answer
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    binary = subprocess.run([runcore_binary(), "drive", "--store",
                             f"sqlite:{tmp_path / 'binary.db'}", "--config", str(config)],
                            input="".join(json.dumps(line) + "\n" for line in sent),
                            capture_output=True, text=True, check=True)
    written = binary.stdout.splitlines()
    assert [json.loads(line) for line in written[:1]] == ours.startup == [IDLE_0]
    assert written[1:] == raw
    theirs = runcore.SqliteStore(str(tmp_path / "binary.db"))
    mine = runcore.SqliteStore(str(tmp_path / "ours.db"))
    assert theirs.list_events(limit=1000) == mine.list_events(limit=1000)
    assert theirs.committed_messages(THREAD) == mine.committed_messages(THREAD)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("mine, code", [({}, "payload_mismatch"),
                                        ({"run_id": "mine"}, "version_conflict")])
def test_a_refused_commit_is_one_store_line_then_the_driver_is_closed(tmp_path, kind, mine,
                                                                       code):
    """Two drivers on one thread from version 0; the second writes first. The first one's
    commit (the same operation with another payload, or its own run at the same version) is
    fenced: one `store` error dict, nothing after it, and the driver refuses what follows."""
    if kind == "memory":
        shared = runcore.MemoryStore()
        stores = [shared, shared]
    else:
        path = str(tmp_path / "runs.db")
        stores = [runcore.SqliteStore(path), runcore.SqliteStore(path)]
    first = runcore.Driver(store=stores[0])
    second = runcore.Driver(store=stores[1])
    ahead = second.send(prompt("from the second"))
    out = first.send(prompt("from the first", **mine))
    assert len(out) == 1, out
    assert out[0]["type"] == "error" and out[0]["line"] == 1
    assert out[0]["error"]["kind"] == "store"
    assert out[0]["error"]["reason"] == code
    assert first.closed is True and second.closed is False
    with pytest.raises(runcore.StoreError) as refused:
        first.send({"type": "abort"})
    assert refused.value.code == code
    assert "closed" in refused.value.message
    assert first.lines_handled == 1
    # The store holds the second driver's commit only, and it goes on.
    assert_store_holds(stores[0], commits(ahead))
    assert second.send({"type": "abort"})[-1] == {"type": "idle", "line": 2}


def test_a_closed_driver_still_reports_and_a_new_one_recovers():
    store = runcore.MemoryStore()
    first, second = runcore.Driver(store=store), runcore.Driver(store=store)
    second.send(prompt("from the second"))
    first.send(prompt("from the first", run_id="mine"))
    assert first.closed
    assert first.snapshot()  # the agent is still there to look at
    again = runcore.Driver(store=store)
    assert [o["type"] for o in again.startup] == ["call_model", "idle"]
    assert action(again.startup)["run_id"] == f"{THREAD}/run-1"


def test_durable_driver_arguments_are_checked(tmp_path):
    with pytest.raises(TypeError):
        runcore.Driver(store=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        runcore.Driver(store=runcore.MemoryStore(), policy="later")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        runcore.Driver(policy="seal")  # a policy without a store recovers nothing
    with pytest.raises(runcore.InvalidJsonError):
        runcore.Driver({"max_stepz": 3}, store=runcore.MemoryStore())
    with pytest.raises(runcore.InvalidInputError):
        runcore.Driver({"max_steps": 0}, store=runcore.MemoryStore())
    assert runcore.Driver().startup == [] and runcore.Driver().closed is False
    # The thread is the config's, as `runcore drive --store URL --config FILE` picks it.
    store = runcore.MemoryStore()
    driver = runcore.Driver({"thread_id": "t-9", "context": "delta"}, store=store)
    assert driver.context == "delta"
    out = driver.send(prompt("hi"))
    assert out[0]["commit"]["thread_id"] == "t-9"
    assert store.thread_version("t-9") == 1 and store.thread_version(THREAD) == 0
    out = driver.send({"type": "config", "thread_id": "other"})
    assert out[0]["error"]["kind"] == "invalid_state"
