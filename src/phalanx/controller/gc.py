"""Garbage collector: delete objects whose owners are all gone (background cascade).

Watches every kind, keeps a uid index and an owner→dependents index, and
checks a dependent when one of its owners disappears, when it shows up with
an owner it has not seen, and once for everything at start (orphans left by
a crash). Before deleting it asks the API for each owner, as kube-controller-
manager's GC does, because the owner's watch may simply lag behind.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..api.errors import NotFound
from ..api.registry import all_kinds, by_kind
from ..client.interface import Client, Obj
from .runtime import Controller, Informer, _Stopped

log = logging.getLogger(__name__)

Key = tuple[str, "str | None", str]


def _slim(obj: Obj) -> Obj:
    """Only what the collector needs, so its caches stay small."""
    meta = obj.get("metadata") or {}
    slim_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp",
                                      "ownerReferences") if k in meta}
    return {"kind": obj.get("kind"), "metadata": slim_meta}


def _owner_uids(obj: Obj | None) -> set[str]:
    if not obj:
        return set()
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return {r["uid"] for r in refs if isinstance(r, dict) and isinstance(r.get("uid"), str)}


class GarbageCollector:
    """Background cascading deletion by ownerReferences, for every kind."""

    def __init__(self, client: Client, kinds: list[str] | None = None, workers: int = 2) -> None:
        self.client = client
        self.kinds = list(kinds or all_kinds())
        self.informers: dict[str, Informer] = {k: Informer(client, k, transform=_slim) for k in self.kinds}
        self._uids: dict[str, Key] = {}
        self._dependents: dict[str, set[Key]] = {}
        self.controller: Controller[Key] = Controller("garbage-collector", self._check, workers=workers)
        for kind, inf in self.informers.items():
            inf.add_handler(self._handler(kind))
        self._stopping = asyncio.Event()
        self.deleted: int = 0  # how many objects it deleted (observability, tests)

    def _handler(self, kind: str) -> Any:
        namespaced = by_kind(kind).namespaced

        def on_event(type_: str, obj: Obj, old: Obj | None) -> None:
            meta = obj.get("metadata") or {}
            key: Key = (kind, meta.get("namespace") if namespaced else None, meta.get("name", ""))
            uid = meta.get("uid")
            stale = _owner_uids(old) | _owner_uids(obj) if type_ == "DELETED" else _owner_uids(old) - _owner_uids(obj)
            for owner in stale:
                deps = self._dependents.get(owner)
                if deps is not None:
                    deps.discard(key)
                    if not deps:
                        del self._dependents[owner]
            if type_ == "DELETED":
                if uid and self._uids.get(uid) == key:
                    del self._uids[uid]
                for dep in self._dependents.get(uid, ()):  # its dependents may now be orphans
                    self.controller.enqueue(dep)
                return
            if uid:
                self._uids[uid] = key
            owners = _owner_uids(obj)
            for owner in owners:
                self._dependents.setdefault(owner, set()).add(key)
            if owners and not owners & self._uids.keys():
                self.controller.enqueue(key)

        return on_event

    async def run(self) -> None:
        """Sync every kind, sweep once for orphans, then follow changes."""
        for inf in self.informers.values():
            await inf.start()
        synced = asyncio.ensure_future(asyncio.gather(*(inf.wait_synced() for inf in self.informers.values())))
        stopping = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait([synced, stopping], return_when=asyncio.FIRST_COMPLETED)
        synced.cancel()
        stopping.cancel()
        if self._stopping.is_set():
            return
        for kind, inf in self.informers.items():
            for obj in inf.list():
                if _owner_uids(obj):
                    self.controller.enqueue(self._key(kind, obj))
        try:
            await self.controller.run()
        finally:
            for inf in self.informers.values():
                inf.stop()

    def stop(self) -> _Stopped:
        self._stopping.set()
        for inf in self.informers.values():
            inf.stop()
        return self.controller.stop()

    def _key(self, kind: str, obj: Obj) -> Key:
        meta = obj.get("metadata") or {}
        return (kind, meta.get("namespace") if by_kind(kind).namespaced else None, meta.get("name", ""))

    async def _check(self, key: Key) -> None:
        kind, ns, name = key
        obj = self.informers[kind].get(ns, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        refs = [r for r in obj["metadata"].get("ownerReferences") or [] if isinstance(r, dict)]
        if not refs:
            return
        for ref in refs:
            if ref.get("uid") in self._uids or await self._owner_exists(ref, ns):
                return
        # Every owner is gone. Re-read the dependent so we never delete a newer
        # object that reused the name.
        try:
            live = await self.client.get(kind, name, ns)
        except NotFound:
            return
        if live["metadata"].get("uid") != obj["metadata"].get("uid") or live["metadata"].get("deletionTimestamp"):
            return
        if _owner_uids(live) != _owner_uids(obj):
            self.controller.enqueue(key)  # owners changed meanwhile: decide on the new ones
            return
        log.info("garbage-collector: deleting %s %s%s: all owners are gone", kind, f"{ns}/" if ns else "", name)
        try:
            await self.client.delete(kind, name, ns)
            self.deleted += 1
        except NotFound:
            pass

    async def _owner_exists(self, ref: dict[str, Any], ns: str | None) -> bool:
        try:
            rt = by_kind(ref.get("kind", ""))
        except KeyError:
            return True  # an owner kind we do not serve cannot be checked: keep the dependent
        if rt.namespaced and ns is None:
            return True  # a cluster-scoped object cannot have a namespaced owner; leave it alone
        try:
            owner = await self.client.get(rt.kind, ref.get("name", ""), ns if rt.namespaced else None)
        except NotFound:
            return False
        return owner["metadata"].get("uid") == ref.get("uid")
