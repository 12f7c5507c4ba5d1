"""API errors, shaped like Kubernetes ``Status`` failures.

Every error carries an HTTP code and a reason so the server can turn it into a
``Status`` object and the CLI can print it like kubectl does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FieldError:
    """One field-path error, printed exactly like apimachinery's field.Error.

    kind is one of: Required, Forbidden, Invalid, NotSupported, Duplicate,
    TooLong, TooMany, Unknown (unknown field).
    """

    path: str
    kind: str
    detail: str = ""
    value: object = None
    supported: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "Required":
            return f"{self.path}: Required value" + (f": {self.detail}" if self.detail else "")
        if self.kind == "Forbidden":
            return f"{self.path}: Forbidden" + (f": {self.detail}" if self.detail else "")
        if self.kind == "NotSupported":
            sup = ", ".join(f'"{s}"' for s in self.supported)
            return f'{self.path}: Unsupported value: {_fmt(self.value)}: supported values: {sup}'
        if self.kind == "Unknown":
            return f'{self.path}: unknown field "{self.path.rsplit(".", 1)[-1]}"' if not self.detail else f"{self.path}: {self.detail}"
        if self.kind == "Duplicate":
            return f"{self.path}: Duplicate value: {_fmt(self.value)}"
        # Invalid
        return f"{self.path}: Invalid value: {_fmt(self.value)}" + (f": {self.detail}" if self.detail else "")


def _fmt(v: object) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)


class ApiError(Exception):
    code: int = 500
    reason: str = "InternalError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


class BadRequest(ApiError):
    code = 400
    reason = "BadRequest"


class NotFound(ApiError):
    code = 404
    reason = "NotFound"

    def __init__(self, resource: str, name: str) -> None:
        super().__init__(f'{resource} "{name}" not found')
        self.resource = resource
        self.name = name


class AlreadyExists(ApiError):
    code = 409
    reason = "AlreadyExists"

    def __init__(self, resource: str, name: str) -> None:
        super().__init__(f'{resource} "{name}" already exists')


class Conflict(ApiError):
    code = 409
    reason = "Conflict"

    def __init__(self, resource: str, name: str) -> None:
        super().__init__(
            f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again"
        )


class Gone(ApiError):
    code = 410
    reason = "Expired"


class Invalid(ApiError):
    """A rejected object. ``prefix`` mimics the webhook/apiserver wording."""

    code = 422
    reason = "Invalid"

    def __init__(self, errors: list[FieldError], prefix: str = "") -> None:
        self.errors = list(errors)
        body = str(self.errors[0]) if len(self.errors) == 1 else "[" + ", ".join(str(e) for e in self.errors) + "]"
        super().__init__(prefix + body)


class Forbidden(ApiError):
    """Admission-webhook denials are 403 Forbidden in Kubernetes."""

    code = 403
    reason = "Forbidden"


class Unauthorized(ApiError):
    code = 401
    reason = "Unauthorized"


def json_type_name(v: Any) -> str:
    """The JSON type of a value, as the apiserver names it in errors."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, (list, tuple)):
        return "array"
    return type(v).__name__
