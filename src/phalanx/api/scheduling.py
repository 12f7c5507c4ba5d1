"""scheduling.k8s.io/v1 PriorityClass: its shape, defaults, validation and the two system classes.

The rules and messages are kube-apiserver's (pkg/apis/scheduling: validation, the v1
defaults and SystemPriorityClasses; the REST storage's refusal to delete a system class).
"""
from __future__ import annotations

from typing import Any, Literal

from phalanx.api.meta import Int32, K8sModel, ObjectMeta
from phalanx.objects.errors import FieldError, Forbidden

Obj = dict[str, Any]

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"
PREEMPTION_POLICIES = (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER)
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"
# A pod without a class when no class is the global default.
DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS = 0
PRIORITY_CLASS_RESOURCE = "priorityclasses.scheduling.k8s.io"

# name -> (value, description), as kube-apiserver creates them at start.
SYSTEM_PRIORITY_CLASSES: dict[str, tuple[int, str]] = {
    SYSTEM_NODE_CRITICAL: (SYSTEM_CRITICAL_PRIORITY + 1000,
                           "Used for system critical pods that must not be moved from their current node."),
    SYSTEM_CLUSTER_CRITICAL: (SYSTEM_CRITICAL_PRIORITY,
                              "Used for system critical pods that must run in the cluster, but can be moved to "
                              "another node if necessary."),
}


class PriorityClass(K8sModel):
    api_version: Literal["scheduling.k8s.io/v1"] = "scheduling.k8s.io/v1"
    kind: Literal["PriorityClass"] = "PriorityClass"
    metadata: ObjectMeta | None = None
    value: Int32 | None = None
    global_default: bool | None = None
    description: str | None = None
    preemption_policy: str | None = None


class ObjectForbidden(Forbidden):
    """403 about one object, as apierrors.NewForbidden words it: ``<resource> "<name>" is forbidden: <why>``."""

    def __init__(self, resource: str, name: str, why: str) -> None:
        super().__init__(f'{resource} "{name}" is forbidden: {why}')
        self.resource = resource
        self.name = name


def system_priority_classes() -> list[Obj]:
    """The bodies of the two system classes, to create at start."""
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
             "value": value, "description": description, "preemptionPolicy": PREEMPT_LOWER_PRIORITY}
            for name, (value, description) in sorted(SYSTEM_PRIORITY_CLASSES.items(),
                                                     key=lambda kv: kv[1][0])]


def default_priority_class(pc: Obj) -> None:
    """scheduling/v1 defaults: preemptionPolicy PreemptLowerPriority. ``value`` is a plain
    int32 (no omitempty), so a class sent without one is stored with 0."""
    pc.setdefault("value", 0)
    if pc.get("preemptionPolicy") is None:
        pc["preemptionPolicy"] = PREEMPT_LOWER_PRIORITY
    for key, zero in (("globalDefault", False), ("description", "")):
        if key in pc and pc[key] == zero and type(pc[key]) is type(zero):
            del pc[key]  # omitempty, as the apiserver writes it back


def _known_system_class(name: str, value: Any, global_default: bool) -> str | None:
    """None when ``name`` is a system class with its value and globalDefault false, else why not."""
    known = SYSTEM_PRIORITY_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if value != known[0]:
        return f"value of {name} PriorityClass must be {known[0]}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return None


def validate_preemption_policy(policy: Any, path: str) -> list[FieldError]:
    """core validation's ValidatePreemptionPolicy."""
    if policy is None or policy in PREEMPTION_POLICIES:
        return []
    if policy == "":
        return [FieldError(path, "Required")]
    return [FieldError(path, "NotSupported", value=policy, supported=PREEMPTION_POLICIES)]


def validate_priority_class(pc: Obj, old: Obj | None) -> list[FieldError]:
    """ValidatePriorityClass, and ValidatePriorityClassUpdate when ``old`` is given."""
    errs: list[FieldError] = []
    name = str((pc.get("metadata") or {}).get("name") or "")
    value = pc.get("value", 0)
    if name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        why = _known_system_class(name, value, bool(pc.get("globalDefault")))
        if why is not None:
            errs.append(FieldError("metadata.name", "Forbidden",
                                   f"priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' prefix are reserved "
                                   f"for system use only. error: {why}"))
    elif isinstance(value, int) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.append(FieldError("value", "Forbidden",
                               f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"))
    errs += validate_preemption_policy(pc.get("preemptionPolicy"), "preemptionPolicy")
    if old is not None:
        if value != old.get("value", 0):
            errs.append(FieldError("value", "Forbidden", "may not be changed in an update."))
        if pc.get("preemptionPolicy") != old.get("preemptionPolicy"):
            errs.append(FieldError("preemptionPolicy", "Invalid", "field is immutable", pc.get("preemptionPolicy")))
    return errs


def check_deletable(name: str) -> None:
    """A system class cannot be deleted (kube-apiserver's PriorityClass REST storage)."""
    if name in SYSTEM_PRIORITY_CLASSES:
        raise ObjectForbidden(PRIORITY_CLASS_RESOURCE, name, "this is a system priority class and cannot be deleted")


def global_default(classes: list[Obj]) -> Obj | None:
    """The globalDefault class; of several (a race), the one with the lowest value, as kube-apiserver picks."""
    best: Obj | None = None
    for pc in classes:
        if pc.get("globalDefault") is True and (best is None or _value(pc) < _value(best)):
            best = pc
    return best


def check_single_default(pc: Obj, classes: list[Obj], creating: bool) -> None:
    """The Priority admission's rule: at most one class is marked globalDefault."""
    if pc.get("globalDefault") is not True:
        return
    current = global_default(classes)
    name = str((pc.get("metadata") or {}).get("name") or "")
    if current is None:
        return
    current_name = str((current.get("metadata") or {}).get("name") or "")
    if creating or current_name != name:
        raise ObjectForbidden(PRIORITY_CLASS_RESOURCE, name,
                              f"PriorityClass {current_name} is already marked as default. Only one default can exist")


def _value(pc: Obj) -> int:
    v = pc.get("value")
    return v if isinstance(v, int) else 0


__all__ = ["PriorityClass", "ObjectForbidden", "SYSTEM_PRIORITY_CLASSES", "check_deletable", "check_single_default",
           "default_priority_class", "global_default", "system_priority_classes", "validate_preemption_policy",
           "validate_priority_class"]
