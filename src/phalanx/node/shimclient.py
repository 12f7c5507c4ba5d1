"""The runtime's side of the shim fork server (``shimd``): find it through its
socket, start it when it is missing, dead, unresponsive or stale, and ask it
for a shim. Whoever gets ``ShimdDown`` twice starts shims the old way.
"""
from __future__ import annotations

import array
import asyncio
import errno
import marshal
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from phalanx.node import shimd

SHIMD = Path(shimd.__file__)
REPLY_TIMEOUT = 5.0
START_TIMEOUT = 10.0
MAX_PARALLEL = 32  # requests in flight: well under the server's listen backlog
_CONNECT_RETRIES = 100


class ShimdDown(Exception):
    """No usable server: none listens, it died or hung mid-request, or it runs
    other code. ``generation``: the server the request went to."""

    def __init__(self, message: str, generation: int) -> None:
        super().__init__(message)
        self.generation = generation


class ShimdClient:
    """Requests to the shim fork server of one state directory."""

    def __init__(self, state_dir: Path, *, idle: float = shimd.IDLE_EXIT, reply_timeout: float = REPLY_TIMEOUT,
                 start_timeout: float = START_TIMEOUT) -> None:
        self.state_dir = Path(state_dir).absolute()
        self.path = str(self.state_dir / shimd.SOCKET_NAME)
        self.idle = idle
        self.reply_timeout = reply_timeout
        self.start_timeout = start_timeout
        self.generation = 0  # bumped by every server this client starts
        self.umask = current_umask()
        self.code = shimd.code_token()
        self._restarting: asyncio.Lock | None = None
        self._parallel: asyncio.Semaphore | None = None

    async def spawn(self, spec_fd: int, report_fd: int, log_fd: int, lock_fd: int) -> int:
        """Fork a shim on these descriptors; its pid. ShimdDown when no server
        took the request; OSError when the server could not fork."""
        reply, gen = await self._request({"op": "spawn", "umask": self.umask}, [spec_fd, report_fd, log_fd, lock_fd])
        if isinstance(reply.get("pid"), int):
            return int(reply["pid"])
        if reply.get("error") == "stale":
            raise ShimdDown("the shim fork server runs other code", gen)
        raise OSError(int(reply.get("errno") or 0) or errno.EIO, str(reply.get("error") or "malformed reply"))

    async def ping(self) -> dict[str, Any]:
        """``{"shimd": pid, "children": n}``; ShimdDown without a live server of this code."""
        reply, gen = await self._request({"op": "ping"}, [])
        if "shimd" not in reply:
            raise ShimdDown(f"the shim fork server answered {reply!r}", gen)
        return reply

    async def restart(self, generation: int) -> None:
        """Start a new server, unless one was started since ``generation`` failed."""
        if self._restarting is None:
            self._restarting = asyncio.Lock()
        async with self._restarting:
            if self.generation != generation:
                return
            await self._launch()
            self.generation += 1

    async def _launch(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        r, w = os.pipe()
        try:
            with open(self.state_dir / shimd.LOG_NAME, "ab") as errlog:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", str(SHIMD), str(self.state_dir), repr(float(self.idle))],
                    stdin=subprocess.DEVNULL, stdout=w, stderr=errlog, cwd="/", env=helper_env(),
                    start_new_session=True)
        except (OSError, subprocess.SubprocessError) as e:
            os.close(r)
            raise ShimdDown(f"cannot start the shim fork server: {e}", self.generation) from e
        finally:
            os.close(w)
        try:
            data = await read_fd(r, self.start_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            proc.kill()
            raise ShimdDown(f"the shim fork server did not start: {e!r}", self.generation) from e
        finally:
            try:
                proc.wait(5)  # it forks the server and exits at once
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if not data.startswith(b"ready "):
            raise ShimdDown(f"the shim fork server did not start (see {self.state_dir / shimd.LOG_NAME})",
                            self.generation)

    async def _request(self, req: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], int]:
        gen = self.generation
        if self._parallel is None:
            self._parallel = asyncio.Semaphore(MAX_PARALLEL)
        async with self._parallel:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
            try:
                await self._connect(sock, gen)
                body = marshal.dumps(dict(req, v=shimd.PROTOCOL, code=self.code))
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
                try:
                    sock.sendmsg([body], anc)
                except OSError as e:
                    raise ShimdDown(f"cannot send to the shim fork server: {e}", gen) from e
                try:
                    data = await recv_reply(sock, self.reply_timeout)
                except asyncio.TimeoutError:
                    _kill_peer(sock)  # hung: its queued requests (and their descriptors) die with it
                    raise ShimdDown("the shim fork server did not answer", gen) from None
                except OSError as e:
                    raise ShimdDown(f"the shim fork server failed: {e}", gen) from e
            finally:
                sock.close()
        if not data:
            raise ShimdDown("the shim fork server closed the connection", gen)
        try:
            reply = marshal.loads(data)
        except (EOFError, ValueError, TypeError):
            reply = None
        if not isinstance(reply, dict):
            raise ShimdDown("malformed reply from the shim fork server", gen)
        return reply, gen

    async def _connect(self, sock: socket.socket, gen: int) -> None:
        dir_fd = None
        try:
            addr, dir_fd = shimd.socket_address(self.path)
            for _ in range(_CONNECT_RETRIES):
                try:
                    sock.connect(addr)
                    return
                except BlockingIOError:  # backlog full: the server is busy, not gone
                    await asyncio.sleep(0.01)
            raise ShimdDown("the shim fork server accepts no connection", gen)
        except OSError as e:
            raise ShimdDown(f"no shim fork server: {e}", gen) from e
        finally:
            if dir_fd is not None:
                os.close(dir_fd)


def _kill_peer(sock: socket.socket) -> None:
    """SIGKILL the server at the other end, if that connection still names it."""
    try:
        _, pid = shimd.peer_uid_pid(sock)
        if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
            return  # it closed the connection: gone, and the pid may be another's by now
    except BlockingIOError:
        pass  # connected and silent: still that process
    except OSError:
        return
    if pid > 0:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def current_umask() -> int:
    """This process's umask (the shims take it from their request)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def helper_env() -> dict[str, str]:
    """Shims and their server need no environment of ours (a container's comes in its spec)."""
    return {k: os.environ[k] for k in ("PATH", "LD_LIBRARY_PATH") if k in os.environ}


async def recv_reply(sock: socket.socket, timeout: float) -> bytes:
    """One message from a non-blocking socket, waited for with a reader callback
    (``loop.sock_recv`` under ``wait_for`` costs a task per request)."""
    loop = asyncio.get_running_loop()
    fd = sock.fileno()
    done: asyncio.Future[bytes] = loop.create_future()

    def readable() -> None:
        if done.done():
            return
        try:
            done.set_result(sock.recv(4096))
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            done.set_exception(e)

    loop.add_reader(fd, readable)
    try:
        return await asyncio.wait_for(done, timeout)
    finally:
        loop.remove_reader(fd)


async def read_fd(fd: int, timeout: float) -> bytes:
    """Everything written to a pipe until all its writers closed it; closes ``fd``."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    chunks: list[bytes] = []

    def readable() -> None:
        if done.done():
            return
        try:
            while True:
                b = os.read(fd, 65536)
                if not b:
                    done.set_result(None)
                    return
                chunks.append(b)
        except BlockingIOError:
            return
        except OSError as e:
            done.set_exception(e)

    try:
        os.set_blocking(fd, False)
        loop.add_reader(fd, readable)
        try:
            await asyncio.wait_for(done, timeout)
        finally:
            loop.remove_reader(fd)
    finally:
        os.close(fd)
    return b"".join(chunks)
