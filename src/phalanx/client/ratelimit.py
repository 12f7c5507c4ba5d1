"""A token bucket for client requests (client-go's QPS and burst).

A controller that loops on errors must not flood a shared API server: every
request takes a token; ``burst`` tokens refill at ``qps`` per second.
``reserve`` is pure (it takes ``now``) so the arithmetic is tested without
sleeping; ``acquire`` sleeps the reserved delay.
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable


class TokenBucket:
    """``qps <= 0`` means no limit."""

    def __init__(self, qps: float, burst: int, now: Callable[[], float] = time.monotonic) -> None:
        if burst < 1 and qps > 0:
            raise ValueError(f"burst: must be at least 1 when qps is set, got {burst}")
        self.qps = float(qps)
        self.burst = int(burst)
        self._now = now
        self._tokens = float(burst)
        self._last: float | None = None

    def reserve(self, now: float) -> float:
        """Take one token; return how many seconds to wait before using it
        (0 when one was available). Later reservations queue behind earlier ones."""
        if self.qps <= 0:
            return 0.0
        if self._last is not None and now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        if self._last is None or now > self._last:
            self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> None:
        delay = self.reserve(self._now())
        if delay > 0:
            await asyncio.sleep(delay)
