"""A pod's CPU use, measured from its processes: what metrics-server reports of a pod on a cluster.

Read-only over the node runtimes (``ProcessRuntime.instances``): a running container's CPU is the user and
system time of its process, of the children it reaped and of its live descendants (``/proc``). A reading
is the average use (cores) since the container's previous reading at least ``window`` seconds old, or
since the container started; a restarted container (a new container id) starts over. The embedded
cluster's HPA controller reads it; nothing here writes. Baselines of pods no longer read are dropped.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Iterable

from phalanx.node.instances import Instance, descendants, same_process
from phalanx.node.processes import ProcessRuntime
from phalanx.node.shim import cpu_seconds
from phalanx.objects.clock import Clock

# A baseline not moved for this long belongs to a pod no longer read (deleted, or its HPA gone).
STALE_WINDOWS = 10
STALE_SECONDS = 60.0


@dataclass(frozen=True)
class CpuReading:
    """A pod's use, cores per running container, averaged over ``window`` seconds up to ``timestamp``."""

    containers: dict[str, float]
    timestamp: datetime
    window: float


def process_tree_cpu(pid: int) -> float | None:
    """CPU seconds of ``pid``, of the children it reaped and of its live descendants; None if it is gone."""
    own = cpu_seconds(pid)
    if own is None:
        return None
    return own + sum(cpu_seconds(p.pid) or 0.0 for p in descendants(pid))


class PodCpuUsage:
    """Readings of the pods the given runtimes run (``runtimes`` is called at each reading)."""

    def __init__(self, runtimes: Callable[[], Iterable[ProcessRuntime]], clock: Clock, window: float) -> None:
        self._runtimes = runtimes
        self._clock = clock
        self.window = window
        self._base: dict[tuple[str, str], tuple[str, float, datetime]] = {}  # (uid, container) -> (id, cpu, at)

    def _instances(self, uid: str) -> dict[str, Instance]:
        for rt in self._runtimes():
            found = rt.instances(uid)
            if found:
                return found
        return {}

    def usage(self, uid: str) -> CpuReading | None:
        """The pod's reading now; None when none of its containers runs (or none could be read)."""
        now = self._clock.now()
        cores: dict[str, float] = {}
        windows: list[float] = []
        seen: set[tuple[str, str]] = set()
        for name, inst in self._instances(uid).items():
            if not inst.running or inst.pid is None or inst.started_at is None or not same_process(inst):
                continue
            total = process_tree_cpu(inst.pid)
            if total is None:
                continue
            key = (uid, name)
            seen.add(key)
            base = self._base.get(key)
            if base is None or base[0] != inst.container_id or base[1] > total:
                base = (inst.container_id, 0.0, inst.started_at)
            span = (now - base[2]).total_seconds()
            if span <= 0:
                continue
            cores[name] = max(0.0, (total - base[1]) / span)
            windows.append(span)
            self._base[key] = (inst.container_id, total, now) if span >= self.window else base
        stale = now - timedelta(seconds=STALE_WINDOWS * self.window + STALE_SECONDS)
        for key in [k for k, b in self._base.items() if (k[0] == uid and k not in seen) or b[2] < stale]:
            del self._base[key]  # a container gone, or a pod nobody reads any more
        if not cores:
            return None
        return CpuReading(cores, now, min(windows))


__all__ = ["CpuReading", "PodCpuUsage", "process_tree_cpu"]
