"""Action reclaim: a queue below its deserved share takes resources back from queues above theirs.

Volcano actions/reclaim/reclaim.go: queues in order (overused ones skipped),
each offering its best starving job (past admission, JobValid); each of the
job's pending tasks (best first, ``preemptionPolicy: Never`` excluded) that
Session.preemptive allows for its queue evicts running tasks of jobs in other,
reclaimable queues that Session.reclaimable allows, until the job is no longer
starving. The evictions are committed only if the job is then pipelined,
otherwise all of them are discarded.
"""
from __future__ import annotations

from phalanx.scheduler.actions.pq import PriorityQueue
from phalanx.scheduler.actions.victims import evict_for, preemptors
from phalanx.scheduler.info import JobInfo, QueueInfo, TaskInfo
from phalanx.scheduler.session import Session
from phalanx.scheduler.statement import Statement


def execute(ssn: Session) -> None:
    by_queue = preemptors(ssn, ssn.reclaim_possible)
    if not by_queue:
        return
    ssn.load_settled()
    name = ssn.config.scheduler_name
    queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_key)
    jobs_of: dict[str, PriorityQueue[JobInfo]] = {}
    tasks_of: dict[str, list[TaskInfo]] = {}
    for qname in sorted(by_queue):
        queues.push(ssn.queues[qname])
        pq = jobs_of[qname] = PriorityQueue(ssn.job_order_key)
        for job, tasks in by_queue[qname]:
            pq.push(job)
            tasks_of[job.uid] = tasks


    while queues:
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = jobs_of[queue.name]
        if not jobs:
            continue
        job = jobs.pop()
        stmt = Statement(ssn)

        def message(reclaimer: TaskInfo, job: JobInfo = job) -> str:
            return (f'{name}: reclaiming for queue "{job.queue}" (below its deserved share): '
                    f"{reclaimer.namespace}/{reclaimer.name} of job {job.namespace}/{job.name}")

        def other_reclaimable_queue(v: TaskInfo, queue: str = queue.name) -> bool:
            q = ssn.queues.get(v.job.queue)
            return q is not None and q.name != queue and q.reclaimable

        for task in tasks_of[job.uid]:
            if not ssn.job_starving(job) or not ssn.preemptive(queue, task):
                break
            if not evict_for(ssn, stmt, task, other_reclaimable_queue, ssn.reclaimable, "reclaim", message):
                break
        if ssn.job_pipelined(job):
            stmt.commit()
        else:
            stmt.discard()
        if jobs:
            queues.push(queue)
