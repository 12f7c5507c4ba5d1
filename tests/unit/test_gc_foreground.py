"""Garbage collector: foreground deletion (the owner goes last, once its blocking
dependents are gone) and orphaning (dependents unlinked, kept)."""
from __future__ import annotations

import asyncio
import time

import pytest

from phalanx.client.local import LocalClient
from phalanx.controller.gc import GarbageCollector
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import NotFound
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


def exists(store: Store, kind: str, name: str) -> bool:
    try:
        store.get(kind, name, "default")
    except NotFound:
        return False
    return True


def job(name: str = "pytest") -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "default"}, "spec": {}}


def owned(kind: str, name: str, owner: dict, block: bool = True) -> dict:
    api = {"Pod": "v1", "Service": "v1", "PodGroup": "scheduling.volcano.sh/v1beta1"}[kind]
    ref = owner_ref(owner)
    ref["blockOwnerDeletion"] = block
    return {"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "namespace": "default", "ownerReferences": [ref]}, "spec": {}}


@pytest.fixture
async def env():
    store = Store(None, FakeClock())
    client = LocalClient(store)
    gc = GarbageCollector(client)
    task = asyncio.create_task(gc.run())
    await asyncio.gather(*(inf.wait_synced(1) for inf in gc.informers.values()))
    yield store, client
    await gc.stop()
    await asyncio.wait_for(task, 2)


async def test_foreground_deletes_dependents_first_and_waits_for_a_terminating_pod(env):
    store, client = env
    j = await client.create(job())
    await client.create(owned("PodGroup", "pytest", j))
    await client.create(owned("Service", "pytest-master-0", j))
    await client.create(owned("Pod", "pytest-master-0", j))
    await client.bind("default", "pytest-master-0", "las1")
    await client.create(owned("Pod", "pytest-worker-0", j))  # unbound: deleted at once

    marked = await client.delete("PyTorchJob", "pytest", "default", propagation_policy="Foreground")
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    await eventually(lambda: names(store, "PodGroup") == [] and names(store, "Service") == []
                     and names(store, "Pod") == ["pytest-master-0"], what="the dependents deleted")
    master = store.get("Pod", "pytest-master-0", "default")
    assert master["metadata"]["deletionTimestamp"]  # terminating: its node agent has not finished
    await asyncio.sleep(0.05)
    assert exists(store, "PyTorchJob", "pytest")  # the owner waits for it
    await client.delete("Pod", "pytest-master-0", "default", grace_period_seconds=0)  # the agent is done
    await eventually(lambda: not exists(store, "PyTorchJob", "pytest"), what="the owner deleted last")


async def test_an_owner_without_dependents_goes_at_once(env):
    store, client = env
    await client.create(job())
    await client.delete("PyTorchJob", "pytest", "default", propagation_policy="Foreground")
    await eventually(lambda: not exists(store, "PyTorchJob", "pytest"), what="the finalizer removed")


async def test_only_dependents_with_block_owner_deletion_hold_the_owner(env):
    store, client = env
    j = await client.create(job())
    await client.create(owned("Pod", "blocking", j, block=True))
    await client.create(owned("Pod", "free", j, block=False))
    await client.bind("default", "blocking", "las1")
    await client.bind("default", "free", "las1")
    await client.delete("PyTorchJob", "pytest", "default", propagation_policy="Foreground")
    await eventually(lambda: all(store.get("Pod", n, "default")["metadata"].get("deletionTimestamp")
                                 for n in ("blocking", "free")), what="both pods terminating")
    await client.delete("Pod", "blocking", "default", grace_period_seconds=0)
    await eventually(lambda: not exists(store, "PyTorchJob", "pytest"), what="the owner deleted")
    assert exists(store, "Pod", "free")  # still terminating, but it never blocked the owner


async def test_a_dependent_with_dependents_is_deleted_in_the_foreground_too(env):
    store, client = env
    j = await client.create(job())
    pg = await client.create(owned("PodGroup", "pytest", j))
    await client.create(owned("Pod", "p", pg))
    await client.bind("default", "p", "las1")
    await client.delete("PyTorchJob", "pytest", "default", propagation_policy="Foreground")
    await eventually(lambda: "foregroundDeletion" in (store.get("PodGroup", "pytest", "default")["metadata"]
                                                      .get("finalizers") or []), what="the PodGroup marked")
    await eventually(lambda: bool(store.get("Pod", "p", "default")["metadata"].get("deletionTimestamp")),
                     what="the grandchild terminating")
    assert exists(store, "PyTorchJob", "pytest") and exists(store, "PodGroup", "pytest")
    await client.delete("Pod", "p", "default", grace_period_seconds=0)
    await eventually(lambda: not exists(store, "PodGroup", "pytest") and not exists(store, "PyTorchJob", "pytest"),
                     what="the chain deleted bottom-up")


async def test_orphan_unlinks_the_dependents_and_keeps_them(env):
    store, client = env
    j = await client.create(job())
    other = await client.create(job("other"))
    await client.create(owned("Pod", "mine", j))
    shared = owned("Pod", "shared", j)
    shared["metadata"]["ownerReferences"].append(owner_ref(other))
    await client.create(shared)
    await client.delete("PyTorchJob", "pytest", "default", propagation_policy="Orphan")
    await eventually(lambda: not exists(store, "PyTorchJob", "pytest"), what="the owner deleted")
    mine = store.get("Pod", "mine", "default")
    assert "ownerReferences" not in mine["metadata"] and not mine["metadata"].get("deletionTimestamp")
    refs = store.get("Pod", "shared", "default")["metadata"]["ownerReferences"]
    assert [r["name"] for r in refs] == ["other"]
    await asyncio.sleep(0.05)
    assert names(store, "Pod") == ["mine", "shared"]  # orphans are kept, not collected
