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
        ssn.add_preempt_possible_fn(lambda j: _lower_job_holds_resources(ssn, j))
        if "preempt" in ssn.config.actions:
            ssn.add_preemptable_resources_fn(lambda j: _held_by_lower_jobs(ssn, j))


def _preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
    p = preemptor.job.priority
    return [t for t in candidates if t.job is not preemptor.job and t.job.priority < p]


def _held_by_lower_jobs(ssn: Session, job: JobInfo) -> list[float]:
    """What the jobs of lower priority in the job's queue hold (preempt could take it)."""
    out = ssn.dims.zero()
    settled = ssn.snapshot.settled.get(job.queue)
    if settled is not None:
        for p, allocated in settled.priorities.items():
            if p < job.priority:
                R.add(out, allocated)
    for j in ssn.jobs.values():
        if j.queue == job.queue and j.priority < job.priority:
            R.add(out, j.allocated)
    return out


def _lower_job_holds_resources(ssn: Session, job: JobInfo) -> bool:
    settled = ssn.snapshot.settled.get(job.queue)
    if settled is not None and any(p < job.priority for p in settled.priorities):
        return True
    return any(j.queue == job.queue and j.priority < job.priority and not R.is_empty(j.allocated)
               for j in ssn.jobs.values())
