"""Volcano's wording of why a job or a task is not scheduled (api/job_info.go
FitError and TaskSchedulingReason), shared by the gang plugin and session close."""
from __future__ import annotations

from phalanx.scheduler.fit_errors import (
    POD_GROUP_NOT_READY,
    POD_GROUP_READY,
    POD_REASON_SCHEDULABLE,
    POD_REASON_UNSCHEDULABLE,
    sorted_histogram,
)
from phalanx.scheduler.info import ALLOCATED, PENDING, PIPELINED, JobInfo, TaskInfo


def task_scheduling_reason(job: JobInfo, task: TaskInfo) -> tuple[str, str]:
    """Volcano JobInfo.TaskSchedulingReason: (PodScheduled reason, message)."""
    status, node = task.last_tx if task.last_tx is not None else (task.status, task.node_name)
    if status == ALLOCATED:
        return (POD_REASON_SCHEDULABLE,
                f"Pod {task.namespace}/{task.name} can possibly be assigned to {node}, once minAvailable is satisfied")
    if status == PIPELINED:
        return (POD_REASON_UNSCHEDULABLE,
                f"Pod {task.namespace}/{task.name} can possibly be assigned to {node}, "
                "once resource is released and minAvailable is satisfied")
    if status == PENDING:
        fe = job.nodes_fit_errors.get(task.uid)
        if fe is not None:
            return POD_REASON_UNSCHEDULABLE, fe.error()
        return POD_REASON_UNSCHEDULABLE, job.job_fit_errors
    return status, job.job_fit_errors


def job_fit_error(job: JobInfo) -> str:
    """Volcano JobInfo.FitError."""
    reasons = {s: len(ts) for s, ts in job.index.items() if ts}
    reasons["minAvailable"] = job.min_available
    head = POD_GROUP_READY if job.is_ready() else POD_GROUP_NOT_READY
    msg = f"{head}, {', '.join(sorted_histogram(reasons))}"
    pending: dict[str, int] = {}
    for t in job.index.get(PENDING, {}).values():
        r, _ = task_scheduling_reason(job, t)
        pending[r] = pending.get(r, 0) + 1
    if pending:
        msg += f"; {PENDING}: {', '.join(sorted_histogram(pending))}"
    if job.job_fit_errors:
        msg += ". Origin reason is: " + job.job_fit_errors
    else:
        # Volcano takes the first task of a Go map (random); Phalanx the
        # first task that failed in this session.
        for uid, fe in job.nodes_fit_errors.items():
            failed = job.tasks.get(uid)
            if failed is not None:
                msg += f". Origin reason is {failed.name}: {fe.error()}"
                break
    return msg
