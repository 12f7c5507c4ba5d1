"""A preemption is not a failure (issue 18): a worker the scheduler evicts (DisruptionTarget
PreemptionByScheduler written to its status, then a graceful delete, done here by the test
through the API) is recreated under the same name; the job shows Restarting naming the
preemption while the new pod waits, never counts a restart (backoffLimit 0, restartPolicy
Never), and Succeeds."""
from __future__ import annotations

import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_cli_controlplane import cli, wait_cli

pytestmark = pytest.mark.e2e

RECLAIM = 'volcano: reclaiming for queue "team-b" (below its deserved share): default/b-worker-0 of job default/b'
WAIT_FOR_FILE = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\n"


def job_doc(go: Path) -> dict:
    def replica() -> dict:
        return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "pytorch", "image": "python", "command": [sys.executable, "-c", WAIT_FOR_FILE],
                            "args": [str(go)], "resources": {"limits": {"cpu": "1", "memory": "100Mi"}}}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt", "namespace": "default"},
            "spec": {"runPolicy": {"backoffLimit": 0},
                     "pytorchReplicaSpecs": {"Master": replica(), "Worker": replica()}}}


def api_call(env, method: str, path: str, body: dict | None = None) -> dict:
    api = json.loads((Path(env["PHALANX_HOME"]) / "api.json").read_text())
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(api["url"] + path, data=data, method=method, headers={
        "Authorization": f"Bearer {api['token']}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10, context=ssl.create_default_context(cafile=api["ca"])) as r:
        return json.loads(r.read().decode())


def mark_preempted(env, pod: str) -> None:
    """The scheduler's first eviction step: the DisruptionTarget condition, by a status update."""
    path = f"/api/v1/namespaces/default/pods/{pod}"
    deadline = time.monotonic() + 20
    while True:
        p = api_call(env, "GET", path)
        p["status"].setdefault("conditions", []).append({
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": RECLAIM,
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        try:
            api_call(env, "PUT", path + "/status", p)
            return
        except urllib.error.HTTPError as e:
            if e.code != 409 or time.monotonic() > deadline:  # the node agent wrote in between: again
                raise


def job(env) -> dict:
    return json.loads(cli(env, "get", "pytorchjob", "pt", "-o", "json").stdout)


def wait_job(env, predicate, timeout: float, what: str) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        j = job(env)
        if predicate(j):
            return j
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {json.dumps(j.get('status'), indent=1)}")
        time.sleep(0.1)


def last_condition(j: dict) -> dict:
    conds = j.get("status", {}).get("conditions") or [{}]
    return conds[-1]


def test_a_preempted_worker_is_recreated_and_the_job_succeeds_without_a_restart(env, tmp_path):
    go = tmp_path / "go"
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(job_doc(go)))
    cli(env, "apply", "-f", str(f))
    wait_cli(env, ["get", "po"], lambda o: o.count("Running") == 2, timeout=60, what="2 pods Running")
    old_uid = api_call(env, "GET", "/api/v1/namespaces/default/pods/pt-worker-0")["metadata"]["uid"]
    # The queue now holds only the running master: the recreated worker waits for the gang.
    cli(env, "patch", "q", "default", "-p", '{"spec":{"capability":{"cpu":1}}}')
    mark_preempted(env, "pt-worker-0")
    cli(env, "delete", "po", "pt-worker-0")
    msg = f"PyTorchJob default/pt is restarting because 1 pod was preempted: {RECLAIM}"

    def recreated_and_waiting(j: dict) -> bool:
        c = last_condition(j)
        return (c.get("type"), c.get("status"), c.get("reason"), c.get("message")) == (
            "Restarting", "True", "PyTorchJobRestarting", msg)
    j = wait_job(env, recreated_and_waiting, 30, "Restarting naming the preemption")
    assert not [c for c in j["status"]["conditions"] if c["type"] == "Running" and c["status"] == "True"]
    new = wait_cli(env, ["get", "po", "pt-worker-0", "-o", "json"],
                   lambda o: json.loads(o)["metadata"]["uid"] != old_uid, timeout=30, what="pt-worker-0 recreated")
    assert json.loads(new)["status"]["phase"] == "Pending"
    assert "restartCount" not in j["status"]

    cli(env, "patch", "q", "default", "-p", '{"spec":{"capability":{"cpu":8}}}')
    wait_job(env, lambda j: last_condition(j).get("type") == "Running", 60, "Running again")
    go.write_text("")
    j = wait_job(env, lambda j: last_condition(j).get("type") in ("Succeeded", "Failed"), 60, "the job's end")
    assert last_condition(j)["type"] == "Succeeded", json.dumps(j["status"], indent=1)
    assert "restartCount" not in j["status"]
    assert all("restarts" not in rs and "failed" not in rs for rs in j["status"]["replicaStatuses"].values())
    events = json.loads(cli(env, "get", "ev", "-o", "json").stdout)["items"]
    restarting = [e for e in events if e.get("reason") == "PyTorchJobRestarting"]
    assert [(e["type"], e["message"], e["involvedObject"]["name"]) for e in restarting] == [("Warning", msg, "pt")]
