"""The scheduler's incremental snapshot (Volcano's SchedulerCache).

``Snapshot.build`` parses every node, PodGroup and pod for every session.
``SnapshotCache`` is fed the objects as the informers see them
(``put``/``delete``) and keeps, per job, what it parsed last time:

- a job a session cannot change (``job_updater.is_settled``: nothing waits for
  a node, its gang is ready and its status written) is kept as sums only:
  its queue's allocated/request/inqueue/elastic and phase count
  (``Snapshot.settled``) and its tasks' share of each node;
- every other job is rebuilt from its objects for each session, exactly as
  ``Snapshot.build`` does, since sessions change jobs in place.

A session therefore costs what its waiting jobs and the nodes cost, not what
the cluster holds. Only a job whose PodGroup or pods changed is re-parsed.
Sums are recomputed (in a fixed order) for the queues and nodes whose members
changed, so results do not depend on the order of events. The sessions' own
results are unchanged: ``tests/unit/test_scheduler_cache.py`` runs random
clusters through both paths and compares every decision.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from phalanx.api.constants import ANNOTATION_GROUP_NAME, DEFAULT_QUEUE, SCHEDULER_NAME
from phalanx.objects.meta import Obj, serves
from phalanx.scheduler import resources as R
from phalanx.scheduler.builder import (
    ObjectCache,
    SnapshotBuilder,
    TaskAccount,
    node_resource_names,
    pod_resource_names,
    podgroup_resource_names,
    queue_resource_names,
)
from phalanx.scheduler.info import (
    PIPELINED,
    RELEASING,
    JobInfo,
    NodeInfo,
    QueueInfo,
    QueueTotals,
    TaskInfo,
)
from phalanx.scheduler.job_updater import is_settled
from phalanx.scheduler.snapshot import Snapshot

RecordKey = tuple[str, str, str]  # ("job", namespace, podgroup) or ("pod", namespace, pod)
ObjKey = tuple[str | None, str]
KINDS = ("Node", "Queue", "PodGroup", "Pod")


@dataclass(slots=True)
class _Share:
    """One task's accounting on one node (NodeInfo.add_task's inputs)."""
    status: str
    resreq: list[float]
    nz_cpu: float
    nz_mem: float


@dataclass(slots=True)
class _Record:
    """What the cache knows of one job (or of one pod outside any job)."""
    active: bool
    queue: str = ""            # a settled job's queue ("" for pods outside jobs)
    phase: str = ""
    priority: int = 0
    allocated: list[float] = field(default_factory=list)
    request: list[float] = field(default_factory=list)
    inqueue: list[float] = field(default_factory=list)
    elastic: list[float] = field(default_factory=list)
    shares: list[tuple[str, _Share]] = field(default_factory=list)  # (node name, share), for settled records


@dataclass(slots=True)
class _NodeBase:
    used: list[float]
    releasing: list[float]
    pipelined: list[float]
    nz_cpu: float = 0.0
    nz_mem: float = 0.0
    ntasks: int = 0


class _ShareRecorder(dict[str, "_NodeProbe"]):
    """Stands in for the node map while a record is parsed: every node name
    answers, and the tasks ``SnapshotBuilder.parse_pods`` would add to it are kept."""

    def __init__(self) -> None:
        super().__init__()
        self.shares: list[tuple[str, _Share]] = []

    def get(self, name: Any, default: Any = None) -> Any:
        return _NodeProbe(self, name) if name else default


class _NodeProbe:
    __slots__ = ("recorder", "name")

    def __init__(self, recorder: _ShareRecorder, name: str) -> None:
        self.recorder = recorder
        self.name = name

    def add_task(self, t: TaskInfo, status: str) -> None:
        self.recorder.shares.append((self.name, _Share(status, list(t.resreq), t.nz_cpu, t.nz_mem)))


def _meta(obj: Any) -> dict[str, Any]:
    m = obj.get("metadata") if isinstance(obj, dict) else None
    return m if isinstance(m, dict) else {}


def _names_of(kind: str, obj: Obj) -> tuple[str, ...]:
    fn = {"Node": node_resource_names, "Pod": pod_resource_names, "PodGroup": podgroup_resource_names,
          "Queue": queue_resource_names}[kind]
    try:
        return tuple(fn(obj))
    except (TypeError, AttributeError, ValueError):
        return ()


class SnapshotCache:
    """``put``/``delete`` objects as they change; ``build()`` a Snapshot per session."""

    def __init__(self, priority_classes: dict[str, int] | None = None, default_queue: str = DEFAULT_QUEUE,
                 scheduler_names: frozenset[str] = frozenset({SCHEDULER_NAME}),
                 object_cache: ObjectCache | None = None) -> None:
        self.priority_classes = dict(priority_classes or {})
        self.default_queue = default_queue
        self.scheduler_names = frozenset(scheduler_names)
        self.object_cache = object_cache if object_cache is not None else ObjectCache()
        self._objs: dict[str, dict[ObjKey, Obj]] = {k: {} for k in KINDS}
        self._owner: dict[ObjKey, RecordKey] = {}                 # pod -> its record
        self._members: dict[RecordKey, set[ObjKey]] = {}          # record -> its pods
        self._records: dict[RecordKey, _Record] = {}
        self._dirty: set[RecordKey] = set()
        self._names: dict[tuple[str, ObjKey], tuple[str, ...]] = {}
        self._name_counts: Counter[str] = Counter()
        self._dims: R.Dims | None = None
        self._queue_names: frozenset[str] = frozenset()
        self._node_shares: dict[str, dict[RecordKey, list[_Share]]] = {}
        self._node_base: dict[str, _NodeBase] = {}
        # The Ready nodes, kept between sessions: a session (or the active jobs'
        # tasks) changes a node's accounting in place, marking it ``touched``;
        # the next build puts such nodes back to their clean state (base only).
        self._node_list: list[NodeInfo] | None = None
        self._node_clean: dict[str, tuple[Any, ...]] = {}
        self._base_changed: set[str] = set()
        self._queue_members: dict[str, set[RecordKey]] = {}
        self._queue_totals: dict[str, QueueTotals] = {}
        self._dirty_queues: set[str] = set()
        self.rebuilt = 0  # records re-parsed (for tests and profiles)

    # ---------------------------------------------------------------- feeding
    def put(self, kind: str, obj: Obj) -> None:
        """The object as the scheduler should see it now (added or changed)."""
        key = self._key(kind, obj)
        objs = self._objs[kind]
        old = objs.get(key)
        if old is obj:
            return
        objs[key] = obj
        self._count_names(kind, key, obj)
        self._changed(kind, key, obj)

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        key: ObjKey = ((namespace or "default") if kind in ("Pod", "PodGroup") else None, name)
        if self._objs[kind].pop(key, None) is None:
            return
        self._count_names(kind, key, None)
        self._changed(kind, key, None)

    def set_priority_classes(self, values: Mapping[str, int]) -> bool:
        """New PriorityClass values (key "": the globalDefault's); every job is parsed again if they
        changed. Returns whether they did."""
        values = dict(values)
        if values == self.priority_classes:
            return False
        self.priority_classes = values
        self._dirty.update(self._records)
        self._dirty.update(("job", ns or "default", n) for ns, n in self._objs["PodGroup"])
        return True

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        return self._objs[kind].get(((namespace or "default") if kind in ("Pod", "PodGroup") else None, name))

    @staticmethod
    def _key(kind: str, obj: Obj) -> ObjKey:
        meta = _meta(obj)
        name = meta.get("name")
        name = name if isinstance(name, str) else repr(name)
        if kind in ("Pod", "PodGroup"):
            ns = meta.get("namespace") or "default"
            return (ns if isinstance(ns, str) else repr(ns), name)
        return (None, name)

    def _count_names(self, kind: str, key: ObjKey, obj: Obj | None) -> None:
        nk = (kind, key)
        old = self._names.pop(nk, ())
        new = _names_of(kind, obj) if obj is not None else ()
        if old == new:
            if new:
                self._names[nk] = new
            return
        self._name_counts.subtract(old)
        self._name_counts.update(new)
        if new:
            self._names[nk] = new

    def _changed(self, kind: str, key: ObjKey, obj: Obj | None) -> None:
        if kind == "PodGroup":
            self._dirty.add(("job", key[0] or "default", key[1]))
        elif kind == "Pod":
            owner = self._pod_owner(key, obj) if obj is not None else None
            old = self._owner.get(key)
            if old is not None and old != owner:
                members = self._members.get(old)
                if members is not None:
                    members.discard(key)
                    if not members:
                        del self._members[old]
                self._dirty.add(old)
            if owner is None:
                self._owner.pop(key, None)
            else:
                self._owner[key] = owner
                self._members.setdefault(owner, set()).add(key)
                self._dirty.add(owner)
        elif kind == "Node":
            self._node_list = None  # parsed again at the next build
        # Queues are read afresh by every session; a queue's coming or going
        # changes which jobs exist (checked in build).

    def _pod_owner(self, key: ObjKey, pod: Obj) -> RecordKey:
        ns, name = key[0] or "default", key[1]
        try:
            spec = pod.get("spec") or {}
            ann = _meta(pod).get("annotations") or {}
            group = ann.get(ANNOTATION_GROUP_NAME) if isinstance(ann, dict) else None
            if isinstance(spec, dict) and serves(self.scheduler_names, spec.get("schedulerName")) and group \
                    and isinstance(group, str):
                return ("job", ns, group)
        except AttributeError:
            pass
        return ("pod", ns, name)

    # ---------------------------------------------------------------- build
    def build(self) -> Snapshot:
        """A Snapshot for one session (which may change it freely)."""
        builder = SnapshotBuilder(self.priority_classes, self.default_queue, self.scheduler_names, self.object_cache)
        dims = R.Dims(n for n, c in self._name_counts.items() if c > 0 and R.is_scheduling_resource(n))
        if self._dims is None or dims.names != self._dims.names:
            self._reset(dims)
        dims = self._dims  # type: ignore[assignment]
        queues = builder.parse_queues(builder.objects("queue", self._objs["Queue"].values()), dims)
        names = frozenset(queues)
        if names != self._queue_names:
            self._queue_names = names
            self._dirty.update(self._members)
            self._dirty.update(("job", ns or "default", n) for ns, n in self._objs["PodGroup"])
            self._dirty.update(self._records)

        for key in sorted(self._dirty):
            self._refresh(key, builder, queues, dims)
        self._dirty.clear()

        nodes = self._nodes(builder, dims)
        node_map = {n.name: n for n in nodes}

        jobs: dict[tuple[str, str], JobInfo] = {}
        active = sorted(k for k, r in self._records.items() if r.active)
        for key in active:
            self._parse(key, builder, queues, dims, node_map, jobs)

        settled = {}
        for name in sorted(self._queue_members):
            if name in queues:
                tot = self._totals(name, dims)
                settled[name] = QueueTotals(list(tot.allocated), list(tot.request), list(tot.inqueue),
                                            list(tot.elastic), dict(tot.phases),
                                            {p: list(v) for p, v in tot.priorities.items()})

        def load_settled() -> list[JobInfo]:
            """The settled jobs, parsed (a session that looks for preemption victims needs their
            tasks); their tasks are already counted on the nodes, so they are parsed against a
            stand-in node map."""
            loaded: dict[tuple[str, str], JobInfo] = {}
            for name in sorted(settled):
                for key in sorted(self._queue_members.get(name, ())):
                    self._parse(key, builder, queues, dims, _ShareRecorder(), loaded)
            return [loaded[k] for k in sorted(loaded)]

        return Snapshot(dims=dims, nodes=nodes, queues=queues, jobs=jobs, skipped=builder.skipped, settled=settled,
                        load_settled=load_settled)

    def _nodes(self, builder: SnapshotBuilder, dims: R.Dims) -> list[NodeInfo]:
        """The Ready nodes with their settled tasks counted: parsed again when a
        node changed, else the kept ones, each put back to its clean state if a
        session or an active task changed it or its settled tasks changed."""
        if self._node_list is None:
            nodes = builder.parse_nodes(builder.objects("node", self._objs["Node"].values()), dims)
            self._node_clean.clear()
            for n in nodes:
                self._apply_base(n, dims)
                self._keep_clean(n)
            self._node_list = nodes
            self._base_changed.clear()
            return nodes
        changed = self._base_changed
        for n in self._node_list:
            if n.name in changed:
                n.used[:] = dims.zero()
                n.idle[:] = n.allocatable
                n.releasing[:] = dims.zero()
                n.pipelined[:] = dims.zero()
                n.nz_cpu = n.nz_mem = 0.0
                n.ntasks = 0
                self._apply_base(n, dims)
                self._keep_clean(n)
            elif n.touched:
                used, idle, releasing, pipelined, n.nz_cpu, n.nz_mem, n.ntasks = self._node_clean[n.name]
                n.used[:], n.idle[:], n.releasing[:], n.pipelined[:] = used, idle, releasing, pipelined
            n.touched = False
        changed.clear()
        return self._node_list

    def _keep_clean(self, n: NodeInfo) -> None:
        n.touched = False
        self._node_clean[n.name] = (tuple(n.used), tuple(n.idle), tuple(n.releasing), tuple(n.pipelined),
                                    n.nz_cpu, n.nz_mem, n.ntasks)

    def _reset(self, dims: R.Dims) -> None:
        """New resource dimensions: every parsed vector is void."""
        self._dims = dims
        self._node_list = None
        self._queue_totals.clear()
        self._dirty.update(self._members)
        self._dirty.update(self._records)
        self._dirty.update(("job", ns or "default", n) for ns, n in self._objs["PodGroup"])

    def _parse(self, key: RecordKey, builder: SnapshotBuilder, queues: dict[str, QueueInfo], dims: R.Dims,
               node_map: Mapping[str, TaskAccount], jobs: dict[tuple[str, str], JobInfo]) -> None:
        """Parse one record's objects as Snapshot.build would, into ``jobs`` and ``node_map``."""
        kind, ns, name = key
        found: dict[tuple[str, str], JobInfo] = {}
        if kind == "job":
            pg = self._objs["PodGroup"].get((ns, name))
            if pg is not None:
                found = builder.parse_jobs(builder.objects("podgroup", [pg]), queues, dims)
        pods = [self._objs["Pod"][k] for k in sorted(self._members.get(key, ()))]
        builder.parse_pods(builder.objects("pod", pods), dims, found, node_map)
        jobs.update(found)

    def _refresh(self, key: RecordKey, builder: SnapshotBuilder, queues: dict[str, QueueInfo], dims: R.Dims) -> None:
        self._forget(key)
        if key not in self._members and (key[0] != "job" or (key[1], key[2]) not in self._objs["PodGroup"]):
            return
        self.rebuilt += 1
        recorder = _ShareRecorder()
        jobs: dict[tuple[str, str], JobInfo] = {}
        self._parse(key, builder, queues, dims, recorder, jobs)
        job = jobs.get((key[1], key[2])) if key[0] == "job" else None
        if job is not None:
            settled = is_settled(job)
            rec = self._settled_record(job, dims) if settled else _Record(active=True)
            job.release()
            if not settled:
                self._records[key] = rec
                return
        else:
            rec = _Record(active=False)  # pods outside any job of ours: they only occupy nodes
        rec.shares = recorder.shares
        self._records[key] = rec
        for node, share in rec.shares:
            self._node_shares.setdefault(node, {}).setdefault(key, []).append(share)
            self._node_base.pop(node, None)
            self._base_changed.add(node)
        if rec.queue:
            self._queue_members.setdefault(rec.queue, set()).add(key)
            self._count_in_totals(rec, 1)

    @staticmethod
    def _settled_record(job: JobInfo, dims: R.Dims) -> _Record:
        allocated, request, inqueue, elastic = job.totals(dims)
        return _Record(active=False, queue=job.queue, phase=job.phase, priority=job.priority, allocated=allocated,
                       request=request, inqueue=inqueue, elastic=elastic)

    def _forget(self, key: RecordKey) -> None:
        rec = self._records.pop(key, None)
        if rec is None:
            return
        for node, _ in rec.shares:
            per = self._node_shares.get(node)
            if per is not None and per.pop(key, None) is not None:
                if not per:
                    del self._node_shares[node]
                self._node_base.pop(node, None)
                self._base_changed.add(node)
        if rec.queue:
            members = self._queue_members.get(rec.queue)
            if members is not None:
                members.discard(key)
                if not members:
                    del self._queue_members[rec.queue]
            self._count_in_totals(rec, -1)

    # ---------------------------------------------------------------- sums
    def _apply_base(self, node: NodeInfo, dims: R.Dims) -> None:
        base = self._node_base.get(node.name)
        if base is None:
            shares = self._node_shares.get(node.name)
            if not shares:
                return
            base = _NodeBase(dims.zero(), dims.zero(), dims.zero())
            for key in sorted(shares):
                for s in shares[key]:
                    if s.status == PIPELINED:
                        R.add(base.pipelined, s.resreq)
                    else:
                        R.add(base.used, s.resreq)
                        if s.status == RELEASING:
                            R.add(base.releasing, s.resreq)
                    base.nz_cpu += s.nz_cpu
                    base.nz_mem += s.nz_mem
                    base.ntasks += 1
            self._node_base[node.name] = base
        R.add(node.used, base.used)
        R.sub(node.idle, base.used)
        R.add(node.releasing, base.releasing)
        R.add(node.pipelined, base.pipelined)
        node.nz_cpu += base.nz_cpu
        node.nz_mem += base.nz_mem
        node.ntasks += base.ntasks

    def _count_in_totals(self, rec: _Record, sign: int) -> None:
        """Add (``sign`` 1) or take out (-1) a settled record in its queue's kept totals. Exact
        while the vectors hold whole numbers (millicores, bytes, milli-units: sums stay below 2**53);
        any other value drops the totals, summed again in order when next needed."""
        tot = self._queue_totals.get(rec.queue)
        if tot is None:
            return
        vecs = (rec.allocated, rec.request, rec.inqueue, rec.elastic)
        if not all(x.is_integer() for v in vecs for x in v):
            del self._queue_totals[rec.queue]
            return
        step = R.add if sign > 0 else R.sub
        for total, v in zip((tot.allocated, tot.request, tot.inqueue, tot.elastic), vecs):
            step(total, v)
        n = tot.phases.get(rec.phase, 0) + sign
        if n:
            tot.phases[rec.phase] = n
        else:
            tot.phases.pop(rec.phase, None)
        if not R.is_empty(rec.allocated):
            held = step(tot.priorities.setdefault(rec.priority, [0.0] * len(rec.allocated)), rec.allocated)
            if not any(held):
                del tot.priorities[rec.priority]

    def _totals(self, queue: str, dims: R.Dims) -> QueueTotals:
        tot = self._queue_totals.get(queue)
        if tot is None:
            tot = QueueTotals.zero(dims)
            for key in sorted(self._queue_members.get(queue, ())):
                rec = self._records[key]
                R.add(tot.allocated, rec.allocated)
                R.add(tot.request, rec.request)
                R.add(tot.inqueue, rec.inqueue)
                R.add(tot.elastic, rec.elastic)
                tot.phases[rec.phase] = tot.phases.get(rec.phase, 0) + 1
                if not R.is_empty(rec.allocated):
                    R.add(tot.priorities.setdefault(rec.priority, dims.zero()), rec.allocated)
            self._queue_totals[queue] = tot
        return tot

    # ---------------------------------------------------------------- introspection
    def counts(self) -> dict[str, int]:
        """How many records are active (rebuilt per session) and settled."""
        active = sum(1 for r in self._records.values() if r.active)
        return {"active": active, "settled": len(self._records) - active, "pods": len(self._objs["Pod"]),
                "nodes": len(self._objs["Node"])}


def feed(cache: SnapshotCache, nodes: Iterable[Obj] = (), queues: Iterable[Obj] = (),
         podgroups: Iterable[Obj] = (), pods: Iterable[Obj] = ()) -> SnapshotCache:
    """Put lists of objects (tests, benchmarks)."""
    for kind, objs in (("Node", nodes), ("Queue", queues), ("PodGroup", podgroups), ("Pod", pods)):
        for o in objs:
            cache.put(kind, o)
    return cache
