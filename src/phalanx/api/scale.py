"""The scale subresource of the job kinds whose CRDs declare one: its three paths and the
``autoscaling/v1`` Scale a job is seen as, as kube-apiserver derives it for a custom resource.

The kinds and paths are the original CRDs' (training-operator v1.9): PyTorchJob, PaddleJob and
JAXJob, each scaled by its Worker replicas (``specReplicasPath``), reporting the Worker pods
running (``statusReplicasPath``, 0 when absent) and the selector of the Worker pods
(``labelSelectorPath``). ``deploy.crds`` writes these paths into the CRDs, ``server.scale``
serves the subresource and ``server.discovery`` lists it.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from phalanx.api.kubeflow import FRAMEWORKS

Obj = dict[str, Any]
SCALE_API_VERSION = "autoscaling/v1"
SCALE_KIND = "Scale"
_MISSING = object()


@dataclass(frozen=True)
class ScalePaths:
    """A CRD's ``subresources.scale``: JSON paths (``.spec.a.b``) into the custom resource."""

    spec_replicas: str
    status_replicas: str
    label_selector: str

    def crd(self) -> Obj:
        """The ``subresources.scale`` stanza of the CRD."""
        return {"labelSelectorPath": self.label_selector, "specReplicasPath": self.spec_replicas,
                "statusReplicasPath": self.status_replicas}


def _worker_scale(kind: str) -> ScalePaths:
    field = FRAMEWORKS[kind].replica_specs_field
    return ScalePaths(spec_replicas=f".spec.{field}.Worker.replicas",
                      status_replicas=".status.replicaStatuses.Worker.active",
                      label_selector=".status.replicaStatuses.Worker.selector")


SCALE: dict[str, ScalePaths] = {kind: _worker_scale(kind) for kind in ("PyTorchJob", "PaddleJob", "JAXJob")}


def _steps(path: str) -> list[str]:
    return path.lstrip(".").split(".")


def _read(obj: Any, path: str) -> Any:
    node = obj
    for step in _steps(path):
        if not isinstance(node, dict) or step not in node:
            return _MISSING
        node = node[step]
    return node


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def spec_replicas(obj: Obj, paths: ScalePaths) -> int | None:
    """The replicas at ``specReplicasPath``; None when the object has none there."""
    value = _read(obj, paths.spec_replicas)
    return value if _is_int(value) else None


def scale_of(obj: Obj, paths: ScalePaths) -> Obj:
    """The Scale of ``obj``, keys in the Go struct's order; replicas 0 is left out of
    ``spec`` (omitempty), never out of ``status``, and an absent selector is left out."""
    raw = obj.get("metadata")
    meta: Obj = raw if isinstance(raw, dict) else {}
    out_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if meta.get(k) not in (None, "")}
    replicas = spec_replicas(obj, paths) or 0
    active = _read(obj, paths.status_replicas)
    status: Obj = {"replicas": active if _is_int(active) else 0}
    selector = _read(obj, paths.label_selector)
    if isinstance(selector, str) and selector:
        status["selector"] = selector
    return {"kind": SCALE_KIND, "apiVersion": SCALE_API_VERSION, "metadata": out_meta,
            "spec": {"replicas": replicas} if replicas else {}, "status": status}


def with_replicas(obj: Obj, paths: ScalePaths, replicas: int) -> Obj:
    """A copy of ``obj`` with ``replicas`` at ``specReplicasPath`` (missing objects made on the way)."""
    out = copy.deepcopy(obj)
    node = out
    steps = _steps(paths.spec_replicas)
    for step in steps[:-1]:
        child = node.get(step)
        if not isinstance(child, dict):
            child = node[step] = {}
        node = child
    node[steps[-1]] = replicas
    return out
