"""`describe` for Volcano's kinds: a PodGroup (and, through it, a job) says why its gang
waits and when it was last preempted or reclaimed; a Queue spells out its share.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from phalanx.api.columns import age, as_time, cell, dig, dig_dict, dig_list, queue_share
from phalanx.api.constants import REASON_PREEMPTED, REASON_RECLAIMED
from phalanx.cli.describe.common import Obj, PrefixWriter
from phalanx.cli.describe.unstructured import Section, describe_unstructured

_NEVER = datetime.min.replace(tzinfo=timezone.utc)


def waiting_reason(podgroup: Obj | None) -> str:
    """Why a gang is not running yet: the PodGroup's Unschedulable condition, if any."""
    if not isinstance(podgroup, dict):
        return ""
    phase = cell(dig(podgroup, "status", "phase")) or "Pending"
    if phase not in ("Pending", "Inqueue", "Unknown"):
        return ""
    for c in reversed(dig_list(podgroup, "status", "conditions")):
        if isinstance(c, dict) and c.get("type") == "Unschedulable" and c.get("status") == "True":
            detail = cell(c.get("message")) or cell(c.get("reason"))
            return f"PodGroup {cell(dig(podgroup, 'metadata', 'name'))} is {phase}: {detail}"
    return ""


def _last_seen(event: Obj) -> datetime | None:
    """When an event last happened: its series' last observation, else lastTimestamp, else eventTime."""
    for ts in (dig(event, "series", "lastObservedTime"), event.get("lastTimestamp"), event.get("eventTime"),
               event.get("firstTimestamp")):
        t = as_time(ts) if isinstance(ts, (str, datetime)) else None
        if t is not None:
            return t
    return None


def last_evictions(events: Any, podgroup: str | None, now: datetime) -> list[tuple[str, str]]:
    """(``Last Preempted`` / ``Last Reclaimed``, ``<age> ago: <message>``) for the most recent
    Preempted and Reclaimed event about the PodGroup named ``podgroup`` (any PodGroup when None);
    the text is the event's own message, nothing added."""
    out = []
    for reason in (REASON_PREEMPTED, REASON_RECLAIMED):
        latest: Obj | None = None
        for e in events if isinstance(events, list) else []:
            if not isinstance(e, dict) or e.get("reason") != reason:
                continue
            involved = dig_dict(e, "involvedObject")
            if involved.get("kind") != "PodGroup" or (podgroup is not None and involved.get("name") != podgroup):
                continue
            if latest is None or (_last_seen(e) or _NEVER) >= (_last_seen(latest) or _NEVER):
                latest = e
        if latest is not None:
            seen = _last_seen(latest)
            when = f"{age(seen, now)} ago" if seen is not None else "<unknown>"
            message = " ".join(cell(latest.get("message")).split())
            out.append((f"Last {reason}", f"{when}: {message}" if message else when))
    return out


def eviction_lines(events: Any, podgroup: str | None, now: datetime) -> Section:
    """Writes the :func:`last_evictions` lines (none when there was no eviction)."""
    def write(w: PrefixWriter) -> None:
        for label, text in last_evictions(events, podgroup, now):
            w.write(0, f"{label}:\t{text}\n")
    return write


def describe_podgroup(pg: Obj, related: dict, now: datetime) -> str:
    name = cell(dig(pg, "metadata", "name"))
    return describe_unstructured(pg, related, now, waiting=waiting_reason(pg),
                                 extra=eviction_lines(related.get("events"), name, now))


def _share(q: Obj) -> Section:
    def write(w: PrefixWriter) -> None:
        w.write(0, "Sharing:\n")
        for label, text in queue_share(q):
            w.write(1, f"{label}:\t{text}\n")
    return write


def describe_queue(q: Obj, related: dict, now: datetime) -> str:
    """The generic layout, then the queue's share (weight, reclaimable, guarantee, deserved,
    allocated, capability, reclaiming) in one block before the Events."""
    return describe_unstructured(q, related, now, extra=_share(q))
