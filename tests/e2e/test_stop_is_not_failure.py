"""A stop is not a failure (issue 15): `phalanx down` / `up` with a job mid-run
recreates its pods and the job Succeeds with no restart counted; `phalanx up`
right after the control plane was SIGKILLed starts a new one that answers."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.e2e.test_cli_controlplane import cli, job_file, wait_cli

pytestmark = pytest.mark.e2e

PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]


def pods(env) -> dict[str, dict]:
    out = json.loads(cli(env, "get", "po", "-o", "json").stdout)
    return {p["metadata"]["name"]: p for p in out["items"]}


def job(env) -> dict:
    return json.loads(cli(env, "get", "pytorchjob", "pytest", "-o", "json").stdout)


def state(env) -> str:
    conds = job(env).get("status", {}).get("conditions") or []
    return conds[-1]["type"] if conds else ""


def test_down_and_up_with_a_job_mid_run_recreates_its_pods_and_counts_nothing(env, tmp_path):
    cli(env, "apply", "-f", str(job_file(tmp_path, 6)))
    wait_cli(env, ["get", "po"], lambda o: o.count("Running") == 4, timeout=60, what="4 pods Running")
    before = {n: p["metadata"]["uid"] for n, p in pods(env).items()}
    assert sorted(before) == PODS
    cli(env, "down", timeout=60)
    cli(env, "up")
    deadline = time.monotonic() + 90
    while state(env) not in ("Succeeded", "Failed") and time.monotonic() < deadline:
        time.sleep(0.2)
    j = job(env)
    assert state(env) == "Succeeded", json.dumps(j["status"], indent=1)
    assert "restartCount" not in j["status"]
    assert all("restarts" not in rs and "failed" not in rs for rs in j["status"]["replicaStatuses"].values())
    after = pods(env)
    assert sorted(after) == PODS  # cleanPodPolicy None keeps them
    for n, p in after.items():
        assert p["metadata"]["uid"] != before[n], f"{n} was not recreated"
        assert [c["restartCount"] for c in p["status"]["containerStatuses"]] == [0]
    events = json.loads(cli(env, "get", "ev", "-o", "json").stdout)["items"]
    stopped = {e["message"].split()[1] for e in events if e.get("reason") == "PodStoppedByShutdown"}
    assert stopped == set(PODS)
    assert not [e for e in events if e.get("reason") in ("BackoffLimitExceeded", "PyTorchJobRestarting")]


def test_up_right_after_a_sigkill_starts_a_control_plane_that_answers(env):
    home = env["PHALANX_HOME"]
    for _ in range(20):
        pid = json.loads(open(os.path.join(home, "api.json")).read())["pid"]
        os.kill(pid, signal.SIGKILL)
        r = cli(env, "up", timeout=60)
        assert "control plane running" in r.stderr, r.stderr  # not "already running"
        new = json.loads(open(os.path.join(home, "api.json")).read())["pid"]
        assert new != pid
        assert cli(env, "get", "q", "default").stdout.split()[:2] == ["NAME", "PARENT"]
