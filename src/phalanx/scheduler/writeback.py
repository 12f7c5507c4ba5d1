"""The scheduler shell's write queue: binds and status writes sent in the
background, so that a session never waits for the API server.

- Binds go first: a status write waits while any bind is queued.
- At most ``concurrency`` requests are in flight.
- A status write is keyed by its object: one write per object at a time, and a
  newer write for an object that is still queued replaces the older one (the
  latest decision wins; the older was never sent).
- A write that raises is logged and dropped; the write itself decides what a
  failure undoes.
- ``settle()`` waits until everything queued so far is sent; ``stop()`` drops
  what is not sent yet and waits for what is in flight.
"""
from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from typing import Awaitable, Callable, Hashable

log = logging.getLogger(__name__)

Write = Callable[[], Awaitable[None]]


class WriteBack:
    def __init__(self, concurrency: int = 32) -> None:
        if concurrency < 1:
            raise ValueError("concurrency: must be at least 1")
        self.concurrency = concurrency
        self._binds: deque[Write] = deque()
        self._ready: OrderedDict[Hashable, Write] = OrderedDict()  # keyed writes not started, in order
        self._later: dict[Hashable, Write] = {}  # the next write of an object whose write is in flight
        self._busy: set[Hashable] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle: asyncio.Event | None = None
        self._stopped = False

    # ---------------------------------------------------------------- queueing
    def bind(self, write: Write) -> None:
        """Queue a bind (sent before any queued status write)."""
        if self._stopped:
            return
        self._binds.append(write)
        self._pump()

    def put(self, key: Hashable, write: Write) -> None:
        """Queue the write of object ``key``, replacing one not sent yet."""
        if self._stopped:
            return
        if key in self._busy:
            self._later[key] = write
        else:
            self._ready[key] = write
        self._pump()

    def pending(self) -> int:
        """Writes queued or in flight."""
        return len(self._binds) + len(self._ready) + len(self._later) + len(self._tasks)

    def queued(self, key: Hashable) -> bool:
        """A write of ``key`` is queued or in flight."""
        return key in self._ready or key in self._later or key in self._busy

    # ---------------------------------------------------------------- waiting
    async def settle(self) -> None:
        """Return once every write queued so far (and any queued meanwhile) is done."""
        while self.pending():
            if self._idle is None:
                self._idle = asyncio.Event()
            self._idle.clear()
            await self._idle.wait()

    async def stop(self) -> None:
        """Send nothing more; wait for the requests already in flight."""
        self._stopped = True
        self._binds.clear()
        self._ready.clear()
        self._later.clear()
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        self._wake_idle()

    # ---------------------------------------------------------------- running
    def _pump(self) -> None:
        while not self._stopped and len(self._tasks) < self.concurrency:
            key: Hashable | None
            if self._binds:
                key, write = None, self._binds.popleft()
            elif self._ready:
                key, write = self._ready.popitem(last=False)
                self._busy.add(key)
            else:
                break
            task = asyncio.get_running_loop().create_task(self._run(key, write))
            self._tasks.add(task)
            task.add_done_callback(self._done(key))

    async def _run(self, key: Hashable | None, write: Write) -> None:
        try:
            await write()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("scheduler: a write failed (%s)", key if key is not None else "bind")

    def _done(self, key: Hashable | None) -> Callable[[asyncio.Task[None]], None]:
        def done(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            if key is not None:
                self._busy.discard(key)
                nxt = self._later.pop(key, None)
                if nxt is not None and not self._stopped:
                    self._ready[key] = nxt
            self._pump()
            if not self.pending():
                self._wake_idle()
        return done

    def _wake_idle(self) -> None:
        if self._idle is not None:
            self._idle.set()
