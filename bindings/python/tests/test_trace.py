"""`runcore.trace(store, thread_id)` (SPEC §14): the thread's spans derived from its commits, as
the OTLP/JSON export body that `runcore trace THREAD --json` prints: the same bytes."""

from __future__ import annotations

import json
import subprocess

import pytest

import runcore
from conftest import runcore_binary

CONFIG = {"tools": {"weather": {"description": "Weather in a city"},
                    "deploy": {"policy": "require_approval"}}}
THREAD = "thread-1"


def session(store: runcore.Store) -> None:
    """A run with a weather call, then a deploy that is denied, then an answer."""
    driver = runcore.Driver(CONFIG, store=store)
    out = driver.send({"type": "prompt", "text": "Weather, then deploy", "now_ms": 1000})
    call = [o for o in out if o["type"] == "call_model"][0]
    content = [{"type": "tool_call", "id": "c1", "name": "weather", "arguments": {"city": "Paris"}},
               {"type": "tool_call", "id": "c2", "name": "deploy", "arguments": {}}]
    driver.send({"type": "model_done", "run_id": call["run_id"], "step": 1, "now_ms": 1200,
                 "message": {"role": "assistant", "content": content, "stop_reason": "tool_use",
                             "model": "m-1", "usage": {"input_tokens": 10, "output_tokens": 3}}})
    out = driver.send({"type": "resume_ticket", "now_ms": 1300,
                       "result": {"type": "permission", "decision": "deny", "reason": "not today"}})
    tools = [o for o in out if o["type"] == "execute_tools"][0]
    out = driver.send({"type": "tool_done", "run_id": tools["run_id"], "call_id": "c1",
                       "content": "18 C", "now_ms": 1450})
    call = [o for o in out if o["type"] == "call_model"][0]
    driver.send({"type": "model_done", "run_id": call["run_id"], "step": 2, "now_ms": 1600,
                 "message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}],
                             "stop_reason": "stop", "model": "m-1"}})


def attributes(span: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_trace_returns_the_otlp_json_of_the_spans(tmp_path):
    store = runcore.SqliteStore(str(tmp_path / "runs.db"))
    session(store)
    body = runcore.trace(store, THREAD)
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["name"] for s in spans] == [
        "invoke_agent", "chat m-1", "await deploy", "execute_tool weather", "chat m-1"]
    root = spans[0]
    assert "parentSpanId" not in root and root["kind"] == 1
    assert all(s["parentSpanId"] == root["spanId"] for s in spans[1:])
    assert root["startTimeUnixNano"] == "1000000000" and root["endTimeUnixNano"] == "1600000000"
    assert spans[1]["kind"] == 3
    assert attributes(spans[1])["gen_ai.usage.input_tokens"] == "10"
    assert attributes(spans[2])["runcore.decision"] == "deny"
    assert attributes(spans[2])["runcore.decision.reason"] == "not today"
    assert "gen_ai.input.messages" not in attributes(spans[1])
    with_content = runcore.trace(store, THREAD, content=True)
    chat = with_content["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    assert json.loads(attributes(chat)["gen_ai.input.messages"])[0]["role"] == "user"
    # The same bytes as the binary prints.
    printed = subprocess.run(
        [runcore_binary(), "trace", THREAD, "--store", f"sqlite:{tmp_path / 'runs.db'}", "--json"],
        check=True, capture_output=True, text=True).stdout
    assert json.loads(printed) == body


def test_an_unknown_run_raises_and_an_unknown_thread_is_empty():
    store = runcore.MemoryStore()
    session(store)
    only = runcore.trace(store, THREAD, run_id="thread-1/run-1")
    assert len(only["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 5
    with pytest.raises(runcore.AgentError) as caught:
        runcore.trace(store, THREAD, run_id="thread-1/run-9")
    assert "thread-1/run-9" in str(caught.value)
    assert runcore.trace(store, "nobody")["resourceSpans"][0]["scopeSpans"][0]["spans"] == []
