"""Protobuf schemas of the authentication.k8s.io/v1 and authorization.k8s.io/v1 requests kubectl sends.

``kubectl create token``, ``auth can-i`` and ``auth whoami`` send their TokenRequest,
SelfSubjectAccessReview and SelfSubjectReview as protobuf. These are the request
fields of k8s.io/api's generated.proto for them (same names and numbers; the
status fields, which the server fills, are left out and so ignored on the wire).
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2

_META_FILE = "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto"
_OBJECT_META = ".k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_F = descriptor_pb2.FieldDescriptorProto

# message -> [(field, number, type: "string" | "int64" | ".<message>", repeated)]
_AUTHENTICATION: dict[str, list[tuple[str, int, str, bool]]] = {
    "BoundObjectReference": [("kind", 1, "string", False), ("apiVersion", 2, "string", False),
                             ("name", 3, "string", False), ("uid", 4, "string", False)],
    "TokenRequest": [("metadata", 1, _OBJECT_META, False), ("spec", 2, ".TokenRequestSpec", False)],
    "TokenRequestSpec": [("audiences", 1, "string", True), ("boundObjectRef", 3, ".BoundObjectReference", False),
                         ("expirationSeconds", 4, "int64", False)],
    "TokenReview": [("metadata", 1, _OBJECT_META, False), ("spec", 2, ".TokenReviewSpec", False)],
    "TokenReviewSpec": [("token", 1, "string", False), ("audiences", 2, "string", True)],
    "SelfSubjectReview": [("metadata", 1, _OBJECT_META, False)],
}
_AUTHORIZATION: dict[str, list[tuple[str, int, str, bool]]] = {
    "SelfSubjectAccessReview": [("metadata", 1, _OBJECT_META, False),
                                ("spec", 2, ".SelfSubjectAccessReviewSpec", False)],
    "SelfSubjectAccessReviewSpec": [("resourceAttributes", 1, ".ResourceAttributes", False),
                                    ("nonResourceAttributes", 2, ".NonResourceAttributes", False)],
    "ResourceAttributes": [(n, i, "string", False) for i, n in enumerate(
        ("namespace", "verb", "group", "version", "resource", "subresource", "name"), start=1)],
    "NonResourceAttributes": [("path", 1, "string", False), ("verb", 2, "string", False)],
}
PACKAGES = {"authentication.k8s.io/v1": "k8s.io.api.authentication.v1",
            "authorization.k8s.io/v1": "k8s.io.api.authorization.v1"}
# Go pointer fields whose zero is a value.
POINTER_FIELDS = {"k8s.io.api.authentication.v1.TokenRequestSpec": frozenset({"expirationSeconds"})}


def _file(package: str, messages: dict[str, list[tuple[str, int, str, bool]]]) -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name=f"phalanx/{package.replace('.', '/')}/requests.proto",
                                           package=package, syntax="proto2", dependency=[_META_FILE])
    for name, fields in messages.items():
        m = f.message_type.add(name=name)
        for fname, number, ftype, repeated in fields:
            fd = m.field.add(name=fname, number=number, json_name=fname,
                             label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if ftype == "string":
                fd.type = _F.TYPE_STRING
            elif ftype == "int64":
                fd.type = _F.TYPE_INT64
            else:
                fd.type = _F.TYPE_MESSAGE
                fd.type_name = ftype if ftype.startswith(".k8s") else f".{package}{ftype}"
    return f


def files() -> list[descriptor_pb2.FileDescriptorProto]:
    return [_file(PACKAGES["authentication.k8s.io/v1"], _AUTHENTICATION),
            _file(PACKAGES["authorization.k8s.io/v1"], _AUTHORIZATION)]
