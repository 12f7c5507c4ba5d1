"""The Kubeflow SDK against `phalanx up` (issue 15): TrainingClient.create_job
with a train_func and 2 workers runs through torchrun in the pods (found on the
PATH of Phalanx's own environment, activated or not) to Succeeded."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
import yaml

pytestmark = pytest.mark.e2e

PHALANX = [sys.executable, "-m", "phalanx.cli.main"]


def train():
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    t = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(t)
    print(f"world {dist.get_world_size()} sum {t.item()}")
    dist.destroy_process_group()


def test_training_client_create_job_with_a_train_func(tmp_path):
    from kubeflow.training import TrainingClient

    home = tmp_path / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({"nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}]}))
    # The user's shell: the venv not activated, so its bin is not on PATH.
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p != os.path.dirname(sys.executable))
    env = dict(os.environ, PHALANX_HOME=str(home), PATH=path)
    env.pop("VIRTUAL_ENV", None)
    subprocess.run([*PHALANX, "up"], env=env, check=True, capture_output=True, timeout=60)
    try:
        client = TrainingClient(config_file=str(home / "kubeconfig"), namespace="default")
        client.create_job(name="sdk", train_func=train, num_workers=2)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            conds = {c.type: c.status for c in client.get_job_conditions(name="sdk")}
            if conds.get("Succeeded") == "True" or conds.get("Failed") == "True":
                break
            time.sleep(1)
        logs = subprocess.run([*PHALANX, "logs", "pytorchjob/sdk"], env=env, capture_output=True, text=True,
                              timeout=60).stdout
        assert conds.get("Succeeded") == "True", f"{conds}\n{logs}"
        # nprocPerNode defaults to auto: torchrun starts one rank per CPU in each of the 2 pods.
        # Two ranks share a pod's log; unbuffered, one's newline may land after the other's line,
        # so the reports are found in the text, not line by line.
        reports = re.findall(r"world (\d+) sum (\d+\.\d+)", logs)
        world = int(reports[0][0]) if reports else 0
        assert world >= 2 and world % 2 == 0 and len(reports) == world, logs
        assert all(r == (str(world), str(world * (world + 1) / 2)) for r in reports), logs
    finally:
        subprocess.run([*PHALANX, "down"], env=env, capture_output=True, timeout=60)
