"""Garbage collector: delete objects whose owners are all gone (background cascade),
and finish foreground and orphan deletions.

Watches every kind, keeps a uid index and an owner→dependents index, and
checks a dependent when one of its owners disappears, when it shows up with
an owner it has not seen, and once for everything at start (orphans left by
a crash). Before deleting it asks the API for each owner, as kube-controller-
manager's GC does, because the owner's watch may simply lag behind.

An owner being deleted with the ``foregroundDeletion`` finalizer has its
dependents deleted (in the foreground too when they have dependents of their
own); once none whose ownerReference has ``blockOwnerDeletion`` is left, the
finalizer is removed and the store deletes the owner. With the ``orphan``
finalizer the dependents' ownerReferences to it are removed instead.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from phalanx.api.registry import all_kinds, by_kind
from phalanx.client.interface import Client, Obj
from phalanx.objects.errors import Conflict, NotFound
from phalanx.runtime.controller import Controller
from phalanx.runtime.informer import SharedInformer, SharedInformers

log = logging.getLogger(__name__)

Key = tuple[str, "str | None", str]

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


def _slim(obj: Obj) -> Obj:
    """Only what the collector reads (a trim: see Informer), so its own copies stay small."""
    meta = obj.get("metadata") or {}
    slim_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp",
                                      "ownerReferences", "finalizers") if k in meta}
    return {"kind": obj.get("kind"), "metadata": slim_meta}


def _owner_uids(obj: Obj | None) -> set[str]:
    if not obj:
        return set()
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return {r["uid"] for r in refs if isinstance(r, dict) and isinstance(r.get("uid"), str)}


class GarbageCollector:
    """Background cascading deletion by ownerReferences, for every kind."""

    def __init__(self, client: Client, kinds: list[str] | None = None, workers: int = 2,
                 informers: SharedInformers | None = None) -> None:
        self.client = client
        self.kinds = list(kinds or all_kinds())
        shared = informers if informers is not None else SharedInformers(client)
        self.informers: dict[str, SharedInformer] = {k: shared.informer(k, trim=_slim) for k in self.kinds}
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
                self._enqueue_uid(owner)  # an owner waiting for its dependents may be done
            if type_ == "DELETED":
                if uid and self._uids.get(uid) == key:
                    del self._uids[uid]
                for dep in self._dependents.get(uid, ()) if isinstance(uid, str) else ():  # its dependents may now be orphans
                    self.controller.enqueue(dep)
                return
            if uid:
                self._uids[uid] = key
            owners = _owner_uids(obj)
            for owner in owners:
                self._dependents.setdefault(owner, set()).add(key)
            if owners and not owners & self._uids.keys():
                self.controller.enqueue(key)
            if _gc_finalizer(obj):
                self.controller.enqueue(key)

        return on_event

    async def run(self) -> None:
        """Sync every kind, sweep once for orphans, then follow changes."""
        for inf in self.informers.values():
            await inf.start()
        synced = asyncio.ensure_future(asyncio.gather(*(inf.wait_synced() for inf in self.informers.values())))
        stopping = asyncio.ensure_future(self._stopping.wait())
        first: list[asyncio.Future[Any]] = [synced, stopping]
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
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
                await inf.stop()

    async def stop(self) -> None:
        self._stopping.set()
        for inf in self.informers.values():
            await inf.stop()
        await self.controller.stop()

    def _enqueue_uid(self, uid: str) -> None:
        key = self._uids.get(uid)
        if key is not None:
            self.controller.enqueue(key)

    def _key(self, kind: str, obj: Obj) -> Key:
        meta = obj.get("metadata") or {}
        return (kind, meta.get("namespace") if by_kind(kind).namespaced else None, meta.get("name", ""))

    async def _check(self, key: Key) -> None:
        kind, ns, name = key
        obj = self.informers[kind].get(ns, name)
        if obj is None:
            return
        if obj["metadata"].get("deletionTimestamp"):
            finalizer = _gc_finalizer(obj)
            if finalizer == ORPHAN:
                await self._orphan_dependents(key, obj)
            elif finalizer == FOREGROUND:
                await self._delete_dependents(key, obj)
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

    # ------------------------------------------------------------------ foreground / orphan

    def _live_dependents(self, uid: str) -> list[tuple[Key, Obj, dict[str, Any]]]:
        """(key, object, its ownerReference to ``uid``) of every known dependent."""
        out = []
        for dep_key in sorted(self._dependents.get(uid, ()), key=lambda k: (k[0], k[1] or "", k[2])):
            dep = self.informers[dep_key[0]].get(dep_key[1], dep_key[2])
            if dep is None:
                continue
            ref = next((r for r in dep["metadata"].get("ownerReferences") or []
                        if isinstance(r, dict) and r.get("uid") == uid), None)
            if ref is not None:
                out.append((dep_key, dep, ref))
        return out

    async def _delete_dependents(self, key: Key, owner: Obj) -> None:
        """Foreground: delete the dependents; drop the finalizer once none blocks."""
        uid = owner["metadata"].get("uid", "")
        blocking = 0
        for (kind, ns, name), dep, ref in self._live_dependents(uid):
            if ref.get("blockOwnerDeletion") is True:
                blocking += 1
            if dep["metadata"].get("deletionTimestamp"):
                continue
            dep_uid = dep["metadata"].get("uid")
            policy = "Foreground" if self._dependents.get(dep_uid or "") else "Background"
            log.info("garbage-collector: deleting %s %s%s: its owner is deleted in the foreground", kind,
                     f"{ns}/" if ns else "", name)
            try:
                await self.client.delete(kind, name, ns, preconditions_uid=dep_uid, propagation_policy=policy)
                self.deleted += 1
            except (NotFound, Conflict):
                pass  # gone already, or a newer object of that name
        if blocking == 0:
            await self._remove_finalizer(key, owner, FOREGROUND)

    async def _orphan_dependents(self, key: Key, owner: Obj) -> None:
        """Orphan: remove the ownerReferences to the owner, then the finalizer."""
        uid = owner["metadata"].get("uid", "")
        for (kind, ns, name), dep, _ in self._live_dependents(uid):
            try:
                live = await self.client.get(kind, name, ns)
            except NotFound:
                continue
            refs = live["metadata"].get("ownerReferences") or []
            kept = [r for r in refs if not (isinstance(r, dict) and r.get("uid") == uid)]
            if len(kept) == len(refs):
                continue
            patch = {"metadata": {"ownerReferences": kept or None,
                                  "resourceVersion": live["metadata"].get("resourceVersion")}}
            try:
                await self.client.patch(kind, name, ns, patch, "merge")
            except NotFound:
                continue
            except Conflict:
                self.controller.enqueue(key)  # changed meanwhile: look again
                return
        await self._remove_finalizer(key, owner, ORPHAN)

    async def _remove_finalizer(self, key: Key, owner: Obj, finalizer: str) -> None:
        kind, ns, name = key
        try:
            live = await self.client.get(kind, name, ns)
        except NotFound:
            return
        meta = live["metadata"]
        finalizers = meta.get("finalizers") or []
        if meta.get("uid") != owner["metadata"].get("uid") or finalizer not in finalizers:
            return
        kept = [f for f in finalizers if f != finalizer]
        log.info("garbage-collector: removing finalizer %s from %s %s%s", finalizer, kind, f"{ns}/" if ns else "",
                 name)
        patch = {"metadata": {"finalizers": kept or None, "resourceVersion": meta.get("resourceVersion")}}
        try:
            await self.client.patch(kind, name, ns, patch, "merge")
        except NotFound:
            pass
        except Conflict:
            self.controller.enqueue(key)


def _gc_finalizer(obj: Obj) -> str | None:
    """The garbage collector's finalizer on an object being deleted, if any."""
    meta = obj.get("metadata") or {}
    if not meta.get("deletionTimestamp"):
        return None
    finalizers = meta.get("finalizers") or []
    if ORPHAN in finalizers:
        return ORPHAN
    if FOREGROUND in finalizers:
        return FOREGROUND
    return None
