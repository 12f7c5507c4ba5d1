"""Containers outlive the node agent: a new agent adopts what the shims run or recorded.

Each test stops an agent without killing its pods (as a crash of the control
plane would leave them), changes the world meanwhile, and starts a new agent
on the same store and state directory.
"""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import psutil
import pytest

from phalanx.client.local import LocalClient
from phalanx.node.agent import AgentConfig, NodeAgent, ensure_node
from phalanx.node.logs import LogProvider
from phalanx.node.network import LocalNetwork
from phalanx.objects.clock import Clock, parse_time
from phalanx.store.store import Store
from tests.e2e.test_node_agent import NODE, Env, main_status, phase, pod, wait_for, wait_gone

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


class Agents:
    """One store and state directory; agents started and stopped on it in turn."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.clock = Clock()
        self.store = Store(None, self.clock)
        self.network = LocalNetwork(home)
        self.store.add_admission_plugin(self.network.admission_plugin)
        self.client = LocalClient(self.store)
        self.cfg = AgentConfig(backoff_base=0.1, backoff_cap=0.4, cgroups="off", shutdown_grace=1.0)
        self.agent: NodeAgent | None = None
        self.task: asyncio.Task | None = None
        logs = LogProvider(home, self.client, poll_interval=0.05)
        self.env = Env(self.client, None, self.network, logs, home)  # type: ignore[arg-type]

    async def start(self) -> NodeAgent:
        await ensure_node(self.client, NODE, {"cpu": "4", "memory": "8Gi", "pods": "110"}, self.clock)
        self.agent = NodeAgent(self.client, self.clock, NODE, self.home, self.network, self.cfg)
        self.env.agent = self.agent
        await self.agent.prepare()  # adoption done when start returns (run would do it too)
        self.task = asyncio.create_task(self.agent.run())
        return self.agent

    async def stop(self, kill_pods: bool) -> None:
        assert self.agent is not None and self.task is not None
        await self.agent.stop(kill_pods=kill_pods)
        await asyncio.wait_for(self.task, 5)
        self.agent = self.task = None


@pytest.fixture
async def agents(tmp_path):
    a = Agents(tmp_path)
    try:
        yield a
    finally:
        if a.agent is not None:
            await a.stop(kill_pods=True)
        a.store.close()


def container_dir(home: Path, p: dict, container: str = "main") -> Path:
    return home / "pods" / f"default_{p['metadata']['name']}_{p['metadata']['uid']}" / container


async def until(pred, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_running_container_is_adopted_not_restarted(agents):
    first = await agents.start()
    await agents.client.create(pod("keep", ["sh", "-c", "echo one; sleep 0.8; echo two; sleep 30"],
                                   policy="OnFailure"))
    p = await wait_for(agents.env, "keep", lambda p: phase(p) == "Running")
    before = main_status(p)
    pid = first.runtime.instances(p["metadata"]["uid"])["main"].pid
    assert pid is not None
    await agents.stop(kill_pods=False)
    assert not gone(pid), "the container died with its agent"

    second = await agents.start()
    inst = second.runtime.instances(p["metadata"]["uid"])["main"]
    assert inst.running and inst.pid == pid
    p = await wait_for(agents.env, "keep", lambda p: phase(p) == "Running")
    after = main_status(p)
    # The same instance, running since it really started: nothing to report.
    assert (after["containerID"], after["restartCount"], after["state"]) == \
        (before["containerID"], 0, before["state"])
    log = container_dir(agents.home, p) / "0.log"
    await until(lambda: "two" in log.read_text(), what="the log to go on")
    assert sorted(x.name for x in log.parent.glob("*.log")) == ["0.log"]

    await agents.client.delete("Pod", "keep", "default", grace_period_seconds=2)
    await wait_gone(agents.env, "keep")
    await until(lambda: gone(pid), what="the adopted container to be killed")
    assert not list(log.parent.glob("*.pid")), "the instance record outlived the pod"


async def test_exit_while_no_agent_ran_is_reported_as_it_happened(agents):
    await agents.start()
    await agents.client.create(pod("quit", ["sh", "-c", "sleep 0.5; exit 3"], policy="OnFailure"))
    p = await wait_for(agents.env, "quit", lambda p: phase(p) == "Running" and "running" in main_status(p)["state"])
    await agents.stop(kill_pods=False)
    status = container_dir(agents.home, p) / "0.status"
    await until(lambda: '"exitCode"' in (status.read_text() if status.exists() else ""),
                what="the shim to record the exit")
    exited_by = time.time()
    await asyncio.sleep(0.3)

    await agents.start()
    p = await wait_for(agents.env, "quit", lambda p: main_status(p).get("restartCount") == 1)
    last = main_status(p)["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (3, "Error")  # not ContainerStatusUnknown / 137
    assert parse_time(last["finishedAt"]).timestamp() <= exited_by + 1  # when it exited, not when we looked


async def test_pods_deleted_meanwhile_lose_their_containers(agents):
    first = await agents.start()
    await agents.client.create(pod("gone", ["sleep", "30"]))
    p = await wait_for(agents.env, "gone", lambda p: phase(p) == "Running")
    pid = first.runtime.instances(p["metadata"]["uid"])["main"].pid
    assert pid is not None
    await agents.stop(kill_pods=False)
    await agents.client.delete("Pod", "gone", "default", grace_period_seconds=0)  # no agent to wait for
    assert not gone(pid)

    second = await agents.start()
    await until(lambda: gone(pid), what="the orphaned container to be killed")
    assert second.runtime.instances(p["metadata"]["uid"]) == {}
    assert not list(container_dir(agents.home, p).glob("*.pid"))
    assert (container_dir(agents.home, p) / "0.log").exists()  # logs stay for `phalanx logs`


async def test_pod_running_elsewhere_is_not_touched_by_another_node(agents, tmp_path):
    first = await agents.start()
    await agents.client.create(pod("mine", ["sleep", "30"]))
    p = await wait_for(agents.env, "mine", lambda p: phase(p) == "Running")
    pid = first.runtime.instances(p["metadata"]["uid"])["main"].pid
    assert pid is not None
    await agents.stop(kill_pods=False)
    other = NodeAgent(agents.client, agents.clock, "other-node", agents.home, agents.network, agents.cfg)
    await other.prepare()
    assert other.runtime.pods() == [] and not gone(pid)
    await agents.start()  # its own node's agent adopts it; the fixture kills it at the end
    p = await wait_for(agents.env, "mine", lambda p: phase(p) == "Running")
    assert agents.agent is not None and agents.agent.runtime.instances(p["metadata"]["uid"])["main"].pid == pid


async def test_agent_stop_without_kill_keeps_the_init_container_done(agents):
    init = [{"name": "setup", "image": "x", "command": ["sh", "-c", "echo init ran"]}]
    await agents.start()
    await agents.client.create(pod("withinit", ["sleep", "30"], init=init, policy="OnFailure"))
    p = await wait_for(agents.env, "withinit", lambda p: phase(p) == "Running")
    await agents.stop(kill_pods=False)
    await agents.start()
    p = await wait_for(agents.env, "withinit", lambda p: phase(p) == "Running")
    assert main_status(p)["restartCount"] == 0
    setup = container_dir(agents.home, p, "setup")
    assert sorted(x.name for x in setup.glob("*.log")) == ["0.log"]
    assert (setup / "0.log").read_text().count("init ran") == 1
    assert os.path.exists(setup / "0.status")


async def test_adopted_containers_keep_their_gpus(tmp_path):
    a = Agents(tmp_path)
    gpu = {"limits": {"nvidia.com/gpu": "1"}}
    try:
        await ensure_node(a.client, NODE, {"cpu": "4", "memory": "8Gi", "pods": "110", "nvidia.com/gpu": "2"},
                          a.clock)
        a.agent = NodeAgent(a.client, a.clock, NODE, a.home, a.network, a.cfg)
        a.env.agent = a.agent
        await a.agent.prepare()
        a.task = asyncio.create_task(a.agent.run())
        await a.client.create(pod("g1", ["sleep", "30"], resources=gpu))
        await a.client.create(pod("g2", ["sleep", "30"], resources=gpu))
        for n in ("g1", "g2"):
            await wait_for(a.env, n, lambda p: phase(p) == "Running")
        before = a.agent.gpus.in_use()
        assert sorted(d for devs in before.values() for d in devs) == [0, 1]
        await a.stop(kill_pods=False)
        a.agent = NodeAgent(a.client, a.clock, NODE, a.home, a.network, a.cfg)
        await a.agent.prepare()
        a.task = asyncio.create_task(a.agent.run())
        assert a.agent.gpus.in_use() == before  # a third GPU pod could not get one of theirs
    finally:
        if a.agent is not None:
            await a.stop(kill_pods=True)
        a.store.close()


async def test_an_oom_kill_by_the_watchdog_is_remembered_across_agents(tmp_path):
    """The watchdog marks the instance on disk before it kills it: an agent that
    starts after the kill still reports OOMKilled, not a plain 137."""
    from phalanx.node import instancefiles as files
    from phalanx.node.processes import ProcessRuntime

    p = pod("hog", ["sleep", "30"], resources={"limits": {"memory": "64Mi"}})
    p["metadata"]["uid"] = "0f0e0d0c-0000-4000-8000-00000000000a"
    first = ProcessRuntime(tmp_path, Clock(), node_name=NODE, cgroups="off")
    inst = await first.start(p, "main")
    assert inst.running and inst.watchdog and inst.pid is not None
    first.detach()
    files.oom_path(inst.log_path).touch()  # as the watchdog does right before its SIGKILL
    os.killpg(inst.pid, 9)
    await until(lambda: not files.shim_alive(files.record_path(inst.log_path)), what="the shim to record the kill")
    second = ProcessRuntime(tmp_path, Clock(), node_name=NODE, cgroups="off")
    report = await second.adopt([p])
    assert report.exited == {p["metadata"]["uid"]: ["main"]}
    t = second.instances(p["metadata"]["uid"])["main"].termination
    assert t is not None and (t.exit_code, t.reason) == (137, "OOMKilled")
