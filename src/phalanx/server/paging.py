"""List pages: ``limit`` and ``continue``, as the apiserver serves them.

A list asked with ``limit=N`` answers at most N items and, when more remain,
``metadata.continue`` (an opaque token naming the last item sent) and
``remainingItemCount``; the next request passes the token back. Unlike the
apiserver, which serves every page from one snapshot, each page is read from
the current state (objects are ordered by namespace and name, so nothing is
sent twice; an object created meanwhile behind the last one sent appears).
"""
from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from phalanx.objects.errors import BadRequest

Obj = dict[str, Any]


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def encode(resource_version: str, last: Obj) -> str:
    body = json.dumps({"v": 1, "rv": resource_version, "start": list(_key(last))}, separators=(",", ":"))
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def decode(token: str) -> tuple[str, str]:
    """The (namespace, name) a page continues after; BadRequest names a bad token."""
    def bad(why: str) -> BadRequest:
        shown = token if len(token) <= 64 else token[:64] + "..."
        return BadRequest(f'continue: Invalid value: "{shown}": continue key is not valid: {why}')

    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError):
        raise bad("not a token this server issued") from None
    start = data.get("start") if isinstance(data, dict) else None
    if (not isinstance(data, dict) or data.get("v") != 1 or not isinstance(start, list) or len(start) != 2
            or not all(isinstance(s, str) for s in start)):
        raise bad("not a token this server issued")
    return start[0], start[1]


def page(items: list[Obj], resource_version: str, limit: int | None,
         token: str | None) -> tuple[list[Obj], str, int | None]:
    """(the items of this page, the continue token or "", how many remain or None).
    ``items`` are in namespace/name order, as every list of the store is."""
    if token:
        after = decode(token)
        items = [i for i in items if _key(i) > after]
    if not limit or len(items) <= limit:
        return items, "", None
    return items[:limit], encode(resource_version, items[limit - 1]), len(items) - limit
