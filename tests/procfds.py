"""A process's open descriptors, read from /proc, once they have settled."""
from __future__ import annotations

import os
import time


def open_fds(pid: int) -> dict[int, str]:
    """fd -> what it points at; a descriptor closed while listing is skipped."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            pass
    return out


def settled_fds(pid: int, want: dict[int, str], timeout: float = 2.0) -> dict[int, str]:
    """``open_fds(pid)`` once it equals ``want``, or as it is after ``timeout``.
    Right after an exec the dynamic loader may still hold a library open (seen:
    fd 3 -> libc.so.6); a descriptor leaked to the process stays."""
    deadline = time.monotonic() + timeout
    while True:
        fds = open_fds(pid)
        if fds == want or time.monotonic() > deadline:
            return fds
        time.sleep(0.01)
