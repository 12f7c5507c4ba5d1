"""Two PaddlePaddle trainers on CPU all-reduce a tensor and train one model together.

Run by `python -m paddle.distributed.launch` in collective mode, which reads
the env the operator sets (PADDLE_JOB_ID, PADDLE_NNODES, PADDLE_MASTER: its
rendezvous, served by the pod that PADDLE_MASTER names) and starts this
program with the trainer's env (PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM,
PADDLE_TRAINER_ENDPOINTS). Each trainer joins the gloo process group, all-
reduces RANK + 1, then trains a tiny linear model with DataParallel for a few
steps on its own shard of a fixed data set (fixed seeds), and checks that
every rank ends with the same weights. Each prints what it saw; exit 1 when a
check fails, so the job fails instead of "succeeding" wrongly.
"""
import hashlib
import os
import sys

import numpy as np
import paddle
import paddle.distributed as dist

STEPS = 20
SEED = 2026
TRUE_W = np.array([[1.0], [-2.0], [3.0], [0.5]], dtype="float32")
TRUE_B = 0.25


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: start this with python -m paddle.distributed.launch in a PaddleJob")
    return value


def fail(rank, message):
    print(f"rank {rank}: FAILED: {message}", flush=True)
    sys.exit(1)


def gathered(tensor):
    """Every rank's copy of ``tensor``, as numpy arrays in rank order."""
    parts = []
    dist.all_gather(parts, tensor)
    return [p.numpy() for p in parts]


def main():
    rank, world = int(env("PADDLE_TRAINER_ID")), int(env("PADDLE_TRAINERS_NUM"))
    print(f"rank {rank} of {world}: job {env('PADDLE_JOB_ID')}, endpoint {env('PADDLE_CURRENT_ENDPOINT')}, "
          f"trainers {env('PADDLE_TRAINER_ENDPOINTS')}", flush=True)
    paddle.set_device("cpu")
    dist.init_parallel_env()
    if (dist.get_rank(), dist.get_world_size()) != (rank, world):
        fail(rank, f"joined as rank {dist.get_rank()} of {dist.get_world_size()}")

    value = paddle.to_tensor([float(rank + 1)])
    dist.all_reduce(value)
    total, expected = float(value.numpy()[0]), float(sum(range(1, world + 1)))
    print(f"rank {rank}: all_reduce sum {total} (expected {expected})", flush=True)
    if total != expected:
        fail(rank, "the all-reduce is wrong")

    paddle.seed(SEED)  # the same initial weights everywhere (DataParallel broadcasts rank 0's too)
    model = paddle.DataParallel(paddle.nn.Linear(4, 1))
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    rng = np.random.default_rng(SEED + rank)  # this rank's shard
    x = rng.normal(size=(64, 4)).astype("float32")
    xs, ys = paddle.to_tensor(x), paddle.to_tensor(x @ TRUE_W + TRUE_B)
    losses = []
    for _ in range(STEPS):
        loss = paddle.nn.functional.mse_loss(model(xs), ys)
        loss.backward()  # DataParallel all-reduces the gradients
        opt.step()
        opt.clear_grad()
        mean = loss.detach()
        dist.all_reduce(mean)
        losses.append(float(mean.numpy()) / world)
    print(f"rank {rank}: trained {STEPS} steps, mean loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)

    weights = paddle.concat([p.detach().flatten() for p in model.parameters()])
    digest = hashlib.sha256(weights.numpy().tobytes()).hexdigest()
    agree = all(np.array_equal(w, weights.numpy()) for w in gathered(weights))
    print(f"rank {rank}: model sha256 {digest}, ranks agree: {agree}", flush=True)
    if not agree:
        fail(rank, "the ranks hold different models")
    if not losses[-1] < losses[0] / 10:
        fail(rank, "the loss did not fall")


if __name__ == "__main__":
    main()
