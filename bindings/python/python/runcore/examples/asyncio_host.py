"""An asyncio host for runcore: one agent, driven from one task, with everything else async.

What it shows, in one run:
- a scripted model that *streams* (text deltas, then the final message);
- two tools executed *concurrently*, one of which exceeds its timeout and is answered with an
  error result (the run goes on);
- a *steering* message from the user arriving while the tool batch runs: the core holds it
  until the whole batch is answered, then the model sees it;
- a tool that needs *approval*: the run waits on a committed ticket until a (scripted) person
  allows it;
- every commit *persisted* to a SQLite file before anything after it is acted on.

The pattern: the agent is a plain object, not thread-safe and not async. One task owns it (the
"host loop"): it drains the agent's outputs, starts work for each action as a task, and then
waits on an inbox where those tasks (the model stream, tools, the user, the approver) put
the inputs they produce. So all mutations of the agent happen in one place, in order.

Run it: ``python -m runcore.examples.asyncio_host [DB_PATH]``. It prints one JSON line per
notable event and ends with the run's end cause.

Provider mode talks to a real model over HTTP instead of the scripted one:
``python -m runcore.examples.asyncio_host DB_PATH --api anthropic --base-url
https://api.anthropic.com`` (or ``--api openai-chat`` / ``openai-responses`` with
``--base-url https://api.openai.com/v1``; the key from ``ANTHROPIC_API_KEY`` or
``OPENAI_API_KEY``). It needs ``httpx`` (``pip install httpx``). The request body comes from the
codec (``runcore.providers``), the streamed response goes through the codec's decoder into the
agent, the one tool (``add``) needs an approval (given by a scripted person), and every commit
goes to SQLite first: kill the process at any point and run the same command again, and it
recovers the run from the file and finishes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from functools import partial
from typing import Any, AsyncIterator, Awaitable, Callable, Coroutine, Dict, List, Optional, Tuple

import runcore

TOOL_TIMEOUT_S = 0.2

CONFIG = {
    "system_prompt": "You are a travel assistant.",
    "tools": {
        "weather": {"description": "Current weather in a city"},
        "search_flights": {"description": "Search flights (slow)"},
        "delete_file": {"description": "Delete a file", "policy": "require_approval",
                        "deadline_after_ms": 60_000},
    },
}


def now_ms() -> int:
    """The host's clock (the core has none): milliseconds since the loop started."""
    return int(asyncio.get_running_loop().time() * 1000)


# ----- the outside world: a model, tools, a user and an approver ----------------------------


async def scripted_model(request: runcore.CallModelOutput) -> AsyncIterator[Tuple[str, Any]]:
    """Streams the answer to one `call_model` request: ("delta", text)*, then ("done", msg)."""
    messages = request["messages"]
    last_user = [m for m in messages if m["role"] == "user"][-1]["content"][0]["text"]
    if request["step"] == 1:
        for piece in ["Let me check ", "the weather ", "and flights."]:
            await asyncio.sleep(0.01)
            yield "delta", piece
        yield "done", {
            "content": [
                {"type": "text", "text": "Let me check the weather and flights."},
                {"type": "tool_call", "id": "w1", "name": "weather", "arguments": {"city": "Lisbon"}},
                {"type": "tool_call", "id": "f1", "name": "search_flights",
                 "arguments": {"to": "Lisbon"}},
            ],
            "stop_reason": "tool_use",
        }
    elif "delete" in last_user and not any(m["role"] == "tool_result" and m["call_id"] == "d1"
                                           for m in messages):
        yield "done", {
            "content": [{"type": "tool_call", "id": "d1", "name": "delete_file",
                         "arguments": {"path": "draft.txt"}}],
            "stop_reason": "tool_use",
        }
    else:
        answer = "Lisbon is sunny; flight search timed out; draft.txt is deleted."
        for word in answer.split(" "):
            await asyncio.sleep(0.002)
            yield "delta", word + " "
        yield "done", {"content": [{"type": "text", "text": answer}], "stop_reason": "stop"}


async def weather(arguments: Dict[str, Any]) -> str:
    await asyncio.sleep(0.05)
    return f"{arguments['city']}: 24 C, sunny"


async def search_flights(arguments: Dict[str, Any]) -> str:
    await asyncio.sleep(10)  # far past the timeout: cancelled
    return "never"


async def delete_file(arguments: Dict[str, Any]) -> str:
    await asyncio.sleep(0.01)
    return f"deleted {arguments['path']}"


TOOLS: Dict[str, Callable[[Dict[str, Any]], Awaitable[str]]] = {
    "weather": weather,
    "search_flights": search_flights,
    "delete_file": delete_file,
}


# ----- the host ---------------------------------------------------------------------------------

Input = Callable[[runcore.Agent], None]
"""What the inbox carries: one agent input, applied by the host loop."""


def delta(run_id: str, step: int, text: str, agent: runcore.Agent) -> None:
    agent.model_delta(run_id, step, text, now_ms=now_ms())


def done(run_id: str, step: int, message: Any, agent: runcore.Agent) -> None:
    agent.model_done(run_id, step, message, now_ms=now_ms())


class Host:
    def __init__(self, agent: runcore.Agent, store: runcore.Store, log: Callable[[Dict[str, Any]], None]):
        self.agent = agent
        self.store = store
        self.log = log
        self.inbox: "asyncio.Queue[Input]" = asyncio.Queue()
        self.tasks: "List[asyncio.Task[None]]" = []
        self.end: Optional[Dict[str, Any]] = None
        self.steered = False

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.create_task(coroutine))

    async def run(self, prompt: str) -> Dict[str, Any]:
        run_id = self.agent.prompt(prompt, now_ms=now_ms())
        self.log({"prompt": prompt, "run_id": run_id})
        while self.end is None:
            self.drain()
            if self.end is not None:
                break
            apply = await self.inbox.get()
            apply(self.agent)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        return self.end

    def drain(self) -> None:
        """Acts on every output available now, in order (commits first: persisted)."""
        for out in self.agent.drain():
            if out["type"] == "commit":
                self.store.commit(out)  # durable before anything after it is acted on
            elif out["type"] == "call_model":
                self.spawn(self.call_model(out))
            elif out["type"] == "execute_tools":
                self.log({"execute": [c["name"] for c in out["calls"]]})
                for call in out["calls"]:
                    self.spawn(self.execute(out["run_id"], call))
                if not self.steered:  # the user speaks up while the batch runs
                    self.steered = True
                    self.spawn(self.user_steers("Also delete draft.txt, please."))
            else:
                self.on_event(out["event"])

    def on_event(self, event: Dict[str, Any]) -> None:
        if event["type"] == "run_end":
            self.end = event["result"]
            self.log({"run_end": event["result"]["cause"]})
            return
        if event["type"] != "loop":
            return
        inner = event["event"]
        if inner["type"] == "awaiting":
            ticket = self.agent.current_ticket()
            assert ticket is not None, "an awaiting event comes with a ticket"
            self.log({"awaiting": ticket["target"]["tool"]["name"], "deadline_ms": ticket["deadline_ms"]})
            self.spawn(self.approver(ticket))
        elif inner["type"] == "message_appended":
            roles = inner["message"]["role"]
            self.log({"appended": roles, "origin": inner.get("origin")})
        elif inner["type"] == "tool_end":
            self.log({"tool_end": inner["call_id"], "is_error": inner["is_error"]})

    async def call_model(self, request: runcore.CallModelOutput) -> None:
        run_id, step = request["run_id"], request["step"]
        async for kind, value in scripted_model(request):
            if kind == "delta":
                await self.inbox.put(partial(delta, run_id, step, value))
            else:
                await self.inbox.put(partial(done, run_id, step, value))

    async def execute(self, run_id: str, call: runcore.ToolCall) -> None:
        try:
            result = await asyncio.wait_for(TOOLS[call["name"]](call["arguments"]), TOOL_TIMEOUT_S)
            is_error = False
        except asyncio.TimeoutError:
            result, is_error = f"timed out after {TOOL_TIMEOUT_S} s", True
        await self.inbox.put(lambda a: a.tool_done(run_id, call["id"], result, is_error=is_error,
                                                   now_ms=now_ms()))

    async def user_steers(self, text: str) -> None:
        await asyncio.sleep(0.02)
        self.log({"steer": text})
        await self.inbox.put(lambda a: a.steer(text, now_ms=now_ms()))

    async def approver(self, ticket: runcore.ResumeTicket) -> None:
        await asyncio.sleep(0.05)  # a person reads the request
        self.log({"approve": ticket["correlation_id"]})
        await self.inbox.put(lambda a: a.resume_ticket(
            {"type": "permission", "decision": "allow", "note": "ok by alice"}, now_ms=now_ms()))


async def main(db_path: str) -> Dict[str, Any]:
    store = runcore.SqliteStore(db_path)
    agent = runcore.Agent(CONFIG)

    def log(line: Dict[str, Any]) -> None:
        print(json.dumps(line), flush=True)

    result = await Host(agent, store, log).run("Plan a day in Lisbon.")
    messages = store.committed_messages(agent.thread_id)
    assert messages == agent.transcript(), "the store holds the whole transcript"
    log({"committed_messages": len(messages), "store": type(store).__name__})
    return result


# ----- provider mode: a real model over HTTP ---------------------------------------------------

PROVIDER_CONFIG = {
    "system_prompt": "Use the provided tool to answer arithmetic questions.",
    "tools": {
        "add": {
            "description": "Add x and y together",
            "parameters": {
                "type": "object",
                "properties": {"x": {"type": "number", "description": "The first number"},
                               "y": {"type": "number", "description": "The second number"}},
                "required": ["x", "y"],
            },
            "policy": "require_approval",
            "deadline_after_ms": 600_000,
        },
    },
}

# API -> (path under --base-url, the environment variable of its key). Base URLs as the
# vendors' SDKs take them: https://api.anthropic.com, https://api.openai.com/v1.
ENDPOINTS = {
    "anthropic": ("/v1/messages", "ANTHROPIC_API_KEY"),
    "openai-chat": ("/chat/completions", "OPENAI_API_KEY"),
    "openai-responses": ("/responses", "OPENAI_API_KEY"),
}

DEFAULT_MODELS = {
    "anthropic": "claude-haiku-4-5",
    "openai-chat": "gpt-4o-mini",
    "openai-responses": "gpt-4.1-nano",
}


def wall_ms() -> int:
    """The host's clock in provider mode: wall time, so a restarted process goes on from it."""
    return int(time.time() * 1000)


class ProviderHost:
    """The host loop of provider mode: the same pattern as `Host` (one task owns the agent, an
    inbox of inputs), with the model behind HTTP and its stream decoded by the codec."""

    def __init__(self, agent: runcore.Agent, store: runcore.Store, api: str, base_url: str,
                 model: str, log: Callable[[Dict[str, Any]], None]):
        from runcore import providers

        self.agent = agent
        self.store = store
        self.api = api
        self.codec = {"anthropic": providers.anthropic, "openai-chat": providers.openai_chat,
                      "openai-responses": providers.openai_responses}[api]
        path, key_env = ENDPOINTS[api]
        self.url = base_url.rstrip("/") + path
        key = os.environ.get(key_env, "")
        self.headers = ({"x-api-key": key, "anthropic-version": "2023-06-01"}
                        if api == "anthropic" else {"authorization": f"Bearer {key}"})
        self.model = model
        self.log = log
        self.inbox: "asyncio.Queue[Dict[str, Any]]" = asyncio.Queue()
        self.tasks: "List[asyncio.Task[None]]" = []
        self.end: Optional[Dict[str, Any]] = None
        self.approving: Optional[str] = None

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.create_task(coroutine))

    async def run(self, prompt: Optional[str]) -> Dict[str, Any]:
        import httpx  # the example's own dependency, not runcore's

        async with httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=10.0)) as client:
            self.client = client
            if prompt is not None:
                run_id = self.agent.prompt(prompt, now_ms=wall_ms())
                self.log({"prompt": prompt, "run_id": run_id})
            while self.end is None:
                self.drain()
                if self.end is not None:
                    break
                line = await self.inbox.get()
                line["now_ms"] = wall_ms()
                self.agent.handle(line)
            for task in self.tasks:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
        return self.end

    def drain(self) -> None:
        for out in self.agent.drain():
            if out["type"] == "commit":
                self.store.commit(out)  # durable before anything after it is acted on
            elif out["type"] == "call_model":
                self.spawn(self.call_model(out))
            elif out["type"] == "execute_tools":
                self.log({"execute": [c["name"] for c in out["calls"]]})
                for call in out["calls"]:
                    self.spawn(self.execute(out["run_id"], call))
            else:
                self.on_event(out["event"])
        ticket = self.agent.current_ticket()  # a recovered run may be waiting already
        if ticket is not None and self.approving != ticket["correlation_id"]:
            self.approving = ticket["correlation_id"]
            self.log({"awaiting": ticket["target"]["tool"]["name"]})
            self.spawn(self.approver(ticket))

    def on_event(self, event: Dict[str, Any]) -> None:
        if event["type"] == "run_end":
            self.end = event["result"]
            self.log({"run_end": event["result"]["cause"]})
        elif event["type"] == "loop" and event["event"]["type"] == "tool_end":
            self.log({"tool_end": event["event"]["call_id"], "is_error": event["event"]["is_error"]})

    async def call_model(self, request: runcore.CallModelOutput) -> None:
        """One model call: the codec's body POSTed, the streamed response fed to the codec's
        decoder chunk by chunk, its inputs to the inbox. A broken connection is the decoder's
        business too: `finish()` on a body cut short yields `model_failed` (incomplete_stream)."""
        import httpx

        run_id, step = request["run_id"], request["step"]
        encoded = self.codec.encode(request, {"model": self.model, "max_tokens": 1024})
        for left_out in encoded["left_out"]:
            self.log({"left_out": left_out})
        decoder = self.codec.Decoder(run_id, step)
        try:
            async with self.client.stream("POST", self.url, json=encoded["body"],
                                          headers=self.headers) as response:
                decoder = self.codec.Decoder(run_id, step, status=response.status_code)
                self.log({"model_call": step, "status": response.status_code})
                async for chunk in response.aiter_bytes():
                    for line in decoder.feed(chunk):
                        if line["type"] == "model_delta":
                            self.log({"delta": line["text"]})
                        await self.inbox.put(dict(line))
        except httpx.HTTPError as error:
            self.log({"transport_error": type(error).__name__})
        for line in decoder.finish():
            if line["type"] == "model_done":
                self.log({"model_done": step, "stop_reason": line["message"]["stop_reason"]})
            elif line["type"] == "model_failed":
                self.log({"model_failed": step, "code": line["code"]})
            await self.inbox.put(dict(line))

    async def execute(self, run_id: str, call: runcore.ToolCall) -> None:
        args = call["arguments"]
        try:
            result, is_error = str(args["x"] + args["y"]), False
        except (KeyError, TypeError) as error:
            result, is_error = f"bad arguments: {error}", True
        await self.inbox.put({"type": "tool_done", "run_id": run_id, "call_id": call["id"],
                              "content": result, "is_error": is_error})

    async def approver(self, ticket: runcore.ResumeTicket) -> None:
        await asyncio.sleep(0.01)  # a (scripted) person reads the request and allows it
        self.log({"approve": ticket["target"]["tool"]["name"]})
        await self.inbox.put({"type": "resume_ticket",
                              "result": {"type": "permission", "decision": "allow"}})


async def provider_main(db_path: str, api: str, base_url: str, model: str,
                        prompt: str) -> Dict[str, Any]:
    store = runcore.SqliteStore(db_path)
    thread = "thread-1"

    def log(line: Dict[str, Any]) -> None:
        print(json.dumps(line), flush=True)

    if store.thread_version(thread) == 0:
        agent = runcore.Agent(PROVIDER_CONFIG)
        host = ProviderHost(agent, store, api, base_url, model, log)
        result = await host.run(prompt)
    else:
        # A process before this one committed part of the run: rebuild the agent from the file;
        # it asks again for whatever was in flight (a model call cut mid-stream is made anew).
        agent = runcore.Agent.recover(store, thread, "replay", config=PROVIDER_CONFIG)
        log({"recovered": store.thread_version(thread), "active_run": agent.active_run_id})
        if agent.active_run_id is None:
            latest = store.latest_run(thread)
            assert latest is not None
            return {"cause": latest["state"]["cause"]}
        result = await ProviderHost(agent, store, api, base_url, model, log).run(None)
    messages = store.committed_messages(thread)
    assert messages == agent.transcript(), "the store holds the whole transcript"
    log({"committed_messages": len(messages), "answer": answer_text(messages)})
    return result


def answer_text(messages: List[Dict[str, Any]]) -> str:
    last = messages[-1] if messages else {}
    return "".join(b.get("text", "") for b in last.get("content", []) if b["type"] == "text")


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m runcore.examples.asyncio_host",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("db_path", nargs="?", help="the SQLite file (default: a new temporary one)")
    parser.add_argument("--api", choices=sorted(ENDPOINTS),
                        help="provider mode: talk to this API instead of the scripted model")
    parser.add_argument("--base-url", help="the API's base URL (provider mode)")
    parser.add_argument("--model", help="the model (provider mode; a small default per API)")
    parser.add_argument("--prompt", default="Calculate 2 + 3.", help="the user's prompt (provider mode)")
    args = parser.parse_args(argv)
    if (args.api is None) != (args.base_url is None):
        parser.error("--api and --base-url go together")
    return args


if __name__ == "__main__":
    args = parse_args(sys.argv[1:])
    path = args.db_path or os.path.join(tempfile.mkdtemp(), "runs.db")
    if args.api is None:
        outcome = asyncio.run(main(path))
    else:
        outcome = asyncio.run(provider_main(path, args.api, args.base_url,
                                            args.model or DEFAULT_MODELS[args.api], args.prompt))
    print(outcome["cause"]["type"])
