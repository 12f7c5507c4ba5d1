"""kubectl's client-side apply: the last-applied-configuration annotation and the
three-way JSON merge patch (last applied, file, live) that removes what the file
no longer sets. Pure functions over JSON-shaped objects."""
from __future__ import annotations

import copy
import json
from typing import Any

from phalanx.cli.gojson import compact_json

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
FIELD_MANAGER = "kubectl-client-side-apply"  # kubectl's, so a later `kubectl apply` owns the same fields


def with_last_applied(doc: dict) -> dict:
    """The object to send: ``doc`` annotated with its own JSON as kubectl writes it
    (``annotations: {}`` kept inside, sorted keys, a trailing newline)."""
    modified = copy.deepcopy(doc)
    md = modified.setdefault("metadata", {})
    annotations = md.get("annotations") if isinstance(md.get("annotations"), dict) else {}
    annotations = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    md["annotations"] = annotations
    text = compact_json(modified) + "\n"
    out = copy.deepcopy(modified)
    out["metadata"]["annotations"] = dict(annotations, **{LAST_APPLIED: text})
    return out


def last_applied(live: dict) -> dict | None:
    """The configuration a previous apply recorded on ``live`` (None: none, or not JSON)."""
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def three_way_patch(original: dict | None, modified: dict, current: dict) -> dict:
    """A JSON merge patch taking ``current`` to ``modified``: keys that ``modified``
    sets and ``current`` lacks or holds differently, and null for keys ``original``
    (the last applied configuration) set that ``modified`` no longer does. Keys only
    ``current`` has (set by the server or by others) are left alone; lists are replaced."""
    patch = _changes(current, modified)
    for k, v in _deletions(original or {}, modified).items():
        if isinstance(v, dict) and isinstance(patch.get(k), dict):
            patch[k] = _merge(patch[k], v)
        elif k not in patch:
            patch[k] = v
    return patch


def _changes(current: Any, modified: dict) -> dict:
    out: dict = {}
    cur = current if isinstance(current, dict) else {}
    for k, v in modified.items():
        if k not in cur:
            out[k] = v
        elif isinstance(v, dict) and isinstance(cur[k], dict):
            sub = _changes(cur[k], v)
            if sub:
                out[k] = sub
        elif cur[k] != v or type(cur[k]) is not type(v):
            out[k] = v
    return out


def _deletions(original: dict, modified: dict) -> dict:
    out: dict = {}
    for k, v in original.items():
        if k not in modified:
            out[k] = None
        elif isinstance(v, dict) and isinstance(modified[k], dict):
            sub = _deletions(v, modified[k])
            if sub:
                out[k] = sub
    return out


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        elif k not in out:
            out[k] = v
    return out
