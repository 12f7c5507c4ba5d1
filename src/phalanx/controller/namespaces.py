"""The namespace controller: deleting a Namespace deletes what is in it.

The store removes a Namespace at once (no ``kubernetes`` finalizer, no
Terminating phase); once it is gone this controller deletes every namespaced
object left in it, as kube-controller-manager's namespace controller does
before it lets the namespace go. NamespaceLifecycle (``store/namespaces.py``)
refuses new content meanwhile, since the namespace no longer exists.
"""
from __future__ import annotations

import asyncio
import logging

from phalanx.api.registry import RESOURCES
from phalanx.client.interface import Client, Obj
from phalanx.objects.errors import NotFound
from phalanx.runtime.controller import Controller
from phalanx.runtime.informer import Informer

log = logging.getLogger(__name__)

NAMESPACED_KINDS = tuple(r.kind for r in RESOURCES if r.namespaced)


class NamespaceController:
    """Empties each deleted namespace (one worker: deletions are rare)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.informer = Informer(client, "Namespace", transform=lambda o: {"metadata": o.get("metadata") or {}})
        self.informer.add_handler(self._on_event)
        self.controller: Controller[str] = Controller("namespace-controller", self._empty)
        self.deleted = 0  # objects deleted (observability, tests)

    def _on_event(self, type_: str, obj: Obj, old: Obj | None) -> None:
        if type_ == "DELETED":
            self.controller.enqueue((obj.get("metadata") or {}).get("name", ""))

    async def run(self) -> None:
        await self.informer.start()
        try:
            await self.controller.run()
        finally:
            await self.informer.stop()

    async def stop(self) -> None:
        await self.informer.stop()
        await self.controller.stop()

    async def _empty(self, namespace: str) -> None:
        try:
            await self.client.get("Namespace", namespace)
            return  # created again meanwhile: its content is the new namespace's
        except NotFound:
            pass
        for kind in NAMESPACED_KINDS:
            for obj in (await self.client.list(kind, namespace)).items:
                name = (obj.get("metadata") or {}).get("name", "")
                try:
                    await self.client.delete(kind, name, namespace)
                    self.deleted += 1
                except NotFound:
                    pass
            await asyncio.sleep(0)
