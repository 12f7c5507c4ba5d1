"""The control plane's own writes, one at a time, as the embedded store admits them.

Run: ``.venv/bin/python benchmarks/store_writes.py [--n 5000] [--runs 5] [--packed]``.
Microseconds per write (median of ``--runs``) for the three writes a one-pod job
makes most of: a pod create, an Event create (10-11 per job) and a pod status
write, each through the trusted client's path (``trusted=True``) with the
embedded cluster's admission and plugins (namespace lifecycle, priority, command
check), in memory (no SQLite: ``store_throughput.py`` measures that part).
``--packed`` stores as the simulator does (zstd with trained dictionaries).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's code, also when run from another worktree

from store_throughput import make_pod

from phalanx.api.admission import admit
from phalanx.node import commandcheck
from phalanx.objects.clock import Clock
from phalanx.runtime.events import build_event
from phalanx.store.compact import Packer
from phalanx.store.namespaces import NamespaceLifecycle
from phalanx.store.priority import PriorityAdmission
from phalanx.store.store import Store


def new_store(packed: bool) -> Store:
    store = Store(None, Clock(), admission=admit, packer=Packer() if packed else None)
    store.add_admission_plugin(NamespaceLifecycle(store), status_writes=False)  # as cluster.py registers them
    store.add_admission_plugin(PriorityAdmission(store), status_writes=False)
    store.add_admission_plugin(commandcheck.admission_plugin, status_writes=False)
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    return store


def pod_creates(store: Store, n: int) -> None:
    for i in range(n):
        store.create(make_pod(i), trusted=True)


def event_creates(store: Store, n: int) -> None:
    involved = store.create(make_pod(0), trusted=True)
    now = datetime.now(timezone.utc)
    for i in range(n):
        store.create(build_event(involved, "Normal", "Started", "Started container pytorch", "kubelet", now, i),
                     trusted=True)


def status_writes(store: Store, n: int) -> None:
    pod = store.create(make_pod(0), trusted=True)
    status = {"phase": "Running", "hostIP": "127.0.0.1", "startTime": "2026-12-03T12:00:00Z",
              "conditions": [{"type": t, "status": "True", "lastProbeTime": None,  # as the node agent writes
                              "lastTransitionTime": "2026-12-03T12:00:00Z"}
                             for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
              "containerStatuses": [{"name": "pytorch", "ready": True, "restartCount": 0, "image": "busybox",
                                     "state": {"running": {"startedAt": "2026-12-03T12:00:01Z"}}}]}
    for i in range(n):
        status = dict(status, podIP=f"10.0.{i // 250}.{i % 250}")
        pod = store.update_status({**pod, "status": status}, trusted=True)


def measure(fn: Callable[[Store, int], None], n: int, runs: int, packed: bool) -> float:
    times = []
    for _ in range(runs):
        store = new_store(packed)
        t0 = time.perf_counter()
        fn(store, n)
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--packed", action="store_true", help="pack stored JSON as the simulator does")
    args = ap.parse_args()
    where = "packed (simulator)" if args.packed else "plain (embedded)"
    for name, fn in (("pod create", pod_creates), ("Event create", event_creates),
                     ("pod status write", status_writes)):
        us = measure(fn, args.n, args.runs, args.packed) * 1e6
        print(f"{name:18} {us:7.1f} us per write, median of {args.runs} x {args.n}, {where}, trusted")


if __name__ == "__main__":
    main()
