"""Resource limits for container processes: cgroups when permitted, else a watchdog.

Modes (``AgentConfig.cgroups``):

- ``"auto"`` (default): cgroup v2 when this process's cgroup is delegated to it
  (writable, memory controller available); otherwise the RSS watchdog.
- ``"v1"``: like auto, and also the cgroup v1 ``memory``/``cpu`` hierarchies when
  writable. Not the default: creating groups inside a v1 hierarchy that another
  manager (systemd, a container runtime) owns is intrusive.
- ``"off"``: watchdog only.

Memory over the limit ends the container with SIGKILL, reported as exit 137,
reason ``OOMKilled``; the watchdog counts what a cgroup could not reclaim
(anonymous and shared-memory pages, not mapped files: ``charged_rss``). CPU
limits are best effort: ``cpu.max`` (v2) or ``cpu.cfs_quota_us`` (v1) when a
cgroup is in use, otherwise not enforced.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import psutil

from phalanx.objects.quantity import parse_quantity

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class Limits:
    memory: int | None = None  # bytes
    cpu: float | None = None  # cores

    @property
    def any(self) -> bool:
        return self.memory is not None or self.cpu is not None


def container_limits(container: Mapping[str, Any]) -> Limits:
    """limits.memory / limits.cpu of a container (unparseable values are ignored:
    admission has validated them)."""
    lim = (container.get("resources") or {}).get("limits") or {}
    mem = cpu = None
    try:
        if lim.get("memory") is not None:
            mem = int(parse_quantity(lim["memory"]))
    except ValueError:
        mem = None
    try:
        if lim.get("cpu") is not None:
            cpu = float(parse_quantity(lim["cpu"]))
    except ValueError:
        cpu = None
    return Limits(memory=mem if mem and mem > 0 else None, cpu=cpu if cpu and cpu > 0 else None)


# --------------------------------------------------------------------------- cgroups


class Cgroup:
    """One container's cgroup (v2: one directory; v1: one per controller)."""

    def __init__(self, version: int, dirs: list[Path], memory_dir: Path | None) -> None:
        self.version = version
        self.dirs = dirs
        self.memory_dir = memory_dir

    def join(self) -> None:
        """Move the calling process in. Runs in the child before exec (preexec_fn),
        so the limit holds from the first instruction: no race."""
        pid = str(os.getpid()).encode()
        for d in self.dirs:
            fd = os.open(str(d / "cgroup.procs"), os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def oom_killed(self) -> bool:
        """Whether the kernel OOM-killed a process of this group."""
        if self.memory_dir is None:
            return False
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (self.memory_dir / name).read_text()
        except OSError:
            return False
        m = re.search(r"^oom_kill (\d+)", text, re.M)
        return bool(m and int(m.group(1)) > 0)

    def remove(self) -> None:
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                pass


class CgroupDriver:
    """Creates per-container cgroups below ``<own cgroup>/phalanx``."""

    def __init__(self, version: int, parents: dict[str, Path]) -> None:
        self.version = version
        self.parents = parents  # controller ("memory", "cpu", or "" for v2) -> parent dir

    def create(self, name: str, limits: Limits) -> Cgroup | None:
        """A cgroup with ``limits`` written, or None when the kernel refuses."""
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name in (".", ".."):
            raise ValueError(f"invalid cgroup name {name!r}")
        made: list[Path] = []
        try:
            if self.version == 2:
                d = self.parents[""] / name
                d.mkdir(exist_ok=True)
                made.append(d)
                if limits.memory is not None:
                    (d / "memory.max").write_text(str(limits.memory))
                    _try_write(d / "memory.swap.max", "0")
                if limits.cpu is not None:
                    _try_write(d / "cpu.max", f"{max(1000, int(limits.cpu * CPU_PERIOD_US))} {CPU_PERIOD_US}")
                return Cgroup(2, made, d if limits.memory is not None else None)
            memory_dir = None
            if limits.memory is not None and "memory" in self.parents:
                d = self.parents["memory"] / name
                d.mkdir(exist_ok=True)
                made.append(d)
                (d / "memory.limit_in_bytes").write_text(str(limits.memory))
                _try_write(d / "memory.memsw.limit_in_bytes", str(limits.memory))
                memory_dir = d
            if limits.cpu is not None and "cpu" in self.parents:
                d = self.parents["cpu"] / name
                d.mkdir(exist_ok=True)
                made.append(d)
                _try_write(d / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                _try_write(d / "cpu.cfs_quota_us", str(max(1000, int(limits.cpu * CPU_PERIOD_US))))
            return Cgroup(1, made, memory_dir) if made else None
        except OSError as e:
            log.info("cgroup %s not usable (%s); using the watchdog", name, e)
            for d in reversed(made):
                try:
                    d.rmdir()
                except OSError:
                    pass
            return None

    @property
    def enforces_memory(self) -> bool:
        return self.version == 2 or "memory" in self.parents


def _try_write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError:
        pass


def _own_cgroups(proc_cgroup: str) -> dict[str, str]:
    """Parse /proc/self/cgroup: controller -> path ("" for the v2 unified line)."""
    out: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def detect_cgroups(mode: str = "auto", root: Path = CGROUP_ROOT,
                   proc_cgroup: str | None = None) -> CgroupDriver | None:
    """A driver when this process may create child cgroups, else None."""
    if mode == "off":
        return None
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    own = _own_cgroups(proc_cgroup)
    # cgroup v2: unified hierarchy mounted at root (pure v2) or root/unified (hybrid).
    if "" in own:
        for base in (root, root / "unified"):
            if (base / "cgroup.controllers").exists():
                drv = _setup_v2(base / own[""].lstrip("/"))
                if drv:
                    return drv
                break
    if mode != "v1":
        return None
    parents: dict[str, Path] = {}
    for controller in ("memory", "cpu"):
        mount = root / controller
        if controller not in own or not (mount / "cgroup.procs").exists():
            continue
        parent = mount / own[controller].lstrip("/") / "phalanx"
        try:
            parent.mkdir(exist_ok=True)
            if not os.access(parent, os.W_OK):
                continue
        except OSError:
            continue
        parents[controller] = parent
    return CgroupDriver(1, parents) if parents else None


def _setup_v2(own_dir: Path) -> CgroupDriver | None:
    try:
        available = (own_dir / "cgroup.controllers").read_text().split()
        if "memory" not in available or not os.access(own_dir, os.W_OK):
            return None
        parent = own_dir / "phalanx"
        parent.mkdir(exist_ok=True)
        # Controllers must be enabled top-down; a cgroup with processes cannot
        # enable them for its children (no internal processes), so this fails
        # unless the agent's cgroup was delegated to it properly.
        wanted = [c for c in ("memory", "cpu") if c in available]
        (own_dir / "cgroup.subtree_control").write_text(" ".join("+" + c for c in wanted))
        (parent / "cgroup.subtree_control").write_text(" ".join("+" + c for c in wanted))
        return CgroupDriver(2, {"": parent})
    except OSError as e:
        log.info("cgroup v2 not delegated to this process (%s); using the watchdog", e)
        return None


# --------------------------------------------------------------------------- watchdog


def charged_rss(status: str) -> int | None:
    """The resident memory a memory cgroup could not reclaim, in bytes, from the
    text of ``/proc/PID/status``: ``RssAnon`` + ``RssShmem``. ``RssFile`` (mapped
    files: shared libraries, mmapped data) is left out: under its limit a cgroup
    drops clean file pages before it kills anything, and here the same library
    pages are shared by every container and the host (torch's CUDA wheel maps
    hundreds of MB of them per process). None when the kernel gives no breakdown."""
    fields: dict[str, int] = {}
    for line in status.splitlines():
        key, _, rest = line.partition(":")
        if key in ("RssAnon", "RssShmem"):
            value = rest.split()
            if len(value) != 2 or value[1] != "kB" or not value[0].isdigit():
                return None
            fields[key] = int(value[0]) * 1024
    if len(fields) != 2:
        return None
    return fields["RssAnon"] + fields["RssShmem"]


def process_rss(proc: psutil.Process) -> int:
    """One process's unreclaimable resident memory (``charged_rss``); its whole
    RSS on a kernel without the breakdown (before 4.5)."""
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            charged = charged_rss(f.read())
    except OSError:
        charged = None
    return proc.memory_info().rss if charged is None else charged


def tree_rss(pid: int) -> int:
    """Unreclaimable resident memory (``process_rss``) of a process and all its
    descendants, in bytes."""
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return 0
    total = 0
    for p in procs:
        try:
            total += process_rss(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


def over_limit(pid: int, limit: int, rss: Callable[[int], int] = tree_rss) -> bool:
    return rss(pid) > limit
