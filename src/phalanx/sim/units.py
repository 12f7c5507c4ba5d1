"""Durations as people write them in workload files and shell scripts: 30s, 1m30s, 2h, 7d, 100ms."""
from __future__ import annotations

import math
import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0,
          "w": 7 * 86400.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w)")


class DurationError(ValueError):
    """Not a duration; the message says what is accepted."""


def parse_duration(value: object) -> float:
    """Seconds from ``30``, ``30s``, ``1.5m``, ``1h30m``, ``7d``, ``100ms`` (a plain
    number is seconds). Never negative, never NaN."""
    if isinstance(value, bool):
        raise DurationError(f"{value!r}: not a duration (e.g. 30s, 5m, 2h, 7d)")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            pos, seconds = 0, 0.0
            for m in _PART.finditer(text):
                if m.start() != pos:
                    break
                seconds += float(m.group(1)) * _UNITS[m.group(2)]
                pos = m.end()
            if pos != len(text) or not text:
                raise DurationError(f"{value!r}: not a duration (e.g. 30s, 5m, 2h, 7d)") from None
    else:
        raise DurationError(f"{value!r}: not a duration (e.g. 30s, 5m, 2h, 7d)")
    if math.isnan(seconds) or seconds < 0 or math.isinf(seconds):
        raise DurationError(f"{value!r}: must be a finite, non-negative duration")
    return seconds


def format_duration(seconds: float) -> str:
    """Compact and readable: 0s, 850ms, 42s, 5m03s, 2h05m, 3d04h."""
    if seconds is None or math.isnan(seconds):
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms" if seconds > 0 else "0s"
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    s = int(round(seconds))
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"
