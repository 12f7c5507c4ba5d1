"""A component stopped before its informers have listed returns from ``run`` at once.

The API may be unreachable, or a follower may be told to stop just after it took a lease.
"""
from __future__ import annotations

import asyncio

import pytest

from phalanx.client.local import LocalClient
from phalanx.controller.job.controller import JobController
from phalanx.controller.podgroup.controller import PodGroupController
from phalanx.node.logjanitor import LogJanitor
from phalanx.objects.clock import Clock, FakeClock
from phalanx.runtime.informer import Informer
from phalanx.scheduler.scheduler import Scheduler
from phalanx.store import Store


class Unreachable(LocalClient):
    """Every list fails, as against an API server that does not answer."""

    lists = 0

    async def list(self, *args, **kwargs):
        Unreachable.lists += 1
        raise ConnectionError("connection refused")


@pytest.fixture
def unreachable() -> Unreachable:
    Unreachable.lists = 0
    return Unreachable(Store(None, FakeClock()))


async def test_wait_synced_answers_true_once_listed_false_when_stopped_first(unreachable) -> None:
    listed = Informer(LocalClient(Store(None, FakeClock())), "Pod")
    await listed.start()
    assert await listed.wait_synced(1) is True
    await listed.stop()
    assert await listed.wait_synced() is True  # synced stays so

    inf = Informer(unreachable, "Pod", retry_cap=0.01)
    await inf.start()
    waiting = asyncio.ensure_future(inf.wait_synced())
    while Unreachable.lists < 2:  # it has tried, and is retrying
        await asyncio.sleep(0.005)
    assert not waiting.done()
    await inf.stop()
    assert await asyncio.wait_for(waiting, 1) is False
    assert await inf.wait_synced() is False  # stopped: no wait


async def test_wait_synced_with_a_timeout_raises_and_the_informer_keeps_trying(unreachable) -> None:
    inf = Informer(unreachable, "Pod", retry_cap=0.01)
    await inf.start()
    with pytest.raises(asyncio.TimeoutError, match="Pod: not synced within 0.05s"):
        await inf.wait_synced(0.05)
    before = Unreachable.lists
    while Unreachable.lists == before:
        await asyncio.sleep(0.005)
    await inf.stop()


async def _run_then_stop(run, stop) -> None:
    task = asyncio.ensure_future(run())
    while Unreachable.lists < 1:  # started listing
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.05)
    assert not task.done(), "returned before it was stopped"
    await stop()
    await asyncio.wait_for(task, 2)  # without the fix: waits for the sync forever
    assert task.exception() is None


async def test_podgroup_controller(unreachable) -> None:
    pgc = PodGroupController(unreachable, ["volcano"])
    await _run_then_stop(pgc.run, pgc.stop)


async def test_job_controller(unreachable) -> None:
    jc = JobController(unreachable, FakeClock())
    await _run_then_stop(jc.run, jc.stop)


async def test_scheduler(unreachable) -> None:
    sched = Scheduler(unreachable, Clock())
    await _run_then_stop(sched.run, sched.stop)
    assert sched.sessions == 0


async def test_log_janitor(unreachable, tmp_path) -> None:
    janitor = LogJanitor(unreachable, tmp_path)
    await _run_then_stop(janitor.run, janitor.stop)
    assert janitor.removed == 0
