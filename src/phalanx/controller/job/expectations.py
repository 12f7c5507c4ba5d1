"""Expectations: the objects a job controller created that its caches have not
seen yet, so that a round computed from those caches does not create them again.

As client-go's ControllerExpectations (which Kubeflow's job controllers use),
by object rather than by count: a creation is expected from before its request
(its watch event may be handled before the reply), observed when a cache sees
the object (its watch event, or the object found in the cache), dropped when
the request fails, and lapses after ``timeout`` seconds (an event a relist
missed: the object was deleted before the cache saw it).
"""
from __future__ import annotations

from typing import Callable, Iterable

Ref = tuple[str, str, str]  # (kind, namespace, name)


class Expectations:
    """Per job key, the created objects awaited in the caches, with their deadlines."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._by_key: dict[str, dict[Ref, float]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def expect(self, key: str, ref: Ref, now: float) -> None:
        self._by_key.setdefault(key, {})[ref] = now + self.timeout

    def observed(self, keys: Iterable[str], ref: Ref) -> None:
        """A cache has seen ``ref`` (or it was not created): none of ``keys`` awaits it."""
        for k in keys:
            awaited = self._by_key.get(k)
            if awaited is not None and awaited.pop(ref, None) is not None and not awaited:
                del self._by_key[k]

    def forget(self, key: str) -> None:
        """The job is gone: nothing is awaited for it."""
        self._by_key.pop(key, None)

    def pending(self, key: str, now: float, cached: Callable[[str, str, str], object]) -> float | None:
        """Seconds until the last of ``key``'s awaited objects lapses, or None when
        none is awaited any more; the lapsed ones and those ``cached`` finds are dropped."""
        awaited = self._by_key.get(key)
        if not awaited:
            return None
        live = {ref: d for ref, d in awaited.items() if d > now and cached(*ref) is None}
        if not live:
            del self._by_key[key]
            return None
        self._by_key[key] = live
        return max(live.values()) - now

    def awaited(self, key: str) -> dict[Ref, float]:
        """``key``'s awaited objects and their deadlines (a copy)."""
        return dict(self._by_key.get(key, {}))
