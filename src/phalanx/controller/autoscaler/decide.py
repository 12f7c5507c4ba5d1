"""One sync of one HPA, decided (kube-controller-manager's reconcileAutoscaler without its I/O). Pure.

``decide`` takes the HPA, its target's scale (or why it could not be read), the pods the scale's selector
picks and their measured use, and returns the status to write, the events to record and the replica
count to write to the target, if any; ``Decision.rescaled``/``rescale_failed`` finish it once that write
is done. Locally the cpu of Resource and ContainerResource metrics is measured (from the processes);
other resources and the Pods, Object and External metrics have no metrics API here and fail as they
fail on a cluster without one (ScalingActive False with the upstream reasons). Messages, reasons and
conditions are the upstream controller's; the selector overlap check (AmbiguousSelector) is not done.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any, Mapping

from phalanx.api.autoscaling import CONTAINER_RESOURCE, EXTERNAL, OBJECT, PODS, RESOURCE
from phalanx.controller.autoscaler import calculator as calc
from phalanx.controller.autoscaler import normalize as norm
from phalanx.objects.clock import format_time
from phalanx.objects.errors import BadRequest
from phalanx.objects.quantity import DECIMAL, QuantityError, format_exact, parse_exact
from phalanx.objects.selectors import parse_label_selector

Obj = dict[str, Any]
Event = tuple[str, str, str]  # (type, reason, message)

ABLE_TO_SCALE, SCALING_ACTIVE, SCALING_LIMITED = "AbleToScale", "ScalingActive", "ScalingLimited"
LOCAL_RESOURCES = ("cpu",)  # what the embedded cluster measures


@dataclass(frozen=True)
class Scale:
    """The target's scale subresource: spec replicas, status replicas, status selector."""

    replicas: int
    status_replicas: int
    selector: str


@dataclass(frozen=True)
class PodUsage:
    """A pod's measured cpu, millicores per container, averaged over ``window`` seconds up to ``timestamp``."""

    containers: Mapping[str, int]
    timestamp: datetime
    window: float


@dataclass(frozen=True)
class Settings:
    """kube-controller-manager's --horizontal-pod-autoscaler-* flags."""

    sync_period: float = 15.0
    downscale_stabilization: float = norm.DEFAULT_DOWNSCALE_STABILIZATION
    tolerance: float = calc.DEFAULT_TOLERANCE
    readiness: calc.Readiness = field(default_factory=calc.Readiness)


@dataclass
class Decision:
    """What one sync does. ``rescale_to`` set: write it to the target, then call ``rescaled`` or
    ``rescale_failed``; ``status`` is then the one to write (when it differs from the HPA's)."""

    status: Obj
    events: list[Event] = field(default_factory=list)
    rescale_to: int | None = None
    reason: str = ""
    current: int = 0
    metrics: list[Obj] | None = None
    error: str | None = None  # what the upstream controller returns (logged)

    def rescaled(self, history: norm.History, behavior: Obj | None, now: datetime) -> None:
        desired = self.rescale_to if self.rescale_to is not None else self.current
        set_condition(self.status, ABLE_TO_SCALE, "True", "SucceededRescale",
                      f"the HPA controller was able to update the target scale to {desired}", now)
        self.events.append(("Normal", "SuccessfulRescale", f"New size: {desired}; reason: {self.reason}"))
        norm.store_scale_event(history, behavior, self.current, desired, now)
        _set_status(self.status, self.current, desired, self.metrics, now)

    def rescale_failed(self, error: str, now: datetime) -> None:
        self.events.append(("Warning", "FailedRescale",
                            f"New size: {self.rescale_to}; reason: {self.reason}; error: {error}"))
        set_condition(self.status, ABLE_TO_SCALE, "False", "FailedUpdateScale",
                      f"the HPA controller was unable to update the target scale: {error}", now)
        _set_current(self.status, self.current, self.metrics)
        self.error = f"failed to rescale: {error}"


def set_condition(status: Obj, ctype: str, value: str, reason: str, message: str, now: datetime) -> None:
    """setCondition: update the condition of ``ctype`` in place (appended when new); its transition
    time moves only when its status does."""
    conds = status.setdefault("conditions", [])
    cond = next((c for c in conds if isinstance(c, dict) and c.get("type") == ctype), None)
    if cond is None:
        cond = {"type": ctype}
        conds.append(cond)
    if cond.get("status") != value:
        cond["lastTransitionTime"] = format_time(now)
    cond.update(status=value, reason=reason, message=message)


def _set_current(status: Obj, current: int, metrics: list[Obj] | None) -> None:
    """setCurrentReplicasAndMetricsInStatus."""
    _put(status, "currentReplicas", current or None)
    _put(status, "currentMetrics", metrics)


def _set_status(status: Obj, current: int, desired: int, metrics: list[Obj] | None, now: datetime | None) -> None:
    """setStatus: replicas, metrics and conditions; lastScaleTime moves on a rescale (``now``)."""
    kept: Obj = {k: status[k] for k in ("conditions", "lastScaleTime") if k in status}
    status.clear()
    status.update(kept)
    _set_current(status, current, metrics)
    status["desiredReplicas"] = desired
    if now is not None:
        status["lastScaleTime"] = format_time(now)


def _put(status: Obj, key: str, value: Any) -> None:
    if value is None:
        status.pop(key, None)
    else:
        status[key] = value


def _dict(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _quantity(q: Any) -> Fraction | None:
    try:
        return parse_exact(q)[0]
    except QuantityError:
        return None


def tolerances_of(hpa: Obj, default: float) -> calc.Tolerances:
    """The controller's tolerance, or the behavior's per direction."""
    behavior = _dict(_dict(hpa.get("spec")).get("behavior"))
    up = _quantity(_dict(behavior.get("scaleUp")).get("tolerance"))
    down = _quantity(_dict(behavior.get("scaleDown")).get("tolerance"))
    return calc.Tolerances(float(down) if down is not None else default, float(up) if up is not None else default)


def decide(hpa: Obj, scale: Scale | str, pods: list[Obj], usage: Mapping[str, PodUsage], history: norm.History,
           settings: Settings, now: datetime) -> Decision:
    """One sync of ``hpa``; ``scale`` is the error text when the target's scale could not be read."""
    spec = _dict(hpa.get("spec"))
    d = Decision(status=copy.deepcopy(_dict(hpa.get("status"))))
    if isinstance(scale, str):
        d.events.append(("Warning", "FailedGetScale", scale))
        set_condition(d.status, ABLE_TO_SCALE, "False", "FailedGetScale",
                      f"the HPA controller was unable to get the target's current scale: {scale}", now)
        d.error = f"failed to query scale subresource: {scale}"
        return d
    set_condition(d.status, ABLE_TO_SCALE, "True", "SucceededGetScale",
                  "the HPA controller was able to get the target's current scale", now)
    current = d.current = scale.replicas
    history.record_initial(current, now)
    low, high = _int(spec.get("minReplicas"), 1), _int(spec.get("maxReplicas"), 0)
    desired, reason = 0, ""
    if current == 0 and low != 0:
        set_condition(d.status, SCALING_ACTIVE, "False", "ScalingDisabled",
                      "scaling is disabled since the replica count of the target is zero", now)
        _set_status(d.status, current, current, None, None)
        return d
    if current > high:
        desired, reason = high, "Current number of replicas above Spec.MaxReplicas"
    elif current < low:
        desired, reason = low, "Current number of replicas below Spec.MinReplicas"
    else:
        proposal, metric, d.metrics, error = _compute(d, hpa, scale, pods, usage, settings, now)
        if proposal == -1:
            _set_current(d.status, current, d.metrics)
            d.events.append(("Warning", "FailedComputeMetricsReplicas", error or ""))
            d.error = error
            return d
        d.error = error
        desired = max(desired, proposal)
        if desired > current:
            reason = f"{metric} above target"
        elif desired < current:
            reason = "All metrics below target"
        behavior = spec.get("behavior")
        if isinstance(behavior, dict):
            n = norm.normalize_with_behavior(history, behavior, current, desired, low, high,
                                             settings.downscale_stabilization, now)
        else:
            n = norm.normalize(history, current, desired, low, high, settings.downscale_stabilization, now)
        set_condition(d.status, ABLE_TO_SCALE, "True", *n.able, now)
        set_condition(d.status, SCALING_LIMITED, "True" if n.limited else "False", *n.limit, now)
        desired = n.replicas
    if desired == current:
        _set_status(d.status, current, current, d.metrics, None)
        return d
    d.rescale_to, d.reason = desired, reason
    return d


# ---- the metrics ------------------------------------------------------------------------------------


def _compute(d: Decision, hpa: Obj, scale: Scale, pods: list[Obj], usage: Mapping[str, PodUsage],
             settings: Settings, now: datetime) -> tuple[int, str, list[Obj] | None, str | None]:
    """computeReplicasForMetrics: (the highest proposal or -1, its metric's name, the statuses, the error)."""
    if not scale.selector:
        d.events.append(("Warning", "SelectorRequired", "selector is required"))
        set_condition(d.status, SCALING_ACTIVE, "False", "InvalidSelector", "the HPA target's scale is missing a selector",
                      now)
        return -1, "", None, "selector is required"
    try:
        parse_label_selector(scale.selector)
    except BadRequest as e:
        msg = f"couldn't convert selector into a corresponding internal selector object: {e.message}"
        d.events.append(("Warning", "InvalidSelector", msg))
        set_condition(d.status, SCALING_ACTIVE, "False", "InvalidSelector", msg, now)
        return -1, "", None, msg
    specs = [_dict(m) for m in _dict(hpa.get("spec")).get("metrics") or []]
    statuses: list[Obj] = [{"type": ""} for _ in specs]
    replicas, metric, invalid, first_error, first_condition = 0, "", 0, "", ("", "")
    tolerances = tolerances_of(hpa, settings.tolerance)
    for i, m in enumerate(specs):
        try:
            proposal, name, statuses[i] = _one_metric(m, _namespace(hpa), scale.replicas, pods, usage, tolerances,
                                                      settings, now)
        except _Unavailable as e:
            d.events.append(("Warning", e.reason, e.inner))
            if invalid == 0:
                first_error, first_condition = e.outer, (e.reason, e.inner)
            invalid += 1
            continue
        if replicas == 0 or proposal > replicas:
            replicas, metric = proposal, name
    error = f"invalid metrics ({invalid} invalid out of {len(specs)}), first error is: {first_error}" if invalid else None
    if invalid >= len(specs) or (invalid and replicas < scale.replicas):
        set_condition(d.status, SCALING_ACTIVE, "False", first_condition[0],
                      f"the HPA was unable to compute the replica count: {first_condition[1]}", now)
        return -1, "", statuses, error
    set_condition(d.status, SCALING_ACTIVE, "True", "ValidMetricFound",
                  f"the HPA was able to successfully calculate a replica count from {metric}", now)
    return replicas, metric, statuses, error


class _Unavailable(Exception):
    """A metric that proposes nothing: the event's reason and text, and the error it counts as."""

    def __init__(self, reason: str, inner: str, outer: str) -> None:
        super().__init__(outer)
        self.reason, self.inner, self.outer = reason, inner, outer


_NO_CUSTOM = "unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered"


def _namespace(obj: Obj) -> str:
    return str(_dict(obj.get("metadata")).get("namespace") or "")


def _one_metric(m: Obj, ns: str, current: int, pods: list[Obj], usage: Mapping[str, PodUsage], tolerances: calc.Tolerances,
                settings: Settings, now: datetime) -> tuple[int, str, Obj]:
    """computeReplicasForMetric: (proposal, metric name, its status) or _Unavailable."""
    kind = m.get("type")
    if kind in (RESOURCE, CONTAINER_RESOURCE):
        return _resource_metric(m, current, pods, usage, tolerances, settings, now)
    if kind == PODS:
        name = _dict(_dict(m.get("pods")).get("metric")).get("name")
        inner = f"unable to get metric {name}: {_NO_CUSTOM}"
        raise _Unavailable("FailedGetPodsMetric", inner, f"failed to get pods metric value: {inner}")
    if kind == OBJECT:
        src = _dict(m.get("object"))
        ref = _dict(src.get("describedObject"))
        api_version = str(ref.get("apiVersion") or "")
        kind_ = f"{ref.get('kind')}.{api_version.split('/')[0]}" if "/" in api_version else str(ref.get("kind"))
        inner = f"unable to get metric {_dict(src.get('metric')).get('name')}: {kind_} on {ns} {ref.get('name')}/{_NO_CUSTOM}"
        raise _Unavailable("FailedGetObjectMetric", inner, f"failed to get object metric value: {inner}")
    if kind == EXTERNAL:
        name = _dict(_dict(m.get("external")).get("metric")).get("name")
        inner = (f"unable to get external metric {ns}/{name}/nil: unable to fetch metrics from external metrics API: "
                 f"the server could not find the requested resource (get {name}.external.metrics.k8s.io)")
        raise _Unavailable("FailedGetExternalMetric", inner, f"failed to get {name} external metric value: {inner}")
    inner = f'unknown metric source type "{kind}"'
    raise _Unavailable("InvalidMetricSourceType", inner, inner)


def _resource_metric(m: Obj, current: int, pods: list[Obj], usage: Mapping[str, PodUsage],
                     tolerances: calc.Tolerances, settings: Settings, now: datetime) -> tuple[int, str, Obj]:
    container_metric = m.get("type") == CONTAINER_RESOURCE
    field_ = "containerResource" if container_metric else "resource"
    src = _dict(m.get(field_))
    resource, container = str(src.get("name") or ""), str(src.get("container") or "") if container_metric else ""
    reason = "FailedGetContainerResourceMetric" if container_metric else "FailedGetResourceMetric"
    outer = (f"failed to get {container} container metric value: " if container_metric
             else f"failed to get {resource} resource metric value: ")
    target = _dict(src.get("target"))
    average = _quantity(target.get("averageValue")) if target.get("averageValue") is not None else None
    what = "usage" if average is not None else "utilization"
    if average is None and target.get("averageUtilization") is None:
        inner = ("invalid resource metric source: neither an average utilization target nor an average value "
                 "(usage) target was set")
        raise _Unavailable(reason, inner, outer + inner)
    try:
        metrics = _pod_metrics(resource, container, pods, usage)
        status: Obj = {"name": resource, **({"container": container} if container_metric else {})}
        if average is not None:
            proposal, raw = calc.raw_resource_replicas(current, int(average * 1000), resource, tolerances, pods,
                                                       metrics, settings.readiness, now)
            status["current"] = {"averageValue": _milli_text(raw)}
            name = f"{resource} resource"
        else:
            proposal, utilization, raw = calc.resource_replicas(
                current, _int(target.get("averageUtilization"), 0), resource, tolerances, pods, metrics,
                settings.readiness, now, container)
            status["current"] = {"averageUtilization": utilization, "averageValue": _milli_text(raw)}
            name = f"{resource} {'container ' if container_metric else ''}resource utilization (percentage of request)"
    except calc.MetricError as e:
        inner = f"failed to get {resource} {what}: {e}"
        raise _Unavailable(reason, inner, outer + inner) from None
    return proposal, name, {"type": m.get("type"), field_: status}


def _pod_metrics(resource: str, container: str, pods: list[Obj], usage: Mapping[str, PodUsage]) -> dict[str, calc.PodMetric]:
    """The metrics API's answer: each measured pod's use (of ``container`` only, when named)."""
    if resource not in LOCAL_RESOURCES:
        raise calc.MetricError(f"unable to get metrics for resource {resource}: the embedded cluster measures "
                               f"only {', '.join(LOCAL_RESOURCES)}")
    names = {str(_dict(p.get("metadata")).get("name") or "") for p in pods}
    measured = {n: u for n, u in usage.items() if n in names}
    if not measured:
        raise calc.MetricError(f"unable to get metrics for resource {resource}: no metrics returned from resource "
                               f"metrics API")
    out: dict[str, calc.PodMetric] = {}
    for name, u in measured.items():
        if container:
            if container not in u.containers:
                raise calc.MetricError(f"unable to get metrics for resource {resource}: failed to get container "
                                       f"metrics: container {container} not present in metrics for pod {name}")
            value = u.containers[container]
        else:
            value = sum(u.containers.values())
        out[name] = calc.PodMetric(value, u.timestamp, u.window)
    return out


def _milli_text(milli: int) -> str:
    return format_exact(Fraction(milli, 1000), DECIMAL)


__all__ = ["Decision", "PodUsage", "Scale", "Settings", "decide", "set_condition", "tolerances_of"]
