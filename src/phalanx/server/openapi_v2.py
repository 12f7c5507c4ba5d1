"""``/openapi/v2``: the Swagger 2.0 definitions of every served kind, from the /openapi/v3 documents.

kubectl asks for it as gnostic's protobuf (``openapi.v2.Document``) when a kind is
missing from /openapi/v3 (its client-side validation, ``no matches for kind``) and
on ``apply`` of a changed object; JSON is served to other clients. Paths are left
empty (kubectl finds fieldValidation support in /openapi/v3), and the kinds of the
built-in groups carry no ``x-kubernetes-group-version-kind``: their schemas lack
the patch strategies, so kubectl keeps computing their strategic patches from
its compiled-in types, as before.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from phalanx.server import protobuf
from phalanx.server.discovery import version_info
from phalanx.server.openapi import group_version_keys, openapi_document

PROTOBUF_MEDIA = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
PROTOBUF_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_BUILTIN_GROUPS = ("", "apps", "rbac.authorization.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io",
                   "autoscaling")
_V3_REF = "#/components/schemas/"
Schema = dict[str, Any]


def _v2_schema(node: Any) -> Any:
    """A v3 schema as Swagger 2.0 has it: refs to ``#/definitions/``; ``anyOf`` (int-or-string) and
    ``nullable`` have no v2 form and are left to the vendor extension that says the same."""
    if isinstance(node, list):
        return [_v2_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for k, v in node.items():
        if k == "$ref" and isinstance(v, str):
            out[k] = "#/definitions/" + v[len(_V3_REF):] if v.startswith(_V3_REF) else v
        elif k in ("anyOf", "oneOf", "nullable"):
            continue
        elif k in ("properties",) and isinstance(v, dict):
            out[k] = {name: _v2_schema(s) for name, s in v.items()}
        else:
            out[k] = _v2_schema(v) if k not in ("enum", "default", "example") and not k.startswith("x-") else v
    if "allOf" in out and len(out["allOf"]) == 1 and set(out["allOf"][0]) == {"$ref"}:
        out["$ref"] = out.pop("allOf")[0]["$ref"]  # v2 tools read a plain $ref
    return out


def _builtin(gvks: Any) -> bool:
    return isinstance(gvks, list) and any(isinstance(g, dict) and g.get("group") in _BUILTIN_GROUPS for g in gvks)


@lru_cache(maxsize=1)
def openapi_v2_json() -> bytes:
    definitions: dict[str, Schema] = {}
    for key in group_version_keys():
        doc = openapi_document(key) or {}
        for name, schema in ((doc.get("components") or {}).get("schemas") or {}).items():
            if name in definitions:
                continue
            s = _v2_schema(schema)
            if _builtin(s.get("x-kubernetes-group-version-kind")):
                s.pop("x-kubernetes-group-version-kind")
            definitions[name] = s
    document = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": version_info()["gitVersion"]},
                "paths": {}, "definitions": {k: definitions[k] for k in sorted(definitions)}}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def openapi_v2_document() -> Schema:
    return json.loads(openapi_v2_json())


# --- gnostic's protobuf form -------------------------------------------------------------

_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def _any(value: Any) -> Any:
    a = protobuf.message_class("openapi.v2.Any")()
    a.yaml = json.dumps(value)  # JSON is YAML
    return a


def _fill_schema(msg: Any, schema: Schema) -> None:
    for k, v in schema.items():
        if k.startswith("x-"):
            ext = msg.vendor_extension.add()
            ext.name = k
            ext.value.CopyFrom(_any(v))
        elif k == "$ref":
            msg._ref = v  # noqa: SLF001 - gnostic's generated field for "$ref" is named _ref (a public field)
        elif k == "type":
            msg.type.value.extend(v if isinstance(v, list) else [v])
        elif k == "items":
            for item in v if isinstance(v, list) else [v]:
                _fill_schema(msg.items.schema.add(), item)
        elif k == "allOf":
            for item in v:
                _fill_schema(msg.all_of.add(), item)
        elif k == "properties":
            for name, sub in v.items():
                named = msg.properties.additional_properties.add()
                named.name = name
                _fill_schema(named.value, sub)
        elif k == "additionalProperties":
            if isinstance(v, bool):
                msg.additional_properties.boolean = v
            else:
                _fill_schema(msg.additional_properties.schema, v)
        elif k == "required":
            msg.required.extend(v)
        elif k == "enum":
            for e in v:
                msg.enum.add().CopyFrom(_any(e))
        elif k in ("default", "example"):
            getattr(msg, k).CopyFrom(_any(v))
        elif k in ("description", "format", "title", "pattern"):
            setattr(msg, k, v)
        elif k in ("maximum", "minimum", "multipleOf"):
            setattr(msg, _SNAKE.sub("_", k).lower(), float(v))
        elif k in ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties"):
            setattr(msg, _SNAKE.sub("_", k).lower(), int(v))
        elif k in ("uniqueItems", "readOnly", "exclusiveMaximum", "exclusiveMinimum"):
            setattr(msg, _SNAKE.sub("_", k).lower(), bool(v))


@lru_cache(maxsize=1)
def openapi_v2_protobuf() -> bytes:
    document = openapi_v2_document()
    doc = protobuf.message_class("openapi.v2.Document")()
    doc.swagger = document["swagger"]
    doc.info.title = document["info"]["title"]
    doc.info.version = document["info"]["version"]
    doc.paths.SetInParent()
    for name, schema in document["definitions"].items():
        named = doc.definitions.additional_properties.add()
        named.name = name
        _fill_schema(named.value, schema)
    return doc.SerializeToString(deterministic=True)
