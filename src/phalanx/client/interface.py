"""Client: the object API every component talks through.

Implementations: ``client.local.LocalClient`` (in-process, over the Store) and
``client.http.HttpClient`` (over the Phalanx HTTP API) and
``client.kube.KubeClient`` (a real Kubernetes cluster).
No component may reach into another; they only read, write and watch objects.

Conventions:
- ``kind`` is the Kubernetes kind string ("Pod", "PyTorchJob", "PodGroup", ...).
- ``namespace`` is ignored for cluster-scoped kinds (Node, Queue, Namespace).
- Objects are JSON-shaped dicts; returned dicts are copies the caller may mutate.
- Errors are ``phalanx.objects.errors`` exceptions (NotFound, Conflict, Invalid, ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, AsyncIterator, Protocol

from phalanx.objects.meta import Obj
from phalanx.objects.watch import WatchEvent


@dataclass
class ObjectList:
    items: list[Obj]
    resource_version: str


class Client(Protocol):
    async def get(self, kind: str, name: str, namespace: str | None = None) -> Obj: ...

    async def list(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | dict[str, str] | None = None,
        field_selector: str | None = None,
    ) -> ObjectList: ...

    async def create(self, obj: Obj) -> Obj:
        """Create; spec and metadata are taken, status is dropped for kinds with a
        status subresource. Runs admission (defaulting + validation)."""

    async def update(self, obj: Obj) -> Obj:
        """Replace spec/metadata. If ``metadata.resourceVersion`` is set and stale,
        raises Conflict. Status is kept from the stored object."""

    async def update_status(self, obj: Obj) -> Obj:
        """Replace only ``status`` (resourceVersion precondition as update)."""

    async def patch(
        self, kind: str, name: str, namespace: str | None, patch: Any,
        patch_type: str = "merge", subresource: str | None = None,
    ) -> Obj:
        """patch_type: "merge" (RFC 7386) or "json" (RFC 6902)."""

    async def delete(
        self, kind: str, name: str, namespace: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions_uid: str | None = None,
        propagation_policy: str | None = None,
    ) -> Obj | None:
        """Delete. A bound Pod is deleted gracefully: it gets deletionTimestamp and
        stays until its node agent deletes it with grace 0. Returns the object as
        it stands (with deletionTimestamp) or None when it is gone at once.
        Dependents (ownerReferences) are removed by the garbage collector: in the
        background by default; with ``propagation_policy="Foreground"`` the object
        stays (finalizer ``foregroundDeletion``) until they are gone; "Orphan"
        unlinks them. ``preconditions_uid``: Conflict unless the uid matches."""

    async def bind(self, namespace: str, name: str, node_name: str) -> None:
        """pods/binding: set spec.nodeName of an unbound pod (Conflict if bound)."""

    def watch(
        self, kind: str, namespace: str | None = None, resource_version: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Events after resource_version (exclusive). Raises Gone when too old."""
