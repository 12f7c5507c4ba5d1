"""A stop lets the job controller finish the rounds queued now (issue 15: the
last Events of a `phalanx run` were lost when its control plane stopped)."""
from __future__ import annotations

import asyncio

from phalanx.runtime.controller import Controller, Result
from phalanx.runtime.workqueue import WorkQueue


async def test_a_queue_is_idle_only_with_nothing_waiting_or_in_progress():
    q: WorkQueue[str] = WorkQueue()
    assert q.idle()
    q.add("a")
    assert not q.idle()
    q.add_after("later", 60)  # a timer is not work now
    key = await q.get()
    assert key == "a" and not q.idle()
    q.done("a")
    assert q.idle()


async def test_wait_idle_returns_once_queued_rounds_and_their_writes_are_done():
    written: list[str] = []
    release = asyncio.Event()

    async def reconcile(key: str) -> Result:
        await release.wait()
        await asyncio.sleep(0.02)  # the round's Events
        written.append(key)
        return Result()

    c: Controller[str] = Controller("t", reconcile, workers=2)
    task = asyncio.create_task(c.run())
    for k in ("a", "b", "c"):
        c.enqueue(k)
    assert not await c.wait_idle(0.05)  # blocked: the timeout is kept
    release.set()
    assert await c.wait_idle(2.0)
    assert sorted(written) == ["a", "b", "c"]
    await c.stop()
    await asyncio.wait_for(task, 2)
