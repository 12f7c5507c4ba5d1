"""kubectl's printUnstructuredContent, the describer of custom resources: every key,
nested, under a smart label (`pytorchReplicaSpecs` -> `Pytorch Replica Specs`).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from phalanx.api.columns import cell, dig_dict, go_value
from phalanx.cli.describe.common import Obj, PrefixWriter, write_annotations, write_events, write_labels

_ACRONYMS = ("API", "URL", "UID", "OSB", "GUID")


def camelcase_split(src: str) -> list[str]:
    """fatih/camelcase.Split: runs of lower/upper/digit/other, `PDFLoader` -> PDF Loader."""
    runs: list[list[str]] = []
    last = 0
    for ch in src:
        cls = 1 if ch.islower() else 2 if ch.isupper() else 3 if ch.isdigit() else 4
        if cls == last:
            runs[-1].append(ch)
        else:
            runs.append([ch])
        last = cls
    for i in range(len(runs) - 1):
        if runs[i] and runs[i + 1] and runs[i][0].isupper() and runs[i + 1][0].islower():
            runs[i + 1].insert(0, runs[i].pop())
    return ["".join(r) for r in runs if r]


def smart_label(field: str) -> str:
    """kubectl 1.32's smartLabelFor: `pytorchReplicaSpecs` -> `Pytorch Replica Specs`, `uid` -> `UID`."""
    if any(not (ch.isalpha() or ch == "-") for ch in field):
        return field
    parts = []
    for part in camelcase_split(field):
        if part == "_":
            continue
        if part.upper() in _ACRONYMS:
            parts.append(part.upper())
        else:
            parts.append(part[:1].upper() + part[1:])
    return " ".join(parts)


Renderer = Callable[[PrefixWriter, int, Any], None]


def write_unstructured(w: PrefixWriter, level: int, content: dict, prefix: str, skip: tuple[str, ...],
                  custom: dict[str, Renderer] | None = None) -> None:
    """kubectl's generic printing of nested keys; ``custom`` renders chosen
    paths (e.g. ``.status.replicaStatuses``) its own way, in the same place."""
    for field in sorted(content):
        value = content[field]
        expr = f"{prefix}.{field}"
        if expr in skip:
            continue
        if custom and expr in custom:
            custom[expr](w, level, value)
        elif isinstance(value, dict):
            w.write(level, f"{smart_label(field)}:\n")
            write_unstructured(w, level + 1, value, expr, skip, custom)
        elif isinstance(value, list):
            w.write(level, f"{smart_label(field)}:\n")
            for child in value:
                if isinstance(child, dict):
                    write_unstructured(w, level + 1, child, expr, skip, custom)
                else:
                    w.write(level + 1, f"{go_value(child)}\n")
        else:
            w.write(level, f"{smart_label(field)}:\t{go_value(value)}\n")


GENERIC_SKIP = (".metadata.managedFields", ".metadata.name", ".metadata.namespace", ".metadata.labels",
                 ".metadata.annotations")



Section = Callable[[PrefixWriter], None]


def describe_unstructured(obj: Obj, related: dict, now: datetime, custom: dict[str, Renderer] | None = None,
                          waiting: str = "", extra: Section | None = None) -> str:
    """Name, Namespace, Labels, Annotations, every other key, then (not in kubectl)
    what ``extra`` writes, ``Waiting:`` when ``waiting`` says why the object waits, and the Events."""
    w = PrefixWriter()
    meta = dig_dict(obj, "metadata")
    w.write(0, f"Name:\t{cell(meta.get('name'))}\n")
    w.write(0, f"Namespace:\t{cell(meta.get('namespace'))}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    write_unstructured(w, 0, obj, "", GENERIC_SKIP, custom)
    if extra is not None:
        extra(w)
    if waiting:
        w.write(0, f"Waiting:\t{waiting}\n")
    write_events(w, related.get("events", []), now)
    return w.text()
