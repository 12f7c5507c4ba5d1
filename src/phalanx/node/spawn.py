"""Starting a container instance's shim: through the state directory's fork server, else as a process of its own.

Owns what a start puts on disk first (the pod's record and directories, the locked instance record, the log).
"""
from __future__ import annotations

import asyncio
import logging
import marshal
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from phalanx.node import instancefiles as files
from phalanx.node.instances import ForkedShim, Instance, kill_recorded, pidfd
from phalanx.node.logs import write_pod_record
from phalanx.node.shimclient import ShimdClient, ShimdDown, helper_env, read_fd

log = logging.getLogger(__name__)

Obj = dict[str, Any]

SHIM = Path(__file__).with_name("shim.py")
SHIM_REPORT_TIMEOUT = 30.0
SHIMD_RETRY_AFTER = 30.0  # seconds of shims started as processes of their own after the fork server failed


def record_pod(pod_directory: Path, record: Obj) -> None:
    """The pod's record next to its logs, so they outlive the pod object (see podrecords)."""
    try:
        write_pod_record(pod_directory, record)
    except (OSError, ValueError) as e:
        log.warning("cannot record pod %s: %s", record.get("name"), e)


@dataclass
class PodSetup:
    """What an instance needs on disk before its files: the pod's record (on
    the pod's first start here: ``record``) and the directories. Idempotent;
    blocking, so run in a thread with the instance's files."""

    record: Obj | None
    pod_directory: Path
    container_dir: Path
    root: Path
    work: Path

    def __call__(self) -> None:
        if self.record is not None:
            record_pod(self.pod_directory, self.record)
        os.makedirs(self.container_dir, exist_ok=True)
        os.makedirs(self.root, exist_ok=True)
        os.makedirs(self.work, exist_ok=True)


class ShimSpawner:
    """Starts shims for one state directory. ``use_shimd=False``: never through
    the fork server (each shim is a new process)."""

    def __init__(self, state_dir: Path, *, use_shimd: bool = True) -> None:
        self.state_dir = state_dir
        self.shimd = ShimdClient(state_dir) if use_shimd else None
        self.shimd_retry_at = 0.0

    async def spawn(self, inst: Instance, record: Obj, spec: Obj, setup: Callable[[], None] | None = None,
                    ) -> tuple[subprocess.Popen[bytes] | ForkedShim, Obj]:
        """Start the instance's shim (through the fork server when it works);
        return it and its report (container pid, or why exec failed)."""
        client = self.shimd
        if client is not None and time.monotonic() >= self.shimd_retry_at:
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
            self.shimd_retry_at = time.monotonic() + SHIMD_RETRY_AFTER
        return await self._spawn_process(inst, record, spec, setup)

    async def _spawn_forked(self, client: ShimdClient, inst: Instance, record: Obj,
                            spec: Obj, setup: Callable[[], None] | None = None) -> tuple[ForkedShim, Obj]:
        """Have the fork server fork the shim on our descriptors: the spec (a
        memfd: never on disk), the report pipe, the log, the locked record."""
        lock_fd, spec_fd, log_fd = await _fds_in_thread(open_instance, inst, record, spec, setup)
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
        shim = ForkedShim(pid, pidfd(pid))
        try:
            report = await read_report(read_end, inst, f"the shim (pid {pid})")
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
        lock_fd = lock_record(inst, record)
        read_end = write_end = -1
        try:
            # The spec (it holds the environment) goes through an unlinked 0600 file: any size, never on disk by name.
            with tempfile.TemporaryFile(dir=inst.log_path.parent) as spec_file, open(inst.log_path, "ab") as logf:
                spec_file.write(marshal.dumps(spec))
                spec_file.flush()
                spec_file.seek(0)
                read_end, write_end = os.pipe()
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", str(SHIM), str(lock_fd)], stdin=spec_file, stdout=write_end,
                    stderr=logf, env=helper_env(), cwd="/", start_new_session=True, pass_fds=(lock_fd,))
        except BaseException:
            if read_end >= 0:
                os.close(read_end)
            raise
        finally:
            if write_end >= 0:
                os.close(write_end)
            os.close(lock_fd)  # the shim's copy keeps the lock
        try:
            report = await read_report(read_end, inst, "the shim")
        except asyncio.TimeoutError:
            proc.kill()
            raise
        except EOFError as e:
            proc.poll()
            raise EOFError(f"{e} ({proc.returncode})") from None
        return proc, report


def lock_record(inst: Instance, record: Obj) -> int:
    """The instance record, written and locked (InstanceBusy when a live shim
    holds it); the previous run's status and OOM mark removed."""
    lock_fd = files.open_locked_record(files.record_path(inst.log_path), record)
    for stale in (files.status_path(inst.log_path), files.oom_path(inst.log_path)):
        try:
            stale.unlink()
        except FileNotFoundError:
            pass
    return lock_fd


def open_instance(inst: Instance, record: Obj, spec: Obj, setup: Callable[[], None] | None) -> tuple[int, int, int]:
    """(locked record, spec, log) descriptors of a new instance, after
    ``setup``. Blocking file work (creating files is slow on some disks):
    run in a thread."""
    if setup is not None:
        setup()
    lock_fd = lock_record(inst, record)
    fds = [lock_fd]
    try:
        fds.append(spec_fd(spec, inst.log_path.parent))
        fds.append(os.open(inst.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return lock_fd, fds[1], fds[2]


async def read_report(fd: int, inst: Instance, who: str) -> Obj:
    """The shim's report from its pipe. If it never comes, a container the
    shim may have started is stopped."""
    try:
        data = await read_fd(fd, SHIM_REPORT_TIMEOUT)
    except asyncio.TimeoutError:
        kill_recorded(files.read_json(files.status_path(inst.log_path)))
        raise
    if not data:
        # The shim died before reporting; if it got as far as starting the container, stop it.
        kill_recorded(files.read_json(files.status_path(inst.log_path)))
        raise EOFError(f"{who} exited before reporting")
    report = marshal.loads(data)
    if not isinstance(report, dict):
        raise ValueError("malformed shim report")
    return report


def spec_fd(spec: Obj, directory: Path) -> int:
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


def reap_later(inst: Instance) -> None:
    """A shim that failed to start its container: let it be reaped."""
    if isinstance(inst.shim, ForkedShim):
        inst.shim.close()  # the fork server reaps it
    elif inst.shim is not None:
        asyncio.create_task(_reap(inst.shim))


async def _reap(proc: subprocess.Popen[bytes]) -> None:
    for _ in range(200):
        if proc.poll() is not None:
            return
        await asyncio.sleep(0.05)


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
