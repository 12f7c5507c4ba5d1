"""Controller: workers that pop keys from a WorkQueue and call ``reconcile(key)``.

A ``Result(requeue_after=...)`` asks to be called again later; an exception is logged and retried with back-off.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, Generic, Hashable, TypeVar

from phalanx.objects.clock import Clock

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)



from phalanx.runtime.workqueue import WorkQueue


@dataclass(frozen=True)
class Result:
    """What a reconcile returns: when to look again (seconds), if at all."""

    requeue_after: float | None = None


class Controller(Generic[K]):
    """Workers running ``reconcile(key)`` for keys put on ``queue``.

    ``clock`` is kept for components that want it; the queue's timers run on the
    event loop's own time (a simulation drives time through its loop).
    """

    def __init__(
        self,
        name: str,
        reconcile: Callable[[K], Awaitable[Result | None]],
        workers: int = 1,
        clock: Clock | None = None,
        *,
        base_delay: float = 0.005,
        max_delay: float = 10.0,
    ) -> None:
        self.name = name
        self.clock = clock or Clock()
        self.queue: WorkQueue[K] = WorkQueue(base_delay, max_delay)
        self._reconcile = reconcile
        self._workers = max(1, workers)
        self._tasks: list[asyncio.Task[None]] = []

    def enqueue(self, key: K) -> None:
        self.queue.add(key)

    async def run(self) -> None:
        """Run the workers until ``stop()``; a worker finishes its current key first."""
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._worker(), name=f"{self.name}-worker-{i}")
                       for i in range(self._workers)]
        try:
            await asyncio.gather(*self._tasks)
        finally:
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until the queue is idle (every queued key reconciled, with the
        writes and Events of its round), at most ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.queue.idle():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    async def stop(self) -> None:
        self.queue.shutdown()

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            try:
                result = await self._reconcile(key)
            except Exception:
                delay = self.queue.add_rate_limited(key)
                log.exception("%s: reconcile of %r failed; retrying in %.3fs", self.name, key, delay)
            else:
                self.queue.forget(key)
                if isinstance(result, Result) and result.requeue_after is not None:
                    self.queue.add_after(key, result.requeue_after)
                elif result is not None and not isinstance(result, Result):
                    log.warning("%s: reconcile of %r returned %r, not a Result", self.name, key, result)
            finally:
                self.queue.done(key)
