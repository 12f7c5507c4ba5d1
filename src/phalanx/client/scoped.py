"""A client whose lists and watches of namespaced kinds stay in one namespace.

The operator's ``--namespace`` (the original's ``KUBEFLOW_NAMESPACE``): its
informers ask for "every namespace" and get this one, so it needs RBAC in
that namespace only. Everything else passes through unchanged.
"""
from __future__ import annotations

from typing import Any, AsyncIterator

from phalanx.api.registry import by_kind
from phalanx.client.interface import Client, ObjectList
from phalanx.objects.watch import WatchEvent


class NamespaceScoped:
    """Wraps any ``Client``; ``namespace`` replaces "all namespaces" (None)."""

    def __init__(self, client: Client, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def _ns(self, kind: str, namespace: str | None) -> str | None:
        try:
            namespaced = by_kind(kind).namespaced
        except KeyError:
            return namespace
        return (namespace or self.namespace) if namespaced else namespace

    async def list(self, kind: str, namespace: str | None = None, label_selector: Any = None,
                   field_selector: str | None = None) -> ObjectList:
        return await self.client.list(kind, self._ns(kind, namespace), label_selector, field_selector)

    def watch(self, kind: str, namespace: str | None = None,
              resource_version: str | None = None) -> AsyncIterator[WatchEvent]:
        return self.client.watch(kind, self._ns(kind, namespace), resource_version)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)
