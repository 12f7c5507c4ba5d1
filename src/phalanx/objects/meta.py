"""Field access over JSON-shaped object dicts: metadata, names, owner references, resourceVersion.

The one home of these accessors; every layer reads objects through them. No I/O.
"""
from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]


def meta(obj: Obj) -> dict[str, Any]:
    return obj.setdefault("metadata", {})


def name_of(obj: Obj) -> str:
    return obj.get("metadata", {}).get("name", "")


def namespace_of(obj: Obj) -> str | None:
    return obj.get("metadata", {}).get("namespace")


def labels_of(obj: Obj) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def annotations_of(obj: Obj) -> dict[str, str]:
    return obj.get("metadata", {}).get("annotations") or {}


def owner_ref(owner: Obj, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": name_of(owner),
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: Obj) -> str | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def serves(scheduler_names: frozenset[str], scheduler_name: object) -> bool:
    """Whether a pod's spec.schedulerName is one of ``scheduler_names`` (a malformed value is not)."""
    return isinstance(scheduler_name, str) and scheduler_name in scheduler_names


def is_deleting(obj: Obj) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def deepcopy(obj: Obj) -> Obj:
    return copy.deepcopy(obj)


def match_labels(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def resource_version(obj: Obj | None) -> int:
    """metadata.resourceVersion as an integer (0 when absent or not a number)."""
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0
