"""Store deletion with a propagation policy: the garbage collector's finalizers
(docs/REFERENCE.md golden 35: Foreground leaves the object with deletionTimestamp, grace 0 and
``foregroundDeletion`` until they are removed)."""
from __future__ import annotations

import pytest

from phalanx.objects.clock import FakeClock, format_time
from phalanx.objects.errors import BadRequest, NotFound
from phalanx.store import Store
from phalanx.store.rules import gc_finalizers


def job(name: str = "pytest", finalizers: list[str] | None = None) -> dict:
    meta = {"name": name, "namespace": "default"}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta, "spec": {}}


def pod(name: str = "p") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock) -> Store:
    return Store(None, clock)


def drop_finalizer(store: Store, kind: str, name: str, finalizer: str) -> dict:
    obj = store.get(kind, name, "default")
    obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers", []) if f != finalizer]
    return store.update(obj)


@pytest.mark.parametrize("policy, before, after", [
    (None, [], []),
    (None, ["x", "orphan"], ["x", "orphan"]),
    ("Background", ["x", "orphan", "foregroundDeletion"], ["x"]),
    ("Foreground", ["x"], ["x", "foregroundDeletion"]),
    ("Foreground", ["orphan"], ["foregroundDeletion"]),
    ("Foreground", ["foregroundDeletion"], ["foregroundDeletion"]),
    ("Orphan", ["foregroundDeletion", "x"], ["x", "orphan"]),
])
def test_gc_finalizers(policy, before, after):
    assert gc_finalizers(policy, before) == after


def test_foreground_keeps_the_object_marked_until_the_finalizer_goes(store, clock):
    created = store.create(job())
    w = store.watch("PyTorchJob", "default", created["metadata"]["resourceVersion"])
    marked = store.delete("PyTorchJob", "pytest", "default", propagation_policy="Foreground")
    meta = marked["metadata"]
    assert meta["finalizers"] == ["foregroundDeletion"]
    assert meta["deletionTimestamp"] == format_time(clock.now()) and meta["deletionGracePeriodSeconds"] == 0
    assert meta["generation"] == 2
    assert store.get("PyTorchJob", "pytest", "default") == marked
    # Deleting again changes nothing.
    assert store.delete("PyTorchJob", "pytest", "default", propagation_policy="Foreground") == marked
    assert store.current_rv() == meta["resourceVersion"]
    assert drop_finalizer(store, "PyTorchJob", "pytest", "foregroundDeletion")["metadata"]["name"] == "pytest"
    with pytest.raises(NotFound):
        store.get("PyTorchJob", "pytest", "default")
    assert [t for t, _ in w._pending] == ["MODIFIED", "DELETED"]
    w.close()


def test_orphan_adds_its_finalizer(store):
    store.create(job())
    marked = store.delete("PyTorchJob", "pytest", "default", propagation_policy="Orphan")
    assert marked["metadata"]["finalizers"] == ["orphan"]


def test_background_on_an_object_waiting_for_its_dependents_deletes_it_now(store):
    store.create(job())
    store.delete("PyTorchJob", "pytest", "default", propagation_policy="Foreground")
    assert store.delete("PyTorchJob", "pytest", "default", propagation_policy="Background") is None
    with pytest.raises(NotFound):
        store.get("PyTorchJob", "pytest", "default")


def test_other_finalizers_still_hold_the_object(store):
    store.create(job(finalizers=["example.com/keep"]))
    marked = store.delete("PyTorchJob", "pytest", "default", propagation_policy="Background")
    assert marked["metadata"]["finalizers"] == ["example.com/keep"]
    switched = store.delete("PyTorchJob", "pytest", "default", propagation_policy="Foreground")
    assert switched["metadata"]["finalizers"] == ["example.com/keep", "foregroundDeletion"]


def test_a_bound_pod_in_the_foreground_waits_for_its_agent_and_the_finalizer(store):
    store.create(pod())
    store.bind("default", "p", "las1")
    marked = store.delete("Pod", "p", "default", propagation_policy="Foreground")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    # The collector drops the finalizer at once (no dependents): the grace period still holds the pod.
    assert drop_finalizer(store, "Pod", "p", "foregroundDeletion")["metadata"]["deletionGracePeriodSeconds"] == 30
    assert store.get("Pod", "p", "default")
    # The node agent, once the processes are gone:
    assert store.delete("Pod", "p", "default", grace_period_seconds=0) is None
    with pytest.raises(NotFound):
        store.get("Pod", "p", "default")


def test_a_bound_pod_killed_before_the_finalizer_goes_stays_until_it_does(store):
    store.create(pod())
    store.bind("default", "p", "las1")
    store.delete("Pod", "p", "default", propagation_policy="Foreground")
    stays = store.delete("Pod", "p", "default", grace_period_seconds=0)
    assert stays["metadata"]["deletionGracePeriodSeconds"] == 0
    drop_finalizer(store, "Pod", "p", "foregroundDeletion")
    with pytest.raises(NotFound):
        store.get("Pod", "p", "default")


def test_an_unknown_policy_is_refused(store):
    store.create(job())
    with pytest.raises(BadRequest) as e:
        store.delete("PyTorchJob", "pytest", "default", propagation_policy="Later")
    assert 'propagationPolicy: Unsupported value: "Later"' in e.value.message
    assert store.get("PyTorchJob", "pytest", "default")
