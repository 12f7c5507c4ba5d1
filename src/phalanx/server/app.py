"""The HTTP API: Kubernetes paths over any ``Client``, enough for kubectl 1.32.

``make_app(client, token, log_provider)`` serves ``/api/v1/...`` and
``/apis/<group>/<version>/...`` (namespaced and cluster-scoped collections and
items, ``/status``, ``pods/{name}/binding``, ``pods/{name}/log``,
``pods/{name}/exec`` over websockets (``remotecommand``)), watch
streams, ``/version``, health, legacy discovery, ``/openapi/v3`` and
``/openapi/v2`` (``openapi_v2``). Built-in kinds may be sent as Kubernetes
protobuf (``protobuf``), as kubectl's typed clients do; answers are JSON. Every
request needs the bearer token; every error is a Kubernetes ``Status`` with the
apiserver's code and wording, and bad input never yields a 5xx. ``serve``
listens on loopback or a unix socket only, over HTTPS when given a TLS context
(kubectl sends its token only over TLS).

What kubectl relies on (ecosystem.md §1): a ``meta.k8s.io`` Table for list,
get and watch when Accept asks for one (ages rendered here); watch with
``watch=true|1|True``, resume from a resourceVersion, 410 as an ERROR event,
BOOKMARKs when allowed, ``timeoutSeconds``, label and field selectors;
``resourceVersion``/``resourceVersionMatch`` on lists (always served from the
current state), ``limit``/``continue`` pages (``paging``); ``fieldValidation``
(``fieldvalidation``); merge, JSON and strategic merge patches; PUT with a
resourceVersion precondition; DELETE with
``DeleteOptions`` from the body or the query (``deleteoptions``). Aggregated
discovery is not served: kubectl asks for it first and, answered with plain
JSON, falls back to the legacy documents.

Phalanx decision: a PyTorchJob or TFJob deleted with the Background policy (what
``kubectl delete`` always sends) or none is deleted in the Foreground, so
``kubectl delete -f job.yaml`` returns only once the job's pods, Services and
PodGroup are gone (``deleteoptions.effective_policy``).

Phalanx extensions (not in Kubernetes):

- ``GET /api/v1/namespaces/{ns}/pods/{name}/log`` of a pod that no longer
  exists answers from the logs kept on disk (the newest pod of that name)
  while its job exists, instead of 404 (SEMANTICS S5).
- ``GET /apis/kubeflow.org/v1/namespaces/{ns}/{pytorchjobs|tfjobs}/{name}/log``:
  every log of the job's pods, current and deleted, as text/plain; each block
  starts ``==> <pod>/<container> (instance <uid prefix>, restart <n>[, pod
  deleted]) <==``. Query: ``container``, ``tailLines`` (per block),
  ``follow`` (until the job has finished and none of its pods runs),
  ``limitBytes``; ``previous`` is refused (400) since every instance is there.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import re
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable

from aiohttp import web

from phalanx.api.admission import StrictDecodingError, admit
from phalanx.api.manifest import ManifestError, load_document
from phalanx.api.meta import json_type_name
from phalanx.api.registry import JOB_KINDS, ResourceType
from phalanx.client.interface import Client
from phalanx.objects.clock import Clock
from phalanx.objects.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    FieldError,
    Gone,
    Invalid,
    NotFound,
)
from phalanx.server import discovery, fieldvalidation, openapi_v2, paging, protobuf, remotecommand, streams, tables
from phalanx.server.auth import bearer_auth
from phalanx.server.deleteoptions import effective_policy, parse_delete_options
from phalanx.server.openapi import openapi_v3_reply
from phalanx.server.status import error_response, failure, json_response, success
from phalanx.server.strategic import apply_strategic_merge
from phalanx.store.patch import JsonPatchError, json_patch, merge_patch
from phalanx.store.store import PatchRejected

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 3 * 1024 * 1024
SHUTDOWN_TIMEOUT = 2.0
BOOKMARK_INTERVAL = 10.0  # seconds without an event before a watch gets a BOOKMARK

CLIENT: web.AppKey[Client] = web.AppKey("client")
LOG_PROVIDER: web.AppKey[Any] = web.AppKey("log_provider")  # see make_app for the shapes accepted
EXEC_PROVIDER: web.AppKey[remotecommand.ExecProvider | None] = web.AppKey("exec_provider")
STOP = web.AppKey("stop", asyncio.Event)
MAX_BODY = web.AppKey("max_body", int)
CLOCK = web.AppKey("clock", Clock)
BOOKMARKS = web.AppKey("bookmark_interval", float)
ROUTE: web.RequestKey[Route] = web.RequestKey("route")
OBJECT_NAME = web.RequestKey("object_name", str)  # the name an error is about, when not in the URL
WARNINGS = web.RequestKey("warnings", list)  # Warning headers for the response

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
# Built-in groups (kubectl patches their kinds strategically); custom resources get 415, as golden 31.
_STRATEGIC_GROUPS = ("", "apps", "rbac.authorization.k8s.io")


# --------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """A resource path: the resource type, namespace, name and subresource it names."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class _PathNotFound(Exception):
    pass


def _not_found_response() -> web.Response:
    return failure(404, "NotFound", "the server could not find the requested resource")


def parse_resource_path(group: str, version: str, rest: list[str]) -> Route:
    """``rest`` is what follows ``/api/v1`` or ``/apis/<g>/<v>``."""
    if not rest:
        raise _PathNotFound()
    if rest[0] == "namespaces" and len(rest) >= 3:
        rt = discovery.resource_for(group, version, rest[2])
        if rt is not None and rt.namespaced:
            if len(rest) > 5:
                raise _PathNotFound()
            return Route(rt, rest[1], rest[3] if len(rest) > 3 else None, rest[4] if len(rest) > 4 else None)
    rt = discovery.resource_for(group, version, rest[0])
    if rt is None or len(rest) > 3:
        raise _PathNotFound()
    name = rest[1] if len(rest) > 1 else None
    if rt.namespaced and name is not None:
        raise _PathNotFound()  # a namespaced object is only addressable inside its namespace
    return Route(rt, None, name, rest[2] if len(rest) > 2 else None)


def _check_names(route: Route) -> None:
    """Names that cannot exist are answered like missing objects (they never touch a path)."""
    if route.namespace is not None and (len(route.namespace) > 63 or not _DNS_LABEL.match(route.namespace)):
        raise NotFound("namespaces", route.namespace)
    if route.name is not None and (len(route.name) > 253 or not _DNS_SUBDOMAIN.match(route.name)):
        raise NotFound(_resource_name(route.rt), route.name)


def _resource_name(rt: ResourceType) -> str:
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


# --------------------------------------------------------------------------
# Request bodies
# --------------------------------------------------------------------------


def _media_type(request: web.Request) -> str:
    return (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()


async def _read_body(request: web.Request) -> bytes:
    limit = request.app[MAX_BODY]
    if request.content_length is not None and request.content_length > limit:
        raise _TooLarge(limit)
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise _TooLarge(limit) from None


class _TooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


class _UnsupportedMedia(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


MAX_INT_DIGITS = 4300  # Python's own limit for int(str); longer numbers are refused by name


class _Bad:
    """A value a body may not hold, left in place while decoding so that the
    error can say where it is (the JSON decoder's hooks do not know)."""

    def __init__(self, message: str) -> None:
        self.message = message


class _Duplicated(dict[str, Any]):
    """An object that named a field twice (``message`` says which)."""

    message = ""


def _locate(root: Any, culprit: Any) -> str:
    """The field path of ``culprit`` (by identity) inside ``root``."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if node is culprit:
            return path
        if isinstance(node, dict):
            stack.extend((v, _field(path, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
    return ""


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_$/-]+$")


def _field(path: str, key: str) -> str:
    """``path.key``, or ``path["key"]`` when the key would not read as one field."""
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key[:64], ensure_ascii=False)}]"


def _json_body(text: str) -> Any:
    """json.loads, refusing NaN/Infinity, integers too long to convert and
    duplicate fields with the path of the first one (not "last one wins")."""
    bad: list[Any] = []

    def constant(name: str) -> _Bad:
        bad.append(_Bad(f"{name} is not a valid JSON number"))
        return bad[-1]

    def integer(digits: str) -> Any:
        if len(digits) > MAX_INT_DIGITS:
            bad.append(_Bad(f"an integer of {len(digits)} digits is too large"))
            return bad[-1]
        return int(digits)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        dup = None
        for k, v in items:
            if k in out and dup is None:
                dup = k
            out[k] = v
        if dup is None:
            return out
        marked = _Duplicated(out)
        marked.message = f'duplicate field "{dup[:256]}"'
        bad.append(marked)
        return marked

    value = json.loads(text, parse_constant=constant, parse_int=integer, object_pairs_hook=pairs)
    if bad:
        path = _locate(value, bad[0])
        raise BadRequest(f"the request body is not valid JSON: {path[:512] or '<root>'}: {bad[0].message}")
    return _without_surrogates(value) if _SURROGATE_ESCAPE.search(text) else value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _without_surrogates(value: Any) -> Any:
    """Strings with lone UTF-16 surrogates (``"\\ud800"``) get U+FFFD in their
    place, as Go's JSON decoder does: they have no UTF-8 form, so they could
    not be stored or sent back."""
    if isinstance(value, str):
        return _SURROGATES.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    return value


def _decode(raw: bytes, media: str) -> Any:
    """The body as JSON (or YAML for the YAML media types). YAML is read with
    the manifest reader's guards (alias bombs, depth, duplicate keys)."""
    if not raw.strip():
        raise BadRequest("the request body is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(f"the request body is not valid UTF-8 (byte {e.start})") from None
    if media in ("application/yaml", "application/x-yaml", "text/yaml"):
        try:
            return _without_surrogates(load_document(text, "the request body"))
        except ManifestError as e:
            raise BadRequest(e.message) from None
    try:
        return _json_body(text)
    except RecursionError:
        raise BadRequest("the request body is nested too deeply") from None
    except ValueError as e:
        raise BadRequest(f"the request body is not valid JSON: {e}") from None


_JSON_MEDIA = ("", "application/json", "*/*", "application/yaml", "application/x-yaml", "text/yaml")


async def _object_body(request: web.Request, rt: ResourceType) -> dict[str, Any]:
    """The request's object: JSON, YAML, or (built-in kinds, as kubectl's typed
    clients send them) Kubernetes protobuf, read into the same JSON dict."""
    media = _media_type(request)
    proto = protobuf.supports_group(rt.group)
    if media == protobuf.MEDIA_TYPE and proto:
        return protobuf.decode_object(await _read_body(request), rt.kind)
    if media not in _JSON_MEDIA:
        accepted = "application/json, application/yaml" + (f", {protobuf.MEDIA_TYPE}" if proto else "")
        raise _UnsupportedMedia(f"the body of the request was in an unknown format - accepted media types "
                                f"include: {accepted}")
    body = _decode(await _read_body(request), media)
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _identity_error(path: str, value: Any, detail: str) -> BadRequest:
    """A 400 naming the field, in apimachinery's field.Error words."""
    if isinstance(value, str):
        shown: Any = value if len(value) <= 256 else value[:256] + "..."
    elif isinstance(value, (dict, list)):
        shown = json_type_name(value)
    else:
        shown = value if not isinstance(value, int) or value.bit_length() <= 256 else "a very large integer"
    return BadRequest(str(FieldError(path, "Invalid", detail, shown)))


def _fill_identity(obj: dict[str, Any], route: Route) -> None:
    """Default kind/apiVersion/namespace/name from the URL; refuse an object that names another."""
    rt = route.rt
    kind = obj.get("kind")
    if kind in (None, ""):
        obj["kind"] = rt.kind
    elif kind != rt.kind:
        raise _identity_error("kind", kind, f"the kind of the object does not match the kind on the URL ({rt.kind})")
    av = obj.get("apiVersion")
    if av in (None, ""):
        obj["apiVersion"] = rt.api_version
    elif av != rt.api_version:
        raise _identity_error("apiVersion", av, f"the API version in the data does not match the expected API "
                                                f"version ({rt.api_version})")
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise _identity_error("metadata", meta, "metadata must be a JSON object")
    if route.namespace is not None:
        ns = meta.get("namespace")
        if ns in (None, ""):
            meta["namespace"] = route.namespace
        elif ns != route.namespace:
            raise _identity_error("metadata.namespace", ns, "the namespace of the provided object does not match "
                                                            "the namespace sent on the request")
    if route.name is not None:
        name = meta.get("name")
        if name in (None, ""):
            meta["name"] = route.name
        elif name != route.name:
            raise _identity_error("metadata.name", name, f"the name of the object does not match the name on the "
                                                         f"URL ({route.name})")


def _dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for v in values:
        if v != "All":
            raise BadRequest(f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return bool(values)


# --------------------------------------------------------------------------
# Handlers
# --------------------------------------------------------------------------


def _table_version(request: web.Request) -> str | None:
    """The Table version the client asked for in Accept (kubectl get), or None."""
    return tables.negotiate_table(request.headers.get("Accept"))


def _include_object(request: web.Request) -> str:
    try:
        return tables.parse_include_object(request.query.get("includeObject"))
    except ValueError as e:
        raise BadRequest(str(e)) from None


def _now(request: web.Request) -> Any:
    return request.app[CLOCK].now()


class _ListOptionsInvalid(Invalid):
    """A 422 about the request's list options, not about an object of the resource."""

    anonymous = True


def _list_options_error(field: str, kind: str, detail: str, value: Any = None) -> Invalid:
    return _ListOptionsInvalid([FieldError(field, kind, detail, value)],
                               prefix='ListOptions.meta.k8s.io "" is invalid: ')


def _check_list_options(request: web.Request, watching: bool, current_rv: str | None) -> None:
    """resourceVersion / resourceVersionMatch as the apiserver validates them.
    Lists are always served from the current state (not older than any
    resourceVersion a client can have seen); Exact is served only for it."""
    q = request.query
    rv = q.get("resourceVersion") or ""
    if rv and not rv.isdigit():
        raise BadRequest(f'resourceVersion: Invalid value: "{rv}": must be a non-negative integer')
    match = q.get("resourceVersionMatch") or ""
    if not match:
        return
    if watching:
        raise _list_options_error("resourceVersionMatch", "Forbidden", "resourceVersionMatch is forbidden for watch")
    if match not in ("NotOlderThan", "Exact"):
        raise _list_options_error("resourceVersionMatch", "NotSupported", "", match)
    if not rv:
        raise _list_options_error("resourceVersionMatch", "Forbidden",
                                  "resourceVersionMatch is forbidden unless resourceVersion is provided")
    if match == "Exact" and rv == "0":
        raise _list_options_error("resourceVersionMatch", "Forbidden",
                                  'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
    if match == "Exact" and current_rv is not None and rv != current_rv:
        raise Gone(f"too old resource version: {rv} ({current_rv})")


async def _list(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    rt = route.rt
    table = _table_version(request)
    include = _include_object(request)
    if streams.parse_bool(request.query.get("watch"), "watch"):
        _check_list_options(request, True, None)
        now = request.app[CLOCK].now
        fmt = streams.WatchFormat(table, include, now)
        return await streams.watch(request, client, rt, route.namespace, request.app[STOP], fmt,
                                   request.app[BOOKMARKS])
    limit = streams.parse_int(request.query.get("limit"), "limit")
    token = request.query.get("continue") or None
    if token and request.query.get("resourceVersion"):
        raise BadRequest("specifying resource version is not allowed when using continue")
    lst = await client.list(rt.kind, route.namespace,
                            label_selector=request.query.get("labelSelector") or None,
                            field_selector=request.query.get("fieldSelector") or None)
    _check_list_options(request, False, lst.resource_version)
    items, cont, remaining = paging.page(lst.items, lst.resource_version, limit, token)
    meta: dict[str, Any] = {"resourceVersion": lst.resource_version}
    if cont:
        meta["continue"] = cont
        meta["remainingItemCount"] = remaining
    if table:
        return json_response(tables.table_for(rt.kind, items, _now(request), include, list_meta=meta,
                                              version=table))
    if rt.group:
        meta.setdefault("continue", "")
    return json_response({"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta,
                          "items": items})


def _field_validation(request: web.Request) -> str:
    return fieldvalidation.parse_mode(request.query.get("fieldValidation"))


def _drop_unknown(request: web.Request, obj: dict[str, Any]) -> dict[str, Any]:
    """fieldValidation Ignore/Warn: the object without unknown fields, each one reported."""
    pruned, dropped = fieldvalidation.drop_unknown_fields(obj, admit)
    request.setdefault(WARNINGS, []).extend(fieldvalidation.warning(f) for f in dropped)
    return pruned


async def _create(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    mode = _field_validation(request)
    obj = await _object_body(request, route.rt)
    _fill_identity(obj, route)
    name = obj["metadata"].get("name")
    if isinstance(name, str):
        request[OBJECT_NAME] = name
    if mode != "Strict":
        obj = _drop_unknown(request, obj)
    if _dry_run(request):
        return json_response(await _dry_run_create(client, route, obj), status=201)
    return json_response(await client.create(obj), status=201)


async def _dry_run_create(client: Client, route: Route, obj: dict[str, Any]) -> dict[str, Any]:
    """Admission only: the defaulted, validated object, never stored."""
    admitted = admit(obj)
    meta = admitted.get("metadata") or {}
    name = meta.get("name")
    if name:
        try:
            await client.get(route.rt.kind, name, meta.get("namespace"))
        except NotFound:
            pass
        else:
            raise AlreadyExists(_resource_name(route.rt), name)
    return admitted


async def _get(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    table = _table_version(request)
    include = _include_object(request)
    obj = await client.get(route.rt.kind, route.name or "", route.namespace)
    if table:
        return json_response(tables.table_for(route.rt.kind, [obj], _now(request), include, version=table))
    return json_response(obj)


async def _update(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    mode = _field_validation(request)
    obj = await _object_body(request, route.rt)
    _fill_identity(obj, route)
    if _dry_run(request):
        raise BadRequest("dryRun is supported on create only")
    if route.subresource == "status":
        return json_response(await client.update_status(obj))
    if mode != "Strict":
        obj = _drop_unknown(request, obj)
    return json_response(await client.update(obj))


def _pins_resource_version(patch: Any, media: str) -> bool:
    """Whether a patch sets metadata.resourceVersion (then it is a precondition)."""
    if media == JSON_PATCH:
        return isinstance(patch, list) and any(
            isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion" and op.get("op") != "test"
            for op in patch)
    meta = patch.get("metadata") if isinstance(patch, dict) else None
    return isinstance(meta, dict) and meta.get("resourceVersion") is not None


def _patched(current: dict[str, Any], patch: Any, media: str) -> Any:
    """``current`` with the patch applied, computed here (as the store would)."""
    if media == JSON_PATCH:
        try:
            return json_patch(current, patch)
        except JsonPatchError as e:
            raise PatchRejected(str(e), e.index, e.pointer) from None
    if media == MERGE_PATCH:
        return merge_patch(current, patch)
    return apply_strategic_merge(current, patch)


async def _patch(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    rt = route.rt
    media = _media_type(request)
    accepted = [JSON_PATCH, MERGE_PATCH] + ([STRATEGIC_PATCH] if rt.group in _STRATEGIC_GROUPS else [])
    if media not in accepted:
        raise _UnsupportedMedia("the body of the request was in an unknown format - accepted media types "
                                f"include: {', '.join(accepted)}")
    mode = _field_validation(request)
    body = _decode(await _read_body(request), "application/json")
    if _dry_run(request):
        raise BadRequest("dryRun is supported on create only")
    if media == JSON_PATCH and not isinstance(body, list):
        raise BadRequest("a JSON patch must be a JSON array of operations")
    if media != JSON_PATCH and not isinstance(body, dict):
        raise BadRequest("a merge patch must be a JSON object")
    sub = route.subresource
    try:
        if media == STRATEGIC_PATCH:
            return json_response(await _read_modify_write(request, route, body, media, prune=False))
        kind = "json" if media == JSON_PATCH else "merge"
        return json_response(await client.patch(rt.kind, route.name or "", route.namespace, body, kind, sub))
    except StrictDecodingError as e:
        if mode == "Strict":
            raise await _patch_strict_error(client, route, body, media, e) from None
    return json_response(await _read_modify_write(request, route, body, media, prune=True))


async def _patch_strict_error(client: Client, route: Route, patch: Any, media: str,
                              err: StrictDecodingError) -> ApiError:
    """The apiserver's 422 for a PATCH whose result has unknown fields (golden 36)."""
    try:
        patched = _patched(await client.get(route.rt.kind, route.name or "", route.namespace), patch, media)
    except ApiError:
        patched = None
    return fieldvalidation.PatchStrictDecodingError(patched if isinstance(patched, dict) else None, err,
                                                    sort_keys=bool(route.rt.group))


async def _read_modify_write(request: web.Request, route: Route, patch: Any, media: str,
                             prune: bool) -> dict[str, Any]:
    """Apply a patch here and write the result as an update, retried on a
    concurrent change unless the patch pins the resourceVersion. Used for
    strategic merge patches and to drop unknown fields (fieldValidation Ignore/Warn)."""
    client = request.app[CLIENT]
    rt = route.rt
    pinned = _pins_resource_version(patch, media)
    for attempt in range(5):
        current = await client.get(rt.kind, route.name or "", route.namespace)
        patched = _patched(current, patch, media)
        if not isinstance(patched, dict):
            raise BadRequest("the patch may not delete the whole object")
        meta = patched.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise BadRequest("metadata must be a JSON object")
        if not pinned:
            meta["resourceVersion"] = current.get("metadata", {}).get("resourceVersion")
        if prune and route.subresource != "status":
            patched = _drop_unknown(request, patched) if attempt == 0 else \
                fieldvalidation.drop_unknown_fields(patched, admit)[0]
        try:
            if route.subresource == "status":
                return await client.update_status(patched)
            return await client.update(patched)
        except Conflict:
            if pinned or attempt == 4:
                raise
    raise AssertionError("unreachable")


async def _delete(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    rt = route.rt
    raw = await _read_body(request)
    if raw.strip() and _media_type(request) == protobuf.MEDIA_TYPE:
        body: Any = protobuf.decode_object(raw, "DeleteOptions")
    else:
        body = _decode(raw, "application/json") if raw.strip() else None
    options = parse_delete_options(body, request.query)
    if options.dry_run:
        raise BadRequest("dryRun is supported on create only")
    current = await client.get(rt.kind, route.name or "", route.namespace)
    meta = current.get("metadata") or {}
    for label, want, have in (("UID", options.preconditions_uid, meta.get("uid")),
                              ("ResourceVersion", options.preconditions_resource_version,
                               meta.get("resourceVersion"))):
        if want is not None and want != have:
            err = Conflict(_resource_name(rt), route.name or "")
            err.message = (f'Operation cannot be fulfilled on {_resource_name(rt)} "{route.name}": Precondition '
                           f"failed: {label} in precondition: {want}, {label} in object meta: {have}")
            raise err
    policy = effective_policy(rt.kind, options.propagation_policy)
    kwargs: dict[str, Any] = {"grace_period_seconds": options.grace_period_seconds}
    if options.preconditions_uid is not None:
        kwargs["preconditions_uid"] = options.preconditions_uid  # checked again where it is atomic
    if policy is not None:
        kwargs["propagation_policy"] = policy
    result = await client.delete(rt.kind, route.name or "", route.namespace, **kwargs)
    if result is not None:
        return json_response(result)
    details: dict[str, Any] = {"name": route.name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    if meta.get("uid"):
        details["uid"] = meta["uid"]
    return json_response(success(details=details))


async def _bind(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    body = await _object_body(request, route.rt)
    target = body.get("target")
    node = target.get("name") if isinstance(target, dict) else None
    if not isinstance(node, str) or not node:
        raise BadRequest("target.name: Required value: the node to bind to")
    name = (body.get("metadata") or {}).get("name") if isinstance(body.get("metadata"), dict) else None
    if name not in (None, "", route.name):
        raise BadRequest(f"the name of the binding ({name}) does not match the pod on the URL ({route.name})")
    await client.bind(route.namespace or "", route.name or "", node)
    return json_response(success(201), status=201)


async def _logs(request: web.Request, route: Route) -> web.StreamResponse:
    return await streams.logs(request, request.app[CLIENT], request.app[LOG_PROVIDER], route.namespace or "",
                              route.name or "", request.app[STOP], request.app[CLOCK].now)


async def _job_logs(request: web.Request, route: Route) -> web.StreamResponse:
    await request.app[CLIENT].get(route.rt.kind, route.name or "", route.namespace)  # 404 names the job
    return await streams.job_logs(request, request.app[LOG_PROVIDER], route.rt, route.namespace or "",
                                  route.name or "", request.app[STOP])


async def _exec(request: web.Request, route: Route) -> web.StreamResponse:
    return await remotecommand.exec_handler(request, request.app[CLIENT], request.app[EXEC_PROVIDER],
                                            route.namespace or "", route.name or "")


async def _attach(request: web.Request, route: Route) -> web.StreamResponse:
    return await remotecommand.attach_handler(request, request.app[CLIENT], route.namespace or "", route.name or "")


async def _portforward(request: web.Request, route: Route) -> web.StreamResponse:
    return await remotecommand.portforward_handler(request, request.app[CLIENT], route.namespace or "",
                                                   route.name or "")


HandlerFn = Callable[[web.Request, Route], Awaitable[web.StreamResponse]]
_STREAMING: dict[str, HandlerFn] = {"exec": _exec, "attach": _attach, "portforward": _portforward}


def _handler_for(route: Route, method: str) -> HandlerFn | None:
    """The handler for ``method`` on ``route``; raises for paths that do not exist."""
    rt, sub = route.rt, route.subresource
    if route.name is None:
        if rt.namespaced and route.namespace is None:  # e.g. /api/v1/pods: every namespace, read-only
            return _list if method == "GET" else None
        return {"GET": _list, "POST": _create}.get(method)
    if sub is None:
        return {"GET": _get, "PUT": _update, "PATCH": _patch, "DELETE": _delete}.get(method)
    if sub == "status" and rt.has_status:
        return {"GET": _get, "PUT": _update, "PATCH": _patch}.get(method)
    if rt.kind == "Pod" and sub == "binding":
        return {"POST": _bind}.get(method)
    if rt.kind == "Pod" and sub == "log":
        return {"GET": _logs}.get(method)
    if rt.kind == "Pod" and sub in _STREAMING:
        return {"GET": _STREAMING[sub], "POST": _STREAMING[sub]}.get(method)
    if rt.kind in JOB_KINDS and sub == "log":
        return {"GET": _job_logs}.get(method)
    # e.g. PodGroup /status: no such subresource; the apiserver words it as a missing object
    raise NotFound(_resource_name(rt), route.name)


# --------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------


def _server_address(request: web.Request) -> str:
    return request.host or "127.0.0.1"


async def _dispatch(request: web.Request) -> web.StreamResponse:
    segments = [s for s in request.path.split("/") if s]  # request.path is already percent-decoded
    method = request.method
    if method == "HEAD":
        method = "GET"
    if not segments:
        return _not_found_response()
    head = segments[0]
    if len(segments) == 1 and head in ("healthz", "readyz", "livez"):
        return web.Response(text="ok", content_type="text/plain")
    if len(segments) == 1 and head == "version":
        return json_response(discovery.version_info())
    if head == "openapi":
        if len(segments) >= 2 and segments[1] == "v3" and method == "GET":
            return _openapi_v3(request, "/".join(segments[2:]))
        if len(segments) == 2 and segments[1] == "v2" and method == "GET":
            return _openapi_v2(request)
        return _not_found_response()
    if head == "api":
        if len(segments) == 1:
            return json_response(discovery.api_versions(_server_address(request)))
        group, version, rest = "", segments[1], segments[2:]
    elif head == "apis":
        if len(segments) == 1:
            return json_response(discovery.api_group_list())
        if len(segments) == 2:
            doc = discovery.api_group(segments[1])
            return json_response(doc) if doc else _not_found_response()
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        return _not_found_response()
    if not rest:
        doc = discovery.resource_list(group, version)
        return json_response(doc) if doc else _not_found_response()
    try:
        route = parse_resource_path(group, version, rest)
    except _PathNotFound:
        return _not_found_response()
    request[ROUTE] = route
    _check_names(route)
    handler = _handler_for(route, method)
    if handler is None:
        return failure(405, "MethodNotAllowed", "the server does not allow this method on the requested "
                                                 "resource")
    return await handler(request, route)


def _openapi_v3(request: web.Request, subpath: str) -> web.StreamResponse:
    reply = openapi_v3_reply(subpath, request.query.get("hash") or None, request.app[CLOCK].now(),
                             request.headers.get("If-None-Match"))
    if reply is None:
        return _not_found_response()
    return web.Response(status=reply.status, headers=reply.headers, body=reply.body)


def _openapi_v2(request: web.Request) -> web.StreamResponse:
    """gnostic's protobuf when Accept names it (kubectl), else JSON."""
    headers = {"Vary": "Accept", "Cache-Control": "no-cache, private"}
    if openapi_v2.PROTOBUF_MEDIA in (request.headers.get("Accept") or ""):
        return web.Response(body=openapi_v2.openapi_v2_protobuf(),
                            headers={**headers, "Content-Type": openapi_v2.PROTOBUF_CONTENT_TYPE})
    return web.Response(body=openapi_v2.openapi_v2_json(), headers={**headers, "Content-Type": "application/json"})


ACCESS_LOG: web.AppKey[logging.Logger | None] = web.AppKey("access_log")


@web.middleware
async def _access_log(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                      ) -> web.StreamResponse:
    """One line per request once it ends (streams too, even when the client
    goes away): time, peer, method, path and query, status, seconds, user agent."""
    logger = request.app[ACCESS_LOG]
    if logger is None:
        return await handler(request)
    start = time.monotonic()
    status = 500
    try:
        resp = await handler(request)
        status = resp.status
        return resp
    except asyncio.CancelledError:
        status = request.get(streams.STREAM_STATUS, 499)  # the client went away: what it was sent, or 499
        raise
    except web.HTTPException as e:
        status = e.status_code
        raise
    finally:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        ua = request.headers.get("User-Agent", "-").replace('"', "'")
        logger.info('%s %s "%s %s" %d %.6f "%s"', stamp, request.remote or "-", request.method, request.path_qs,
                    status, time.monotonic() - start, ua)


@web.middleware
async def _warnings(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
    """``Warning`` headers collected while serving (e.g. dropped unknown fields)."""
    resp = await handler(request)
    for value in request.get(WARNINGS) or []:
        if not resp.prepared:
            resp.headers.add("Warning", value)
    return resp


@web.middleware
async def _errors(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                  ) -> web.StreamResponse:
    """Every failure becomes a Status; bad input is never a 5xx."""
    try:
        return await handler(request)
    except ApiError as e:
        route: Route | None = request.get(ROUTE)
        name = request.get(OBJECT_NAME) or (route.name if route else None)
        return error_response(e, route.rt if route else None, name)
    except _TooLarge as e:
        return failure(413, "RequestEntityTooLarge", f"Request entity too large: limit is {e.limit}")
    except _UnsupportedMedia as e:
        return failure(415, "UnsupportedMediaType", e.message)
    except web.HTTPException as e:
        if e.status_code == 413:
            return failure(413, "RequestEntityTooLarge",
                           f"Request entity too large: limit is {request.app[MAX_BODY]}")
        if e.status_code >= 400:
            return failure(e.status_code, e.reason.replace(" ", ""), e.text or e.reason)
        raise
    except (asyncio.CancelledError, ConnectionError):
        raise
    except Exception as e:  # a bug: say so without leaking internals, keep serving
        log.exception("internal error serving %s %s", request.method, request.path)
        return failure(500, "InternalError", f"Internal error occurred: {type(e).__name__}")


async def _on_shutdown(app: web.Application) -> None:
    app[STOP].set()


def make_app(client: Client, token: str, log_provider: Any = None, *,
             exec_provider: remotecommand.ExecProvider | None = None,
             max_body_bytes: int = MAX_BODY_BYTES, clock: Clock | None = None,
             bookmark_interval: float = BOOKMARK_INTERVAL,
             access_log: logging.Logger | None = None) -> web.Application:
    """The API application over ``client`` (any ``phalanx.client.interface.Client``).

    ``log_provider`` serves ``pods/{name}/log``: an object with
    ``open(namespace, pod, container, previous, follow, tail)`` returning an async
    iterator of bytes (or the node's ``read``/``follow`` pair); without one the
    log route answers 404. A provider with ``serves_deleted_pods = True`` is
    asked for pods that no longer exist too, and one with ``job_logs(namespace,
    kind, name, container, follow=, tail_lines=)`` serves the jobs' ``log``.
    ``clock`` renders the ages of Tables and log timestamps; a watch allowing
    bookmarks gets one after ``bookmark_interval`` seconds without an event.
    ``access_log`` gets one line per request, written when it ends.
    ``exec_provider`` (``remotecommand.ExecProvider``) runs ``pods/{name}/exec``
    commands; without one exec answers 400.
    """
    app = web.Application(middlewares=[_access_log, _warnings, _errors, bearer_auth(token)],
                          client_max_size=max_body_bytes)
    app[ACCESS_LOG] = access_log
    app[CLIENT] = client
    app[LOG_PROVIDER] = log_provider
    app[EXEC_PROVIDER] = exec_provider
    app[STOP] = asyncio.Event()
    app[MAX_BODY] = max_body_bytes
    app[CLOCK] = clock or Clock()
    app[BOOKMARKS] = float(bookmark_interval)
    app.router.add_route("*", r"/{tail:[\s\S]*}", _dispatch)  # any path, newlines too
    app.on_shutdown.append(_on_shutdown)
    return app


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def serve(app: web.Application, host: str = "127.0.0.1", port: int = 0,
                unix_socket: Path | str | None = None,
                ssl_context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, str]:
    """Start serving ``app``; returns the runner (``await runner.cleanup()`` to stop)
    and the URL (``https://`` with ``ssl_context``). Only a loopback address or a
    unix socket (mode 0600) is accepted: the API is never exposed beyond this
    machine."""
    if unix_socket is None and not _is_loopback(host):
        raise ValueError(f"refusing to listen on {host!r}: only loopback addresses or a unix socket are allowed")
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=SHUTDOWN_TIMEOUT, access_log=None)
    await runner.setup()
    try:
        if unix_socket is not None:
            path = Path(unix_socket)
            old_umask = os.umask(0o177)
            try:
                site: web.BaseSite = web.UnixSite(runner, str(path))
                await site.start()
            finally:
                os.umask(old_umask)
            os.chmod(path, 0o600)
            return runner, "http+unix://" + urllib.parse.quote(str(path), safe="")
        site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        bound = sockets[0].getsockname()[1] if sockets else port
        url_host = f"[{host}]" if ":" in host else host
        scheme = "https" if ssl_context is not None else "http"
        return runner, f"{scheme}://{url_host}:{bound}"
    except BaseException:
        await runner.cleanup()
        raise
