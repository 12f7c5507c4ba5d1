"""The replica count one resource metric proposes (kube-controller-manager's ReplicaCalculator). Pure.

Utilization targets (``resource_replicas``) compare the pods' summed use with their summed requests;
average-value targets (``raw_resource_replicas``) compare the average use with the target. Values are
milli-units (millicores). Pods are grouped first: being deleted or Failed, ignored; Pending, unready;
without a measurement, missing; for cpu, unready too while starting (within the cpu initialization
period a sample counts once a whole window of it was taken after the pod became ready; after it, a pod
that was never ready counts as unready). Within the tolerance of the target the current count stays.
Missing pods count as using the target (scale down) or nothing (scale up) and unready pods nothing on a
scale up; then a change that the gaps would turn around or that lies within the tolerance is no change.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Mapping

from phalanx.objects.clock import parse_time
from phalanx.objects.quantity import QuantityError, parse_exact

Obj = dict[str, Any]

DEFAULT_TOLERANCE = 0.1
DEFAULT_CPU_INITIALIZATION_PERIOD = 300.0  # --horizontal-pod-autoscaler-cpu-initialization-period
DEFAULT_INITIAL_READINESS_DELAY = 30.0  # --horizontal-pod-autoscaler-initial-readiness-delay


class MetricError(Exception):
    """Why a metric proposes no replica count, in kube-controller-manager's words."""


@dataclass(frozen=True)
class PodMetric:
    """One pod's use of a resource: ``value`` milli-units, averaged over ``window`` seconds up to ``timestamp``."""

    value: int
    timestamp: datetime
    window: float


@dataclass(frozen=True)
class Tolerances:
    """No scaling while the usage ratio stays within [1 - scale_down, 1 + scale_up]."""

    scale_down: float = DEFAULT_TOLERANCE
    scale_up: float = DEFAULT_TOLERANCE

    def within(self, ratio: float) -> bool:
        return 1.0 - self.scale_down <= ratio <= 1.0 + self.scale_up


@dataclass(frozen=True)
class Readiness:
    """When a cpu sample of a starting pod counts (the controller's two flags)."""

    cpu_initialization_period: float = DEFAULT_CPU_INITIALIZATION_PERIOD
    initial_readiness_delay: float = DEFAULT_INITIAL_READINESS_DELAY


@dataclass
class PodGroups:
    ready: int = 0
    unready: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    ignored: set[str] = field(default_factory=set)


def _name(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def _ready_condition(pod: Obj) -> Obj | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            return c
    return None


def _time(v: Any) -> datetime | None:
    try:
        return parse_time(v) if isinstance(v, str) else None
    except ValueError:
        return None


def group_pods(pods: list[Obj], metrics: Mapping[str, PodMetric], resource: str, readiness: Readiness,
               now: datetime) -> PodGroups:
    """groupPods: which pods count, which are unready, missing or ignored."""
    g = PodGroups()
    for pod in pods:
        name, st = _name(pod), pod.get("status") or {}
        phase = st.get("phase")
        if (pod.get("metadata") or {}).get("deletionTimestamp") or phase == "Failed":
            g.ignored.add(name)
            continue
        if phase == "Pending":
            g.unready.add(name)
            continue
        metric = metrics.get(name)
        if metric is None:
            g.missing.add(name)
            continue
        if resource == "cpu" and _unready_cpu(pod, metric, readiness, now):
            g.unready.add(name)
            continue
        g.ready += 1
    return g


def _unready_cpu(pod: Obj, metric: PodMetric, readiness: Readiness, now: datetime) -> bool:
    cond = _ready_condition(pod)
    start = _time((pod.get("status") or {}).get("startTime"))
    changed = _time(cond.get("lastTransitionTime")) if cond is not None else None
    if cond is None or start is None or changed is None:
        return True
    if start + timedelta(seconds=readiness.cpu_initialization_period) > now:
        return cond.get("status") == "False" or metric.timestamp < changed + timedelta(seconds=metric.window)
    return cond.get("status") == "False" and start + timedelta(seconds=readiness.initial_readiness_delay) > changed


def _milli(q: Any) -> int | None:
    try:
        return math.ceil(parse_exact(q)[0] * 1000)
    except QuantityError:
        return None


def _containers(pod: Obj) -> list[Obj]:
    spec = pod.get("spec") or {}
    regular = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    sidecars = [c for c in spec.get("initContainers") or [] if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    return regular + sidecars


def requests_of(pods: list[Obj], resource: str, container: str = "") -> dict[str, int]:
    """calculateRequests: each pod's request of ``resource`` (of ``container`` only, when named), milli-units."""
    out: dict[str, int] = {}
    for pod in pods:
        total = 0
        for c in _containers(pod):
            if container and c.get("name") != container:
                continue
            resources = c.get("resources") or {}
            # An unset request is the limit (the apiserver's defaulting writes it so).
            value = (resources.get("requests") or {}).get(resource, (resources.get("limits") or {}).get(resource))
            milli = _milli(value) if value is not None else None
            if milli is None:
                raise MetricError(f"missing request for {resource} in container {c.get('name')} of Pod {_name(pod)}")
            total += milli
        out[_name(pod)] = total
    return out


def utilization_ratio(metrics: Mapping[str, PodMetric], requests: Mapping[str, int],
                      target: int) -> tuple[float, int, int]:
    """GetResourceUtilizationRatio: (ratio to the target, utilization %, average raw use)."""
    used = requested = entries = 0
    for name, metric in metrics.items():
        if name not in requests:
            continue  # a measurement of a pod not listed
        used += metric.value
        requested += requests[name]
        entries += 1
    if requested == 0:
        raise MetricError("no metrics returned matched known pods")
    utilization = used * 100 // requested
    return utilization / target, utilization, used // entries


def _usage_ratio(metrics: Mapping[str, PodMetric], target: int) -> tuple[float, int]:
    usage = sum(m.value for m in metrics.values()) // len(metrics)
    return usage / target, usage


def _counted(metrics: Mapping[str, PodMetric], g: PodGroups) -> dict[str, PodMetric]:
    out = {n: m for n, m in metrics.items() if n not in g.ignored and n not in g.unready}
    if not out:
        raise MetricError("did not receive metrics for targeted pods (pods might be unready)")
    return out


def _filled(metrics: dict[str, PodMetric], g: PodGroups, ratio: float, missing_value: dict[str, int],
            now: datetime, raw: bool = False) -> dict[str, PodMetric]:
    """Missing pods at ``missing_value`` on a scale down, at nothing on a scale up (for an average-value
    target also at a ratio of exactly 1); unready pods at nothing on a scale up."""
    out = dict(metrics)
    if g.missing and ratio < 1.0:
        out.update({n: PodMetric(missing_value.get(n, 0), now, 0.0) for n in g.missing})
    elif g.missing and (ratio > 1.0 or raw):
        out.update({n: PodMetric(0, now, 0.0) for n in g.missing})
    if g.unready and ratio > 1.0:
        out.update({n: PodMetric(0, now, 0.0) for n in g.unready})
    return out


def _settle(current: int, ratio: float, new_ratio: float, counted: int, tolerances: Tolerances) -> int:
    """The count after the gaps were filled: none that the tolerance or a turned direction forbids."""
    if tolerances.within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    replicas = math.ceil(new_ratio * counted)
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return current
    return replicas


def resource_replicas(current: int, target_utilization: int, resource: str, tolerances: Tolerances,
                      pods: list[Obj], metrics: Mapping[str, PodMetric], readiness: Readiness, now: datetime,
                      container: str = "") -> tuple[int, int, int]:
    """GetResourceReplicas: (replicas, utilization %, average raw use) for a Utilization target."""
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    g = group_pods(pods, metrics, resource, readiness, now)
    counted = _counted(metrics, g)
    requests = requests_of(pods, resource, container)
    ratio, utilization, raw = utilization_ratio(counted, requests, target_utilization)
    scale_up_with_unready = bool(g.unready) and ratio > 1.0
    if not scale_up_with_unready and not g.missing:
        if tolerances.within(ratio):
            return current, utilization, raw
        return math.ceil(ratio * g.ready), utilization, raw
    fallback = max(100, target_utilization)  # a missing pod on a scale down uses its request (or the target)
    missing_value = {n: requests.get(n, 0) * fallback // 100 for n in g.missing}
    filled = _filled(counted, g, ratio, missing_value, now)
    new_ratio = utilization_ratio(filled, requests, target_utilization)[0]
    return _settle(current, ratio, new_ratio, len(filled), tolerances), utilization, raw


def raw_resource_replicas(current: int, target_usage: int, resource: str, tolerances: Tolerances,
                          pods: list[Obj], metrics: Mapping[str, PodMetric], readiness: Readiness,
                          now: datetime) -> tuple[int, int]:
    """GetRawResourceReplicas: (replicas, average use) for an AverageValue target (milli-units)."""
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    g = group_pods(pods, metrics, resource, readiness, now)
    counted = _counted(metrics, g)
    ratio, usage = _usage_ratio(counted, target_usage)
    scale_up_with_unready = bool(g.unready) and ratio > 1.0
    if not scale_up_with_unready and not g.missing:
        if tolerances.within(ratio):
            return current, usage
        return math.ceil(ratio * g.ready), usage
    filled = _filled(counted, g, ratio, {n: target_usage for n in g.missing}, now, raw=True)
    new_ratio = _usage_ratio(filled, target_usage)[0]
    return _settle(current, ratio, new_ratio, len(filled), tolerances), usage


__all__ = ["MetricError", "PodMetric", "Readiness", "Tolerances", "group_pods", "raw_resource_replicas",
           "requests_of", "resource_replicas", "utilization_ratio"]
