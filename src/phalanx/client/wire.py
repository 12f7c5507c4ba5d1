"""What the HTTP clients share about the wire: API paths built from the registry,
patch content types, label selectors as query strings, the identity of an object to
write, and ``Status`` bodies turned
back into ``phalanx.objects.errors`` exceptions. Standard library only (the CLI imports it)."""
from __future__ import annotations

import json
import urllib.parse
from typing import Any

from phalanx.api.registry import ResourceType, by_kind
from phalanx.objects.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    FieldError,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    Unauthorized,
)
from phalanx.objects.watch import WatchEvent

MAX_LINE = 64 * 1024 * 1024  # a watch event larger than this is refused


class LineSplitter:
    """NDJSON lines of a chunked body, however the chunks fall (``feed`` each
    chunk, ``rest`` at the end); a line past ``MAX_LINE`` is refused."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf
        buf.extend(chunk)
        lines = []
        while True:
            i = buf.find(b"\n")
            if i < 0:
                break
            line = bytes(buf[:i])
            del buf[: i + 1]
            if line.strip():
                lines.append(line)
        if len(buf) > MAX_LINE:
            raise ApiError("a watch event from the server is larger than the client accepts")
        return lines

    def rest(self) -> list[bytes]:
        tail = bytes(self._buf)
        self._buf.clear()
        return [tail] if tail.strip() else []


def log_params(container: str | None, follow: bool, tail: int | None, previous: bool) -> dict[str, str]:
    """The query of a pod or job log request."""
    params: dict[str, str] = {}
    if container:
        params["container"] = container
    if follow:
        params["follow"] = "true"
    if previous:
        params["previous"] = "true"
    if tail is not None:
        params["tailLines"] = str(tail)
    return params


PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}

_FIELD_KINDS = {
    "FieldValueRequired": "Required", "FieldValueInvalid": "Invalid", "FieldValueForbidden": "Forbidden",
    "FieldValueNotSupported": "NotSupported", "FieldValueDuplicate": "Duplicate", "FieldValueTooLong": "TooLong",
    "FieldValueTooMany": "TooMany", "FieldValueTypeInvalid": "Invalid",
}
_BY_REASON: dict[str, type[ApiError]] = {
    "NotFound": NotFound, "AlreadyExists": AlreadyExists, "Conflict": Conflict, "Invalid": Invalid,
    "Expired": Gone, "Gone": Gone, "Forbidden": Forbidden, "Unauthorized": Unauthorized, "BadRequest": BadRequest,
}
_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone, 422: Invalid,
}


class Unreachable(ApiError):
    """No answer from the server at all (refused, reset, timed out, TLS failure)."""

    code = 503
    reason = "ServiceUnavailable"

    def __init__(self, cause: object) -> None:
        super().__init__(f"the server is not reachable: {cause}")


def error_from_status(status: Any, http_code: int) -> ApiError:
    """The ``phalanx.objects.errors`` exception a ``Status`` body stands for, message kept."""
    status = status if isinstance(status, dict) else {}
    reason = status.get("reason") or ""
    code = status.get("code") if isinstance(status.get("code"), int) else http_code
    message = status.get("message")
    if not isinstance(message, str) or not message:
        message = f"the server responded with status {code}" + (f" ({reason})" if reason else "")
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or ApiError
    err = cls.__new__(cls)
    ApiError.__init__(err, message)
    if cls is ApiError or err.code != code or (reason and err.reason != reason):
        err.code = code
        err.reason = reason or ApiError.reason
    details = status.get("details") if isinstance(status.get("details"), dict) else {}
    if isinstance(err, NotFound):
        err.resource = str(details.get("kind") or "")
        err.name = str(details.get("name") or "")
    if isinstance(err, Invalid):
        err.errors = [FieldError(str(c.get("field") or ""), _FIELD_KINDS.get(str(c.get("reason")), "Invalid"),
                                 str(c.get("message") or ""))
                      for c in details.get("causes") or [] if isinstance(c, dict)]
    return err


def error_from_body(http_status: int, raw: bytes) -> ApiError:
    """The error of a failed response, from its ``Status`` body or, lacking one, its text."""
    try:
        status = json.loads(raw) if raw else None
    except ValueError:
        status = None
    if not isinstance(status, dict):
        text = raw.decode("utf-8", "replace").strip()[:500]
        status = {"message": text or None}
    return error_from_status(status, http_status)


def label_selector(sel: str | dict[str, str] | None) -> str | None:
    """A label selector as the ``labelSelector`` query value (None: no selector)."""
    if sel is None:
        return None
    if isinstance(sel, dict):
        return ",".join(f"{k}={v}" for k, v in sel.items()) or None
    return sel or None


def resource_type(kind: str) -> ResourceType:
    """The registry entry of a kind; BadRequest for one the API does not serve."""
    try:
        return by_kind(kind)
    except (KeyError, TypeError):
        raise BadRequest(f'unknown kind "{kind}"') from None


def object_identity(obj: Any, need_name: bool) -> tuple[ResourceType, str | None, str]:
    """An object to write: its kind's registry entry, its namespace ("default" when a
    namespaced object names none; None for cluster-scoped kinds) and its name ("" when
    it has none). BadRequest when it is not an object, has no kind, or (``need_name``) no name."""
    if not isinstance(obj, dict):
        raise BadRequest("the object must be a JSON object")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise BadRequest("Object 'Kind' is missing in the object")
    rt = resource_type(kind)
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    ns = (meta.get("namespace") or "default") if rt.namespaced else None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        if need_name:
            raise BadRequest("metadata.name: Required value: name is required")
        name = ""
    return rt, ns, name


def resource_path(rt: ResourceType, namespace: str | None, name: str | None = None,
                  subresource: str | None = None, collection_ns_required: bool = True) -> str:
    """``/api/v1/...`` or ``/apis/GROUP/VERSION/...`` for a collection, an object or its subresource.
    A namespaced object (or, with ``collection_ns_required``, collection) needs a namespace."""
    prefix = f"/apis/{rt.api_version}" if rt.group else "/api/v1"
    if rt.namespaced and namespace:
        prefix += f"/namespaces/{urllib.parse.quote(namespace, safe='')}"
    elif rt.namespaced and (name is not None or collection_ns_required):
        resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
        raise BadRequest(f"a namespace is required for {resource}")
    path = f"{prefix}/{rt.plural}"
    if name is not None:
        if not isinstance(name, str) or not name:
            raise BadRequest("a name is required")
        path += f"/{urllib.parse.quote(name, safe='')}"
    if subresource:
        path += f"/{subresource}"
    return path


def parse_event(line: bytes) -> WatchEvent | None:
    """One watch line: the event, None for a line without one, the error of an ERROR event raised."""
    try:
        ev = json.loads(line)
    except ValueError:
        raise ApiError("the server sent a watch event that is not JSON") from None
    if not isinstance(ev, dict):
        return None
    obj = ev.get("object")
    if ev.get("type") == "ERROR":
        code: int = obj["code"] if isinstance(obj, dict) and isinstance(obj.get("code"), int) else 500
        raise error_from_status(obj, code)
    if not isinstance(obj, dict) or not isinstance(ev.get("type"), str):
        return None
    return WatchEvent(ev["type"], obj)
