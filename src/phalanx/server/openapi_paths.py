"""The ``paths`` of the OpenAPI v3 documents: each resource's operations, parameters and responses.

What kubectl reads from them: the PATCH operation taking ``fieldValidation``, the list and log parameters.
The jobs' ``/scale`` answers the ``autoscaling/v1`` Scale, as a CRD's scale subresource is published.
"""
from __future__ import annotations

from typing import Any

from phalanx.api.registry import ResourceType
from phalanx.api.scale import SCALE

Schema = dict[str, Any]

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
SCHEMAS_REF = "#/components/schemas/"
SCALE_SCHEMA = "io.k8s.api.autoscaling.v1.Scale"

_PARAMS: dict[str, tuple[str, str]] = {
    "allowWatchBookmarks": ("boolean", "Allow the server to send BOOKMARK events in a watch."),
    "continue": ("string", "The continue token of a previous list call with a limit."),
    "dryRun": ("string", "When present (All), modifications are validated but not persisted."),
    "fieldManager": ("string", "A name associated with the actor or entity making the change."),
    "fieldSelector": ("string", "Restrict the returned objects by their fields (metadata.name, "
                                "metadata.namespace, involvedObject.* for events)."),
    "fieldValidation": ("string", "How unknown or duplicate fields in the request body are handled: Ignore, "
                                  "Warn or Strict (refused)."),
    "force": ("boolean", "Force an apply request (server-side apply only)."),
    "gracePeriodSeconds": ("integer", "Seconds before the object is deleted; 0 deletes immediately."),
    "labelSelector": ("string", "Restrict the returned objects by their labels."),
    "limit": ("integer", "Maximum number of objects to return (may be ignored: the whole list is returned)."),
    "orphanDependents": ("boolean", "Deprecated: use propagationPolicy."),
    "pretty": ("string", "If 'true', the output is pretty printed."),
    "propagationPolicy": ("string", "Whether and how garbage collection is performed: Orphan, Background or "
                                    "Foreground."),
    "resourceVersion": ("string", "The resourceVersion a list or watch starts from."),
    "resourceVersionMatch": ("string", "How resourceVersion is applied to a list call."),
    "sendInitialEvents": ("boolean", "Send the current objects as ADDED events at the start of a watch."),
    "timeoutSeconds": ("integer", "Timeout of a list or watch call, in seconds."),
    "watch": ("boolean", "Watch for changes (ADDED, MODIFIED, DELETED events) instead of listing."),
    "container": ("string", "The container to read the log of (defaults to the only, or the default, one)."),
    "follow": ("boolean", "Follow the log stream of the pod."),
    "limitBytes": ("integer", "Number of bytes to read from the server before terminating the log output."),
    "previous": ("boolean", "Return the log of the previous, terminated instance of the container."),
    "sinceSeconds": ("integer", "Only return log lines newer than this many seconds."),
    "sinceTime": ("string", "Only return log lines after this RFC 3339 time."),
    "tailLines": ("integer", "Number of lines from the end of the log to show."),
    "timestamps": ("boolean", "Prefix every log line with its RFC 3339 timestamp."),
}
_LIST_PARAMS = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
                "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch")
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json")
_LOG_PARAMS = ("container", "follow", "limitBytes", "previous", "sinceSeconds", "sinceTime", "tailLines",
               "timestamps")


def _query(*names: str) -> list[Schema]:
    return [{"name": n, "in": "query", "description": _PARAMS[n][1],
             "schema": {"type": _PARAMS[n][0], "uniqueItems": True}} for n in names]


def _path_param(name: str, description: str) -> Schema:
    return {"name": name, "in": "path", "description": description, "required": True,
            "schema": {"type": "string", "uniqueItems": True}}


def _content(ref: str) -> Schema:
    return {"application/json": {"schema": {"$ref": ref}}, "application/yaml": {"schema": {"$ref": ref}}}


def _responses(ref: str, *extra: tuple[str, str]) -> Schema:
    out: Schema = {"200": {"description": "OK", "content": _content(ref)}}
    for code, text in extra:
        out[code] = {"description": text, "content": _content(ref)}
    out["401"] = {"description": "Unauthorized"}
    return out


class _Ops:
    """Builds the operations of one resource the way the apiserver names them."""

    def __init__(self, rt: ResourceType, kind_ref: str, list_ref: str) -> None:
        self.rt = rt
        self.kind_ref = kind_ref
        self.list_ref = list_ref
        if rt.group:
            words = rt.group.split(".")
            self.tag = words[0] + "".join(w.capitalize() for w in words[1:]) + "_" + rt.version
            self.gv = "".join(w.capitalize() for w in words) + rt.version.capitalize()
        else:
            self.tag = "core_" + rt.version
            self.gv = "Core" + rt.version.capitalize()
        self.scope = "Namespaced" if rt.namespaced else ""

    def op(self, verb: str, action: str, description: str, suffix: str = "", *, params: tuple[str, ...] = (),
           body: str | None = None, body_types: tuple[str, ...] = (), responses: Schema, all_ns: bool = False,
           required_body: bool = True) -> Schema:
        scope = "" if all_ns else self.scope
        collection = "Collection" if action == "deletecollection" else ""
        out: Schema = {
            "tags": [self.tag],
            "description": description,
            "operationId": f"{verb}{self.gv}{collection}{scope}{self.rt.kind}{suffix}",
            "parameters": _query(*params),
        }
        if body is not None:
            content = ({t: {"schema": {"$ref": body}} for t in body_types} if body_types else _content(body))
            out["requestBody"] = {"content": content, **({"required": True} if required_body else {})}
        out["responses"] = responses
        out["x-kubernetes-action"] = action
        out["x-kubernetes-group-version-kind"] = {"group": self.rt.group, "version": self.rt.version,
                                                  "kind": self.rt.kind}
        if not out["parameters"]:
            del out["parameters"]
        return out

    def collection(self, all_ns: bool = False) -> Schema:
        k = self.rt.kind
        status = SCHEMAS_REF + META + ".Status"
        if all_ns:
            return {"get": self.op("list", "list", f"list or watch objects of kind {k}", "ForAllNamespaces",
                                   params=_LIST_PARAMS, responses=_responses(self.list_ref), all_ns=True),
                    "parameters": _query("pretty")}
        return {
            "get": self.op("list", "list", f"list or watch objects of kind {k}", params=_LIST_PARAMS,
                           responses=_responses(self.list_ref)),
            "post": self.op("create", "post", f"create a {k}", params=_WRITE_PARAMS, body=self.kind_ref,
                            responses=_responses(self.kind_ref, ("201", "Created"), ("202", "Accepted"))),
            "delete": self.op("delete", "deletecollection", f"delete collection of {k}",
                              params=_LIST_PARAMS + ("dryRun", "gracePeriodSeconds", "orphanDependents",
                                                     "propagationPolicy"),
                              body=SCHEMAS_REF + META + ".DeleteOptions", required_body=False,
                              responses=_responses(status)),
            "parameters": self._scope_params() + _query("pretty"),
        }

    def item(self, sub: str = "", ref: str | None = None) -> Schema:
        """The item path, or its subresource ``sub`` answering ``ref`` (the kind's schema by default)."""
        k = self.rt.kind
        ref = ref or self.kind_ref
        what = f"{sub} of the specified {k}" if sub else f"the specified {k}"
        suffix = sub.capitalize()
        ops: Schema = {
            "get": self.op("read", "get", f"read {what}", suffix,
                           params=() if sub == "status" else ("resourceVersion",), responses=_responses(ref)),
            "put": self.op("replace", "put", f"replace {what}", suffix, params=_WRITE_PARAMS, body=ref,
                           responses=_responses(ref, ("201", "Created"))),
        }
        if not sub:
            ops["delete"] = self.op("delete", "delete", f"delete a {k}",
                                    params=("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy"),
                                    body=SCHEMAS_REF + META + ".DeleteOptions", required_body=False,
                                    responses=_responses(SCHEMAS_REF + META + ".Status", ("202", "Accepted")))
        ops["patch"] = self.op("patch", "patch", f"partially update {what}", suffix,
                               params=_WRITE_PARAMS + ("force",), body=SCHEMAS_REF + META + ".Patch",
                               body_types=_PATCH_TYPES, responses=_responses(ref, ("201", "Created")))
        ops["parameters"] = [_path_param("name", f"name of the {k}")] + self._scope_params() + _query("pretty")
        return ops

    def log(self) -> Schema:
        text = {"text/plain": {"schema": {"type": "string"}}}
        return {
            "get": {**self.op("read", "get", "read log of the specified Pod", "Log", params=_LOG_PARAMS,
                              responses={}),
                    "responses": {"200": {"description": "OK", "content": text},
                                  "401": {"description": "Unauthorized"}}},
            "parameters": [_path_param("name", "name of the Pod")] + self._scope_params() + _query("pretty"),
        }

    def _scope_params(self) -> list[Schema]:
        if not self.rt.namespaced:
            return []
        return [_path_param("namespace", "object name and auth scope, such as for teams and projects")]


def resource_paths(rt: ResourceType, kind_ref: str, list_ref: str) -> dict[str, Schema]:
    base = f"/api/{rt.version}" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    ops = _Ops(rt, kind_ref, list_ref)
    coll = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    paths = {coll: ops.collection(), f"{coll}/{{name}}": ops.item()}
    if rt.has_status:
        paths[f"{coll}/{{name}}/status"] = ops.item("status")
    if rt.kind in SCALE:
        paths[f"{coll}/{{name}}/scale"] = ops.item("scale", SCHEMAS_REF + SCALE_SCHEMA)
    if rt.kind == "Pod":
        paths[f"{coll}/{{name}}/log"] = ops.log()
    if rt.namespaced:
        paths[f"{base}/{rt.plural}"] = ops.collection(all_ns=True)
    return paths
