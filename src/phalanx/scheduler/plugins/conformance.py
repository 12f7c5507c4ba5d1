"""Plugin conformance: system pods are never evicted.

Volcano plugins/conformance: pods in ``kube-system`` and pods of the
``system-cluster-critical`` / ``system-node-critical`` priority classes are
removed from every preemption and reclaim victim list.
"""
from __future__ import annotations

from phalanx.scheduler.info import TaskInfo
from phalanx.scheduler.session import Plugin, Session


def _not_critical(_preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
    return [t for t in candidates if not t.critical]


class ConformancePlugin(Plugin):
    name = "conformance"

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_preemptable_fn(_not_critical)
        ssn.add_reclaimable_fn(_not_critical)
