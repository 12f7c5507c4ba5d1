"""The scheduler's background writes: WriteBack's order, limits and stop, and the
shell's sessions running while writes are in flight (decided is as good as
written; a refused bind or a failed write is decided again)."""
from __future__ import annotations

import asyncio
import gc

import pytest

from phalanx.objects.errors import ApiError, Conflict
from phalanx.scheduler.info import JobInfo, TaskInfo
from phalanx.scheduler.testing import gang, node, podgroup, queue
from phalanx.scheduler.writeback import WriteBack
from tests.unit.test_scheduler_shell import fake_scheduler, start

# ---------------------------------------------------------------- WriteBack


class Gate:
    """Writes that record when they start and finish only when released."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.finished: list[str] = []
        self.running = 0
        self.most = 0
        self.release = asyncio.Event()

    def write(self, name: str, fail: bool = False):
        async def w() -> None:
            self.started.append(name)
            self.running += 1
            self.most = max(self.most, self.running)
            try:
                await self.release.wait()
                if fail:
                    raise RuntimeError(f"{name} failed")
                self.finished.append(name)
            finally:
                self.running -= 1
        return w


async def test_binds_go_before_status_writes_and_at_most_concurrency_run():
    g, wb = Gate(), WriteBack(concurrency=2)
    wb.put("pg-a", g.write("status-a"))
    wb.put("pg-b", g.write("status-b"))
    wb.bind(g.write("bind-1"))
    wb.bind(g.write("bind-2"))
    wb.bind(g.write("bind-3"))
    await asyncio.sleep(0)
    # the two status writes were started first (nothing else was queued); the binds wait for a slot
    assert g.started == ["status-a", "status-b"] and wb.pending() == 5
    g.release.set()
    await asyncio.wait_for(wb.settle(), 2)
    assert g.started == ["status-a", "status-b", "bind-1", "bind-2", "bind-3"]
    assert g.most == 2 and wb.pending() == 0


async def test_queued_binds_are_all_sent_before_a_queued_status_write():
    g, wb = Gate(), WriteBack(concurrency=1)
    wb.bind(g.write("bind-1"))
    wb.put("pg-a", g.write("status-a"))
    wb.bind(g.write("bind-2"))
    g.release.set()
    await asyncio.wait_for(wb.settle(), 2)
    assert g.finished == ["bind-1", "bind-2", "status-a"]


async def test_a_newer_write_of_an_object_replaces_the_queued_one_and_never_overlaps_the_running_one():
    g, wb = Gate(), WriteBack(concurrency=4)
    wb.put("pg", g.write("v1"))
    await asyncio.sleep(0)
    assert g.started == ["v1"]
    wb.put("pg", g.write("v2"))  # v1 in flight: waits behind it
    wb.put("pg", g.write("v3"))  # replaces v2, never sent
    wb.put("other", g.write("o1"))
    await asyncio.sleep(0)
    assert g.started == ["v1", "o1"] and wb.queued("pg") and wb.queued("other")
    g.release.set()
    await asyncio.wait_for(wb.settle(), 2)
    assert g.finished == ["v1", "o1", "v3"]
    assert not wb.queued("pg")


async def test_a_failing_write_is_logged_and_the_rest_goes_on(caplog):
    g, wb = Gate(), WriteBack(concurrency=1)
    wb.bind(g.write("bad", fail=True))
    wb.bind(g.write("good"))
    g.release.set()
    await asyncio.wait_for(wb.settle(), 2)
    assert g.finished == ["good"]
    assert "bad failed" in caplog.text


async def test_stop_drops_what_is_not_sent_and_waits_for_what_is_in_flight():
    g, wb = Gate(), WriteBack(concurrency=1)
    wb.bind(g.write("in-flight"))
    wb.bind(g.write("queued"))
    wb.put("pg", g.write("status"))
    await asyncio.sleep(0)
    stopping = asyncio.create_task(wb.stop())
    await asyncio.sleep(0.01)
    assert not stopping.done()  # the request already sent is waited for
    g.release.set()
    await asyncio.wait_for(stopping, 2)
    assert g.started == ["in-flight"] and g.finished == ["in-flight"]
    wb.bind(g.write("after"))
    assert wb.pending() == 0
    await asyncio.wait_for(wb.settle(), 1)


def test_concurrency_must_be_positive():
    with pytest.raises(ValueError, match="concurrency"):
        WriteBack(0)


# ---------------------------------------------------------------- the shell with writes in flight


class GatedBinds:
    """Holds the fake client's binds (and optionally fails them) until released."""

    def __init__(self, client, fail_with: Exception | None = None) -> None:
        self.client = client
        self.release = asyncio.Event()
        self.fail_with = fail_with
        self.sent: list[str] = []
        inner = client.bind

        async def bind(ns, name, node_name):
            self.sent.append(name)
            await self.release.wait()
            if self.fail_with is not None:
                raise self.fail_with
            await inner(ns, name, node_name)
        client.bind = bind


def world() -> dict[str, list[dict]]:
    return {"Node": [node("n1")], "Queue": [queue("default")],
            "PodGroup": [podgroup("pytest", 4, phase="Inqueue")], "Pod": gang("pytest")}


async def test_a_session_while_binds_are_in_flight_sees_them_binding_and_decides_nothing_twice():
    sched, client = fake_scheduler(world())
    gate = GatedBinds(client)
    await start(sched)
    r1 = sched._cycle()
    assert len(r1.bindings) == 4
    first = r1.podgroup_status[("default", "pytest")]
    assert first["phase"] == "Inqueue"  # Volcano: the committing session's tasks are Binding, not scheduled
    await asyncio.sleep(0.01)
    assert len(gate.sent) == 4 and client.binds == []  # binds held (the status writes were free to go)
    r2 = sched._cycle()  # the API server has answered nothing yet: the pods are Binding, the status as queued
    assert r2.bindings == [] and r2.podgroup_status == {} and r2.pod_conditions == {}
    gate.release.set()
    await asyncio.wait_for(sched.settle(), 2)
    assert len(client.binds) == 4
    assert [u["status"] for u in client.updates if u["kind"] == "PodGroup"] == [first]
    # answered binds count as bound (the watch has not shown them): Running, written once
    r3 = await sched.run_once()
    assert r3.bindings == [] and r3.podgroup_status[("default", "pytest")]["phase"] == "Running"
    r4 = await sched.run_once()
    assert r4.bindings == [] and r4.podgroup_status == {}
    assert [u["status"]["phase"] for u in client.updates if u["kind"] == "PodGroup"] == ["Inqueue", "Running"]


async def test_a_refused_bind_is_forgotten_and_the_next_session_binds_the_pod_again():
    sched, client = fake_scheduler(world())
    gate = GatedBinds(client, fail_with=Conflict("pods", "pytest-worker-0"))
    await start(sched)
    sched._cycle()
    gate.release.set()
    await asyncio.wait_for(sched.settle(), 2)
    assert client.binds == [] and len(gate.sent) == 4
    gate.fail_with = None
    r2 = await sched.run_once()
    assert sorted(n for _, n, _ in r2.bindings) == sorted(p["metadata"]["name"] for p in gang("pytest"))
    assert len(client.binds) == 4


async def test_a_failed_status_write_is_forgotten_and_written_again_by_the_next_session():
    sched, client = fake_scheduler(world())
    await start(sched)
    inner = client.update
    failures = [ApiError("etcdserver: request timed out")]

    async def update(obj):
        if obj["kind"] == "PodGroup" and failures:
            raise failures.pop()
        return await inner(obj)
    client.update = update
    r1 = await sched.run_once()
    assert r1.podgroup_status and not [u for u in client.updates if u["kind"] == "PodGroup"]
    # the informers still show Inqueue and nothing of ours is pending: written again
    r2 = await sched.run_once()
    assert r2.podgroup_status[("default", "pytest")]["phase"] == "Running"
    assert [u["status"]["phase"] for u in client.updates if u["kind"] == "PodGroup"] == ["Running"]


async def test_a_sessions_jobs_and_tasks_are_freed_without_the_cyclic_collector():
    sched, client = fake_scheduler(world())
    await start(sched)
    gc.collect()
    gc.disable()
    try:
        sched._cycle()
        assert not [o for o in gc.get_objects() if isinstance(o, (JobInfo, TaskInfo))]
    finally:
        gc.enable()
    await asyncio.wait_for(sched.settle(), 2)
