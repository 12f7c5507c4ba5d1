"""Store semantics, checked against the apiserver's behaviour (golden exchanges
16, 17, 18, 28, 32-35, 40/41, 45/46, 64-67)."""
from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import timedelta

import pytest

from phalanx.objects.clock import FakeClock, format_time
from phalanx.objects.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    FieldError,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
)
from phalanx.store import PatchRejected, Store


def pod(name: str = "p", ns: str = "default", **spec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def job(name: str = "pytest", ns: str = "default", backoff: int = 3) -> dict:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runPolicy": {"backoffLimit": backoff}, "pytorchReplicaSpecs": {"Master": {"replicas": 1}}},
    }


def podgroup(name: str = "pg") -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 4, "queue": "default"},
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> Store:
    return Store(None, clock)


async def next_event(w, timeout: float = 1.0):
    return await asyncio.wait_for(w.__anext__(), timeout)


def drain(w) -> list[tuple[str, dict]]:
    """The events already queued on a watcher (no waiting)."""
    out = []
    while w.pending():
        t, raw = w._pending.popleft()
        out.append((t, json.loads(raw)))
    return out


# ------------------------------------------------------------------ create / get


def test_create_stamps_system_metadata(store: Store, clock: FakeClock) -> None:
    created = store.create(job())
    m = created["metadata"]
    assert len(m["uid"]) == 36 and m["uid"].count("-") == 4
    assert m["resourceVersion"] == "1"
    assert m["generation"] == 1
    assert m["creationTimestamp"] == format_time(clock.now())
    assert store.get("PyTorchJob", "pytest", "default") == created


def test_resource_version_is_one_global_counter(store: Store) -> None:
    a = store.create(job("a"))
    b = store.create(pod("b"))
    n = store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "las1"}})
    assert [int(x["metadata"]["resourceVersion"]) for x in (a, b, n)] == [1, 2, 3]
    assert store.current_rv() == "3"
    assert a["metadata"]["uid"] != b["metadata"]["uid"]


def test_callers_never_alias_stored_state(store: Store) -> None:
    src = job()
    created = store.create(src)
    src["spec"]["runPolicy"]["backoffLimit"] = 99
    created["spec"]["runPolicy"]["backoffLimit"] = 98
    got = store.get("PyTorchJob", "pytest", "default")
    got["metadata"]["name"] = "mutated"
    items, _ = store.list("PyTorchJob")
    items[0]["spec"]["runPolicy"]["backoffLimit"] = 97
    assert store.get("PyTorchJob", "pytest", "default")["spec"]["runPolicy"]["backoffLimit"] == 3


def test_create_drops_status_with_status_subresource_and_pods_start_pending(store: Store) -> None:
    j = job()
    j["status"] = {"conditions": [{"type": "Succeeded"}]}
    assert "status" not in store.create(j)
    p = pod()
    p["status"] = {"phase": "Running"}
    assert store.create(p)["status"] == {"phase": "Pending"}
    pg = podgroup()
    pg["status"] = {"phase": "Inqueue"}  # PodGroup has no status subresource: kept
    assert store.create(pg)["status"] == {"phase": "Inqueue"}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "las1"},
            "status": {"capacity": {"cpu": "16"}}}
    assert store.create(node)["status"] == {"capacity": {"cpu": "16"}}  # docs/REFERENCE.md golden 12: a kubelet registers so
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}, "status": {"phase": "Terminating"}}
    assert store.create(ns)["status"] == {"phase": "Active"}


def test_create_ignores_client_set_system_fields(store: Store) -> None:
    j = job()
    j["metadata"].update(resourceVersion="77", uid="mine", generation=5,
                         deletionTimestamp="2020-01-01T00:00:00Z", creationTimestamp="2020-01-01T00:00:00Z")
    m = store.create(j)["metadata"]
    assert m["resourceVersion"] == "1" and m["uid"] != "mine" and m["generation"] == 1
    assert "deletionTimestamp" not in m and m["creationTimestamp"] != "2020-01-01T00:00:00Z"


def test_builtin_kinds_without_generation(store: Store) -> None:
    node = store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "las1"}})
    svc = store.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"}})
    q = store.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}})
    assert "generation" not in node["metadata"] and "generation" not in svc["metadata"]
    assert q["metadata"]["generation"] == 1  # a custom resource (docs/REFERENCE.md golden 14)


def test_create_twice_is_already_exists(store: Store) -> None:
    store.create(job())
    with pytest.raises(AlreadyExists) as e:
        store.create(job())
    assert e.value.message == 'pytorchjobs.kubeflow.org "pytest" already exists'  # docs/REFERENCE.md golden 17
    assert e.value.code == 409


def test_generate_name(store: Store) -> None:
    j = job()
    del j["metadata"]["name"]
    j["metadata"]["generateName"] = "run-"
    names = {store.create(j)["metadata"]["name"] for _ in range(20)}
    assert len(names) == 20
    assert all(n.startswith("run-") and len(n) == 9 for n in names)


def test_name_and_namespace_rules(store: Store) -> None:
    j = job()
    del j["metadata"]["name"]
    with pytest.raises(Invalid, match=r"metadata.name: Required value: name or generateName is required"):
        store.create(j)
    j = job()
    del j["metadata"]["namespace"]
    with pytest.raises(Invalid, match=r'PyTorchJob "pytest" is invalid: metadata.namespace: Required value'):
        store.create(j)
    with pytest.raises(Invalid, match=r"metadata.name: Invalid value: \"a/b\""):
        store.create(job("a/b"))
    # Cluster-scoped kinds: the namespace is not part of the identity and is dropped.
    node = store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "namespace": "x"}})
    assert "namespace" not in node["metadata"]
    assert store.get("Node", "n", "whatever")["metadata"]["name"] == "n"


def test_bad_input_is_refused_naming_the_problem(store: Store) -> None:
    with pytest.raises(BadRequest, match="unknown kind \"StatefulSet\""):
        store.create({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "d"}})
    with pytest.raises(BadRequest, match="Kind' is missing"):
        store.create({"metadata": {"name": "d"}})
    with pytest.raises(BadRequest, match="apiVersion \"v2\""):
        store.create({**job(), "apiVersion": "v2"})
    with pytest.raises(BadRequest, match="not valid JSON"):
        store.create({**job(), "spec": {"x": object()}})
    with pytest.raises(BadRequest, match="not valid JSON"):
        store.create({**job(), "spec": {"x": float("nan")}})
    j = job()
    j["metadata"]["labels"] = {"a": 1}
    with pytest.raises(Invalid, match=r"metadata.labels\[a\]: Invalid value: 1: must be a string"):
        store.create(j)
    j = job()
    j["metadata"]["ownerReferences"] = [{"kind": "PyTorchJob", "name": "x"}]
    with pytest.raises(Invalid, match=r"ownerReferences\[0\].uid: Required value"):
        store.create(j)
    with pytest.raises(BadRequest):
        store.create(["not", "an", "object"])  # type: ignore[arg-type]
    assert store.current_rv() == "0"
    assert store.list("PyTorchJob")[0] == []


def test_missing_api_version_is_filled_from_the_registry(store: Store) -> None:
    j = job()
    del j["apiVersion"]
    assert store.create(j)["apiVersion"] == "kubeflow.org/v1"


def test_get_not_found_and_namespace_required(store: Store) -> None:
    with pytest.raises(NotFound) as e:
        store.get("PyTorchJob", "pytest", "default")
    assert e.value.message == 'pytorchjobs.kubeflow.org "pytest" not found'  # docs/REFERENCE.md golden 15
    with pytest.raises(NotFound, match='pods "x" not found'):
        store.get("Pod", "x", "default")
    with pytest.raises(BadRequest, match="namespace is required"):
        store.get("Pod", "x")


# ------------------------------------------------------------------ list


def test_list_sorted_filtered_and_versioned(store: Store) -> None:
    for ns, name in [("b", "z"), ("a", "y"), ("a", "x"), ("b", "a")]:
        p = pod(name, ns)
        p["metadata"]["labels"] = {"app": "t", "ns": ns}
        store.create(p)
    items, rv = store.list("Pod")
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [
        ("a", "x"), ("a", "y"), ("b", "a"), ("b", "z")]
    assert rv == store.current_rv() == "4"
    assert [i["metadata"]["name"] for i in store.list("Pod", "b")[0]] == ["a", "z"]
    assert store.list("Pod", "nope")[0] == []
    assert [i["metadata"]["name"] for i in store.list("Pod", None, "ns=a")[0]] == ["x", "y"]
    assert [i["metadata"]["name"] for i in store.list("Pod", None, {"ns": "b"})[0]] == ["a", "z"]
    assert [i["metadata"]["name"] for i in store.list("Pod", None, field_selector="metadata.name=y")[0]] == ["y"]
    assert len(store.list("Pod", None, "ns notin (a),app")[0]) == 2
    assert len(store.list("Pod", "a", field_selector="metadata.namespace!=a")[0]) == 0


def test_list_field_selectors_on_pods_and_events(store: Store) -> None:
    store.create(pod("a"))
    store.create(pod("b"))
    store.bind("default", "b", "las1")
    assert [i["metadata"]["name"] for i in store.list("Pod", field_selector="spec.nodeName=las1")[0]] == ["b"]
    assert [i["metadata"]["name"] for i in store.list("Pod", field_selector="spec.nodeName=")[0]] == ["a"]
    assert len(store.list("Pod", field_selector="status.phase=Pending")[0]) == 2
    store.create({"apiVersion": "v1", "kind": "Event",
                  "metadata": {"name": "b.1", "namespace": "default"},
                  "involvedObject": {"kind": "Pod", "name": "b", "namespace": "default", "uid": "u1"},
                  "reason": "Scheduled", "type": "Normal", "source": {"component": "volcano"}})
    fs = "involvedObject.kind=Pod,involvedObject.name=b,involvedObject.namespace=default,involvedObject.uid=u1"
    assert len(store.list("Event", "default", field_selector=fs)[0]) == 1  # docs/REFERENCE.md golden 55
    assert len(store.list("Event", "default", field_selector="source=volcano,type=Normal")[0]) == 1
    assert store.list("Event", "default", field_selector="involvedObject.name=a")[0] == []


def test_list_bad_selectors_are_bad_requests(store: Store) -> None:
    with pytest.raises(BadRequest, match=r'label selector "a in \(b"'):
        store.list("Pod", None, "a in (b")
    with pytest.raises(BadRequest, match=r"field label not supported: spec.nodeName"):
        store.list("PyTorchJob", None, field_selector="spec.nodeName=x")
    with pytest.raises(BadRequest, match=r"can't understand 'nodeName'"):
        store.list("Pod", None, field_selector="nodeName")


# ------------------------------------------------------------------ update


def test_update_keeps_status_and_bumps_generation_on_spec_change(store: Store) -> None:
    store.create(job())
    st = store.get("PyTorchJob", "pytest", "default")
    st["status"] = {"conditions": [{"type": "Created", "status": "True"}]}
    st = store.update_status(st)
    assert st["metadata"]["generation"] == 1

    cur = store.get("PyTorchJob", "pytest", "default")
    cur["metadata"]["labels"] = {"edited": "true"}
    cur["status"] = {"hacked": True}
    after_meta = store.update(cur)
    assert after_meta["metadata"]["generation"] == 1  # metadata-only change
    assert after_meta["status"] == st["status"]      # status kept from storage
    assert after_meta["metadata"]["labels"] == {"edited": "true"}

    after_meta["spec"]["runPolicy"]["backoffLimit"] = 4
    after_spec = store.update(after_meta)
    assert after_spec["metadata"]["generation"] == 2
    assert int(after_spec["metadata"]["resourceVersion"]) > int(after_meta["metadata"]["resourceVersion"])


def test_update_with_stale_resource_version_conflicts(store: Store) -> None:
    created = store.create(job())
    fresh = dict(created, spec={**created["spec"], "x": 1})
    store.update(fresh)
    stale = created
    stale["metadata"]["labels"] = {"edited": "true"}
    with pytest.raises(Conflict) as e:
        store.update(stale)
    assert e.value.message == (  # docs/REFERENCE.md golden 28
        'Operation cannot be fulfilled on pytorchjobs.kubeflow.org "pytest": the object has been modified; '
        "please apply your changes to the latest version and try again")
    assert "labels" not in store.get("PyTorchJob", "pytest", "default")["metadata"]


def test_update_without_resource_version_is_unconditional(store: Store) -> None:
    store.create(job())
    store.patch("PyTorchJob", "pytest", "default", {"metadata": {"labels": {"a": "b"}}})
    j = job(backoff=5)
    out = store.update(j)
    assert out["spec"]["runPolicy"]["backoffLimit"] == 5
    assert "labels" not in out["metadata"]  # a replace, not a merge


def test_update_cannot_change_system_fields(store: Store, clock: FakeClock) -> None:
    created = store.create(job())
    clock.advance(10)
    cur = dict(created)
    cur["metadata"] = {**created["metadata"], "creationTimestamp": "1999-01-01T00:00:00Z", "generation": 42}
    out = store.update(cur)
    assert out["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert out["metadata"]["generation"] == 1
    cur["metadata"]["uid"] = "other"
    with pytest.raises(Conflict, match="Precondition failed: UID in precondition: other"):
        store.update(cur)


def test_noop_update_writes_nothing(store: Store) -> None:
    created = store.create(job())
    w = store.watch("PyTorchJob", since_rv=store.current_rv())
    again = store.update(created)
    assert again == created
    assert store.current_rv() == "1"
    cur = store.get("PyTorchJob", "pytest", "default")
    assert store.update_status(cur)["metadata"]["resourceVersion"] == "1"
    assert w.pending() == 0


def test_update_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.update(job())
    with pytest.raises(NotFound):
        store.update_status(job())


def test_update_status_keeps_spec_and_metadata(store: Store) -> None:
    created = store.create(job())
    body = job(backoff=9)
    body["metadata"]["labels"] = {"sneaky": "yes"}
    body["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    out = store.update_status(body)
    assert out["status"] == {"startTime": "2026-01-01T00:00:00Z"}
    assert out["spec"] == created["spec"]
    assert "labels" not in out["metadata"]
    assert out["metadata"]["generation"] == 1
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]  # now stale
    with pytest.raises(Conflict):
        store.update_status(body)


def test_podgroup_has_no_status_subresource(store: Store) -> None:
    created = store.create(podgroup())
    cur = dict(created, status={"phase": "Inqueue"})
    out = store.update(cur)  # docs/REFERENCE.md golden 40: the full PUT stores status and bumps generation
    assert out["status"] == {"phase": "Inqueue"}
    assert out["metadata"]["generation"] == 2
    out["status"] = {"phase": "Running", "running": 4}
    out2 = store.update_status(out)
    assert out2["status"]["phase"] == "Running" and out2["metadata"]["generation"] == 3
    out2["metadata"]["labels"] = {"x": "y"}
    assert store.update(out2)["metadata"]["generation"] == 3  # metadata only


# ------------------------------------------------------------------ patch


def test_merge_patch(store: Store) -> None:
    store.create(job())
    out = store.patch("PyTorchJob", "pytest", "default",
                      {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"runPolicy": {"backoffLimit": 4}}})
    assert out["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert out["spec"]["runPolicy"]["backoffLimit"] == 4
    assert out["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert out["metadata"]["generation"] == 2
    out = store.patch("PyTorchJob", "pytest", "default", {"metadata": {"labels": {"a": None}}})
    assert out["metadata"]["labels"] == {"b": "2"}


def test_merge_patch_with_resource_version_is_a_precondition(store: Store) -> None:
    created = store.create(job())
    store.patch("PyTorchJob", "pytest", "default", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(Conflict):
        store.patch("PyTorchJob", "pytest", "default",
                    {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"], "labels": {"a": "2"}}})


def test_json_patch_as_golden_32(store: Store) -> None:
    store.create(job())
    ops = [
        {"op": "test", "path": "/spec/runPolicy/backoffLimit", "value": 3},
        {"op": "replace", "path": "/spec/runPolicy/backoffLimit", "value": 4},
        {"op": "add", "path": "/metadata/labels", "value": {"example.com/jsonpatch": "yes"}},
    ]
    out = store.patch("PyTorchJob", "pytest", "default", ops, "json")
    assert out["spec"]["runPolicy"]["backoffLimit"] == 4
    assert out["metadata"]["labels"] == {"example.com/jsonpatch": "yes"}
    assert out["metadata"]["generation"] == 2


def test_json_patch_failed_test_is_422_and_changes_nothing(store: Store) -> None:
    store.create(job(backoff=4))
    rv = store.current_rv()
    ops = [{"op": "test", "path": "/spec/runPolicy/backoffLimit", "value": 3},
           {"op": "replace", "path": "/spec/runPolicy/backoffLimit", "value": 5}]
    with pytest.raises(PatchRejected) as e:
        store.patch("PyTorchJob", "pytest", "default", ops, "json")
    assert isinstance(e.value, Invalid)
    assert e.value.to_status() == {  # docs/REFERENCE.md golden 33 (minus details)
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server rejected our request due to an error in our request",
        "reason": "Invalid", "code": 422}
    assert "testing value" in e.value.cause
    assert store.current_rv() == rv
    assert store.get("PyTorchJob", "pytest", "default")["spec"]["runPolicy"]["backoffLimit"] == 4


def test_patch_status_subresource_and_main_resource_ignores_status(store: Store) -> None:
    store.create(job())
    out = store.patch("PyTorchJob", "pytest", "default", {"status": {"startTime": "t"}}, subresource="status")
    assert out["status"] == {"startTime": "t"}
    out = store.patch("PyTorchJob", "pytest", "default", {"status": {"startTime": "u"}})
    assert out["status"] == {"startTime": "t"}
    out = store.patch("PyTorchJob", "pytest", "default",
                      [{"op": "add", "path": "/status/completionTime", "value": "c"}], "json", "status")
    assert out["status"] == {"startTime": "t", "completionTime": "c"}


def test_patch_refusals(store: Store) -> None:
    store.create(job())
    with pytest.raises(BadRequest, match='unsupported patch type "apply"'):
        store.patch("PyTorchJob", "pytest", "default", {}, "apply")
    with pytest.raises(BadRequest, match='unsupported patch type "strategic"'):
        store.patch("PyTorchJob", "pytest", "default", {}, "strategic")  # the server's job
    with pytest.raises(BadRequest, match="does not match the name"):
        store.patch("PyTorchJob", "pytest", "default", {"metadata": {"name": "other"}})
    with pytest.raises(BadRequest, match="may not change kind"):
        store.patch("PyTorchJob", "pytest", "default", {"kind": "TFJob"})
    with pytest.raises(BadRequest, match="merge patch must be a JSON object"):
        store.patch("PyTorchJob", "pytest", "default", [1])
    with pytest.raises(BadRequest, match="unsupported op"):
        store.patch("PyTorchJob", "pytest", "default", [{"op": "frob", "path": "/spec"}], "json")
    with pytest.raises(BadRequest, match='unsupported subresource "scale"'):
        store.patch("PyTorchJob", "pytest", "default", {}, subresource="scale")
    with pytest.raises(NotFound):
        store.patch("PyTorchJob", "nope", "default", {})
    assert store.current_rv() == "1"


# ------------------------------------------------------------------ delete


def test_delete_other_kinds_at_once(store: Store) -> None:
    created = store.create(job())
    w = store.watch("PyTorchJob", since_rv=store.current_rv())
    assert store.delete("PyTorchJob", "pytest", "default") is None
    with pytest.raises(NotFound):
        store.get("PyTorchJob", "pytest", "default")
    [(t, obj)] = drain(w)
    assert t == "DELETED"
    assert obj["metadata"]["uid"] == created["metadata"]["uid"]
    assert obj["metadata"]["resourceVersion"] == store.current_rv() == "2"
    with pytest.raises(NotFound):
        store.delete("PyTorchJob", "pytest", "default")
    again = store.create(job())
    last = store.delete("PyTorchJob", "pytest", "default", return_deleted=True)  # for the HTTP API
    assert last["metadata"]["uid"] == again["metadata"]["uid"]
    assert last["metadata"]["resourceVersion"] == store.current_rv()


def test_bound_pod_is_deleted_gracefully(store: Store, clock: FakeClock) -> None:
    store.create(pod())
    store.bind("default", "p", "las1")
    w = store.watch("Pod", since_rv=store.current_rv())
    clock.advance(5)
    out = store.delete("Pod", "p", "default")
    assert out is not None  # docs/REFERENCE.md golden 64: the pod stays, Terminating
    assert out["metadata"]["deletionTimestamp"] == format_time(clock.now() + timedelta(seconds=30))
    assert out["metadata"]["deletionGracePeriodSeconds"] == 30
    assert out["metadata"]["generation"] == 2
    assert [t for t, _ in drain(w)] == ["MODIFIED"]

    # Deleting again without a shorter grace period changes nothing.
    rv = store.current_rv()
    assert store.delete("Pod", "p", "default") == out
    assert store.current_rv() == rv

    # The node agent confirms with grace 0: gone, DELETED carries the last state.
    assert store.delete("Pod", "p", "default", grace_period_seconds=0) is None
    [(t, last)] = drain(w)
    assert t == "DELETED" and last["metadata"]["deletionGracePeriodSeconds"] == 0
    with pytest.raises(NotFound):
        store.get("Pod", "p", "default")


def test_pod_grace_period_from_spec_and_shortening(store: Store, clock: FakeClock) -> None:
    store.create(pod(terminationGracePeriodSeconds=60))
    store.bind("default", "p", "las1")
    t0 = clock.now()
    out = store.delete("Pod", "p", "default")
    assert out["metadata"]["deletionGracePeriodSeconds"] == 60
    clock.advance(3)
    out = store.delete("Pod", "p", "default", grace_period_seconds=10)
    assert out["metadata"]["deletionGracePeriodSeconds"] == 10
    assert out["metadata"]["deletionTimestamp"] == format_time(t0 + timedelta(seconds=10))
    assert out["metadata"]["generation"] == 2  # bumped once, when deletion started
    assert store.delete("Pod", "p", "default", grace_period_seconds=20)["metadata"]["deletionGracePeriodSeconds"] == 10
    with pytest.raises(BadRequest, match="gracePeriodSeconds"):
        store.delete("Pod", "p", "default", grace_period_seconds="5")  # type: ignore[arg-type]


def test_unbound_and_finished_pods_go_at_once(store: Store, clock: FakeClock) -> None:
    store.create(pod("unbound"))
    w = store.watch("Pod", since_rv=store.current_rv())
    assert store.delete("Pod", "unbound", "default") is None
    [(t, last)] = drain(w)
    # docs/REFERENCE.md golden 65: the last state shows the deletion stamp with a zero grace period
    assert t == "DELETED"
    assert last["metadata"]["deletionTimestamp"] == format_time(clock.now())
    assert last["metadata"]["deletionGracePeriodSeconds"] == 0
    assert last["metadata"]["generation"] == 2

    store.create(pod("done"))
    store.bind("default", "done", "las1")
    cur = store.get("Pod", "done", "default")
    cur["status"]["phase"] = "Succeeded"
    store.update_status(cur)
    assert store.delete("Pod", "done", "default") is None

    store.create(pod("forced"))
    store.bind("default", "forced", "las1")
    assert store.delete("Pod", "forced", "default", grace_period_seconds=0) is None
    assert store.list("Pod")[0] == []


def test_finalizers_hold_deletion_until_removed(store: Store, clock: FakeClock) -> None:
    j = job()
    j["metadata"]["finalizers"] = ["example.com/keep"]
    store.create(j)
    w = store.watch("PyTorchJob", since_rv=store.current_rv())
    out = store.delete("PyTorchJob", "pytest", "default")
    assert out["metadata"]["deletionTimestamp"] == format_time(clock.now())
    assert out["metadata"]["deletionGracePeriodSeconds"] == 0
    assert out["metadata"]["generation"] == 2
    assert store.delete("PyTorchJob", "pytest", "default") == out  # still pending

    out["metadata"]["finalizers"].append("example.com/more")
    with pytest.raises(Invalid, match="no new finalizers can be added"):
        store.update(out)

    cur = store.get("PyTorchJob", "pytest", "default")
    cur["metadata"]["labels"] = {"still": "here"}
    cur = store.update(cur)  # other updates are fine while deleting
    cur["metadata"]["finalizers"] = []
    store.update(cur)
    with pytest.raises(NotFound):
        store.get("PyTorchJob", "pytest", "default")
    assert [t for t, _ in drain(w)] == ["MODIFIED", "MODIFIED", "DELETED"]


def test_finalizer_removed_by_patch_deletes(store: Store) -> None:
    j = job()
    j["metadata"]["finalizers"] = ["a"]
    store.create(j)
    store.delete("PyTorchJob", "pytest", "default")
    store.patch("PyTorchJob", "pytest", "default", {"metadata": {"finalizers": None}})
    assert store.list("PyTorchJob")[0] == []


def test_pod_with_finalizer_stays_after_grace_zero(store: Store) -> None:
    p = pod()
    p["metadata"]["finalizers"] = ["f"]
    store.create(p)
    store.bind("default", "p", "las1")
    store.delete("Pod", "p", "default")
    out = store.delete("Pod", "p", "default", grace_period_seconds=0)
    assert out is not None and out["metadata"]["deletionGracePeriodSeconds"] == 0
    out["metadata"]["finalizers"] = []
    store.update(out)
    assert store.list("Pod")[0] == []


def test_delete_uid_precondition(store: Store) -> None:
    store.create(job())
    with pytest.raises(Conflict, match="Precondition failed: UID in precondition: nope"):
        store.delete("PyTorchJob", "pytest", "default", preconditions_uid="nope")
    uid = store.get("PyTorchJob", "pytest", "default")["metadata"]["uid"]
    assert store.delete("PyTorchJob", "pytest", "default", preconditions_uid=uid) is None


# ------------------------------------------------------------------ bind


def test_bind_sets_node_and_pod_scheduled(store: Store, clock: FakeClock) -> None:
    created = store.create(pod())
    store.bind("default", "p", "las1")
    got = store.get("Pod", "p", "default")
    assert got["spec"]["nodeName"] == "las1"
    assert got["status"]["conditions"] == [{"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                            "lastTransitionTime": format_time(clock.now())}]
    assert got["metadata"]["generation"] == created["metadata"]["generation"]
    with pytest.raises(Conflict, match='pods/binding "p": pod p is already assigned to node "las1"'):
        store.bind("default", "p", "las2")
    with pytest.raises(NotFound):
        store.bind("default", "nope", "las1")


def test_bind_replaces_unschedulable_condition_and_refuses_deleting_pods(store: Store) -> None:
    p = pod()
    store.create(p)
    cur = store.get("Pod", "p", "default")
    cur["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    store.update_status(cur)
    store.bind("default", "p", "las1")
    [cond] = store.get("Pod", "p", "default")["status"]["conditions"]
    assert cond["status"] == "True" and "reason" not in cond
    p2 = pod("q")
    p2["metadata"]["finalizers"] = ["f"]
    store.create(p2)
    store.delete("Pod", "q", "default")  # unbound, but held by a finalizer
    with pytest.raises(Conflict, match="is being deleted"):
        store.bind("default", "q", "las1")


# ------------------------------------------------------------------ watch


async def test_watch_from_resource_version(store: Store) -> None:
    store.create(job("before"))
    w = store.watch("PyTorchJob", "default", since_rv=store.current_rv())
    store.create(job("a"))
    store.create(pod("ignored-other-kind"))
    store.patch("PyTorchJob", "a", "default", {"metadata": {"labels": {"x": "y"}}})
    store.delete("PyTorchJob", "a", "default")
    evs = [await next_event(w) for _ in range(3)]
    assert [(e.type, e.object["metadata"]["name"]) for e in evs] == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    rvs = [int(e.object["metadata"]["resourceVersion"]) for e in evs]
    assert rvs == sorted(rvs) and rvs[-1] == int(store.current_rv())
    # A later watch from the middle replays exactly what came after.
    w2 = store.watch("PyTorchJob", since_rv=str(rvs[0]))
    assert [(await next_event(w2)).type for _ in range(2)] == ["MODIFIED", "DELETED"]
    assert w2.pending() == 0


async def test_watch_without_resource_version_starts_with_current_objects(store: Store) -> None:
    store.create(job("b"))
    store.create(job("a"))
    store.create(job("c", ns="other"))
    w = store.watch("PyTorchJob", "default", since_rv="0")
    first = [await next_event(w) for _ in range(2)]
    assert [(e.type, e.object["metadata"]["name"]) for e in first] == [("ADDED", "a"), ("ADDED", "b")]
    store.create(job("d"))
    e = await next_event(w)
    assert (e.type, e.object["metadata"]["name"]) == ("ADDED", "d")
    w_all = store.watch("PyTorchJob")
    assert w_all.pending() == 4


async def test_watch_namespace_filter_and_cluster_scoped(store: Store) -> None:
    w = store.watch("Pod", "team-a", since_rv=store.current_rv())
    wn = store.watch("Node", "ignored", since_rv=store.current_rv())
    store.create(pod("x", "team-b"))
    store.create(pod("y", "team-a"))
    store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
    e = await next_event(w)
    assert e.object["metadata"]["name"] == "y" and w.pending() == 0
    assert (await next_event(wn)).object["metadata"]["name"] == "n"


async def test_watch_too_old_resource_version_is_gone(clock: FakeClock) -> None:
    store = Store(None, clock, history_size=3)
    for i in range(6):
        store.create(job(f"j{i}"))
    with pytest.raises(Gone) as e:
        store.watch("PyTorchJob", since_rv="1")
    assert e.value.message == "too old resource version: 1 (3)"  # docs/REFERENCE.md golden 34 wording
    assert e.value.code == 410 and e.value.reason == "Expired"
    w = store.watch("PyTorchJob", since_rv="3")
    assert [(await next_event(w)).object["metadata"]["name"] for _ in range(3)] == ["j3", "j4", "j5"]
    with pytest.raises(BadRequest, match="resourceVersion"):
        store.watch("PyTorchJob", since_rv="abc")


async def test_watch_close_ends_the_iteration(store: Store) -> None:
    w = store.watch("PyTorchJob", since_rv="0")

    async def consume() -> list:
        return [e async for e in w]

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    w.close()
    assert await asyncio.wait_for(task, 1) == []
    store.create(job())  # a closed watcher receives nothing and is not kept
    assert w.pending() == 0


async def test_slow_watcher_is_cut_off_with_gone(clock: FakeClock) -> None:
    store = Store(None, clock, max_pending=5)
    w = store.watch("PyTorchJob", since_rv="0")
    for i in range(10):
        store.create(job(f"j{i}"))
    got = [await next_event(w) for _ in range(5)]
    assert len(got) == 5
    with pytest.raises(Gone, match="fell behind"):
        await next_event(w)


async def test_watch_events_are_copies(store: Store) -> None:
    w1 = store.watch("PyTorchJob", since_rv="0")
    w2 = store.watch("PyTorchJob", since_rv="0")
    store.create(job())
    e1, e2 = await next_event(w1), await next_event(w2)
    e1.object["spec"]["mutated"] = True
    assert "mutated" not in e2.object["spec"]
    assert "mutated" not in store.get("PyTorchJob", "pytest", "default")["spec"]


async def test_store_close_ends_watches(store: Store) -> None:
    w = store.watch("Pod", since_rv="0")
    store.close()
    with pytest.raises(StopAsyncIteration):
        await next_event(w)


# ------------------------------------------------------------------ admission


def test_admission_sees_old_and_can_default(clock: FakeClock) -> None:
    calls = []

    def admit(obj: dict, old: dict | None) -> dict:
        calls.append((obj["metadata"].get("resourceVersion"), old and old["metadata"]["resourceVersion"]))
        obj["spec"].setdefault("defaulted", True)
        return obj

    store = Store(None, clock, admission=admit)
    created = store.create(job())
    assert created["spec"]["defaulted"] is True
    created["spec"]["x"] = 1
    store.update(created)
    assert calls == [(None, None), ("1", "1")]


def test_real_admission_and_plugins_never_reach_the_callers_object(clock: FakeClock) -> None:
    """The store copies only the top level and metadata before Phalanx's admission
    (which returns a fresh deep copy): nothing done after may reach the caller."""
    from phalanx.api.admission import admit

    def plugin(op: str, obj: dict, old: dict | None) -> None:
        if op != "delete" and obj["kind"] == "Pod":
            obj["spec"]["containers"][0].setdefault("env", []).append({"name": "PLUGIN", "value": "1"})
            obj["metadata"]["labels"]["plugin"] = "yes"

    def returns_input(obj: dict, old: dict | None) -> None:
        return None  # an admission that neither copies nor changes: the store copies

    for admission in (admit, returns_input):
        store = Store(None, clock, admission=admission)
        store.add_admission_plugin(plugin)
        src = pod("p")
        before = json.loads(json.dumps(src))
        created = store.create(src)
        assert src == before
        assert created["metadata"]["labels"]["plugin"] == "yes"
        assert created["spec"]["containers"][0]["env"] == [{"name": "PLUGIN", "value": "1"}]
        upd = json.loads(json.dumps(created))
        upd["metadata"]["labels"]["extra"] = "1"
        upd_before = json.loads(json.dumps(upd))
        store.update(upd)
        assert upd == upd_before


def test_admission_refusal_stores_nothing(clock: FakeClock) -> None:
    def admit(obj: dict, old: dict | None) -> dict:
        if obj["spec"]["runPolicy"]["backoffLimit"] < 0:
            raise Invalid([FieldError("spec.runPolicy.backoffLimit", "Invalid", "must be >= 0", -1)])
        return obj

    store = Store(None, clock, admission=admit)
    w = store.watch("PyTorchJob", since_rv="0")
    with pytest.raises(Invalid, match="spec.runPolicy.backoffLimit"):
        store.create(job(backoff=-1))
    created = store.create(job())
    created["spec"]["runPolicy"]["backoffLimit"] = -1
    with pytest.raises(Invalid):
        store.update(created)
    with pytest.raises(Invalid):
        store.patch("PyTorchJob", "pytest", "default", {"spec": {"runPolicy": {"backoffLimit": -2}}})
    assert store.current_rv() == "1"
    assert store.get("PyTorchJob", "pytest", "default")["spec"]["runPolicy"]["backoffLimit"] == 3
    assert w.pending() == 1


def test_admission_bug_is_an_internal_error_not_a_crash(clock: FakeClock) -> None:
    def admit(obj: dict, old: dict | None) -> dict:
        raise KeyError("boom")

    store = Store(None, clock, admission=admit)
    with pytest.raises(ApiError) as e:
        store.create(job())
    assert e.value.code == 500 and "admission" in e.value.message
    assert store.current_rv() == "0"


def test_admission_returning_non_json_is_refused_before_storing(clock: FakeClock) -> None:
    store = Store(None, clock, admission=lambda obj, old: {**obj, "spec": {"when": object()}})
    with pytest.raises(ApiError) as e:
        store.create(job())
    assert e.value.code == 500
    assert store.list("PyTorchJob")[0] == [] and store.current_rv() == "0"


def test_plugins_allocate_refuse_and_release(clock: FakeClock) -> None:
    store = Store(None, clock)
    allocated: set[str] = set()
    log: list[tuple[str, str]] = []

    def allocator(op: str, obj: dict, old: dict | None) -> dict | None:
        name = obj["metadata"]["name"]
        log.append((op, name))
        if obj["kind"] != "Service":
            return None
        if op == "create":
            allocated.add(name)
            obj["metadata"].setdefault("annotations", {})["phalanx.dev/address"] = "127.0.1.1"
            return obj
        if op == "delete":
            allocated.discard(name)
        return None

    def refuser(op: str, obj: dict, old: dict | None) -> None:
        if obj["metadata"]["name"] == "refused" and op == "create":
            raise Forbidden("no")

    store.add_admission_plugin(allocator)
    store.add_admission_plugin(refuser)
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ok", "namespace": "default"}}
    out = store.create(svc)
    assert out["metadata"]["annotations"]["phalanx.dev/address"] == "127.0.1.1"
    assert allocated == {"ok"}
    with pytest.raises(Forbidden):
        store.create({**svc, "metadata": {"name": "refused", "namespace": "default"}})
    assert allocated == {"ok"}  # the refused create released its allocation
    with pytest.raises(NotFound):
        store.get("Service", "refused", "default")
    store.delete("Service", "ok", "default")
    assert allocated == set()
    assert ("delete", "ok") in log


def test_plugins_run_on_update_and_status(clock: FakeClock) -> None:
    store = Store(None, clock)
    ops: list[str] = []
    store.add_admission_plugin(lambda op, obj, old: ops.append(op))
    created = store.create(job())
    created["spec"]["x"] = 1
    created = store.update(created)
    created["status"] = {"a": "b"}
    store.update_status(created)
    assert ops == ["create", "update", "update"]


def test_a_plugin_without_status_writes_is_not_called_for_one(clock: FakeClock) -> None:
    store = Store(None, clock)
    ops: list[tuple[str, str]] = []
    store.add_admission_plugin(lambda op, obj, old: ops.append(("all", op)))
    store.add_admission_plugin(lambda op, obj, old: ops.append(("spec", op)), status_writes=False)
    created = store.create(job())
    created["spec"]["x"] = 1
    created = store.update(created)
    created = store.update_status({**created, "status": {"a": "b"}})
    name = created["metadata"]["name"]
    store.patch("PyTorchJob", name, "default", {"status": {"a": "c"}}, subresource="status")
    store.delete("PyTorchJob", name, "default")
    assert ops == [("all", "create"), ("spec", "create"), ("all", "update"), ("spec", "update"),
                   ("all", "update"), ("all", "update"), ("all", "delete"), ("spec", "delete")]


def test_a_status_write_keeps_only_the_status_a_plugin_returns(clock: FakeClock) -> None:
    store = Store(None, clock)
    seen: list[tuple[dict, dict]] = []

    def plugin(op, obj, old):
        if op == "update" and obj.get("status"):
            seen.append((json.loads(json.dumps(obj)), json.loads(json.dumps(old))))
            obj["status"]["plugin"] = "yes"
            obj["spec"]["runPolicy"]["backoffLimit"] = 99  # ignored: a status write changes status only
        return obj
    store.add_admission_plugin(plugin)
    created = store.create(job())
    written = store.update_status({**created, "status": {"a": "b"}})
    [(new, old)] = seen
    assert new["spec"] == created["spec"] and new["status"] == {"a": "b"}
    assert old["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"] and "status" not in old
    assert written["status"] == {"a": "b", "plugin": "yes"}
    stored = store.get("PyTorchJob", "pytest", "default")
    assert stored["status"] == {"a": "b", "plugin": "yes"} and stored["spec"] == created["spec"]
    assert stored["spec"]["runPolicy"].get("backoffLimit") != 99


# ------------------------------------------------------------------ persistence


def test_persistence_reload_continues_resource_versions(tmp_path, clock: FakeClock) -> None:
    db = tmp_path / "state.db"
    s1 = Store(db, clock)
    s1.create(job("a"))
    created = s1.create(job("b"))
    s1.create(pod("p"))
    s1.bind("default", "p", "las1")
    s1.delete("PyTorchJob", "a", "default")
    s1.update_status(dict(created, status={"startTime": "t"}))
    rv = s1.current_rv()
    s1.close()

    s2 = Store(db, clock)
    assert s2.current_rv() == rv
    assert [j["metadata"]["name"] for j in s2.list("PyTorchJob")[0]] == ["b"]
    b = s2.get("PyTorchJob", "b", "default")
    assert b["status"] == {"startTime": "t"} and b["metadata"]["uid"] == created["metadata"]["uid"]
    assert s2.get("Pod", "p", "default")["spec"]["nodeName"] == "las1"
    assert s2.create(job("c"))["metadata"]["resourceVersion"] == str(int(rv) + 1)
    with pytest.raises(Gone):
        s2.watch("PyTorchJob", since_rv=str(int(rv) - 1))
    assert s2.watch("PyTorchJob", since_rv=rv).pending() == 1
    s2.close()


def test_deletion_advances_the_persisted_counter(tmp_path, clock: FakeClock) -> None:
    db = tmp_path / "state.db"
    s1 = Store(db, clock)
    s1.create(job())
    s1.delete("PyTorchJob", "pytest", "default")
    s1.close()
    s2 = Store(db, clock)
    assert s2.current_rv() == "2"
    assert s2.list("PyTorchJob")[0] == []
    s2.close()


def test_sqlite_settings_and_no_partial_write(tmp_path, clock: FakeClock) -> None:
    db = tmp_path / "state.db"

    def admit(obj: dict, old: dict | None) -> dict:
        if obj["metadata"]["name"] == "bad":
            raise Invalid([FieldError("metadata.name", "Invalid", "refused", "bad")])
        return obj

    s = Store(db, clock, admission=admit)
    s.create(job())
    with pytest.raises(Invalid):
        s.create(job("bad"))
    s.close()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("SELECT name FROM objects").fetchall() == [("pytest",)]
    assert con.execute("SELECT value FROM meta WHERE key='rv'").fetchone()[0] == "1"
    con.close()


def test_storage_failure_changes_nothing_in_memory(tmp_path, clock: FakeClock) -> None:
    s = Store(tmp_path / "state.db", clock)
    s.create(job("a"))
    w = s.watch("PyTorchJob", since_rv="1")
    # Simulate a failing disk: every write now raises inside the transaction.
    s._db._db.execute("CREATE TRIGGER fail BEFORE INSERT ON objects BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(ApiError, match="storage write failed"):
        s.create(job("b"))
    assert s.current_rv() == "1" and w.pending() == 0
    with pytest.raises(NotFound):
        s.get("PyTorchJob", "b", "default")
    s.close()


def test_failed_commit_after_plugins_releases_their_allocations(clock: FakeClock) -> None:
    store = Store(None, clock)
    allocated: set[str] = set()

    def allocator(op: str, obj: dict, old: dict | None) -> dict | None:
        if op == "create":
            allocated.add(obj["metadata"]["name"])
        elif op == "delete":
            allocated.discard(obj["metadata"]["name"])
        return None

    store.add_admission_plugin(allocator)
    store.add_admission_plugin(lambda op, obj, old: {**obj, "spec": {"bad": object()}} if op == "create" else None)
    with pytest.raises(ApiError) as e:
        store.create(job())
    assert e.value.code == 500
    assert allocated == set() and store.current_rv() == "0"


def test_admission_may_default_the_namespace(clock: FakeClock) -> None:
    def admit(obj: dict, old: dict | None) -> dict:
        obj["metadata"].setdefault("namespace", "default")
        return obj

    store = Store(None, clock, admission=admit)
    j = job()
    del j["metadata"]["namespace"]
    assert store.create(j)["metadata"]["namespace"] == "default"
    assert store.get("PyTorchJob", "pytest", "default")
