"""Garbage collector: background cascading deletion by ownerReferences
(docs/REFERENCE.md golden 67-69: deleting a PyTorchJob removes its PodGroup and pods)."""
from __future__ import annotations

import asyncio
import time

import pytest

from phalanx.client.local import LocalClient
from phalanx.controller.gc import GarbageCollector
from phalanx.objects.clock import FakeClock
from phalanx.objects.meta import owner_ref
from phalanx.store import Store


async def eventually(predicate, timeout: float = 3.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def names(store: Store, kind: str) -> list[str]:
    return [o["metadata"]["name"] for o in store.list(kind)[0]]


def job(name: str = "pytest") -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "default"}, "spec": {}}


def owned(kind: str, name: str, *owners: dict) -> dict:
    api = {"Pod": "v1", "Service": "v1", "PodGroup": "scheduling.volcano.sh/v1beta1"}[kind]
    return {"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "namespace": "default",
                         "ownerReferences": [owner_ref(o) for o in owners]},
            "spec": {}}


@pytest.fixture
async def env():
    store = Store(None, FakeClock())
    client = LocalClient(store)
    gc = GarbageCollector(client)
    task = None

    async def start() -> None:
        nonlocal task
        task = asyncio.create_task(gc.run())
        await asyncio.gather(*(inf.wait_synced(1) for inf in gc.informers.values()))

    yield store, client, gc, start
    await gc.stop()
    if task is not None:
        await asyncio.wait_for(task, 2)


async def test_deleting_a_job_cascades_to_its_podgroup_and_pods(env) -> None:
    store, client, gc, start = env
    await start()
    j = await client.create(job())
    await client.create(owned("PodGroup", "pytest", j))
    await client.create(owned("Service", "pytest-master-0", j))
    for i in range(3):
        await client.create(owned("Pod", f"pytest-worker-{i}", j))
    await client.bind("default", "pytest-worker-0", "las1")
    await client.create(owned("Pod", "unrelated"))  # no owners: never collected
    await asyncio.sleep(0.05)
    assert len(names(store, "Pod")) == 4  # nothing collected while the owner lives

    await client.delete("PyTorchJob", "pytest", "default")
    await eventually(lambda: names(store, "PodGroup") == [] and names(store, "Service") == []
                     and names(store, "Pod") == ["pytest-worker-0", "unrelated"], what="cascade")
    # The bound pod is deleted gracefully: it waits for its node agent.
    assert store.get("Pod", "pytest-worker-0", "default")["metadata"]["deletionTimestamp"]
    assert "deletionTimestamp" not in store.get("Pod", "unrelated", "default")["metadata"]


async def test_orphans_left_before_start_are_collected(env) -> None:
    store, client, gc, start = env
    j = await client.create(job())
    await client.create(owned("Pod", "orphan", j))
    await client.create(owned("Pod", "kept", j))
    # The job vanishes while no collector runs (a crash), then another job owns "kept" too.
    other = await client.create(job("other"))
    cur = await client.get("Pod", "kept", "default")
    cur["metadata"]["ownerReferences"].append(owner_ref(other, controller=False))
    await client.update(cur)
    await client.delete("PyTorchJob", "pytest", "default")
    await start()
    await eventually(lambda: names(store, "Pod") == ["kept"], what="orphan collected")
    assert gc.deleted == 1


async def test_dependent_goes_only_when_every_owner_is_gone(env) -> None:
    store, client, gc, start = env
    await start()
    a = await client.create(job("a"))
    b = await client.create(job("b"))
    await client.create(owned("PodGroup", "shared", a, b))
    await client.delete("PyTorchJob", "a", "default")
    await asyncio.sleep(0.05)
    assert names(store, "PodGroup") == ["shared"]
    await client.delete("PyTorchJob", "b", "default")
    await eventually(lambda: names(store, "PodGroup") == [], what="shared podgroup collected")


async def test_owner_recreated_under_the_same_name_does_not_save_dependents(env) -> None:
    store, client, gc, start = env
    await start()
    j = await client.create(job())
    await client.create(owned("Pod", "p", j))
    store.delete("PyTorchJob", "pytest", "default")
    store.create(job())  # same name, new uid, in the same breath
    await eventually(lambda: names(store, "Pod") == [], what="pod of the old job collected")
    assert names(store, "PyTorchJob") == ["pytest"]


async def test_dependent_seen_before_its_owner_is_not_collected(env) -> None:
    store, client, gc, start = env
    await start()
    # Created in one breath: the pod's watch event may reach the collector
    # before the job's; the collector must ask the API before deleting.
    j = store.create(job())
    store.create(owned("Pod", "p", j))
    await asyncio.sleep(0.1)
    assert names(store, "Pod") == ["p"]
    assert gc.deleted == 0


async def test_unknown_owner_kinds_and_cluster_scoped_owners(env) -> None:
    store, client, gc, start = env
    node = await client.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "las1"}})
    foreign = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "d", "uid": "x-1"}}  # not served
    await client.create(owned("Pod", "foreign", foreign))
    await client.create(owned("Pod", "on-node", node))
    await start()
    await asyncio.sleep(0.05)
    assert names(store, "Pod") == ["foreign", "on-node"]  # an owner we cannot check is not assumed gone
    await client.delete("Node", "las1")
    await eventually(lambda: names(store, "Pod") == ["foreign"], what="node's pod collected")


async def test_stop_before_sync_returns() -> None:
    gc = GarbageCollector(LocalClient(Store(None, FakeClock())))
    task = asyncio.create_task(gc.run())
    await gc.stop()
    await asyncio.wait_for(task, 1)
