"""Every scenario file under tests/scenarios/, fed line by line through `runcore.Driver`,
gives exactly the lines the `runcore drive` binary gives (the reviewed snapshots)."""

from __future__ import annotations

import json
import subprocess

import pytest

import runcore
from conftest import (SCENARIOS, SNAPSHOTS, input_lines, parse_lines, read_snapshot,
                      runcore_binary)

COLD = "t6_recovery_cold.jsonl"
FILES = sorted(p.name for p in SCENARIOS.glob("*.jsonl") if p.name != COLD)


def test_there_are_scenario_files():
    assert len(FILES) >= 13, FILES
    assert len(SNAPSHOTTED) >= 12, SNAPSHOTTED


SNAPSHOTTED = [f for f in FILES if (SNAPSHOTS / f"driver_scenarios__{f[:-6]}.snap").exists()]


@pytest.mark.parametrize("file", FILES)
def test_scenario_matches_the_binary_run_now(file):
    """The binary, run here on the file, writes what the in-process driver returns."""
    text = (SCENARIOS / file).read_text()
    binary = subprocess.run([runcore_binary(), "drive"], input=text, capture_output=True,
                            text=True, check=True)
    driver = runcore.Driver()
    ours = [out for line in input_lines(SCENARIOS / file) for out in driver.send_raw(line)]
    assert ours == binary.stdout.splitlines()


@pytest.mark.parametrize("file", SNAPSHOTTED)
def test_scenario_matches_the_snapshot(file):
    name = file[: -len(".jsonl")]
    preamble, expected = read_snapshot(name)
    assert preamble == []
    lines = input_lines(SCENARIOS / file)
    assert [step[0] for step in expected] == lines
    driver = runcore.Driver()
    for n, (line, want) in enumerate(expected, start=1):
        assert driver.send_raw(line) == want, f"{file} line {n}"
    # The same lines, as dicts, through a fresh driver and `send`.
    driver = runcore.Driver()
    for n, (line, want) in enumerate(expected, start=1):
        assert driver.send(line) == parse_lines(want), f"{file} line {n}"
    assert driver.lines_handled == len(lines)


def test_dict_lines_are_written_as_json():
    """A dict is sent as its JSON text: the same outputs as the text line."""
    _, expected = read_snapshot("a01_reducer")
    driver = runcore.Driver()
    for line, want in expected:
        assert driver.send(json.loads(line)) == parse_lines(want)


def test_t6_recovery_from_the_store_continues_like_the_warm_path():
    """The warm file runs up to the crash; an agent recovered from a store holding its
    commits, wrapped in a driver, gives the cold snapshot exactly."""
    warm = input_lines(SCENARIOS / "t6_recovery_warm.jsonl")
    store = runcore.MemoryStore()
    driver = runcore.Driver()
    for line in warm:
        for out in driver.send(line):
            if out["type"] == "commit":
                store.commit(out)
    config = json.loads(warm[0])
    agent = runcore.Agent.recover(store, "thread-1", "replay", config=config)
    preamble, expected = read_snapshot("t6_recovery_cold")
    assert list(agent.drain()) == parse_lines(preamble)
    cold = runcore.Driver.from_agent(agent)
    assert [step[0] for step in expected] == input_lines(SCENARIOS / COLD)
    for n, (line, want) in enumerate(expected, start=1):
        assert cold.send_raw(line) == want, f"cold line {n}"


def test_bad_lines_give_error_lines_not_exceptions():
    driver = runcore.Driver()
    for bad in ["", "not json", "[1]", '{"type": 3}', '{"type":"nope"}', b"\xff"]:
        out = driver.send(bad)
        assert [o["type"] for o in out] == ["error", "idle"]
        assert out[0]["error"]["kind"] == "invalid_json"
    with pytest.raises(ValueError):
        driver.send('{"type":"abort"}\n{"type":"abort"}')
    with pytest.raises(TypeError):
        driver.send(42)


def test_driver_config_is_the_config_file_of_the_binary():
    driver = runcore.Driver({"thread_id": "t-9", "context": "delta"})
    assert driver.context == "delta"
    out = driver.send({"type": "prompt", "text": "hi"})
    call = next(o for o in out if o["type"] == "call_model")
    assert call["run_id"] == "t-9/run-1"
    assert call["base"] == 0
    with pytest.raises(runcore.InvalidJsonError):
        runcore.Driver({"max_stepz": 3})


def in_context(lines, context):
    """The scenario's lines with its configuration (or a new first config line) set to
    `context`."""
    if context == "full":
        return lines
    first = json.loads(lines[0])
    if first["type"] == "config":
        return [json.dumps(dict(first, context=context))] + lines[1:]
    return [json.dumps({"type": "config", "context": context})] + lines


@pytest.mark.parametrize("context", ["full", "delta"])
@pytest.mark.parametrize("file", FILES)
def test_agent_outputs_are_the_drivers_lines(file, context):
    """`Agent.handle(line)` then `drain()` gives the driver's output lines for that line, key
    order included, in both contexts; a line the driver rejects raises the exception of its
    error kind."""
    driver = runcore.Driver()
    agent = runcore.Agent()
    lines = in_context(input_lines(SCENARIOS / file), context)
    for n, line in enumerate(lines, start=1):
        lines = driver.send(line)
        want = [o for o in lines if o["type"] not in ("error", "idle")]
        errors = [o["error"] for o in lines if o["type"] == "error"]
        if errors:
            with pytest.raises(runcore.AgentError) as caught:
                agent.handle(line)
            assert caught.value.kind == errors[0]["kind"], f"{file} line {n}"
            assert caught.value.message == errors[0]["message"]
        else:
            agent.handle(line)
        got = list(agent.drain())
        assert json.dumps(got) == json.dumps(want), f"{file} line {n}"
