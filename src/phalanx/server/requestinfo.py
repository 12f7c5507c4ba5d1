"""What an HTTP request asks to do, in authorization terms, as the kube-apiserver's RequestInfoFactory reads it.

A pure function of method, path and query: resource requests (``/api/v1/...``,
``/apis/<group>/<version>/...``) get verb, API group, resource, subresource,
namespace and name; anything else is a non-resource request (verb and path).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                 "DELETE": "delete"}
_SPECIAL_VERBS = frozenset({"proxy", "watch"})  # legacy /api/v1/watch/pods, /api/v1/proxy/...
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True)
class RequestInfo:
    """authorizer.Attributes minus the user: what RBAC rules are matched against."""

    verb: str
    path: str
    resource_request: bool = False
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def _watch_requested(values: list[str]) -> bool:
    """A bool query parameter as the apiserver converts it: present and not ``0``/``false``."""
    return bool(values) and values[0] != "0" and values[0].lower() != "false"


def _valid_path_segment(name: str) -> bool:
    return name not in (".", "..") and not any(c in name for c in "/%")


def _name_from_field_selector(selector: str) -> str:
    """``metadata.name=x`` (or ``==``) among the selector's terms: a list or watch of one object."""
    for term in selector.split(","):
        term = term.strip()
        for op in ("==", "="):
            key, sep, value = term.partition(op)
            if sep and "!" not in key and key.strip() == "metadata.name":
                return value.strip()
    return ""


def parse(method: str, path: str, query: Mapping[str, list[str]] | None = None) -> RequestInfo:
    """The request's attributes. ``query`` maps each parameter to its values, in order."""
    query = query or {}
    parts = [p for p in path.split("/") if p]
    verb = method.lower()
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return RequestInfo(verb, path)
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(parts) < 3:
            return RequestInfo(verb, path)  # /apis/<group>/<version>: discovery
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]
    by_method = True
    if parts[0] in _SPECIAL_VERBS:
        if len(parts) < 2:
            return RequestInfo("", path, True, group, version)  # the apiserver refuses it (no kind)
        verb, parts, by_method = parts[0], parts[1:], False
    else:
        verb = _METHOD_VERBS.get(method.upper(), "")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 and verb != "proxy" else ""
    if by_method and not name and verb == "get":
        verb = "watch" if _watch_requested(query.get("watch", [])) else "list"
        selected = _name_from_field_selector((query.get("fieldSelector") or [""])[0])
        if selected and _valid_path_segment(selected):
            name = selected
    if by_method and not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(verb, path, True, group, version, resource, subresource, namespace, name)
