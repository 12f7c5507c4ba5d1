"""Evicting for one task: the node search and victim order that preempt and reclaim share.

Volcano actions/preempt (preempt) and actions/reclaim: over the nodes that pass
the predicates, best first, take the running tasks the action's filter admits,
let the plugins vote (``vote``: Session.preemptable or .reclaimable), skip a
node whose allowed victims could not make room, else evict the lowest victims
first (job order, then task order, both reversed) until the task fits the
node's FutureIdle, and pipeline it there. A victim is evicted with its group
(Session.victim_group), and only if the votes allow every member of the group.
"""
from __future__ import annotations

from typing import Any, Callable

from phalanx.scheduler import resources as R
from phalanx.scheduler.info import BOUND, PENDING, RUNNING, JobInfo, TaskInfo
from phalanx.scheduler.session import Eviction, Session
from phalanx.scheduler.statement import Statement

EVICTABLE_STATUS = frozenset({RUNNING, BOUND})
Vote = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]


def _victim_key(ssn: Session) -> Callable[[TaskInfo], tuple[Any, ...]]:
    """Sorted with ``reverse=True``: the worst job first, and within a job its last task."""
    def key(t: TaskInfo) -> tuple[Any, ...]:
        return (ssn.job_order_key(t.job), ssn.task_order_key(t))
    return key


def evict_for(ssn: Session, stmt: Statement, task: TaskInfo, admit: Callable[[TaskInfo], bool], vote: Vote,
              action: str, message: Callable[[TaskInfo], str]) -> bool:
    """Make room for ``task`` on one node by evicting tasks ``admit`` accepts and ``vote`` allows,
    and pipeline it there; False (and nothing changed for this task) if no node can be freed.
    ``message(preemptor)``: the victims' DisruptionTarget message."""
    node_tasks = ssn.node_tasks()
    node_map = {n.name: n for n in ssn.nodes}
    order = _victim_key(ssn)
    candidates_nodes = [n for n in ssn.nodes if not n.unschedulable and ssn.predicate(task, n) is None]
    candidates_nodes.sort(key=lambda n: (-ssn.node_score(task, n), n.name))
    for node in candidates_nodes:
        if R.less_equal(task.init_resreq, node.future_idle()):
            stmt.pipeline(task, node)  # freed by an earlier eviction of this statement
            return True
        candidates = [v for v in node_tasks.get(node.name, ()) if v.status in EVICTABLE_STATUS and v.preemptable
                      and admit(v)]
        if not candidates:
            continue
        candidates.sort(key=order, reverse=True)  # the votes that stop at a limit keep the best tasks
        victims = vote(task, candidates)
        if not victims:
            continue
        room = node.future_idle()
        for v in victims:
            R.add(room, v.resreq)
        if not R.less_equal(task.init_resreq, room):
            continue
        mark = (len(stmt.evicted), len(stmt.ops))
        for v in victims:
            if R.less_equal(task.init_resreq, node.future_idle()):
                break
            if v.status not in EVICTABLE_STATUS:
                continue  # already gone with its group
            group = [m for m in ssn.victim_group(v) if m.status in EVICTABLE_STATUS]
            if any(m is not v and not (m.preemptable and admit(m) and vote(task, [m])) for m in group):
                continue
            for m in group:
                where = node_map.get(m.node_name)
                if where is not None:
                    stmt.evict(m, where, Eviction(m, action, message(task), task))
        if R.less_equal(task.init_resreq, node.future_idle()):
            stmt.pipeline(task, node)
            return True
        _undo_since(stmt, mark)
    return False


def _undo_since(stmt: Statement, mark: tuple[int, int]) -> None:
    """Take back the evictions made on a node that still could not take the task."""
    tail = Statement(stmt.ssn)
    tail.evicted = stmt.evicted[mark[0]:]
    del stmt.evicted[mark[0]:]
    tail.discard()


def preemptors(ssn: Session, possible: Callable[[JobInfo], bool]) -> dict[str, list[tuple[JobInfo, list[TaskInfo]]]]:
    """Queue -> its starving jobs (past admission, valid, in an existing queue) with the pending
    tasks that may evict (requests, ``preemptionPolicy`` not ``Never``), best first; only the jobs
    for which ``possible`` (the plugins' cheap test that victims can exist) holds."""
    out: dict[str, list[tuple[JobInfo, list[TaskInfo]]]] = {}
    for key in sorted(ssn.jobs):
        job = ssn.jobs[key]
        if job.is_pending() or job.queue not in ssn.queues or not ssn.job_starving(job):
            continue
        tasks = [t for t in job.index.get(PENDING, {}).values() if t.may_preempt and not t.best_effort]
        if not tasks:
            continue
        vr = ssn.job_valid(job)
        if vr is not None and not vr.passed:
            continue
        if not possible(job):
            continue
        tasks.sort(key=ssn.task_order_key)
        out.setdefault(job.queue, []).append((job, tasks))
    return out
