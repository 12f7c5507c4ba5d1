"""Where Phalanx keeps its state on this machine: ``PHALANX_HOME``, else ``$XDG_DATA_HOME/phalanx``.

Pods, logs, the store and the control plane's files all live under it.
"""
from __future__ import annotations

import os
from pathlib import Path


def phalanx_home() -> Path:
    env = os.environ.get("PHALANX_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "phalanx"
