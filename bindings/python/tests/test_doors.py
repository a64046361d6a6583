"""Issue 37: every door agrees. The methods of `Agent` and the line path (`Driver.send`, the
bytes `runcore drive` reads) give the same outputs or the same error kind under hostile and
extreme input, and the core's limits hold at and past each edge.

The differential test prints its seed; replay one with RUNCORE_SEED=<seed>."""

import json
import os
import random
import time

import pytest

import runcore

MAX_LINE = 64 * 1024 * 1024
MAX_DEPTH = 64
MAX_NOW = 2**53 - 1


def nested(levels):
    value = 1
    for _ in range(levels):
        value = [value]
    return value


def outcome(fn):
    try:
        fn()
        return "ok"
    except runcore.AgentError as e:
        return e.kind
    except Exception as e:  # noqa: BLE001 - the kind of any other error is compared
        return type(e).__name__


def drain(agent):
    return list(agent.drain())


def line_outcome(driver, line):
    try:
        text = json.dumps(line, ensure_ascii=False, allow_nan=True)
        data = text.encode("utf-8", "surrogatepass")
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, []
    lines = driver.send(data)
    errors = [l for l in lines if l["type"] == "error"]
    outputs = [l for l in lines if l["type"] not in ("error", "idle")]
    return (errors[0]["error"]["kind"] if errors else "ok"), outputs


def random_input(rng, state):
    # (Ids are str: None is a TypeError of the argument, not an input.)
    run = rng.choice([state["run"] or "none"] * 3 + ["nope", ""])
    now = rng.choice([None, None, 0, 7, MAX_NOW, MAX_NOW + 1, 2**64 - 1])
    text = rng.choice(["hi", "", 'é🙂 "q"\n', "x" * 300])
    step = rng.choice([state["step"]] * 3 + [0, 2**32])

    def with_now(line):
        return line if now is None else {**line, "now_ms": now}

    kind = rng.choice(["prompt", "prompt", "delta", "done", "done", "done", "tool", "tool"])
    if kind == "prompt":
        state["n"] += 1
        run_id = rng.choice([None, None, f"run-{state['n']}"])
        line = with_now({"type": "prompt", "text": text, **({} if run_id is None else {"run_id": run_id})})
        return line, lambda a: a.prompt(text, run_id=run_id, now_ms=now)
    if kind == "delta":
        line = with_now({"type": "model_delta", "run_id": run, "step": step, "text": text})
        return line, lambda a: a.model_delta(run, step, text, now_ms=now)
    if kind == "done":
        depth = rng.choice([1, 10, MAX_DEPTH - 4, MAX_DEPTH - 3, MAX_DEPTH, 130])
        state["n"] += 1
        message = rng.choice([
            {"content": [{"type": "text", "text": text}], "stop_reason": "stop"},
            {"content": [{"type": "text", "text": text}], "stop_reason": "sideways"},
            {"content": [{"type": "tool_call", "id": f"c{state['n']}", "name": "echo", "arguments": nested(depth)}], "stop_reason": "tool_use"},
            {"content": [{"type": "tool_call", "id": "p", "name": "echo", "arguments": {"__proto__": {"x": 1}}}], "stop_reason": "tool_use"},
        ])
        line = with_now({"type": "model_done", "run_id": run, "step": step, "message": message})
        return line, lambda a: a.model_done(run, step, message, now_ms=now)
    call_id = rng.choice([state["call"] or "c", "c"])
    is_error = rng.choice([False, True])
    line = with_now({"type": "tool_done", "run_id": run, "call_id": call_id, "content": text, "is_error": is_error})
    return line, lambda a: a.tool_done(run, call_id, text, is_error=is_error, now_ms=now)


def test_differential_every_method_and_the_line_path_agree():
    seeds = [int(os.environ["RUNCORE_SEED"])] if "RUNCORE_SEED" in os.environ else [1, 2, 3, 37, int(time.time()) % 100000]
    for seed in seeds:
        print(f"doors differential seed {seed} (replay: RUNCORE_SEED={seed})")
        rng = random.Random(seed)
        agent = runcore.Agent()
        driver = runcore.Driver()
        state = {"run": None, "step": 1, "call": None, "n": 0}
        for i in range(120):
            line, call = random_input(rng, state)
            fast = outcome(lambda: call(agent))
            outputs = drain(agent) if fast == "ok" else []
            kind, via_line = line_outcome(driver, line)
            where = f"seed {seed} step {i}: {json.dumps(line)[:200]}"
            assert fast == kind, where
            assert outputs == via_line, where
            snapshot = agent.snapshot()
            assert snapshot == driver.snapshot(), where
            assert runcore.Agent.restore(snapshot).snapshot() == snapshot, where
            for output in outputs:
                if output["type"] == "call_model":
                    state["run"], state["step"] = output["run_id"], output["step"]
                if output["type"] == "execute_tools":
                    state["call"] = output["calls"][0]["id"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1, 1.5])
def test_bad_times_are_typed_errors(bad):
    agent = runcore.Agent()
    with pytest.raises((TypeError, OverflowError)):
        agent.prompt("hi", now_ms=bad)
    assert agent.is_idle


def test_now_at_and_past_the_edge():
    agent = runcore.Agent()
    agent.prompt("hi", now_ms=MAX_NOW)
    assert agent.clock_ms == MAX_NOW
    with pytest.raises(runcore.InvalidJsonError):
        runcore.Agent().prompt("hi", now_ms=MAX_NOW + 1)
    with pytest.raises(runcore.InvalidJsonError):
        runcore.Agent().handle({"type": "prompt", "text": "hi", "now_ms": MAX_NOW + 1})


def test_line_cap_at_and_past_the_edge():
    head = len(json.dumps({"type": "prompt", "text": ""}, separators=(",", ":")))
    at_edge = "a" * (MAX_LINE - head)
    runcore.Agent().prompt(at_edge)
    runcore.Agent().handle({"type": "prompt", "text": at_edge})
    past = at_edge + "a"
    for fn in (
        lambda: runcore.Agent().prompt(past),
        lambda: runcore.Agent().handle({"type": "prompt", "text": past}),
        lambda: runcore.Agent().steer(past + "a"),
    ):
        with pytest.raises(runcore.InvalidJsonError):
            fn()
    agent = runcore.Agent()
    run = agent.prompt("go")
    drain(agent)
    before = agent.snapshot()
    huge = "b" * (70 * 1024 * 1024)
    for fn in (
        lambda: agent.model_delta(run, 1, huge),
        lambda: agent.model_done(run, 1, {"content": [{"type": "text", "text": huge}], "stop_reason": "stop"}),
        lambda: agent.tool_done(run, "c", huge),
    ):
        with pytest.raises(runcore.InvalidJsonError):
            fn()
    assert agent.snapshot() == before


@pytest.mark.parametrize("depth", [MAX_DEPTH - 4, MAX_DEPTH - 3, 100, 126, 200])
def test_nesting_agrees_with_the_driver_and_snapshots_restore(depth):
    message = {"content": [{"type": "tool_call", "id": "c", "name": "t", "arguments": nested(depth)}], "stop_reason": "tool_use"}
    agent = runcore.Agent()
    agent.prompt("go", run_id="r")
    drain(agent)
    driver = runcore.Driver()
    driver.send({"type": "prompt", "text": "go", "run_id": "r"})
    fast = outcome(lambda: agent.model_done("r", 1, message))
    kind, _ = line_outcome(driver, {"type": "model_done", "run_id": "r", "step": 1, "message": message})
    assert fast == kind
    snapshot = agent.snapshot()
    assert runcore.Agent.restore(snapshot).snapshot() == snapshot


def test_lone_surrogates_are_refused_not_replaced():
    agent = runcore.Agent()
    with pytest.raises(UnicodeEncodeError):
        agent.prompt("\ud800")
    assert agent.is_idle
    lines = runcore.Driver().send('{"type":"prompt","text":"\\ud800"}')
    assert lines[0]["type"] == "error"
    assert lines[0]["error"]["kind"] == "invalid_json"
