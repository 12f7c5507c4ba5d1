"""The node agent running real processes, against the in-process store."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import psutil
import pytest

from phalanx.api.constants import ANNOTATION_ADDRESS, ANNOTATION_HOST_PORTS
from phalanx.api.pod import stopped_by_shutdown
from phalanx.client.local import LocalClient
from phalanx.node.agent import AgentConfig, NodeAgent, ensure_node
from phalanx.node.logs import LogProvider
from phalanx.node.network import LocalNetwork
from phalanx.node.nsswrapper import nss_wrapper_available
from phalanx.node.processes import ProcessRuntime
from phalanx.objects.clock import Clock
from phalanx.objects.errors import NotFound
from phalanx.store.store import Store

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

NODE = "las1"


@dataclass
class Env:
    client: LocalClient
    agent: NodeAgent
    network: LocalNetwork
    logs: LogProvider
    home: Path


@pytest.fixture
async def env(tmp_path):
    clock = Clock()
    store = Store(None, clock)
    network = LocalNetwork(tmp_path)
    store.add_admission_plugin(network.admission_plugin)
    client = LocalClient(store)
    await ensure_node(client, NODE, {"cpu": "4", "memory": "8Gi", "pods": "110"}, clock)
    cfg = AgentConfig(backoff_base=0.1, backoff_cap=0.4, cgroups="off", shutdown_grace=1.0, oom_poll_interval=0.05)
    agent = NodeAgent(client, clock, NODE, tmp_path, network, cfg)
    task = asyncio.create_task(agent.run())
    try:
        yield Env(client, agent, network, LogProvider(tmp_path, client, poll_interval=0.05), tmp_path)
    finally:
        await agent.stop(kill_pods=True)
        await asyncio.wait_for(task, 5)
        store.close()


def pod(name: str, command: list[str], *, policy: str = "Never", env: list | None = None, labels=None,
        resources=None, init: list[dict] | None = None, grace: int | None = None) -> dict:
    c: dict[str, Any] = {"name": "main", "image": "busybox:1.37.0-glibc", "command": command}
    if env:
        c["env"] = env
    if resources:
        c["resources"] = resources
    spec: dict[str, Any] = {"restartPolicy": policy, "nodeName": NODE, "containers": [c]}
    if init:
        spec["initContainers"] = init
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": name}},
            "spec": spec}


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
    raise AssertionError(f"pod {name} never reached the condition; last status: "
                         f"{json.dumps((last or {}).get('status'), indent=1)}")


async def wait_gone(e: Env, name: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await e.client.get("Pod", name, "default")
        except NotFound:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"pod {name} still exists")


def main_status(p: dict) -> dict:
    return next(s for s in (p.get("status") or {}).get("containerStatuses") or [] if s["name"] == "main")


def phase(p: dict) -> str:
    return (p.get("status") or {}).get("phase", "")


class Recorder:
    """Every status the pod went through (kubectl get -w, in short)."""

    def __init__(self, e: Env, name: str) -> None:
        self.seen: list[dict] = []
        self._task = asyncio.create_task(self._run(e, name))

    async def _run(self, e: Env, name: str) -> None:
        async for ev in e.client.watch("Pod", "default"):
            if ev.object["metadata"]["name"] == name:
                self.seen.append({"type": ev.type, **(ev.object.get("status") or {})})

    def close(self) -> None:
        self._task.cancel()

    def states(self) -> list[str]:
        """The main container's state per event, consecutive repeats folded."""
        out: list[str] = []
        for s in self.seen:
            for c in s.get("containerStatuses") or []:
                st = c.get("state") or {}
                label = ((st.get("waiting") or {}).get("reason") or (st.get("terminated") or {}).get("reason")
                         or ("Running" if "running" in st else "?"))
                if not out or out[-1] != label:
                    out.append(label)
        return out

    def waiting_reasons(self) -> list[str]:
        out = []
        for s in self.seen:
            for c in s.get("containerStatuses") or []:
                r = ((c.get("state") or {}).get("waiting") or {}).get("reason")
                if r:
                    out.append(r)
        return out


async def test_pod_runs_to_completion_and_logs_its_output(env):
    rec = Recorder(env, "hello")
    await asyncio.sleep(0)
    await env.client.create(pod("hello", ["sh", "-c", "echo hi; sleep 0.3"]))
    p = await wait_for(env, "hello", lambda p: phase(p) == "Succeeded")
    rec.close()
    term = main_status(p)["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed"
    assert p["status"]["podIP"].startswith("127.") and p["status"]["podIP"] != "127.0.0.1"
    assert await env.logs.read("default", "hello") == "hi\n"
    phases = [s.get("phase") for s in rec.seen]
    assert phases.index("Running") < phases.index("Succeeded")
    assert "ContainerCreating" in rec.waiting_reasons()
    log_file = env.home / "pods" / f"default_hello_{p['metadata']['uid']}" / "main" / "0.log"
    assert log_file.read_text() == "hi\n"


async def test_on_failure_restarts_in_place_with_backoff(env):
    rec = Recorder(env, "crash")
    await asyncio.sleep(0)
    # The container lives 0.1 s: one that exits within a millisecond of starting may
    # be seen exited before it was reported Running (a kubelet can miss it too).
    await env.client.create(pod("crash", ["sh", "-c", "echo boom; sleep 0.1; exit 1"], policy="OnFailure"))
    p = await wait_for(env, "crash", lambda p: (main_status(p) if p["status"].get("containerStatuses") else {})
                       .get("restartCount", 0) >= 3)
    rec.close()
    st = main_status(p)
    assert st["lastState"]["terminated"]["exitCode"] == 1 and st["lastState"]["terminated"]["reason"] == "Error"
    assert phase(p) == "Running"
    messages = [((c.get("state") or {}).get("waiting") or {}).get("message", "")
                for s in rec.seen for c in s.get("containerStatuses") or []]
    assert any(m.startswith("back-off 100ms restarting failed container=main pod=crash_default(") for m in messages)
    assert "CrashLoopBackOff" in rec.waiting_reasons()
    # Seed 000 P5: Error, restarted at once, then Error -> CrashLoopBackOff -> Running cycles.
    states = rec.states()
    assert states[:4] == ["ContainerCreating", "Running", "Error", "Running"], states
    assert states[4:7] == ["Error", "CrashLoopBackOff", "Running"], states
    # One log file per instance; "previous" is the one before the current.
    assert await env.logs.read("default", "crash", previous=True) == "boom\n"


async def test_deletion_sends_sigterm_and_a_trapping_shell_ends_quickly(env):
    await env.client.create(pod("trap", ["sh", "-c", "trap 'echo got TERM; exit 0' TERM; sleep 30 & wait"]))
    await wait_for(env, "trap", lambda p: phase(p) == "Running")
    await asyncio.sleep(0.2)  # let the shell install its trap
    t0 = time.monotonic()
    await env.client.delete("Pod", "trap", "default", grace_period_seconds=20)
    await wait_gone(env, "trap")
    assert time.monotonic() - t0 < 5
    current = sorted((env.home / "pods").glob("default_trap_*/main/0.log"))
    assert current and "got TERM" in current[0].read_text()


async def test_process_ignoring_sigterm_is_killed_after_grace(env):
    rec = Recorder(env, "stubborn")
    await asyncio.sleep(0)
    await env.client.create(pod("stubborn", ["sh", "-c", "trap '' TERM; sleep 30"]))
    await wait_for(env, "stubborn", lambda p: phase(p) == "Running")
    t0 = time.monotonic()
    await env.client.delete("Pod", "stubborn", "default", grace_period_seconds=1)
    await wait_gone(env, "stubborn")
    elapsed = time.monotonic() - t0
    rec.close()
    assert 0.9 <= elapsed < 6
    codes = [c["state"]["terminated"]["exitCode"] for s in rec.seen for c in s.get("containerStatuses") or []
             if "terminated" in c.get("state", {})]
    assert codes and codes[-1] == 137
    assert rec.seen[-1]["type"] == "DELETED"


async def test_field_ref_env_reaches_the_process_and_agent_env_does_not(env, monkeypatch):
    monkeypatch.setenv("PHALANX_TEST_SECRET", "leak")
    e = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
         {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
         {"name": "GREETING", "value": "hello $(POD_NAME)"},
         {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}]
    script = 'echo "$POD_NAME|$POD_IP|$GREETING|$MEM|$HOSTNAME|$1|${PHALANX_TEST_SECRET:-none}"'
    await env.client.create(pod("envpod", ["sh", "-c", script, "argv0", "$(POD_NAME)"], env=e,
                                resources={"limits": {"memory": "64Mi"}}))
    p = await wait_for(env, "envpod", lambda p: phase(p) == "Succeeded")
    out = (await env.logs.read("default", "envpod")).strip()
    assert out == f"envpod|{p['status']['podIP']}|hello envpod|64|envpod|envpod|none"


async def test_memory_limit_ends_oomkilled_137(env):
    alloc = "import time\nx = b'1' * (200 << 20)\ntime.sleep(20)\n"
    await env.client.create(pod("hog", [sys.executable, "-c", alloc], resources={"limits": {"memory": "50Mi"}}))
    p = await wait_for(env, "hog", lambda p: phase(p) == "Failed", timeout=15)
    term = main_status(p)["state"]["terminated"]
    assert term["reason"] == "OOMKilled" and term["exitCode"] == 137


async def test_container_without_command_fails_clearly(env):
    p = pod("image-only", [])
    del p["spec"]["containers"][0]["command"]
    await env.client.create(p)
    got = await wait_for(env, "image-only", lambda p: phase(p) == "Failed")
    term = main_status(got)["state"]["terminated"]
    assert term["reason"] == "ContainerCannotRun"
    assert "does not pull or run images" in term["message"]


async def test_weird_pod_is_marked_failed_and_agent_survives(env):
    bad = pod("weird", ["true"])
    bad["spec"]["restartPolicy"] = "Sometimes"
    await env.client.create(bad)
    got = await wait_for(env, "weird", lambda p: phase(p) == "Failed")
    assert got["status"]["reason"] == "InvalidPodSpec" and "spec.restartPolicy" in got["status"]["message"]
    await env.client.create(pod("after-weird", ["true"]))
    await wait_for(env, "after-weird", lambda p: phase(p) == "Succeeded")


SERVER = """
import os, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(os.environ["PORT"]))); s.listen()
print("listening", flush=True)
c, addr = s.accept(); c.sendall(b"hello from " + os.environ["POD_NAME"].encode()); c.close()
"""

CLIENT = """
import os, socket, sys, time
host, port = sys.argv[1], int(os.environ["PORT"])
for _ in range(100):
    try:
        c = socket.create_connection((host, port), timeout=2); break
    except OSError:
        time.sleep(0.05)
print(c.recv(100).decode(), flush=True)
"""


async def _service(e: Env, name: str, port: int) -> tuple[str, int]:
    s = await e.client.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
                               "spec": {"clusterIP": "None", "selector": {"app": name},
                                        "ports": [{"name": "p", "port": port}]}})
    ann = s["metadata"]["annotations"]
    return ann[ANNOTATION_ADDRESS], json.loads(ann[ANNOTATION_HOST_PORTS])["p"]


async def test_two_pods_connect_over_their_loopback_addresses(env):
    addr, port = await _service(env, "server", 23456)
    fref = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "PORT", "value": str(port)}]
    await env.client.create(pod("server", [sys.executable, "-c", SERVER], env=fref))
    srv = await wait_for(env, "server", lambda p: phase(p) == "Running")
    assert srv["status"]["podIP"] == addr  # the headless Service's address
    await env.client.create(pod("client", [sys.executable, "-c", CLIENT, addr], env=fref))
    await wait_for(env, "client", lambda p: phase(p) == "Succeeded", timeout=15)
    assert (await env.logs.read("default", "client")).strip() == "hello from server"
    cl = await env.client.get("Pod", "client", "default")
    assert cl["status"]["podIP"] not in (addr, "127.0.0.1")


async def test_hosts_entry_published_while_ready(env):
    addr, _ = await _service(env, "master", 29500)
    await env.client.create(pod("master", ["sh", "-c", "sleep 30"]))
    await wait_for(env, "master", lambda p: phase(p) == "Running")
    deadline = time.monotonic() + 5
    while "master.default.svc" not in env.network.hosts_path.read_text():
        assert time.monotonic() < deadline, env.network.hosts_path.read_text()
        await asyncio.sleep(0.05)
    assert f"{addr} master master.default master.default.svc" in env.network.hosts_path.read_text()
    await env.client.delete("Pod", "master", "default", grace_period_seconds=1)
    await wait_gone(env, "master")
    assert "master" not in env.network.hosts_path.read_text().split()


async def test_worker_init_container_waits_for_master_name(env):
    """The PyTorch worker flow: Init:0/1 until the master is ready, then the
    worker reaches it (by name when nss_wrapper is installed, else by address)."""
    addr, port = await _service(env, "pm", 23456)
    target = "pm" if nss_wrapper_available() else addr
    fref = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "PORT", "value": str(port)}]
    init = [{"name": "init-pytorch", "image": "alpine:3.10",
             "command": [sys.executable, "-m", "phalanx.node.initwait", target, "--timeout", "20",
                         "--interval", "0.1"]}]
    await env.client.create(pod("pw", [sys.executable, "-c", CLIENT, target], env=fref, init=init,
                                policy="OnFailure"))
    w = await wait_for(env, "pw", lambda p: any("running" in (s.get("state") or {})
                                                for s in p["status"].get("initContainerStatuses") or []))
    assert phase(w) == "Pending"
    await asyncio.sleep(0.3)
    w = await env.client.get("Pod", "pw", "default")
    assert "running" in w["status"]["initContainerStatuses"][0]["state"]  # still waiting for the master
    await env.client.create(pod("pm", [sys.executable, "-c", SERVER], env=fref))
    await wait_for(env, "pw", lambda p: phase(p) == "Succeeded", timeout=20)
    assert (await env.logs.read("default", "pw")).strip() == "hello from pm"
    init_log = await env.logs.read("default", "pw", "init-pytorch")
    assert "waiting for master" in init_log and addr in init_log


class CountingClient(LocalClient):
    """Records every status write; the first write of each pod hits a Conflict."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.writes: list[tuple[str, dict]] = []
        self.conflicted: set[str] = set()

    async def update_status(self, obj: dict) -> dict:
        name = obj["metadata"]["name"]
        if obj["kind"] == "Pod" and name not in self.conflicted:
            self.conflicted.add(name)
            # Someone else wrote meanwhile: the agent must re-read and try again.
            await super().patch("Pod", name, obj["metadata"]["namespace"], {"metadata": {"labels": {"touched": "y"}}})
        result = await super().update_status(obj)
        if obj["kind"] == "Pod":
            self.writes.append((name, obj["status"]))
        return result


async def test_status_writes_are_coalesced_and_conflicts_retried(tmp_path):
    clock = Clock()
    store = Store(None, clock)
    network = LocalNetwork(tmp_path)
    client = CountingClient(store)
    agent = NodeAgent(client, clock, NODE, tmp_path, network, AgentConfig(cgroups="off"))
    task = asyncio.create_task(agent.run())
    try:
        await client.create(pod("quiet", ["sh", "-c", "sleep 0.2"]))
        e = Env(client, agent, network, LogProvider(tmp_path, client), tmp_path)
        p = await wait_for(e, "quiet", lambda p: phase(p) == "Succeeded")
        await asyncio.sleep(0.3)  # nothing more should be written
    finally:
        await agent.stop()
        await asyncio.wait_for(task, 5)
        store.close()
    assert "quiet" in client.conflicted and p["metadata"]["labels"]["touched"] == "y"
    statuses = [s for n, s in client.writes if n == "quiet"]
    assert all(a != b for a, b in zip(statuses, statuses[1:]))
    assert [s["phase"] for s in statuses] == ["Pending", "Running", "Succeeded"]


async def test_restarted_agent_adopts_pods_without_rerunning_init(tmp_path):
    """An agent stopped with kill_pods terminates the container (SIGTERM: 143);
    the next agent reads that exit from the shim's record and restarts per
    policy (restartCount + 1); the completed init container does not run again."""
    clock = Clock()
    store = Store(None, clock)
    network = LocalNetwork(tmp_path)
    client = LocalClient(store)
    cfg = AgentConfig(backoff_base=0.1, backoff_cap=0.4, cgroups="off", shutdown_grace=0.5)
    init = [{"name": "setup", "image": "x", "command": ["sh", "-c", "echo init ran"]}]
    e = Env(client, None, network, LogProvider(tmp_path, client), tmp_path)  # type: ignore[arg-type]
    try:
        for round_ in range(2):
            agent = NodeAgent(client, clock, NODE, tmp_path, network, cfg)
            e.agent = agent
            task = asyncio.create_task(agent.run())
            if round_ == 0:
                await client.create(pod("long", ["sh", "-c", "sleep 30"], init=init, policy="OnFailure"))
                p = await wait_for(e, "long", lambda p: phase(p) == "Running" and "running" in main_status(p)["state"])
            else:
                # A stop that killed the pod marked it stopped by the shutdown: the next agent never reruns it
                # (the job controller recreates such a pod, uncounted).
                p = await wait_for(e, "long", lambda p: phase(p) == "Failed"
                                   and "terminated" in main_status(p)["state"])
            await agent.stop(kill_pods=True)
            await asyncio.wait_for(task, 5)
    finally:
        store.close()
    assert stopped_by_shutdown(p) and p["status"]["reason"] == "Terminated"
    term = main_status(p)["state"]["terminated"]
    assert term["exitCode"] == 143 and main_status(p)["restartCount"] == 0
    uid = p["metadata"]["uid"]
    assert sorted(x.name for x in (tmp_path / "pods" / f"default_long_{uid}" / "setup").glob("*.log")) == ["0.log"]
    assert sorted(x.name for x in (tmp_path / "pods" / f"default_long_{uid}" / "main").glob("*.log")) == ["0.log"]


async def test_ensure_node_registers_and_refreshes(tmp_path):
    store = Store(None, Clock())
    client = LocalClient(store)
    try:
        n1 = await ensure_node(client, "node-a", {"cpu": "2", "memory": "4Gi", "pods": "110"})
        assert n1["status"]["capacity"] == {"cpu": "2", "memory": "4Gi", "pods": "110"}
        assert n1["status"]["allocatable"] == n1["status"]["capacity"]
        assert {"type": "InternalIP", "address": "127.0.0.1"} in n1["status"]["addresses"]
        ready = n1["status"]["conditions"][0]
        assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "KubeletReady")
        assert n1["metadata"]["labels"]["kubernetes.io/hostname"] == "node-a"
        n2 = await ensure_node(client, "node-a", {"cpu": "4", "memory": "4Gi", "pods": "110"})
        assert n2["status"]["capacity"]["cpu"] == "4"
        assert n2["status"]["conditions"][0]["lastTransitionTime"] == ready["lastTransitionTime"]
    finally:
        store.close()


async def test_deletion_also_kills_processes_that_left_the_group(env):
    await env.client.create(pod("escape", ["sh", "-c", "setsid sleep 37 & echo $! > stray.pid; wait"]))
    p = await wait_for(env, "escape", lambda p: phase(p) == "Running")
    pidfile = env.home / "pods" / f"default_escape_{p['metadata']['uid']}" / "work" / "stray.pid"
    deadline = time.monotonic() + 5
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    stray = psutil.Process(int(pidfile.read_text()))
    while os.getpgid(stray.pid) != stray.pid:  # the child of `&` has its own session once it exec'd setsid
        assert time.monotonic() < deadline, "the stray process never made a session of its own"
        await asyncio.sleep(0.05)
    # Its own group: killpg of the pod's group misses it.
    await env.client.delete("Pod", "escape", "default", grace_period_seconds=1)
    await wait_gone(env, "escape")
    deadline = time.monotonic() + 5
    while stray.is_running() and stray.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the setsid'd process survived the pod"
        await asyncio.sleep(0.05)


async def test_orphans_of_a_previous_agent_are_reaped_per_node(tmp_path):
    proc = await asyncio.create_subprocess_exec("sleep", "30", start_new_session=True)
    try:
        run_dir = tmp_path / "pods" / f"default_p_{'a' * 8}" / "main"
        run_dir.mkdir(parents=True)
        (run_dir / "0.pid").write_text(json.dumps(
            {"pid": proc.pid, "createTime": psutil.Process(proc.pid).create_time(), "node": "node-a"}))
        assert ProcessRuntime(tmp_path, Clock(), node_name="node-b", cgroups="off").reap_orphans() == 0
        assert proc.returncode is None and (run_dir / "0.pid").exists()
        assert ProcessRuntime(tmp_path, Clock(), node_name="node-a", cgroups="off").reap_orphans() == 1
        assert await asyncio.wait_for(proc.wait(), 5) == -9
        assert not (run_dir / "0.pid").exists()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_gpu_pods_get_their_devices_and_others_none(tmp_path):
    clock = Clock()
    store = Store(None, clock)
    network = LocalNetwork(tmp_path)
    client = LocalClient(store)
    await ensure_node(client, NODE, {"cpu": "4", "memory": "8Gi", "pods": "110", "nvidia.com/gpu": "2"}, clock)
    agent = NodeAgent(client, clock, NODE, tmp_path, network, AgentConfig(cgroups="off"))
    task = asyncio.create_task(agent.run())
    e = Env(client, agent, network, LogProvider(tmp_path, client), tmp_path)
    show = ["sh", "-c", 'echo "[${CUDA_VISIBLE_DEVICES-unset}]"; sleep 0.5']
    try:
        await client.create(pod("g1", show, resources={"limits": {"nvidia.com/gpu": "1"}}))
        await client.create(pod("g2", show, resources={"limits": {"nvidia.com/gpu": "1"}}))
        await client.create(pod("cpu", show))
        for n in ("g1", "g2", "cpu"):
            await wait_for(e, n, lambda p: phase(p) == "Succeeded")
        outs = {n: (await e.logs.read("default", n)).strip() for n in ("g1", "g2", "cpu")}
    finally:
        await agent.stop()
        await asyncio.wait_for(task, 5)
        store.close()
    assert sorted([outs["g1"], outs["g2"]]) == ["[0]", "[1]"]
    assert outs["cpu"] == "[]"
    assert agent.gpus.in_use() == {}
