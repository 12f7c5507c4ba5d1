"""The Python environment a container runs in on the local runtime.

Its bin directory goes first on the container's PATH, so ``python3``,
``torchrun`` and ``mpirun`` are that environment's whether or not the user
activated it: by default the environment Phalanx itself runs from, or the
first ``environments`` entry of ``cluster.yaml`` whose image pattern (shell
glob, as ``fnmatch``) matches the container's ``image``.
"""
from __future__ import annotations

import fnmatch
import functools
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence


@dataclass(frozen=True)
class PythonEnvironment:
    """A venv or conda prefix, and the image pattern that selects it."""

    image: str  # fnmatch pattern matched against the container's image
    prefix: Path

    @property
    def bin_dir(self) -> Path:
        return self.prefix / "bin"


@functools.cache
def own_bin_dir() -> Path:
    """The scripts directory of the interpreter running Phalanx (a venv's ``bin``)."""
    scripts = sysconfig.get_path("scripts")
    return Path(scripts) if scripts else Path(sys.executable).parent


def environment_for(image: object, environments: Sequence[PythonEnvironment]) -> PythonEnvironment | None:
    """The first configured environment whose pattern matches ``image``; None: Phalanx's own."""
    text = image if isinstance(image, str) else ""
    for env in environments:
        if fnmatch.fnmatchcase(text, env.image):
            return env
    return None


def environment_vars(image: object, environments: Sequence[PythonEnvironment], path: str) -> dict[str, str]:
    """PATH with the chosen environment's bin directory first (once), plus the
    variable its activation would set (``VIRTUAL_ENV`` or ``CONDA_PREFIX``)."""
    env = environment_for(image, environments)
    if env is None:
        bin_dir = own_bin_dir()
        prefix = Path(sys.prefix)
    else:
        bin_dir, prefix = env.bin_dir, env.prefix
    rest = [p for p in path.split(os.pathsep) if p and p != str(bin_dir)]
    out = {"PATH": os.pathsep.join([str(bin_dir), *rest])}
    if (prefix / "pyvenv.cfg").is_file():
        out["VIRTUAL_ENV"] = str(prefix)
    elif (prefix / "conda-meta").is_dir():
        out["CONDA_PREFIX"] = str(prefix)
    return out


def check_prefix(prefix: Path) -> str | None:
    """Why ``prefix`` cannot be a container's environment, or None."""
    if not prefix.is_absolute():
        return "must be an absolute path (or start with ~)"
    if not (prefix / "bin").is_dir():
        return f"{prefix}/bin is not a directory (a venv or conda prefix has one)"
    return None
