"""Plugin priority: higher-priority jobs and tasks go first, and may preempt lower ones.

Volcano plugins/priority: job order by the PodGroup's priority class value
(descending), task order by pod priority (``spec.priority``, overridden by the
``volcano.sh/task-priority`` annotation). Preemptable: a victim's job must
have a strictly lower priority (equal priorities never preempt each other).
JobStarving: fewer tasks placed or waiting than the job has. PreemptPossible:
the preemptor's queue holds a job of lower priority with resources allocated;
with the preempt action on, what those jobs hold counts as free when a job
of higher priority awaits admission (PreemptableResources).
"""
from __future__ import annotations

from phalanx.scheduler import resources as R
from phalanx.scheduler.info import JobInfo, TaskInfo
from phalanx.scheduler.session import Plugin, Session


class PriorityPlugin(Plugin):
    name = "priority"

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_task_order_key(lambda t: -t.priority)
        ssn.add_job_order_key(lambda j: -j.priority)
        ssn.add_preemptable_fn(_preemptable)
        ssn.add_job_starving_fn(lambda j: j.ready_task_num() + j.waiting_task_num() < len(j.tasks))
        held = _HeldByPriority(ssn)
        ssn.add_preempt_possible_fn(held.any_lower)
        if "preempt" in ssn.config.actions:
            ssn.add_preemptable_resources_fn(held.lower)
        ssn.add_event_handler(allocate=held.changed, deallocate=held.changed)


def _preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
    p = preemptor.job.priority
    return [t for t in candidates if t.job is not preemptor.job and t.job.priority < p]


class _HeldByPriority:
    """Per queue, what the jobs of each priority hold (settled ones included), computed when
    first asked and again after an allocation changed: one pass over the jobs, not one per
    waiting job."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.by_queue: dict[str, list[tuple[int, list[float]]]] | None = None

    def changed(self, _task: TaskInfo) -> None:
        self.by_queue = None

    def _table(self) -> dict[str, list[tuple[int, list[float]]]]:
        if self.by_queue is None:
            sums: dict[str, dict[int, list[float]]] = {}
            for name, tot in self.ssn.snapshot.settled.items():
                per = sums.setdefault(name, {})
                for p, allocated in tot.priorities.items():
                    R.add(per.setdefault(p, self.ssn.dims.zero()), allocated)
            for j in self.ssn.jobs.values():
                if not R.is_empty(j.allocated):
                    R.add(sums.setdefault(j.queue, {}).setdefault(j.priority, self.ssn.dims.zero()), j.allocated)
            self.by_queue = {q: sorted(per.items()) for q, per in sums.items()}
        return self.by_queue

    def lower(self, job: JobInfo) -> list[float]:
        """What the jobs of lower priority in the job's queue hold (preempt could take it)."""
        out = self.ssn.dims.zero()
        for p, allocated in self._table().get(job.queue, ()):
            if p >= job.priority:
                break
            R.add(out, allocated)
        return out

    def any_lower(self, job: JobInfo) -> bool:
        rows = self._table().get(job.queue) or []
        return bool(rows) and rows[0][0] < job.priority
