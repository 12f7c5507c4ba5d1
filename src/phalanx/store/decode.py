"""Decoding stored JSON into objects that several read-only consumers share.

Every informer of a kind used to hold its own ``json.loads`` copy of every
object (a pending pod: ~2 KB of JSON, ~13 KB decoded, five copies). A watch
event is now decoded once for all the watchers that promise not to mutate what
they get (``Watcher(shared=True)``, used by ``Informer`` over ``LocalClient``),
with keys and short strings interned so that equal strings of different
objects are one string (~45% smaller).

``PHALANX_CHECK_SHARED=1`` in the environment keeps every shared object with
its JSON, so tests can call ``mutated_shared_objects()`` to prove that no
consumer changed one (see tests/unit/test_memory_shared.py).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any

# Values longer than this are rarely equal between objects (messages, commands).
MAX_INTERNED_LENGTH = 64

_intern = sys.intern


def _interned_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {_intern(k): (_intern(v) if v.__class__ is str and len(v) <= MAX_INTERNED_LENGTH else v)
            for k, v in pairs}


_decoder = json.JSONDecoder(object_pairs_hook=_interned_pairs)

_checking = os.environ.get("PHALANX_CHECK_SHARED", "") not in ("", "0")
_checked: list[tuple[str, Any]] = []


def decode_interned(raw: str) -> Any:
    """``json.loads(raw)`` with object keys and short string values interned."""
    obj = _decoder.decode(raw)
    if _checking:
        _checked.append((raw, obj))
    return obj


def set_checking(on: bool) -> None:
    """Turn the mutation check on or off (tests); off forgets what was kept."""
    global _checking
    _checking = on
    if not on:
        _checked.clear()


def mutated_shared_objects() -> list[str]:
    """With checking on: the JSON of every object decoded here since that no
    longer serializes to the JSON it came from (a consumer mutated it)."""
    return [raw for raw, obj in _checked
            if json.dumps(obj, separators=(",", ":"), allow_nan=False) != raw]


class SharedEvent:
    """One event as the store pushes it to every watcher of its kind: the JSON
    and, decoded at most once, the object that the shared watchers all get."""

    __slots__ = ("raw", "_obj")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self._obj: Any = None

    def shared(self) -> Any:
        if self._obj is None:
            self._obj = decode_interned(self.raw)
        return self._obj
