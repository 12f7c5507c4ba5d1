"""Kubernetes ``Status`` bodies for errors and successes, as the apiserver writes them.

Errors carry ``details`` the way the apiserver fills them: the plural resource
name as ``kind`` for NotFound/AlreadyExists/Conflict, the real Kind and one
``cause`` per field for 422 Invalid (docs/REFERENCE.md golden 15, 17, 28, 53).
"""
from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from phalanx.api.registry import ResourceType
from phalanx.objects.errors import ApiError, FieldError, Invalid

_CAUSE_REASONS = {
    "Required": "FieldValueRequired",
    "Invalid": "FieldValueInvalid",
    "Forbidden": "FieldValueForbidden",
    "NotSupported": "FieldValueNotSupported",
    "Duplicate": "FieldValueDuplicate",
    "TooLong": "FieldValueTooLong",
    "TooMany": "FieldValueTooMany",
    "Unknown": "FieldValueTypeInvalid",
}


def dumps(obj: Any) -> str:
    """Compact JSON, as the apiserver answers without ?pretty."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def json_response(obj: Any, status: int = 200) -> web.Response:
    # "replace": a string with no UTF-8 form (a lone surrogate) must not turn an answer into a 500
    return web.Response(body=dumps(obj).encode("utf-8", "replace"), status=status, content_type="application/json")


def _cause(err: FieldError) -> dict[str, str]:
    text = str(err)
    prefix = f"{err.path}: "
    message = text[len(prefix):] if text.startswith(prefix) else text
    return {"reason": _CAUSE_REASONS.get(err.kind, "FieldValueInvalid"), "message": message, "field": err.path}


def error_status(err: ApiError, rt: ResourceType | None = None, name: str | None = None) -> dict[str, Any]:
    """``err.to_status()`` plus the ``details`` the apiserver adds for this kind of error."""
    status = err.to_status()
    details: dict[str, Any] = {}
    named = getattr(err, "resource", None)
    if (err.code in (403, 404) and isinstance(named, str) and "/" not in named
            and isinstance(getattr(err, "name", None), str)
            and (err.code == 403 or rt is None or named.partition(".")[0] != rt.plural)):
        # The error names its own object (``namespaces "x" not found`` on a create of a pod).
        plural, _, group = named.partition(".")
        details["name"] = err.name  # type: ignore[attr-defined]
        if group:
            details["group"] = group
        details["kind"] = plural
    elif err.code in (404, 409) and rt is not None:
        if name:
            details["name"] = name
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
    elif isinstance(err, Invalid) and getattr(err, "anonymous", False):
        if err.errors:  # an error about the request, not about a named object (docs/REFERENCE.md golden 36)
            details["causes"] = [_cause(e) for e in err.errors]
    elif isinstance(err, Invalid) and err.code == 422 and (err.errors or rt is not None):
        if name:
            details["name"] = name
        if rt is not None:
            if rt.group:
                details["group"] = rt.group
            details["kind"] = rt.kind
        if err.errors:
            details["causes"] = [_cause(e) for e in err.errors]
    if details:
        status["details"] = details
    return status


def error_response(err: ApiError, rt: ResourceType | None = None, name: str | None = None) -> web.Response:
    code = err.code if isinstance(err.code, int) and 400 <= err.code <= 599 else 500
    return json_response(error_status(err, rt, name), status=code)


def failure(code: int, reason: str, message: str) -> web.Response:
    """A Status for an error that has no ApiError class (405, 413, 415, ...)."""
    return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": message, "reason": reason, "code": code}, status=code)


def success(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = details
    else:
        body["code"] = code
    return body
