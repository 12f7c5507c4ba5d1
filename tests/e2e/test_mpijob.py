"""Issue 8: examples/mpijob.yaml runs for real on the embedded runtime.

The launcher's mpirun (the system's Open MPI) starts 2 ranks through the rsh
agent the operator wrote into the job's ConfigMap (kubexec.sh -> `phalanx
exec`), one in each worker pod; they all-reduce with mpi4py and check their
world. The job Succeeds, the launcher's log shows each rank in its own worker
pod, and `phalanx run examples/mpijob.yaml` does the same from a fresh home.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from phalanx.objects.errors import NotFound
from tests.scenarios.conftest import job_state, wait_until

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
_spec = importlib.util.spec_from_file_location("examples_embed", EXAMPLES / "ddp" / "embed.py")
embed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(embed)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

JOB = "mpi-allreduce"
LAUNCHER = f"{JOB}-launcher"
WORKERS = [f"{JOB}-worker-0", f"{JOB}-worker-1"]
RANK_LINE = re.compile(r"^rank (\d+) of world size (\d+) in pod (\S+) \(processor (\S+)\)$", re.M)
SUM_LINE = re.compile(r"^rank (\d+): all-reduce sum (\S+) \(expected (\S+)\)$", re.M)


def load() -> dict:
    return yaml.safe_load((EXAMPLES / "mpijob.yaml").read_text())


@pytest.fixture
def mpi_on_path(monkeypatch):
    """Pods run `python3` (with mpi4py) from Phalanx's own environment, activated
    or not: take this interpreter's bin directory off PATH; `mpirun` is OpenMPI's."""
    missing = [m for m, ok in (("mpi4py", importlib.util.find_spec("mpi4py") is not None),
                               ("mpirun (OpenMPI)", shutil.which("mpirun") is not None),
                               ("orted (OpenMPI)", shutil.which("orted") is not None)) if not ok]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} not installed: CI installs them (make system-deps, the test extra)")
        pytest.skip(f"{missing} not installed (make system-deps; pip install -e '.[test]')")
    # The user's shell with the venv not activated: the local runtime puts it first on the pods' PATH.
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                               if d != os.path.dirname(sys.executable)))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)


def test_manifest_embeds_the_program_verbatim():
    text = (EXAMPLES / "mpijob.yaml").read_text()
    assert embed.render(text, EXAMPLES / "mpi") == text, "examples/mpijob.yaml is stale: re-embed it (see its header)"
    doc = yaml.safe_load(text)
    launcher = doc["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"][-2:] == ["python3", "-c"]
    assert launcher["args"] == [(EXAMPLES / "mpi" / "allreduce.py").read_text(), "2"]
    worker = doc["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2 and "command" not in worker["template"]["spec"]["containers"][0]


async def _finish(cluster, timeout: float) -> dict:
    """The job Succeeded (or Failed) with the launcher finished."""
    async def done():
        job = await cluster.client.get("MPIJob", JOB, "default")
        if job_state(job) == "Failed":
            return job
        try:
            launcher = await cluster.client.get("Pod", LAUNCHER, "default")
        except NotFound:
            return None
        finished = launcher.get("status", {}).get("phase") in ("Succeeded", "Failed")
        return job if job_state(job) == "Succeeded" and finished else None

    return await wait_until(done, timeout, f"MPIJob {JOB} finished")


async def test_mpijob_ranks_run_in_the_worker_pods_and_all_reduce(cluster, mpi_on_path):
    await cluster.client.create(load())
    job = await _finish(cluster, 40)
    log = await cluster.log_provider.read("default", LAUNCHER, "mpi")
    assert job_state(job) == "Succeeded", f"{job['status'].get('conditions')}\n--- launcher log\n{log[-4000:]}"
    assert [c["type"] for c in job["status"]["conditions"]] == ["Created", "Running", "Succeeded"]
    assert job["status"]["completionTime"]

    launcher = await cluster.client.get("Pod", LAUNCHER, "default")
    term = launcher["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (launcher["status"]["phase"], term["exitCode"]) == ("Succeeded", 0), log

    # Every rank ran in its own worker pod (HOSTNAME is the pod's; the processor
    # name is the pod's host name), never in the launcher.
    ranks = RANK_LINE.findall(log)
    assert sorted((int(r), int(n)) for r, n, _, _ in ranks) == [(0, 2), (1, 2)], log
    assert all(pod == processor for _, _, pod, processor in ranks), log
    assert sorted(pod for _, _, pod, _ in ranks) == WORKERS, log
    sums = SUM_LINE.findall(log)
    assert sorted(sums) == [("0", "3", "3"), ("1", "3", "3")], log
    assert f"ranks ran in pods {WORKERS}" in log or f"ranks ran in pods {WORKERS[::-1]}" in log, log
    assert "world size 2 OK" in log, log
    # What the operator wired: the ConfigMap (no Services), the launcher's env and its wait.
    # The ranks' HOSTNAME is their worker's: mpirun's daemons went through kubexec.sh,
    # which runs `phalanx exec` (its `set -x` trace is in the log, two of them interleaved).
    cm = await cluster.client.get("ConfigMap", f"{JOB}-config", "default")
    assert cm["data"]["hostfile"] == "".join(f"{w} slots=1\n" for w in WORKERS)
    assert cm["data"]["kubexec.sh"].splitlines()[-1] == (
        f"{sys.executable} -m phalanx.cli.execcmd --home {cluster.home.absolute()} -n default ${{POD_NAME}} "
        '-- /bin/sh -c "$*"')
    # The two traces interleave (dash writes "+ " apart from the command), so look for each pod name.
    assert all(f"POD_NAME={w}" in log for w in WORKERS) and "orted" in log, log
    assert cm["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    env = {e["name"]: e.get("value") for e in launcher["spec"]["containers"][0]["env"]}
    assert env["OMPI_MCA_plm_rsh_agent"] == "$(PHALANX_ROOT)/etc/mpi/kubexec.sh"
    assert env["OMPI_MCA_btl_tcp_if_include"] == env["OMPI_MCA_oob_tcp_if_include"] == "lo"
    wait = launcher["status"]["initContainerStatuses"][0]
    assert (wait["name"], wait["state"]["terminated"]["exitCode"]) == ("kubectl-delivery", 0)
    services = await cluster.client.list("Service", "default")
    assert [s for s in services.items if s["metadata"]["name"].startswith(JOB)] == []

    # cleanPodPolicy Running: the sleeping workers are deleted once the launcher is done.
    async def workers_gone():
        pods = (await cluster.client.list("Pod", "default")).items
        return not [p for p in pods if p["metadata"]["name"] in WORKERS]
    await wait_until(workers_gone, 20, "the workers deleted")


def test_phalanx_run_runs_the_example_to_succeeded(tmp_path, mpi_on_path):
    """The README's command, as a user types it: a fresh PHALANX_HOME, an embedded
    control plane, rows streamed, exit 0 on Succeeded once every pod has ended."""
    env = dict(os.environ, PHALANX_HOME=str(tmp_path / "home"))
    r = subprocess.run([sys.executable, "-m", "phalanx", "run", str(EXAMPLES / "mpijob.yaml"), "--timeout", "60"],
                       env=env, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, f"phalanx run -> {r.returncode}\n{r.stdout}\n{r.stderr}"
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith(f"mpijob.kubeflow.org/{JOB} created"), r.stdout
    assert lines[-1] == f"mpijob/{JOB} Succeeded", r.stdout
