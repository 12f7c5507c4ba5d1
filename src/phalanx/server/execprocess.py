"""A command run for a remote-command stream: spawned as argv in its own session,
with pipes or a pty (its controlling terminal), non-blocking fd I/O and reaping.

Spawning uses ``posix_spawn`` (no fork of this threaded process, no shell);
with a pty the child opens the terminal after ``setsid``, so it becomes the
session's controlling terminal and Ctrl-C typed into it is a SIGINT.
"""
from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import pty
import signal
import struct
import termios
from dataclasses import dataclass, field
from typing import Sequence

CHUNK = 32 * 1024
UNKNOWN_EXIT = 255
_REAPERS: set[asyncio.Task[None]] = set()  # background reaps of processes whose stream was cut


@dataclass
class ExecProcess:
    """A spawned command: its pid (also its process group) and our ends of its stdio.

    ``stdin``/``stdout``/``stderr`` are non-blocking fds (None when not asked);
    with a pty, ``stdin`` and ``stdout`` are the same master fd and ``stderr`` is None.
    """

    pid: int
    stdin: int | None
    stdout: int | None
    stderr: int | None
    tty: bool
    returncode: int | None = None
    _pidfd: int | None = None
    _closed: set[int] = field(default_factory=set)

    async def wait(self) -> int:
        """The exit status as a shell gives it (128+N when killed by signal N)."""
        if self.returncode is not None:
            return self.returncode
        if self._pidfd is not None:
            await _readable(self._pidfd)
        while True:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else: its status is lost
                self.returncode = UNKNOWN_EXIT
                return self.returncode
            if pid == self.pid:
                break
            await asyncio.sleep(0.05)  # no pidfd: poll
        code = os.waitstatus_to_exitcode(status)
        self.returncode = 128 - code if code < 0 else code
        return self.returncode

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the command's process group (what it started too, unless it left the group)."""
        if self.returncode is not None:
            return
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(self.pid, sig)

    def close_stdin(self) -> None:
        """End the command's input: EOF on a pipe; on a pty, the terminal's EOF character."""
        if self.stdin is None:
            return
        if self.tty:
            try:
                os.write(self.stdin, b"\x04")
            except OSError:
                pass
            return
        self._close_fd(self.stdin)
        self.stdin = None

    def resize(self, width: int, height: int) -> None:
        if self.tty and self.stdout is not None and 0 <= width < 65536 and 0 <= height < 65536:
            fcntl.ioctl(self.stdout, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    def close(self) -> None:
        """Close our fds; a command still running is killed and reaped in the background."""
        if self.returncode is None:
            self.kill()
            task = asyncio.get_running_loop().create_task(self._reap())
            _REAPERS.add(task)
            task.add_done_callback(_REAPERS.discard)
        else:
            self._close_pidfd()
        for fd in {self.stdin, self.stdout, self.stderr}:
            if fd is not None:
                self._close_fd(fd)

    async def _reap(self) -> None:
        try:
            await self.wait()
        finally:
            self._close_pidfd()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def _close_fd(self, fd: int) -> None:
        if fd not in self._closed:
            self._closed.add(fd)
            os.close(fd)


def spawn(argv: Sequence[str], *, stdin: bool, stdout: bool, stderr: bool, tty: bool,
          env: dict[str, str] | None = None) -> ExecProcess:
    """Start ``argv`` (argv[0] looked up in PATH) in a new session. Streams not
    asked for are /dev/null; with ``tty`` stdin, stdout and stderr are one pty."""
    if not argv:
        raise ValueError("empty command")
    environ = dict(os.environ if env is None else env)
    ours: list[int] = []
    theirs: list[int] = []
    actions: list[tuple] = []
    try:
        if tty:
            master, slave = pty.openpty()
            ours.append(master)
            theirs.append(slave)
            # Opened by path after setsid: the pty becomes the controlling terminal.
            actions = [(os.POSIX_SPAWN_OPEN, 0, os.ttyname(slave), os.O_RDWR, 0),
                       (os.POSIX_SPAWN_DUP2, 0, 1), (os.POSIX_SPAWN_DUP2, 0, 2)]
            fds: list[int | None] = [master, master, None]
        else:
            fds = []
            for target, wanted in ((0, stdin), (1, stdout), (2, stderr)):
                if not wanted:
                    actions.append((os.POSIX_SPAWN_OPEN, target, os.devnull, os.O_RDWR, 0))
                    fds.append(None)
                    continue
                r, w = os.pipe()
                mine, child = (w, r) if target == 0 else (r, w)
                ours.append(mine)
                theirs.append(child)
                actions.append((os.POSIX_SPAWN_DUP2, child, target))
                fds.append(mine)
        pid = os.posix_spawnp(argv[0], list(argv), environ, file_actions=actions, setsid=True)
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    for fd in set(ours):
        os.set_blocking(fd, False)
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    return ExecProcess(pid, fds[0], fds[1], fds[2], tty, _pidfd=pidfd)


# --------------------------------------------------------------------------- non-blocking fd I/O


def _settle(ready: asyncio.Future[None]) -> None:
    """Resolve ``ready`` once (the fd callback may fire again before it is removed)."""
    if not ready.done():
        ready.set_result(None)


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, _settle, ready)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def _writable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_writer(fd, _settle, ready)
    try:
        await ready
    finally:
        loop.remove_writer(fd)


async def read_chunk(fd: int) -> bytes:
    """The next bytes from ``fd``; b"" at end of file (EIO on a pty whose other side is closed)."""
    while True:
        try:
            return os.read(fd, CHUNK)
        except BlockingIOError:
            await _readable(fd)
        except OSError as e:
            if e.errno == errno.EIO:
                return b""
            raise


async def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``; BrokenPipeError when the reader has gone."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            await _writable(fd)
