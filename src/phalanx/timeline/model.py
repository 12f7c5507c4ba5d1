"""A job's state history (``store.history`` records) as a timeline: rows of state segments per pod
instance, the job's conditions and the PodGroup's phases as bands, events as marks.

Pure: records and ``now`` in, a ``Timeline`` out; times are seconds since the job's creation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from phalanx.store.history import TRUNCATED, Record

# The states a pod segment is drawn as (its STATUS column, grouped), in legend order.
STATES = ("Pending", "Init", "Running", "CrashLoopBackOff", "Completed", "Error", "Terminating")
DELETED = "<deleted>"
FINISHED = ("Succeeded", "Failed")
DEADLINE = "DeadlineExceeded"
# STATUS values that mean the pod waits to run (kubectl's waiting reasons before a first start).
_WAITING = frozenset({"Pending", "ContainerCreating", "SchedulingGated", "ImagePullBackOff", "ErrImagePull",
                      "CreateContainerConfigError", "CreateContainerError", "Unknown", "NotReady"})
_INIT_PROGRESS = re.compile(r"^Init:\d+/\d+$")


def state_of(status: str) -> str:
    """The drawn state (one of ``STATES``) of a pod's STATUS column: ``Init:0/1`` and ``PodInitializing``
    are Init, a back-off wait (also an init container's) is CrashLoopBackOff, a failed init container
    (``Init:Error``) and every termination reason but Completed (OOMKilled, Signal:9, ...) are Error."""
    if status in STATES:
        return status
    if status == "CrashLoopBackOff" or status == "Init:CrashLoopBackOff":
        return "CrashLoopBackOff"
    if status == "PodInitializing" or _INIT_PROGRESS.match(status):
        return "Init"
    if status in _WAITING:
        return "Running" if status == "NotReady" else "Pending"
    return "Error"


@dataclass(frozen=True)
class Segment:
    """One state of a pod instance from ``start`` to ``end``; ``open``: still in it at the end."""
    state: str  # one of STATES
    status: str  # the STATUS as recorded (Init:0/1, OOMKilled, ...)
    start: float
    end: float
    open: bool = False
    restarts: int = 0
    exit_code: int | None = None
    node: str = ""

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Gap:
    """A container's wait between two runs: from the end of one Running segment to the start of the
    next (the Error and CrashLoopBackOff segments between); ``restart`` is the restart that ends it."""
    start: float
    end: float
    restart: int

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass
class PodRow:
    """One pod instance (a pod uid): a recreated pod of the same name is another row."""
    name: str
    uid: str
    segments: list[Segment] = field(default_factory=list)
    deleted: float | None = None  # when the instance was gone (None: not seen deleted)

    @property
    def start(self) -> float:
        return self.segments[0].start if self.segments else 0.0

    @property
    def end(self) -> float:
        return self.segments[-1].end if self.segments else 0.0

    @property
    def restarts(self) -> int:
        return max((s.restarts for s in self.segments), default=0)

    def gaps(self) -> list[Gap]:
        """The back-off waits of this instance's containers, in order: each from the failure (the
        first Error or CrashLoopBackOff segment after a run) to the next Running segment."""
        out = []
        failed_at: float | None = None
        for s in self.segments:
            if s.state == "Running":
                if failed_at is not None:
                    out.append(Gap(failed_at, s.start, s.restarts))
                failed_at = None
            elif s.state in ("Error", "CrashLoopBackOff") and failed_at is None:
                failed_at = s.start
        return out


@dataclass(frozen=True)
class Span:
    """A stretch of a band: the job's condition or the PodGroup's phase from ``start`` to ``end``."""
    state: str
    start: float
    end: float
    open: bool = False
    reason: str = ""
    message: str = ""


@dataclass
class Band:
    kind: str  # "job" or "podgroup"
    name: str
    spans: list[Span] = field(default_factory=list)


@dataclass(frozen=True)
class Mark:
    """An event (``kind`` "event"), the deadline firing ("deadline") or the history's truncation
    ("truncated") at ``t``; ``pod_uid`` is the pod instance row an event of a pod belongs to."""
    t: float
    reason: str
    kind: str = "event"
    type: str = ""
    object: str = ""
    message: str = ""
    count: int = 1
    pod_uid: str = ""


@dataclass
class Timeline:
    namespace: str
    job_kind: str
    job_name: str
    job_uid: str
    t0: float  # epoch seconds of the job's creation (its first record)
    end: float  # seconds since t0 where the picture ends (now for a running job, else the last record)
    finished: bool
    job: Band
    podgroup: Band
    rows: list[PodRow]
    marks: list[Mark]
    truncated: bool = False

    @property
    def state(self) -> str:
        return self.job.spans[-1].state if self.job.spans else ""

    def rows_of(self, pod: str) -> list[PodRow]:
        return [r for r in self.rows if r.name == pod]

    def deadline(self) -> Mark | None:
        return next((m for m in self.marks if m.kind == "deadline"), None)


def _natural(name: str) -> tuple:
    """Sort key: ``worker-10`` after ``worker-9``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _int(v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.lstrip("-").isdigit():
        return int(v)
    return None


def _bands(records: list[Record], end: float, t0: float) -> list[Span]:
    spans: list[Span] = []
    for r in records:
        t = r.t - t0
        if spans and spans[-1].state == r.state and spans[-1].reason == str(r.detail.get("reason") or ""):
            continue
        if spans:
            last = spans[-1]
            spans[-1] = Span(last.state, last.start, t, False, last.reason, last.message)
        spans.append(Span(r.state, t, max(t, end), True, str(r.detail.get("reason") or ""),
                          str(r.detail.get("message") or "")))
    return spans


def _rows(records: list[Record], end: float, t0: float) -> list[PodRow]:
    rows: dict[str, PodRow] = {}
    for r in records:
        if not r.uid:
            continue
        row = rows.get(r.uid)
        if row is None:
            if r.state == DELETED:
                continue
            row = rows[r.uid] = PodRow(r.name, r.uid)
        t = r.t - t0
        if row.deleted is not None:
            continue
        if row.segments:
            last = row.segments[-1]
            if r.state != DELETED and last.status == r.state and last.restarts == _restarts(r):
                continue
            row.segments[-1] = Segment(last.state, last.status, last.start, t, False, last.restarts,
                                       last.exit_code, last.node)
        if r.state == DELETED:
            row.deleted = t
            continue
        row.segments.append(Segment(state_of(r.state), r.state, t, max(t, end), True, _restarts(r),
                                    _int(r.detail.get("exitCode")), str(r.detail.get("node") or "")))
    return sorted(rows.values(), key=lambda row: (_natural(row.name), row.start))


def _restarts(r: Record) -> int:
    return _int(r.detail.get("restarts")) or 0


def _pod_of(rows: list[PodRow], name: str, t: float) -> str:
    """The uid of the instance of pod ``name`` alive at ``t`` (else the last one before it)."""
    best = ""
    for row in rows:
        if row.name == name and row.start <= t + 1e-9:
            best = row.uid
    if not best:
        best = next((row.uid for row in rows if row.name == name), "")
    return best


def build(records: Iterable[Record], *, namespace: str = "", kind: str = "", name: str = "", uid: str = "",
          now: float | None = None) -> Timeline:
    """The timeline of one job's history. ``now`` (epoch seconds) ends the open segments of a job that
    has not finished (a finished job's picture ends at its last record). The job's identity defaults
    to what its Job records say."""
    recs = sorted(records, key=lambda r: r.t)  # stable: records of one instant keep their file order
    job_recs = [r for r in recs if r.kind == "Job"]
    if job_recs:
        name = name or job_recs[0].name
        uid = uid or job_recs[0].uid
    t0 = recs[0].t if recs else 0.0  # the job's Created record comes first; nothing of it is older
    finished = bool(job_recs) and job_recs[-1].state in FINISHED
    last = recs[-1].t if recs else t0
    end_abs = last if finished or now is None else max(last, now)
    end = end_abs - t0
    job = Band("job", name, _bands(job_recs, end, t0))
    pg_recs = [r for r in recs if r.kind == "PodGroup"]
    podgroup = Band("podgroup", pg_recs[0].name if pg_recs else "", _bands(pg_recs, end, t0))
    rows = _rows([r for r in recs if r.kind == "Pod"], end, t0)
    marks: list[Mark] = []
    for r in recs:
        t = r.t - t0
        if r.kind == "Event":
            obj = str(r.detail.get("object") or "")
            okind, _, oname = obj.partition("/")
            marks.append(Mark(t, r.state, "event", str(r.detail.get("type") or ""), obj,
                              str(r.detail.get("message") or ""), _int(r.detail.get("count")) or 1,
                              _pod_of(rows, oname, t) if okind == "Pod" else ""))
        elif r.kind == "Job" and r.detail.get("reason") == DEADLINE and not any(m.kind == "deadline" for m in marks):
            marks.append(Mark(t, DEADLINE, "deadline", "Warning", f"{kind or 'Job'}/{name}",
                              str(r.detail.get("message") or "")))
        elif r.kind == TRUNCATED:
            marks.append(Mark(t, TRUNCATED, "truncated", "", "", str(r.detail.get("message") or "")))
    return Timeline(namespace, kind, name, uid, t0, end, finished, job, podgroup, rows, marks,
                    truncated=any(m.kind == "truncated" for m in marks))
