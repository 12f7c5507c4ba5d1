"""What one scheduling session reads and changes: Volcano's api/ info types.

Task statuses, PodGroup phases and condition names; TaskInfo, JobInfo, NodeInfo, QueueInfo, QueueTotals.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from phalanx.scheduler import resources as R
from phalanx.scheduler.fit_errors import FitErrors

# Task statuses (Volcano api/types.go), spelled as Volcano prints them.
PENDING = "Pending"
ALLOCATED = "Allocated"
PIPELINED = "Pipelined"
BINDING = "Binding"
BOUND = "Bound"
RUNNING = "Running"
RELEASING = "Releasing"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
UNKNOWN = "Unknown"

ALLOCATED_STATUS = frozenset({BOUND, BINDING, RUNNING, ALLOCATED})
SCHEDULED_STATUS = frozenset({RUNNING, BOUND, FAILED, SUCCEEDED})
COMPLETED_STATUS = frozenset({FAILED, SUCCEEDED})

# A key of the scheduler shell's own copy of a pod (never of a stored pod):
# its binding is sent and not answered yet. Such a task is Binding, as in
# Volcano's cache, until the bind is seen: it holds its node but does not yet
# count as scheduled.
BIND_IN_FLIGHT = "phalanx.bind-in-flight"

# PodGroup phases.
PG_PENDING = "Pending"
PG_INQUEUE = "Inqueue"
PG_RUNNING = "Running"
PG_UNKNOWN = "Unknown"
PG_COMPLETED = "Completed"

# PodGroup condition types, and the reasons the framework writes.
UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
SCHEDULED_REASON = "tasks in gang are ready to be scheduled"
ADMITTED = "Admitted"

QUEUE_OPEN = "Open"

ClassKey = tuple[Any, ...]  # what makes nodes interchangeable for a task (node_index)


def task_status_of(pod: Mapping[str, Any]) -> str:
    """Volcano api/helpers.go#getTaskStatus."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if phase == "Running":
        return RELEASING if deleting else RUNNING
    if phase == "Pending":
        if deleting:
            return RELEASING
        if not (pod.get("spec") or {}).get("nodeName"):
            return PENDING
        return BINDING if pod.get(BIND_IN_FLIGHT) else BOUND
    if phase == "Succeeded":
        return SUCCEEDED
    if phase == "Failed":
        return FAILED
    return UNKNOWN


@dataclass(eq=False, slots=True)
class TaskInfo:
    uid: str
    namespace: str
    name: str
    job: JobInfo
    pod: dict[str, Any]
    role: str
    priority: int
    status: str
    node_name: str
    resreq: list[float]
    init_resreq: list[float]
    nz_cpu: float
    nz_mem: float
    best_effort: bool
    index: int
    creation: float
    spec_key: int  # tasks with equal keys have identical requests and node constraints
    per_node: bool = False  # node constraints depend on the node's name (matchFields)
    last_tx: tuple[str, str] | None = None  # (status, node) of the last discarded placement
    preemptable: bool = True  # may be evicted (``volcano.sh/preemptable`` annotation or label, default true)
    may_preempt: bool = True  # may evict others (``spec.preemptionPolicy`` is not ``Never``)
    critical: bool = False  # a system pod (kube-system, system-*-critical): never evicted (conformance)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(eq=False, slots=True)
class JobInfo:
    uid: str
    namespace: str
    name: str
    queue: str
    podgroup: dict[str, Any]
    min_available: int
    task_min_available: dict[str, int]
    task_min_available_total: int
    min_resources: list[float] | None
    min_resources_mask: tuple[bool, ...]
    priority: int
    creation: float
    phase: str
    conditions: list[dict[str, Any]]
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    index: dict[str, dict[str, TaskInfo]] = field(default_factory=dict)
    allocated: list[float] = field(default_factory=list)
    nodes_fit_errors: dict[str, FitErrors] = field(default_factory=dict)  # task uid -> why it fits nowhere
    job_fit_errors: str = ""
    pending_best_effort: int = 0
    unschedulable_this_session: bool = False
    gang_invalid: bool = False
    admission: tuple[str, str] | None = None  # (reason, message) of an enqueue refusal

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def release(self) -> None:
        """Drop the tasks (each refers back to its job), once the session is
        done with them: reference counting then frees the job and its tasks
        at once, instead of the cyclic collector in a later pass over the
        whole heap (which stalls the scheduler's loop for 100 ms or more)."""
        self.tasks.clear()
        self.index.clear()

    # ---- task index (Volcano JobInfo.TaskStatusIndex) ----
    def add_task(self, t: TaskInfo) -> None:
        self.tasks[t.uid] = t
        self.index.setdefault(t.status, {})[t.uid] = t
        if t.status in ALLOCATED_STATUS:
            R.add(self.allocated, t.resreq)
        if t.status == PENDING and t.best_effort:
            self.pending_best_effort += 1

    def update_task_status(self, t: TaskInfo, status: str) -> None:
        old = t.status
        if old == status:
            return
        bucket = self.index.get(old)
        if bucket is not None:
            bucket.pop(t.uid, None)
            if not bucket:
                del self.index[old]
        was_alloc = old in ALLOCATED_STATUS
        is_alloc = status in ALLOCATED_STATUS
        if was_alloc and not is_alloc:
            R.sub(self.allocated, t.resreq)
        elif is_alloc and not was_alloc:
            R.add(self.allocated, t.resreq)
        if t.best_effort:
            if old == PENDING:
                self.pending_best_effort -= 1
            if status == PENDING:
                self.pending_best_effort += 1
        t.status = status
        self.index.setdefault(status, {})[t.uid] = t

    def totals(self, dims: R.Dims) -> tuple[list[float], list[float], list[float], list[float]]:
        """(allocated, request, inqueue, elastic): what the job adds to its queue's sums
        (the proportion plugin's per-queue figures, ``QueueTotals``)."""
        request = dims.zero()
        for status, tasks in self.index.items():
            if status in ALLOCATED_STATUS or status == PENDING:
                for t in tasks.values():
                    R.add(request, t.resreq)
        return (list(self.allocated), request, self.inqueue_claim() or dims.zero(),
                R.exceeded_part(self.allocated, self.min_resources or dims.zero()))

    def count(self, *statuses: str) -> int:
        idx = self.index
        return sum(len(idx[s]) for s in statuses if s in idx)

    # ---- Volcano's gang counters ----
    def ready_task_num(self) -> int:
        return self.count(BOUND, BINDING, RUNNING, ALLOCATED, SUCCEEDED)

    def waiting_task_num(self) -> int:
        return self.count(PIPELINED)

    def valid_task_num(self) -> int:
        return self.count(BOUND, BINDING, RUNNING, ALLOCATED, SUCCEEDED, PIPELINED, PENDING)

    def is_ready(self) -> bool:
        return self.ready_task_num() + self.pending_best_effort >= self.min_available

    def is_pipelined(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() + self.pending_best_effort >= self.min_available

    def is_pending(self) -> bool:
        return self.phase in ("", PG_PENDING)

    def is_starving(self) -> bool:
        """Volcano JobInfo.IsStarving: fewer tasks placed or waiting than the gang needs."""
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def allocated_task_num(self) -> int:
        return self.count(*ALLOCATED_STATUS, SUCCEEDED)

    def inqueue_claim(self) -> list[float] | None:
        """What an admitted job may still claim: minResources not yet allocated
        (for Inqueue jobs, and Running jobs whose gang is already placed)."""
        if self.min_resources is None:
            return None
        if self.phase == PG_INQUEUE or (self.phase == PG_RUNNING and self.allocated_task_num() >= self.min_available):
            return R.exceeded_part(self.min_resources, self.allocated)
        return None

    def _roles(self, statuses: Iterable[str], best_effort_pending: bool) -> dict[str, int]:
        occupied: dict[str, int] = {}
        for s in statuses:
            for t in self.index.get(s, {}).values():
                occupied[t.role] = occupied.get(t.role, 0) + 1
        if best_effort_pending:
            for t in self.index.get(PENDING, {}).values():
                if t.best_effort:
                    occupied[t.role] = occupied.get(t.role, 0) + 1
        return occupied

    def check_task_valid(self) -> bool:
        if not self.task_min_available or self.min_available < self.task_min_available_total:
            return True
        actual = self._roles((BOUND, BINDING, RUNNING, ALLOCATED, SUCCEEDED, PIPELINED, PENDING), False)
        return all(m == 0 or actual.get(r, 0) >= m for r, m in self.task_min_available.items())

    def check_task_ready(self) -> bool:
        if not self.task_min_available or self.min_available < self.task_min_available_total:
            return True
        occ = self._roles((BOUND, BINDING, RUNNING, ALLOCATED, SUCCEEDED), True)
        return all(occ.get(r, 0) >= m for r, m in self.task_min_available.items())

    def check_task_pipelined(self) -> bool:
        if not self.task_min_available or self.min_available < self.task_min_available_total:
            return True
        occ = self._roles((BOUND, BINDING, RUNNING, ALLOCATED, SUCCEEDED, PIPELINED), True)
        return all(occ.get(r, 0) >= m for r, m in self.task_min_available.items())

    def failed_roles(self) -> set[str]:
        return {self.tasks[uid].role for uid in self.nodes_fit_errors if uid in self.tasks}

    def task_has_fit_errors(self, t: TaskInfo) -> bool:
        """A task of a role that already failed predicates is skipped (no role: never)."""
        if not t.role:
            return False
        return t.role in self.failed_roles()

    def need_continue_allocating(self) -> bool:
        """After a task found no node: is there any point trying the next one?"""
        if self.min_available == len(self.tasks):
            return False
        failed = self.failed_roles()
        pending: dict[str, int] = {}
        for t in self.index.get(PENDING, {}).values():
            pending[t.role] = pending.get(t.role, 0) + 1
        if self.min_available < self.task_min_available_total:
            left = sum(c for r, c in pending.items() if r not in failed)
            return self.ready_task_num() + left >= self.min_available
        allocated = self._roles((BOUND, BINDING, RUNNING, ALLOCATED, SUCCEEDED), True)
        for role in failed:
            m = self.task_min_available.get(role, 0)
            if m and allocated.get(role, 0) < m:
                return False
        return True


@dataclass(eq=False, slots=True)
class NodeInfo:
    name: str
    idx: int
    node: dict[str, Any]
    allocatable: list[float]
    max_pods: int
    used: list[float]
    idle: list[float]
    releasing: list[float]
    pipelined: list[float]
    nz_cpu: float
    nz_mem: float
    ntasks: int
    unschedulable: bool
    labels: dict[str, str]
    taints: tuple[tuple[str, str, str], ...]
    sig_id: int = 0
    class_key: ClassKey | None = None
    touched: bool = False  # accounting changed since built (SnapshotCache restores such nodes)

    def future_idle(self) -> list[float]:
        return [i + r - p for i, r, p in zip(self.idle, self.releasing, self.pipelined)]

    def add_task(self, t: TaskInfo, status: str) -> None:
        """Volcano NodeInfo.AddTask: Releasing holds resources that are coming
        back, Pipelined waits for them, everything else is in use."""
        self.touched = True
        if status == RELEASING:
            R.add(self.releasing, t.resreq)
            R.sub(self.idle, t.resreq)
            R.add(self.used, t.resreq)
        elif status == PIPELINED:
            R.add(self.pipelined, t.resreq)
        else:
            R.sub(self.idle, t.resreq)
            R.add(self.used, t.resreq)
        self.nz_cpu += t.nz_cpu
        self.nz_mem += t.nz_mem
        self.ntasks += 1

    def remove_task(self, t: TaskInfo, status: str) -> None:
        self.touched = True
        if status == RELEASING:
            R.sub(self.releasing, t.resreq)
            R.add(self.idle, t.resreq)
            R.sub(self.used, t.resreq)
        elif status == PIPELINED:
            R.sub(self.pipelined, t.resreq)
        else:
            R.add(self.idle, t.resreq)
            R.sub(self.used, t.resreq)
        self.nz_cpu -= t.nz_cpu
        self.nz_mem -= t.nz_mem
        self.ntasks -= 1


@dataclass(eq=False, slots=True)
class QueueInfo:
    name: str
    uid: str
    queue: dict[str, Any]
    weight: int
    capability: list[float] | None
    guarantee: list[float]
    reclaimable: bool
    parent: str
    priority: int
    state: str
    creation: float

    def is_open(self) -> bool:
        return self.state == QUEUE_OPEN


@dataclass(eq=False, slots=True)
class QueueTotals:
    """What a queue's settled jobs add up to (see ``job_updater.is_settled``): the
    session needs their sums for queue shares, admission and queue status, but
    never looks at the jobs one by one."""
    allocated: list[float]
    request: list[float]
    inqueue: list[float]
    elastic: list[float]
    phases: dict[str, int] = field(default_factory=dict)  # PodGroup phase -> number of jobs

    # priority -> what the settled jobs of that priority hold: whether any of them could be a
    # preemption victim, and how much preemption could free, without parsing them
    priorities: dict[int, list[float]] = field(default_factory=dict)

    @classmethod
    def zero(cls, dims: R.Dims) -> "QueueTotals":
        return cls(dims.zero(), dims.zero(), dims.zero(), dims.zero())

    def remove(self, job: JobInfo, dims: R.Dims) -> None:
        """Take out a settled job that a session has parsed after all (``Session.load_settled``)."""
        allocated, request, inqueue, elastic = job.totals(dims)
        R.sub(self.allocated, allocated)
        R.sub(self.request, request)
        R.sub(self.inqueue, inqueue)
        R.sub(self.elastic, elastic)
        n = self.phases.get(job.phase, 0) - 1
        if n > 0:
            self.phases[job.phase] = n
        else:
            self.phases.pop(job.phase, None)
        held = self.priorities.get(job.priority)
        if held is not None:
            R.sub(held, allocated)
            if R.is_empty(held):
                del self.priorities[job.priority]


def fullness(node: NodeInfo) -> float:
    """cpu + memory utilisation: the order in which the node index offers nodes."""
    f = 0.0
    for i in (0, 1):
        a = node.allocatable[i]
        if a > 0:
            f += node.used[i] / a
    return f if not math.isnan(f) else 0.0
