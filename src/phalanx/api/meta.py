"""Shared pydantic building blocks: the base model, Kubernetes scalar types, ObjectMeta.

Models are strict (no "1" -> 1 coercion, as the apiserver refuses it) and
forbid unknown fields; Python names are snake_case, the wire names camelCase.
"""
from __future__ import annotations

import math
import re
from typing import Annotated, Any, Callable

from pydantic import BaseModel, ConfigDict, Field, PlainValidator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from .errors import FieldError, json_type_name
from .quantity import parse_quantity


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


# --- apimachinery name and label validation (exact message texts) ----------------

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # apimachinery's RegexError, including its odd "',  or '" spacing.
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    out = msg + " (e.g. "
    for i, ex in enumerate(examples):
        if i > 0:
            out += " or "
        out += f"'{ex}', "
    return out + f"regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errs.append(_regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                                 "or '-', and must start and end with an alphanumeric character",
                                 _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                                 "characters, '-' or '.', and must start and end with an alphanumeric character",
                                 _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1035_LABEL_MAX:
        errs.append(_max_len(DNS1035_LABEL_MAX))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(_regex_error("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                                 "start with an alphabetic character, and end with an alphanumeric character",
                                 _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def _mask_trailing_dash(name: str) -> str:
    # A generateName prefix may end in "-": the random suffix follows it.
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns1123_subdomain(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1123_label(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool = False) -> list[str]:
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def is_qualified_name(value: str) -> list[str]:
    msg = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return ["a qualified name " + _regex_error(msg, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len(63))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part " + _regex_error(msg, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_regex_error("a valid label must be an empty string or consist of alphanumeric characters, "
                                 "'-', '_' or '.', and must start and end with an alphanumeric character",
                                 _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


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


def validate_labels(labels: dict[str, str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for k in sorted(labels):
        errs += [FieldError(path, "Invalid", m, k) for m in is_qualified_name(k)]
        errs += [FieldError(path, "Invalid", m, labels[k]) for m in is_valid_label_value(labels[k])]
    return errs


def validate_annotations(annotations: dict[str, str], path: str) -> list[FieldError]:
    errs = [FieldError(path, "Invalid", m, k) for k in sorted(annotations) for m in is_qualified_name(k.lower())]
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(FieldError(path, "Invalid", f"must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes",
                               f"{size} bytes"))
    return errs
