"""Virtual time for asyncio: an event loop whose clock only moves when nothing is ready.

``VirtualEventLoop.time()`` is virtual. Where a real loop would block in
``select(timeout)`` waiting for I/O, this one has none to wait for: it jumps
its clock to the next timer and returns no events. So every ``asyncio.sleep``,
``call_later``, ``wait_for`` timeout and WorkQueue delay of the real
components runs in virtual time, in order, and a 30 s job takes microseconds.

With nothing ready and no timer left the simulation is idle: the loop calls
``on_idle`` (which may schedule more work) or raises ``SimulationIdle``, so a
simulation can never hang waiting for an event that cannot come.

No threads, sockets or real sleeps: ``call_soon_threadsafe`` works (there is
nothing to wake), I/O transports are not supported.
"""
from __future__ import annotations

import asyncio
import collections
import selectors
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from phalanx.objects.clock import Clock

T = TypeVar("T")

# Virtual time starts here (a fixed epoch: outputs never depend on the wall clock).
SIM_EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
_RESOLUTION = 1e-9


class SimulationIdle(RuntimeError):
    """Nothing is ready and no timer is pending: nothing can ever happen again."""


class _VirtualSelector(selectors.BaseSelector):
    """A selector with no file objects: ``select(timeout)`` advances virtual time."""

    def __init__(self, loop: "VirtualEventLoop") -> None:
        self._loop = loop
        self._map: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        raise NotImplementedError("a virtual-time loop has no I/O")

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        raise KeyError(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self._loop.elapse(timeout)
        return []

    def get_map(self) -> dict[Any, selectors.SelectorKey]:
        return self._map

    def close(self) -> None:
        self._map.clear()


class VirtualEventLoop(asyncio.BaseEventLoop):
    """An asyncio loop on virtual time (seconds since the start of the simulation)."""

    # BaseEventLoop's queues (set by its __init__; typeshed does not declare them).
    _ready: collections.deque[asyncio.Handle]
    _scheduled: list[asyncio.TimerHandle]

    def __init__(self, start: float = 0.0, on_idle: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._vtime = float(start)
        self._selector = _VirtualSelector(self)
        self._clock_resolution = _RESOLUTION
        self.on_idle = on_idle
        self.jumps = 0       # how many times the clock moved forward
        self.steps = 0       # how many callbacks ran (events processed)
        self._quiet: list[asyncio.Future[None]] = []

    # -- time ---------------------------------------------------------------

    def time(self) -> float:
        return self._vtime

    def elapse(self, timeout: float | None) -> None:
        """What ``select(timeout)`` means in virtual time (called by the loop's selector)."""
        if timeout != 0 and self._quiet:
            # Everything due at this instant has run: wake ``quiescent()`` waiters
            # before the clock moves on (they run at this same instant).
            waiters, self._quiet = self._quiet, []
            for f in waiters:
                if not f.done():
                    f.set_result(None)
            return
        if timeout is None:
            # Nothing ready, no timer: the only way on is an idle hook that
            # schedules something.
            hook = self.on_idle
            if hook is not None:
                hook()
                if self._ready or self._scheduled:
                    return
            raise SimulationIdle(f"simulation idle at t={self._vtime:.6f}s: nothing ready, no timer pending")
        if timeout <= 0:
            return
        target = self._vtime + timeout
        if self._scheduled:
            when = self._scheduled[0].when()
            # Land exactly on the timer (no float drift past or short of it).
            if target >= when - _RESOLUTION:
                target = max(when, self._vtime)
        if target > self._vtime:
            self._vtime = target
            self.jumps += 1

    # -- what BaseEventLoop leaves to subclasses -----------------------------

    def _process_events(self, event_list: list[Any]) -> None:
        self.steps += len(self._ready)

    def _write_to_self(self) -> None:
        """Nothing to wake: the loop never blocks."""

    def close(self) -> None:
        super().close()
        self._selector.close()

    # -- conveniences ----------------------------------------------------------

    def quiescent(self) -> "asyncio.Future[None]":
        """A future that completes once nothing more is ready at the current
        instant (before the clock moves on): every consequence of what happened
        now has been delivered."""
        f = self.create_future()
        self._quiet.append(f)
        return f

    def run_until_idle(self) -> None:
        """Run until nothing is ready and no timer is pending."""
        hook = self.on_idle
        done = self.create_future()

        def idle() -> None:
            if not done.done():
                done.set_result(None)

        self.on_idle = idle
        try:
            self.run_until_complete(done)
        finally:
            self.on_idle = hook


class VirtualClock(Clock):
    """The ``Clock`` of a simulation: wall time = ``epoch`` + the loop's virtual seconds."""

    def __init__(self, loop: VirtualEventLoop, epoch: datetime = SIM_EPOCH) -> None:
        self.loop = loop
        self.epoch = epoch

    def now(self) -> datetime:
        return self.epoch + timedelta(seconds=self.loop.time())

    def monotonic(self) -> float:
        return self.loop.time()

    def seconds(self, t: datetime) -> float:
        """Virtual seconds since the start for a timestamp of this clock."""
        return (t - self.epoch).total_seconds()


def run_virtual(main: Coroutine[Any, Any, T], *, start: float = 0.0) -> T:
    """``asyncio.run`` on a fresh ``VirtualEventLoop``."""
    with asyncio.Runner(loop_factory=lambda: VirtualEventLoop(start)) as runner:
        return runner.run(main)
