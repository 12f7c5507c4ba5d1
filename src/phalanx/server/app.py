"""The HTTP API: Kubernetes paths over any ``Client``, enough for kubectl 1.32.

``make_app(client, token, log_provider)`` serves ``/api/v1/...`` and
``/apis/<group>/<version>/...`` (namespaced and cluster-scoped collections and
items, ``/status``, the jobs' ``/scale`` (``scale``), ``pods/{name}/binding``,
``pods/{name}/log``, ``pods/{name}/exec`` over websockets (``remotecommand``)), watch
streams, ``/version``, health, legacy discovery, ``/openapi/v3`` and
``/openapi/v2`` (``openapi_v2``), and the web view under ``/ui/`` (``webui``).
Built-in kinds may be sent as Kubernetes protobuf (``protobuf``), as kubectl's
typed clients do; answers are JSON (paths and query options are read by
``routes``, bodies by ``bodies``). Every request needs the bearer token (or the
web view's session cookie with its CSRF token, ``websessions``); every error is a Kubernetes ``Status`` with the
apiserver's code and wording, and bad input never yields a 5xx. ``serve``
listens on loopback or a unix socket only, over HTTPS when given a TLS context
(kubectl sends its token only over TLS).

What kubectl relies on (docs/REFERENCE.md W1): a ``meta.k8s.io`` Table for list,
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
  while its job exists, instead of 404 (docs/SEMANTICS.md S5).
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
import logging
import os
import ssl
import urllib.parse
from pathlib import Path
from typing import Any, Awaitable, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry

from phalanx.api.admission import StrictDecodingError, admit
from phalanx.api.registry import JOB_KINDS
from phalanx.client.interface import Client
from phalanx.objects.clock import Clock
from phalanx.objects.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    NotFound,
)
from phalanx.server import (
    bodies,
    discovery,
    fieldvalidation,
    openapi_v2,
    paging,
    protobuf,
    remotecommand,
    reviews,
    routes,
    scale,
    streams,
    tables,
    webui,
)
from phalanx.server.accesslog import ACCESS_LOG, access_log_middleware
from phalanx.server.auth import ACCESS, AccessControl, access_middleware
from phalanx.server.deleteoptions import effective_policy, parse_delete_options
from phalanx.server.openapi import openapi_v3_reply
from phalanx.server.requestmetrics import request_metrics
from phalanx.server.routes import Route
from phalanx.server.status import error_response, failure, json_response, success
from phalanx.store.history import JobHistories

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 3 * 1024 * 1024
SHUTDOWN_TIMEOUT = 2.0
BOOKMARK_INTERVAL = 10.0  # seconds without an event before a watch gets a BOOKMARK

CLIENT: web.AppKey[Client] = web.AppKey("client")
LOG_PROVIDER: web.AppKey[Any] = web.AppKey("log_provider")  # see make_app for the shapes accepted
EXEC_PROVIDER: web.AppKey[remotecommand.ExecProvider | None] = web.AppKey("exec_provider")
STOP = web.AppKey("stop", asyncio.Event)
CLOCK = web.AppKey("clock", Clock)
BOOKMARKS = web.AppKey("bookmark_interval", float)
ROUTE: web.RequestKey[Route] = web.RequestKey("route")
OBJECT_NAME = web.RequestKey("object_name", str)  # the name an error is about, when not in the URL
WARNINGS = web.RequestKey("warnings", list)  # Warning headers for the response
ADMISSION: web.AppKey[Callable[..., dict[str, Any]]] = web.AppKey("admission")  # what a dry run answers with


# --------------------------------------------------------------------------
# Handlers
# --------------------------------------------------------------------------


def _now(request: web.Request) -> Any:
    return request.app[CLOCK].now()


async def _list(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    rt = route.rt
    table = routes.table_version(request)
    include = routes.include_object(request)
    if streams.parse_bool(request.query.get("watch"), "watch"):
        routes.check_list_options(request, True, None)
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
    routes.check_list_options(request, False, lst.resource_version)
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


def _drop_unknown(request: web.Request, obj: dict[str, Any]) -> dict[str, Any]:
    """fieldValidation Ignore/Warn: the object without unknown fields, each one reported."""
    pruned, dropped = fieldvalidation.drop_unknown_fields(obj, admit)
    request.setdefault(WARNINGS, []).extend(fieldvalidation.warning(f) for f in dropped)
    return pruned


async def _create(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    mode = routes.field_validation(request)
    obj = await bodies.object_body(request, route.rt)
    bodies.fill_identity(obj, route)
    name = obj["metadata"].get("name")
    if isinstance(name, str):
        request[OBJECT_NAME] = name
    if mode != "Strict":
        obj = _drop_unknown(request, obj)
    if routes.dry_run(request):
        return json_response(await _dry_run_create(client, route, obj, request.app[ADMISSION]), status=201)
    return json_response(await client.create(obj), status=201)


async def _dry_run_create(client: Client, route: Route, obj: dict[str, Any],
                          admission: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """Admission only: the defaulted, validated object, never stored."""
    admitted = admission(obj)
    meta = admitted.get("metadata") or {}
    name = meta.get("name")
    if name:
        try:
            await client.get(route.rt.kind, name, meta.get("namespace"))
        except NotFound:
            pass
        else:
            raise AlreadyExists(routes.resource_name(route.rt), name)
    return admitted


async def _get(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    table = routes.table_version(request)
    include = routes.include_object(request)
    obj = await client.get(route.rt.kind, route.name or "", route.namespace)
    if table:
        return json_response(tables.table_for(route.rt.kind, [obj], _now(request), include, version=table))
    return json_response(obj)


async def _update(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    mode = routes.field_validation(request)
    obj = await bodies.object_body(request, route.rt)
    bodies.fill_identity(obj, route)
    if routes.dry_run(request):
        raise BadRequest("dryRun is supported on create only")
    if route.subresource == "status":
        return json_response(await client.update_status(obj))
    if mode != "Strict":
        obj = _drop_unknown(request, obj)
    return json_response(await client.update(obj))


async def _patch(request: web.Request, route: Route) -> web.StreamResponse:
    client = request.app[CLIENT]
    rt = route.rt
    media = bodies.media_type(request)
    accepted = [bodies.JSON_PATCH, bodies.MERGE_PATCH] + (
        [bodies.STRATEGIC_PATCH] if rt.group in bodies.STRATEGIC_GROUPS else [])
    if media not in accepted:
        raise bodies.UnsupportedMedia("the body of the request was in an unknown format - accepted media types "
                                f"include: {', '.join(accepted)}")
    mode = routes.field_validation(request)
    body = bodies.decode(await bodies.read_body(request), "application/json")
    if routes.dry_run(request):
        raise BadRequest("dryRun is supported on create only")
    if media == bodies.JSON_PATCH and not isinstance(body, list):
        raise BadRequest("a JSON patch must be a JSON array of operations")
    if media != bodies.JSON_PATCH and not isinstance(body, dict):
        raise BadRequest("a merge patch must be a JSON object")
    sub = route.subresource
    try:
        if media == bodies.STRATEGIC_PATCH:
            return json_response(await _read_modify_write(request, route, body, media, prune=False))
        kind = "json" if media == bodies.JSON_PATCH else "merge"
        return json_response(await client.patch(rt.kind, route.name or "", route.namespace, body, kind, sub))
    except StrictDecodingError as e:
        if mode == "Strict":
            raise await _patch_strict_error(client, route, body, media, e) from None
    return json_response(await _read_modify_write(request, route, body, media, prune=True))


async def _patch_strict_error(client: Client, route: Route, patch: Any, media: str,
                              err: StrictDecodingError) -> ApiError:
    """The apiserver's 422 for a PATCH whose result has unknown fields (docs/REFERENCE.md golden 36)."""
    try:
        patched = bodies.apply_patch(await client.get(route.rt.kind, route.name or "", route.namespace), patch, media)
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
    pinned = bodies.pins_resource_version(patch, media)
    for attempt in range(5):
        current = await client.get(rt.kind, route.name or "", route.namespace)
        patched = bodies.apply_patch(current, patch, media)
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
    raw = await bodies.read_body(request)
    if raw.strip() and bodies.media_type(request) == protobuf.MEDIA_TYPE:
        body: Any = protobuf.decode_object(raw, "DeleteOptions")
    else:
        body = bodies.decode(raw, "application/json") if raw.strip() else None
    options = parse_delete_options(body, request.query)
    if options.dry_run:
        raise BadRequest("dryRun is supported on create only")
    current = await client.get(rt.kind, route.name or "", route.namespace)
    meta = current.get("metadata") or {}
    for label, want, have in (("UID", options.preconditions_uid, meta.get("uid")),
                              ("ResourceVersion", options.preconditions_resource_version,
                               meta.get("resourceVersion"))):
        if want is not None and want != have:
            err = Conflict(routes.resource_name(rt), route.name or "")
            err.message = (f'Operation cannot be fulfilled on {routes.resource_name(rt)} "{route.name}": Precondition '
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
    body = await bodies.object_body(request, route.rt)
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


async def _scale(request: web.Request, route: Route) -> web.StreamResponse:
    return await scale.serve(request, route, request.app[CLIENT], _now(request))


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
    if scale.serves(route):
        return _scale
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
    if rt.kind == "ServiceAccount" and sub == "token":
        return {"POST": reviews.token_request}.get(method)
    # e.g. PodGroup /status: no such subresource; the apiserver words it as a missing object
    raise NotFound(routes.resource_name(rt), route.name)


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
        return routes.not_found_response()
    head = segments[0]
    if len(segments) == 1 and head in ("healthz", "readyz", "livez"):
        return web.Response(text="ok", content_type="text/plain")
    if len(segments) == 1 and head == "version":
        return json_response(discovery.version_info())
    if head == "ui":
        return await webui.dispatch(request, segments, request.method)
    if head == "openapi":
        if len(segments) >= 2 and segments[1] == "v3" and method == "GET":
            return _openapi_v3(request, "/".join(segments[2:]))
        if len(segments) == 2 and segments[1] == "v2" and method == "GET":
            return _openapi_v2(request)
        return routes.not_found_response()
    if head == "api":
        if len(segments) == 1:
            return json_response(discovery.api_versions(_server_address(request)))
        group, version, rest = "", segments[1], segments[2:]
    elif head == "apis":
        if len(segments) == 1:
            return json_response(discovery.api_group_list())
        if len(segments) == 2:
            doc = discovery.api_group(segments[1])
            return json_response(doc) if doc else routes.not_found_response()
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        return routes.not_found_response()
    if not rest:
        doc = discovery.resource_list(group, version)
        return json_response(doc) if doc else routes.not_found_response()
    if group in reviews.GROUPS:
        return await reviews.dispatch(request, group, version, rest)
    try:
        route = routes.parse_resource_path(group, version, rest)
    except routes.PathNotFound:
        return routes.not_found_response()
    request[ROUTE] = route
    routes.check_names(route)
    handler = _handler_for(route, method)
    if handler is None:
        return failure(405, "MethodNotAllowed", "the server does not allow this method on the requested "
                                                 "resource")
    return await handler(request, route)


def _openapi_v3(request: web.Request, subpath: str) -> web.StreamResponse:
    reply = openapi_v3_reply(subpath, request.query.get("hash") or None, request.app[CLOCK].now(),
                             request.headers.get("If-None-Match"))
    if reply is None:
        return routes.not_found_response()
    return web.Response(status=reply.status, headers=reply.headers, body=reply.body)


def _openapi_v2(request: web.Request) -> web.StreamResponse:
    """gnostic's protobuf when Accept names it (kubectl), else JSON."""
    headers = {"Vary": "Accept", "Cache-Control": "no-cache, private"}
    if openapi_v2.PROTOBUF_MEDIA in (request.headers.get("Accept") or ""):
        return web.Response(body=openapi_v2.openapi_v2_protobuf(),
                            headers={**headers, "Content-Type": openapi_v2.PROTOBUF_CONTENT_TYPE})
    return web.Response(body=openapi_v2.openapi_v2_json(), headers={**headers, "Content-Type": "application/json"})


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
    except bodies.TooLarge as e:
        return failure(413, "RequestEntityTooLarge", f"Request entity too large: limit is {e.limit}")
    except bodies.UnsupportedMedia as e:
        return failure(415, "UnsupportedMediaType", e.message)
    except web.HTTPException as e:
        if e.status_code == 413:
            return failure(413, "RequestEntityTooLarge",
                           f"Request entity too large: limit is {request.app[bodies.MAX_BODY]}")
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
             access_log: logging.Logger | None = None,
             signing_key: Path | None = None,
             metrics_registry: CollectorRegistry | None = None,
             histories: JobHistories | None = None) -> web.Application:
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
    ``token`` is the admin's; ServiceAccount tokens are signed with the RSA key at ``signing_key``
    (made once; without a path, one in memory) and their users authorized by RBAC (``auth``).
    ``metrics_registry``: served at ``/metrics``, with ``apiserver_request_total`` added to it.
    ``histories``: the jobs' state histories the web view (``webui``, at ``/ui/``) draws timelines from.
    """
    access = AccessControl(token, client, clock or Clock(), signing_key)
    metrics = [request_metrics(metrics_registry, ROUTE)] if metrics_registry is not None else []
    app = web.Application(middlewares=[access_log_middleware, _warnings, _errors, access_middleware(access), *metrics],
                          client_max_size=max_body_bytes)
    app[ACCESS] = access
    app[ACCESS_LOG] = access_log
    app[CLIENT] = client
    app[ADMISSION] = admit
    app[LOG_PROVIDER] = log_provider
    app[EXEC_PROVIDER] = exec_provider
    app[STOP] = asyncio.Event()
    app[bodies.MAX_BODY] = max_body_bytes
    app[CLOCK] = clock or Clock()
    app[BOOKMARKS] = float(bookmark_interval)
    app[webui.TIMELINES] = histories
    app.router.add_route("*", r"/{tail:[\s\S]*}", _dispatch)  # any path, newlines too
    app.on_shutdown.append(_on_shutdown)
    app.on_cleanup.append(lambda _app: access.stop())
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
