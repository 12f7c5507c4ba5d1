"""Benchmark (issue 2, 10a): the seed PyTorchJob on the embedded runtime, sleeps
scaled to 1 s. Measures submit -> all 4 pods Running and submit -> Succeeded,
median over N runs (default 10). Prints the figures; asserts nothing.

    .venv/bin/python benchmarks/submit_latency.py [--runs 10]
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings


def seed_job(name: str, seconds: float) -> dict:
    doc = next(d for d in yaml.safe_load_all((ROOT / "examples" / "pytorchjob.yaml").read_text()) if d)
    doc = copy.deepcopy(doc)
    doc["metadata"]["name"] = name
    for spec in doc["spec"]["pytorchReplicaSpecs"].values():
        c = spec["template"]["spec"]["containers"][0]
        c["command"] = [p.replace("sleep 30s", f"sleep {seconds}") for p in c["command"]]
    return doc


async def one_run(cluster: EmbeddedCluster, name: str) -> tuple[float, float]:
    c = cluster.client
    t0 = time.perf_counter()
    running_at = None
    rv = (await c.list("Pod", "default")).resource_version
    watch = c.watch("Pod", "default", resource_version=rv)
    jwatch = c.watch("PyTorchJob", "default", resource_version=rv)
    await c.create(seed_job(name, 1))
    phases: dict[str, str] = {}

    async def pods() -> float:
        async for ev in watch:
            o = ev.object
            if o["metadata"].get("labels", {}).get("training.kubeflow.org/job-name") != name:
                continue
            phases[o["metadata"]["name"]] = o.get("status", {}).get("phase", "")
            if len(phases) == 4 and all(p in ("Running", "Succeeded") for p in phases.values()):
                return time.perf_counter() - t0
        raise RuntimeError("watch ended")

    async def done() -> float:
        async for ev in jwatch:
            o = ev.object
            if o["metadata"]["name"] != name:
                continue
            conds = o.get("status", {}).get("conditions") or []
            if conds and conds[-1]["type"] in ("Succeeded", "Failed"):
                if conds[-1]["type"] != "Succeeded":
                    raise RuntimeError(f"job {name} failed: {conds[-1]}")
                return time.perf_counter() - t0
        raise RuntimeError("watch ended")

    running_at, succeeded_at = await asyncio.wait_for(asyncio.gather(pods(), done()), 60)
    await c.delete("PyTorchJob", name, "default")
    # Let the garbage collector and agents clear the job's pods before the next run.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = (await c.list("Pod", "default", label_selector={"training.kubeflow.org/job-name": name})).items
        if not left:
            break
        await asyncio.sleep(0.05)
    return running_at, succeeded_at


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        cfg = ClusterConfig(nodes=[NodeConfig("las1", 16, 64 * 1024**3)],
                            agent=AgentSettings(), operator=OperatorSettings())
        cluster = EmbeddedCluster(Path(d), cfg, persist=True)
        await cluster.start()
        try:
            await one_run(cluster, "warmup")
            r, s = [], []
            for i in range(runs):
                a, b = await one_run(cluster, f"bench-{i}")
                r.append(a)
                s.append(b)
        finally:
            await cluster.stop()
    print(f"seed PyTorchJob (1 master + 3 workers, sleep 1 s), {runs} runs, SQLite persistence on")
    print(f"  submit -> all 4 pods Running : median {statistics.median(r)*1000:.0f} ms "
          f"(min {min(r)*1000:.0f}, max {max(r)*1000:.0f})")
    print(f"  submit -> job Succeeded      : median {statistics.median(s)*1000:.0f} ms "
          f"(min {min(s)*1000:.0f}, max {max(s)*1000:.0f}); floor is the 1 s sleep")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    asyncio.run(main(ap.parse_args().runs))
