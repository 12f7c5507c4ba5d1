"""`phalanx up --plain-kubernetes --no-controllers --no-scheduler`: an API server that behaves like
a plain kube-apiserver with the CRDs, calling the admission webhooks registered with it.

A test webhook server (HTTPS, test CA, in this process) is registered by URL; kubectl and the API
see what a kube-apiserver answers: allowed (with the webhook's warning), denied (its message),
mutated (the patch stored), unreachable with Fail and Ignore, a timeout. Jobs are stored as sent:
no Kubeflow defaults, and the seed P4 manifest (Master replicas 2) is accepted without a webhook.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from phalanx.client.rest import RestClient
from phalanx.objects.errors import ApiError
from tests.scenarios.conftest import load_example
from tests.webhookserver import DENY_MESSAGE, SLOW_SECONDS, WARNING, WebhookServer, configuration, hook

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PHALANX = [sys.executable, "-m", "phalanx.cli.main"]
KUBECTL = shutil.which("kubectl")


class Plane:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = dict(os.environ, PHALANX_HOME=str(home), KUBECONFIG=str(home / "kubeconfig"))

    def phalanx(self, *args: str) -> subprocess.CompletedProcess:
        r = subprocess.run([*PHALANX, *args], env=self.env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"phalanx {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        if KUBECTL is None:
            pytest.fail("kubectl is not on PATH: it is part of the machine image (/usr/bin/kubectl)", pytrace=False)
        r = subprocess.run([KUBECTL, *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=60)
        if check:
            assert r.returncode == 0, f"kubectl {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    def rest(self) -> RestClient:
        api = json.loads((self.home / "api.json").read_text())
        return RestClient(api["url"], api["token"], ca_cert=api["ca"])


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    home = tmp_path_factory.mktemp("plain") / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({"nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}]}))
    p = Plane(home)
    r = p.phalanx("up", "--plain-kubernetes", "--no-controllers", "--no-scheduler")
    p.startup_line = r.stderr
    yield p
    subprocess.run([*PHALANX, "down"], env=p.env, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = WebhookServer(tmp_path_factory.mktemp("hooktls")).start()
    yield s
    s.stop()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def registered(plane, server):
    """Validating and mutating configurations for configmaps, one webhook per ``case`` label."""
    dead = f"https://127.0.0.1:{_closed_port()}/hook"
    ca = server.ca_bundle
    validating = configuration("ValidatingWebhookConfiguration", "test-validating", [
        hook("allow.phalanx.test", {"url": server.url("/allow"), "caBundle": ca}, case="allow"),
        hook("deny.phalanx.test", {"url": server.url("/deny"), "caBundle": ca}, case="deny"),
        hook("fail.phalanx.test", {"url": dead, "caBundle": ca}, case="fail"),
        hook("ignore.phalanx.test", {"url": dead, "caBundle": ca}, case="ignore", failurePolicy="Ignore"),
        hook("slow.phalanx.test", {"url": server.url("/slow"), "caBundle": ca}, case="slow", timeoutSeconds=1),
    ])
    mutating = configuration("MutatingWebhookConfiguration", "test-mutating", [
        hook("mutate.phalanx.test", {"url": server.url("/mutate"), "caBundle": ca}, case="mutate")])
    out = plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([validating, mutating]))
    assert "validatingwebhookconfiguration.admissionregistration.k8s.io/test-validating created" in out.stdout
    return dead


def _cm(name: str, case: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name, "namespace": "default", "labels": {"case": case}},
                           "data": {"k": "v"}})


def test_the_startup_line_says_the_mode(plane):
    assert "plain Kubernetes API" in plane.startup_line
    assert "without job controller and scheduler" in plane.startup_line


def test_allowed_with_the_webhooks_warning(plane, server, registered):
    r = plane.kubectl("create", "-f", "-", stdin=_cm("allowed", "allow"))
    assert r.stdout.strip() == "configmap/allowed created"
    assert f"Warning: {WARNING}" in r.stderr
    path, req = [x for x in server.reviews if x[1]["name"] == "allowed"][-1]
    assert path == "/allow" and req["operation"] == "CREATE" and req["object"]["data"] == {"k": "v"}


def test_denied_through_kubectl_and_the_api(plane, registered):
    r = plane.kubectl("create", "-f", "-", stdin=_cm("denied", "deny"), check=False)
    assert r.returncode != 0
    assert r.stderr.strip() == (f'Error from server (Forbidden): error when creating "STDIN": admission webhook '
                                f'"deny.phalanx.test" denied the request: {DENY_MESSAGE}')
    with pytest.raises(ApiError) as e:
        plane.rest().create(yaml.safe_load(_cm("denied", "deny")))
    assert e.value.code == 403
    assert e.value.message == f'admission webhook "deny.phalanx.test" denied the request: {DENY_MESSAGE}'
    assert plane.kubectl("get", "configmap", "denied", check=False).returncode != 0


def test_mutated_on_create_and_on_patch(plane, registered):
    plane.kubectl("create", "-f", "-", stdin=_cm("mutated", "mutate"))
    got = json.loads(plane.kubectl("get", "configmap", "mutated", "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"case": "mutate", "mutated": "yes"}
    plane.kubectl("label", "configmap", "mutated", "mutated-")  # the webhook puts it back on the update
    plane.kubectl("patch", "configmap", "mutated", "-p", '{"data":{"k":"w"}}')
    got = json.loads(plane.kubectl("get", "configmap", "mutated", "-o", "json").stdout)
    assert got["metadata"]["labels"]["mutated"] == "yes" and got["data"] == {"k": "w"}


def test_unreachable_webhook_fail_and_ignore(plane, registered):
    r = plane.kubectl("create", "-f", "-", stdin=_cm("failed", "fail"), check=False)
    host = registered.split("//")[1].split("/")[0]
    assert r.stderr.strip() == (
        f'Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed calling '
        f'webhook "fail.phalanx.test": failed to call webhook: Post "{registered}?timeout=10s": dial tcp {host}: '
        f'connect: connection refused')
    r = plane.kubectl("create", "-f", "-", stdin=_cm("ignored", "ignore"))
    assert r.stdout.strip() == "configmap/ignored created"


def test_timeout(plane, server, registered):
    t0 = time.monotonic()
    r = plane.kubectl("create", "-f", "-", stdin=_cm("slow", "slow"), check=False)
    assert time.monotonic() - t0 < SLOW_SECONDS + 1.5
    assert r.stderr.strip().endswith(f'failed calling webhook "slow.phalanx.test": failed to call webhook: Post '
                                     f'"{server.url("/slow")}?timeout=1s": context deadline exceeded')


def test_a_job_is_stored_as_sent_and_p4_is_accepted(plane):
    job = load_example("pytorchjob.yaml")[0]
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2  # P4: only the operator's webhook refuses it
    r = plane.kubectl("create", "-f", "-", stdin=yaml.safe_dump(job))
    assert r.stdout.strip() == "pytorchjob.kubeflow.org/pytest created"
    got = json.loads(plane.kubectl("get", "pytorchjob", "pytest", "-o", "json").stdout)
    assert got["spec"] == job["spec"]  # no defaults: no cleanPodPolicy, restartPolicy, ports, nproc
    plane.kubectl("delete", "pytorchjob", "pytest", "--wait=false")


def test_schema_validation_stays(plane):
    job = load_example("pytorchjob.yaml")[0]
    job["metadata"]["name"] = "badschema"
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "two"
    r = plane.kubectl("create", "--validate=false", "-f", "-", stdin=yaml.safe_dump(job), check=False)
    assert r.returncode != 0 and "replicas" in r.stderr and "must be of type integer" in r.stderr
