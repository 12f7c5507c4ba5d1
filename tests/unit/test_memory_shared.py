"""Memory (issue 9): one decoded object per watch event shared by the process's
informers, interned strings, compact store entries - and what must not change:
plain watchers still get private copies, history resumption, selectors."""
from __future__ import annotations

import asyncio
import gc
import json
import weakref

import pytest

from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.runtime.informer import Informer
from phalanx.store import Store, decode
from phalanx.store.decode import SharedEvent, decode_shared, mutated_shared_objects
from phalanx.store.entry import NO_LABELS
from tests.unit.test_runtime import eventually


def pod(name: str, node: str = "", labels: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels if labels is not None else {"app": name}},
            "spec": spec}


@pytest.fixture
def store() -> Store:
    return Store(None, FakeClock())


@pytest.fixture
def checking():
    decode.set_checking(True)
    yield
    decode.set_checking(False)


async def next_event(w):
    return await asyncio.wait_for(w.__anext__(), 1)


# ------------------------------------------------------------------ decoding


def test_decode_shared_equals_json_loads_and_shares_keys() -> None:
    raw = json.dumps({"metadata": {"name": "a-pod", "labels": {"app": "a-pod"}}, "n": 1, "f": 1.5,
                      "big": 2**64 - 1, "msg": "é" * 70, "list": ["a", {"k": None}], "b": True})
    a, b = decode_shared(raw), decode_shared(raw)
    assert a == b == json.loads(raw)
    assert a is not b and a["metadata"] is not b["metadata"]
    key_a = next(k for k in a["metadata"] if k == "name")
    key_b = next(k for k in b["metadata"] if k == "name")
    assert key_a is key_b  # keys: one string for every object


def test_shared_event_decodes_once() -> None:
    ev = SharedEvent('{"a": {"b": 1}}')
    first = ev.shared()
    assert first == {"a": {"b": 1}}
    assert ev.shared() is first


def test_mutation_check_reports_a_changed_shared_object(checking) -> None:
    ev = SharedEvent('{"metadata":{"name":"p"},"spec":{}}')
    obj = ev.shared()
    assert mutated_shared_objects() == []
    obj["spec"]["nodeName"] = "n1"
    assert mutated_shared_objects() == ['{"metadata":{"name":"p"},"spec":{}}']


# ------------------------------------------------------------------ watchers


async def test_shared_watchers_get_one_object_plain_watchers_private_copies(store: Store) -> None:
    s1 = store.watch("Pod", "default", None, shared=True)
    s2 = store.watch("Pod", None, None, shared=True)
    p1 = store.watch("Pod", "default", None)
    p2 = store.watch("Pod", None, None)
    store.create(pod("a"))
    e_s1, e_s2, e_p1, e_p2 = [await next_event(w) for w in (s1, s2, p1, p2)]
    assert e_s1.type == e_s2.type == e_p1.type == e_p2.type == "ADDED"
    assert e_s1.object is e_s2.object
    assert e_p1.object is not e_p2.object
    assert e_p1.object is not e_s1.object
    assert e_s1.object == e_p1.object == e_p2.object == store.get("Pod", "a", "default")
    e_p1.object["spec"]["nodeName"] = "mine"  # a plain watcher's copy is its own
    assert "nodeName" not in e_s1.object["spec"] and "nodeName" not in e_p2.object["spec"]
    for w in (s1, s2, p1, p2):
        w.close()


def test_shared_event_holds_its_object_until_every_taker_took_it() -> None:
    ev = SharedEvent('{"a": {"b": 1}}')
    ev.hold(2)
    first = ev.shared()
    ref = weakref.ref(first)
    del first
    gc.collect()
    second = ev.shared()  # the second taker: still the same object
    assert ref() is second
    del second
    gc.collect()
    assert ref() is None  # both took it: no longer held
    assert ev.raw is None  # nor its JSON


async def taken_by_one_of_two(store: Store):
    """Two shared watchers of pod "a"; the first took its ADDED object and let it
    go. Returns both watchers and a weak reference to that object, which is
    still alive: the second watcher has yet to take it."""
    first = store.watch("Pod", None, None, shared=True)
    second = store.watch("Pod", None, None, shared=True)
    store.create(pod("a"))
    ref = weakref.ref((await next_event(first)).object)
    gc.collect()
    assert ref() is not None
    return first, second, ref


async def test_a_superseded_version_is_not_kept_decoded_for_a_watcher_still_behind(store: Store) -> None:
    fast, slow, ref = await taken_by_one_of_two(store)
    created = store.get("Pod", "a", "default")
    created["metadata"]["labels"]["v"] = "2"
    store.update(created)  # version 2: version 1 need not stay decoded
    gc.collect()
    assert ref() is None
    first, second = await next_event(slow), await next_event(slow)  # the slow watcher misses nothing
    assert (first.type, second.type) == ("ADDED", "MODIFIED")
    assert "v" not in first.object["metadata"]["labels"] and second.object["metadata"]["labels"]["v"] == "2"
    assert second.object is (await next_event(fast)).object  # the current version is still one object
    fast.close()
    slow.close()


async def test_with_bounded_backlogs_a_superseded_version_stays_decoded_for_the_watcher_behind() -> None:
    # Backlogs bounded (the simulator's store): holding costs at most a backlog, and the
    # watcher behind gets the object the others got instead of decoding it again.
    store = Store(None, FakeClock(), watch_backlog=1000)
    fast, slow, ref = await taken_by_one_of_two(store)
    created = store.get("Pod", "a", "default")
    created["metadata"]["labels"]["v"] = "2"
    store.update(created)
    gc.collect()
    assert ref() is not None
    first = await next_event(slow)
    assert first.object is ref() and "v" not in first.object["metadata"]["labels"]
    second = await next_event(slow)
    assert second.object is (await next_event(fast)).object and second.object["metadata"]["labels"]["v"] == "2"
    del first
    gc.collect()
    assert ref() is None  # once every watcher took it, nothing holds it
    fast.close()
    slow.close()


def test_reuse_unchanged_shares_equal_values_type_strictly() -> None:
    old = {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}, "ownerReferences": [{"uid": "u"}]},
           "spec": {"n": 1, "flag": True}, "status": {"phase": "Pending"}, "list": [1]}
    new = json.loads(json.dumps(old))
    new["metadata"]["resourceVersion"] = "2"
    new["status"]["phase"] = "Running"
    new["list"] = [1.0]  # equal in Python, not in JSON
    decode.reuse_unchanged(new, old)
    assert new["spec"] is old["spec"]
    assert new["metadata"]["labels"] is old["metadata"]["labels"]
    assert new["metadata"]["ownerReferences"] is old["metadata"]["ownerReferences"]
    assert new["metadata"] is not old["metadata"] and new["metadata"]["resourceVersion"] == "2"
    assert new["status"] == {"phase": "Running"} and new["status"] is not old["status"]
    assert new["list"] == [1.0] and isinstance(new["list"][0], float)
    other = {"spec": {"n": True, "flag": True}}  # true is not 1
    decode.reuse_unchanged(other, old)
    assert other["spec"]["n"] is True and other["spec"] is not old["spec"]


async def test_a_status_write_shares_the_unchanged_spec_with_the_version_before(store: Store) -> None:
    w = store.watch("Pod", None, None, shared=True)
    store.create(pod("a"))
    v1 = (await next_event(w)).object  # a consumer still holds version 1
    p = store.get("Pod", "a", "default")
    p["status"] = {"phase": "Running"}
    store.update_status(p)
    v2 = (await next_event(w)).object
    assert v2["status"]["phase"] == "Running" and v1["status"]["phase"] == "Pending"
    assert v2["spec"] is v1["spec"] and v2["metadata"]["labels"] is v1["metadata"]["labels"]
    assert v2["metadata"]["resourceVersion"] != v1["metadata"]["resourceVersion"]
    w.close()


async def test_a_watcher_closed_before_taking_an_event_does_not_keep_it_held(store: Store) -> None:
    taker, quitter, ref = await taken_by_one_of_two(store)
    quitter.close()
    gc.collect()
    assert ref() is None
    taker.close()


async def test_the_store_forgets_the_last_shared_event_of_a_deleted_object(store: Store) -> None:
    w = store.watch("Pod", None, None, shared=True)
    store.create(pod("a"))
    assert list(store._latest_shared) == [("Pod", "default", "a")]
    w.close()  # no shared watcher left when it is deleted
    store.delete("Pod", "a", "default", grace_period_seconds=0)
    assert store._latest_shared == {}


async def test_plain_watcher_does_not_keep_the_shared_event(store: Store) -> None:
    shared = store.watch("Pod", None, None, shared=True)
    plain = store.watch("Pod", None, None)
    store.create(pod("a"))
    assert [type(item) for _, item in plain._pending] == [str]
    assert [type(item) for _, item in shared._pending] == [SharedEvent]
    shared.close()
    plain.close()


async def test_shared_watch_resumes_from_history_and_lists_on_start(store: Store) -> None:
    first = store.create(pod("a"))
    store.create(pod("b"))
    rv = first["metadata"]["resourceVersion"]
    resumed = store.watch("Pod", None, rv, shared=True)
    ev = await next_event(resumed)
    assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "b")
    assert ev.object == store.get("Pod", "b", "default")
    fresh = store.watch("Pod", None, None, shared=True)
    names = [(await next_event(fresh)).object["metadata"]["name"] for _ in range(2)]
    assert names == ["a", "b"]
    resumed.close()
    fresh.close()


async def test_local_client_watch_passes_shared_through(store: Store) -> None:
    client = LocalClient(store)
    assert client.shares_watch_objects is True
    a = client.watch("Pod", "default", None, shared=True)
    b = client.watch("Pod", "default", None, shared=True)
    c = client.watch("Pod", "default", None)
    ta, tb, tc = (asyncio.ensure_future(x.__anext__()) for x in (a, b, c))
    await asyncio.sleep(0)
    store.create(pod("a"))
    ea, eb, ec = await asyncio.wait_for(asyncio.gather(ta, tb, tc), 1)
    assert ea.object is eb.object
    assert ec.object is not ea.object and ec.object == ea.object
    for x in (a, b, c):
        await x.aclose()


# ------------------------------------------------------------------ informers


def _node_only(p: dict) -> dict:
    """A transform as the components write them: new dicts, the input untouched."""
    return {"metadata": p["metadata"], "spec": {"nodeName": p.get("spec", {}).get("nodeName")}}


async def test_informers_of_one_process_share_objects_and_transforms_reuse_them(store: Store, checking) -> None:
    client = LocalClient(store)
    full1, full2 = Informer(client, "Pod"), Informer(client, "Pod")
    trimmed = Informer(client, "Pod", transform=_node_only)
    for inf in (full1, full2, trimmed):
        await inf.start()
        await inf.wait_synced(1)
    store.create(pod("a", node="n1"))
    store.patch("Pod", "a", "default", {"metadata": {"labels": {"v": "2"}}})
    await eventually(lambda: all((i.get("default", "a") or {}).get("metadata", {}).get("labels", {}).get("v") == "2"
                                 for i in (full1, full2, trimmed)), what="the update in every informer")
    o1, o2, t = full1.get("default", "a"), full2.get("default", "a"), trimmed.get("default", "a")
    assert o1 is o2
    assert o1 == store.get("Pod", "a", "default")
    assert t["metadata"] is o1["metadata"] and t["spec"] == {"nodeName": "n1"}
    assert "containers" in o1["spec"]  # the transform did not trim the shared object
    for inf in (full1, full2, trimmed):
        await inf.stop()
    assert mutated_shared_objects() == []


async def test_a_trim_applies_to_what_the_informer_alone_holds(store: Store, checking) -> None:
    store.create(pod("listed", node="n1"))
    client = LocalClient(store)
    full, trimmed = Informer(client, "Pod"), Informer(client, "Pod", trim=_node_only)
    plain = Informer(_PlainClient(client), "Pod", trim=_node_only)  # type: ignore[arg-type]
    for inf in (full, trimmed, plain):
        await inf.start()
        await inf.wait_synced(1)
    assert trimmed.get("default", "listed")["spec"] == {"nodeName": "n1"}  # a list result: its own copy
    store.create(pod("watched", node="n2"))
    await eventually(lambda: all(i.get("default", "watched") is not None for i in (full, trimmed, plain)),
                     what="the new pod in every informer")
    assert trimmed.get("default", "watched") is full.get("default", "watched")  # shared: held whole
    assert plain.get("default", "watched")["spec"] == {"nodeName": "n2"}  # a private copy: trimmed
    for inf in (full, trimmed, plain):
        await inf.stop()
    assert mutated_shared_objects() == []


class _PlainClient:
    """A Client that does not share watch objects (any wrapper, the HTTP client)."""

    def __init__(self, inner: LocalClient) -> None:
        self._inner = inner

    async def list(self, *a, **kw):
        return await self._inner.list(*a, **kw)

    def watch(self, kind, namespace=None, resource_version=None):
        return self._inner.watch(kind, namespace, resource_version)


async def test_informer_over_a_client_without_sharing_keeps_private_copies(store: Store) -> None:
    plain = _PlainClient(LocalClient(store))
    a, b = Informer(plain, "Pod"), Informer(plain, "Pod")  # type: ignore[arg-type]
    for inf in (a, b):
        await inf.start()
        await inf.wait_synced(1)
    store.create(pod("a"))
    await eventually(lambda: a.get("default", "a") is not None and b.get("default", "a") is not None)
    assert a.get("default", "a") == b.get("default", "a")
    assert a.get("default", "a") is not b.get("default", "a")
    await a.stop()
    await b.stop()


# ------------------------------------------------------------------ store entries


def test_store_entries_intern_labels_share_the_empty_map_and_still_select(store: Store) -> None:
    store.create(pod("a", node="n1", labels={"app": "web", "tier": "front"}))
    store.create(pod("b", node="n2", labels={"app": "web"}))
    store.create(pod("c", labels={}))
    ea = store._data["Pod"]["default"]["a"]
    eb = store._data["Pod"]["default"]["b"]
    ec = store._data["Pod"]["default"]["c"]
    assert ec.labels is NO_LABELS and NO_LABELS == {}
    assert ea.labels["app"] is eb.labels["app"]
    assert ea.fields("Pod")["spec.nodeName"] == "n1"
    assert ea.fields("Pod")["metadata.namespace"] is eb.fields("Pod")["metadata.namespace"]
    names = lambda items: [o["metadata"]["name"] for o in items]
    assert names(store.list("Pod", "default", "app=web")[0]) == ["a", "b"]
    assert names(store.list("Pod", "default", "!app")[0]) == ["c"]
    assert names(store.list("Pod", "default", None, "spec.nodeName=n2")[0]) == ["b"]
    assert names(store.list("Pod", "default", None, "spec.nodeName!=n2,status.phase=Pending")[0]) == ["a", "c"]
    store.patch("Pod", "c", "default", {"metadata": {"labels": {"app": "late"}}})
    assert names(store.list("Pod", "default", "app=late")[0]) == ["c"]
    assert NO_LABELS == {}


# ------------------------------------------------------------------ backlogs


async def _burst_backlogs(store: Store, writes: int) -> list[int]:
    """A consumer of a shared watch and a writer that never waits otherwise:
    how far behind the watch is after each write."""
    client = LocalClient(store)
    w = store.watch("Pod", None, store.current_rv(), shared=True)
    seen: list[str] = []

    async def consume() -> None:
        async for ev in w:
            seen.append(ev.object["metadata"]["name"])

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    behind = []
    for i in range(writes):
        await client.create(pod(f"p{i}"))
        behind.append(w.pending())
    await eventually(lambda: len(seen) == writes, what="every event consumed")
    assert seen == [f"p{i}" for i in range(writes)]  # in order, none lost
    w.close()
    await asyncio.gather(task, return_exceptions=True)
    return behind


async def test_with_a_watch_backlog_a_burst_of_writes_lets_the_consumers_catch_up() -> None:
    behind = await _burst_backlogs(Store(None, FakeClock(), watch_backlog=3), 20)
    assert max(behind) == 3 and behind[:5] == [1, 2, 3, 0, 1]  # over 3: its flush gave the consumer its turn
    assert await _burst_backlogs(Store(None, FakeClock()), 20) == list(range(1, 21))  # without: all queued
