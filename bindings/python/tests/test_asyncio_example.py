"""The asyncio host example runs to its natural end: streamed answers, two concurrent tools
(one timing out), steering that arrives mid-batch and enters after it, an approval, and every
commit persisted to the store."""

from __future__ import annotations

import json
import subprocess
import sys

import runcore


def test_the_asyncio_host_example(tmp_path):
    db = tmp_path / "runs.db"
    result = subprocess.run([sys.executable, "-m", "runcore.examples.asyncio_host", str(db)],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "natural_end"
    log = [json.loads(line) for line in lines[:-1]]
    keys = [next(iter(entry)) for entry in log]

    # Two tools ran concurrently; the slow one timed out and was answered with an error.
    assert log[keys.index("execute")] == {"execute": ["weather", "search_flights"]}
    ends = {e["tool_end"]: e["is_error"] for e in log if "tool_end" in e}
    assert ends == {"w1": False, "f1": True, "d1": False}
    # The steering arrived while the batch ran, and entered only after both results.
    steer = keys.index("steer")
    assert keys.index("execute") < steer < keys.index("tool_end")
    appended = [e["origin"] for e in log if "appended" in e]
    assert appended[:3] == ["tool_result", "tool_result", "steering"]
    # The approval: the run waited on a ticket, a person allowed it, the tool ran.
    assert keys.index("awaiting") < keys.index("approve") < len(keys) - 1 - keys[::-1].index("execute")
    assert log[-2] == {"run_end": {"type": "natural_end"}}
    summary = log[-1]
    assert summary["committed_messages"] == 8
    assert summary["store"] == "SqliteStore"
    # Another process reads the file the host wrote.
    store = runcore.SqliteStore(str(db))
    assert len(store.committed_messages("thread-1")) == 8
    assert store.latest_run("thread-1")["state"]["type"] == "ended"
    assert store.pending_tickets() == []
