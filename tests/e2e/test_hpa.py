"""Autoscaling on one machine (issue 20 point 3): an elastic PyTorchJob with a cpu Utilization metric (50%,
minReplicas 1, maxReplicas 3) whose worker burns a core against a 500m request gets its HPA from the
operator; the embedded cluster's HPA controller measures the worker's process and scales the job's Worker
replicas up, with kube-controller-manager's event; `kubectl get hpa` prints kube-apiserver's columns; the
HPA goes with its job."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_cli_controlplane import cli
from tests.e2e.test_elastic import KUBECTL, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

JOB = {
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "burn", "namespace": "default"},
    "spec": {
        "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                        "averageUtilization": 50}}}]},
        "pytorchReplicaSpecs": {"Worker": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {
            "containers": [{"name": "pytorch", "image": "python:3.12", "command": ["python3", "-c", "while True: pass"],
                            "resources": {"requests": {"cpu": "500m"}}}]}}}},
    },
}
REASON = "cpu resource utilization (percentage of request) above target"


@pytest.fixture
def hpa_env(tmp_path):
    """`phalanx up` with the HPA controller syncing every 0.5 s."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({
        "nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}],
        "agent": {"backoffBase": 0.2, "backoffCap": 2},
        "autoscaler": {"syncPeriod": 0.5},
    }))
    e = dict(os.environ, PHALANX_HOME=str(home))
    assert "control plane running" in cli(e, "up").stderr
    yield e
    cli(e, "down", check=False, timeout=60)


def kubectl(env, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    kubeconfig = Path(env["PHALANX_HOME"]) / "kubeconfig"
    r = subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 or not check, f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}"
    return r


def get_json(env, *what: str) -> dict | None:
    r = kubectl(env, "get", *what, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def test_s15_a_cpu_bound_worker_scales_its_elastic_job_up(hpa_env, tmp_path):
    env = hpa_env
    job = tmp_path / "burn.yaml"
    job.write_text(yaml.safe_dump(JOB))
    kubectl(env, "apply", "-f", str(job))
    try:
        # The operator's HPA, controlled by the job, as the original makes it; kubectl's columns.
        hpa = wait_for(lambda: get_json(env, "hpa", "burn"), 30, "the job's HPA")
        owner = hpa["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("PyTorchJob", "burn", True)
        assert hpa["spec"]["scaleTargetRef"] == {"kind": "PyTorchJob", "name": "burn", "apiVersion": "kubeflow.org/v1"}
        header, line = kubectl(env, "get", "hpa", "burn").stdout.splitlines()[:2]
        assert header.split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
        assert line.split()[:2] == ["burn", "PyTorchJob/burn"] and line.split()[4:6] == ["1", "3"]

        # The worker burns a core against 500m: 200% of its request against 50%, so the HPA scales up.
        def scaled_up():
            j = get_json(env, "pytorchjob", "burn")
            return j if j and j["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] > 1 else None
        scaled = wait_for(scaled_up, 120, "the Worker replicas scaled up")
        size = scaled["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
        assert 2 <= size <= 3

        events = get_json(env, "events", "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler")
        rescales = [e for e in (events or {}).get("items", []) if e["reason"] == "SuccessfulRescale"]
        assert rescales and rescales[0]["message"] == f"New size: {size}; reason: {REASON}", rescales
        assert rescales[0]["source"]["component"] == "horizontal-pod-autoscaler"
        status = get_json(env, "hpa", "burn")["status"]
        assert status["desiredReplicas"] >= 2 and status["lastScaleTime"]
        measured = status["currentMetrics"][0]["resource"]["current"]["averageUtilization"]
        assert measured > 55, status
        conds = {c["type"]: c for c in status["conditions"]}
        assert conds["ScalingActive"]["status"] == "True" and conds["ScalingActive"]["reason"] == "ValidMetricFound"
        assert conds["AbleToScale"]["status"] == "True"

        # The job controller follows the new Worker replicas with pods.
        wait_for(lambda: len((get_json(env, "pods", "-l", "training.kubeflow.org/job-name=burn") or {})
                             .get("items", [])) >= 2, 30, "a second worker pod")
    finally:
        kubectl(env, "delete", "pytorchjob", "burn", "--wait=false", check=False)
    # The HPA goes with its job (ownerReference, garbage collector).
    wait_for(lambda: get_json(env, "hpa", "burn") is None, 30, "the HPA deleted with its job")
    assert cli(env, "get", "hpa").stdout.strip() in ("", "No resources found in default namespace.")
