"""Pod facts that several components read the same way, and the Priority admission of pods.

Whether a pod was stopped by its node's shutdown or evicted by the scheduler, not failed by itself;
which priority and preemption policy a new pod gets from its PriorityClass (kube-apiserver's
Priority admission plugin, plugin/pkg/admission/priority).
"""
from __future__ import annotations

from typing import Any, Callable

from phalanx.api.constants import (
    CONDITION_DISRUPTION_TARGET,
    REASON_PREEMPTION_BY_SCHEDULER,
    REASON_TERMINATION_BY_KUBELET,
)
from phalanx.api.scheduling import (
    DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS,
    PREEMPT_LOWER_PRIORITY,
    ObjectForbidden,
)

Obj = dict[str, Any]


def _disruption(pod: dict[str, Any], reason: str) -> dict[str, Any] | None:
    """The pod's DisruptionTarget condition, status True, with ``reason``, if it has one."""
    status = pod.get("status") if isinstance(pod, dict) else None
    for c in (status.get("conditions") if isinstance(status, dict) else None) or []:
        if isinstance(c, dict) and c.get("type") == CONDITION_DISRUPTION_TARGET and c.get("status") == "True" \
                and c.get("reason") == reason:
            return c
    return None


def stopped_by_shutdown(pod: dict[str, Any]) -> bool:
    """The pod was stopped because its node shut down (kubelet's graceful node
    shutdown: a DisruptionTarget condition, reason TerminationByKubelet), not by
    a failure of its own."""
    return _disruption(pod, REASON_TERMINATION_BY_KUBELET) is not None


def admit_pod_priority(pod: Obj, old: Obj | None, get_class: Callable[[str], Obj | None],
                       default_class: Callable[[], Obj | None]) -> None:
    """Fill ``spec.priority`` and ``spec.preemptionPolicy`` of ``pod`` as the Priority admission does.

    On create: the named class (unknown: 403), else the globalDefault class (its name is
    written into ``priorityClassName``), else priority 0 and PreemptLowerPriority; a
    priority or policy the pod sets itself must equal what the class gives (403). On
    update (``old`` given) the values set at creation are kept when the update leaves them out.
    """
    spec = pod.setdefault("spec", {})
    if old is not None:
        old_spec = old.get("spec")
        if not isinstance(old_spec, dict):
            return
        for key in ("priority", "preemptionPolicy"):
            if spec.get(key) is None and old_spec.get(key) is not None:
                spec[key] = old_spec[key]
        return
    name = str((pod.get("metadata") or {}).get("name") or "")
    class_name = spec.get("priorityClassName") or ""
    if class_name:
        pc = get_class(class_name)
        if pc is None:
            raise ObjectForbidden("pods", name, f"no PriorityClass with name {class_name} was found")
        priority, policy = _class_value(pc), pc.get("preemptionPolicy")
    else:
        pc = default_class()
        if pc is not None:
            spec["priorityClassName"] = str((pc.get("metadata") or {}).get("name") or "")
            priority, policy = _class_value(pc), pc.get("preemptionPolicy")
        else:
            priority, policy = DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS, PREEMPT_LOWER_PRIORITY
    given = spec.get("priority")
    if given is not None and given != priority:
        raise ObjectForbidden("pods", name, f"the integer value of priority ({given}) must not be provided in pod "
                                            f"spec; priority admission controller computed {priority} from the "
                                            "given PriorityClass name")
    spec["priority"] = priority
    if policy is not None:
        given = spec.get("preemptionPolicy")
        if given is not None and given != policy:
            raise ObjectForbidden("pods", name, f"the string value of PreemptionPolicy ({given}) must not be provided "
                                                f"in pod spec; priority admission controller computed {policy} from "
                                                "the given PriorityClass name")
        spec["preemptionPolicy"] = policy


def _class_value(pc: Obj) -> int:
    v = pc.get("value")
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def preemption_message(pod: dict[str, Any]) -> str | None:
    """The message of the scheduler's eviction mark on the pod (a DisruptionTarget
    condition, reason PreemptionByScheduler: preempted or reclaimed), None when it
    carries none ("" for a mark without a message)."""
    c = _disruption(pod, REASON_PREEMPTION_BY_SCHEDULER)
    if c is None:
        return None
    msg = c.get("message")
    return msg if isinstance(msg, str) else ""
