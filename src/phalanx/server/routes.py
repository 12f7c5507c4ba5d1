"""What a request names: its resource path (a ``Route``) and its query options.

Paths, impossible names, dryRun, list options, fieldValidation and Table negotiation, in the apiserver's words.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from phalanx.api.registry import ResourceType
from phalanx.objects.errors import BadRequest, FieldError, Gone, Invalid, NotFound
from phalanx.objects.names import is_dns_label, is_dns_subdomain
from phalanx.server import discovery, fieldvalidation, tables
from phalanx.server.status import failure


@dataclass(frozen=True)
class Route:
    """A resource path: the resource type, namespace, name and subresource it names."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class PathNotFound(Exception):
    pass


def not_found_response() -> web.Response:
    return failure(404, "NotFound", "the server could not find the requested resource")


def parse_resource_path(group: str, version: str, rest: list[str]) -> Route:
    """``rest`` is what follows ``/api/v1`` or ``/apis/<g>/<v>``."""
    if not rest:
        raise PathNotFound()
    if rest[0] == "namespaces" and len(rest) >= 3:
        rt = discovery.resource_for(group, version, rest[2])
        if rt is not None and rt.namespaced:
            if len(rest) > 5:
                raise PathNotFound()
            return Route(rt, rest[1], rest[3] if len(rest) > 3 else None, rest[4] if len(rest) > 4 else None)
    rt = discovery.resource_for(group, version, rest[0])
    if rt is None or len(rest) > 3:
        raise PathNotFound()
    name = rest[1] if len(rest) > 1 else None
    if rt.namespaced and name is not None:
        raise PathNotFound()  # a namespaced object is only addressable inside its namespace
    return Route(rt, None, name, rest[2] if len(rest) > 2 else None)


def check_names(route: Route) -> None:
    """Names that cannot exist are answered like missing objects (they never touch a path)."""
    if route.namespace is not None and not is_dns_label(route.namespace):
        raise NotFound("namespaces", route.namespace)
    if route.name is not None and not is_dns_subdomain(route.name):
        raise NotFound(resource_name(route.rt), route.name)


def resource_name(rt: ResourceType) -> str:
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for v in values:
        if v != "All":
            raise BadRequest(f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return bool(values)


def table_version(request: web.Request) -> str | None:
    """The Table version the client asked for in Accept (kubectl get), or None."""
    return tables.negotiate_table(request.headers.get("Accept"))


def include_object(request: web.Request) -> str:
    try:
        return tables.parse_include_object(request.query.get("includeObject"))
    except ValueError as e:
        raise BadRequest(str(e)) from None


class _ListOptionsInvalid(Invalid):
    """A 422 about the request's list options, not about an object of the resource."""

    anonymous = True


def _list_options_error(field: str, kind: str, detail: str, value: Any = None) -> Invalid:
    return _ListOptionsInvalid([FieldError(field, kind, detail, value)],
                               prefix='ListOptions.meta.k8s.io "" is invalid: ')


def check_list_options(request: web.Request, watching: bool, current_rv: str | None) -> None:
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


def field_validation(request: web.Request) -> str:
    return fieldvalidation.parse_mode(request.query.get("fieldValidation"))
