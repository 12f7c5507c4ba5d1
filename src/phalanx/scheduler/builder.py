"""Parsing object dicts (Nodes, Queues, PodGroups, Pods) into the info types.

``SnapshotBuilder`` never mutates a dict and never raises on a bad object: it skips it and keeps the reason.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol

from phalanx.api.constants import ANNOTATION_GROUP_NAME, ANNOTATION_TASK_SPEC
from phalanx.objects.clock import parse_time
from phalanx.objects.meta import serves
from phalanx.objects.quantity import parse_quantity
from phalanx.scheduler import resources as R
from phalanx.scheduler.info import (
    COMPLETED_STATUS,
    QUEUE_OPEN,
    JobInfo,
    NodeInfo,
    QueueInfo,
    TaskInfo,
    task_status_of,
)

ANNOTATION_TASK_PRIORITY = "volcano.sh/task-priority"
# Volcano api/pod_info.go GetPodPreemptable: annotation, else label; anything but "false" is true.
ANNOTATION_PREEMPTABLE = "volcano.sh/preemptable"
# Volcano plugins/conformance: pods never evicted.
SYSTEM_NAMESPACE = "kube-system"
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
DEFAULT_MAX_PODS = 110  # kubelet's default maxPods, for a node that declares none


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


class ObjectCache:
    """Parsed objects kept across sessions: pod requests by (uid, generation),
    node fields by (name, resourceVersion, dimensions); ``sweep`` forgets the
    entries not used since the previous sweep."""

    def __init__(self) -> None:
        self._old: dict[Any, tuple[Any, ...]] = {}
        self._new: dict[Any, tuple[Any, ...]] = {}

    def get(self, key: Any) -> tuple[Any, ...] | None:
        v = self._new.get(key)
        if v is None:
            v = self._old.get(key)
            if v is not None:
                self._new[key] = v
        return v

    def put(self, key: Any, value: tuple[Any, ...]) -> None:
        self._new[key] = value

    def sweep(self) -> None:
        self._old, self._new = self._new, {}

    def __len__(self) -> int:
        return len(self._new) + len(self._old)


class TaskAccount(Protocol):
    """Where a pod's resources are counted: a NodeInfo, or a stand-in recording them."""

    def add_task(self, t: TaskInfo, status: str) -> None: ...


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


def node_resource_names(n: dict[str, Any]) -> list[str]:
    st = n.get("status") or {}
    return _resource_names(st.get("allocatable") or st.get("capacity"))


def pod_resource_names(p: dict[str, Any]) -> list[str]:
    return list(_container_resource_names(p.get("spec") or {}))


def podgroup_resource_names(pg: dict[str, Any]) -> list[str]:
    return _resource_names((pg.get("spec") or {}).get("minResources"))


def queue_resource_names(q: dict[str, Any]) -> list[str]:
    spec = q.get("spec") or {}
    return _resource_names(spec.get("capability")) + _resource_names((spec.get("guarantee") or {}).get("resource"))


def _container_resource_names(spec: Mapping[str, Any]) -> Iterable[str]:
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            res = (c or {}).get("resources") or {}
            yield from _resource_names(res.get("requests"))
            yield from _resource_names(res.get("limits"))
    yield from _resource_names(spec.get("overhead"))


def scheduling_dims(nodes: Iterable[dict[str, Any]], queues: Iterable[dict[str, Any]],
                    podgroups: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> R.Dims:
    """The resource dimensions of a session: every scheduling resource any of the objects names."""
    scalars: set[str] = set()
    for objs, names in ((nodes, node_resource_names), (pods, pod_resource_names),
                        (podgroups, podgroup_resource_names), (queues, queue_resource_names)):
        for o in objs:
            try:
                scalars.update(names(o))
            except (TypeError, AttributeError, ValueError):
                pass  # the object is reported when it is read for real
    return R.Dims(s for s in scalars if R.is_scheduling_resource(s))


class SnapshotBuilder:
    """Parses one session's objects; ``skipped`` lists what it could not read
    and ``spec_keys`` numbers the distinct pod specs it met."""

    def __init__(self, priority_classes: dict[str, int], default_queue: str, scheduler_names: frozenset[str],
                 object_cache: ObjectCache | None = None) -> None:
        self.object_cache = object_cache
        # PriorityClass name -> value; the key "" holds the globalDefault class's value, which a
        # PodGroup without a class or with an unknown one gets (Volcano's defaultPriority)
        self.priority_classes = priority_classes
        self.default_queue = default_queue
        self.scheduler_names = scheduler_names
        self.skipped: list[str] = []
        # tasks with equal keys share predicate/score verdicts: one numbering per session
        self.spec_keys: dict[Any, int] = {}

    def skip(self, what: str, why: Any) -> None:
        self.skipped.append(f"{what}: {why}")

    def objects(self, kind: str, objs: Iterable[Any] | None) -> list[dict[str, Any]]:
        """The members of ``objs`` that are object dicts; the others are skipped."""
        out = []
        for o in objs or []:
            if isinstance(o, dict) and isinstance(o.get("metadata") or {}, dict):
                out.append(o)
            else:
                self.skip(f"{kind} {_name(o)}", "not an object")
        return out

    def parse_nodes(self, nodes: list[dict[str, Any]], dims: R.Dims) -> list[NodeInfo]:
        """The Ready nodes, ordered by name (``idx`` is the position)."""
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
                parsed = self.object_cache.get(ck) if self.object_cache is not None and ck is not None else None
                if parsed is None:
                    parsed = self._parse_node(n, dims)
                    if self.object_cache is not None and ck is not None:
                        self.object_cache.put(ck, parsed)
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
    def _parse_node(n: dict[str, Any], dims: R.Dims) -> tuple[Any, ...]:
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

    def parse_queues(self, queues: list[dict[str, Any]], dims: R.Dims) -> dict[str, QueueInfo]:
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

    def parse_jobs(self, podgroups: list[dict[str, Any]], queues: Mapping[str, QueueInfo],
                   dims: R.Dims) -> dict[tuple[str, str], JobInfo]:
        """The PodGroups whose queue exists, by (namespace, name)."""
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
                    min_resources_mask=mask,
                    priority=int(self.priority_classes.get(pcn, self.priority_classes.get("", 0))),
                    creation=_timestamp(meta), phase=str(status.get("phase") or ""),
                    conditions=conds, allocated=dims.zero(),
                )
            except (ValueError, TypeError, AttributeError) as e:
                self.skip(f"podgroup {_name(pg)}", e)
        return out

    def parse_pods(self, pods: list[dict[str, Any]], dims: R.Dims, jobs: Mapping[tuple[str, str], JobInfo],
                   nodes: Mapping[str, TaskAccount]) -> None:
        """Add each pod as a task of its job (if ours) and to the node it holds
        resources on; pods of neither are left out."""
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
                parsed = self.object_cache.get(ck) if self.object_cache is not None else None
                if parsed is None:
                    _check_constraints(spec)
                    resreq_d, init_d, (nzc, nzm) = R.pod_resources(spec)
                    parsed = (resreq_d, init_d, nzc, nzm, _constraints_key(spec), _uses_match_fields(spec))
                    if self.object_cache is not None:
                        self.object_cache.put(ck, parsed)
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
                preemptable = ann.get(ANNOTATION_PREEMPTABLE, labels.get(ANNOTATION_PREEMPTABLE))
                t = TaskInfo(
                    uid=uid, namespace=ns, name=name, job=job, pod=p,  # type: ignore[arg-type]
                    role=role, priority=int(prio) if isinstance(prio, int) else 0, status=status,
                    node_name=node_name, resreq=resreq, init_resreq=init, nz_cpu=nzc, nz_mem=nzm,
                    best_effort=R.is_empty(init), index=_pod_index(name), creation=_timestamp(meta),
                    spec_key=sk, per_node=per_node,
                    preemptable=str(preemptable).strip().lower() != "false" if preemptable is not None else True,
                    may_preempt=spec.get("preemptionPolicy") != "Never",
                    critical=ns == SYSTEM_NAMESPACE or spec.get("priorityClassName") in CRITICAL_PRIORITY_CLASSES,
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
