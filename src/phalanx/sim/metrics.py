"""What a simulation measures: per-job timings and the cluster over time.

Watches jobs, pods and PodGroups like any other component and notes, at the
virtual instant each change is delivered (the same instant it was written):

- per job: submitted, Running condition, all its pods Running at once,
  finished (Succeeded/Failed condition), restarts, final state, the sequence
  of job states (last condition type, as ``get -w`` shows it);
- the cluster: requests of the pods bound to a node and not finished, per
  resource, and the PodGroups waiting (phase Pending/Inqueue) per queue.
  Samples are taken on every change; several changes at one instant make one
  sample (its final state), so the timeline does not depend on the order in
  which simultaneous events are delivered.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from phalanx.api.constants import DEFAULT_QUEUE
from phalanx.api.registry import JOB_KINDS
from phalanx.client.interface import Client
from phalanx.objects.quantity import pod_requests
from phalanx.runtime.informer import Informer
from phalanx.sim.arrivals import replica_specs

Obj = dict[str, Any]
RESOURCES = ("cpu", "memory", "gpu")
_GPU = "nvidia.com/gpu"
WAITING_PHASES = ("", "Pending", "Inqueue")
TERMINAL = ("Succeeded", "Failed")


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


def _slim_pod(pod: Obj) -> Obj:
    meta = pod.get("metadata") or {}
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("controller")]
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                         "owner": refs[0].get("uid") if refs else None},
            "spec": {"nodeName": (pod.get("spec") or {}).get("nodeName")},
            "status": {"phase": (pod.get("status") or {}).get("phase")},
            "_spec": pod.get("spec") or {}}


def _slim_podgroup(pg: Obj) -> Obj:
    meta = pg.get("metadata") or {}
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
            "queue": (pg.get("spec") or {}).get("queue") or DEFAULT_QUEUE,
            "phase": (pg.get("status") or {}).get("phase") or ""}


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
                 on_job_done: Callable[[JobRecord], None] | None = None) -> None:
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
        self.timeline = Timeline()
        self.pods_created = 0
        self.informers = [Informer(client, k) for k in JOB_KINDS]
        self.pod_informer = Informer(client, "Pod", transform=_slim_pod)
        self.pg_informer = Informer(client, "PodGroup", transform=_slim_podgroup)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        for inf in self.informers:
            inf.add_handler(self._on_job)
        self.pod_informer.add_handler(self._on_pod)
        self.pg_informer.add_handler(self._on_podgroup)
        for inf in (*self.informers, self.pod_informer, self.pg_informer):
            await inf.start()
        for inf in (*self.informers, self.pod_informer, self.pg_informer):
            await inf.wait_synced()
        self._sample()

    async def stop(self) -> None:
        for inf in (*self.informers, self.pod_informer, self.pg_informer):
            await inf.stop()

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
        if before != after:
            sign = 1.0 if after else -1.0
            for i in range(3):
                self._alloc[i] += sign * req[i]
            changed = True
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

    def _on_podgroup(self, type_: str, pg: Obj, old: Obj | None) -> None:
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
            for series in tl.waiting.values():
                series.pop()
        tl.t.append(now)
        tl.cpu.append(max(0.0, self._alloc[0]))
        tl.memory.append(max(0.0, self._alloc[1]))
        tl.gpu.append(max(0.0, self._alloc[2]))
        tl.running_pods.append(self._pods_running)
        n = len(tl.t)
        for q in self._waiting:
            if q not in tl.waiting:
                tl.waiting[q] = [0] * (n - 1)
        for q, series in tl.waiting.items():
            series.append(max(0, self._waiting.get(q, 0)))


def _holds(pod: Obj) -> bool:
    """A pod holds its requests once bound until it finishes (Volcano's accounting)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in TERMINAL
