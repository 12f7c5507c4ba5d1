"""NamespaceLifecycle, as the apiserver's admission plugin: a namespaced object is
created only in a Namespace that exists and is not being deleted.

Registered on the store by the embedded control plane (``cluster.py``), so it holds
for every writer, HTTP and in-process; a bare ``Store`` (unit tests) does without.
"""
from __future__ import annotations

from typing import Any

from phalanx.api.registry import by_kind
from phalanx.objects.errors import Forbidden, NotFound
from phalanx.store.rules import resource_name
from phalanx.store.store import Store

# Created at start when missing, as the apiserver's bootstrap does.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public")


class NamespaceTerminating(Forbidden):
    """403: the namespace is being deleted (details name the refused object)."""

    def __init__(self, resource: str, name: str, namespace: str) -> None:
        super().__init__(f'{resource} "{name}" is forbidden: unable to create new content in namespace '
                         f"{namespace} because it is being terminated")
        self.resource = resource
        self.name = name


class NamespaceLifecycle:
    """A store admission plugin (``Store.add_admission_plugin``) over ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, op: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if op != "create":
            return None
        rt = by_kind(obj["kind"])
        if not rt.namespaced:
            return None
        meta = obj["metadata"]
        ns = meta.get("namespace")
        try:
            namespace = self.store.get("Namespace", ns)
        except NotFound:
            raise NotFound("namespaces", ns) from None
        if (namespace.get("metadata") or {}).get("deletionTimestamp"):
            raise NamespaceTerminating(resource_name(rt), meta.get("name", ""), ns)
        return None
