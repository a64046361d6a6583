"""The comparison workloads w1 and w2 (as in `benches/support/workloads.rs`) from Python, three
ways side by side: `runcore.Agent` (in process, one method per input), `runcore.Driver` (in
process, one JSON line per input) and a `runcore drive` subprocess (a pipe and JSON text per
line).

- w1 (long run): one prompt; the scripted model answers N-1 times with 20 text deltas of 50
  bytes, then an assistant message with that text and one `echo` tool call {"i": step}; the
  tool returns a 100-byte text; then a final text-only answer (max_steps = N). Items: steps.
- w2 (many runs): N sequential prompts on one agent, each answered by one text-only assistant
  message of 1000 bytes. Items: runs.

Every output is turned into a Python object and looked at (its "type"), as a host would.
With `--context delta` (the default) each `call_model` carries only the new messages, so a
step costs the same at any N; with `--context full` each carries the whole transcript, which
is quadratic over a run (use it with N = 1000).

    python bindings/python/benches/workloads.py [--n 1000,10000] [--context delta|full]
        [--ways agent,driver,subprocess] [--workloads w1,w2] [--binary target/release/runcore]
        [--repeat 3]

Prints one JSON line per (way, workload, N):
{"peer","way","workload","param","context","wall_ms","per_item_us"}, the best of --repeat runs. Build the package and the
binary in release first: `pip install ./bindings/python` and `cargo build --release`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, List

import runcore

ROOT = Path(__file__).resolve().parents[3]
DELTA = "d" * 50
TEXT = DELTA * 20
TOOL_TEXT = "t" * 100
ANSWER = "a" * 1000


def w1_message(n: int, step: int) -> dict:
    if step < n:
        return {
            "content": [
                {"type": "text", "text": TEXT},
                {"type": "tool_call", "id": f"call-{step}", "name": "echo", "arguments": {"i": step}},
            ],
            "stop_reason": "tool_use",
        }
    return {"content": [{"type": "text", "text": "done"}], "stop_reason": "stop"}


def answer() -> dict:
    return {"content": [{"type": "text", "text": ANSWER}], "stop_reason": "stop"}


# ----- runcore.Agent -----------------------------------------------------------------------------


def agent_w1(n: int, context: str) -> int:
    agent = runcore.Agent({"max_steps": n, "context": context})
    agent.prompt("go", now_ms=0)
    steps = 0
    out = agent.poll()
    while out is not None:
        kind = out["type"]
        if kind == "call_model":
            run_id, step = out["run_id"], out["step"]
            steps = step
            if step < n:
                for _ in range(20):
                    agent.model_delta(run_id, step, DELTA)
            agent.model_done(run_id, step, w1_message(n, step))
        elif kind == "execute_tools":
            for call in out["calls"]:
                agent.tool_done(out["run_id"], call["id"], TOOL_TEXT)
        out = agent.poll()
    return steps


def agent_w2(n: int, context: str) -> int:
    agent = runcore.Agent({"context": context})
    for i in range(n):
        agent.prompt(f"q{i}", now_ms=i)
        out = agent.poll()
        while out is not None:
            if out["type"] == "call_model":
                agent.model_done(out["run_id"], out["step"], answer())
            out = agent.poll()
    return n


# ----- line drivers: runcore.Driver and a subprocess ---------------------------------------------


def line_w1(send: Callable[[dict], List[dict]], n: int, context: str) -> int:
    send({"type": "config", "max_steps": n, "context": context})
    pending = send({"type": "prompt", "text": "go", "now_ms": 0})
    steps = 0
    while pending:
        out = pending.pop(0)
        kind = out["type"]
        if kind == "call_model":
            run_id, step = out["run_id"], out["step"]
            steps = step
            if step < n:
                for _ in range(20):
                    pending += send({"type": "model_delta", "run_id": run_id, "step": step,
                                     "text": DELTA})
            pending += send({"type": "model_done", "run_id": run_id, "step": step,
                             "message": w1_message(n, step)})
        elif kind == "execute_tools":
            for call in out["calls"]:
                pending += send({"type": "tool_done", "run_id": out["run_id"],
                                 "call_id": call["id"], "content": TOOL_TEXT})
    return steps


def line_w2(send: Callable[[dict], List[dict]], n: int, context: str) -> int:
    send({"type": "config", "context": context})
    for i in range(n):
        for out in send({"type": "prompt", "text": f"q{i}", "now_ms": i}):
            if out["type"] == "call_model":
                send({"type": "model_done", "run_id": out["run_id"], "step": out["step"],
                      "message": answer()})
    return n


def driver_send() -> Callable[[dict], List[dict]]:
    driver = runcore.Driver()
    return driver.send


class Subprocess:
    """`runcore drive` through pipes: one JSON line out, lines back up to its `idle`."""

    def __init__(self, binary: str):
        self.proc = subprocess.Popen([binary, "drive"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1 << 16)

    def send(self, line: dict) -> List[dict]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(line) + "\n")
        self.proc.stdin.flush()
        out = []
        while True:
            value = json.loads(self.proc.stdout.readline())
            if value["type"] == "idle":
                return out
            out.append(value)

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait()


# ----- running ----------------------------------------------------------------------------------


def measure_once(way: str, workload: str, n: int, context: str, binary: str) -> float:
    proc = Subprocess(binary) if way == "subprocess" else None
    start = time.perf_counter()
    if way == "agent":
        items = (agent_w1 if workload == "w1" else agent_w2)(n, context)
    else:
        send = proc.send if proc is not None else driver_send()
        items = (line_w1 if workload == "w1" else line_w2)(send, n, context)
    wall = time.perf_counter() - start
    if proc is not None:
        proc.close()
    assert items == n, (way, workload, items)
    return wall


def measure(way: str, workload: str, n: int, context: str, binary: str,
            repeat: int) -> Dict[str, object]:
    """The best of `repeat` runs (the machine is shared: the minimum is the least disturbed)."""
    wall = min(measure_once(way, workload, n, context, binary) for _ in range(repeat))
    items = n
    return {
        "peer": "runcore-python",
        "way": way,
        "workload": workload,
        "param": n,
        "context": context,
        "wall_ms": round(wall * 1000, 3),
        "per_item_us": round(wall * 1e6 / items, 3),
    }


def split(text: str) -> Iterable[str]:
    return [part for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="1000,10000")
    parser.add_argument("--context", default="delta", choices=["delta", "full"])
    parser.add_argument("--ways", default="agent,driver,subprocess")
    parser.add_argument("--workloads", default="w1,w2")
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "runcore"))
    parser.add_argument("--repeat", type=int, default=3, help="report the best of this many runs")
    args = parser.parse_args()
    for workload in split(args.workloads):
        for n in (int(n) for n in split(args.n)):
            for way in split(args.ways):
                print(json.dumps(measure(way, workload, n, args.context, args.binary, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
