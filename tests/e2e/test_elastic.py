"""Elastic PyTorch on real processes (issue 20): examples/elastic/pytorchjob.yaml runs torchrun's c10d
rendezvous on 2 workers; one worker's training process is killed and the group forms again from the
last checkpoint; `kubectl scale` to 3 workers and the new one joins at the next rendezvous; the job
Succeeds and every rank's final check (loss fell, parameters agree) passes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_cli_controlplane import cli, wait_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = Path.home() / ".cache" / "phalanx" / "envtest" / "v1.36.3" / "bin" / "kubectl"


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def groups(ckpt: Path) -> list[dict]:
    """The groups rank 0 trained in, in order: its agent's restart count (a restart after a failure
    elsewhere, or for a new node, does not count on it), world size, first step."""
    out = []
    for name in ("groups.log", "finished/groups.log"):
        f = ckpt / name
        if f.exists():
            for line in f.read_text().splitlines():
                _, restart, _, world, _, _, step = line.split()
                out.append({"restart": int(restart), "world": int(world), "step": int(step)})
    return out


def kubectl(env, *args: str) -> str:
    kubeconfig = Path(env["PHALANX_HOME"]) / "kubeconfig"
    r = subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}"
    return r.stdout


def test_elastic_job_survives_a_lost_worker_and_takes_in_a_new_one(env, tmp_path):
    ckpt = tmp_path / "ckpt"
    doc = yaml.safe_load((ROOT / "examples" / "elastic" / "pytorchjob.yaml").read_text())
    container = doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["env"] = [e for e in container["env"] if e["name"] != "CKPT_DIR"] + [
        {"name": "CKPT_DIR", "value": str(ckpt)}, {"name": "STEPS", "value": "260"},
        {"name": "STEP_SECONDS", "value": "0.05"}]
    job = tmp_path / "elastic.yaml"
    job.write_text(yaml.safe_dump(doc))
    env = dict(env, PATH=f"{Path(os.sys.executable).parent}:{env['PATH']}")  # the pods' python3 has torch
    cli(env, "apply", "-f", str(job))

    # Two workers form the group and train; a checkpoint is written.
    wait_for(lambda: any(g["world"] == 2 for g in groups(ckpt)), 90, "the group of 2")
    wait_for(lambda: (ckpt / "checkpoint.pt").exists(), 60, "a first checkpoint")

    # Worker 1's training process dies: torchrun's agents form the group again, from the checkpoint.
    pid = int((ckpt / "pids" / "1.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    again = wait_for(lambda: groups(ckpt)[1:], 90, "the group formed again")
    assert again[0]["world"] == 2 and again[0]["step"] > 0, groups(ckpt)

    # kubectl scale to 3: the third worker's agent joins at the next rendezvous.
    assert "scaled" in kubectl(env, "scale", "pytorchjob/elastic", "--replicas=3")
    three = wait_for(lambda: [g for g in groups(ckpt) if g["world"] == 3], 120, "the group of 3")
    assert three[0]["step"] > again[0]["step"], groups(ckpt)

    wait_cli(env, ["get", "pytorchjob", "elastic"], lambda out: "Succeeded" in out, 180, "the job Succeeded")
    final = groups(ckpt)
    assert [g["world"] for g in final][:1] == [2] and final[-1]["world"] == 3, final
    for i in range(3):
        log = cli(env, "logs", f"elastic-worker-{i}").stdout
        assert "final check passed" in log and "3 ranks agree" in log, log
    # The agents restarted the training processes; no pod was restarted and no failure was counted.
    def ended():
        items = json.loads(cli(env, "get", "pods", "-o", "json").stdout)["items"]
        return items if all(p["status"].get("phase") == "Succeeded" for p in items) else None

    pods = wait_for(ended, 60, "every worker Succeeded")
    assert sorted(p["metadata"]["name"] for p in pods) == [f"elastic-worker-{i}" for i in range(3)]
    restarted = {p["metadata"]["name"]: cs for p in pods for cs in p["status"]["containerStatuses"]
                 if cs["restartCount"]}
    assert not restarted, {n: cli(env, "logs", n, "--previous", check=False).stdout[-2000:] for n in restarted}
    status = json.loads(cli(env, "get", "pytorchjob", "elastic", "-o", "json").stdout)["status"]
    assert status.get("restartCount", 0) == 0
