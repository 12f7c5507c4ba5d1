"""SharedInformers: one informer per kind for the components of a process (client-go's
SharedInformerFactory), each component with its own handlers, indexes and stop."""
from __future__ import annotations

from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.runtime.informer import SharedInformer, SharedInformers
from phalanx.store import Store
from tests.unit.test_runtime import eventually


def pod(name: str, owner: str = "", ns: str = "default") -> dict:
    meta: dict = {"name": name, "namespace": ns, "labels": {"owner": owner}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def pod_watchers(store: Store) -> int:
    return sum(1 for w in store._watchers["Pod"] if not w.closed)


def recorder(seen: list):
    return lambda t, obj, old: seen.append((t, obj["metadata"]["name"]))


async def two_users(shared: SharedInformers) -> tuple[SharedInformer, SharedInformer, list, list]:
    """Two components' Pod informers, started and synced, each recording its events."""
    a, b = shared.informer("Pod"), shared.informer("Pod")
    seen_a: list = []
    seen_b: list = []
    a.add_handler(recorder(seen_a))
    b.add_handler(recorder(seen_b))
    for inf in (a, b):
        await inf.start()
    assert await a.wait_synced(1) and await b.wait_synced(1)
    return a, b, seen_a, seen_b


async def test_two_components_share_one_watch_and_cache_and_each_gets_every_event() -> None:
    store = Store(None, FakeClock())
    client = LocalClient(store)
    shared = SharedInformers(client)
    a, b, seen_a, seen_b = await two_users(shared)
    assert shared.count == 1
    await client.create(pod("p1"))
    await eventually(lambda: seen_a == seen_b == [("ADDED", "p1")], what="both handlers")
    assert pod_watchers(store) == 1
    assert a.get("default", "p1") is b.get("default", "p1")  # one cache
    for inf in (a, b):
        await inf.stop()


async def test_a_transform_or_a_namespace_gets_an_informer_of_its_own() -> None:
    shared = SharedInformers(LocalClient(Store(None, FakeClock())))

    def slim(o: dict) -> dict:
        return {"metadata": o["metadata"]}
    shared.informer("Pod")
    shared.informer("Pod", transform=slim)
    shared.informer("Pod", transform=slim)
    shared.informer("Pod", namespace="team-a")
    shared.informer("Service")
    assert shared.count == 4


async def test_a_trim_is_kept_only_while_every_component_asks_for_it() -> None:
    store = Store(None, FakeClock())
    store.create(pod("p1"))
    client = LocalClient(store)

    def trim(o: dict) -> dict:
        return {"kind": o["kind"], "metadata": o["metadata"]}
    both = SharedInformers(client)
    trimmed, whole = both.informer("Pod", trim=trim), both.informer("Pod")
    await trimmed.start()
    assert await trimmed.wait_synced(1)
    assert "spec" in trimmed.get("default", "p1")  # the other reads whole objects
    assert both.count == 1
    # Whole objects serve a later trimming consumer too.
    late = both.informer("Pod", trim=trim)
    assert late.informer is trimmed.informer
    # A trimmed informer that has listed cannot serve whole objects: that one gets its own.
    alone = SharedInformers(client)
    first = alone.informer("Pod", trim=trim)
    await first.start()
    assert await first.wait_synced(1)
    assert "spec" not in first.get("default", "p1")
    second = alone.informer("Pod")
    assert second.informer is not first.informer
    await second.start()
    assert await second.wait_synced(1) and "spec" in second.get("default", "p1")
    for inf in (trimmed, whole, late, first, second):
        await inf.stop()


async def test_a_component_that_stops_gets_no_more_events_and_the_others_go_on() -> None:
    store = Store(None, FakeClock())
    client = LocalClient(store)
    a, b, seen_a, seen_b = await two_users(SharedInformers(client))
    await a.stop()
    assert await a.wait_synced() is False  # stopped: its own wait ends
    await client.create(pod("p1"))
    await eventually(lambda: seen_b == [("ADDED", "p1")], what="b's event")
    assert seen_a == []
    assert b.synced and pod_watchers(store) == 1
    await b.stop()  # the last one: the informer stops
    await eventually(lambda: pod_watchers(store) == 0, what="the watch closed")
    # Started again, it lists again.
    await b.start()
    assert await b.wait_synced(1)
    await client.create(pod("p2"))
    await eventually(lambda: seen_b == [("ADDED", "p1"), ("ADDED", "p2")], what="events after a restart")
    await b.stop()


async def test_a_handler_added_after_the_list_is_sent_the_cache_first() -> None:
    store = Store(None, FakeClock())
    client = LocalClient(store)
    for n in ("p1", "p2"):
        await client.create(pod(n))
    shared = SharedInformers(client)
    early = shared.informer("Pod")
    await early.start()
    assert await early.wait_synced(1)
    late = shared.informer("Pod")
    seen: list = []
    late.add_handler(recorder(seen))
    assert sorted(seen) == [("ADDED", "p1"), ("ADDED", "p2")]
    await late.start()
    assert await late.wait_synced(1)
    await client.delete("Pod", "p1", "default", grace_period_seconds=0)
    await eventually(lambda: seen[-1] == ("DELETED", "p1"), what="the delete")
    for inf in (early, late):
        await inf.stop()


async def test_indexes_of_the_same_name_do_not_clash() -> None:
    store = Store(None, FakeClock())
    client = LocalClient(store)
    await client.create(pod("p1", owner="x"))
    shared = SharedInformers(client)
    a, b = shared.informer("Pod"), shared.informer("Pod")
    a.add_index("owner", lambda o: [o["metadata"]["labels"]["owner"]])
    b.add_index("owner", lambda o: [o["metadata"]["name"]])
    for inf in (a, b):
        await inf.start()
    assert await a.wait_synced(1)
    assert [o["metadata"]["name"] for o in a.by_index("owner", "x")] == ["p1"]
    assert b.by_index("owner", "x") == [] and len(b.by_index("owner", "p1")) == 1
    for inf in (a, b):
        await inf.stop()
