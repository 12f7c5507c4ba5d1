"""kube-apiserver's validation of an autoscaling/v2 HorizontalPodAutoscaler (spec), in its words.

Rules, order and messages are pkg/apis/autoscaling/validation's as kube-apiserver 1.36 reports them
(checked against the real one: tests/unit/test_hpa_api.py); identical errors are reported once, as
the apiserver's aggregate does. Runs after ``autoscaling.default_hpa``.
"""
from __future__ import annotations

from typing import Any

from phalanx.api.autoscaling import (
    AVERAGE_VALUE,
    DISABLED_SELECT,
    EXTERNAL,
    MAX_SELECT,
    METRIC_FIELDS,
    MIN_SELECT,
    OBJECT,
    PERCENT_POLICY,
    PODS_POLICY,
    UTILIZATION,
    VALUE,
)
from phalanx.objects.errors import FieldError
from phalanx.objects.names import is_dns1123_label, is_qualified_name
from phalanx.objects.quantity import QuantityError, parse_exact

Obj = dict[str, Any]

MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_WINDOW_SECONDS = 3600
METRIC_SOURCE_TYPES = tuple(sorted(METRIC_FIELDS))
SELECT_POLICIES = tuple(sorted((MAX_SELECT, MIN_SELECT, DISABLED_SELECT)))
POLICY_TYPES = tuple(sorted((PODS_POLICY, PERCENT_POLICY)))
# The order validateMetricSpec looks at the sources in (only the first one present is validated).
_SOURCE_ORDER = ("object", "external", "pods", "resource", "containerResource")
_STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_STANDARD_RESOURCES = (*_STANDARD_CONTAINER_RESOURCES, "storage", "pods", "services", "replicationcontrollers",
                       "resourcequotas", "secrets", "configmaps", "persistentvolumeclaims", "requests.cpu",
                       "requests.memory", "requests.ephemeral-storage", "requests.storage", "limits.cpu",
                       "limits.memory", "limits.ephemeral-storage", "services.nodeports",
                       "services.loadbalancers")


def _dict(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _sign(q: Any) -> int | None:
    try:
        value = parse_exact(q)[0]
    except QuantityError:
        return None
    return (value > 0) - (value < 0)


def path_segment_problems(name: str) -> list[str]:
    """apimachinery's IsValidPathSegmentName."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _object_reference(ref: Obj, path: str) -> list[FieldError]:
    errs = []
    for key in ("kind", "name"):
        value = ref.get(key)
        if not isinstance(value, str) or not value:
            errs.append(FieldError(f"{path}.{key}", "Required"))
        else:
            errs += [FieldError(f"{path}.{key}", "Invalid", m, value) for m in path_segment_problems(value)]
    return errs


def _target_api_version(value: Any, path: str) -> list[FieldError]:
    """The scale target's apiVersion parses as a group/version that names a group."""
    text = value if isinstance(value, str) else ""
    if text.count("/") > 1:
        return [FieldError(path, "Invalid", f"unexpected GroupVersion string: {text}", text)]
    group = text.split("/", 1)[0] if "/" in text else ""
    return [] if group else [FieldError(path, "Invalid", "apiVersion must specify API group", text)]


def validate_hpa(hpa: Obj, old: Obj | None = None) -> list[FieldError]:
    """ValidateHorizontalPodAutoscaler(Update) on the spec (metadata is admission's)."""
    spec = _dict(hpa.get("spec"))
    errs: list[FieldError] = []
    lo, hi = spec.get("minReplicas"), _int(spec.get("maxReplicas"))
    if isinstance(lo, int) and lo < 1:
        errs.append(FieldError("spec.minReplicas", "Invalid", "must be greater than or equal to 1", lo))
    if hi == 0:
        errs.append(FieldError("spec.maxReplicas", "Required", "must be set and greater than 0"))
    elif hi < 1:
        errs.append(FieldError("spec.maxReplicas", "Invalid", "must be greater than or equal to 1", hi))
    if isinstance(lo, int) and hi < lo:
        errs.append(FieldError("spec.maxReplicas", "Invalid", "must be greater than or equal to `minReplicas`", hi))
    ref = _dict(spec.get("scaleTargetRef"))
    errs += _object_reference(ref, "spec.scaleTargetRef")
    errs += _target_api_version(ref.get("apiVersion"), "spec.scaleTargetRef.apiVersion")
    errs += _metrics(spec.get("metrics"), lo)
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        for key in ("scaleUp", "scaleDown"):
            if isinstance(behavior.get(key), dict):
                errs += _scaling_rules(behavior[key], f"spec.behavior.{key}")
    return _unique(errs)


def _unique(errs: list[FieldError]) -> list[FieldError]:
    seen: set[str] = set()
    out = []
    for e in errs:
        if str(e) not in seen:
            seen.add(str(e))
            out.append(e)
    return out


def _metrics(metrics: Any, min_replicas: Any) -> list[FieldError]:
    errs: list[FieldError] = []
    types = set()
    for i, m in enumerate(metrics if isinstance(metrics, list) else []):
        errs += _metric_spec(_dict(m), f"spec.metrics[{i}]")
        types.add(_dict(m).get("type"))
    if min_replicas == 0 and not types & {OBJECT, EXTERNAL}:
        errs.append(FieldError("spec.metrics", "Forbidden",
                               "must specify at least one Object or External metric to support scaling to zero "
                               "replicas"))
    return errs


def _metric_spec(m: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = m.get("type")
    if not kind:
        errs.append(FieldError(f"{path}.type", "Required", "must specify a metric source type"))
    if kind not in METRIC_FIELDS:
        errs.append(FieldError(f"{path}.type", "NotSupported", value=kind if isinstance(kind, str) else "",
                               supported=METRIC_SOURCE_TYPES))
    present = [f for f in _SOURCE_ORDER if m.get(f) is not None]
    if present:
        errs += _SOURCE_RULES[present[0]](_dict(m[present[0]]), f"{path}.{present[0]}")
    expected = METRIC_FIELDS.get(kind) if isinstance(kind, str) else None
    if expected is not None and m.get(expected) is None:
        errs.append(FieldError(f"{path}.{expected}", "Required", "must populate information for the given metric source"))
    if len(present) != 1:
        errs += [FieldError(f"{path}.{f}", "Forbidden", "must populate the given metric source only")
                 for f in present if f != expected]
    return errs


def _metric_target(t: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = t.get("type")
    if not kind:
        errs.append(FieldError(f"{path}.type", "Required", "must specify a metric target type"))
    if kind not in (UTILIZATION, VALUE, AVERAGE_VALUE):
        errs.append(FieldError(f"{path}.type", "Invalid", "must be either Utilization, Value, or AverageValue",
                               kind if isinstance(kind, str) else ""))
    for key in ("value", "averageValue"):
        if t.get(key) is not None and _sign(t[key]) != 1:
            errs.append(FieldError(f"{path}.{key}", "Invalid", "must be positive", str(t[key])))
    u = t.get("averageUtilization")
    if isinstance(u, int) and u < 1:
        errs.append(FieldError(f"{path}.averageUtilization", "Invalid", "must be greater than 0", u))
    return errs


def _metric_identifier(ident: Obj, path: str) -> list[FieldError]:
    name = ident.get("name")
    if not isinstance(name, str) or not name:
        return [FieldError(f"{path}.name", "Required", "must specify a metric name")]
    return [FieldError(f"{path}.name", "Invalid", msg, name) for msg in path_segment_problems(name)]


def _object_source(src: Obj, path: str) -> list[FieldError]:
    target = _dict(src.get("target"))
    errs = _object_reference(_dict(src.get("describedObject")), f"{path}.describedObject")
    errs += _metric_identifier(_dict(src.get("metric")), f"{path}.metric")
    errs += _metric_target(target, f"{path}.target")
    if target.get("value") is None and target.get("averageValue") is None:
        errs.append(FieldError(f"{path}.target.averageValue", "Required", "must set either a target value or averageValue"))
    return errs


def _external_source(src: Obj, path: str) -> list[FieldError]:
    target = _dict(src.get("target"))
    errs = _metric_identifier(_dict(src.get("metric")), f"{path}.metric") + _metric_target(target, f"{path}.target")
    if target.get("value") is None and target.get("averageValue") is None:
        errs.append(FieldError(f"{path}.target.averageValue", "Required",
                               "must set either a target value for metric or a per-pod target"))
    if target.get("value") is not None and target.get("averageValue") is not None:
        errs.append(FieldError(f"{path}.target.value", "Forbidden",
                               "may not set both a target value for metric and a per-pod target"))
    return errs


def _pods_source(src: Obj, path: str) -> list[FieldError]:
    target = _dict(src.get("target"))
    errs = _metric_identifier(_dict(src.get("metric")), f"{path}.metric") + _metric_target(target, f"{path}.target")
    if target.get("averageValue") is None:
        errs.append(FieldError(f"{path}.target.averageValue", "Required", "must specify a positive target averageValue"))
    return errs


def _utilization_or_average(target: Obj, path: str) -> list[FieldError]:
    errs = []
    if target.get("averageUtilization") is None and target.get("averageValue") is None:
        errs.append(FieldError(f"{path}.target.averageUtilization", "Required",
                               "must set either a target raw value or a target utilization"))
    if target.get("averageUtilization") is not None and target.get("averageValue") is not None:
        errs.append(FieldError(f"{path}.target.averageValue", "Forbidden",
                               "may not set both a target raw value and a target utilization"))
    return errs


def _resource_source(src: Obj, path: str) -> list[FieldError]:
    target = _dict(src.get("target"))
    errs = []
    if not isinstance(src.get("name"), str) or not src["name"]:
        errs.append(FieldError(f"{path}.name", "Required", "must specify a resource name"))
    return errs + _metric_target(target, f"{path}.target") + _utilization_or_average(target, path)


def _container_resource_name(name: str, path: str) -> list[FieldError]:
    """core validation's ValidateContainerResourceName."""
    errs = [FieldError(path, "Invalid", msg, name) for msg in is_qualified_name(name)]
    if errs:
        return errs
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not name.startswith(("hugepages-", "requests.hugepages-")):
            errs.append(FieldError(path, "Invalid", "must be a standard resource type or fully qualified", name))
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            errs.append(FieldError(path, "Invalid", "must be a standard resource for containers", name))
        return errs
    domain = name.split("/", 1)[0]
    native = domain == "kubernetes.io" or domain.endswith(".kubernetes.io")
    if not native and name.startswith("requests."):
        errs.append(FieldError(path, "Invalid", "doesn't follow extended resource name standard", name))
    return errs


def _container_resource_source(src: Obj, path: str) -> list[FieldError]:
    target = _dict(src.get("target"))
    errs = []
    name, container = src.get("name"), src.get("container")
    if not isinstance(name, str) or not name:
        errs.append(FieldError(f"{path}.name", "Required", "must specify a resource name"))
    else:
        errs += _container_resource_name(name, f"{path}.name")
    if not isinstance(container, str) or not container:
        errs.append(FieldError(f"{path}.container", "Required", "must specify a container"))
    else:
        errs += [FieldError(f"{path}.container", "Invalid", msg, container) for msg in is_dns1123_label(container)]
    return errs + _metric_target(target, f"{path}.target") + _utilization_or_average(target, path)


_SOURCE_RULES = {"object": _object_source, "external": _external_source, "pods": _pods_source,
                 "resource": _resource_source, "containerResource": _container_resource_source}


def _scaling_rules(rules: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    window = rules.get("stabilizationWindowSeconds")
    if isinstance(window, int) and window < 0:
        errs.append(FieldError(f"{path}.stabilizationWindowSeconds", "Invalid", "must be greater than or equal to zero",
                               window))
    if isinstance(window, int) and window > MAX_STABILIZATION_WINDOW_SECONDS:
        errs.append(FieldError(f"{path}.stabilizationWindowSeconds", "Invalid",
                               f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}", window))
    select = rules.get("selectPolicy")
    if select is not None and select not in SELECT_POLICIES:
        errs.append(FieldError(f"{path}.selectPolicy", "NotSupported", value=select, supported=SELECT_POLICIES))
    policies = rules.get("policies")
    if not policies:
        errs.append(FieldError(f"{path}.policies", "Required", "must specify at least one Policy"))
    for i, p in enumerate(policies if isinstance(policies, list) else []):
        errs += _scaling_policy(_dict(p), f"{path}.policies[{i}]")
    tolerance = rules.get("tolerance")
    if tolerance is not None and _sign(tolerance) == -1:
        errs.append(FieldError(f"{path}.tolerance", "Invalid", "must be greater than or equal to 0", str(tolerance)))
    return errs


def _scaling_policy(p: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if p.get("type") not in POLICY_TYPES:
        errs.append(FieldError(f"{path}.type", "NotSupported", value=p.get("type") or "", supported=POLICY_TYPES))
    value, period = _int(p.get("value")), _int(p.get("periodSeconds"))
    if value <= 0:
        errs.append(FieldError(f"{path}.value", "Invalid", "must be greater than zero", value))
    if period <= 0:
        errs.append(FieldError(f"{path}.periodSeconds", "Invalid", "must be greater than zero", period))
    if period > MAX_PERIOD_SECONDS:
        errs.append(FieldError(f"{path}.periodSeconds", "Invalid", f"must be less than or equal to {MAX_PERIOD_SECONDS}",
                               period))
    return errs


__all__ = ["path_segment_problems", "validate_hpa"]
