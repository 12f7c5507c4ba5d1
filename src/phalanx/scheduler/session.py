"""The session: what actions call and what plugins register on (Volcano framework/session.go).

``open`` lets each plugin register its callbacks, tier by tier; ``close`` lets
each write its results. Actions know nothing about policy; they ask the
session, and the session combines the callbacks with Volcano's rules
(framework/session_plugins.go):

- orders: the first plugin (tier and list order) that tells two objects apart
  decides; here each plugin gives a sort key and keys are compared in order,
  then creation time, then name (Volcano: UID, random across runs);
- JobValid: the first failing plugin rejects;
- JobReady, Allocatable, Predicate: AND over all plugins;
- Overused: OR over all plugins;
- JobEnqueueable, JobPipelined (votes +1/0/-1): any Reject -> False at once;
  a tier with a Permit -> True without looking further; all abstain -> True;
- JobStarving: AND over the first tier that registers any; none -> False;
- Preemptive: AND over all plugins;
- Preemptable, Reclaimable (victim lists; None abstains): the lists of every
  plugin that answers are intersected, over all tiers; an empty list vetoes;
  no answer at all allows nobody. (Volcano lets the first tier with an answer
  decide: with its default tiers gang and conformance answer in tier 1, so
  proportion's "only down to deserved" in tier 2 is never asked);
- PreemptPossible, ReclaimPossible: AND over all plugins; a cheap test, before
  the settled jobs are parsed, that a victim can exist at all;
- PreemptableResources (what preempt could free in a waiting job's queue),
  ReclaimableResources (what reclaim could take from other queues for it):
  sums over plugins; admission counts them as free;
- victim groups: the first plugin that answers says which tasks must be
  evicted together with a victim (gang: the whole gang, once it has no pods
  to spare); none -> the victim alone;
- node scores: the sum over plugins.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from phalanx.objects.clock import format_time
from phalanx.scheduler import resources as R
from phalanx.scheduler.config import SchedulerConfig
from phalanx.scheduler.info import JobInfo, NodeInfo, QueueInfo, TaskInfo
from phalanx.scheduler.node_index import NodeIndex, referenced_label_keys
from phalanx.scheduler.snapshot import Snapshot

PERMIT = 1
ABSTAIN = 0
REJECT = -1

ObjectRef = dict[str, str]
VictimFn = Callable[[TaskInfo, list[TaskInfo]], "list[TaskInfo] | None"]
Event = tuple[ObjectRef, str, str, str]  # (involved object, type, reason, message)
PluginTimer = Callable[[str, str, float], None]  # (plugin, "OnSessionOpen"|"OnSessionClose", seconds)


@dataclass(frozen=True)
class ValidateResult:
    passed: bool
    reason: str = ""
    message: str = ""


@dataclass
class Eviction:
    """A victim of a committed preemption or reclaim: ``action`` is "preempt" or "reclaim";
    ``message`` is the victim's DisruptionTarget condition message."""
    task: TaskInfo
    action: str
    message: str
    preemptor: TaskInfo


class Plugin:
    """A policy: registers callbacks at session open, writes results at close.
    Plugin objects live for one session (no state between sessions)."""

    name = ""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config

    def on_session_open(self, ssn: Session) -> None:
        pass

    def on_session_close(self, ssn: Session) -> None:
        pass


def pod_group_ref(job: JobInfo) -> ObjectRef:
    meta = job.podgroup.get("metadata") or {}
    return {"apiVersion": job.podgroup.get("apiVersion") or "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup", "namespace": job.namespace, "name": job.name,
            "uid": str(meta.get("uid") or "")}


def pod_ref(task: TaskInfo) -> ObjectRef:
    meta = task.pod.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Pod", "namespace": task.namespace, "name": task.name,
            "uid": str(meta.get("uid") or "")}


class Session:
    def __init__(self, snapshot: Snapshot, config: SchedulerConfig, now: datetime,
                 uid: str | None = None) -> None:
        if snapshot.consumed:
            raise ValueError("a Snapshot serves one session; build a new one")
        snapshot.consumed = True
        self.snapshot = snapshot
        self.config = config
        self.now = now
        # transitionID of the conditions written by this session; derived from
        # the time so that the same input gives the same output.
        self.uid = uid or str(uuid.uuid5(uuid.NAMESPACE_URL, "phalanx-session:" + now.isoformat()))
        self.now_str = format_time(now)
        self.dims = snapshot.dims
        self.jobs = snapshot.jobs
        self.queues = snapshot.queues
        self.nodes: list[NodeInfo] = snapshot.nodes
        self.total_resource: list[float] = self.dims.zero()
        for n in self.nodes:
            R.add(self.total_resource, n.allocatable)
        self.events: list[Event] = []
        self.bindings: list[tuple[str, str, str]] = []
        self.evictions: list[Eviction] = []
        # queue -> annotation -> value (None: remove), as the plugins want them at close
        self.queue_annotations: dict[str, dict[str, str | None]] = {}
        self.plugins: list[Plugin] = []
        self._settled_loaded = snapshot.load_settled is None
        self._node_tasks: dict[str, list[TaskInfo]] | None = None

        self._tier = 0
        self._job_order: list[Callable[[JobInfo], Any]] = []
        self._queue_order: list[Callable[[QueueInfo], Any]] = []
        self._task_order: list[Callable[[TaskInfo], Any]] = []
        self._job_valid: list[Callable[[JobInfo], ValidateResult | None]] = []
        self._job_ready: list[Callable[[JobInfo], bool]] = []
        self._job_pipelined: list[list[Callable[[JobInfo], int]]] = []
        self._job_enqueueable: list[list[Callable[[JobInfo], int]]] = []
        self._job_enqueued: list[Callable[[JobInfo], None]] = []
        self._allocatable: list[Callable[[QueueInfo, TaskInfo], bool]] = []
        self._overused: list[Callable[[QueueInfo], bool]] = []
        self._job_starving: list[list[Callable[[JobInfo], bool]]] = []
        self._preemptive: list[Callable[[QueueInfo, TaskInfo], bool]] = []
        self._preemptable: list[list[VictimFn]] = []
        self._reclaimable: list[list[VictimFn]] = []
        self._victim_group: list[Callable[[TaskInfo], list[TaskInfo] | None]] = []
        self._preempt_possible: list[Callable[[JobInfo], bool]] = []
        self._reclaim_possible: list[Callable[[JobInfo], bool]] = []
        self._preemptable_resources: list[Callable[[JobInfo], list[float] | None]] = []
        self._reclaimable_resources: list[Callable[[JobInfo], list[float] | None]] = []
        self.predicate_fns: list[Callable[[TaskInfo, NodeInfo], str | None]] = []
        self.node_order_fns: list[Callable[[TaskInfo, NodeInfo], float]] = []
        self.allocate_handlers: list[Callable[[TaskInfo], None]] = []
        self.deallocate_handlers: list[Callable[[TaskInfo], None]] = []
        self.index = NodeIndex(self.nodes, self.dims, config.num_feasible_nodes_to_find(len(self.nodes)),
                               referenced_label_keys(self.jobs.values()), self.predicate, self.node_score)

    # ---------------------------------------------------------------- plugins
    def open(self, tiers: list[list[Plugin]], timer: PluginTimer | None = None) -> None:
        """Volcano OpenSession: each plugin registers its callbacks, in tier order
        (``timer`` is told how long each one took)."""
        for t, tier in enumerate(tiers):
            self._tier = t
            self._job_pipelined.append([])
            self._job_enqueueable.append([])
            self._job_starving.append([])
            self._preemptable.append([])
            self._reclaimable.append([])
            for plugin in tier:
                self.plugins.append(plugin)
                if timer is None:
                    plugin.on_session_open(self)
                else:
                    start = time.perf_counter()
                    plugin.on_session_open(self)
                    timer(plugin.name, "OnSessionOpen", time.perf_counter() - start)

    def close(self, timer: PluginTimer | None = None) -> None:
        """Volcano CloseSession: each plugin writes its results, in the order they opened."""
        for plugin in self.plugins:
            if timer is None:
                plugin.on_session_close(self)
            else:
                start = time.perf_counter()
                plugin.on_session_close(self)
                timer(plugin.name, "OnSessionClose", time.perf_counter() - start)

    # registration (called from Plugin.on_session_open)
    def add_job_order_key(self, fn: Callable[[JobInfo], Any]) -> None:
        self._job_order.append(fn)

    def add_queue_order_key(self, fn: Callable[[QueueInfo], Any]) -> None:
        self._queue_order.append(fn)

    def add_task_order_key(self, fn: Callable[[TaskInfo], Any]) -> None:
        self._task_order.append(fn)

    def add_job_valid_fn(self, fn: Callable[[JobInfo], ValidateResult | None]) -> None:
        self._job_valid.append(fn)

    def add_job_ready_fn(self, fn: Callable[[JobInfo], bool]) -> None:
        self._job_ready.append(fn)

    def add_job_pipelined_fn(self, fn: Callable[[JobInfo], int]) -> None:
        self._job_pipelined[self._tier].append(fn)

    def add_job_enqueueable_fn(self, fn: Callable[[JobInfo], int]) -> None:
        self._job_enqueueable[self._tier].append(fn)

    def add_job_enqueued_fn(self, fn: Callable[[JobInfo], None]) -> None:
        self._job_enqueued.append(fn)

    def add_job_starving_fn(self, fn: Callable[[JobInfo], bool]) -> None:
        self._job_starving[self._tier].append(fn)

    def add_preemptive_fn(self, fn: Callable[[QueueInfo, TaskInfo], bool]) -> None:
        """fn(queue, task): may the queue take resources back for the task (reclaim)?"""
        self._preemptive.append(fn)

    def add_preemptable_fn(self, fn: VictimFn) -> None:
        """fn(preemptor, candidates): the candidates it allows to be evicted, or None to abstain."""
        self._preemptable[self._tier].append(fn)

    def add_reclaimable_fn(self, fn: VictimFn) -> None:
        """fn(reclaimer, candidates): the candidates it allows to be evicted, or None to abstain."""
        self._reclaimable[self._tier].append(fn)

    def add_preempt_possible_fn(self, fn: Callable[[JobInfo], bool]) -> None:
        """fn(job): False when no task of this session could be a victim of the job in preempt."""
        self._preempt_possible.append(fn)

    def add_reclaim_possible_fn(self, fn: Callable[[JobInfo], bool]) -> None:
        """fn(job): False when no task of this session could be a victim of the job in reclaim."""
        self._reclaim_possible.append(fn)

    def add_preemptable_resources_fn(self, fn: Callable[[JobInfo], list[float] | None]) -> None:
        """fn(job): resources preempt could free in the job's queue, for a job awaiting admission."""
        self._preemptable_resources.append(fn)

    def add_reclaimable_resources_fn(self, fn: Callable[[JobInfo], list[float] | None]) -> None:
        """fn(job): resources reclaim could take from other queues, for a job awaiting admission."""
        self._reclaimable_resources.append(fn)

    def add_victim_group_fn(self, fn: Callable[[TaskInfo], list[TaskInfo] | None]) -> None:
        """fn(victim): the tasks to evict with it (itself included), or None to abstain."""
        self._victim_group.append(fn)

    def add_allocatable_fn(self, fn: Callable[[QueueInfo, TaskInfo], bool]) -> None:
        self._allocatable.append(fn)

    def add_overused_fn(self, fn: Callable[[QueueInfo], bool]) -> None:
        self._overused.append(fn)

    def add_predicate_fn(self, fn: Callable[[TaskInfo, NodeInfo], str | None]) -> None:
        """fn may read the task's requests/constraints and the node's labels,
        taints, unschedulable flag and whether its pod slots are full — the
        node index caches verdicts on exactly that."""
        self.predicate_fns.append(fn)

    def add_node_order_fn(self, fn: Callable[[TaskInfo, NodeInfo], float]) -> None:
        """fn may read the task's requests/constraints and the node's labels,
        allocatable and accounting (used, non-zero used): the node index scores
        each class of identical nodes once."""
        self.node_order_fns.append(fn)

    def add_event_handler(self, allocate: Callable[[TaskInfo], None] | None = None,
                          deallocate: Callable[[TaskInfo], None] | None = None) -> None:
        if allocate:
            self.allocate_handlers.append(allocate)
        if deallocate:
            self.deallocate_handlers.append(deallocate)

    # ---------------------------------------------------------------- combined votes
    def job_order_key(self, job: JobInfo) -> tuple[Any, ...]:
        return (*(fn(job) for fn in self._job_order), job.creation, job.namespace, job.name, job.uid)

    def queue_order_key(self, queue: QueueInfo) -> tuple[Any, ...]:
        return (*(fn(queue) for fn in self._queue_order), queue.creation, queue.name)

    def task_order_key(self, task: TaskInfo) -> tuple[Any, ...]:
        return (*(fn(task) for fn in self._task_order), task.index, task.creation, task.name, task.uid)

    def job_valid(self, job: JobInfo) -> ValidateResult | None:
        for fn in self._job_valid:
            r = fn(job)
            if r is not None and not r.passed:
                return r
        return None

    def job_ready(self, job: JobInfo) -> bool:
        for fn in self._job_ready:
            if not fn(job):
                return False
        return True

    @staticmethod
    def _votes(tiers: list[list[Callable[[JobInfo], int]]], job: JobInfo) -> bool:
        for tier in tiers:
            permit = False
            for fn in tier:
                v = fn(job)
                if v < 0:
                    return False
                if v > 0:
                    permit = True
            if permit:
                return True
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._votes(self._job_pipelined, job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._votes(self._job_enqueueable, job)

    def job_enqueued(self, job: JobInfo) -> None:
        for fn in self._job_enqueued:
            fn(job)

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self._job_starving:
            if tier:
                return all(fn(job) for fn in tier)
        return False

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(fn(queue, task) for fn in self._preemptive)

    def _sum(self, fns: list[Callable[[JobInfo], list[float] | None]], job: JobInfo) -> list[float]:
        out = self.dims.zero()
        for fn in fns:
            got = fn(job)
            if got is not None:
                R.add(out, got)
        return out

    def preemptable_resources(self, job: JobInfo) -> list[float]:
        return self._sum(self._preemptable_resources, job)

    def reclaimable_resources(self, job: JobInfo) -> list[float]:
        return self._sum(self._reclaimable_resources, job)

    def preempt_possible(self, job: JobInfo) -> bool:
        return all(fn(job) for fn in self._preempt_possible)

    def reclaim_possible(self, job: JobInfo) -> bool:
        return all(fn(job) for fn in self._reclaim_possible)

    @staticmethod
    def _victims(tiers: list[list[VictimFn]], task: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        allowed: set[int] | None = None
        for tier in tiers:
            for fn in tier:
                got = fn(task, candidates)
                if got is None:
                    continue
                ids = {id(t) for t in got}
                allowed = ids if allowed is None else allowed & ids
                if not allowed:
                    return []
        if allowed is None:
            return []
        return [t for t in candidates if id(t) in allowed]

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """The candidates the plugins let ``preemptor`` evict (in the candidates' order)."""
        return self._victims(self._preemptable, preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """The candidates the plugins let ``reclaimer`` take back for its queue (in order)."""
        return self._victims(self._reclaimable, reclaimer, candidates)

    def victim_group(self, victim: TaskInfo) -> list[TaskInfo]:
        for fn in self._victim_group:
            group = fn(victim)
            if group is not None:
                return group
        return [victim]

    # ---------------------------------------------------------------- victims
    def load_settled(self) -> None:
        """Make every job a task-level view (victims may be in jobs the snapshot kept as sums):
        the settled jobs join ``jobs`` and leave their queues' sums, so every figure stays the
        same. Once per session; a no-op for a snapshot that has every job."""
        if self._settled_loaded:
            return
        self._settled_loaded = True
        self._node_tasks = None
        load = self.snapshot.load_settled
        if load is None:
            return
        for job in load():
            if job.key in self.jobs:
                continue
            tot = self.snapshot.settled.get(job.queue)
            if tot is not None:
                tot.remove(job, self.dims)
            self.jobs[job.key] = job

    def node_tasks(self) -> dict[str, list[TaskInfo]]:
        """Node name -> the tasks of this session's jobs placed there (any status), best first."""
        if self._node_tasks is None:
            by_node: dict[str, list[TaskInfo]] = {}
            for key in sorted(self.jobs):
                for t in self.jobs[key].tasks.values():
                    if t.node_name:
                        by_node.setdefault(t.node_name, []).append(t)
            for tasks in by_node.values():
                tasks.sort(key=self.task_order_key)
            self._node_tasks = by_node
        return self._node_tasks

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        for fn in self._allocatable:
            if not fn(queue, task):
                return False
        return True

    def overused(self, queue: QueueInfo) -> bool:
        for fn in self._overused:
            if fn(queue):
                return True
        return False

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        for fn in self.predicate_fns:
            reason = fn(task, node)
            if reason:
                return reason
        return None

    def node_score(self, task: TaskInfo, node: NodeInfo) -> float:
        s = 0.0
        for fn in self.node_order_fns:
            s += fn(task, node)
        return s

    # ---------------------------------------------------------------- results
    def record_event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.events.append((ref, type_, reason, message))

    def record_podgroup_event(self, job: JobInfo, type_: str, reason: str, message: str) -> None:
        self.record_event(pod_group_ref(job), type_, reason, message)

    def update_podgroup_condition(self, job: JobInfo, ctype: str, status: str, reason: str,
                                  message: str) -> None:
        """Volcano UpdatePodGroupCondition: replace the condition of that type, or append."""
        cond = {"type": ctype, "status": status, "transitionID": self.uid,
                "lastTransitionTime": self.now_str, "reason": reason, "message": message}
        for i, c in enumerate(job.conditions):
            if c.get("type") == ctype:
                job.conditions[i] = cond
                return
        job.conditions.append(cond)

    def condition(self, job: JobInfo, ctype: str) -> dict[str, Any] | None:
        for c in job.conditions:
            if c.get("type") == ctype:
                return c
        return None
