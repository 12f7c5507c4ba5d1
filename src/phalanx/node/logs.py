"""Container logs on disk: where they live, reading, following.

Layout (like the kubelet's /var/log/pods): one file per container instance,
``<state>/pods/<ns>_<pod>_<uid>/<container>/<restartCount>.log``, holding the
instance's stdout and stderr, next to the pod's record (``podrecords``).
Logs stay on disk after the pod is deleted and are served by pod name (the
newest instance of that name) or by job until the log janitor removes them
with the job (``logjanitor``).
"""
from __future__ import annotations

import asyncio
import codecs
import inspect
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol

from phalanx.client.interface import ObjectList
from phalanx.node.names import check_dns_label, check_dns_subdomain, check_uid
from phalanx.node.podrecords import POD_META, PodRecord, PodRecords, mark_finished, pod_meta, write_json
from phalanx.objects.errors import BadRequest, NotFound
from phalanx.objects.meta import controller_uid

Obj = dict[str, Any]

_NAME_MAX = 255
WORK_DIR = "work"
_CHUNK = 64 * 1024


def pod_dir_name(namespace: str, name: str, uid: str) -> str:
    check_dns_label(namespace, "metadata.namespace")
    check_dns_subdomain(name, "metadata.name")
    check_uid(uid)
    room = _NAME_MAX - len(namespace) - len(uid) - 2
    return f"{namespace}_{name[:room]}_{uid}"


def pod_dir(state_dir: Path, namespace: str, name: str, uid: str) -> Path:
    """The pod's directory: its record, its containers' logs, its root and working directory."""
    return Path(state_dir) / "pods" / pod_dir_name(namespace, name, uid)


def work_dir(pod_directory: Path) -> Path:
    """The containers' default working directory: empty at the pod's start, and
    apart from the logs (a log folder named ``jax`` in the working directory
    would be imported as the ``jax`` package)."""
    return Path(pod_directory) / WORK_DIR


def record_pod(state_dir: Path, pod: dict, now: datetime, node: str = "") -> Path:
    """Write the pod's record (``podrecords``) into its directory unless one is
    there (an agent restart keeps the first). ValueError for names that cannot
    be paths; OSError when the disk refuses."""
    meta = pod.get("metadata") or {}
    d = pod_dir(state_dir, meta.get("namespace") or "default", meta.get("name", ""), meta.get("uid", ""))
    return write_pod_record(d, pod_meta(pod, now, node))


def write_pod_record(pod_directory: Path, record: dict[str, Any]) -> Path:
    """Write ``record`` (``podrecords.pod_meta``) as the record of the pod in
    ``pod_directory`` unless one is there. Only file work: the runtime builds
    the record on the event loop and writes it from a thread."""
    path = Path(pod_directory) / POD_META
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, record)
    return path


def mark_pod_finished(pod_directory: Path, now: datetime) -> None:
    """Note in the pod's record when its processes were let go (never fails)."""
    mark_finished(pod_directory, now)


def container_dir(state_dir: Path, namespace: str, name: str, uid: str, container: str) -> Path:
    check_dns_label(container, "container name")
    return pod_dir(state_dir, namespace, name, uid) / container


def container_log_path(state_dir: Path, namespace: str, name: str, uid: str, container: str,
                       restart_count: int) -> Path:
    return container_dir(state_dir, namespace, name, uid, container) / f"{int(restart_count)}.log"


def instance_logs(cdir: Path) -> list[Path]:
    """The instance log files of a container directory, oldest first."""
    try:
        files = [p for p in cdir.iterdir() if p.suffix == ".log" and p.stem.isdigit()]
    except OSError:
        return []
    return sorted(files, key=lambda p: int(p.stem))


def find_logs(state_dir: Path, namespace: str, name: str, container: str,
              uid: str | None = None) -> tuple[Path | None, Path | None]:
    """(current, previous) log files of a container. Without ``uid`` the most
    recently used pod directory of that name is taken."""
    check_dns_label(container, "container name")
    if uid is not None:
        cdir = container_dir(state_dir, namespace, name, uid, container)
    else:
        check_dns_label(namespace, "metadata.namespace")
        check_dns_subdomain(name, "metadata.name")
        base = Path(state_dir) / "pods"
        prefix = f"{namespace}_{name}_"
        try:
            candidates = [p / container for p in base.iterdir()
                          if p.name.startswith(prefix) and "_" not in p.name[len(prefix):]]
        except OSError:
            candidates = []
        candidates = [c for c in candidates if c.is_dir()]
        if not candidates:
            return None, None
        cdir = max(candidates, key=lambda c: c.stat().st_mtime)
    files = instance_logs(cdir)
    current = files[-1] if files else None
    previous = files[-2] if len(files) > 1 else None
    return current, previous


def read_log(path: Path, tail: int | None = None, limit_bytes: int | None = None) -> str:
    """The log as text (invalid UTF-8 replaced); ``tail`` keeps the last lines."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return ""
    if tail is not None:
        data = _tail_bytes(data, tail)
    if limit_bytes is not None and limit_bytes >= 0:
        data = data[:limit_bytes]
    return data.decode("utf-8", errors="replace")


def _tail_bytes(data: bytes, lines: int) -> bytes:
    if lines <= 0:
        return b""
    body = data[:-1] if data.endswith(b"\n") else data
    idx = len(body)
    for _ in range(lines):
        idx = body.rfind(b"\n", 0, idx)
        if idx < 0:
            return data
    return data[idx + 1:]


DoneCheck = Callable[[], "bool | Awaitable[bool]"]


async def follow(path: Path, *, is_done: DoneCheck | None = None, tail: int | None = None,
                 poll_interval: float = 0.2) -> AsyncIterator[str]:
    """Yield the log's text as it grows (like ``tail -f``) until ``is_done()``
    says the writer has finished; then yield what is left and stop."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    path = Path(path)
    while not path.exists():
        if is_done is not None and await _call(is_done):
            return
        await asyncio.sleep(poll_interval)
    with path.open("rb") as f:
        if tail is not None:
            start = f.read()
            chunk = _tail_bytes(start, tail)
            if chunk:
                yield decoder.decode(chunk)
        while True:
            data = f.read(_CHUNK)
            if data:
                text = decoder.decode(data)
                if text:
                    yield text
                continue
            if is_done is not None and await _call(is_done):
                rest = f.read()
                text = decoder.decode(rest, final=True)
                if text:
                    yield text
                return
            await asyncio.sleep(poll_interval)


async def _call(fn: DoneCheck) -> bool:
    r = fn()
    if inspect.isawaitable(r):
        r = await r
    return bool(r)


# --------------------------------------------------------------------------- job logs


@dataclass(frozen=True)
class LogBlock:
    """One container instance's log among a job's logs."""

    record: PodRecord
    container: str
    restart: int
    path: Path

    def header(self, deleted: bool) -> str:
        gone = ", pod deleted" if deleted else ""
        return (f"==> {self.record.name}/{self.container} "
                f"(instance {self.record.uid[:8]}, restart {self.restart}{gone}) <==\n")


def _natural(s: str) -> list[Any]:
    """Sort key: `worker-2` before `worker-10`."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def job_blocks(records: list[PodRecord], owner_uid: str, container: str | None = None) -> list[LogBlock]:
    """The log files of the pods controlled by ``owner_uid``, in reading order:
    pod name, instance (oldest first), container (init containers first), restart."""
    keyed = []
    for rec in records:
        if (rec.controller or {}).get("uid") != owner_uid:
            continue
        names = rec.init_containers + [c for c in rec.containers if c not in rec.init_containers]
        for order, cname in enumerate(names):
            if container is not None and cname != container:
                continue
            for path in instance_logs(rec.dir / cname):
                n = int(path.stem)
                keyed.append(((_natural(rec.name), rec.started, rec.uid, order, n), LogBlock(rec, cname, n, path)))
    keyed.sort(key=lambda kb: kb[0])
    return [b for _, b in keyed]


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:  # removed with its job meanwhile
        return b""


def _tail_offset(path: Path, tail: int | None) -> int:
    if tail is None:
        return 0
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    return len(data) - len(_tail_bytes(data, tail))


def _finished(job: dict) -> bool:
    return any(isinstance(c, dict) and c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


# --------------------------------------------------------------------------- provider


class PodReader(Protocol):
    """What the log provider reads of the object API: a ``Client``, or (offline) the state directory's records."""

    async def get(self, kind: str, name: str, namespace: str | None = None) -> Obj: ...

    async def list(self, kind: str, namespace: str | None = None) -> ObjectList: ...


class LogProvider:
    """``pods/log`` for the API server and the CLI, read from the state directory.

    Errors are the apiserver's/kubelet's: NotFound for a missing pod,
    BadRequest for an ambiguous or unknown container, a container that has not
    started, or a missing previous instance. An unscheduled pod has no logs ("").
    A deleted pod is served from disk (its newest instance of that name) as long
    as its directory is there; ``previous`` is the container's instance before
    the current one, in an earlier pod instance of the same name if need be
    (a pod recreated by its job). ``job_logs`` serves every log of a job.
    """

    serves_deleted_pods = True

    def __init__(self, state_dir: Path, client: PodReader, poll_interval: float = 0.2) -> None:
        self.state_dir = Path(state_dir)
        self.client = client
        self.poll_interval = poll_interval
        self.records = PodRecords(self.state_dir)

    async def read(self, namespace: str, name: str, container: str | None = None, *,
                   previous: bool = False, tail_lines: int | None = None,
                   limit_bytes: int | None = None) -> str:
        try:
            pod = await self.client.get("Pod", name, namespace)
        except NotFound:
            path: Path | None = self._deleted_path(namespace, name, container, previous)
        else:
            path = self._path(pod, container, previous)
        if path is None:
            return ""
        return read_log(path, tail=tail_lines, limit_bytes=limit_bytes)

    async def follow(self, namespace: str, name: str, container: str | None = None, *,
                     tail_lines: int | None = None) -> AsyncIterator[str]:
        """Stream the current instance's log until the container stops running
        (a deleted pod's log is read once: nothing writes to it any more)."""
        try:
            pod = await self.client.get("Pod", name, namespace)
        except NotFound:
            text = read_log(self._deleted_path(namespace, name, container, False), tail=tail_lines)
            if text:
                yield text
            return
        path = self._path(pod, container, False)
        if path is None:
            return
        cname = self._container(pod, container)
        uid = pod["metadata"].get("uid", "")

        async def done() -> bool:
            try:
                fresh = await self.client.get("Pod", name, namespace)
            except NotFound:
                return True
            if fresh["metadata"].get("uid") != uid:
                return True
            files = instance_logs(path.parent)
            if files and files[-1] != path:
                return True
            st = _find_status(fresh, cname)
            return st is None or "running" not in (st.get("state") or {})

        async for chunk in follow(path, is_done=done, tail=tail_lines, poll_interval=self.poll_interval):
            yield chunk

    async def job_logs(self, namespace: str, kind: str, name: str, container: str | None = None, *,
                       follow: bool = False, tail_lines: int | None = None) -> AsyncIterator[str]:
        """Every log of the job's pods, current and deleted, each block headed
        ``==> <pod>/<container> (instance <uid>, restart <n>[, pod deleted]) <==``.
        ``tail_lines`` applies per block; ``follow`` streams new output until the
        job has finished and none of its pods is Pending or Running."""
        job = await self.client.get(kind, name, namespace)
        juid = (job.get("metadata") or {}).get("uid", "")
        records = self.records.scan(namespace)
        if container is not None:
            known = {c for r in records if (r.controller or {}).get("uid") == juid
                     for c in r.containers + r.init_containers}
            if known and container not in known:
                raise BadRequest(f"container {container} is not valid for any pod of {kind} {name}: "
                                 f"choose one of: [{' '.join(sorted(known))}]")
        if not follow:
            live = await self._live_pods(namespace)
            for i, b in enumerate(job_blocks(records, juid, container)):
                text = read_log(b.path, tail=tail_lines)
                if text and not text.endswith("\n"):
                    text += "\n"
                yield ("\n" if i else "") + b.header(b.record.uid not in live) + text
            return
        async for chunk in self._follow_job(namespace, kind, name, juid, container, tail_lines):
            yield chunk

    async def _follow_job(self, namespace: str, kind: str, name: str, juid: str, container: str | None,
                          tail_lines: int | None) -> AsyncIterator[str]:
        offsets: dict[Path, int] = {}
        decoders: dict[Path, codecs.IncrementalDecoder] = {}
        current: Path | None = None
        at_line_start, anything, first_scan = True, False, True
        while True:
            live = await self._live_pods(namespace)
            done = await self._job_done(kind, namespace, name, juid, live)
            for b in job_blocks(self.records.scan(namespace), juid, container):
                new = b.path not in offsets
                if new:
                    offsets[b.path] = _tail_offset(b.path, tail_lines if first_scan else None)
                    decoders[b.path] = codecs.getincrementaldecoder("utf-8")(errors="replace")
                data = _read_from(b.path, offsets[b.path])
                offsets[b.path] += len(data)
                text = decoders[b.path].decode(data, final=done)
                if (new or text) and current != b.path:
                    sep = (("" if at_line_start else "\n") + "\n") if anything else ""
                    yield sep + b.header(b.record.uid not in live)
                    current, at_line_start, anything = b.path, True, True
                if text:
                    yield text
                    at_line_start = text.endswith("\n")
            first_scan = False
            if done:
                if not at_line_start:
                    yield "\n"
                return
            await asyncio.sleep(self.poll_interval)

    async def _live_pods(self, namespace: str) -> dict[str, dict]:
        pods = (await self.client.list("Pod", namespace)).items
        return {p["metadata"].get("uid", ""): p for p in pods}

    async def _job_done(self, kind: str, namespace: str, name: str, juid: str, live: dict[str, dict]) -> bool:
        """Nothing more will be written: the job is gone, or finished with none
        of its pods Pending or Running."""
        try:
            job = await self.client.get(kind, name, namespace)
        except NotFound:
            return True
        if (job.get("metadata") or {}).get("uid") != juid:
            return True
        if not _finished(job):
            return False
        return not any(controller_uid(p) == juid and (p.get("status") or {}).get("phase") in
                       (None, "", "Pending", "Running") for p in live.values())

    # ------------------------------------------------------------------ helpers

    def _container(self, pod: dict, container: str | None) -> str:
        spec = pod.get("spec") or {}
        names = [c.get("name", "") for c in spec.get("containers") or []]
        inits = [c.get("name", "") for c in spec.get("initContainers") or []]
        pname = pod["metadata"]["name"]
        if not container:
            if len(names) == 1:
                return names[0]
            default = ((pod.get("metadata") or {}).get("annotations") or {}).get(
                "kubectl.kubernetes.io/default-container")
            if isinstance(default, str) and default in names:
                return default
            if not names:
                raise BadRequest(f"no containers in pod {pname}")
            msg = f"a container name must be specified for pod {pname}, choose one of: [{' '.join(names)}]"
            if inits:
                msg += f" or one of the init containers: [{' '.join(inits)}]"
            raise BadRequest(msg)
        if container not in names and container not in inits:
            raise BadRequest(f"container {container} is not valid for pod {pname}")
        return container

    def _path(self, pod: dict, container: str | None, previous: bool) -> Path | None:
        cname = self._container(pod, container)
        meta = pod["metadata"]
        if not (pod.get("spec") or {}).get("nodeName"):
            return None
        ns = meta.get("namespace", "")
        try:
            current, prev = find_logs(self.state_dir, ns, meta["name"], cname, uid=meta.get("uid"))
        except ValueError as e:
            raise BadRequest(str(e)) from None
        if previous:
            if prev is None:
                prev = self._earlier_instance_log(ns, meta["name"], meta.get("uid", ""), cname)
            if prev is None:
                raise BadRequest(f'previous terminated container "{cname}" in pod "{meta["name"]}" not found')
            return prev
        if current is None:
            st = _find_status(pod, cname) or {}
            reason = ((st.get("state") or {}).get("waiting") or {}).get("reason") or "ContainerCreating"
            raise BadRequest(f'container "{cname}" in pod "{meta["name"]}" is waiting to start: {reason}')
        return current

    def _earlier_instance_log(self, namespace: str, name: str, uid: str, container: str) -> Path | None:
        """The last log of ``container`` in the newest earlier pod of that name."""
        records = self.records.scan(namespace, name)
        idx = next((i for i, r in enumerate(records) if r.uid == uid), len(records))
        for rec in reversed(records[:idx]):
            files = instance_logs(rec.dir / container)
            if files:
                return files[-1]
        return None

    def _deleted_path(self, namespace: str, name: str, container: str | None, previous: bool) -> Path:
        """A deleted pod's log from disk: its newest instance of that name."""
        records = self.records.scan(namespace, name)
        if not records:
            raise NotFound("pods", name)
        cname = self._container(records[-1].as_pod(), container)
        current = instance_logs(records[-1].dir / cname)
        if not previous:
            if not current:
                raise BadRequest(f'container "{cname}" in pod "{name}" never started before the pod was deleted')
            return current[-1]
        history = [p for r in records for p in instance_logs(r.dir / cname)]
        earlier = history[:-1] if current else history
        if not earlier:
            raise BadRequest(f'previous terminated container "{cname}" in pod "{name}" not found')
        return earlier[-1]


def _find_status(pod: dict, container: str) -> dict | None:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for st in status.get(key) or []:
            if isinstance(st, dict) and st.get("name") == container:
                return st
    return None
