"""The durable stores: SqliteStore (a file) and PostgresStore (a server), through the same
read ports as MemoryStore, with their open errors as StoreError."""

from __future__ import annotations

import os
import uuid

import pytest

import runcore


def session(store: runcore.Store, thread: str) -> runcore.Agent:
    """One run with a gated tool, left awaiting its approval: every commit persisted."""
    agent = runcore.Agent({"thread_id": thread, "tools": {"rm": {"policy": "require_approval"}}})
    run_id = agent.prompt("clean up", now_ms=1)
    for out in agent.drain():
        if out["type"] == "commit":
            store.commit(out)
    agent.model_done(run_id, 1, {"content": [{"type": "tool_call", "id": "c1", "name": "rm",
                                              "arguments": {"path": "x"}}],
                                 "stop_reason": "tool_use"})
    for out in agent.drain():
        if out["type"] == "commit":
            store.commit(out)
    return agent


def check_like_memory(store: runcore.Store, thread: str) -> None:
    memory = runcore.MemoryStore()
    agent = session(store, thread)
    session(memory, thread)
    run_id = agent.active_run_id
    assert store.committed_messages(thread) == memory.committed_messages(thread)
    assert store.resume_ticket(run_id) == memory.resume_ticket(run_id) == agent.current_ticket()
    assert store.latest_run(thread) == memory.latest_run(thread)
    assert store.thread_version(thread) == memory.thread_version(thread) == 3
    events = store.list_events({"type": "thread", "id": thread}, limit=1000)
    assert [e["kind"] for e in events] == [e["kind"] for e in memory.list_events(limit=1000)]
    # An agent recovered from the store waits on the same ticket.
    replay = runcore.Agent.recover(store, thread, config={"tools": {"rm": {"policy": "require_approval"}}})
    assert replay.current_ticket() == agent.current_ticket()


def test_sqlite_store_is_a_store_like_memory(tmp_path):
    store = runcore.SqliteStore(str(tmp_path / "runs.db"))
    assert isinstance(store, runcore.Store) and store.path.endswith("runs.db")
    check_like_memory(store, "t-1")
    again = runcore.SqliteStore(str(tmp_path / "runs.db"), synchronous="normal")
    assert again.thread_version("t-1") == 3


def test_sqlite_open_errors(tmp_path):
    with pytest.raises(runcore.StoreError) as e:
        runcore.SqliteStore(str(tmp_path / "missing" / "runs.db"))
    assert e.value.code == "open"
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("hello")
    with pytest.raises(runcore.StoreError) as e:
        runcore.SqliteStore(str(not_sqlite))
    assert e.value.code == "open" and not_sqlite.read_text() == "hello"
    with pytest.raises(ValueError):
        runcore.SqliteStore(str(tmp_path / "x.db"), synchronous="sometimes")


def test_a_duplicate_commit_is_a_receipt_not_a_second_commit(tmp_path):
    store = runcore.SqliteStore(str(tmp_path / "runs.db"))
    agent = runcore.Agent()
    agent.prompt("hi")
    commit = agent.poll()
    first = store.commit(commit)
    again = store.commit(commit)
    assert first["duplicate"] is False and again["duplicate"] is True
    assert again["record"] == first["record"]
    assert store.thread_version("thread-1") == 1
    tampered = dict(commit, payload_hash="0" * 64)
    with pytest.raises(ValueError):
        store.commit(tampered)


def postgres_url() -> str:
    url = os.environ.get("RUNCORE_PG_URL")
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail("RUNCORE_PG_URL is not set (.ci/run starts PostgreSQL with "
                        "scripts/with-postgres.sh)")
        pytest.skip("RUNCORE_PG_URL is not set; run under scripts/with-postgres.sh")
    return url


def test_postgres_store_is_a_store_like_memory():
    schema = f"py_{uuid.uuid4().hex[:12]}"
    store = runcore.PostgresStore(postgres_url(), schema=schema)
    assert store.schema == schema
    check_like_memory(store, "t-pg")


def test_postgres_connect_errors():
    with pytest.raises(runcore.StoreError) as e:
        runcore.PostgresStore("postgresql://nobody@127.0.0.1:1/none")
    assert e.value.code == "unavailable"


def test_store_open_reads_any_store_url_through_the_registry(tmp_path):
    path = tmp_path / "runs.db"
    store = runcore.Store.open(f"sqlite:{path}")
    assert type(store) is runcore.Store and path.exists()
    check_like_memory(store, "t-url")
    # The same file through the class and through a URL that names `synchronous`.
    assert runcore.SqliteStore(str(path)).thread_version("t-url") == 3
    assert runcore.Store.open(f"sqlite:{path}?synchronous=normal", create=False).thread_version("t-url") == 3


def test_store_open_without_create_creates_nothing_and_masks_secrets(tmp_path):
    missing = tmp_path / "none.db"
    with pytest.raises(runcore.StoreError) as e:
        runcore.Store.open(f"sqlite:{missing}", create=False)
    assert e.value.code == "open" and not missing.exists()
    with pytest.raises(runcore.StoreError) as e:
        runcore.Store.open("mysql://db/x")
    assert e.value.code == "open" and "sqlite:" in str(e.value)
    with pytest.raises(runcore.StoreError) as e:
        runcore.Store.open(f"sqlite:{tmp_path}/x.db?synchronous=sometimes")
    assert e.value.code == "open"
    with pytest.raises(runcore.StoreError) as e:
        runcore.Store.open("postgresql://nobody:hunter2@127.0.0.1:1/none")
    assert e.value.code == "open" and "hunter2" not in str(e.value)


def test_store_open_on_postgres_creates_only_when_asked():
    url = postgres_url()
    schema = f"py_open_{uuid.uuid4().hex[:12]}"
    # A database whose search path names a schema without runcore's tables: not a store.
    scoped = f"{url}{'&' if '?' in url else '?'}options=-c%20search_path%3D{schema}"
    for _ in range(2):  # the first refusal created nothing the second could find
        with pytest.raises(runcore.StoreError) as e:
            runcore.Store.open(scoped, create=False)
        assert e.value.code == "open" and "not a runcore store" in str(e.value)
