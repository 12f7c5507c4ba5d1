"""The container shim on its own: report, status file, lock, signals, clean-up."""
from __future__ import annotations

import ast
import fcntl
import json
import marshal
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from phalanx.node import instancefiles as files
from phalanx.node.shim import start_ticks
from phalanx.node.runtime import SHIM

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(30)]


class Shim:
    def __init__(self, tmp: Path, argv: list[str]) -> None:
        self.dir = tmp
        self.log = tmp / "0.log"
        self.record = tmp / "0.pid"
        self.status = tmp / "0.status"
        fd = files.open_locked_record(self.record, {"node": "n", "uid": "u", "container": "c"})
        spec = {"argv": argv, "env": {"PATH": os.environ["PATH"]}, "cwd": str(tmp), "log": str(self.log),
                "status": str(self.status), "cgroup_procs": []}
        r, w = os.pipe()
        try:
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", str(SHIM), str(fd)], stdin=subprocess.PIPE,
                                         stdout=w, stderr=subprocess.DEVNULL, start_new_session=True, pass_fds=(fd,))
        finally:
            os.close(w)
            os.close(fd)
        assert self.proc.stdin is not None
        self.proc.stdin.write(marshal.dumps(spec))
        self.proc.stdin.close()
        with os.fdopen(r, "rb") as f:
            self.report = marshal.loads(f.read())

    def wait(self) -> dict:
        assert self.proc.wait(10) == 0 or "errno" in self.report
        data = json.loads(self.status.read_text())
        assert isinstance(data, dict)
        return data


def dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_shim_runs_the_container_and_records_its_exit(tmp_path):
    shim = Shim(tmp_path, ["sh", "-c", "echo hello; echo oops >&2; exit 3"])
    assert shim.report["pid"] > 0 and shim.report["startTicks"] > 0
    status = shim.wait()
    assert (status["exitCode"], status["signal"], status["pid"]) == (3, None, shim.report["pid"])
    assert status["startedAt"] <= status["finishedAt"] <= time.time()
    assert shim.log.read_text() == "hello\noops\n"
    assert not files.shim_alive(shim.record)  # the lock went with the shim


def test_lock_is_held_while_the_shim_lives_and_sigterm_is_forwarded(tmp_path):
    shim = Shim(tmp_path, ["sleep", "30"])
    pid = shim.report["pid"]
    assert files.shim_alive(shim.record)
    assert os.getpgid(pid) == pid and os.getsid(pid) == pid  # a session of its own
    assert start_ticks(pid) == shim.report["startTicks"]
    with pytest.raises(files.InstanceBusy):  # the slot cannot be started twice
        files.open_locked_record(shim.record, {})
    fd = os.open(shim.record, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    os.kill(shim.proc.pid, signal.SIGTERM)  # to the shim: forwarded to the container
    status = shim.wait()
    assert (status["exitCode"], status["signal"]) == (143, 15)
    assert not files.shim_alive(shim.record)


def test_the_rest_of_the_group_dies_with_the_main_process(tmp_path):
    shim = Shim(tmp_path, ["sh", "-c", "sleep 30 & echo $! > child; exit 0"])
    assert shim.wait()["exitCode"] == 0
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 5
    while not dead(child):
        assert time.monotonic() < deadline, "the container's other process outlived it"
        time.sleep(0.02)


def test_exec_failure_is_reported_and_recorded(tmp_path):
    shim = Shim(tmp_path, ["no-such-command-xyz"])
    assert shim.report["errno"] == 2 and shim.report["step"] == "exec"
    status = shim.wait()
    assert status["startError"]["errno"] == 2 and status["argv0"] == "no-such-command-xyz"
    assert "exitCode" not in status


def test_shim_imports_only_a_few_builtin_modules():
    """Its footprint: started as ``python -I -S``, it must not pull in phalanx, json, subprocess, ..."""
    tree = ast.parse(SHIM.read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"marshal", "os", "signal", "sys", "time"}, imported
