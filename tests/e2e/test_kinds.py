"""Issue 8: XGBoostJob and JAXJob examples run for real (PaddleJob's: tests/e2e/test_paddle.py).

examples/jaxjob.yaml (2 Workers join one JAX distributed runtime on CPU and
sum across it) and examples/xgboostjob.yaml (Master runs xgboost's tracker at
MASTER_ADDR:MASTER_PORT, Master and Worker train one model over Rabit) run
side by side in one embedded cluster; every process proves it used the
operator's env, and each job Succeeds. Then `phalanx run examples/<kind>.yaml`
runs each to Succeeded from a fresh PHALANX_HOME.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from phalanx.api.constants import ANNOTATION_ADDRESS, ANNOTATION_HOST_PORTS
from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings
from phalanx.node.nsswrapper import nss_wrapper_available
from phalanx.objects.errors import NotFound
from tests.scenarios.conftest import job_state, wait_until

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
_spec = importlib.util.spec_from_file_location("examples_embed", EXAMPLES / "ddp" / "embed.py")
embed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(embed)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

# manifest -> (kind, job name, replica specs field, container, program directory, program)
EXAMPLE_JOBS = {
    "jaxjob.yaml": ("JAXJob", "jax-allsum", "jaxReplicaSpecs", "jax", "jax", "allsum.py"),
    "xgboostjob.yaml": ("XGBoostJob", "xgboost-train", "xgbReplicaSpecs", "xgboost", "xgboost", "train.py"),
}
JAX_PODS = ["jax-allsum-worker-0", "jax-allsum-worker-1"]
XGB_PODS = ["xgboost-train-master-0", "xgboost-train-worker-0"]

JAX_START = re.compile(r"^process (\d+) of (\d+): coordinator (\S+):(\d+)$", re.M)
JAX_COUNT = re.compile(r"^process (\d+): process_count (\d+), ", re.M)
JAX_SUM = re.compile(r"^process (\d+): sum (\d+) \(expected \d+\), process ids \[([0-9, ]*)\]$", re.M)
XGB_START = re.compile(r"^rank (\d+) of world size (\d+): MASTER_ADDR=(\S+) MASTER_PORT=(\d+)$", re.M)
XGB_RANKS = re.compile(r"^rank (\d+): all-reduce rank sum (\d+) ", re.M)
XGB_TRAINED = re.compile(r"^rank (\d+): trained (\d+) rounds on (\d+) rows, rmse ([0-9.]+) -> ([0-9.]+)$", re.M)
XGB_HASH = re.compile(r"^rank (\d+): model sha256 ([0-9a-f]{64})$", re.M)


def load(manifest: str) -> dict:
    return yaml.safe_load((EXAMPLES / manifest).read_text())


def env_of(pod: dict) -> dict[str, dict]:
    """The default container's env entries by name (one each: the operator's
    are appended to a template that sets none)."""
    entries = pod["spec"]["containers"][0].get("env") or []
    by_name = {e["name"]: e for e in entries}
    assert len(by_name) == len(entries), f"duplicate env in {pod['metadata']['name']}: {entries}"
    return by_name


def values(pod: dict) -> dict[str, str]:
    return {n: e.get("value", "") for n, e in env_of(pod).items()}


@pytest.fixture(params=["names", "addresses"])
async def cluster(request, tmp_path, monkeypatch):
    """The embedded cluster, with names resolved by nss_wrapper or, as without
    it, the pods' addresses in the env (PHALANX_NSS_WRAPPER="" turns it off)."""
    if request.param == "names" and not nss_wrapper_available():
        pytest.skip("libnss-wrapper is not installed: names do not resolve in pods")
    if request.param == "addresses":
        monkeypatch.setenv("PHALANX_NSS_WRAPPER", "")
    cfg = ClusterConfig(nodes=[NodeConfig("las1", 16, 64 * 1024**3)],
                        agent=AgentSettings(backoff_base=0.2, backoff_cap=2.0),
                        operator=OperatorSettings(default_backoff_limit=0))
    c = EmbeddedCluster(tmp_path / "home", cfg, persist=False)
    c.addressing = request.param  # what the checks expect in the env
    await c.start()
    try:
        yield c
    finally:
        await c.stop(kill_pods=True)


@pytest.fixture
def venv_on_path(monkeypatch):
    """Pods run `python3` from PATH, from Phalanx's own environment, activated
    or not: take this interpreter's bin directory off PATH (it has jax and xgboost)."""
    missing = [m for m in ("jax", "xgboost") if importlib.util.find_spec(m) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} not installed: CI installs them with the test extra (pyproject.toml)")
        pytest.skip(f"{missing} not installed (pip install -e '.[test]')")
    # The user's shell with the venv not activated: the local runtime puts it first on the pods' PATH.
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                               if d != os.path.dirname(sys.executable)))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)


def test_manifests_embed_the_programs_verbatim():
    """What the jobs run is examples/<kind>/<program>.py, unchanged."""
    for manifest, (kind, job, field, container, directory, program) in EXAMPLE_JOBS.items():
        text = (EXAMPLES / manifest).read_text()
        assert embed.render(text, EXAMPLES / directory) == text, f"{manifest} is stale: re-embed it (see its header)"
        doc = yaml.safe_load(text)
        assert (doc["kind"], doc["metadata"]["name"]) == (kind, job)
        script = (EXAMPLES / directory / program).read_text()
        for rtype, spec in doc["spec"][field].items():
            c = spec["template"]["spec"]["containers"][0]
            assert c["name"] == container and c["command"] == ["python3", "-c"], f"{manifest} {rtype}"
            assert c["args"] == [script], f"{manifest} {rtype}"
            assert "env" not in c, f"{manifest} {rtype}: the env must come from the operator"


async def _finish(cluster, kind: str, name: str, pods: list[str], timeout: float) -> dict:
    """The job Succeeded with every pod finished, or Failed."""
    async def done():
        job = await cluster.client.get(kind, name, "default")
        if job_state(job) == "Failed":
            return job
        phases = []
        for pod_name in pods:
            try:
                phases.append((await cluster.client.get("Pod", pod_name, "default"))["status"].get("phase"))
            except NotFound:
                return None
        return job if job_state(job) == "Succeeded" and set(phases) <= {"Succeeded", "Failed"} else None

    return await wait_until(done, timeout, f"{kind} {name} finished")


async def _checked(cluster, kind: str, name: str, pods: list[str], container: str):
    """Every pod Succeeded with exit 0 and the job Succeeded; (pods, logs)."""
    job = await cluster.client.get(kind, name, "default")
    objs = {p: await cluster.client.get("Pod", p, "default") for p in pods}
    logs = {p: await cluster.log_provider.read("default", p, container) for p in pods}
    dump = "\n".join(f"--- {n}\n{t[-3000:]}" for n, t in logs.items())
    assert job_state(job) == "Succeeded", f"{name}: {job['status'].get('conditions')}\n{dump}"
    for p, pod in objs.items():
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (pod["status"]["phase"], term["exitCode"]) == ("Succeeded", 0), f"{p}\n{dump}"
    return job, objs, logs


async def _host_port(cluster, service: str, port_name: str) -> int:
    """The host port the local network gave the Service's named port."""
    svc = await cluster.client.get("Service", service, "default")
    return int(json.loads(svc["metadata"]["annotations"][ANNOTATION_HOST_PORTS])[port_name])


async def _host(cluster, service: str) -> str:
    """How env names the Service's pod: its name, or without nss_wrapper its
    address (which is that pod's IP)."""
    if cluster.addressing == "names":
        return service
    address = (await cluster.client.get("Service", service, "default"))["metadata"]["annotations"][ANNOTATION_ADDRESS]
    assert address == (await cluster.client.get("Pod", service, "default"))["status"]["podIP"]
    return address


async def _check_jax(cluster) -> None:
    _, pods, logs = await _checked(cluster, "JAXJob", "jax-allsum", JAX_PODS, "jax")
    port = await _host_port(cluster, "jax-allsum-worker-0", "jaxjob-port")
    sums = {}
    for i, p in enumerate(JAX_PODS):
        env = values(pods[p])
        assert (env["COORDINATOR_PORT"], env["NUM_PROCESSES"], env["PROCESS_ID"]) == (str(port), "2", str(i)), p
        assert env["COORDINATOR_ADDRESS"] == await _host(cluster, "jax-allsum-worker-0"), p
        assert env["PYTHONUNBUFFERED"] == "1"
        # The program used exactly that env, joined a runtime of 2, and summed across it.
        assert JAX_START.findall(logs[p]) == [(str(i), "2", env["COORDINATOR_ADDRESS"], str(port))], logs[p]
        assert JAX_COUNT.findall(logs[p]) == [(str(i), "2")], logs[p]
        found = JAX_SUM.findall(logs[p])
        assert len(found) == 1 and found[0][0] == str(i) and found[0][2] == "0, 1", logs[p]
        sums[p] = int(found[0][1])
    assert set(sums.values()) == {1 + 2}, sums  # process 0 gives 1, process 1 gives 2


async def _check_xgboost(cluster) -> None:
    job, pods, logs = await _checked(cluster, "XGBoostJob", "xgboost-train", XGB_PODS, "xgboost")
    statuses = job["status"]["replicaStatuses"]
    assert (statuses["Master"].get("succeeded"), statuses["Worker"].get("succeeded")) == (1, 1), statuses
    port = await _host_port(cluster, "xgboost-train-master-0", "xgboostjob-port")
    hashes, rmse = {}, {}
    for rank, p in enumerate(XGB_PODS):
        env = values(pods[p])
        assert (env["WORLD_SIZE"], env["RANK"], env["MASTER_PORT"]) == ("2", str(rank), str(port)), p
        assert env["MASTER_ADDR"] == await _host(cluster, "xgboost-train-master-0"), p
        assert env["WORKER_ADDRS"] == await _host(cluster, "xgboost-train-worker-0"), p
        assert int(env["WORKER_PORT"]) == await _host_port(cluster, "xgboost-train-worker-0", "xgboostjob-port")
        # The tracker listened at the injected address and port: the other rank joined through it.
        assert XGB_START.findall(logs[p]) == [(str(rank), "2", env["MASTER_ADDR"], str(port))], logs[p]
        assert XGB_RANKS.findall(logs[p]) == [(str(rank), "3")], logs[p]
        trained = XGB_TRAINED.findall(logs[p])
        assert len(trained) == 1 and trained[0][:3] == (str(rank), "8", "1000"), logs[p]
        rmse[p] = (float(trained[0][3]), float(trained[0][4]))
        found = XGB_HASH.findall(logs[p])
        assert len(found) == 1 and found[0][0] == str(rank), logs[p]
        hashes[p] = found[0][1]
    assert len(set(hashes.values())) == 1, f"the ranks trained different models: {hashes}"
    assert len(set(rmse.values())) == 1, f"the ranks disagree on the (all-reduced) error: {rmse}"
    first, last = rmse[XGB_PODS[0]]
    assert last < first / 2, rmse


async def test_jax_and_xgboost_jobs_run_and_succeed(cluster, venv_on_path):
    jobs = [("JAXJob", "jax-allsum", JAX_PODS, load("jaxjob.yaml")),
            ("XGBoostJob", "xgboost-train", XGB_PODS, load("xgboostjob.yaml"))]
    for *_, doc in jobs:
        await cluster.client.create(doc)
    deadline = time.monotonic() + 60  # both at once, on 2 cores
    for kind, name, pods, _ in jobs:
        await _finish(cluster, kind, name, pods, max(1.0, deadline - time.monotonic()))

    await _check_jax(cluster)
    await _check_xgboost(cluster)


def test_phalanx_run_runs_each_example_to_succeeded(tmp_path, venv_on_path):
    """The README's commands, as a user types them: each starts an embedded
    control plane in a fresh PHALANX_HOME, streams rows, exits 0 on Succeeded."""
    env = dict(os.environ, PHALANX_HOME=str(tmp_path / "home"))
    for manifest, (kind, job, *_) in EXAMPLE_JOBS.items():
        r = subprocess.run([sys.executable, "-m", "phalanx.cli.main", "run", str(EXAMPLES / manifest),
                            "--timeout", "60"], env=env, capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, f"phalanx run {manifest} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        lines = r.stdout.strip().splitlines()
        assert lines[-1] == f"{kind.lower()}/{job} Succeeded", r.stdout
        assert f"{kind.lower()}.kubeflow.org/{job} created" in lines[0], r.stdout
