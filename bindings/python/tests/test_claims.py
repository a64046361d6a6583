"""Thread claims and due work from Python (SPEC §7.2, §7.3, §12.4, §12.5): the claim ports on
every store, `runcore.sweep`, `runcore.approve` / `runcore.deny` through a claim, and a
claimed `Driver` (renew before each line, release at close, the `claim_lost` line).

Every store is driven on the wall clock (PostgreSQL's claims run on the server's clock and
ignore `now_ms`), so expiry is a short lease and a sleep."""

from __future__ import annotations

import gc
import time
import uuid
from typing import Callable, Iterator

import pytest

import runcore
from test_stores import postgres_url

GATED = {"tools": {"rm": {"policy": "require_approval"}}}


def wall_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_store(request, tmp_path) -> Iterator[Callable[[], runcore.Store]]:
    """A factory of handles onto one fresh store of each backend."""
    if request.param == "memory":
        store = runcore.MemoryStore()
        yield lambda: store
    elif request.param == "sqlite":
        path = str(tmp_path / "runs.db")
        yield lambda: runcore.SqliteStore(path)
    else:
        url = postgres_url()
        schema = "py_claims_" + uuid.uuid4().hex[:12]
        yield lambda: runcore.PostgresStore(url, schema=schema)


def awaiting(store: runcore.Store, thread: str, config: dict, now_ms: int) -> str:
    """One run on `thread` left awaiting the approval of its `rm` call; its id."""
    agent = runcore.Agent(dict(config, thread_id=thread))
    run_id = agent.prompt("clean up", now_ms=now_ms)
    for out in agent.drain():
        if out["type"] == "commit":
            store.commit(out)
    agent.model_done(run_id, 1, {"content": [{"type": "tool_call", "id": "c1", "name": "rm",
                                              "arguments": {"path": "x"}}],
                                 "stop_reason": "tool_use"}, now_ms=now_ms)
    for out in agent.drain():
        if out["type"] == "commit":
            store.commit(out)
    assert store.resume_ticket(run_id) is not None
    return run_id


# ----- the claim ports ------------------------------------------------------------------------

def test_claims_grant_refuse_epoch_release(make_store):
    store = make_store()
    before = wall_ms()
    first = store.claim_thread("t", "owner-a", "a.1", 400)
    assert first["thread_id"] == "t" and first["owner"] == "owner-a" and first["epoch"] == 1
    assert before + 400 <= first["expires_at_ms"] <= wall_ms() + 400 + 1000
    # A retry of the same request gets the same claim; another owner is refused.
    assert store.claim_thread("t", "owner-a", "a.1", 400) == first
    with pytest.raises(runcore.ClaimHeld) as held:
        store.claim_thread("t", "owner-b", "b.1", 400)
    assert isinstance(held.value, runcore.StoreError)
    assert held.value.code == "claim_held"
    assert held.value.owner == "owner-a"
    assert held.value.expires_at_ms == first["expires_at_ms"]
    assert held.value.thread_id == "t"
    assert store.thread_claim("t") == first
    assert store.thread_claim("other") is None
    # A renew moves the expiry on.
    renewed = store.renew_claim(first, 400)
    assert renewed["epoch"] == 1 and renewed["expires_at_ms"] >= first["expires_at_ms"]
    # After expiry another owner gets the next epoch; the old claim is lost.
    time.sleep(0.6)
    assert store.thread_claim("t") is None
    second = store.claim_thread("t", "owner-b", "b.1", 30_000)
    assert second["owner"] == "owner-b" and second["epoch"] == 2
    with pytest.raises(runcore.StoreError) as lost:
        store.renew_claim(renewed, 400)
    assert lost.value.code == "claim_lost"
    assert not isinstance(lost.value, runcore.ClaimHeld)
    # Releasing the old claim is a no-op; releasing the current one frees the thread at once.
    store.release_claim(renewed)
    assert store.thread_claim("t") == second
    store.release_claim(second)
    assert store.thread_claim("t") is None
    third = store.claim_thread("t", "owner-a", "a.2", 30_000)
    assert third["epoch"] == 3
    # Another handle on the same store sees the claim.
    assert make_store().thread_claim("t") == third


def test_bad_claims_are_invalid_claim(make_store):
    store = make_store()
    for owner, request_id, lease in [("", "r", 1000), ("o", "", 1000), ("o", "r", 0)]:
        with pytest.raises(runcore.StoreError) as e:
            store.claim_thread("t", owner, request_id, lease)
        assert e.value.code == "invalid_claim", (owner, request_id, lease)
    assert store.thread_claim("t") is None
    with pytest.raises(ValueError):
        store.renew_claim({"thread_id": "t"}, 1000)


# ----- due work and the sweep -----------------------------------------------------------------

def test_due_work_lists_a_passed_deadline(make_store):
    store = make_store()
    config = {"tools": {"rm": {"policy": "require_approval", "deadline_after_ms": 800}}}
    start = wall_ms()
    run_id = awaiting(store, "t-due", config, start)
    ticket = store.resume_ticket(run_id)
    assert ticket["deadline_ms"] == start + 800
    assert store.due_work() == []
    time.sleep(1.0)
    due = store.due_work()
    assert due == [{"thread_id": "t-due", "run_id": run_id,
                    "reason": {"type": "deadline", "deadline_ms": start + 800}}]
    assert store.due_work(limit=0) == []


def test_sweep_expires_a_passed_deadline(make_store):
    store = make_store()
    config = {"tools": {"rm": {"policy": "require_approval", "deadline_after_ms": 600}}}
    run_id = awaiting(store, "t-sweep", config, wall_ms())
    version = store.thread_version("t-sweep")
    assert runcore.sweep(store, owner="sweeper") == []
    time.sleep(0.8)
    items = runcore.sweep(store, owner="sweeper")
    assert items == [{"thread_id": "t-sweep", "run_id": run_id, "reason": "deadline",
                      "action": "expired"}]
    assert store.resume_ticket(run_id) is None
    assert store.thread_version("t-sweep") > version
    assert store.run_state(run_id)["type"] != "awaiting"
    # Handled once: nothing is due any more, the sweeper's claim was released.
    assert store.due_work() == [] and runcore.sweep(store) == []
    assert store.thread_claim("t-sweep") is None


def test_sweep_rejects_a_bad_policy_and_a_non_store():
    with pytest.raises(ValueError):
        runcore.sweep(runcore.MemoryStore(), policy="nope")
    with pytest.raises(TypeError):
        runcore.sweep(object())  # type: ignore[arg-type]


# ----- approve and deny -----------------------------------------------------------------------

def test_approve_and_deny_through_a_claim(make_store):
    store = make_store()
    run_id = awaiting(store, "t-approve", GATED, wall_ms())
    version = store.thread_version("t-approve")
    # A live worker holds the thread: nothing is written.
    worker = store.claim_thread("t-approve", "worker", "w.1", 30_000)
    with pytest.raises(runcore.ClaimHeld) as held:
        runcore.approve(store, run_id, "looks fine", owner="operator")
    assert held.value.code == "claim_held" and held.value.owner == "worker"
    assert held.value.expires_at_ms == worker["expires_at_ms"]
    assert held.value.thread_id == "t-approve"
    assert store.thread_version("t-approve") == version
    store.release_claim(worker)
    answered = runcore.approve(store, run_id, "looks fine", owner="operator")
    assert answered == {"thread_id": "t-approve", "version": version + 1}
    assert store.resume_ticket(run_id) is None
    assert store.thread_claim("t-approve") is None
    # Not awaiting any more: the §10 error, as the Agent raises it.
    with pytest.raises(runcore.ResumeError) as again:
        runcore.deny(store, run_id, "too late")
    assert again.value.kind == "resume" and again.value.resume_error == "not_waiting"

    denied_run = awaiting(store, "t-deny", GATED, wall_ms())
    answered = runcore.deny(store, denied_run, "not today")
    assert answered == {"thread_id": "t-deny", "version": store.thread_version("t-deny")}
    assert store.resume_ticket(denied_run) is None
    with pytest.raises(runcore.AgentError):
        runcore.approve(store, "no-such-run")


# ----- a claimed Driver -----------------------------------------------------------------------

def prompt() -> dict:
    return {"type": "prompt", "text": "hello", "now_ms": wall_ms()}


def test_a_claimed_driver_holds_renews_and_releases(make_store):
    store = make_store()
    config = {"thread_id": "t-drive"}
    with runcore.Driver(config, store, owner="host-a", lease_ms=30_000) as driver:
        assert driver.startup[-1] == {"type": "idle", "line": 0}
        claim = driver.claim
        assert claim is not None and claim["owner"] == "host-a" and claim["epoch"] == 1
        assert store.thread_claim("t-drive") == claim
        assert driver.renew_at_ms is not None and driver.tick() == []
        with pytest.raises(runcore.ClaimHeld) as held:
            runcore.Driver(config, make_store(), owner="host-b")
        assert held.value.owner == "host-a" and held.value.thread_id == "t-drive"
        out = driver.send(prompt())
        assert out[-1] == {"type": "idle", "line": 1}
        assert any(o["type"] == "commit" for o in out)
    # Released at the end of the block: the thread is free, the driver closed.
    assert store.thread_claim("t-drive") is None
    assert driver.closed and driver.claim is None
    with pytest.raises(runcore.StoreError):
        driver.send(prompt())
    driver.close()  # a second release is a no-op

    # The default owner (host:pid:start); released when garbage-collected.
    other = runcore.Driver(config, store, lease_ms=30_000)
    assert other.claim["epoch"] == 2 and other.claim["owner"].count(":") >= 2
    del other
    gc.collect()
    assert store.thread_claim("t-drive") is None


def test_a_short_lease_is_renewed_before_a_line(make_store):
    store = make_store()
    driver = runcore.Driver({"thread_id": "t-renew"}, store, owner="host-a", lease_ms=1500)
    first = driver.claim
    time.sleep(0.8)  # past the renew time (a third of the lease), within the trusted lease
    out = driver.send(prompt())
    assert out[-1] == {"type": "idle", "line": 1}
    assert driver.claim["epoch"] == first["epoch"]
    assert driver.claim["expires_at_ms"] > first["expires_at_ms"]
    driver.release()
    assert store.thread_claim("t-renew") is None


def test_a_claimed_driver_whose_claim_was_taken_ends_with_claim_lost(make_store):
    store = make_store()
    driver = runcore.Driver({"thread_id": "t-lost"}, store, owner="host-a", lease_ms=300)
    version = store.thread_version("t-lost")
    time.sleep(0.45)
    taken = make_store().claim_thread("t-lost", "host-b", "b.1", 30_000)
    assert taken["epoch"] == 2
    out = driver.send(prompt())
    assert len(out) == 1, out
    line = out[0]
    assert line["type"] == "error" and line["line"] == 0
    assert line["error"]["kind"] == "store" and line["error"]["reason"] == "claim_lost"
    assert line["error"]["epoch"] == 1 and line["error"]["current_epoch"] == 2
    assert driver.closed and driver.claim is None and driver.renew_at_ms is None
    assert store.thread_version("t-lost") == version  # the prompt was never handled
    with pytest.raises(runcore.StoreError) as e:
        driver.send(prompt())
    assert e.value.code == "claim_lost"
    # The new owner's claim is untouched by the old driver's end.
    del driver
    gc.collect()
    assert store.thread_claim("t-lost") == taken


def test_an_unclaimed_driver_takes_no_claim():
    store = runcore.MemoryStore()
    driver = runcore.Driver({"thread_id": "t-free"}, store)
    assert driver.claim is None and driver.renew_at_ms is None and driver.tick() == []
    assert driver.send(prompt())[-1] == {"type": "idle", "line": 1}
    assert store.thread_claim("t-free") is None
    driver.close()
    assert not driver.closed
    with pytest.raises(ValueError):
        runcore.Driver(owner="host-a")


# ----- the stub types the claims API ----------------------------------------------------------

CLAIMS_HOST = '''
from typing import List, Optional
import runcore

store = runcore.MemoryStore()
claim = store.claim_thread("t", "me", "me.1", 30000)
epoch: int = claim["epoch"]
renewed = store.renew_claim(claim, 30000, now_ms=5)
store.release_claim(renewed)
live: Optional[runcore.Claim] = store.thread_claim("t")
due: List[runcore.DueWork] = store.due_work(limit=10)
items: List[runcore.SweepItem] = runcore.sweep(store, owner="sweeper", policy="seal")
answered: runcore.Answered = runcore.approve(store, "r", "ok", owner="operator")
version: int = runcore.deny(store, "r", None)["version"]
with runcore.Driver({"thread_id": "t"}, store, owner="me", lease_ms=1000) as driver:
    lost = driver.tick()
    at: Optional[int] = driver.renew_at_ms
try:
    runcore.Driver(store=store, owner="x")
except runcore.ClaimHeld as e:
    until: int = e.expires_at_ms
    who: str = e.owner
'''


def test_mypy_accepts_the_claims_api_and_rejects_misuse(tmp_path):
    from test_typing import mypy

    (tmp_path / "claims_host.py").write_text(CLAIMS_HOST)
    result = mypy(tmp_path, "claims_host.py")
    assert result.returncode == 0, result.stdout + result.stderr
    (tmp_path / "bad.py").write_text(
        "import runcore\nstore = runcore.MemoryStore()\n"
        "store.claim_thread('t', 'me', 'r', '30000')\n"
        "runcore.sweep(store, limit='all')\n")
    result = mypy(tmp_path, "bad.py")
    assert result.returncode != 0
    assert result.stdout.count("error:") >= 2, result.stdout
