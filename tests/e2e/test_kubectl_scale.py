"""Real kubectl 1.32 against `phalanx up`: `kubectl scale` of an elastic PyTorchJob through its scale
subresource, the controller making the extra worker, the Scale read raw and as a Table, the elastic bounds."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tests.e2e.test_kubectl import Plane, started_plane

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SCALE = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/x/scale"
WORKERS = "training.kubeflow.org/job-name=x,training.kubeflow.org/replica-type=worker"
JOB = {
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x", "namespace": "default"},
    "spec": {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 4},
             "pytorchReplicaSpecs": {"Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": {"spec": {
                 "containers": [{"name": "pytorch", "image": "busybox:1.37.0-glibc",
                                 "command": ["sh", "-c", "trap exit INT TERM; sleep 600 & wait"],
                                 "resources": {"limits": {"cpu": "1", "memory": "100Mi"}}}]}}}}},
}


@pytest.fixture(scope="module")
def plane(tmp_path_factory) -> Iterator[Plane]:
    yield from started_plane(tmp_path_factory.mktemp("kubectl-scale"), {"nodes": [{"name": "las1", "cpu": 16}]})


def worker_pods(plane: Plane) -> list[dict]:
    return json.loads(plane.kubectl("get", "pods", "-l", WORKERS, "-o", "json").stdout)["items"]


def running_workers(plane: Plane) -> list[str]:
    return sorted(p["metadata"]["name"] for p in worker_pods(plane) if (p.get("status") or {}).get("phase") == "Running")


def test_kubectl_scale_changes_the_workers_and_the_controller_follows(plane, tmp_path: Path):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(JOB))
    plane.kubectl("create", "-f", str(path))
    assert plane.wait(lambda: running_workers(plane) == ["x-worker-0", "x-worker-1"], timeout=60,
                      what="two running workers")

    r = plane.kubectl("scale", "pytorchjob/x", "--replicas=3")
    assert r.stdout == "pytorchjob.kubeflow.org/x scaled\n"
    got = plane.kubectl("get", "pytorchjob", "x", "-o", "jsonpath={.spec.pytorchReplicaSpecs.Worker.replicas}")
    assert got.stdout == "3"
    assert plane.wait(lambda: running_workers(plane) == ["x-worker-0", "x-worker-1", "x-worker-2"], timeout=60,
                      what="the third worker running")

    def scale() -> dict:
        return json.loads(plane.kubectl("get", "--raw", SCALE).stdout)

    current = plane.wait(lambda: (s := scale())["status"]["replicas"] == 3 and s, timeout=30,
                         what="status.replicas 3")
    job = plane.json("get", "pytorchjob", "x")
    assert current == {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {
        "name": "x", "namespace": "default", "uid": job["metadata"]["uid"],
        "resourceVersion": current["metadata"]["resourceVersion"],
        "creationTimestamp": job["metadata"]["creationTimestamp"]},
        "spec": {"replicas": 3},
        "status": {"replicas": 3, "selector": job["status"]["replicaStatuses"]["Worker"]["selector"]}}
    assert set(current["status"]["selector"].split(",")) >= set(WORKERS.split(","))

    table = plane.kubectl("get", "pytorchjob", "x", "--subresource=scale").stdout.splitlines()
    assert re.split(r"\s+", table[0]) == ["NAME", "DESIRED", "AVAILABLE", "AGE"]
    assert re.split(r"\s+", table[1])[:3] == ["x", "3", "3"]


def test_kubectl_scale_outside_the_elastic_bounds_is_refused(plane):
    r = plane.kubectl("scale", "pytorchjob/x", "--replicas=5", check=False)
    assert r.returncode == 1
    # kubectl words a 422 from its details (kind, name, causes), as for any kube-apiserver.
    assert r.stderr == ('The PyTorchJob "x" is invalid: spec.replicas: Invalid value: 5: must be between minReplicas '
                        "(1) and maxReplicas (4) of spec.elasticPolicy\n")
    assert plane.kubectl("get", "pytorchjob", "x", "-o",
                         "jsonpath={.spec.pytorchReplicaSpecs.Worker.replicas}").stdout == "3"
    r = plane.kubectl("scale", "pytorchjob/x", "--replicas=1", "--current-replicas=2", check=False)
    assert r.returncode == 1 and "Expected replicas to be 2, was 3" in r.stderr


def test_scaling_down_removes_the_last_workers(plane):
    plane.kubectl("scale", "pytorchjob/x", "--replicas=1")
    assert plane.wait(lambda: [p["metadata"]["name"] for p in worker_pods(plane)] == ["x-worker-0"], timeout=60,
                      what="one worker left")


def test_kubectl_asked_for_nothing_the_scale_does_not_serve(plane):
    lines = (plane.home / "api-access.log").read_text().splitlines()
    scale_lines = [line for line in lines if "/pytorchjobs/x/scale" in line]
    assert any('"PATCH ' in line for line in scale_lines) and any('"GET ' in line for line in scale_lines)
    assert [line for line in lines if re.search(r'" (5\d\d|404) ', line)] == []
