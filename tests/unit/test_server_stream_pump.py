"""Watch and log streams move a backlog in a few event-loop turns, not one turn
per event: under load (the 500-job benchmark) a watch had fallen minutes behind
because every event waited for its own turn of a busy loop."""
from __future__ import annotations

import asyncio
import contextlib

import pytest

from phalanx.objects.errors import Gone
from phalanx.server.streams import TICK, with_ticks

pytestmark = pytest.mark.timeout(10)

N = 2000


async def _ready_then_idle(n: int, error: Exception | None = None):
    for i in range(n):
        yield i  # every item is ready: no suspension, like a watcher with a backlog
    if error is not None:
        raise error
    await asyncio.sleep(3600)


async def _turns_to_read(source, n: int) -> tuple[list, int]:
    loop = asyncio.get_running_loop()
    turns = 0
    ticking = True

    def tick() -> None:
        nonlocal turns
        turns += 1
        if ticking:
            loop.call_soon(tick)

    loop.call_soon(tick)
    got = []
    async with contextlib.aclosing(with_ticks(source, asyncio.Event(), None)) as items:
        async for item in items:
            got.append(item)
            if len(got) == n:
                break
    ticking = False
    return got, turns


async def test_a_backlog_is_delivered_in_a_few_loop_turns():
    got, turns = await _turns_to_read(_ready_then_idle(N), N)
    assert got == list(range(N))
    assert turns < N // 20, turns  # one turn per item before the fix


async def test_items_before_an_error_come_first_then_the_error():
    seen = []
    with pytest.raises(Gone):
        async for item in with_ticks(_ready_then_idle(5, Gone("too old")), asyncio.Event(), None):
            seen.append(item)
    assert seen == [0, 1, 2, 3, 4]


async def test_ticks_when_idle_and_stops_when_asked():
    stop = asyncio.Event()
    out = []
    async for item in with_ticks(_ready_then_idle(2), stop, 0.05):
        out.append(item)
        if item is TICK:
            stop.set()
    assert out == [0, 1, TICK]


async def test_a_slow_consumer_leaves_the_rest_with_the_source():
    pulled = 0

    async def counting():
        nonlocal pulled
        for i in range(10_000):
            pulled += 1
            yield i
        await asyncio.sleep(3600)

    async with contextlib.aclosing(with_ticks(counting(), asyncio.Event(), None)) as items:
        first = await items.__anext__()
        for _ in range(5):
            await asyncio.sleep(0)
        assert first == 0 and pulled < 1000  # bounded read-ahead, not the whole source
