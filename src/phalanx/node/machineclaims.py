"""Machine-wide claims on loopback address blocks and host ports, shared by every PHALANX_HOME on the machine:
what keeps two homes (two `phalanx up`, two `phalanx run` with other homes) from handing out one address or port.

A claim is an exclusive open-file-description lock (``F_OFD_SETLK``) on one byte of one lock file: byte ``N``
for the address block ``127.N.0.0/16``, byte ``256 + P`` for host port ``P``. The kernel drops a lock when its
holder's file is closed or its process ends, so a claim lasts exactly as long as the home's control plane that
made it runs, and nothing stale is ever left to clean up (a reboot forgets them with the pods they protected).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import socket
import stat
import struct
import tempfile
import threading
import zlib
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

BLOCKS = 256  # 127.N.0.0/16, N in 0..255
PORT_BASE = BLOCKS
# struct flock on Linux: l_type, l_whence (short), l_start, l_len (off_t), l_pid (pid_t, 0 for OFD locks).
_FLOCK = "hhqqi4x"


LOCK_PATH_ENV = "PHALANX_LOOPBACK_CLAIMS"


def default_lock_path() -> Path:
    """The machine's one lock file: ``$PHALANX_LOOPBACK_CLAIMS`` when set (homes that share one claim only among
    themselves, as a test suite's), else in /tmp (every user's and every session's), else the temporary folder."""
    if os.environ.get(LOCK_PATH_ENV):
        return Path(os.environ[LOCK_PATH_ENV])
    base = "/tmp" if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK) else tempfile.gettempdir()
    return Path(base) / "phalanx-loopback.lock"


def port_free(port: int, protocol: str = "TCP") -> bool:
    """Whether a program could bind ``0.0.0.0:port`` now (SO_REUSEADDR, as
    servers set it, so sockets in TIME_WAIT do not count)."""
    kind = socket.SOCK_DGRAM if protocol.upper() == "UDP" else socket.SOCK_STREAM
    s = socket.socket(socket.AF_INET, kind)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class MachineClaims:
    """This process's claims on address blocks and host ports (thread-safe).

    Claims are made by one open of the lock file; ``close`` drops them all. A lock file that cannot be opened
    or locked (another user's, without write access) leaves the home uncoordinated: logged once, and every
    claim then succeeds, which is what a machine with a single home needs.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_lock_path()
        self._mutex = threading.Lock()
        self._file_obj: BinaryIO | None = None  # a file object: a forgotten instance's claims go with it
        self._pid = -1
        self._broken = False

    def _file(self) -> int:
        if self._pid == os.getpid() and self._file_obj is not None:
            return self._file_obj.fileno()
        # A forked child shares the parent's description (and so its locks): it opens its own.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, f"{self.path} is not a regular file")
            if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != 0o666:
                os.fchmod(fd, 0o666)  # other users' homes claim through it too (umask narrowed it)
        except OSError:
            os.close(fd)
            raise
        self._file_obj, self._pid = os.fdopen(fd, "r+b", buffering=0), os.getpid()
        return fd

    def _lock(self, offset: int, kind: int) -> bool:
        """Set (F_WRLCK) or drop (F_UNLCK) this description's lock on one byte; False when another holds it."""
        with self._mutex:
            if self._broken:
                return True
            try:
                fd = self._file()
            except OSError as e:  # not ours to write (another user's, mode 0600), not a file, ...
                return self._unavailable(e)
            try:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK, kind, os.SEEK_SET, offset, 1, 0))
                return True
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EACCES):  # how F_OFD_SETLK says another holds it
                    return False
                return self._unavailable(e)

    def _unavailable(self, e: OSError) -> bool:
        log.warning("machine-wide loopback claims unavailable (%s: %s): this home does not coordinate its "
                    "addresses and ports with other homes on the machine", self.path, e)
        self._broken = True
        return True

    # ------------------------------------------------------------------ address blocks

    def claim_block(self, preferred: int | None, key: str, first: int = 1) -> int | None:
        """A free block for this home: ``preferred`` when free (or already ours), else the first free one
        from a start derived from ``key`` (the home's path: the same home gets the same block when it can),
        among ``first``..255. None when every one is held."""
        if preferred is not None and 0 <= preferred < BLOCKS and self._lock(preferred, fcntl.F_WRLCK):
            return preferred
        span = BLOCKS - first
        start = zlib.crc32(key.encode()) % span
        for i in range(span):
            n = first + (start + i) % span
            if n != preferred and self._lock(n, fcntl.F_WRLCK):
                return n
        return None

    def release_block(self, block: int) -> None:
        self._lock(block, fcntl.F_UNLCK)

    # ------------------------------------------------------------------ host ports

    def claim_port(self, port: int) -> bool:
        """Claim a host port for this home: True when it is free on the machine or already ours."""
        return self._lock(PORT_BASE + port, fcntl.F_WRLCK)

    def release_port(self, port: int) -> None:
        self._lock(PORT_BASE + port, fcntl.F_UNLCK)

    def close(self) -> None:
        """Drop every claim (closing the description releases its locks)."""
        with self._mutex:
            if self._file_obj is not None and self._pid == os.getpid():
                with contextlib.suppress(OSError):
                    self._file_obj.close()
            self._file_obj, self._pid = None, -1
