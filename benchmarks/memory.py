"""Benchmark (issue 9, benchmarks/README.md "Memory"): control-plane RSS idle, and with
1,000 jobs / 4,000 pods stored.

The embedded control plane (store with SQLite persistence, job controller,
scheduler, GC, one node agent) runs in this process, which imports nothing
else heavy. Idle: RSS once started with an empty store. Loaded: 1,000 seed-shaped
PyTorchJobs (1 Master + 3 Workers); every pod carries a nodeSelector no node
has, so the gang is admitted and its 4 pods are created and stored, but none
is bound or run (RSS measures the control plane, not 4,000 processes).
The figure is the RSS after a full GC, once every pod exists.

    .venv/bin/python benchmarks/memory.py [--jobs 1000]
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings

NS = "default"
TARGET_IDLE_MB = 80
TARGET_LOADED_MB = 300


def job(name: str) -> dict:
    def replica(n: int) -> dict:
        return {"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {
            "nodeSelector": {"phalanx.dev/bench": "nowhere"},
            "containers": [{"name": "pytorch", "image": "busybox", "command": ["sh", "-c", "sleep 30"],
                            "resources": {"requests": {"cpu": "10m", "memory": "1Mi"}}}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(3)}}}


def rss_mb() -> float:
    gc.collect()
    return psutil.Process().memory_info().rss / 2**20


async def main(jobs: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        cfg = ClusterConfig(nodes=[NodeConfig("las1", 64, 256 * 1024**3)],
                            agent=AgentSettings(), operator=OperatorSettings())
        cluster = EmbeddedCluster(Path(d), cfg, persist=True)
        await cluster.start()
        try:
            await asyncio.sleep(0.5)
            idle = rss_mb()
            c = cluster.client
            t0 = time.perf_counter()
            for start in range(0, jobs, 100):
                await asyncio.gather(*(c.create(job(f"m-{i:05d}")) for i in range(start, min(jobs, start + 100))))
            want = jobs * 4
            deadline = time.monotonic() + 900
            while True:
                pods = len((await c.list("Pod", NS)).items)
                if pods >= want or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            elapsed = time.perf_counter() - t0
            await asyncio.sleep(1.0)
            loaded = rss_mb()
        finally:
            await cluster.stop()
    print(f"control plane RSS idle: {idle:.0f} MiB (target <= {TARGET_IDLE_MB}; ratio {idle / TARGET_IDLE_MB:.2f})")
    print(f"control plane RSS with {jobs} jobs / {pods} pods stored: {loaded:.0f} MiB "
          f"(target <= {TARGET_LOADED_MB}; ratio {loaded / TARGET_LOADED_MB:.2f}); all pods created in {elapsed:.1f} s")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    asyncio.run(main(ap.parse_args().jobs))
