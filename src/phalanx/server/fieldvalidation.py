"""``fieldValidation``: what the server does with fields no schema declares.

kubectl sends ``fieldValidation=Strict`` on apply/create/edit (``Ignore`` with
``--validate=false``). Strict refuses unknown fields: a POST or PUT with the
apiserver's 400 "strict decoding error" (docs/REFERENCE.md golden 29), a PATCH with its 422 on
the field ``patch`` (docs/REFERENCE.md golden 36). Warn and Ignore drop them; Phalanx reports
every dropped field in a ``Warning`` header in both modes (docs/ARCHITECTURE.md, Request bodies: unknown
fields are reported, never silently dropped), which kubectl prints as
``Warning: unknown field "spec.x"``. Without the parameter Phalanx is Strict
(the apiserver would Warn). Pure: admission is passed in.
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable

from phalanx.api.admission import StrictDecodingError
from phalanx.objects.errors import ApiError, BadRequest, FieldError, Invalid

MODES = ("Ignore", "Strict", "Warn")
MAX_ROUNDS = 8  # admission reports at most 100 unknown fields per round

_UNKNOWN = re.compile(r'^unknown field "(.*)"$', re.S)
_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def parse_mode(value: str | None) -> str:
    """The ``fieldValidation`` query parameter; absent means Strict in Phalanx."""
    if value is None or value == "":
        return "Strict"
    if value not in MODES:
        raise BadRequest(f'fieldValidation: Unsupported value: "{value}": supported values: '
                         + ", ".join(f'"{m}"' for m in MODES))
    return value


def unknown_fields(err: StrictDecodingError) -> list[str]:
    """The dotted paths (``spec.containers[0].foo``) a strict decoding error names."""
    out = []
    for e in err.errors:
        m = _UNKNOWN.match(e.detail or "")
        out.append(m.group(1) if m else e.path)
    return out


def parse_path(path: str) -> list[str | int] | None:
    """``spec.a[0].b`` -> ``["spec", "a", 0, "b"]``; None when it is not such a path."""
    steps: list[str | int] = []
    pos = 0
    while pos < len(path):
        m = _STEP.match(path, pos)
        if m is None or m.end() == pos or (m.group(1) is not None and pos > 0 and path[pos] != "."):
            return None
        steps.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    return steps or None


def _remove(obj: Any, steps: list[str | int]) -> bool:
    node = obj
    for step in steps[:-1]:
        if isinstance(step, int):
            if not isinstance(node, list) or not 0 <= step < len(node):
                return False
        elif not isinstance(node, dict) or step not in node:
            return False
        node = node[step]
    last = steps[-1]
    if isinstance(last, str) and isinstance(node, dict) and last in node:
        del node[last]
        return True
    return False


def drop_unknown_fields(obj: dict[str, Any], admit: Callable[[dict[str, Any]], Any]) -> tuple[dict[str, Any], list[str]]:
    """``obj`` without the fields admission does not know, and their paths.

    ``admit`` decodes strictly (``phalanx.api.admission.admit``); any other
    admission error is left for the real write to report. A field that cannot
    be located re-raises the strict decoding error rather than guess.
    """
    current = json.loads(json.dumps(obj))
    dropped: list[str] = []
    for _ in range(MAX_ROUNDS):
        try:
            admit(json.loads(json.dumps(current)))
        except StrictDecodingError as e:
            paths = unknown_fields(e)
            for path in paths:
                steps = parse_path(path)
                if steps is None or not _remove(current, steps):
                    raise
            dropped += paths
            continue
        except ApiError:
            pass
        return current, dropped
    raise BadRequest(f"the object has too many unknown fields (more than {len(dropped)})")


def warning(field: str) -> str:
    """A ``Warning`` header value as the apiserver writes it (docs/REFERENCE.md golden 30)."""
    return "299 - " + json.dumps(f'unknown field "{field}"', ensure_ascii=False)


class GoQuoted:
    """A string printed as Go's %q would (FieldError prints non-strings with str())."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return json.dumps(self.text, ensure_ascii=False)


class PatchStrictDecodingError(Invalid):
    """422 for a PATCH whose result has unknown fields (docs/REFERENCE.md golden 36): the field is
    ``patch``, the value the patched object; no kind or name in the details."""

    anonymous = True

    def __init__(self, patched: dict[str, Any] | None, err: StrictDecodingError, sort_keys: bool) -> None:
        detail = "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in unknown_fields(err))
        value = json.dumps(patched, separators=(",", ":"), sort_keys=sort_keys, ensure_ascii=False) \
            if patched is not None else ""
        super().__init__([FieldError("patch", "Invalid", detail, GoQuoted(value))], prefix=' "" is invalid: ')
