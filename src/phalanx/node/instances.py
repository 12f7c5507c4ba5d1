"""A container instance as the node's container runtime tracks it (``Instance``, its shim, its record).

Also the process helpers every part of that runtime shares: signals that spare a reused pid, exec errors.
"""
from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psutil

from phalanx.node import execctx
from phalanx.node import instancefiles as files
from phalanx.node.limits import Cgroup
from phalanx.node.podstate import Termination
from phalanx.node.shim import start_ticks
from phalanx.objects.clock import Clock

Obj = dict[str, Any]

CANNOT_RUN_EXIT_CODE = 128
SHIM_LOST_MESSAGE = "The container's shim ended without recording how the container exited"


def exit_code_of(returncode: int) -> int:
    """asyncio's returncode (-N when killed by signal N) as a container exit code."""
    return 128 - returncode if returncode < 0 else returncode


@dataclass
class ForkedShim:
    """A shim the fork server forked: not our child, so no exit status of its
    own to wait for; a pidfd (when the kernel has them) says when it is gone."""

    pid: int
    pidfd: int | None = None

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def kill(self, record: Path) -> None:
        """SIGKILL it, if it still runs (holds the record's lock: the pid is still its)."""
        if not files.shim_alive(record):
            return
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass


@dataclass
class Instance:
    """One run of a container."""

    container: str
    container_id: str
    restart_count: int
    backoff_count: int
    log_path: Path
    started_at: datetime | None = None
    termination: Termination | None = None
    pid: int | None = None
    start_ticks: int = 0  # the container's start in clock ticks: pid + ticks name it for good
    memory_limit: int | None = None
    cgroup: Cgroup | None = None
    watchdog: bool = False
    oom: bool = False
    adopted: bool = False  # run by a shim this runtime did not start: watched by polling
    gpus: list[int] | None = None
    exec_context: bool | None = None  # its exec.json: written by us, never written, or unknown (adopted)
    shim: subprocess.Popen[bytes] | ForkedShim | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    waiter: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.started_at is not None and self.termination is None


@dataclass
class ContainerRecord:
    """A container of a pod: its current instance and how the one before ended."""

    current: Instance
    last_termination: Termination | None = None


def from_wall(clock: Clock, ts: Any) -> datetime:
    """A wall-clock time a shim recorded, in ``clock``'s time."""
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        return clock.now()
    if type(clock).now is Clock.now:
        return datetime.fromtimestamp(ts, timezone.utc)
    return clock.now() - timedelta(seconds=time.time() - ts)


def int_field(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def gpu_list(v: Any) -> list[int] | None:
    """CUDA_VISIBLE_DEVICES ("0,1") or a stored list, as device indices."""
    if isinstance(v, list):
        return [d for d in v if isinstance(d, int) and not isinstance(d, bool)]
    if not isinstance(v, str):
        return None
    return [int(p) for p in v.split(",") if p.strip().isdigit()]


def cgroup_record(cg: Cgroup | None) -> Obj | None:
    """A cgroup as the instance record stores it."""
    if cg is None:
        return None
    return {"version": cg.version, "dirs": [str(d) for d in cg.dirs],
            "memoryDir": str(cg.memory_dir) if cg.memory_dir is not None else None}


def cgroup_from(v: Any) -> Cgroup | None:
    """The cgroup an instance record names, if any."""
    if not isinstance(v, dict) or not isinstance(v.get("dirs"), list):
        return None
    dirs = [Path(d) for d in v["dirs"] if isinstance(d, str)]
    mem = v.get("memoryDir")
    return Cgroup(int_field(v.get("version")) or 2, dirs, Path(mem) if isinstance(mem, str) else None)


def in_cgroup(cgroup: Cgroup, pid: int) -> bool:
    for d in cgroup.dirs:
        try:
            if str(pid) not in (d / "cgroup.procs").read_text().split():
                return False
        except OSError:
            return False
    return True


def pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def same_process(inst: Instance) -> bool:
    """The instance's pid still names its container (not a reused pid)."""
    if inst.pid is None:
        return False
    return not inst.start_ticks or start_ticks(inst.pid) == inst.start_ticks


def refresh_pid(inst: Instance) -> None:
    """The container's pid and start from the shim's status file, when it has them."""
    status = files.read_json(files.status_path(inst.log_path)) or {}
    if isinstance(status.get("pid"), int):
        inst.pid = status["pid"]
        inst.start_ticks = int(status.get("startTicks") or 0)


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def signal_process(proc: psutil.Process, sig: int) -> None:
    """Signal a process found earlier, unless its pid now belongs to another."""
    try:
        if proc.is_running():
            proc.send_signal(sig)
    except psutil.Error:
        pass


def kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def killpg(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_recorded(status: Obj | None) -> None:
    """SIGKILL the group of a container whose shim is gone, if it is still that process."""
    if not status or not isinstance(status.get("pid"), int):
        return
    pid, ticks = status["pid"], status.get("startTicks")
    if isinstance(ticks, int) and ticks and start_ticks(pid) == ticks:
        killpg(pid, signal.SIGKILL)


def end_execs(inst: Instance) -> None:
    """The container is gone: so is what was exec'd into it (see execctx)."""
    cdir = inst.log_path.parent
    execctx.kill_execs(cdir, inst.container_id)
    if inst.exec_context is not False:  # else no exec.json names this instance
        execctx.remove_context(cdir, inst.container_id)


async def wait_all(insts: list[Instance], timeout: float) -> None:
    if not insts:
        return
    tasks = [asyncio.create_task(i.done.wait()) for i in insts]
    _, pending = await asyncio.wait(tasks, timeout=timeout)
    for t in pending:
        t.cancel()


def exec_error(argv0: str, e: BaseException, step: str = "exec") -> str:
    """Say why exec failed, in the words of runc."""
    if step and step not in ("exec", "setsid", "signals", "cgroup"):
        return f"{step}: {getattr(e, 'strerror', None) or e}"
    if isinstance(e, FileNotFoundError):
        if "/" in argv0:
            return f'exec: "{argv0}": stat {argv0}: no such file or directory'
        return f'exec: "{argv0}": executable file not found in $PATH'
    if isinstance(e, PermissionError):
        return f'exec: "{argv0}": permission denied'
    if isinstance(e, OSError) and e.errno == errno.ENOEXEC:
        return f'exec: "{argv0}": exec format error'
    return f'exec: "{argv0}": {getattr(e, "strerror", None) or e}'
