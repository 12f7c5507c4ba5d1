"""The jobs' ``scale`` subresource (server.scale) on a real app: the Scale's shape, PUT and patches changing
only the Worker replicas, the resourceVersion precondition, the elastic bounds and a negative count refused
in the apiserver's words, kinds without one, and discovery."""
from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.server.app import make_app
from phalanx.store.store import Store
from tests.unit.test_job_world import pytorch_job

pytestmark = pytest.mark.timeout(30)

TOKEN = "scale-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PATH = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/pytest/scale"


def _job(elastic: dict | None = None) -> dict:
    job = pytorch_job()
    job.pop("status", None)
    for k in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        job["metadata"].pop(k, None)
    if elastic is not None:
        job["spec"]["elasticPolicy"] = elastic
    return job


@pytest.fixture
async def api():
    store = Store(None, FakeClock(), admission=admit)
    store.create(_job({"minReplicas": 2, "maxReplicas": 4}))
    client = TestClient(TestServer(make_app(LocalClient(store), TOKEN)))
    await client.start_server()
    client.store = store  # type: ignore[attr-defined]
    yield client
    await client.close()


async def test_get_answers_the_workers_scale(api):
    job = api.store.get("PyTorchJob", "pytest", "default")
    job["status"] = {"replicaStatuses": {"Worker": {"active": 2, "selector": "a=b"}}}
    api.store.update_status(job)
    job = api.store.get("PyTorchJob", "pytest", "default")
    r = await api.get(PATH, headers=AUTH)
    assert r.status == 200
    meta = job["metadata"]
    assert await r.json() == {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "pytest", "namespace": "default", "uid": meta["uid"],
                     "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
        "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "a=b"}}


async def test_put_and_patches_set_only_the_worker_replicas(api):
    before = api.store.get("PyTorchJob", "pytest", "default")
    r = await api.put(PATH, json={"apiVersion": "autoscaling/v1", "kind": "Scale",
                                  "metadata": {"name": "pytest", "namespace": "default"}, "spec": {"replicas": 4}},
                      headers=AUTH)
    assert r.status == 200 and (await r.json())["spec"]["replicas"] == 4
    after = api.store.get("PyTorchJob", "pytest", "default")
    assert after["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    assert after["spec"]["pytorchReplicaSpecs"]["Master"] == before["spec"]["pytorchReplicaSpecs"]["Master"]
    for media, body, want in (("application/merge-patch+json", {"spec": {"replicas": 2}}, 2),
                              ("application/json-patch+json", [{"op": "replace", "path": "/spec/replicas",
                                                                "value": 3}], 3),
                              ("application/strategic-merge-patch+json", {"spec": {"replicas": 4}}, 4)):
        r = await api.patch(PATH, json=body, headers={**AUTH, "Content-Type": media})
        assert r.status == 200, await r.text()
        assert (await r.json())["spec"]["replicas"] == want
        assert api.store.get("PyTorchJob", "pytest", "default")["spec"]["pytorchReplicaSpecs"]["Worker"][
            "replicas"] == want


async def test_a_stale_resource_version_conflicts(api):
    old = await (await api.get(PATH, headers=AUTH)).json()
    r = await api.patch(PATH, json={"spec": {"replicas": 4}},
                        headers={**AUTH, "Content-Type": "application/merge-patch+json"})
    assert r.status == 200
    old["spec"]["replicas"] = 2
    r = await api.put(PATH, json=old, headers=AUTH)
    assert r.status == 409
    assert (await r.json())["message"].startswith('Operation cannot be fulfilled on pytorchjobs.kubeflow.org "pytest"')
    assert api.store.get("PyTorchJob", "pytest", "default")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4


@pytest.mark.parametrize("replicas, message", [
    (5, 'PyTorchJob.kubeflow.org "pytest" is invalid: spec.replicas: Invalid value: 5: must be between '
        "minReplicas (2) and maxReplicas (4) of spec.elasticPolicy"),
    (1, 'PyTorchJob.kubeflow.org "pytest" is invalid: spec.replicas: Invalid value: 1: must be between '
        "minReplicas (2) and maxReplicas (4) of spec.elasticPolicy"),
    (-1, 'Scale.autoscaling "pytest" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0'),
])
async def test_out_of_bounds_is_refused_and_changes_nothing(api, replicas, message):
    r = await api.patch(PATH, json={"spec": {"replicas": replicas}},
                        headers={**AUTH, "Content-Type": "application/merge-patch+json"})
    body = await r.json()
    assert r.status == 422 and body["reason"] == "Invalid" and body["message"] == message
    assert api.store.get("PyTorchJob", "pytest", "default")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3


async def test_missing_job_and_kinds_without_scale(api):
    r = await api.get(PATH.replace("/pytest/", "/nope/"), headers=AUTH)
    assert r.status == 404 and (await r.json())["message"] == 'pytorchjobs.kubeflow.org "nope" not found'
    r = await api.get("/apis/kubeflow.org/v1/namespaces/default/tfjobs/x/scale", headers=AUTH)
    assert r.status == 404
    r = await api.delete(PATH, headers=AUTH)
    assert r.status == 405


async def test_discovery_lists_the_scale_subresources(api):
    r = await api.get("/apis/kubeflow.org/v1", headers=AUTH)
    names = {e["name"]: e for e in (await r.json())["resources"]}
    assert names["pytorchjobs/scale"] == {"name": "pytorchjobs/scale", "singularName": "", "namespaced": True,
                                          "group": "autoscaling", "version": "v1", "kind": "Scale",
                                          "verbs": ["get", "patch", "update"]}
    assert {"paddlejobs/scale", "jaxjobs/scale"} <= set(names) and "tfjobs/scale" not in names
