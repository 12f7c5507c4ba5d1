"""autoscaling/v2 HorizontalPodAutoscaler: its shape, kube-apiserver's defaults, and its TARGETS cell.

Validation is in ``phalanx.api.autoscaling_validation``; the controllers that act on HPAs are
``phalanx.controller.job.hpa`` (the PyTorchJob's, as the training operator) and
``phalanx.controller.autoscaler`` (the embedded cluster's, as kube-controller-manager).
"""
from __future__ import annotations

from typing import Any, Literal

from phalanx.api.meta import Int32, Int64, K8sModel, LabelSelector, ObjectMeta, Quantity, Time
from phalanx.objects.quantity import QuantityError, format_exact, parse_exact

Obj = dict[str, Any]

API_VERSION = "autoscaling/v2"
KIND = "HorizontalPodAutoscaler"
# Metric source types (MetricSpec.type) and the field each one fills.
OBJECT, PODS, RESOURCE, CONTAINER_RESOURCE, EXTERNAL = "Object", "Pods", "Resource", "ContainerResource", "External"
METRIC_FIELDS = {OBJECT: "object", PODS: "pods", RESOURCE: "resource", CONTAINER_RESOURCE: "containerResource",
                 EXTERNAL: "external"}
# Metric target types (MetricTarget.type).
UTILIZATION, VALUE, AVERAGE_VALUE = "Utilization", "Value", "AverageValue"
# Scaling policies and the ways to choose between them.
PODS_POLICY, PERCENT_POLICY = "Pods", "Percent"
MAX_SELECT, MIN_SELECT, DISABLED_SELECT = "Max", "Min", "Disabled"
DEFAULT_CPU_UTILIZATION = 80  # the metric of an HPA that names none


class CrossVersionObjectReference(K8sModel):
    kind: str | None = None
    name: str | None = None
    api_version: str | None = None


class MetricIdentifier(K8sModel):
    name: str | None = None
    selector: LabelSelector | None = None


class MetricTarget(K8sModel):
    type: str | None = None
    value: Quantity | None = None
    average_value: Quantity | None = None
    average_utilization: Int32 | None = None


class ObjectMetricSource(K8sModel):
    described_object: CrossVersionObjectReference | None = None
    target: MetricTarget | None = None
    metric: MetricIdentifier | None = None


class PodsMetricSource(K8sModel):
    metric: MetricIdentifier | None = None
    target: MetricTarget | None = None


class ResourceMetricSource(K8sModel):
    name: str | None = None
    target: MetricTarget | None = None


class ContainerResourceMetricSource(K8sModel):
    name: str | None = None
    target: MetricTarget | None = None
    container: str | None = None


class ExternalMetricSource(K8sModel):
    metric: MetricIdentifier | None = None
    target: MetricTarget | None = None


class MetricSpec(K8sModel):
    type: str | None = None
    object: ObjectMetricSource | None = None
    pods: PodsMetricSource | None = None
    resource: ResourceMetricSource | None = None
    container_resource: ContainerResourceMetricSource | None = None
    external: ExternalMetricSource | None = None


class HPAScalingPolicy(K8sModel):
    type: str | None = None
    value: Int32 | None = None
    period_seconds: Int32 | None = None


class HPAScalingRules(K8sModel):
    stabilization_window_seconds: Int32 | None = None
    select_policy: str | None = None
    policies: list[HPAScalingPolicy] | None = None
    tolerance: Quantity | None = None


class HorizontalPodAutoscalerBehavior(K8sModel):
    scale_up: HPAScalingRules | None = None
    scale_down: HPAScalingRules | None = None


class HorizontalPodAutoscalerSpec(K8sModel):
    scale_target_ref: CrossVersionObjectReference | None = None
    min_replicas: Int32 | None = None
    max_replicas: Int32 | None = None
    metrics: list[MetricSpec] | None = None
    behavior: HorizontalPodAutoscalerBehavior | None = None


class MetricValueStatus(K8sModel):
    value: Quantity | None = None
    average_value: Quantity | None = None
    average_utilization: Int32 | None = None


class ObjectMetricStatus(K8sModel):
    metric: MetricIdentifier | None = None
    current: MetricValueStatus | None = None
    described_object: CrossVersionObjectReference | None = None


class PodsMetricStatus(K8sModel):
    metric: MetricIdentifier | None = None
    current: MetricValueStatus | None = None


class ResourceMetricStatus(K8sModel):
    name: str | None = None
    current: MetricValueStatus | None = None


class ContainerResourceMetricStatus(K8sModel):
    name: str | None = None
    current: MetricValueStatus | None = None
    container: str | None = None


class ExternalMetricStatus(K8sModel):
    metric: MetricIdentifier | None = None
    current: MetricValueStatus | None = None


class MetricStatus(K8sModel):
    type: str | None = None
    object: ObjectMetricStatus | None = None
    pods: PodsMetricStatus | None = None
    resource: ResourceMetricStatus | None = None
    container_resource: ContainerResourceMetricStatus | None = None
    external: ExternalMetricStatus | None = None


class HorizontalPodAutoscalerCondition(K8sModel):
    type: str | None = None
    status: str | None = None
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class HorizontalPodAutoscalerStatus(K8sModel):
    """For typed reading; the status the controller writes is accepted as given."""

    observed_generation: Int64 | None = None
    last_scale_time: Time | None = None
    current_replicas: Int32 | None = None
    desired_replicas: Int32 | None = None
    current_metrics: list[MetricStatus] | None = None
    conditions: list[HorizontalPodAutoscalerCondition] | None = None


class HorizontalPodAutoscaler(K8sModel):
    api_version: Literal["autoscaling/v2"] = "autoscaling/v2"
    kind: Literal["HorizontalPodAutoscaler"] = "HorizontalPodAutoscaler"
    metadata: ObjectMeta | None = None
    spec: HorizontalPodAutoscalerSpec | None = None
    status: dict[str, Any] | None = None


# ---- defaults (pkg/apis/autoscaling/v2 SetDefaults_HorizontalPodAutoscaler) ------------------


def default_scale_up_rules() -> Obj:
    """The scale-up rules of a behavior that leaves them out: at once, +4 pods or +100% per 15 s."""
    return {"stabilizationWindowSeconds": 0, "selectPolicy": MAX_SELECT,
            "policies": [{"type": PODS_POLICY, "value": 4, "periodSeconds": 15},
                         {"type": PERCENT_POLICY, "value": 100, "periodSeconds": 15}]}


def default_scale_down_rules() -> Obj:
    """The scale-down rules of a behavior that leaves them out: -100% per 15 s; the stabilization
    window stays unset (the controller's --horizontal-pod-autoscaler-downscale-stabilization)."""
    return {"selectPolicy": MAX_SELECT, "policies": [{"type": PERCENT_POLICY, "value": 100, "periodSeconds": 15}]}


def _default_rules(rules: Any, defaults: Obj) -> Obj:
    if not isinstance(rules, dict):
        return defaults
    for key in ("selectPolicy", "policies", "stabilizationWindowSeconds"):
        if rules.get(key) is None and key in defaults:
            rules[key] = defaults[key]
    return rules


def canonical_quantity(v: Any) -> Any:
    """A quantity as apimachinery writes it back ("0.5" -> "500m", 10 -> "10"); other values as given."""
    try:
        value, fmt = parse_exact(v)
    except QuantityError:
        return v
    return format_exact(value, fmt)


def _canonical_quantities(node: Any, keys: tuple[str, ...]) -> None:
    if isinstance(node, dict):
        for key in keys:
            if node.get(key) is not None:
                node[key] = canonical_quantity(node[key])


def default_hpa(hpa: Obj) -> None:
    """minReplicas 1, the 80% cpu metric when none is given, a given behavior's missing rules
    filled in; quantities in their canonical form."""
    spec = hpa.get("spec")
    if not isinstance(spec, dict):
        spec = hpa["spec"] = {}
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": RESOURCE, "resource": {
            "name": "cpu", "target": {"type": UTILIZATION, "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _default_rules(behavior.get("scaleUp"), default_scale_up_rules())
        behavior["scaleDown"] = _default_rules(behavior.get("scaleDown"), default_scale_down_rules())
        for rules in (behavior["scaleUp"], behavior["scaleDown"]):
            _canonical_quantities(rules, ("tolerance",))
    for metric in spec["metrics"]:
        if isinstance(metric, dict):
            for source in metric.values():
                if isinstance(source, dict):
                    _canonical_quantities(source.get("target"), ("value", "averageValue"))


# ---- the TARGETS cell (kubectl's printHorizontalPodAutoscaler) ----------------------------------

_SHOWN_METRICS = 2


def _quantity_text(v: Any) -> str:
    return str(canonical_quantity(v)) if v is not None else "<nil>"  # Go prints a nil *Quantity so


def _dig(obj: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


def _metric_text(spec: Obj, status: Any) -> str:
    """One metric as ``current/target``; ``<unknown>`` until the controller has measured it."""
    kind = spec.get("type")
    field = METRIC_FIELDS.get(kind) if isinstance(kind, str) else None
    if field is None:
        return "<unknown type>"
    target = _dig(spec, field, "target") or {}
    current = _dig(status, field, "current") if isinstance(status, dict) else None
    measured = isinstance(_dig(status, field), dict)
    if kind in (EXTERNAL, OBJECT):
        if target.get("averageValue") is not None:
            now = _dig(current, "averageValue")
            shown = _quantity_text(now) if now is not None else "<unknown>"
            return f"{shown}/{_quantity_text(target.get('averageValue'))} (avg)"
        shown = _quantity_text(_dig(current, "value")) if measured else "<unknown>"
        return f"{shown}/{_quantity_text(target.get('value'))}"
    if kind == PODS:
        shown = _quantity_text(_dig(current, "averageValue")) if measured else "<unknown>"
        return f"{shown}/{_quantity_text(target.get('averageValue'))}"
    name = _dig(spec, field, "name")
    prefix = f"{name}: " if isinstance(name, str) else ""
    if target.get("averageValue") is not None:
        shown = _quantity_text(_dig(current, "averageValue")) if measured else "<unknown>"
        return f"{prefix}{shown}/{_quantity_text(target.get('averageValue'))}"
    now = _dig(current, "averageUtilization")
    shown = f"{now}%" if measured and isinstance(now, int) else "<unknown>"
    goal = target.get("averageUtilization")
    return f"{prefix}{shown}/" + (f"{goal}%" if isinstance(goal, int) else "<auto>")


def targets_cell(hpa: Obj) -> str:
    """The TARGETS column: the first two metrics, then ``+ N more...``; ``<none>`` without metrics."""
    specs = [m for m in (_dig(hpa, "spec", "metrics") or []) if isinstance(m, dict)]
    if not specs:
        return "<none>"
    statuses = _dig(hpa, "status", "currentMetrics")
    statuses = statuses if isinstance(statuses, list) else []
    texts = [_metric_text(m, statuses[i] if i < len(statuses) else None) for i, m in enumerate(specs)]
    shown = ", ".join(texts[:_SHOWN_METRICS])
    return shown if len(texts) <= _SHOWN_METRICS else f"{shown} + {len(texts) - _SHOWN_METRICS} more..."


__all__ = ["HorizontalPodAutoscaler", "HorizontalPodAutoscalerStatus", "canonical_quantity", "default_hpa",
           "targets_cell"]
