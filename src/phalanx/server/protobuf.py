"""Kubernetes protobuf request bodies (``application/vnd.kubernetes.protobuf``) read as JSON objects.

A body is the 4-byte magic ``k8s\\0`` and a ``runtime.Unknown`` {typeMeta, raw,
contentEncoding, contentType}; ``raw`` is the kind's message from k8s.io/api
(schemas in ``k8s_descriptors``, as compiled into kubectl). ``decode_object``
returns the dict the same object sent as JSON would give, so both paths meet
the same admission; bad input raises ``BadRequest`` in the apiserver's words.

Go writes every non-pointer field, zero or not, so a zero scalar on the wire
is read as unset (JSON ``omitempty``), except for the pointer fields listed
in ``_POINTER_FIELDS``, where zero/false is a value (``replicas: 0``,
``runAsUser: 0``, ``automountServiceAccountToken: false``).
"""
from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from phalanx.objects.errors import BadRequest
from phalanx.server import protobuf_reviews
from phalanx.server.k8s_descriptors import FILE_DESCRIPTOR_SET

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
_RUNTIME = "k8s.io.apimachinery.pkg.runtime"
# API group/version -> the proto package of its messages.
PACKAGES: dict[str, str] = {
    "v1": "k8s.io.api.core.v1",
    "apps/v1": "k8s.io.api.apps.v1",
    "rbac.authorization.k8s.io/v1": "k8s.io.api.rbac.v1",
    "scheduling.k8s.io/v1": "k8s.io.api.scheduling.v1",
    **protobuf_reviews.PACKAGES,
}
# Options every group version serves, defined once in meta/v1.
_META_KINDS = frozenset({"DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions"})
_GROUPS = frozenset(av.split("/")[0] if "/" in av else "" for av in PACKAGES)
_MAX_DEPTH = 100

# Go pointer fields (``*int32``, ``*bool``, ...) of the kinds Phalanx stores whose zero is a value.
_POINTER_FIELDS: dict[str, frozenset[str]] = {k: frozenset(v.split()) for k, v in {
    f"{_META}.ObjectMeta": "deletionGracePeriodSeconds",
    f"{_META}.OwnerReference": "controller blockOwnerDeletion",
    f"{_META}.DeleteOptions": "gracePeriodSeconds orphanDependents ignoreStoreReadErrorWithClusterBreakingPotential",
    "k8s.io.api.core.v1.PodSpec": "terminationGracePeriodSeconds activeDeadlineSeconds automountServiceAccountToken "
                                  "shareProcessNamespace priority enableServiceLinks setHostnameAsFQDN hostUsers",
    "k8s.io.api.core.v1.PodSecurityContext": "runAsUser runAsGroup runAsNonRoot fsGroup",
    "k8s.io.api.core.v1.SecurityContext": "privileged runAsUser runAsGroup runAsNonRoot readOnlyRootFilesystem "
                                          "allowPrivilegeEscalation",
    "k8s.io.api.core.v1.WindowsSecurityContextOptions": "hostProcess",
    "k8s.io.api.core.v1.Probe": "terminationGracePeriodSeconds",
    "k8s.io.api.core.v1.Toleration": "tolerationSeconds",
    "k8s.io.api.core.v1.TopologySpreadConstraint": "minDomains",
    "k8s.io.api.core.v1.ConfigMapVolumeSource": "defaultMode optional",
    "k8s.io.api.core.v1.SecretVolumeSource": "defaultMode optional",
    "k8s.io.api.core.v1.ProjectedVolumeSource": "defaultMode",
    "k8s.io.api.core.v1.DownwardAPIVolumeSource": "defaultMode",
    "k8s.io.api.core.v1.DownwardAPIVolumeFile": "mode",
    "k8s.io.api.core.v1.KeyToPath": "mode",
    "k8s.io.api.core.v1.ConfigMapProjection": "optional",
    "k8s.io.api.core.v1.SecretProjection": "optional",
    "k8s.io.api.core.v1.ConfigMapKeySelector": "optional",
    "k8s.io.api.core.v1.SecretKeySelector": "optional",
    "k8s.io.api.core.v1.ConfigMapEnvSource": "optional",
    "k8s.io.api.core.v1.SecretEnvSource": "optional",
    "k8s.io.api.core.v1.ServiceAccountTokenProjection": "expirationSeconds",
    "k8s.io.api.core.v1.CSIVolumeSource": "readOnly",
    "k8s.io.api.core.v1.ServiceAccount": "automountServiceAccountToken",
    "k8s.io.api.core.v1.ConfigMap": "immutable",
    "k8s.io.api.core.v1.Secret": "immutable",
    "k8s.io.api.core.v1.ServiceSpec": "allocateLoadBalancerNodePorts",
    "k8s.io.api.core.v1.ClientIPConfig": "timeoutSeconds",
    "k8s.io.api.apps.v1.DeploymentSpec": "replicas revisionHistoryLimit progressDeadlineSeconds",
}.items()} | protobuf_reviews.POINTER_FIELDS

# Go structs embedded with ``json:",inline"``: their fields are the parent's in JSON
# (and every ``localObjectReference``: ConfigMap/Secret selectors, sources, projections).
_INLINE = frozenset({
    ("k8s.io.api.core.v1.Probe", "handler"),
    ("k8s.io.api.core.v1.Volume", "volumeSource"),
    ("k8s.io.api.core.v1.PersistentVolumeSpec", "persistentVolumeSource"),
    ("k8s.io.api.core.v1.EphemeralContainer", "ephemeralContainerCommon"),
})


@lru_cache(maxsize=1)
def _pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(any_pb2.DESCRIPTOR.serialized_pb)
    for f in descriptor_pb2.FileDescriptorSet.FromString(FILE_DESCRIPTOR_SET).file:
        pool.Add(f)
    for f in protobuf_reviews.files():
        pool.Add(f)
    return pool


def message_class(full_name: str) -> type[Message]:
    """The generated message class of ``full_name`` (e.g. ``openapi.v2.Document``)."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(full_name))


def supports_group(group: str) -> bool:
    """Whether objects of this API group can be sent as protobuf (the built-in groups with a schema here)."""
    return group in _GROUPS


def _message_for(api_version: str, kind: str) -> type[Message] | None:
    package = _META if kind in _META_KINDS else PACKAGES.get(api_version)
    if package is None or not kind.isidentifier():
        return None
    try:
        return message_class(f"{package}.{kind}")
    except KeyError:
        return None


def _summary(raw: bytes) -> str:
    return raw[:30].hex()


def decode_object(raw: bytes, expected_kind: str) -> dict[str, Any]:
    """The object in a protobuf body, as its JSON form (``kind``, ``apiVersion``, then its fields).
    ``expected_kind`` is the URL's kind (named in the errors)."""
    if not raw.startswith(MAGIC):
        raise BadRequest(f"the object provided is unrecognized (must be of type {expected_kind}): provided data "
                         f"does not appear to be a protobuf message, expected prefix [107 56 115 0] "
                         f"({_summary(raw)})")
    unknown = message_class(f"{_RUNTIME}.Unknown")()
    try:
        unknown.ParseFromString(raw[len(MAGIC):])
    except DecodeError as e:
        raise BadRequest(f"the object provided is unrecognized (must be of type {expected_kind}): "
                         f"the protobuf envelope cannot be decoded: {e} ({_summary(raw)})") from None
    api_version, kind = unknown.typeMeta.apiVersion, unknown.typeMeta.kind
    if unknown.contentEncoding:
        raise BadRequest(f"{kind} in version \"{_version(api_version)}\" cannot be handled as a {expected_kind}: "
                         f"unsupported contentEncoding {unknown.contentEncoding[:64]!r}")
    if unknown.contentType not in ("", MEDIA_TYPE):
        raise BadRequest(f"{kind} in version \"{_version(api_version)}\" cannot be handled as a {expected_kind}: "
                         f"unsupported contentType {unknown.contentType[:64]!r}")
    cls = _message_for(api_version, kind)
    if cls is None:
        shown_kind, shown_av = kind[:64], api_version[:64]
        raise BadRequest(f'no kind "{shown_kind}" is registered for version "{shown_av}" in scheme '
                         f'"pkg/api/legacyscheme/scheme.go:30"' if kind else
                         f"the object provided is unrecognized (must be of type {expected_kind}): "
                         f"Object 'Kind' is missing in the protobuf envelope ({_summary(raw)})")
    msg = cls()
    try:
        msg.ParseFromString(unknown.raw)
    except (DecodeError, RecursionError) as e:
        raise BadRequest(f"{kind} in version \"{_version(api_version)}\" cannot be handled as a {expected_kind}: "
                         f"{e}") from None
    body = _message(msg, 0)
    if not isinstance(body, dict):
        raise BadRequest(f"{kind} in version \"{_version(api_version)}\" cannot be handled as a {expected_kind}")
    return {"kind": kind, "apiVersion": api_version, **body}


def _version(api_version: str) -> str:
    return api_version.split("/")[-1][:64]


# --- messages to JSON values -------------------------------------------------------------

_OMIT = object()


def _time(msg: Message, micro: bool) -> Any:
    seconds, nanos = msg.seconds, msg.nanos
    if not seconds and not nanos:
        return _OMIT  # Go's zero time: null in JSON, i.e. unset
    try:
        t = datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise BadRequest(f"a timestamp is out of range: {seconds} seconds") from None
    if micro:
        return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _go_duration(ns: int) -> str:
    """Go's ``time.Duration.String()``: 1h2m3.5s, 1.5ms, 0s."""
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _trim(ns / size) + unit
    h, rest = divmod(ns, 3_600_000_000_000)
    m, rest = divmod(rest, 60_000_000_000)
    s = _trim(rest / 1e9) + "s"
    return sign + (f"{h}h{m}m{s}" if h else f"{m}m{s}" if m else s)


def _trim(x: float) -> str:
    return f"{x:.9f}".rstrip("0").rstrip(".")


def _raw_json(data: bytes, what: str) -> Any:
    if not data:
        return _OMIT
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadRequest(f"{what}: the embedded object is not valid JSON") from None


_SPECIAL = {
    f"{_META}.Time": lambda m: _time(m, micro=False),
    f"{_META}.MicroTime": lambda m: _time(m, micro=True),
    f"{_META}.Duration": lambda m: _go_duration(m.duration),
    f"{_META}.FieldsV1": lambda m: _raw_json(m.Raw, "fieldsV1"),
    f"{_RUNTIME}.RawExtension": lambda m: _raw_json(m.raw, "raw extension"),
    "k8s.io.apimachinery.pkg.api.resource.Quantity": lambda m: m.string if m.string else _OMIT,
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": lambda m: m.strVal if m.type == 1 else m.intVal,
}


def _message(msg: Message, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise BadRequest("the request body is nested too deeply")
    desc: Descriptor = msg.DESCRIPTOR
    special = _SPECIAL.get(desc.full_name)
    if special is not None:
        return special(msg)
    pointers = _POINTER_FIELDS.get(desc.full_name, frozenset())
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        v = _field(fd, value, fd.name in pointers, depth)
        if ((desc.full_name, fd.name) in _INLINE or fd.name == "localObjectReference") and isinstance(v, dict):
            out.update(v)
        elif v is not _OMIT:
            out[fd.name] = v
    return out


def _scalar(fd: FieldDescriptor, value: Any) -> Any:
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    return value


def _field(fd: FieldDescriptor, value: Any, pointer: bool, depth: int) -> Any:
    mt = fd.message_type
    if mt is not None and mt.GetOptions().map_entry:
        vfd = mt.fields_by_name["value"]
        if vfd.message_type is not None:
            return {k: _message(v, depth + 1) for k, v in value.items()}
        return {k: _scalar(vfd, v) for k, v in value.items()}
    if fd.is_repeated:
        if mt is not None:
            return [v for v in (_message(x, depth + 1) for x in value) if v is not _OMIT]
        return [_scalar(fd, x) for x in value]
    if mt is not None:
        return _message(value, depth + 1)
    if not pointer and not value:
        return _OMIT  # a non-pointer zero: what omitempty leaves out
    return _scalar(fd, value)
