"""Benchmark (issue 9): the cost of one local-network operation as the table grows.

For each size N the table is pre-filled with N Services (address + host port),
N pod addresses and N published hosts entries, then a one-pod job's network
life is replayed ``--ops`` times: admission of its Service (address + port),
the pod's own address, publish, unpublish, release, admission of the Service's
deletion. Prints the median cost per operation (µs, caller's thread) per size:
it should not grow with N. Also prints the hosts-file flush cost at N entries
(paid at most once per flush interval, not per operation) and what an fsync
per table write would add on this disk.

    .venv/bin/python benchmarks/network_ops.py [--sizes 100,1000,5000] [--ops 200]
    .venv/bin/python benchmarks/network_ops.py --impl /tmp/network_before.py   # another version, same API
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import phalanx.node.network as default_impl

OPS = ("admit-create", "allocate_address", "publish", "unpublish", "release", "admit-delete")


def load_impl(path: str | None) -> ModuleType:
    """The network module to measure: ours, or a file with the same API (e.g. an older version)."""
    if not path:
        return default_impl
    spec = importlib.util.spec_from_file_location("phalanx.node._network_under_test", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def service(name: str, port: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": "None", "ports": [{"name": "pytorchjob-port", "port": port}]}}


def prefill(state: Path, n: int) -> None:
    """A table of N Services, N pod addresses and N published entries, written
    directly (building it through the API would cost O(N^2) with the old version)."""
    addresses: dict[str, str] = {}
    ports: dict[str, dict[str, int]] = {}
    published: dict[str, Any] = {}
    base = 0x7F000102  # 127.0.1.2
    k = 0

    def next_ip() -> str:
        nonlocal k
        while True:
            v = base + k
            k += 1
            if v & 0xFF not in (0, 255):
                return ".".join(str((v >> s) & 0xFF) for s in (24, 16, 8, 0))

    for i in range(n):
        ip = next_ip()
        addresses[f"Service/default/pre-{i}"] = ip
        ports[f"Service/default/pre-{i}"] = {"pytorchjob-port": 40000 + i}
        published[f"default/pre-{i}"] = {"address": ip, "holders": [f"Pod/node/default/pre-{i}/u{i}"]}
        addresses[f"Pod/node/default/pod-{i}/u{i}"] = next_ip()
    table = {"version": 1, "cursor": next_ip(), "portCursor": 30000, "addresses": addresses, "ports": ports,
             "published": published}
    (state / "network").mkdir(parents=True, exist_ok=True)
    (state / "network" / "allocations.json").write_text(json.dumps(table, sort_keys=True))


def measure(impl: ModuleType, n: int, ops: int) -> dict[str, float]:
    """Mean µs per operation kind, plus the flush cost, at N pre-filled allocations."""
    with tempfile.TemporaryDirectory(prefix="phalanx-netbench-") as d:
        state = Path(d)
        prefill(state, n)
        net = impl.LocalNetwork(state, check_bind=False)
        times: dict[str, list[float]] = {op: [] for op in OPS}

        def timed(op: str, fn: Callable[[], Any]) -> Any:
            t0 = time.perf_counter()
            out = fn()
            times[op].append(time.perf_counter() - t0)
            return out

        for i in range(ops):
            name, owner = f"job-{i}-master-0", f"Pod/node/default/job-{i}-master-0/u"
            svc = timed("admit-create", lambda: net.admission_plugin("create", service(name, 23456), None))
            addr = svc["metadata"]["annotations"]["phalanx.dev/address"]
            timed("allocate_address", lambda: net.allocate_address(owner))
            timed("publish", lambda: net.publish(name, "default", addr, holder=owner))
            timed("unpublish", lambda: net.unpublish(name, "default", holder=owner))
            timed("release", lambda: net.release(owner))
            timed("admit-delete", lambda: net.admission_plugin("delete", None, svc))
        # Medians: the machine is shared, a preempted sample says nothing about N.
        result = {op: statistics.median(v) * 1e6 for op, v in times.items()}
        every = [x for v in times.values() for x in v]
        result["per-op"] = statistics.median(every) * 1e6
        result["mean"] = statistics.fmean(every) * 1e6  # includes waits for a concurrent hosts write
        flush = getattr(net, "flush", None)
        if flush is not None:  # the hosts file at N entries, written once per flush interval
            samples = []
            for i in range(5):
                net.publish(f"flush-{i}", "default", "127.0.0.9")
                t0 = time.perf_counter()
                flush()
                samples.append(time.perf_counter() - t0)
            result["flush"] = statistics.median(samples) * 1e6
            getattr(net, "close", lambda: None)()
        return result


def fsync_cost(samples: int = 100) -> float:
    """µs an fsync adds to a small append in a temporary directory (same disk as TMPDIR)."""
    with tempfile.TemporaryDirectory(prefix="phalanx-netbench-") as d:
        fd = os.open(os.path.join(d, "j"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            costs = []
            for _ in range(samples):
                os.write(fd, b'{"addresses":{"Pod/n/default/p/u":"127.0.1.2"}}\n')
                t0 = time.perf_counter()
                os.fsync(fd)
                costs.append(time.perf_counter() - t0)
        finally:
            os.close(fd)
        return statistics.median(costs) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,5000", help="comma-separated table sizes N")
    parser.add_argument("--ops", type=int, default=200, help="job lifecycles measured per size")
    parser.add_argument("--impl", default=None, help="path of another network.py to measure (same API)")
    args = parser.parse_args(argv)
    impl = load_impl(args.impl)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"implementation: {impl.__file__}")
    header = f"{'N':>6} " + " ".join(f"{op:>16}" for op in (*OPS, "per-op", "mean", "flush"))
    print("median µs per operation (caller's thread); per-op: median of all, mean: their mean;")
    print("flush: one hosts-file write at N entries (at most one per flush interval, not one per operation)")
    print(header)
    for n in sizes:
        r = measure(impl, n, args.ops)
        cells = [f"{r[op]:16.1f}" for op in (*OPS, "per-op", "mean")]
        cells.append(f"{r['flush']:16.1f}" if "flush" in r else f"{'-':>16}")
        print(f"{n:>6} " + " ".join(cells), flush=True)
    print(f"an fsync per table write would add ~{fsync_cost():.0f} µs per changing operation on this disk")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
