"""The agent API: a complete run with tools, every error kind as its exception with the agent
unchanged, snapshots, lazy polling, approvals and timers, recovery from a store."""

from __future__ import annotations

import pytest

import runcore


def text(answer: str) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": answer}], "stop_reason": "stop"}


def calls(*tool_calls: tuple) -> dict:
    content = [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in tool_calls]
    return {"role": "assistant", "content": content, "stop_reason": "tool_use"}


def drain(agent: runcore.Agent, store: runcore.Store | None = None) -> list:
    """Drains the agent, persisting commits first when a store is given."""
    outs = []
    for out in agent.drain():
        if store is not None and out["type"] == "commit":
            store.commit(out)
        outs.append(out)
    return outs


def only(outs: list, kind: str) -> dict:
    found = [o for o in outs if o["type"] == kind]
    assert len(found) == 1, (kind, [o["type"] for o in outs])
    return found[0]


def events(outs: list) -> list:
    return [o["event"]["event"]["type"] if o["event"]["type"] == "loop" else o["event"]["type"]
            for o in outs if o["type"] == "event"]


def test_a_complete_run_with_tools(weather_config):
    agent = runcore.Agent(weather_config)
    store = runcore.MemoryStore()
    run_id = agent.prompt("Weather in Paris and Rome?", now_ms=1000)
    assert run_id == "thread-1/run-1"
    outs = drain(agent, store)
    assert [o["type"] for o in outs] == ["commit", "event", "call_model"]
    call = outs[-1]
    assert call["step"] == 1 and call["final_step"] is False
    assert [t["name"] for t in call["tools"]] == ["delete_file", "weather"]
    assert agent.model_request() == call

    agent.model_delta(run_id, 1, "Checking")
    assert events(drain(agent)) == ["text_delta"]
    agent.model_done(run_id, 1, calls(("c1", "weather", {"city": "Paris"}),
                                      ("c2", "weather", {"city": "Rome"})))
    outs = drain(agent, store)
    assert [o["type"] for o in outs][0] == "commit"
    batch = outs[-1]
    assert batch["type"] == "execute_tools"
    assert [c["id"] for c in batch["calls"]] == ["c1", "c2"]
    assert agent.model_request() is None

    # Completion order differs from call order; results enter in call order.
    agent.tool_progress(run_id, "c2", "halfway")
    agent.tool_done(run_id, "c2", "Rome: 25 C")
    agent.tool_done(run_id, "c1", [{"type": "text", "text": "Paris: 18 C"}], details={"src": "x"})
    outs = drain(agent, store)
    call = outs[-1]
    assert call["type"] == "call_model" and call["step"] == 2
    results = [m for m in call["messages"] if m["role"] == "tool_result"]
    assert [r["call_id"] for r in results] == ["c1", "c2"]
    assert all(r["outcome"] == "executed" for r in results)

    agent.model_done(run_id, 2, text("Paris 18 C, Rome 25 C."))
    outs = drain(agent, store)
    end = outs[-1]["event"]
    assert end["type"] == "run_end"
    assert end["result"]["cause"] == {"type": "natural_end"}
    assert end["result"]["steps"] == 2
    assert agent.is_idle and agent.active_run_id is None
    # The committed facts alone reproduce the transcript.
    assert store.committed_messages("thread-1") == agent.transcript()
    commits = [o for o in outs if o["type"] == "commit"]
    assert store.thread_version("thread-1") == commits[-1]["expected_thread_version"] + 1
    record = store.latest_run("thread-1")
    assert record["id"] == run_id and record["state"]["type"] == "ended"


def test_outputs_keep_the_drivers_key_order():
    agent = runcore.Agent()
    agent.prompt("hi")
    first = agent.poll()
    assert list(first)[0] == "type"
    assert list(first) == ["type", "commit", "ordinal", "expected_thread_version", "payload_hash"]


def test_poll_is_lazy_abort_on_run_start_means_no_model_call():
    agent = runcore.Agent()
    agent.prompt("hi")
    seen = []
    for out in agent.drain():
        seen.append(out)
        if out["type"] == "event" and out["event"]["type"] == "run_start":
            agent.abort()
    assert "call_model" not in [o["type"] for o in seen]
    end = [o for o in seen if o["type"] == "event" and o["event"]["type"] == "run_end"]
    assert end[0]["event"]["result"]["cause"] == {"type": "cancelled"}
    assert agent.poll() is None


def test_delta_context_sends_only_new_messages():
    agent = runcore.Agent({"context": "delta"})
    run_id = agent.prompt("one")
    call = drain(agent)[-1]
    assert call["base"] == 0 and len(call["messages"]) == 1
    agent.model_done(run_id, 1, calls(("c1", "echo", {})))
    assert drain(agent)[-1]["type"] == "execute_tools"
    agent.tool_done(run_id, "c1", "ok")
    call = drain(agent)[-1]
    assert call["base"] == 1 and [m["role"] for m in call["messages"]] == ["assistant", "tool_result"]
    # model_request always carries the whole transcript.
    assert len(agent.model_request()["messages"]) == 3


# ----- every error kind: its exception, and the agent unchanged -----------------------------

ERRORS = {
    "busy": runcore.BusyError,
    "not_accepting": runcore.NotAcceptingError,
    "unexpected_outcome": runcore.UnexpectedOutcomeError,
    "unknown_call": runcore.UnknownCallError,
    "duplicate_outcome": runcore.DuplicateOutcomeError,
    "resume": runcore.ResumeError,
    "invalid_state": runcore.InvalidStateError,
    "not_expired": runcore.NotExpiredError,
    "invalid_input": runcore.InvalidInputError,
    "invalid_json": runcore.InvalidJsonError,
}


def at_tools(config=None):
    """An agent whose run is executing a batch of two calls, c1 answered."""
    agent = runcore.Agent(config)
    run_id = agent.prompt("go", now_ms=1000)
    drain(agent)
    agent.model_done(run_id, 1, calls(("c1", "a", {}), ("c2", "b", {})))
    drain(agent)
    agent.tool_done(run_id, "c1", "done")
    drain(agent)
    return agent, run_id


def awaiting():
    config = {"tools": {"rm": {"policy": "require_approval", "deadline_after_ms": 5000}}}
    agent = runcore.Agent(config)
    run_id = agent.prompt("go", now_ms=1000)
    drain(agent)
    agent.model_done(run_id, 1, calls(("c1", "rm", {"path": "x"})))
    drain(agent)
    assert agent.current_ticket()["deadline_ms"] == 6000
    return agent, run_id


CASES = [
    ("busy", lambda: at_tools(), lambda a, r: a.prompt("again")),
    ("not_accepting", lambda: (runcore.Agent(), None), lambda a, r: a.steer("nobody listens")),
    ("not_accepting", lambda: (runcore.Agent(), None), lambda a, r: a.follow_up("later")),
    ("unexpected_outcome", lambda: at_tools(), lambda a, r: a.model_done(r, 1, text("late"))),
    ("unexpected_outcome", lambda: at_tools(), lambda a, r: a.tool_done("other-run", "c2", "x")),
    ("unknown_call", lambda: at_tools(), lambda a, r: a.tool_done(r, "c9", "x")),
    ("duplicate_outcome", lambda: at_tools(), lambda a, r: a.tool_done(r, "c1", "again")),
    ("resume", lambda: at_tools(), lambda a, r: a.resume_ticket({"type": "continue"})),
    ("resume", lambda: awaiting(), lambda a, r: a.resume_ticket({"type": "input", "text": "no"})),
    ("invalid_state", lambda: at_tools(), lambda a, r: a.cancel_wait()),
    ("invalid_state", lambda: (runcore.Agent(), None), lambda a, r: a.continue_run()),
    ("not_expired", lambda: awaiting(), lambda a, r: a.expire_wait(5999)),
    ("invalid_input", lambda: (runcore.Agent(), None), lambda a, r: a.prompt("")),
    ("invalid_json", lambda: at_tools(), lambda a, r: a.model_done(r, 1, {"content": []})),
    ("invalid_json", lambda: at_tools(), lambda a, r: a.handle({"type": "warp"})),
    ("invalid_json", lambda: (runcore.Agent(), None), lambda a, r: a.handle("{not json")),
]


@pytest.mark.parametrize("kind,setup,misuse", CASES, ids=[c[0] for c in CASES])
def test_every_error_kind_raises_its_exception_and_changes_nothing(kind, setup, misuse):
    agent, run_id = setup()
    before = agent.snapshot()
    with pytest.raises(ERRORS[kind]) as caught:
        misuse(agent, run_id)
    error = caught.value
    assert isinstance(error, runcore.AgentError)
    assert error.kind == kind
    assert error.message and str(error) == error.message
    assert isinstance(error.details, dict)
    assert agent.snapshot() == before


def test_every_spec_kind_has_a_case():
    assert {c[0] for c in CASES} == set(ERRORS)


def test_errors_carry_their_fields():
    agent, run_id = at_tools()
    with pytest.raises(runcore.BusyError) as e:
        agent.prompt("again")
    assert e.value.active_run == run_id == e.value.details["active_run"]
    with pytest.raises(runcore.UnknownCallError) as e:
        agent.tool_done(run_id, "c9", "x")
    assert e.value.call_id == "c9" and e.value.executing == ["c2"]
    with pytest.raises(runcore.ResumeError) as e:
        agent.resume_ticket({"type": "continue"})
    assert e.value.resume_error == "not_waiting"
    agent, _ = awaiting()
    with pytest.raises(runcore.NotExpiredError) as e:
        agent.expire_wait(6000)
    assert e.value.deadline_ms == 6000 and e.value.now_ms == 6000


def test_a_rust_panic_is_an_ordinary_exception():
    with pytest.raises(runcore.InternalError) as e:
        runcore._runcore._panic_for_tests("boom")
    assert isinstance(e.value, Exception) and isinstance(e.value, runcore.AgentError)
    assert e.value.kind == "internal" and "boom" in str(e.value)


def test_non_json_arguments_are_type_errors():
    agent, run_id = at_tools()
    before = agent.snapshot()
    with pytest.raises(TypeError):
        agent.tool_done(run_id, "c2", {"type": "text", "text": object()})
    with pytest.raises(ValueError):
        agent.tool_done(run_id, "c2", "x", details={"n": float("nan")})
    assert agent.snapshot() == before


# ----- snapshots ------------------------------------------------------------------------------

def test_snapshot_restore_round_trip_mid_run():
    agent, run_id = at_tools()
    agent.steer("and then this")
    text_ = agent.snapshot()
    twin = runcore.Agent.restore(text_)
    assert twin.snapshot() == text_
    for a in (agent, twin):
        a.tool_done(run_id, "c2", "done too")
    assert drain(agent) == drain(twin)
    assert agent.snapshot() == twin.snapshot()
    with pytest.raises(runcore.SnapshotError) as e:
        runcore.Agent.restore('{"schema_version": 999, "agent": {}}')
    assert e.value.kind == "newer_version"
    with pytest.raises(runcore.SnapshotError) as e:
        runcore.Agent.restore("nope")
    assert e.value.kind == "malformed"
    with pytest.raises(runcore.SnapshotError) as e:
        runcore.Agent.restore('{"schema_version": 0, "agent": {}}')
    assert e.value.kind == "unsupported_version"


# ----- approvals, timers, continue --------------------------------------------------------------

def test_approval_and_timers():
    agent, run_id = awaiting()
    assert agent.poll_timeout() == 6001
    agent.handle_timeout(3000)  # nothing due yet: a no-op
    assert agent.current_ticket() is not None
    agent.resume_ticket({"type": "permission", "decision": "allow"}, now_ms=4000)
    outs = drain(agent)
    assert outs[-1]["type"] == "execute_tools"
    assert agent.poll_timeout() is None

    agent, run_id = awaiting()
    agent.handle_timeout(agent.poll_timeout())
    end = drain(agent)[-1]["event"]
    assert end["result"]["cause"] == {"type": "stopped", "reason": "wait_expired"}


def test_continue_after_max_steps():
    agent = runcore.Agent({"max_steps": 1})
    run_id = agent.prompt("go")
    drain(agent)
    agent.model_done(run_id, 1, calls(("c1", "a", {})))
    drain(agent)
    agent.tool_done(run_id, "c1", "ok")
    end = drain(agent)[-1]["event"]
    assert end["result"]["cause"] == {"type": "max_steps"}
    run_2 = agent.continue_run(now_ms=10)
    assert run_2 == "thread-1/run-2"
    assert drain(agent)[-1]["type"] == "call_model"


# ----- recovery -----------------------------------------------------------------------------------

def test_recover_from_a_store_replays_the_open_batch():
    store = runcore.MemoryStore()
    agent = runcore.Agent()
    run_id = agent.prompt("go")
    drain(agent, store)
    agent.model_done(run_id, 1, calls(("c1", "a", {}), ("c2", "b", {})))
    drain(agent, store)  # crash here: the batch is committed, no result is

    cold = runcore.Agent.recover(store, "thread-1")
    outs = drain(cold, store)
    assert outs[-1]["type"] == "execute_tools"
    assert [c["id"] for c in outs[-1]["calls"]] == ["c1", "c2"]
    for call in outs[-1]["calls"]:
        cold.tool_done(run_id, call["id"], "ok")
    drain(cold, store)
    cold.model_done(run_id, 2, text("done"))
    end = drain(cold, store)[-1]["event"]
    assert end["result"]["cause"] == {"type": "natural_end"} and end["result"]["steps"] == 2
    assert store.committed_messages("thread-1") == cold.transcript()

    sealed = runcore.Agent.recover(runcore.MemoryStore(), "thread-1", "seal")
    assert sealed.is_idle
    with pytest.raises(ValueError):
        runcore.Agent.recover(store, "thread-1", "maybe")


def test_a_second_writer_is_fenced():
    store = runcore.MemoryStore()
    agent = runcore.Agent()
    run_id = agent.prompt("go")
    drain(agent, store)
    a = runcore.Agent.recover(store, "thread-1")
    b = runcore.Agent.recover(store, "thread-1")
    a_outs = drain(a)
    b_outs = drain(b)
    assert a_outs == b_outs  # both hand out the same call_model
    a.model_done(run_id, 1, text("from a"))
    b.model_done(run_id, 1, text("from b"))
    for out in drain(a):
        if out["type"] == "commit":
            store.commit(out)
    commit_b = next(o for o in drain(b) if o["type"] == "commit")
    version = store.thread_version("thread-1")
    with pytest.raises(runcore.StoreError) as e:
        store.commit(commit_b)
    # B's first commit reuses A's operation id with another payload: rejected, nothing written.
    assert e.value.code in ("payload_mismatch", "version_conflict")
    assert store.thread_version("thread-1") == version
    assert store.committed_messages("thread-1") == a.transcript()


def test_store_read_ports():
    store = runcore.MemoryStore()
    agent2 = runcore.Agent({"tools": {"rm": {"policy": "require_approval"}}})
    rid = agent2.prompt("go")
    drain(agent2, store)
    agent2.model_done(rid, 1, calls(("c1", "rm", {})))
    drain(agent2, store)
    assert store.run_state(rid) == {"type": "awaiting"}
    ticket = store.resume_ticket(rid)
    assert ticket == agent2.current_ticket()
    assert store.pending_tickets() == [ticket]
    [summary] = store.threads()
    assert summary["thread_id"] == "thread-1" and summary["version"] == 3
    assert store.threads(after="thread-1") == []
    pinned = store.transcript_snapshot("thread-1")
    assert pinned["end"] == 2
    store.verify_transcript_snapshot(pinned)
    assert store.transcript_slice(pinned, [(1, 2)]) == store.committed_messages("thread-1")[1:]
    with pytest.raises(runcore.StoreError) as e:
        store.transcript_slice(pinned, [(0, 5)])
    assert e.value.code == "transcript"
    page = store.list_events(limit=2)
    assert [ev["sequence"] for ev in page] == [1, 2]
    assert store.list_events(after=2, limit=1)[0]["sequence"] == 3
    assert store.list_events({"type": "run", "id": "nope"}) == []
    assert store.committed_state("thread-1") == []
    assert store.run("nope") is None and store.latest_run("nope") is None
    with pytest.raises(ValueError):
        store.commit({"type": "event", "event": {}})


# ----- tool result meta (SPEC §2.1) -----------------------------------------------------------

def test_tool_done_meta_is_committed_stored_and_recovered():
    store = runcore.MemoryStore()
    agent = runcore.Agent()
    run_id = agent.prompt("go", now_ms=1000)
    drain(agent, store)
    agent.model_done(run_id, 1, calls(("c1", "a", {}), ("c2", "b", {})))
    drain(agent, store)
    agent.tool_done(run_id, "c1", "one", meta={"timestamp": 1700000000123, "trace": {"span": "s"}})
    agent.tool_done(run_id, "c2", "two", details={"n": 2}, meta={}, now_ms=2000)
    outs = drain(agent, store)
    committed = only(outs, "commit")["commit"]["messages"]
    assert committed[0]["meta"] == {"timestamp": 1700000000123, "trace": {"span": "s"}}
    assert "meta" not in committed[1], "an empty meta is absent"
    cold = runcore.Agent.recover(store, "thread-1")
    drain(cold)
    assert cold.transcript() == agent.transcript()
    assert [m.get("meta") for m in cold.transcript() if m["role"] == "tool_result"] == [
        {"timestamp": 1700000000123, "trace": {"span": "s"}},
        None,
    ]


@pytest.mark.parametrize("bad", [[1], "x", 5, True])
def test_tool_done_meta_that_is_not_a_dict_is_refused_and_changes_nothing(bad):
    agent, run_id = at_tools()
    before = agent.snapshot()
    with pytest.raises(runcore.InvalidJsonError, match="`meta` must be a JSON object"):
        agent.tool_done(run_id, "c2", "x", meta=bad)
    assert agent.snapshot() == before
    agent.tool_done(run_id, "c2", "x", meta={"ok": True})
    assert only(drain(agent), "commit")["commit"]["messages"][-1]["meta"] == {"ok": True}


def test_clear_queues_withdraws_queued_input_and_modes_change_mid_run():
    agent = runcore.Agent()
    agent.clear_queues()
    assert [o["event"] for o in drain(agent)] == [{"type": "queues_cleared", "steering": [], "follow_ups": []}]
    with pytest.raises(runcore.InvalidInputError):
        agent.set_queue_modes()
    agent.set_queue_modes(steering_mode="one_at_a_time")
    agent.prompt("task")
    drain(agent)
    agent.steer("withdrawn")
    agent.follow_up("withdrawn too")
    agent.clear_queues()
    (event,) = [o["event"] for o in drain(agent) if o["type"] == "event"]
    assert event["type"] == "queues_cleared" and event["run_id"] == "thread-1/run-1"
    assert [m["content"][0]["text"] for m in event["steering"]] == ["withdrawn"]
    assert [m["content"][0]["text"] for m in event["follow_ups"]] == ["withdrawn too"]
    agent.steer("one")
    agent.steer("two")
    agent.set_queue_modes(steering_mode="all")
    agent.model_done("thread-1/run-1", 1, text("done"))
    outs = drain(agent)
    appended = [o["event"]["event"]["message"]["content"][0]["text"] for o in outs
                if o["type"] == "event" and o["event"].get("event", {}).get("type") == "message_appended"]
    assert appended == ["one", "two"]
