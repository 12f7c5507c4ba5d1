"""Benchmark (issue 9, benchmarks/README.md "1,000 one-pod jobs"): N one-pod PyTorchJobs
submitted at once to the embedded control plane (in-process, SQLite
persistence on, one local node), each pod running ``true``. Measures the
time from the first create to the last job Succeeded and reports jobs/s,
next to the target (>= 300 jobs/s) and the peers' figures from benchmarks/README.md.

Also measures, on the same cluster, pod exit -> job condition: a one-pod job
whose container exits at a known wall time (it prints time.time() and exits),
latency = the job's Succeeded write (seen on the watch) minus that exit time;
median over --exit-runs.

    .venv/bin/python benchmarks/jobs_1000.py [--jobs 1000] [--exit-runs 10] [--max-pods 1000]
    .venv/bin/python -m cProfile -o jobs.prof benchmarks/jobs_1000.py --jobs 300   # where the CPU goes
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
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
TARGET_JOBS_PER_S = 300
TARGET_EXIT_TO_CONDITION_MS = 200


def one_pod_job(name: str, command: list[str]) -> dict:
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "Never", "template": {
            "spec": {"containers": [{"name": "pytorch", "image": "busybox", "command": command,
                                     "resources": {"requests": {"cpu": "10m", "memory": "1Mi"}}}]}}}}},
    }


def _state(job: dict) -> str:
    conds = (job.get("status") or {}).get("conditions") or []
    return conds[-1]["type"] if conds else ""


async def burst(cluster: EmbeddedCluster, n: int) -> tuple[float, int, float]:
    """Create n jobs at once; seconds until all finished, how many failed, and
    the control plane's CPU seconds (this process: user + system) meanwhile."""
    c = cluster.client
    rv = (await c.list("PyTorchJob", NS)).resource_version
    watch = c.watch("PyTorchJob", NS, resource_version=rv)
    finished: dict[str, str] = {}
    cpu0 = _cpu()
    t0 = time.perf_counter()

    async def creates() -> None:
        await asyncio.gather(*(c.create(one_pod_job(f"b-{i:05d}", ["true"])) for i in range(n)))

    async def wait_all() -> None:
        async for ev in watch:
            name, state = ev.object["metadata"]["name"], _state(ev.object)
            if name.startswith("b-") and state in ("Succeeded", "Failed"):
                finished[name] = state
                if len(finished) == n:
                    return

    await asyncio.wait_for(asyncio.gather(creates(), wait_all()), 1800)
    elapsed = time.perf_counter() - t0
    return elapsed, sum(1 for s in finished.values() if s != "Succeeded"), _cpu() - cpu0


def _cpu() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


async def exit_to_condition(cluster: EmbeddedCluster, runs: int) -> list[float]:
    """Per run: the job's Succeeded condition seen on the watch minus the container's exit."""
    c = cluster.client
    out = []
    for i in range(runs):
        name = f"x-{i:03d}"
        rv = (await c.list("PyTorchJob", NS)).resource_version
        watch = c.watch("PyTorchJob", NS, resource_version=rv)
        # The process sleeps 0.5 s (so the pod is Running first), prints its exit time, exits.
        await c.create(one_pod_job(name, [sys.executable, "-c",
                                          "import time; time.sleep(0.5); print(repr(time.time()), flush=True)"]))
        async for ev in watch:
            if ev.object["metadata"]["name"] == name and _state(ev.object) in ("Succeeded", "Failed"):
                seen = time.time()
                break
        logs = await cluster.log_provider.read(NS, f"{name}-master-0")
        exit_at = float(logs.strip().splitlines()[-1])
        out.append(seen - exit_at)
        await c.delete("PyTorchJob", name, NS)
    return out


async def main(jobs: int, exit_runs: int, max_pods: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        cfg = ClusterConfig(nodes=[NodeConfig("las1", 64, 256 * 1024**3, pods=max_pods)],
                            agent=AgentSettings(), operator=OperatorSettings())
        cluster = EmbeddedCluster(Path(d), cfg, persist=True)
        await cluster.start()
        try:
            lat = await exit_to_condition(cluster, exit_runs)
            elapsed, failed, cpu = await burst(cluster, jobs)
            rss = psutil.Process().memory_info().rss / 2**20
        finally:
            await cluster.stop()
    rate = jobs / elapsed
    print(f"{jobs} one-pod jobs at once (embedded, SQLite FULL, 1 node admitting {max_pods} pods): {elapsed:.1f} s, "
          f"{rate:.0f} jobs/s (target >= {TARGET_JOBS_PER_S}; ratio {rate / TARGET_JOBS_PER_S:.2f}); "
          f"failed {failed}; control plane RSS after {rss:.0f} MiB")
    print(f"  control plane CPU: {cpu:.1f} s in {elapsed:.1f} s of wall, {cpu / jobs * 1000:.1f} ms per job")
    print("  peers (benchmarks/README.md): Volcano end to end 40-55 pods/s, Kueue ~43 workloads/s, Slurm 500 jobs/s")
    med = statistics.median(lat) * 1000
    print(f"pod exit -> job condition: median {med:.0f} ms over {len(lat)} runs "
          f"(min {min(lat)*1000:.0f}, max {max(lat)*1000:.0f}; target <= {TARGET_EXIT_TO_CONDITION_MS} ms)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--exit-runs", type=int, default=10)
    ap.add_argument("--max-pods", type=int, default=1000,
                    help="the node's pod capacity (kubelet's maxPods; its default, 110, caps how many pods "
                         "are bound at once, so the figure then measures pod lifetimes, not the control plane)")
    args = ap.parse_args()
    asyncio.run(main(args.jobs, args.exit_runs, args.max_pods))
