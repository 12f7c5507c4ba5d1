"""Decoding stored JSON into objects that several read-only consumers share.

A watch event is decoded once for all the watchers that promise not to mutate
what they get (``Watcher(shared=True)``, used by ``Informer`` over ``LocalClient``).
The decoder is orjson's (object keys shared between objects); string values are
not interned: that would save memory for more CPU, the scarcer of the two.

``PHALANX_CHECK_SHARED=1`` in the environment keeps every shared object with
its JSON, so tests can call ``mutated_shared_objects()`` to prove that no
consumer changed one (see tests/unit/test_memory_shared.py).
"""
from __future__ import annotations

import os
import weakref
from typing import Any

from phalanx.api.manifest import SharedDict
from phalanx.store import codec
from phalanx.store.codec import dumps_bytes
from phalanx.store.patch import json_equal

_checking = os.environ.get("PHALANX_CHECK_SHARED", "") not in ("", "0")
_checked: list[tuple[str, Any]] = []


def decode_shared(raw: str) -> Any:
    """``json.loads(raw)``, for objects shared read-only (keys shared too)."""
    obj = codec.loads(raw)
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
    return [raw for raw, obj in _checked if not json_equal(obj, codec.loads(raw))]


def _same(a: Any, b: Any) -> bool:
    """JSON equality, type-strict (``1``, ``1.0`` and ``true`` differ), in C."""
    return a.__class__ is b.__class__ and dumps_bytes(a) == dumps_bytes(b)


def reuse_unchanged(new: dict, old: dict) -> None:
    """Make ``new`` (just decoded, not yet handed out) use ``old``'s values
    where they are equal: the top-level values and those of ``metadata`` (its
    resourceVersion changes with every write, its labels, annotations and
    owner references rarely). A status write then costs a new status, not a
    new copy of the spec and metadata in every cache holding either version."""
    for k, v in new.items():
        if v.__class__ is not dict and v.__class__ is not list:
            continue
        ov = old.get(k)
        if ov is None or ov is v:
            continue
        if k == "metadata" and v.__class__ is dict and ov.__class__ is dict:
            for mk, mv in v.items():
                if mv.__class__ is dict or mv.__class__ is list:
                    omv = ov.get(mk)
                    if omv is not None and _same(mv, omv):
                        v[mk] = omv
        elif _same(v, ov):
            new[k] = ov


class SharedEvent:
    """One event as the store pushes it to every watcher of its kind: the JSON
    and the object that the shared watchers all get, decoded once.

    The decoded object is held strongly only while watchers it was pushed to
    have yet to take it (``hold``) and no newer version of the same object was
    written (``weaken``); otherwise only weakly: while a consumer keeps it (an
    informer's cache) later watchers still get the same one, and once none
    does, a watcher still behind decodes its own. Holding it until the slowest
    watcher took it kept every decoded version of every object alive in a
    burst (100,000 pods created at once: several GB of backlog).

    ``base`` is the event of the object's previous version: when decoded, the
    new version shares the values it did not change (``reuse_unchanged``) with
    the previous one if that is still decoded."""

    __slots__ = ("raw", "_strong", "_ref", "_remaining", "_base")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self._strong: Any = None
        self._ref: weakref.ref[Any] | None = None
        self._remaining = 0
        self._base: SharedEvent | None = None

    def hold(self, watchers: int) -> None:
        """Keep the decoded object until this many watchers have taken it."""
        self._remaining = watchers

    def weaken(self) -> None:
        """A newer version of the object was written: hold this one no longer."""
        self._strong = None
        self._remaining = 0

    def release(self) -> None:
        """A watcher it was pushed to will not take it (closed)."""
        self._remaining -= 1
        if self._remaining <= 0:
            self._strong = None

    def follow(self, previous: "SharedEvent") -> None:
        """``previous`` is the event of this object's previous version (one
        level only: it forgets its own)."""
        previous.forget_base()
        self._base = previous

    def forget_base(self) -> None:
        """Share nothing with the previous version any more (see ``follow``)."""
        self._base = None

    def current(self) -> Any:
        """The decoded object if it is still alive, else None."""
        obj = self._strong
        if obj is None and self._ref is not None:
            obj = self._ref()
        return obj

    def shared(self) -> Any:
        obj = self.current()
        if obj is None:
            obj = decode_shared(self.raw)
            if obj.__class__ is dict:
                base, self._base = self._base, None
                old = base.current() if base is not None else None
                if old is not None:
                    reuse_unchanged(obj, old)
                obj = SharedDict(obj)
                self._ref = weakref.ref(obj)
            if self._remaining > 1:
                self._strong = obj
        self._remaining -= 1
        if self._remaining <= 0:
            self._strong = None
        return obj
