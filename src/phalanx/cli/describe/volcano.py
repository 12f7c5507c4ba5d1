"""`describe` for Volcano's kinds: a PodGroup (and, through it, a job) says why its gang
waits; a Queue is described generically.
"""
from __future__ import annotations

from datetime import datetime

from phalanx.api.columns import cell, dig, dig_list
from phalanx.cli.describe.common import Obj
from phalanx.cli.describe.unstructured import describe_unstructured


def waiting_reason(podgroup: Obj | None) -> str:
    """Why a gang is not running yet: the PodGroup's Unschedulable condition, if any."""
    if not isinstance(podgroup, dict):
        return ""
    phase = cell(dig(podgroup, "status", "phase")) or "Pending"
    if phase not in ("Pending", "Inqueue", "Unknown"):
        return ""
    for c in reversed(dig_list(podgroup, "status", "conditions")):
        if isinstance(c, dict) and c.get("type") == "Unschedulable" and c.get("status") == "True":
            detail = cell(c.get("message")) or cell(c.get("reason"))
            return f"PodGroup {cell(dig(podgroup, 'metadata', 'name'))} is {phase}: {detail}"
    return ""


def describe_podgroup(pg: Obj, related: dict, now: datetime) -> str:
    return describe_unstructured(pg, related, now, waiting=waiting_reason(pg))
