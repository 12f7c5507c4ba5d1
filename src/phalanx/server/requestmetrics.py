"""The API server's ``/metrics`` (behind its token, as the kube-apiserver's is) and its
``apiserver_request_total{verb,group,version,resource,subresource,code}`` counter.

A middleware placed inside the authentication one: it answers ``GET /metrics`` with the
registry's series (the control plane's operator and scheduler series share it) and counts
every other request once it ends, with the kube-apiserver's verbs (LIST and WATCH for
collection reads, DELETECOLLECTION, APPLY for server-side apply patches).
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CollectorRegistry, Counter

from phalanx.objects.errors import ApiError
from phalanx.runtime.probes import exposition

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
APPLY_MEDIA = "application/apply-patch+yaml"


def request_verb(method: str, route: Any, request: web.Request) -> str:
    """The kube-apiserver's metrics verb of a request (``route``: the resource path it named, if any)."""
    m = "GET" if method == "HEAD" else method
    named = route is not None and getattr(route, "name", None)
    if m == "GET" and route is not None and not named:
        return "WATCH" if request.query.get("watch") in ("1", "true") else "LIST"
    if m == "DELETE" and route is not None and not named:
        return "DELETECOLLECTION"
    if m == "PATCH" and request.content_type == APPLY_MEDIA:
        return "APPLY"
    return m


def request_metrics(registry: CollectorRegistry, route_key: Any) -> Middleware:
    """The middleware; ``route_key`` is where the dispatcher leaves the parsed ``Route`` on the request."""
    total = Counter("apiserver_request_total",
                    "Counter of apiserver requests broken out for each verb, dry run value, group, version, "
                    "resource, scope, component, and HTTP response code.",
                    ("verb", "group", "version", "resource", "subresource", "code"), registry=registry)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == "/metrics" and request.method in ("GET", "HEAD"):
            return exposition(registry)
        code = "500"
        try:
            resp = await handler(request)
            code = str(resp.status)
            return resp
        except ApiError as e:
            code = str(e.code)
            raise
        except web.HTTPException as e:
            code = str(e.status_code)
            raise
        finally:
            route = request.get(route_key)
            rt = getattr(route, "rt", None)
            total.labels(request_verb(request.method, route, request), getattr(rt, "group", ""),
                         getattr(rt, "version", ""), getattr(rt, "plural", ""),
                         getattr(route, "subresource", None) or "", code).inc()

    return middleware
