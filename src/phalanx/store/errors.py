"""The API errors only the store raises: a patch that does not apply, an object too
large to store, and a 409 Conflict with a specific reason (uid precondition, binding)."""
from __future__ import annotations

from phalanx.api.registry import ResourceType
from phalanx.objects.errors import ApiError, Conflict, FieldError, Invalid

# The largest object a write may leave stored, as JSON: etcd's default request
# limit (--max-request-bytes, 1.5 MiB), which bounds every object of a real cluster.
MAX_OBJECT_BYTES = 1536 * 1024


class PatchRejected(Invalid):
    """A JSON patch that does not apply (e.g. a failed ``test``): 422 with the
    apiserver's generic message; ``cause`` says what failed, and the one
    field error (``patch[<operation>]``, the operation's path as the value)
    says where, in ``details.causes``."""

    def __init__(self, cause: str, index: int | None = None, pointer: str | None = None) -> None:
        ApiError.__init__(self, "the server rejected our request due to an error in our request")
        self.cause = cause
        field = "patch" if index is None else f"patch[{index}]"
        self.errors = [FieldError(field, "Invalid", cause, pointer if pointer is not None else "")]


class ObjectTooLarge(ApiError):
    """413: the object, decoded and defaulted, is larger than MAX_OBJECT_BYTES."""

    code = 413
    reason = "RequestEntityTooLarge"

    def __init__(self, rt: ResourceType, name: str, size: int) -> None:
        super().__init__(f'{rt.kind} "{name[:253]}" is too large: {size} bytes as stored, at most '
                         f"{MAX_OBJECT_BYTES} ({MAX_OBJECT_BYTES / 2**20:g} MiB) can be stored")


class PreconditionConflict(Conflict):
    """409 Conflict with a specific reason (uid precondition, binding)."""

    def __init__(self, resource: str, name: str, detail: str) -> None:
        ApiError.__init__(self, f'Operation cannot be fulfilled on {resource} "{name}": {detail}')
