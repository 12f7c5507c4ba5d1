"""Making the writes of one plan: each request started in plan order, all of them
waited for together (one round trip of waiting instead of one per write).
"""
from __future__ import annotations

import asyncio
from typing import Any, Coroutine


async def in_order(calls: list[Coroutine[Any, Any, Any]], eager: bool = True) -> list[Any]:
    """Run ``calls`` concurrently, each started eagerly in list order (its request is
    made before the next one's), results in list order. A call that needs no waiting
    (an in-memory store without group commit) completes at once, without yielding to
    the event loop, so such a plan is still applied in one step.

    An exception raised before a call first waits stops the calls after it (as when
    they were made one by one); the calls started run to their end; then the first
    exception is raised.

    Without ``eager`` (a client whose calls are bound to the task that starts them,
    e.g. anyio's cancel scopes in an HTTP client) the calls run one after the other,
    and an exception stops the calls after it."""
    if not eager:
        results_: list[Any] = []
        for i, coro in enumerate(calls):
            try:
                results_.append(await coro)
            except BaseException:
                for rest in calls[i + 1:]:
                    rest.close()
                raise
        return results_
    started: list[asyncio.Future[Any]] = []
    error: BaseException | None = None
    for coro in calls:
        if error is not None:
            coro.close()
            continue
        try:
            started.append(_start_eagerly(coro))
        except BaseException as e:
            error = e
    if error is not None and not isinstance(error, Exception):
        raise error  # a crash, a cancellation: at once
    results: list[Any] = []
    for fut in started:
        try:
            results.append(await fut)
        except Exception as e:
            results.append(e)
    if error is not None:
        raise error
    for r in results:
        if isinstance(r, Exception):
            raise r
    return results


def _start_eagerly(coro: Coroutine[Any, Any, Any]) -> "asyncio.Future[Any]":
    """Run ``coro`` until it first waits (Python 3.12's eager tasks): a done future if
    it finished, else a task that carries it on from there. What it raises before
    waiting is raised here."""
    loop = asyncio.get_running_loop()
    try:
        waiting = coro.send(None)
    except StopIteration as stop:
        fut = loop.create_future()
        fut.set_result(stop.value)
        return fut
    return loop.create_task(_carry_on(coro, waiting))


async def _carry_on(coro: Coroutine[Any, Any, Any], waiting: Any) -> Any:
    """Drive ``coro`` as a Task would: wait for the future it yielded, then resume it
    (a cancellation is passed to that future, so ``coro`` sees it where it waits)."""
    while True:
        if waiting is None:  # a bare yield (asyncio.sleep(0))
            await asyncio.sleep(0)
        else:
            try:
                await asyncio.wait((waiting,))
            except asyncio.CancelledError:
                waiting.cancel()
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            return stop.value


# ---- which watch events can change a plan ------------------------------------------------

# Fields the job's core never reads (metadata.resourceVersion and managedFields change on
# every write; binding sets spec.nodeName and a condition; the agent fills IPs and times;
# of the conditions only the scheduler's eviction mark is read).
# Container statuses are compared on what restarts.py and the frameworks read of them.
