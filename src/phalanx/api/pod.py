"""Pod facts that several components read the same way.

Whether a pod was stopped by its node's graceful shutdown rather than by a failure of its own.
"""
from __future__ import annotations

from typing import Any

from phalanx.api.constants import CONDITION_DISRUPTION_TARGET, REASON_TERMINATION_BY_KUBELET


def stopped_by_shutdown(pod: dict[str, Any]) -> bool:
    """The pod was stopped because its node shut down (kubelet's graceful node
    shutdown: a DisruptionTarget condition, reason TerminationByKubelet), not by
    a failure of its own."""
    status = pod.get("status")
    for c in (status.get("conditions") if isinstance(status, dict) else None) or []:
        if isinstance(c, dict) and c.get("type") == CONDITION_DISRUPTION_TARGET and c.get("status") == "True" \
                and c.get("reason") == REASON_TERMINATION_BY_KUBELET:
            return True
    return False
