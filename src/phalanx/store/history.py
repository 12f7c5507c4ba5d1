"""A job's state history on disk: every state its job, PodGroup and pod instances went through, and their events.

One JSON-lines file per job, ``<home>/history/<namespace>/<kind>_<name>_<uid>.jsonl``, appended
by the control plane's history recorder and read by ``phalanx timeline`` and ``describe`` (with
or without a control plane running). A file holds at most ``MAX_RECORDS`` records (then a
``Truncated`` mark, after which only the job's own states are kept) and is removed with its job.

A record is one line, ``{"t": <epoch seconds>, "kind": "Job"|"PodGroup"|"Pod"|"Event",
"name": ..., "uid": ..., "state": ..., "detail": {...}}``:

- Job: ``state`` the last condition type (Created, Running, Restarting, Succeeded, ...),
  ``detail`` {reason, message};
- PodGroup: ``state`` its phase (Pending, Inqueue, Running, ...);
- Pod: one record per change of the instance's ``kubectl get pods`` STATUS (Pending,
  Init:0/1, PodInitializing, Running, CrashLoopBackOff, Completed, Error, Terminating, and
  ``<deleted>``), ``uid`` the instance, ``detail`` {restarts, node, exitCode?};
- Event: ``state`` the reason, ``detail`` {type, message, object: "<Kind>/<name>", count}.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from phalanx.objects.names import is_dns1123_subdomain

MAX_RECORDS = 20_000
TRUNCATED = "Truncated"
KINDS = ("Job", "PodGroup", "Pod", "Event")


@dataclass(frozen=True)
class Record:
    t: float
    kind: str
    name: str
    uid: str
    state: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"t": round(self.t, 6), "kind": self.kind, "name": self.name, "uid": self.uid,
                           "state": self.state, "detail": self.detail}, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> Record | None:
        """None for a line that is not a record (a torn last line after a crash)."""
        try:
            d = json.loads(line)
            if not isinstance(d, dict) or d.get("kind") not in (*KINDS, TRUNCATED):
                return None
            detail = d.get("detail")
            return cls(float(d["t"]), str(d["kind"]), str(d.get("name") or ""), str(d.get("uid") or ""),
                       str(d.get("state") or ""), detail if isinstance(detail, dict) else {})
        except (ValueError, TypeError, KeyError):
            return None


@dataclass(frozen=True)
class JobKey:
    namespace: str
    kind: str
    name: str
    uid: str

    def check(self) -> None:
        """Names are validated before they touch a path."""
        for what, value in (("namespace", self.namespace), ("name", self.name)):
            errs = is_dns1123_subdomain(value)
            if errs:
                raise ValueError(f"{what} {value!r}: {errs[0]}")
        if not self.kind.isalpha():
            raise ValueError(f"kind {self.kind!r}: must be letters only")
        if not self.uid or not all(c.isalnum() or c == "-" for c in self.uid):
            raise ValueError(f"uid {self.uid!r}: must be letters, digits and '-'")


class JobHistories:
    """The history files under ``root`` (``<home>/history``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._counts: dict[JobKey, int] = {}

    def path(self, key: JobKey) -> Path:
        key.check()
        return self._file(key)

    def _file(self, key: JobKey) -> Path:
        return self.root / key.namespace / f"{key.kind}_{key.name}_{key.uid}.jsonl"

    def append(self, key: JobKey, records: list[Record]) -> None:
        """Add records at the end of the job's file (created on first use); past MAX_RECORDS only
        the job's own states are kept, after one Truncated mark."""
        if not records:
            return
        n = self._counts.get(key)
        first = n is None  # first append of this process: the key is checked, the folder made
        path = self.path(key) if first else self._file(key)
        if n is None:
            n = _count_lines(path)
        lines = []
        for r in records:
            if n >= MAX_RECORDS and r.kind != "Job":
                if n == MAX_RECORDS:
                    lines.append(Record(r.t, TRUNCATED, key.name, key.uid, TRUNCATED,
                                        {"message": f"more than {MAX_RECORDS} records: only the job's states follow"}
                                        ).to_json())
                    n += 1
                continue
            lines.append(r.to_json())
            n += 1
        self._counts[key] = n
        if not lines:
            return
        if first:
            path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")

    def delete(self, key: JobKey) -> None:
        self._counts.pop(key, None)
        try:
            os.unlink(self.path(key))
        except FileNotFoundError:
            pass

    def find(self, namespace: str, kind: str, name: str) -> list[JobKey]:
        """The histories kept for a job of that name (one per uid: a job deleted and created again
        whose first history was not removed yet), oldest file first."""
        JobKey(namespace, kind, name, "x").check()
        folder = self.root / namespace
        prefix = f"{kind}_{name}_"
        found = []
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return []
        for e in entries:
            if e.name.startswith(prefix) and e.name.endswith(".jsonl"):
                uid = e.name[len(prefix):-len(".jsonl")]
                if uid and "_" not in uid:
                    found.append((e.stat().st_mtime, JobKey(namespace, kind, name, uid)))
        return [k for _, k in sorted(found, key=lambda x: x[0])]

    def read(self, key: JobKey) -> list[Record]:
        return list(self.iter(key))

    def iter(self, key: JobKey) -> Iterator[Record]:
        try:
            with open(self.path(key), encoding="utf-8") as f:
                for line in f:
                    r = Record.from_json(line)
                    if r is not None:
                        yield r
        except FileNotFoundError:
            return

    def keys(self) -> list[JobKey]:
        """Every job with a history (the recorder removes those of jobs that no longer exist)."""
        out = []
        try:
            namespaces = sorted(os.scandir(self.root), key=lambda e: e.name)
        except FileNotFoundError:
            return []
        for ns in namespaces:
            if not ns.is_dir():
                continue
            for e in sorted(os.scandir(ns.path), key=lambda e: e.name):
                parts = e.name[:-len(".jsonl")].split("_") if e.name.endswith(".jsonl") else []
                if len(parts) == 3:
                    key = JobKey(ns.name, *parts)
                    try:
                        key.check()
                    except ValueError:
                        continue
                    out.append(key)
        return out


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0
