"""The compact text timeline (``phalanx timeline`` without -o, ``describe``'s Timeline section): one line
for the job, one per pod instance, saying when it started, failed, restarted and finished.

Times are relative to the job's creation: ``pytest-worker-0  +3s Running, +5s Error (exit 1), ...``.
"""
from __future__ import annotations

from phalanx.timeline.model import PodRow, Span, Timeline

# A pod line keeps the first and the last few of its changes when there are more than MAX_ITEMS.
MAX_ITEMS = 10
KEEP = 4
# The pod states the text names (waiting and back-off are the time between them).
_SHOWN = ("Running", "Completed", "Error", "Terminating")


def human(t: float) -> str:
    """A duration: ``12.5s``, ``3m20s``, ``2h5m``."""
    sign = "-" if t < 0 else ""
    t = abs(t)
    if t < 60:
        text = f"{t:.1f}".rstrip("0").rstrip(".") + "s"
    elif t < 3600:
        m, s = divmod(int(round(t)), 60)
        text = f"{m}m{s}s" if s else f"{m}m"
    else:
        h, m = divmod(int(round(t)) // 60, 60)
        text = f"{h}h{m}m" if m else f"{h}h"
    return sign + text


def at(t: float) -> str:
    """A moment since the job's creation: ``+12.5s``."""
    return ("+" if t >= 0 else "") + human(t)


def _elide(items: list[str]) -> list[str]:
    if len(items) <= MAX_ITEMS:
        return items
    return [*items[:KEEP], f"... {len(items) - 2 * KEEP} more ...", *items[-KEEP:]]


def _span_item(s: Span) -> str:
    shown = s.reason and not s.reason.endswith(s.state)
    return f"{at(s.start)} {s.state}" + (f" ({s.reason})" if shown else "")


def pod_items(row: PodRow) -> list[str]:
    """The instance's changes worth a word: each start, failure (with its exit code), restart, end."""
    items = []
    for s in row.segments:  # consecutive segments differ in status or restart count
        if s.state not in _SHOWN:
            continue
        if s.state == "Running" and s.restarts:
            items.append(f"{at(s.start)} Running (restart {s.restarts})")
        elif s.state == "Error" and s.exit_code is not None:
            items.append(f"{at(s.start)} {s.status} (exit {s.exit_code})")
        else:
            items.append(f"{at(s.start)} {s.status}")
    if row.deleted is not None:
        items.append(f"{at(row.deleted)} deleted")
    if not items and row.segments:
        items.append(f"{at(row.segments[0].start)} {row.segments[0].status}")
    return items


def lines(tl: Timeline) -> list[tuple[str, str]]:
    """(label, text) pairs: the job, its PodGroup, then each pod instance (a recreated one ``name #2``)."""
    out = []
    if tl.job.spans:
        out.append(("job", ", ".join(_elide([_span_item(s) for s in tl.job.spans]))))
    if tl.podgroup.spans:
        out.append(("podgroup", ", ".join(_elide([_span_item(s) for s in tl.podgroup.spans]))))
    seen: dict[str, int] = {}
    for row in tl.rows:
        seen[row.name] = seen.get(row.name, 0) + 1
        label = row.name + (f" #{seen[row.name]}" if seen[row.name] > 1 else "")
        out.append((label, ", ".join(_elide(pod_items(row)))))
    deadline = tl.deadline()
    if deadline is not None:
        out.append(("deadline", f"{at(deadline.t)} {deadline.reason}"))
    if tl.truncated:
        out.append(("note", "history truncated: later pod states and events were not kept"))
    return out


def render(tl: Timeline) -> str:
    """The lines with their labels in one aligned column."""
    pairs = lines(tl)
    width = max((len(label) for label, _ in pairs), default=0)
    return "".join(f"{label.ljust(width)}  {text}\n" for label, text in pairs)
