"""Plugin gang: all of a PodGroup's minMember pods, or none.

Volcano plugins/gang: a job is valid when it has at least minMember pods
(and minTaskMember per role); it is ready when minMember tasks are placed
(Allocated, Binding, Bound, Running or Succeeded; pending BestEffort tasks
count); not-ready jobs are served before ready ones. At session close it
writes the PodGroup condition: ``Scheduled`` when ready, else
``Unschedulable``/``NotEnoughResources`` with Volcano's message.

Phalanx deviations from Volcano:
- a job that fails JobValid (its pods are not all created yet) gets the
  JobValid reason and message instead of the gang message, and its pods get
  no PodScheduled=False condition (they are waiting for siblings, not unplaceable);
- when ``Scheduled=True`` is written, an ``Unschedulable=True`` left from an
  earlier session is turned ``False`` (Volcano leaves both True);
- a job refused at admission keeps the refusal as its condition (reason
  QueueCapabilityExceeded/NotEnoughResources/QueueClosed), not the gang message.

Preemption and reclaim (gang-safe): JobStarving is Volcano's IsStarving (fewer
tasks placed or waiting than minMember). A job gives up the pods it has above
minMember one by one; a victim of a job with no pod to spare takes all of the
job's running pods with it (its victim group), so no gang is ever left running
below minMember. (Volcano's gang vote instead protects such a job entirely.)
"""
from __future__ import annotations

from phalanx.scheduler.fit_errors import FitErrors
from phalanx.scheduler.info import (
    ALLOCATED,
    ALLOCATED_STATUS,
    BOUND,
    PENDING,
    RUNNING,
    SCHEDULED,
    SCHEDULED_REASON,
    UNSCHEDULABLE,
    JobInfo,
    TaskInfo,
)
from phalanx.scheduler.reasons import job_fit_error
from phalanx.scheduler.session import PERMIT, REJECT, Plugin, Session, ValidateResult

NOT_ENOUGH_RESOURCES = "NotEnoughResources"
NOT_ENOUGH_TASKS = "NotEnoughTasks"
NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"


def job_valid(job: JobInfo) -> ValidateResult | None:
    if not job.check_task_valid():
        return ValidateResult(False, NOT_ENOUGH_PODS_OF_TASK, "Not enough valid pods of each task for gang-scheduling")
    vtn = job.valid_task_num()
    if vtn < job.min_available:
        return ValidateResult(False, NOT_ENOUGH_TASKS,
                              f"Not enough valid tasks for gang-scheduling, valid: {vtn}, min: {job.min_available}")
    return None


class GangPlugin(Plugin):
    name = "gang"

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_job_valid_fn(job_valid)
        ssn.add_job_order_key(lambda j: 1 if j.is_ready() else 0)
        ssn.add_job_ready_fn(lambda j: j.is_ready() and j.check_task_ready())
        ssn.add_job_pipelined_fn(lambda j: PERMIT if (j.is_pipelined() and j.check_task_pipelined()) else REJECT)
        ssn.add_job_starving_fn(lambda j: j.is_starving())
        ssn.add_victim_group_fn(victim_group)

    def on_session_close(self, ssn: Session) -> None:
        for key in sorted(ssn.jobs):
            job = ssn.jobs[key]
            if not job.tasks:
                continue
            if job.admission is not None and job.is_pending():
                continue  # Phalanx: the admission refusal is the reason (written by the session)
            if job.is_ready() and job.check_task_ready():
                ssn.update_podgroup_condition(job, SCHEDULED, "True", SCHEDULED_REASON, "")
                old = ssn.condition(job, UNSCHEDULABLE)
                if old is not None and old.get("status") == "True":
                    ssn.update_podgroup_condition(job, UNSCHEDULABLE, "False", SCHEDULED, "")
                continue
            job.unschedulable_this_session = True
            vr = job_valid(job)
            if vr is not None:
                job.gang_invalid = True
                job.job_fit_errors = vr.message
                ssn.update_podgroup_condition(job, UNSCHEDULABLE, "True", vr.reason, vr.message)
                continue
            msg = (f"{unready_tasks(job)}/{len(job.tasks)} tasks in gang unschedulable: "
                   f"{job_fit_error(job)}")
            job.job_fit_errors = msg
            ssn.update_podgroup_condition(job, UNSCHEDULABLE, "True", NOT_ENOUGH_RESOURCES, msg)
            for t in job.index.get(ALLOCATED, {}).values():
                if t.uid not in job.nodes_fit_errors:
                    job.nodes_fit_errors[t.uid] = FitErrors(err=msg)


def victim_group(victim: TaskInfo) -> list[TaskInfo]:
    """The victim alone while its job has pods above minMember, else every running pod of the job."""
    job = victim.job
    if job.ready_task_num() > job.min_available:
        return [victim]
    group = [victim]
    for status in (RUNNING, BOUND):
        group.extend(t for t in job.index.get(status, {}).values() if t is not victim)
    return group


def unready_tasks(job: JobInfo) -> int:
    """Volcano's gang close: tasks short of ``minAvailable``, counting the ready ones and the
    pending ones whose last placement was an allocation."""
    schedulable = job.ready_task_num()
    for t in job.index.get(PENDING, {}).values():
        if t.last_tx is not None and t.last_tx[0] in ALLOCATED_STATUS:
            schedulable += 1
    return job.min_available - schedulable
