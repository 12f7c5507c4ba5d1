"""OpenAPI v3 documents generated from the pydantic models, shaped as the apiserver publishes them.

kubectl reads ``/openapi/v3`` and one document per group-version: ``apply`` and
``edit`` look for the kind's PATCH operation taking ``fieldValidation`` and
then leave strict validation to the server; ``kubectl explain`` walks the
schemas. Custom resources are published like CRDs (schemas inlined, ObjectMeta
referenced, docs/REFERENCE.md golden 10/11); core/v1 kinds like built-ins (one component per type).
"""
from __future__ import annotations

import copy
import hashlib
import json
import typing
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from types import ModuleType
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from phalanx.api import autoscaling, core, kubeflow, meta, scheduling, volcano
from phalanx.api.registry import JOB_KINDS, RESOURCES, ResourceType
from phalanx.api.scale import SCALE
from phalanx.server.openapi_docs import API_VERSION, DESCRIPTIONS, KIND, LIST_METADATA, METADATA
from phalanx.server.openapi_paths import META, SCALE_SCHEMA, SCHEMAS_REF, resource_paths

Schema = dict[str, Any]

OPENAPI_BASE = "/openapi/v3"
_DEFS = "#/$defs/"

KIND_MODELS: dict[str, type[BaseModel]] = {
    "Pod": core.Pod, "Service": core.Service, "Node": core.Node, "Event": core.Event,
    "Namespace": core.Namespace, "ConfigMap": core.ConfigMap, "Secret": core.Secret,
    "PyTorchJob": kubeflow.PyTorchJob, "TFJob": kubeflow.TFJob, "XGBoostJob": kubeflow.XGBoostJob,
    "PaddleJob": kubeflow.PaddleJob, "JAXJob": kubeflow.JAXJob, "MPIJob": kubeflow.MPIJob,
    "PodGroup": volcano.PodGroup, "Queue": volcano.Queue, "PriorityClass": scheduling.PriorityClass,
    "HorizontalPodAutoscaler": autoscaling.HorizontalPodAutoscaler,
}
# Status is a free dict on the kinds the controllers own; publish the typed
# reading model (unknown fields preserved) so `kubectl explain` can show it.
_STATUS_MODELS: dict[str, type[BaseModel]] = {
    **{kind: kubeflow.JobStatus for kind in JOB_KINDS},
    "PodGroup": volcano.PodGroupStatus, "Queue": volcano.QueueStatus,
    "HorizontalPodAutoscaler": autoscaling.HorizontalPodAutoscalerStatus,
}
# Where each model module's types are named (apimachinery and core/v1 keep their Kubernetes names).
_MODULE_PREFIX: tuple[tuple[ModuleType, str], ...] = (
    (meta, META), (core, "io.k8s.api.core.v1"),
    (kubeflow, "org.kubeflow.v1"), (volcano, "sh.volcano.scheduling.v1beta1"),
    (scheduling, "io.k8s.api.scheduling.v1"), (autoscaling, "io.k8s.api.autoscaling.v2"),
)
# Built-in groups published as the apiserver publishes them (one component per type, not CRD-style inlined).
_BUILTIN_PREFIXES = {"scheduling.k8s.io": "io.k8s.api.scheduling", "autoscaling": "io.k8s.api.autoscaling"}
_ALIASES = {"TemplateMeta": "ObjectMeta"}  # a pod template's metadata is an ObjectMeta
_INT_FORMATS: dict[tuple[Any, Any], str] = {(-(2**31), 2**31 - 1): "int32", (-(2**63), 2**63 - 1): "int64"}
_INT_OR_STRING: Schema = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
# Scalar types named like the apiserver's: a component in core/v1, the CRD form when inlined.
_SCALARS: dict[str, tuple[str, Schema, Schema]] = {
    "Quantity": ("io.k8s.apimachinery.pkg.api.resource.Quantity", _INT_OR_STRING, {
        "description": "Quantity is a fixed-point number: an integer, or a decimal string with an optional "
                       "suffix (binary Ki, Mi, Gi, ... or decimal m, k, M, G, ...), e.g. 500m, 2, 64Gi.",
        "type": "string"}),
    "IntOrString": ("io.k8s.apimachinery.pkg.util.intstr.IntOrString", _INT_OR_STRING, {
        "description": "IntOrString is a type that can hold an int32 or a string.",
        "type": "string", "format": "int-or-string"}),
}
_SCALAR_KEY = "x-phalanx-scalar"  # marks a scalar in the pydantic output until refs are resolved


def _validator(alias: Any) -> Any:
    """The function behind an ``Annotated[Any, PlainValidator(f)]`` alias of ``phalanx.api.meta``."""
    return typing.get_args(alias)[1].func


_PLAIN_SCHEMAS: dict[Any, Schema] = {
    _validator(meta.Quantity): {_SCALAR_KEY: "Quantity"},
    _validator(meta.IntOrString): {_SCALAR_KEY: "IntOrString"},
    _validator(meta.Number): {"type": "number"},
}


class _Generator(GenerateJsonSchema):
    """pydantic's JSON Schema, bent toward Kubernetes OpenAPI: optional fields are
    plain (no ``null`` branch, no default), validator-typed aliases get their wire type."""

    def nullable_schema(self, schema: Any) -> Any:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: Any) -> Any:
        return self.generate_inner(schema["schema"])

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def function_plain_schema(self, schema: Any) -> Any:
        known = _PLAIN_SCHEMAS.get(schema["function"]["function"])
        if known is not None:
            return copy.deepcopy(known)
        return super().function_plain_schema(schema)


# --------------------------------------------------------------------------
# pydantic schema -> OpenAPI schema nodes
# --------------------------------------------------------------------------


def _clean(node: Schema, owner: str | None = None) -> Schema:
    """One pydantic node as an OpenAPI v3.0 node: titles and pydantic's docstring
    descriptions dropped, ``additionalProperties: true`` as preserve-unknown-fields,
    integer bounds as int32/int64, field descriptions from ``openapi_docs``."""
    if "$ref" in node:
        return {"$ref": node["$ref"]}
    if _SCALAR_KEY in node:
        return {"$ref": _DEFS + node[_SCALAR_KEY]}
    out: Schema = {}
    own = DESCRIPTIONS.get(owner or "", {}).get("")
    if own:
        out["description"] = own
    for key, value in node.items():
        if key in ("title", "description", "default", "$defs", "minimum", "maximum"):
            continue
        if key == "additionalProperties":
            if value is True:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict):
                out[key] = _clean(value)
        elif key == "properties":
            docs = DESCRIPTIONS.get(owner or "", {})
            props: Schema = {}
            for name in sorted(value):
                prop = _clean(value[name])
                if docs.get(name):
                    prop = {"description": docs[name], **{k: v for k, v in prop.items() if k != "description"}}
                props[name] = prop
            out[key] = props
        elif key == "items":
            out[key] = _clean(value)
        elif key == "anyOf":
            out[key] = [_clean(v) for v in value]
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = copy.deepcopy(value)
    if node.get("type") == "integer":
        fmt = _INT_FORMATS.get((node.get("minimum"), node.get("maximum")))
        if fmt:
            out["format"] = fmt
        else:
            out.update({k: node[k] for k in ("minimum", "maximum") if k in node})
    first = [k for k in ("description", "type") if k in out]  # the apiserver's key order
    return {**{k: out[k] for k in first}, **{k: v for k, v in out.items() if k not in first}}


def _model_defs(model: type[BaseModel]) -> tuple[Schema, dict[str, Schema]]:
    """(root, defs) of a model, both cleaned; refs still point at ``#/$defs/<class>``."""
    raw = model.model_json_schema(by_alias=True, schema_generator=_Generator)
    defs = {name: _clean(d, name) for name, d in raw.get("$defs", {}).items()}
    return _clean(raw, model.__name__), defs


def _merge_defs(into: dict[str, Schema], more: dict[str, Schema]) -> None:
    for name, schema in more.items():
        if name in into and into[name] != schema:
            raise RuntimeError(f"two different models named {name!r}: OpenAPI schema names must be unique")
        into[name] = schema


def _class_of(name: str) -> tuple[type[BaseModel], str]:
    """The model class a pydantic def name stands for, and its schema-name prefix."""
    for module, prefix in _MODULE_PREFIX:
        cls = getattr(module, name, None)
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls.__module__ == module.__name__:
            return cls, prefix
    raise RuntimeError(f"cannot name the OpenAPI schema of model {name!r}: not a class of phalanx.api")


def component_name(def_name: str) -> str:
    """The apiserver's name of a model's schema: ``ObjectMeta`` ->
    ``io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta``, ``PodSpec`` -> ``io.k8s.api.core.v1.PodSpec``."""
    if def_name in _SCALARS:
        return _SCALARS[def_name][0]
    name = _ALIASES.get(def_name, def_name)
    _, prefix = _class_of(name)
    return f"{prefix}.{name}"


def _is_meta(def_name: str) -> bool:
    return _class_of(_ALIASES.get(def_name, def_name))[1] == META


class _Builder:
    """Resolves ``#/$defs`` refs of one document: inlined (CRD style) or as components."""

    def __init__(self, defs: dict[str, Schema], inline: bool) -> None:
        self.defs = defs
        self.inline = inline
        self.components: dict[str, Schema] = {}

    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.resolve(v) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS):
            return self._ref(ref[len(_DEFS):], node.get("description"))
        return {k: self.resolve(v) for k, v in node.items()}

    def _ref(self, def_name: str, description: str | None) -> Schema:
        if def_name in _SCALARS:
            cname, inlined, component = _SCALARS[def_name]
            if self.inline:
                return {**({"description": description} if description else {}), **copy.deepcopy(inlined)}
            self.components[cname] = copy.deepcopy(component)
            ref = {"$ref": SCHEMAS_REF + cname}
            return {"description": description, "allOf": [ref]} if description else ref
        if self.inline and not _is_meta(def_name):
            target = self.resolve(self.defs[def_name])
            if description:
                target = {"description": description, **{k: v for k, v in target.items() if k != "description"}}
            return target
        cname = component_name(def_name)
        if cname not in self.components:
            self.components[cname] = {}  # placeholder: stops recursion on cycles
            source = self.defs.get(_ALIASES.get(def_name, def_name), self.defs[def_name])
            self.components[cname] = self.resolve(source)
        ref = {"$ref": SCHEMAS_REF + cname}
        return {"description": description, "allOf": [ref]} if description else ref


# --------------------------------------------------------------------------
# Kind and list schemas
# --------------------------------------------------------------------------


def _prefix(rt: ResourceType) -> str:
    """The apiserver's schema-name prefix of a group-version: core -> io.k8s.api.core.v1,
    a CRD group reversed (kubeflow.org/v1 -> org.kubeflow.v1)."""
    if not rt.group:
        return f"io.k8s.api.core.{rt.version}"
    if rt.group in _BUILTIN_PREFIXES:
        return f"{_BUILTIN_PREFIXES[rt.group]}.{rt.version}"
    return ".".join(reversed(rt.group.split("."))) + "." + rt.version


def _gvk(rt: ResourceType, kind: str) -> dict[str, str]:
    return {"group": rt.group, "kind": kind, "version": rt.version}


def _kind_schema(rt: ResourceType, defs: dict[str, Schema]) -> Schema:
    """The kind's top-level schema (refs into ``defs``, which it extends)."""
    docs = DESCRIPTIONS.get(rt.kind, {})
    model = KIND_MODELS.get(rt.kind)
    if model is None:  # a registered kind without a model: any fields
        root: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {}}
    else:
        root, model_defs = _model_defs(model)
        _merge_defs(defs, model_defs)
    if "ObjectMeta" not in defs:
        meta_root, meta_defs = _model_defs(meta.ObjectMeta)
        _merge_defs(defs, meta_defs | {"ObjectMeta": meta_root})
    props = dict(root.get("properties", {}))
    props["apiVersion"] = {"description": API_VERSION, "type": "string"}
    props["kind"] = {"description": KIND, "type": "string"}
    props["metadata"] = {"description": METADATA, "$ref": _DEFS + "ObjectMeta"}
    status_model = _STATUS_MODELS.get(rt.kind)
    if status_model is not None and "status" in props:
        status_root, status_defs = _model_defs(status_model)
        _merge_defs(defs, status_defs | {status_model.__name__: status_root})
        props["status"] = {"$ref": _DEFS + status_model.__name__}
        if docs.get("status"):
            props["status"] = {"description": docs["status"], **props["status"]}
    out: Schema = {}
    if docs.get(""):
        out["description"] = docs[""]
    out.update({k: v for k, v in root.items() if k not in ("description", "properties")})
    out["properties"] = {k: props[k] for k in sorted(props)}
    out["x-kubernetes-group-version-kind"] = [_gvk(rt, rt.kind)]
    return out


def _list_schema(rt: ResourceType, kind_ref: str) -> Schema:
    return {
        "description": f"{rt.kind}List is a list of {rt.kind}",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION, "type": "string"},
            "items": {"description": f"List of {rt.plural}.", "type": "array", "items": {"$ref": kind_ref}},
            "kind": {"description": KIND, "type": "string"},
            "metadata": {"description": LIST_METADATA, "allOf": [{"$ref": SCHEMAS_REF + META + ".ListMeta"}]},
        },
        "x-kubernetes-group-version-kind": [_gvk(rt, rt.kind + "List")],
    }


def _obj(description: str, properties: Schema, **extra: Any) -> Schema:
    return {"description": description, "type": "object", **extra, "properties": properties}


def _s(description: str, typ: str = "string", **extra: Any) -> Schema:
    return {"description": description, "type": typ, **extra}


def _meta_components() -> dict[str, Schema]:
    """The apimachinery types every document references besides ObjectMeta."""
    ref = lambda name: {"$ref": SCHEMAS_REF + META + "." + name}
    return {
        META + ".ListMeta": _obj("ListMeta describes metadata that synthetic resources must have, including lists.", {
            "continue": _s("An opaque token to fetch the next page of a list requested with a limit."),
            "remainingItemCount": _s("The number of items not yet returned.", "integer", format="int64"),
            "resourceVersion": _s("The resourceVersion of the list: watch from it to get every later change."),
            "selfLink": _s("Deprecated and not set by the server."),
        }),
        META + ".Status": _obj("Status is a return value for calls that don't return other objects, and for "
                               "every error.", {
            "apiVersion": _s(API_VERSION), "code": _s("Suggested HTTP return code.", "integer", format="int32"),
            "details": {"description": "Extended data associated with the reason.",
                        "allOf": [ref("StatusDetails")]},
            "kind": _s(KIND), "message": _s("A human-readable description of the status of this operation."),
            "metadata": {"description": LIST_METADATA, "allOf": [ref("ListMeta")]},
            "reason": _s("A machine-readable description of why this operation is in the Failure status."),
            "status": _s("Status of the operation: Success or Failure."),
        }),
        META + ".StatusDetails": _obj("StatusDetails is a set of additional properties set by the server.", {
            "causes": {"description": "The causes of the error (one per invalid field).", "type": "array",
                       "items": ref("StatusCause")},
            "group": _s("The group attribute of the resource."),
            "kind": _s("The kind (or resource name) the status is about."),
            "name": _s("The name of the object the status is about."),
            "retryAfterSeconds": _s("Seconds to wait before retrying.", "integer", format="int32"),
            "uid": _s("UID of the object the status is about."),
        }),
        META + ".StatusCause": _obj("StatusCause provides more information about an error.", {
            "field": _s("The field of the object that caused the error, e.g. spec.containers[0].name."),
            "message": _s("A human-readable description of the cause of the error."),
            "reason": _s("A machine-readable description of the cause of the error."),
        }),
        META + ".DeleteOptions": _obj("DeleteOptions may be provided when deleting an API object.", {
            "apiVersion": _s(API_VERSION),
            "dryRun": {"description": "When present, modifications are not persisted (only All).", "type": "array",
                       "items": {"type": "string"}},
            "gracePeriodSeconds": _s("Seconds before the object is deleted; 0 deletes immediately.", "integer",
                                     format="int64"),
            "kind": _s(KIND),
            "orphanDependents": _s("Deprecated: use propagationPolicy.", "boolean"),
            "preconditions": {"description": "Must be fulfilled before a deletion is carried out.",
                              "allOf": [ref("Preconditions")]},
            "propagationPolicy": _s("Whether and how garbage collection is performed: Orphan, Background or "
                                    "Foreground."),
        }),
        META + ".Preconditions": _obj("Preconditions must be fulfilled before an operation is carried out.", {
            "resourceVersion": _s("The target resourceVersion."), "uid": _s("The target UID."),
        }),
        META + ".Patch": {"description": "Patch is provided to give a concrete name and type to the Kubernetes "
                                         "PATCH request body.", "type": "object"},
    }


def _scale_components() -> dict[str, Schema]:
    """``autoscaling/v1`` Scale, published with the kinds that have a scale subresource (golden 10; no
    ``default`` members, as in every Phalanx document)."""
    ref = lambda name: [{"$ref": SCHEMAS_REF + name}]
    conventions = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
    return {
        SCALE_SCHEMA: {**_obj("Scale represents a scaling request for a resource.", {
            "apiVersion": _s(API_VERSION), "kind": _s(KIND),
            "metadata": {"description": f"Standard object metadata; More info: {conventions}#metadata.",
                         "allOf": ref(META + ".ObjectMeta")},
            "spec": {"description": f"spec defines the behavior of the scale. More info: "
                                    f"{conventions}#spec-and-status.", "allOf": ref(SCALE_SCHEMA + "Spec")},
            "status": {"description": f"status is the current status of the scale. More info: "
                                      f"{conventions}#spec-and-status. Read-only.",
                       "allOf": ref(SCALE_SCHEMA + "Status")},
        }), "x-kubernetes-group-version-kind": [{"group": "autoscaling", "kind": "Scale", "version": "v1"}]},
        SCALE_SCHEMA + "Spec": _obj("ScaleSpec describes the attributes of a scale subresource.", {
            "replicas": _s("replicas is the desired number of instances for the scaled object.", "integer",
                           format="int32")}),
        SCALE_SCHEMA + "Status": _obj("ScaleStatus represents the current status of a scale subresource.", {
            "replicas": _s("replicas is the actual number of observed instances of the scaled object.", "integer",
                           format="int32"),
            "selector": _s("selector is the label query over pods that should match the replicas count, in the "
                           "query-param syntax of label selectors.")}, required=["replicas"]),
    }


# --------------------------------------------------------------------------
# Documents, index, hashes
# --------------------------------------------------------------------------


def _path_key(rt: ResourceType) -> str:
    return f"api/{rt.version}" if not rt.group else f"apis/{rt.group}/{rt.version}"


def group_version_keys() -> list[str]:
    """The index keys served, in registry order: ``api/v1``, ``apis/kubeflow.org/v1``, ..."""
    keys: list[str] = []
    for rt in RESOURCES:
        if _path_key(rt) not in keys:
            keys.append(_path_key(rt))
    return keys


def _normalize(group_version: str) -> str | None:
    """Accepts ``kubeflow.org/v1``, ``v1``, ``api/v1`` or ``apis/kubeflow.org/v1`` (leading slash allowed)."""
    gv = group_version.strip("/")
    if gv.startswith("openapi/v3/"):
        gv = gv[len("openapi/v3/"):]
    keys = group_version_keys()
    if gv in keys:
        return gv
    for candidate in (f"api/{gv}", f"apis/{gv}"):
        if candidate in keys:
            return candidate
    return None


def _build_document(key: str) -> Schema:
    rts = [rt for rt in RESOURCES if _path_key(rt) == key]
    core_group = not rts[0].group or rts[0].group in _BUILTIN_PREFIXES
    defs: dict[str, Schema] = {}
    kinds: list[tuple[ResourceType, Schema]] = [(rt, _kind_schema(rt, defs)) for rt in rts]
    builder = _Builder(defs, inline=not core_group)
    schemas: dict[str, Schema] = {}
    paths: dict[str, Schema] = {}
    for rt, schema in kinds:
        name = f"{_prefix(rt)}.{rt.kind}"
        schemas[name] = builder.resolve(schema)
        schemas[name + "List"] = _list_schema(rt, SCHEMAS_REF + name)
        paths.update(resource_paths(rt, SCHEMAS_REF + name, SCHEMAS_REF + name + "List"))
    builder.resolve({"$ref": _DEFS + "ObjectMeta"})  # always published, as the apiserver does
    schemas.update(builder.components)
    schemas.update(_meta_components())
    if any(rt.kind in SCALE for rt in rts):
        schemas.update(_scale_components())
    info = ({"title": "Kubernetes", "version": "v1.32.0"} if core_group
            else {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"})
    return {"openapi": "3.0.0", "info": info, "paths": {k: paths[k] for k in sorted(paths)},
            "components": {"schemas": {k: schemas[k] for k in sorted(schemas)}}}


def inlined_kind_schema(rt: ResourceType) -> tuple[Schema, dict[str, Schema]]:
    """A kind's schema as a CRD document publishes it — every type inlined
    except apimachinery's, which stay ``$ref``s — and those components by name.
    ``phalanx install`` builds the CRDs' structural schemas from it."""
    defs: dict[str, Schema] = {}
    schema = _kind_schema(rt, defs)
    builder = _Builder(defs, inline=True)
    resolved = builder.resolve(schema)
    return resolved, dict(builder.components)


@lru_cache(maxsize=None)
def _document_bytes(key: str) -> bytes:
    return json.dumps(_build_document(key), separators=(",", ":"), ensure_ascii=False).encode()


def openapi_document_json(group_version: str) -> bytes | None:
    """The served bytes of a group-version's document (cached); None when not served."""
    key = _normalize(group_version)
    return None if key is None else _document_bytes(key)


def openapi_document(group_version: str) -> Schema | None:
    """The per-group-version document (a fresh copy); None when the group-version is not served."""
    data = openapi_document_json(group_version)
    return None if data is None else json.loads(data)


@lru_cache(maxsize=None)
def _hash(key: str) -> str:
    return hashlib.sha512(_document_bytes(key)).hexdigest().upper()


def document_hash(group_version: str) -> str | None:
    """SHA-512 (upper-case hex, as the apiserver) of the served bytes: changes whenever a schema does."""
    key = _normalize(group_version)
    return None if key is None else _hash(key)


def openapi_index(base: str = OPENAPI_BASE) -> Schema:
    """The ``/openapi/v3`` discovery document (docs/REFERENCE.md golden 09)."""
    base = base.rstrip("/")
    return {"paths": {key: {"serverRelativeURL": f"{base}/{key}?hash={_hash(key)}"}
                      for key in group_version_keys()}}


# --------------------------------------------------------------------------
# HTTP replies (the handler only copies these out)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenAPIReply:
    status: int
    headers: dict[str, str]  # Content-Type included
    body: bytes


def _http_date(t: datetime) -> str:
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc)
    return t.strftime("%a, %d %b %Y %H:%M:%S UTC")  # Go's time.RFC1123 of a UTC time


def openapi_v3_reply(subpath: str, query_hash: str | None, now: datetime, if_none_match: str | None = None,
                     base: str = OPENAPI_BASE) -> OpenAPIReply | None:
    """What ``GET {base}/{subpath}`` answers, or None for an unknown path (a 404 Status).

    The index is text/plain (as the apiserver sends it). A document fetched with its
    current ``?hash=`` is immutable for a year; a stale hash is redirected (301) to the
    current one; ``If-None-Match`` with the ETag gets 304.
    """
    sub = subpath.strip("/")
    if not sub:
        body = json.dumps(openapi_index(base), separators=(",", ":")).encode()
        return OpenAPIReply(200, {"Content-Type": "text/plain; charset=utf-8",
                                  "Cache-Control": "no-cache, private"}, body)
    if sub not in group_version_keys():
        return None
    digest = _hash(sub)
    if query_hash and query_hash != digest:
        return OpenAPIReply(301, {"Location": f"{base.rstrip('/')}/{sub}?hash={digest}",
                                  "Content-Type": "text/plain; charset=utf-8"}, b"")
    headers = {"Content-Type": "application/json", "ETag": f'"{digest}"', "Vary": "Accept"}
    if query_hash:
        headers["Cache-Control"] = "public, immutable"
        headers["Expires"] = _http_date(now + timedelta(days=365))
    else:
        headers["Cache-Control"] = "no-cache, private"
    if if_none_match and digest in {t.strip().strip('"') for t in if_none_match.split(",")}:
        return OpenAPIReply(304, {k: v for k, v in headers.items() if k != "Content-Type"}, b"")
    return OpenAPIReply(200, headers, _document_bytes(sub))
