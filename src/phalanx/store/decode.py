"""Decoding stored JSON into objects that several read-only consumers share.

A watch event is decoded once for all the watchers that promise not to mutate
what they get (``Watcher(shared=True)``, used by ``Informer`` over ``LocalClient``).
The decoder is orjson's (object keys shared between objects). A store may also
hash-cons what it decodes (``Interner``): equal subtrees of different objects
(the pods of one job share their containers, env entries, owner references,
conditions) become one object, for about the CPU of a second decode; the
simulator turns it on, where memory is what limits the scale.

``PHALANX_CHECK_SHARED=1`` in the environment keeps every shared object with
its JSON, so tests can call ``mutated_shared_objects()`` to prove that no
consumer changed one (see tests/unit/test_memory_shared.py).
"""
from __future__ import annotations

import os
import sys
import weakref
from typing import Any

from phalanx.api.manifest import SharedDict
from phalanx.store import codec
from phalanx.store.codec import dumps_bytes

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
    return [raw for raw, obj in _checked if dumps_bytes(obj) != dumps_bytes(codec.loads(raw))]


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


class Interner:
    """Hash-consing of decoded JSON shared read-only: ``intern(obj)`` replaces each
    value below ``obj``'s top-level sections (and short strings) by an equal one
    seen before, where there is one. Equal means equal JSON (type-strict; a
    dict's key order counts), so nothing any reader sees changes, only how
    many copies exist.

    The table is bounded: two generations of at most ``max_bytes`` of keys each;
    a value found in the old one moves to the new one, and when the new one is
    full the old one is dropped. What is dropped stays shared where it already
    is; only later equal values no longer find it."""

    __slots__ = ("_new", "_old", "_bytes", "_max_bytes")

    def __init__(self, max_bytes: int = 8 << 20) -> None:
        self._new: dict[bytes, Any] = {}
        self._old: dict[bytes, Any] = {}
        self._bytes = 0
        self._max_bytes = max_bytes

    def intern(self, obj: Any, old: Any = None) -> None:
        """Intern in place the values of ``obj``'s top-level sections (of
        ``metadata``, ``spec``, ``status``: a section itself holds what is
        unique to the object, its name, its resourceVersion). Values that are
        ``old``'s own (its previous version's, already interned) are skipped."""
        if obj.__class__ is not dict and obj.__class__ is not SharedDict:
            return
        old_top = old if old.__class__ is dict or old.__class__ is SharedDict else {}
        canon, short = self._canon, _short_str
        for k, v in obj.items():
            cls = v.__class__
            if cls is dict:
                prev = old_top.get(k)
                if prev is v:
                    continue
                prev = prev if prev.__class__ is dict else {}
                for k2, v2 in v.items():
                    c2 = v2.__class__
                    if c2 is dict or c2 is list:
                        if v2 and prev.get(k2) is not v2:
                            v[k2] = canon(v2)
                    elif c2 is str and len(v2) < 64:
                        v[k2] = short(v2)
            elif cls is list:
                if v and old_top.get(k) is not v:
                    obj[k] = canon(v)
            elif cls is str and len(v) < 64:
                obj[k] = short(v)

    def _canon(self, v: Any) -> Any:
        """The interned value equal to ``v`` (a non-empty dict or list, not yet
        handed out): a known one, else ``v`` itself with its values interned."""
        key = dumps_bytes(v)
        c = self._new.get(key)
        if c is not None:
            return c
        c = self._old.get(key)
        if c is None:
            c = v
            canon, short = self._canon, _short_str
            items = v.items() if v.__class__ is dict else enumerate(v)
            for k, x in items:
                cls = x.__class__
                if cls is dict or cls is list:
                    if x:
                        v[k] = canon(x)
                elif cls is str and len(x) < 64:
                    v[k] = short(x)
        key = bytes(memoryview(key))  # orjson's buffer keeps its 4 KiB capacity: keep an exact copy
        self._new[key] = c
        self._bytes += len(key)
        if self._bytes > self._max_bytes:
            self._old, self._new, self._bytes = self._new, {}, 0
        return c


_short_str = sys.intern  # short strings (names, values, times) repeat across objects


class SharedEvent:
    """One event as the store pushes it to every watcher of its kind: the JSON
    and the object that the shared watchers all get, decoded once.

    The decoded object is held strongly only while watchers it was pushed to
    have yet to take it (``hold``) and no newer version of the same object was
    written (``weaken``: the store does where watch backlogs are unbounded);
    otherwise only weakly: while a consumer keeps it (an
    informer's cache) later watchers still get the same one, and once none
    does, a watcher still behind decodes its own. Holding it until the slowest
    watcher took it kept every decoded version of every object alive in a
    burst (100,000 pods created at once: several GB of backlog).

    ``base`` is the event of the object's previous version: when decoded, the
    new version shares the values it did not change (``reuse_unchanged``) with
    the previous one if that is still decoded; an ``interner`` then shares the
    rest with other objects. The JSON is dropped once every watcher took the
    event (the store and its history keep their own)."""

    __slots__ = ("raw", "_strong", "_ref", "_remaining", "_takers", "_base", "_interner")

    def __init__(self, raw: str, interner: Interner | None = None) -> None:
        self.raw: str | None = raw
        self._interner = interner
        self._strong: Any = None
        self._ref: weakref.ref[Any] | None = None
        self._remaining = 0
        self._takers = 0
        self._base: SharedEvent | None = None

    def hold(self, watchers: int) -> None:
        """Keep the decoded object until this many watchers have taken it."""
        self._remaining = self._takers = watchers
        if watchers <= 0:
            self.raw = None

    def weaken(self) -> None:
        """A newer version of the object was written: hold this one no longer."""
        self._strong = None
        self._remaining = 0

    def release(self) -> None:
        """A watcher it was pushed to will not take it (closed)."""
        self._remaining -= 1
        if self._remaining <= 0:
            self._strong = None
        self._taken()

    def _taken(self) -> None:
        self._takers -= 1
        if self._takers <= 0:
            self.raw = None

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
            if self.raw is None:
                raise RuntimeError("a SharedEvent taken by more watchers than it was pushed to")
            obj = codec.loads(self.raw)  # registered for the check below, as handed out
            if obj.__class__ is dict:
                base, self._base = self._base, None
                old = base.current() if base is not None else None
                if old is not None:
                    reuse_unchanged(obj, old)
                if self._interner is not None:
                    self._interner.intern(obj, old)
                obj = SharedDict(obj)
                self._ref = weakref.ref(obj)
            if _checking:
                _checked.append((self.raw, obj))
            if self._remaining > 1:
                self._strong = obj
        self._remaining -= 1
        if self._remaining <= 0:
            self._strong = None
        self._taken()
        return obj
