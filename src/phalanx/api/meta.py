"""Shared pydantic building blocks: the base model, Kubernetes scalar types, ObjectMeta.

Models are strict (no "1" -> 1 coercion, as the apiserver refuses it) and
forbid unknown fields; Python names are snake_case, the wire names camelCase.
"""
from __future__ import annotations

import functools
import math
from typing import Annotated, Any, Callable

from pydantic import BaseModel, ConfigDict, Field, PlainValidator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from phalanx.objects.errors import FieldError, json_type_name
from phalanx.objects.names import is_dns1123_label, is_qualified_name, is_valid_label_value, name_is_dns1123_subdomain
from phalanx.objects.quantity import parse_quantity


class K8sModel(BaseModel):
    """Base of every typed resource: camelCase wire names, unknown fields refused."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-shaped dict with wire names; unset (None) fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True)


def _quantity(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise PydanticCustomError("k8s_type", "must be of type {expected}",
                                  {"expected": "integer or string", "actual": json_type_name(v)})
    try:
        parse_quantity(v)
    except ValueError as e:
        raise PydanticCustomError("k8s_quantity", "{detail}", {"detail": str(e)}) from None
    return v  # kept as written: "1" stays "1", 2 stays 2


def _int_or_string(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise PydanticCustomError("k8s_type", "must be of type {expected}",
                                  {"expected": "integer or string", "actual": json_type_name(v)})
    return v


def _number(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        raise PydanticCustomError("k8s_type", "must be of type {expected}",
                                  {"expected": "number", "actual": json_type_name(v)})
    return v


Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
Quantity = Annotated[Any, PlainValidator(_quantity)]
IntOrString = Annotated[Any, PlainValidator(_int_or_string)]
Number = Annotated[Any, PlainValidator(_number)]
ResourceList = dict[str, Quantity]
FreeDict = dict[str, Any]  # a nested object we store but do not type (affinity, probes, ...)
Time = str  # RFC 3339, e.g. "2026-11-29T07:12:41Z"


class OwnerReference(K8sModel):
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(K8sModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    self_link: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: Int64 | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    deletion_grace_period_seconds: Int64 | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[FreeDict] | None = None


class TemplateMeta(ObjectMeta):
    """metadata of a PodTemplateSpec (the CRDs declare name, namespace, labels,
    annotations, finalizers; the rest of ObjectMeta is accepted too)."""


class LabelSelectorRequirement(K8sModel):
    key: str
    operator: str
    values: list[str] | None = None


class LabelSelector(K8sModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class Condition(K8sModel):
    """A generic status condition (status sections stay free-form dicts on
    input; this model is for typed reading)."""

    model_config = ConfigDict(extra="allow")

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: Time | None = None
    last_update_time: Time | None = None


TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


NameRule = Callable[[str, bool], list[str]]  # (name, is_prefix) -> messages


def validate_object_meta(meta: dict[str, Any], *, namespaced: bool,
                         name_fn: NameRule = name_is_dns1123_subdomain, path: str = "metadata") -> list[FieldError]:
    """ObjectMeta rules the apiserver applies to every kind (ValidateObjectMeta):
    name or generateName, the namespace a DNS label, labels, annotations,
    owner references. ``name_fn`` is the kind's name rule."""
    errs: list[FieldError] = []
    gen = meta.get("generateName")
    if gen:
        errs += [FieldError(f"{path}.generateName", "Invalid", m, gen) for m in name_fn(gen, True)]
    name = meta.get("name")
    if not name:
        if not gen:
            errs.append(FieldError(f"{path}.name", "Required", "name or generateName is required"))
    else:
        errs += [FieldError(f"{path}.name", "Invalid", m, name) for m in name_fn(name, False)]
    ns = meta.get("namespace")
    if namespaced:
        if ns:
            errs += [FieldError(f"{path}.namespace", "Invalid", m, ns) for m in is_dns1123_label(ns)]
    errs += validate_labels(meta.get("labels") or {}, f"{path}.labels")
    errs += validate_annotations(meta.get("annotations") or {}, f"{path}.annotations")
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        p = f"{path}.ownerReferences[{i}]"
        for key, what in (("apiVersion", "version"), ("kind", "kind"), ("name", "name"), ("uid", "uid")):
            if not ref.get(key):
                errs.append(FieldError(f"{p}.{key}", "Invalid", f"{what} must not be empty", ref.get(key, "")))
    return errs


# Label keys and values, annotation keys: a few distinct strings written over and over
# (every pod of a job carries the same keys), so their checks are remembered.
@functools.lru_cache(maxsize=4096)
def _key_problems(key: str) -> tuple[str, ...]:
    return tuple(is_qualified_name(key))


@functools.lru_cache(maxsize=4096)
def _label_value_problems(value: str) -> tuple[str, ...]:
    return tuple(is_valid_label_value(value))


def validate_labels(labels: dict[str, str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for k in sorted(labels):
        v = labels[k]
        errs += [FieldError(path, "Invalid", m, k) for m in _key_problems(k)]
        errs += [FieldError(path, "Invalid", m, v) for m in _label_value_problems(v)]
    return errs


def validate_annotations(annotations: dict[str, str], path: str) -> list[FieldError]:
    errs = [FieldError(path, "Invalid", m, k) for k in sorted(annotations) for m in _key_problems(k.lower())]
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(FieldError(path, "Invalid", f"must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes",
                               f"{size} bytes"))
    return errs
