"""The job controller: a pure reconcile core plus a thin shell.

``reconcile(job, pods, services, podgroup, now, framework, options) -> Plan``
decides; ``controller.JobController`` watches, calls it and applies the plan.
"""
from __future__ import annotations

from phalanx.controller.job.core import reconcile
from phalanx.controller.job.plan import Plan, ReconcileOptions

__all__ = ["Plan", "ReconcileOptions", "reconcile"]
