"""Priority, as kube-apiserver's admission plugin: pods get their priority and preemption policy
from their PriorityClass on create, and at most one PriorityClass is the global default.

Registered on the store by the embedded control plane (``cluster.py``), after NamespaceLifecycle,
so it holds for every writer, HTTP and in-process; the rules are ``api.pod`` and ``api.scheduling``.
"""
from __future__ import annotations

from typing import Any

from phalanx.api.pod import admit_pod_priority
from phalanx.api.scheduling import check_single_default, global_default
from phalanx.objects.errors import NotFound
from phalanx.store.store import Store

Obj = dict[str, Any]


class PriorityAdmission:
    """A store admission plugin (``Store.add_admission_plugin``) over ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, op: str, obj: Obj, old: Obj | None) -> None:
        if op not in ("create", "update"):
            return None
        kind = obj.get("kind")
        if kind == "Pod":
            admit_pod_priority(obj, old if op == "update" else None, self._get, self._default)
        elif kind == "PriorityClass":
            # As the apiserver's lister sees them: an update still sees this class as stored.
            check_single_default(obj, self.store.list("PriorityClass")[0], creating=op == "create")
        return None

    def _get(self, name: str) -> Obj | None:
        try:
            return self.store.get("PriorityClass", name)
        except NotFound:
            return None

    def _default(self) -> Obj | None:
        return global_default(self.store.list("PriorityClass")[0])
