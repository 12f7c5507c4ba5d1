"""docs/SEMANTICS.md S5 on the local runtime: logs of deleted pods stay readable until the job
itself is deleted. A PyTorchJob whose worker fails under backoffLimit 0 ends
Failed with every pod deleted; the master's and the worker's logs are still
served by pod name and by job (provider, HTTP API and `phalanx logs`), and go
with the job."""
from __future__ import annotations

import asyncio
import os
import sys

import pytest

from phalanx.cli.controlplane import Endpoint, write_endpoint
from phalanx.client.http import HttpClient
from phalanx.node.podrecords import PodRecords
from phalanx.objects.errors import NotFound
from phalanx.server.app import make_app, serve
from tests.scenarios.conftest import job_state, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

TOKEN = "e2e-token"


def job_doc() -> dict:
    def replica(script: str) -> dict:
        return {"replicas": 1, "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "busybox",
                                                      "command": ["sh", "-c", script],
                                                      "resources": {"limits": {"cpu": "1", "memory": "100Mi"}}}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "pytest", "namespace": "default"},
            "spec": {"runPolicy": {"backoffLimit": 0},
                     "pytorchReplicaSpecs": {
                         "Master": replica("echo master says hello; trap exit TERM; sleep 30 & wait"),
                         # The worker fails the job; the master's container must have started by
                         # then, or its pod is deleted with nothing to show (the worker's init check
                         # passes once the master's pod has an address, before its container runs).
                         "Worker": replica("echo worker says goodbye; sleep 2; exit 1")}}}


async def phalanx(home, *args: str) -> tuple[int, str, str]:
    """The CLI as a user runs it (a subprocess, so the API in this loop keeps serving)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "phalanx.cli.main", *args, env=dict(os.environ, PHALANX_HOME=str(home)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode, out.decode(), err.decode()


async def test_logs_of_a_failed_jobs_deleted_pods_until_the_job_is_deleted(cluster):
    c = cluster.client
    created = await c.create(job_doc())
    job_uid = created["metadata"]["uid"]

    async def failed_and_empty():
        j = await c.get("PyTorchJob", "pytest", "default")
        pods = [p for p in (await c.list("Pod", "default")).items
                if any(r.get("uid") == job_uid for r in p["metadata"].get("ownerReferences") or [])]
        return job_state(j) == "Failed" and not pods

    await wait_until(failed_and_empty, 30, "the job Failed with every pod deleted")
    # The runtime recorded each pod next to its logs: owner, containers, start and finish.
    records = PodRecords(cluster.home)
    await wait_until(lambda: all(r.finished_at for r in records.scan("default")), 10, "pods' finish noted")
    recs = records.scan("default")
    assert sorted(r.name for r in recs) == ["pytest-master-0", "pytest-worker-0"]
    assert all(r.job_owner == {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytest",
                               "uid": job_uid} for r in recs)
    worker = next(r for r in recs if r.name == "pytest-worker-0")
    assert (worker.init_containers, worker.containers) == (["init-pytorch"], ["pytorch"])
    logs = cluster.log_provider
    assert "master says hello\n" in await logs.read("default", "pytest-master-0")
    assert "worker says goodbye\n" in await logs.read("default", "pytest-worker-0", "pytorch")
    text = "".join([x async for x in logs.job_logs("default", "PyTorchJob", "pytest")])
    assert "==> pytest-master-0/pytorch (instance " in text and "master says hello" in text
    assert "==> pytest-worker-0/pytorch (instance " in text and "worker says goodbye" in text
    assert ", restart 0, pod deleted) <==" in text

    # The same through the HTTP API and the CLI.
    runner, url = await serve(make_app(c, TOKEN, log_provider=logs))
    write_endpoint(cluster.home, Endpoint(url, TOKEN, os.getpid()))
    http = HttpClient(url, TOKEN)
    try:
        body = b"".join([x async for x in http.logs("default", "pytest-worker-0", container="pytorch")])
        assert b"worker says goodbye\n" in body
        rc, out, err = await phalanx(cluster.home, "logs", "pytest-master-0")
        assert (rc, err) == (0, "") and "master says hello\n" in out
        rc, out, err = await phalanx(cluster.home, "logs", "pytorchjob/pytest", "-c", "pytorch", "--tail", "1")
        assert rc == 0, err
        assert out.count("==> ") >= 2 and "master says hello" in out and "worker says goodbye" in out
        rc, _, err = await phalanx(cluster.home, "logs", "pytorchjob/pytest", "--previous")
        assert rc == 2 and "--previous cannot be used with a job" in err

        # Deleting the job takes its logs with it.
        await c.delete("PyTorchJob", "pytest", "default")

        async def logs_gone():
            try:
                await logs.read("default", "pytest-master-0")
            except NotFound:
                pass
            else:
                return False
            return not list((cluster.home / "pods").glob("default_pytest-*"))

        await wait_until(logs_gone, 10, "the job's logs removed with it")
        rc, _, err = await phalanx(cluster.home, "logs", "pytest-worker-0")
        assert rc == 1 and 'pods "pytest-worker-0" not found' in err
    finally:
        await http.close()
        await runner.cleanup()
