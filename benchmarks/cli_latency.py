"""Wall time of `phalanx get/apply/describe/logs` next to kubectl's, against one control plane.

Starts `phalanx up` in a temporary PHALANX_HOME, runs a short job so there are pods and
logs, then runs each command N times (default 10) with phalanx and with kubectl (the
kubeconfig phalanx writes), interleaved, and prints the medians and phalanx/kubectl.
Usage: PYTHONPATH=src python benchmarks/cli_latency.py [-n 10]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHALANX = [sys.executable, "-m", "phalanx.cli.main"]
KUBECTL = "/usr/bin/kubectl"

JOB = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: bench}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - {name: pytorch, image: busybox, command: [sh, -c, "echo hello from the master"]}
"""


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, timeout=60)
    took = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} -> {r.returncode}: {r.stderr.decode()[-500:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10, help="runs per command and tool")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / "cluster.yaml").write_text("nodes:\n- {name: las1, cpu: 8, memory: 32Gi}\n")
        # Bytecode as an installed package has it (a developer shell may set PYTHONDONTWRITEBYTECODE).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PHALANX_HOME=str(home), PYTHONPYCACHEPREFIX=str(Path(tmp) / "pyc"))
        kenv = dict(env, KUBECONFIG=str(home / "kubeconfig"))
        job = Path(tmp) / "job.yaml"
        job.write_text(JOB)
        subprocess.run([*PHALANX, "up"], env=env, check=True, capture_output=True, timeout=60)
        try:
            subprocess.run([*PHALANX, "apply", "-f", str(job)], env=env, check=True, capture_output=True)
            deadline = time.monotonic() + 60
            while b"Succeeded" not in subprocess.run([*PHALANX, "get", "pytorchjob", "bench"], env=env,
                                                     capture_output=True).stdout:
                if time.monotonic() > deadline:
                    raise SystemExit("the benchmark job did not succeed within 60s")
                time.sleep(0.2)
            commands = {
                "get": (["get", "pods"], ["get", "pods"]),
                "apply": (["apply", "-f", str(job)], ["apply", "-f", str(job)]),
                "describe": (["describe", "pytorchjob", "bench"], ["describe", "pytorchjob", "bench"]),
                "logs": (["logs", "bench-master-0"], ["logs", "bench-master-0"]),
            }
            for sub, kub in commands.values():  # warm-up: bytecode, page cache
                timed([*PHALANX, *sub], env)
                timed([KUBECTL, *kub], kenv)
            print(f"{'command':<10} {'phalanx s':>10} {'kubectl s':>10} {'ratio':>7}   (median of {args.n})")
            for name, (sub, kub) in commands.items():
                p, k = [], []
                for _ in range(args.n):
                    p.append(timed([*PHALANX, *sub], env))
                    k.append(timed([KUBECTL, *kub], kenv))
                mp, mk = statistics.median(p), statistics.median(k)
                print(f"{name:<10} {mp:>10.3f} {mk:>10.3f} {mp / mk:>7.1f}")
            print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        finally:
            subprocess.run([*PHALANX, "down"], env=env, capture_output=True, timeout=90)


if __name__ == "__main__":
    main()
