"""Retry a read-modify-write on Conflict (client-go's ``retry.RetryOnConflict``).

Optimistic concurrency makes a write with a stale resourceVersion fail with
Conflict; the caller re-reads and tries again. ``fn`` must do the whole
read-modify-write, so each attempt starts from fresh state.
"""
from __future__ import annotations

import asyncio
import random
from typing import Awaitable, Callable, TypeVar

from phalanx.objects.errors import Conflict

T = TypeVar("T")

# client-go's DefaultRetry: 5 steps of 10 ms, 10 % jitter.
DEFAULT_ATTEMPTS = 5
DEFAULT_DELAY = 0.01


async def retry_on_conflict(fn: Callable[[], Awaitable[T]], attempts: int = DEFAULT_ATTEMPTS,
                            delay: float = DEFAULT_DELAY, jitter: float = 0.1) -> T:
    """Call ``fn`` until it does not raise Conflict, at most ``attempts`` times;
    the last Conflict is raised. Other errors propagate at once."""
    if attempts < 1:
        raise ValueError(f"attempts: must be at least 1, got {attempts}")
    for i in range(attempts):
        try:
            return await fn()
        except Conflict:
            if i == attempts - 1:
                raise
            await asyncio.sleep(delay * (1 + jitter * random.random()))
    raise AssertionError("unreachable")  # pragma: no cover
