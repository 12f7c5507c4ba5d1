"""The shim fork server: starts container shims by forking itself, not by
spawning a new Python, so a container start costs the control plane a few
syscalls instead of a fork of its large process and a new interpreter.

One per state directory, found through ``<state dir>/shimd.sock`` (0600, owner
only). Run as ``python -I -S shimd.py STATE_DIR [IDLE_SECONDS]``: standard
library only, with ``shim.py`` imported once. It detaches (its own session,
reparented away from the control plane), so a crash of the control plane
leaves it, and the shims, running; its own death leaves the shims running
too (they are in sessions of their own and hold nothing of it).

Protocol (``SOCK_SEQPACKET``, one request per connection, peer uid checked):

- request: a ``marshal``-ed dict ``{"v", "code", "op"}``; for ``op: "spawn"``
  also ``umask`` and, with ``SCM_RIGHTS``, four descriptors: the spec (read to
  its end, as the shim's stdin), the report pipe's write end (its stdout), the
  log (its stderr) and the locked instance record (its ``LOCK_FD``).
- reply: ``{"pid"}`` (the shim's) once forked, ``{"shimd", "children"}`` for
  ``op: "ping"``, or ``{"error", "errno"}``. ``error: "stale"`` means this
  server runs other code than the client's (upgraded): start a new one.

The forked child is exactly ``shim.main`` on those descriptors, in a new
session. The server reaps its children, and exits once it has none and has
had no request for ``IDLE_SECONDS`` or no longer owns the socket path (a newer
server took it, or the state directory is gone).
"""
from __future__ import annotations

import marshal
import os
import select
import signal
import socket
import sys
import time
import types
from _signal import SIG_DFL as _SIG_DFL  # type: ignore[import-not-found]  # noqa: PLC2701  # CPython's C module
from _signal import SIG_IGN as _SIG_IGN  # noqa: PLC2701  # CPython's C module: no enum wrapping
from _signal import signal as _setsig  # noqa: PLC2701  # CPython's C module: no enum wrapping

PROTOCOL = 1
SOCKET_NAME = "shimd.sock"
LOG_NAME = "shimd.log"
IDLE_EXIT = 15.0
SPAWN_FDS = 4  # spec, report, log, lock
SERVER_NAME = b"phalanx-shimd"  # process names (``comm``): a forked shim keeps the server's command line
SHIM_NAME = b"phalanx-shim"
MAX_REQUEST = 4096
RECV_TIMEOUT = 2.0
TICK = 1.0
_SUN_PATH_MAX = 107
_HERE = os.path.dirname(os.path.abspath(__file__))


def code_token() -> str:
    """Names the code a server runs: a client talking to a server started from
    other files (an upgrade) gets ``stale`` and starts a new one."""
    parts = []
    for name in ("shim.py", "shimd.py"):
        try:
            st = os.stat(os.path.join(_HERE, name))
            parts.append("%d:%d" % (st.st_mtime_ns, st.st_size))
        except OSError:
            parts.append("-")
    return "/".join(parts)


def socket_address(path: str) -> tuple[str, int | None]:
    """An address ``bind``/``connect`` accept for ``path``: itself, or through
    ``/proc/self/fd`` when it is longer than a unix socket name may be. The
    descriptor returned (if any) must stay open while the address is used."""
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        return path, None
    fd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return "/proc/self/fd/%d/%s" % (fd, os.path.basename(path)), fd


def fds_from(ancdata: list) -> list[int]:
    """The descriptors an ``SCM_RIGHTS`` message carried."""
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds.extend(int.from_bytes(data[i:i + 4], sys.byteorder, signed=True) for i in range(0, usable, 4))
    return fds


def peer_uid_pid(sock: socket.socket) -> tuple[int, int]:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid = int.from_bytes(creds[0:4], sys.byteorder, signed=True)
    uid = int.from_bytes(creds[4:8], sys.byteorder, signed=True)
    return uid, pid


# --------------------------------------------------------------------------- server


class Server:
    """Accepts requests on the bound socket, forks shims, reaps them."""

    def __init__(self, listener: socket.socket, path: str, ident: tuple[int, int], idle: float,
                 shim: types.ModuleType) -> None:
        self.listener = listener
        self.path = path
        self.ident = ident  # (st_dev, st_ino) of the socket path we bound
        self.idle = idle
        self.shim = shim
        self.code = code_token()
        self.children: set[int] = set()
        self.last_request = time.monotonic()

    def run(self) -> int:
        """Serve until idle. Exited shims are reaped at the next request or tick
        (not on SIGCHLD: no wake-up per shim); a zombie holds nothing but its pid."""
        _setsig(signal.SIGCHLD, _SIG_DFL)
        for sig in (signal.SIGHUP, signal.SIGPIPE):  # no terminal; a client gone mid-reply is an OSError
            _setsig(sig, _SIG_IGN)
        self.listener.setblocking(False)
        timeout = min(TICK, max(self.idle, 0.05))
        while True:
            self.reap()
            if not self.children and (time.monotonic() - self.last_request >= self.idle or not self.owns_path()):
                return 0
            if select.select([self.listener], [], [], timeout)[0]:
                self.accept_one()

    def reap(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)

    def owns_path(self) -> bool:
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.ident

    def accept_one(self) -> None:
        """One connection per wake-up (the loop comes back at once for the next):
        no accept that fails with EAGAIN after every request."""
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            _log("accept: %s" % e)
            return
        try:
            self.handle(conn)
        except Exception as e:  # one bad request never stops the server
            _log("request: %r" % (e,))
        finally:
            conn.close()

    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(RECV_TIMEOUT)
        uid, _ = peer_uid_pid(conn)
        if uid != os.getuid():
            return
        msg, anc, flags, _ = conn.recvmsg(MAX_REQUEST, socket.CMSG_SPACE(SPAWN_FDS * 4))
        fds = fds_from(anc)
        try:
            self.last_request = time.monotonic()
            reply = self.answer(msg, flags, fds)
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        try:
            conn.sendall(marshal.dumps(reply))
        except OSError:
            pass  # the client is gone; a shim it asked for still runs and holds the record's lock

    def answer(self, msg: bytes, flags: int, fds: list[int]) -> dict:
        try:
            req = marshal.loads(msg)
        except (EOFError, ValueError, TypeError):
            return {"error": "malformed request", "errno": 0}
        if not isinstance(req, dict) or req.get("v") != PROTOCOL or req.get("code") != self.code:
            return {"error": "stale", "errno": 0}
        op = req.get("op")
        if op == "ping":
            return {"shimd": os.getpid(), "children": len(self.children)}
        if op != "spawn":
            return {"error": "unknown op %r" % (op,), "errno": 0}
        umask = req.get("umask")
        if len(fds) != SPAWN_FDS or flags & socket.MSG_CTRUNC or not isinstance(umask, int) or not 0 <= umask <= 0o777:
            return {"error": "malformed spawn request", "errno": 0}
        try:
            pid = os.fork()
        except OSError as e:
            return {"error": e.strerror or str(e), "errno": e.errno or 0}
        if pid == 0:
            self.become_shim(fds, umask)  # never returns
        self.children.add(pid)
        return {"pid": pid}

    def become_shim(self, fds: list[int], umask: int) -> None:
        """In the forked child: today's shim, on the client's descriptors."""
        code = 1
        try:
            _setsig(signal.SIGHUP, _SIG_DFL)
            os.setsid()
            set_name(SHIM_NAME)
            os.umask(umask)
            spec, report, log, lock = fds
            os.dup2(spec, 0)
            os.dup2(report, 1)
            os.dup2(log, 2)
            os.dup2(lock, 3)
            os.closerange(4, max(os.sysconf("SC_OPEN_MAX"), 256))
            code = self.shim.main(["shim", "3"])
        except BaseException as e:
            try:
                os.write(2, ("shim: %s: %s\n" % (type(e).__name__, e)).encode())
            except OSError:
                pass
        os._exit(code if isinstance(code, int) else 1)


def set_name(name: bytes) -> None:
    try:
        fd = os.open("/proc/self/comm", os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.write(fd, name)
    except OSError:
        pass
    finally:
        os.close(fd)


def _log(msg: str) -> None:
    try:
        os.write(2, ("%s shimd[%d]: %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), os.getpid(), msg)).encode())
    except OSError:
        pass


def bind(path: str) -> tuple[socket.socket, tuple[int, int]]:
    """Listen on ``path`` (0600), taking it over from any previous server: bind
    a temporary name, then rename it into place."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    addr, dir_fd = socket_address(tmp)
    old = os.umask(0o177)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        sock.bind(addr)
        os.chmod(tmp, 0o600)
        sock.listen(256)
        st = os.stat(tmp)
        os.rename(tmp, path)
    except BaseException:
        sock.close()
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        os.umask(old)
        if dir_fd is not None:
            os.close(dir_fd)
    return sock, (st.st_dev, st.st_ino)


def _load_shim() -> types.ModuleType:
    """``shim.py`` from beside this file (``-I`` leaves the script's folder off sys.path)."""
    sys.path.insert(0, _HERE)
    try:
        import shim  # type: ignore[import-not-found]
    finally:
        del sys.path[0]
    return shim


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: shimd.py STATE_DIR [IDLE_SECONDS]\n")
        return 2
    state_dir = os.path.abspath(argv[1])
    idle = float(argv[2]) if len(argv) > 2 else IDLE_EXIT
    shim = _load_shim()
    if os.fork() > 0:  # detach: the starter reaps this one, init adopts the server
        os._exit(0)
    os.chdir("/")
    set_name(SERVER_NAME)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    path = os.path.join(state_dir, SOCKET_NAME)
    try:
        listener, ident = bind(path)
    except OSError as e:
        _log("cannot listen on %s: %s" % (path, e))
        return 1
    os.write(1, b"ready %d\n" % os.getpid())
    os.dup2(null, 1)  # the starter reads to the end: let go of its pipe
    os.close(null)
    return Server(listener, path, ident, idle, shim).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
