"""Defensive readers over job, pod and service dicts.

The reconciler must never raise on an object that passed admission but looks
odd (or on a pod somebody edited by hand), so every read goes through these.
"""
from __future__ import annotations

from typing import Any

from phalanx.objects.meta import Obj, name_of, namespace_of, uid_of


def as_dict(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


def as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def as_int(v: Any, default: int | None = None) -> int | None:
    """An int from an int or a decimal string; bools and garbage give default."""
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    return default


def as_str(v: Any, default: str = "") -> str:
    return v if isinstance(v, str) else default


def namespace(obj: object) -> str:
    """The object's namespace, "default" when it has none."""
    return namespace_of(obj) or "default"


def spec(obj: Obj) -> Obj:
    return as_dict(as_dict(obj).get("spec"))


def status(obj: Obj) -> Obj:
    return as_dict(as_dict(obj).get("status"))


def run_policy(job: Obj) -> Obj:
    return as_dict(spec(job).get("runPolicy"))


def scheduling_policy(job: Obj) -> Obj:
    return as_dict(run_policy(job).get("schedulingPolicy"))


def pod_phase(pod: Obj) -> str:
    return as_str(status(pod).get("phase")) or "Pending"


def container_statuses(pod: Obj, init: bool = False) -> list[Obj]:
    key = "initContainerStatuses" if init else "containerStatuses"
    return [c for c in as_list(status(pod).get(key)) if isinstance(c, dict)]


def owner_reference(owner: Obj) -> Obj:
    """The controller ownerReference the original puts on everything it creates."""
    return {
        "apiVersion": as_str(as_dict(owner).get("apiVersion")) or "kubeflow.org/v1",
        "kind": as_str(as_dict(owner).get("kind")),
        "name": name_of(owner),
        "uid": uid_of(owner),
        "controller": True,
        "blockOwnerDeletion": True,
    }
