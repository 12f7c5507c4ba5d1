"""Small helpers over JSON-shaped object dicts. No I/O."""
from __future__ import annotations

import copy
from typing import Any

from .constants import CONDITION_DISRUPTION_TARGET, REASON_TERMINATION_BY_KUBELET
from .registry import by_kind

Obj = dict[str, Any]


def meta(obj: Obj) -> dict[str, Any]:
    return obj.setdefault("metadata", {})


def name_of(obj: Obj) -> str:
    return obj.get("metadata", {}).get("name", "")


def namespace_of(obj: Obj) -> str | None:
    return obj.get("metadata", {}).get("namespace")


def key_of(obj: Obj) -> tuple[str, str | None, str]:
    """(kind, namespace or None, name): the identity of an object in the store."""
    kind = obj["kind"]
    ns = namespace_of(obj) if by_kind(kind).namespaced else None
    return (kind, ns, name_of(obj))


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


def stopped_by_shutdown(pod: dict) -> bool:
    """The pod was stopped because its node shut down (kubelet's graceful node
    shutdown: a DisruptionTarget condition, reason TerminationByKubelet), not by
    a failure of its own."""
    status = pod.get("status")
    for c in (status.get("conditions") if isinstance(status, dict) else None) or []:
        if isinstance(c, dict) and c.get("type") == CONDITION_DISRUPTION_TARGET and c.get("status") == "True" \
                and c.get("reason") == REASON_TERMINATION_BY_KUBELET:
            return True
    return False
