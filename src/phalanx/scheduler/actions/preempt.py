"""Action preempt: a starving job takes room from lower jobs of its own queue.

Volcano actions/preempt/preempt.go (between jobs): preemptors are the jobs past
admission that pass JobValid and are JobStarving; per queue, best job first,
each of its pending tasks (best first, ``preemptionPolicy: Never`` excluded)
evicts running tasks of other jobs of the same queue that Session.preemptable
allows, until the job is no longer starving. The evictions are committed only
if the job is then pipelined, otherwise all of them are discarded. Preemption
between the tasks of one job is not done.
"""
from __future__ import annotations

from phalanx.scheduler.actions.pq import PriorityQueue
from phalanx.scheduler.actions.victims import evict_for, preemptors
from phalanx.scheduler.info import JobInfo, TaskInfo
from phalanx.scheduler.session import Session
from phalanx.scheduler.statement import Statement


def execute(ssn: Session) -> None:
    by_queue = preemptors(ssn, ssn.preempt_possible)
    if not by_queue:
        return
    ssn.load_settled()
    name = ssn.config.scheduler_name
    for qname in sorted(by_queue, key=lambda q: ssn.queue_order_key(ssn.queues[q])):
        jobs: PriorityQueue[JobInfo] = PriorityQueue(ssn.job_order_key)
        for job, _ in by_queue[qname]:
            jobs.push(job)
        tasks_of = {job.uid: tasks for job, tasks in by_queue[qname]}
        while jobs:
            job = jobs.pop()
            stmt = Statement(ssn)

            def message(preemptor: TaskInfo, job: JobInfo = job) -> str:
                return (f"{name}: preempting to accommodate a higher priority pod: {preemptor.namespace}/"
                        f"{preemptor.name} of job {job.namespace}/{job.name} (priority {job.priority})")

            def same_queue(v: TaskInfo, job: JobInfo = job) -> bool:
                return v.job is not job and v.job.queue == job.queue

            for task in tasks_of[job.uid]:
                if not ssn.job_starving(job):
                    break
                if not evict_for(ssn, stmt, task, same_queue, ssn.preemptable, "preempt", message):
                    break
            if ssn.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()

