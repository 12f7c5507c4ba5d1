"""Plugin priority: higher-priority jobs and tasks go first.

Volcano plugins/priority: job order by the PodGroup's priority class value
(descending), task order by pod priority (``spec.priority``, overridden by the
``volcano.sh/task-priority`` annotation). Preemption votes are not used:
Phalanx runs no preempt/reclaim action.
"""
from __future__ import annotations

from phalanx.scheduler.session import Plugin, Session


class PriorityPlugin(Plugin):
    name = "priority"

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_task_order_key(lambda t: -t.priority)
        ssn.add_job_order_key(lambda j: -j.priority)
