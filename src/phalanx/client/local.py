"""LocalClient: the object API in-process, straight over the Store.

The store is synchronous and lives on the event-loop thread, so every call is
a plain method call; the methods are async only to match ``Client``.
"""
from __future__ import annotations

from typing import Any, AsyncIterator

from phalanx.client.interface import Obj, ObjectList
from phalanx.objects.watch import WatchEvent
from phalanx.store.store import Store


class LocalClient:
    """``phalanx.client.interface.Client`` over a ``Store``."""

    # ``watch(..., shared=True)`` is supported: informers, which never mutate what
    # they cache, share one decoded object per event instead of one copy each.
    shares_watch_objects = True

    def __init__(self, store: Store, *, trusted: bool = False) -> None:
        # ``trusted``: the client of the control plane's own components (see Store.create).
        self.store = store
        self.trusted = trusted

    async def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        return self.store.get(kind, name, namespace)

    async def list(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | dict[str, str] | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        items, rv = self.store.list(kind, namespace, label_selector, field_selector)
        return ObjectList(items, rv)

    async def create(self, obj: Obj) -> Obj:
        out = self.store.create(obj, trusted=self.trusted)
        await self.store.flush()
        return out

    async def update(self, obj: Obj) -> Obj:
        out = self.store.update(obj, trusted=self.trusted)
        await self.store.flush()
        return out

    async def update_status(self, obj: Obj) -> Obj:
        out = self.store.update_status(obj, trusted=self.trusted)
        await self.store.flush()
        return out

    async def patch(
        self, kind: str, name: str, namespace: str | None, patch: Any,
        patch_type: str = "merge", subresource: str | None = None,
    ) -> Obj:
        out = self.store.patch(kind, name, namespace, patch, patch_type, subresource, trusted=self.trusted)
        await self.store.flush()
        return out

    async def delete(
        self, kind: str, name: str, namespace: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions_uid: str | None = None,
        propagation_policy: str | None = None,
    ) -> Obj | None:
        out = self.store.delete(kind, name, namespace, grace_period_seconds, preconditions_uid, propagation_policy)
        await self.store.flush()
        return out

    async def bind(self, namespace: str, name: str, node_name: str) -> None:
        self.store.bind(namespace, name, node_name)
        await self.store.flush()

    async def watch(
        self, kind: str, namespace: str | None = None, resource_version: str | None = None,
        *, shared: bool = False,
    ) -> AsyncIterator[WatchEvent]:
        """Events after ``resource_version``; without one, ADDED for every current
        object first. Raises Gone (on the first iteration) when it is too old.
        ``shared`` (see ``shares_watch_objects``): objects are read-only and the
        same for every shared watch of the event."""
        w = self.store.watch(kind, namespace, resource_version, shared=shared)
        try:
            async for ev in w:
                yield ev
        finally:
            w.close()

    async def close(self) -> None:
        """Nothing to release; present so callers can treat every client alike."""
