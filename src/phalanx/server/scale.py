"""The ``scale`` subresource of the job kinds whose CRDs declare one (``api.scale.SCALE``):
GET, PUT and PATCH of an ``autoscaling/v1`` Scale, in kube-apiserver's shapes and words.

As kube-apiserver serves a custom resource's scale: a GET is the job seen through the CRD's
paths (``api.scale.scale_of``; a Table with Desired and Available when asked); a write changes
only the Worker replicas and stores the job through its normal update, so admission (defaults,
validation, Phalanx's elastic bounds, registered webhooks) sees it like any update. A Scale's
``metadata.resourceVersion`` (PUT, or set by the patch) is a precondition (409 when stale);
without one a concurrent change is retried. Merge and JSON patches apply to the Scale; a
strategic merge patch is refused (415) as the apiserver refuses it for a custom resource (and
an apply patch, as everywhere in Phalanx: no server-side apply). A PUT body that
is not a Scale gets the apiserver's 400, a patched Scale of the wrong types its 422 on ``patch``;
negative replicas get the apiserver's 422 on the CRD's replicas path. The elastic bounds are
named ``spec.replicas``, the field of the Scale. Unknown fields: Strict refuses them (400 as
the apiserver's PUT, 422 for a PATCH); Warn and Ignore drop them, each in a Warning header.
A job with no replicas at ``specReplicasPath`` answers a GET with the apiserver's 500.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from aiohttp import web

from phalanx.api.admission import StrictDecodingError
from phalanx.api.columns import age
from phalanx.api.kubeflow import FRAMEWORKS
from phalanx.api.kubeflow_validation import worker_replicas_field
from phalanx.api.meta import ObjectMeta
from phalanx.api.scale import SCALE, SCALE_API_VERSION, SCALE_KIND, ScalePaths, scale_of, spec_replicas, with_replicas
from phalanx.client.interface import Client
from phalanx.objects.errors import ApiError, BadRequest, Conflict, FieldError, Invalid
from phalanx.server import bodies, fieldvalidation, routes, tables
from phalanx.server.routes import Route
from phalanx.server.status import json_response

Obj = dict[str, Any]
MAX_ATTEMPTS = 5  # writes retried on a concurrent change when the client set no resourceVersion
_INT32 = (-(2 ** 31), 2 ** 31 - 1)
# kube-apiserver's answer to any PUT body it cannot decode as an autoscaling/v1 Scale.
NOT_A_SCALE = 'no kind is registered for the type v1.Scale in scheme "pkg/runtime/scheme.go:111"'
_PATCH_TYPES = (bodies.JSON_PATCH, bodies.MERGE_PATCH)
_META_FIELDS = frozenset(f.alias or n for n, f in ObjectMeta.model_fields.items())
# The Scale's fields, as Go's encoding/json names them in its errors: (struct, Go type, JSON type).
_SCALE_FIELDS: dict[tuple[str, ...], tuple[str, str, str]] = {
    ("kind",): ("Scale", "string", "string"),
    ("apiVersion",): ("Scale", "string", "string"),
    ("metadata",): ("Scale", "v1.ObjectMeta", "object"),
    ("metadata", "name"): ("ObjectMeta", "string", "string"),
    ("metadata", "namespace"): ("ObjectMeta", "string", "string"),
    ("metadata", "uid"): ("ObjectMeta", "types.UID", "string"),
    ("metadata", "resourceVersion"): ("ObjectMeta", "string", "string"),
    ("spec",): ("Scale", "v1.ScaleSpec", "object"),
    ("spec", "replicas"): ("ScaleSpec", "int32", "int32"),
    ("status",): ("Scale", "v1.ScaleStatus", "object"),
    ("status", "replicas"): ("ScaleStatus", "int32", "int32"),
    ("status", "selector"): ("ScaleStatus", "string", "string"),
}
_CHILDREN = {("spec",): ("replicas",), ("status",): ("replicas", "selector")}


class ReplicasPathMissing(ApiError):
    """500, as kube-apiserver answers a GET of the scale of an object with nothing at specReplicasPath."""

    def __init__(self, path: str) -> None:
        self.detail = f'the spec replicas field "{path}" does not exist'
        super().__init__(f"Internal error occurred: {self.detail}")

    def to_status(self) -> dict[str, Any]:
        status = super().to_status()
        status["details"] = {"causes": [{"message": self.detail}]}
        status["code"] = status.pop("code")
        return status


class PatchedScaleInvalid(Invalid):
    """422 on the field ``patch`` when the patched Scale does not decode (the apiserver's words)."""

    anonymous = True

    def __init__(self, patched: Any, detail: str) -> None:
        text = json.dumps(patched, separators=(",", ":"), ensure_ascii=False)
        super().__init__([FieldError("patch", "Invalid", detail, fieldvalidation.GoQuoted(text))], prefix=' "" is invalid: ')


# --------------------------------------------------------------------------
# Decoding a Scale
# --------------------------------------------------------------------------


def _go_type_error(value: Any, where: tuple[str, ...]) -> str | None:
    """Go's encoding/json error for ``value`` at ``where`` in a Scale, or None when it decodes."""
    struct, go_type, want = _SCALE_FIELDS[where]
    if value is None:
        return None
    if want == "object" and isinstance(value, dict):
        return None
    if want == "string" and isinstance(value, str):
        return None
    ok_int = isinstance(value, int) and not isinstance(value, bool)
    if want == "int32" and ok_int and _INT32[0] <= value <= _INT32[1]:
        return None
    if isinstance(value, bool):
        what = "bool"
    elif isinstance(value, (int, float)):
        what = f"number {json.dumps(value)}" if want == "int32" else "number"
    elif isinstance(value, str):
        what = "string"
    else:
        what = "object" if isinstance(value, dict) else "array"
    return f"json: cannot unmarshal {what} into Go struct field {struct}.{'.'.join(where)} of type {go_type}"


def _decode(obj: Any) -> tuple[str | None, list[str]]:
    """Whether ``obj`` decodes as an autoscaling/v1 Scale: Go's error (or None), and its unknown fields."""
    if not isinstance(obj, dict):
        what = "array" if isinstance(obj, list) else "string" if isinstance(obj, str) else "number"
        return f"json: cannot unmarshal {what} into Go value of type v1.Scale", []
    unknown: list[str] = []
    for key, value in obj.items():
        if (key,) not in _SCALE_FIELDS:
            unknown.append(key)
            continue
        err = _go_type_error(value, (key,))
        if err is not None:
            return err, []
        if not isinstance(value, dict):
            continue
        known = _CHILDREN.get((key,), tuple(_META_FIELDS) if key == "metadata" else ())
        for child, v in value.items():
            if child not in known:
                unknown.append(f"{key}.{child}")
            elif (key, child) in _SCALE_FIELDS:
                err = _go_type_error(v, (key, child))
                if err is not None:
                    return err, []
    return None, unknown


def _field(obj: Obj, *keys: str) -> Any:
    node: Any = obj
    for k in keys:
        node = node.get(k) if isinstance(node, dict) else None
    return node


def _other_kind(obj: Obj) -> bool:
    return obj.get("kind") not in (None, "", SCALE_KIND) or obj.get("apiVersion") not in (None, "", SCALE_API_VERSION)


def _check_name(obj: Obj, route: Route) -> None:
    name = _field(obj, "metadata", "name")
    if name in (None, ""):
        raise BadRequest(f"the name of the object ({route.name} based on URL) was undeterminable: name must be "
                         "provided")
    if name != route.name:
        raise BadRequest(f"the name of the object ({name}) does not match the name on the URL ({route.name})")
    namespace = _field(obj, "metadata", "namespace")
    if namespace not in (None, "") and namespace != route.namespace:
        raise BadRequest("the namespace of the provided object does not match the namespace sent on the request")


def _unknown_warnings(unknown: list[str]) -> list[str]:
    return [fieldvalidation.warning(f) for f in unknown]


# --------------------------------------------------------------------------
# Writing the job
# --------------------------------------------------------------------------


def _negative(rt_kind: str, group: str, name: str, paths: ScalePaths, replicas: int) -> Invalid:
    """kube-apiserver's check of a custom resource's scale spec, on the CRD's own path."""
    return Invalid([FieldError(paths.spec_replicas, "Invalid", "should be a non-negative integer", replicas)],
                   prefix=f'{rt_kind}.{group} "{name}" is invalid: ')


def _in_scale_terms(err: Invalid, route: Route) -> Invalid:
    """An admission error on the job's Worker replicas, named as the Scale's ``spec.replicas``."""
    job_field = worker_replicas_field(FRAMEWORKS[route.rt.kind])
    fields = [e.path for e in err.errors]
    if job_field not in fields or getattr(err, "anonymous", False) or type(err) is not Invalid:
        return err
    renamed = [FieldError("spec.replicas", e.kind, e.detail, e.value, e.supported) if e.path == job_field else e
               for e in err.errors]
    return Invalid(renamed, prefix=f'{route.rt.kind}.{route.rt.group} "{route.name}" is invalid: ')


def _uid_conflict(route: Route, want: str, have: Any) -> Conflict:
    err = Conflict(routes.resource_name(route.rt), route.name or "")
    err.message = (f'Operation cannot be fulfilled on {routes.resource_name(route.rt)} "{route.name}": StorageError: '
                   f"invalid object, Code: 4, Key: /registry/{route.rt.group}/{route.rt.plural}/{route.namespace}/"
                   f"{route.name}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: "
                   f"{want}, UID in object meta: {have}")
    return err


async def _write(client: Client, route: Route, paths: ScalePaths, job: Obj, replicas: int,
                 resource_version: str | None, uid: str | None) -> Obj:
    """Store ``job`` with ``replicas`` (preconditions checked first, as the apiserver's storage does)."""
    meta = job.get("metadata") or {}
    if uid not in (None, "") and uid != meta.get("uid"):
        raise _uid_conflict(route, str(uid), meta.get("uid"))
    if resource_version not in (None, "") and resource_version != meta.get("resourceVersion"):
        raise Conflict(routes.resource_name(route.rt), route.name or "")
    if replicas < 0:
        raise _negative(route.rt.kind, route.rt.group, route.name or "", paths, replicas)
    try:
        return await client.update(with_replicas(job, paths, replicas))
    except Invalid as e:
        raise _in_scale_terms(e, route) from None


async def _get_job(client: Client, route: Route) -> Obj:
    return await client.get(route.rt.kind, route.name or "", route.namespace)


# --------------------------------------------------------------------------
# Handlers
# --------------------------------------------------------------------------


_COLUMNS = [
    {"name": "Name", "type": "string", "format": "name", "description": tables.NAME_DESCRIPTION, "priority": 0},
    {"name": "Desired", "type": "integer", "format": "", "description": "Number of desired replicas", "priority": 0},
    {"name": "Available", "type": "integer", "format": "", "description": "Number of actual replicas",
     "priority": 0},
    {"name": "Age", "type": "date", "format": "", "description": tables.AGE_DESCRIPTION, "priority": 0},
]


def scale_table(scale: Obj, now: datetime, include_object: str, version: str) -> Obj:
    """The apiserver's Table of a Scale (``kubectl get <job> --subresource=scale``)."""
    meta = scale["metadata"]
    row: Obj = {"cells": [meta.get("name", ""), scale["spec"].get("replicas", 0), scale["status"]["replicas"],
                          age(meta.get("creationTimestamp"), now)]}
    if include_object == "Object":
        row["object"] = scale
    elif include_object == "None":
        row["object"] = None
    else:
        row["object"] = tables.partial_object_metadata(scale)
    table_meta = {"resourceVersion": meta["resourceVersion"]} if meta.get("resourceVersion") else {}
    return {"kind": "Table", "apiVersion": f"{tables.TABLE_GROUP}/{version}", "metadata": table_meta,
            "columnDefinitions": list(_COLUMNS), "rows": [row]}


async def _get(request: web.Request, route: Route, client: Client, paths: ScalePaths, now: datetime
               ) -> web.StreamResponse:
    table = routes.table_version(request)
    include = routes.include_object(request)
    job = await _get_job(client, route)
    if spec_replicas(job, paths) is None:
        raise ReplicasPathMissing(paths.spec_replicas)
    scale = scale_of(job, paths)
    return json_response(scale_table(scale, now, include, table) if table else scale)


async def _put(request: web.Request, route: Route, client: Client, paths: ScalePaths) -> web.StreamResponse:
    mode = routes.field_validation(request)
    media = bodies.media_type(request)
    if media not in bodies.JSON_MEDIA:
        raise bodies.UnsupportedMedia("the body of the request was in an unknown format - accepted media types "
                                      "include: application/json, application/yaml")
    body = bodies.decode(await bodies.read_body(request), media)
    if routes.dry_run(request):
        raise BadRequest("dryRun is supported on create only")
    err, unknown = _decode(body)
    if err is not None or _other_kind(body) or (unknown and mode == "Strict"):
        raise BadRequest(NOT_A_SCALE)
    _check_name(body, route)
    replicas = _field(body, "spec", "replicas") or 0
    pinned = _field(body, "metadata", "resourceVersion") or None
    for attempt in range(MAX_ATTEMPTS):
        job = await _get_job(client, route)
        try:
            stored = await _write(client, route, paths, job, replicas, pinned, _field(body, "metadata", "uid"))
        except Conflict:
            if pinned or attempt == MAX_ATTEMPTS - 1:
                raise
            continue
        return _answer(scale_of(stored, paths), unknown)
    raise AssertionError("unreachable")


async def _patch(request: web.Request, route: Route, client: Client, paths: ScalePaths) -> web.StreamResponse:
    media = bodies.media_type(request)
    if media not in _PATCH_TYPES:
        raise bodies.UnsupportedMedia("the body of the request was in an unknown format - accepted media types "
                                      f"include: {', '.join(_PATCH_TYPES)}")
    mode = routes.field_validation(request)
    patch = bodies.decode(await bodies.read_body(request), "application/json")
    if routes.dry_run(request):
        raise BadRequest("dryRun is supported on create only")
    if media == bodies.JSON_PATCH and not isinstance(patch, list):
        raise BadRequest("a JSON patch must be a JSON array of operations")
    if media != bodies.JSON_PATCH and not isinstance(patch, dict):
        raise BadRequest("a merge patch must be a JSON object")
    pinned = bodies.pins_resource_version(patch, media)
    for attempt in range(MAX_ATTEMPTS):
        job = await _get_job(client, route)
        patched = bodies.apply_patch(scale_of(job, paths), patch, media)
        err, unknown = _decode(patched)
        if err is not None:
            raise PatchedScaleInvalid(patched, err)
        if _other_kind(patched):
            raise BadRequest(NOT_A_SCALE)
        if unknown and mode == "Strict":
            strict = StrictDecodingError([FieldError(f, "Unknown", f'unknown field "{f}"') for f in unknown],
                                         SCALE_KIND, "v1")
            raise fieldvalidation.PatchStrictDecodingError(patched, strict, sort_keys=False)
        _check_name(patched, route)
        try:
            stored = await _write(client, route, paths, job, _field(patched, "spec", "replicas") or 0,
                                  _field(patched, "metadata", "resourceVersion"), _field(patched, "metadata", "uid"))
        except Conflict:
            if pinned or attempt == MAX_ATTEMPTS - 1:
                raise
            continue
        return _answer(scale_of(stored, paths), unknown)
    raise AssertionError("unreachable")


def _answer(scale: Obj, unknown: list[str]) -> web.Response:
    resp = json_response(scale)
    for value in _unknown_warnings(unknown):
        resp.headers.add("Warning", value)
    return resp


def _not_allowed(route: Route, method: str) -> web.Response:
    verb = {"POST": "create", "DELETE": "delete"}.get(method, method.lower())
    details: Obj = {"group": route.rt.group, "kind": route.rt.plural} if route.rt.group else {"kind": route.rt.plural}
    return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": f'{verb} is not supported on resources of kind "{routes.resource_name(route.rt)}"',
                          "reason": "MethodNotAllowed", "details": details, "code": 405}, status=405)


def serves(route: Route) -> bool:
    """Whether ``route`` is the scale of a kind that has one."""
    return route.subresource == "scale" and route.name is not None and route.rt.kind in SCALE


async def serve(request: web.Request, route: Route, client: Client, now: datetime) -> web.StreamResponse:
    """Answer ``request`` on the scale subresource ``route`` (``serves(route)`` is true)."""
    paths = SCALE[route.rt.kind]
    method = "GET" if request.method == "HEAD" else request.method
    if method == "GET":
        return await _get(request, route, client, paths, now)
    if method == "PUT":
        return await _put(request, route, client, paths)
    if method == "PATCH":
        return await _patch(request, route, client, paths)
    return _not_allowed(route, method)
