"""controller-runtime in miniature: informer cache, work queue, reconcile loop.

- ``Informer``: list, then watch from the list's resourceVersion; relist on
  Gone; keeps an in-memory cache and calls handlers on every change.
- ``WorkQueue``: deduplicated keys, never the same key in two workers at once,
  delayed adds (one ``loop.call_later`` timer per key, earliest deadline wins)
  and per-key exponential back-off for failures.
- ``Controller``: workers that pop keys and call ``reconcile(key)``; a
  ``Result(requeue_after=...)`` asks to be called again later; an exception is
  logged and retried with back-off (5 ms doubling to 10 s), never fatal.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Hashable, Iterator, TypeVar

from ..api.errors import Gone
from ..api.registry import by_kind
from ..client.interface import Client, Obj
from ..client.selectors import LabelSelector, parse_label_selector
from ..client.util import closing_stream
from ..clock import Clock

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
Handler = Callable[[str, Obj, "Obj | None"], None]
IndexFunc = Callable[[Obj], "list[str] | tuple[str, ...]"]


class _Stopped:
    """What ``stop()`` returns: callers may write ``x.stop()`` or ``await x.stop()``."""

    def __await__(self) -> Iterator[None]:
        return iter(())


_STOPPED = _Stopped()


# ---------------------------------------------------------------- informer


class Informer:
    """A watched, cached view of one kind (optionally one namespace).

    Objects returned by ``get``/``list``/``by_index`` and passed to handlers are
    the cache's own: treat them as read-only (copy before changing). Over a
    client that shares watch objects (``LocalClient.shares_watch_objects``)
    every informer of the process gets the same object for an event, so a
    mutation would corrupt them all. A ``transform`` (which must not mutate its
    argument either) trims objects before they are cached (e.g. to metadata
    only) to save memory, like client-go's SetTransform.
    """

    def __init__(
        self,
        client: Client,
        kind: str,
        namespace: str | None = None,
        *,
        transform: Callable[[Obj], Obj] | None = None,
        retry_cap: float = 5.0,
    ) -> None:
        self.client = client
        self.kind = kind
        self.namespace = namespace
        try:
            self._namespaced = by_kind(kind).namespaced
        except KeyError:
            self._namespaced = True
        self._transform = transform
        self._retry_cap = retry_cap
        self._cache: dict[str | None, dict[str, Obj]] = {}
        self._handlers: list[Handler] = []
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, dict[tuple[str | None, str], Obj]]] = {}
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.last_resource_version: str | None = None

    # -- registration --------------------------------------------------------

    def add_handler(self, on_event: Handler) -> None:
        """``on_event(type, obj, old)``; type is ADDED, MODIFIED or DELETED. On a
        relist the differences are replayed as such events."""
        self._handlers.append(on_event)

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Maintain an index ``fn(obj) -> values``; query it with ``by_index``."""
        self._indexers[name] = fn
        idx: dict[str, dict[tuple[str | None, str], Obj]] = {}
        self._indices[name] = idx
        for ns, bucket in self._cache.items():
            for n, obj in bucket.items():
                for v in self._index_values(fn, obj):
                    idx.setdefault(v, {})[(ns, n)] = obj

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        """Start listing and watching in the background (see ``wait_synced``)."""
        if self._task is None or self._task.done():
            self._stopped = False
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer-{self.kind}")

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Return once the first list is in the cache."""
        if timeout is None:
            await self._synced.wait()
        else:
            await asyncio.wait_for(self._synced.wait(), timeout)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def stop(self) -> _Stopped:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
        return _STOPPED

    async def run(self) -> None:
        """List and watch until stopped; relist on Gone, retry on other errors."""
        delay = 0.05
        while not self._stopped:
            try:
                lst = await self.client.list(self.kind, self.namespace)
                self._replace(lst.items)
                rv = lst.resource_version
                self.last_resource_version = rv
                self._synced.set()
                delay = 0.05
                rv = await self._watch_from(rv)
            except asyncio.CancelledError:
                raise
            except Gone:
                log.debug("informer %s: watch expired, relisting", self.kind)
                continue
            except Exception as e:
                log.warning("informer %s: %s; retrying in %.2fs", self.kind, e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._retry_cap)

    async def _watch_from(self, rv: str) -> str:
        """Watch (re-watching when a stream ends) until Gone is raised."""
        while not self._stopped:
            seen = 0
            if getattr(self.client, "shares_watch_objects", False) is True:
                stream = self.client.watch(self.kind, self.namespace, resource_version=rv, shared=True)  # type: ignore[call-arg]
            else:
                stream = self.client.watch(self.kind, self.namespace, resource_version=rv)
            async with closing_stream(stream):
                async for ev in stream:
                    seen += 1
                    new_rv = (ev.object.get("metadata") or {}).get("resourceVersion")
                    if ev.type == "ERROR":
                        raise Gone(str(ev.object.get("message", "watch error")))
                    if ev.type != "BOOKMARK":
                        self._apply(ev.type, ev.object)
                    if new_rv:
                        rv = new_rv
                        self.last_resource_version = rv
            # The stream ended (server timeout): watch again from where we were.
            await asyncio.sleep(0 if seen else 0.05)
        return rv

    # -- cache ---------------------------------------------------------------

    def _key(self, obj: Obj) -> tuple[str | None, str]:
        meta = obj.get("metadata") or {}
        return (meta.get("namespace") if self._namespaced else None, meta.get("name", ""))

    def _apply(self, type_: str, obj: Obj) -> None:
        if self._transform is not None:
            obj = self._transform(obj)
        ns, name = self._key(obj)
        bucket = self._cache.get(ns)
        old = bucket.get(name) if bucket else None
        if type_ == "DELETED":
            if old is not None:
                self._remove(ns, name, old)
            self._dispatch("DELETED", obj, old)
            return
        self._put(ns, name, obj, old)
        self._dispatch("MODIFIED" if old is not None else "ADDED", obj, old)

    def _replace(self, items: list[Obj]) -> None:
        """Make the cache equal to a fresh list, replaying the differences."""
        if self._transform is not None:
            items = [self._transform(o) for o in items]
        fresh = {self._key(o): o for o in items}
        for (ns, name), old in [((ns, n), o) for ns, b in self._cache.items() for n, o in b.items()]:
            if (ns, name) not in fresh:
                self._remove(ns, name, old)
                self._dispatch("DELETED", old, old)
        for (ns, name), obj in fresh.items():
            bucket = self._cache.get(ns)
            old = bucket.get(name) if bucket else None
            if old is not None and _rv(old) == _rv(obj):
                continue
            self._put(ns, name, obj, old)
            self._dispatch("MODIFIED" if old is not None else "ADDED", obj, old)

    def _put(self, ns: str | None, name: str, obj: Obj, old: Obj | None) -> None:
        if old is not None:
            self._unindex(ns, name, old)
        self._cache.setdefault(ns, {})[name] = obj
        for iname, fn in self._indexers.items():
            idx = self._indices[iname]
            for v in self._index_values(fn, obj):
                idx.setdefault(v, {})[(ns, name)] = obj

    def _remove(self, ns: str | None, name: str, old: Obj) -> None:
        self._unindex(ns, name, old)
        bucket = self._cache.get(ns)
        if bucket is not None:
            bucket.pop(name, None)
            if not bucket:
                del self._cache[ns]

    def _unindex(self, ns: str | None, name: str, old: Obj) -> None:
        for iname, fn in self._indexers.items():
            idx = self._indices[iname]
            for v in self._index_values(fn, old):
                entries = idx.get(v)
                if entries is not None:
                    entries.pop((ns, name), None)
                    if not entries:
                        del idx[v]

    def _index_values(self, fn: IndexFunc, obj: Obj) -> list[str] | tuple[str, ...]:
        try:
            return fn(obj) or ()
        except Exception:
            log.exception("informer %s: index function failed", self.kind)
            return ()

    def _dispatch(self, type_: str, obj: Obj, old: Obj | None) -> None:
        for h in self._handlers:
            try:
                h(type_, obj, old)
            except Exception:
                log.exception("informer %s: handler failed on %s", self.kind, type_)

    # -- reads ---------------------------------------------------------------

    def get(self, namespace: str | None, name: str) -> Obj | None:
        bucket = self._cache.get(namespace if self._namespaced else None)
        return bucket.get(name) if bucket else None

    def list(
        self, namespace: str | None = None, label_selector: str | dict[str, str] | LabelSelector | None = None,
    ) -> list[Obj]:
        sel = parse_label_selector(label_selector)
        if namespace is not None and self._namespaced:
            buckets = [self._cache.get(namespace) or {}]
        else:
            buckets = list(self._cache.values())
        out = []
        for b in buckets:
            for obj in b.values():
                if sel.empty() or sel.matches((obj.get("metadata") or {}).get("labels")):
                    out.append(obj)
        return out

    def by_index(self, name: str, value: str) -> list[Obj]:
        return list(self._indices[name].get(value, {}).values())

    def __len__(self) -> int:
        return sum(len(b) for b in self._cache.values())


def _rv(obj: Obj) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


# ---------------------------------------------------------------- work queue


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
        delay = min(self.base_delay * (2 ** min(n, 40)), self.max_delay)
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

    @property
    def shutting_down(self) -> bool:
        return self._shutdown

    def pending_timers(self) -> int:
        return len(self._timers)

    def idle(self) -> bool:
        """No key waits or is being processed (timers for later are not work now)."""
        return not self._dirty and not self._processing

    def __len__(self) -> int:
        return len(self._queue)


# ---------------------------------------------------------------- controller


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

    def enqueue_after(self, key: K, seconds: float) -> None:
        self.queue.add_after(key, seconds)

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

    def stop(self) -> _Stopped:
        self.queue.shutdown()
        return _STOPPED

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
