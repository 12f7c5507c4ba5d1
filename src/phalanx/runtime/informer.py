"""Informer: a watched, cached, indexed view of one kind, as client-go's shared informer;
SharedInformers: one such informer per kind for all the components of a process.

List, then watch from the list's resourceVersion; relist on Gone; call handlers on every change.
"""
from __future__ import annotations

import asyncio
import builtins
import logging
from typing import Any, Callable, Iterable

from phalanx.api.registry import by_kind
from phalanx.client.interface import Client, Obj
from phalanx.client.util import closing_stream
from phalanx.objects.errors import Gone
from phalanx.objects.meta import resource_version
from phalanx.objects.selectors import LabelSelector, parse_label_selector
from phalanx.store.decode import Interner

log = logging.getLogger(__name__)

Handler = Callable[[str, Obj, "Obj | None"], None]
IndexFunc = Callable[[Obj], "list[str] | tuple[str, ...]"]



class Informer:
    """A watched, cached view of one kind (optionally one namespace).

    Objects returned by ``get``/``list``/``by_index`` and passed to handlers are
    the cache's own: treat them as read-only (copy before changing). Over a
    client that shares watch objects (``LocalClient.shares_watch_objects``)
    every informer of the process gets the same object for an event, so a
    mutation would corrupt them all. A ``transform`` (which must not mutate its
    argument either) changes objects before they are cached, like client-go's
    SetTransform. A ``trim`` is a transform that only drops what the consumer
    never reads, to save memory: it is applied to the objects this informer
    alone holds (list results, a watch that does not share), not to shared
    ones, which the process's other informers hold whole anyway (a trimmed
    copy would add to the shared object, not replace it).
    """

    def __init__(
        self,
        client: Client,
        kind: str,
        namespace: str | None = None,
        *,
        transform: Callable[[Obj], Obj] | None = None,
        trim: Callable[[Obj], Obj] | None = None,
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
        self._trim = trim
        self._retry_cap = retry_cap
        self._cache: dict[str | None, dict[str, Obj]] = {}
        self._handlers: list[Handler] = []
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, dict[tuple[str | None, str], Obj]]] = {}
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._halted = asyncio.Event()  # set by stop(): ends a wait_synced that would never return
        self.last_resource_version: str | None = None

    # -- registration --------------------------------------------------------

    def add_handler(self, on_event: Handler) -> None:
        """``on_event(type, obj, old)``; type is ADDED, MODIFIED or DELETED. On a
        relist the differences are replayed as such events. A handler added once
        the informer has listed is first sent an ADDED for every cached object,
        as client-go's AddEventHandler does."""
        self._handlers.append(on_event)
        if self._synced.is_set():
            for bucket in list(self._cache.values()):
                for obj in list(bucket.values()):
                    try:
                        on_event("ADDED", obj, None)
                    except Exception:
                        log.exception("informer %s: handler failed on ADDED", self.kind)

    def remove_handler(self, on_event: Handler) -> None:
        """Stop calling a handler added before (client-go's RemoveEventHandler)."""
        try:
            self._handlers.remove(on_event)
        except ValueError:
            pass

    def drop_trim(self) -> None:
        """Cache whole objects after all (a consumer that reads more shares this one)."""
        self._trim = None

    @property
    def trim(self) -> Callable[[Obj], Obj] | None:
        return self._trim

    @property
    def transform(self) -> Callable[[Obj], Obj] | None:
        return self._transform

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
        if self._task is not None and not self._task.done() and self._stopped:
            await asyncio.gather(self._task, return_exceptions=True)  # stopping: let it end first
        if self._task is None or self._task.done():
            self._stopped = False
            self._halted.clear()
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer-{self.kind}")

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until the first list is in the cache (True) or the informer is stopped
        before that (False), as client-go's WaitForCacheSync; TimeoutError after ``timeout``."""
        await _first_of(self._synced, self._halted, timeout, self.kind)
        return self._synced.is_set()

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def stop(self) -> None:
        self._stopped = True
        self._halted.set()
        if self._task is not None:
            self._task.cancel()

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
            shared = getattr(self.client, "shares_watch_objects", False) is True
            if shared:
                stream = self.client.watch(self.kind, self.namespace, resource_version=rv, shared=True)  # type: ignore[call-arg]
            else:
                stream = self.client.watch(self.kind, self.namespace, resource_version=rv)
            trim = None if shared else self._trim
            async with closing_stream(stream):
                async for ev in stream:
                    seen += 1
                    new_rv = (ev.object.get("metadata") or {}).get("resourceVersion")
                    if ev.type == "ERROR":
                        raise Gone(str(ev.object.get("message", "watch error")))
                    if ev.type != "BOOKMARK":
                        self._apply(ev.type, ev.object if trim is None else trim(ev.object))
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
        """Make the cache equal to a fresh list, replaying the differences. The
        list's objects share their equal parts (``Interner``): cached objects are
        read-only, and a list is where many alike ones (a cluster's nodes) arrive at once."""
        interner = Interner()
        for o in items:
            interner.intern(o)
        if self._trim is not None:
            items = [self._trim(o) for o in items]
        if self._transform is not None:
            items = [self._transform(o) for o in items]
        fresh = {self._key(o): o for o in items}
        for (ns, name), old in [((ns, n), o) for ns, b in self._cache.items() for n, o in b.items()]:
            if (ns, name) not in fresh:
                self._remove(ns, name, old)
                self._dispatch("DELETED", old, old)
        for (ns, name), obj in fresh.items():
            bucket = self._cache.get(ns)
            prev = bucket.get(name) if bucket else None
            if prev is not None and resource_version(prev) == resource_version(obj):
                continue
            self._put(ns, name, obj, prev)
            self._dispatch("MODIFIED" if prev is not None else "ADDED", obj, prev)

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

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        return list(self._indices[name].get(value, {}).values())

    def __len__(self) -> int:
        return sum(len(b) for b in self._cache.values())


async def _first_of(synced: asyncio.Event, halted: asyncio.Event, timeout: float | None, kind: str) -> None:
    """Wait until either event is set; TimeoutError after ``timeout``."""
    if not synced.is_set() and not halted.is_set():
        await _first_of_futures({asyncio.ensure_future(synced.wait()), asyncio.ensure_future(halted.wait())},
                                timeout, kind)


async def _first_of_futures(waits: Iterable[asyncio.Future[Any]], timeout: float | None, kind: str) -> None:
    """Wait until one of ``waits`` is done, then cancel them all; TimeoutError after ``timeout``."""
    futures = list(waits)
    try:
        done, _ = await asyncio.wait(futures, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in futures:
            w.cancel()
    if not done:
        raise asyncio.TimeoutError(f"informer {kind}: not synced within {timeout:g}s")


class SharedInformer:
    """One component's use of an informer that ``SharedInformers`` shares: it adds its
    own handlers and indexes; its ``stop`` ends only its own wait and, while other
    components still use the informer, takes its handlers off (a ``start`` puts them
    back, replaying the cache); the informer stops when every component has stopped."""

    def __init__(self, informer: Informer, owner: "SharedInformers") -> None:
        self.informer = informer
        self._owner = owner
        self._handlers: list[Handler] = []
        self._index_names: dict[str, str] = {}
        self._halted = asyncio.Event()
        self._active = False
        self._detached = False  # handlers taken off at a stop

    @property
    def kind(self) -> str:
        return self.informer.kind

    @property
    def namespace(self) -> str | None:
        return self.informer.namespace

    @property
    def last_resource_version(self) -> str | None:
        return self.informer.last_resource_version

    @property
    def synced(self) -> bool:
        return self.informer.synced

    def add_handler(self, on_event: Handler) -> None:
        """As ``Informer.add_handler`` (an informer that has listed replays its cache)."""
        self._handlers.append(on_event)
        self.informer.add_handler(on_event)

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """An index of this component's own (names do not clash with other components')."""
        own = self._index_names[name] = f"{id(self):x}/{name}"
        self.informer.add_index(own, fn)

    async def start(self) -> None:
        self._halted.clear()
        if self._detached:
            self._detached = False
            for h in self._handlers:
                self.informer.add_handler(h)
        if not self._active:
            self._active = True
            self._owner.use(self.informer, 1)
        await self.informer.start()

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """As ``Informer.wait_synced``; False once this component stopped."""
        if not self._halted.is_set():
            waits = {asyncio.ensure_future(self.informer.wait_synced()), asyncio.ensure_future(self._halted.wait())}
            await _first_of_futures(waits, timeout, self.kind)
        return self.informer.synced and not self._halted.is_set()

    async def stop(self) -> None:
        self._halted.set()
        if not self._active:
            return
        self._active = False
        if self._owner.use(self.informer, -1) <= 0:
            await self.informer.stop()
        elif not self._detached:
            self._detached = True
            for h in self._handlers:
                self.informer.remove_handler(h)

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self.informer.get(namespace, name)

    def list(
        self, namespace: str | None = None, label_selector: str | dict[str, str] | LabelSelector | None = None,
    ) -> builtins.list[Obj]:
        return self.informer.list(namespace, label_selector)

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        return self.informer.by_index(self._index_names[name], value)

    def __len__(self) -> int:
        return len(self.informer)


class SharedInformers:
    """The informers of one process's components, one per kind, namespace and
    transform, as client-go's SharedInformerFactory: every event is watched,
    decoded and cached once for all the components that read the kind. A
    ``trim`` is kept only while every component asks for the same one (the
    others read whole objects). ``SharedInformers(client)`` made for a single
    component gives it informers of its own."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._informers: dict[tuple[str, str | None, object], Informer] = {}
        self._users: dict[Informer, int] = {}

    def informer(self, kind: str, namespace: str | None = None, *,
                 transform: Callable[[Obj], Obj] | None = None,
                 trim: Callable[[Obj], Obj] | None = None) -> SharedInformer:
        key = (kind, namespace, transform)
        inf = self._informers.get(key)
        if inf is not None and inf.trim is not trim and inf.trim is not None:  # whole objects serve any trim
            if inf.synced or inf.last_resource_version is not None:
                inf = None  # listed trimmed already: this component gets its own
            else:
                inf.drop_trim()
        if inf is None:
            inf = Informer(self.client, kind, namespace, transform=transform, trim=trim)
            self._informers.setdefault(key, inf)
            self._users[inf] = 0
        return SharedInformer(inf, self)

    def use(self, informer: Informer, delta: int) -> int:
        """Count a component starting (+1) or stopping (-1) ``informer``; how many use it now."""
        self._users[informer] += delta
        return self._users[informer]

    @property
    def count(self) -> int:
        """How many informers there are (observability, tests)."""
        return len(self._users)
