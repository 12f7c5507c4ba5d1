"""WorkQueue: deduplicated keys, one worker per key at a time, delayed adds and per-key back-off.

One ``loop.call_later`` timer per key (earliest deadline wins); failures back off 5 ms doubling to 10 s.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Generic, Hashable, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)



class WorkQueue(Generic[K]):
    """A deduplicating queue of keys for reconcile workers.

    A key added while it is being processed is processed again once ``done``
    is called for it, never concurrently.
    """

    def __init__(self, base_delay: float = 0.005, max_delay: float = 10.0) -> None:
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._failures: dict[K, int] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutdown = False
        self.base_delay = base_delay
        self.max_delay = max_delay

    def add(self, key: K) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # queued again by done()
        self._queue.append(key)
        self._wake_one()

    def add_after(self, key: K, seconds: float) -> None:
        """Add ``key`` after ``seconds``; with a timer already pending for it, the
        earlier deadline wins (one timer per key)."""
        if self._shutdown:
            return
        if seconds <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        current = self._timers.get(key)
        if current is not None:
            if current[0] <= deadline:
                return
            current[1].cancel()
        self._timers[key] = (deadline, loop.call_later(seconds, self._fire, key))

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K) -> float:
        """Re-add after this key's back-off (base doubling per failure, capped);
        returns the delay."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay = min(self.base_delay * (1 << min(n, 40)), self.max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset the back-off of ``key`` (after a successful reconcile)."""
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K | None:
        """The next key (marked as processing), or None once shut down."""
        while not self._queue:
            if self._shutdown:
                return None
            fut = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            finally:
                with contextlib.suppress(ValueError):
                    self._getters.remove(fut)
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty and not self._shutdown:
            self._queue.append(key)
            self._wake_one()

    def shutdown(self) -> None:
        """Stop handing out keys; pending timers are cancelled, waiters return None."""
        self._shutdown = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._queue.clear()
        self._dirty.clear()
        while self._getters:
            f = self._getters.popleft()
            if not f.done():
                f.set_result(None)

    def _wake_one(self) -> None:
        while self._getters:
            f = self._getters.popleft()
            if not f.done():
                f.set_result(None)
                return

    def pending_timers(self) -> int:
        return len(self._timers)

    def idle(self) -> bool:
        """No key waits or is being processed (timers for later are not work now)."""
        return not self._dirty and not self._processing

    def __len__(self) -> int:
        return len(self._queue)
