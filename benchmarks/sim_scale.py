"""Scale of the simulation (`phalanx simulate`): the real control plane, simulated nodes.

Profiles:

- ``week-1k`` (default): a generated week on 1,000 nodes (32 cpu, 256Gi, 8 GPUs
  each): Poisson arrivals of PyTorchJob/TFJob gangs of 1-64 whole-node pods,
  lognormal durations (median 4 h), 5 % of the jobs with a crashing replica.
- ``burst-10k``: 10,000 nodes and 100,000 pods: 1,000 jobs of 100 pods
  (3 cpu, 24Gi: ten per node) submitted at once (100 namespaces), all running
  together for 1 h.
- ``day-1k``: the first day of ``week-1k`` (a quicker look);
  ``burst-1k``: ``burst-10k`` scaled down to 1,000 nodes and 10,000 pods.

Prints wall time, virtual time, the speed-up (virtual / wall), peak RSS, the
number of loop events, store writes, scheduler sessions, and the workload's
own summary. ``--cprofile`` adds the cProfile hot spots (top 30 by cumulative and by own time).

    .venv/bin/python benchmarks/sim_scale.py [--profile week-1k|day-1k|burst-10k] [--cprofile]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's code, also when run from another worktree

from phalanx.sim.arrivals import LoadedWorkload, resolve
from phalanx.sim.report import summarize
from phalanx.sim.runner import Simulation
from phalanx.sim.workload import parse_workload


def week_1k(days: float = 7.0) -> dict:
    return {
        "cluster": {"nodes": 1000, "cpu": 32, "memory": "256Gi", "gpus": 8},
        "sim": {"backoffBase": "10s", "backoffCap": "5m", "events": False},
        "generator": {
            "seed": 1, "horizon": f"{days:g}d", "arrivalRate": 11,
            "replicas": {"dist": "choice", "values": [1, 2, 4, 8, 16, 32, 64], "weights": [20, 20, 20, 15, 12, 8, 5]},
            "duration": {"dist": "lognormal", "median": "4h", "sigma": 1.0, "max": "3d"},
            "failureProbability": 0.05, "kinds": {"PyTorchJob": 3, "TFJob": 1},
            "cpu": 30, "memory": "200Gi", "gpus": 8, "ttlSecondsAfterFinished": 600,
        },
    }


def burst_10k(nodes: int = 10000) -> dict:
    job = {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "burst"},
        "spec": {"runPolicy": {"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 60},
                 "pytorchReplicaSpecs": {
                     "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [
                         {"name": "pytorch", "image": "busybox", "command": ["sh", "-c", "sleep 3600"],
                          "resources": {"limits": {"cpu": "3", "memory": "24Gi"}}}]}}},
                     "Worker": {"replicas": 99, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [
                         {"name": "pytorch", "image": "busybox", "command": ["sh", "-c", "sleep 3600"],
                          "resources": {"limits": {"cpu": "3", "memory": "24Gi"}}}]}}}}},
    }
    return {
        "cluster": {"nodes": nodes, "cpu": 32, "memory": "256Gi", "gpus": 8},
        "sim": {"events": False},
        "jobs": [{"at": 0, "manifest": job, "count": 10, "namespace": f"ns-{i:03d}"} for i in range(nodes // 100)],
    }


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _progress(sim: Simulation, every: float) -> None:
    """A watcher thread (outside the simulation: it only reads counters)."""
    t0 = time.perf_counter()

    def report() -> None:
        while True:
            time.sleep(every)
            loop, store = sim.loop, sim.store
            print(f"  [{time.perf_counter() - t0:7.0f} s] virtual {loop.time() if loop else 0:10.1f} s, "
                  f"writes {int(store.current_rv()) if store else 0:9d}, RSS {_rss_mb():7.0f} MB", flush=True)
    threading.Thread(target=report, daemon=True).start()


PROFILES = {"week-1k": week_1k, "day-1k": lambda: week_1k(1.0), "burst-10k": burst_10k,
            "burst-1k": lambda: burst_10k(1000)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="week-1k")
    ap.add_argument("--cprofile", action="store_true", help="print the cProfile hot spots")
    ap.add_argument("--out", type=Path, help="write the summary JSON here")
    ap.add_argument("--progress", type=float, default=0, metavar="SECONDS",
                    help="print progress (virtual time, writes, RSS) every SECONDS of wall time")
    args = ap.parse_args()

    data = PROFILES[args.profile]()
    loaded: LoadedWorkload = resolve(parse_workload(data, args.profile), Path("."), args.profile)
    sim = Simulation(loaded)
    if args.progress > 0:
        _progress(sim, args.progress)
    prof = cProfile.Profile() if args.cprofile else None
    t0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    result = sim.run()
    if prof is not None:
        prof.disable()
    wall = time.perf_counter() - t0
    summary = summarize(result, args.profile)
    s = result.stats
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    d = summary.data
    print(f"profile {args.profile}: {s.nodes} nodes, {d['jobs']['total']} jobs, {s.pods_created} pods, "
          f"{s.containers_started} containers started")
    print(f"  virtual time     {s.virtual_seconds / 3600:10.1f} h ({result.stopped_by})")
    print(f"  wall time        {wall:10.1f} s")
    print(f"  speed-up         {s.virtual_seconds / wall:10.0f} x")
    print(f"  peak RSS         {rss:10.0f} MB")
    print(f"  loop events      {s.loop_callbacks:10d}  ({s.loop_callbacks / wall:,.0f}/s)")
    print(f"  store writes     {s.store_writes:10d}  ({s.store_writes / wall:,.0f}/s)")
    print(f"  sched. sessions  {s.scheduler_sessions:10d}")
    print(f"  jobs             {json.dumps(d['jobs'])}")
    for k in ("wait", "run", "turnaround"):
        print(f"  {k:16} p50 {d[k]['p50']} p90 {d[k]['p90']} p99 {d[k]['p99']} (s)")
    for res, u in d["utilisation"].items():
        if u["capacity"]:
            print(f"  {res:16} mean {100 * (u['mean'] or 0):.1f}%  peak {100 * (u['peak'] or 0):.1f}%")
    if args.out:
        args.out.write_text(json.dumps({"profile": args.profile, "wall": wall, "rss_mb": rss,
                                        "stats": s.__dict__, "summary": d}, indent=1, default=str))
    if prof is not None:
        buf = io.StringIO()
        stats = pstats.Stats(prof, stream=buf)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(30)
        print(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
