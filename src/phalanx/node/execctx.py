"""Exec contexts: what ``phalanx exec`` needs to run a command in a running container.

When the runtime starts a container instance it writes ``exec.json`` (0600,
atomically) into the container's directory: the instance's environment,
working directory, pid and start ticks, container ID and restart count. A
command exec'd "into" the container runs with that environment and working
directory; it registers itself in ``exec.d/<pid>.json`` first, and the
runtime kills the registered processes when the container ends, as the
processes of ``kubectl exec`` die with their container. Everything is on disk:
no API server is needed, so it works from inside a pod's process.
"""
from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import psutil

from phalanx.node import instancefiles as files
from phalanx.node.home import phalanx_home
from phalanx.node.podrecords import PodRecord, PodRecords
from phalanx.node.shim import start_ticks
from phalanx.node.volumes import ROOT_DIR, ROOT_ENV
from phalanx.objects.errors import BadRequest

CONTEXT_FILE = "exec.json"
EXEC_DIR = "exec.d"
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"


@dataclass(frozen=True)
class ExecContext:
    """One running instance of a container, as ``exec.json`` records it."""

    namespace: str
    pod: str
    uid: str
    container: str
    container_id: str
    restart_count: int
    pid: int
    start_ticks: int
    cwd: str
    env: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "pod": self.pod, "uid": self.uid, "container": self.container,
                "containerID": self.container_id, "restartCount": self.restart_count, "pid": self.pid,
                "startTicks": self.start_ticks, "cwd": self.cwd, "env": dict(self.env)}

    @staticmethod
    def from_json(d: Any) -> ExecContext | None:
        if not isinstance(d, dict):
            return None
        env = d.get("env")
        ints = [v for k in ("restartCount", "pid", "startTicks")
                if isinstance(v := d.get(k), int) and not isinstance(v, bool)]
        strs = [v for k in ("namespace", "pod", "uid", "container", "containerID", "cwd") if isinstance(v := d.get(k), str)]
        if not isinstance(env, dict) or len(strs) != 6 or len(ints) != 3:
            return None
        return ExecContext(strs[0], strs[1], strs[2], strs[3], strs[4], ints[0], ints[1], ints[2], strs[5],
                           {str(k): str(v) for k, v in env.items()})


def context_path(container_dir: Path) -> Path:
    return Path(container_dir) / CONTEXT_FILE


def write_context(container_dir: Path, ctx: ExecContext) -> Path:
    """Replace the container's context file atomically, readable by its owner only."""
    path = context_path(container_dir)
    _write_private(path, ctx.to_json())
    return path


def read_context(container_dir: Path) -> ExecContext | None:
    return ExecContext.from_json(files.read_json(context_path(container_dir)))


def remove_context(container_dir: Path, container_id: str | None = None) -> None:
    """Drop the context file (only if it names ``container_id``, when given)."""
    path = context_path(container_dir)
    if container_id is not None:
        ctx = read_context(container_dir)
        if ctx is not None and ctx.container_id != container_id:
            return
    try:
        path.unlink()
    except OSError:
        pass


def process_alive(pid: int, ticks: int) -> bool:
    """``pid`` is still the process that started at ``ticks`` and has not exited (zombie)."""
    if pid <= 0 or not ticks:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        state = data[data.rindex(b")") + 2:][:1]
    except (OSError, ValueError):
        return False
    return state not in (b"Z", b"X") and start_ticks(pid) == ticks


def instance_running(container_dir: Path, ctx: ExecContext) -> bool:
    """The instance the context describes is running: no exit recorded, its process alive."""
    status = files.read_json(files.status_path(Path(container_dir) / f"{ctx.restart_count}.log")) or {}
    if "exitCode" in status or "startError" in status:
        return False
    return process_alive(ctx.pid, ctx.start_ticks)


def running_context(container_dir: Path) -> ExecContext | None:
    """The context of the container's running instance, None when it runs none."""
    ctx = read_context(container_dir)
    return ctx if ctx is not None and instance_running(container_dir, ctx) else None


# --------------------------------------------------------------------------- exec'd processes


def register_exec(container_dir: Path, pid: int, container_id: str) -> Path:
    """Record ``pid`` (this process, about to exec) as run in the container."""
    d = Path(container_dir) / EXEC_DIR
    d.mkdir(mode=0o700, exist_ok=True)
    for stale in _registered(d):
        if not process_alive(stale[0], stale[1]):
            _unlink(stale[3])
    path = d / f"{pid}.json"
    _write_private(path, {"pid": pid, "startTicks": start_ticks(pid), "containerID": container_id})
    return path


def _registered(d: Path) -> list[tuple[int, int, str, Path]]:
    """(pid, start ticks, container ID, file) of every registration."""
    out = []
    try:
        entries = list(d.iterdir())
    except OSError:
        return []
    for p in entries:
        rec = files.read_json(p) if p.suffix == ".json" else None
        if rec is None:
            continue
        pid, ticks, cid = rec.get("pid"), rec.get("startTicks"), rec.get("containerID")
        if isinstance(pid, int) and isinstance(ticks, int) and isinstance(cid, str):
            out.append((pid, ticks, cid, p))
    return out


def exec_roots(container_dir: Path, container_id: str | None = None) -> list[psutil.Process]:
    """The live processes exec'd into the container (those of ``container_id``
    only, when given)."""
    return _live_roots(_registered(Path(container_dir) / EXEC_DIR), container_id)


def _live_roots(registered: list[tuple[int, int, str, Path]], container_id: str | None) -> list[psutil.Process]:
    out: list[psutil.Process] = []
    for pid, ticks, cid, _ in registered:
        if (container_id is None or cid == container_id) and process_alive(pid, ticks):
            try:
                out.append(psutil.Process(pid))
            except psutil.Error:
                continue
    return out


def with_descendants(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    """Each process followed by its descendants (as they are now)."""
    out: list[psutil.Process] = []
    for p in procs:
        out.append(p)
        try:
            out.extend(p.children(recursive=True))
        except psutil.Error:
            pass
    return out


def signal_processes(procs: Iterable[psutil.Process], sig: int) -> int:
    """Signal processes found earlier, sparing a pid reused since; how many were signalled."""
    n = 0
    for p in procs:
        try:
            if p.is_running():
                p.send_signal(sig)
                n += 1
        except psutil.Error:
            pass
    return n


def kill_execs(container_dir: Path, container_id: str | None = None,
               also: Iterable[psutil.Process] = ()) -> int:
    """SIGKILL what was exec'd into the container (and ``also``, found earlier),
    and forget the registrations. The container is gone: so are they."""
    registered = _registered(Path(container_dir) / EXEC_DIR)  # one listing: most containers have none
    procs = with_descendants(_live_roots(registered, container_id))
    n = signal_processes([*procs, *also], signal.SIGKILL)
    for pid, ticks, cid, path in registered:
        if container_id is None or cid == container_id or not process_alive(pid, ticks):
            _unlink(path)
    return n


def forget_container(container_dir: Path) -> None:
    """Kill what was exec'd into the container; drop its context and registrations."""
    kill_execs(container_dir)
    remove_context(container_dir)
    try:
        (Path(container_dir) / EXEC_DIR).rmdir()
    except OSError:
        pass


# --------------------------------------------------------------------------- finding a pod's container


class ExecTargetError(Exception):
    """The target of an exec cannot be used (now); ``final``: waiting cannot help."""

    def __init__(self, message: str, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


def default_home(environ: dict[str, str] | None = None) -> Path:
    """``PHALANX_HOME``; inside a pod, the home its ``PHALANX_ROOT`` lives in;
    else the default home."""
    env = os.environ if environ is None else environ
    if env.get("PHALANX_HOME"):
        return Path(env["PHALANX_HOME"]).expanduser()
    root = env.get(ROOT_ENV)
    if root:
        r = Path(root)
        if r.name == ROOT_DIR and r.parent.parent.name == "pods":
            return r.parent.parent.parent
    return phalanx_home()


def choose_container(rec: PodRecord, container: str | None) -> tuple[str, str | None]:
    """(container, note): ``container``, else the default-container annotation,
    else the first container, with kubectl's note when there was a choice."""
    names = list(rec.containers)
    inits = list(rec.init_containers)
    if container:
        if container not in names and container not in inits:
            raise ExecTargetError(f"container {container} is not valid for pod {rec.name}", final=True)
        return container, None
    if rec.default_container and rec.default_container in names:
        return rec.default_container, None
    if not names:  # a directory without its record, no container started yet
        raise ExecTargetError(f"pod {rec.name} not found on this machine")
    note = None
    if len(names) > 1 or inits:
        listed = ", ".join(names + [f"{c} (init)" for c in inits])
        note = f'Defaulted container "{names[0]}" out of: {listed}'
    return names[0], note


@dataclass(frozen=True)
class ExecTarget:
    container_dir: Path
    context: ExecContext
    note: str | None = None


def locate(home: Path, namespace: str, name: str, container: str | None = None) -> ExecTarget:
    """The running instance of the pod's container on this machine (the newest
    pod of that name that runs it), or ExecTargetError in kubectl's words."""
    records = PodRecords(home).scan(namespace, name)
    if not records:
        raise ExecTargetError(f"pod {name} not found on this machine")
    cname, note = choose_container(records[-1], container)
    for rec in reversed(records):
        cdir = rec.dir / cname
        ctx = running_context(cdir)
        if ctx is not None:
            return ExecTarget(cdir, ctx, note)
    raise ExecTargetError(f"unable to exec: container {cname} of pod {name} is not running")


class LocalExecProvider:
    """The API server's exec provider for the local runtime: a ``kubectl exec``
    command runs as ``phalanx exec`` would run it (``exec_command`` is that
    command's argv up to the pod, e.g. ``python -m phalanx.cli.execcmd --home H``)."""

    def __init__(self, home: Path, exec_command: Sequence[str]) -> None:
        self.home = Path(home)
        self.exec_command = list(exec_command)

    def command(self, namespace: str, pod: str, container: str, argv: Sequence[str]) -> list[str]:
        """The argv running ``argv`` in the pod's running ``container``; BadRequest
        in the kubelet's words when it does not run on this machine now."""
        try:
            locate(self.home, namespace, pod, container)
        except ExecTargetError:
            raise BadRequest(f'unable to upgrade connection: container not found ("{container}")') from None
        return [*self.exec_command, "-n", namespace, "-c", container, pod, "--", *argv]


def pod_running(home: Path, namespace: str, name: str) -> bool:
    """Some regular container of a pod of that name runs on this machine."""
    for rec in PodRecords(home).scan(namespace, name):
        if any(running_context(rec.dir / c) is not None for c in rec.containers):
            return True
    return False


# --------------------------------------------------------------------------- helpers


def _write_private(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(json.dumps(data, sort_keys=True).encode())
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
