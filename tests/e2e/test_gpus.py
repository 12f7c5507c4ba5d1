"""Issue 5: GPUs on the embedded runtime, with configured GPU counts.

A node configured with GPUs advertises ``nvidia.com/gpu``; the scheduler
counts them, so a second 1-GPU job waits (its gang cannot be placed) until the
first ends; a pod gets ``CUDA_VISIBLE_DEVICES`` for exactly its own devices;
two pods never share one, also across the virtual nodes of one machine.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings
from phalanx.objects.errors import ApiError
from tests.scenarios.conftest import job_state, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

GI = 1024**3
SHOW = re.compile(r"^CUDA_VISIBLE_DEVICES=\[(.*)\]$", re.M)


async def start(tmp_path: Path, nodes: list[NodeConfig]) -> EmbeddedCluster:
    cfg = ClusterConfig(nodes=nodes, agent=AgentSettings(backoff_base=0.2, backoff_cap=2.0),
                        operator=OperatorSettings(default_backoff_limit=0))
    c = EmbeddedCluster(tmp_path / "home", cfg, persist=False)
    await c.start()
    return c


def replica(release: Path, gpus: int) -> dict:
    """Prints the devices it sees, then runs until ``release`` exists."""
    script = ('echo "CUDA_VISIBLE_DEVICES=[${CUDA_VISIBLE_DEVICES-unset}]"; '
              'while [ ! -e "$0" ]; do sleep 0.05; done')
    return {"replicas": 1, "restartPolicy": "Never",
            "template": {"spec": {"containers": [{
                "name": "pytorch", "image": "busybox", "command": ["sh", "-c", script, str(release)],
                "resources": {"limits": {"cpu": "1", "memory": "100Mi", "nvidia.com/gpu": str(gpus)}}}]}}}


def job(name: str, release: Path, workers: int = 0) -> dict:
    specs = {"Master": replica(release, 1)}
    if workers:
        specs["Worker"] = {**replica(release, 1), "replicas": workers}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"runPolicy": {"backoffLimit": 0}, "pytorchReplicaSpecs": specs}}


async def devices(cluster: EmbeddedCluster, pod: str) -> str | None:
    """What the pod printed for CUDA_VISIBLE_DEVICES; None before it printed."""
    try:
        found = SHOW.findall(await cluster.log_provider.read("default", pod, "pytorch"))
    except ApiError:  # not created yet, or its container not started yet
        return None
    return found[0] if found else None


async def pod_or_none(cluster: EmbeddedCluster, name: str) -> dict | None:
    pods = (await cluster.client.list("Pod", "default")).items
    return next((p for p in pods if p["metadata"]["name"] == name), None)


async def test_one_gpu_node_second_job_waits_for_the_first(tmp_path):
    c = await start(tmp_path, [NodeConfig("gpu1", 16, 64 * GI, gpus=1)])
    release_a, release_b = tmp_path / "release-a", tmp_path / "release-b"
    try:
        node = await c.client.get("Node", "gpu1")
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "1"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"

        await c.client.create(job("gpu-a", release_a))
        assert await wait_until(lambda: devices(c, "gpu-a-master-0"), 20, "gpu-a prints its devices") == "0"

        await c.client.create(job("gpu-b", release_b))

        async def b_unschedulable():
            try:
                pg = await c.client.get("PodGroup", "gpu-b", "default")
            except ApiError:
                return None
            conds = (pg.get("status") or {}).get("conditions") or []
            return [x for x in conds if x.get("type") == "Unschedulable" and x.get("status") == "True"]

        # The scheduler looked at gpu-b and could not place it: the one GPU is taken.
        conds = await wait_until(b_unschedulable, 20, "gpu-b's PodGroup Unschedulable")
        assert "nvidia.com/gpu" in conds[-1].get("message", ""), conds
        pod_b = await pod_or_none(c, "gpu-b-master-0")
        assert pod_b is None or not pod_b["spec"].get("nodeName"), "gpu-b was bound while gpu-a holds the GPU"
        assert (await c.client.get("Pod", "gpu-a-master-0", "default"))["status"]["phase"] == "Running"

        release_b.touch()  # gpu-b may finish as soon as it runs
        release_a.touch()
        assert await wait_until(lambda: devices(c, "gpu-b-master-0"), 20, "gpu-b runs after gpu-a") == "0"

        async def both_succeeded():
            jobs = [await c.client.get("PyTorchJob", n, "default") for n in ("gpu-a", "gpu-b")]
            return all(job_state(j) == "Succeeded" for j in jobs)

        await wait_until(both_succeeded, 20, "both jobs Succeeded")
        a = await c.client.get("Pod", "gpu-a-master-0", "default")
        b = await c.client.get("Pod", "gpu-b-master-0", "default")
        a_end = a["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
        b_start = b["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"]
        assert b_start >= a_end, (a_end, b_start)  # RFC 3339 UTC strings order as times
        assert c.agents[0].gpus.in_use() == {}
    finally:
        release_a.touch()
        release_b.touch()
        await c.stop(kill_pods=True)


async def test_two_gpu_nodes_pods_get_distinct_devices(tmp_path):
    # Both virtual nodes are this one machine: node-a hands out device 0, node-b device 1.
    c = await start(tmp_path, [NodeConfig("node-a", 16, 64 * GI, gpus=1),
                               NodeConfig("node-b", 16, 64 * GI, gpus=1),
                               NodeConfig("node-c", 16, 64 * GI)])
    release = tmp_path / "release"
    try:
        await c.client.create(job("pair", release, workers=1))
        names = ["pair-master-0", "pair-worker-0"]
        for n in names:
            await wait_until(lambda n=n: devices(c, n), 20, f"{n} prints its devices")
        pods = {n: await c.client.get("Pod", n, "default") for n in names}
        seen = {n: await devices(c, n) for n in names}
        # Each gang member needs the one GPU of a node: one per node, none on node-c.
        assert sorted(p["spec"]["nodeName"] for p in pods.values()) == ["node-a", "node-b"]
        by_node = {pods[n]["spec"]["nodeName"]: seen[n] for n in names}
        assert by_node == {"node-a": "0", "node-b": "1"}, by_node
        release.touch()

        async def succeeded():
            return job_state(await c.client.get("PyTorchJob", "pair", "default")) == "Succeeded"

        await wait_until(succeeded, 20, "pair Succeeded")
    finally:
        release.touch()
        await c.stop(kill_pods=True)
