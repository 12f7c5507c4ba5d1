"""A stand-in for a PaddlePaddle launch: check the env the operator sets and
prove PADDLE_MASTER is reachable.

PaddlePaddle itself is not installed here (its wheel is too large for this
CI); this program does what `python -m paddle.distributed.launch` needs from
the env. PADDLE_JOB_ID, PADDLE_NNODES (all replicas) and PADDLE_MASTER
(host:port) are set on every pod; the pod PADDLE_MASTER points at (worker 0,
or master 0 in PS mode) is the one that also has POD_IP_DUMMY, its own pod IP,
as the host. That pod listens on PADDLE_MASTER; every other pod connects to it
and says hello; once all PADDLE_NNODES - 1 peers are in, it answers each one.
Exit 1 when a check fails.
"""
import os
import re
import socket
import sys
import time

TIMEOUT_SECONDS = 60


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: run this as a PaddleJob replica")
    return value


def fail(me, message):
    print(f"{me}: FAILED: {message}", flush=True)
    sys.exit(1)


def serve(me, host, port, peers, answer):
    """Listen on PADDLE_MASTER, wait for every peer's hello, then answer all."""
    with socket.create_server((host, port)) as server:
        server.settimeout(TIMEOUT_SECONDS)
        conns = []
        for _ in range(peers):
            conn, _ = server.accept()
            conn.settimeout(TIMEOUT_SECONDS)
            conns.append((conn, conn.makefile("r").readline().strip()))
        print(f"{me}: heard from {sorted(hello for _, hello in conns)}", flush=True)
        for conn, _ in conns:
            with conn:
                conn.sendall(f"{answer}\n".encode())


def call(me, host, port, hello):
    """Connect to PADDLE_MASTER (retrying until it listens and its name resolves)."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=TIMEOUT_SECONDS)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    with conn:
        conn.sendall(f"{hello}\n".encode())
        return conn.makefile("r").readline().strip()


def main():
    me = os.environ.get("HOSTNAME") or socket.gethostname()
    job, nnodes, master = env("PADDLE_JOB_ID"), env("PADDLE_NNODES"), env("PADDLE_MASTER")
    if os.environ.get("PYTHONUNBUFFERED") != "1":
        fail(me, f"PYTHONUNBUFFERED={os.environ.get('PYTHONUNBUFFERED')!r}, expected '1'")
    m = re.fullmatch(r"(.+):(\d+)", master)
    if not m or not nnodes.isdigit() or int(nnodes) < 1:
        fail(me, f"PADDLE_NNODES={nnodes!r} PADDLE_MASTER={master!r}: expected a count and host:port")
    host, port, nnodes = m[1], int(m[2]), int(nnodes)
    mode = "ps" if os.environ.get("PADDLE_SERVER_NUM") or os.environ.get("PADDLE_TRAINER_NUM") else "collective"
    print(f"{me}: PADDLE_JOB_ID={job} PADDLE_NNODES={nnodes} PADDLE_MASTER={master} ({mode} mode)", flush=True)
    answer = f"welcome to {job}: {nnodes} nodes"
    own_ip = os.environ.get("POD_IP_DUMMY")
    if own_ip:
        if host != own_ip:
            fail(me, f"POD_IP_DUMMY={own_ip} but PADDLE_MASTER={master}")
        serve(me, host, port, nnodes - 1, answer)
    else:
        reply = call(me, host, port, f"hello from {me}")
        print(f"{me}: {master} answered: {reply}", flush=True)
        if reply != answer:
            fail(me, f"expected {answer!r}")


if __name__ == "__main__":
    main()
