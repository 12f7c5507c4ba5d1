"""CustomResourceDefinitions generated from Phalanx's own models.

The schema is the one the API server publishes (``server.openapi``), made
structural as ``apiextensions.k8s.io/v1`` requires: no ``$ref``, ObjectMeta as
a bare ``type: object`` (the apiserver validates metadata itself), no
``x-kubernetes-group-version-kind``. Names, scope, printer columns and
subresources are the original CRDs' (training-operator v1.9: PyTorchJob,
PaddleJob and JAXJob with status and a Worker scale subresource, TFJob,
XGBoostJob and MPIJob with status; Volcano: PodGroup with none, Queue with
status); short names and categories are the registry's.
"""
from __future__ import annotations

import copy
from typing import Any

from phalanx.api.registry import JOB_KINDS, ResourceType, by_kind
from phalanx.api.scale import SCALE
from phalanx.deploy.crd_rules import add_job_rules
from phalanx.server.openapi import inlined_kind_schema
from phalanx.server.tables import CRD_COLUMNS

Schema = dict[str, Any]

KUBEFLOW_CRD_KINDS = JOB_KINDS
VOLCANO_CRD_KINDS = ("PodGroup", "Queue")
CRD_KINDS = (*KUBEFLOW_CRD_KINDS, *VOLCANO_CRD_KINDS)
_META_REF = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


# Subresources as in the original CRDs; the scale paths are ``api.scale``'s (what the API serves).
_SUBRESOURCES: dict[str, dict[str, Any]] = {
    "PyTorchJob": {"status": {}},
    "TFJob": {"status": {}},
    "XGBoostJob": {"status": {}},
    "PaddleJob": {"status": {}},
    "JAXJob": {"status": {}},
    "MPIJob": {"status": {}},
    "PodGroup": {},  # Volcano's PodGroup has no status subresource: the scheduler writes the whole object
    "Queue": {"status": {}},
}
for _kind, _paths in SCALE.items():
    _SUBRESOURCES[_kind] = {"scale": _paths.crd(), **_SUBRESOURCES[_kind]}


def _ref_name(node: Any) -> str | None:
    """The component a ``{$ref}`` or ``{description, allOf: [{$ref}]}`` node names."""
    if not isinstance(node, dict):
        return None
    ref = node.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1]
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        return _ref_name(all_of[0])
    return None


def structural(node: Any, components: dict[str, Schema], depth: int = 0) -> Any:
    """An inlined OpenAPI schema as a structural CRD schema: apimachinery
    components inlined (ObjectMeta as a bare object), GVK markers dropped."""
    if depth > 64:
        raise ValueError("schema nesting too deep (a recursive type cannot be inlined)")
    if isinstance(node, list):
        return [structural(v, components, depth + 1) for v in node]
    if not isinstance(node, dict):
        return node
    ref = _ref_name(node)
    if ref is not None:
        description = node.get("description")
        if ref == _META_REF:
            target: Schema = {"type": "object"}
        elif ref in components:
            target = structural(components[ref], components, depth + 1)
        else:
            raise ValueError(f"cannot inline the schema {ref!r}: not published with the kind")
        if isinstance(description, str):
            target = {"description": description, **{k: v for k, v in target.items() if k != "description"}}
        return target
    return {k: structural(v, components, depth + 1) for k, v in node.items()
            if k != "x-kubernetes-group-version-kind"}


def openapi_v3_schema(kind: str) -> Schema:
    schema, components = inlined_kind_schema(by_kind(kind))
    out = structural(schema, components)
    props = out.setdefault("properties", {})
    if "metadata" in props:
        props["metadata"] = {"type": "object"}
    if kind in JOB_KINDS:
        add_job_rules(out, kind)  # the webhook rules CEL can express (deploy.crd_rules)
    return out


def _printer_columns(kind: str) -> list[dict[str, Any]]:
    cols = []
    for c in CRD_COLUMNS.get(kind, ()):
        col: dict[str, Any] = {"jsonPath": c.json_path, "name": c.name, "type": c.type}
        if c.priority:
            col["priority"] = c.priority
        if c.format:
            col["format"] = c.format
        cols.append(col)
    return cols


def crd(kind: str) -> dict[str, Any]:
    """The CustomResourceDefinition of one of ``CRD_KINDS``."""
    if kind not in CRD_KINDS:
        raise ValueError(f"no CRD for kind {kind!r}: one of {', '.join(CRD_KINDS)}")
    rt: ResourceType = by_kind(kind)
    names: dict[str, Any] = {"kind": rt.kind, "listKind": f"{rt.kind}List", "plural": rt.plural,
                             "singular": rt.singular}
    if rt.short_names:
        names["shortNames"] = list(rt.short_names)
    if rt.categories:
        names["categories"] = list(rt.categories)
    version: dict[str, Any] = {"name": rt.version, "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": openapi_v3_schema(kind)},
                               "subresources": copy.deepcopy(_SUBRESOURCES[kind])}
    columns = _printer_columns(kind)
    if columns:
        version["additionalPrinterColumns"] = columns
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{rt.plural}.{rt.group}",
                     "labels": {"app.kubernetes.io/part-of": "phalanx"}},
        "spec": {"group": rt.group, "names": names, "scope": "Namespaced" if rt.namespaced else "Cluster",
                 "versions": [version]},
    }
