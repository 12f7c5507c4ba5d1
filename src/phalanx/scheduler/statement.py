"""Tentative placements and evictions of one job, committed only if its gang is ready (or pipelined).

Volcano framework/statement.go: Allocate, Pipeline and Evict change the
session's view at once (task status, node accounting, plugin event handlers),
Discard undoes them in reverse and remembers where each task could have gone
(for the "can possibly be assigned to" message), Commit turns Allocated into
Binding and hands the binding out, and hands the evictions out. All-or-nothing
lives here and nowhere else.
"""
from __future__ import annotations

from phalanx.scheduler.info import ALLOCATED, BINDING, PENDING, PIPELINED, RELEASING, NodeInfo, TaskInfo
from phalanx.scheduler.session import Eviction, Session


def _place(ssn: Session, task: TaskInfo, node: NodeInfo, status: str) -> None:
    task.job.update_task_status(task, status)
    task.node_name = node.name
    node.add_task(task, status)
    ssn.index.update(node)
    for h in ssn.allocate_handlers:
        h(task)


def _unplace(ssn: Session, task: TaskInfo, node: NodeInfo) -> None:
    status = task.status
    node.remove_task(task, status)
    ssn.index.update(node)
    task.job.update_task_status(task, PENDING)
    task.node_name = ""
    task.last_tx = (status, node.name)
    for h in ssn.deallocate_handlers:
        h(task)


def _dispatch(ssn: Session, task: TaskInfo) -> None:
    """Hand a placed task to the binder: Allocated -> Binding."""
    task.last_tx = None
    task.job.update_task_status(task, BINDING)
    ssn.bindings.append((task.namespace, task.name, task.node_name))


def _release(ssn: Session, task: TaskInfo, node: NodeInfo, status: str) -> None:
    """A placed task changes status on its node (Volcano NodeInfo.UpdateTask): Releasing keeps
    its resources in use until the pod is gone, but they count as coming back (FutureIdle)."""
    node.remove_task(task, task.status)
    task.job.update_task_status(task, status)
    node.add_task(task, status)
    ssn.index.update(node)
    for h in (ssn.deallocate_handlers if status == RELEASING else ssn.allocate_handlers):
        h(task)


class Statement:
    __slots__ = ("ssn", "ops", "evicted")

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[tuple[TaskInfo, NodeInfo]] = []
        # (victim, its status before, its node, the eviction to hand out)
        self.evicted: list[tuple[TaskInfo, str, NodeInfo, Eviction]] = []

    def evict(self, task: TaskInfo, node: NodeInfo, eviction: Eviction) -> None:
        """The victim turns Releasing: its queue and job no longer count it as allocated."""
        self.evicted.append((task, task.status, node, eviction))
        _release(self.ssn, task, node, RELEASING)

    def allocate(self, task: TaskInfo, node: NodeInfo) -> None:
        _place(self.ssn, task, node, ALLOCATED)
        self.ops.append((task, node))

    def pipeline(self, task: TaskInfo, node: NodeInfo) -> None:
        _place(self.ssn, task, node, PIPELINED)
        self.ops.append((task, node))

    def discard(self) -> None:
        for task, node in reversed(self.ops):
            _unplace(self.ssn, task, node)
        self.ops.clear()
        for task, status, node, _ in reversed(self.evicted):
            _release(self.ssn, task, node, status)
        self.evicted.clear()

    def commit(self) -> None:
        for task, _status, _node, eviction in self.evicted:
            self.ssn.evictions.append(eviction)
        self.evicted.clear()
        for task, _node in self.ops:
            if task.status == ALLOCATED:
                _dispatch(self.ssn, task)
            else:
                task.last_tx = None  # pipelined: keeps its hold until the session ends
        self.ops.clear()


def session_allocate(ssn: Session, task: TaskInfo, node: NodeInfo) -> None:
    """Volcano Session.Allocate (used by backfill): place at once, and bind
    every Allocated task of the job as soon as the job is ready."""
    _place(ssn, task, node, ALLOCATED)
    job = task.job
    if ssn.job_ready(job):
        for t in sorted(job.index.get(ALLOCATED, {}).values(), key=ssn.task_order_key):
            _dispatch(ssn, t)
