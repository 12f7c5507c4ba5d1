"""The process runtime: a pod's containers as host processes, each under a shim.

A container instance is ``command + args`` exec'd as argv (never through a
shell string we build) in its own session/process group, with the pod's
working directory (``<pod dir>/work``) as working directory, the bin
directory of its Python environment first on PATH (``pyenv``), stdout+stderr appended to its own log file, a
minimal environment plus the container's ``env``, and its limits (cgroup or
RSS watchdog). When the first process of the group exits, the rest of the
group is killed, as a container's processes die with its init process.
Exit codes follow container runtimes: killed by signal N -> 128+N.
Every container gets ``PHALANX_ROOT`` (``<pod dir>/root``, where volumes are
mounted, see ``volumes``), defined before its own env so ``$(PHALANX_ROOT)``
expands. A started instance leaves an exec context (``execctx``) for
``phalanx exec``; what was exec'd into a container is killed when it ends.

Each instance runs under a shim (``shim.py``), a small supervisor process in
a session of its own that outlives the control plane and records the exit
in a status file (``instancefiles``). A restarted agent calls ``adopt``:
containers still running are taken over (kill works, the log goes on), exits
that happened meanwhile are reported as what they were, and the processes of
pods that no longer exist are killed.

Shims are forked by the state directory's shim fork server (``shimd.py``,
started on first use, see ``shimclient``): a start then costs this (large)
process a few syscalls, not a fork and a new interpreter. Such a shim is not
our child: its exit is seen through a pidfd, or its record's lock. Without a
working fork server, shims are started as processes of their own, as before.

Creating a file or directory is slow on some disks (~0.2 ms each here): the
ones of a start (the pod's record and directories, the instance record and
log, the exec context) and the finish note of a forgotten pod are made in a
thread, so the event loop (shared with the store and controllers) never waits
on them.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import marshal
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import psutil

from phalanx.node import execctx
from phalanx.node import instancefiles as files
from phalanx.node import limits as limits_mod
from phalanx.node.env import ContainerConfigError, NoCommandError, PodContext, container_argv, container_env
from phalanx.node.limits import Cgroup, CgroupDriver, Limits, container_limits
from phalanx.node.logs import container_log_path, mark_pod_finished, pod_dir, work_dir, write_pod_record
from phalanx.node.names import check_dns_label
from phalanx.node.podrecords import pod_meta
from phalanx.node.podstate import (
    CONTAINER_CANNOT_RUN,
    CONTAINER_STATUS_UNKNOWN,
    OOM_KILLED,
    ContainerObservation,
    Termination,
)
from phalanx.node.pyenv import PythonEnvironment, environment_vars
from phalanx.node.shim import start_ticks
from phalanx.node.shimclient import ShimdClient, ShimdDown, helper_env, read_fd
from phalanx.node.volumes import ROOT_ENV, root_dir
from phalanx.objects.clock import Clock

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
CANNOT_RUN_EXIT_CODE = 128
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SHIM = Path(__file__).with_name("shim.py")
SHIM_REPORT_TIMEOUT = 30.0
ADOPT_POLL_INTERVAL = 0.1
SHIM_LOST_MESSAGE = "The container's shim ended without recording how the container exited"
SHIMD_RETRY_AFTER = 30.0  # seconds of shims started the old way after the fork server failed
_GPU_ENV = "CUDA_VISIBLE_DEVICES"


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
class _Setup:
    """What an instance needs on disk before its files: the pod's record (on
    the pod's first start here: ``record``) and the directories. Idempotent;
    blocking, so run in a thread with the instance's files."""

    runtime: ProcessRuntime
    record: Obj | None
    pod_directory: Path
    container_dir: Path
    root: Path
    work: Path

    def __call__(self) -> None:
        if self.record is not None:
            self.runtime._record_pod(self.pod_directory, self.record)
        os.makedirs(self.container_dir, exist_ok=True)
        os.makedirs(self.root, exist_ok=True)
        os.makedirs(self.work, exist_ok=True)


@dataclass
class _Record:
    current: Instance
    last_termination: Termination | None = None


@dataclass
class Adoption:
    """What ``adopt`` found: pod uid -> container names running / exited
    meanwhile, and how many orphaned containers it killed."""

    running: dict[str, list[str]] = field(default_factory=dict)
    exited: dict[str, list[str]] = field(default_factory=dict)
    orphans_killed: int = 0


class ProcessRuntime:
    """Starts, watches and kills container processes; reports observations.

    ``on_exit(uid)`` is called (in the event loop) whenever an instance ends.
    ``use_shimd=False``: never use the shim fork server (each shim is a new process).
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
        adopt_poll_interval: float = ADOPT_POLL_INTERVAL,
        use_shimd: bool = True,
        environments: tuple[PythonEnvironment, ...] = (),
    ) -> None:
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.node_name = node_name
        self.oom_poll_interval = oom_poll_interval
        self.adopt_poll_interval = adopt_poll_interval
        self.on_exit = on_exit
        self.cgroups = cgroup_driver if cgroup_driver is not None else limits_mod.detect_cgroups(cgroups)
        self.host_env = host_env
        self.environments = environments  # image pattern -> Python environment (pyenv)
        self._pods: dict[str, dict[str, _Record]] = {}
        self._watchdog_task: asyncio.Task[None] | None = None
        self._poll_task: asyncio.Task[None] | None = None
        self._starting: set[asyncio.Task[Any]] = set()
        self._shimd = ShimdClient(self.state_dir) if use_shimd else None
        self._shimd_retry_at = 0.0

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
        for the containers of which neither this runtime nor the disk knows anything."""
        meta = pod["metadata"]
        uid = meta["uid"]
        records = self._pods.setdefault(uid, {})
        for name, o in observations.items():
            if name in records:
                continue
            log_path = container_log_path(self.state_dir, meta.get("namespace") or "default", meta["name"],
                                          uid, name, o.restart_count)
            inst = Instance(container=name, container_id=o.container_id, restart_count=o.restart_count,
                            backoff_count=o.backoff_count, log_path=log_path, started_at=o.started_at,
                            termination=o.terminated)
            inst.done.set()
            records[name] = _Record(inst, o.last_termination)
        if not records:
            del self._pods[uid]

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
        base = pod_dir(self.state_dir, ns, name, uid)
        cdir = base / check_dns_label(container_name, "container name")
        pdir = base.absolute()
        root = root_dir(pdir)
        # The pod's record (on its first start here) and the directories are made
        # off the event loop, with the instance's files (see _open_instance).
        setup = _Setup(self, pod_meta(pod, self.clock.now(), self.node_name) if uid not in self._pods else None,
                       base, cdir, root, work_dir(pdir))
        records = self._pods.setdefault(uid, {})
        prev = records.get(container_name)
        if prev is not None and prev.current.termination is None and prev.current.started_at is not None:
            raise RuntimeError(f"container {container_name} of pod {ns}/{name} is still running")
        if prev is None:
            restart_count, last = 0, None
        elif prev.current.started_at is None and prev.current.termination is None:
            # known but never started here (seeded, or its shim never ran it): same slot
            restart_count, last = prev.current.restart_count, prev.last_termination
        else:
            restart_count, last = prev.current.restart_count + 1, prev.current.termination
        log_path = cdir / f"{int(restart_count)}.log"
        inst = Instance(container=container_name, container_id="phalanx://" + secrets.token_hex(32),
                        restart_count=restart_count, backoff_count=backoff_count, log_path=log_path,
                        exec_context=False)  # a new ID: no exec.json names it yet
        records[container_name] = _Record(inst, last)

        ctx = PodContext(pod_ip=pod_ip, host_ip=host_ip, node_allocatable=node_allocatable)
        try:
            env_list = container_env(pod, container, ctx, path, predefined={ROOT_ENV: str(root)})
            argv = container_argv(container, dict(env_list), path)
        except (NoCommandError, ContainerConfigError) as e:
            setup()  # rare: the error goes to the instance's log, next to the pod's record
            reason = CONTAINER_CANNOT_RUN if isinstance(e, NoCommandError) else CREATE_CONTAINER_CONFIG_ERROR
            self._fail_start(inst, reason, str(e), permanent=True)
            return inst

        env = base_env(name, self.host_env)
        env.update(environment_vars(container.get("image"), self.environments, env["PATH"]))
        env.update(extra_env or {})
        env.update(env_list)
        cwd = self._working_dir(container, work_dir(pdir))
        lim = container_limits(container)
        inst.memory_limit = lim.memory
        inst.gpus = _gpu_list((extra_env or {}).get(_GPU_ENV))
        cgroup = self._make_cgroup(f"{ns}_{name}_{uid}_{container_name}_{restart_count}", lim)
        record = {"node": self.node_name, "namespace": ns, "pod": name, "uid": uid, "container": container_name,
                  "restartCount": restart_count, "backoffCount": backoff_count, "containerID": inst.container_id,
                  "memoryLimit": lim.memory, "cgroup": _cgroup_record(cgroup), "gpus": inst.gpus,
                  "argv0": argv[0]}
        spec = {"argv": argv, "env": env, "cwd": str(cwd), "log": str(log_path),
                "status": str(files.status_path(log_path)),
                "cgroup_procs": [str(d / "cgroup.procs") for d in cgroup.dirs] if cgroup is not None else []}
        # Shielded: once the shim is spawned the instance is registered even if
        # the caller is cancelled (agent stop), so shutdown can still kill it.
        task = asyncio.ensure_future(self._launch(uid, inst, record, spec, cgroup, lim, setup))
        self._starting.add(task)
        task.add_done_callback(_settled(self._starting))
        inst = await asyncio.shield(task)
        if inst.running:
            log.info("started %s/%s container %s (pid %s): %s", ns, name, container_name, inst.pid, argv)
            await self._write_exec_context(inst, ns, name, uid, env, str(cwd))
        return inst

    async def _write_exec_context(self, inst: Instance, ns: str, name: str, uid: str, env: Mapping[str, str],
                                  cwd: str) -> None:
        """What ``phalanx exec`` needs to run a command in this instance (see
        execctx), written off the event loop. An exit seen meanwhile may have
        looked for the file before it was there: it is removed once written."""
        if inst.pid is None:
            return
        ctx = execctx.ExecContext(namespace=ns, pod=name, uid=uid, container=inst.container,
                                  container_id=inst.container_id, restart_count=inst.restart_count, pid=inst.pid,
                                  start_ticks=inst.start_ticks or start_ticks(inst.pid), cwd=cwd, env=dict(env))
        inst.exec_context = True
        try:
            await asyncio.to_thread(execctx.write_context, inst.log_path.parent, ctx)
        except OSError as e:
            log.warning("cannot write the exec context of %s/%s container %s: %s", ns, name, inst.container, e)
        finally:
            if inst.termination is not None:
                execctx.remove_context(inst.log_path.parent, inst.container_id)

    async def _launch(self, uid: str, inst: Instance, record: Obj, spec: Obj, cgroup: Cgroup | None,
                      lim: Limits, setup: Callable[[], None] | None = None) -> Instance:
        """Run the instance under a new shim; the instance now registered for its container.
        ``setup`` makes the directories (and the pod's record) first."""
        argv0 = spec["argv"][0]
        try:
            proc, report = await self._spawn_shim(inst, record, spec, setup)
        except files.InstanceBusy:
            # Never two processes for one slot: a live shim already runs this
            # instance (unknown to us): adopt it instead.
            if cgroup is not None:
                cgroup.remove()
            path = files.record_path(inst.log_path)
            found = files.FoundInstance(path, inst.restart_count, files.read_json(path) or {})
            adopted = self._load(found, None, uid)
            rec = self._pods.setdefault(uid, {}).get(inst.container)
            self._pods[uid][inst.container] = _Record(adopted, rec.last_termination if rec else None)
            log.warning("container %s instance %d is already run by a shim: adopted", inst.container,
                        inst.restart_count)
            if adopted.running:
                self._ensure_poller()
            return adopted
        except (OSError, subprocess.SubprocessError, ValueError, EOFError, asyncio.TimeoutError) as e:
            if cgroup is not None:
                cgroup.remove()
            self._fail_start(inst, CONTAINER_CANNOT_RUN, f"cannot start the container's shim: {e}", permanent=False)
            return inst
        inst.shim = proc
        if "pid" not in report:
            if cgroup is not None:
                cgroup.remove()
            err = OSError(int(report.get("errno") or 0), str(report.get("strerror") or "unknown error"))
            self._fail_start(inst, CONTAINER_CANNOT_RUN, _exec_error(argv0, err, str(report.get("step") or "")),
                             permanent=False)
            self._reap_later(inst)
            return inst
        inst.pid = int(report["pid"])
        inst.start_ticks = int(report.get("startTicks") or 0)
        inst.started_at = self._from_wall(report.get("startedAt"))
        if cgroup is not None and not _in_cgroup(cgroup, inst.pid):
            cgroup.remove()
            cgroup = None
        inst.cgroup = cgroup
        enforced = cgroup is not None and cgroup.memory_dir is not None
        inst.watchdog = lim.memory is not None and not enforced
        inst.waiter = asyncio.create_task(self._wait(uid, inst), name=f"wait-{uid}-{inst.container}")
        if inst.watchdog:
            self._ensure_watchdog()
        return inst

    async def _spawn_shim(self, inst: Instance, record: Obj, spec: Obj, setup: Callable[[], None] | None = None,
                          ) -> tuple[subprocess.Popen[bytes] | ForkedShim, Obj]:
        """Start the instance's shim (through the fork server when it works);
        return it and its report (container pid, or why exec failed)."""
        client = self._shimd
        if client is not None and time.monotonic() >= self._shimd_retry_at:
            for attempt in (1, 2):
                try:
                    return await self._spawn_forked(client, inst, record, spec, setup)
                except ShimdDown as e:
                    why = e
                if attempt == 2:
                    break
                log.debug("starting a shim fork server for %s: %s", self.state_dir, why)
                try:
                    await client.restart(why.generation)
                except ShimdDown as e:
                    why = e
                    break
            log.warning("no shim fork server (%s): shims start as processes of their own for %.0f s",
                        why, SHIMD_RETRY_AFTER)
            self._shimd_retry_at = time.monotonic() + SHIMD_RETRY_AFTER
        return await self._spawn_process(inst, record, spec, setup)

    def _lock_record(self, inst: Instance, record: Obj) -> int:
        """The instance record, written and locked (InstanceBusy when a live shim
        holds it); the previous run's status and OOM mark removed."""
        lock_fd = files.open_locked_record(files.record_path(inst.log_path), record)
        for stale in (files.status_path(inst.log_path), files.oom_path(inst.log_path)):
            try:
                stale.unlink()
            except FileNotFoundError:
                pass
        return lock_fd

    def _open_instance(self, inst: Instance, record: Obj, spec: Obj,
                       setup: Callable[[], None] | None) -> tuple[int, int, int]:
        """(locked record, spec, log) descriptors of a new instance, after
        ``setup``. Blocking file work (creating files is slow on some disks):
        run in a thread."""
        if setup is not None:
            setup()
        lock_fd = self._lock_record(inst, record)
        fds = [lock_fd]
        try:
            fds.append(_spec_fd(spec, inst.log_path.parent))
            fds.append(os.open(inst.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return lock_fd, fds[1], fds[2]

    async def _spawn_forked(self, client: ShimdClient, inst: Instance, record: Obj,
                            spec: Obj, setup: Callable[[], None] | None = None) -> tuple[ForkedShim, Obj]:
        """Have the fork server fork the shim on our descriptors: the spec (a
        memfd: never on disk), the report pipe, the log, the locked record."""
        lock_fd, spec_fd, log_fd = await _fds_in_thread(self._open_instance, inst, record, spec, setup)
        fds = [lock_fd, spec_fd, log_fd]
        read_end = -1
        try:
            read_end, write_end = os.pipe()
            fds.append(write_end)
            pid = await client.spawn(spec_fd, write_end, log_fd, lock_fd)
        except BaseException:
            if read_end >= 0:
                os.close(read_end)
            raise
        finally:
            for fd in fds:
                os.close(fd)  # the shim's copies keep the lock, the log, the pipe
        shim = ForkedShim(pid, _pidfd(pid))
        try:
            report = await self._read_report(read_end, inst, f"the shim (pid {pid})")
        except BaseException:
            shim.kill(files.record_path(inst.log_path))
            shim.close()
            raise
        return shim, report

    async def _spawn_process(self, inst: Instance, record: Obj, spec: Obj,
                             setup: Callable[[], None] | None = None) -> tuple[subprocess.Popen[bytes], Obj]:
        """Start the shim as a process of its own (``python -I -S shim.py``),
        the instance record locked and the spec on its stdin."""
        if setup is not None:
            setup()
        lock_fd = self._lock_record(inst, record)
        read_fd = write_fd = -1
        try:
            # The spec (it holds the environment) goes through an unlinked 0600 file: any size, never on disk by name.
            with tempfile.TemporaryFile(dir=inst.log_path.parent) as spec_file, open(inst.log_path, "ab") as logf:
                spec_file.write(marshal.dumps(spec))
                spec_file.flush()
                spec_file.seek(0)
                read_fd, write_fd = os.pipe()
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", str(SHIM), str(lock_fd)], stdin=spec_file, stdout=write_fd,
                    stderr=logf, env=helper_env(), cwd="/", start_new_session=True, pass_fds=(lock_fd,))
        except BaseException:
            if read_fd >= 0:
                os.close(read_fd)
            raise
        finally:
            if write_fd >= 0:
                os.close(write_fd)
            os.close(lock_fd)  # the shim's copy keeps the lock
        try:
            report = await self._read_report(read_fd, inst, "the shim")
        except asyncio.TimeoutError:
            proc.kill()
            raise
        except EOFError as e:
            proc.poll()
            raise EOFError(f"{e} ({proc.returncode})") from None
        return proc, report

    async def _read_report(self, fd: int, inst: Instance, who: str) -> Obj:
        """The shim's report from its pipe. If it never comes, a container the
        shim may have started is stopped."""
        try:
            data = await read_fd(fd, SHIM_REPORT_TIMEOUT)
        except asyncio.TimeoutError:
            self._kill_recorded(files.read_json(files.status_path(inst.log_path)))
            raise
        if not data:
            # The shim died before reporting; if it got as far as starting the container, stop it.
            self._kill_recorded(files.read_json(files.status_path(inst.log_path)))
            raise EOFError(f"{who} exited before reporting")
        report = marshal.loads(data)
        if not isinstance(report, dict):
            raise ValueError("malformed shim report")
        return report

    def _reap_later(self, inst: Instance) -> None:
        if isinstance(inst.shim, ForkedShim):
            inst.shim.close()  # the fork server reaps it
        elif inst.shim is not None:
            asyncio.create_task(self._reap(inst.shim))

    @staticmethod
    async def _reap(proc: subprocess.Popen[bytes]) -> None:
        for _ in range(200):
            if proc.poll() is not None:
                return
            await asyncio.sleep(0.05)

    @staticmethod
    def _record_pod(pod_directory: Path, record: Obj) -> None:
        """The pod's record next to its logs, so they outlive the pod object (see podrecords)."""
        try:
            write_pod_record(pod_directory, record)
        except (OSError, ValueError) as e:
            log.warning("cannot record pod %s: %s", record.get("name"), e)

    def _fail_start(self, inst: Instance, reason: str, message: str, *, permanent: bool) -> None:
        now = self.clock.now()
        inst.termination = Termination(exit_code=CANNOT_RUN_EXIT_CODE, finished_at=now, started_at=now,
                                       reason=reason, message=message, container_id=inst.container_id,
                                       permanent=permanent)
        try:
            inst.log_path.parent.mkdir(parents=True, exist_ok=True)
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
        return default  # the pod's working directory: made before the shim starts (_Setup)

    def _make_cgroup(self, name: str, lim: Limits) -> Cgroup | None:
        if self.cgroups is None or not lim.any:
            return None
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:200]
        try:
            return self.cgroups.create(safe, lim)
        except (OSError, ValueError) as e:
            log.info("no cgroup for %s: %s", name, e)
            return None

    def _from_wall(self, ts: Any) -> datetime:
        """A wall-clock time the shim recorded, in this runtime's clock."""
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            return self.clock.now()
        if type(self.clock).now is Clock.now:
            return datetime.fromtimestamp(ts, timezone.utc)
        return self.clock.now() - timedelta(seconds=time.time() - ts)

    # ------------------------------------------------------------------ exits

    async def _wait(self, uid: str, inst: Instance) -> None:
        """Wait for the shim this runtime started (pidfd; polling without one)."""
        proc = inst.shim
        assert proc is not None
        if isinstance(proc, ForkedShim):
            try:
                await self._wait_forked(proc, files.record_path(inst.log_path))
            finally:
                proc.close()
            await self._finish(uid, inst)
            return
        fd = _pidfd(proc.pid)
        if fd is not None:
            loop = asyncio.get_running_loop()
            exited = loop.create_future()
            loop.add_reader(fd, lambda: exited.done() or exited.set_result(None))
            try:
                await exited
            finally:
                loop.remove_reader(fd)
                os.close(fd)
        while proc.poll() is None:
            await asyncio.sleep(self.adopt_poll_interval)
        await self._finish(uid, inst)

    async def _wait_forked(self, shim: ForkedShim, record: Path) -> None:
        """Until a shim that is not our child is gone. Its pidfd names it only if
        it still held its lock after the pidfd was opened (else the pid may
        have been reused): then it says when; else the lock is polled."""
        if shim.pidfd is not None and files.shim_alive(record):
            loop = asyncio.get_running_loop()
            exited = loop.create_future()
            loop.add_reader(shim.pidfd, lambda: exited.done() or exited.set_result(None))
            try:
                await exited
            finally:
                loop.remove_reader(shim.pidfd)
        while files.shim_alive(record):
            await asyncio.sleep(self.adopt_poll_interval)

    async def _finish(self, uid: str, inst: Instance, *, notify: bool = True) -> None:
        """The shim is gone: take the exit from its status file."""
        if inst.termination is not None:
            return
        status = files.read_json(files.status_path(inst.log_path)) or {}
        if isinstance(status.get("exitCode"), int):
            code, reason, message = int(status["exitCode"]), "", ""
            finished = self._from_wall(status.get("finishedAt"))
        else:
            self._kill_recorded(status)
            code, reason, message = 137, CONTAINER_STATUS_UNKNOWN, SHIM_LOST_MESSAGE
            finished = self.clock.now()
        # The OOM mark of an instance we started is only ever written after inst.oom is set.
        oom = inst.oom or (inst.adopted and files.oom_path(inst.log_path).exists()) or \
            (inst.cgroup is not None and inst.cgroup.oom_killed() and code == 137)
        if oom:
            reason, message, code = OOM_KILLED, "", 137
        started = inst.started_at or self._from_wall(status.get("startedAt"))
        inst.termination = Termination(exit_code=code, finished_at=finished, started_at=started,
                                       reason=reason, message=message, container_id=inst.container_id)
        self._end_execs(inst)
        if inst.cgroup is not None:
            for _ in range(20):
                inst.cgroup.remove()
                if not any(d.exists() for d in inst.cgroup.dirs):
                    break
                await asyncio.sleep(0.05)
        inst.done.set()
        log.info("container %s (pid %s) exited with %s%s", inst.container, inst.pid, code,
                 f" ({reason})" if reason else "")
        if notify and self.on_exit is not None:
            try:
                self.on_exit(uid)
            except Exception:  # a callback bug must not lose the exit
                log.exception("on_exit callback failed")

    @staticmethod
    def _end_execs(inst: Instance) -> None:
        """The container is gone: so is what was exec'd into it (see execctx)."""
        cdir = inst.log_path.parent
        execctx.kill_execs(cdir, inst.container_id)
        if inst.exec_context is not False:  # else no exec.json names this instance
            execctx.remove_context(cdir, inst.container_id)

    def _kill_recorded(self, status: Obj | None) -> None:
        """SIGKILL the group of a container whose shim is gone, if it is still that process."""
        if not status or not isinstance(status.get("pid"), int):
            return
        pid, ticks = status["pid"], status.get("startTicks")
        if isinstance(ticks, int) and ticks and start_ticks(pid) == ticks:
            _killpg(pid, signal.SIGKILL)

    def _ensure_watchdog(self) -> None:
        if self._watchdog_task is None or self._watchdog_task.done():
            self._watchdog_task = asyncio.create_task(self._watchdog(), name="oom-watchdog")

    async def _watchdog(self) -> None:
        """Poll the resident memory a cgroup could not reclaim (``limits.tree_rss``)
        of every memory-limited process tree without a cgroup; over the limit ->
        SIGKILL the group, reported as OOMKilled/137."""
        while True:
            watched = [i for recs in self._pods.values() for r in recs.values()
                       for i in (r.current,) if i.running and i.watchdog and not i.oom]
            if not watched:
                self._watchdog_task = None
                return
            for inst in watched:
                if inst.pid is None or inst.memory_limit is None or not _same_process(inst):
                    continue
                if limits_mod.tree_rss(inst.pid) > inst.memory_limit:
                    log.info("container %s over its memory limit %d: killing", inst.container, inst.memory_limit)
                    inst.oom = True
                    try:  # remembered on disk, so an agent restarted meanwhile still says OOMKilled
                        files.oom_path(inst.log_path).touch()
                    except OSError:
                        pass
                    _killpg(inst.pid, signal.SIGKILL)
            await asyncio.sleep(self.oom_poll_interval)

    def _ensure_poller(self) -> None:
        if self._poll_task is None or self._poll_task.done():
            self._poll_task = asyncio.create_task(self._poll_adopted(), name="shim-poller")

    async def _poll_adopted(self) -> None:
        """Watch the shims this runtime adopted (not its children): an exit is
        the shim's lock let go."""
        while True:
            watched = [(uid, r.current) for uid, recs in list(self._pods.items()) for r in recs.values()
                       if r.current.adopted and r.current.running]
            if not watched:
                self._poll_task = None
                return
            for uid, inst in watched:
                if inst.pid is None:
                    self._refresh_pid(inst)
                if not files.shim_alive(files.record_path(inst.log_path)):
                    await self._finish(uid, inst)
            await asyncio.sleep(self.adopt_poll_interval)

    def _refresh_pid(self, inst: Instance) -> None:
        status = files.read_json(files.status_path(inst.log_path)) or {}
        if isinstance(status.get("pid"), int):
            inst.pid = status["pid"]
            inst.start_ticks = int(status.get("startTicks") or 0)

    # ------------------------------------------------------------------ adoption

    async def adopt(self, pods: Iterable[Obj], *, wait_for_orphans: float = 5.0) -> Adoption:
        """Take over what shims of a previous agent of this node run or recorded.

        ``pods``: the pods that exist. Instances of pods bound to this node are
        adopted (running: watched, killable; exited: their real termination);
        processes of pods that are gone (or bound elsewhere) are killed and
        their records removed. Pid files of the runtime before shims are reaped
        as before (their processes died with that agent or are killed now).
        """
        mine = {}
        for p in pods:
            meta = p.get("metadata") or {}
            if (p.get("spec") or {}).get("nodeName") == self.node_name and meta.get("uid"):
                mine[meta["uid"]] = p
        found: dict[str, dict[str, dict[int, files.FoundInstance]]] = {}
        report = Adoption()
        for f in files.scan(self.state_dir, self.node_name):
            if f.legacy:
                report.orphans_killed += _reap_legacy(f)
                continue
            found.setdefault(f.uid, {}).setdefault(f.container, {})[f.restart_count] = f
        orphans: list[files.FoundInstance] = []
        for uid, containers in found.items():
            pod = mine.get(uid)
            if pod is None or uid in self._pods:
                if pod is None:
                    orphans.extend(f for insts in containers.values() for f in insts.values())
                continue
            records: dict[str, _Record] = {}
            for cname, insts in containers.items():
                n = max(insts)
                cur = self._load(insts[n], report, uid)
                last = self._load(insts[n - 1], None, uid).termination if n - 1 in insts else None
                records[cname] = _Record(cur, last)
            self._pods[uid] = records
        report.orphans_killed += await self._kill_orphans(orphans, wait_for_orphans)
        if any(i.running and i.adopted for recs in self._pods.values() for i in (r.current for r in recs.values())):
            self._ensure_poller()
        if any(i.running and i.watchdog for recs in self._pods.values() for i in (r.current for r in recs.values())):
            self._ensure_watchdog()
        return report

    def _load(self, f: files.FoundInstance, report: Adoption | None, uid: str) -> Instance:
        """One instance as its files describe it."""
        rec = f.record
        inst = Instance(container=f.container, container_id=str(rec.get("containerID") or ""),
                        restart_count=f.restart_count, backoff_count=_int(rec.get("backoffCount")),
                        log_path=f.log_path, memory_limit=rec.get("memoryLimit") if isinstance(
                            rec.get("memoryLimit"), int) else None,
                        cgroup=_cgroup_from(rec.get("cgroup")), gpus=_gpu_list(rec.get("gpus")))
        status_file = files.status_path(f.log_path)
        status = files.read_json(status_file) or {}
        alive = files.shim_alive(f.path)
        if alive and "pid" not in status and "startError" not in status:
            deadline = time.monotonic() + 1.0  # the shim is starting the container: it records it in ms
            while alive and time.monotonic() < deadline and "pid" not in status:
                time.sleep(0.02)
                status = files.read_json(status_file) or {}
                alive = files.shim_alive(f.path)
        if isinstance(status.get("pid"), int):
            inst.pid = status["pid"]
            inst.start_ticks = _int(status.get("startTicks"))
            inst.started_at = self._from_wall(status.get("startedAt"))
        if isinstance(status.get("exitCode"), int):
            code, reason = int(status["exitCode"]), ""
            if files.oom_path(f.log_path).exists() or \
                    (inst.cgroup is not None and inst.cgroup.oom_killed() and code == 137):
                code, reason = 137, OOM_KILLED
            inst.termination = Termination(exit_code=code, finished_at=self._from_wall(status.get("finishedAt")),
                                           started_at=inst.started_at, reason=reason,
                                           container_id=inst.container_id)
            if inst.cgroup is not None:
                inst.cgroup.remove()
            self._end_execs(inst)
            _note(report, "exited", uid, f.container)
        elif isinstance(status.get("startError"), dict):
            err = status["startError"]
            finished = self._from_wall(status.get("finishedAt"))
            inst.termination = Termination(
                exit_code=CANNOT_RUN_EXIT_CODE, finished_at=finished, started_at=finished,
                reason=CONTAINER_CANNOT_RUN, container_id=inst.container_id,
                message=_exec_error(str(status.get("argv0") or rec.get("argv0") or ""),
                                    OSError(_int(err.get("errno")), str(err.get("strerror") or "")),
                                    str(err.get("step") or "")))
            _note(report, "exited", uid, f.container)
        elif alive:
            inst.adopted = True
            if inst.started_at is None:
                inst.started_at = self.clock.now()
            enforced = inst.cgroup is not None and inst.cgroup.memory_dir is not None and inst.pid is not None \
                and _in_cgroup(inst.cgroup, inst.pid)
            inst.watchdog = inst.memory_limit is not None and not enforced
            _note(report, "running", uid, f.container)
            inst.done.clear()
            return inst
        elif inst.started_at is not None:
            # The shim died without recording the exit (killed): the container is lost.
            self._kill_recorded(status)
            inst.termination = Termination(exit_code=137, finished_at=self.clock.now(), started_at=inst.started_at,
                                           reason=CONTAINER_STATUS_UNKNOWN, message=SHIM_LOST_MESSAGE,
                                           container_id=inst.container_id)
            self._end_execs(inst)
            _note(report, "exited", uid, f.container)
        # else: never started (the agent stopped before its shim ran it): the slot starts again
        inst.done.set()
        return inst

    async def _kill_orphans(self, orphans: list[files.FoundInstance], wait: float) -> int:
        """Kill what shims still run for pods that are gone; drop their records."""
        killed = 0
        live = []
        for f in orphans:
            if files.shim_alive(f.path):
                status = files.read_json(files.status_path(f.log_path)) or {}
                if isinstance(status.get("pid"), int) and start_ticks(status["pid"]) == status.get("startTicks"):
                    for p in _descendants(status["pid"]):
                        _signal(p, signal.SIGKILL)
                    _killpg(status["pid"], signal.SIGKILL)
                    killed += 1
                live.append(f)
        deadline = time.monotonic() + wait
        while live and time.monotonic() < deadline:
            live = [f for f in live if files.shim_alive(f.path)]
            if live:
                await asyncio.sleep(0.05)
        pod_dirs = set()
        for f in orphans:
            cg = _cgroup_from(f.record.get("cgroup"))
            if cg is not None:
                cg.remove()
            execctx.forget_container(f.log_path.parent)
            files.remove_instance_files(f.log_path)
            pod_dirs.add(f.log_path.parent.parent)
        for d in pod_dirs:
            mark_pod_finished(d, self.clock.now())
        if killed:
            log.info("node %s: killed %d containers of pods that no longer exist", self.node_name, killed)
        return killed

    def reap_orphans(self) -> int:
        """Kill the process groups left by a runtime before shims (pid files
        with pid + createTime, checked so a reused pid is spared)."""
        return sum(_reap_legacy(f) for f in files.scan(self.state_dir, self.node_name) if f.legacy)

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
        for i in insts:
            if i.pid is None:
                self._refresh_pid(i)
        live = [i for i in insts if i.pid is not None and _same_process(i)]
        # Descendants that left the process group (setsid, setpgid) would
        # escape killpg: remember them now, kill the survivors at the end.
        strays = [p for i in live for p in _descendants(i.pid or 0) if _pgid(p.pid) != i.pid]
        # Processes exec'd into the containers (and theirs) die with them:
        # SIGTERM with the container's main process, SIGKILL at the end.
        exec_roots = {i.container_id: execctx.exec_roots(i.log_path.parent, i.container_id) for i in live}
        execs = {cid: execctx.with_descendants(roots) for cid, roots in exec_roots.items()}
        # As a container runtime does: SIGTERM to the container's main process
        # only (its children are killed when it exits, by the shim). Signalling
        # the whole group would change what a trapping shell reports: with its
        # `sleep & wait` child killed too, `trap exit TERM` exits 0, not 143.
        for i in live:
            _kill(i.pid or 0, signal.SIGTERM)
            execctx.signal_processes(exec_roots[i.container_id], signal.SIGTERM)
        pending = [i for i in insts if not i.done.is_set()]
        if pending and grace > 0:
            await _wait_all(pending, grace)
        for i in insts:
            if not i.done.is_set() and i.pid is not None and _same_process(i):
                _killpg(i.pid, signal.SIGKILL)
        for p in strays:
            _signal(p, signal.SIGKILL)
        for i in live:
            execctx.kill_execs(i.log_path.parent, i.container_id, also=execs[i.container_id])
        await _wait_all([i for i in insts if not i.done.is_set()], 10.0)

    async def shutdown(self, grace: float) -> None:
        """Kill every pod's processes (agent stop)."""
        await self._settle_starts()
        await asyncio.gather(*(self.kill_pod(uid, grace) for uid in list(self._pods)))
        self.detach()

    def detach(self) -> None:
        """Stop watching without killing anything (the shims keep the containers
        and record their exits for the next agent)."""
        for t in (self._watchdog_task, self._poll_task):
            if t is not None:
                t.cancel()
        self._watchdog_task = self._poll_task = None
        for recs in self._pods.values():
            for r in recs.values():
                if r.current.waiter is not None and not r.current.waiter.done():
                    r.current.waiter.cancel()

    async def _settle_starts(self, timeout: float = SHIM_REPORT_TIMEOUT) -> None:
        if self._starting:
            await asyncio.wait(list(self._starting), timeout=timeout)

    def forget(self, uid: str) -> None:
        """Drop a pod's records and instance files (its processes must be gone). Logs stay on disk."""
        pdir = self._drop(uid)
        if pdir is not None:
            mark_pod_finished(pdir, self.clock.now())

    async def forget_async(self, uid: str) -> None:
        """``forget``, noting the finish in the pod's record from a thread (a new
        file: slow on some disks). The instance records are gone when the
        first await is reached, as with ``forget``."""
        pdir = self._drop(uid)
        if pdir is not None:
            await asyncio.to_thread(mark_pod_finished, pdir, self.clock.now())

    def _drop(self, uid: str) -> Path | None:
        """Forget the pod's instances, remove their files; its directory, if it had any."""
        recs = self._pods.pop(uid, {})
        for r in recs.values():
            cur = r.current
            if cur.running and cur.pid is not None and _same_process(cur):
                _killpg(cur.pid, signal.SIGKILL)
            execctx.forget_container(cur.log_path.parent)
            for n in range(cur.restart_count + 1):
                files.remove_instance_files(cur.log_path.with_name(f"{n}.log"))
        return next(iter(recs.values())).current.log_path.parent.parent if recs else None


# --------------------------------------------------------------------------- helpers


def _settled(pending: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    """Done callback of a start: forget it, and retrieve an error nobody awaited."""
    def done(t: asyncio.Task[Any]) -> None:
        pending.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.debug("container start failed: %s", t.exception())
    return done


def _note(report: Adoption | None, what: str, uid: str, container: str) -> None:
    if report is not None:
        getattr(report, what).setdefault(uid, []).append(container)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _gpu_list(v: Any) -> list[int] | None:
    """CUDA_VISIBLE_DEVICES ("0,1") or a stored list, as device indices."""
    if isinstance(v, list):
        return [d for d in v if isinstance(d, int) and not isinstance(d, bool)]
    if not isinstance(v, str):
        return None
    return [int(p) for p in v.split(",") if p.strip().isdigit()]


def _cgroup_record(cg: Cgroup | None) -> Obj | None:
    if cg is None:
        return None
    return {"version": cg.version, "dirs": [str(d) for d in cg.dirs],
            "memoryDir": str(cg.memory_dir) if cg.memory_dir is not None else None}


def _cgroup_from(v: Any) -> Cgroup | None:
    if not isinstance(v, dict) or not isinstance(v.get("dirs"), list):
        return None
    dirs = [Path(d) for d in v["dirs"] if isinstance(d, str)]
    mem = v.get("memoryDir")
    return Cgroup(_int(v.get("version")) or 2, dirs, Path(mem) if isinstance(mem, str) else None)


async def _fds_in_thread(fn: Callable[..., tuple[int, ...]], *args: Any) -> tuple[int, ...]:
    """``fn(*args)`` (it opens descriptors) in a thread; if we are cancelled
    meanwhile, the descriptors are closed when it returns, not leaked."""
    fut = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        fut.add_done_callback(_close_result)
        raise


def _close_result(fut: asyncio.Future[tuple[int, ...]]) -> None:
    if not fut.cancelled() and fut.exception() is None:
        for fd in fut.result():
            os.close(fd)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return None


def _spec_fd(spec: Obj, directory: Path) -> int:
    """The marshal-ed spec in an anonymous file (memfd; else an unlinked 0600
    file), positioned at its start: it holds the environment, so no name."""
    data = marshal.dumps(spec)
    try:
        fd = os.memfd_create("phalanx-shim-spec", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        with tempfile.TemporaryFile(dir=directory) as f:
            fd = os.dup(f.fileno())
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _same_process(inst: Instance) -> bool:
    """The instance's pid still names its container (not a reused pid)."""
    if inst.pid is None:
        return False
    return not inst.start_ticks or start_ticks(inst.pid) == inst.start_ticks


def _reap_legacy(f: files.FoundInstance) -> int:
    """A pid file of the runtime before shims: kill its group if it is still that process."""
    killed = 0
    try:
        pid, ctime = int(f.record["pid"]), float(f.record["createTime"])
        proc = psutil.Process(pid)
        if abs(proc.create_time() - ctime) < 1.0 and os.getpgid(pid) == pid:
            _killpg(pid, signal.SIGKILL)
            killed = 1
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        pass
    try:
        f.path.unlink()
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


def _exec_error(argv0: str, e: BaseException, step: str = "exec") -> str:
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
