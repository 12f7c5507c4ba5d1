"""Writing a pod's status as a node agent does (the real agent and the simulated one).

One attempt, never a retry loop: on Conflict the pod is re-read so the caller
decides again from the fresh object; a pod that vanished or was replaced (new
uid under the same name) is reported gone.
"""
from __future__ import annotations

from typing import Any, Literal

from phalanx.client.interface import Client
from phalanx.objects.errors import Conflict, NotFound
from phalanx.objects.meta import name_of, namespace_of

Obj = dict[str, Any]
Outcome = Literal["unchanged", "written", "moved", "gone"]


async def write_pod_status(client: Client, pod: Obj, status: Obj) -> tuple[Outcome, Obj | None]:
    """("unchanged", None) | ("written", stored pod) | ("moved", fresh pod) | ("gone", None)."""
    if status == pod.get("status"):
        return "unchanged", None
    meta = pod.get("metadata") or {}
    try:
        return "written", await client.update_status({**pod, "status": status})
    except Conflict:
        try:
            fresh = await client.get("Pod", name_of(pod), namespace_of(pod))
        except NotFound:
            return "gone", None
        if (fresh.get("metadata") or {}).get("uid") != meta.get("uid"):
            return "gone", None
        return "moved", fresh
    except NotFound:
        return "gone", None
