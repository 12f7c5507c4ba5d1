"""Kinds the API server stores without understanding them (registry ``OPAQUE_KINDS``).

``phalanx install`` prints CRDs, RBAC, a ServiceAccount and Deployments; the
embedded API server accepts them so that ``phalanx install | kubectl apply -f -``
works against it as against a cluster. Only ``apiVersion``, ``kind`` and
``metadata`` are checked (strictly, as for every kind); every other field is
kept as given, and no controller acts on these objects.
"""
from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from phalanx.api.meta import K8sModel, ObjectMeta


class OpaqueObject(K8sModel):
    model_config = ConfigDict(extra="allow")

    api_version: str
    kind: str
    metadata: ObjectMeta | None = None


def default_opaque(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """Nothing is defaulted: the object is stored as sent."""
    return None
