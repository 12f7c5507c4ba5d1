"""Benchmark (issue 5): the DDP example (examples/ddp/pytorchjob.yaml, 4 ranks,
gloo on CPU, 200 steps) end to end on the embedded runtime, N times.

Per run: wall time from submit until the job Succeeded and every pod's
processes were reaped, and CPU time (user + sys) of the pods (this process's
reaped children, plus the containers' own CPU from their shims' exit records:
the containers are children of the shims, which the shim server forks) and of
the in-process control plane. Prints the medians next
to TARGETS.md's anchor (TorchX local_cwd dist.ddp -j 1x4: 11.3 s wall, 13.0 s
CPU) and, measured in the same run, alternating with ours, the peer itself:
what TorchX local_cwd launches for ``dist.ddp -j 1x4`` is torchrun with 4
processes on this host, i.e. ``torchrun --standalone --nproc-per-node=4
train.py`` (without TorchX's own CLI, so the peer is if anything flattered).
Needs torch; asserts nothing.

    .venv/bin/python benchmarks/ddp_e2e.py [--runs 5] [--no-peer]
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from phalanx.cluster import EmbeddedCluster  # noqa: E402
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings  # noqa: E402
from phalanx.node.instancefiles import STATUS_SUFFIX  # noqa: E402

TORCHX_WALL, TORCHX_CPU = 11.3, 13.0


def cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def job_doc(name: str) -> dict:
    doc = yaml.safe_load((ROOT / "examples" / "ddp" / "pytorchjob.yaml").read_text())
    doc["metadata"]["name"] = name
    return doc


def cluster_running(cluster: EmbeddedCluster, pod: dict) -> bool:
    """Whether any process of the pod is still running (not yet reaped)."""
    uid = pod["metadata"]["uid"]
    return any(a.runtime.any_running(uid) for a in cluster.agents)


async def one_run(cluster: EmbeddedCluster, name: str) -> tuple[float, float, float]:
    c = cluster.client
    selector = {"training.kubeflow.org/job-name": name}
    children0, self0 = cpu(resource.RUSAGE_CHILDREN), cpu(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    await c.create(job_doc(name))
    deadline = time.monotonic() + 120
    while True:
        job = await c.get("PyTorchJob", name, "default")
        conds = (job.get("status") or {}).get("conditions") or []
        state = conds[-1]["type"] if conds else ""
        if state == "Failed":
            raise RuntimeError(f"job {name} failed: {conds[-1]}")
        if state == "Succeeded":
            pods = (await c.list("Pod", "default", label_selector=selector)).items
            if pods and not any(cluster_running(cluster, p) for p in pods):
                break
        if time.monotonic() > deadline:
            raise RuntimeError(f"job {name} did not finish in 120 s (state {state!r})")
        await asyncio.sleep(0.02)
    wall = time.perf_counter() - t0
    # Containers are children of their shims (forked by the shim server), not of this process:
    # their CPU comes from the shims' exit records (cpuSeconds: the container and what it reaped).
    pods_cpu = cpu(resource.RUSAGE_CHILDREN) - children0 + containers_cpu(cluster.home, name)
    plane_cpu = cpu(resource.RUSAGE_SELF) - self0
    await c.delete("PyTorchJob", name, "default")
    deadline = time.monotonic() + 30
    while (await c.list("Pod", "default", label_selector=selector)).items and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return wall, pods_cpu, plane_cpu


def containers_cpu(home: Path, job: str) -> float:
    """CPU seconds of the job's containers, from their exit records."""
    total = 0.0
    for f in Path(home).rglob(f"*{STATUS_SUFFIX}"):
        if f"_{job}-" not in str(f):
            continue
        try:
            total += float(json.loads(f.read_text()).get("cpuSeconds") or 0.0)
        except (OSError, ValueError):
            pass
    return total


def peer_run() -> tuple[float, float]:
    """torchrun --standalone with 4 processes on the same script: (wall, CPU)."""
    children0 = cpu(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd:
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
                        str(ROOT / "examples" / "ddp" / "train.py")],
                       cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, cpu(resource.RUSAGE_CHILDREN) - children0


async def main(runs: int, peer: bool) -> None:
    # Pods run `python3` from PATH, as from the activated venv: this interpreter's.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    with tempfile.TemporaryDirectory() as home:
        cfg = ClusterConfig(nodes=[NodeConfig("bench", 16, 64 * 1024**3)],
                            agent=AgentSettings(backoff_base=1, backoff_cap=5),
                            operator=OperatorSettings(default_backoff_limit=0))
        cluster = EmbeddedCluster(Path(home), cfg, persist=False)
        await cluster.start()
        try:
            results = []
            peers = []
            for i in range(runs):
                wall, pods_cpu, plane_cpu = await one_run(cluster, f"ddp-bench-{i}")
                results.append((wall, pods_cpu, plane_cpu))
                line = (f"run {i + 1}/{runs}: wall {wall:.2f} s, CPU {pods_cpu + plane_cpu:.2f} s "
                        f"(pods {pods_cpu:.2f} s, control plane {plane_cpu:.2f} s)")
                if peer:
                    peers.append(peer_run())
                    line += f"; torchrun --standalone: wall {peers[-1][0]:.2f} s, CPU {peers[-1][1]:.2f} s"
                print(line, flush=True)
        finally:
            await cluster.stop(kill_pods=True)
    wall = statistics.median(r[0] for r in results)
    total = statistics.median(r[1] + r[2] for r in results)
    pods = statistics.median(r[1] for r in results)
    plane = statistics.median(r[2] for r in results)
    print(f"DDP example end to end, median of {runs}: wall {wall:.2f} s, CPU {total:.2f} s "
          f"(pods {pods:.2f} s, control plane {plane:.2f} s)")
    print(f"TorchX local_cwd anchor (TARGETS.md): wall {TORCHX_WALL} s, CPU {TORCHX_CPU} s -> "
          f"ratio wall {wall / TORCHX_WALL:.2f}, CPU {total / TORCHX_CPU:.2f}")
    if peers:
        pwall = statistics.median(p[0] for p in peers)
        pcpu = statistics.median(p[1] for p in peers)
        print(f"torchrun --standalone, same run, median of {runs}: wall {pwall:.2f} s, CPU {pcpu:.2f} s -> "
              f"ratio wall {wall / pwall:.2f}, CPU {total / pcpu:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-peer", dest="peer", action="store_false",
                        help="skip the torchrun --standalone runs")
    args = parser.parse_args()
    if importlib.util.find_spec("torch") is None:
        sys.exit("torch is not installed: pip install -e '.[test]'")
    asyncio.run(main(max(1, args.runs), args.peer))
