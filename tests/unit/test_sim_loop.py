"""The virtual-time event loop: timers in order, time jumps, idle detection, the clock."""
from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from phalanx.runtime.workqueue import WorkQueue
from phalanx.sim.loop import SIM_EPOCH, SimulationIdle, VirtualClock, VirtualEventLoop, run_virtual


def test_timers_fire_in_order_of_deadline_at_their_exact_virtual_times():
    fired: list[tuple[str, float]] = []

    async def main():
        loop = asyncio.get_running_loop()
        for name, delay in (("c", 30.0), ("a", 0.5), ("d", 7 * 86400.0), ("b", 10.0)):
            loop.call_later(delay, lambda n=name: fired.append((n, loop.time())))
        await asyncio.sleep(7 * 86400.0 + 1)

    wall = time.perf_counter()
    run_virtual(main())
    assert fired == [("a", 0.5), ("b", 10.0), ("c", 30.0), ("d", 604800.0)]
    assert time.perf_counter() - wall < 1.0  # a week of virtual time, no real waiting


def test_equal_deadlines_keep_scheduling_order_and_ready_callbacks_run_before_time_moves():
    order: list[str] = []

    async def main():
        loop = asyncio.get_running_loop()
        loop.call_later(5, order.append, "t1")
        loop.call_later(5, order.append, "t2")
        loop.call_soon(order.append, "soon")
        await asyncio.sleep(0)
        order.append(f"after-sleep0@{loop.time()}")
        await asyncio.sleep(6)

    run_virtual(main())
    assert order[:2] == ["soon", "after-sleep0@0.0"]
    assert sorted(order[2:]) == ["t1", "t2"]


def test_time_only_moves_when_nothing_is_ready_and_jumps_straight_to_the_next_timer():
    async def main():
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualEventLoop)
        t0, jumps0 = loop.time(), loop.jumps
        for _ in range(1000):  # busy work at one instant: no time passes
            await asyncio.sleep(0)
        assert loop.time() == t0
        await asyncio.sleep(3600)
        assert loop.time() == t0 + 3600
        assert loop.jumps == jumps0 + 1  # one jump, not 3600 small ones
        # Longer than asyncio's maximum select timeout (24 h): still lands exactly.
        await asyncio.sleep(3 * 86400 + 0.25)
        assert loop.time() == t0 + 3600 + 3 * 86400 + 0.25

    run_virtual(main())


def test_wait_for_timeouts_run_in_virtual_time():
    async def main():
        loop = asyncio.get_running_loop()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 42.0)
        return loop.time()

    assert run_virtual(main()) == 42.0


def test_idle_loop_raises_instead_of_hanging():
    loop = VirtualEventLoop()
    try:
        with pytest.raises(SimulationIdle, match="idle at t=12"):
            async def main():
                await asyncio.sleep(12)
                await asyncio.Event().wait()  # nothing can ever set it
            loop.run_until_complete(main())
    finally:
        loop.close()


def test_idle_hook_may_schedule_more_work_and_run_until_idle_returns():
    loop = VirtualEventLoop()
    calls: list[float] = []
    try:
        loop.call_later(5, calls.append, 5.0)
        loop.run_until_idle()
        assert calls == [5.0] and loop.time() == 5.0
        ev = asyncio.Event()
        hooked: list[float] = []

        def idle():
            hooked.append(loop.time())
            loop.call_later(2, ev.set)  # the hook schedules the work that ends the wait

        loop.on_idle = idle
        loop.run_until_complete(ev.wait())
        assert hooked == [5.0] and loop.time() == 7.0
    finally:
        loop.close()


def test_quiescent_waits_for_everything_at_this_instant_before_time_moves():
    async def main():
        loop = asyncio.get_running_loop()
        seen: list[str] = []

        async def chain(n: int):
            for i in range(n):
                await asyncio.sleep(0)
            seen.append("chain done")

        loop.create_task(chain(50))
        loop.call_later(1, seen.append, "later")
        await loop.quiescent()
        seen.append(f"quiet@{loop.time()}")
        await asyncio.sleep(2)
        return seen

    assert run_virtual(main()) == ["chain done", "quiet@0.0", "later"]


def test_virtual_clock_derives_wall_time_and_monotonic_from_the_loop():
    async def main():
        loop = asyncio.get_running_loop()
        clock = VirtualClock(loop)
        assert clock.now() == SIM_EPOCH and clock.monotonic() == 0.0
        await asyncio.sleep(90.5)
        assert clock.now() == SIM_EPOCH + timedelta(seconds=90.5)
        assert clock.monotonic() == 90.5
        assert clock.seconds(clock.now()) == 90.5

    run_virtual(main())


def test_work_queue_delays_run_in_virtual_time():
    async def main():
        loop = asyncio.get_running_loop()
        q: WorkQueue[str] = WorkQueue()
        q.add_after("b", 20)
        q.add_after("a", 10)
        q.add_after("b", 30)  # the earlier deadline wins
        got = []
        for _ in range(2):
            key = await q.get()
            got.append((key, loop.time()))
            q.done(key)
        return got

    assert run_virtual(main()) == [("a", 10.0), ("b", 20.0)]


def test_no_io_in_a_simulation():
    loop = VirtualEventLoop()
    try:
        with pytest.raises(NotImplementedError):
            loop._selector.register(0, 1)
    finally:
        loop.close()
