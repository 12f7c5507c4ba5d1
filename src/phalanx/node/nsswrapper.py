"""Finding nss_wrapper (``libnss_wrapper.so``), the preload that makes a container resolve names through the
local network's hosts file instead of the system's.
"""
from __future__ import annotations

import ctypes.util
import functools
import os
import platform

_LIB_DIRS = (
    "/usr/lib/{multiarch}", "/lib/{multiarch}", "/usr/lib64", "/lib64", "/usr/lib", "/lib",
    "/usr/local/lib", "/usr/local/lib64",
)


def find_nss_wrapper() -> str | None:
    """Path of libnss_wrapper.so, or None. ``PHALANX_NSS_WRAPPER`` overrides
    (set it to an empty string to disable)."""
    env = os.environ.get("PHALANX_NSS_WRAPPER")
    if env is not None:
        return env if env and os.path.isfile(env) else None
    return _search_nss_wrapper()


@functools.lru_cache(maxsize=1)
def _search_nss_wrapper() -> str | None:
    """The system's libnss_wrapper.so, looked up once (every pod start asks)."""
    multiarch = f"{platform.machine()}-linux-gnu"
    for d in _LIB_DIRS:
        for name in ("libnss_wrapper.so", "libnss_wrapper.so.0"):
            p = os.path.join(d.format(multiarch=multiarch), name)
            if os.path.isfile(p):
                return p
    found = ctypes.util.find_library("nss_wrapper")
    if found:
        for d in _LIB_DIRS:
            p = os.path.join(d.format(multiarch=multiarch), found)
            if os.path.isfile(p):
                return p
    return None


def nss_wrapper_available() -> bool:
    return find_nss_wrapper() is not None
