"""One scheduling cycle, in the sense of Volcano's framework/framework.go: open a session, run the actions, close it.

A pure function: snapshot in, decisions out. ``run_session`` opens a Session
(the configured plugins register in tier order), runs the configured actions
(enqueue, allocate, preempt, reclaim, backfill), and closes it as Volcano's CloseSession does:
plugins write their conditions, then the job updater recomputes every job's
PodGroup status, its pending pods' PodScheduled=False condition and every
queue's status. Only what changed is returned; the shell writes it. This is
where the plugin registry (``plugins.PLUGINS``) is read: the session itself
knows plugins only as ``Plugin`` objects.

With an ``observer`` (``scheduler.metrics.SchedulerMetrics``) the driver also times the
session's open, each plugin's open and close and each action, and summarises the closed
session in ``SessionResult.stats`` (what Volcano's gang and proportion plugins report to their
metrics); without one it does neither.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from phalanx.api.constants import REASON_PREEMPTED, REASON_RECLAIMED
from phalanx.scheduler.actions import ACTIONS
from phalanx.scheduler.config import SchedulerConfig
from phalanx.scheduler.info import BIND_IN_FLIGHT, BINDING, PENDING
from phalanx.scheduler.job_updater import JobUpdater, write_admission_conditions
from phalanx.scheduler.plugins import PLUGINS
from phalanx.scheduler.plugins.gang import unready_tasks
from phalanx.scheduler.plugins.proportion import ProportionPlugin
from phalanx.scheduler.session import Event, Eviction, Session, pod_ref
from phalanx.scheduler.snapshot import Snapshot


class SessionObserver(Protocol):
    """What the driver reports while a session runs (seconds of ``time.perf_counter``)."""

    def opened(self, seconds: float) -> None: ...

    def plugin(self, name: str, phase: str, seconds: float) -> None: ...

    def action(self, name: str, seconds: float) -> None: ...


@dataclass
class SessionStats:
    """A closed session as Volcano's plugins report it to their metrics."""

    jobs: list[str] = field(default_factory=list)  # names of the jobs with tasks (their gauges live on)
    unready: dict[str, int] = field(default_factory=dict)  # job left unschedulable -> tasks short of its gang
    unschedulable_tasks: int = 0  # pending tasks of the jobs left unschedulable: failed attempts
    # ((job name, queue, namespace), milliseconds from the PodGroup's creation) of the jobs placed
    scheduled_jobs: list[tuple[tuple[str, str, str], float]] = field(default_factory=list)
    # queue -> (allocated milli cpu, memory, request cpu, memory, deserved cpu, memory, inqueue cpu, memory,
    #           share, weight, overused): the proportion plugin's figures at close
    queues: dict[str, tuple[float, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class EvictionResult:
    """A pod to evict: its DisruptionTarget condition says ``message``."""
    namespace: str
    name: str
    uid: str
    action: str  # "preempt" | "reclaim"
    message: str


@dataclass
class SessionResult:
    bindings: list[tuple[str, str, str]] = field(default_factory=list)  # (namespace, pod, node), commit order
    evictions: list[EvictionResult] = field(default_factory=list)  # commit order
    queue_annotations: dict[str, dict[str, str | None]] = field(default_factory=dict)  # changes only
    podgroup_status: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    queue_status: dict[str, dict[str, Any]] = field(default_factory=dict)
    pod_conditions: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    session_uid: str = ""
    skipped: list[str] = field(default_factory=list)  # objects the snapshot could not read
    stats: SessionStats | None = None  # with an observer

    @property
    def empty(self) -> bool:
        return not (self.bindings or self.evictions or self.podgroup_status or self.queue_status
                    or self.queue_annotations or self.pod_conditions or self.events)


def check_config(config: SchedulerConfig) -> None:
    """Unknown action or plugin names are refused, naming the field."""
    for a in config.actions:
        if a not in ACTIONS:
            raise ValueError(f"actions: unknown action {a!r}; known: {', '.join(ACTIONS)}")
    for t, tier in enumerate(config.tiers):
        for p in tier:
            if p not in PLUGINS:
                raise ValueError(f"tiers[{t}]: unknown plugin {p!r}; known: {', '.join(PLUGINS)}")


def open_session(snapshot: Snapshot, config: SchedulerConfig, now: datetime,
                 session_uid: str | None = None, observer: SessionObserver | None = None) -> Session:
    """A Session over the snapshot (which it consumes), the configured plugins registered."""
    ssn = Session(snapshot, config, now, session_uid)
    ssn.open([[PLUGINS[name](config) for name in tier] for tier in config.tiers],
             observer.plugin if observer is not None else None)
    return ssn


def close_session(ssn: Session, observer: SessionObserver | None = None) -> SessionResult:
    """Admission conditions, then the plugins' close, then the job updater."""
    result = SessionResult(bindings=list(ssn.bindings), session_uid=ssn.uid, skipped=list(ssn.snapshot.skipped))
    result.evictions = eviction_results(ssn)
    write_admission_conditions(ssn)
    ssn.close(observer.plugin if observer is not None else None)
    if observer is not None:
        result.stats = session_stats(ssn)
    updater = JobUpdater(ssn)
    updater.update_all()
    result.podgroup_status = updater.podgroup_status
    result.queue_status = updater.queue_status
    result.pod_conditions = updater.pod_conditions
    result.queue_annotations = updater.queue_annotations
    result.events = ssn.events
    return result


def eviction_results(ssn: Session) -> list[EvictionResult]:
    """The committed evictions, with their events: ``Evict`` on each pod (Volcano's words), and one
    ``Preempted``/``Reclaimed`` per victim job naming its pods and who took them."""
    out: list[EvictionResult] = []
    per_job: dict[tuple[str, str], list[Eviction]] = {}
    for e in ssn.evictions:
        t = e.task
        out.append(EvictionResult(t.namespace, t.name, str((t.pod.get("metadata") or {}).get("uid") or ""),
                                  e.action, e.message))
        ssn.record_event(pod_ref(t), "Warning", "Evict", f"Pod is evicted, because of {e.action}: {e.message}")
        per_job.setdefault(t.job.key, []).append(e)
    for key in sorted(per_job):
        evs = per_job[key]
        job, by = evs[0].task.job, evs[0].preemptor.job
        names = ", ".join(sorted(e.task.name for e in evs))
        if evs[0].action == "preempt":
            reason, why = REASON_PREEMPTED, f"by job {by.namespace}/{by.name} (priority {by.priority} > {job.priority})"
        else:
            reason, why = REASON_RECLAIMED, (f'for job {by.namespace}/{by.name} of queue "{by.queue}": queue '
                                        f'"{job.queue}" is above its deserved share')
        ssn.record_podgroup_event(job, "Warning", reason, f"{len(evs)} pod(s) evicted {why}: {names}")
    return out


def session_stats(ssn: Session) -> SessionStats:
    """The closed session's figures: the jobs the gang plugin left unschedulable (or an enqueue
    refusal left pending) and by how many tasks their gang is short, the jobs placed (their age
    at ``ssn.now``), and the proportion plugin's per-queue figures. One pass over the jobs, a
    few attribute reads each: this runs after every session. A queue without jobs gets zeros (its
    gauges fall back to 0 when its last job is gone, rather than keeping the last figures)."""
    st = SessionStats()
    now = ssn.now.timestamp()
    names, unready, scheduled = st.jobs, st.unready, st.scheduled_jobs
    for job in ssn.jobs.values():
        if not job.tasks or job.gang_invalid:
            continue
        names.append(job.name)
        if job.unschedulable_this_session or (job.admission is not None and job.is_pending()):
            unready[job.name] = unready_tasks(job)
            st.unschedulable_tasks += len(job.index.get(PENDING, ()))
        if job.creation > 0 and any(not t.pod.get(BIND_IN_FLIGHT) for t in job.index.get(BINDING, {}).values()):
            # placed now (binds of earlier sessions still in flight are not; no creationTimestamp: no age)
            scheduled.append(((job.name, job.queue, job.namespace), max(0.0, now - job.creation) * 1000.0))
    for plugin in ssn.plugins:
        if isinstance(plugin, ProportionPlugin):
            for name, a in getattr(plugin, "attrs", {}).items():
                st.queues[name] = (a.allocated[0], a.allocated[1], a.request[0], a.request[1], a.deserved[0],
                                   a.deserved[1], a.inqueue[0], a.inqueue[1], a.share, float(a.queue.weight),
                                   1.0 if plugin.is_overused(a.queue) else 0.0)
            for name, q in ssn.queues.items():  # a queue without jobs holds, requests and deserves nothing
                if name not in st.queues:
                    st.queues[name] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, float(q.weight), 0.0)
    return st


def run_session(snapshot: Snapshot, config: SchedulerConfig | None = None, now: datetime | None = None,
                session_uid: str | None = None, observer: SessionObserver | None = None,
                snapshot_seconds: float = 0.0) -> SessionResult:
    """Run enqueue/allocate/backfill over the snapshot (which it consumes). ``snapshot_seconds``:
    what building the snapshot took, part of the open the observer is told of (as Volcano's)."""
    if now is None:
        raise ValueError("now is required (pure core: the caller owns the clock)")
    config = config or SchedulerConfig()
    check_config(config)
    if observer is None:
        ssn = open_session(snapshot, config, now, session_uid)
        for action in config.actions:
            ACTIONS[action](ssn)
        return close_session(ssn)
    t = time.perf_counter()
    ssn = open_session(snapshot, config, now, session_uid, observer)
    observer.opened(snapshot_seconds + time.perf_counter() - t)
    for action in config.actions:
        t = time.perf_counter()
        ACTIONS[action](ssn)
        observer.action(action, time.perf_counter() - t)
    return close_session(ssn, observer)


__all__ = ["EvictionResult", "SessionObserver", "SessionResult", "SessionStats", "check_config", "close_session", "open_session",
           "run_session", "session_stats"]
