"""Local-runtime volumes, `phalanx exec` and podwait with a real node agent and
real processes (what MPIJob's launcher relies on: a hostfile and an rsh agent
in a configMap volume, orted started in the workers by `phalanx exec`)."""
from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from phalanx.client.local import LocalClient
from phalanx.node.agent import AgentConfig, NodeAgent, ensure_node
from phalanx.node.logs import LogProvider
from phalanx.node.network import LocalNetwork
from phalanx.objects.clock import Clock
from phalanx.objects.errors import NotFound
from phalanx.store.store import Store

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

NODE = "exec1"
EXEC = [sys.executable, "-m", "phalanx.cli.execcmd"]
PODWAIT = [sys.executable, "-m", "phalanx.node.podwait"]


@dataclass
class Env:
    client: LocalClient
    logs: LogProvider
    home: Path


@pytest.fixture
async def env(tmp_path, monkeypatch):
    monkeypatch.delenv("PHALANX_HOME", raising=False)
    clock = Clock()
    store = Store(None, clock)
    network = LocalNetwork(tmp_path)
    store.add_admission_plugin(network.admission_plugin)
    client = LocalClient(store)
    await ensure_node(client, NODE, {"cpu": "4", "memory": "8Gi", "pods": "110"}, clock)
    cfg = AgentConfig(backoff_base=0.1, backoff_cap=0.4, cgroups="off", shutdown_grace=1.0)
    agent = NodeAgent(client, clock, NODE, tmp_path, network, cfg)
    task = asyncio.create_task(agent.run())
    try:
        yield Env(client, LogProvider(tmp_path, client, poll_interval=0.05), tmp_path)
    finally:
        await agent.stop(kill_pods=True)
        await asyncio.wait_for(task, 5)
        store.close()


def pod(name: str, command: list[str], *, env: list | None = None, volumes: list | None = None,
        mounts: list | None = None, init: list | None = None, grace: int = 1) -> dict:
    c: dict[str, Any] = {"name": "main", "image": "busybox", "command": command, "env": env or []}
    if mounts:
        c["volumeMounts"] = mounts
    spec: dict[str, Any] = {"restartPolicy": "Never", "nodeName": NODE, "containers": [c],
                            "terminationGracePeriodSeconds": grace}
    if volumes:
        spec["volumes"] = volumes
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def config_map(data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "job-config", "namespace": "default"},
            "data": data}


MPI_VOLUME = {"name": "mpi-job-config", "configMap": {"name": "job-config", "items": [
    {"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555}, {"key": "hostfile", "path": "hostfile", "mode": 0o444}]}}
MPI_MOUNT = {"name": "mpi-job-config", "mountPath": "/etc/mpi"}


async def wait_for(e: Env, name: str, pred: Callable[[dict], bool], timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    last: dict | None = None
    while time.monotonic() < deadline:
        try:
            last = await e.client.get("Pod", name, "default")
            if pred(last):
                return last
        except NotFound:
            last = None
        await asyncio.sleep(0.05)
    raise AssertionError(f"pod {name}: condition not reached; status: {json.dumps((last or {}).get('status'))}")


def phase(p: dict) -> str:
    return (p.get("status") or {}).get("phase", "")


def running(p: dict) -> bool:
    return phase(p) == "Running"


async def log_of(e: Env, name: str) -> str:
    return await e.logs.read("default", name)


async def run(argv: list[str], stdin: bytes | None = None, timeout: float = 10.0) -> tuple[int, str, str]:
    """A command run without blocking the agent (same event loop)."""
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    return proc.returncode, out.decode(), err.decode()


# ------------------------------------------------------------------ volumes


async def test_configmap_volume_is_read_through_phalanx_root(env):
    await env.client.create(config_map({"hostfile": "job-worker-0 slots=2\n", "kubexec.sh": "#!/bin/sh\n",
                                        "unlisted": "x"}))
    script = ('cat $(HOSTFILE); stat -L -c "%a" $(PHALANX_ROOT)/etc/mpi/hostfile $(PHALANX_ROOT)/etc/mpi/kubexec.sh; '
              'ls $PHALANX_ROOT/etc/mpi; test -d "$PHALANX_ROOT/opt/kube" && echo emptydir')
    await env.client.create(pod("reader", ["sh", "-c", script],
                                env=[{"name": "HOSTFILE", "value": "$(PHALANX_ROOT)/etc/mpi/hostfile"}],
                                volumes=[MPI_VOLUME, {"name": "kube", "emptyDir": {}}],
                                mounts=[MPI_MOUNT, {"name": "kube", "mountPath": "/opt/kube"}]))
    p = await wait_for(env, "reader", lambda p: phase(p) in ("Succeeded", "Failed"))
    assert phase(p) == "Succeeded", await log_of(env, "reader")
    assert await log_of(env, "reader") == "job-worker-0 slots=2\n444\n555\nhostfile\nkubexec.sh\nemptydir\n"


async def test_missing_configmap_keeps_the_pod_creating_until_it_exists(env):
    await env.client.create(pod("waiter", ["cat", "$(PHALANX_ROOT)/etc/mpi/hostfile"], volumes=[MPI_VOLUME],
                                mounts=[MPI_MOUNT]))
    want = 'MountVolume.SetUp failed for volume "mpi-job-config" : configmap "job-config" not found'
    deadline = time.monotonic() + 5
    events: list[dict] = []
    while time.monotonic() < deadline and not events:
        events = [ev for ev in (await env.client.list("Event", "default")).items
                  if ev["involvedObject"]["name"] == "waiter" and ev["reason"] == "FailedMount"]
        await asyncio.sleep(0.05)
    assert events and events[0]["message"] == want and events[0]["type"] == "Warning"
    p = await env.client.get("Pod", "waiter", "default")
    assert phase(p) == "Pending"
    assert p["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    await env.client.create(config_map({"hostfile": "h0 slots=1\n", "kubexec.sh": ""}))
    p = await wait_for(env, "waiter", lambda p: phase(p) in ("Succeeded", "Failed"), timeout=5)
    assert phase(p) == "Succeeded" and await log_of(env, "waiter") == "h0 slots=1\n"


async def test_a_configmap_update_reaches_the_running_pod(env):
    cm = await env.client.create(config_map({"hostfile": "a\n", "kubexec.sh": ""}))
    await env.client.create(pod("live", ["sleep", "30"], volumes=[MPI_VOLUME], mounts=[MPI_MOUNT]))
    await wait_for(env, "live", running)
    hostfile = Path(_context(env.home, "live")["env"]["PHALANX_ROOT"]) / "etc/mpi/hostfile"
    assert hostfile.read_text() == "a\n"
    cm["data"]["hostfile"] = "a\nb\n"
    await env.client.update(cm)
    deadline = time.monotonic() + 5
    while hostfile.read_text() != "a\nb\n" and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert hostfile.read_text() == "a\nb\n"


async def test_an_invalid_mount_fails_the_pod_naming_the_field(env):
    await env.client.create(pod("bad", ["true"], volumes=[MPI_VOLUME],
                                mounts=[{"name": "mpi-job-config", "mountPath": "/etc/../../x"}]))
    p = await wait_for(env, "bad", lambda p: phase(p) == "Failed")
    assert "spec.containers[0].volumeMounts[0].mountPath" in p["status"]["message"]


# ------------------------------------------------------------------ phalanx exec


async def test_exec_runs_with_the_containers_env_cwd_and_exit_code(env):
    await env.client.create(pod("target", ["sleep", "30"], env=[{"name": "FOO", "value": "bar baz"}]))
    await wait_for(env, "target", running)
    code, out, err = await run([*EXEC, "--home", str(env.home), "--wait", "5", "target", "--",
                                "sh", "-c", 'echo "$FOO|$HOSTNAME"; pwd; exit 7'])
    assert code == 7, err
    lines = out.splitlines()
    assert lines[0] == "bar baz|target"
    assert lines[1] == _context(env.home, "target")["cwd"] == str(next((env.home / "pods").glob("default_target_*")) / "work")
    # The whole environment is the container's (resolver settings included).
    code, out, _ = await run([*EXEC, "--home", str(env.home), "target", "--", "env", "-0"])
    ctx = _context(env.home, "target")
    container_env = Path(f"/proc/{ctx['pid']}/environ").read_bytes()
    assert code == 0 and set(out.encode().split(b"\0")) == set(container_env.split(b"\0"))
    # `phalanx exec` itself: stdin is inherited; an unknown command is 127 as in a shell.
    code, out, _ = await run([sys.executable, "-m", "phalanx.cli.main", "exec", "--home", str(env.home), "target",
                              "--", "cat"], stdin=b"piped\n")
    assert (code, out) == (0, "piped\n")
    code, _, err = await run([*EXEC, "--home", str(env.home), "target", "--", "no-such-command-x"])
    assert code == 127 and 'exec: "no-such-command-x": executable file not found in $PATH' in err


async def test_exec_from_inside_a_pod_needs_no_api_server(env):
    await env.client.create(pod("worker", ["sleep", "30"], env=[{"name": "RANK", "value": "3"}]))
    await env.client.create(pod("launcher", [*EXEC, "--wait", "10", "worker", "--", "sh", "-c", "echo rank=$RANK"]))
    p = await wait_for(env, "launcher", lambda p: phase(p) in ("Succeeded", "Failed"))
    assert phase(p) == "Succeeded" and await log_of(env, "launcher") == "rank=3\n"


async def test_exec_process_dies_when_the_pod_is_deleted(env):
    await env.client.create(pod("victim", ["sleep", "30"]))
    await wait_for(env, "victim", running)
    proc = await asyncio.create_subprocess_exec(
        *EXEC, "--home", str(env.home), "victim", "--", "sh", "-c", "trap '' TERM; echo ready; sleep 60 & wait",
        stdout=asyncio.subprocess.PIPE)
    assert await asyncio.wait_for(proc.stdout.readline(), 10) == b"ready\n"
    t0 = time.monotonic()
    await env.client.delete("Pod", "victim", "default")
    # TERM is ignored: killed once the container is gone (grace 1 s), as its processes are.
    assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGKILL
    assert time.monotonic() - t0 < 5
    assert not list((env.home / "pods").glob("default_victim_*/main/exec.json"))


async def test_exec_process_dies_when_the_container_exits_by_itself(env):
    await env.client.create(pod("short", ["sh", "-c", "while [ ! -e stop ]; do sleep 0.05; done"]))
    await wait_for(env, "short", running)
    proc = await asyncio.create_subprocess_exec(
        *EXEC, "--home", str(env.home), "short", "--", "sh", "-c", "echo ready; exec sleep 60",
        stdout=asyncio.subprocess.PIPE)
    assert await asyncio.wait_for(proc.stdout.readline(), 10) == b"ready\n"
    cwd = Path(_context(env.home, "short")["cwd"])
    (cwd / "stop").touch()
    assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGKILL
    p = await wait_for(env, "short", lambda p: phase(p) == "Succeeded")
    assert p["metadata"].get("deletionTimestamp") is None  # not a deletion: the container's end did it


async def test_exec_into_a_finished_container_is_refused(env):
    await env.client.create(pod("done", ["true"]))
    await wait_for(env, "done", lambda p: phase(p) == "Succeeded")
    code, _, err = await run([*EXEC, "--home", str(env.home), "done", "--", "true"])
    assert (code, err) == (1, "error: unable to exec: container main of pod done is not running\n")


# ------------------------------------------------------------------ podwait


async def test_podwait_as_init_container_starts_the_launcher_once_workers_run(env):
    init = [{"name": "wait-workers", "image": "busybox", "command": [*PODWAIT, "--timeout", "10", "w-0", "w-1"]}]
    await env.client.create(pod("launch", ["echo", "go"], init=init))
    await env.client.create(pod("w-0", ["sleep", "30"]))
    await asyncio.sleep(0.3)
    p = await env.client.get("Pod", "launch", "default")
    assert phase(p) == "Pending"  # w-1 does not exist yet
    await env.client.create(pod("w-1", ["sleep", "30"]))
    p = await wait_for(env, "launch", lambda p: phase(p) == "Succeeded")
    log = await env.logs.read("default", "launch", "wait-workers")
    assert sorted(log.splitlines()) == ["pod/w-0 running", "pod/w-1 running"]


async def test_podwait_times_out_naming_the_missing_pods(env):
    await env.client.create(pod("here", ["sleep", "30"]))
    await wait_for(env, "here", running)
    code, out, err = await run([*PODWAIT, "--home", str(env.home), "-n", "default", "--timeout", "0.5",
                                "here", "absent"])
    assert (code, out, err) == (1, "pod/here running\n", "timed out waiting for pods: absent\n")


def _context(home: Path, name: str) -> dict:
    [path] = list((home / "pods").glob(f"default_{name}_*/main/exec.json"))
    return json.loads(path.read_text())
