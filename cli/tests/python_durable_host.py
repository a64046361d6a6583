"""A durable Python host: `runcore drive --store sqlite:...` killed with SIGKILL while a tool is
outstanding, restarted, and the run finished.

Usage: python_durable_host.py RUNCORE DIR replay|seal

replay: after the restart the driver writes the same execute_tools again; the host runs the
        tool and the model answers; the final transcript equals the one of an uncrashed run
        (the same session on another thread of the same store).
seal:   after the restart the run ends indeterminate with an interrupted result, and the next
        prompt starts a new run id.
Prints "ok replay" or "ok seal"; any failed check raises (exit status 1).
"""
import json, os, subprocess, sys

RUNCORE, DIR, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
STORE = "sqlite:" + os.path.join(DIR, "host.db")


class Driver:
    """One `runcore drive --store` process, conversed with line by line."""

    def __init__(self, thread, *flags):
        self.proc = subprocess.Popen(
            [RUNCORE, "drive", "--store", STORE, "--thread", thread,
             # A short lease, so the restart after the SIGKILL takes the dead owner's
             # claim over within half a second (it waits for it).
             "--lease-ms", "500", "--wait-claim", "10000", *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.start = self.until_idle()  # what recovery wrote, then idle 0

    def until_idle(self):
        out = [json.loads(self.proc.stdout.readline())]
        while out[-1]["type"] != "idle":
            out.append(json.loads(self.proc.stdout.readline()))
        return out

    def send(self, line):
        self.proc.stdin.write(json.dumps(line) + "\n")
        self.proc.stdin.flush()
        return self.until_idle()

    def finish(self):
        self.proc.stdin.close()
        assert self.proc.wait() == 0


def first(out, kind):
    return next(o for o in out if o["type"] == kind)


def answer(driver, call, stop_reason, *content):
    message = {"role": "assistant", "content": list(content), "stop_reason": stop_reason}
    return driver.send({"type": "model_done", "run_id": call["run_id"], "step": call["step"],
                        "message": message})


def up_to_the_tool(driver):
    """A prompt and a model that asks for a tool: returns the execute_tools line."""
    out = driver.send({"type": "prompt", "text": "Archive the Q3 folder", "now_ms": 1000})
    out = answer(driver, first(out, "call_model"), "tool_use",
                 {"type": "tool_call", "id": "call-1", "name": "archive",
                  "arguments": {"folder": "q3"}})
    return first(out, "execute_tools")


def to_the_end(driver, tools):
    """Runs the tools (idempotent by run and call id) and lets the model finish."""
    for call in tools["calls"]:
        out = driver.send({"type": "tool_done", "run_id": tools["run_id"], "call_id": call["id"],
                           "content": "archived " + call["arguments"]["folder"]})
    out = answer(driver, first(out, "call_model"), "stop", {"type": "text", "text": "Done."})
    assert ended(out) == ["natural_end"], out


def messages(thread):
    shown = subprocess.run([RUNCORE, "show", thread, "--store", STORE, "--json"],
                           capture_output=True, text=True, check=True)
    return json.loads(shown.stdout)["messages"]


def ended(out):
    return [o["event"]["result"]["cause"]["type"] for o in out
            if o["type"] == "event" and o["event"]["type"] == "run_end"]


driver = Driver("crashed")
assert driver.start == [{"type": "idle", "line": 0}], driver.start
tools = up_to_the_tool(driver)
driver.proc.kill()  # SIGKILL while the tool is outstanding
driver.proc.wait()

if MODE == "replay":
    driver = Driver("crashed")  # --recover replay is the default
    kinds = [o["type"] for o in driver.start]
    assert "commit" not in kinds and kinds[-2:] == ["execute_tools", "idle"], kinds
    assert first(driver.start, "execute_tools") == tools  # the same calls, again
    to_the_end(driver, tools)
    driver.finish()
    uncrashed = Driver("uncrashed")
    to_the_end(uncrashed, up_to_the_tool(uncrashed))
    uncrashed.finish()
    assert messages("crashed") == messages("uncrashed")
    assert len(messages("crashed")) == 4
    print("ok replay")
elif MODE == "seal":
    driver = Driver("crashed", "--recover", "seal")
    kinds = [o["type"] for o in driver.start]
    assert kinds[0] == "commit" and kinds[-1] == "idle", kinds
    assert driver.start[0]["commit"]["run"]["cause"] == {"type": "indeterminate"}
    assert ended(driver.start) == ["indeterminate"], driver.start
    results = [m for m in driver.start[0]["commit"]["messages"] if m["role"] == "tool_result"]
    assert [r["outcome"] for r in results] == ["interrupted"], results
    out = driver.send({"type": "prompt", "text": "Try again", "now_ms": 5000})
    assert first(out, "commit")["commit"]["run"]["run_id"] == "crashed/run-2", out
    driver.finish()
    print("ok seal")
else:
    raise SystemExit("mode must be replay or seal")
