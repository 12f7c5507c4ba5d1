"""Two `phalanx run` at once with two PHALANX_HOMEs (two terminals, two users' homes): each home's pods get their
own loopback addresses and host ports, so the same job in both runs, its master bound to the wildcard address
as torch's TCPStore binds it, talks only to itself and succeeds twice."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from phalanx.cli.controlplane import running_endpoint
from phalanx.node.machineclaims import LOCK_PATH_ENV

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PHALANX = [sys.executable, "-m", "phalanx.cli.main"]

# The master binds MASTER_PORT (every interface) only after a pause, so that both homes have given out their ports
# before either is bound (a bind check alone would see both free); it serves its home's token until its worker has
# read it and keeps the port a moment more, so that both masters are bound at once. The worker checks the token.
MASTER = """
import os, socket, sys, time
time.sleep(3)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(os.environ["MASTER_PORT"])))
s.listen()
conn, _ = s.accept()
conn.sendall(sys.argv[1].encode())
conn.close()
time.sleep(2)
print("served", os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], flush=True)
"""
WORKER = """
import os, socket, sys, time
deadline = time.monotonic() + 60
while True:
    try:
        c = socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])), timeout=2)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.1)
got = c.recv(100).decode()
print("read", got, "from", os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], flush=True)
sys.exit(0 if got == sys.argv[1] else 1)
"""


def job(tmp: Path, token: str) -> Path:
    def replica(script: str) -> dict:
        return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
            {"name": "pytorch", "image": "python", "command": ["python3", "-c", script, token]}]}}}

    doc = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "same"},
           "spec": {"pytorchReplicaSpecs": {"Master": replica(MASTER), "Worker": replica(WORKER)}}}
    f = tmp / f"job-{token}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


def make_home(tmp: Path, name: str) -> Path:
    h = tmp / name
    h.mkdir()
    (h / "cluster.yaml").write_text(yaml.safe_dump({"nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}]}))
    return h


def test_the_same_job_in_two_homes_at_once_succeeds_in_both(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != LOCK_PATH_ENV}  # the machine's own claims file
    homes = [make_home(tmp_path, "a"), make_home(tmp_path, "b")]
    runs = [subprocess.Popen([*PHALANX, "run", str(job(tmp_path, token))], env=dict(env, PHALANX_HOME=str(h)),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for h, token in zip(homes, ("token-a", "token-b"))]
    try:
        out = [r.communicate(timeout=100) for r in runs]
    finally:
        for r in runs:
            r.kill()
    for r, (stdout, stderr) in zip(runs, out):
        assert r.returncode == 0 and "pytorchjob/same Succeeded" in stdout, (stdout, stderr)
    served = []
    for h, token in zip(homes, ("token-a", "token-b")):
        logs = subprocess.run([*PHALANX, "logs", "same-worker-0"], env=dict(env, PHALANX_HOME=str(h)),
                              capture_output=True, text=True, timeout=30)
        assert f"read {token} from" in logs.stdout, logs
        master = subprocess.run([*PHALANX, "logs", "same-master-0"], env=dict(env, PHALANX_HOME=str(h)),
                                capture_output=True, text=True, timeout=30)
        served.append(master.stdout.split()[-1])  # the host port the master was given
        assert running_endpoint(h, 0) is None  # each run's control plane ended with it
    assert served[0] != served[1]
