"""Issue 22: PaddleJob's examples run real PaddlePaddle on CPU through `python -m paddle.distributed.launch`.

examples/paddlejob.yaml (collective mode: 2 Workers all-reduce a tensor and
train one model with DataParallel) and examples/paddlejob-ps.yaml (PS mode:
Master + Worker, each pod a parameter server and a trainer) run side by side
in one embedded cluster, with names resolved by nss_wrapper (and POD_IP taken
out: launch finds its pod's IP from its hostname, as on a cluster) or with the
pods' addresses in the env. Every pod gets exactly the operator's env, launch
reads it (job id, node count, PADDLE_MASTER as the runtime expanded it, the PS
counts), each rank prints its result and all ranks agree, and both jobs
Succeed. Then `phalanx run` runs each manifest to Succeeded.
"""
from __future__ import annotations

import copy
import importlib.util
import os
import re
import subprocess
import sys
import time

import pytest
import yaml

from tests.e2e import test_kinds
from tests.e2e.test_kinds import EXAMPLES, _checked, _finish, _host, _host_port, embed, env_of, load, values

cluster = test_kinds.cluster  # the fixture: names resolved by nss_wrapper, or addresses in the env

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

# manifest -> (job name, program in examples/paddle, pods: the rendezvous pod first)
MANIFESTS = {
    "paddlejob.yaml": ("paddle-collective", "train.py", ["paddle-collective-worker-0", "paddle-collective-worker-1"]),
    "paddlejob-ps.yaml": ("paddle-ps", "train_ps.py", ["paddle-ps-master-0", "paddle-ps-worker-0"]),
}
LAUNCH = ["python3", "-m", "paddle.distributed.launch", "python3", "-c"]
POD_IP = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
DUMMY = {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
COMMON = {"PYTHONUNBUFFERED", "PADDLE_JOB_ID", "PADDLE_NNODES", "PADDLE_MASTER"}
FLOAT = r"([0-9]+\.[0-9]+)"

RANK = re.compile(r"^rank (\d+) of (\d+): job (\S+), endpoint (\S+), trainers (\S+)$", re.M)
RANK_SUM = re.compile(rf"^rank (\d+): all_reduce sum {FLOAT} \(expected {FLOAT}\)$", re.M)
RANK_TRAINED = re.compile(rf"^rank (\d+): trained (\d+) steps, mean loss {FLOAT} -> {FLOAT}$", re.M)
RANK_MODEL = re.compile(r"^rank (\d+): model sha256 ([0-9a-f]{64}), ranks agree: (True|False)$", re.M)
SERVER = re.compile(r"^server (\d+) of (\d+): job (\S+), endpoint (\S+), servers (\S+)$", re.M)
SERVER_STOPPED = re.compile(r"^server (\d+): stopped$", re.M)
# A trainer's lines as its pod's server repeats them.
TRAINER = re.compile(r"^server (\d+): workerlog\.0: trainer (\d+) of (\d+): job (\S+), servers (\S+)$", re.M)
TRAINER_SUM = re.compile(rf"^server \d+: workerlog\.0: trainer (\d+): all_reduce sum {FLOAT} \(expected {FLOAT}\)$",
                         re.M)
TRAINER_TRAINED = re.compile(
    rf"^server \d+: workerlog\.0: trainer (\d+): trained (\d+) steps, mean loss {FLOAT} -> {FLOAT}$", re.M)


@pytest.fixture
def paddle_on_path(monkeypatch):
    """Pods run `python3` from PATH, from Phalanx's own environment (it has
    paddlepaddle): take this interpreter's bin directory off PATH, as in a
    shell with the venv not activated (the local runtime puts it first)."""
    if importlib.util.find_spec("paddle") is None:
        if os.environ.get("CI"):
            pytest.fail("paddlepaddle not installed: CI installs it with the test extra (pyproject.toml)")
        pytest.skip("paddlepaddle not installed (pip install -e '.[test]')")
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                               if d != os.path.dirname(sys.executable)))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)


def test_manifests_embed_the_programs_verbatim():
    """What the jobs run is examples/paddle/<program>.py, unchanged, under launch;
    the only env a manifest sets is POD_IP (launch's --host)."""
    for manifest, (job, program, _) in MANIFESTS.items():
        text = (EXAMPLES / manifest).read_text()
        assert embed.render(text, EXAMPLES / "paddle") == text, f"{manifest} is stale: re-embed it (see its header)"
        doc = yaml.safe_load(text)
        assert (doc["kind"], doc["metadata"]["name"]) == ("PaddleJob", job)
        script = (EXAMPLES / "paddle" / program).read_text()
        specs = doc["spec"]["paddleReplicaSpecs"]
        assert sorted(specs) == (["Master", "Worker"] if manifest.endswith("-ps.yaml") else ["Worker"])
        for rtype, spec in specs.items():
            c = spec["template"]["spec"]["containers"][0]
            assert c["name"] == "paddle" and c["command"] == LAUNCH, f"{manifest} {rtype}"
            assert c["args"] == [script], f"{manifest} {rtype}"
            assert c["env"] == [POD_IP], f"{manifest} {rtype}: the rest of the env must come from the operator"


def without_pod_ip(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    for spec in doc["spec"]["paddleReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0].pop("env")
    return doc


async def _check_env(cluster, name: str, pods: dict, logs: dict, order: list[str], ps: bool) -> None:
    """Exactly the operator's env (and POD_IP when kept), and launch read it."""
    rendezvous = order[0]
    port = await _host_port(cluster, rendezvous, "master")
    kept = cluster.addressing == "addresses"
    for p in order:
        env, v = env_of(pods[p]), values(pods[p])
        assert (v["PYTHONUNBUFFERED"], v["PADDLE_JOB_ID"], v["PADDLE_NNODES"]) == ("1", name, "2"), p
        count = ("PADDLE_SERVER_NUM" if "-master-" in p else "PADDLE_TRAINER_NUM") if ps else None
        expected = COMMON | ({count} if count else set()) | ({"POD_IP"} if kept else set())
        if p == rendezvous:
            assert env["POD_IP_DUMMY"] == DUMMY, p
            assert v["PADDLE_MASTER"] == f"$(POD_IP_DUMMY):{port}", p
            assert set(env) == expected | {"POD_IP_DUMMY"}, p
            master = f"{pods[p]['status']['podIP']}:{port}"  # the runtime expanded it
        else:
            assert set(env) == expected, p
            master = f"{await _host(cluster, rendezvous)}:{port}"
            assert v["PADDLE_MASTER"] == master, p
        assert f"args master will be overridden by env: PADDLE_MASTER value: {master}\n" in logs[p], logs[p][-3000:]
        assert f"Job: {name}, mode {'ps' if ps else 'collective'}, replicas 2[2:2]" in logs[p], logs[p][-3000:]
        if count:
            assert v[count] == "1", p
            arg = "server_num" if count == "PADDLE_SERVER_NUM" else "trainer_num"
            assert f"args {arg} will be overridden by env: {count} value: 1\n" in logs[p], logs[p][-3000:]


def _host_of(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[0]


async def _check_collective(cluster) -> None:
    name, _, order = MANIFESTS["paddlejob.yaml"]
    _, pods, logs = await _checked(cluster, "PaddleJob", name, order, "paddle")
    await _check_env(cluster, name, pods, logs, order, ps=False)
    endpoints, losses, models = [], {}, {}
    for rank, p in enumerate(order):  # worker 0 serves the rendezvous: launch makes it rank 0
        log = logs[p]
        found = RANK.findall(log)
        assert len(found) == 1 and found[0][:3] == (str(rank), "2", name), log[-3000:]
        endpoint, trainers = found[0][3], found[0][4]
        assert _host_of(endpoint) == pods[p]["status"]["podIP"], (p, endpoint)  # launch found its pod's IP
        endpoints.append((endpoint, trainers))
        assert RANK_SUM.findall(log) == [(str(rank), "3.0", "3.0")], log[-3000:]
        trained = RANK_TRAINED.findall(log)
        assert len(trained) == 1 and trained[0][:2] == (str(rank), "20"), log[-3000:]
        losses[p] = (float(trained[0][2]), float(trained[0][3]))
        model = RANK_MODEL.findall(log)
        assert len(model) == 1 and model[0][0] == str(rank) and model[0][2] == "True", log[-3000:]
        models[p] = model[0][1]
    assert {t for _, t in endpoints} == {",".join(e for e, _ in endpoints)}, endpoints
    assert len(set(models.values())) == 1, f"the ranks trained different models: {models}"
    assert len(set(losses.values())) == 1, f"the ranks disagree on the (all-reduced) loss: {losses}"
    first, last = losses[order[0]]
    assert last < first / 10, losses


async def _check_ps(cluster) -> None:
    name, _, order = MANIFESTS["paddlejob-ps.yaml"]
    job, pods, logs = await _checked(cluster, "PaddleJob", name, order, "paddle")
    statuses = job["status"]["replicaStatuses"]
    assert (statuses["Master"].get("succeeded"), statuses["Worker"].get("succeeded")) == (1, 1), statuses
    await _check_env(cluster, name, pods, logs, order, ps=True)
    servers, losses = set(), {}
    for rank, p in enumerate(order):  # master 0 serves the rendezvous: its server and trainer are the 0s
        log = logs[p]
        found = SERVER.findall(log)
        assert len(found) == 1 and found[0][:3] == (str(rank), "2", name), log[-3000:]
        assert _host_of(found[0][3]) == pods[p]["status"]["podIP"], (p, found[0][3])
        servers.add(found[0][4])
        assert found[0][3] in found[0][4].split(","), found[0]
        assert SERVER_STOPPED.findall(log) == [str(rank)], log[-3000:]  # the first trainer stopped every server
        trainer = TRAINER.findall(log)
        assert trainer == [(str(rank), str(rank), "2", name, found[0][4])], log[-3000:]
        assert TRAINER_SUM.findall(log) == [(str(rank), "3.0", "3.0")], log[-3000:]
        trained = TRAINER_TRAINED.findall(log)
        assert len(trained) == 1 and trained[0][:2] == (str(rank), "20"), log[-3000:]
        losses[p] = (float(trained[0][2]), float(trained[0][3]))
    assert len(servers) == 1 and len(next(iter(servers)).split(",")) == 2, servers
    assert len(set(losses.values())) == 1, f"the trainers disagree on the (all-reduced) loss: {losses}"
    first, last = losses[order[0]]
    assert last < first / 10, losses


async def test_collective_and_ps_jobs_run_real_paddle_and_succeed(cluster, paddle_on_path):
    docs = [load(m) for m in MANIFESTS]
    if cluster.addressing == "names":
        docs = [without_pod_ip(d) for d in docs]
    for doc in docs:
        await cluster.client.create(doc)
    deadline = time.monotonic() + 90  # both at once, on 2 cores
    for name, _, order in MANIFESTS.values():
        await _finish(cluster, "PaddleJob", name, order, max(1.0, deadline - time.monotonic()))
    await _check_collective(cluster)
    await _check_ps(cluster)


def test_phalanx_run_runs_each_paddle_example_to_succeeded(tmp_path, paddle_on_path):
    """The README's commands, as a user types them, from a fresh PHALANX_HOME."""
    env = dict(os.environ, PHALANX_HOME=str(tmp_path / "home"))
    for manifest, (job, *_) in MANIFESTS.items():
        r = subprocess.run([sys.executable, "-m", "phalanx.cli.main", "run", str(EXAMPLES / manifest),
                            "--timeout", "50"], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"phalanx run {manifest} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        lines = r.stdout.strip().splitlines()
        assert lines[-1] == f"paddlejob/{job} Succeeded", r.stdout
        assert f"paddlejob.kubeflow.org/{job} created" in lines[0], r.stdout
