"""The job controller (DESIGN.md "controller/job"): a pure reconcile core plus a thin shell.

``reconcile(job, pods, services, podgroup, now, framework, options) -> Plan``
decides; ``controller.JobController`` watches, calls it and applies the plan.
"""
from __future__ import annotations

from typing import Any

from phalanx.controller.job.plan import Plan, ReconcileOptions

__all__ = ["Plan", "ReconcileOptions", "reconcile"]


def __getattr__(attr: str) -> Any:
    # Lazy: the framework plugins import job.conditions, and core imports them.
    if attr == "reconcile":
        from phalanx.controller.job.core import reconcile

        return reconcile
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
