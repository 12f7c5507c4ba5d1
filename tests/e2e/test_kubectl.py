"""The real kubectl (1.32, part of the machine image) against `phalanx up`, one
test per acceptance point of "kubectl works against the Phalanx control plane".

One control plane serves the whole module (tests run in file order and build
on each other: P2 is reproduced, then released while kubectl watches). The
seed's `sleep 30s` is scaled to 2 s. The last test reads the API's access log:
no request of any of these commands got a 5xx.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parents[2]
PHALANX = [sys.executable, "-m", "phalanx.cli.main"]
KUBECTL = shutil.which("kubectl")
P4_MESSAGE = ('Error from server (Forbidden): error when creating "{file}": admission webhook '
              '"validator.pytorchjob.training-operator.kubeflow.org" denied the request: '
              "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1")

EDITOR = """\
import os, sys, yaml
path = sys.argv[-1]
doc = yaml.safe_load(open(path))
doc["spec"]["capability"] = {"cpu": int(os.environ["CAPABILITY_CPU"])}
open(path, "w").write(yaml.safe_dump(doc))
"""


def require_kubectl() -> str:
    if KUBECTL is None:
        pytest.fail("kubectl is not on PATH: it is part of the machine image (/usr/bin/kubectl, 1.32) and these "
                    "tests need the real one; install it rather than skipping them", pytrace=False)
    return KUBECTL


class Plane:
    """The control plane of this module and how to run commands against it."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = env
        self.up_stdout = ""

    def phalanx(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        r = subprocess.run([*PHALANX, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"phalanx {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def kubectl(self, *args: str, check: bool = True, timeout: float = 30,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        r = subprocess.run([require_kubectl(), *args], env=env or self.env, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def json(self, *args: str) -> dict:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def wait(self, predicate, timeout: float = 20, what: str = "condition"):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")

    def job_state(self, name: str = "pytest") -> str | None:
        r = self.kubectl("get", "pytorchjob", name, "-o", "json", check=False)
        if r.returncode != 0:
            return None
        conds = json.loads(r.stdout).get("status", {}).get("conditions") or []
        return conds[-1]["type"] if conds else ""


class Watch:
    """`kubectl ... -w` in the background: its stdout lines as they come."""

    def __init__(self, plane: Plane, *args: str) -> None:
        self.proc = subprocess.Popen([require_kubectl(), *args], env=plane.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                         for stream, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors))]
        for t in self._readers:
            t.start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float = 20, stderr: bool = False) -> None:
        lines = self.errors if stderr else self.lines
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(re.search(pattern, line) for line in lines):
                return
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(lines))

    def stop(self) -> list[list[str]]:
        self.proc.terminate()
        self.proc.wait(10)
        for t in self._readers:
            t.join(5)
        return [line.split() for line in self.lines]


def write_job(path: Path, seconds: float, **changes) -> Path:
    """The seed PyTorchJob, its `sleep 30s` scaled, saying hello first."""
    doc = yaml.safe_load((ROOT / "examples" / "pytorchjob.yaml").read_text())
    for spec in doc["spec"]["pytorchReplicaSpecs"].values():
        c = spec["template"]["spec"]["containers"][0]
        c["command"] = ["sh", "-c", f"echo hello from $RANK; trap exit INT TERM; sleep {seconds} & wait"]
    for key, value in changes.items():
        target = doc
        *parents, last = key.split(".")
        for p in parents:
            target = target[p]
        target[last] = value
    path.write_text(yaml.safe_dump(doc))
    return path


def started_plane(tmp: Path, cluster: dict, extra_env: dict[str, str] | None = None) -> Iterator[Plane]:
    """`phalanx up` with a home of its own under ``tmp`` (``cluster`` as its
    cluster.yaml) and kubectl pointed at it; `phalanx down` at the end."""
    require_kubectl()
    home = tmp / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "PHALANX_HOME": str(home),
           "LANG": "C.UTF-8", **(extra_env or {})}
    for key in ("PYTHONPATH", "VIRTUAL_ENV"):
        if key in os.environ:
            env[key] = os.environ[key]
    p = Plane(home, env)
    p.up_stdout = p.phalanx("up").stdout
    env["KUBECONFIG"] = str(home / "kubeconfig")
    try:
        yield p
    finally:
        p.phalanx("down", check=False, timeout=60)


@pytest.fixture(scope="module")
def plane(tmp_path_factory) -> Iterator[Plane]:
    tmp = tmp_path_factory.mktemp("kubectl")
    (tmp / "editor.py").write_text(EDITOR)
    yield from started_plane(tmp, {"nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}],
                                   "agent": {"backoffBase": 0.2, "backoffCap": 2}},
                             {"KUBE_EDITOR": f"{sys.executable} {tmp / 'editor.py'}"})


# --------------------------------------------------------------------------
# 1. phalanx up: HTTPS, a kubeconfig, one line to export, the token required
# --------------------------------------------------------------------------

def test_up_prints_the_export_line_and_every_request_needs_the_token(plane):
    kubeconfig = plane.home / "kubeconfig"
    assert plane.up_stdout == f"export KUBECONFIG={kubeconfig}\n"
    assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
    api = json.loads((plane.home / "api.json").read_text())
    assert api["url"].startswith("https://127.0.0.1:") and Path(api["ca"]).is_file()
    config = yaml.safe_load(kubeconfig.read_text())
    assert config["clusters"][0]["cluster"]["server"] == api["url"]

    version = plane.kubectl("version").stdout
    assert re.search(r"Server Version: v1\.32\.\d+-phalanx", version), version
    ctx = ssl.create_default_context(cafile=api["ca"])
    for headers, code in (({}, 403), ({"Authorization": "Bearer wrong"}, 401)):  # anonymous, unauthorized
        req = urllib.request.Request(api["url"] + "/api/v1/namespaces/default/pods", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=5, context=ctx)
        assert e.value.code == code
    # The phalanx CLI talks to the same API (verifying the same CA).
    assert plane.phalanx("get", "ns").stdout.split()[:4] == ["NAME", "STATUS", "AGE", "default"]
    assert plane.kubectl("get", "ns", "default").stdout.split()[:5] == ["NAME", "STATUS", "AGE", "default",
                                                                       "Active"]


def test_discovery_short_names_and_explain(plane):
    resources = plane.kubectl("api-resources").stdout
    for plural, short in (("pods", "po"), ("services", "svc"), ("nodes", "no"), ("events", "ev"),
                          ("namespaces", "ns"), ("podgroups", "pg"), ("queues", "q")):
        assert re.search(rf"^{plural}\s+{short}\b", resources, re.M), resources
    out = plane.kubectl("explain", "pytorchjob.spec.runPolicy").stdout
    assert "KIND:       PyTorchJob" in out and "backoffLimit\t<integer>" in out, out
    table = plane.kubectl("get", "no", "-o", "wide").stdout.splitlines()
    assert table[0].split()[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] and table[1].startswith("las1 ")


# --------------------------------------------------------------------------
# 2. P4: Master replicas 2 is refused by kubectl apply with the webhook's message
# --------------------------------------------------------------------------

def test_master_replicas_2_is_refused_with_the_p4_message(plane, tmp_path):
    bad = write_job(tmp_path / "p4.yaml", 2, **{"spec.pytorchReplicaSpecs.Master.replicas": 2})
    r = plane.kubectl("apply", "-f", str(bad), check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == P4_MESSAGE.format(file=bad), r.stderr
    assert plane.kubectl("get", "pytorchjob", "-o", "name").stdout == ""
    # Unknown fields are the apiserver's strict decoding error (docs/REFERENCE.md golden 29).
    typo = write_job(tmp_path / "typo.yaml", 2, **{"spec.runPolicy.backoffLimits": 3})
    r = plane.kubectl("apply", "-f", str(typo), check=False)
    assert r.returncode == 1 and 'strict decoding error: unknown field "spec.runPolicy.backoffLimits"' in r.stderr


# --------------------------------------------------------------------------
# 3. kubectl edit q default reproduces P2; created; raising it runs the job (watched)
# --------------------------------------------------------------------------

def test_edit_queue_capability_reproduces_p2(plane, tmp_path):
    r = plane.kubectl("edit", "q", "default", env=dict(plane.env, CAPABILITY_CPU="2"))
    assert r.stdout.strip() == "queue.scheduling.volcano.sh/default edited"
    assert {k: str(v) for k, v in plane.json("get", "q", "default")["spec"]["capability"].items()} == {"cpu": "2"}

    job = write_job(plane.home.parent / "pytorchjob.yaml", 4)  # all four overlap running, even on a busy machine
    assert plane.kubectl("apply", "-f", str(job)).stdout == "pytorchjob.kubeflow.org/pytest created\n"
    # The scheduler says why the gang waits (beyond the original), on the PodGroup:
    described = plane.wait(lambda: re.search(r'Warning\s+Unschedulable\s+.*queue "default" capability exceeded: '
                                             r"cpu needed 4, allowed 2", plane.kubectl(
                                                 "describe", "pg", "pytest", check=False).stdout),
                           what="the PodGroup's Unschedulable event")
    assert described
    assert plane.job_state() == "Created"
    pods = plane.json("get", "po")["items"]
    assert all(not p["spec"].get("nodeName") for p in pods)
    assert plane.json("get", "pg", "pytest").get("status", {}).get("phase") in ("Pending", "Inqueue")


def test_get_watch_prints_the_seed_columns_and_one_row_per_change(plane):
    # -v=6 logs each request once its response headers are in: the watches are open.
    watches = {kind: Watch(plane, "get", kind, "-owide", "-w", "-v=6") for kind in ("pytorchjob", "podgroup", "po")}
    for w in watches.values():
        w.wait_for(r"GET https://\S+watch=true 200 OK", stderr=True)
    assert watches["po"].lines == []  # P2: no pod yet
    r = plane.kubectl("edit", "q", "default", env=dict(plane.env, CAPABILITY_CPU="8"))
    assert r.returncode == 0
    plane.wait(lambda: plane.job_state() == "Succeeded", 30, "the job to succeed once the queue allows it")
    watches["pytorchjob"].wait_for(r"^pytest\s+Succeeded")
    for pod in ("pytest-master-0", "pytest-worker-0"):
        watches["po"].wait_for(rf"^{pod}\s+0/1\s+Completed")
    rows = {kind: w.stop() for kind, w in watches.items()}

    job = rows["pytorchjob"]
    assert job[0] == ["NAME", "STATE", "AGE"]
    states = [row[1] for row in job[1:]]
    assert states[0] == "Created" and states[-1] == "Succeeded" and "Running" in states
    assert states.index("Running") < states.index("Succeeded")

    pg = rows["podgroup"]
    assert pg[0] == ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE", "QUEUE"]
    assert pg[1][:3] in (["pytest", "Pending", "4"], ["pytest", "Inqueue", "4"])
    running = [row for row in pg[1:] if row[1] == "Running"]
    # The whole gang ran at once (RUNNINGS 4). A pod that ended before the PodGroup's deletion may bring a last
    # row of 3, as a scheduler session between the master's end and the job's Succeeded writes it.
    assert any(len(row) == 6 and row[3] == "4" for row in running), running
    assert all(row[-1] == "default" for row in running)

    po = rows["po"]
    assert po[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE",
                     "READINESS", "GATES"]
    assert all(len(row) == 9 for row in po[1:]), po
    # One row per change, in order: every state each pod went through shows.
    for pod, path in (("pytest-master-0", ["Pending", "ContainerCreating", "Running", "Completed"]),
                      ("pytest-worker-0", ["Pending", "Init:0/1", "PodInitializing", "Running", "Completed"])):
        rows_of = [row for row in po[1:] if row[0] == pod]
        statuses = [status for i, status in enumerate(row[2] for row in rows_of)
                    if i == 0 or status != rows_of[i - 1][2]]
        assert statuses == path, (pod, statuses)
        assert rows_of[0][6] == "<none>" and rows_of[-1][6] == "las1"
    assert {row[0] for row in po[1:]} == {"pytest-master-0", "pytest-worker-0", "pytest-worker-1",
                                          "pytest-worker-2"}


# --------------------------------------------------------------------------
# 4. describe
# --------------------------------------------------------------------------

def test_describe_pod_shows_the_p3_environment(plane):
    out = plane.kubectl("describe", "pod", "pytest-worker-0").stdout
    env = dict(re.findall(r"^\s{6}([A-Z_]+):\s+(\S+)$", out, re.M))
    # The master's effective port: 23456 unless another process on this machine holds it (docs/ARCHITECTURE.md, Local network).
    svc = plane.json("get", "svc", "pytest-master-0")
    port = str(json.loads(svc["metadata"]["annotations"]["phalanx.dev/host-ports"])["pytorchjob-port"])
    assert {k: env.get(k) for k in ("PYTHONUNBUFFERED", "MASTER_PORT", "PET_MASTER_PORT", "WORLD_SIZE", "RANK",
                                    "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_NNODES")} == {
        "PYTHONUNBUFFERED": "1", "MASTER_PORT": port, "PET_MASTER_PORT": port, "WORLD_SIZE": "4",
        "RANK": "1", "PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "auto", "PET_NNODES": "4"}
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] and env["MASTER_ADDR"] in ("pytest-master-0",
                                                                                  _master_ip(plane))
    assert re.search(r"^Node:\s+las1/", out, re.M) and "Controlled By:  PyTorchJob/pytest" in out
    assert re.search(r"Normal\s+Scheduled\s+.*Successfully assigned default/pytest-worker-0 to las1", out), out


def _master_ip(plane) -> str:
    return plane.json("get", "po", "pytest-master-0")["status"]["podIP"]


def test_describe_pytorchjob_shows_conditions_and_events(plane):
    out = plane.kubectl("describe", "pytorchjob", "pytest").stdout
    assert "Conditions:" in out
    for reason in ("PyTorchJobCreated", "PyTorchJobRunning", "PyTorchJobSucceeded"):
        assert re.search(rf"Reason:\s+{reason}", out), out
    events = out[out.index("\nEvents:"):]
    assert re.search(r"Normal\s+SuccessfulCreatePod\s+.*Created pod: pytest-master-0", events), events
    assert re.search(r"Normal\s+PyTorchJobSucceeded", events), events


# --------------------------------------------------------------------------
# 5. apply: the last-applied annotation; created / configured / unchanged
# --------------------------------------------------------------------------

def test_apply_again_after_a_change_prints_configured_and_keeps_last_applied(plane, tmp_path):
    changed = write_job(plane.home.parent / "pytorchjob.yaml", 2, **{"metadata.labels": {"team": "a"}})
    assert plane.kubectl("apply", "-f", str(changed)).stdout == "pytorchjob.kubeflow.org/pytest configured\n"
    job = plane.json("get", "pytorchjob", "pytest")
    assert job["metadata"]["labels"] == {"team": "a"}
    applied = json.loads(job["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert applied["metadata"]["labels"] == {"team": "a"}
    # Defaults are stored (README "kubectl"): a manifest spelling out the defaulted
    # port list is configured once (new last-applied), then unchanged.
    explicit = yaml.safe_load(changed.read_text())
    for spec in explicit["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["ports"] = [
            {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
    changed.write_text(yaml.safe_dump(explicit))
    assert plane.kubectl("apply", "-f", str(changed)).stdout == "pytorchjob.kubeflow.org/pytest configured\n"
    assert plane.kubectl("apply", "-f", str(changed)).stdout == "pytorchjob.kubeflow.org/pytest unchanged\n"

    queue = tmp_path / "queue.yaml"
    queue.write_text("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: team-a}\n"
                     "spec: {weight: 2}\n")
    assert plane.kubectl("apply", "-f", str(queue)).stdout == "queue.scheduling.volcano.sh/team-a created\n"
    assert plane.kubectl("apply", "-f", str(queue)).stdout == "queue.scheduling.volcano.sh/team-a unchanged\n"
    queue.write_text(queue.read_text().replace("weight: 2", "weight: 3"))
    assert plane.kubectl("apply", "-f", str(queue)).stdout == "queue.scheduling.volcano.sh/team-a configured\n"
    assert plane.json("get", "q", "team-a")["spec"]["weight"] == 3
    # A built-in kind is patched with a strategic merge patch.
    ns = tmp_path / "ns.yaml"
    ns.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a, labels: {tier: blue}}\n")
    assert plane.kubectl("apply", "-f", str(ns)).stdout == "namespace/team-a created\n"
    assert plane.kubectl("apply", "-f", str(ns)).stdout == "namespace/team-a unchanged\n"
    ns.write_text(ns.read_text().replace("tier: blue", "tier: green"))
    assert plane.kubectl("apply", "-f", str(ns)).stdout == "namespace/team-a configured\n"
    assert plane.json("get", "ns", "team-a")["metadata"]["labels"]["tier"] == "green"


# --------------------------------------------------------------------------
# 6. logs, then delete -f returning once the job, its pods and PodGroup are gone
# --------------------------------------------------------------------------

def test_logs_of_the_master(plane):
    assert plane.kubectl("logs", "pytest-master-0").stdout == "hello from 0\n"
    assert plane.kubectl("logs", "-f", "pytest-master-0").stdout == "hello from 0\n"
    stamped = plane.kubectl("logs", "pytest-worker-2", "--timestamps", "--tail=1").stdout
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z hello from 3\n", stamped), stamped


def test_logs_follow_and_delete_f_returns_once_everything_is_gone(plane):
    job = write_job(plane.home.parent / "pytorchjob.yaml", 600)
    plane.kubectl("delete", "-f", str(job))  # the finished one
    assert plane.kubectl("apply", "-f", str(job)).stdout == "pytorchjob.kubeflow.org/pytest created\n"
    plane.wait(lambda: [p["status"].get("phase") for p in plane.json("get", "po")["items"]] == ["Running"] * 4,
               20, "four running pods")
    follow = Watch(plane, "logs", "-f", "pytest-master-0")
    follow.wait_for("^hello from 0$")

    r = plane.kubectl("delete", "-f", str(job), timeout=60)
    assert r.stdout == 'pytorchjob.kubeflow.org "pytest" deleted\n'
    leftovers = plane.kubectl("get", "pytorchjob,podgroup,po,svc", "-o", "name")
    assert leftovers.stdout == "" and leftovers.returncode == 0
    follow.proc.wait(10)  # the followed container was stopped, so the stream ended
    assert follow.lines == ["hello from 0"]


def test_no_request_got_a_5xx(plane):
    lines = (plane.home / "api-access.log").read_text().splitlines()
    assert len(lines) > 50 and any('"PATCH /apis/scheduling.volcano.sh/v1beta1/queues/default' in l for l in lines)
    failed = [line for line in lines if re.search(r'" 5\d\d ', line)]
    assert failed == []
