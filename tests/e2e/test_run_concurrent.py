"""Several `phalanx run` with one PHALANX_HOME (issue 15): the first hosts the
control plane and keeps serving until the last other run is done; Ctrl-C of a
run stops only its own job (suspended, resumed by running it again); a failed
run prints the failing condition and the end of the failed container's log."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from phalanx.cli.controlplane import running_endpoint

pytestmark = pytest.mark.e2e

PHALANX = [sys.executable, "-m", "phalanx.cli.main"]


def job(tmp: Path, name: str, script: str) -> Path:
    doc = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
               {"name": "pytorch", "image": "busybox", "command": ["sh", "-c", script]}]}}}}}}
    f = tmp / f"{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    (h / "cluster.yaml").write_text(yaml.safe_dump({"nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}]}))
    yield h
    ep = running_endpoint(h, 0)
    if ep is not None:
        os.kill(ep.pid, signal.SIGTERM)


def start_run(home: Path, f: Path) -> subprocess.Popen:
    return subprocess.Popen([*PHALANX, "run", str(f)], env=dict(os.environ, PHALANX_HOME=str(home)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def kubectl_json(home: Path, *args: str) -> dict:
    r = subprocess.run([*PHALANX, "get", *args, "-o", "json"], env=dict(os.environ, PHALANX_HOME=str(home)),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_hosting_run_that_ends_first_keeps_serving_the_other(home, tmp_path):
    host = start_run(home, job(tmp_path, "short", "sleep 2; echo short-done"))
    wait_until(lambda: running_endpoint(home, 0), 30, "the hosting run's control plane")
    other = start_run(home, job(tmp_path, "long", "sleep 7; echo long-done"))
    out_h, err_h = host.communicate(timeout=90)
    out_o, err_o = other.communicate(timeout=90)
    assert host.returncode == 0 and other.returncode == 0, (err_h, err_o)
    assert "pytorchjob/short Succeeded" in out_h and "pytorchjob/long Succeeded" in out_o
    assert "started an embedded control plane" in err_h and "started an embedded control plane" not in err_o
    assert "keeps serving 1 other run(s) (pytorchjob/long)" in err_h
    wait_until(lambda: running_endpoint(home, 0) is None, 30, "the control plane to stop after the last run")


def test_ctrl_c_of_a_run_stops_only_its_own_job_and_running_it_again_resumes_it(home, tmp_path):
    host = start_run(home, job(tmp_path, "keep", "sleep 20; echo keep-done"))
    wait_until(lambda: running_endpoint(home, 0), 30, "the hosting run's control plane")
    f = job(tmp_path, "stopme", "sleep 5")
    other = start_run(home, f)
    wait_until(lambda: any(p["metadata"]["name"] == "stopme-master-0" and p["status"].get("phase") == "Running"
                           for p in kubectl_json(home, "po")["items"]), 40, "stopme running")
    other.send_signal(signal.SIGINT)
    _, err_o = other.communicate(timeout=30)
    assert other.returncode == 130, err_o
    assert "pytorchjob/stopme stopped (suspended" in err_o
    j = kubectl_json(home, "pytorchjob", "stopme")
    assert j["spec"]["runPolicy"]["suspend"] is True
    assert not [c for c in j["status"]["conditions"] if c["type"] == "Failed"]
    wait_until(lambda: not [p for p in kubectl_json(home, "po")["items"]
                            if p["metadata"]["name"] == "stopme-master-0"], 30, "stopme's pod to go")
    assert host.poll() is None  # the other job goes on
    again = start_run(home, f)  # the stopped job resumes
    out_a, err_a = again.communicate(timeout=60)
    assert "resuming pytorchjob.kubeflow.org/stopme" in err_a
    assert again.returncode == 0 and "pytorchjob/stopme Succeeded" in out_a, err_a
    out_h, err_h = host.communicate(timeout=60)
    assert host.returncode == 0 and "pytorchjob/keep Succeeded" in out_h, err_h


def test_a_failed_run_says_why_with_the_log_tail(home, tmp_path):
    lines = "; ".join(f"echo line-{i}" for i in range(30))
    r = subprocess.run([*PHALANX, "run", str(job(tmp_path, "bad", f"{lines}; exit 3"))],
                       env=dict(os.environ, PHALANX_HOME=str(home)), capture_output=True, text=True, timeout=90)
    assert r.returncode == 1
    assert ("pytorchjob/bad failed: BackoffLimitExceeded: Job bad has failed because it has reached the specified "
            "backoff limit (backoffLimit 0 (default), restartCount 1): Master pod bad-master-0, container pytorch, "
            "exited with code 3 (Error)") in r.stderr
    tail = r.stderr.split("--- last 20 lines of bad-master-0/pytorch:\n", 1)[1].splitlines()
    assert tail[:20] == [f"line-{i}" for i in range(10, 30)]


def test_a_container_without_command_is_refused_at_admission(home, tmp_path):
    f = job(tmp_path, "noimage", "x")
    doc = yaml.safe_load(f.read_text())
    del doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    f.write_text(yaml.safe_dump(doc))
    r = subprocess.run([*PHALANX, "run", str(f)], env=dict(os.environ, PHALANX_HOME=str(home)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "spec.pytorchReplicaSpecs[Master].template.spec.containers[0].command: Required value" in r.stderr
    assert "runs the container's command on this machine, not an image" in r.stderr


def test_a_run_whose_control_plane_goes_away_exits_3(home, tmp_path):
    subprocess.run([*PHALANX, "up"], env=dict(os.environ, PHALANX_HOME=str(home)), check=True, timeout=60,
                   capture_output=True)
    run = start_run(home, job(tmp_path, "orphan", "sleep 60"))
    wait_until(lambda: any(p["metadata"]["name"] == "orphan-master-0" and p["status"].get("phase") == "Running"
                           for p in kubectl_json(home, "po")["items"]), 40, "orphan running")
    os.kill(running_endpoint(home, 0).pid, signal.SIGKILL)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 3, (out, err)
    assert "the control plane went away" in out


def test_a_run_returns_when_its_job_finished_and_its_events_are_kept(home, tmp_path):
    """A TFJob whose PS keeps running (cleanPodPolicy None) after the worker
    succeeded: `run` returns at Succeeded, says which pods it stops, and the
    job's last Events were written before the control plane stopped."""
    container = {"name": "tensorflow", "image": "tf"}
    doc = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tfrun"},
           "spec": {"tfReplicaSpecs": {
               "PS": {"replicas": 1, "restartPolicy": "Always", "template": {"spec": {"containers": [
                   {**container, "command": ["sleep", "300"]}]}}},
               "Worker": {"replicas": 1, "template": {"spec": {"containers": [
                   {**container, "command": ["sh", "-c", "sleep 1"]}]}}}}}}
    f = tmp_path / "tf.yaml"
    f.write_text(yaml.safe_dump(doc))
    t0 = time.monotonic()
    r = subprocess.run([*PHALANX, "run", str(f)], env=dict(os.environ, PHALANX_HOME=str(home)),
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 40  # not the PS's 300 s
    assert "stopping the pods of the finished job still running: tfrun-ps-0" in r.stderr
    subprocess.run([*PHALANX, "up"], env=dict(os.environ, PHALANX_HOME=str(home)), check=True, timeout=60,
                   capture_output=True)
    events = kubectl_json(home, "ev")["items"]
    reasons = {e["reason"] for e in events if e["involvedObject"].get("name") == "tfrun"}
    assert {"TFJobSucceeded", "JobTerminated"} <= reasons, reasons


def test_ctrl_c_of_the_only_run_stops_its_control_plane_and_the_job_carries_on_at_up(home, tmp_path):
    run = start_run(home, job(tmp_path, "carry", "sleep 4; echo carried"))
    wait_until(lambda: running_endpoint(home, 0) and any(
        p["metadata"]["name"] == "carry-master-0" and p["status"].get("phase") == "Running"
        for p in kubectl_json(home, "po")["items"]), 40, "carry running")
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert "pytorchjob/carry is not failed and carries on at the next" in err
    subprocess.run([*PHALANX, "up"], env=dict(os.environ, PHALANX_HOME=str(home)), check=True, timeout=60,
                   capture_output=True)
    j = wait_until(lambda: (j := kubectl_json(home, "pytorchjob", "carry")) and any(
        c["type"] in ("Succeeded", "Failed") for c in j["status"]["conditions"]) and j, 60, "carry to finish")
    assert j["status"]["conditions"][-1]["type"] == "Succeeded" and "restartCount" not in j["status"]
