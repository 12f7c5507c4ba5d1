"""The ``scale`` subresource of the job kinds whose CRDs declare one: an ``autoscaling/v1`` Scale over
the Worker replicas (``kubectl scale``, the HorizontalPodAutoscaler).

As kube-apiserver serves a CRD's scale: ``spec.replicas`` is ``.spec.<kind>ReplicaSpecs.Worker.replicas``,
``status.replicas`` ``.status.replicaStatuses.Worker.active`` (0 when absent), ``status.selector``
``.status.replicaStatuses.Worker.selector``; GET, PUT (its resourceVersion, when set, is the job's
precondition) and PATCH (merge or JSON patch on the Scale; a strategic one is read as a merge patch, as
for custom resources) change nothing but the Worker replicas, through the job's own update. Phalanx rule
(docs/SEMANTICS.md, elastic jobs): an elastic PyTorchJob is scaled only within
``[minReplicas, maxReplicas]`` of its ``elasticPolicy``.
"""
from __future__ import annotations

import copy
from typing import Any

from aiohttp import web

from phalanx.api.registry import SCALE_REPLICA_SPECS
from phalanx.client.interface import Client
from phalanx.objects.errors import BadRequest, Conflict, FieldError, Invalid
from phalanx.server import bodies
from phalanx.server.routes import Route, resource_name
from phalanx.server.status import json_response

CONFLICT_RETRIES = 5


def serves(kind: str) -> bool:
    return kind in SCALE_REPLICA_SPECS


def _dig(obj: Any, *keys: str) -> Any:
    for k in keys:
        obj = obj.get(k) if isinstance(obj, dict) else None
    return obj


def scale_of(job: dict[str, Any]) -> dict[str, Any]:
    """The job's Scale."""
    field = SCALE_REPLICA_SPECS[job["kind"]]
    meta = job.get("metadata") or {}
    replicas = _dig(job, "spec", field, "Worker", "replicas")
    active = _dig(job, "status", "replicaStatuses", "Worker", "active")
    selector = _dig(job, "status", "replicaStatuses", "Worker", "selector")
    status: dict[str, Any] = {"replicas": active if isinstance(active, int) else 0}
    if isinstance(selector, str) and selector:
        status["selector"] = selector
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": replicas if isinstance(replicas, int) else 0}, "status": status}


def _check(job: dict[str, Any], scale: Any, name: str) -> int:
    """The replicas ``scale`` asks for; 400/422 in the apiserver's words when it cannot be one."""
    if not isinstance(scale, dict) or not isinstance(scale.get("spec", {}), dict):
        raise BadRequest("the body of the request must be an autoscaling/v1 Scale object")
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise BadRequest(f'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal '
                         f"{type(replicas).__name__} into Go struct field ScaleSpec.spec.replicas of type int32")
    if replicas < 0:
        raise Invalid([FieldError("spec.replicas", "Invalid", "must be greater than or equal to 0", replicas)],
                      prefix=f'Scale.autoscaling "{name}" is invalid: ')
    ep = _dig(job, "spec", "elasticPolicy")
    if job["kind"] == "PyTorchJob" and isinstance(ep, dict):
        lo, hi = ep.get("minReplicas"), ep.get("maxReplicas")
        lo = lo if isinstance(lo, int) else hi
        hi = hi if isinstance(hi, int) else lo
        if isinstance(lo, int) and isinstance(hi, int) and not lo <= replicas <= hi:
            raise Invalid([FieldError("spec.replicas", "Invalid", f"must be between minReplicas ({lo}) and "
                                      f"maxReplicas ({hi}) of spec.elasticPolicy", replicas)],
                          prefix=f'{job["kind"]}.kubeflow.org "{name}" is invalid: ')
    return replicas


async def _write(client: Client, job: dict[str, Any], scale: dict[str, Any], name: str,
                 pinned: str | None) -> dict[str, Any]:
    replicas = _check(job, scale, name)
    new = copy.deepcopy(job)
    worker = _dig(new, "spec", SCALE_REPLICA_SPECS[job["kind"]], "Worker")
    if not isinstance(worker, dict):
        raise Invalid([FieldError(f"spec.{SCALE_REPLICA_SPECS[job['kind']]}.Worker", "Required",
                                  "the scale subresource sets the Worker replicas")],
                      prefix=f'{job["kind"]}.kubeflow.org "{name}" is invalid: ')
    worker["replicas"] = replicas
    if pinned:
        new["metadata"]["resourceVersion"] = pinned
    return scale_of(await client.update(new))


async def handle(request: web.Request, client: Client, route: Route) -> web.StreamResponse:
    """GET, PUT or PATCH ``.../{plural}/{name}/scale``."""
    kind, name, ns = route.rt.kind, route.name or "", route.namespace
    if request.method in ("GET", "HEAD"):
        return json_response(scale_of(await client.get(kind, name, ns)))
    if request.method == "PUT":
        body = bodies.decode(await bodies.read_body(request), "application/json")
        job = await client.get(kind, name, ns)
        pinned = _dig(body, "metadata", "resourceVersion")
        return json_response(await _write(client, job, body, name, pinned if isinstance(pinned, str) else None))
    media = bodies.media_type(request)
    if media not in (bodies.JSON_PATCH, bodies.MERGE_PATCH, bodies.STRATEGIC_PATCH):
        raise bodies.UnsupportedMedia("the body of the request was in an unknown format - accepted media types "
                                      f"include: {bodies.JSON_PATCH}, {bodies.MERGE_PATCH}, "
                                      f"{bodies.STRATEGIC_PATCH}")
    patch = bodies.decode(await bodies.read_body(request), "application/json")
    as_media = bodies.MERGE_PATCH if media == bodies.STRATEGIC_PATCH else media
    for attempt in range(CONFLICT_RETRIES):
        job = await client.get(kind, name, ns)
        current = scale_of(job)
        patched = bodies.apply_patch(current, patch, as_media)
        pinned = _dig(patched, "metadata", "resourceVersion")
        pinned = pinned if isinstance(pinned, str) and pinned != current["metadata"].get("resourceVersion") else None
        try:
            return json_response(await _write(client, job, patched, name,
                                              pinned or current["metadata"].get("resourceVersion")))
        except Conflict:
            if pinned or attempt == CONFLICT_RETRIES - 1:
                raise
    raise Conflict(resource_name(route.rt), name)
