"""The limits the README lists, each enforced where documented and refused with
a message that names the object or field: request body 3 MiB (413), stored
object 1.5 MiB (413 naming the object, nothing stored), names, labels,
annotations (256 KiB in all), nesting (64), YAML alias expansion, JSON patch
growth, and list pages (``limit``/``continue``)."""
from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from phalanx.api import manifest
from phalanx.api.admission import admit
from phalanx.api.manifest import ManifestError, load_manifests
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import Forbidden, Invalid
from phalanx.server.app import MAX_BODY_BYTES, make_app, serve
from phalanx.store.errors import MAX_OBJECT_BYTES, ObjectTooLarge
from phalanx.store.patch import MAX_PATCHED_SIZE, JsonPatchError, json_patch
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(30)

TOKEN = "t"
PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


def pod(name: str, arg_bytes: int = 0) -> dict[str, Any]:
    args = ["x" * 1024] * (arg_bytes // 1024)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["true"], "args": args}]}}


def queue(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1}}


@pytest.fixture
async def api():
    store = Store(None, FakeClock(), admission=admit)
    runner, url = await serve(make_app(LocalClient(store), TOKEN))
    session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})

    async def call(method: str, path: str, body: Any = None, ctype: str = "application/json") -> tuple[int, Any]:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        async with session.request(method, url + path, data=data, headers={"Content-Type": ctype}) as r:
            return r.status, await r.json()

    try:
        yield store, call
    finally:
        await session.close()
        await runner.cleanup()


def test_the_documented_numbers():
    assert MAX_BODY_BYTES == 3 * 2**20 and MAX_OBJECT_BYTES == 1536 * 1024
    assert manifest.MAX_DEPTH == 64 and manifest.MAX_ALIAS_EXPANSION == 100_000
    assert manifest.MAX_DOCUMENT_BYTES == 3 * 2**20 and MAX_PATCHED_SIZE == 16 * 2**20


async def test_an_object_over_1_5_mib_is_413_naming_it_and_not_stored(api):
    store, call = api
    rv = store.current_rv()
    status, body = await call("POST", PODS, pod("big", 1600 * 1024))  # under the 3 MiB body limit
    assert status == 413 and body["reason"] == "RequestEntityTooLarge"
    assert body["message"].startswith('Pod "big" is too large: ') and str(MAX_OBJECT_BYTES) in body["message"]
    assert store.current_rv() == rv and store.list("Pod")[0] == []
    status, _ = await call("POST", PODS, pod("fits", 1400 * 1024))
    assert status == 201


async def test_growing_an_object_past_the_limit_by_update_patch_or_status_is_refused(api):
    store, call = api
    status, created = await call("POST", PODS, pod("p", 1000 * 1024))
    assert status == 201
    rv = store.current_rv()
    more = {"spec": {"containers": [{"name": "main", "args": ["y" * 1024] * 1700}]}}  # replaces the 1000
    status, body = await call("PATCH", f"{PODS}/p", more, "application/strategic-merge-patch+json")
    assert status == 413 and 'Pod "p" is too large' in body["message"]
    status, body = await call("PATCH", f"{PODS}/p/status", {"status": {"message": "z" * (700 * 1024)}},
                              "application/merge-patch+json")
    assert status == 413
    assert store.current_rv() == rv
    # Deleting it needs no room: a pod being deleted gets a deletionTimestamp first.
    status, _ = await call("DELETE", f"{PODS}/p")
    assert status == 200


def test_store_refuses_an_oversized_object_from_in_process_clients_too():
    store = Store(None, FakeClock(), admission=admit)
    with pytest.raises(ObjectTooLarge) as e:
        store.create(pod("big", 1600 * 1024))
    assert e.value.code == 413 and 'Pod "big"' in e.value.message


async def test_a_body_over_3_mib_is_413(api):
    _, call = api
    status, body = await call("POST", PODS, pod("huge", 3200 * 1024))
    assert status == 413 and body["message"] == f"Request entity too large: limit is {MAX_BODY_BYTES}"


@pytest.mark.parametrize("meta, field", [
    ({"name": "a" * 254}, "metadata.name"),
    ({"name": "q", "labels": {"k": "v" * 64}}, "metadata.labels"),
    ({"name": "q", "labels": {"p" * 254 + "/k": "v"}}, "metadata.labels"),
    ({"name": "q", "annotations": {f"k{i}": "v" * 1024 for i in range(257)}}, "metadata.annotations"),
])
def test_name_label_and_annotation_limits_name_the_field(meta, field):
    obj = queue("q")
    obj["metadata"] = meta
    with pytest.raises(Invalid) as e:
        admit(obj)
    assert any(fe.path == field for fe in e.value.errors), e.value.message


def test_job_and_namespace_names_are_labels_of_63():
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j" * 64},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
               {"name": "pytorch", "image": "busybox"}]}}}}}}
    with pytest.raises(Forbidden) as e:  # the training operator's webhook rule
        admit(job)
    assert "metadata.name" in e.value.message
    with pytest.raises(Invalid) as e2:
        admit({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n" * 64}})
    assert e2.value.errors[0].path == "metadata.name"


def test_nesting_deeper_than_64_is_refused_with_the_path():
    obj = queue("q")
    deep: Any = "leaf"
    for _ in range(70):
        deep = {"a": deep}
    obj["spec"]["affinity"] = deep
    with pytest.raises(Invalid) as e:
        admit(obj)
    assert e.value.errors[0].path.startswith("spec.affinity.a.a") and "nesting deeper than 64" in e.value.message


def test_yaml_alias_expansion_is_bounded():
    doc = "apiVersion: v1\nkind: Pod\na: &a [" + ", ".join(["x"] * 400) + "]\nb: [" + ", ".join(["*a"] * 400) + "]\n"
    with pytest.raises(ManifestError, match=r"expand this document to \d+ values \(at most 100000"):
        load_manifests(doc, "aliases.yaml")


def test_a_json_patch_cannot_blow_an_object_up():
    ops = [{"op": "copy", "from": "/spec", "path": f"/spec/c{i}"} for i in range(40)]
    with pytest.raises(JsonPatchError) as e:
        json_patch({"spec": {"x": "y" * 1000}}, ops)
    assert e.value.index is not None and "would exceed 16 MiB" in str(e.value)


async def test_json_patch_refusal_names_the_operation(api):
    store, call = api
    await call("POST", QUEUES, queue("q1"))
    status, body = await call("PATCH", f"{QUEUES}/q1", [{"op": "test", "path": "/spec/weight", "value": 3}],
                              "application/json-patch+json")
    assert status == 422 and body["message"] == "the server rejected our request due to an error in our request"
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "patch[0]",
                                          "message": 'Invalid value: "/spec/weight": testing value "/spec/weight" '
                                                     'failed'}]


async def test_lists_are_paged_with_limit_and_continue(api):
    store, call = api
    for i in range(7):
        store.create(queue(f"q{i}"))
    names: list[str] = []
    token = ""
    pages = 0
    while True:
        status, body = await call("GET", f"{QUEUES}?limit=3" + (f"&continue={token}" if token else ""))
        assert status == 200
        names += [q["metadata"]["name"] for q in body["items"]]
        pages += 1
        token = body["metadata"].get("continue") or ""
        if not token:
            break
        assert body["metadata"]["remainingItemCount"] == 7 - len(names)
    assert names == [f"q{i}" for i in range(7)] and pages == 3
    status, body = await call("GET", f"{QUEUES}?limit=3&continue=not-a-token")
    assert status == 400 and body["message"].startswith('continue: Invalid value: "not-a-token"')
    status, body = await call("GET", f"{QUEUES}")
    assert len(body["items"]) == 7 and body["metadata"]["continue"] == ""


async def test_duplicate_json_fields_are_refused_with_their_place(api):
    _, call = api
    status, body = await call("POST", QUEUES, b'{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", '
                                              b'"metadata": {"name": "a", "name": "b"}}')
    assert status == 400 and body["message"] == 'the request body is not valid JSON: metadata: duplicate field "name"'


async def test_a_status_write_gets_admissions_shape_rules(api):
    store, call = api
    assert (await call("POST", PODS, pod("p")))[0] == 201
    rv = store.current_rv()
    deep: Any = "x"
    for _ in range(70):
        deep = {"a": deep}
    for status_body, field in (({"deep": deep}, "status.deep.a.a"), ({"n": [1, 2**2000]}, "status.n[1]")):
        status, body = await call("PATCH", f"{PODS}/p/status", {"status": status_body},
                                  "application/merge-patch+json")
        assert status == 422 and body["details"]["causes"][0]["field"].startswith(field), body
    assert store.current_rv() == rv
