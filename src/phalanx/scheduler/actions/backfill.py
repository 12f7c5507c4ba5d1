"""Action backfill: place BestEffort tasks (no requests), which allocate skips.

Volcano actions/backfill/backfill.go: tasks are collected queue by queue, job
by job, best first; each goes to the best feasible node through the session's
Allocate, which binds the job's placed tasks as soon as its gang is ready.
"""
from __future__ import annotations

from phalanx.scheduler.actions.pq import PriorityQueue
from phalanx.scheduler.fit_errors import FitErrors
from phalanx.scheduler.info import PENDING, JobInfo, QueueInfo, TaskInfo
from phalanx.scheduler.session import Session
from phalanx.scheduler.statement import session_allocate


def execute(ssn: Session) -> None:
    queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_key)
    seen: set[str] = set()
    jobs_by_queue: dict[str, PriorityQueue[JobInfo]] = {}
    tasks_by_job: dict[str, list[TaskInfo]] = {}
    for key in sorted(ssn.jobs):
        job = ssn.jobs[key]
        if job.is_pending():
            continue
        vr = ssn.job_valid(job)
        if vr is not None and not vr.passed:
            continue
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        be = [t for t in job.index.get(PENDING, {}).values() if t.best_effort]
        if not be:
            continue
        be.sort(key=ssn.task_order_key)
        tasks_by_job[job.uid] = be
        if queue.name not in seen:
            seen.add(queue.name)
            queues.push(queue)
        jobs_by_queue.setdefault(queue.name, PriorityQueue(ssn.job_order_key)).push(job)

    ordered: list[TaskInfo] = []
    while queues:
        queue = queues.pop()
        jobs = jobs_by_queue.get(queue.name)
        if not jobs:
            continue
        job = jobs.pop()
        ordered.extend(tasks_by_job[job.uid])
        queues.push(queue)

    for task in ordered:
        found = ssn.index.find(task)
        if isinstance(found, FitErrors):
            task.job.nodes_fit_errors[task.uid] = found
            continue
        node, _ = found
        session_allocate(ssn, task, node)
