"""Threads that begin with history (SPEC §8.10) and lossless content (§2.1) from Python:
import, several prompt messages, thinking deltas, meta and signatures kept whole, fork."""

from __future__ import annotations

import pytest

import runcore


def drain(agent: runcore.Agent, store: runcore.Store | None = None) -> list:
    outs = []
    for out in agent.drain():
        if store is not None and out["type"] == "commit":
            store.commit(out)
        outs.append(out)
    return outs


HISTORY = [
    {"role": "user", "content": [{"type": "text", "text": "Read a.txt"}], "id": "u1",
     "meta": {"timestamp": 1733000000000}},
    {"role": "assistant", "stop_reason": "tool_use", "model": "claude-x", "response_id": "msg_1",
     "provider_stop_reason": "tool_use",
     "usage": {"input_tokens": 10, "output_tokens": 4, "cache_read_tokens": 6},
     "content": [
         {"type": "thinking", "thinking": "Read it first.", "signature": "sig=="},
         {"type": "redacted_thinking", "data": "opaque"},
         {"type": "tool_call", "id": "c1", "name": "read", "arguments": {"path": "a.txt"},
          "meta": {"item": "fc_1"}},
     ]},
    {"role": "tool_result", "call_id": "c1", "tool_name": "read",
     "content": [{"type": "text", "text": "hello"}], "is_error": False, "outcome": "executed"},
    {"role": "assistant", "content": [{"type": "text", "text": "It says hello."}],
     "stop_reason": "stop"},
    {"role": "user", "content": [{"type": "text", "text": "And b.txt?"}]},
]


def test_import_keeps_every_field_and_continue_runs_over_it(tmp_path):
    store = runcore.SqliteStore(str(tmp_path / "h.db"))
    agent = runcore.Agent({"thread_id": "h"})
    run_id = agent.import_messages(HISTORY, now_ms=5)
    assert run_id == "h/run-1"
    outs = drain(agent, store)
    assert [o["type"] for o in outs] == ["commit", "event", "event"]
    commit = outs[0]["commit"]
    assert commit["run"] == {"type": "ended", "run_id": "h/run-1",
                             "cause": {"type": "stopped", "reason": "imported"}}
    assert [e["kind"] for e in commit["events"]] == ["run_state_changed", "imported", "commit_clock"]
    # Everything returned exactly, meta and signatures included.
    assert store.committed_messages("h") == HISTORY
    run2 = agent.continue_run(now_ms=6)
    call = drain(agent, store)[-1]
    assert call["type"] == "call_model" and call["run_id"] == run2
    assert call["messages"] == HISTORY
    agent.model_delta(run2, 1, "Hmm", kind="thinking")
    assert drain(agent)[-1]["event"]["event"] == {"type": "thinking_delta", "step": 1, "text": "Hmm"}
    with pytest.raises(ValueError):
        agent.model_delta(run2, 1, "x", kind="reasoning")


@pytest.mark.parametrize("messages,needle", [
    ([], "no messages"),
    (HISTORY[:2], "messages[1]: tool call c1 has no result"),
    ([HISTORY[0], HISTORY[2]], "messages[1]: the tool result for call c1 has no call"),
    ([HISTORY[0], HISTORY[0]], "appears twice"),
])
def test_bad_imports_raise_and_change_nothing(messages, needle):
    agent = runcore.Agent()
    before = agent.snapshot()
    with pytest.raises(runcore.InvalidInputError) as raised:
        agent.import_messages(messages)
    assert needle in str(raised.value)
    assert agent.snapshot() == before


def test_several_prompt_messages():
    agent = runcore.Agent()
    agent.prompt([{"content": [{"type": "text", "text": "one"}]},
                  {"content": [{"type": "text", "text": "two"}], "meta": {"k": 1}}])
    outs = drain(agent)
    assert [m["content"][0]["text"] for m in outs[0]["commit"]["messages"]] == ["one", "two"]
    assert outs[0]["commit"]["messages"][1]["meta"] == {"k": 1}
    assert "messages" in outs[1]["event"] and "message" not in outs[1]["event"]
    with pytest.raises(runcore.BusyError):
        agent.prompt("again")
    with pytest.raises(TypeError):
        runcore.Agent().prompt(42)  # type: ignore[arg-type]


def test_fork_from_a_store(tmp_path):
    store = runcore.SqliteStore(str(tmp_path / "f.db"))
    agent = runcore.Agent({"thread_id": "main"})
    agent.import_messages(HISTORY[:4])
    drain(agent, store)
    run = agent.prompt("Now b.txt")
    drain(agent, store)
    assert store.thread_version("main") == 2
    at_1 = store.thread_as_of("main", 1)
    assert at_1["version"] == 1 and at_1["messages"] == HISTORY[:4]
    assert store.thread_as_of("main", 3) is None
    forked = store.fork("main", 1, "branch", now_ms=9)
    assert forked == {"thread_id": "branch", "version": 1,
                      "forked_from": {"thread_id": "main", "version": 1}}
    assert store.forked_from("branch") == {"thread_id": "main", "version": 1}
    assert store.forked_from("main") is None
    assert store.committed_messages("branch") == HISTORY[:4]
    with pytest.raises(runcore.InvalidInputError, match="already exists"):
        store.fork("main", 1, "branch")
    with pytest.raises(runcore.InvalidInputError, match="version 5"):
        store.fork("main", 5, "other")
    assert store.thread_version("other") == 0
    assert run == "main/run-2"


def test_meta_comes_back_exactly_through_the_driver_line():
    """A `meta` with an integer beyond 64 bits and keys out of order comes back exactly (§2.1):
    the commit line holds its text, which Python's json reads with the same ints and order."""
    import json

    meta = '{"z":18446744073709551616,"a":{"y":-18446744073709551617,"b":[1.5,"x"]},"m":1}'
    line = ('{"type":"import","messages":[{"role":"user","content":[{"type":"text","text":"hi"}],'
            '"meta":' + meta + '}]}')
    driver = runcore.Driver()
    commit = next(out for out in driver.send_raw(line) if out.startswith('{"type":"commit"'))
    assert meta in commit
    read = json.loads(commit)["commit"]["messages"][0]["meta"]
    assert read == {"z": 2**64, "a": {"y": -(2**64) - 1, "b": [1.5, "x"]}, "m": 1}
    assert list(read) == ["z", "a", "m"]
