"""What every describer shares: kubectl's prefix writer, its time and quantity texts,
and the Labels, Annotations and Events sections.

The writer is a tabwriter with padding 2 under two-space levels, so sections
align exactly as kubectl 1.32's describers (k8s.io/kubectl/pkg/describe) align them.
"""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import ROUND_CEILING, Decimal
from typing import Any

from phalanx.api.columns import NONE, age, as_time, cell, dig, dig_list, go_value
from phalanx.cli.printers import TabWriter, escape_terminal
from phalanx.objects.quantity import parse_quantity

Obj = dict[str, Any]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MAX_ANNOTATION_LEN = 140


class PrefixWriter:
    """kubectl's PrefixWriter: each level indents two spaces; cells are tab-terminated."""

    def __init__(self) -> None:
        self._tw = TabWriter(minwidth=0, padding=2)
        self._out: list[str] = []

    def write(self, level: int, text: str) -> None:
        self._tw.write("  " * level + escape_terminal(text))

    def flush(self) -> None:
        self._out.append(self._tw.flush())

    def text(self) -> str:
        self.flush()
        return "".join(self._out)


# --------------------------------------------------------------------------
# Time
# --------------------------------------------------------------------------

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def rfc1123z(ts: Any, now: datetime) -> str:
    """Go's time.RFC1123Z (`Sun, 29 Nov 2026 07:14:40 +0000`) in the zone of ``now``;
    an unset time prints as Go's zero time, as kubectl does."""
    t = as_time(ts)
    if t is None:
        return "Mon, 01 Jan 0001 00:00:00 +0000"
    t = t.astimezone(now.tzinfo or timezone.utc)
    off = t.utcoffset() or (t - t)
    minutes = int(off.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return (f"{_DAYS[t.weekday()]}, {t.day:02d} {_MONTHS[t.month - 1]} {t.year:04d} "
            f"{t.hour:02d}:{t.minute:02d}:{t.second:02d} {sign}{minutes // 60:02d}{minutes % 60:02d}")


# --------------------------------------------------------------------------
# Quantities: describe's sums, quotients and percentages are exact decimals
# --------------------------------------------------------------------------

_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
DECIMAL_SI, BINARY_SI = "DecimalSI", "BinarySI"


def quantity_value(q: Any) -> Decimal | None:
    """A quantity's value in base units as an exact decimal; None if it is not a quantity.

    ``objects.quantity`` parses it; the float's shortest repr is the decimal the
    quantity spells (exact up to 15 significant digits, far beyond any resource)."""
    try:
        return Decimal(repr(parse_quantity(q)))
    except ValueError:
        return None


def canonical_quantity(value: Decimal, fmt: str = DECIMAL_SI) -> str:
    """A canonical quantity string (`1100m`, `400Mi`, `4`), rounded up to milli-units."""
    if value == 0:
        return "0"
    milli = (value * 1000).to_integral_value(rounding=ROUND_CEILING)
    value = milli / 1000
    if fmt == BINARY_SI and value == value.to_integral_value() and abs(value) >= 1024:
        n = int(value)
        for suffix, unit in reversed(list(_BINARY.items())):
            if n % unit == 0:
                return f"{n // unit}{suffix}"
    if value != value.to_integral_value():
        return f"{int(milli)}m"
    n = int(value)
    for suffix, exp in (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3)):
        if n % (10 ** exp) == 0:
            return f"{n // 10 ** exp}{suffix}"
    return str(n)


def quantity_text(q: Any) -> str:
    """A quantity as the object spells it (a number as Go prints it)."""
    return go_value(q) if not isinstance(q, str) else q


# --------------------------------------------------------------------------
# Shared sections
# --------------------------------------------------------------------------


def write_labels(w: PrefixWriter, title: str, labels: Any) -> None:
    w.write(0, f"{title}:\t")
    labels = labels if isinstance(labels, dict) else {}
    if not labels:
        w.write(0, f"{NONE}\n")
        return
    for i, k in enumerate(sorted(labels)):
        if i:
            w.write(0, "\t")
        w.write(0, f"{k}={cell(labels[k])}\n")


def write_annotations(w: PrefixWriter, title: str, annotations: Any) -> None:
    w.write(0, f"{title}:\t")
    annotations = annotations if isinstance(annotations, dict) else {}
    keys = sorted(k for k in annotations if k != LAST_APPLIED)
    if not keys:
        w.write(0, f"{NONE}\n")
        return
    for i, k in enumerate(keys):
        if i:
            w.write(0, "\t")
        value = cell(annotations[k])
        if value.endswith("\n"):
            value = value[:-1]
        if len(value) + len(k) + 2 > MAX_ANNOTATION_LEN or "\n" in value:
            w.write(0, f"{k}:\n")
            for line in value.split("\n"):
                if len(line) > MAX_ANNOTATION_LEN - 2:
                    line = line[:MAX_ANNOTATION_LEN - 2] + "..."
                w.write(0, f"\t  {line}\n")
        else:
            w.write(0, f"{k}: {value}\n")


def _event_time(ev: Obj) -> datetime:
    t = as_time(ev.get("lastTimestamp"))
    return t or datetime.min.replace(tzinfo=timezone.utc)


def write_events(w: PrefixWriter, events: list[Obj] | None, now: datetime) -> None:
    if events is None:
        return
    events = [e for e in events if isinstance(e, dict)]
    if not events:
        w.write(0, f"Events:\t{NONE}\n")
        return
    w.flush()
    w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
    w.write(1, "----\t------\t----\t----\t-------\n")
    for e in sorted(events, key=_event_time):  # stable, like Go's insertion sort for short lists
        first = age(e.get("eventTime"), now) if e.get("eventTime") else age(e.get("firstTimestamp"), now)
        series = e.get("series")
        count = e.get("count") or 0
        if isinstance(series, dict):
            interval = f"{age(series.get('lastObservedTime'), now)} (x{series.get('count')} over {first})"
        elif isinstance(count, int) and count > 1:
            interval = f"{age(e.get('lastTimestamp'), now)} (x{count} over {first})"
        else:
            interval = first
        source = cell(dig(e, "source", "component")) or cell(e.get("reportingController")) \
            or cell(e.get("reportingComponent"))
        w.write(1, f"{cell(e.get('type'))}\t{cell(e.get('reason'))}\t{interval}\t{source}\t"
                   f"{cell(e.get('message')).strip()}\n")


def controller_of(obj: Obj) -> str:
    for ref in dig_list(obj, "metadata", "ownerReferences"):
        if isinstance(ref, dict) and ref.get("controller"):
            return f"{cell(ref.get('kind'))}/{cell(ref.get('name'))}"
    return ""
