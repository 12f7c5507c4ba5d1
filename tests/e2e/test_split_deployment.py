"""The split deployment, as on a cluster: the API server behaving as a plain
kube-apiserver with the CRDs (`phalanx up --plain-kubernetes --no-controllers
--no-scheduler`: no Kubeflow defaults or rules of its own; its node agent plays
kubelet; RBAC enforced), `phalanx install --apply` (webhooks registered at the
operator's loopback URL), and `phalanx operator` and `phalanx scheduler` as
processes on the generated ServiceAccounts' tokens. The operator's webhooks
store the defaults and refuse P4. The seed scenarios P1, T1, P2, P4 and P7
(durations scaled) reach the results the all-in-one mode reaches — P1 is run in
both modes and compared object for object — and killing the operator and the
scheduler mid-job and starting them again changes nothing.

One plane serves the module; every test removes its job before the next.
"""
from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import AsyncIterator

import pytest
import yaml

from phalanx.client.kube import KubeClient
from phalanx.client.kubeconfig import from_kubeconfig
from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings
from phalanx.objects.errors import Forbidden, NotFound
from tests.scenarios.conftest import Recorder, job_state, load_example, scaled, wait_until
from tests.scenarios.test_failures import (
    backoff_message,
    condition,
    get,
    pytorch,
    restarts,
    script,
    wait_job,
    wait_nothing_left,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PHALANX = [sys.executable, "-m", "phalanx.cli.main"]
ROOT = Path(__file__).resolve().parents[2]
PT_PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]
TF_PODS = ["tftest-ps-0", "tftest-worker-0", "tftest-worker-1", "tftest-worker-2"]
NODE = {"name": "las1", "cpu": 16, "memory": "64Gi"}


class SplitPlane:
    """The API server (background `phalanx up`) and the operator and scheduler processes."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = dict(os.environ, PHALANX_HOME=str(home))
        self.kubeconfig = home / "kubeconfig"
        self.procs: dict[str, subprocess.Popen] = {}
        self.args: dict[str, list[str]] = {}  # per program: connection and flags (default: the admin kubeconfig)

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        r = subprocess.run([*PHALANX, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, f"phalanx {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    def log(self, what: str) -> Path:
        return self.home / f"{what}.log"

    def start(self, what: str) -> None:
        """Start `phalanx operator|scheduler` and wait until it has connected."""
        assert what not in self.procs or self.procs[what].poll() is not None, f"{what} already running"
        marker = f"phalanx {what}: "
        before = self.log(what).read_text().count(marker) if self.log(what).exists() else 0
        with open(self.log(what), "ab") as out:
            self.procs[what] = subprocess.Popen(
                [*PHALANX, what, *self.args.get(what, ["--kubeconfig", str(self.kubeconfig)]), "-v"], env=self.env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
        deadline = time.monotonic() + 20
        while self.log(what).read_text().count(marker) <= before:
            proc = self.procs[what]
            assert proc.poll() is None, f"{what} exited with {proc.returncode}:\n{self.log(what).read_text()}"
            assert time.monotonic() < deadline, f"{what} did not connect:\n{self.log(what).read_text()}"
            time.sleep(0.05)

    def stop(self, what: str, sig: int = signal.SIGTERM) -> int:
        proc = self.procs.pop(what)
        proc.send_signal(sig)
        return proc.wait(timeout=20)

    def client(self) -> KubeClient:
        return KubeClient(from_kubeconfig(self.kubeconfig), qps=0)

    def service_account_kubeconfig(self, namespace: str, name: str) -> Path:
        """The admin kubeconfig's cluster with a token of the ServiceAccount (`kubectl create token`)."""
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            pytest.fail("kubectl is not on PATH: it is part of the machine image (1.32)", pytrace=False)
        r = subprocess.run([kubectl, "create", "token", name, "-n", namespace], capture_output=True, text=True,
                           env=dict(self.env, KUBECONFIG=str(self.kubeconfig)), timeout=30)
        assert r.returncode == 0, r.stderr
        config = yaml.safe_load(self.kubeconfig.read_text())
        config["users"][0]["user"] = {"token": r.stdout.strip()}
        path = self.home / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    home = tmp_path_factory.mktemp("split") / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({
        "nodes": [NODE], "agent": {"backoffBase": 0.2, "backoffCap": 2}}))
    p = SplitPlane(home)
    r = p.cli("up", "--plain-kubernetes", "--no-controllers", "--no-scheduler")
    assert r.stdout == f"export KUBECONFIG={p.kubeconfig}\n"
    try:
        port = free_port()
        p.cli("install", "--apply", "--kubeconfig", str(p.kubeconfig), "--webhook-url", f"https://127.0.0.1:{port}")
        # The operator's role cannot list Nodes: say that these are Phalanx's.
        p.args["operator"] = [
            "--kubeconfig", str(p.service_account_kubeconfig("phalanx-system", "phalanx-operator")),
            "--local-runtime=true", f"--webhook-server-port={port}", f"--webhook-cert-dir={home / 'webhook-certs'}",
            "--metrics-bind-address=0", "--health-probe-bind-address=0"]
        p.args["scheduler"] = [
            "--kubeconfig", str(p.service_account_kubeconfig("phalanx-system", "phalanx-scheduler")),
            "--listen-address=0", "--healthz-address=0"]
        p.start("scheduler")
        p.start("operator")
        wait_webhooks(p)
        yield p
    finally:
        for what in list(p.procs):
            with contextlib.suppress(Exception):
                p.stop(what)
        subprocess.run([*PHALANX, "down"], env=p.env, capture_output=True, timeout=60)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_webhooks(p: SplitPlane, timeout: float = 30) -> None:
    """Until the operator's webhooks answer (its rotator has injected the CA): P4 refused by them
    (before, the call fails and so does the create: failurePolicy Fail; dry runs skip webhooks)."""
    kubectl = shutil.which("kubectl")
    job = load_example("pytorchjob.yaml")[0]
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    deadline = time.monotonic() + timeout
    while True:
        r = subprocess.run([kubectl or "kubectl", "create", "-f", "-"], input=yaml.safe_dump(job),
                           capture_output=True, text=True, env=dict(p.env, KUBECONFIG=str(p.kubeconfig)), timeout=30)
        if 'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied' in r.stderr:
            return
        assert time.monotonic() < deadline, f"the webhooks never answered: {r.stderr}\n{p.log('operator').read_text()}"
        time.sleep(0.1)


@contextlib.asynccontextmanager
async def recording(client) -> AsyncIterator[Recorder]:
    """Watch rows of jobs, PodGroups and pods from now on (the scenario recorder)."""
    rec = Recorder()
    rv = (await client.list("Pod", "default")).resource_version

    async def pump(kind: str) -> None:
        async for ev in client.watch(kind, "default", resource_version=rv):
            if ev.type != "BOOKMARK":
                rec.add(kind, ev.object, ev.type == "DELETED")

    tasks = [asyncio.create_task(pump(k)) for k in ("PyTorchJob", "TFJob", "PodGroup", "Pod")]
    await asyncio.sleep(0.1)
    try:
        yield rec
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
async def kube(plane):
    c = plane.client()
    try:
        yield c
    finally:
        await c.close()


async def remove_job(c, kind: str, name: str) -> None:
    """Delete the job and wait until nothing of it (pods, Services, PodGroup) is left."""
    job = await get(c, kind, name)
    if job is None:
        return
    with contextlib.suppress(NotFound):
        await c.delete(kind, name, "default")
    await wait_until(lambda: _absent(c, kind, name), 20, f"{kind} {name} deleted")
    await wait_nothing_left(c, job, 20)


async def _absent(c, kind, name) -> bool:
    return await get(c, kind, name) is None


# ---------------------------------------------------------------- P1 in both modes


def _normalize_pod(pod: dict, master_address: str | None, master_port: int | None) -> dict:
    """What the operator decided about a pod; server-assigned identity, placement and
    the local network's address and host port for the master (another home on the machine
    may hold the declared one) are neutralized."""
    meta = pod["metadata"]
    spec = copy.deepcopy(pod["spec"])
    spec.pop("nodeName", None)
    text = json.dumps(spec)
    if master_address:
        text = text.replace(json.dumps(master_address), '"<master address>"')
    if master_port:
        text = text.replace(json.dumps(str(master_port)), '"<master port>"')
    return {
        "name": meta["name"], "labels": meta.get("labels"), "annotations": meta.get("annotations"),
        "finalizers": meta.get("finalizers"),
        "ownerReferences": [{k: v for k, v in r.items() if k != "uid"} for r in meta.get("ownerReferences") or []],
        "spec": json.loads(text),
    }


async def run_p1(c, rec: Recorder) -> dict:
    """P1 on any client: the seed job (2 s) to Succeeded; what both modes must agree on."""
    created = await c.create(scaled(load_example("pytorchjob.yaml")[0], 2))

    async def done():
        j = await c.get("PyTorchJob", "pytest", "default")
        if job_state(j) != "Succeeded":
            return False
        pods = [p for p in (await c.list("Pod", "default")).items if p["metadata"]["name"] in PT_PODS]
        return len(pods) == 4 and all(p["status"].get("phase") == "Succeeded" for p in pods)

    await wait_until(done, 40, "job Succeeded and every pod Completed")
    await wait_until(lambda: rec.states("PodGroup", "pytest")[-1:] == ["<deleted>"], 10, "PodGroup deleted")
    job = await c.get("PyTorchJob", "pytest", "default")
    master_svc = await c.get("Service", "pytest-master-0", "default")
    address = (master_svc["metadata"].get("annotations") or {}).get("phalanx.dev/address")
    host_ports = json.loads((master_svc["metadata"].get("annotations") or {}).get("phalanx.dev/host-ports", "{}"))
    pods = {p["metadata"]["name"]: p for p in (await c.list("Pod", "default")).items
            if any(r.get("uid") == created["metadata"]["uid"] for r in p["metadata"].get("ownerReferences") or [])}
    services = {s["metadata"]["name"]: {"labels": s["metadata"].get("labels"),
                                        "spec": {k: s["spec"].get(k) for k in ("clusterIP", "selector", "ports")}}
                for s in (await c.list("Service", "default")).items if s["metadata"]["name"].startswith("pytest-")}
    return {
        "job states": rec.states("PyTorchJob", "pytest"),
        "conditions": [(x["type"], x["status"], x["reason"], x["message"]) for x in job["status"]["conditions"]],
        "replicaStatuses": job["status"].get("replicaStatuses"),
        "restartCount": restarts(job),
        "podgroup states": rec.states("PodGroup", "pytest")[:3] + rec.states("PodGroup", "pytest")[-1:],
        "pod restarts": {n: rec.restarts.get(n, 0) for n in PT_PODS},
        "pod instances": {n: len(rec.uids.get(n, [])) for n in PT_PODS},
        "final pod states": {n: rec.states("Pod", n)[-1] for n in PT_PODS},
        "pods": {n: _normalize_pod(p, address, host_ports.get("pytorchjob-port")) for n, p in sorted(pods.items())},
        "services": services,
        "nodes": sorted({p["spec"].get("nodeName") for p in pods.values()}),
    }


async def test_p1_split_reaches_the_all_in_one_result_object_for_object(plane, kube, tmp_path):
    cfg = ClusterConfig(nodes=[NodeConfig("las1", 16, 64 * 1024**3)],
                        agent=AgentSettings(backoff_base=0.2, backoff_cap=2.0),
                        operator=OperatorSettings(default_backoff_limit=0))
    aio = EmbeddedCluster(tmp_path / "aio", cfg, persist=False)
    await aio.start()
    try:
        async with recording(aio.client) as rec:
            expected = await run_p1(aio.client, rec)
    finally:
        await aio.stop(kill_pods=True)

    async with recording(kube) as rec:
        got = await run_p1(kube, rec)
    try:
        assert expected["job states"] == ["", "Created", "Running", "Succeeded"]
        assert expected["podgroup states"] == ["", "Inqueue", "Running", "<deleted>"]
        for key in expected:
            assert got[key] == expected[key], key
        # The pods are the operator's, field for field, as the original builds them (docs/REFERENCE.md §4.2, §7).
        master = got["pods"]["pytest-master-0"]
        assert master["annotations"] == {"scheduling.k8s.io/group-name": "pytest", "volcano.sh/task-spec": "master"}
        assert master["spec"]["schedulerName"] == "volcano" and master["spec"]["restartPolicy"] == "OnFailure"
        assert master["ownerReferences"] == [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                              "name": "pytest", "controller": True, "blockOwnerDeletion": True}]
    finally:
        await remove_job(kube, "PyTorchJob", "pytest")


# ---------------------------------------------------------------- T1, P2, P4, P7


async def test_t1_tfjob_succeeds(plane, kube):
    # As tests/scenarios/test_tfjob_seed.py::test_t1_normal_run.
    async with recording(kube) as rec:
        try:
            await kube.create(scaled(load_example("tfjob.yaml")[0], 2))
            pg = await wait_until(lambda: get(kube, "PodGroup", "tftest"), 10, "PodGroup")
            assert (pg["spec"]["minMember"], pg["spec"]["queue"]) == (4, "default")
            await wait_job(kube, rec, "TFJob", "tftest", "Succeeded", 40)
            await wait_until(lambda: rec.states("PodGroup", "tftest")[-1:] == ["<deleted>"], 10, "PodGroup deleted")
            assert rec.states("TFJob", "tftest") == ["", "Created", "Running", "Succeeded"]
            assert rec.first_time("TFJob", "tftest", "Succeeded") >= rec.first_time("Pod", "tftest-worker-0",
                                                                                   "Completed")
            j = await kube.get("TFJob", "tftest", "default")
            assert j["status"]["conditions"][-1]["message"] == "TFJob default/tftest successfully completed."
            pods = {p["metadata"]["name"] for p in (await kube.list("Pod", "default")).items}
            assert pods == set(TF_PODS)
            # (the PS, restartPolicy Always, may restart in place after its clean exit, in either mode)
            assert all(rec.restarts.get(n, 0) == 0 for n in TF_PODS[1:])
        finally:
            await remove_job(kube, "TFJob", "tftest")


async def test_p2_queue_capability_blocks_and_raising_it_lets_the_job_run(plane, kube):
    # As tests/scenarios/test_pytorchjob_seed.py::test_p2_...: the split scheduler made the queue.
    q = await wait_until(lambda: get(kube, "Queue", "default", None), 10, "default queue")
    q["spec"]["capability"] = {"cpu": 2}
    await kube.update(q)
    try:
        await kube.create(scaled(load_example("pytorchjob.yaml")[0], 1))

        async def refused():
            pg = await get(kube, "PodGroup", "pytest")
            conds = (pg or {}).get("status", {}).get("conditions") or []
            return pg if any(x.get("type") == "Unschedulable" and x.get("status") == "True" for x in conds) else None

        pg = await wait_until(refused, 15, "PodGroup Unschedulable for queue capability")
        msg = next(x["message"] for x in pg["status"]["conditions"] if x["type"] == "Unschedulable")
        assert 'queue "default"' in msg and "cpu" in msg, msg
        await asyncio.sleep(1.2)  # more than one scheduling period: nothing may start meanwhile
        pods = (await kube.list("Pod", "default")).items
        assert all(not p["spec"].get("nodeName") for p in pods)
        assert job_state(await kube.get("PyTorchJob", "pytest", "default")) == "Created"
        await kube.patch("Queue", "default", None, {"spec": {"capability": {"cpu": 8}}})
        await wait_until(lambda: _state_is(kube, "Succeeded"), 40, "job Succeeded after raising capability")
    finally:
        await kube.patch("Queue", "default", None, {"spec": {"capability": None}})
        await remove_job(kube, "PyTorchJob", "pytest")


async def _state_is(c, state: str) -> bool:
    return job_state(await c.get("PyTorchJob", "pytest", "default")) == state


async def test_p4_rejected_by_the_api_servers_admission_nothing_stored(plane, kube):
    # The operator's validating webhook refuses it (the plain API server has no rule of its own;
    # a real kube-apiserver refuses it by the CRD's CEL rule first: tests/envtest).
    job = load_example("pytorchjob.yaml")[0]
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    with pytest.raises(Forbidden) as e:
        await kube.create(job)
    assert e.value.message == ('admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the '
                               'request: spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1')
    assert (await kube.list("PyTorchJob", "default")).items == []
    assert (await kube.list("PodGroup", "default")).items == []


async def test_p7_master_fails_backoff_limit_3_allows_exactly_3_restarts(plane, kube):
    # As tests/scenarios/test_failures.py::test_p7_...
    async with recording(kube) as rec:
        try:
            created = await kube.create(pytorch(0.9, master=script("sleep 0.6 & wait && exit 1")))
            j = await wait_job(kube, rec, "PyTorchJob", "pytest", "Failed", 40)
            assert rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Failed"]
            failed = condition(j, "Failed")
            assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "pytest")
            assert restarts(j, "Master") == restarts(j) == 4
            assert restarts(j, "Worker") == 0
            await wait_nothing_left(kube, created, 20)
            assert rec.restarts["pytest-master-0"] == 3
            assert len(rec.uids["pytest-master-0"]) == 1
            for w in PT_PODS[1:]:
                assert "Completed" in rec.states("Pod", w)
                assert rec.restarts.get(w, 0) == 0
        finally:
            await remove_job(kube, "PyTorchJob", "pytest")


# ---------------------------------------------------------------- restarts mid-job


async def test_killing_operator_and_scheduler_mid_job_changes_nothing(plane, kube):
    plane.stop("scheduler", signal.SIGKILL)
    async with recording(kube) as rec:
        try:
            await kube.create(scaled(load_example("pytorchjob.yaml")[0], 3))
            pg = await wait_until(lambda: get(kube, "PodGroup", "pytest"), 10, "PodGroup created")
            await asyncio.sleep(1.0)  # no scheduler: the gang waits, no pod exists
            assert not (await kube.get("PodGroup", "pytest", "default")).get("status", {}).get("phase")
            assert (await kube.list("Pod", "default")).items == []
            plane.start("scheduler")
            await wait_job(kube, rec, "PyTorchJob", "pytest", "Running", 20)
            # Both controllers die at once while every pod runs, and come back.
            plane.stop("operator", signal.SIGKILL)
            plane.stop("scheduler", signal.SIGKILL)
            await asyncio.sleep(1.0)
            plane.start("operator")
            plane.start("scheduler")
            j = await wait_job(kube, rec, "PyTorchJob", "pytest", "Succeeded", 40)
            await wait_until(lambda: rec.states("PodGroup", "pytest")[-1:] == ["<deleted>"], 10, "PodGroup deleted")
            await wait_until(lambda: all(rec.states("Pod", n)[-1:] == ["Completed"] for n in PT_PODS), 10,
                             "every pod Completed")
            assert rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Succeeded"]
            assert [(x["type"], x["status"], x["reason"]) for x in j["status"]["conditions"]] == [
                ("Created", "True", "PyTorchJobCreated"), ("Running", "False", "PyTorchJobRunning"),
                ("Succeeded", "True", "PyTorchJobSucceeded")]
            assert restarts(j) == 0
            for n in PT_PODS:  # nothing recreated, nothing restarted
                assert len(rec.uids[n]) == 1 and rec.restarts.get(n, 0) == 0, n
            assert rec.states("PodGroup", "pytest")[:3] == ["", "Inqueue", "Running"]
            assert pg["metadata"]["uid"]
        finally:
            if "scheduler" not in plane.procs:
                plane.start("scheduler")
            if "operator" not in plane.procs:
                plane.start("operator")
            await remove_job(kube, "PyTorchJob", "pytest")


# ---------------------------------------------------------------- phalanx install | kubectl apply


@pytest.fixture
def fresh_plane(tmp_path):
    """An API server (the default mode) with nothing installed yet."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({"nodes": [NODE]}))
    p = SplitPlane(home)
    p.cli("up", "--no-controllers", "--no-scheduler")
    try:
        yield p
    finally:
        subprocess.run([*PHALANX, "down"], env=p.env, capture_output=True, timeout=60)


def test_install_through_kubectl_then_the_seed_manifests_are_accepted(fresh_plane):
    plane = fresh_plane
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not on PATH: it is part of the machine image (1.32) and this test needs the real "
                    "one", pytrace=False)
    env = dict(plane.env, KUBECONFIG=str(plane.kubeconfig))
    manifest = plane.cli("install").stdout
    r = subprocess.run([kubectl, "apply", "-f", "-"], input=manifest, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "customresourcedefinition.apiextensions.k8s.io/pytorchjobs.kubeflow.org created",
        "customresourcedefinition.apiextensions.k8s.io/tfjobs.kubeflow.org created",
        "customresourcedefinition.apiextensions.k8s.io/xgboostjobs.kubeflow.org created",
        "customresourcedefinition.apiextensions.k8s.io/paddlejobs.kubeflow.org created",
        "customresourcedefinition.apiextensions.k8s.io/jaxjobs.kubeflow.org created",
        "customresourcedefinition.apiextensions.k8s.io/mpijobs.kubeflow.org created",
        "customresourcedefinition.apiextensions.k8s.io/podgroups.scheduling.volcano.sh created",
        "customresourcedefinition.apiextensions.k8s.io/queues.scheduling.volcano.sh created",
        "namespace/phalanx-system created",
        "serviceaccount/phalanx-operator created",
        "serviceaccount/phalanx-scheduler created",
        "clusterrole.rbac.authorization.k8s.io/phalanx-operator created",
        "clusterrolebinding.rbac.authorization.k8s.io/phalanx-operator created",
        "clusterrole.rbac.authorization.k8s.io/phalanx-scheduler created",
        "clusterrolebinding.rbac.authorization.k8s.io/phalanx-scheduler created",
        "role.rbac.authorization.k8s.io/phalanx-leader-election created",
        "rolebinding.rbac.authorization.k8s.io/phalanx-leader-election created",
        "role.rbac.authorization.k8s.io/phalanx-operator-webhook-cert created",
        "rolebinding.rbac.authorization.k8s.io/phalanx-operator-webhook-cert created",
        "configmap/volcano-scheduler-configmap created",
        "deployment.apps/phalanx-operator created",
        "deployment.apps/phalanx-scheduler created",
        "service/phalanx-operator-metrics created",
        "service/phalanx-scheduler-metrics created",
        "clusterrole.rbac.authorization.k8s.io/phalanx-metrics-reader created",
        "service/phalanx-operator-webhook created",
        "secret/phalanx-operator-webhook-cert created",
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/defaulter.training-operator.kubeflow.org created",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/validator.training-operator.kubeflow.org "
        "created"]
    # Applying again changes nothing; a new image is a strategic-merge patch of the Deployments.
    r = subprocess.run([kubectl, "apply", "-f", "-"], input=manifest, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and all(line.endswith(" unchanged") for line in r.stdout.splitlines()), r
    newer = plane.cli("install", "--image", "registry.example/phalanx:2").stdout
    r = subprocess.run([kubectl, "apply", "-f", "-"], input=newer, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "deployment.apps/phalanx-operator configured" in r.stdout, r
    r = subprocess.run([kubectl, "get", "deploy", "-n", "phalanx-system", "phalanx-operator", "-o",
                        "jsonpath={.spec.template.spec.containers[0].image}"], env=env, capture_output=True,
                       text=True, timeout=30)
    assert r.stdout == "registry.example/phalanx:2"
    # The seed manifests: every job is accepted (server-side dry run: nothing starts), the queue applied.
    seeds = [ROOT / "examples" / "pytorchjob.yaml", ROOT / "examples" / "tfjob.yaml",
             *sorted((ROOT / "examples" / "seeds").glob("*.yaml")),
             *(f for f in (ROOT / "examples" / f"{k}.yaml" for k in ("xgboostjob", "paddlejob", "jaxjob", "mpijob"))
               if f.exists())]
    for f in seeds:
        docs = [d for d in yaml.safe_load_all(f.read_text()) if d and d.get("kind") != "Queue"]
        r = subprocess.run([kubectl, "apply", "--dry-run=server", "-f", "-"], input=yaml.safe_dump_all(docs),
                           env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip().endswith("created (server dry run)"), (f.name, r)
    r = subprocess.run([kubectl, "apply", "-f", str(ROOT / "examples" / "queue.yaml")], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("queue.scheduling.volcano.sh/default "), r


async def test_a_bare_pod_for_the_scheduler_gets_a_podgroup_of_its_own_and_runs(plane, kube):
    """Volcano's podgroup controller, run by `phalanx scheduler`: a pod with its schedulerName
    and no PodGroup gets ``podgroup-<uid>`` (minMember 1, owned by the pod), is bound, Succeeds."""
    pod = await kube.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "namespace": "default"},
        "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo hi"],
                                 "resources": {"requests": {"cpu": "100m"}}}]}})
    uid = pod["metadata"]["uid"]
    try:
        async def succeeded() -> bool:
            return ((await kube.get("Pod", "bare", "default")).get("status") or {}).get("phase") == "Succeeded"

        await wait_until(succeeded, 30, "the bare pod Succeeded")
        got = await kube.get("Pod", "bare", "default")
        assert got["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == f"podgroup-{uid}"
        assert got["spec"]["nodeName"] == NODE["name"]
        pg = await kube.get("PodGroup", f"podgroup-{uid}", "default")
        assert pg["spec"]["minMember"] == 1 and pg["spec"]["queue"] == "default"
        assert [(r["kind"], r["uid"]) for r in pg["metadata"]["ownerReferences"]] == [("Pod", uid)]
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete("Pod", "bare", "default")
    await wait_until(lambda: _absent(kube, "PodGroup", f"podgroup-{uid}"), 20, "the PodGroup garbage-collected")


# ---------------------------------------------------------------- S14: another owner's objects of the job's names

async def test_s14_another_owners_podgroup_blocks_the_job_until_it_is_gone(plane, kube):
    # The PodGroup of a job of that name deleted a moment ago, not yet removed (here a ConfigMap owns
    # it): the operator neither uses nor changes it, says so, and goes on once it is gone.
    keeper = await kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "keeper", "namespace": "default"}})
    kuid = keeper["metadata"]["uid"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": kuid, "controller": True}
    await kube.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                       "metadata": {"name": "pytest", "namespace": "default", "ownerReferences": [ref]},
                       "spec": {"minMember": 9}})
    try:
        uid = (await kube.create(scaled(load_example("pytorchjob.yaml")[0], 2)))["metadata"]["uid"]

        async def warned():
            return [e for e in (await kube.list("Event", "default")).items
                    if e["reason"] == "ErrResourceExists" and e["involvedObject"].get("uid") == uid]

        events = await wait_until(warned, 20, "the job's ErrResourceExists event")
        assert events[0]["type"] == "Warning" and f"controlled by ConfigMap keeper, uid {kuid}" in events[0]["message"]
        pg = await kube.get("PodGroup", "pytest", "default")
        assert pg["spec"]["minMember"] == 9 and pg["metadata"]["ownerReferences"] == [ref]
        assert [p for p in (await kube.list("Pod", "default")).items if p["metadata"]["name"].startswith("pytest-")] == []
        job = await kube.get("PyTorchJob", "pytest", "default")
        assert job_state(job) == "Created" and "Waiting for objects of its names" in job["status"]["conditions"][0][
            "message"]
        await kube.delete("PodGroup", "pytest", "default")  # what the garbage collector does once it gets to it

        async def own_podgroup():
            got = await get(kube, "PodGroup", "pytest")
            return got if got and [r["uid"] for r in got["metadata"].get("ownerReferences") or []] == [uid] else None

        pg = await wait_until(own_podgroup, 20, "the job's own PodGroup")
        assert pg["spec"]["minMember"] == 4
        await wait_until(lambda: _equals_state(kube, "Succeeded"), 40, "the job Succeeded")
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete("ConfigMap", "keeper", "default")
        await remove_job(kube, "PyTorchJob", "pytest")


async def _equals_state(kube, want: str) -> bool:
    return job_state(await kube.get("PyTorchJob", "pytest", "default")) == want
