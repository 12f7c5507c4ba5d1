"""The CLI against a background control plane (`phalanx up`), as a user types it:
P2 through the CLI — queue capability blocks the gang, `describe` says why,
raising it with `patch` lets the same job run — then `logs`, `get`, `down`."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PHALANX = [sys.executable, "-m", "phalanx.cli.main"]


def cli(env, *args, check=True, timeout=30):
    r = subprocess.run([*PHALANX, *args], env=env, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"phalanx {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def wait_cli(env, args, predicate, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cli(env, *args, check=False)
        if last.returncode == 0 and predicate(last.stdout):
            return last.stdout
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last output:\n{last.stdout}\n{last.stderr}")


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({
        "nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}],
        "agent": {"backoffBase": 0.2, "backoffCap": 2},
    }))
    e = dict(os.environ, PHALANX_HOME=str(home))
    r = cli(e, "up")
    assert "control plane running" in r.stderr
    assert r.stdout == f"export KUBECONFIG={home / 'kubeconfig'}\n"
    yield e
    cli(e, "down", check=False, timeout=60)


def job_file(tmp_path: Path, seconds: float) -> Path:
    doc = yaml.safe_load((ROOT / "examples" / "pytorchjob.yaml").read_text())
    for spec in doc["spec"]["pytorchReplicaSpecs"].values():
        c = spec["template"]["spec"]["containers"][0]
        c["command"] = [p.replace("sleep 30s", f"sleep {seconds}") for p in c["command"]]
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


def test_p2_through_the_cli(env, tmp_path):
    api = json.loads((Path(env["PHALANX_HOME"]) / "api.json").read_text())
    assert api["url"].startswith("https://127.0.0.1:")
    assert oct((Path(env["PHALANX_HOME"]) / "api.json").stat().st_mode & 0o777) == "0o600"
    cli(env, "patch", "q", "default", "-p", '{"spec":{"capability":{"cpu":2}}}')
    r = cli(env, "apply", "-f", str(job_file(tmp_path, 1)))
    assert r.stdout.strip() == "pytorchjob.kubeflow.org/pytest created"
    text = wait_cli(env, ["describe", "pytorchjob", "pytest"], lambda out: 'queue "default"' in out,
                    10, "describe to say why the job waits")
    assert "cpu" in text
    pods = json.loads(cli(env, "get", "po", "-o", "json").stdout)["items"]
    assert all(not p["spec"].get("nodeName") for p in pods)
    out = cli(env, "get", "pg", "-o", "wide").stdout
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE", "QUEUE"]
    # A preemption as the scheduler records it on the PodGroup: describe of the PodGroup and of
    # the job (through its PodGroup) say when and by whom.
    pg = json.loads(cli(env, "get", "pg", "pytest", "-o", "json").stdout)
    event = tmp_path / "event.yaml"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    event.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "pytest.preempted", "namespace": "default"},
        "involvedObject": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "name": "pytest",
                           "namespace": "default", "uid": pg["metadata"]["uid"]},
        "type": "Warning", "reason": "Preempted", "message": "evicted for job team-b/b (queue team-b)",
        "count": 1, "firstTimestamp": now, "lastTimestamp": now, "source": {"component": "volcano"}}))
    cli(env, "apply", "-f", str(event))
    for kind in ("pg", "pytorchjob"):
        text = cli(env, "describe", kind, "pytest").stdout
        assert re.search(r"^Last Preempted:\s+\d+s ago: evicted for job team-b/b \(queue team-b\)$", text, re.M), text
    # Raise the capability: the same job runs, no resubmission.
    cli(env, "patch", "q", "default", "-p", '{"spec":{"capability":{"cpu":8}}}')
    wait_cli(env, ["get", "pytorchjob", "pytest"], lambda out: "Succeeded" in out, 30, "job Succeeded")
    out = cli(env, "get", "po", "-o", "wide").stdout.splitlines()
    assert out[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert any(line.startswith("pytest-master-0") and "Completed" in line and "las1" in line for line in out)
    r = cli(env, "get", "pytorchjob", "missing", check=False)
    assert r.returncode == 1 and 'pytorchjobs.kubeflow.org "missing" not found' in r.stderr
    r = cli(env, "delete", "pytorchjob", "pytest")
    assert r.stdout.strip() == 'pytorchjob.kubeflow.org "pytest" deleted'
    wait_cli(env, ["get", "po", "-o", "json"], lambda out: json.loads(out)["items"] == [], 15, "pods garbage-collected")


def test_logs_and_unauthenticated_access(env, tmp_path):
    doc = yaml.safe_load((ROOT / "examples" / "pytorchjob.yaml").read_text())
    doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"] = [
        "sh", "-c", "echo hello from $RANK"]
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"] = ["true"]
    f = tmp_path / "j.yaml"
    f.write_text(yaml.safe_dump(doc))
    cli(env, "apply", "-f", str(f))
    wait_cli(env, ["get", "pytorchjob", "pytest"], lambda out: "Succeeded" in out, 30, "job Succeeded")
    assert cli(env, "logs", "pytest-master-0").stdout == "hello from 0\n"
    # The API refuses requests without the token (system:anonymous is granted nothing: golden 62).
    import ssl
    import urllib.error
    import urllib.request
    api = json.loads((Path(env["PHALANX_HOME"]) / "api.json").read_text())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(api["url"] + "/api/v1/namespaces/default/pods", timeout=5,
                               context=ssl.create_default_context(cafile=api["ca"]))
    assert e.value.code == 403
    with pytest.raises(urllib.error.URLError):  # and it is TLS with our own CA, not the system's
        urllib.request.urlopen(api["url"] + "/version", timeout=5)


def test_edit_and_state_survives_a_restart(env):
    # `edit` through $EDITOR (a sed script here), then `down` / `up`: the store reloads it.
    e = dict(env, EDITOR="sed -i s/weight:\\ 1/weight:\\ 3/")
    r = cli(e, "edit", "q", "default")
    assert r.stdout.strip() == "queue.scheduling.volcano.sh/default edited"
    assert json.loads(cli(env, "get", "q", "default", "-o", "json").stdout)["spec"]["weight"] == 3
    cli(env, "down", timeout=60)
    cli(env, "up")
    assert json.loads(cli(env, "get", "q", "default", "-o", "json").stdout)["spec"]["weight"] == 3
    table = cli(env, "get", "q").stdout.splitlines()
    assert table[0].split() == ["NAME", "PARENT"] and table[1].split() == ["default", "root"]
    wide = cli(env, "get", "q", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "PARENT", "WEIGHT", "RECLAIMABLE", "GUARANTEE", "DESERVED", "ALLOCATED",
                               "RECLAIMING"]
    assert wide[1].split()[:5] == ["default", "root", "3", "true", "<none>"]
    text = cli(env, "describe", "q", "default").stdout
    assert re.search(r"^Sharing:\n  Weight:\s+3\n  Reclaimable:\s+true\n", text, re.M), text
