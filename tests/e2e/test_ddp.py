"""Issue 5: real torch.distributed training on the embedded runtime.

examples/ddp/pytorchjob.yaml (1 Master + 3 Workers, gloo on CPU) and the same
script launched by torchrun from the PET_* variables (examples/ddp/torchrun.yaml)
run side by side in one cluster: their ranks find each other through the
addresses and ports the operator put in their env, agree on the world, train,
and both jobs Succeed within a minute on 2 cores.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from phalanx.node.hostsfile import v4_mapped
from phalanx.node.network import LocalNetwork
from phalanx.node.nsswrapper import nss_wrapper_available
from phalanx.objects.errors import NotFound
from tests.scenarios.conftest import job_state, wait_until

ROOT = Path(__file__).resolve().parents[2]
DDP = ROOT / "examples" / "ddp"
_spec = importlib.util.spec_from_file_location("examples_embed", DDP / "embed.py")
embed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(embed)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

WORLD = 4
RANK_LINE = re.compile(r"^rank (\d+) of world size (\d+): MASTER_ADDR=(\S+) MASTER_PORT=(\d+) \(launched by (\w+)\)$",
                       re.M)
STEP_LINE = re.compile(r"^step +(\d+) loss ([0-9.e+-]+)$", re.M)
FINAL_LINE = re.compile(r"^final loss ([0-9.e+-]+) \(first ([0-9.e+-]+)\) after (\d+) steps", re.M)


def load(name: str) -> dict:
    return yaml.safe_load((DDP / name).read_text())


def pod_names(job: str) -> list[str]:
    return [f"{job}-master-0"] + [f"{job}-worker-{i}" for i in range(WORLD - 1)]


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


@pytest.fixture
def torch_on_path(monkeypatch):
    """Pods run `python3` from PATH, from Phalanx's own environment, activated
    or not: take this interpreter's bin directory off PATH (it has torch)."""
    if importlib.util.find_spec("torch") is None:
        if os.environ.get("CI"):
            pytest.fail("torch is not installed: CI installs it with the test extra (pyproject.toml)")
        pytest.skip("torch is not installed (pip install -e '.[test]')")
    # The user's shell with the venv not activated: the local runtime puts it first on the pods' PATH.
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                               if d != os.path.dirname(sys.executable)))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)


def test_manifests_embed_the_scripts_verbatim():
    """What the jobs run is examples/ddp/train.py, unchanged (embed.py keeps them in sync)."""
    script = (DDP / "train.py").read_text()
    for name in ("pytorchjob.yaml", "torchrun.yaml"):
        text = (DDP / name).read_text()
        assert embed.render(text, DDP) == text, f"{name} is stale: run python3 examples/ddp/embed.py"
        for rtype, spec in yaml.safe_load(text)["spec"]["pytorchReplicaSpecs"].items():
            c = spec["template"]["spec"]["containers"][0]
            assert c["args"] == [script], f"{name} {rtype}"


def test_embed_replaces_a_stale_block(tmp_path):
    (tmp_path / "s.py").write_text("print(1)\n\nprint(2)\n")
    stale = "a:\n  - &s |\n    old\n\n    older\nb: [*s]\n"
    assert embed.render(stale, tmp_path) == "a:\n  - &s |\n    print(1)\n\n    print(2)\nb: [*s]\n"
    assert embed.render("a:\n  - &missing |\n    x\n", tmp_path) == "a:\n  - &missing |\n    x\n"


def test_names_resolve_for_clients_that_ask_for_ipv6_first(tmp_path):
    """torch's TCPStore client looks MASTER_ADDR up as IPv6 (AI_V4MAPPED) first
    and retries that until it times out; nss_wrapper answers such a lookup of
    an IPv4-only name with EAI_FAMILY, so the hosts file carries the mapped
    address too."""
    net = LocalNetwork(tmp_path)
    net.publish("ddp-master-0", "default", "127.0.1.7")
    lines = net.hosts_path.read_text().splitlines()
    names = "ddp-master-0 ddp-master-0.default ddp-master-0.default.svc ddp-master-0.default.svc.cluster.local"
    assert lines == [f"127.0.1.7 {names}", f"::ffff:127.0.1.7 {names}"]
    assert v4_mapped("127.0.1.7") == "::ffff:127.0.1.7" and v4_mapped("::1") is None and v4_mapped("x") is None
    if not nss_wrapper_available():
        pytest.skip("libnss-wrapper is not installed")
    probe = ("import socket\n"
             "flags = socket.AI_V4MAPPED | socket.AI_ALL | socket.AI_NUMERICSERV\n"
             "for family in (socket.AF_INET6, socket.AF_INET):\n"
             "    print(socket.getaddrinfo('ddp-master-0', 23456, family, socket.SOCK_STREAM, 0, flags)[0][4][0])\n")
    env = {"PATH": os.environ.get("PATH", ""), **net.resolver_env("ddp-worker-0")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["::ffff:127.0.1.7", "127.0.1.7"], out.stderr


async def _finish(cluster, name: str, timeout: float) -> dict:
    """The job Succeeded with every pod finished, or Failed."""
    async def done():
        job = await cluster.client.get("PyTorchJob", name, "default")
        if job_state(job) == "Failed":
            return job
        phases = []
        for pod_name in pod_names(name):
            try:
                phases.append((await cluster.client.get("Pod", pod_name, "default"))["status"].get("phase"))
            except NotFound:
                return None
        return job if job_state(job) == "Succeeded" and set(phases) <= {"Succeeded", "Failed"} else None

    return await wait_until(done, timeout, f"PyTorchJob {name} finished")


async def _logs(cluster, job: str) -> dict[str, str]:
    return {n: await cluster.log_provider.read("default", n, "pytorch") for n in pod_names(job)}


async def _check_job(cluster, name: str, launcher: str) -> dict[str, str]:
    """The job Succeeded and every rank proved the world it joined; returns the logs."""
    job = await cluster.client.get("PyTorchJob", name, "default")
    logs = await _logs(cluster, name)
    dump = "\n".join(f"--- {n}\n{t[-3000:]}" for n, t in logs.items())
    assert job_state(job) == "Succeeded", f"{name}: {job['status'].get('conditions')}\n{dump}"
    ranks = {}
    for i, pod_name in enumerate(pod_names(name)):
        pod = await cluster.client.get("Pod", pod_name, "default")
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (pod["status"]["phase"], term["exitCode"]) == ("Succeeded", 0), pod_name
        lines = RANK_LINE.findall(logs[pod_name])
        assert len(lines) == 1, f"{pod_name}: one process per pod\n{dump}"
        rank, world, addr, port, how = lines[0]
        env = env_of(pod)
        # The addresses came from the operator's env, not from the manifest.
        assert (addr, port) == (env["MASTER_ADDR"], env["MASTER_PORT"]), pod_name
        assert (int(world), how) == (WORLD, launcher), pod_name
        assert int(rank) == i == int(env["RANK"]), pod_name  # master 0, worker-i i+1
        assert f"rank {rank}: all-reduce rank sum 6 (expected 6)" in logs[pod_name], dump
        assert "Warning" not in logs[pod_name], dump  # torch's numpy notice is filtered out
        ranks[pod_name] = int(rank)
    assert sorted(ranks.values()) == list(range(WORLD))
    master = logs[f"{name}-master-0"]
    assert "ranks [0, 1, 2, 3] agree" in master
    steps = [(int(s), float(v)) for s, v in STEP_LINE.findall(master)]
    assert [s for s, _ in steps] == [0, 50, 100, 150, 199], master
    final, first, n = FINAL_LINE.findall(master)[0]
    assert (float(first), float(final), int(n)) == (steps[0][1], steps[-1][1], 200)
    assert float(final) < float(first) / 10, f"the loss did not fall: {steps}"
    assert all(b < a for (_, a), (_, b) in zip(steps[:2], steps[1:3])), f"the loss did not fall at first: {steps}"
    return logs


async def test_ddp_and_torchrun_jobs_train_and_succeed(cluster, torch_on_path):
    ddp, torchrun = load("pytorchjob.yaml"), load("torchrun.yaml")
    await cluster.client.create(ddp)
    await cluster.client.create(torchrun)
    # Both within a minute of submission on 2 cores, although they share them.
    deadline = time.monotonic() + 60
    await _finish(cluster, "ddp", 60)
    await _finish(cluster, "ddp-torchrun", max(0.0, deadline - time.monotonic()))

    await _check_job(cluster, "ddp", "operator")
    await _check_job(cluster, "ddp-torchrun", "torchrun")

    # The two jobs ran at once: each master got a port of its own.
    ports = {j: env_of(await cluster.client.get("Pod", f"{j}-master-0", "default"))["MASTER_PORT"]
             for j in ("ddp", "ddp-torchrun")}
    assert len(set(ports.values())) == 2, ports
    # torchrun was told one process per pod (spec.nprocPerNode "1", not "auto"),
    # with the rendezvous in PET_* variables.
    for i, pod_name in enumerate(pod_names("ddp-torchrun")):
        env = env_of(await cluster.client.get("Pod", pod_name, "default"))
        assert env["PET_NPROC_PER_NODE"] == "1" and env["PET_NNODES"] == str(WORLD)
        assert env["PET_NODE_RANK"] == str(i)
        assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == (env["MASTER_ADDR"], ports["ddp-torchrun"])
    # The operator defaults nprocPerNode to "auto" for the plain job; its script
    # ignores PET_*, and WORLD_SIZE is still one process per pod.
    env = env_of(await cluster.client.get("Pod", "ddp-master-0", "default"))
    assert (env["PET_NPROC_PER_NODE"], env["WORLD_SIZE"]) == ("auto", str(WORLD))
