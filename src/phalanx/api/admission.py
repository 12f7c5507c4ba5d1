"""Admission: the one gate every object passes on create and update.

The steps follow a real apiserver with the Kubeflow webhook installed:
decode strictly (unknown field -> 400 "strict decoding error"), check the
schema (wrong type, bounds -> 422 Invalid), apply defaults, validate names and
per-kind rules (422), Phalanx's elastic bounds on a job update (422), then the
training operator's webhook rules (403 Forbidden "admission webhook ...
denied the request"). Unlike the original,
defaults are applied before the webhook and stored (docs/SEMANTICS.md S1), and
MPIJobs, which the original validates only in its controller, are refused
here too, under the webhook name ``validator.mpijob.phalanx.dev``.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from phalanx.api import (
    autoscaling,
    autoscaling_validation,
    core,
    kubeflow,
    kubeflow_validation,
    opaque,
    scheduling,
    volcano,
    webhookconfig,
)
from phalanx.api.constants import DEFAULT_NAMESPACE
from phalanx.api.manifest import MAX_DEPTH, ShapeError, normalize_json
from phalanx.api.meta import NameRule, json_type_name, validate_object_meta
from phalanx.api.registry import OPAQUE_KINDS, ResourceType, by_kind
from phalanx.objects.errors import ApiError, BadRequest, FieldError, Forbidden, Invalid
from phalanx.objects.names import name_is_dns1035_label, name_is_dns1123_label, name_is_dns1123_subdomain

Obj = dict[str, Any]
MAX_ERRORS = 100  # an error list longer than this is cut (hostile input)
_MAX_SHOWN_CHARS = 256


class StrictDecodingError(Invalid):
    """Unknown fields: refused before any other check, with the apiserver's
    400 wording (``... cannot be handled as a PyTorchJob: strict decoding
    error: unknown field "spec.x"``). ``errors`` has one FieldError per field."""

    code = 400
    reason = "BadRequest"

    def __init__(self, errors: list[FieldError], kind: str, version: str) -> None:
        super().__init__(errors)
        details = ", ".join(e.detail for e in self.errors)
        self.message = f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {details}'
        self.args = (self.message,)


class WebhookDenied(Forbidden):
    """A validating webhook said no (403), like the training operator's."""

    def __init__(self, webhook: str, errors: list[FieldError]) -> None:
        self.errors = list(errors)
        body = str(self.errors[0]) if len(self.errors) == 1 else "[" + ", ".join(str(e) for e in self.errors) + "]"
        super().__init__(f'admission webhook "{webhook}" denied the request: {body}')
        self.webhook = webhook
        self.detail = body  # what follows "denied the request: " (an AdmissionReview's status.message)


@dataclass(frozen=True)
class _Kind:
    model: type[BaseModel]
    name_rule: NameRule
    default: Callable[[Obj, Obj | None], None] = lambda obj, old: None
    validate: Callable[[Obj, Obj | None], list[FieldError]] = lambda obj, old: []


def _default_job(fw: kubeflow.Framework) -> Callable[[Obj, Obj | None], None]:
    return lambda obj, old: kubeflow.default_job(obj, fw)


def _validate_job(fw: kubeflow.Framework) -> Callable[[Obj, Obj | None], list[FieldError]]:
    return lambda obj, old: kubeflow_validation.validate_job_schema(obj, old, fw)


def _default_namespace(obj: Obj, old: Obj | None) -> None:
    obj.setdefault("status", {}).setdefault("phase", "Active")


_KINDS: dict[str, _Kind] = {
    "Pod": _Kind(core.Pod, name_is_dns1123_subdomain,
                 default=lambda obj, old: core.default_pod(obj, creating=old is None),
                 validate=lambda obj, old: core.validate_pod_spec(obj.get("spec") or {}) + _pod_priority_fields(obj)),
    "Service": _Kind(core.Service, name_is_dns1035_label,
                     default=lambda obj, old: core.default_service(obj),
                     validate=lambda obj, old: core.validate_service_spec(obj.get("spec") or {})),
    "Node": _Kind(core.Node, name_is_dns1123_subdomain),
    "Namespace": _Kind(core.Namespace, name_is_dns1123_label, default=_default_namespace),
    "Event": _Kind(core.Event, name_is_dns1123_subdomain),
    "ConfigMap": _Kind(core.ConfigMap, name_is_dns1123_subdomain),
    "Secret": _Kind(core.Secret, name_is_dns1123_subdomain, default=lambda obj, old: core.default_secret(obj),
                    validate=lambda obj, old: core.validate_secret(obj)),
    "PyTorchJob": _Kind(kubeflow.PyTorchJob, name_is_dns1123_subdomain,
                        default=_default_job(kubeflow.PYTORCH), validate=_validate_job(kubeflow.PYTORCH)),
    "TFJob": _Kind(kubeflow.TFJob, name_is_dns1123_subdomain,
                   default=_default_job(kubeflow.TENSORFLOW), validate=_validate_job(kubeflow.TENSORFLOW)),
    "XGBoostJob": _Kind(kubeflow.XGBoostJob, name_is_dns1123_subdomain,
                        default=_default_job(kubeflow.XGBOOST), validate=_validate_job(kubeflow.XGBOOST)),
    "PaddleJob": _Kind(kubeflow.PaddleJob, name_is_dns1123_subdomain,
                       default=_default_job(kubeflow.PADDLE), validate=_validate_job(kubeflow.PADDLE)),
    "JAXJob": _Kind(kubeflow.JAXJob, name_is_dns1123_subdomain,
                    default=_default_job(kubeflow.JAX), validate=_validate_job(kubeflow.JAX)),
    # The original validates MPIJobs in its controller (no webhook); Phalanx refuses them here.
    "MPIJob": _Kind(kubeflow.MPIJob, name_is_dns1123_subdomain,
                    default=_default_job(kubeflow.MPI), validate=_validate_job(kubeflow.MPI)),
    "PodGroup": _Kind(volcano.PodGroup, name_is_dns1123_subdomain,
                      default=lambda obj, old: volcano.default_podgroup(obj),
                      validate=lambda obj, old: volcano.validate_podgroup(obj)),
    "Queue": _Kind(volcano.Queue, name_is_dns1123_subdomain,
                   default=lambda obj, old: volcano.default_queue(obj),
                   validate=lambda obj, old: volcano.validate_queue(obj)),
    # globalDefault's uniqueness needs the other classes: the store's Priority admission plugin.
    "PriorityClass": _Kind(scheduling.PriorityClass, name_is_dns1123_subdomain,
                           default=lambda obj, old: scheduling.default_priority_class(obj),
                           validate=scheduling.validate_priority_class),
    "HorizontalPodAutoscaler": _Kind(autoscaling.HorizontalPodAutoscaler, name_is_dns1123_subdomain,
                                     default=lambda obj, old: autoscaling.default_hpa(obj),
                                     validate=autoscaling_validation.validate_hpa),
}
# Stored as given (phalanx.api.opaque): only apiVersion/kind and metadata are checked.
_KINDS.update({k: _Kind(opaque.OpaqueObject, name_is_dns1123_subdomain, default=opaque.default_opaque)
               for k in OPAQUE_KINDS})
# The webhook configurations the API server calls: their shape is checked and defaulted.
_KINDS.update({k: _Kind(opaque.OpaqueObject, name_is_dns1123_subdomain, default=webhookconfig.default_configuration,
                        validate=webhookconfig.validate_configuration)
               for k in webhookconfig.KINDS})


def _pod_priority_fields(pod: Obj) -> list[FieldError]:
    """A pod's priorityClassName is a DNS subdomain and its preemptionPolicy a known one (ValidatePodSpec).
    Their values come from the class (the store's Priority admission plugin)."""
    spec = pod.get("spec") or {}
    errs: list[FieldError] = []
    name = spec.get("priorityClassName")
    if isinstance(name, str) and name:
        errs += [FieldError("spec.priorityClassName", "Invalid", msg, name)
                 for msg in name_is_dns1123_subdomain(name, False)]
    return errs + scheduling.validate_preemption_policy(spec.get("preemptionPolicy"), "spec.preemptionPolicy")


def admit(obj: Any, old: Obj | None = None, *, namespace_default: str = DEFAULT_NAMESPACE,
          warnings: list[str] | None = None, kubeflow_admission: bool = True, trusted: bool = False) -> Obj:
    """Parse, default and validate ``obj``; return the object to store.

    ``old`` is the stored object on update (for immutable fields). The input
    is never modified. Raises only ``phalanx.objects.errors`` exceptions:
    BadRequest (not an object, unknown kind), StrictDecodingError (unknown
    fields, 400), Invalid (schema and apiserver rules, 422), WebhookDenied
    (Kubeflow webhook rules, 403). Webhook warnings are appended to
    ``warnings`` when a list is given. ``kubeflow_admission=False`` is a
    plain apiserver with the CRDs installed and no training operator webhook:
    the job kinds are decoded and checked against their schema only (no
    defaults, no webhook rules); every other kind is admitted as usual.
    ``trusted``: a write of the control plane's own components, which build
    their objects from admitted ones: the schema decoding (unknown fields,
    JSON types) is skipped; the shape check, defaults and every validation
    rule still run.
    """
    try:
        return _admit(obj, old, namespace_default, warnings, kubeflow_admission, trusted)
    except ApiError:
        raise
    except RecursionError:
        raise BadRequest("object nesting is too deep") from None
    except Exception as e:  # a bug, never the user's fault: still an API error, never a crash
        raise ApiError(_short(f"internal error during admission: {type(e).__name__}: {e}", 500)) from e


# admit never changes its input and returns a fresh deep copy (normalize_json):
# the store relies on it to skip its own deep copy (Store._own_copy).
admit.returns_fresh_copy = True  # type: ignore[attr-defined]
admit.accepts_trusted = True  # type: ignore[attr-defined]


def plain_admit(obj: Any, old: Obj | None = None, **kwargs: Any) -> Obj:
    """``admit`` as a plain apiserver with the CRDs does it (``kubeflow_admission=False``)."""
    return admit(obj, old, kubeflow_admission=False, **kwargs)


plain_admit.returns_fresh_copy = True  # type: ignore[attr-defined]
plain_admit.accepts_trusted = True  # type: ignore[attr-defined]


def default_object(obj: Any, old: Obj | None = None, *, namespace_default: str = DEFAULT_NAMESPACE) -> Obj:
    """The first steps of ``admit``: parse and apply the kind's defaults, no
    validation after them (a mutating webhook's part). Raises as ``admit``
    does when the object cannot be parsed; the input is never modified."""
    try:
        return _parse_and_default(obj, old if isinstance(old, dict) else None, namespace_default, True, False)[0]
    except ApiError:
        raise
    except RecursionError:
        raise BadRequest("object nesting is too deep") from None
    except Exception as e:  # a bug, never the user's fault: still an API error, never a crash
        raise ApiError(_short(f"internal error during admission: {type(e).__name__}: {e}", 500)) from e


def _admit(obj: Any, old: Obj | None, namespace_default: str, warnings: list[str] | None,
           kubeflow_admission: bool, trusted: bool) -> Obj:
    old = old if isinstance(old, dict) else None
    data, rt, kind, prefix = _parse_and_default(obj, old, namespace_default, kubeflow_admission, trusted)
    meta = data["metadata"]
    errs = validate_object_meta(meta, namespaced=rt.namespaced, name_fn=kind.name_rule)
    errs += kind.validate(data, old)
    if errs:
        raise Invalid(_clip(errs), prefix=prefix)

    fw = kubeflow.FRAMEWORKS.get(rt.kind)
    if fw is not None and kubeflow_admission:
        errs = kubeflow_validation.validate_elastic_bounds(data, old, fw)
        if errs:
            raise Invalid(errs, prefix=prefix)
        errs = kubeflow_validation.validate_job_webhook(data, old, fw, warnings)
        if errs:
            raise WebhookDenied(fw.webhook, _clip(errs))
    return data


def _parse_and_default(obj: Any, old: Obj | None, namespace_default: str,
                       kubeflow_defaults: bool, trusted: bool) -> tuple[Obj, ResourceType, _Kind, str]:
    if not isinstance(obj, dict):
        raise BadRequest(f"the object must be a mapping (JSON object), got {json_type_name(obj)}")
    rt = _resource_type(obj)
    kind = _KINDS[rt.kind]
    name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
    prefix = _invalid_prefix(rt, name if isinstance(name, str) else "")
    try:
        data = normalize_json(obj, max_depth=MAX_DEPTH)
    except ShapeError as e:
        path = _short(_render_loc(kind.model, e.loc)[0], 160) if e.loc else "<root>"
        raise Invalid([FieldError(path, "Invalid", e.detail, e.value_type)], prefix=prefix) from None
    if not trusted:
        _parse(kind.model, data, rt, prefix)

    meta = data.setdefault("metadata", {})
    if rt.namespaced:
        if not meta.get("namespace"):
            meta["namespace"] = namespace_default
    else:
        meta.pop("namespace", None)  # as the apiserver clears it for cluster-scoped kinds

    if kubeflow_defaults or rt.kind not in kubeflow.FRAMEWORKS:
        kind.default(data, old)
    return data, rt, kind, prefix


def _resource_type(obj: Obj) -> ResourceType:
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    for field, value in (("Kind", kind), ("apiVersion", api_version)):
        if value is None or value == "":
            raise BadRequest(f"Object '{field}' is missing in '{_preview(obj)}'")
        if not isinstance(value, str):
            raise BadRequest(f"Object '{field}' must be a string, got {json_type_name(value)}")
    kind, api_version = typing.cast(str, kind), typing.cast(str, api_version)  # both checked above
    try:
        rt = by_kind(kind)
    except KeyError:
        rt = None
    if rt is None or rt.api_version != api_version or rt.kind not in _KINDS:
        raise BadRequest(f'no matches for kind "{_short(kind)}" in version "{_short(api_version)}"')
    return rt


def _invalid_prefix(rt: ResourceType, name: str) -> str:
    resource = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    return f'{resource} "{_short(name)}" is invalid: '


# --- schema errors: pydantic's error list in the apiserver's words --------------------

def _parse(model: type[BaseModel], data: Obj, rt: ResourceType, prefix: str) -> None:
    try:
        model.model_validate(data, by_name=False)
    except ValidationError as e:
        raw = e.errors(include_url=False)
    else:
        return
    unknown: list[tuple[str, FieldError]] = []
    invalid: list[FieldError] = []
    for err in raw:
        path, dotted, annotation = _render_loc(model, err["loc"])
        if err["type"] == "extra_forbidden":
            unknown.append((dotted, FieldError(path, "Unknown", f'unknown field "{dotted}"')))
        else:
            invalid.append(_schema_error(err, path, annotation))
    if unknown:
        unknown.sort(key=lambda t: t[0])
        raise StrictDecodingError(_clip([fe for _, fe in unknown]), rt.kind, rt.version)
    raise Invalid(_clip(invalid), prefix=prefix)


_TYPE_NAMES = {
    "string_type": "string", "int_type": "integer", "int_from_float": "integer", "int_parsing": "integer",
    "bool_type": "boolean", "float_type": "number", "dict_type": "object", "model_type": "object",
    "model_attributes_type": "object", "list_type": "array",
}


def _schema_error(err: ErrorDetails, path: str, annotation: Any) -> FieldError:
    typ, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if typ == "missing":
        return FieldError(path, "Required")
    if typ in _TYPE_NAMES or typ == "k8s_type":
        expected = ctx.get("expected") if typ == "k8s_type" else _TYPE_NAMES[typ]
        actual = json_type_name(value)
        return FieldError(path, "Invalid", f'{path} in body must be of type {expected}: "{actual}"', actual)
    if typ == "literal_error":
        supported = tuple(str(v) for v in typing.get_args(annotation) if v != "") if annotation else ()
        return FieldError(path, "NotSupported", value=_shown(value), supported=supported)
    if typ in ("less_than_equal", "greater_than_equal"):
        bound = ctx.get("le", ctx.get("ge"))
        word = "less" if typ == "less_than_equal" else "greater"
        return FieldError(path, "Invalid", f"{path} in body should be {word} than or equal to {bound}", _shown(value))
    if typ == "k8s_quantity":
        return FieldError(path, "Invalid", str(ctx.get("detail", "")), _shown(value))
    return FieldError(path, "Invalid", str(err.get("msg", "")), _shown(value))


def _render_loc(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[str, str, Any]:
    """A pydantic location as a field path: map keys as ``[Master]`` (the
    webhook's field.Path style) and as ``.Master`` (the apiserver's strict
    decoder style); also returns the annotation found there (or None)."""
    path, dotted = "", ""
    t: Any = model
    for el in loc:
        t = _unwrap(t)
        if isinstance(el, int):
            path += f"[{el}]"
            dotted += f"[{el}]"
            t = _item_type(t)
        elif el == "":  # a field named "" still gets a path that can be read
            path += '[""]'
            dotted += '[""]'
            t = None
        elif isinstance(t, type) and issubclass(t, BaseModel):
            sep = "." if path else ""
            path += sep + str(el)
            dotted += sep + str(el)
            t = _fields_by_alias(t).get(str(el))
        elif typing.get_origin(t) is dict and typing.get_args(t)[1] is not Any:
            path += f"[{el}]"  # a typed map: labels, resource lists, replica specs
            dotted += f".{el}"
            t = typing.get_args(t)[1]
        else:
            path += f".{el}"
            dotted += f".{el}"
            t = None
    return path, dotted, _unwrap(t)


@functools.cache
def _fields_by_alias(model: type[BaseModel]) -> dict[str, Any]:
    return {(f.alias or name): f.annotation for name, f in model.model_fields.items()}


def _unwrap(t: Any) -> Any:
    """Optional[X] -> X, Annotated[X, ...] -> X."""
    while True:
        origin = typing.get_origin(t)
        if origin is typing.Annotated:
            t = typing.get_args(t)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(t) if a is not type(None)]
            if len(args) != 1:
                return t
            t = args[0]
        else:
            return t


def _item_type(t: Any) -> Any:
    if typing.get_origin(t) is list:
        return typing.get_args(t)[0]
    return None


# --- small helpers ---------------------------------------------------------------------

def _shown(v: Any) -> Any:
    """A value safe to print in an error: long strings cut, containers named by type."""
    if isinstance(v, str):
        return _short(v)
    if isinstance(v, (dict, list, tuple)):
        return json_type_name(v)
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 256:
        return "a very large integer"
    return v


def _clip(errs: list[FieldError]) -> list[FieldError]:
    """At most MAX_ERRORS errors, each with a printable value and a bounded path."""
    out = []
    for e in errs[:MAX_ERRORS]:
        out.append(dataclasses.replace(e, value=_shown(e.value), path=_short(e.path, 512),
                                       detail=_short(e.detail, 2048)))
    return out


def _short(s: str, limit: int = _MAX_SHOWN_CHARS) -> str:
    return s if len(s) <= limit else s[:limit] + "..."


def _preview(obj: Obj) -> str:
    """The top level of an object, for messages (never its whole body)."""
    shallow = {str(k): (v if isinstance(v, (str, int, float, bool)) or v is None else "...")
               for k, v in list(obj.items())[:10]}
    return _short(json.dumps(shallow, default=str), 200)


__all__ = ["admit", "default_object", "plain_admit", "StrictDecodingError", "WebhookDenied"]
