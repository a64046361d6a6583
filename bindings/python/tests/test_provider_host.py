"""The asyncio host example in provider mode, against a loopback server replaying recorded
Anthropic, Chat Completions and Responses traffic: real HTTP (httpx), the codec's body out and
its decoder in, a tool call that needs an approval, every commit in SQLite; and a host killed
with SIGKILL mid-stream that a second process recovers from the file and finishes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

import runcore
from conftest import require
from mock_provider import Replay, recorded

require("httpx")

APIS = ["anthropic", "openai-chat", "openai-responses"]
PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions",
         "openai-responses": "/v1/responses"}
# Where the second answer's first text delta ends in each recording.
FIRST_TEXT = {"anthropic": '"text_delta"', "openai-chat": '"content":"The"',
              "openai-responses": '"response.output_text.delta"'}


def host_command(db: str, api: str, url: str) -> List[str]:
    base = url if api == "anthropic" else url + "/v1"
    return [sys.executable, "-m", "runcore.examples.asyncio_host", db, "--api", api,
            "--base-url", base, "--model", "test-model"]


def host_env() -> Dict[str, str]:
    return {**os.environ, "ANTHROPIC_API_KEY": "key-a", "OPENAI_API_KEY": "key-o"}


def parse(stdout: str) -> List[dict]:
    lines = stdout.splitlines()
    return [json.loads(line) for line in lines[:-1]]


def check_requests(api: str, replay: Replay) -> None:
    for request in replay.requests:
        assert request["path"] == PATHS[api]
        if api == "anthropic":
            assert request["headers"]["x-api-key"] == "key-a"
        else:
            assert request["headers"]["authorization"] == "Bearer key-o"
        assert request["body"]["model"] == "test-model"
        assert request["body"]["stream"] is True
    # The second request sends the recorded call back with its result, paired.
    second = json.dumps(replay.requests[-1]["body"])
    assert '"add"' in second and '"5"' in second


def check_store(db: str) -> None:
    store = runcore.SqliteStore(db)
    run = store.latest_run("thread-1")
    assert run["state"] == {"type": "ended", "cause": {"type": "natural_end"}}
    messages = store.committed_messages("thread-1")
    assert [m["role"] for m in messages] == ["user", "assistant", "tool_result", "assistant"]
    assert messages[2]["content"] == [{"type": "text", "text": "5"}]
    assert messages[3]["content"][0]["text"].strip()
    assert store.pending_tickets() == []


@pytest.mark.parametrize("api", APIS)
def test_a_full_run_with_a_tool_call_and_an_approval(api, tmp_path):
    db = str(tmp_path / "runs.db")
    with Replay(recorded(api)) as replay:
        result = subprocess.run(host_command(db, api, replay.url), capture_output=True,
                                text=True, timeout=60, env=host_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "natural_end"
    log = parse(result.stdout)
    keys = [next(iter(entry)) for entry in log]
    assert keys.index("awaiting") < keys.index("approve") < keys.index("execute")
    assert [e for e in log if "tool_end" in e][0]["is_error"] is False
    assert [e["stop_reason"] for e in log if "model_done" in e] == ["tool_use", "stop"]
    assert any("delta" in e for e in log)
    assert len(replay.requests) == 2
    check_requests(api, replay)
    check_store(db)


@pytest.mark.parametrize("api", APIS)
def test_sigkill_mid_stream_then_recovery_from_sqlite(api, tmp_path):
    db = str(tmp_path / "runs.db")
    first, second = recorded(api)
    body = second["response"]
    stall_after = body.index("\n\n", body.index(FIRST_TEXT[api])) + 2
    # The tool call, the final answer cut mid-body (stalled), then the final answer again.
    with Replay([first, second, second], stall_at=1, stall_after=stall_after) as replay:
        proc = subprocess.Popen(host_command(db, api, replay.url), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=host_env())
        try:
            assert proc.stdout is not None
            seen = []
            for line in proc.stdout:  # until the stalled answer's first delta is in the host
                seen.append(json.loads(line))
                if "delta" in seen[-1] and replay.stalled.is_set():
                    break
            else:
                raise AssertionError(f"the host ended early: {seen} {proc.stderr.read()}")
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=30) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        tool_ends = [e for e in seen if "tool_end" in e]
        assert len(tool_ends) == 1 and tool_ends[0]["is_error"] is False
        # The run is still open in the file: the tool result is committed, the answer is not.
        store = runcore.SqliteStore(db)
        assert store.latest_run("thread-1")["state"] == {"type": "running"}
        assert [m["role"] for m in store.committed_messages("thread-1")] == [
            "user", "assistant", "tool_result"]

        result = subprocess.run(host_command(db, api, replay.url), capture_output=True,
                                text=True, timeout=60, env=host_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "natural_end"
    log = parse(result.stdout)
    assert "recovered" in log[0] and log[0]["active_run"]
    keys = [next(iter(entry)) for entry in log]
    # Recovered after the tool ran: no second approval, no second execution, one model call.
    assert "approve" not in keys and "execute" not in keys
    assert [e["stop_reason"] for e in log if "model_done" in e] == ["stop"]
    assert len(replay.requests) == 3
    check_requests(api, replay)
    check_store(db)


def readme_model_host() -> str:
    text = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = text.split("### Talking to a model from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section holds one Python host"
    return blocks[0]


def test_the_readme_model_host_runs_against_replayed_anthropic(tmp_path):
    with Replay(recorded("anthropic")) as replay:
        env = {**host_env(), "ANTHROPIC_BASE_URL": replay.url}
        result = subprocess.run([sys.executable, "-c", readme_model_host()], capture_output=True,
                                text=True, timeout=60, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "natural_end\n"
    assert [r["path"] for r in replay.requests] == ["/v1/messages", "/v1/messages"]
    store = runcore.SqliteStore(str(tmp_path / "agent.db"))
    roles = [m["role"] for m in store.committed_messages("thread-1")]
    assert roles == ["user", "assistant", "tool_result", "assistant"]
