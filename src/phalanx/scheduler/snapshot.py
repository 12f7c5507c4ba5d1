"""The cluster as one scheduling session sees it: Volcano's ClusterInfo.

``Snapshot.build`` turns plain object dicts (Nodes, Queues, PodGroups, Pods)
into NodeInfo / QueueInfo / JobInfo / TaskInfo. It never mutates the dicts
and never raises on a bad object: the object is skipped and the reason is kept
in ``Snapshot.skipped`` (the shell logs it). A snapshot is consumed by one
session, which updates task statuses and node accounting in place.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from phalanx.api.constants import ANNOTATION_GROUP_NAME, ANNOTATION_TASK_SPEC, DEFAULT_QUEUE, SCHEDULER_NAME
from phalanx.objects.clock import parse_time
from phalanx.objects.meta import serves
from phalanx.objects.quantity import parse_quantity
from phalanx.scheduler import resources as R

if TYPE_CHECKING:
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

# PodGroup phases.
PG_PENDING = "Pending"
PG_INQUEUE = "Inqueue"
PG_RUNNING = "Running"
PG_UNKNOWN = "Unknown"
PG_COMPLETED = "Completed"

ANNOTATION_TASK_PRIORITY = "volcano.sh/task-priority"
DEFAULT_MAX_PODS = 110  # kubelet's default maxPods, for a node that declares none
QUEUE_OPEN = "Open"


def task_status_of(pod: Mapping[str, Any]) -> str:
    """Volcano api/helpers.go#getTaskStatus."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if phase == "Running":
        return RELEASING if deleting else RUNNING
    if phase == "Pending":
        if deleting:
            return RELEASING
        return BOUND if (pod.get("spec") or {}).get("nodeName") else PENDING
    if phase == "Succeeded":
        return SUCCEEDED
    if phase == "Failed":
        return FAILED
    return UNKNOWN


def _timestamp(meta: Mapping[str, Any]) -> float:
    try:
        t = parse_time(meta.get("creationTimestamp"))
    except (TypeError, ValueError, AttributeError):
        t = None
    return t.timestamp() if t else 0.0


def _pod_index(name: str) -> int:
    """The pod's index under its task (name suffix), as Volcano's CompareTask."""
    parts = name.split("-")
    if len(parts) >= 3:
        try:
            return int(parts[-1])
        except ValueError:
            pass
    return 0


@dataclass(eq=False, slots=True)
class TaskInfo:
    uid: str
    namespace: str
    name: str
    job: "JobInfo"
    pod: dict
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

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(eq=False, slots=True)
class JobInfo:
    uid: str
    namespace: str
    name: str
    queue: str
    podgroup: dict
    min_available: int
    task_min_available: dict[str, int]
    task_min_available_total: int
    min_resources: list[float] | None
    min_resources_mask: tuple[bool, ...]
    priority: int
    creation: float
    phase: str
    conditions: list[dict]
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    index: dict[str, dict[str, TaskInfo]] = field(default_factory=dict)
    allocated: list[float] = field(default_factory=list)
    nodes_fit_errors: dict[str, "FitErrors"] = field(default_factory=dict)  # task uid -> why it fits nowhere
    job_fit_errors: str = ""
    pending_best_effort: int = 0
    unschedulable_this_session: bool = False
    gang_invalid: bool = False
    admission: tuple[str, str] | None = None  # (reason, message) of an enqueue refusal

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

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
    node: dict
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
    class_key: tuple | None = None
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
    queue: dict
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
    """What a queue's settled jobs add up to (see ``session.is_settled``): the
    session needs their sums for queue shares, admission and queue status, but
    never looks at the jobs one by one."""
    allocated: list[float]
    request: list[float]
    inqueue: list[float]
    elastic: list[float]
    phases: dict[str, int] = field(default_factory=dict)  # PodGroup phase -> number of jobs

    @classmethod
    def zero(cls, dims: R.Dims) -> "QueueTotals":
        return cls(dims.zero(), dims.zero(), dims.zero(), dims.zero())


@dataclass(eq=False)
class Snapshot:
    dims: R.Dims
    nodes: list[NodeInfo]
    queues: dict[str, QueueInfo]
    jobs: dict[tuple[str, str], JobInfo]
    skipped: list[str] = field(default_factory=list)
    consumed: bool = False
    # Jobs left out of ``jobs`` because a session would not change them
    # (SnapshotCache); their tasks are already counted on the nodes.
    settled: dict[str, QueueTotals] = field(default_factory=dict)

    @property
    def node_map(self) -> dict[str, NodeInfo]:
        return {n.name: n for n in self.nodes}

    @classmethod
    def build(
        cls,
        nodes: list[dict],
        queues: list[dict],
        podgroups: list[dict],
        pods: list[dict],
        priority_classes: dict[str, int] | None = None,
        default_queue: str = DEFAULT_QUEUE,
        scheduler_names: frozenset[str] = frozenset({SCHEDULER_NAME}),
        pod_cache: "PodCache | None" = None,
    ) -> "Snapshot":
        """``pod_cache`` (kept by the shell across sessions) saves re-parsing
        the quantities of pods that did not change."""
        return _Builder(priority_classes or {}, default_queue, frozenset(scheduler_names), pod_cache).build(
            nodes, queues, podgroups, pods)


class PodCache:
    """Parsed pod requests by (uid, generation); ``sweep`` forgets pods not
    seen since the previous sweep."""

    def __init__(self) -> None:
        self._old: dict[Any, tuple] = {}
        self._new: dict[Any, tuple] = {}

    def get(self, key: Any) -> tuple | None:
        v = self._new.get(key)
        if v is None:
            v = self._old.get(key)
            if v is not None:
                self._new[key] = v
        return v

    def put(self, key: Any, value: tuple) -> None:
        self._new[key] = value

    def sweep(self) -> None:
        self._old, self._new = self._new, {}

    def __len__(self) -> int:
        return len(self._new) + len(self._old)


# ---------------------------------------------------------------- building

def _resource_names(rl: Any) -> list[str]:
    return [k for k in rl.keys() if isinstance(k, str)] if isinstance(rl, dict) else []


def _name(o: Any) -> str:
    """A printable name for an object that may be malformed."""
    try:
        meta = o.get("metadata") or {}
        ns, name = meta.get("namespace"), meta.get("name")
        return f"{ns}/{name}" if ns else repr(name)
    except AttributeError:
        return repr(o)[:40]


def _node_resource_names(n: dict) -> list[str]:
    st = n.get("status") or {}
    return _resource_names(st.get("allocatable") or st.get("capacity"))


def _pod_resource_names(p: dict) -> list[str]:
    return list(_container_resource_names(p.get("spec") or {}))


def _podgroup_resource_names(pg: dict) -> list[str]:
    return _resource_names((pg.get("spec") or {}).get("minResources"))


def _queue_resource_names(q: dict) -> list[str]:
    spec = q.get("spec") or {}
    return _resource_names(spec.get("capability")) + _resource_names((spec.get("guarantee") or {}).get("resource"))


def _container_resource_names(spec: Mapping[str, Any]) -> Iterable[str]:
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            res = (c or {}).get("resources") or {}
            yield from _resource_names(res.get("requests"))
            yield from _resource_names(res.get("limits"))
    yield from _resource_names(spec.get("overhead"))


class _Builder:
    def __init__(self, priority_classes: dict[str, int], default_queue: str, scheduler_names: frozenset[str],
                 pod_cache: PodCache | None = None) -> None:
        self.pod_cache = pod_cache
        self.priority_classes = priority_classes
        self.default_queue = default_queue
        self.scheduler_names = scheduler_names
        self.skipped: list[str] = []
        # tasks with equal keys share predicate/score verdicts: one numbering per session
        self.spec_keys: dict[Any, int] = {}

    def skip(self, what: str, why: Any) -> None:
        self.skipped.append(f"{what}: {why}")

    def _dicts(self, kind: str, objs: Any) -> list[dict]:
        out = []
        for o in objs or []:
            if isinstance(o, dict) and isinstance(o.get("metadata") or {}, dict):
                out.append(o)
            else:
                self.skip(f"{kind} {_name(o)}", "not an object")
        return out

    def build(self, nodes: list[dict], queues: list[dict], podgroups: list[dict], pods: list[dict]) -> Snapshot:
        nodes = self._dicts("node", nodes)
        queues = self._dicts("queue", queues)
        podgroups = self._dicts("podgroup", podgroups)
        pods = self._dicts("pod", pods)
        scalars: set[str] = set()
        for objs, names in ((nodes, _node_resource_names), (pods, _pod_resource_names),
                            (podgroups, _podgroup_resource_names), (queues, _queue_resource_names)):
            for o in objs:
                try:
                    scalars.update(names(o))
                except (TypeError, AttributeError, ValueError):
                    pass  # the object is reported when it is read for real
        dims = R.Dims(s for s in scalars if R.is_scheduling_resource(s))

        node_list = self._nodes(nodes, dims)
        queue_map = self._queues(queues, dims)
        jobs = self._jobs(podgroups, queue_map, dims)
        self._pods(pods, dims, jobs, {n.name: n for n in node_list})
        return Snapshot(dims=dims, nodes=node_list, queues=queue_map, jobs=jobs, skipped=self.skipped)

    def _nodes(self, nodes: list[dict], dims: R.Dims) -> list[NodeInfo]:
        out: dict[str, NodeInfo] = {}
        for n in nodes:
            try:
                meta = n.get("metadata") or {}
                name = meta.get("name")
                if not isinstance(name, str) or not name:
                    raise ValueError("metadata.name is required")
                st = n.get("status") or {}
                ready = True
                for c in st.get("conditions") or []:
                    if c.get("type") == "Ready" and c.get("status") != "True":
                        ready = False
                if not ready:
                    continue  # Volcano's snapshot holds Ready nodes only
                # Parsed once per node version (and set of dimensions), not every session.
                rv = meta.get("resourceVersion")
                ck = ("Node", name, rv, dims.names) if rv is not None else None
                parsed = self.pod_cache.get(ck) if self.pod_cache is not None and ck is not None else None
                if parsed is None:
                    parsed = self._parse_node(n, dims)
                    if self.pod_cache is not None and ck is not None:
                        self.pod_cache.put(ck, parsed)
                alloc, max_pods, unschedulable, labels, taints = parsed
                out[name] = NodeInfo(
                    name=name, idx=0, node=n, allocatable=list(alloc), max_pods=max_pods,
                    used=dims.zero(), idle=list(alloc), releasing=dims.zero(), pipelined=dims.zero(),
                    nz_cpu=0.0, nz_mem=0.0, ntasks=0, unschedulable=unschedulable,
                    labels=dict(labels), taints=taints,
                )
            except (ValueError, TypeError, AttributeError) as e:
                self.skip(f"node {_name(n)}", e)
        ordered = [out[k] for k in sorted(out)]
        for i, node in enumerate(ordered):
            node.idx = i
        return ordered

    @staticmethod
    def _parse_node(n: dict, dims: R.Dims) -> tuple:
        """(allocatable vector, max pods, unschedulable, labels, taints) of a Ready node;
        ValueError on a bad quantity."""
        st = n.get("status") or {}
        alloc_rl = st.get("allocatable") or st.get("capacity") or {}
        alloc = tuple(dims.from_resource_list(alloc_rl))
        pods_q = alloc_rl.get("pods")
        max_pods = DEFAULT_MAX_PODS
        if pods_q is not None:
            max_pods = int(parse_quantity(pods_q))
        spec = n.get("spec") or {}
        taints = []
        for t in spec.get("taints") or []:
            if isinstance(t, dict) and t.get("effect") in ("NoSchedule", "NoExecute", "PreferNoSchedule"):
                taints.append((str(t.get("key", "")), str(t.get("value", "") or ""), t["effect"]))
        labels = (n.get("metadata") or {}).get("labels") or {}
        if not isinstance(labels, dict):
            labels = {}
        return (alloc, max_pods, bool(spec.get("unschedulable")), {str(k): str(v) for k, v in labels.items()},
                tuple(sorted(taints)))

    def _queues(self, queues: list[dict], dims: R.Dims) -> dict[str, QueueInfo]:
        out: dict[str, QueueInfo] = {}
        for q in queues:
            try:
                meta = q.get("metadata") or {}
                name = meta.get("name")
                if not isinstance(name, str) or not name:
                    raise ValueError("metadata.name is required")
                spec = q.get("spec") or {}
                weight = spec.get("weight", 1)
                weight = int(weight) if isinstance(weight, (int, float)) and not isinstance(weight, bool) else 1
                cap = None
                if spec.get("capability"):
                    # Missing or <= 0 cpu/memory means unlimited; a missing
                    # scalar is unlimited, a listed one is a hard cap.
                    cap = dims.from_resource_list(spec["capability"], missing=R.INF)
                    for i in (0, 1):
                        if cap[i] <= 0:
                            cap[i] = R.INF
                guarantee = dims.from_resource_list((spec.get("guarantee") or {}).get("resource"))
                state = ((q.get("status") or {}).get("state")) or QUEUE_OPEN
                prio = spec.get("priority", 0)
                out[name] = QueueInfo(
                    name=name, uid=str(meta.get("uid") or name), queue=q, weight=max(weight, 1),
                    capability=cap, guarantee=guarantee,
                    reclaimable=spec.get("reclaimable") is not False,
                    parent=str(spec.get("parent") or ""),
                    priority=int(prio) if isinstance(prio, int) and not isinstance(prio, bool) else 0,
                    state=str(state), creation=_timestamp(meta),
                )
            except (ValueError, TypeError, AttributeError) as e:
                self.skip(f"queue {_name(q)}", e)
        return out

    def _jobs(self, podgroups: list[dict], queues: dict[str, QueueInfo], dims: R.Dims) -> dict[tuple[str, str], JobInfo]:
        out: dict[tuple[str, str], JobInfo] = {}
        for pg in podgroups:
            try:
                meta = pg.get("metadata") or {}
                name, ns = meta.get("name"), meta.get("namespace") or "default"
                if not isinstance(name, str) or not name:
                    raise ValueError("metadata.name is required")
                if not isinstance(ns, str):
                    raise ValueError("metadata.namespace: must be a string")
                spec = pg.get("spec") or {}
                queue = spec.get("queue") or self.default_queue
                if queue not in queues:
                    continue  # Volcano: "Queue ... does not exist, ignore it"
                mm = spec.get("minMember", 0) or 0
                if not isinstance(mm, int) or isinstance(mm, bool) or mm < 0:
                    raise ValueError(f"spec.minMember: must be a non-negative integer, got {mm!r}")
                mtm_raw = spec.get("minTaskMember") or {}
                mtm = {str(k): int(v) for k, v in mtm_raw.items() if isinstance(v, int) and not isinstance(v, bool)}
                min_res = None
                mask: tuple[bool, ...] = (False,) * dims.n
                if spec.get("minResources") is not None:
                    min_res = dims.from_resource_list(spec["minResources"])
                    mask = dims.mask(spec["minResources"])
                pcn = spec.get("priorityClassName") or ""
                status = pg.get("status") or {}
                conds = [dict(c) for c in (status.get("conditions") or []) if isinstance(c, dict)]
                out[(ns, name)] = JobInfo(
                    uid=str(meta.get("uid") or f"{ns}/{name}"), namespace=ns, name=name, queue=queue,
                    podgroup=pg, min_available=mm, task_min_available=mtm,
                    task_min_available_total=sum(mtm.values()), min_resources=min_res,
                    min_resources_mask=mask, priority=int(self.priority_classes.get(pcn, 0)),
                    creation=_timestamp(meta), phase=str(status.get("phase") or ""),
                    conditions=conds, allocated=dims.zero(),
                )
            except (ValueError, TypeError, AttributeError) as e:
                self.skip(f"podgroup {_name(pg)}", e)
        return out

    def _pods(self, pods: list[dict], dims: R.Dims, jobs: dict[tuple[str, str], JobInfo],
              nodes: dict[str, NodeInfo]) -> None:
        spec_keys = self.spec_keys
        for p in pods:
            try:
                meta = p.get("metadata") or {}
                spec = p.get("spec") or {}
                name, ns = meta.get("name"), meta.get("namespace") or "default"
                if not isinstance(name, str) or not name:
                    raise ValueError("metadata.name is required")
                if not isinstance(ns, str):
                    raise ValueError("metadata.namespace: must be a string")
                status = task_status_of(p)
                node_name = spec.get("nodeName") or ""
                ours = serves(self.scheduler_names, spec.get("schedulerName"))
                group = (meta.get("annotations") or {}).get(ANNOTATION_GROUP_NAME)
                job = jobs.get((ns, group)) if ours and group else None
                on_node = nodes.get(node_name) if node_name else None
                if job is None and (on_node is None or status in COMPLETED_STATUS):
                    continue
                uid = str(meta.get("uid") or f"{ns}/{name}")
                ck = (uid, meta.get("generation"))
                parsed = self.pod_cache.get(ck) if self.pod_cache is not None else None
                if parsed is None:
                    _check_constraints(spec)
                    resreq_d, init_d, (nzc, nzm) = R.pod_resources(spec)
                    parsed = (resreq_d, init_d, nzc, nzm, _constraints_key(spec), _uses_match_fields(spec))
                    if self.pod_cache is not None:
                        self.pod_cache.put(ck, parsed)
                resreq_d, init_d, nzc, nzm, constraints, per_node = parsed
                resreq = dims.vec(resreq_d)
                init = dims.vec(init_d)
                ann = meta.get("annotations") or {}
                labels = meta.get("labels") or {}
                role = str(ann.get(ANNOTATION_TASK_SPEC) or labels.get(ANNOTATION_TASK_SPEC) or "")
                prio = spec.get("priority") or 0
                if ANNOTATION_TASK_PRIORITY in ann:
                    try:
                        prio = int(ann[ANNOTATION_TASK_PRIORITY])
                    except (TypeError, ValueError):
                        pass
                sk = spec_keys.setdefault((tuple(init), tuple(resreq), nzc, nzm, constraints), len(spec_keys))
                t = TaskInfo(
                    uid=uid, namespace=ns, name=name, job=job, pod=p,  # type: ignore[arg-type]
                    role=role, priority=int(prio) if isinstance(prio, int) else 0, status=status,
                    node_name=node_name, resreq=resreq, init_resreq=init, nz_cpu=nzc, nz_mem=nzm,
                    best_effort=R.is_empty(init), index=_pod_index(name), creation=_timestamp(meta),
                    spec_key=sk, per_node=per_node,
                )
                if on_node is not None and status not in COMPLETED_STATUS:
                    on_node.add_task(t, status)
                if job is not None:
                    job.add_task(t)
            except (ValueError, TypeError, AttributeError) as e:
                self.skip(f"pod {_name(p)}", e)


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((str(k), _freeze(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def _check_constraints(spec: Mapping[str, Any]) -> None:
    """The shapes the predicates and scores rely on; ValueError names the field."""
    def need(cond: bool, path: str, what: str) -> None:
        if not cond:
            raise ValueError(f"spec.{path}: must be {what}")

    sel = spec.get("nodeSelector")
    need(sel is None or isinstance(sel, dict), "nodeSelector", "an object")
    tol = spec.get("tolerations")
    need(tol is None or (isinstance(tol, list) and all(isinstance(t, dict) for t in tol)), "tolerations",
         "a list of objects")
    aff = spec.get("affinity")
    need(aff is None or isinstance(aff, dict), "affinity", "an object")
    na = (aff or {}).get("nodeAffinity")
    need(na is None or isinstance(na, dict), "affinity.nodeAffinity", "an object")
    na = na or {}
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    need(req is None or isinstance(req, dict), "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
         "an object")
    terms = (req or {}).get("nodeSelectorTerms") or []
    need(isinstance(terms, list) and all(isinstance(t, dict) for t in terms),
         "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", "a list of objects")
    pref = na.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    need(isinstance(pref, list) and all(isinstance(p, dict) and isinstance(p.get("preference") or {}, dict)
                                        for p in pref),
         "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution", "a list of {weight, preference}")
    for t in list(terms) + [p.get("preference") or {} for p in pref]:
        for f in ("matchExpressions", "matchFields"):
            v = t.get(f) or []
            need(isinstance(v, list) and all(isinstance(e, dict) for e in v), f"affinity.nodeAffinity...{f}",
                 "a list of objects")


def _constraints_key(spec: Mapping[str, Any]) -> Any:
    """What the node predicates read from a pod: equal keys, equal verdicts."""
    aff = (spec.get("affinity") or {}).get("nodeAffinity")
    return (_freeze(spec.get("nodeSelector") or {}), _freeze(aff or {}), _freeze(spec.get("tolerations") or []))


def _uses_match_fields(spec: Mapping[str, Any]) -> bool:
    aff = ((spec.get("affinity") or {}).get("nodeAffinity") or {})
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in req.get("nodeSelectorTerms") or []:
        if (term or {}).get("matchFields"):
            return True
    return False


def fullness(node: NodeInfo) -> float:
    """cpu + memory utilisation: the order in which the node index offers nodes."""
    f = 0.0
    for i in (0, 1):
        a = node.allocatable[i]
        if a > 0:
            f += node.used[i] / a
    return f if not math.isnan(f) else 0.0
