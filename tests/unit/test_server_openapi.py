"""OpenAPI v3 documents generated from the pydantic models: the shapes kubectl
relies on (index with hashes as docs/REFERENCE.md golden 09; per group-version documents as
docs/REFERENCE.md golden 10/11: GVK extensions, PATCH operations taking fieldValidation,
components named like the apiserver's), and schemas whose fields are exactly
the models' fields, with descriptions."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import typing
from datetime import datetime, timezone
from typing import Any

import pytest
from pydantic import BaseModel

from phalanx.api import autoscaling, kubeflow, meta, volcano
from phalanx.api.registry import RESOURCES, ResourceType
from phalanx.server import openapi
from phalanx.server.openapi import (
    KIND_MODELS,
    document_hash,
    group_version_keys,
    openapi_document,
    openapi_document_json,
    openapi_index,
    openapi_v3_reply,
)

GVS = ["api/v1", "apis/kubeflow.org/v1", "apis/scheduling.volcano.sh/v1beta1", "apis/apps/v1",
       "apis/rbac.authorization.k8s.io/v1", "apis/coordination.k8s.io/v1", "apis/scheduling.k8s.io/v1",
       "apis/autoscaling/v2", "apis/admissionregistration.k8s.io/v1", "apis/apiextensions.k8s.io/v1"]
NOW = datetime(2026, 11, 29, 7, 12, 21, tzinfo=timezone.utc)


def doc(gv: str) -> dict:
    d = openapi_document(gv)
    assert d is not None
    return d


def schemas(gv: str) -> dict:
    return doc(gv)["components"]["schemas"]


def deref(node: dict, d: dict) -> dict:
    """Follow ``$ref`` / single-``allOf`` wrappers as kubectl does."""
    while True:
        if "$ref" in node:
            node = d["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
        elif "allOf" in node and len(node["allOf"]) == 1:
            node = node["allOf"][0]
        else:
            return node


def schema_nodes(node: dict):
    """Every schema node below ``node`` (not the property-name maps)."""
    yield node
    for value in (node.get("properties") or {}).values():
        yield from schema_nodes(value)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from schema_nodes(node[key])
    for key in ("allOf", "anyOf"):
        for sub in node.get(key) or []:
            yield from schema_nodes(sub)


def walk(node: Any):
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


# --------------------------------------------------------------------------
# Index and hashes (docs/REFERENCE.md golden 09)
# --------------------------------------------------------------------------


def test_index_lists_every_served_group_version_with_a_hash_of_its_bytes():
    index = openapi_index()
    assert list(index) == ["paths"]
    assert list(index["paths"]) == GVS == group_version_keys()
    for gv, entry in index["paths"].items():
        url = entry["serverRelativeURL"]
        m = re.fullmatch(r"/openapi/v3/(.+)\?hash=([0-9A-F]{128})", url)
        assert m and m.group(1) == gv, url
        assert m.group(2) == hashlib.sha512(openapi_document_json(gv)).hexdigest().upper()
        assert m.group(2) == document_hash(gv)
    assert openapi_index("/x/")["paths"]["api/v1"]["serverRelativeURL"].startswith("/x/api/v1?hash=")


def test_documents_and_hashes_are_deterministic_across_processes():
    """Hashes are cache keys for clients: they must not depend on the process
    (hash seeds, dict or set order), only on the schemas."""
    code = ("from phalanx.server.openapi import openapi_index; import json; "
            "print(json.dumps(openapi_index(), sort_keys=True))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                         check=True).stdout
    assert json.loads(out) == openapi_index()
    assert openapi_document_json("kubeflow.org/v1") is openapi_document_json("apis/kubeflow.org/v1")  # cached


def test_group_version_spellings_and_unknown():
    for spelling in ("kubeflow.org/v1", "apis/kubeflow.org/v1", "/apis/kubeflow.org/v1",
                     "/openapi/v3/apis/kubeflow.org/v1"):
        assert openapi_document(spelling) == doc("apis/kubeflow.org/v1")
    assert openapi_document("v1") == doc("api/v1")
    for unknown in ("batch/v1", "kubeflow.org/v2", "", "apis", "../etc/passwd"):
        assert openapi_document(unknown) is None
        assert document_hash(unknown) is None


def test_documents_are_fresh_copies():
    d = doc("api/v1")
    d["paths"].clear()
    assert doc("api/v1")["paths"]


# --------------------------------------------------------------------------
# Document shape (docs/REFERENCE.md golden 10, 11)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("gv", GVS)
def test_document_is_openapi_3_with_resolvable_refs_and_no_pydantic_leftovers(gv):
    raw = openapi_document_json(gv)
    d = json.loads(raw)
    assert d["openapi"] == "3.0.0" and set(d) == {"openapi", "info", "paths", "components"}
    names = set(d["components"]["schemas"])
    assert list(d["components"]["schemas"]) == sorted(names)
    for node in walk(d):
        if isinstance(node, dict):
            if "$ref" in node:
                assert node["$ref"].startswith("#/components/schemas/")
                assert node["$ref"].rsplit("/", 1)[1] in names, node["$ref"]
            assert "$defs" not in node
            for key in node:
                assert not key.startswith("x-phalanx"), key
    for name, schema in d["components"]["schemas"].items():
        for node in schema_nodes(schema):
            assert "title" not in node and "const" not in node and "default" not in node, name
            assert node.get("type", "object") in ("object", "array", "string", "integer", "number", "boolean"), name
            assert isinstance(node.get("additionalProperties", {}), dict), name  # never a bare true/false


def test_component_names_follow_the_apiserver():
    assert {"org.kubeflow.v1.PyTorchJob", "org.kubeflow.v1.PyTorchJobList", "org.kubeflow.v1.TFJob",
            "org.kubeflow.v1.TFJobList", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Status", "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Patch", "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
            } <= set(schemas("apis/kubeflow.org/v1"))
    assert {"sh.volcano.scheduling.v1beta1.PodGroup", "sh.volcano.scheduling.v1beta1.PodGroupList",
            "sh.volcano.scheduling.v1beta1.Queue", "sh.volcano.scheduling.v1beta1.QueueList",
            } <= set(schemas("apis/scheduling.volcano.sh/v1beta1"))
    assert {"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PodList", "io.k8s.api.core.v1.PodSpec",
            "io.k8s.api.core.v1.Container", "io.k8s.api.core.v1.Service", "io.k8s.api.core.v1.Node",
            "io.k8s.api.core.v1.Event", "io.k8s.api.core.v1.Namespace",
            "io.k8s.apimachinery.pkg.api.resource.Quantity", "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
            } <= set(schemas("api/v1"))
    # Custom resources are inlined like a CRD's schema: only apimachinery types are components (and
    # autoscaling/v1 Scale with the kinds that have a scale subresource, golden 10).
    for gv in GVS[1:]:
        assert all(n.startswith(("io.k8s.apimachinery.pkg.apis.meta.v1.", "org.kubeflow.v1.",
                                 "sh.volcano.scheduling.v1beta1.", "apps.v1.", "io.k8s.authorization.rbac.v1.",
                                 "io.k8s.apiextensions.v1.", "io.k8s.coordination.v1.",
                                 "io.k8s.admissionregistration.v1.", "io.k8s.api.scheduling.v1.",
                                 "io.k8s.api.autoscaling.v2.", "io.k8s.apimachinery.pkg.api.resource."))
                   or (gv == "apis/kubeflow.org/v1" and n.startswith("io.k8s.api.autoscaling.v1.Scale"))
                   for n in schemas(gv))
    assert {"io.k8s.api.autoscaling.v1.Scale", "io.k8s.api.autoscaling.v1.ScaleSpec",
            "io.k8s.api.autoscaling.v1.ScaleStatus"} <= set(schemas("apis/kubeflow.org/v1"))


def test_every_kind_and_list_carries_its_gvk():
    for rt in RESOURCES:
        gv = f"api/{rt.version}" if not rt.group else f"apis/{rt.group}/{rt.version}"
        prefix = "io.k8s.api.core.v1" if not rt.group else {
            "kubeflow.org": "org.kubeflow.v1", "scheduling.volcano.sh": "sh.volcano.scheduling.v1beta1",
            "apps": "apps.v1", "rbac.authorization.k8s.io": "io.k8s.authorization.rbac.v1",
            "apiextensions.k8s.io": "io.k8s.apiextensions.v1", "coordination.k8s.io": "io.k8s.coordination.v1",
            "admissionregistration.k8s.io": "io.k8s.admissionregistration.v1",
            "scheduling.k8s.io": "io.k8s.api.scheduling.v1", "autoscaling": "io.k8s.api.autoscaling.v2"}[rt.group]
        s = schemas(gv)
        assert s[f"{prefix}.{rt.kind}"]["x-kubernetes-group-version-kind"] == [
            {"group": rt.group, "kind": rt.kind, "version": rt.version}]
        assert s[f"{prefix}.{rt.kind}List"]["x-kubernetes-group-version-kind"] == [
            {"group": rt.group, "kind": rt.kind + "List", "version": rt.version}]


def supports_field_validation(d: dict, group: str, version: str, kind: str) -> bool:
    """kubectl's supportsQueryParamV3: the first PATCH operation of the GVK must
    take the ``fieldValidation`` query parameter (else apply/edit fall back to
    client-side validation against /openapi/v2, which fails)."""
    for item in d["paths"].values():
        op = item.get("patch")
        if op and op.get("x-kubernetes-group-version-kind") == {"group": group, "version": version, "kind": kind}:
            return any(p["name"] == "fieldValidation" and p["in"] == "query" for p in op.get("parameters", []))
    return False


def test_every_kind_has_a_patch_operation_taking_field_validation():
    for rt in RESOURCES:
        gv = f"api/{rt.version}" if not rt.group else f"apis/{rt.group}/{rt.version}"
        assert supports_field_validation(doc(gv), rt.group, rt.version, rt.kind), rt.kind


def test_paths_and_operations_like_golden_11():
    d = doc("apis/scheduling.volcano.sh/v1beta1")
    base = "/apis/scheduling.volcano.sh/v1beta1"
    assert sorted(d["paths"]) == [  # exactly docs/REFERENCE.md golden 11's paths (PodGroup has no status subresource)
        f"{base}/namespaces/{{namespace}}/podgroups", f"{base}/namespaces/{{namespace}}/podgroups/{{name}}",
        f"{base}/podgroups", f"{base}/queues", f"{base}/queues/{{name}}", f"{base}/queues/{{name}}/status"]
    ops = {(p, m): (o["operationId"], o["x-kubernetes-action"]) for p, item in d["paths"].items()
           for m, o in item.items() if m != "parameters"}
    assert ops == {
        (f"{base}/namespaces/{{namespace}}/podgroups", "get"): ("listSchedulingVolcanoShV1beta1NamespacedPodGroup", "list"),
        (f"{base}/namespaces/{{namespace}}/podgroups", "post"): ("createSchedulingVolcanoShV1beta1NamespacedPodGroup", "post"),
        (f"{base}/namespaces/{{namespace}}/podgroups", "delete"): (
            "deleteSchedulingVolcanoShV1beta1CollectionNamespacedPodGroup", "deletecollection"),
        (f"{base}/namespaces/{{namespace}}/podgroups/{{name}}", "get"): ("readSchedulingVolcanoShV1beta1NamespacedPodGroup", "get"),
        (f"{base}/namespaces/{{namespace}}/podgroups/{{name}}", "put"): ("replaceSchedulingVolcanoShV1beta1NamespacedPodGroup", "put"),
        (f"{base}/namespaces/{{namespace}}/podgroups/{{name}}", "delete"): ("deleteSchedulingVolcanoShV1beta1NamespacedPodGroup", "delete"),
        (f"{base}/namespaces/{{namespace}}/podgroups/{{name}}", "patch"): ("patchSchedulingVolcanoShV1beta1NamespacedPodGroup", "patch"),
        (f"{base}/podgroups", "get"): ("listSchedulingVolcanoShV1beta1PodGroupForAllNamespaces", "list"),
        (f"{base}/queues", "get"): ("listSchedulingVolcanoShV1beta1Queue", "list"),
        (f"{base}/queues", "post"): ("createSchedulingVolcanoShV1beta1Queue", "post"),
        (f"{base}/queues", "delete"): ("deleteSchedulingVolcanoShV1beta1CollectionQueue", "deletecollection"),
        (f"{base}/queues/{{name}}", "get"): ("readSchedulingVolcanoShV1beta1Queue", "get"),
        (f"{base}/queues/{{name}}", "put"): ("replaceSchedulingVolcanoShV1beta1Queue", "put"),
        (f"{base}/queues/{{name}}", "delete"): ("deleteSchedulingVolcanoShV1beta1Queue", "delete"),
        (f"{base}/queues/{{name}}", "patch"): ("patchSchedulingVolcanoShV1beta1Queue", "patch"),
        (f"{base}/queues/{{name}}/status", "get"): ("readSchedulingVolcanoShV1beta1QueueStatus", "get"),
        (f"{base}/queues/{{name}}/status", "put"): ("replaceSchedulingVolcanoShV1beta1QueueStatus", "put"),
        (f"{base}/queues/{{name}}/status", "patch"): ("patchSchedulingVolcanoShV1beta1QueueStatus", "patch"),
    }
    item = d["paths"][f"{base}/namespaces/{{namespace}}/podgroups/{{name}}"]
    assert [p["name"] for p in item["parameters"]] == ["name", "namespace", "pretty"]  # as docs/REFERENCE.md golden 10/11
    assert [p["name"] for p in item["patch"]["parameters"]] == ["dryRun", "fieldManager", "fieldValidation", "force"]
    assert item["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/sh.volcano.scheduling.v1beta1.PodGroup"}
    assert item["get"]["tags"] == ["schedulingVolcanoSh_v1beta1"]
    assert doc("apis/kubeflow.org/v1")["paths"]["/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}"][
        "get"]["operationId"] == "readKubeflowOrgV1NamespacedPyTorchJob"  # docs/REFERENCE.md golden 10


def test_patch_bodies_offer_no_strategic_merge_so_kubectl_uses_its_compiled_in_types():
    """With ``application/strategic-merge-patch+json`` listed, kubectl would build
    strategic merge patches from these schemas, which lack patch-merge keys; without
    it, it uses its built-in Go types for Pods (golden trace behaviour)."""
    for gv in GVS:
        for item in doc(gv)["paths"].values():
            if "patch" in item:
                assert set(item["patch"]["requestBody"]["content"]) == {
                    "application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"}


def test_pod_log_path_is_text():
    item = doc("api/v1")["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/log"]
    assert item["get"]["operationId"] == "readCoreV1NamespacedPodLog"
    assert "text/plain" in item["get"]["responses"]["200"]["content"]
    assert {p["name"] for p in item["get"]["parameters"]} >= {"container", "follow", "previous", "tailLines",
                                                               "sinceSeconds", "timestamps", "limitBytes"}


# --------------------------------------------------------------------------
# Schemas: the models' fields, with descriptions
# --------------------------------------------------------------------------


def test_pytorchjob_schema_has_run_policy_fields_with_types_and_descriptions():
    d = doc("apis/kubeflow.org/v1")
    pj = schemas("apis/kubeflow.org/v1")["org.kubeflow.v1.PyTorchJob"]
    assert pj["description"] and pj["type"] == "object"
    assert pj["properties"]["metadata"] == {
        "description": pj["properties"]["metadata"]["description"],
        "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]}
    spec = pj["properties"]["spec"]
    assert spec["required"] == ["pytorchReplicaSpecs"]
    assert set(spec["properties"]) == {"runPolicy", "elasticPolicy", "pytorchReplicaSpecs", "nprocPerNode"}
    rp = spec["properties"]["runPolicy"]
    assert rp["type"] == "object" and "runtime policies" in rp["description"]
    fields = rp["properties"]
    assert list(fields) == sorted(fields) == ["activeDeadlineSeconds", "backoffLimit", "cleanPodPolicy", "managedBy",
                                              "schedulingPolicy", "suspend", "ttlSecondsAfterFinished"]
    assert all(f.get("description") for f in fields.values())
    assert fields["activeDeadlineSeconds"]["type"] == "integer" and fields["activeDeadlineSeconds"]["format"] == "int64"
    assert fields["backoffLimit"] == {"description": fields["backoffLimit"]["description"], "type": "integer",
                                      "format": "int32"}
    assert fields["cleanPodPolicy"]["enum"] == ["All", "Running", "None"]
    assert fields["suspend"]["type"] == "boolean"
    assert set(fields["schedulingPolicy"]["properties"]) == {
        "minAvailable", "queue", "minResources", "priorityClass", "scheduleTimeoutSeconds"}
    quantity = fields["schedulingPolicy"]["properties"]["minResources"]["additionalProperties"]
    assert quantity == {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    # A replica's pod template is inlined, its metadata an ObjectMeta, like the CRD.
    replica = spec["properties"]["pytorchReplicaSpecs"]["additionalProperties"]
    container = replica["properties"]["template"]["properties"]["spec"]["properties"]["containers"]["items"]
    assert container["required"] == ["name"] and "command" in container["properties"]
    assert replica["properties"]["template"]["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]
    assert "generateName" in deref(replica["properties"]["template"]["properties"]["metadata"], d)["properties"]
    # Status: the typed reading model, unknown fields preserved (the controller owns it).
    status = pj["properties"]["status"]
    assert status["x-kubernetes-preserve-unknown-fields"] is True
    assert {"conditions", "replicaStatuses", "startTime", "completionTime"} <= set(status["properties"])


def test_a_kind_registered_without_a_model_is_published_with_any_fields(monkeypatch):
    widget = ResourceType("Widget", "example.com/v1alpha1", "widgets", "widget", namespaced=False)
    monkeypatch.setattr(openapi, "RESOURCES", RESOURCES + (widget,))
    assert "apis/example.com/v1alpha1" in group_version_keys()
    d = openapi._build_document("apis/example.com/v1alpha1")
    w = d["components"]["schemas"]["com.example.v1alpha1.Widget"]
    assert w["x-kubernetes-group-version-kind"] == [{"group": "example.com", "kind": "Widget", "version": "v1alpha1"}]
    assert w["x-kubernetes-preserve-unknown-fields"] is True and set(w["properties"]) == {
        "apiVersion", "kind", "metadata"}
    assert supports_field_validation(d, "example.com", "v1alpha1", "Widget")
    assert "/apis/example.com/v1alpha1/widgets/{name}/status" in d["paths"]
    json.dumps(d)


def test_template_metadata_is_published_as_object_meta():
    assert openapi._model_defs(meta.TemplateMeta)[0]["properties"] == openapi._model_defs(
        meta.ObjectMeta)[0]["properties"]


def _model_of(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """('', M), ('items', M) or ('additionalProperties', M) when a field holds model M."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "", annotation
    if origin is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return "items", args[0]
    if origin is dict and len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        return "additionalProperties", args[1]
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)) and len(args) == 1:
        return _model_of(args[0])
    return None


def check_fields(model: type[BaseModel], node: dict, d: dict, path: str, seen: set) -> int:
    """The schema of ``model`` has exactly its wire fields, recursively; unknown
    fields are preserved only where the model allows extra fields."""
    node = deref(node, d)
    if (model, id(node)) in seen:
        return 0
    seen.add((model, id(node)))
    wire = {f.alias or name for name, f in model.model_fields.items()}
    assert set(node["properties"]) == wire, path
    allows_extra = model.model_config.get("extra") == "allow"
    assert bool(node.get("x-kubernetes-preserve-unknown-fields")) == allows_extra, path
    count = 1
    for name, f in model.model_fields.items():
        held = _model_of(f.annotation)
        if held is None:
            continue
        where, sub = held
        child = deref(node["properties"][f.alias or name], d)
        if where:
            child = child[where]
        count += check_fields(sub, child, d, f"{path}.{f.alias or name}", seen)
    return count


@pytest.mark.parametrize("kind", sorted(KIND_MODELS))
def test_schema_fields_are_exactly_the_model_fields(kind):
    rt = next(r for r in RESOURCES if r.kind == kind)
    gv = f"api/{rt.version}" if not rt.group else f"apis/{rt.group}/{rt.version}"
    d = doc(gv)
    prefix = "io.k8s.api.core.v1" if not rt.group else {
        "kubeflow.org": "org.kubeflow.v1", "scheduling.volcano.sh": "sh.volcano.scheduling.v1beta1",
        "scheduling.k8s.io": "io.k8s.api.scheduling.v1", "autoscaling": "io.k8s.api.autoscaling.v2"}[rt.group]
    top = dict(d["components"]["schemas"][f"{prefix}.{kind}"])
    model = KIND_MODELS[kind]
    assert set(top["properties"]) == {f.alias or n for n, f in model.model_fields.items()}
    checked = 0
    for name, f in model.model_fields.items():
        held = _model_of(f.annotation)
        if held:
            checked += check_fields(held[1], top["properties"][f.alias or name], d, name, set())
    # metadata and spec (or the Event's references) at least; a PriorityClass has no spec
    assert checked >= (1 if kind == "PriorityClass" else 2), kind


def unknown_fields(obj: Any, node: dict, d: dict, path: str = "") -> list[str]:
    """A strict walk like client-side OpenAPI validation: every key must be declared
    unless the schema preserves unknown fields."""
    node = deref(node, d)
    if isinstance(obj, dict):
        if node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
            return []
        out = []
        props = node.get("properties")
        for key, value in obj.items():
            if props is not None and key in props:
                out += unknown_fields(value, props[key], d, f"{path}.{key}")
            elif props is None and isinstance(node.get("additionalProperties"), dict):
                out += unknown_fields(value, node["additionalProperties"], d, f"{path}.{key}")
            elif not node.get("x-kubernetes-preserve-unknown-fields"):
                out.append(f"{path}.{key}".lstrip("."))
        return out
    if isinstance(obj, list) and "items" in node:
        return [e for i, v in enumerate(obj) for e in unknown_fields(v, node["items"], d, f"{path}[{i}]")]
    return []


SEED = {
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
    "metadata": {"name": "pytest", "namespace": "default", "annotations": {"a": "b"}},
    "spec": {"runPolicy": {"backoffLimit": 3, "schedulingPolicy": {"minAvailable": 4, "queue": "default"}},
             "pytorchReplicaSpecs": {
                 "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": {
                     "metadata": {"labels": {"x": "y"}},
                     "spec": {"containers": [{
                         "name": "pytorch", "image": "busybox:1.37.0-glibc", "imagePullPolicy": "IfNotPresent",
                         "command": ["sh", "-c", "sleep 30s"], "env": [{"name": "A", "value": "1"}],
                         "ports": [{"name": "p", "containerPort": 23456}],
                         "resources": {"limits": {"cpu": "1", "memory": "100Mi"}}}]}}},
                 "Worker": {"replicas": 3, "template": {"spec": {"containers": [{"name": "pytorch",
                                                                                 "image": "busybox"}]}}}}},
}


def test_valid_manifest_passes_a_strict_walk_and_typos_are_named():
    d = doc("apis/kubeflow.org/v1")
    top = d["components"]["schemas"]["org.kubeflow.v1.PyTorchJob"]
    assert unknown_fields(SEED, top, d) == []
    typo = json.loads(json.dumps(SEED))
    typo["spec"]["runPolicy"]["backoffLimits"] = 3
    typo["spec"]["pytorchReplicaSpecs"]["Master"]["replica"] = 1
    typo["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["comand"] = ["x"]
    typo["metadata"]["lables"] = {}
    assert sorted(unknown_fields(typo, top, d)) == [
        "metadata.lables", "spec.pytorchReplicaSpecs.Master.replica",
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].comand", "spec.runPolicy.backoffLimits"]
    q = doc("apis/scheduling.volcano.sh/v1beta1")
    queue = q["components"]["schemas"]["sh.volcano.scheduling.v1beta1.Queue"]
    assert unknown_fields({"spec": {"weight": 5, "capability": {"cpu": 2}}}, queue, q) == []
    assert unknown_fields({"spec": {"wieght": 5}}, queue, q) == ["spec.wieght"]


def test_core_types_are_components_with_descriptions():
    s = schemas("api/v1")
    pod = s["io.k8s.api.core.v1.Pod"]
    assert pod["properties"]["spec"] == {"description": pod["properties"]["spec"]["description"],
                                         "allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}]}
    spec = s["io.k8s.api.core.v1.PodSpec"]
    assert spec["properties"]["containers"]["items"] == {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}
    assert spec["properties"]["hostIPC"]["type"] == "boolean"  # explicit aliases kept
    limits = s["io.k8s.api.core.v1.ResourceRequirements"]["properties"]["limits"]
    assert limits["additionalProperties"] == {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}
    target = s["io.k8s.api.core.v1.ServicePort"]["properties"]["targetPort"]
    assert target["allOf"] == [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"}]
    container = s["io.k8s.api.core.v1.Container"]
    assert all(p.get("description") for p in container["properties"].values())
    assert pod["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] is True


def test_descriptions_cover_every_published_model_and_field():
    """Every model class's own description and each of its fields has one (what
    `kubectl explain` prints); a model added without docs fails here."""
    from phalanx.server.openapi_docs import DESCRIPTIONS
    models: set[type[BaseModel]] = set()

    def collect(m: type[BaseModel]) -> None:
        if m in models:
            return
        models.add(m)
        for f in m.model_fields.values():
            held = _model_of(f.annotation)
            if held:
                collect(held[1])
    for m in list(KIND_MODELS.values()) + [kubeflow.JobStatus, volcano.PodGroupStatus, volcano.QueueStatus,
                                           autoscaling.HorizontalPodAutoscalerStatus]:
        collect(m)
    missing = []
    for m in models:
        docs = DESCRIPTIONS.get(m.__name__, {})
        if not docs.get("") and m not in KIND_MODELS.values():
            missing.append(m.__name__)
        for name, f in m.model_fields.items():
            alias = f.alias or name
            if alias in ("apiVersion", "kind", "metadata") and m in KIND_MODELS.values():
                continue  # the standard texts
            if not docs.get(alias):
                missing.append(f"{m.__name__}.{alias}")
    assert missing == []


# --------------------------------------------------------------------------
# HTTP replies
# --------------------------------------------------------------------------


def test_index_reply_is_text_plain_like_golden_09():
    r = openapi_v3_reply("", None, NOW)
    assert r is not None and r.status == 200
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert json.loads(r.body) == openapi_index()
    assert openapi_v3_reply("/", None, NOW).body == r.body


def test_document_reply_with_current_hash_is_immutable_like_golden_10():
    h = document_hash("kubeflow.org/v1")
    r = openapi_v3_reply("/apis/kubeflow.org/v1", h, NOW)
    assert r.status == 200 and r.body == openapi_document_json("kubeflow.org/v1")
    assert r.headers == {"Content-Type": "application/json", "ETag": f'"{h}"', "Vary": "Accept",
                         "Cache-Control": "public, immutable", "Expires": "Mon, 29 Nov 2027 07:12:21 UTC"}
    plain = openapi_v3_reply("apis/kubeflow.org/v1", None, NOW)
    assert plain.status == 200 and plain.headers["Cache-Control"] == "no-cache, private"
    assert "Expires" not in plain.headers


def test_stale_hash_redirects_and_etag_revalidates():
    h = document_hash("api/v1")
    stale = openapi_v3_reply("api/v1", "0" * 128, NOW)
    assert stale.status == 301 and stale.headers["Location"] == f"/openapi/v3/api/v1?hash={h}" and stale.body == b""
    again = openapi_v3_reply("api/v1", h, NOW, if_none_match=f'W/"x", "{h}"')
    assert again.status == 304 and again.body == b"" and again.headers["ETag"] == f'"{h}"'
    assert openapi_v3_reply("api/v1", h, NOW, if_none_match='"other"').status == 200


def test_unknown_openapi_paths_are_none():
    for sub in ("apis", "apis/batch/v1", "api/v2", "apis/kubeflow.org/v1/extra", "..", "apis/kubeflow.org"):
        assert openapi_v3_reply(sub, None, NOW) is None
