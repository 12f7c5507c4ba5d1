"""RBAC on the embedded API server, as on a cluster: `phalanx up --no-controllers --no-scheduler`,
`phalanx install | kubectl apply -f -`, `kubectl create token` for the generated ServiceAccounts; with
those tokens kubectl reads what the roles grant and is refused the rest in the kube-apiserver's words,
`kubectl auth can-i` and `whoami` answer, and `phalanx operator` and `phalanx scheduler`, each with its
own token (least privilege), run the seed PyTorchJob to Succeeded. A deleted ServiceAccount's token
stops working.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.scenarios.conftest import load_example, scaled

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

PHALANX = [sys.executable, "-m", "phalanx.cli.main"]
NS = "phalanx-system"
OPERATOR = f"system:serviceaccount:{NS}:phalanx-operator"
SCHEDULER = f"system:serviceaccount:{NS}:phalanx-scheduler"


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.05)


class Plane:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = dict(os.environ, PHALANX_HOME=str(home), KUBECONFIG=str(home / "kubeconfig"))
        self.procs: dict[str, subprocess.Popen] = {}
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            pytest.fail("kubectl is not on PATH: it is part of the machine image (1.32) and this test needs it",
                        pytrace=False)
        self.kubectl_bin = kubectl

    def phalanx(self, *args: str) -> str:
        r = subprocess.run([*PHALANX, *args], env=self.env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"phalanx {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r.stdout

    def kubectl(self, *args: str, token: str | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
        auth = [f"--token={token}"] if token else []
        return subprocess.run([self.kubectl_bin, *auth, *args], env=self.env, input=stdin, capture_output=True,
                              text=True, timeout=60)

    def kubeconfig_with(self, token: str, name: str) -> Path:
        """The admin kubeconfig (server, CA) with the ServiceAccount's token in place of the admin's."""
        config = yaml.safe_load((self.home / "kubeconfig").read_text())
        config["users"][0]["user"] = {"token": token}
        path = self.home / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def start(self, what: str, kubeconfig: Path, *extra: str) -> None:
        log = self.home / f"{what}.log"
        with open(log, "ab") as out:
            self.procs[what] = subprocess.Popen([*PHALANX, what, "--kubeconfig", str(kubeconfig), "-v", *extra],
                                                env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                                start_new_session=True)

        def connected() -> bool:
            proc = self.procs[what]
            assert proc.poll() is None, f"{what} exited with {proc.returncode}:\n{log.read_text()}"
            return f"phalanx {what}: " in log.read_text()

        wait_for(connected, 20, f"{what} connected")

    def log(self, what: str) -> str:
        return (self.home / f"{what}.log").read_text()


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    home = tmp_path_factory.mktemp("rbac") / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({
        "nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}], "agent": {"backoffBase": 0.2, "backoffCap": 2}}))
    p = Plane(home)
    p.phalanx("up", "--no-controllers", "--no-scheduler")
    try:
        r = p.kubectl("apply", "-f", "-", stdin=p.phalanx("install"))
        assert r.returncode == 0, r.stderr
        yield p
    finally:
        for proc in p.procs.values():
            with contextlib.suppress(Exception):
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=20)
        subprocess.run([*PHALANX, "down"], env=p.env, capture_output=True, timeout=60)


def create_token(plane: Plane, name: str, *extra: str) -> str:
    r = plane.kubectl("create", "token", name, "-n", NS, *extra)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_kubectl_create_token_gives_the_service_accounts_jwt(plane):
    token = create_token(plane, "phalanx-operator")
    r = plane.kubectl("get", "serviceaccount", "phalanx-operator", "-n", NS, "-o", "jsonpath={.metadata.uid}")
    header, payload = (json.loads(_b64(part)) for part in token.split(".")[:2])
    assert header["alg"] == "RS256" and header["kid"]
    assert payload["sub"] == OPERATOR and payload["exp"] - payload["iat"] == 3600
    assert payload["kubernetes.io"] == {"namespace": NS, "serviceaccount": {"name": "phalanx-operator",
                                                                            "uid": r.stdout}}
    longer = create_token(plane, "phalanx-operator", "--duration=2h")
    payload = json.loads(_b64(longer.split(".")[1]))
    assert payload["exp"] - payload["iat"] == 7200
    assert oct((plane.home / "service-account.key").stat().st_mode & 0o777) == "0o600"
    r = plane.kubectl("create", "token", "nobody", "-n", NS)
    assert r.returncode == 1 and r.stderr.strip() == 'error: failed to create token: serviceaccounts "nobody" not found'
    r = plane.kubectl("create", "token", "phalanx-operator", "-n", NS, "--duration=5m")
    assert r.stderr.strip() == ('error: failed to create token: TokenRequest.authentication.k8s.io "" is invalid: '
                                'spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 '
                                'minutes')


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def test_the_operators_token_reads_what_its_role_grants_and_nothing_more(plane):
    token = create_token(plane, "phalanx-operator")
    for args in (("get", "pods", "-A"), ("get", "pytorchjobs", "-A"), ("get", "podgroups", "-n", "default"),
                 ("get", "services", "-n", "default"), ("api-resources",)):
        r = plane.kubectl(*args, token=token)
        assert r.returncode == 0, (args, r.stderr)
    r = plane.kubectl("create", "namespace", "intruder", token=token)
    assert r.returncode == 1 and r.stderr.strip() == (
        f'Error from server (Forbidden): namespaces is forbidden: User "{OPERATOR}" cannot create resource '
        '"namespaces" in API group "" at the cluster scope')
    r = plane.kubectl("get", "nodes", token=token)
    assert r.stderr.strip() == (f'Error from server (Forbidden): nodes is forbidden: User "{OPERATOR}" cannot list '
                                'resource "nodes" in API group "" at the cluster scope')
    r = plane.kubectl("delete", "pytorchjob", "nope", "-n", "default", token=token)
    assert "NotFound" in r.stderr  # delete is granted: the answer is about the job
    r = plane.kubectl("get", "secrets", "-n", "default", token=token)
    assert r.stderr.strip() == (f'Error from server (Forbidden): secrets is forbidden: User "{OPERATOR}" cannot '
                                'list resource "secrets" in API group "" in the namespace "default"')
    assert plane.kubectl("get", "namespaces").stdout.count("intruder") == 0


def test_kubectl_auth_can_i_and_whoami(plane):
    op, sch = create_token(plane, "phalanx-operator"), create_token(plane, "phalanx-scheduler")
    # (`pods/x` names a pod x for kubectl auth can-i; a subresource is --subresource)
    cases = [(op, ("create", "pods"), "yes"), (op, ("delete", "pytorchjobs.kubeflow.org"), "yes"),
             (op, ("create", "pods", "--subresource=exec"), "yes"), (op, ("list", "nodes"), "no"),
             (op, ("create", "pods", "--subresource=binding"), "no"), (op, ("watch", "pods/p1"), "yes"),
             (sch, ("create", "pods", "--subresource=binding"), "yes"), (sch, ("list", "nodes"), "yes"),
             (sch, ("create", "pods"), "no"), (sch, ("update", "queues", "--subresource=status"), "yes"),
             (sch, ("update", "queues"), "no"), (sch, ("get", "/healthz"), "yes"), (sch, ("get", "/metrics"), "no")]
    for token, args, want in cases:
        r = plane.kubectl("auth", "can-i", *args, "-n", "default", token=token)
        assert r.stdout.strip() == want and r.returncode == (0 if want == "yes" else 1), (args, r)
    r = plane.kubectl("auth", "whoami", "-o", "json", token=sch)
    info = json.loads(r.stdout)["status"]["userInfo"]
    assert info["username"] == SCHEDULER
    assert info["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"]
    assert plane.kubectl("auth", "can-i", "delete", "nodes").stdout.strip() == "yes"  # the admin


def test_operator_and_scheduler_each_with_its_own_token_run_the_seed_job(plane):
    operator = plane.kubeconfig_with(create_token(plane, "phalanx-operator"), "operator")
    scheduler = plane.kubeconfig_with(create_token(plane, "phalanx-scheduler"), "scheduler")
    access_log = plane.home / "api-access.log"
    before = access_log.read_text().count("\n")
    # Against Phalanx's node agents the operator is told so: its role has no Nodes to look at.
    plane.start("operator", operator, "--local-runtime=true")
    plane.start("scheduler", scheduler)
    job = scaled(load_example("pytorchjob.yaml")[0], 2)
    r = plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(job))
    assert r.returncode == 0, r.stderr

    def state() -> str:
        r = plane.kubectl("get", "pytorchjob", "pytest", "-n", "default", "-o",
                          "jsonpath={.status.conditions[-1].type}")
        return r.stdout if r.stdout in ("Succeeded", "Failed") else ""

    assert wait_for(state, 60, "the job finished") == "Succeeded", plane.log("operator")
    wait_for(lambda: plane.kubectl("get", "podgroups", "-n", "default", "-o", "name").stdout == "", 15,
             "the PodGroup deleted")
    # The job Succeeds with its Master; the workers end their own sleep a moment later.
    def phases() -> list[str] | None:
        got = plane.kubectl("get", "pods", "-n", "default", "-o", "jsonpath={.items[*].status.phase}").stdout.split()
        return got if got == ["Succeeded"] * 4 else None

    wait_for(phases, 20, "every pod Succeeded")
    refused = [line for line in access_log.read_text().splitlines()[before:] if re.search(r'" 40[13] ', line)]
    assert refused == [], refused  # least privilege, but every call the programs make is granted
    for what in ("operator", "scheduler"):
        assert "forbidden" not in plane.log(what).lower(), plane.log(what)


def test_a_deleted_service_accounts_tokens_stop_working(plane):
    token = create_token(plane, "phalanx-scheduler")
    assert plane.kubectl("get", "nodes", token=token).returncode == 0
    for what in list(plane.procs):
        proc = plane.procs.pop(what)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    r = plane.kubectl("delete", "serviceaccount", "phalanx-scheduler", "-n", NS)
    assert r.returncode == 0, r.stderr

    def refused() -> str:
        r = plane.kubectl("get", "nodes", token=token)
        return r.stderr.strip() if r.returncode else ""

    assert wait_for(refused, 10, "the token refused") == "error: You must be logged in to the server (Unauthorized)"
    plane.kubectl("apply", "-f", "-", stdin=plane.phalanx("install"))  # the same name again, another uid
    assert plane.kubectl("get", "nodes", token=token).returncode == 1
    assert plane.kubectl("get", "nodes", token=create_token(plane, "phalanx-scheduler")).returncode == 0
