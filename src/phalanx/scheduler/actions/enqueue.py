"""Action enqueue: admit Pending PodGroups (phase Pending -> Inqueue).

Volcano actions/enqueue/enqueue.go: queues take turns (best queue first, one
job per turn), each offering its best Pending job; a job without
minResources is admitted unconditionally, any other one when the plugins'
JobEnqueueable votes allow it. A refused job stays Pending and the loop moves
on to the next one.
"""
from __future__ import annotations

from phalanx.scheduler.actions.pq import PriorityQueue
from phalanx.scheduler.info import PG_INQUEUE, JobInfo, QueueInfo
from phalanx.scheduler.session import Session


def execute(ssn: Session) -> None:
    queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_key)
    seen: set[str] = set()
    jobs_by_queue: dict[str, PriorityQueue[JobInfo]] = {}
    for key in sorted(ssn.jobs):
        job = ssn.jobs[key]
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        if queue.name not in seen:
            seen.add(queue.name)
            queues.push(queue)
        if job.is_pending():
            jobs_by_queue.setdefault(queue.name, PriorityQueue(ssn.job_order_key)).push(job)

    while queues:
        queue = queues.pop()
        jobs = jobs_by_queue.get(queue.name)
        if not jobs:
            continue
        job = jobs.pop()
        if job.min_resources is None or ssn.job_enqueueable(job):
            ssn.job_enqueued(job)
            job.phase = PG_INQUEUE
            job.admission = None
            job.job_fit_errors = ""
        queues.push(queue)
