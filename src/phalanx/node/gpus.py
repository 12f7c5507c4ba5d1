"""GPU devices of a node handed to containers (``CUDA_VISIBLE_DEVICES``).

A container that asks for ``nvidia.com/gpu: N`` gets N device indices of its
own for the pod's lifetime (restarts keep them); a container that asks for none
sees no GPU, as on a Kubernetes node. Nodes that declare no GPUs leave the
variable alone.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any, Hashable, Iterable, Mapping, Sequence

RESOURCE = "nvidia.com/gpu"
PROC_GPUS = "/proc/driver/nvidia/gpus"


def detect_gpus(proc_dir: str = PROC_GPUS, smi: str | None = "nvidia-smi") -> int:
    """NVIDIA GPUs on this machine: the driver's /proc entries, else the lines
    of ``nvidia-smi -L``; 0 when neither answers (no driver, no GPU)."""
    try:
        return len([e for e in os.listdir(proc_dir) if not e.startswith(".")])
    except OSError:
        pass
    exe = shutil.which(smi) if smi else None
    if not exe:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return 0
    if out.returncode != 0:
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def node_devices(nodes: Iterable[Mapping[str, Any]], node_name: str) -> list[int]:
    """The machine's device indices that belong to ``node_name``.

    Every node of the embedded runtime is this one machine, so nodes must not
    hand out the same device: in node-name order, each takes the next
    ``nvidia.com/gpu`` capacity indices (node-a: 0,1; node-b: 2; ...).
    """
    def count(node: Mapping[str, Any]) -> int:
        cap = (node.get("status") or {}).get("capacity") or {}
        try:
            return max(0, int(str(cap.get(RESOURCE, 0))))
        except ValueError:
            return 0

    first = 0
    for node in sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name") or ""):
        n = count(node)
        if (node.get("metadata") or {}).get("name") == node_name:
            return list(range(first, first + n))
        first += n
    return []


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
    """First-fit device indices, keyed by (pod uid, container): ``devices`` is
    a count (indices 0..n-1) or the node's own indices (see node_devices)."""

    def __init__(self, devices: int | Sequence[int]) -> None:
        self.devices: list[int] = (list(range(max(0, int(devices)))) if isinstance(devices, int)
                                   else sorted(set(devices)))
        self.total = len(self.devices)
        self._owned: dict[Hashable, list[int]] = {}

    def allocate(self, key: tuple[str, str], count: int) -> list[int] | None:
        """The key's devices (allocated on first call), or None when too few are free."""
        if key in self._owned and len(self._owned[key]) == count:
            return self._owned[key]
        self._owned.pop(key, None)
        used = {d for devs in self._owned.values() for d in devs}
        free = [d for d in self.devices if d not in used]
        if len(free) < count:
            return None
        self._owned[key] = free[:count]
        return self._owned[key]

    def claim(self, key: tuple[str, str], devices: list[int]) -> None:
        """Give ``key`` the devices it already uses (an adopted container keeps
        its devices across agents); indices not on this node are dropped."""
        self._owned[key] = [d for d in devices if d in self.devices]

    def release_pod(self, uid: str) -> None:
        """A pod that finished or went away holds no devices."""
        for key in [k for k in self._owned if isinstance(k, tuple) and k[0] == uid]:
            del self._owned[key]

    def in_use(self) -> dict[Hashable, list[int]]:
        """Owner -> devices, for inspection and tests."""
        return dict(self._owned)
