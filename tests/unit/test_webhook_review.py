"""The operator's admission webhooks (controller.webhook.review): AdmissionReview in,
response out, for every kind; the denial is Phalanx's own admission message."""
from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.api import admission
from phalanx.api.kubeflow import FRAMEWORKS
from phalanx.api.registry import JOB_KINDS
from phalanx.controller.webhook import review
from phalanx.objects.errors import ApiError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_FILES = {"PyTorchJob": "pytorchjob.yaml", "TFJob": "tfjob.yaml", "XGBoostJob": "xgboostjob.yaml",
                 "PaddleJob": "paddlejob.yaml", "JAXJob": "jaxjob.yaml", "MPIJob": "mpijob.yaml"}


def example(kind: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / EXAMPLE_FILES[kind]).read_text()) if d]
    return next(d for d in docs if d.get("kind") == kind)


def review_body(obj: dict[str, Any] | None, operation: str = "CREATE", old: dict[str, Any] | None = None,
                uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002", namespace: str = "default") -> bytes:
    request: dict[str, Any] = {"uid": uid, "operation": operation, "namespace": namespace, "object": obj,
                               "oldObject": old, "userInfo": {"username": "admin"}, "dryRun": False}
    if obj is not None:
        request["kind"] = {"group": "kubeflow.org", "version": "v1", "kind": obj.get("kind")}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


def post(path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    status, payload = review.handle(path, body)
    json.dumps(payload)  # always serialisable
    return status, payload


def admission_message(obj: dict[str, Any], old: dict[str, Any] | None = None) -> str:
    """What Phalanx's own server says for ``obj``."""
    with pytest.raises(ApiError) as e:
        admission.admit(obj, old)
    return e.value.message


def p4() -> dict[str, Any]:
    job = example("PyTorchJob")
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    return job


def test_names_and_paths_are_the_originals():
    assert review.VALIDATING_KINDS == ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")
    assert set(review.MUTATING_KINDS) == set(JOB_KINDS)
    assert review.validate_path("PyTorchJob") == "/validate-kubeflow-org-v1-pytorchjob"
    assert review.mutate_path("MPIJob") == "/mutate-kubeflow-org-v1-mpijob"
    for kind in review.VALIDATING_KINDS:  # the name Phalanx's admission quotes
        assert review.validator_name(kind) == FRAMEWORKS[kind].webhook


@pytest.mark.parametrize("kind", review.VALIDATING_KINDS)
def test_every_example_is_allowed_as_written_and_defaulted(kind):
    job = example(kind)
    for obj in (job, admission.admit(job)):
        status, out = post(review.validate_path(kind), review_body(obj))
        assert status == 200 and out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
        assert out["response"] == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}


def test_p4_is_denied_with_phalanx_admissions_message():
    status, out = post(review.validate_path("PyTorchJob"), review_body(p4(), uid="u-p4"))
    assert status == 200
    resp = out["response"]
    assert resp["uid"] == "u-p4" and resp["allowed"] is False
    assert resp["status"]["code"] == 403 and resp["status"]["reason"] == "Forbidden"
    assert resp["status"]["message"] == "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"
    # The kube-apiserver prints `admission webhook "<name>" denied the request: <message>`: Phalanx's text.
    printed = f'admission webhook "{review.validator_name("PyTorchJob")}" denied the request: ' \
              f'{resp["status"]["message"]}'
    assert printed == admission_message(p4())


def _bad(kind: str) -> dict[str, Any]:
    """A job each kind's webhook refuses (several errors: Phalanx's `[e1, e2]` list)."""
    job = example(kind)
    fw = FRAMEWORKS[kind]
    specs = job["spec"][fw.replica_specs_field]
    for rs in specs.values():
        for c in rs["template"]["spec"]["containers"]:
            c["image"] = ""
    if kind == "TFJob":
        specs["Chief"] = copy.deepcopy(next(iter(specs.values())))
        specs["Master"] = copy.deepcopy(next(iter(specs.values())))
    else:
        specs["Bogus"] = copy.deepcopy(next(iter(specs.values())))
    return job


@pytest.mark.parametrize("kind", review.VALIDATING_KINDS)
def test_each_kind_denied_with_the_same_text(kind):
    job = _bad(kind)
    _, out = post(review.validate_path(kind), review_body(job))
    resp = out["response"]
    assert resp["allowed"] is False and resp["status"]["code"] == 403
    assert f'admission webhook "{review.validator_name(kind)}" denied the request: {resp["status"]["message"]}' \
        == admission_message(job)


def test_schema_rule_phalanx_adds_is_denied_with_its_code():
    job = example("PyTorchJob")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = -1
    _, out = post(review.validate_path("PyTorchJob"), review_body(job))
    status = out["response"]["status"]
    assert out["response"]["allowed"] is False and status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == admission_message(job)
    assert "spec.pytorchReplicaSpecs[Worker].replicas: Invalid value: -1: must be greater than or equal to 0" \
        in status["message"]


def test_warnings_are_returned():
    job = example("PyTorchJob")
    job["spec"]["elasticPolicy"] = {"nProcPerNode": 2, "minReplicas": 1, "maxReplicas": 3}
    _, out = post(review.validate_path("PyTorchJob"), review_body(job))
    assert out["response"]["allowed"] is True
    assert out["response"]["warnings"] == ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode "
                                           "instead"]
    job["spec"]["nprocPerNode"] = "2"
    _, out = post(review.validate_path("PyTorchJob"), review_body(job))
    assert out["response"]["allowed"] is False and out["response"]["warnings"]
    assert out["response"]["status"]["message"] == \
        "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"


def test_update_checks_the_old_object():
    old = example("TFJob")
    old["spec"].setdefault("runPolicy", {})["managedBy"] = "kubeflow.org/training-operator"
    new = copy.deepcopy(old)
    new["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    _, out = post(review.validate_path("TFJob"), review_body(new, "UPDATE", old))
    assert out["response"]["allowed"] is False
    assert out["response"]["status"]["message"] == \
        'spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": field is immutable'
    # The same change on CREATE (no old object) is fine; an unchanged UPDATE too.
    assert post(review.validate_path("TFJob"), review_body(new))[1]["response"]["allowed"] is True
    assert post(review.validate_path("TFJob"), review_body(old, "UPDATE", old))[1]["response"]["allowed"] is True


def test_queue_is_immutable_on_update():
    old = example("PyTorchJob")
    old["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = {"queue": "a"}
    new = copy.deepcopy(old)
    new["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "b"
    _, out = post(review.validate_path("PyTorchJob"), review_body(new, "UPDATE", old))
    assert out["response"]["allowed"] is False
    assert "spec.runPolicy.schedulingPolicy.queue is immutable" in out["response"]["status"]["message"]


def test_delete_and_connect_are_allowed():
    for op in ("DELETE", "CONNECT"):
        _, out = post(review.validate_path("PyTorchJob"), review_body(None, op, old=p4()))
        assert out["response"] == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}


def _patched(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """The JSONPatch applied as the apiserver does (one add of /spec)."""
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    out = copy.deepcopy(obj)
    for op in ops:
        assert op["op"] in ("add", "replace") and op["path"] == "/spec"
        out["spec"] = op["value"]
    return out


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_mutating_returns_the_defaults_as_a_json_patch(kind):
    job = example(kind)
    _, out = post(review.mutate_path(kind), review_body(job))
    resp = out["response"]
    assert resp["allowed"] is True and resp["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert "patch" in resp  # every example lacks some default
    patched = _patched(job, resp)
    assert patched["spec"] == admission.admit(job)["spec"]
    assert patched["metadata"] == job["metadata"]  # only the spec is touched
    # Defaulted objects need no patch (reinvocation, updates).
    _, again = post(review.mutate_path(kind), review_body(patched))
    assert again["response"] == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}


def test_mutating_before_validating_holds_s1():
    """Master without replicas: the original's webhook refuses it (raw object); with the
    defaulter first, as Phalanx's admission (S1), it is allowed."""
    job = example("PyTorchJob")
    job["spec"]["pytorchReplicaSpecs"]["Master"].pop("replicas", None)
    job["spec"]["pytorchReplicaSpecs"]["worker"] = job["spec"]["pytorchReplicaSpecs"].pop("Worker")
    _, out = post(review.mutate_path("PyTorchJob"), review_body(job))
    patched = _patched(job, out["response"])
    assert patched["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert "Worker" in patched["spec"]["pytorchReplicaSpecs"]
    assert post(review.validate_path("PyTorchJob"), review_body(patched))[1]["response"]["allowed"] is True


def test_mutating_leaves_an_unparseable_object_to_the_validator():
    job = example("PyTorchJob")
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "two"
    _, out = post(review.mutate_path("PyTorchJob"), review_body(job))
    assert out["response"] == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}
    _, out = post(review.validate_path("PyTorchJob"), review_body(job))
    assert out["response"]["allowed"] is False and out["response"]["status"]["code"] == 422


def test_mpijob_has_no_validating_path():
    status, out = post("/validate-kubeflow-org-v1-mpijob", review_body(example("MPIJob")))
    assert status == 404 and out["code"] == 404


def test_wrong_kind_for_the_path_is_denied():
    _, out = post(review.validate_path("TFJob"), review_body(example("PyTorchJob")))
    assert out["response"]["allowed"] is False and out["response"]["status"]["code"] == 400
    assert "TFJob" in out["response"]["status"]["message"]


@pytest.mark.parametrize("body", [
    b"", b"not json", b"[]", b"null", b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"operation": "CREATE"}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5, "operation": "CREATE"}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "object": 3, '
    b'"operation": "CREATE"}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "object": {}}}',
    b"[" * 100000 + b"]" * 100000,
    b"\xff\xfe",
])
def test_bad_bodies_are_400(body):
    for path in (review.validate_path("PyTorchJob"), review.mutate_path("PyTorchJob")):
        status, out = post(path, body)
        assert status == 400 and out["code"] == 400 and out["reason"] == "BadRequest" and out["message"]


def test_hostile_objects_never_crash():
    cases: list[Any] = [{}, {"kind": "PyTorchJob"}, {"kind": "PyTorchJob", "apiVersion": "kubeflow.org/v1", "spec": 3},
                        {"kind": "PyTorchJob", "apiVersion": "kubeflow.org/v1", "metadata": {"name": "x" * 300},
                         "spec": {"pytorchReplicaSpecs": {"Master": None}}}]
    nested: Any = {}
    for _ in range(500):
        nested = {"a": nested}
    cases.append({"kind": "PyTorchJob", "apiVersion": "kubeflow.org/v1", "spec": nested})
    for obj in cases:
        for path in (review.validate_path("PyTorchJob"), review.mutate_path("PyTorchJob")):
            status, out = post(path, review_body(obj))
            assert status == 200 and out["response"]["uid"]


def test_too_large_body_is_400():
    status, out = post(review.validate_path("PyTorchJob"), b" " * (review.MAX_BODY_BYTES + 1))
    assert status == 400 and "too large" in out["message"]


def test_unknown_path_is_404():
    status, out = post("/validate-kubeflow-org-v1-pods", review_body(p4()))
    assert status == 404
