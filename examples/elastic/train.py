"""Elastic data-parallel training under torchrun (c10d rendezvous): survives a lost worker, takes in a new one.

torchrun's agent in each pod joins the rendezvous at PET_RDZV_ENDPOINT with PET_NNODES=min:max
nodes and starts this script with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT of the group it
formed. When a worker process dies, or a new pod's agent asks to join, every agent stops its
worker and the group forms again (TORCHELASTIC_RESTART_COUNT grows): the script then resumes
from the last checkpoint in CKPT_DIR, a directory every pod shares (one machine: any path; a
cluster: a ReadWriteMany volume mounted there). Rank 0 saves a checkpoint every CKPT_EVERY steps
(written to a temporary file, then renamed: a reader never sees half of one) and appends each
group it trained in to CKPT_DIR/groups.log. At the end every rank checks that the loss fell
from the first step's and that all ranks hold the same parameters (exit 1 if not); rank 0 then
moves the checkpoint and the log to CKPT_DIR/finished, so the next run starts from step 0.
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

STEPS = int(os.environ.get("STEPS", "120"))
STEP_SECONDS = float(os.environ.get("STEP_SECONDS", "0.1"))  # pace, so a run lasts long enough to watch
CKPT_EVERY = 5
FEATURES = 8
BATCH = 64
LEARNING_RATE = 0.05


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: run this under torchrun")
    return value


def save(path, state):
    tmp = f"{path}.tmp.{os.getpid()}"
    torch.save(state, tmp)
    os.replace(tmp, path)


def checksum(model):
    return sum(float(p.detach().double().sum()) for p in model.parameters())


def main():
    torch.set_num_threads(1)
    rank, world = int(env("RANK")), int(env("WORLD_SIZE"))
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    ckpt_dir = env("CKPT_DIR")
    os.makedirs(os.path.join(ckpt_dir, "pids"), exist_ok=True)
    with open(os.path.join(ckpt_dir, "pids", f"{env('GROUP_RANK')}.pid"), "w") as f:
        f.write(str(os.getpid()))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))

    truth = torch.Generator().manual_seed(1234)  # the same problem on every rank
    weight = torch.randn(FEATURES, 1, generator=truth)
    bias = torch.randn(1, generator=truth)
    torch.manual_seed(0)
    model = nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    path = os.path.join(ckpt_dir, "checkpoint.pt")
    step, first_loss = 0, None
    if os.path.exists(path):
        state = torch.load(path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, first_loss = state["step"], state["first_loss"]
    # Every rank starts from rank 0's parameters, whatever it read.
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    t = torch.tensor([float(step)])
    dist.broadcast(t, 0)
    step = int(t.item())
    print(f"rank {rank}/{world} (restart {restart}): training from step {step}", flush=True)
    if rank == 0:
        with open(os.path.join(ckpt_dir, "groups.log"), "a") as f:
            f.write(f"restart {restart} world {world} from step {step}\n")

    loss_fn = nn.MSELoss()
    while step < STEPS:
        data = torch.Generator().manual_seed(step * 1000 + rank)  # this step's shard of this rank
        x = torch.randn(BATCH, FEATURES, generator=data)
        y = x @ weight + bias
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
        mean = torch.tensor([loss.item()])
        dist.all_reduce(mean)
        mean_loss = mean.item() / world
        if first_loss is None:
            first_loss = mean_loss
        step += 1
        if rank == 0 and (step % CKPT_EVERY == 0 or step == STEPS):
            save(path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                        "first_loss": first_loss})
            print(f"step {step}: loss {mean_loss:.5f} (world {world}), checkpoint saved", flush=True)
        time.sleep(STEP_SECONDS)

    sums = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(sums, torch.tensor([checksum(model)], dtype=torch.float64))
    agree = all(abs(s.item() - sums[0].item()) < 1e-9 for s in sums)
    held_out = torch.Generator().manual_seed(999_999 + rank)
    x = torch.randn(BATCH, FEATURES, generator=held_out)
    with torch.no_grad():
        final = torch.tensor([loss_fn(model(x), x @ weight + bias).item()])
    dist.all_reduce(final)
    final_loss = final.item() / world
    fell = first_loss is not None and final_loss < first_loss / 10
    dist.barrier()
    dist.destroy_process_group()
    if not (agree and fell):
        print(f"rank {rank}: FAILED: ranks agree {agree}, loss {first_loss} -> {final_loss}", flush=True)
        os._exit(1)
    print(f"rank {rank}: final check passed: loss {first_loss:.4f} -> {final_loss:.6f}, "
          f"{world} ranks agree", flush=True)
    if rank == 0:  # a finished run's files move aside: the next run starts from step 0
        done = os.path.join(ckpt_dir, "finished")
        os.makedirs(done, exist_ok=True)
        for name in ("checkpoint.pt", "groups.log"):
            os.replace(os.path.join(ckpt_dir, name), os.path.join(done, name))
    os._exit(0)  # as examples/ddp/train.py: gloo's threads must not outlive a finalizing interpreter


if __name__ == "__main__":
    main()
