"""/version and legacy discovery documents, built from the resource registry.

Legacy discovery (``APIVersions``, ``APIGroupList``, ``APIGroup``,
``APIResourceList``) is enough for kubectl, kopf and kr8s (docs/REFERENCE.md W1.3).
kubectl 1.32 asks ``/api`` and ``/apis`` for the aggregated
``APIGroupDiscoveryList`` first, with ``application/json`` as its last choice;
answered with these plain JSON documents it fetches each group-version, so
aggregated discovery is not served. The version reports minor 32 so Google's
kubectl dispatcher runs kubectl 1.32.
"""
from __future__ import annotations

import platform
import sys
from typing import Any

from phalanx import __version__
from phalanx.api.registry import RESOURCES, ResourceType
from phalanx.api.scale import SCALE

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]

# Create-only resources nothing stores (``server.reviews``): group/version -> their discovery entries.
_REVIEWS: dict[str, list[dict[str, Any]]] = {
    "authentication.k8s.io/v1": [
        {"name": "selfsubjectreviews", "singularName": "selfsubjectreview", "namespaced": False,
         "kind": "SelfSubjectReview", "verbs": ["create"]},
        {"name": "tokenreviews", "singularName": "tokenreview", "namespaced": False, "kind": "TokenReview",
         "verbs": ["create"]}],
    "authorization.k8s.io/v1": [
        {"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview", "namespaced": False,
         "kind": "SelfSubjectAccessReview", "verbs": ["create"]}],
}


KUBERNETES_VERSION = "v1.32.4"  # the API level served; the dispatcher runs the kubectl of its minor


def version_info() -> dict[str, Any]:
    """``/version`` (docs/REFERENCE.md golden 01's shape): a 1.32 minor, Phalanx's version as build metadata."""
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    return {
        "major": "1",
        "minor": "32",
        "gitVersion": f"{KUBERNETES_VERSION}-phalanx+{__version__}",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": f"python{sys.version_info.major}.{sys.version_info.minor}",
        "compiler": "phalanx",
        "platform": f"{sys.platform}/{arch}",
    }


def group_versions() -> dict[str, list[str]]:
    """API group -> versions served ("" is the core group)."""
    out: dict[str, list[str]] = {}
    for rt in RESOURCES:
        versions = out.setdefault(rt.group, [])
        if rt.version not in versions:
            versions.append(rt.version)
    for gv in _REVIEWS:
        group, version = gv.split("/")
        out.setdefault(group, []).append(version)
    return out


def resource_for(group: str, version: str, plural: str) -> ResourceType | None:
    for rt in RESOURCES:
        if rt.group == group and rt.version == version and rt.plural == plural:
            return rt
    return None


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": group_versions().get("", []),
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group(group: str) -> dict[str, Any] | None:
    versions = group_versions().get(group) if group else None
    if not versions:
        return None
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list() -> dict[str, Any]:
    groups = []
    for group in group_versions():
        if group:
            doc = api_group(group)
            assert doc is not None
            doc.pop("kind")
            doc.pop("apiVersion")
            groups.append(doc)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                            "kind": rt.kind, "verbs": list(VERBS)}
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    entries = [main]
    sub = {"singularName": "", "namespaced": rt.namespaced}
    if rt.has_status:
        entries.append({"name": f"{rt.plural}/status", **sub, "kind": rt.kind, "verbs": ["get", "patch", "update"]})
    if rt.kind in SCALE:
        entries.append({"name": f"{rt.plural}/scale", **sub, "group": "autoscaling", "version": "v1", "kind": "Scale",
                        "verbs": ["get", "patch", "update"]})
    if rt.kind == "Pod":
        entries.append({"name": "pods/binding", **sub, "kind": "Binding", "verbs": ["create"]})
        entries.append({"name": "pods/log", **sub, "kind": "Pod", "verbs": ["get"]})
    if rt.kind == "ServiceAccount":
        entries.append({"name": "serviceaccounts/token", **sub, "group": "authentication.k8s.io", "version": "v1",
                        "kind": "TokenRequest", "verbs": ["create"]})
    return entries


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    rts = [rt for rt in RESOURCES if rt.group == group and rt.version == version]
    gv = f"{group}/{version}" if group else version
    if gv in _REVIEWS:
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": [dict(e) for e in _REVIEWS[gv]]}
    if not rts:
        return None
    resources = [e for rt in sorted(rts, key=lambda r: r.plural) for e in _resource_entries(rt)]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
