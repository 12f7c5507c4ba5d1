"""JSON text as Go's encoding/json writes a decoded object: keys sorted, HTML characters
escaped; compact (what `-o jsonpath` prints and last-applied-configuration holds).
"""
from __future__ import annotations

import json
from typing import Any


def go_escape(text: str) -> str:
    """``&``, ``<``, ``>``, U+2028 and U+2029 as ``\\u`` escapes, as Go's json.Marshal writes them."""
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def compact_json(obj: Any) -> str:
    """JSON as Go's json.Marshal writes a decoded object: compact, sorted keys, HTML characters escaped."""
    return go_escape(json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False))
