"""Field access over JSON-shaped object dicts: metadata, names, owner references, resourceVersion.

The one home of these accessors; every layer reads objects through them. No I/O.
"""
from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def meta(obj: Obj) -> dict[str, Any]:
    """``obj``'s metadata, created empty when absent (for writers)."""
    m: dict[str, Any] = obj.setdefault("metadata", {})
    return m


def metadata_of(obj: object) -> dict[str, Any]:
    """``obj``'s metadata; ``{}`` when ``obj`` or its metadata is not an object. The readers
    below never raise on a malformed object (a hand-edited one reaches every controller)."""
    m = obj.get("metadata") if isinstance(obj, dict) else None
    return m if isinstance(m, dict) else {}


def _str_field(obj: object, key: str) -> str | None:
    v = metadata_of(obj).get(key)
    return v if isinstance(v, str) else None


def name_of(obj: object) -> str:
    return _str_field(obj, "name") or ""


def namespace_of(obj: object) -> str | None:
    return _str_field(obj, "namespace")


def uid_of(obj: object) -> str:
    return _str_field(obj, "uid") or ""


def labels_of(obj: object) -> dict[str, Any]:
    v = metadata_of(obj).get("labels")
    return v if isinstance(v, dict) else {}


def annotations_of(obj: object) -> dict[str, Any]:
    v = metadata_of(obj).get("annotations")
    return v if isinstance(v, dict) else {}


def owner_ref(owner: Obj, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": name_of(owner),
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def controller_ref(obj: object) -> dict[str, Any] | None:
    """The first ownerReference marked controller; malformed metadata or references are skipped."""
    m = obj.get("metadata") if isinstance(obj, dict) else None
    refs = m.get("ownerReferences") if isinstance(m, dict) else None
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def controller_uid(obj: object) -> str | None:
    """The uid of the controller reference (``controller_ref``), when it is a non-empty string."""
    ref = controller_ref(obj)
    uid = ref.get("uid") if ref is not None else None
    return uid if isinstance(uid, str) and uid else None


def serves(scheduler_names: frozenset[str], scheduler_name: object) -> bool:
    """Whether a pod's spec.schedulerName is one of ``scheduler_names`` (a malformed value is not)."""
    return isinstance(scheduler_name, str) and scheduler_name in scheduler_names


def is_deleting(obj: object) -> bool:
    return bool(metadata_of(obj).get("deletionTimestamp"))


def match_labels(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def resource_version(obj: Obj | None) -> int:
    """metadata.resourceVersion as an integer (0 when absent or not a number)."""
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0
