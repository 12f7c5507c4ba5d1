"""The shim fork server (phalanx.node.shimd) and the runtime starting containers through it.

The server is a real detached process per state directory; the containers are real
processes. Every wait is on a condition with a deadline.
"""
from __future__ import annotations

import asyncio
import json
import logging
import marshal
import os
import signal
import stat
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest

from phalanx.node import instancefiles as files
from phalanx.node import shimd, spawn
from phalanx.node.instances import ForkedShim
from phalanx.node.processes import ProcessRuntime
from phalanx.node.shim import start_ticks
from phalanx.node.shimclient import ShimdClient, ShimdDown, read_fd
from phalanx.objects.clock import Clock
from tests.procfds import settled_fds

pytestmark = pytest.mark.timeout(60)


# --------------------------------------------------------------------------- helpers


async def until(pred, timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def server_pids(state: Path) -> list[int]:
    """Fork servers of this state directory (by name and command line; their shims have another name)."""
    out = []
    for p in psutil.process_iter(["name", "cmdline"]):
        cmd = p.info.get("cmdline") or []
        if p.info.get("name") == shimd.SERVER_NAME.decode() and str(state) in cmd:
            out.append(p.pid)
    return out


@pytest.fixture
def state(tmp_path):
    """A state directory; its fork servers are killed at the end (their shims are not theirs to keep)."""
    yield tmp_path
    for pid in server_pids(tmp_path):
        kill(pid)


async def started(client: ShimdClient) -> int:
    """Start a server for the client; its pid."""
    with pytest.raises(ShimdDown) as e:
        await client.ping()
    await client.restart(e.value.generation)
    return (await client.ping())["shimd"]


def pod(cmd: list[str], name: str = "p", **container) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": str(uuid.uuid4())},
            "spec": {"containers": [dict({"name": "main", "image": "busybox", "command": cmd}, **container)]}}


class Instance:
    """The descriptors the runtime sends for one instance, made by hand."""

    def __init__(self, d: Path, argv: list[str]) -> None:
        self.log, self.record, self.status = d / "0.log", d / "0.pid", d / "0.status"
        self.lock = files.open_locked_record(self.record, {"node": "n", "uid": "u", "container": "c"})
        self.spec = os.memfd_create("spec")
        os.write(self.spec, marshal.dumps({"argv": argv, "env": {"PATH": os.environ["PATH"]}, "cwd": str(d),
                                           "log": str(self.log), "status": str(self.status), "cgroup_procs": []}))
        os.lseek(self.spec, 0, os.SEEK_SET)
        self.logfd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.read, self.write = os.pipe()

    async def spawn(self, client: ShimdClient) -> tuple[int, dict]:
        try:
            pid = await client.spawn(self.spec, self.write, self.logfd, self.lock)
        finally:
            for fd in (self.spec, self.write, self.logfd, self.lock):
                os.close(fd)
        return pid, marshal.loads(await read_fd(self.read, 10))


# --------------------------------------------------------------------------- the server


async def test_one_server_is_started_detached_and_reused(state):
    client = ShimdClient(state)
    pid = await started(client)
    assert (await client.ping())["shimd"] == pid  # reused, not started again
    assert server_pids(state) == [pid]
    proc = psutil.Process(pid)
    assert proc.ppid() != os.getpid() and os.getsid(pid) != os.getsid(0)  # not ours: our death is not its
    sock = state / shimd.SOCKET_NAME
    assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
    other = ShimdClient(state)  # another runtime on the same state directory finds it
    assert (await other.ping())["shimd"] == pid


async def test_forked_shim_speaks_todays_protocol_and_is_reaped(state):
    client = ShimdClient(state)
    server = await started(client)
    inst = Instance(state, ["sh", "-c", "echo out; echo err >&2; sleep 0.3; exit 7"])
    shim_pid, report = await inst.spawn(client)
    assert report["shimPid"] == shim_pid and report["startTicks"] == start_ticks(report["pid"])
    assert psutil.Process(shim_pid).ppid() == server
    assert psutil.Process(shim_pid).name() == shimd.SHIM_NAME.decode()
    assert os.getsid(shim_pid) == shim_pid  # a session of its own
    assert os.getsid(report["pid"]) == report["pid"]  # and so is the container
    assert files.shim_alive(inst.record)
    with pytest.raises(files.InstanceBusy):
        files.open_locked_record(inst.record, {})
    await until(lambda: not files.shim_alive(inst.record), what="the shim to end")
    status = json.loads(inst.status.read_text())
    assert (status["exitCode"], status["signal"], status["pid"]) == (7, None, report["pid"])
    assert inst.log.read_text() == "out\nerr\n"
    await until(lambda: gone(shim_pid) and not psutil.Process(server).children(), what="the server to reap it")
    assert not psutil.pid_exists(shim_pid)  # reaped, not a zombie


async def test_the_container_inherits_nothing_of_the_server(state):
    """The server ignores SIGHUP and SIGPIPE and the shim blocks the signals it
    forwards: the container starts with none blocked or ignored (but glibc's
    own 32 and 33, see test_node_shim) and only its stdio; a signal to the
    shim still reaches it."""
    client = ShimdClient(state)
    await started(client)
    inst = Instance(state, ["sleep", "30"])
    shim_pid, report = await inst.spawn(client)
    pid = report["pid"]
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    assert int(status["SigBlk"], 16) == 0
    assert int(status["SigIgn"], 16) & ~((1 << 31) | (1 << 32)) == 0, status["SigIgn"]
    want = {0: "/dev/null", 1: str(inst.log), 2: str(inst.log)}
    fds = settled_fds(pid, want)
    assert fds == want, fds
    os.kill(shim_pid, signal.SIGHUP)
    await until(lambda: not files.shim_alive(inst.record), what="the shim to end")
    ended = json.loads(inst.status.read_text())
    assert (ended["exitCode"], ended["signal"]) == (128 + signal.SIGHUP, signal.SIGHUP)


async def test_exec_failure_is_reported_with_errno_and_step(state):
    client = ShimdClient(state)
    await started(client)
    shim_pid, report = await Instance(state, ["no-such-command-xyz"]).spawn(client)
    assert (report["errno"], report["step"]) == (2, "exec")
    status = json.loads((state / "0.status").read_text())
    assert status["startError"]["errno"] == 2 and status["argv0"] == "no-such-command-xyz"


async def test_a_dead_server_is_replaced(state):
    client = ShimdClient(state)
    first = await started(client)
    kill(first)
    await until(lambda: gone(first), what="the server to die")
    with pytest.raises(ShimdDown) as e:
        await client.ping()
    await client.restart(e.value.generation)
    second = (await client.ping())["shimd"]
    assert second != first and server_pids(state) == [second]


async def test_restart_happens_once_for_requests_that_failed_together(state):
    client = ShimdClient(state)
    failures = []
    for _ in range(3):
        with pytest.raises(ShimdDown) as e:
            await client.ping()
        failures.append(e.value.generation)
    await asyncio.gather(*(client.restart(g) for g in failures))
    assert client.generation == 1 and len(server_pids(state)) == 1


async def test_a_hung_server_is_killed_so_its_queued_requests_die_with_it(state):
    client = ShimdClient(state, reply_timeout=0.5)
    pid = await started(client)
    os.kill(pid, signal.SIGSTOP)
    inst = Instance(state, ["true"])
    with pytest.raises(ShimdDown):
        await inst.spawn(client)
    await until(lambda: gone(pid), what="the hung server to be killed")
    os.close(inst.read)
    # Its request (and the record's lock in it) died with it: the slot is free again.
    await until(lambda: not files.shim_alive(inst.record), what="the queued lock to be released")


async def test_a_server_running_other_code_is_stale(state):
    client = ShimdClient(state)
    await started(client)
    client.code = "other"
    with pytest.raises(ShimdDown, match="other code"):
        await Instance(state, ["true"]).spawn(client)


async def test_an_idle_server_exits_and_a_busy_one_waits_for_its_shims(state):
    client = ShimdClient(state, idle=0.3)
    pid = await started(client)
    inst = Instance(state, ["sleep", "1.5"])
    shim_pid, _ = await inst.spawn(client)
    await asyncio.sleep(0.8)
    assert not gone(pid), "the server left while it had a shim to reap"
    await until(lambda: gone(shim_pid), what="the shim to end")
    await until(lambda: gone(pid), timeout=5, what="the idle server to exit")


async def test_a_server_whose_socket_was_taken_over_exits(state):
    a = ShimdClient(state)
    first = await started(a)
    await a.restart(a.generation)  # a second server takes the socket path over
    second = (await a.ping())["shimd"]
    assert second != first
    await until(lambda: gone(first), what="the replaced server to exit")
    assert not gone(second)


async def test_long_state_dir_paths_work(state):
    deep = state / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    assert len(str(deep / shimd.SOCKET_NAME)) > 108
    client = ShimdClient(deep)
    pid = await started(client)
    assert (await client.ping())["shimd"] == pid
    kill(pid)


async def test_requests_without_the_four_descriptors_are_refused(state):
    client = ShimdClient(state)
    await started(client)
    reply, _ = await client._request({"op": "spawn", "umask": 0o22}, [])
    assert reply == {"error": "malformed spawn request", "errno": 0}


# --------------------------------------------------------------------------- the runtime


@pytest.fixture
def rt(state):
    r = ProcessRuntime(state, Clock(), cgroups="off", adopt_poll_interval=0.05)
    yield r
    r.detach()
    for uid in r.pods():
        for inst in r.instances(uid).values():
            if inst.running and inst.pid:
                try:
                    os.killpg(inst.pid, signal.SIGKILL)
                except OSError:
                    pass


async def done(inst, timeout: float = 10.0):
    await asyncio.wait_for(inst.done.wait(), timeout)
    return inst.termination


async def test_runtime_starts_containers_through_the_fork_server(rt, state):
    p = pod(["sh", "-c", "echo hello; exit 3"])
    inst = await rt.start(p, "main")
    assert isinstance(inst.shim, ForkedShim)
    t = await done(inst)
    assert (t.exit_code, t.reason) == (3, "")
    assert inst.log_path.read_text() == "hello\n"
    assert server_pids(state), "no fork server ran"
    # The next start reuses it.
    first = server_pids(state)
    inst2 = await rt.start(pod(["true"], name="q"), "main")
    assert (await done(inst2)).exit_code == 0
    assert server_pids(state) == first


async def test_runtime_reports_exec_failures(rt):
    inst = await rt.start(pod(["no-such-command-xyz"]), "main")
    t = await done(inst)
    assert (t.exit_code, t.reason) == (128, "ContainerCannotRun")
    assert t.message == 'exec: "no-such-command-xyz": executable file not found in $PATH'


async def test_kill_sends_sigterm_then_the_exit_is_seen_without_being_the_parent(rt):
    p = pod(["sh", "-c", "trap 'exit 143' TERM; echo ready; sleep 30 & wait"])
    inst = await rt.start(p, "main")
    await until(lambda: "ready" in inst.log_path.read_text(), what="the trap")
    await rt.kill_pod(p["metadata"]["uid"], 5)
    t = inst.termination
    assert t is not None and t.exit_code == 143


async def test_kill_escalates_to_sigkill(rt):
    p = pod(["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"])
    inst = await rt.start(p, "main")
    await until(lambda: "ready" in inst.log_path.read_text(), what="the trap")
    await rt.kill_pod(p["metadata"]["uid"], 0.3)
    assert inst.termination is not None and inst.termination.exit_code == 137


async def test_signals_to_the_shim_are_forwarded(rt):
    inst = await rt.start(pod(["sleep", "30"]), "main")
    assert isinstance(inst.shim, ForkedShim)
    os.kill(inst.shim.pid, signal.SIGUSR1)
    t = await done(inst)
    assert t.exit_code == 128 + signal.SIGUSR1


async def test_the_watchdog_oom_kill_is_reported(rt):
    hog = ["python3", "-c", "import time; b = b'x' * (200 << 20); time.sleep(30)"]
    p = pod(hog, resources={"limits": {"memory": "64Mi"}})
    rt.oom_poll_interval = 0.02
    inst = await rt.start(p, "main")
    assert inst.watchdog
    t = await done(inst, 20)
    assert (t.exit_code, t.reason) == (137, "OOMKilled")


async def test_containers_take_the_control_planes_umask(rt):
    assert (await done(await rt.start(pod(["true"]), "main"))).exit_code == 0  # the server runs, umask 022
    old = os.umask(0o027)
    try:
        r2 = ProcessRuntime(rt.state_dir, Clock(), cgroups="off")
    finally:
        os.umask(old)
    inst = await r2.start(pod(["sh", "-c", "umask"], name="q"), "main")
    assert isinstance(inst.shim, ForkedShim)
    await done(inst)
    assert inst.log_path.read_text().strip() == "0027"


async def test_containers_survive_the_fork_server_being_killed(rt, state):
    p = pod(["sh", "-c", "echo up; sleep 30"])
    inst = await rt.start(p, "main")
    [server] = server_pids(state)
    kill(server)
    await until(lambda: gone(server), what="the server to die")
    assert not gone(inst.pid) and not gone(inst.shim.pid)
    assert inst.running
    # The next start brings up a new server; the first container is still killable and its exit seen.
    other = await rt.start(pod(["true"], name="q"), "main")
    assert (await done(other)).exit_code == 0
    assert server_pids(state) and server_pids(state) != [server]
    await rt.kill_pod(p["metadata"]["uid"], 5)
    assert inst.termination is not None and inst.termination.exit_code == 143


async def test_a_restarted_agent_adopts_what_forked_shims_run(rt, state):
    keep = pod(["sh", "-c", "echo one; sleep 30"], name="keep")
    quit_ = pod(["sh", "-c", "sleep 0.3; exit 4"], name="quit")
    a = await rt.start(keep, "main")
    b = await rt.start(quit_, "main")
    rt.detach()  # the agent goes away without killing anything
    await until(lambda: not files.shim_alive(files.record_path(b.log_path)), what="the second to exit")
    second = ProcessRuntime(state, Clock(), cgroups="off", adopt_poll_interval=0.05)
    report = await second.adopt([dict(keep, spec=dict(keep["spec"], nodeName="")),
                                 dict(quit_, spec=dict(quit_["spec"], nodeName=""))])
    assert report.running == {keep["metadata"]["uid"]: ["main"]}
    assert report.exited == {quit_["metadata"]["uid"]: ["main"]}
    adopted = second.instances(keep["metadata"]["uid"])["main"]
    assert adopted.running and adopted.pid == a.pid
    assert second.instances(quit_["metadata"]["uid"])["main"].termination.exit_code == 4
    await second.kill_pod(keep["metadata"]["uid"], 5)
    assert adopted.termination is not None and adopted.termination.exit_code == 143
    second.detach()


async def test_without_a_fork_server_shims_start_as_processes(state, caplog):
    (state / shimd.SOCKET_NAME).mkdir()  # no server can listen there
    (state / shimd.SOCKET_NAME / "x").touch()
    rt = ProcessRuntime(state, Clock(), cgroups="off")
    with caplog.at_level(logging.WARNING, logger="phalanx.node.spawn"):
        inst = await rt.start(pod(["sh", "-c", "exit 5"]), "main")
    assert isinstance(inst.shim, subprocess.Popen)
    assert (await done(inst)).exit_code == 5
    assert "no shim fork server" in caplog.text
    assert server_pids(state) == []
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="phalanx.node.spawn"):  # no new try for a while
        inst = await rt.start(pod(["true"], name="q"), "main")
    assert isinstance(inst.shim, subprocess.Popen) and "no shim fork server" not in caplog.text
    assert (await done(inst)).exit_code == 0


async def test_use_shimd_false_starts_shims_as_processes(state):
    rt = ProcessRuntime(state, Clock(), cgroups="off", use_shimd=False)
    inst = await rt.start(pod(["sh", "-c", "exit 2"]), "main")
    assert isinstance(inst.shim, subprocess.Popen)
    assert (await done(inst)).exit_code == 2
    assert server_pids(state) == []


async def test_many_concurrent_starts_share_one_fresh_server(rt, state):
    pods = [pod(["true"], name=f"c{i}") for i in range(12)]
    insts = await asyncio.gather(*(rt.start(p, "main") for p in pods))
    assert all(isinstance(i.shim, ForkedShim) for i in insts)
    assert [(await done(i)).exit_code for i in insts] == [0] * 12
    assert len(server_pids(state)) == 1


async def test_without_pidfds_the_exit_is_seen_through_the_lock(rt, monkeypatch):
    monkeypatch.setattr(spawn, "pidfd", lambda pid: None)  # a kernel before pidfd_open
    inst = await rt.start(pod(["sh", "-c", "sleep 0.2; exit 6"]), "main")
    assert isinstance(inst.shim, ForkedShim) and inst.shim.pidfd is None
    assert (await done(inst)).exit_code == 6
