"""GPU devices of a node handed to containers (``CUDA_VISIBLE_DEVICES``).

A container that asks for ``nvidia.com/gpu: N`` gets N device indices of its
own for the pod's lifetime (restarts keep them); a container that asks for none
sees no GPU, as on a Kubernetes node. Nodes that declare no GPUs leave the
variable alone.
"""
from __future__ import annotations

from typing import Any, Hashable, Mapping

RESOURCE = "nvidia.com/gpu"


def gpu_count(container: Mapping[str, Any]) -> int:
    """Devices a container asks for (limits, else requests); 0 if unparseable."""
    res = container.get("resources") or {}
    raw = (res.get("limits") or {}).get(RESOURCE, (res.get("requests") or {}).get(RESOURCE, 0))
    try:
        n = int(str(raw))
    except ValueError:
        return 0
    return max(n, 0)


class GpuAllocator:
    """First-fit device indices 0..total-1, keyed by (pod uid, container)."""

    def __init__(self, total: int) -> None:
        self.total = max(0, int(total))
        self._owned: dict[Hashable, list[int]] = {}

    def allocate(self, key: tuple[str, str], count: int) -> list[int] | None:
        """The key's devices (allocated on first call), or None when too few are free."""
        if key in self._owned and len(self._owned[key]) == count:
            return self._owned[key]
        self._owned.pop(key, None)
        used = {d for devs in self._owned.values() for d in devs}
        free = [d for d in range(self.total) if d not in used]
        if len(free) < count:
            return None
        self._owned[key] = free[:count]
        return self._owned[key]

    def release_pod(self, uid: str) -> None:
        for key in [k for k in self._owned if isinstance(k, tuple) and k[0] == uid]:
            del self._owned[key]

    def in_use(self) -> dict[Hashable, list[int]]:
        return dict(self._owned)
