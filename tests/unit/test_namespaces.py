"""Namespaces: NamespaceLifecycle refuses content in a missing or terminating
namespace (store and HTTP, the apiserver's Status), and the namespace controller
empties a deleted namespace."""
from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.controller.namespaces import NamespaceController
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import Forbidden, NotFound
from phalanx.server.app import make_app, serve
from phalanx.store.namespaces import NamespaceLifecycle
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(30)
TOKEN = "tok"


def namespace(name: str, **meta) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **meta}}


def configmap(name: str, ns: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"a": "b"}}


def pod(name: str, ns: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def store() -> Store:
    s = Store(None, FakeClock(), admission=admit)
    s.add_admission_plugin(NamespaceLifecycle(s))
    s.create(namespace("default"))
    return s


def test_a_create_in_a_missing_namespace_is_refused_and_allowed_once_it_exists(store):
    with pytest.raises(NotFound) as e:
        store.create(configmap("c", "team-a"))
    assert e.value.message == 'namespaces "team-a" not found'
    assert store.list("ConfigMap", "team-a")[0] == []
    store.create(namespace("team-a"))
    assert store.create(configmap("c", "team-a"))["metadata"]["namespace"] == "team-a"
    # Cluster-scoped kinds have no namespace to check; updates of existing objects are not creates.
    store.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"},
                  "spec": {"weight": 1}})
    store.create(configmap("d", "default"))


def test_a_create_in_a_terminating_namespace_is_forbidden(store):
    store.create(namespace("going", finalizers=["example.com/hold"]))
    store.create(configmap("before", "going"))
    store.delete("Namespace", "going")
    assert store.get("Namespace", "going")["metadata"]["deletionTimestamp"]
    with pytest.raises(Forbidden) as e:
        store.create(pod("p", "going"))
    assert e.value.message == ('pods "p" is forbidden: unable to create new content in namespace going because '
                               "it is being terminated")
    cm = store.get("ConfigMap", "before", "going")
    cm["data"] = {"a": "changed"}
    assert store.update(cm)["data"] == {"a": "changed"}  # existing content may still change


async def test_http_answers_the_apiservers_404_and_403_bodies(store):
    runner, url = await serve(make_app(LocalClient(store), TOKEN))
    try:
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as s:
            async with s.post(url + "/api/v1/namespaces/nope/configmaps", json=configmap("c", "nope")) as r:
                assert r.status == 404
                assert json.loads(await r.text()) == {
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'namespaces "nope" not found', "reason": "NotFound",
                    "details": {"name": "nope", "kind": "namespaces"}, "code": 404}
            store.create(namespace("going", finalizers=["example.com/hold"]))
            store.delete("Namespace", "going")
            replica = {"replicas": 1, "restartPolicy": "OnFailure",
                       "template": {"spec": {"containers": [{"name": "pytorch", "image": "busybox"}]}}}
            job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j"},
                   "spec": {"pytorchReplicaSpecs": {"Master": replica}}}
            async with s.post(url + "/apis/kubeflow.org/v1/namespaces/going/pytorchjobs", json=job) as r:
                body = json.loads(await r.text())
                assert r.status == 403 and body["reason"] == "Forbidden"
                assert body["details"] == {"name": "j", "group": "kubeflow.org", "kind": "pytorchjobs"}
                assert body["message"].endswith("unable to create new content in namespace going because it is "
                                                "being terminated")
            # A missing object in an existing namespace keeps its own details.
            async with s.get(url + "/api/v1/namespaces/default/configmaps/missing") as r:
                assert json.loads(await r.text())["details"] == {"name": "missing", "kind": "configmaps"}
    finally:
        await runner.cleanup()


async def eventually(predicate, timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def test_deleting_a_namespace_deletes_what_is_in_it_and_nothing_else(store):
    client = LocalClient(store)
    nsc = NamespaceController(client)
    task = asyncio.create_task(nsc.run())
    try:
        await nsc.informer.wait_synced(2)
        store.create(namespace("team-a"))
        store.create(configmap("c", "team-a"))
        store.create(pod("p", "team-a"))
        store.create(configmap("keep", "default"))
        await client.delete("Namespace", "team-a")
        await eventually(lambda: not store.list("ConfigMap", "team-a")[0] and not store.list("Pod", "team-a")[0],
                         what="team-a emptied")
        assert [o["metadata"]["name"] for o in store.list("ConfigMap", "default")[0]] == ["keep"]
        assert nsc.deleted == 2
    finally:
        await nsc.stop()
        await asyncio.wait_for(task, 2)
