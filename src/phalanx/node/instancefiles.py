"""What a container instance leaves on disk, so a restarted agent finds it again.

Next to each instance's log (``<pod dir>/<container>/<restartCount>.log``):

- ``<n>.pid``: the instance record, written by the runtime before the shim
  starts (node, pod, uid, container, restartCount, backoffCount,
  containerID, memory limit, cgroup, GPUs). The shim holds a ``flock`` on
  it for as long as it lives: a held lock is a live shim, whatever became of
  its pid.
- ``<n>.status``: written by the shim (``shim.py``), atomically: the
  container's pid and start, then its exit code and end.
- ``<n>.oom``: present when the agent's memory watchdog killed the instance.

Nothing here runs processes; the runtime decides what to do with what it reads.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

RECORD_SUFFIX = ".pid"
STATUS_SUFFIX = ".status"
OOM_SUFFIX = ".oom"


def record_path(log_path: Path) -> Path:
    return log_path.with_suffix(RECORD_SUFFIX)


def status_path(log_path: Path) -> Path:
    return log_path.with_suffix(STATUS_SUFFIX)


def oom_path(log_path: Path) -> Path:
    return log_path.with_suffix(OOM_SUFFIX)


class InstanceBusy(RuntimeError):
    """A live shim still runs this instance: it must not be started again."""


def open_locked_record(path: Path, record: dict[str, Any]) -> int:
    """Write ``record`` to ``path`` under an exclusive flock and return the
    (close-on-exec) descriptor holding it, for the shim to inherit.
    InstanceBusy when a live shim holds the lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InstanceBusy(f"{path} is held by a running shim") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record, sort_keys=True) + "\n").encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def shim_alive(path: Path) -> bool:
    """Whether a shim holds the record's lock (False when there is no record)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError as e:
        return e.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)  # releases our probe lock, if we got it


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``; None when missing or unreadable."""
    try:  # os-level: a status file is read on every exit, on the event loop
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(fd)
        data = json.loads(b"".join(chunks))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class FoundInstance:
    """One instance record found on disk."""

    path: Path  # the <n>.pid file
    restart_count: int
    record: dict[str, Any]

    @property
    def log_path(self) -> Path:
        return self.path.with_suffix(".log")

    @property
    def uid(self) -> str:
        return str(self.record.get("uid") or "")

    @property
    def container(self) -> str:
        return str(self.record.get("container") or "")

    @property
    def legacy(self) -> bool:
        """A pid file of the runtime before shims (pid + createTime only)."""
        return "uid" not in self.record


def scan(state_dir: Path, node: str) -> Iterator[FoundInstance]:
    """Every instance record of ``node`` under ``<state_dir>/pods``. Other
    nodes' agents share the directory: their records are skipped."""
    base = Path(state_dir) / "pods"
    if not base.is_dir():
        return
    for path in sorted(base.glob(f"*/*/*{RECORD_SUFFIX}")):
        if not path.stem.isdigit():
            continue
        record = read_json(path)
        if record is None or record.get("node", "") != node:
            continue
        yield FoundInstance(path, int(path.stem), record)


def remove_instance_files(log_path: Path) -> None:
    """Drop an instance's record, status and OOM mark (its log stays)."""
    for p in (record_path(log_path), status_path(log_path), oom_path(log_path)):
        try:
            p.unlink()
        except OSError:
            pass
