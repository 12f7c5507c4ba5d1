"""Controller runtime: work queue, requeue-after timers, back-off, informer."""
from __future__ import annotations

import asyncio
import time

import pytest

from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.runtime.controller import Controller, Result
from phalanx.runtime.informer import Informer
from phalanx.runtime.workqueue import WorkQueue
from phalanx.store import Store


async def eventually(predicate, timeout: float = 2.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.002)


def job(name: str, ns: str = "default", labels: dict | None = None) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": {}}


# ------------------------------------------------------------------ work queue


async def test_queue_dedupes_keys() -> None:
    q: WorkQueue[str] = WorkQueue()
    for k in ("a", "b", "a", "a"):
        q.add(k)
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]
    assert len(q) == 0


async def test_key_in_processing_is_not_handed_out_again_until_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert await q.get() == "a"
    q.add("a")  # changed while being reconciled
    q.add("a")
    assert len(q) == 0
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    q.done("a")
    assert await asyncio.wait_for(getter, 1) == "a"
    q.done("a")
    assert len(q) == 0


async def test_add_after_fires_and_earlier_deadline_wins() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("late-then-early", 30)
    q.add_after("late-then-early", 0.01)
    q.add_after("early-then-late", 0.01)
    q.add_after("early-then-late", 30)
    assert q.pending_timers() == 2  # one timer per key
    got = {await asyncio.wait_for(q.get(), 1), await asyncio.wait_for(q.get(), 1)}
    assert got == {"late-then-early", "early-then-late"}
    assert q.pending_timers() == 0


async def test_add_after_zero_is_immediate_and_delayed_key_is_not_early() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("now", 0)
    assert len(q) == 1
    q.add_after("later", 0.2)
    assert await q.get() == "now"
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.05)
    assert not getter.done()
    assert await asyncio.wait_for(getter, 1) == "later"


async def test_rate_limited_back_off_doubles_to_the_cap() -> None:
    q: WorkQueue[str] = WorkQueue(base_delay=0.005, max_delay=10.0)
    delays = [q.add_rate_limited("k") for _ in range(14)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[-1] == 10.0 and max(delays) == 10.0
    assert q.num_requeues("k") == 14
    q.forget("k")
    assert q.add_rate_limited("k") == 0.005
    q.shutdown()


async def test_shutdown_releases_waiting_workers_and_cancels_timers() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("x", 30)
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)
    q.shutdown()
    assert await asyncio.wait_for(asyncio.gather(*getters), 1) == [None, None, None]
    assert q.pending_timers() == 0
    q.add("y")
    assert await q.get() is None


# ------------------------------------------------------------------ controller


async def test_requeue_after_calls_reconcile_again() -> None:
    calls: list[float] = []

    async def reconcile(key: str) -> Result:
        calls.append(time.monotonic())
        return Result(requeue_after=0.02) if len(calls) < 3 else Result()

    c = Controller("t", reconcile)
    runner = asyncio.create_task(c.run())
    c.enqueue("k")
    await eventually(lambda: len(calls) >= 3, what="three reconciles")
    assert calls[1] - calls[0] >= 0.015 and calls[2] - calls[1] >= 0.015
    await asyncio.sleep(0.05)
    assert len(calls) == 3  # the last Result asked for nothing more
    await c.stop()
    await asyncio.wait_for(runner, 1)


async def test_failing_reconcile_is_retried_with_back_off_and_never_kills_the_loop(caplog) -> None:
    attempts: list[float] = []
    other: list[str] = []

    async def reconcile(key: str) -> None:
        if key == "other":
            other.append(key)
            return
        attempts.append(time.monotonic())
        if len(attempts) < 4:
            raise RuntimeError("transient")

    c = Controller("t", reconcile)
    runner = asyncio.create_task(c.run())
    c.enqueue("flaky")
    await eventually(lambda: len(attempts) >= 4, what="four attempts")
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    assert gaps[0] >= 0.004 and gaps[1] >= 0.009 and gaps[2] >= 0.019  # 5 ms, 10 ms, 20 ms
    assert "reconcile of 'flaky' failed" in caplog.text
    c.enqueue("other")
    await eventually(lambda: other == ["other"], what="loop still alive")
    assert c.queue.num_requeues("flaky") == 0  # success reset the back-off
    await c.stop()
    await asyncio.wait_for(runner, 1)


async def test_same_key_never_reconciled_concurrently() -> None:
    active: dict[str, int] = {}
    overlaps: list[str] = []
    done: list[str] = []

    async def reconcile(key: str) -> None:
        active[key] = active.get(key, 0) + 1
        if active[key] > 1:
            overlaps.append(key)
        await asyncio.sleep(0.005)
        active[key] -= 1
        done.append(key)

    c = Controller("t", reconcile, workers=4)
    runner = asyncio.create_task(c.run())
    for _ in range(5):
        for k in ("a", "b"):
            c.enqueue(k)
        await asyncio.sleep(0.002)
    await eventually(lambda: len(c.queue) == 0 and not any(active.values()) and len(done) >= 2, what="drain")
    assert overlaps == []
    assert set(done) == {"a", "b"}
    await c.stop()
    await asyncio.wait_for(runner, 1)


async def test_stop_lets_the_current_reconcile_finish() -> None:
    finished = asyncio.Event()
    started = asyncio.Event()

    async def reconcile(key: str) -> None:
        started.set()
        await asyncio.sleep(0.02)
        finished.set()

    c = Controller("t", reconcile)
    runner = asyncio.create_task(c.run())
    c.enqueue("k")
    await asyncio.wait_for(started.wait(), 1)
    await c.stop()  # stop() may be awaited or not
    await asyncio.wait_for(runner, 1)
    assert finished.is_set()


# ------------------------------------------------------------------ informer


@pytest.fixture
def store() -> Store:
    return Store(None, FakeClock())


async def test_informer_lists_watches_and_calls_handlers(store: Store) -> None:
    store.create(job("before", labels={"team": "a"}))
    client = LocalClient(store)
    inf = Informer(client, "PyTorchJob", "default")
    seen: list[tuple[str, str, str | None]] = []
    inf.add_handler(lambda t, obj, old: seen.append(
        (t, obj["metadata"]["name"], old and old["metadata"]["resourceVersion"])))
    await inf.start()
    await inf.wait_synced(timeout=1)
    assert seen == [("ADDED", "before", None)]

    await client.create(job("new", labels={"team": "b"}))
    await client.create(job("elsewhere", ns="other"))
    await client.patch("PyTorchJob", "before", "default", {"metadata": {"labels": {"x": "y"}}})
    await client.delete("PyTorchJob", "new", "default")
    await eventually(lambda: len(seen) == 4, what="four handler calls")
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "before"), ("ADDED", "new"),
                                           ("MODIFIED", "before"), ("DELETED", "new")]
    assert seen[2][2] == "1"  # MODIFIED carries the previous object
    assert inf.get("default", "before")["metadata"]["labels"] == {"team": "a", "x": "y"}
    assert inf.get("default", "new") is None
    assert [o["metadata"]["name"] for o in inf.list(label_selector="x=y")] == ["before"]
    assert inf.last_resource_version == store.current_rv()
    await inf.stop()


async def test_informer_relists_after_gone_and_replays_missed_deletes() -> None:
    store = Store(None, FakeClock(), max_pending=3)
    client = LocalClient(store)
    for i in range(3):
        store.create(job(f"j{i}"))
    inf = Informer(client, "PyTorchJob")
    events: list[tuple[str, str]] = []
    inf.add_handler(lambda t, obj, old: events.append((t, obj["metadata"]["name"])))
    await inf.start()
    await inf.wait_synced(timeout=1)
    events.clear()
    # Without yielding to the informer: a delete, then enough writes to overflow its watch.
    store.delete("PyTorchJob", "j0", "default")
    for i in range(3, 10):
        store.create(job(f"j{i}"))
    await eventually(lambda: len(inf) == 9 and ("DELETED", "j0") in events, what="relist")
    assert inf.get("default", "j0") is None
    assert {n for t, n in events if t == "ADDED"} == {f"j{i}" for i in range(3, 10)}
    store.create(job("after"))  # and it keeps watching after the relist
    await eventually(lambda: inf.get("default", "after") is not None, what="watch resumed")
    await inf.stop()


async def test_informer_index_and_transform(store: Store) -> None:
    client = LocalClient(store)
    inf = Informer(client, "PyTorchJob", transform=lambda o: {"kind": o["kind"], "metadata": o["metadata"]})
    inf.add_index("team", lambda o: [o["metadata"].get("labels", {}).get("team", "")])
    await inf.start()
    await inf.wait_synced(timeout=1)
    await client.create(job("a", labels={"team": "x"}))
    await client.create(job("b", labels={"team": "x"}))
    await client.create(job("c", labels={"team": "y"}))
    await eventually(lambda: len(inf) == 3, what="three cached")
    assert sorted(o["metadata"]["name"] for o in inf.by_index("team", "x")) == ["a", "b"]
    await client.patch("PyTorchJob", "a", "default", {"metadata": {"labels": {"team": "y"}}})
    await eventually(lambda: len(inf.by_index("team", "y")) == 2, what="re-indexed")
    assert [o["metadata"]["name"] for o in inf.by_index("team", "x")] == ["b"]
    assert "spec" not in inf.get("default", "a")  # trimmed by the transform
    await inf.stop()


async def test_handler_errors_do_not_stop_the_informer(store: Store, caplog) -> None:
    client = LocalClient(store)
    inf = Informer(client, "PyTorchJob")
    good: list[str] = []

    def bad(t: str, obj: dict, old: dict | None) -> None:
        raise ValueError("handler bug")

    inf.add_handler(bad)
    inf.add_handler(lambda t, obj, old: good.append(obj["metadata"]["name"]))
    await inf.start()
    await inf.wait_synced(timeout=1)
    await client.create(job("a"))
    await client.create(job("b"))
    await eventually(lambda: good == ["a", "b"], what="both events")
    assert "handler failed" in caplog.text
    await inf.stop()
