"""The status writes at session close (Volcano framework/job_updater.go).

Every job's PodGroup phase and conditions, its pending pods' PodScheduled=False
condition, and every queue's status are recomputed from the session's view;
only what changed is kept for the shell to write. ``is_settled`` says which
jobs a session could not change at all (the snapshot cache keeps those as
sums).
"""
from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from phalanx.objects.clock import parse_time
from phalanx.scheduler import resources as R
from phalanx.scheduler.fit_errors import ALL_NODES_UNAVAILABLE
from phalanx.scheduler.info import (
    ADMITTED,
    ALLOCATED,
    BINDING,
    COMPLETED_STATUS,
    PENDING,
    PG_COMPLETED,
    PG_INQUEUE,
    PG_PENDING,
    PG_RUNNING,
    PG_UNKNOWN,
    PIPELINED,
    RELEASING,
    RUNNING,
    SCHEDULED,
    SCHEDULED_REASON,
    SCHEDULED_STATUS,
    UNSCHEDULABLE,
    JobInfo,
)
from phalanx.scheduler.reasons import task_scheduling_reason
from phalanx.scheduler.session import Session, pod_ref

# A refusal whose message changes only in its figures (the queue's allocated and
# inqueue amounts move with every other job) keeps its stored message this long.
ADMISSION_MESSAGE_REFRESH = timedelta(seconds=30)
_FIGURE = re.compile(r"\d+(?:\.\d+)?[A-Za-z]*")
QUEUE_COUNT_FIELDS = {PG_PENDING: "pending", PG_RUNNING: "running", PG_UNKNOWN: "unknown",
                      PG_INQUEUE: "inqueue", PG_COMPLETED: "completed"}

PodGroupStatus = dict[str, Any]


class JobUpdater:
    """Volcano's jobUpdater: ``update_all`` computes, at close, the status
    writes of every job and queue of the session (and records the events that
    go with them)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.podgroup_status: dict[tuple[str, str], PodGroupStatus] = {}
        self.queue_status: dict[str, dict[str, Any]] = {}
        self.pod_conditions: dict[tuple[str, str], dict[str, Any]] = {}
        self.queue_annotations: dict[str, dict[str, str | None]] = {}

    def update_all(self) -> None:
        ssn = self.ssn
        for key in sorted(ssn.jobs):
            self.update_job(ssn.jobs[key])
        self.update_queues()

    def update_job(self, job: JobInfo) -> None:
        ssn = self.ssn
        old = job.podgroup.get("status") or {}
        if not isinstance(old, dict):
            old = {}
        phase = job_phase(job)
        job.phase = phase
        new: dict[str, Any] = {k: v for k, v in old.items() if k not in ("conditions", "running", "succeeded", "failed")}
        new["phase"] = phase
        for k, status in (("running", RUNNING), ("succeeded", "Succeeded"), ("failed", "Failed")):
            n = job.count(status)
            if n:
                new[k] = n
        if job.conditions:
            new["conditions"] = job.conditions
        changed = _normalized(new) != _normalized(old)
        if changed:
            self.podgroup_status[job.key] = new

        if job.unschedulable_this_session and not job.gang_invalid:
            ssn.record_podgroup_event(job, "Warning", "Unschedulable", job.job_fit_errors)
        elif changed and phase in (PG_RUNNING, PG_COMPLETED):
            ssn.record_podgroup_event(job, "Normal", "Scheduled", "pod group is ready")

        if job.gang_invalid:
            return
        for status in (ALLOCATED, PENDING, PIPELINED):
            tasks = job.index.get(status)
            if not tasks:
                continue
            for t in sorted(tasks.values(), key=lambda t: t.name):
                reason, msg = task_scheduling_reason(job, t)
                if not msg:
                    msg = job.job_fit_errors or ALL_NODES_UNAVAILABLE
                current = pod_condition(t.pod, "PodScheduled")
                if (current is not None and current.get("status") == "False"
                        and current.get("reason") == reason and current.get("message") == msg):
                    continue
                since = current.get("lastTransitionTime") if current and current.get("status") == "False" else None
                self.pod_conditions[t.key] = {
                    "type": "PodScheduled", "status": "False", "lastProbeTime": None,
                    "lastTransitionTime": since or ssn.now_str, "reason": reason, "message": msg,
                }
                ssn.record_event(pod_ref(t), "Warning", "FailedScheduling", msg)

    def update_queues(self) -> None:
        ssn = self.ssn
        dims = ssn.dims
        allocated = {name: dims.zero() for name in ssn.queues}
        counts: dict[str, dict[str, int]] = {name: {} for name in ssn.queues}
        for key in sorted(ssn.jobs):
            job = ssn.jobs[key]
            if job.queue not in allocated:
                continue
            field_name = QUEUE_COUNT_FIELDS.get(job.phase)
            if field_name:
                c = counts[job.queue]
                c[field_name] = c.get(field_name, 0) + 1
            # roll the job's allocation up to every ancestor, up to root
            name: str | None = job.queue
            seen: set[str] = set()
            while name is not None and name in allocated and name not in seen:
                seen.add(name)
                R.add(allocated[name], job.allocated)
                q = ssn.queues[name]
                name = q.parent or ("root" if name != "root" else None)
        for qname in sorted(ssn.snapshot.settled):
            if qname not in allocated:
                continue
            tot = ssn.snapshot.settled[qname]
            c = counts[qname]
            for phase, n in tot.phases.items():
                field_name = QUEUE_COUNT_FIELDS.get(phase)
                if field_name:
                    c[field_name] = c.get(field_name, 0) + n
            name = qname
            seen = set()
            while name is not None and name in allocated and name not in seen:
                seen.add(name)
                R.add(allocated[name], tot.allocated)
                q = ssn.queues[name]
                name = q.parent or ("root" if name != "root" else None)
        for name in sorted(ssn.queues):
            q = ssn.queues[name]
            old = (q.queue.get("status") or {})
            if not isinstance(old, dict):
                old = {}
            new = {k: v for k, v in old.items() if k not in QUEUE_COUNT_FIELDS.values()}
            new["allocated"] = dims.to_resource_list(allocated[name])
            for k, v in sorted(counts[name].items()):
                new[k] = v
            if not new.get("state"):
                new["state"] = "Open"
            if _queue_changed(dims, old, new, allocated[name]):
                self.queue_status[name] = new
            wanted = ssn.queue_annotations.get(name)
            if wanted:
                have = (q.queue.get("metadata") or {}).get("annotations") or {}
                if not isinstance(have, dict):
                    have = {}
                diff = {k: v for k, v in wanted.items() if have.get(k) != v}
                if diff:
                    self.queue_annotations[name] = diff


def _original_phase(job: JobInfo) -> str:
    return str((job.podgroup.get("status") or {}).get("phase") or "")


def write_admission_conditions(ssn: Session) -> None:
    """Run before the plugins close (Phalanx): a refused admission is visible
    on the PodGroup (condition; the Warning event follows from it at close)
    and on its pods if they exist; once admitted, that condition turns False."""
    for key in sorted(ssn.jobs):
        job = ssn.jobs[key]
        if job.is_pending() and job.admission is not None:
            reason, message = job.admission
            message = _kept_admission_message(ssn, job, reason, message)
            ssn.update_podgroup_condition(job, UNSCHEDULABLE, "True", reason, message)
            job.unschedulable_this_session = True
            job.job_fit_errors = message
        elif job.phase == PG_INQUEUE and _original_phase(job) in ("", PG_PENDING):
            cond = ssn.condition(job, UNSCHEDULABLE)
            if cond is not None and cond.get("status") == "True":
                ssn.update_podgroup_condition(job, UNSCHEDULABLE, "False", ADMITTED,
                                              f'admitted to queue "{job.queue}"')


def _kept_admission_message(ssn: Session, job: JobInfo, reason: str, message: str) -> str:
    """The stored refusal message, when the new one says the same with other
    figures and the stored one is younger than ADMISSION_MESSAGE_REFRESH.

    Refusal messages quote the queue's live allocation, which moves whenever
    any job starts or ends; a waiting PodGroup is rewritten (and its event
    recorded again) for such a change at most once per refresh period, so its
    figures are at most that old. A change of reason, queue or resource is
    written at once."""
    cond = ssn.condition(job, UNSCHEDULABLE)
    if cond is None or cond.get("status") != "True" or cond.get("reason") != reason:
        return message
    old = cond.get("message")
    if not isinstance(old, str) or old == message or _FIGURE.sub("#", old) != _FIGURE.sub("#", message):
        return message
    try:
        written = parse_time(cond.get("lastTransitionTime"))
    except (TypeError, ValueError, AttributeError):
        written = None
    if written is not None and (written.tzinfo is None) != (ssn.now.tzinfo is None):
        written = written.replace(tzinfo=ssn.now.tzinfo)
    if written is None or not (ssn.now - ADMISSION_MESSAGE_REFRESH < written <= ssn.now):
        return message
    return old


def job_phase(job: JobInfo) -> str:
    """Volcano framework/session.go#jobStatus: the PodGroup phase at close."""
    if job.count(RUNNING) and job.unschedulable_this_session:
        return PG_UNKNOWN
    scheduled = job.count(*SCHEDULED_STATUS)
    scheduled += sum(1 for t in job.index.get(RELEASING, {}).values() if t.node_name)
    if scheduled >= job.min_available:
        if job.count(*COMPLETED_STATUS) == scheduled:
            return PG_COMPLETED
        return PG_RUNNING
    if job.phase != PG_INQUEUE:
        return PG_PENDING
    return PG_INQUEUE


def _normalized(status: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in status.items() if k not in ("conditions", "running", "succeeded", "failed")}
    for k in ("running", "succeeded", "failed"):
        if status.get(k):
            out[k] = status[k]
    conds = [{k: v for k, v in c.items() if k not in ("transitionID", "lastTransitionTime")}
             for c in status.get("conditions") or [] if isinstance(c, dict)]
    if conds:
        out["conditions"] = conds
    return out


def is_settled(job: JobInfo) -> bool:
    """True when a session can neither place, admit nor rewrite this job: no
    task waits for a node, its PodGroup is past admission, its gang is ready
    with ``Scheduled`` already written and nothing ``Unschedulable`` (or it
    has no pods yet), and its stored status already says what
    ``JobUpdater.update_job`` would write. Such a job only counts in sums
    (``Snapshot.settled``), so a session costs what its waiting jobs cost, not
    what the whole cluster holds (SnapshotCache)."""
    if job.admission is not None:
        return False
    if job.count(PENDING, PIPELINED, ALLOCATED, BINDING):
        return False
    if job.phase in ("", PG_PENDING):
        return False
    if job.tasks:
        # as the gang plugin's close writes: a ready gang gets Scheduled=True (and Unschedulable=False),
        # any other one Unschedulable
        if job.phase == PG_INQUEUE or not (job.is_ready() and job.check_task_ready()):
            return False
        scheduled = unschedulable = None
        for c in job.conditions:
            if c.get("type") == SCHEDULED:
                scheduled = c
            elif c.get("type") == UNSCHEDULABLE:
                unschedulable = c
        if (scheduled is None or scheduled.get("status") != "True" or scheduled.get("reason") != SCHEDULED_REASON
                or (scheduled.get("message") or "") != ""):
            return False
        if unschedulable is not None and unschedulable.get("status") == "True":
            return False
    # (an admitted PodGroup whose pods do not exist yet has nothing to place: it waits for its job controller)
    if job_phase(job) != job.phase:
        return False
    old = job.podgroup.get("status") or {}
    if not isinstance(old, dict):
        return False
    new: dict[str, Any] = {k: v for k, v in old.items() if k not in ("running", "succeeded", "failed")}
    for k, status in (("running", RUNNING), ("succeeded", "Succeeded"), ("failed", "Failed")):
        n = job.count(status)
        if n:
            new[k] = n
    return _normalized(new) == _normalized(old)


def pod_condition(pod: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return None


def _queue_changed(dims: R.Dims, old: dict[str, Any], new: dict[str, Any], alloc: list[float]) -> bool:
    for k in QUEUE_COUNT_FIELDS.values():
        if (old.get(k) or 0) != (new.get(k) or 0):
            return True
    if old.get("state") != new.get("state"):
        return True
    old_alloc = old.get("allocated")
    if not isinstance(old_alloc, dict) or set(old_alloc) != set(new["allocated"]):
        return True
    try:
        return not R.equal(dims.from_resource_list(old_alloc), alloc)
    except ValueError:
        return True
