"""$PHALANX_HOME holds pod logs, state and credentials: it is created 0700 and an
existing one we own is tightened (threat model in the README)."""
from __future__ import annotations

import os

from phalanx.config import make_private_dir


def test_state_dir_is_created_private(tmp_path):
    old = os.umask(0)
    try:
        d = tmp_path / "a" / "home"
        make_private_dir(d)
        assert d.stat().st_mode & 0o777 == 0o700
    finally:
        os.umask(old)


def test_existing_state_dir_is_tightened(tmp_path):
    d = tmp_path / "home"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    make_private_dir(d)
    assert d.stat().st_mode & 0o777 == 0o700
