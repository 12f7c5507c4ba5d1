"""`describe` for the six Kubeflow job kinds: the generic layout, with the job's restart
accounting spelled out, its PodGroup's last preemption or reclaim, while it waits, why, and (from its
state history, when one is kept) a compact ``Timeline:`` of its replicas.

Restart accounting: ``status.restartCount`` against ``runPolicy.backoffLimit``,
``replicaStatuses[<type>].restarts`` and the per-pod ``podRestarts`` bookkeeping.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from phalanx.api.columns import NONE, cell, dig, dig_dict, dig_list, go_value
from phalanx.cli.describe.common import Obj, PrefixWriter
from phalanx.cli.describe.unstructured import Renderer, Section, describe_unstructured, write_unstructured
from phalanx.cli.describe.volcano import eviction_lines, waiting_reason

_REPLICA_COUNTS = (("active", "Active"), ("succeeded", "Succeeded"), ("failed", "Failed"),
                   ("restarts", "Restarts"))


def has_restart_accounting(obj: Obj) -> bool:
    """Whether the job's status carries restart counters (any restart was counted)."""
    status = dig_dict(obj, "status")
    return "restartCount" in status or any(
        isinstance(rs, dict) and "restarts" in rs for rs in dig_dict(status, "replicaStatuses").values())


def _count(v: Any) -> str:
    return go_value(v if v is not None else 0)


def _replica_statuses(w: PrefixWriter, level: int, value: Any) -> None:
    """Per replica type Active / Succeeded / Failed / Restarts (0 when unset),
    then the type's other keys as kubectl prints them."""
    w.write(level, "Replica Statuses:\n")
    if not isinstance(value, dict):
        return
    for rtype in sorted(value):
        rs = value[rtype]
        w.write(level + 1, f"{rtype}:\n")
        if not isinstance(rs, dict):
            continue
        for key, label in _REPLICA_COUNTS:
            w.write(level + 2, f"{label}:\t{_count(rs.get(key))}\n")
        rest = {k: v for k, v in rs.items() if k not in dict(_REPLICA_COUNTS)}
        write_unstructured(w, level + 2, rest, f".status.replicaStatuses.{rtype}", ())


def _restart_count_renderer(obj: Obj) -> Renderer:
    limit = dig(obj, "spec", "runPolicy", "backoffLimit")
    said = f"backoffLimit {go_value(limit)}" if limit is not None else "backoffLimit not set: operator default"

    def render(w: PrefixWriter, level: int, value: Any) -> None:
        w.write(level, f"Restart Count:\t{_count(value)} ({said})\n")

    return render


def _pod_restarts(w: PrefixWriter, level: int, value: Any) -> None:
    """One line per pod: the restarts counted per container, and whether the
    pod's own failure (deleted and recreated) was counted."""
    entries = {k: v for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else {}

    def counted(e: dict) -> bool:  # bookkeeping-only entries (uid, failing, ...) are not shown
        cs = e.get("containers")
        cs = cs if isinstance(cs, dict) else {}
        return bool(e.get("failureCounted")) or any(isinstance(n, int) and n > 0 for n in cs.values())

    entries = {k: v for k, v in entries.items() if counted(v)}
    if not entries:
        return
    w.write(level, "Pod Restarts:\n")
    for pod in sorted(entries):
        e = entries[pod]
        containers = e.get("containers")
        containers = containers if isinstance(containers, dict) else {}
        parts = [f"{c}={go_value(containers[c])}" for c in sorted(containers)]
        if e.get("failureCounted"):
            parts.append("pod failure counted")
        w.write(level + 1, f"{pod}:\t{', '.join(parts) or NONE}\n")


def _job_status_renderers(obj: Obj) -> dict[str, Renderer]:
    custom: dict[str, Renderer] = {".status.podRestarts": _pod_restarts}
    if has_restart_accounting(obj):
        custom[".status.replicaStatuses"] = _replica_statuses
        custom[".status.restartCount"] = _restart_count_renderer(obj)
    return custom


def job_finished_or_running(job: Obj) -> bool:
    for c in dig_list(job, "status", "conditions"):
        if isinstance(c, dict) and c.get("status") == "True" and c.get("type") in ("Running", "Succeeded",
                                                                                  "Failed"):
            return True
    return False


def timeline_lines(job: Obj, history: Any, now: datetime) -> Section | None:
    """The ``Timeline:`` section: the job, its PodGroup and each pod instance in one line each, times
    since the job's creation (None without a history)."""
    if not isinstance(history, list) or not history:
        return None
    # Lazy for start-up speed: the timeline reads store.history, which loads the store package.
    from phalanx.timeline import model as timeline_model
    from phalanx.timeline import text as timeline_text

    md = dig_dict(job, "metadata")
    tl = timeline_model.build(history, namespace=cell(md.get("namespace")), kind=cell(job.get("kind")),
                              name=cell(md.get("name")), uid=cell(md.get("uid")), now=now.timestamp())
    pairs = timeline_text.lines(tl)

    def write(w: PrefixWriter) -> None:
        w.write(0, "Timeline:\n")
        for label, text in pairs:
            w.write(1, f"{label}:\t{text}\n")
    return write


def describe_job(job: Obj, related: dict, now: datetime) -> str:
    custom = _job_status_renderers(job)
    if has_restart_accounting(job) and "restartCount" not in dig_dict(job, "status"):
        job = {**job, "status": {**dig_dict(job, "status"), "restartCount": 0}}
    waiting = ""
    if "podgroup" in related and not job_finished_or_running(job):
        waiting = waiting_reason(related.get("podgroup"))
    sections = []
    if isinstance(related.get("podgroup"), dict):  # its events are among the job's (the CLI adds them)
        sections.append(eviction_lines(related.get("events"), cell(dig(related["podgroup"], "metadata", "name")),
                                       now))
    timeline = timeline_lines(job, related.get("history"), now)
    if timeline is not None:
        sections.append(timeline)

    def extra(w: PrefixWriter) -> None:
        for section in sections:
            section(w)
    return describe_unstructured(job, related, now, custom, waiting, extra)
