"""Exec contexts (phalanx.node.execctx), `phalanx exec` errors and podwait, on files
written as the runtime writes them, with real (sleeping) processes as containers."""
from __future__ import annotations

import json
import signal
import stat
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from phalanx.cli import execcmd
from phalanx.node import execctx, podwait
from phalanx.node.execctx import ExecContext, ExecTargetError
from phalanx.node.logs import pod_dir, record_pod
from phalanx.node.shim import start_ticks
from phalanx.objects.errors import BadRequest

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []

    def spawn() -> subprocess.Popen:
        p = subprocess.Popen(["sleep", "30"])
        started.append(p)
        return p

    yield spawn
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def make_pod(name="w-0", uid="u1", containers=("main",), inits=(), default=None) -> dict:
    ann = {"kubectl.kubernetes.io/default-container": default} if default else {}
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "annotations": ann},
            "spec": {"nodeName": "n1", "containers": [{"name": c} for c in containers],
                     "initContainers": [{"name": c} for c in inits]}}


def run_container(home: Path, pod: dict, container: str, proc: subprocess.Popen | None, *,
                  restart_count: int = 0, env: dict | None = None, exited: bool = False) -> Path:
    """Write what the runtime writes for a running instance (proc) of the container."""
    record_pod(home, pod, NOW, "n1")
    meta = pod["metadata"]
    cdir = pod_dir(home, meta["namespace"], meta["name"], meta["uid"]) / container
    cdir.mkdir(parents=True, exist_ok=True)
    pid = proc.pid if proc else 999999
    ticks = start_ticks(pid) if proc else 1
    status = {"pid": pid, "startTicks": ticks}
    if exited:
        status["exitCode"] = 0
    (cdir / f"{restart_count}.status").write_text(json.dumps(status))
    execctx.write_context(cdir, ExecContext("ns", meta["name"], meta["uid"], container, f"phalanx://{meta['uid']}",
                                            restart_count, pid, ticks, str(cdir.parent), env or {"A": "1"}))
    return cdir


# ------------------------------------------------------------------ context files


def test_context_round_trips_and_is_private(tmp_path):
    ctx = ExecContext("ns", "p", "u1", "main", "phalanx://x", 2, 123, 456, "/w", {"HOSTNAME": "p", "X": "$y"})
    path = execctx.write_context(tmp_path, ctx)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert execctx.read_context(tmp_path) == ctx
    assert [p.name for p in tmp_path.iterdir()] == ["exec.json"]  # no temporary left behind


@pytest.mark.parametrize("bad", [None, [], {"env": {}}, {**ExecContext("n", "p", "u", "c", "i", 0, 1, 1, "/").to_json(),
                                                       "pid": "1"},
                                 {**ExecContext("n", "p", "u", "c", "i", 0, 1, 1, "/").to_json(), "env": []}])
def test_malformed_contexts_are_ignored(tmp_path, bad):
    (tmp_path / "exec.json").write_text(json.dumps(bad))
    assert execctx.read_context(tmp_path) is None


def test_running_only_while_the_process_lives_and_no_exit_is_recorded(tmp_path, procs):
    p = procs()
    cdir = run_container(tmp_path, make_pod(), "main", p)
    assert execctx.running_context(cdir) is not None
    (cdir / "0.status").write_text(json.dumps({"pid": p.pid, "startTicks": start_ticks(p.pid), "exitCode": 0}))
    assert execctx.running_context(cdir) is None


def test_a_zombie_or_a_reused_pid_is_not_running(tmp_path, procs):
    p = procs()
    cdir = run_container(tmp_path, make_pod(), "main", p)
    ctx = execctx.read_context(cdir)
    assert not execctx.process_alive(p.pid, ctx.start_ticks + 1)  # another process with that pid
    p.kill()
    deadline = time.monotonic() + 5
    while execctx.process_alive(p.pid, ctx.start_ticks) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not execctx.instance_running(cdir, ctx)  # a zombie, not yet reaped
    p.wait()
    assert not execctx.instance_running(cdir, ctx)


# ------------------------------------------------------------------ exec'd processes


def test_exec_registrations_are_killed_with_their_container_only(tmp_path, procs):
    mine, other = procs(), procs()
    execctx.register_exec(tmp_path, mine.pid, "phalanx://a")
    execctx.register_exec(tmp_path, other.pid, "phalanx://b")
    assert [p.pid for p in execctx.exec_roots(tmp_path, "phalanx://a")] == [mine.pid]
    assert execctx.kill_execs(tmp_path, "phalanx://a") == 1
    assert mine.wait(5) == -signal.SIGKILL
    assert other.poll() is None
    assert sorted(p.name for p in (tmp_path / "exec.d").iterdir()) == [f"{other.pid}.json"]


def test_kill_reaches_the_exec_d_process_children(tmp_path, procs):
    sh = subprocess.Popen(["sh", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    try:
        child = int(sh.stdout.readline())
        execctx.register_exec(tmp_path, sh.pid, "phalanx://a")
        execctx.forget_container(tmp_path)
        assert sh.wait(5) == -signal.SIGKILL
        deadline = time.monotonic() + 5
        while execctx.process_alive(child, start_ticks(child)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not execctx.process_alive(child, start_ticks(child))
        assert not (tmp_path / "exec.d").exists()
    finally:
        if sh.poll() is None:
            sh.kill()
            sh.wait()


def test_stale_registrations_are_dropped_on_the_next_exec(tmp_path, procs):
    dead = procs()
    execctx.register_exec(tmp_path, dead.pid, "phalanx://a")
    dead.kill()
    dead.wait()
    live = procs()
    execctx.register_exec(tmp_path, live.pid, "phalanx://a")
    assert [p.name for p in (tmp_path / "exec.d").iterdir()] == [f"{live.pid}.json"]


# ------------------------------------------------------------------ finding the container


def test_locate_the_running_container_and_say_kubectl_words_otherwise(tmp_path, procs):
    run_container(tmp_path, make_pod(containers=("main", "side"), inits=("init",)), "main", procs())
    target = execctx.locate(tmp_path, "ns", "w-0")
    assert target.context.container == "main"
    assert target.note == 'Defaulted container "main" out of: main, side, init (init)'
    assert execctx.locate(tmp_path, "ns", "w-0", "main").note is None
    with pytest.raises(ExecTargetError) as e:
        execctx.locate(tmp_path, "ns", "w-0", "nope")
    assert str(e.value) == "container nope is not valid for pod w-0" and e.value.final
    with pytest.raises(ExecTargetError) as e:
        execctx.locate(tmp_path, "ns", "w-0", "side")
    assert str(e.value) == "unable to exec: container side of pod w-0 is not running" and not e.value.final
    with pytest.raises(ExecTargetError) as e:
        execctx.locate(tmp_path, "other", "w-0")
    assert str(e.value) == "pod w-0 not found on this machine"


def test_the_api_exec_provider_runs_phalanx_exec_for_a_running_container_only(tmp_path, procs):
    run_container(tmp_path, make_pod(containers=("main", "side")), "main", procs())
    provider = execctx.LocalExecProvider(tmp_path, ["phalanx-exec", "--home", str(tmp_path)])
    assert provider.command("ns", "w-0", "main", ["ls", "-l"]) == [
        "phalanx-exec", "--home", str(tmp_path), "-n", "ns", "-c", "main", "w-0", "--", "ls", "-l"]
    for pod, container in (("w-0", "side"), ("w-1", "main")):
        with pytest.raises(BadRequest) as e:
            provider.command("ns", pod, container, ["true"])
        assert e.value.message == f'unable to upgrade connection: container not found ("{container}")'


def test_default_container_annotation_wins(tmp_path, procs):
    run_container(tmp_path, make_pod(containers=("side", "main"), default="main"), "main", procs())
    target = execctx.locate(tmp_path, "ns", "w-0")
    assert target.context.container == "main" and target.note is None


def test_the_pod_of_that_name_that_runs_is_chosen(tmp_path, procs):
    run_container(tmp_path, make_pod(uid="old"), "main", procs())
    run_container(tmp_path, make_pod(uid="new"), "main", None, exited=True)
    assert execctx.locate(tmp_path, "ns", "w-0").context.uid == "old"


def test_default_home_inside_a_pod_is_the_home_of_its_root(tmp_path, monkeypatch):
    root = str(tmp_path / "h" / "pods" / "ns_p_u" / ".root")
    assert execctx.default_home({"PHALANX_ROOT": root}) == tmp_path / "h"
    assert execctx.default_home({"PHALANX_HOME": "/x", "PHALANX_ROOT": root}) == Path("/x")
    monkeypatch.delenv("PHALANX_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", "/d")
    assert execctx.default_home({"PHALANX_ROOT": "/elsewhere/.root"}) == Path("/d/phalanx")


# ------------------------------------------------------------------ phalanx exec: errors


@pytest.mark.parametrize("args,message", [
    (["w-0", "--", "true"], "error: pod w-0 not found on this machine"),
    (["Bad_Pod", "--", "true"], "error: pod name: Invalid value: 'Bad_Pod'"),
    (["-n", "NS", "w-0", "--", "true"], "error: namespace: Invalid value: 'NS'"),
    (["-c", "../x", "w-0", "--", "true"], "error: container name: Invalid value: '../x'"),
    (["w-0"], "error: you must specify at least one command for the container"),
    (["--wait", "-1", "w-0", "--", "true"], "error: --wait: Invalid value: -1: must be 0 or more"),
])
def test_exec_errors_are_kubectl_like_with_status_1(tmp_path, capsys, args, message):
    assert execcmd.main(["--home", str(tmp_path), *args]) == 1
    assert capsys.readouterr().err.startswith(message)


def test_exec_into_a_stopped_or_unknown_container(tmp_path, capsys, procs):
    run_container(tmp_path, make_pod(containers=("main", "side")), "main", procs())
    assert execcmd.main(["--home", str(tmp_path), "-n", "ns", "-c", "side", "w-0", "--", "true"]) == 1
    assert capsys.readouterr().err == "error: unable to exec: container side of pod w-0 is not running\n"
    assert execcmd.main(["--home", str(tmp_path), "-n", "ns", "-c", "nope", "--wait", "5", "w-0", "--", "true"]) == 1
    assert capsys.readouterr().err == "error: container nope is not valid for pod w-0\n"  # at once: waiting is vain


def test_wait_polls_until_the_deadline(tmp_path, capsys):
    t0 = time.monotonic()
    assert execcmd.main(["--home", str(tmp_path), "--wait", "0.3", "w-0", "--", "true"]) == 1
    assert 0.3 <= time.monotonic() - t0 < 2
    assert "not found on this machine" in capsys.readouterr().err


def test_exec_failure_messages_and_statuses():
    assert (execcmd._exec_failure("nope", FileNotFoundError(2, "x")).args[0],
            execcmd._exec_failure("nope", FileNotFoundError(2, "x")).code) == \
        ('exec: "nope": executable file not found in $PATH', 127)
    assert execcmd._exec_failure("/bin/nope", FileNotFoundError(2, "x")).args[0] == \
        'exec: "/bin/nope": stat /bin/nope: no such file or directory'
    assert execcmd._exec_failure("/etc", PermissionError(13, "x")).code == 126


# ------------------------------------------------------------------ podwait


def test_podwait_reports_running_pods_and_the_ones_left(tmp_path, capsys, procs):
    run_container(tmp_path, make_pod("w-0"), "main", procs())
    run_container(tmp_path, make_pod("w-1", uid="u2"), "main", None, exited=True)
    run_container(tmp_path, make_pod("w-2", uid="u3", inits=("init",)), "init", procs())  # only its init runs
    assert podwait.wait_for_pods(tmp_path, "ns", ["w-0", "w-1", "w-2", "w-3"], timeout=0) == ["w-1", "w-2", "w-3"]
    assert capsys.readouterr().out == "pod/w-0 running\n"
    assert podwait.main(["--home", str(tmp_path), "-n", "ns", "--timeout", "0.2", "w-0", "w-3"]) == 1
    out = capsys.readouterr()
    assert out.out == "pod/w-0 running\n" and out.err == "timed out waiting for pods: w-3\n"
    assert podwait.main(["--home", str(tmp_path), "-n", "ns", "--timeout", "0", "w-0"]) == 0


def test_podwait_refuses_bad_names(tmp_path, capsys):
    assert podwait.main(["--home", str(tmp_path), "-n", "ns", "../etc"]) == 1
    assert "pod name: Invalid value" in capsys.readouterr().err
