"""The jobs' scale subresource over the real app: the Scale kube-apiserver serves for a CRD (field for
field), PUT and patches changing only the Worker replicas, preconditions, errors in its words, the elastic
bounds, discovery and RBAC (server.scale, api.scale, the elastic rule of api.kubeflow_validation)."""
from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from phalanx.api.admission import admit, plain_admit
from phalanx.api.scale import SCALE as SCALE_PATHS
from phalanx.api.scale import scale_of
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.server.app import make_app
from phalanx.server.openapi import openapi_document
from phalanx.server.requestinfo import parse
from phalanx.server.scale import NOT_A_SCALE
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(60)

TOKEN = "scale-test-token-0123456789"
JOBS = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
SCALE = f"{JOBS}/x/scale"
SELECTOR = "training.kubeflow.org/job-name=x,training.kubeflow.org/operator-name=pytorchjob-controller," \
           "training.kubeflow.org/replica-type=worker"
TEMPLATE = {"spec": {"containers": [{"name": "pytorch", "image": "busybox", "command": ["true"]}]}}
MERGE = {"Content-Type": "application/merge-patch+json"}
JSONP = {"Content-Type": "application/json-patch+json"}


def pytorchjob(name: str = "x", workers: int = 3, elastic: dict | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {
        "Master": {"replicas": 1, "template": copy.deepcopy(TEMPLATE)},
        "Worker": {"replicas": workers, "template": copy.deepcopy(TEMPLATE)}}}
    if elastic is not None:
        spec = {"elasticPolicy": elastic,
                "pytorchReplicaSpecs": {"Worker": {"replicas": workers, "template": copy.deepcopy(TEMPLATE)}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


@pytest.fixture
async def env():
    store = Store(None, FakeClock(), admission=admit)
    client = TestClient(TestServer(make_app(LocalClient(store), TOKEN, clock=FakeClock())))
    await client.start_server()
    try:
        yield client, store
    finally:
        await client.close()


async def call(api: TestClient, method: str, path: str, body: Any = None, headers: dict | None = None,
               token: str = TOKEN) -> tuple[int, Any, Any]:
    hdrs = {"Authorization": f"Bearer {token}", **(headers or {})}
    data = None if body is None else json.dumps(body)
    if data is not None and "Content-Type" not in hdrs:
        hdrs["Content-Type"] = "application/json"
    resp = await api.request(method, path, data=data, headers=hdrs)
    text = await resp.text()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text
    return resp.status, parsed, resp.headers


def worker_replicas(store: Store, name: str = "x") -> int:
    return store.get("PyTorchJob", name, "default")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]


def set_worker_status(store: Store, name: str = "x", active: int = 2) -> dict:
    job = store.get("PyTorchJob", name, "default")
    job["status"] = {"replicaStatuses": {"Worker": {"active": active, "selector": SELECTOR}}}
    return store.update_status(job)


# ---------------------------------------------------------------- GET


async def test_get_is_the_apiservers_scale_field_for_field(env):
    api, store = env
    job = store.create(pytorchjob())
    status, body, headers = await call(api, "GET", SCALE)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    meta = job["metadata"]
    want = {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "x", "namespace": "default", "uid": meta["uid"],
                         "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
            "spec": {"replicas": 3}, "status": {"replicas": 0}}
    assert body == want
    assert list(body) == list(want) and list(body["metadata"]) == list(want["metadata"])  # Go's field order
    job = set_worker_status(store)
    status, body, _ = await call(api, "GET", SCALE)
    assert body["status"] == {"replicas": 2, "selector": SELECTOR}
    assert body["metadata"]["resourceVersion"] == job["metadata"]["resourceVersion"]


async def test_get_as_a_table_has_desired_and_available(env):
    api, store = env
    store.create(pytorchjob())
    set_worker_status(store, active=1)
    status, body, _ = await call(api, "GET", SCALE, headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    assert status == 200 and body["kind"] == "Table"
    assert [c["name"] for c in body["columnDefinitions"]] == ["Name", "Desired", "Available", "Age"]
    assert [c["type"] for c in body["columnDefinitions"]] == ["string", "integer", "integer", "date"]
    assert body["rows"][0]["cells"][:3] == ["x", 3, 1]
    assert body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_a_job_with_no_worker_answers_the_apiservers_500(env):
    api, store = env
    job = pytorchjob("m")
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]
    store.create(job)
    status, body, _ = await call(api, "GET", f"{JOBS}/m/scale")
    assert status == 500
    detail = 'the spec replicas field ".spec.pytorchReplicaSpecs.Worker.replicas" does not exist'
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": f"Internal error occurred: {detail}", "reason": "InternalError",
                    "details": {"causes": [{"message": detail}]}, "code": 500}


async def test_missing_job_and_kind_without_scale_are_404_in_the_apiservers_words(env):
    api, store = env
    for method, body in (("GET", None), ("PUT", {"metadata": {"name": "nope"}, "spec": {"replicas": 2}}),
                         ("PATCH", {"spec": {"replicas": 2}})):
        status, got, _ = await call(api, method, f"{JOBS}/nope/scale", body, MERGE if method == "PATCH" else None)
        assert status == 404
        assert got["message"] == 'pytorchjobs.kubeflow.org "nope" not found'
        assert got["details"] == {"name": "nope", "group": "kubeflow.org", "kind": "pytorchjobs"}
    tf = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "x", "namespace": "default"},
          "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
              {"name": "tensorflow", "image": "busybox"}]}}}}}}
    store.create(tf)
    status, got, _ = await call(api, "GET", "/apis/kubeflow.org/v1/namespaces/default/tfjobs/x/scale")
    assert status == 404 and got["message"] == 'tfjobs.kubeflow.org "x" not found'
    status, got, _ = await call(api, "GET", f"{JOBS}/A_B/scale")  # a name that cannot exist
    assert status == 404 and got["message"] == 'pytorchjobs.kubeflow.org "A_B" not found'


async def test_create_and_delete_are_not_supported(env):
    api, store = env
    store.create(pytorchjob())
    for method, verb in (("POST", "create"), ("DELETE", "delete")):
        status, body, _ = await call(api, method, SCALE, {"spec": {"replicas": 1}} if method == "POST" else None)
        assert status == 405
        assert body["message"] == f'{verb} is not supported on resources of kind "pytorchjobs.kubeflow.org"'
        assert body["reason"] == "MethodNotAllowed"
        assert body["details"] == {"group": "kubeflow.org", "kind": "pytorchjobs"}


# ---------------------------------------------------------------- writes


async def test_put_changes_only_the_worker_replicas(env):
    api, store = env
    before = store.create(pytorchjob())
    status, body, _ = await call(api, "PUT", SCALE, {"apiVersion": "autoscaling/v1", "kind": "Scale",
                                                    "metadata": {"name": "x", "namespace": "default"},
                                                    "spec": {"replicas": 5}, "status": {"replicas": 9}})
    assert status == 200, body
    after = store.get("PyTorchJob", "x", "default")
    assert body["spec"] == {"replicas": 5} and body["status"] == {"replicas": 0}
    assert body["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    expected = copy.deepcopy(before["spec"])
    expected["pytorchReplicaSpecs"]["Worker"]["replicas"] = 5
    assert after["spec"] == expected
    # No spec at all is replicas 0, as the apiserver reads it; the job's update admission refuses 0 workers.
    status, body, _ = await call(api, "PUT", SCALE, {"metadata": {"name": "x"}})
    assert status == 403 and body["message"] == (
        'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request: '
        "spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1")
    assert worker_replicas(store) == 5


async def test_put_with_a_stale_resource_version_is_a_conflict(env):
    api, store = env
    job = store.create(pytorchjob())
    rv = job["metadata"]["resourceVersion"]
    set_worker_status(store)  # the job moves on
    status, body, _ = await call(api, "PUT", SCALE, {"metadata": {"name": "x", "resourceVersion": rv},
                                                    "spec": {"replicas": 4}})
    assert status == 409
    assert body["message"] == ('Operation cannot be fulfilled on pytorchjobs.kubeflow.org "x": the object has been '
                               "modified; please apply your changes to the latest version and try again")
    assert body["reason"] == "Conflict" and body["details"] == {"name": "x", "group": "kubeflow.org",
                                                                "kind": "pytorchjobs"}
    assert worker_replicas(store) == 3
    current = store.get("PyTorchJob", "x", "default")["metadata"]["resourceVersion"]
    status, body, _ = await call(api, "PUT", SCALE, {"metadata": {"name": "x", "resourceVersion": current},
                                                    "spec": {"replicas": 4}})
    assert status == 200 and worker_replicas(store) == 4
    status, body, _ = await call(api, "PATCH", SCALE, {"metadata": {"resourceVersion": rv}, "spec": {"replicas": 2}},
                                 MERGE)
    assert status == 409 and worker_replicas(store) == 4


async def test_merge_and_json_patches_apply_to_the_scale_and_strategic_is_refused(env):
    api, store = env
    store.create(pytorchjob())
    status, body, _ = await call(api, "PATCH", SCALE, {"spec": {"replicas": 2}}, MERGE)
    assert status == 200 and body["spec"] == {"replicas": 2} and worker_replicas(store) == 2
    status, body, _ = await call(api, "PATCH", SCALE, [{"op": "replace", "path": "/spec/replicas", "value": 6}], JSONP)
    assert status == 200 and body["spec"] == {"replicas": 6} and worker_replicas(store) == 6
    status, body, _ = await call(api, "PATCH", SCALE, {"status": {"replicas": 7}}, MERGE)  # status is not written
    assert status == 200 and body["status"] == {"replicas": 0}
    status, body, _ = await call(api, "PATCH", SCALE, {"spec": {"replicas": 3}},
                                 {"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 415
    assert body["message"] == ("the body of the request was in an unknown format - accepted media types include: "
                               "application/json-patch+json, application/merge-patch+json")
    assert worker_replicas(store) == 6


async def test_negative_replicas_get_the_apiservers_message(env):
    api, store = env
    store.create(pytorchjob())
    message = ('PyTorchJob.kubeflow.org "x" is invalid: .spec.pytorchReplicaSpecs.Worker.replicas: Invalid value: '
               "-1: should be a non-negative integer")
    for method, body, headers in (("PUT", {"metadata": {"name": "x"}, "spec": {"replicas": -1}}, None),
                                  ("PATCH", {"spec": {"replicas": -1}}, MERGE)):
        status, got, _ = await call(api, method, SCALE, body, headers)
        assert status == 422
        assert got["message"] == message
        assert got["details"] == {"name": "x", "group": "kubeflow.org", "kind": "PyTorchJob", "causes": [
            {"reason": "FieldValueInvalid", "message": "Invalid value: -1: should be a non-negative integer",
             "field": ".spec.pytorchReplicaSpecs.Worker.replicas"}]}
    assert worker_replicas(store) == 3


async def test_s14_elastic_bounds_refuse_a_scale_outside_them(env):
    api, store = env
    store.create(pytorchjob(workers=3, elastic={"minReplicas": 2, "maxReplicas": 4}))
    for replicas in (5, 1):
        status, body, _ = await call(api, "PATCH", SCALE, {"spec": {"replicas": replicas}}, MERGE)
        assert status == 422
        assert body["message"] == (f'PyTorchJob.kubeflow.org "x" is invalid: spec.replicas: Invalid value: '
                                   f"{replicas}: must be between minReplicas (2) and maxReplicas (4) of "
                                   "spec.elasticPolicy")
        assert body["reason"] == "Invalid"
        assert body["details"] == {"name": "x", "group": "kubeflow.org", "kind": "PyTorchJob", "causes": [
            {"reason": "FieldValueInvalid", "field": "spec.replicas",
             "message": f"Invalid value: {replicas}: must be between minReplicas (2) and maxReplicas (4) of "
                        "spec.elasticPolicy"}]}
    assert worker_replicas(store) == 3
    for replicas in (2, 4):
        status, body, _ = await call(api, "PUT", SCALE, {"metadata": {"name": "x"}, "spec": {"replicas": replicas}})
        assert status == 200 and worker_replicas(store) == replicas


async def test_s14_elastic_bounds_hold_for_any_update_of_the_job(env):
    api, store = env
    store.create(pytorchjob(workers=3, elastic={"minReplicas": 2, "maxReplicas": 4}))
    patch = {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 5}}}}
    status, body, _ = await call(api, "PATCH", f"{JOBS}/x", patch, MERGE)
    assert status == 422
    assert body["message"] == ('PyTorchJob.kubeflow.org "x" is invalid: spec.pytorchReplicaSpecs[Worker].replicas: '
                               "Invalid value: 5: must be between minReplicas (2) and maxReplicas (4) of "
                               "spec.elasticPolicy")
    status, body, _ = await call(api, "PATCH", f"{JOBS}/x", {"spec": {"elasticPolicy": {"maxReplicas": 2}}}, MERGE)
    assert status == 422 and "Invalid value: 3: must be between minReplicas (2) and maxReplicas (2)" in body["message"]
    # Moving the bounds and the replicas together, or an update touching neither, is accepted.
    both = {"spec": {"elasticPolicy": {"maxReplicas": 6}, "pytorchReplicaSpecs": {"Worker": {"replicas": 6}}}}
    status, body, _ = await call(api, "PATCH", f"{JOBS}/x", both, MERGE)
    assert status == 200, body
    status, body, _ = await call(api, "PATCH", f"{JOBS}/x", {"metadata": {"labels": {"a": "b"}}}, MERGE)
    assert status == 200, body


async def test_s14_an_elastic_job_created_outside_its_bounds_keeps_taking_other_updates(env):
    api, store = env
    store.create(pytorchjob(workers=5, elastic={"minReplicas": 2, "maxReplicas": 4}))
    status, body, _ = await call(api, "PATCH", f"{JOBS}/x", {"metadata": {"labels": {"a": "b"}}}, MERGE)
    assert status == 200, body
    status, body, _ = await call(api, "PATCH", SCALE, {"spec": {"replicas": 4}}, MERGE)
    assert status == 200 and worker_replicas(store) == 4


async def test_bodies_that_are_not_a_scale(env):
    api, store = env
    store.create(pytorchjob())
    for body in ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {"replicas": 2}},
                 {"apiVersion": "autoscaling/v2", "kind": "Scale", "metadata": {"name": "x"}},
                 {"metadata": {"name": "x"}, "spec": {"replicas": "2"}},
                 {"metadata": {"name": "x"}, "spec": {"replicas": 2 ** 31}},
                 {"metadata": {"name": "x"}, "spec": 5}, [1]):
        status, got, _ = await call(api, "PUT", SCALE, body)
        assert (status, got["message"], got["reason"]) == (400, NOT_A_SCALE, "BadRequest"), body
    status, got, _ = await call(api, "PUT", SCALE, {"metadata": {"name": "y"}, "spec": {"replicas": 2}})
    assert (status, got["message"]) == (400, "the name of the object (y) does not match the name on the URL (x)")
    status, got, _ = await call(api, "PUT", SCALE, {"metadata": {}, "spec": {"replicas": 2}})
    assert (status, got["message"]) == (400, "the name of the object (x based on URL) was undeterminable: name must "
                                             "be provided")
    status, got, _ = await call(api, "PUT", SCALE, {"metadata": {"name": "x", "namespace": "other"}})
    assert (status, got["message"]) == (400, "the namespace of the provided object does not match the namespace "
                                             "sent on the request")
    status, got, _ = await call(api, "PATCH", SCALE, {"spec": {"replicas": "a"}}, MERGE)
    assert status == 422 and got["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert got["message"].endswith('": json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of '
                                   "type int32")
    assert got["details"]["causes"][0]["field"] == "patch" and "name" not in got["details"]
    status, got, _ = await call(api, "PATCH", SCALE, {"spec": {"replicas": 1.5}}, MERGE)
    assert status == 422 and got["message"].endswith("cannot unmarshal number 1.5 into Go struct field "
                                                     "ScaleSpec.spec.replicas of type int32")
    assert worker_replicas(store) == 3


async def test_unknown_fields_strict_refuses_warn_reports(env):
    api, store = env
    store.create(pytorchjob())
    body = {"metadata": {"name": "x"}, "spec": {"replicas": 2, "foo": 1}}
    status, got, _ = await call(api, "PUT", SCALE, body)  # no fieldValidation: Strict in Phalanx
    assert (status, got["message"]) == (400, NOT_A_SCALE)
    status, got, headers = await call(api, "PUT", SCALE + "?fieldValidation=Warn", body)
    assert status == 200 and headers.getall("Warning") == ['299 - "unknown field \\"spec.foo\\""']
    status, got, _ = await call(api, "PATCH", SCALE, {"spec": {"foo": 1}}, MERGE)
    assert status == 422 and got["message"].endswith('strict decoding error: unknown field "spec.foo"')
    status, got, headers = await call(api, "PATCH", SCALE + "?fieldValidation=Ignore", {"spec": {"foo": 1}}, MERGE)
    assert status == 200 and headers.getall("Warning") == ['299 - "unknown field \\"spec.foo\\""']


async def test_a_concurrent_change_is_retried_without_a_precondition(env):
    api, store = env
    store.create(pytorchjob())
    results = await asyncio.gather(*(call(api, "PATCH", SCALE, {"spec": {"replicas": n}}, MERGE)
                                     for n in (4, 5, 6, 7)))
    assert [r[0] for r in results] == [200] * 4
    assert worker_replicas(store) in (4, 5, 6, 7)


async def test_paddle_and_jax_jobs_scale_too(env):
    api, store = env
    for kind, plural, field, container in (("PaddleJob", "paddlejobs", "paddleReplicaSpecs", "paddle"),
                                           ("JAXJob", "jaxjobs", "jaxReplicaSpecs", "jax")):
        store.create({"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "s", "namespace": "default"},
                      "spec": {field: {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
                          {"name": container, "image": "busybox"}]}}}}}})
        path = f"/apis/kubeflow.org/v1/namespaces/default/{plural}/s/scale"
        status, body, _ = await call(api, "PATCH", path, {"spec": {"replicas": 2}}, MERGE)
        assert status == 200 and body["spec"] == {"replicas": 2}, body
        assert store.get(kind, "s", "default")["spec"][field]["Worker"]["replicas"] == 2


async def test_s14_a_plain_kubernetes_apiserver_has_no_elastic_bounds():
    store = Store(None, FakeClock(), admission=plain_admit)
    api = TestClient(TestServer(make_app(LocalClient(store), TOKEN, clock=FakeClock())))
    await api.start_server()
    try:
        store.create(pytorchjob(workers=3, elastic={"minReplicas": 2, "maxReplicas": 4}))
        status, body, _ = await call(api, "PATCH", SCALE, {"spec": {"replicas": 5}}, MERGE)
        assert status == 200 and worker_replicas(store) == 5, body
    finally:
        await api.close()


def test_scale_of_leaves_zero_replicas_out_of_spec_only():
    job = {"metadata": {"name": "j", "namespace": "n", "uid": "u", "resourceVersion": "7",
                        "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"a": "b"}},
           "spec": {"jaxReplicaSpecs": {"Worker": {"replicas": 0}}}, "status": {"replicaStatuses": {}}}
    assert scale_of(job, SCALE_PATHS["JAXJob"]) == {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "j", "namespace": "n", "uid": "u", "resourceVersion": "7",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {}, "status": {"replicas": 0}}
    assert set(SCALE_PATHS) == {"PyTorchJob", "PaddleJob", "JAXJob"}
    assert SCALE_PATHS["PaddleJob"].crd() == {"labelSelectorPath": ".status.replicaStatuses.Worker.selector",
                                              "specReplicasPath": ".spec.paddleReplicaSpecs.Worker.replicas",
                                              "statusReplicasPath": ".status.replicaStatuses.Worker.active"}


# ---------------------------------------------------------------- discovery, OpenAPI and RBAC


def test_openapi_publishes_the_scale_paths_and_the_scale_schema():
    d = openapi_document("kubeflow.org/v1")
    ref = {"$ref": "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"}
    for kind, plural in (("PyTorchJob", "pytorchjobs"), ("PaddleJob", "paddlejobs"), ("JAXJob", "jaxjobs")):
        path = d["paths"][f"/apis/kubeflow.org/v1/namespaces/{{namespace}}/{plural}/{{name}}/scale"]
        assert [path[v]["operationId"] for v in ("get", "put", "patch")] == [
            f"{verb}KubeflowOrgV1Namespaced{kind}Scale" for verb in ("read", "replace", "patch")]
        assert path["get"]["description"] == f"read scale of the specified {kind}"
        assert path["get"]["responses"]["200"]["content"]["application/json"]["schema"] == ref
        assert path["put"]["requestBody"]["content"]["application/json"]["schema"] == ref
    assert "/apis/kubeflow.org/v1/namespaces/{namespace}/tfjobs/{name}/scale" not in d["paths"]
    schemas = d["components"]["schemas"]
    assert schemas["io.k8s.api.autoscaling.v1.Scale"]["x-kubernetes-group-version-kind"] == [
        {"group": "autoscaling", "kind": "Scale", "version": "v1"}]
    assert schemas["io.k8s.api.autoscaling.v1.ScaleStatus"]["required"] == ["replicas"]


async def test_discovery_lists_the_scale_subresources_as_the_apiserver(env):
    api, _ = env
    status, body, _ = await call(api, "GET", "/apis/kubeflow.org/v1")
    assert status == 200
    by_name = {r["name"]: r for r in body["resources"]}
    for plural in ("pytorchjobs", "paddlejobs", "jaxjobs"):
        assert by_name[f"{plural}/scale"] == {"name": f"{plural}/scale", "singularName": "", "namespaced": True,
                                              "group": "autoscaling", "version": "v1", "kind": "Scale",
                                              "verbs": ["get", "patch", "update"]}
    for plural in ("tfjobs", "xgboostjobs", "mpijobs"):
        assert f"{plural}/scale" not in by_name
    names = [r["name"] for r in body["resources"]]
    assert names.index("pytorchjobs/scale") == names.index("pytorchjobs/status") + 1


def test_requestinfo_reads_scale_as_a_subresource():
    info = parse("PATCH", f"{JOBS}/x/scale")
    assert (info.verb, info.api_group, info.resource, info.subresource, info.namespace, info.name) == (
        "patch", "kubeflow.org", "pytorchjobs", "scale", "default", "x")


async def _service_account_token(api: TestClient, rules: list[dict]) -> str:
    ns = "default"
    objs = [("/api/v1/namespaces/default/serviceaccounts",
             {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "scaler", "namespace": ns}}),
            ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
             {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
              "metadata": {"name": "scaler", "namespace": ns}, "rules": rules}),
            ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
             {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
              "metadata": {"name": "scaler", "namespace": ns},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "scaler"},
              "subjects": [{"kind": "ServiceAccount", "name": "scaler", "namespace": ns}]})]
    for path, obj in objs:
        status, body, _ = await call(api, "POST", path, obj)
        assert status == 201, body
    status, body, _ = await call(api, "POST", "/api/v1/namespaces/default/serviceaccounts/scaler/token",
                                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    assert status == 201, body
    return body["status"]["token"]


async def _answer_becomes(api: TestClient, method: str, path: str, token: str, want: int, body: Any = None,
                          headers: dict | None = None) -> Any:
    """RBAC is read from informers: wait (bounded) for the answer to become ``want``."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        status, got, _ = await call(api, method, path, body, headers, token=token)
        if status == want:
            return got
        assert asyncio.get_running_loop().time() < deadline, (status, got)
        await asyncio.sleep(0.02)


async def test_a_role_granting_the_scale_subresource_allows_it_and_nothing_else(env):
    api, store = env
    store.create(pytorchjob())
    token = await _service_account_token(api, [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs/scale"],
                                                "verbs": ["get", "patch"]}])
    await _answer_becomes(api, "GET", SCALE, token, 200)
    got = await _answer_becomes(api, "PATCH", SCALE, token, 200, {"spec": {"replicas": 2}}, MERGE)
    assert got["spec"] == {"replicas": 2} and worker_replicas(store) == 2
    status, got, _ = await call(api, "PUT", SCALE, {"metadata": {"name": "x"}, "spec": {"replicas": 1}}, token=token)
    assert status == 403
    assert got["message"] == ('pytorchjobs.kubeflow.org "x" is forbidden: User "system:serviceaccount:default:scaler" '
                              'cannot update resource "pytorchjobs/scale" in API group "kubeflow.org" in the '
                              'namespace "default"')
    status, got, _ = await call(api, "GET", f"{JOBS}/x", token=token)
    assert status == 403 and 'cannot get resource "pytorchjobs" in API group' in got["message"]


async def test_a_role_on_the_jobs_alone_does_not_open_their_scale(env):
    api, store = env
    store.create(pytorchjob())
    token = await _service_account_token(api, [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"],
                                                "verbs": ["get", "patch", "update"]}])
    await _answer_becomes(api, "GET", f"{JOBS}/x", token, 200)
    status, got, _ = await call(api, "GET", SCALE, token=token)
    assert status == 403 and 'cannot get resource "pytorchjobs/scale" in API group "kubeflow.org"' in got["message"]
