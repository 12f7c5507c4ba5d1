"""The node agents' Prometheus series: kubelet's pod start latencies (pkg/kubelet/metrics), with its
names, help texts and buckets; one ``NodeMetrics`` is shared by every agent of a control plane.

- ``kubelet_pod_start_duration_seconds``: from the agent's first sight of a pod to the first status
  it writes with phase Running;
- ``kubelet_pod_start_total_duration_seconds``: from the pod's ``creationTimestamp`` to the first
  status it writes in which every container is running (the scheduler's wait included).

Each is observed at most once per pod (by uid): an adopted pod already Running is not observed,
nor is a container restarted in place.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

from phalanx.objects.clock import parse_time

# kubelet's podStartupDurationBuckets.
POD_START_BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200,
                     1800, 2700, 3600)


def all_containers_running(status: dict[str, Any], containers: int) -> bool:
    """Phase Running and each of the pod's ``containers`` regular containers in state running."""
    if status.get("phase") != "Running" or containers <= 0:
        return False
    statuses = [cs for cs in status.get("containerStatuses") or [] if isinstance(cs, dict)]
    running = [cs for cs in statuses if isinstance((cs.get("state") or {}).get("running"), dict)]
    return len(statuses) == containers and len(running) == containers


class NodeMetrics:
    """kubelet's pod start histograms on ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.pod_start = Histogram(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
            buckets=POD_START_BUCKETS, registry=self.registry)
        self.pod_start_total = Histogram(
            "kubelet_pod_start_total_duration_seconds",
            "Duration in seconds to start a pod since creation, including time to pull images and run init "
            "containers, measured from pod creation timestamp to when all its containers are reported as started "
            "and observed via watch", buckets=POD_START_BUCKETS, registry=self.registry)


class PodStartTracker:
    """One pod's start, as its worker sees the statuses it writes; feeds ``metrics`` once each."""

    def __init__(self, metrics: NodeMetrics | None, pod: dict[str, Any], first_seen: datetime) -> None:
        self.metrics = metrics
        self.first_seen = first_seen
        meta = pod.get("metadata") or {}
        self.created = _created(meta.get("creationTimestamp"))
        old = pod.get("status") or {}
        # A pod first seen Running (adopted after a restart of the agent) started before this agent saw it.
        self.started = old.get("phase") == "Running"
        self.all_running = self.started

    def written(self, status: dict[str, Any], containers: int, now: datetime) -> None:
        """A status was written at ``now`` for a pod of ``containers`` regular containers."""
        if self.metrics is None:
            return
        if not self.started and status.get("phase") == "Running":
            self.started = True
            self.metrics.pod_start.observe(max(0.0, (now - self.first_seen).total_seconds()))
        if not self.all_running and all_containers_running(status, containers):
            self.all_running = True
            if self.created is not None:
                self.metrics.pod_start_total.observe(max(0.0, (now - self.created).total_seconds()))


def _created(stamp: Any) -> datetime | None:
    try:
        return parse_time(stamp) if isinstance(stamp, str) else None
    except ValueError:
        return None
