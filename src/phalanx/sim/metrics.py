"""What a simulation measures: per-job timings and the cluster over time.

Watches jobs, pods and PodGroups like any other component and notes, at the
virtual instant each change is delivered (the same instant it was written):

- per job: submitted, Running condition, all its pods Running at once,
  finished (Succeeded/Failed condition), restarts, final state, the sequence
  of job states (last condition type, as ``get -w`` shows it);
- the cluster: requests of the pods bound to a node and not finished, per
  resource, and the PodGroups waiting (phase Pending/Inqueue) per queue;
- per queue: the cpu (and GPUs) its pods hold (a pod's queue is its
  PodGroup's), and its deserved share as the scheduler last annotated the
  Queue (``phalanx.dev/deserved``; absent: 0);
- evictions: pods that got the scheduler's DisruptionTarget condition, told
  apart by its message (``volcano: preempting`` / ``volcano: reclaiming``),
  each pod counted once.
  Samples are taken on every change; several changes at one instant make one
  sample (its final state), so the timeline does not depend on the order in
  which simultaneous events are delivered.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from phalanx.api.constants import (
    ANNOTATION_DESERVED,
    ANNOTATION_GROUP_NAME,
    ANNOTATION_QUEUE_NAME,
    DEFAULT_QUEUE,
    ROOT_QUEUE,
)
from phalanx.api.registry import JOB_KINDS
from phalanx.client.interface import Client
from phalanx.objects.quantity import parse_quantity, pod_requests
from phalanx.runtime.informer import SharedInformer, SharedInformers
from phalanx.sim.arrivals import replica_specs

Obj = dict[str, Any]
RESOURCES = ("cpu", "memory", "gpu")
_GPU = "nvidia.com/gpu"
WAITING_PHASES = ("", "Pending", "Inqueue")
TERMINAL = ("Succeeded", "Failed")
DISRUPTION_TARGET = "DisruptionTarget"
EVICTION_KINDS = {"volcano: preempting": "preempted", "volcano: reclaiming": "reclaimed"}
QUEUE_SERIES = ("queue_cpu", "queue_gpu", "deserved_cpu", "deserved_gpu")


@dataclass
class JobRecord:
    """One job's life in virtual seconds (None: did not happen)."""

    namespace: str
    name: str
    kind: str
    queue: str
    replicas: int
    cpu: float
    memory: float
    gpu: float
    submitted: float
    uid: str = ""
    running: float | None = None
    all_running: float | None = None
    finished: float | None = None
    state: str = ""
    reason: str = ""
    restarts: int = 0
    states: list[tuple[float, str]] = field(default_factory=list)
    deleted: float | None = None

    @property
    def wait(self) -> float | None:
        return None if self.running is None else self.running - self.submitted

    @property
    def wait_all(self) -> float | None:
        return None if self.all_running is None else self.all_running - self.submitted

    @property
    def run(self) -> float | None:
        if self.finished is None:
            return None
        return self.finished - (self.running if self.running is not None else self.finished)

    @property
    def turnaround(self) -> float | None:
        return None if self.finished is None else self.finished - self.submitted

    @property
    def final_state(self) -> str:
        if self.state in TERMINAL:
            return self.state
        return "Unfinished"


@dataclass
class Timeline:
    """Step functions sampled on change: t[i] -> values from t[i] until t[i+1]."""

    t: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    memory: list[float] = field(default_factory=list)
    gpu: list[float] = field(default_factory=list)
    running_pods: list[int] = field(default_factory=list)
    waiting: dict[str, list[int]] = field(default_factory=dict)  # queue -> waiting PodGroups
    queue_cpu: dict[str, list[float]] = field(default_factory=dict)     # queue -> cpu its pods hold
    queue_gpu: dict[str, list[float]] = field(default_factory=dict)     # queue -> GPUs its pods hold
    deserved_cpu: dict[str, list[float]] = field(default_factory=dict)  # queue -> its deserved cpu
    deserved_gpu: dict[str, list[float]] = field(default_factory=dict)  # queue -> its deserved GPUs
    evictions: list[int] = field(default_factory=list)                  # pods evicted so far

    def queues(self) -> list[str]:
        """The queues that held or deserved anything at some point, sorted."""
        return sorted({q for name in QUEUE_SERIES for q, v in getattr(self, name).items() if any(v)})


def eviction_of(pod: Obj) -> str | None:
    """"preempted" / "reclaimed" when the scheduler marked the pod for eviction, else None."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == DISRUPTION_TARGET and c.get("status") == "True":
            message = str(c.get("message") or "")
            for prefix, kind in EVICTION_KINDS.items():
                if message.startswith(prefix):
                    return kind
    return None


def _slim_pod(pod: Obj) -> Obj:
    meta = pod.get("metadata") or {}
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("controller")]
    anns = meta.get("annotations") or {}
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                         "owner": refs[0].get("uid") if refs else None,
                         "group": anns.get(ANNOTATION_GROUP_NAME), "queue": anns.get(ANNOTATION_QUEUE_NAME)},
            "spec": {"nodeName": (pod.get("spec") or {}).get("nodeName")},
            "status": {"phase": (pod.get("status") or {}).get("phase")},
            "eviction": eviction_of(pod),
            "_spec": pod.get("spec") or {}}


def _slim_podgroup(pg: Obj) -> Obj:
    meta = pg.get("metadata") or {}
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
            "queue": (pg.get("spec") or {}).get("queue") or DEFAULT_QUEUE,
            "phase": (pg.get("status") or {}).get("phase") or ""}


def deserved_of(queue: Obj) -> tuple[float, float]:
    """(cpu, GPUs) of the Queue's ``phalanx.dev/deserved`` annotation (JSON resource
    list); absent or unreadable: 0."""
    raw = ((queue.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_DESERVED)
    try:
        rl = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return (0.0, 0.0)
    if not isinstance(rl, dict):
        return (0.0, 0.0)
    out = []
    for key in ("cpu", _GPU):
        try:
            out.append(parse_quantity(rl.get(key, 0)))
        except (ValueError, TypeError):
            out.append(0.0)
    return (out[0], out[1])


def _slim_queue(q: Obj) -> Obj:
    return {"metadata": {"name": (q.get("metadata") or {}).get("name")}, "deserved": deserved_of(q)}


def requests(spec: Obj) -> tuple[float, float, float]:
    try:
        r = pod_requests(spec)
    except ValueError:
        return (0.0, 0.0, 0.0)
    return (r.get("cpu", 0.0), r.get("memory", 0.0), r.get(_GPU, 0.0))


def job_shape(job: Obj) -> tuple[int, float, float, float, str]:
    """(pods, cpu, memory, gpus, queue) a job asks for."""
    n, cpu, mem, gpu = 0, 0.0, 0.0, 0.0
    for rspec in replica_specs(job).values():
        if not isinstance(rspec, dict):
            continue
        k = rspec.get("replicas")
        k = k if isinstance(k, int) and not isinstance(k, bool) and k >= 0 else 1
        tspec = (rspec.get("template") or {}).get("spec") or {}
        c, m, g = requests(tspec if isinstance(tspec, dict) else {})
        n += k
        cpu += k * c
        mem += k * m
        gpu += k * g
    sp = ((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy") or {}
    return n, cpu, mem, gpu, (sp.get("queue") if isinstance(sp, dict) else None) or DEFAULT_QUEUE


def _job_state(job: Obj) -> str:
    conds = (job.get("status") or {}).get("conditions") or []
    return conds[-1].get("type", "") if conds and isinstance(conds[-1], dict) else ""


class Metrics:
    """Collects the measurements; ``now()`` gives the virtual time in seconds."""

    def __init__(self, client: Client, now: Callable[[], float], capacity: tuple[float, float, float],
                 on_job_done: Callable[[JobRecord], None] | None = None,
                 informers: SharedInformers | None = None) -> None:
        self.client = client
        self.now = now
        self.capacity = capacity
        self.on_job_done = on_job_done
        self.jobs: dict[tuple[str, str, str], JobRecord] = {}   # (kind, ns, name) -> current record
        self.records: list[JobRecord] = []                       # every job, in submission order
        self._by_uid: dict[str, JobRecord] = {}
        self._alloc = [0.0, 0.0, 0.0]
        self._pods_running = 0
        self._pod_req: dict[str, tuple[float, float, float]] = {}
        self._job_running: dict[str, int] = {}  # job uid -> pods Running
        self._waiting: dict[str, int] = {}      # queue -> waiting PodGroups
        self._pg_queue: dict[tuple[str, str], str] = {}        # (ns, PodGroup) -> queue
        self._pod_queue: dict[str, str] = {}                   # pod uid -> queue its requests count in
        self._queue_alloc: dict[str, list[float]] = {}         # queue -> [cpu, gpu] held
        self._deserved: dict[str, tuple[float, float]] = {}    # queue -> (cpu, gpu) deserved
        self._evicted: dict[str, None] = {}                    # pod uids marked for eviction
        self.evictions = {"preempted": 0, "reclaimed": 0}
        self.timeline = Timeline()
        self.pods_created = 0
        shared = informers if informers is not None else SharedInformers(client)
        self.informers = [shared.informer(k) for k in JOB_KINDS]
        self.pod_informer = shared.informer("Pod", transform=_slim_pod)
        self.pg_informer = shared.informer("PodGroup", transform=_slim_podgroup)
        self.queue_informer = shared.informer("Queue", transform=_slim_queue)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        for inf in self.informers:
            inf.add_handler(self._on_job)
        self.pod_informer.add_handler(self._on_pod)
        self.pg_informer.add_handler(self._on_podgroup)
        self.queue_informer.add_handler(self._on_queue)
        for inf in self._all_informers():
            await inf.start()
        for inf in self._all_informers():
            if not await inf.wait_synced():
                return  # stopped before the caches were whole
        self._sample()

    async def stop(self) -> None:
        for inf in self._all_informers():
            await inf.stop()

    def _all_informers(self) -> list[SharedInformer]:
        return [*self.informers, self.pod_informer, self.pg_informer, self.queue_informer]

    def submitted(self, job: Obj, at: float) -> JobRecord:
        """The runner created ``job`` at ``at``."""
        meta = job.get("metadata") or {}
        n, cpu, mem, gpu, queue = job_shape(job)
        rec = JobRecord(meta.get("namespace") or "default", meta.get("name") or "", job.get("kind", ""), queue, n,
                        cpu, mem, gpu, at, uid=meta.get("uid") or "")
        self.jobs[(rec.kind, rec.namespace, rec.name)] = rec
        self.records.append(rec)
        if rec.uid:
            self._by_uid[rec.uid] = rec
        self._note_state(rec, _job_state(job))
        return rec

    def rejected(self, job: Obj, at: float, message: str) -> JobRecord:
        meta = job.get("metadata") or {}
        n, cpu, mem, gpu, queue = job_shape(job)
        rec = JobRecord(str(meta.get("namespace") or "default"), str(meta.get("name") or ""), str(job.get("kind", "")),
                        queue, n, cpu, mem, gpu, at, state="Rejected", reason=message[:200])
        self.records.append(rec)
        return rec

    # ------------------------------------------------------------------ handlers

    def _record_of(self, job: Obj) -> JobRecord | None:
        meta = job.get("metadata") or {}
        rec = self._by_uid.get(meta.get("uid") or "")
        if rec is None:
            rec = self.jobs.get((job.get("kind", ""), meta.get("namespace") or "default", meta.get("name") or ""))
            if rec is not None and rec.uid and rec.uid != meta.get("uid"):
                return None
        return rec

    def _on_job(self, type_: str, job: Obj, old: Obj | None) -> None:
        rec = self._record_of(job)
        if rec is None:
            return
        now = self.now()
        if not rec.uid and (job.get("metadata") or {}).get("uid"):
            rec.uid = job["metadata"]["uid"]
            self._by_uid[rec.uid] = rec
        if type_ == "DELETED":
            rec.deleted = now
            self._note_state(rec, "<deleted>")
            self._done(rec)
            return
        st = job.get("status") or {}
        if isinstance(st.get("restartCount"), int):
            rec.restarts = max(rec.restarts, st["restartCount"])
        for c in st.get("conditions") or []:
            if not isinstance(c, dict) or c.get("status") != "True":
                continue
            if c.get("type") == "Running" and rec.running is None and rec.finished is None:
                rec.running = now
            if c.get("type") in TERMINAL and rec.finished is None:
                rec.finished = now
                rec.state = c["type"]
                rec.reason = c.get("reason") or ""
        self._note_state(rec, _job_state(job))
        if rec.finished is not None:
            self._done(rec)

    def _done(self, rec: JobRecord) -> None:
        if self.on_job_done is not None:
            self.on_job_done(rec)

    def _note_state(self, rec: JobRecord, state: str) -> None:
        if not rec.states or rec.states[-1][1] != state:
            rec.states.append((self.now(), state))

    def _on_pod(self, type_: str, pod: Obj, old: Obj | None) -> None:
        meta = pod["metadata"]
        uid = meta.get("uid") or ""
        if type_ == "ADDED" and old is None:
            self.pods_created += 1
        req = self._pod_req.get(uid)
        if req is None:
            req = requests(pod.pop("_spec", {}) or {})
            self._pod_req[uid] = req
        else:
            pod.pop("_spec", None)
        if type_ == "DELETED":
            self._pod_req.pop(uid, None)
        before = _holds(old) if old is not None else False
        after = type_ != "DELETED" and _holds(pod)
        was_running = old is not None and (old.get("status") or {}).get("phase") == "Running"
        is_running = type_ != "DELETED" and (pod.get("status") or {}).get("phase") == "Running"
        changed = False
        kind = pod.get("eviction") if type_ != "DELETED" else None
        if kind is not None and uid not in self._evicted:
            self._evicted[uid] = None
            self.evictions[kind] += 1
            changed = True
        if before != after:
            sign = 1.0 if after else -1.0
            for i in range(3):
                self._alloc[i] += sign * req[i]
            queue: str | None
            if after:
                queue = self._pod_queue[uid] = self._queue_of(pod)
            else:
                queue = self._pod_queue.pop(uid, None)
            if queue is not None:
                held = self._queue_alloc.setdefault(queue, [0.0, 0.0])
                held[0] += sign * req[0]
                held[1] += sign * req[2]
            changed = True
        if type_ == "DELETED":
            self._evicted.pop(uid, None)
        if was_running != is_running:
            self._pods_running += 1 if is_running else -1
            changed = True
            owner = meta.get("owner") or (old or {}).get("metadata", {}).get("owner")
            if owner:
                n = self._job_running.get(owner, 0) + (1 if is_running else -1)
                if n > 0:
                    self._job_running[owner] = n
                else:
                    self._job_running.pop(owner, None)
                rec = self._by_uid.get(owner)
                if rec is not None and is_running and rec.all_running is None and n >= rec.replicas > 0:
                    rec.all_running = self.now()
        if changed:
            self._sample()

    def _queue_of(self, pod: Obj) -> str:
        """The queue a pod's requests count in: its PodGroup's, else its queue annotation's."""
        meta = pod["metadata"]
        group = meta.get("group")
        queue = self._pg_queue.get((meta.get("namespace") or "default", group)) if group else None
        return queue or meta.get("queue") or DEFAULT_QUEUE

    def _on_queue(self, type_: str, q: Obj, old: Obj | None) -> None:
        name = q["metadata"]["name"]
        if name == ROOT_QUEUE:
            return
        deserved = (0.0, 0.0) if type_ == "DELETED" else q["deserved"]
        if self._deserved.get(name, (0.0, 0.0)) != deserved:
            self._deserved[name] = deserved
            self._sample()

    def _on_podgroup(self, type_: str, pg: Obj, old: Obj | None) -> None:
        key = (pg["metadata"].get("namespace") or "default", pg["metadata"].get("name"))
        if type_ == "DELETED":
            self._pg_queue.pop(key, None)
        else:
            self._pg_queue[key] = pg["queue"]
        before = old is not None and old.get("phase") in WAITING_PHASES
        after = type_ != "DELETED" and pg.get("phase") in WAITING_PHASES
        if before == after and (old or {}).get("queue") == pg.get("queue"):
            return
        if before and old is not None:
            q = old["queue"]
            self._waiting[q] = self._waiting.get(q, 0) - 1
        if after:
            q = pg["queue"]
            self._waiting[q] = self._waiting.get(q, 0) + 1
        self._sample()

    # ------------------------------------------------------------------ timeline

    def _sample(self) -> None:
        tl = self.timeline
        now = self.now()
        if tl.t and tl.t[-1] == now:
            tl.t.pop()
            tl.cpu.pop()
            tl.memory.pop()
            tl.gpu.pop()
            tl.running_pods.pop()
            tl.evictions.pop()
            for name in ("waiting", *QUEUE_SERIES):
                for series in getattr(tl, name).values():
                    series.pop()
        tl.t.append(now)
        tl.cpu.append(max(0.0, self._alloc[0]))
        tl.memory.append(max(0.0, self._alloc[1]))
        tl.gpu.append(max(0.0, self._alloc[2]))
        tl.running_pods.append(self._pods_running)
        tl.evictions.append(sum(self.evictions.values()))
        n = len(tl.t)
        _extend(tl.waiting, {q: max(0, v) for q, v in self._waiting.items()}, n, 0)
        _extend(tl.queue_cpu, {q: max(0.0, v[0]) for q, v in self._queue_alloc.items()}, n, 0.0)
        _extend(tl.queue_gpu, {q: max(0.0, v[1]) for q, v in self._queue_alloc.items()}, n, 0.0)
        _extend(tl.deserved_cpu, {q: v[0] for q, v in self._deserved.items()}, n, 0.0)
        _extend(tl.deserved_gpu, {q: v[1] for q, v in self._deserved.items()}, n, 0.0)


def _extend(series: dict[str, list[Any]], now: dict[str, Any], n: int, zero: Any) -> None:
    """Append the value of every series at sample ``n - 1``; a new key is ``zero`` before."""
    for key in now:
        if key not in series:
            series[key] = [zero] * (n - 1)
    for key, values in series.items():
        values.append(now.get(key, zero))


def _holds(pod: Obj) -> bool:
    """A pod holds its requests once bound until it finishes (Volcano's accounting)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in TERMINAL
