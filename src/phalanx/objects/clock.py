"""One clock for every component.

Pure cores take ``now`` as an argument; shells read it from a Clock so the same
code can run in real time or on a virtual clock (simulation, unit tests).
"""
from __future__ import annotations

import functools
import time
from datetime import datetime, timedelta, timezone
from typing import Any


class Clock:
    """Real wall-clock time (UTC) plus a monotonic source for intervals."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock(Clock):
    """A clock that only moves when told to. For tests and simulation."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=timezone.utc)
        self._mono = 1000.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds


_last_second: list[Any] = [None, ""]  # [whole second, its text]: most stamps repeat the last one


def format_time(t: datetime) -> str:
    """RFC 3339 with second precision and a Z, as Kubernetes writes timestamps."""
    second = t.timestamp() // 1
    last = _last_second
    if last[0] == second:
        cached: str = last[1]
        return cached
    text = t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    last[0], last[1] = second, text
    return text


def format_micro_time(t: datetime) -> str:
    """RFC 3339 with microseconds and a Z: Kubernetes' MicroTime (Lease renewTime, Event eventTime)."""
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(s: str | None) -> datetime | None:
    if not s:
        return None
    return _parse_time(s) if s.__class__ is str else _parse_time.__wrapped__(s)


@functools.lru_cache(maxsize=1024)
def _parse_time(s: str) -> datetime:
    """Timestamps repeat (one per second, many objects each): parsed once each (datetimes are immutable)."""
    s = s.strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    return datetime.fromisoformat(s)
