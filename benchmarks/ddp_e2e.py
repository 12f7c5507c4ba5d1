"""Benchmark (issue 5): the DDP example (examples/ddp/pytorchjob.yaml, 4 ranks,
gloo on CPU, 200 steps) end to end on the embedded runtime, N times.

Per run: wall time from submit until the job Succeeded and every pod's
processes were reaped, and CPU time (user + sys) of the pods (this process's
reaped children, plus the containers' own CPU from their shims' exit records:
the containers are children of the shims, which the shim server forks) and of
the in-process control plane. Prints the medians next
to benchmarks/README.md's anchor (TorchX local_cwd dist.ddp -j 1x4: 11.3 s wall, 13.0 s
CPU) and, measured in the same run, alternating with ours, the peer itself:
what TorchX local_cwd launches for ``dist.ddp -j 1x4`` is torchrun with 4
processes on this host, i.e. ``torchrun --standalone --nproc-per-node=4
train.py`` (without TorchX's own CLI, so the peer is if anything flattered).
Needs torch. A run that fails (the job Failed, or torchrun exited non-zero)
is counted, not raised: each side's successes and failures are printed, the
medians are over its successful runs, the logs of every failed run are kept
under ``--logs`` (default: a fresh temporary directory, printed), and the exit
status is 1 when any run failed.

    .venv/bin/python benchmarks/ddp_e2e.py [--runs 5] [--no-peer] [--port P] [--logs DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from phalanx.client.interface import Client
from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings
from phalanx.node.instancefiles import STATUS_SUFFIX
from phalanx.node.machineclaims import port_free

TORCHX_WALL, TORCHX_CPU = 11.3, 13.0


def cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def job_doc(name: str, port: int) -> dict:
    """The example, named ``name``, its master declaring ``port`` as ``pytorchjob-port``."""
    doc = yaml.safe_load((ROOT / "examples" / "ddp" / "pytorchjob.yaml").read_text())
    doc["metadata"]["name"] = name
    master = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    master["ports"] = [{"name": "pytorchjob-port", "containerPort": port}]
    return doc


def pick_port(rng: random.Random) -> int:
    """A port free now, away from the example's default 23456: another Phalanx on
    this host running the example (its own network table, so no coordination)
    binds 23456 between our allocation and our master's bind (EADDRINUSE)."""
    for _ in range(1000):
        port = rng.randrange(24000, 32000)
        if port_free(port):
            return port
    raise RuntimeError("no free port in 24000-32000")


def cluster_running(cluster: EmbeddedCluster, pod: dict) -> bool:
    """Whether any process of the pod is still running (not yet reaped)."""
    uid = pod["metadata"]["uid"]
    return any(a.runtime.any_running(uid) for a in cluster.agents)


@dataclass
class Run:
    """One side's run: whether it succeeded, its wall and CPU seconds, and why it failed."""

    ok: bool
    wall: float
    cpu: float
    plane_cpu: float = 0.0
    why: str = ""


def pod_names(job: str) -> list[str]:
    return [f"{job}-master-0"] + [f"{job}-worker-{i}" for i in range(3)]


def ended(pod: dict) -> str:
    """How the pod's container ended ("<reason> <exit code>"), "" while it has not."""
    for st in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (st.get("state") or {}).get("terminated")
        if term:
            return f"{term.get('reason')} {term.get('exitCode')}"
    return ""


async def record_exits(client: Client, resource_version: str, job: str, exits: dict[str, str]) -> None:
    """Record in ``exits`` how each pod of ``job`` ended, from the pods' watch
    (polling misses a failed job's pods: they are deleted within milliseconds)."""
    async for event in client.watch("Pod", "default", resource_version):
        pod = event.object
        if ((pod.get("metadata") or {}).get("labels") or {}).get("training.kubeflow.org/job-name") == job and ended(pod):
            exits[pod["metadata"]["name"]] = ended(pod)


async def keep_logs(cluster: EmbeddedCluster, name: str, logs: Path) -> None:
    """Write every pod's log to ``logs/<job>/`` (a deleted pod's log is still on disk)."""
    out = logs / name
    out.mkdir(parents=True, exist_ok=True)
    for pod_name in pod_names(name):
        text = await cluster.log_provider.read("default", pod_name, "pytorch")
        (out / f"{pod_name}.log").write_text(text)


async def one_run(cluster: EmbeddedCluster, name: str, port: int, logs: Path) -> Run:
    c = cluster.client
    selector = {"training.kubeflow.org/job-name": name}
    children0, self0 = cpu(resource.RUSAGE_CHILDREN), cpu(resource.RUSAGE_SELF)
    exits: dict[str, str] = {}  # pod -> how its container ended, as last seen (a failed job's pods are deleted)
    watcher = asyncio.create_task(record_exits(c, (await c.list("Pod", "default")).resource_version, name, exits))
    t0 = time.perf_counter()
    await c.create(job_doc(name, port))
    deadline = time.monotonic() + 120
    why = ""
    while True:
        job = await c.get("PyTorchJob", name, "default")
        conds = (job.get("status") or {}).get("conditions") or []
        state = conds[-1]["type"] if conds else ""
        pods = (await c.list("Pod", "default", label_selector=selector)).items
        for p in pods:
            env = {e["name"]: e.get("value") for e in p["spec"]["containers"][0].get("env") or []}
            if env.get("MASTER_PORT") not in (None, str(port)):
                why = f"{p['metadata']['name']} got MASTER_PORT {env.get('MASTER_PORT')}, not {port}"
        # A failed job's pods are deleted: wait for their processes, not for the pods.
        if state in ("Succeeded", "Failed") and (pods or state == "Failed") \
                and not any(cluster_running(cluster, p) for p in pods):
            break
        if time.monotonic() > deadline:
            why = f"did not finish in 120 s (state {state!r})"
            break
        await asyncio.sleep(0.02)
    wall = time.perf_counter() - t0
    # A job Succeeds when its master does: a worker that failed after that is a failed run too.
    # Its processes are reaped; wait (not timed) for the agent to write how they ended.
    while not why and state == "Succeeded" and time.monotonic() < deadline:
        pods = (await c.list("Pod", "default", label_selector=selector)).items
        if all(ended(p) for p in pods):
            break
        await asyncio.sleep(0.02)
    watcher.cancel()
    if not why and (state != "Succeeded" or any(not e.startswith("Completed ") for e in exits.values())):
        why = f"job {state}: {conds[-1].get('message') if conds else ''}"
    if why:
        await keep_logs(cluster, name, logs)
        why += " | " + "; ".join(f"{n}: {exits.get(n, 'no exit seen')}" for n in pod_names(name))
    # Containers are children of their shims (forked by the shim server), not of this process:
    # their CPU comes from the shims' exit records (cpuSeconds: the container and what it reaped).
    pods_cpu = cpu(resource.RUSAGE_CHILDREN) - children0 + containers_cpu(cluster.home, name)
    plane_cpu = cpu(resource.RUSAGE_SELF) - self0
    await c.delete("PyTorchJob", name, "default")
    deadline = time.monotonic() + 30
    while (await c.list("Pod", "default", label_selector=selector)).items and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return Run(not why, wall, pods_cpu, plane_cpu, why)


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


def peer_run(i: int, logs: Path) -> Run:
    """torchrun --standalone with 4 processes on the same script; its output is
    kept under ``logs`` when it fails."""
    children0 = cpu(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryFile() as out:
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
                               str(ROOT / "examples" / "ddp" / "train.py")],
                              cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
        wall, used = time.perf_counter() - t0, cpu(resource.RUSAGE_CHILDREN) - children0
        if done.returncode == 0:
            return Run(True, wall, used)
        out.seek(0)
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"torchrun-{i}.log").write_bytes(out.read())
        return Run(False, wall, used, why=f"torchrun exit {done.returncode}")


def median_line(what: str, runs: list[Run]) -> str:
    ok = [r for r in runs if r.ok]
    head = f"{what}: {len(ok)}/{len(runs)} succeeded, {len(runs) - len(ok)} failed"
    if not ok:
        return head
    return (f"{head}; median of the successes: wall {statistics.median(r.wall for r in ok):.2f} s, "
            f"CPU {statistics.median(r.cpu + r.plane_cpu for r in ok):.2f} s")


async def main(runs: int, peer: bool, port: int, logs: Path) -> int:
    # Pods run `python3` from PATH, as from the activated venv: this interpreter's.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    results: list[Run] = []
    peers: list[Run] = []
    with tempfile.TemporaryDirectory() as home:
        cfg = ClusterConfig(nodes=[NodeConfig("bench", 16, 64 * 1024**3)],
                            agent=AgentSettings(backoff_base=1, backoff_cap=5),
                            operator=OperatorSettings(default_backoff_limit=0))
        cluster = EmbeddedCluster(Path(home), cfg, persist=False)
        await cluster.start()
        try:
            for i in range(runs):
                r = await one_run(cluster, f"ddp-bench-{i}", port, logs)
                results.append(r)
                line = (f"run {i + 1}/{runs}: {'ok' if r.ok else 'FAILED'} wall {r.wall:.2f} s, "
                        f"CPU {r.cpu + r.plane_cpu:.2f} s (pods {r.cpu:.2f} s, control plane {r.plane_cpu:.2f} s)")
                if not r.ok:
                    line += f" [{r.why}]"
                if peer:
                    p = peer_run(i, logs)
                    peers.append(p)
                    line += (f"; torchrun --standalone: {'ok' if p.ok else 'FAILED'} wall {p.wall:.2f} s, "
                             f"CPU {p.cpu:.2f} s" + ("" if p.ok else f" [{p.why}]"))
                print(line, flush=True)
        finally:
            await cluster.stop(kill_pods=True)
    print(median_line(f"DDP example on Phalanx, {runs} runs", results))
    ok = [r for r in results if r.ok]
    if ok:
        wall = statistics.median(r.wall for r in ok)
        total = statistics.median(r.cpu + r.plane_cpu for r in ok)
        print(f"  (pods {statistics.median(r.cpu for r in ok):.2f} s, control plane "
              f"{statistics.median(r.plane_cpu for r in ok):.2f} s); TorchX local_cwd anchor (benchmarks/README.md): "
              f"wall {TORCHX_WALL} s, CPU {TORCHX_CPU} s -> ratio wall {wall / TORCHX_WALL:.2f}, "
              f"CPU {total / TORCHX_CPU:.2f}")
    if peers:
        print(median_line(f"torchrun --standalone, same run, {runs} runs", peers))
        pok = [p for p in peers if p.ok]
        if ok and pok:
            print(f"  ratio Phalanx / torchrun: wall {wall / statistics.median(p.wall for p in pok):.2f}, "
                  f"CPU {total / statistics.median(p.cpu for p in pok):.2f}")
    failed = sum(not r.ok for r in results + peers)
    if failed:
        print(f"logs of the {failed} failed runs: {logs}")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-peer", dest="peer", action="store_false",
                        help="skip the torchrun --standalone runs")
    parser.add_argument("--port", type=int, default=None,
                        help="the master's pytorchjob-port (default: a free one in 24000-32000)")
    parser.add_argument("--logs", type=Path, default=None,
                        help="where failed runs' logs go (default: a new temporary directory)")
    args = parser.parse_args()
    if importlib.util.find_spec("torch") is None:
        sys.exit("torch is not installed: pip install -e '.[test]'")
    logs_dir = args.logs or Path(tempfile.mkdtemp(prefix="ddp-e2e-logs-"))
    master_port = args.port or pick_port(random.Random())
    print(f"master port {master_port}; logs of failed runs go to {logs_dir}", flush=True)
    sys.exit(asyncio.run(main(max(1, args.runs), args.peer, master_port, logs_dir)))
