"""Scheduler engine throughput: one session, in-process (benchmarks/README.md, first row).

Synthetic cluster: N identical nodes (32 cpu, 128Gi, 110 pods), 4-pod gangs
of 1 cpu / 1Gi pods filling ``--fill`` of the cluster's cpu, PodGroups Pending
with minResources (so enqueue's overcommit + proportion gates run, then
allocate with the gang, proportion, predicates, nodeorder and binpack
plugins: the default configuration). Reports, per size, the median over
``--runs`` runs of pods placed per second of session time (the snapshot build
is reported apart), and the ratio of per-pod cost at the largest vs the
smallest size (1.0 = per-pod cost independent of node count).

    .venv/bin/python benchmarks/scheduler_throughput.py [--sizes 1000 5000] [--fill 0.25] [--runs 3]
        [--mixed] [--volcano-weights] [--profile] [--metrics off|on|both]

``--metrics on`` runs each session as the scheduler shell does, observed by a
``SchedulerMetrics`` (driver timings, the session's figures, the recording of
them, all inside the timed region); ``both`` alternates runs without and with,
one row each.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from phalanx.scheduler import SchedulerConfig, Snapshot, run_session
from phalanx.scheduler.config import VOLCANO_DEFAULT_WEIGHTS
from phalanx.scheduler.metrics import SchedulerMetrics
from phalanx.scheduler.testing import node, pod, podgroup, queue

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
GANG = 4


def cluster(n_nodes: int, fill: float, mixed: bool = False) -> tuple[list, list, list, list]:
    """``mixed``: four node shapes and 1- or 2-cpu pods (many more node classes)."""
    shapes = [("16", "64Gi"), ("32", "128Gi"), ("48", "192Gi"), ("64", "256Gi")] if mixed else [("32", "128Gi")]
    nodes = [node(f"node-{i:05d}", cpu=shapes[i % len(shapes)][0], memory=shapes[i % len(shapes)][1], pods="110")
             for i in range(n_nodes)]
    queues = [queue("root"), queue("default", parent="root")]
    avg_cpu = 1.5 if mixed else 1.0
    n_gangs = int(n_nodes * 32 * fill / avg_cpu) // GANG
    pgs, pods = [], []
    for g in range(n_gangs):
        name = f"job-{g:06d}"
        created = f"2026-01-01T00:{(g // 60) % 60:02d}:{g % 60:02d}Z"
        cpu = 1 + (g % 2 if mixed else 0)
        pgs.append(podgroup(name, GANG, min_resources={"cpu": str(GANG * cpu), "memory": f"{GANG}Gi"}, created=created))
        for r in range(GANG):
            pods.append(pod(f"{name}-worker-{r}", name, cpu=str(cpu), memory="1Gi", created=created))
    return nodes, queues, pgs, pods


def one_run(objs: tuple, config: SchedulerConfig, profile: bool = False,
            metrics: bool = False) -> tuple[float, float, int, str]:
    nodes, queues, pgs, pods = objs
    gc.collect()
    t0 = time.perf_counter()
    snap = Snapshot.build(nodes, queues, pgs, pods)
    t1 = time.perf_counter()
    prof = cProfile.Profile() if profile else None
    gc.disable()
    try:
        if prof:
            prof.enable()
        m = SchedulerMetrics() if metrics else None  # made once per scheduler, not per session
        t2 = time.perf_counter()
        if m is not None:
            result = run_session(snap, config, NOW, observer=m)
            m.session(time.perf_counter() - t2, result.stats)
        else:
            result = run_session(snap, config, NOW)
        t3 = time.perf_counter()
        if prof:
            prof.disable()
    finally:
        gc.enable()
    report = ""
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(18)
        report = s.getvalue()
    return t1 - t0, t3 - t2, len(result.bindings), report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--fill", type=float, default=0.25, help="fraction of cluster cpu requested by the gangs")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mixed", action="store_true", help="four node shapes, 1- and 2-cpu pods")
    ap.add_argument("--volcano-weights", action="store_true",
                    help="Volcano's default score weights (binpack 1) instead of Phalanx's (binpack 10)")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of one run at the largest size")
    ap.add_argument("--metrics", choices=("off", "on", "both"), default="off",
                    help="observe the sessions as the shell does (both: alternate, one row each)")
    args = ap.parse_args()
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.metrics]
    config = SchedulerConfig(**(VOLCANO_DEFAULT_WEIGHTS if args.volcano_weights else {}))

    per_pod: dict[int, float] = {}
    print(f"{'nodes':>6} {'pods':>7} {'placed':>7} {'build s':>8} {'session s':>10} {'pods/s':>9} {'us/pod':>7}"
          + ("  metrics" if args.metrics != "off" else ""))
    for n in args.sizes:
        objs = cluster(n, args.fill, args.mixed)
        builds: dict[bool, list[float]] = {m: [] for m in modes}
        sessions: dict[bool, list[float]] = {m: [] for m in modes}
        placed = 0
        for _ in range(args.runs):
            for m in modes:
                b, s, placed, _ = one_run(objs, config, metrics=m)
                builds[m].append(b)
                sessions[m].append(s)
        for m in modes:
            b, s = statistics.median(builds[m]), statistics.median(sessions[m])
            per_pod[n] = s / max(placed, 1)
            print(f"{n:>6} {len(objs[3]):>7} {placed:>7} {b:>8.2f} {s:>10.2f} {placed / s:>9.0f} "
                  f"{per_pod[n] * 1e6:>7.1f}" + (f"  {'on' if m else 'off'}" if args.metrics != "off" else ""),
                  flush=True)
    if len(args.sizes) >= 2:
        lo, hi = min(args.sizes), max(args.sizes)
        print(f"per-pod cost ratio {hi} vs {lo} nodes: {per_pod[hi] / per_pod[lo]:.2f}")
    if args.profile:
        _, _, _, report = one_run(cluster(max(args.sizes), args.fill, args.mixed), config, profile=True)
        print(report)


if __name__ == "__main__":
    main()
