"""Compaction (SPEC §8.9) from Python: `Agent.compact` commits the compaction, announces it and
calls the same step again over `[summary] ++ transcript[keep_from:]`; the rules are
`InvalidInputError`s naming themselves, the wrong moment an `InvalidStateError`; recovery
from a store rebuilds the same model context."""

from __future__ import annotations

import pytest

import runcore


def text(answer: str) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": answer}], "stop_reason": "stop"}


def drain(agent: runcore.Agent, store: runcore.MemoryStore) -> list:
    outs = []
    for out in agent.drain():
        if out["type"] == "commit":
            store.commit(out)
        outs.append(out)
    return outs


def test_compact_then_recover_the_same_context():
    store = runcore.MemoryStore()
    agent = runcore.Agent()
    run_1 = agent.prompt("list files")
    drain(agent, store)
    agent.model_done(run_1, 1, text("a and b"))
    drain(agent, store)
    run_2 = agent.prompt("and now?")
    before = drain(agent, store)[-1]
    assert before["type"] == "call_model" and len(before["messages"]) == 3

    with pytest.raises(runcore.InvalidInputError, match="past the end of the transcript"):
        agent.compact("summary", 4)
    assert agent.context_start == 0

    agent.compact([{"type": "text", "text": "Files: a and b."}], 2, now_ms=5)
    outs = drain(agent, store)
    assert [o["type"] for o in outs] == ["commit", "event", "call_model"]
    assert outs[0]["commit"]["messages"] == []
    assert outs[0]["commit"]["events"][0]["kind"] == "compacted"
    assert outs[1]["event"]["event"] == {"type": "compacted", "keep_from": 2, "removed": 2}
    call = outs[2]
    assert call["step"] == before["step"]
    summary = {"role": "user", "content": [{"type": "text", "text": "Files: a and b."}]}
    assert call["messages"] == [summary, before["messages"][2]]
    assert agent.context_start == 2
    assert len(agent.transcript()) == 3
    assert agent.model_request()["messages"] == call["messages"]

    with pytest.raises(runcore.InvalidInputError, match="greater than the previous"):
        agent.compact("again", 2)

    cold = runcore.Agent.recover(store, "thread-1")
    recovered = [o for o in cold.drain()]
    assert recovered[-1]["type"] == "call_model"
    assert recovered[-1]["messages"] == call["messages"]
    assert cold.context_start == 2

    agent.model_delta(run_2, 1, "Sti")
    drain(agent, store)
    with pytest.raises(runcore.InvalidStateError):
        agent.compact("too late", 3)
