"""What a pod directory holds about its pod, so logs outlive the pod object.

When the runtime first starts a pod it writes ``.phalanx-pod.json`` into the
pod's directory (``<state>/pods/<ns>_<pod>_<uid>/``): name, namespace, uid,
labels, the controller ownerReference, container names and times. With it the
logs of a deleted pod can still be found by name or by job, and the janitor
knows whose they are. A directory without the file (written by an older
agent) is described from its name and its container subdirectories.
"""
from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from phalanx.api.registry import JOB_KINDS
from phalanx.node.names import check_dns_label, check_dns_subdomain, check_uid

log = logging.getLogger(__name__)

POD_META = ".phalanx-pod.json"
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"
_DIR_NAME = re.compile(r"^([a-z0-9-]+)_([a-z0-9.-]+)_([A-Za-z0-9-]+)$")
_NAME_MAX = 255


def pods_root(state_dir: Path) -> Path:
    return Path(state_dir) / "pods"


def _controller_ref(meta: dict) -> dict | None:
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") and isinstance(ref.get("uid"), str):
            return {k: str(ref.get(k) or "") for k in ("apiVersion", "kind", "name", "uid")}
    return None


def _names(spec: dict, key: str) -> list[str]:
    return [c["name"] for c in spec.get(key) or [] if isinstance(c, dict) and isinstance(c.get("name"), str)]


def pod_meta(pod: dict, now: datetime, node: str = "") -> dict[str, Any]:
    """The record of ``pod`` as written to its directory."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    raw_labels = meta.get("labels")
    labels = raw_labels if isinstance(raw_labels, dict) else {}
    default = (meta.get("annotations") or {}).get(DEFAULT_CONTAINER)
    return {
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace") or "default",
        "uid": meta.get("uid", ""),
        "labels": {str(k): str(v) for k, v in labels.items()},
        "controller": _controller_ref(meta),
        "containers": _names(spec, "containers"),
        "initContainers": _names(spec, "initContainers"),
        "defaultContainer": default if isinstance(default, str) else None,
        "node": node or spec.get("nodeName") or "",
        "creationTimestamp": meta.get("creationTimestamp"),
        "startedAt": now.isoformat(),
        "finishedAt": None,
    }


def mark_finished(pod_directory: Path, now: datetime) -> None:
    """Note in the record when the pod's processes were let go (never fails): a line appended to
    the record (no new file: creating files is the costly part of a container's start and end)."""
    path = Path(pod_directory) / POD_META
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    except OSError:
        return
    try:
        with os.fdopen(fd, "r+") as f:
            text = f.read()
            data = parse_record(text)
            if data is not None and not data.get("finishedAt"):
                f.write(("" if text.endswith("\n") else "\n") + json.dumps({"finishedAt": now.isoformat()}) + "\n")
    except (OSError, ValueError):
        pass


def parse_record(text: str) -> dict[str, Any] | None:
    """A record file's content: the record (its first line) with the notes appended after it
    (``finishedAt``); a torn last line is ignored. None when the first line is no JSON object."""
    lines = text.split("\n")
    try:
        data = json.loads(lines[0])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for line in lines[1:]:
        try:
            note = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(note, dict) and not data.get("finishedAt"):
            data.update({k: v for k, v in note.items() if k == "finishedAt"})
    return data


def write_json(path: Path, data: dict) -> None:
    """Replace ``path`` at once (never a half-written record): one line, ended."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True) + "\n")
    os.replace(tmp, path)


@dataclass
class PodRecord:
    """One pod instance (one uid) found on disk."""

    dir: Path
    namespace: str
    name: str
    uid: str
    started: float  # seconds since the epoch: orders instances of one name
    controller: dict | None = None
    labels: dict[str, str] = field(default_factory=dict)
    containers: list[str] = field(default_factory=list)
    init_containers: list[str] = field(default_factory=list)
    default_container: str | None = None
    finished_at: str | None = None
    has_meta: bool = True
    name_truncated: bool = False

    @property
    def job_owner(self) -> dict | None:
        """The controller reference when it is a training job (PyTorchJob, TFJob)."""
        c = self.controller
        return c if c is not None and c.get("kind") in JOB_KINDS else None

    def as_pod(self) -> dict:
        """A pod-shaped dict with what container selection needs."""
        ann = {DEFAULT_CONTAINER: self.default_container} if self.default_container else {}
        return {"metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid, "annotations": ann},
                "spec": {"containers": [{"name": c} for c in self.containers],
                         "initContainers": [{"name": c} for c in self.init_containers]}}


def parse_dir_name(name: str) -> tuple[str, str, str] | None:
    """(namespace, pod name as written, uid) of a pod directory name."""
    m = _DIR_NAME.match(name)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def _from_meta(d: Path, data: Any, ns: str, uid: str) -> PodRecord | None:
    if not isinstance(data, dict) or data.get("uid") != uid or data.get("namespace") != ns:
        return None
    try:
        check_dns_subdomain(data.get("name"), "name")
        containers = [check_dns_label(c, "container") for c in data.get("containers") or []]
        inits = [check_dns_label(c, "container") for c in data.get("initContainers") or []]
        started = datetime.fromisoformat(str(data.get("startedAt"))).timestamp()
    except (ValueError, TypeError):
        return None
    ctrl = data.get("controller")
    labels = data.get("labels")
    default = data.get("defaultContainer")
    finished = data.get("finishedAt")
    return PodRecord(
        dir=d, namespace=ns, name=data["name"], uid=uid, started=started,
        controller={k: str(ctrl.get(k) or "") for k in ("apiVersion", "kind", "name", "uid")}
        if isinstance(ctrl, dict) else None,
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        containers=containers, init_containers=inits,
        default_container=default if isinstance(default, str) else None,
        finished_at=finished if isinstance(finished, str) else None)


def _without_meta(d: Path, ns: str, name: str, uid: str, mtime: float) -> PodRecord:
    containers = []
    try:
        for sub in sorted(d.iterdir()):
            if sub.is_dir() and not sub.is_symlink() and any(p.suffix == ".log" for p in sub.iterdir()):
                containers.append(sub.name)
    except OSError:
        pass
    room = _NAME_MAX - len(ns) - len(uid) - 2
    return PodRecord(dir=d, namespace=ns, name=name, uid=uid, started=mtime, containers=containers,
                     has_meta=False, name_truncated=len(name) >= room)


class PodRecords:
    """The pod directories under a state directory, read on demand.

    Records are cached per directory (they do not change after they are
    written, but for ``finishedAt``), so scanning many times stays cheap.
    """

    def __init__(self, state_dir: Path) -> None:
        self.root = pods_root(state_dir)
        self._cache: dict[str, tuple[float, PodRecord]] = {}

    def scan(self, namespace: str | None = None, name: str | None = None) -> list[PodRecord]:
        """Records of ``namespace`` (and pod ``name``), oldest instance first."""
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return []
        out = []
        seen = set()
        for e in entries:
            parsed = parse_dir_name(e.name)
            if parsed is None:
                continue
            ns, written, uid = parsed
            if namespace is not None and ns != namespace:
                continue
            if name is not None and not name.startswith(written):
                continue
            seen.add(e.name)
            rec = self._record(Path(e.path), ns, written, uid)
            if rec is None or (name is not None and rec.name != name):
                continue
            out.append(rec)
        for k in set(self._cache) - seen:  # directories removed since: forget them
            parsed = parse_dir_name(k)
            if parsed is None or ((namespace is None or parsed[0] == namespace)
                                  and (name is None or name.startswith(parsed[1]))):
                del self._cache[k]
        out.sort(key=lambda r: (r.started, r.uid))
        return out

    def by_uid(self, uid: str) -> PodRecord | None:
        for rec in self.scan():
            if rec.uid == uid:
                return rec
        return None

    def forget(self, rec: PodRecord) -> None:
        self._cache.pop(rec.dir.name, None)

    def _record(self, d: Path, ns: str, written: str, uid: str) -> PodRecord | None:
        try:
            st = d.lstat()
            if not d.is_dir() or d.is_symlink():
                return None
        except OSError:
            return None
        meta = d / POD_META
        try:
            stamp = meta.stat().st_mtime_ns
        except OSError:
            stamp = -1
        hit = self._cache.get(d.name)
        if hit is not None and hit[0] == stamp and stamp != -1:
            return hit[1]
        rec = None
        if stamp != -1:
            try:
                rec = _from_meta(d, parse_record(meta.read_text()), ns, uid)
            except (OSError, ValueError):
                rec = None
            if rec is not None:
                self._cache[d.name] = (stamp, rec)
                return rec
        try:
            check_uid(uid)
        except ValueError:
            return None
        return _without_meta(d, ns, written, uid, st.st_mtime)
