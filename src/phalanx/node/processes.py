"""The node's container runtime (``ProcessRuntime``): a pod's containers as host processes, each under a shim.

Not ``phalanx.runtime`` (the controller runtime): this starts, watches, kills and adopts container processes.

A container instance is ``command + args`` exec'd as argv (never through a
shell string we build) in its own session/process group, with the pod's
working directory (``<pod dir>/work``) as working directory, the bin
directory of its Python environment first on PATH (``pyenv``), stdout+stderr
appended to its own log file, a minimal environment plus the container's
``env``, and its limits (cgroup, else the memory ``watchdog``). When the first
process of the group exits, the rest of the group is killed, as a container's
processes die with its init process. Exit codes follow container runtimes:
killed by signal N -> 128+N. Every container gets ``PHALANX_ROOT`` (``<pod
dir>/root``, where volumes are mounted, see ``volumes``), defined before its
own env so ``$(PHALANX_ROOT)`` expands. A started instance leaves an exec
context (``execctx``) for ``phalanx exec``; what was exec'd into a container
is killed when it ends.

Each instance runs under a shim (``shim.py``, started by ``spawn``), a small
supervisor process in a session of its own that outlives the control plane
and records the exit in a status file (``instancefiles``). A restarted agent
calls ``adopt``: containers still running are taken over (kill works, the log
goes on), exits that happened meanwhile are reported as what they were, and
the processes of pods that no longer exist are killed (``reap``).

A shim the fork server forked is not our child: its exit is seen through a
pidfd, or its record's lock. The files of a start (the pod's record and
directories, the instance record and log, the exec context) and the finish
note of a forgotten pod are made in a thread: creating files is slow on some
disks, and the event loop is shared with the store and controllers.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from phalanx.node import execctx, limits
from phalanx.node import instancefiles as files
from phalanx.node.adopt import Adoption, found_instances, load_instance
from phalanx.node.env import ContainerConfigError, NoCommandError, PodContext, container_argv, container_env
from phalanx.node.instances import (
    CANNOT_RUN_EXIT_CODE,
    SHIM_LOST_MESSAGE,
    ContainerRecord,
    ForkedShim,
    Instance,
    cgroup_record,
    end_execs,
    exec_error,
    from_wall,
    gpu_list,
    in_cgroup,
    kill_recorded,
    killpg,
    pidfd,
    refresh_pid,
    same_process,
)
from phalanx.node.limits import Cgroup, CgroupDriver, Limits, container_limits
from phalanx.node.logs import container_log_path, mark_pod_finished, pod_dir, work_dir
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
from phalanx.node.reap import kill_instances, kill_orphans, reap_legacy
from phalanx.node.shim import start_ticks
from phalanx.node.spawn import SHIM_REPORT_TIMEOUT, PodSetup, ShimSpawner, reap_later
from phalanx.node.volumes import ROOT_ENV, root_dir
from phalanx.node.watchdog import MemoryWatchdog
from phalanx.objects.clock import Clock

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ADOPT_POLL_INTERVAL = 0.1
GPU_ENV = "CUDA_VISIBLE_DEVICES"


def base_env(hostname: str, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The few host variables a program needs; not the agent's whole environment."""
    src = os.environ if source is None else source
    env = {"PATH": src.get("PATH") or DEFAULT_PATH, "HOME": src.get("HOME") or "/",
           "LANG": src.get("LANG") or "C.UTF-8"}
    if src.get("TMPDIR"):
        env["TMPDIR"] = src["TMPDIR"]
    env["HOSTNAME"] = hostname
    return env


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
        self.adopt_poll_interval = adopt_poll_interval
        self.on_exit = on_exit
        self.cgroups = cgroup_driver if cgroup_driver is not None else limits.detect_cgroups(cgroups)
        self.host_env = host_env
        self.environments = environments  # image pattern -> Python environment (pyenv)
        self._pods: dict[str, dict[str, ContainerRecord]] = {}
        self._watchdog = MemoryWatchdog(self._current, oom_poll_interval)
        self._poll_task: asyncio.Task[None] | None = None
        self._starting: set[asyncio.Task[Any]] = set()
        self._spawner = ShimSpawner(self.state_dir, use_shimd=use_shimd)

    @property
    def oom_poll_interval(self) -> float:
        """Seconds between two looks of the memory watchdog."""
        return self._watchdog.interval

    @oom_poll_interval.setter
    def oom_poll_interval(self, value: float) -> None:
        self._watchdog.interval = value

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
        """Take over what a previous agent reported (see reported.observations_from_status)
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
            records[name] = ContainerRecord(inst, o.last_termination)
        if not records:
            del self._pods[uid]

    def instances(self, uid: str) -> dict[str, Instance]:
        return {n: r.current for n, r in self._pods.get(uid, {}).items()}

    def any_running(self, uid: str) -> bool:
        return any(r.current.running for r in self._pods.get(uid, {}).values())

    def pods(self) -> list[str]:
        return list(self._pods)

    def _current(self) -> list[Instance]:
        return [r.current for recs in self._pods.values() for r in recs.values()]

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
        # off the event loop, with the instance's files (see spawn.open_instance).
        setup = PodSetup(pod_meta(pod, self.clock.now(), self.node_name) if uid not in self._pods else None,
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
        records[container_name] = ContainerRecord(inst, last)

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
        cwd = _working_dir(container, work_dir(pdir))
        lim = container_limits(container)
        inst.memory_limit = lim.memory
        inst.gpus = gpu_list((extra_env or {}).get(GPU_ENV))
        cgroup = self._make_cgroup(f"{ns}_{name}_{uid}_{container_name}_{restart_count}", lim)
        record = {"node": self.node_name, "namespace": ns, "pod": name, "uid": uid, "container": container_name,
                  "restartCount": restart_count, "backoffCount": backoff_count, "containerID": inst.container_id,
                  "memoryLimit": lim.memory, "cgroup": cgroup_record(cgroup), "gpus": inst.gpus,
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
            proc, report = await self._spawner.spawn(inst, record, spec, setup)
        except files.InstanceBusy:
            # Never two processes for one slot: a live shim already runs this
            # instance (unknown to us): adopt it instead.
            if cgroup is not None:
                cgroup.remove()
            path = files.record_path(inst.log_path)
            found = files.FoundInstance(path, inst.restart_count, files.read_json(path) or {})
            adopted = load_instance(found, None, uid, self.clock)
            rec = self._pods.setdefault(uid, {}).get(inst.container)
            self._pods[uid][inst.container] = ContainerRecord(adopted, rec.last_termination if rec else None)
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
            self._fail_start(inst, CONTAINER_CANNOT_RUN, exec_error(argv0, err, str(report.get("step") or "")),
                             permanent=False)
            reap_later(inst)
            return inst
        inst.pid = int(report["pid"])
        inst.start_ticks = int(report.get("startTicks") or 0)
        inst.started_at = from_wall(self.clock, report.get("startedAt"))
        if cgroup is not None and not in_cgroup(cgroup, inst.pid):
            cgroup.remove()
            cgroup = None
        inst.cgroup = cgroup
        enforced = cgroup is not None and cgroup.memory_dir is not None
        inst.watchdog = lim.memory is not None and not enforced
        inst.waiter = asyncio.create_task(self._wait(uid, inst), name=f"wait-{uid}-{inst.container}")
        if inst.watchdog:
            self._watchdog.ensure()
        return inst

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
        fd = pidfd(proc.pid)
        if fd is not None:
            try:
                await _readable(fd)
            finally:
                os.close(fd)
        while proc.poll() is None:
            await asyncio.sleep(self.adopt_poll_interval)
        await self._finish(uid, inst)

    async def _wait_forked(self, shim: ForkedShim, record: Path) -> None:
        """Until a shim that is not our child is gone. Its pidfd names it only if
        it still held its lock after the pidfd was opened (else the pid may
        have been reused): then it says when; else the lock is polled."""
        if shim.pidfd is not None and files.shim_alive(record):
            await _readable(shim.pidfd)
        while files.shim_alive(record):
            await asyncio.sleep(self.adopt_poll_interval)

    async def _finish(self, uid: str, inst: Instance, *, notify: bool = True) -> None:
        """The shim is gone: take the exit from its status file."""
        if inst.termination is not None:
            return
        status = files.read_json(files.status_path(inst.log_path)) or {}
        if isinstance(status.get("exitCode"), int):
            code, reason, message = int(status["exitCode"]), "", ""
            finished = from_wall(self.clock, status.get("finishedAt"))
        else:
            kill_recorded(status)
            code, reason, message = 137, CONTAINER_STATUS_UNKNOWN, SHIM_LOST_MESSAGE
            finished = self.clock.now()
        # The OOM mark of an instance we started is only ever written after inst.oom is set.
        oom = inst.oom or (inst.adopted and files.oom_path(inst.log_path).exists()) or \
            (inst.cgroup is not None and inst.cgroup.oom_killed() and code == 137)
        if oom:
            reason, message, code = OOM_KILLED, "", 137
        started = inst.started_at or from_wall(self.clock, status.get("startedAt"))
        inst.termination = Termination(exit_code=code, finished_at=finished, started_at=started,
                                       reason=reason, message=message, container_id=inst.container_id)
        end_execs(inst)
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
                    refresh_pid(inst)
                if not files.shim_alive(files.record_path(inst.log_path)):
                    await self._finish(uid, inst)
            await asyncio.sleep(self.adopt_poll_interval)

    # ------------------------------------------------------------------ adoption

    async def adopt(self, pods: Iterable[Obj], *, wait_for_orphans: float = 5.0) -> Adoption:
        """Take over what shims of a previous agent of this node run or recorded.

        ``pods``: the pods that exist. Instances of pods bound to this node are
        adopted (running: watched, killable; exited: their real termination);
        processes of pods that are gone (or bound elsewhere) are killed and
        their records removed. Pid files of the runtime before shims are reaped
        (their processes died with that agent or are killed now).
        """
        mine = {}
        for p in pods:
            meta = p.get("metadata") or {}
            if (p.get("spec") or {}).get("nodeName") == self.node_name and meta.get("uid"):
                mine[meta["uid"]] = p
        report = Adoption()
        orphans: list[files.FoundInstance] = []
        for uid, containers in found_instances(self.state_dir, self.node_name, report).items():
            pod = mine.get(uid)
            if pod is None or uid in self._pods:
                if pod is None:
                    orphans.extend(f for insts in containers.values() for f in insts.values())
                continue
            records: dict[str, ContainerRecord] = {}
            for cname, insts in containers.items():
                n = max(insts)
                cur = load_instance(insts[n], report, uid, self.clock)
                last = load_instance(insts[n - 1], None, uid, self.clock).termination if n - 1 in insts else None
                records[cname] = ContainerRecord(cur, last)
            self._pods[uid] = records
        report.orphans_killed += await kill_orphans(orphans, wait_for_orphans, self.clock.now(), self.node_name)
        if any(i.running and i.adopted for i in self._current()):
            self._ensure_poller()
        if any(i.running and i.watchdog for i in self._current()):
            self._watchdog.ensure()
        return report

    def reap_orphans(self) -> int:
        """Kill the process groups left by a runtime before shims (pid files
        with pid + createTime, checked so a reused pid is spared)."""
        return sum(reap_legacy(f) for f in files.scan(self.state_dir, self.node_name) if f.legacy)

    # ------------------------------------------------------------------ kill

    async def kill_pod(self, uid: str, grace: float) -> None:
        """SIGTERM to every running container's main process, ``grace`` seconds,
        then SIGKILL to its process group; returns once all have exited."""
        insts = [r.current for r in self._pods.get(uid, {}).values() if r.current.running]
        await kill_instances(insts, grace)

    async def shutdown(self, grace: float) -> None:
        """Kill every pod's processes (agent stop)."""
        await self._settle_starts()
        await asyncio.gather(*(self.kill_pod(uid, grace) for uid in list(self._pods)))
        self.detach()

    def detach(self) -> None:
        """Stop watching without killing anything (the shims keep the containers
        and record their exits for the next agent)."""
        self._watchdog.cancel()
        if self._poll_task is not None:
            self._poll_task.cancel()
        self._poll_task = None
        for inst in self._current():
            if inst.waiter is not None and not inst.waiter.done():
                inst.waiter.cancel()

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
            if cur.running and cur.pid is not None and same_process(cur):
                killpg(cur.pid, signal.SIGKILL)
            execctx.forget_container(cur.log_path.parent)
            for n in range(cur.restart_count + 1):
                files.remove_instance_files(cur.log_path.with_name(f"{n}.log"))
        return next(iter(recs.values())).current.log_path.parent.parent if recs else None


def _settled(pending: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    """Done callback of a start: forget it, and retrieve an error nobody awaited."""
    def done(t: asyncio.Task[Any]) -> None:
        pending.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.debug("container start failed: %s", t.exception())
    return done


async def _readable(fd: int) -> None:
    """Until ``fd`` (a pidfd) is readable: its process has exited."""
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await exited
    finally:
        loop.remove_reader(fd)


def _working_dir(container: Obj, default: Path) -> Path:
    wd = container.get("workingDir")
    if isinstance(wd, str) and os.path.isabs(wd) and os.path.isdir(wd):
        return Path(wd)
    return default  # the pod's working directory: made before the shim starts (spawn.PodSetup)


def _find_container(pod: Obj, name: str) -> tuple[Obj, str]:
    spec = pod.get("spec") or {}
    for field_name in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field_name) or []):
            if isinstance(c, dict) and c.get("name") == name:
                return c, f"spec.{field_name}[{i}]"
    raise KeyError(f"pod has no container {name!r}")
