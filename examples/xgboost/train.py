"""Distributed XGBoost training over the Rabit collective, on CPU.

Everything comes from the environment the operator sets: MASTER_ADDR,
MASTER_PORT, WORLD_SIZE, RANK (master 0, workers 1..). Rank 0 starts
xgboost's tracker on MASTER_ADDR:MASTER_PORT; every rank (the master too)
joins the collective through it, checks it got the rank and world it was
given, then trains a few boosting rounds on its own shard of a deterministic
synthetic regression problem. Histograms are all-reduced, so every rank ends
with the same model: each prints the SHA-256 of the model's JSON. Exit 1 when
a check fails or the error did not fall.
"""
import hashlib
import os
import socket
import sys
import time

import numpy as np
import xgboost
from xgboost import collective
from xgboost.tracker import RabitTracker

ROUNDS = 8
SAMPLES = 2000  # in all; rank r trains on rows r, r + WORLD_SIZE, ...
FEATURES = 6
TIMEOUT_SECONDS = 60


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: run this as an XGBoostJob replica")
    return value


def fail(rank, message):
    print(f"rank {rank}: FAILED: {message}", flush=True)
    sys.exit(1)


def resolve(host):
    """MASTER_ADDR as an IP address: xgboost's tracker cannot listen on a name.
    A pod's name resolves once that pod runs: wait for it (bounded)."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        try:
            return socket.gethostbyname(host)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def dataset(rank, world):
    rng = np.random.default_rng(20240)
    x = rng.normal(size=(SAMPLES, FEATURES))
    y = x @ np.arange(1, FEATURES + 1) + np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=SAMPLES)
    return xgboost.DMatrix(x[rank::world], label=y[rank::world])


def main():
    addr, port = env("MASTER_ADDR"), int(env("MASTER_PORT"))
    world, rank = int(env("WORLD_SIZE")), int(env("RANK"))
    print(f"rank {rank} of world size {world}: MASTER_ADDR={addr} MASTER_PORT={port}", flush=True)
    ip = resolve(addr)
    tracker = None
    if rank == 0:
        # sortby="task": ranks follow dmlc_task_id (RANK), not connection order.
        tracker = RabitTracker(n_workers=world, host_ip=ip, port=port, sortby="task", timeout=TIMEOUT_SECONDS)
        tracker.start()
    args = {"dmlc_tracker_uri": ip, "dmlc_tracker_port": port, "dmlc_task_id": f"{rank:06d}",
            "dmlc_retry": 100, "dmlc_timeout": TIMEOUT_SECONDS}
    with collective.CommunicatorContext(**args):
        if (collective.get_world_size(), collective.get_rank()) != (world, rank):
            fail(rank, f"joined as rank {collective.get_rank()} of {collective.get_world_size()}")
        ranks = collective.allreduce(np.array([rank + 1.0]), collective.Op.SUM)
        print(f"rank {rank}: all-reduce rank sum {int(ranks[0])} (expected {world * (world + 1) // 2})",
              flush=True)
        dtrain = dataset(rank, world)
        history = {}
        params = {"objective": "reg:squarederror", "tree_method": "hist", "max_depth": 4, "eta": 0.3,
                  "seed": 0, "nthread": 1}
        booster = xgboost.train(params, dtrain, ROUNDS, evals=[(dtrain, "train")], evals_result=history,
                                verbose_eval=False)
        rmse = history["train"]["rmse"]
        digest = hashlib.sha256(bytes(booster.save_raw("json"))).hexdigest()
        print(f"rank {rank}: trained {booster.num_boosted_rounds()} rounds on {dtrain.num_row()} rows, "
              f"rmse {rmse[0]:.4f} -> {rmse[-1]:.4f}", flush=True)
        print(f"rank {rank}: model sha256 {digest}", flush=True)
    if tracker is not None:
        tracker.wait_for(TIMEOUT_SECONDS)
    if int(ranks[0]) != world * (world + 1) // 2:
        fail(rank, "the ranks disagree")
    if not rmse[-1] < rmse[0] / 2:
        fail(rank, f"the error did not fall: {rmse}")


if __name__ == "__main__":
    main()
