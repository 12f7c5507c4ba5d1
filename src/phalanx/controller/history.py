"""The state-history recorder: appends every state change of a job, its PodGroup, its pod instances
and their Events to the job's history file (``store.history``), and removes the file with the job.

Append only on change: the last state of every object is kept per job (read back from the file when
a job is first seen, so a restarted control plane writes no duplicate and misses nothing it can
still see). Records are queued by the watch handlers and written by one task, in batches per job;
an I/O error is logged and the records dropped, never raised.
"""
from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from phalanx.api.columns import pod_summary
from phalanx.api.registry import JOB_KINDS
from phalanx.client.interface import Client, Obj
from phalanx.objects.clock import Clock, parse_time
from phalanx.objects.meta import controller_uid, name_of, namespace_of, uid_of
from phalanx.runtime.informer import SharedInformer, SharedInformers
from phalanx.store.history import JobHistories, JobKey, Record

log = logging.getLogger(__name__)

DELETED = "<deleted>"
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"
MAX_BATCH = 2000  # records written per job in one go (the rest wait for the next round)
ROUND_GATHER = 0.05  # seconds a round waits for more records before its one thread call
_LEADING_INT = re.compile(r"\d+")


@dataclass
class _Job:
    """What the recorder remembers of one job: the last state per object and the pods it had."""

    key: JobKey
    last: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, uid) -> signature
    pods: set[str] = field(default_factory=set)  # pod uids, deleted ones included
    podgroups: set[str] = field(default_factory=set)


def job_state(job: Obj) -> tuple[str, dict[str, Any]]:
    """The last condition's type and its reason and message ("" before the first condition)."""
    conds = (job.get("status") or {}).get("conditions") if isinstance(job.get("status"), dict) else None
    if not isinstance(conds, list) or not conds or not isinstance(conds[-1], dict):
        return "", {}
    last = conds[-1]
    return str(last.get("type") or ""), {"reason": str(last.get("reason") or ""),
                                         "message": str(last.get("message") or "")}


def pod_state(pod: Obj, now: Any) -> tuple[str, dict[str, Any]]:
    """kubectl's STATUS column, with {restarts, node, exitCode?} (the main container's last termination)."""
    _, status, restarts_text = pod_summary(pod, now)
    m = _LEADING_INT.match(restarts_text)
    detail: dict[str, Any] = {"restarts": int(m.group()) if m else 0,
                              "node": str((pod.get("spec") or {}).get("nodeName") or "")}
    code = _main_exit_code(pod)
    if code is not None:
        detail["exitCode"] = code
    return status, detail


def _main_exit_code(pod: Obj) -> int | None:
    containers = [c for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
    ann = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CONTAINER)
    main = ann if isinstance(ann, str) and ann else (containers[0].get("name") if containers else None)
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if not isinstance(cs, dict) or cs.get("name") != main:
            continue
        for where in ("state", "lastState"):
            term = (cs.get(where) or {}).get("terminated") if isinstance(cs.get(where), dict) else None
            if isinstance(term, dict) and term.get("exitCode") is not None:
                try:
                    return int(term["exitCode"])
                except (TypeError, ValueError):
                    return None
    return None


def event_count(ev: Obj) -> int:
    series = ev.get("series")
    for v in (ev.get("count"), series.get("count") if isinstance(series, dict) else None):
        if isinstance(v, int) and v > 0:
            return v
    return 1


def _event_at(ev: Obj) -> float | None:
    for k in ("lastTimestamp", "eventTime", "firstTimestamp"):
        v = ev.get(k)
        if isinstance(v, str) and v:
            try:
                t = parse_time(v)
            except ValueError:
                continue
            if t is not None:
                return t.timestamp()
    return None


def _signature(kind: str, state: str, detail: dict[str, Any]) -> str:
    """What must change for a new record: a pod's status or restart count; an event's count."""
    if kind == "Pod":
        return f"{state}|{detail.get('restarts', 0)}"
    if kind == "Event":
        return f"{state}|{detail.get('count', 1)}"
    return state


class HistoryRecorder:
    """Watches the job kinds, PodGroups, Pods and Events of every namespace; see the module docstring.

    Writes run in a worker thread (``threaded``), or inline when the loop has no threads to wait
    for (a simulation's virtual time).
    """

    def __init__(self, client: Client, histories: JobHistories, clock: Clock | None = None, *,
                 threaded: bool = True, informers: SharedInformers | None = None) -> None:
        self.client = client
        self.histories = histories
        self.clock = clock or Clock()
        self.threaded = threaded
        informers = informers if informers is not None else SharedInformers(client)
        self.job_informers = {k: informers.informer(k) for k in JOB_KINDS}
        for inf in self.job_informers.values():
            inf.add_handler(self._on_job)
        self.podgroups = informers.informer("PodGroup")
        self.podgroups.add_index("owner", _owner_index)
        self.pods = informers.informer("Pod")
        self.pods.add_index("owner", _owner_index)
        self.events = informers.informer("Event")
        self.events.add_index("involved", _involved_index)
        self._jobs: dict[str, _Job] = {}  # job uid ->
        self._owner: dict[str, str] = {}  # pod / podgroup uid -> job uid
        self._names: dict[str, str] = {}  # pod uid -> name
        self._pending: dict[JobKey, list[Record]] = {}
        self._deletes: list[JobKey] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.synced = asyncio.Event()
        self.written = 0  # records handed to the files (observability, tests)
        self.errors = 0

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        """Start watching (jobs first, so their pods find them) and the writer; returns at once."""
        if self._task is not None and not self._task.done():
            return
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._main(), name="history-recorder")

    async def run(self) -> None:
        await self.start()
        assert self._task is not None
        await asyncio.shield(self._task)

    async def stop(self) -> None:
        """Stop watching and write what is queued."""
        for inf in self._informers():
            await inf.stop()
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 5.0)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._task.cancel()
            except Exception:
                log.exception("history recorder failed")
        self._task = None

    async def flushed(self) -> None:
        """Return once everything queued so far is written (tests)."""
        while self._pending or self._deletes or not self._idle.is_set():
            self._wake.set()
            self._idle.clear()
            await self._idle.wait()

    def _informers(self) -> list[SharedInformer]:
        return [*self.job_informers.values(), self.podgroups, self.pods, self.events]

    async def _main(self) -> None:
        for inf in self.job_informers.values():
            await inf.start()
        for inf in self.job_informers.values():
            if not await inf.wait_synced():
                return  # stopped before the caches were whole
        # Handled only now, so that each finds its job (informers other components started
        # first replay what they hold to a handler added late).
        for inf, handler in ((self.podgroups, self._on_podgroup), (self.pods, self._on_pod),
                             (self.events, self._on_event)):
            inf.add_handler(handler)
        for inf in (self.podgroups, self.pods, self.events):
            await inf.start()
        for inf in (self.podgroups, self.pods, self.events):
            if not await inf.wait_synced():
                return
        self._after_sync()
        self.synced.set()
        await self._write_loop()

    def _after_sync(self) -> None:
        """Histories of jobs gone while nobody watched are removed; their pods gone meanwhile are marked."""
        try:
            keys = self.histories.keys()
        except OSError as e:
            log.warning("history: cannot list %s: %s", self.histories.root, e)
            keys = []
        for key in keys:
            if key.uid not in self._jobs:
                self._deletes.append(key)
        for job in self._jobs.values():
            live = {uid_of(p) for p in self.pods.by_index("owner", job.key.uid)}
            for pod_uid in sorted(job.pods - live):
                sig = job.last.get(("Pod", pod_uid))
                if sig is not None and not sig.startswith(DELETED + "|"):
                    name = self._names.get(pod_uid, "")
                    self._record(job, "Pod", name, pod_uid, DELETED, {})
        self._wake.set()

    # -- writing -------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            if not self._pending and not self._deletes:
                self._idle.set()
                if self._stopping:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            self._idle.clear()
            if self.threaded and not self._stopping:
                await asyncio.sleep(ROUND_GATHER)
            batch, self._pending = self._pending, {}
            deletes, self._deletes = self._deletes, []
            work: list[tuple[JobKey, list[Record]]] = []
            for key, records in batch.items():
                if len(records) > MAX_BATCH:
                    self._pending.setdefault(key, []).extend(records[MAX_BATCH:])
                    records = records[:MAX_BATCH]
                work.append((key, records))
            # One thread call per round for every job's appends and removals.
            if self.threaded:
                written, errors = await asyncio.to_thread(self._write_round, work, deletes)
            else:
                written, errors = self._write_round(work, deletes)
            self.written += written
            self.errors += errors
            await asyncio.sleep(0)

    def _write_round(self, work: list[tuple[JobKey, list[Record]]], deletes: list[JobKey]) -> tuple[int, int]:
        """Append each job's records, then remove the deleted jobs' files; (records written, I/O errors)."""
        written = errors = 0
        for key, records in work:
            try:
                self.histories.append(key, records)
                written += len(records)
            except (OSError, ValueError) as e:
                errors += 1
                log.warning("history: cannot append to %s: %s", key.name, e)
        for key in deletes:
            try:
                self.histories.delete(key)
            except (OSError, ValueError) as e:
                errors += 1
                log.warning("history: cannot delete %s: %s", key.name, e)
        return written, errors

    def _record(self, job: _Job, kind: str, name: str, uid: str, state: str, detail: dict[str, Any]) -> None:
        """Queue a record when the object's signature changed."""
        sig = _signature(kind, state, detail)
        if job.last.get((kind, uid)) == sig:
            return
        job.last[(kind, uid)] = sig
        rec = Record(self.clock.now().timestamp(), kind, name, uid, state, detail)
        self._pending.setdefault(job.key, []).append(rec)
        self._wake.set()

    # -- jobs ----------------------------------------------------------------

    def _register(self, obj: Obj) -> _Job | None:
        uid = uid_of(obj)
        job = self._jobs.get(uid)
        if job is not None:
            return job
        key = JobKey(namespace_of(obj) or "default", str(obj.get("kind") or ""), name_of(obj), uid)
        try:
            key.check()
        except ValueError as e:
            log.warning("history: job %s/%s not recorded: %s", key.namespace, key.name, e)
            return None
        job = self._jobs[uid] = _Job(key)
        self._load(job)
        # What arrived before the job did (separate watches) is recorded now.
        for pg in self._podgroups_of(job):
            self._on_podgroup("ADDED", pg, None)
        for pod in self.pods.by_index("owner", uid):
            self._on_pod("ADDED", pod, None)
        for target in [uid, *job.podgroups, *job.pods]:
            for ev in self.events.by_index("involved", target):
                self._on_event("ADDED", ev, None)
        return job

    def _load(self, job: _Job) -> None:
        """The last state per object, from the job's file."""
        try:
            for r in self.histories.iter(job.key):
                if r.kind not in ("Job", "PodGroup", "Pod", "Event"):
                    continue
                job.last[(r.kind, r.uid)] = _signature(r.kind, r.state, r.detail)
                if r.kind == "Pod":
                    job.pods.add(r.uid)
                    self._owner[r.uid] = job.key.uid
                    self._names[r.uid] = r.name
                elif r.kind == "PodGroup":
                    job.podgroups.add(r.uid)
                    self._owner[r.uid] = job.key.uid
        except (OSError, ValueError) as e:
            log.warning("history: cannot read %s's history: %s", job.key.name, e)

    def _forget(self, uid: str) -> None:
        job = self._jobs.pop(uid, None)
        if job is None:
            return
        for other in (*job.pods, *job.podgroups):
            self._owner.pop(other, None)
            self._names.pop(other, None)
        self._pending.pop(job.key, None)
        self._deletes.append(job.key)
        self._wake.set()

    def _on_job(self, type_: str, obj: Obj, old: Obj | None) -> None:
        if type_ == "DELETED":
            self._forget(uid_of(obj))
            return
        job = self._register(obj)
        if job is None:
            return
        state, detail = job_state(obj)
        if state:
            self._record(job, "Job", name_of(obj), job.key.uid, state, detail)

    def _job_of_owner(self, obj: Obj) -> _Job | None:
        owner = controller_uid(obj)
        return self._jobs.get(owner) if owner else None

    def _podgroups_of(self, job: _Job) -> list[Obj]:
        found = list(self.podgroups.by_index("owner", job.key.uid))
        same_name = self.podgroups.get(job.key.namespace, job.key.name)
        if same_name is not None and not controller_uid(same_name) and same_name not in found:
            found.append(same_name)
        return found

    # -- PodGroups, Pods, Events ----------------------------------------------

    def _on_podgroup(self, type_: str, obj: Obj, old: Obj | None) -> None:
        if type_ == "DELETED":
            return
        job = self._job_of_owner(obj)
        if job is None and not controller_uid(obj):
            job = self._job_named(namespace_of(obj) or "default", name_of(obj))
        if job is None:
            return
        uid = uid_of(obj)
        job.podgroups.add(uid)
        self._owner[uid] = job.key.uid
        phase = (obj.get("status") or {}).get("phase") if isinstance(obj.get("status"), dict) else None
        if isinstance(phase, str) and phase:
            self._record(job, "PodGroup", name_of(obj), uid, phase, {})

    def _job_named(self, namespace: str, name: str) -> _Job | None:
        for inf in self.job_informers.values():
            obj = inf.get(namespace, name)
            if obj is not None:
                return self._jobs.get(uid_of(obj))
        return None

    def _on_pod(self, type_: str, obj: Obj, old: Obj | None) -> None:
        uid = uid_of(obj)
        job = self._job_of_owner(obj)
        if job is None:
            return
        job.pods.add(uid)
        self._owner[uid] = job.key.uid
        self._names[uid] = name_of(obj)
        if type_ == "DELETED":
            sig = job.last.get(("Pod", uid), "")
            restarts = sig.rsplit("|", 1)[-1] if "|" in sig else "0"
            self._record(job, "Pod", name_of(obj), uid, DELETED, {"restarts": int(restarts or 0)})
            return
        try:
            state, detail = pod_state(obj, self.clock.now())
        except Exception:
            log.exception("history: pod %s/%s: cannot read its status", namespace_of(obj), name_of(obj))
            return
        self._record(job, "Pod", name_of(obj), uid, state, detail)

    def _on_event(self, type_: str, ev: Obj, old: Obj | None) -> None:
        if type_ == "DELETED":
            return
        ref = ev.get("involvedObject") if isinstance(ev.get("involvedObject"), dict) else {}
        assert isinstance(ref, dict)
        target = ref.get("uid")
        job: _Job | None = None
        if isinstance(target, str) and target:
            job = self._jobs.get(target) or self._jobs.get(self._owner.get(target, ""))
        if job is None and ref.get("kind") in JOB_KINDS:
            job = self._job_named(str(ref.get("namespace") or "default"), str(ref.get("name") or ""))
        if job is None:
            return
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        detail: dict[str, Any] = {"type": str(ev.get("type") or ""), "message": str(ev.get("message") or ""),
                                  "object": f"{kind}/{name}", "count": event_count(ev)}
        at = _event_at(ev)
        if at is not None:
            detail["at"] = at
        uid = uid_of(ev) or f"{namespace_of(ev)}/{name_of(ev)}"
        self._record(job, "Event", name_of(ev), uid, str(ev.get("reason") or ""), detail)


def _owner_index(obj: Obj) -> list[str]:
    uid = controller_uid(obj)
    return [uid] if uid else []


def _involved_index(ev: Obj) -> list[str]:
    ref = ev.get("involvedObject")
    uid = ref.get("uid") if isinstance(ref, dict) else None
    return [uid] if isinstance(uid, str) and uid else []
