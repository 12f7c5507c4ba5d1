"""Kubernetes v1 Events: what ``kubectl describe`` and ``get events`` show.

``EventRecorder`` creates Event objects and, like client-go's correlator,
folds an identical event (same object, type, reason and message) seen again
within 10 minutes into the existing one (count + 1, new lastTimestamp).
Records may run concurrently: identical ones wait for each other, so a
repeat is still folded (never a second Event, never a lost count).
Recording never raises: an event lost is logged, never a failed reconcile.
"""
from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from phalanx.api.constants import DEFAULT_NAMESPACE
from phalanx.api.registry import by_kind
from phalanx.client.interface import Client, Obj
from phalanx.objects.clock import Clock, format_time
from phalanx.objects.errors import AlreadyExists, NotFound

log = logging.getLogger(__name__)

EVENT_TYPES = ("Normal", "Warning")
CORRELATION_WINDOW = timedelta(minutes=10)
_CACHE_SIZE = 4096  # client-go's maxLruCacheEntries


def involved_object(obj: Obj) -> dict[str, Any]:
    """The ObjectReference an Event points at."""
    meta = obj.get("metadata") or {}
    ref: dict[str, Any] = {"kind": obj.get("kind", "")}
    try:
        namespaced = by_kind(obj.get("kind", "")).namespaced
    except KeyError:
        namespaced = bool(meta.get("namespace"))
    if namespaced and meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    ref["name"] = meta.get("name", "")
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    ref["apiVersion"] = obj.get("apiVersion", "")
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


def event_namespace(obj: Obj) -> str:
    """Events live in the object's namespace; cluster-scoped objects' in default."""
    return (obj.get("metadata") or {}).get("namespace") or DEFAULT_NAMESPACE


def build_event(
    obj: Obj, type_: str, reason: str, message: str, component: str, now: datetime, suffix: int,
) -> Obj:
    """A v1 Event shaped as client-go's recorder writes it (pure)."""
    ts = format_time(now)
    name = (obj.get("metadata") or {}).get("name", "")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{suffix:016x}", "namespace": event_namespace(obj)},
        "involvedObject": involved_object(obj),
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "firstTimestamp": ts,
        "lastTimestamp": ts,
        "count": 1,
        "type": type_,
        # eventTime stays unset (client-go's null, which admission prunes anyway).
        "reportingComponent": component,
        "reportingInstance": "",
    }


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    last: datetime


class EventRecorder:
    """Records Events for one component; see the module docstring."""

    def __init__(self, client: Client, component: str, clock: Clock | None = None) -> None:
        self.client = client
        self.component = component
        self.clock = clock or Clock()
        self._seen: OrderedDict[tuple[Any, ...], _Seen] = OrderedDict()
        self._last_suffix = 0
        self._inflight: dict[tuple[Any, ...], asyncio.Future[None]] = {}

    def _suffix(self, now: datetime) -> int:
        # client-go names events <name>.<UnixNano in hex>; keep them unique even
        # when the clock stands still (fake clocks, coarse timers).
        ns = int(now.timestamp() * 1_000_000) * 1000
        self._last_suffix = max(ns, self._last_suffix + 1)
        return self._last_suffix

    async def record(self, obj: Obj, type: str, reason: str, message: str) -> None:
        try:
            await self._record(obj, type, reason, message)
        except Exception as e:
            log.warning("%s: could not record event %s for %s/%s: %s", self.component, reason,
                        event_namespace(obj), (obj.get("metadata") or {}).get("name"), e)

    async def _record(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        if type_ not in EVENT_TYPES:
            log.error("%s: unsupported event type %r (reason %s)", self.component, type_, reason)
            return
        now = self.clock.now()
        ref = involved_object(obj)
        key = (ref.get("uid") or (ref["kind"], ref.get("namespace"), ref["name"]), type_, reason, message)
        while (pending := self._inflight.get(key)) is not None:
            await pending  # an identical record is being written: fold into it once it is
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._inflight[key] = done
        try:
            await self._write(key, obj, type_, reason, message, now)
        finally:
            del self._inflight[key]
            done.set_result(None)

    async def _write(self, key: tuple[Any, ...], obj: Obj, type_: str, reason: str, message: str,
                     now: datetime) -> None:
        seen = self._seen.get(key)
        if seen is not None and now - seen.last <= CORRELATION_WINDOW:
            try:
                await self.client.patch("Event", seen.name, seen.namespace,
                                        {"count": seen.count + 1, "lastTimestamp": format_time(now)})
                seen.count += 1
                seen.last = now
                self._seen.move_to_end(key)
                return
            except NotFound:
                pass  # the event expired or was deleted: write a new one
        for _ in range(5):
            ev = build_event(obj, type_, reason, message, self.component, now, self._suffix(now))
            try:
                created = await self.client.create(ev)
                break
            except AlreadyExists:
                continue
        else:
            raise RuntimeError("no free event name")
        self._seen[key] = _Seen(created["metadata"]["name"], created["metadata"]["namespace"], 1, now)
        self._seen.move_to_end(key)
        while len(self._seen) > _CACHE_SIZE:
            self._seen.popitem(last=False)


async def record(
    client: Client, obj: Obj, type: str, reason: str, message: str,
    component: str = "phalanx", clock: Clock | None = None,
) -> None:
    """Record one event without correlation (use an ``EventRecorder`` to fold repeats)."""
    await EventRecorder(client, component, clock).record(obj, type, reason, message)


class EventSink:
    """Records events in the background, as client-go's broadcaster does: ``emit``
    never waits for the API server; at most ``max_queued`` events wait (client-go's
    1,000) and one more is dropped with a warning; ``workers`` write at once.
    ``flush`` waits until everything emitted so far is written; ``stop`` flushes
    (for at most ``timeout`` seconds) and ends the workers."""

    def __init__(self, recorder: EventRecorder, *, workers: int = 4, max_queued: int = 1000) -> None:
        self.recorder = recorder
        self.workers = workers
        self.max_queued = max_queued
        self.dropped = 0
        self._queue: asyncio.Queue[tuple[Obj, str, str, str]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []

    def emit(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        if self._queue.qsize() >= self.max_queued:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("%s: %d event(s) dropped: the API server is not keeping up (latest: %s %s)",
                            self.recorder.component, self.dropped, reason, message)
            return
        self._queue.put_nowait((obj, type_, reason, message))
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._work()) for _ in range(self.workers)]

    async def _work(self) -> None:
        while True:
            obj, type_, reason, message = await self._queue.get()
            try:
                await self.recorder.record(obj, type_, reason, message)  # never raises
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        await self._queue.join()

    async def stop(self, timeout: float = 5.0) -> None:
        try:
            await asyncio.wait_for(self.flush(), timeout)
        except asyncio.TimeoutError:
            log.warning("%s: %d event(s) not written at stop", self.recorder.component, self._queue.qsize())
        finally:  # also when the stop itself is cancelled: no writer outlives it
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks = []
