"""LocalClient over the Store, and the wait_for helpers."""
from __future__ import annotations

import asyncio

import pytest

from phalanx.client.interface import Client, ObjectList
from phalanx.client.local import LocalClient
from phalanx.client.util import get_or_none, wait_for, wait_for_deletion
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import Gone, NotFound
from phalanx.store import Store


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def store() -> Store:
    return Store(None, FakeClock())


@pytest.fixture
def client(store: Store) -> LocalClient:
    return LocalClient(store)


async def test_crud_through_the_client(client: LocalClient, store: Store) -> None:
    c: Client = client  # satisfies the protocol
    created = await c.create(pod("a"))
    assert (await c.get("Pod", "a", "default")) == created
    lst = await c.list("Pod", "default", label_selector={"app": "a"})
    assert isinstance(lst, ObjectList) and [o["metadata"]["name"] for o in lst.items] == ["a"]
    assert lst.resource_version == store.current_rv()
    assert (await c.list("Pod", field_selector="metadata.name=zz")).items == []
    cur = await c.get("Pod", "a", "default")
    cur["metadata"]["labels"]["x"] = "y"
    assert (await c.update(cur))["metadata"]["labels"]["x"] == "y"
    cur = await c.get("Pod", "a", "default")
    cur["status"]["phase"] = "Running"
    assert (await c.update_status(cur))["status"]["phase"] == "Running"
    patched = await c.patch("Pod", "a", "default", [{"op": "remove", "path": "/metadata/labels/x"}], "json")
    assert "x" not in patched["metadata"]["labels"]
    await c.bind("default", "a", "las1")
    assert (await c.delete("Pod", "a", "default"))["metadata"]["deletionGracePeriodSeconds"] == 30
    assert await c.delete("Pod", "a", "default", grace_period_seconds=0) is None
    with pytest.raises(NotFound):
        await c.get("Pod", "a", "default")
    assert await get_or_none(c, "Pod", "a", "default") is None
    await client.close()


async def test_client_watch_streams_and_closes_its_watcher(client: LocalClient, store: Store) -> None:
    await client.create(pod("a"))
    got = []
    async for ev in client.watch("Pod", "default"):
        got.append((ev.type, ev.object["metadata"]["name"]))
        if len(got) == 1:
            await client.create(pod("b"))
        if len(got) == 2:
            break
    assert got == [("ADDED", "a"), ("ADDED", "b")]
    for _ in range(100):  # the abandoned generator is closed by the loop shortly after
        if not store._watchers["Pod"]:
            break
        await asyncio.sleep(0.001)
    assert len(store._watchers["Pod"]) == 0  # breaking out released the store's watcher


async def test_client_watch_too_old_raises_gone() -> None:
    store = Store(None, FakeClock(), history_size=2)
    client = LocalClient(store)
    for i in range(5):
        await client.create(pod(f"p{i}"))
    with pytest.raises(Gone, match="too old resource version: 1 "):
        async for _ in client.watch("Pod", "default", resource_version="1"):
            pass


async def test_wait_for_existing_and_future_objects(client: LocalClient) -> None:
    await client.create(pod("ready"))
    obj = await wait_for(client, "Pod", "default", lambda o: o["metadata"]["name"] == "ready", 1)
    assert obj["metadata"]["name"] == "ready"

    async def later() -> None:
        await asyncio.sleep(0.02)
        await client.create(pod("late"))
        await client.bind("default", "late", "las1")

    t = asyncio.create_task(later())
    obj = await wait_for(client, "Pod", "default", lambda o: bool(o["spec"].get("nodeName")), 2, name="late")
    assert obj["spec"]["nodeName"] == "las1"
    await t


async def test_wait_for_times_out_naming_what_it_waited_for(client: LocalClient) -> None:
    with pytest.raises(TimeoutError, match=r"Pod default/x to satisfy phase Running"):
        await wait_for(client, "Pod", "default", lambda o: False, 0.05, name="x", description="phase Running")


async def test_wait_for_deletion(client: LocalClient) -> None:
    await client.create(pod("a"))

    async def later() -> None:
        await asyncio.sleep(0.02)
        await client.delete("Pod", "a", "default")

    t = asyncio.create_task(later())
    await wait_for_deletion(client, "Pod", "a", "default", 2)
    await t
    await wait_for_deletion(client, "Pod", "a", "default", 0.1)  # already gone
    await client.create(pod("b"))
    with pytest.raises(TimeoutError, match="Pod default/b to be deleted"):
        await wait_for_deletion(client, "Pod", "b", "default", 0.05)
