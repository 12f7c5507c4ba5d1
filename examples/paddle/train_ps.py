"""PaddlePaddle's parameter-server mode on CPU: each pod runs a server and a
trainer, and the trainers train one model that the servers hold.

Run by `python -m paddle.distributed.launch` in PS mode, which reads the env
the operator sets: PADDLE_JOB_ID, PADDLE_NNODES, PADDLE_MASTER (the rendezvous,
served by Master 0), and PADDLE_SERVER_NUM=1 on Masters or PADDLE_TRAINER_NUM=1
on Workers (the other count defaults to 1). So each pod starts a server and a
trainer; launch hands them their roles (TRAINING_ROLE), every endpoint
(PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINER_ENDPOINTS) and the trainer ids.
The trainers all-reduce TRAINER_ID + 1 over gloo, then train a tiny linear
model for a few steps (asynchronous updates: the servers apply each trainer's
gradients as they come), each on its own shard of a fixed data set (fixed
seeds), all-reducing the loss of every step. Then the first trainer stops the
servers. launch echoes only its first process, the server, to the pod's log,
so the server, once stopped, repeats its pod's trainer's lines. Exit 1 when a
check fails.
"""
import glob
import os
import socket
import sys
import time

# Paddle's PS passes need the legacy static graph, not PIR (set before paddle loads).
os.environ["FLAGS_enable_pir_api"] = "0"

import numpy as np
import paddle
import paddle.distributed.fleet as fleet
from paddle.distributed.fleet.base import distributed_strategy

STEPS = 20
SEED = 2026
TRUE_W = np.array([[1.0], [-2.0], [3.0], [0.5]], dtype="float32")
TRUE_B = 0.25
TIMEOUT_SECONDS = 60
TAG = "trainer "  # what the servers repeat from the trainers' logs


# paddlepaddle 3.1.0, the last CPU wheel with the parameter server, predates
# protobuf 7, which dropped FieldDescriptor.label: its DistributedStrategy
# reads it to copy configs. These replacements use is_repeated instead, as
# paddle 3.3 does (paddle/distributed/fleet/base/distributed_strategy.py).
MESSAGE = 11  # FieldDescriptor.TYPE_MESSAGE


def _repeated_dicts(msgs):
    return [{f.name: list(getattr(m, f.name)) if f.is_repeated else getattr(m, f.name)
             for f in m.DESCRIPTOR.fields} for m in msgs]


def _msg_dict(msg):
    out = {}
    for f in msg.DESCRIPTOR.fields:
        v = getattr(msg, f.name)
        if f.is_repeated:
            v = _repeated_dicts(v) if f.type == MESSAGE else list(v)
        out[f.name] = v
    return out


def _assign(msg, config):
    fields = msg.DESCRIPTOR.fields_by_name
    for key, value in config.items():
        f = fields.get(key)
        if f is None:
            continue
        if not f.is_repeated:
            setattr(msg, key, value)
        elif value is not None:
            if f.type != MESSAGE:
                getattr(msg, key).extend(value)
            else:
                _assign_repeated(getattr(msg, key), value)


def _assign_repeated(msgs, configs):
    for config in configs:
        _assign(msgs.add(), config)


if not hasattr(paddle.base.core, "DistFleetWrapper"):
    sys.exit(f"paddlepaddle {paddle.__version__} has no parameter server (WITH_PSCORE): use 3.1.0")
if not hasattr(distributed_strategy, "_is_repeated_field"):  # paddle < 3.3
    distributed_strategy.get_msg_dict = _msg_dict
    distributed_strategy.get_repeated_msg_dict = _repeated_dicts
    distributed_strategy.assign_configs_value = _assign
    distributed_strategy.assign_repeated_msg = _assign_repeated


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: start this with python -m paddle.distributed.launch in a PaddleJob")
    return value


def fail(who, message):
    print(f"{who}: FAILED: {message}", flush=True)
    sys.exit(1)


def wait_for(endpoints):
    """Every server listens: a trainer's first push fails if one does not yet."""
    for endpoint in endpoints:
        host, port = endpoint.rsplit(":", 1)
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def build():
    """The model, the loss, and the PS optimizer (DistributedStrategy's default: a_sync)."""
    paddle.seed(SEED)
    x = paddle.static.data("x", [None, 4], "float32")
    y = paddle.static.data("y", [None, 1], "float32")
    pred = paddle.static.nn.fc(x, 1, weight_attr=paddle.ParamAttr(name="w"), bias_attr=paddle.ParamAttr(name="b"))
    loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, y))
    strategy = fleet.DistributedStrategy()
    opt = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.1), strategy)
    opt.minimize(loss)
    return loss


def serve():
    me = f"server {fleet.server_index()}"
    print(f"{me} of {fleet.server_num()}: job {env('PADDLE_JOB_ID')}, endpoint {env('POD_IP')}:{env('PADDLE_PORT')}, "
          f"servers {env('PADDLE_PSERVERS_IP_PORT_LIST')}", flush=True)
    fleet.init_server()
    fleet.run_server()  # returns when the first trainer stops the servers
    print(f"{me}: stopped", flush=True)
    for path in sorted(glob.glob(os.path.join(env("PADDLE_LOG_DIR"), "workerlog.*"))):
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith(TAG):
                    print(f"{me}: {os.path.basename(path)}: {line.rstrip()}", flush=True)


def train(loss):
    rank, world = fleet.worker_index(), fleet.worker_num()
    me = f"trainer {rank}"
    if (rank, world) != (int(env("PADDLE_TRAINER_ID")), int(env("PADDLE_TRAINERS_NUM"))):
        fail(me, f"fleet says trainer {rank} of {world}")
    print(f"{me} of {world}: job {env('PADDLE_JOB_ID')}, servers {env('PADDLE_PSERVERS_IP_PORT_LIST')}", flush=True)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    wait_for(fleet.server_endpoints())
    fleet.init_worker()

    total = float(fleet.util.all_reduce(np.array([rank + 1.0]), mode="sum", comm_world="worker")[0])
    expected = float(sum(range(1, world + 1)))
    print(f"{me}: all_reduce sum {total} (expected {expected})", flush=True)
    if total != expected:
        fail(me, "the all-reduce is wrong")

    rng = np.random.default_rng(SEED + rank)  # this trainer's shard
    x = rng.normal(size=(64, 4)).astype("float32")
    feed = {"x": x, "y": (x @ TRUE_W + TRUE_B).astype("float32")}
    losses = []
    for _ in range(STEPS):
        (value,) = exe.run(paddle.static.default_main_program(), feed=feed, fetch_list=[loss])
        losses.append(float(fleet.util.all_reduce(np.array([float(value)]), mode="sum", comm_world="worker")[0]) / world)
    print(f"{me}: trained {STEPS} steps, mean loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)

    fleet.stop_worker()  # sends this trainer's last updates, closes its client
    fleet.barrier_worker()
    if fleet.is_first_worker():
        # The servers serve until told to stop, and launch waits for them:
        # fleet has no public call for it (paddle's own tests kill them), so
        # this is what its runtime's client offers.
        fleet.fleet._runtime_handle._worker.stop_server()  # noqa: SLF001
    if not losses[-1] < losses[0] / 10:
        fail(me, "the loss did not fall")


def main():
    paddle.enable_static()  # parameter-server training runs static programs
    fleet.init(is_collective=False)  # the role maker reads launch's env
    loss = build()
    if fleet.is_server():
        serve()
    else:
        train(loss)


if __name__ == "__main__":
    main()
