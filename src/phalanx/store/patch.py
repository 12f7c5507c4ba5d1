"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) over JSON-shaped data.
(Strategic merge patch, for kubectl on built-in kinds, is the server's:
``phalanx.server.strategic``.)

Pure functions, no I/O. They work on copies: the target is never modified.
A failing JSON patch raises ``JsonPatchError`` (the store turns it into the
apiserver's 422); a malformed patch raises ``BadRequest``.
"""
from __future__ import annotations

import copy
from typing import Any

from phalanx.objects.errors import BadRequest

__all__ = ["merge_patch", "json_patch", "JsonPatchError", "json_equal"]


# What a JSON patch may make of a document (values, plus characters of strings and
# keys): "copy" can double a document per operation, so a small patch could
# otherwise build gigabytes. Far above the largest object the store keeps.
MAX_PATCHED_SIZE = 16 * 1024 * 1024


class JsonPatchError(Exception):
    """A well-formed JSON patch that cannot be applied (missing path, failed test).
    ``index`` and ``pointer`` say which operation, once known."""

    index: int | None = None
    pointer: str | None = None


def _size(value: Any, limit: int) -> int:
    """Values plus string characters in ``value``; stops counting past ``limit``."""
    total = 0
    stack = [value]
    while stack and total <= limit:
        v = stack.pop()
        total += 1
        if isinstance(v, str):
            total += len(v)
        elif isinstance(v, dict):
            for k, item in v.items():
                total += len(k) if isinstance(k, str) else 0
                stack.append(item)
        elif isinstance(v, list):
            stack.extend(v)
    return total


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def json_equal(a: Any, b: Any) -> bool:
    """JSON value equality: unlike ``==``, ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _pointer(path: Any, i: int) -> list[str]:
    """Parse a JSON pointer (RFC 6901) into reference tokens."""
    if not isinstance(path, str):
        raise BadRequest(f"json patch operation {i}: path must be a string")
    if path == "":
        return []
    if not path.startswith("/"):
        raise BadRequest(f'json patch operation {i}: path "{path}" must start with "/"')
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(token: str, length: int, allow_end: bool, path: str) -> int:
    if allow_end and token == "-":
        return length
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise JsonPatchError(f'path "{path}": "{token}" is not an array index')
    idx = int(token)
    limit = length if allow_end else length - 1
    if idx > limit:
        raise JsonPatchError(f'path "{path}": index {idx} out of range')
    return idx


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise JsonPatchError(f'path "{path}": "{t}" does not exist')
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(t, len(cur), False, path)]
        else:
            raise JsonPatchError(f'path "{path}": cannot descend into a {type(cur).__name__}')
    return cur


def _get(doc: Any, tokens: list[str], path: str) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JsonPatchError(f'path "{path}" does not exist')
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(last, len(parent), False, path)]
    raise JsonPatchError(f'path "{path}": parent is not a container')


def _add(doc: Any, tokens: list[str], value: Any, path: str) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), True, path), value)
    else:
        raise JsonPatchError(f'path "{path}": parent is not a container')
    return doc


def _remove(doc: Any, tokens: list[str], path: str) -> tuple[Any, Any]:
    if not tokens:
        raise JsonPatchError("cannot remove the whole document")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JsonPatchError(f'path "{path}" does not exist')
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(last, len(parent), False, path))
    raise JsonPatchError(f'path "{path}": parent is not a container')


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902: apply every operation in order to a copy of ``target``; all or nothing."""
    if not isinstance(ops, list):
        raise BadRequest("json patch must be a list of operations")
    doc = copy.deepcopy(target)
    size = _size(doc, MAX_PATCHED_SIZE)
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise BadRequest(f"json patch operation {i}: must be an object")
        try:
            doc, added = _apply(doc, op, i, MAX_PATCHED_SIZE - size)
        except JsonPatchError as e:
            e.index, e.pointer = i, op.get("path") if isinstance(op.get("path"), str) else None
            raise
        size += added
        if size > MAX_PATCHED_SIZE:
            err = JsonPatchError(f"json patch operation {i}: the patched object would exceed "
                                 f"{MAX_PATCHED_SIZE // 2**20} MiB")
            err.index, err.pointer = i, op.get("path") if isinstance(op.get("path"), str) else None
            raise err
    return doc


def _apply(doc: Any, op: dict[str, Any], i: int, room: int) -> tuple[Any, int]:
    """One operation; returns the document and how much it grew (an upper bound)."""
    kind = op.get("op")
    tokens = _pointer(op.get("path"), i)
    path: str = op["path"]  # a string: _pointer refused anything else
    if kind in ("add", "replace", "test") and "value" not in op:
        raise BadRequest(f'json patch operation {i} ("{kind}"): missing "value"')
    if kind == "add":
        return _add(doc, tokens, copy.deepcopy(op["value"]), path), _size(op["value"], room)
    if kind == "remove":
        doc, _ = _remove(doc, tokens, path)
        return doc, 0
    if kind == "replace":
        # As the apiserver's json-patch library does (docs/REFERENCE.md golden 58), replacing a
        # missing key of an object adds it; a list index must exist.
        if tokens and isinstance(_parent(doc, tokens, path), list):
            doc, _ = _remove(doc, tokens, path)
        return _add(doc, tokens, copy.deepcopy(op["value"]), path), _size(op["value"], room)
    if kind in ("move", "copy"):
        from_tokens = _pointer(op.get("from"), i)
        src: str = op["from"]
        if kind == "move" and tokens[: len(from_tokens)] == from_tokens and tokens != from_tokens:
            raise JsonPatchError(f'cannot move "{src}" into its own child "{path}"')
        value = _get(doc, from_tokens, src)
        added = 0
        if kind == "move":
            if from_tokens == tokens:
                return doc, 0
            doc, value = _remove(doc, from_tokens, src)
        else:
            added = _size(value, room)
            if added > room:
                return doc, added  # refused by the caller before anything is copied
            value = copy.deepcopy(value)
        return _add(doc, tokens, value, path), added
    if kind == "test":
        if not json_equal(_get(doc, tokens, path), op["value"]):
            raise JsonPatchError(f'testing value "{path}" failed')
        return doc, 0
    raise BadRequest(f"json patch operation {i}: unsupported op {kind!r} "
                     '(supported: "add", "remove", "replace", "move", "copy", "test")')
