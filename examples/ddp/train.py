"""Data-parallel training of a tiny regression model with torch.distributed
(gloo, CPU) and DistributedDataParallel.

Every address comes from the environment the operator (or torchrun) sets:
MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK. The ranks first prove they agree
(an all-reduce of the rank sum and an all-gather of the ranks), then train
STEPS steps, each on its own shard of a synthetic linear problem; rank 0
prints the loss as it falls and the final loss. Exit 1 when a check fails or
the loss did not fall, so the job fails instead of "succeeding" wrongly.

The process ends with os._exit once every rank passed the final barrier and
the process group is destroyed: DDP keeps references to the process group,
so gloo's worker threads outlive destroy_process_group, and one that drops a
finished collective's tensors while the interpreter finalizes needs the GIL,
is ended by the interpreter inside a C++ destructor and aborts the process
("terminate called without an active exception").
"""
import os
import sys
import time
import warnings
from datetime import timedelta

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # numpy is not needed
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

STEPS = 200
FEATURES = 8
SAMPLES = 512  # per rank
BATCH = 32
LEARNING_RATE = 0.01
LOG_EVERY = 50


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: run this under the training operator or torchrun")
    return value


def fail(rank, message):
    print(f"rank {rank}: FAILED: {message}", flush=True)
    sys.exit(1)


def mean_over_ranks(value, world):
    t = torch.tensor([value])
    dist.all_reduce(t)
    return t.item() / world


def main():
    torch.set_num_threads(1)  # one core per process: four ranks share a small machine
    rank, world = int(env("RANK")), int(env("WORLD_SIZE"))
    launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "operator"
    print(f"rank {rank} of world size {world}: MASTER_ADDR={env('MASTER_ADDR')} "
          f"MASTER_PORT={env('MASTER_PORT')} (launched by {launcher})", flush=True)
    started = time.monotonic()
    # init_method env:// reads MASTER_ADDR/MASTER_PORT; rank 0 hosts the store.
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))

    rank_sum = torch.tensor([float(rank)])
    dist.all_reduce(rank_sum)
    expected = world * (world - 1) // 2
    print(f"rank {rank}: all-reduce rank sum {int(rank_sum.item())} (expected {expected})", flush=True)
    if int(rank_sum.item()) != expected:
        fail(rank, f"rank sum {rank_sum.item()} != {expected}")
    gathered = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(gathered, torch.tensor([float(rank)]))
    ranks = sorted(int(t.item()) for t in gathered)
    if ranks != list(range(world)):
        fail(rank, f"ranks {ranks} are not 0..{world - 1}")
    if rank == 0:
        print(f"ranks {ranks} agree", flush=True)

    # The same true weights everywhere; each rank has its own samples.
    truth = torch.Generator().manual_seed(1234)
    weight = torch.randn(FEATURES, 1, generator=truth)
    bias = torch.randn(1, generator=truth)
    mine = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(SAMPLES, FEATURES, generator=mine)
    y = x @ weight + bias + 0.01 * torch.randn(SAMPLES, 1, generator=mine)

    torch.manual_seed(rank)  # DDP broadcasts rank 0's initial parameters to all
    model = DistributedDataParallel(nn.Linear(FEATURES, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.MSELoss()
    first = last = None
    for step in range(STEPS):
        idx = torch.randint(0, SAMPLES, (BATCH,), generator=mine)
        loss = loss_fn(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        if step % LOG_EVERY == 0 or step == STEPS - 1:
            last = mean_over_ranks(loss.item(), world)
            first = last if first is None else first
            if rank == 0:
                print(f"step {step:4d} loss {last:.6f}", flush=True)

    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    low, high = params.clone(), params.clone()
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    if not torch.equal(low, high):
        fail(rank, "replicas' parameters differ after training")
    if rank == 0:
        print(f"final loss {last:.6f} (first {first:.6f}) after {STEPS} steps "
              f"in {time.monotonic() - started:.1f}s", flush=True)
    if not last < first:  # the same on every rank: the losses are averaged over the ranks
        fail(rank, f"loss did not fall: {first:.6f} -> {last:.6f}")
    dist.barrier()  # no rank leaves (closing its sockets, rank 0 its store) while a peer still talks
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
        code = 0
    except SystemExit as e:  # env() and fail()
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
        code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter finalization with gloo's threads still running (see above)
