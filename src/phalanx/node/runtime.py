"""The process runtime: a pod's containers as host processes.

A container instance is ``command + args`` exec'd as argv (never through a
shell string we build) in its own session/process group, with the pod's
directory as working directory, stdout+stderr appended to its own log file, a
minimal environment plus the container's ``env``, and its limits (cgroup or
RSS watchdog). When the first process of the group exits, the rest of the
group is killed, as a container's processes die with its init process.
Exit codes follow container runtimes: killed by signal N -> 128+N.
"""
from __future__ import annotations

import asyncio
import ctypes
import errno
import json
import logging
import os
import secrets
import signal
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping

import psutil

from ..clock import Clock
from . import limits as limits_mod
from .env import ContainerConfigError, NoCommandError, PodContext, container_argv, container_env
from .limits import Cgroup, CgroupDriver, Limits, container_limits
from .logs import container_log_path, mark_pod_finished, pod_dir, record_pod
from .podstate import CONTAINER_CANNOT_RUN, OOM_KILLED, ContainerObservation, Termination

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
CANNOT_RUN_EXIT_CODE = 128
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PR_SET_PDEATHSIG = 1

try:
    _libc: Any = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - non-glibc platforms
    _libc = None


def exit_code_of(returncode: int) -> int:
    """asyncio's returncode (-N when killed by signal N) as a container exit code."""
    return 128 - returncode if returncode < 0 else returncode


def base_env(hostname: str, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The few host variables a program needs; not the agent's whole environment."""
    src = os.environ if source is None else source
    env = {"PATH": src.get("PATH") or DEFAULT_PATH, "HOME": src.get("HOME") or "/",
           "LANG": src.get("LANG") or "C.UTF-8"}
    if src.get("TMPDIR"):
        env["TMPDIR"] = src["TMPDIR"]
    env["HOSTNAME"] = hostname
    return env


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
    memory_limit: int | None = None
    cgroup: Cgroup | None = None
    watchdog: bool = False
    oom: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
    waiter: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.started_at is not None and self.termination is None


@dataclass
class _Record:
    current: Instance
    last_termination: Termination | None = None


class ProcessRuntime:
    """Starts, watches and kills container processes; reports observations.

    ``on_exit(uid)`` is called (in the event loop) whenever an instance ends.
    """

    def __init__(
        self,
        state_dir: Path,
        clock: Clock,
        *,
        node_name: str = "",
        cgroups: str = "auto",
        oom_poll_interval: float = 0.1,
        on_exit: Callable[[str], None] | None = None,
        cgroup_driver: CgroupDriver | None = None,
        host_env: Mapping[str, str] | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.node_name = node_name
        self.oom_poll_interval = oom_poll_interval
        self.on_exit = on_exit
        self.cgroups = cgroup_driver if cgroup_driver is not None else limits_mod.detect_cgroups(cgroups)
        self.host_env = host_env
        self._pods: dict[str, dict[str, _Record]] = {}
        self._watchdog_task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ queries

    def observe(self, uid: str) -> dict[str, ContainerObservation]:
        out: dict[str, ContainerObservation] = {}
        for name, rec in self._pods.get(uid, {}).items():
            cur = rec.current
            out[name] = ContainerObservation(
                name=name, container_id=cur.container_id, started_at=cur.started_at,
                terminated=cur.termination, last_termination=rec.last_termination,
                restart_count=cur.restart_count, backoff_count=cur.backoff_count)
        return out

    def seed(self, pod: Obj, observations: Mapping[str, ContainerObservation]) -> None:
        """Take over what a previous agent reported (see podstate.observations_from_status)
        for a pod this runtime has no record of."""
        meta = pod["metadata"]
        uid = meta["uid"]
        if uid in self._pods:
            return
        records: dict[str, _Record] = {}
        for name, o in observations.items():
            log_path = container_log_path(self.state_dir, meta.get("namespace") or "default", meta["name"],
                                          uid, name, o.restart_count)
            inst = Instance(container=name, container_id=o.container_id, restart_count=o.restart_count,
                            backoff_count=o.backoff_count, log_path=log_path, started_at=o.started_at,
                            termination=o.terminated)
            inst.done.set()
            records[name] = _Record(inst, o.last_termination)
        self._pods[uid] = records

    def instances(self, uid: str) -> dict[str, Instance]:
        return {n: r.current for n, r in self._pods.get(uid, {}).items()}

    def any_running(self, uid: str) -> bool:
        return any(r.current.running for r in self._pods.get(uid, {}).values())

    def pods(self) -> list[str]:
        return list(self._pods)

    # ------------------------------------------------------------------ start

    async def start(self, pod: Obj, container_name: str, *, backoff_count: int = 0, pod_ip: str = "",
                    host_ip: str = "127.0.0.1", extra_env: Mapping[str, str] | None = None,
                    node_allocatable: Mapping[str, str] | None = None) -> Instance:
        """Start a new instance of a container (the first, or a restart)."""
        meta = pod["metadata"]
        ns, name, uid = meta.get("namespace") or "default", meta["name"], meta["uid"]
        container, path = _find_container(pod, container_name)
        if uid not in self._pods:
            self._record_pod(pod)
        records = self._pods.setdefault(uid, {})
        prev = records.get(container_name)
        if prev is not None and prev.current.termination is None and prev.current.started_at is not None:
            raise RuntimeError(f"container {container_name} of pod {ns}/{name} is still running")
        if prev is None:
            restart_count = 0
        elif prev.current.started_at is None and prev.current.termination is None:
            restart_count = prev.current.restart_count  # seeded, never started here
        else:
            restart_count = prev.current.restart_count + 1
        log_path = container_log_path(self.state_dir, ns, name, uid, container_name, restart_count)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        inst = Instance(container=container_name, container_id="phalanx://" + secrets.token_hex(32),
                        restart_count=restart_count, backoff_count=backoff_count, log_path=log_path)
        records[container_name] = _Record(inst, prev.current.termination if prev else None)

        ctx = PodContext(pod_ip=pod_ip, host_ip=host_ip, node_allocatable=node_allocatable)
        try:
            env_list = container_env(pod, container, ctx, path)
            argv = container_argv(container, dict(env_list), path)
        except NoCommandError as e:
            self._fail_start(inst, CONTAINER_CANNOT_RUN, str(e), permanent=True)
            return inst
        except ContainerConfigError as e:
            self._fail_start(inst, CREATE_CONTAINER_CONFIG_ERROR, str(e), permanent=True)
            return inst

        env = base_env(name, self.host_env)
        env.update(extra_env or {})
        env.update(env_list)
        cwd = self._working_dir(container, pod_dir(self.state_dir, ns, name, uid))
        lim = container_limits(container)
        inst.memory_limit = lim.memory
        cgroup = self._make_cgroup(f"{ns}_{name}_{uid}_{container_name}_{restart_count}", lim)

        def preexec() -> None:  # runs in the child between fork and exec
            if _libc is not None:
                _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if cgroup is not None:
                try:
                    cgroup.join()
                except OSError:
                    pass  # checked by the parent: the watchdog takes over

        logf = open(log_path, "ab", buffering=0)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env, cwd=str(cwd),
                start_new_session=True, preexec_fn=preexec)
        except (OSError, subprocess.SubprocessError) as e:
            if cgroup is not None:
                cgroup.remove()
            self._fail_start(inst, CONTAINER_CANNOT_RUN, _exec_error(argv[0], e), permanent=False, logf=logf)
            return inst
        finally:
            logf.close()
        inst.pid = proc.pid
        inst.started_at = self.clock.now()
        if cgroup is not None and not _in_cgroup(cgroup, proc.pid):
            cgroup.remove()
            cgroup = None
        inst.cgroup = cgroup
        enforced = cgroup is not None and cgroup.memory_dir is not None
        inst.watchdog = lim.memory is not None and not enforced
        self._write_pidfile(inst)
        inst.waiter = asyncio.create_task(self._wait(uid, inst, proc), name=f"wait-{name}-{container_name}")
        if inst.watchdog:
            self._ensure_watchdog()
        log.info("started %s/%s container %s (pid %s): %s", ns, name, container_name, proc.pid, argv)
        return inst

    def _record_pod(self, pod: Obj) -> None:
        """The pod's record next to its logs, so they outlive the pod object (see podrecords)."""
        try:
            record_pod(self.state_dir, pod, self.clock.now(), self.node_name)
        except (OSError, ValueError) as e:
            log.warning("cannot record pod %s: %s", pod["metadata"].get("name"), e)

    def _fail_start(self, inst: Instance, reason: str, message: str, *, permanent: bool,
                    logf: Any = None) -> None:
        now = self.clock.now()
        inst.termination = Termination(exit_code=CANNOT_RUN_EXIT_CODE, finished_at=now, started_at=now,
                                       reason=reason, message=message, container_id=inst.container_id,
                                       permanent=permanent)
        try:
            if logf is not None and not logf.closed:
                logf.write(f"{reason}: {message}\n".encode())
            else:
                with open(inst.log_path, "ab") as f:
                    f.write(f"{reason}: {message}\n".encode())
        except OSError:
            pass
        inst.done.set()
        log.info("container %s could not start: %s: %s", inst.container, reason, message)

    @staticmethod
    def _working_dir(container: Obj, default: Path) -> Path:
        wd = container.get("workingDir")
        if isinstance(wd, str) and os.path.isabs(wd) and os.path.isdir(wd):
            return Path(wd)
        default.mkdir(parents=True, exist_ok=True)
        return default

    def _make_cgroup(self, name: str, lim: Limits) -> Cgroup | None:
        if self.cgroups is None or not lim.any:
            return None
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:200]
        try:
            return self.cgroups.create(safe, lim)
        except (OSError, ValueError) as e:
            log.info("no cgroup for %s: %s", name, e)
            return None

    # ------------------------------------------------------------------ exits

    async def _wait(self, uid: str, inst: Instance, proc: asyncio.subprocess.Process) -> None:
        rc = await proc.wait()
        finished = self.clock.now()
        assert inst.pid is not None
        _killpg(inst.pid, signal.SIGKILL)  # the container's other processes die with it
        code = exit_code_of(rc)
        oom = inst.oom or (inst.cgroup is not None and inst.cgroup.oom_killed() and code == 137)
        reason = ""
        if oom:
            reason, code = OOM_KILLED, 137
        inst.termination = Termination(exit_code=code, finished_at=finished, started_at=inst.started_at,
                                       reason=reason, container_id=inst.container_id)
        if inst.cgroup is not None:
            for _ in range(20):
                inst.cgroup.remove()
                if not any(d.exists() for d in inst.cgroup.dirs):
                    break
                await asyncio.sleep(0.05)
        self._remove_pidfile(inst)
        inst.done.set()
        log.info("container %s (pid %s) exited with %s%s", inst.container, inst.pid, code,
                 f" ({reason})" if reason else "")
        if self.on_exit is not None:
            try:
                self.on_exit(uid)
            except Exception:  # a callback bug must not lose the exit
                log.exception("on_exit callback failed")

    def _ensure_watchdog(self) -> None:
        if self._watchdog_task is None or self._watchdog_task.done():
            self._watchdog_task = asyncio.create_task(self._watchdog(), name="oom-watchdog")

    async def _watchdog(self) -> None:
        """Poll the RSS of every memory-limited process tree without a cgroup;
        over the limit -> SIGKILL the group, reported as OOMKilled/137."""
        while True:
            watched = [i for recs in self._pods.values() for r in recs.values()
                       for i in (r.current,) if i.running and i.watchdog and not i.oom]
            if not watched:
                self._watchdog_task = None
                return
            for inst in watched:
                assert inst.pid is not None and inst.memory_limit is not None
                if limits_mod.tree_rss(inst.pid) > inst.memory_limit:
                    log.info("container %s over its memory limit %d: killing", inst.container, inst.memory_limit)
                    inst.oom = True
                    _killpg(inst.pid, signal.SIGKILL)
            await asyncio.sleep(self.oom_poll_interval)

    # ------------------------------------------------------------------ kill

    async def kill_pod(self, uid: str, grace: float) -> None:
        """SIGTERM to every running container's main process, ``grace`` seconds,
        then SIGKILL to its process group; returns once all have exited."""
        insts = [r.current for r in self._pods.get(uid, {}).values() if r.current.running]
        await self._kill(insts, grace)

    async def kill_container(self, uid: str, name: str, grace: float) -> None:
        rec = self._pods.get(uid, {}).get(name)
        if rec is not None and rec.current.running:
            await self._kill([rec.current], grace)

    async def _kill(self, insts: list[Instance], grace: float) -> None:
        if not insts:
            return
        # Descendants that left the process group (setsid, setpgid) would
        # escape killpg: remember them now, kill the survivors at the end.
        strays = [p for i in insts if i.pid is not None for p in _descendants(i.pid)
                  if _pgid(p.pid) != i.pid]
        # As a container runtime does: SIGTERM to the container's main process
        # only (its children are killed when it exits, see _wait). Signalling the
        # whole group would change what a trapping shell reports: with its
        # `sleep & wait` child killed too, `trap exit TERM` exits 0, not 143.
        for i in insts:
            if i.pid is not None:
                _kill(i.pid, signal.SIGTERM)
        pending = [i for i in insts if not i.done.is_set()]
        if pending and grace > 0:
            await _wait_all(pending, grace)
        for i in insts:
            if not i.done.is_set() and i.pid is not None:
                _killpg(i.pid, signal.SIGKILL)
        for p in strays:
            _signal(p, signal.SIGKILL)
        await _wait_all([i for i in insts if not i.done.is_set()], 10.0)

    async def shutdown(self, grace: float) -> None:
        """Kill every pod's processes (agent stop)."""
        await asyncio.gather(*(self.kill_pod(uid, grace) for uid in list(self._pods)))
        if self._watchdog_task is not None:
            self._watchdog_task.cancel()

    def forget(self, uid: str) -> None:
        """Drop a pod's records (its processes must be gone). Logs stay on disk."""
        recs = self._pods.pop(uid, {})
        for r in recs.values():
            if r.current.running and r.current.pid is not None:
                _killpg(r.current.pid, signal.SIGKILL)
        if recs:
            mark_pod_finished(next(iter(recs.values())).current.log_path.parent.parent, self.clock.now())

    # ------------------------------------------------------------------ orphans

    def _pidfile(self, inst: Instance) -> Path:
        return inst.log_path.with_suffix(".pid")

    def _write_pidfile(self, inst: Instance) -> None:
        try:
            ctime = psutil.Process(inst.pid).create_time() if inst.pid else 0.0
        except psutil.Error:
            ctime = 0.0
        try:
            self._pidfile(inst).write_text(json.dumps({"pid": inst.pid, "createTime": ctime,
                                                       "node": self.node_name}))
        except OSError:
            pass

    def _remove_pidfile(self, inst: Instance) -> None:
        try:
            self._pidfile(inst).unlink()
        except OSError:
            pass

    def reap_orphans(self) -> int:
        """Kill process groups left by a previous agent of this node (found by
        their pid files, checked against the process start time so a reused pid
        is spared). Other nodes' agents share the state directory: their files
        are left alone."""
        killed = 0
        base = self.state_dir / "pods"
        if not base.is_dir():
            return 0
        for pidfile in base.glob("*/*/*.pid"):
            try:
                data = json.loads(pidfile.read_text())
                if data.get("node", "") != self.node_name:
                    continue
                pid, ctime = int(data["pid"]), float(data["createTime"])
                proc = psutil.Process(pid)
                if abs(proc.create_time() - ctime) < 1.0 and os.getpgid(pid) == pid:
                    _killpg(pid, signal.SIGKILL)
                    killed += 1
            except (OSError, ValueError, KeyError, TypeError, psutil.Error):
                pass
            try:
                pidfile.unlink()
            except OSError:
                pass
        return killed


def _find_container(pod: Obj, name: str) -> tuple[Obj, str]:
    spec = pod.get("spec") or {}
    for field_name in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field_name) or []):
            if isinstance(c, dict) and c.get("name") == name:
                return c, f"spec.{field_name}[{i}]"
    raise KeyError(f"pod has no container {name!r}")


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _signal(proc: psutil.Process, sig: int) -> None:
    """Signal a process found earlier, unless its pid now belongs to another."""
    try:
        if proc.is_running():
            proc.send_signal(sig)
    except psutil.Error:
        pass


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _wait_all(insts: list[Instance], timeout: float) -> None:
    if not insts:
        return
    tasks = [asyncio.create_task(i.done.wait()) for i in insts]
    _, pending = await asyncio.wait(tasks, timeout=timeout)
    for t in pending:
        t.cancel()


def _in_cgroup(cgroup: Cgroup, pid: int) -> bool:
    for d in cgroup.dirs:
        try:
            if str(pid) not in (d / "cgroup.procs").read_text().split():
                return False
        except OSError:
            return False
    return True


def _exec_error(argv0: str, e: BaseException) -> str:
    """Say why exec failed, in the words of runc."""
    if isinstance(e, FileNotFoundError):
        if "/" in argv0:
            return f'exec: "{argv0}": stat {argv0}: no such file or directory'
        return f'exec: "{argv0}": executable file not found in $PATH'
    if isinstance(e, PermissionError):
        return f'exec: "{argv0}": permission denied'
    if isinstance(e, OSError) and e.errno == errno.ENOEXEC:
        return f'exec: "{argv0}": exec format error'
    return f'exec: "{argv0}": {e}'
