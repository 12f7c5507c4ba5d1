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
from phalanx.node.shim import exec_candidates, start_ticks
from phalanx.node.spawn import SHIM
from tests.procfds import settled_fds

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(30)]


class Shim:
    def __init__(self, tmp: Path, argv: list[str], **spec_extra) -> None:
        self.dir = tmp
        self.log = tmp / "0.log"
        self.record = tmp / "0.pid"
        self.status = tmp / "0.status"
        fd = files.open_locked_record(self.record, {"node": "n", "uid": "u", "container": "c"})
        spec = {"argv": argv, "env": {"PATH": os.environ["PATH"]}, "cwd": str(tmp), "log": str(self.log),
                "status": str(self.status), "cgroup_procs": []}
        spec.update(spec_extra)
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
    """Its footprint: started as ``python -I -S``, it must not pull in phalanx, json, subprocess, ...
    (``_signal`` is the builtin half of ``signal``, loaded with it)."""
    tree = ast.parse(SHIM.read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"_signal", "marshal", "os", "signal", "sys", "time"}, imported


# --------------------------------------------------------------------------- the two ways to start a container

# The shim starts a container by posix_spawn, or by fork + exec when it must
# first join cgroups (a cgroup.procs file it cannot write is skipped, so a
# bogus one selects that path here).
PATHS = {"spawn": {}, "fork": {"cgroup_procs": ["/nonexistent/cgroup.procs"]}}


@pytest.fixture(params=sorted(PATHS))
def how(request):
    return PATHS[request.param]


def _proc_status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


# glibc's own signals (32, 33: below SIGRTMIN, invalid to Python): its posix_spawn
# leaves them ignored in the child; glibc sets its handlers on them when it needs them.
GLIBC_INTERNAL = (1 << 31) | (1 << 32)


def test_the_container_starts_clean(tmp_path, how):
    """Its own session, no blocked or ignored signal (the shim blocks and
    Python ignores some), stdin /dev/null, stdout+stderr the log, and none
    of the shim's descriptors (the locked record)."""
    shim = Shim(tmp_path, ["sleep", "30"], **how)
    pid = shim.report["pid"]
    try:
        st = _proc_status(pid)
        assert int(st["SigBlk"], 16) == 0 and int(st["SigIgn"], 16) & ~GLIBC_INTERNAL == 0, st
        assert os.getsid(pid) == pid and os.getpgid(pid) == pid
        want = {0: "/dev/null", 1: str(shim.log), 2: str(shim.log)}
        fds = settled_fds(pid, want)
        assert fds == want, fds
        assert os.readlink(f"/proc/{pid}/cwd") == str(tmp_path)
    finally:
        os.kill(shim.proc.pid, signal.SIGTERM)
    assert shim.wait()["exitCode"] == 143


def test_exit_code_log_and_group_kill_on_both_paths(tmp_path, how):
    shim = Shim(tmp_path, ["sh", "-c", "sleep 30 & echo $! > child; echo out; echo err >&2; exit 9"], **how)
    status = shim.wait()
    assert (status["exitCode"], status["signal"], status["pid"]) == (9, None, shim.report["pid"])
    assert shim.log.read_text() == "out\nerr\n"
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 5
    while not dead(child):
        assert time.monotonic() < deadline, "the container's other process outlived it"
        time.sleep(0.02)


def test_the_exit_record_carries_the_containers_cpu_time(tmp_path, how):
    # A busy loop in a child it reaps (sh waits for it): the leader's own and its reaped children's time.
    burn = f"{sys.executable} -c 'import time; t = time.process_time(); exec(\"while time.process_time() - t < 0.3: pass\")'"
    status = Shim(tmp_path, ["sh", "-c", f"{burn}; exit 0"], **how).wait()
    assert status["exitCode"] == 0
    assert 0.25 <= status["cpuSeconds"] < 5, status
    (tmp_path / "idle").mkdir()
    idle = Shim(tmp_path / "idle", ["true"], **how).wait()
    assert 0 <= idle["cpuSeconds"] < 0.25, idle


def test_a_killed_container_is_recorded_with_its_signal(tmp_path, how):
    shim = Shim(tmp_path, ["sleep", "30"], **how)
    os.kill(shim.report["pid"], signal.SIGKILL)
    status = shim.wait()
    assert (status["exitCode"], status["signal"]) == (137, 9)


def _exe(path: Path, text: str = "#!/bin/sh\necho found $0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_path_search_goes_on_past_missing_unusable_and_non_executable_entries(tmp_path, how):
    """As execvp: a missing directory, a file used as a directory and a
    non-executable candidate are passed over for a later executable one."""
    noexec = tmp_path / "noexec" / "tool"
    noexec.parent.mkdir()
    noexec.write_text("#!/bin/sh\necho wrong\n")
    noexec.chmod(0o644)
    (tmp_path / "afile").write_text("")
    good = _exe(tmp_path / "bin" / "tool")
    path = ":".join([str(tmp_path / "missing"), str(tmp_path / "afile"), str(noexec.parent), str(good.parent)])
    shim = Shim(tmp_path, ["tool"], env={"PATH": path}, **how)
    assert "pid" in shim.report, shim.report
    assert shim.wait()["exitCode"] == 0
    assert shim.log.read_text() == f"found {good}\n"


def test_path_search_reports_permission_denied_over_not_found(tmp_path, how):
    """Only a non-executable candidate: EACCES (what execvp says), not ENOENT."""
    noexec = tmp_path / "noexec" / "tool"
    noexec.parent.mkdir()
    noexec.write_text("")
    noexec.chmod(0o644)
    shim = Shim(tmp_path, ["tool"], env={"PATH": f"{tmp_path / 'missing'}:{noexec.parent}"}, **how)
    assert (shim.report["errno"], shim.report["step"]) == (13, "exec")
    status = shim.wait()
    assert status["startError"]["errno"] == 13 and status["argv0"] == "tool"


def test_a_slash_in_argv0_is_not_searched(tmp_path, how):
    _exe(tmp_path / "bin" / "tool")
    shim = Shim(tmp_path, ["./bin/tool"], env={"PATH": "/nonexistent"}, **how)  # relative to the cwd
    assert shim.wait()["exitCode"] == 0
    assert shim.log.read_text() == "found ./bin/tool\n"
    missing = Shim(tmp_path / "bin", ["./nope"], **how)
    assert (missing.report["errno"], missing.report["step"]) == (2, "exec")


def test_a_missing_working_directory_is_reported_as_such(tmp_path, how):
    shim = Shim(tmp_path, ["true"], cwd=str(tmp_path / "gone"), **how)
    assert (shim.report["errno"], shim.report["step"]) == (2, "chdir")
    assert shim.wait()["startError"]["step"] == "chdir"
    assert not shim.log.exists()  # nothing ran


def test_exec_candidates_follow_os_execvpe():
    assert exec_candidates("a/b", {"PATH": "/x"}) == ["a/b"]
    assert exec_candidates("t", {"PATH": "/x:/y/"}) == ["/x/t", "/y/t"]
    assert exec_candidates("t", {"PATH": "/x::/y"}) == ["/x/t", "t", "/y/t"]  # an empty entry: the cwd
    assert exec_candidates("t", {}) == [os.path.join(d, "t") for d in os.get_exec_path({})]
