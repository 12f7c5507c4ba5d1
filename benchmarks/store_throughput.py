"""Store write throughput: creates/s in memory and with SQLite (median of 5 runs).

Run: ``python benchmarks/store_throughput.py [--n 5000] [--runs 5] [--synchronous FULL,NORMAL]``.
The objects are Kubeflow-shaped pods (~2 KB of JSON) created with no admission
function, so the number is the store's own cost: copy-in, stamping, JSON,
the watch history, and (sqlite mode) one committed transaction per create,
fsync'ed with ``synchronous=FULL`` (the default, see store/sqlite.py).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from phalanx.objects.clock import Clock
from phalanx.store.store import Store


def make_pod(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"job-{i // 4}-worker-{i % 4}",
            "namespace": "default",
            "labels": {
                "training.kubeflow.org/job-name": f"job-{i // 4}",
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-index": str(i % 4),
                "training.kubeflow.org/replica-type": "worker",
            },
            "annotations": {"scheduling.k8s.io/group-name": f"job-{i // 4}"},
            "ownerReferences": [{
                "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": f"job-{i // 4}",
                "uid": "dd780d46-45c9-468d-bb1a-f17b6c90e612", "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "OnFailure",
            "terminationGracePeriodSeconds": 30,
            "containers": [{
                "name": "pytorch",
                "image": "busybox:1.37.0-glibc",
                "command": ["sh", "-c", "trap exit INT TERM; sleep 30s & wait"],
                "env": [{"name": n, "value": str(i)} for n in
                        ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PYTHONUNBUFFERED")],
                "ports": [{"containerPort": 23456, "name": "pytorchjob-port", "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "1", "memory": "100Mi"}, "requests": {"cpu": "1", "memory": "100Mi"}},
            }],
        },
    }


def run_once(n: int, db: Path | None, synchronous: str = "FULL") -> float:
    store = Store(db, Clock(), synchronous=synchronous)
    pods = [make_pod(i) for i in range(n)]
    t0 = time.perf_counter()
    for p in pods:
        store.create(p)
    dt = time.perf_counter() - t0
    store.close()
    return n / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--synchronous", default="FULL,NORMAL", help="SQLite synchronous modes to measure")
    args = ap.parse_args()
    mem = [run_once(args.n, None) for _ in range(args.runs)]
    print(f"memory: {statistics.median(mem):,.0f} creates/s (median of {args.runs}, n={args.n})")
    for mode in args.synchronous.split(","):
        sql = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(dir=Path.home()) as d:  # a real disk, not a tmpfs /tmp
                sql.append(run_once(args.n, Path(d) / "state.db", mode))
        print(f"sqlite synchronous={mode}: {statistics.median(sql):,.0f} creates/s "
              f"(median of {args.runs}, n={args.n})")


if __name__ == "__main__":
    main()
