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


def test_a_user_message_reads_as_written_on_every_door():
    """`"role": "user"` (what the driver prints of every user message) is accepted wherever a
    user message is read; any other role is `invalid_input` naming the accepted role."""
    def text(t):
        return [{"type": "text", "text": t}]

    printer = runcore.Driver()
    printed = next(l for l in printer.send(json.dumps({"type": "prompt", "text": "hello"})) if l["type"] == "commit")
    printed = printed["commit"]["messages"][0]
    assert printed["role"] == "user"
    agent = runcore.Agent()
    driver = runcore.Driver()
    messages = [printed, {"role": "user", "content": text("b")}]
    assert agent.prompt(messages, run_id="r") == "r"
    assert line_outcome(driver, {"type": "prompt", "messages": messages, "run_id": "r"})[0] == "ok"
    for line in [
        {"type": "steer", "text": {"role": "user", "content": text("s")}},
        {"type": "follow_up", "text": {"role": "user", "content": text("f"), "id": "f1"}},
    ]:
        agent.handle(line)
        assert line_outcome(driver, line)[0] == "ok"
    drain(agent)
    assert agent.snapshot() == driver.snapshot()
    before = agent.snapshot()
    for call, line in [
        (lambda a: a.prompt([{"content": text("a")}, {"role": "assistant", "content": text("b")}]),
         {"type": "prompt", "messages": [{"content": text("a")}, {"role": "assistant", "content": text("b")}]}),
        (lambda a: a.handle({"type": "steer", "text": {"role": "system", "content": text("s")}}),
         {"type": "steer", "text": {"role": "system", "content": text("s")}}),
        (lambda a: a.handle({"type": "follow_up", "text": {"role": "tool_result", "content": text("f")}}),
         {"type": "follow_up", "text": {"role": "tool_result", "content": text("f")}}),
    ]:
        with pytest.raises(runcore.InvalidInputError, match=r'a user message has role "user" \(or none\)'):
            call(agent)
        assert line_outcome(driver, line)[0] == "invalid_input"
        assert agent.snapshot() == before


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


S = "a\ud800b"  # a lone surrogate: a Python str may hold one, Unicode text may not


def surrogate_calls(tmp_path):
    """One call per string parameter of the package (stub name `Class.method:param`), each
    with a lone surrogate in that parameter and everything else valid; `agent` is left with a
    model call out, so each agent call would otherwise be accepted."""
    agent = runcore.Agent()
    agent.prompt("go", run_id="r")
    drain(agent)
    store = runcore.MemoryStore()
    user = {"role": "user", "content": [{"type": "text", "text": S}]}
    text_answer = {"content": [{"type": "text", "text": "ok"}], "stop_reason": "stop"}
    call_model = {"type": "call_model", "run_id": "r", "step": 1, "final_step": False,
                  "context": {"system": None, "messages": [], "tools": []}}
    ticket = {"thread_id": "t", "version": 0, "digest": "0" * 64}
    calls = {
        "Agent.__init__:config": lambda: runcore.Agent({"thread_id": S}),
        "Agent.handle:line": lambda: agent.handle('{"type":"model_delta","run_id":"r","step":1,"text":"' + S + '"}'),
        "Agent.handle:line(dict)": lambda: agent.handle({"type": "model_delta", "run_id": "r", "step": 1, "text": S}),
        "Agent.handle:line(key)": lambda: agent.handle({"type": "model_delta", "run_id": "r", "step": 1, "text": "x", S: 1}),
        "Agent.prompt:text": lambda: runcore.Agent().prompt(S),
        "Agent.prompt:text(messages)": lambda: runcore.Agent().prompt([user]),
        "Agent.prompt:run_id": lambda: runcore.Agent().prompt("go", run_id=S),
        "Agent.import_messages:messages": lambda: runcore.Agent().import_messages([user]),
        "Agent.steer:text": lambda: agent.steer(S),
        "Agent.follow_up:text": lambda: agent.follow_up(S),
        "Agent.model_delta:run_id": lambda: agent.model_delta(S, 1, "x"),
        "Agent.model_delta:text": lambda: agent.model_delta("r", 1, S),
        "Agent.model_delta:kind": lambda: agent.model_delta("r", 1, "x", kind=S),
        "Agent.model_done:run_id": lambda: agent.model_done(S, 1, text_answer),
        "Agent.model_done:message": lambda: agent.model_done("r", 1, {**text_answer, "stop_reason": S}),
        "Agent.model_failed:run_id": lambda: agent.model_failed(S, 1, "c", "m"),
        "Agent.model_failed:code": lambda: agent.model_failed("r", 1, S, "m"),
        "Agent.model_failed:message": lambda: agent.model_failed("r", 1, "c", S),
        "Agent.tool_progress:run_id": lambda: agent.tool_progress(S, "c", "x"),
        "Agent.tool_progress:call_id": lambda: agent.tool_progress("r", S, "x"),
        "Agent.tool_progress:content": lambda: agent.tool_progress("r", "c", S),
        "Agent.tool_done:run_id": lambda: agent.tool_done(S, "c", "x"),
        "Agent.tool_done:call_id": lambda: agent.tool_done("r", S, "x"),
        "Agent.tool_done:content": lambda: agent.tool_done("r", "c", S),
        "Agent.tool_done:details": lambda: agent.tool_done("r", "c", "x", details={"d": S}),
        "Agent.tool_done:meta": lambda: agent.tool_done("r", "c", "x", meta={S: "m"}),
        "Agent.resume:command": lambda: agent.resume({"type": S}),
        "Agent.resume_ticket:result": lambda: agent.resume_ticket({"type": "input", "text": S}),
        "Agent.stop:reason": lambda: agent.stop(S),
        "Agent.compact:summary": lambda: agent.compact(S, 0),
        "Agent.restore:snapshot": lambda: runcore.Agent.restore(agent.snapshot()[:-1] + ',"x":"' + S + '"}'),
        "Agent.restore:context": lambda: runcore.Agent.restore(agent.snapshot(), context=S),
        "Agent.recover:thread_id": lambda: runcore.Agent.recover(store, S),
        "Agent.recover:policy": lambda: runcore.Agent.recover(store, "t", S),
        "Agent.recover:config": lambda: runcore.Agent.recover(store, "t", config={"system": S}),
        "Driver.__init__:config": lambda: runcore.Driver({"thread_id": S}),
        "Driver.__init__:policy": lambda: runcore.Driver(store=store, policy=S),
        "Driver.__init__:owner": lambda: runcore.Driver(store=store, owner=S),
        "Store.commit:output": lambda: store.commit({"type": "commit", "thread_id": S}),
        "Store.committed_messages:thread_id": lambda: store.committed_messages(S),
        "Store.run:run_id": lambda: store.run(S),
        "Store.latest_run:thread_id": lambda: store.latest_run(S),
        "Store.resume_ticket:run_id": lambda: store.resume_ticket(S),
        "Store.run_state:run_id": lambda: store.run_state(S),
        "Store.committed_state:thread_id": lambda: store.committed_state(S),
        "Store.thread_version:thread_id": lambda: store.thread_version(S),
        "Store.thread_as_of:thread_id": lambda: store.thread_as_of(S, 0),
        "Store.fork:thread_id": lambda: store.fork(S, 0, "n"),
        "Store.fork:new_thread_id": lambda: store.fork("t", 0, S),
        "Store.forked_from:thread_id": lambda: store.forked_from(S),
        "Store.threads:after": lambda: store.threads(after=S),
        "Store.pending_tickets:after": lambda: store.pending_tickets(after=S),
        "Store.list_events:scope": lambda: store.list_events({"type": "thread", "id": S}),
        "Store.transcript_snapshot:thread_id": lambda: store.transcript_snapshot(S),
        "Store.verify_transcript_snapshot:snapshot": lambda: store.verify_transcript_snapshot({**ticket, "thread_id": S}),
        "Store.transcript_slice:snapshot": lambda: store.transcript_slice({**ticket, "thread_id": S}, [(0, 1)]),
        "Store.claim_thread:thread_id": lambda: store.claim_thread(S, "o", "q", 1000, 0),
        "Store.claim_thread:owner": lambda: store.claim_thread("t", S, "q", 1000, 0),
        "Store.claim_thread:request_id": lambda: store.claim_thread("t", "o", S, 1000, 0),
        "Store.renew_claim:claim": lambda: store.renew_claim({"thread_id": S, "owner": "o", "epoch": 1, "expires_at_ms": 1}, 10),
        "Store.release_claim:claim": lambda: store.release_claim({"thread_id": S, "owner": "o", "epoch": 1, "expires_at_ms": 1}),
        "Store.thread_claim:thread_id": lambda: store.thread_claim(S),
        "SqliteStore.__init__:path": lambda: runcore.SqliteStore(str(tmp_path / S)),
        "SqliteStore.__init__:synchronous": lambda: runcore.SqliteStore(str(tmp_path / "db"), synchronous=S),
        "PostgresStore.__init__:url": lambda: runcore.PostgresStore(S),
        "PostgresStore.__init__:schema": lambda: runcore.PostgresStore("postgres://localhost:1/x", schema=S),
        "Store.open:url": lambda: runcore.Store.open(f"sqlite:{tmp_path}/{S}.db"),
        "sweep:owner": lambda: runcore.sweep(store, owner=S),
        "sweep:policy": lambda: runcore.sweep(store, policy=S),
        "approve:run_id": lambda: runcore.approve(store, S),
        "approve:note": lambda: runcore.approve(store, "r", S),
        "approve:owner": lambda: runcore.approve(store, "r", owner=S),
        "deny:run_id": lambda: runcore.deny(store, S),
        "deny:reason": lambda: runcore.deny(store, "r", S),
        "deny:owner": lambda: runcore.deny(store, "r", owner=S),
        "trace:thread_id": lambda: runcore.trace(store, S),
        "trace:run_id": lambda: runcore.trace(store, "t", run_id=S),
        "providers.encode:call_model": lambda: runcore.providers.anthropic.encode({**call_model, "run_id": S}, {"model": "m"}),
        "providers.encode:options": lambda: runcore.providers.openai_chat.encode(call_model, {"model": S}),
        "providers.Decoder:run_id": lambda: runcore.providers.openai_responses.Decoder(S, 1),
    }
    return agent, calls


def stub_str_parameters():
    """`Class.method:param` (or `function:param`) of every parameter the stub types with
    `str` in it (`str`, `Optional[str]`, `Union[..., str]`, `Mapping[str, Any]`, ...)."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(runcore.__file__).with_name("__init__.pyi").read_text())
    found = set()

    def visit(prefix, fn):
        args = fn.args
        for a in args.posonlyargs + args.args + args.kwonlyargs:
            if a.arg in ("self", "cls") or a.annotation is None:
                continue
            if any(isinstance(n, ast.Name) and n.id == "str" for n in ast.walk(a.annotation)):
                found.add(f"{prefix}{fn.name}:{a.arg}")

    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            visit("", node)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    visit(f"{node.name}.", item)
    return found


def test_every_str_parameter_refuses_a_lone_surrogate_as_invalid_json(tmp_path):
    agent, calls = surrogate_calls(tmp_path)
    # `Driver.send` never raises for a line's content: it gives the driver's error line (below).
    line_path = {"Driver.send:line", "Driver.send_raw:line"}
    missing = stub_str_parameters() - line_path - {name.split("(")[0] for name in calls}
    assert not missing, f"string parameters with no lone-surrogate case: {sorted(missing)}"
    before = agent.snapshot()
    for name, call in calls.items():
        with pytest.raises(runcore.InvalidJsonError, match="lone surrogate") as e:
            call()
        assert e.value.kind == "invalid_json", name
        assert agent.snapshot() == before, f"{name} changed the agent"
    # The agent still works: the model call it had out is answered.
    agent.model_done("r", 1, {"content": [{"type": "text", "text": "ok"}], "stop_reason": "stop"})
    assert any(o["type"] == "commit" for o in drain(agent))


def test_lone_surrogates_are_refused_not_replaced():
    agent = runcore.Agent()
    with pytest.raises(runcore.InvalidJsonError):
        agent.prompt("\ud800")
    assert agent.is_idle
    # The line path: a str line holding one is the bytes the driver refuses on its stdin.
    for line in ('{"type":"prompt","text":"\\ud800"}', '{"type":"prompt","text":"\ud800"}'):
        lines = runcore.Driver().send(line)
        assert lines[0]["type"] == "error"
        assert lines[0]["error"]["kind"] == "invalid_json"
        raw = runcore.Driver().send_raw(line)
        assert json.loads(raw[0])["error"]["kind"] == "invalid_json"


MAX_SNAPSHOT_DEPTH = MAX_DEPTH + 32


def json_depth(value):
    if isinstance(value, dict):
        return 1 + max((json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((json_depth(v) for v in value), default=0)
    return 0


def snapshot_with_arguments(levels):
    """An agent's snapshot whose transcript's tool call arguments nest `levels` levels."""
    agent = runcore.Agent()
    agent.prompt("go", run_id="r")
    drain(agent)
    agent.model_done("r", 1, {"content": [{"type": "tool_call", "id": "c", "name": "t", "arguments": {"x": 1}}], "stop_reason": "tool_use"})
    snapshot = json.loads(agent.snapshot())
    snapshot["agent"]["messages"][-1]["content"][0]["arguments"] = {"x": nested(levels - 1)}
    return json.dumps(snapshot)


def test_the_snapshot_reader_applies_its_own_depth_limit():
    # envelope, agent, messages, message, content, block: the arguments are level 7.
    around = json_depth(json.loads(snapshot_with_arguments(20))) - 20
    at_edge = snapshot_with_arguments(MAX_SNAPSHOT_DEPTH - around)
    assert json_depth(json.loads(at_edge)) == MAX_SNAPSHOT_DEPTH
    runcore.Agent.restore(at_edge)
    # Past the edge, below serde_json's limit of 128 and past it: one error, the reader's own.
    for levels in (MAX_SNAPSHOT_DEPTH - around + 1, 127 - around, 300):
        text = snapshot_with_arguments(levels) if levels < 200 else at_edge.replace(
            '{"x": ' + "[" * (MAX_SNAPSHOT_DEPTH - around - 1), '{"x": ' + "[" * levels, 1
        ).replace("]" * (MAX_SNAPSHOT_DEPTH - around - 1) + "}", "]" * levels + "}", 1)
        with pytest.raises(runcore.SnapshotError, match=f"nests deeper than {MAX_SNAPSHOT_DEPTH} levels") as e:
            runcore.Agent.restore(text)
        assert e.value.kind == "malformed", levels


# ----- every native entry point runs under the panic guard -------------------------------------

SRC = __import__("pathlib").Path(__file__).resolve().parent.parent / "src"
GUARDS = ("crate::errors::guard(", "errors::guard(", "guard(", "self.guarded(")


def _skip_literal(s, i):
    """The index after the string, char literal or line comment starting at `i`, or None."""
    import re

    if s.startswith("//", i):
        return s.index("\n", i)
    raw = re.match(r'b?r(#*)"', s[i:])
    if raw and (i == 0 or not (s[i - 1].isalnum() or s[i - 1] == "_")):
        end = s.index('"' + raw.group(1), i + len(raw.group(0)))
        return end + 1 + len(raw.group(1))
    if s[i] == '"' or s.startswith('b"', i):
        j = i + (2 if s[i] == "b" else 1)
        while s[j] != '"':
            j += 2 if s[j] == "\\" else 1
        return j + 1
    char = re.match(r"'(\\.|[^\\'])'", s[i:])
    if s[i] == "'" and char:
        return i + len(char.group(0))
    return None


def _close(s, i, open_="{", close="}"):
    depth = 0
    while i < len(s):
        skipped = _skip_literal(s, i)
        if skipped is not None:
            i = skipped
            continue
        if s[i] == open_:
            depth += 1
        elif s[i] == close:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise AssertionError("unbalanced braces")


def _body_start(s, i):
    """The `{` opening the body of the fn whose name ends at `i`."""
    depth = 0
    while True:
        skipped = _skip_literal(s, i)
        if skipped is not None:
            i = skipped
            continue
        if s[i] in "(<[":
            depth += 1
        elif s[i] in ")>]" and not (s[i] == ">" and s[i - 1] == "-"):
            depth -= 1
        elif s[i] == "{" and depth == 0:
            return i
        i += 1


def entry_points():
    """`{file: {fn: body}}` of every `#[pymethods]` method and `#[pyfunction]`."""
    import re

    found = {}
    for path in sorted(SRC.glob("*.rs")):
        s = path.read_text()
        fns = {}
        for block in re.finditer(r"#\[pymethods\]\s*impl[^{]*\{", s):
            end = _close(s, block.end() - 1)
            at = block.end()
            while True:
                fn = re.compile(r"\bfn\s+(\w+)").search(s, at, end)
                if not fn:
                    break
                start = _body_start(s, fn.end())
                close = _close(s, start)
                fns[f"{block.group(0).split()[-2]}.{fn.group(1)}"] = s[start + 1:close]
                at = close + 1
        for attr in re.finditer(r"#\[pyfunction\]", s):
            fn = re.compile(r"\bfn\s+(\w+)").search(s, attr.end())
            start = _body_start(s, fn.end())
            fns[fn.group(1)] = s[start + 1:_close(s, start)]
        if fns:
            found[path.name] = fns
    return found


def _one_guarded_expression(body):
    body = body.strip()
    if not body.startswith(GUARDS):
        return False
    depth, i = 0, 0
    while i < len(body):
        skipped = _skip_literal(body, i)
        if skipped is not None:
            i = skipped
            continue
        if body[i] in "({[":
            depth += 1
        elif body[i] in ")}]":
            depth -= 1
        elif body[i] == ";" and depth == 0:
            return False
        i += 1
    return True


def test_every_native_entry_point_is_one_guarded_expression():
    """A Rust panic anywhere in a method, getter or function (argument checks, conversions,
    getters included) becomes `InternalError`, never pyo3's `PanicException`: each body is one
    call of the panic guard (`errors::guard`, or `Agent`'s `guarded`, which also poisons)."""
    found = entry_points()
    names = {f"{file}:{fn}" for file, fns in found.items() for fn in fns}
    # The listing finds every kind of entry point (a sample of each).
    for expected in ("agent.rs:PyAgent.thread_id", "agent.rs:PyAgent.__repr__", "agent.rs:Drain.__next__",
                     "driver.rs:PyDriver.new", "driver.rs:PyDriver.lines_handled", "store.rs:PyStore.run",
                     "store.rs:PySqliteStore.path", "claims.rs:sweep", "providers.rs:_provider_encode",
                     "providers.rs:PyProviderDecoder.feed", "lib.rs:_panic_for_tests"):
        assert expected in names, expected
    assert len(names) > 90
    unguarded = sorted(f"{file}:{fn}" for file, fns in found.items() for fn, body in fns.items()
                       if not _one_guarded_expression(body))
    assert not unguarded, f"entry points outside the panic guard: {unguarded}"


def test_the_guard_turns_a_panic_into_internal_error():
    with pytest.raises(runcore.InternalError, match="boom") as e:
        runcore._runcore._panic_for_tests("boom")
    assert isinstance(e.value, Exception)
