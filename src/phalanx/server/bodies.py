"""Request bodies: size limit, JSON/YAML/protobuf decoding, content types, identity from the URL.

Also applies PATCH bodies (JSON, merge and strategic merge patches) the way the store would.
"""
from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

from phalanx.api.manifest import ManifestError, load_document
from phalanx.api.meta import json_type_name
from phalanx.api.registry import CUSTOM_RESOURCE_KINDS, ResourceType
from phalanx.objects.errors import BadRequest, FieldError
from phalanx.server import protobuf
from phalanx.server.routes import Route
from phalanx.server.strategic import apply_strategic_merge
from phalanx.store.patch import JsonPatchError, json_patch, merge_patch
from phalanx.store.store import PatchRejected

MAX_BODY = web.AppKey("max_body", int)

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
# Built-in groups (kubectl patches their kinds strategically); custom resources get 415, as docs/REFERENCE.md golden 31.
STRATEGIC_GROUPS = ("", "apps", "rbac.authorization.k8s.io", "coordination.k8s.io", "admissionregistration.k8s.io",
                    "scheduling.k8s.io", "autoscaling")


def media_type(request: web.Request) -> str:
    return (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()


async def read_body(request: web.Request) -> bytes:
    limit = request.app[MAX_BODY]
    if request.content_length is not None and request.content_length > limit:
        raise TooLarge(limit)
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise TooLarge(limit) from None


class TooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


class UnsupportedMedia(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


MAX_INT_DIGITS = 4300  # Python's own limit for int(str); longer numbers are refused by name


class _Bad:
    """A value a body may not hold, left in place while decoding so that the
    error can say where it is (the JSON decoder's hooks do not know)."""

    def __init__(self, message: str) -> None:
        self.message = message


class _Duplicated(dict[str, Any]):
    """An object that named a field twice (``message`` says which)."""

    message = ""


def _locate(root: Any, culprit: Any) -> str:
    """The field path of ``culprit`` (by identity) inside ``root``."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if node is culprit:
            return path
        if isinstance(node, dict):
            stack.extend((v, _field(path, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
    return ""


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_$/-]+$")


def _field(path: str, key: str) -> str:
    """``path.key``, or ``path["key"]`` when the key would not read as one field."""
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key[:64], ensure_ascii=False)}]"


def _json_body(text: str) -> Any:
    """json.loads, refusing NaN/Infinity, integers too long to convert and
    duplicate fields with the path of the first one (not "last one wins")."""
    bad: list[Any] = []

    def constant(name: str) -> _Bad:
        bad.append(_Bad(f"{name} is not a valid JSON number"))
        return bad[-1]

    def integer(digits: str) -> Any:
        if len(digits) > MAX_INT_DIGITS:
            bad.append(_Bad(f"an integer of {len(digits)} digits is too large"))
            return bad[-1]
        return int(digits)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        dup = None
        for k, v in items:
            if k in out and dup is None:
                dup = k
            out[k] = v
        if dup is None:
            return out
        marked = _Duplicated(out)
        marked.message = f'duplicate field "{dup[:256]}"'
        bad.append(marked)
        return marked

    value = json.loads(text, parse_constant=constant, parse_int=integer, object_pairs_hook=pairs)
    if bad:
        path = _locate(value, bad[0])
        raise BadRequest(f"the request body is not valid JSON: {path[:512] or '<root>'}: {bad[0].message}")
    return _without_surrogates(value) if _SURROGATE_ESCAPE.search(text) else value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _without_surrogates(value: Any) -> Any:
    """Strings with lone UTF-16 surrogates (``"\\ud800"``) get U+FFFD in their
    place, as Go's JSON decoder does: they have no UTF-8 form, so they could
    not be stored or sent back."""
    if isinstance(value, str):
        return _SURROGATES.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    return value


def decode(raw: bytes, media: str) -> Any:
    """The body as JSON (or YAML for the YAML media types). YAML is read with
    the manifest reader's guards (alias bombs, depth, duplicate keys)."""
    if not raw.strip():
        raise BadRequest("the request body is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(f"the request body is not valid UTF-8 (byte {e.start})") from None
    if media in ("application/yaml", "application/x-yaml", "text/yaml"):
        try:
            return _without_surrogates(load_document(text, "the request body"))
        except ManifestError as e:
            raise BadRequest(e.message) from None
    try:
        return _json_body(text)
    except RecursionError:
        raise BadRequest("the request body is nested too deeply") from None
    except ValueError as e:
        raise BadRequest(f"the request body is not valid JSON: {e}") from None


JSON_MEDIA = ("", "application/json", "*/*", "application/yaml", "application/x-yaml", "text/yaml")
_JSON_TEXT = ("", "application/json", "*/*")  # bodies quoted as sent in an error


async def object_body(request: web.Request, rt: ResourceType) -> dict[str, Any]:
    """The request's object: JSON, YAML, or (built-in kinds, as kubectl's typed
    clients send them) Kubernetes protobuf, read into the same JSON dict."""
    media = media_type(request)
    proto = protobuf.supports_group(rt.group)
    if media == protobuf.MEDIA_TYPE and proto:
        return protobuf.decode_object(await read_body(request), rt.kind)
    if media not in JSON_MEDIA:
        accepted = "application/json, application/yaml" + (f", {protobuf.MEDIA_TYPE}" if proto else "")
        raise UnsupportedMedia(f"the body of the request was in an unknown format - accepted media types "
                                f"include: {accepted}")
    raw = await read_body(request)
    body = decode(raw, media)
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if rt.kind in CUSTOM_RESOURCE_KINDS:
        _check_custom_identity(body, rt, raw.decode(errors="replace") if media in _JSON_TEXT else None)
    return body


def _check_custom_identity(body: dict[str, Any], rt: ResourceType, raw: str | None) -> None:
    """kube-apiserver's decoding of a custom resource: no kind, or no apiVersion, is a 400 in
    apimachinery's words (the body quoted, then its first 30 characters)."""
    if body.get("kind") in (None, ""):
        text = raw if raw is not None else json.dumps(body, separators=(",", ":"))
        short = text if len(text) <= 30 else text[:30] + " ..."
        raise BadRequest(f"the object provided is unrecognized (must be of type {rt.kind}): "
                         f"Object 'Kind' is missing in '{text}' ({short})")
    if body.get("apiVersion") in (None, ""):
        raise BadRequest(f"the API version in the data () does not match the expected API version "
                         f"({rt.api_version})")


def _identity_error(path: str, value: Any, detail: str) -> BadRequest:
    """A 400 naming the field, in apimachinery's field.Error words."""
    if isinstance(value, str):
        shown: Any = value if len(value) <= 256 else value[:256] + "..."
    elif isinstance(value, (dict, list)):
        shown = json_type_name(value)
    else:
        shown = value if not isinstance(value, int) or value.bit_length() <= 256 else "a very large integer"
    return BadRequest(str(FieldError(path, "Invalid", detail, shown)))


def fill_identity(obj: dict[str, Any], route: Route) -> None:
    """Default kind/apiVersion/namespace/name from the URL; refuse an object that names another."""
    rt = route.rt
    kind = obj.get("kind")
    if kind in (None, ""):
        obj["kind"] = rt.kind
    elif kind != rt.kind:
        raise _identity_error("kind", kind, f"the kind of the object does not match the kind on the URL ({rt.kind})")
    av = obj.get("apiVersion")
    if av in (None, ""):
        obj["apiVersion"] = rt.api_version
    elif av != rt.api_version:
        raise _identity_error("apiVersion", av, f"the API version in the data does not match the expected API "
                                                f"version ({rt.api_version})")
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise _identity_error("metadata", meta, "metadata must be a JSON object")
    if route.namespace is not None:
        ns = meta.get("namespace")
        if ns in (None, ""):
            meta["namespace"] = route.namespace
        elif ns != route.namespace:
            raise _identity_error("metadata.namespace", ns, "the namespace of the provided object does not match "
                                                            "the namespace sent on the request")
    if route.name is not None:
        name = meta.get("name")
        if name in (None, ""):
            meta["name"] = route.name
        elif name != route.name:
            raise _identity_error("metadata.name", name, f"the name of the object does not match the name on the "
                                                         f"URL ({route.name})")


def pins_resource_version(patch: Any, media: str) -> bool:
    """Whether a patch sets metadata.resourceVersion (then it is a precondition)."""
    if media == JSON_PATCH:
        return isinstance(patch, list) and any(
            isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion" and op.get("op") != "test"
            for op in patch)
    meta = patch.get("metadata") if isinstance(patch, dict) else None
    return isinstance(meta, dict) and meta.get("resourceVersion") is not None


def apply_patch(current: dict[str, Any], patch: Any, media: str) -> Any:
    """``current`` with the patch applied, computed here (as the store would)."""
    if media == JSON_PATCH:
        try:
            return json_patch(current, patch)
        except JsonPatchError as e:
            raise PatchRejected(str(e), e.index, e.pointer) from None
    if media == MERGE_PATCH:
        return merge_patch(current, patch)
    return apply_strategic_merge(current, patch)
