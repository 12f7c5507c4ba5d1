"""Micro-benchmark (issue 9): the cost of starting one container through
``ProcessRuntime`` — N containers running ``true``, each started and waited
for in turn (``--concurrency`` > 1 starts that many at once).

Reports the median start latency (``await runtime.start``), the control
plane's CPU in ``start`` (this process: user+system) and per whole cycle
(start, exit, forget), and the total CPU per cycle of everything involved:
this process, its reaped children (shims of the subprocess path) and the shim
fork server with its reaped children (shims and containers of the shimd path). ``--ballast`` grows this process
first (touched memory), as a control plane holding many objects is large:
the subprocess path's fork costs grow with it.

    .venv/bin/python benchmarks/container_start.py [--n 200] [--mode shimd|subprocess] [--ballast 300]
"""
from __future__ import annotations

import argparse
import asyncio
import inspect
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from phalanx.node.processes import ProcessRuntime
from phalanx.objects.clock import Clock


def pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"bench-{i}", "namespace": "default", "uid": str(uuid.uuid4())},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def shimd_cpu(state: Path) -> tuple[float, float]:
    """CPU of the state dir's shim fork servers themselves, and of what they
    reaped (shims and their containers); (0, 0) without one."""
    own = kids = 0.0
    for p in psutil.process_iter(["name", "cmdline"]):
        cmd = p.info.get("cmdline") or []
        if p.info.get("name") == "phalanx-shimd" and str(state) in cmd:
            try:
                t = p.cpu_times()
                own += t.user + t.system
                kids += t.children_user + t.children_system
            except psutil.Error:
                pass
    return own, kids


def make_runtime(state: Path, mode: str) -> ProcessRuntime:
    kwargs = {}
    if "use_shimd" in inspect.signature(ProcessRuntime.__init__).parameters:
        kwargs["use_shimd"] = mode == "shimd"
    elif mode == "shimd":
        raise SystemExit("this runtime has no shim fork server (use --mode subprocess)")
    return ProcessRuntime(state, Clock(), cgroups="off", **kwargs)


async def one(rt: ProcessRuntime, i: int) -> tuple[float, float]:
    """Start one container, wait for its exit, forget it: the start's latency
    and this process's CPU during the start (alone in sequential runs)."""
    p = pod(i)
    c0, t0 = time.process_time(), time.perf_counter()
    inst = await rt.start(p, "main")
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    await asyncio.wait_for(inst.done.wait(), 30)
    assert inst.termination is not None and inst.termination.exit_code == 0, inst.termination
    rt.forget(p["metadata"]["uid"])
    return dt, dc


async def run(n: int, mode: str, concurrency: int, warmup: int, where: str | None = None) -> dict:
    """``n`` cycles (start, exit, forget) ``concurrency`` at a time, in a state directory under ``where``."""
    with tempfile.TemporaryDirectory(dir=where) as d:
        state = Path(d)
        rt = make_runtime(state, mode)
        for i in range(warmup):  # starts the fork server, warms caches
            await one(rt, -1 - i)
        await asyncio.sleep(0.2)
        cpu0, kids0, shimd0, wall0 = _self_cpu(), _children_cpu(), shimd_cpu(state), time.perf_counter()
        out: list[tuple[float, float]] = []
        for base in range(0, n, concurrency):
            out += await asyncio.gather(*(one(rt, base + k) for k in range(min(concurrency, n - base))))
        await asyncio.sleep(0.3)  # let the fork server reap the last shims
        wall = time.perf_counter() - wall0
        cpu, kids = _self_cpu() - cpu0, _children_cpu() - kids0
        shimd1 = shimd_cpu(state)
        server, shims = shimd1[0] - shimd0[0], shimd1[1] - shimd0[1]
    return {"lat": [a for a, _ in out], "start_cpu": [b for _, b in out], "cpu": cpu, "kids": kids,
            "server": server, "shims": shims, "wall": wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--mode", choices=("shimd", "subprocess"), default="shimd")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--ballast", type=int, default=0, help="MiB of touched memory to grow this process by first")
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    ballast = bytearray(args.ballast * 2**20)
    for off in range(0, len(ballast), 4096):
        ballast[off] = 1
    r = asyncio.run(run(args.n, args.mode, args.concurrency, args.warmup))
    n = args.n
    lat = sorted(r["lat"])
    rss = psutil.Process().memory_info().rss / 2**20
    total = r["cpu"] + r["kids"] + r["server"] + r["shims"]
    print(f"{n} containers `true`, mode={args.mode}, concurrency={args.concurrency}, control plane RSS {rss:.0f} MiB")
    print(f"  start latency: median {statistics.median(lat) * 1000:.2f} ms, "
          f"p90 {lat[int(0.9 * (n - 1))] * 1000:.2f} ms, max {lat[-1] * 1000:.2f} ms")
    if args.concurrency == 1:
        print(f"  control plane CPU in start(): median {statistics.median(r['start_cpu']) * 1000:.2f} ms")
    print(f"  control plane CPU per cycle (start, exit, forget): {r['cpu'] / n * 1000:.2f} ms")
    print(f"  total CPU per cycle (incl. shims, containers, fork server): {total / n * 1000:.2f} ms "
          f"(children reaped by us {r['kids'] / n * 1000:.2f} ms, fork server {r['server'] / n * 1000:.2f} ms, "
          f"its shims + containers {r['shims'] / n * 1000:.2f} ms)")
    print(f"  throughput: {n / r['wall']:.0f} start+exit cycles/s")


if __name__ == "__main__":
    main()
