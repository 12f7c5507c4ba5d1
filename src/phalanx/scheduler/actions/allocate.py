"""Action allocate: place whole gangs, or nothing.

Volcano actions/allocate/allocate.go: queues take turns by share; each turn
the queue's best job gets a Statement; its Pending tasks (best first) are
placed one by one on the best node until the gang is ready. The Statement is
committed when the job is ready, kept (pipelined, holding its nodes until the
session ends) when it is only pipelined, and discarded otherwise. A job with
more tasks than its gang needs is pushed back and gets one more task per turn.
"""
from __future__ import annotations

from collections import deque

from phalanx.scheduler.actions.pq import PriorityQueue
from phalanx.scheduler.fit_errors import FitErrors
from phalanx.scheduler.info import PENDING, PG_INQUEUE, JobInfo, QueueInfo, TaskInfo
from phalanx.scheduler.session import Session
from phalanx.scheduler.statement import Statement


def execute(ssn: Session) -> None:
    enqueue_enabled = "enqueue" in ssn.config.actions
    queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_key)
    seen: set[str] = set()
    jobs_by_queue: dict[str, PriorityQueue[JobInfo]] = {}
    for key in sorted(ssn.jobs):
        job = ssn.jobs[key]
        if job.is_pending():
            if enqueue_enabled:
                continue
            job.phase = PG_INQUEUE
        vr = ssn.job_valid(job)
        if vr is not None and not vr.passed:
            continue
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        if queue.name not in seen:
            seen.add(queue.name)
            queues.push(queue)
        jobs_by_queue.setdefault(queue.name, PriorityQueue(ssn.job_order_key)).push(job)

    pending_tasks: dict[str, deque[TaskInfo]] = {}
    while queues:
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = jobs_by_queue.get(queue.name)
        if not jobs:
            continue
        job = jobs.pop()
        tasks = pending_tasks.get(job.uid)
        if tasks is None:
            ready = [t for t in job.index.get(PENDING, {}).values() if not t.best_effort]
            ready.sort(key=ssn.task_order_key)
            tasks = pending_tasks[job.uid] = deque(ready)
        if not tasks:
            queues.push(queue)
            continue
        stmt = Statement(ssn)
        _allocate_for_tasks(ssn, stmt, tasks, job, jobs, queue)
        if ssn.job_ready(job):
            stmt.commit()
        elif not ssn.job_pipelined(job):
            stmt.discard()
        queues.push(queue)


def _allocate_for_tasks(ssn: Session, stmt: Statement, tasks: deque[TaskInfo], job: JobInfo,
                        jobs: PriorityQueue[JobInfo], queue: QueueInfo) -> None:
    find = ssn.index.find
    while tasks:
        task = tasks.popleft()
        if not ssn.allocatable(queue, task):
            continue
        if job.task_has_fit_errors(task):
            continue
        found = find(task)
        if isinstance(found, FitErrors):
            job.nodes_fit_errors[task.uid] = found
            if job.need_continue_allocating():
                continue
            break
        node, fits_idle = found
        if fits_idle:
            stmt.allocate(task, node)
        else:
            stmt.pipeline(task, node)
        if tasks and ssn.job_ready(job):
            jobs.push(job)
            break
