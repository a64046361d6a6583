"""Recovery from a `SqliteStore` after the Python process that wrote it was killed with
SIGKILL: a fresh process recovers the agent from the file and finishes the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import runcore

CONFIG = {"tools": {"search": {}, "fetch": {}}}

# The writer: drives a run with a two-call batch, persisting every commit, and says where it
# is; after the batch is committed it answers one call and then hangs, as if a tool never
# returned. The parent kills it there.
WRITER = textwrap.dedent(
    """
    import json, sys, time
    import runcore

    store = runcore.SqliteStore(sys.argv[1])
    agent = runcore.Agent(json.loads(sys.argv[2]))
    run_id = agent.prompt("find and fetch", now_ms=1000)

    def drain():
        outs = []
        for out in agent.drain():
            if out["type"] == "commit":
                store.commit(out)
            outs.append(out)
        return outs

    drain()
    agent.model_done(run_id, 1, {"content": [
        {"type": "tool_call", "id": "c1", "name": "search", "arguments": {"q": "x"}},
        {"type": "tool_call", "id": "c2", "name": "fetch", "arguments": {"url": "y"}}],
        "stop_reason": "tool_use"})
    batch = drain()[-1]
    assert batch["type"] == "execute_tools"
    agent.tool_done(run_id, "c1", "found")  # held in memory: results commit with the batch
    drain()
    print("READY", flush=True)
    time.sleep(600)
    """
)

# A writer that commits runs as fast as it can until it is killed, at any point.
LOOPING_WRITER = textwrap.dedent(
    """
    import sys
    import runcore

    store = runcore.SqliteStore(sys.argv[1])
    agent = runcore.Agent()
    i = 0
    while True:
        run_id = agent.prompt(f"q{i}", now_ms=i)
        for out in agent.drain():
            if out["type"] == "commit":
                store.commit(out)
            elif out["type"] == "call_model":
                agent.model_done(run_id, out["step"], {"content": [
                    {"type": "text", "text": f"a{i}"}], "stop_reason": "stop"})
        i += 1
        if i == 20:
            print("READY", flush=True)
    """
)


def kill_when_ready(script: str, *args: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "READY\n"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()


def drain(agent: runcore.Agent, store: runcore.Store) -> list:
    outs = []
    for out in agent.drain():
        if out["type"] == "commit":
            store.commit(out)
        outs.append(out)
    return outs


def test_recovery_after_sigkill_replays_the_batch_and_finishes_the_run(tmp_path):
    db = str(tmp_path / "runs.db")
    kill_when_ready(WRITER, db, json.dumps(CONFIG))

    store = runcore.SqliteStore(db)
    assert store.run_state("thread-1/run-1") == {"type": "running"}
    agent = runcore.Agent.recover(store, "thread-1", "replay", config=CONFIG)
    batch = drain(agent, store)[-1]
    # c1's result was never committed: both calls run again (tools are idempotent by id).
    assert batch["type"] == "execute_tools"
    assert [c["id"] for c in batch["calls"]] == ["c1", "c2"]
    for call in batch["calls"]:
        agent.tool_done(batch["run_id"], call["id"], f"result of {call['id']}")
    call = drain(agent, store)[-1]
    assert call["type"] == "call_model" and call["step"] == 2
    agent.model_done(call["run_id"], 2, {"content": [{"type": "text", "text": "done"}],
                                         "stop_reason": "stop"})
    end = drain(agent, store)[-1]["event"]
    assert end["result"]["cause"] == {"type": "natural_end"}
    assert end["result"]["steps"] == 2

    # A third process sees the finished run.
    reread = runcore.SqliteStore(db)
    assert reread.committed_messages("thread-1") == agent.transcript()
    assert reread.latest_run("thread-1")["state"]["type"] == "ended"
    assert reread.pending_tickets() == []


def test_recovery_after_sigkill_at_any_point_continues_the_thread(tmp_path):
    db = str(tmp_path / "runs.db")
    kill_when_ready(LOOPING_WRITER, db)

    store = runcore.SqliteStore(db)
    version = store.thread_version("thread-1")
    assert version >= 20 * 2
    agent = runcore.Agent.recover(store, "thread-1")
    for out in drain(agent, store):  # a run cut mid-way asks its model again
        if out["type"] == "call_model":
            agent.model_done(out["run_id"], out["step"], {"content": [
                {"type": "text", "text": "late"}], "stop_reason": "stop"})
    drain(agent, store)
    assert agent.is_idle
    run_id = agent.prompt("after the crash")
    call = drain(agent, store)[-1]
    agent.model_done(run_id, call["step"], {"content": [{"type": "text", "text": "ok"}],
                                            "stop_reason": "stop"})
    drain(agent, store)
    assert store.latest_run("thread-1") == {"id": run_id, "thread_id": "thread-1",
                                            "state": {"type": "ended",
                                                      "cause": {"type": "natural_end"}},
                                            "commits": 2}
    assert store.committed_messages("thread-1") == agent.transcript()
    assert store.thread_version("thread-1") > version
