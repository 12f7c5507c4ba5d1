"""Pod facts that several components read the same way.

Whether a pod was stopped by its node's shutdown or evicted by the scheduler, not failed by itself.
"""
from __future__ import annotations

from typing import Any

from phalanx.api.constants import (
    CONDITION_DISRUPTION_TARGET,
    REASON_PREEMPTION_BY_SCHEDULER,
    REASON_TERMINATION_BY_KUBELET,
)


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


def preemption_message(pod: dict[str, Any]) -> str | None:
    """The message of the scheduler's eviction mark on the pod (a DisruptionTarget
    condition, reason PreemptionByScheduler: preempted or reclaimed), None when it
    carries none ("" for a mark without a message)."""
    c = _disruption(pod, REASON_PREEMPTION_BY_SCHEDULER)
    if c is None:
        return None
    msg = c.get("message")
    return msg if isinstance(msg, str) else ""
