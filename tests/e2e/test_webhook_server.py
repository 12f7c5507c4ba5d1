"""`phalanx operator`'s admission webhook server, as a process against `phalanx up
--no-controllers --no-scheduler`: it creates the certificate Secret, injects the CA into
the configurations `phalanx install --webhook-url` registered, and answers AdmissionReviews
over HTTPS with a certificate that verifies against that CA."""
from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from phalanx.client.kube import KubeClient
from phalanx.client.kubeconfig import from_kubeconfig
from phalanx.controller.webhook.certs import make_ca
from phalanx.objects.clock import Clock
from tests.e2e.test_split_deployment import NODE, PHALANX, SplitPlane
from tests.scenarios.conftest import load_example, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
NS = "phalanx-system"
SECRET = "phalanx-operator-webhook-cert"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def operator(tmp_path_factory):
    """The plane, the install output (webhooks at the operator's loopback URL) applied, and
    an operator with its webhook server on a free port."""
    home = tmp_path_factory.mktemp("webhook") / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({"nodes": [NODE]}))
    plane = SplitPlane(home)
    plane.cli("up", "--no-controllers", "--no-scheduler")
    port = free_port()
    cert_dir = home / "certs"
    log = home / "operator.log"
    proc = None
    try:
        plane.cli("install", "--apply", "--kubeconfig", str(plane.kubeconfig),
                  "--webhook-url", f"https://127.0.0.1:{port}")
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [*PHALANX, "operator", "--kubeconfig", str(plane.kubeconfig), "--webhook-server-port", str(port),
                 "--webhook-cert-dir", str(cert_dir), "-v"],
                env=plane.env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
        deadline = time.monotonic() + 30
        marker = f"webhook server: serving on https://127.0.0.1:{port}"
        while marker not in log.read_text():
            assert proc.poll() is None, f"operator exited with {proc.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"webhook server did not start:\n{log.read_text()}"
            time.sleep(0.05)
        yield {"plane": plane, "port": port, "cert_dir": cert_dir, "log": log}
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)
        subprocess.run([*PHALANX, "down"], env=plane.env, capture_output=True, timeout=60)


async def secret_data(operator) -> dict[str, bytes]:
    c = KubeClient(from_kubeconfig(operator["plane"].kubeconfig), qps=0)
    try:
        s = await c.get("Secret", SECRET, NS)
    finally:
        await c.close()
    return {k: base64.b64decode(v) for k, v in (s.get("data") or {}).items()}


def post(operator, ca: bytes, path: str, body: bytes) -> tuple[int, dict, bytes]:
    """POST over HTTPS, verifying the server against ``ca`` (hostname 127.0.0.1: an IP SAN)."""
    ctx = ssl.create_default_context(cadata=ca.decode())
    conn = http.client.HTTPSConnection("127.0.0.1", operator["port"], context=ctx, timeout=20)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert conn.sock is not None
        peer = conn.sock.getpeercert(binary_form=True) or b""
        return resp.status, json.loads(resp.read()), peer
    finally:
        conn.close()


def review(obj: dict, uid: str = "e2e-uid", operation: str = "CREATE") -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": uid, "operation": operation, "namespace": "default", "object": obj,
                                   "oldObject": None}}).encode()


async def test_secret_created_and_ca_injected(operator):
    data = await secret_data(operator)
    assert set(data) >= {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    files = Path(operator["cert_dir"])
    assert (files / "tls.crt").read_bytes() == data["tls.crt"]
    c = KubeClient(from_kubeconfig(operator["plane"].kubeconfig), qps=0)
    bundle = base64.b64encode(data["ca.crt"]).decode()

    async def injected() -> bool:
        for kind, name in (("ValidatingWebhookConfiguration", "validator.training-operator.kubeflow.org"),
                           ("MutatingWebhookConfiguration", "defaulter.training-operator.kubeflow.org")):
            cfg = await c.get(kind, name)
            if any(h["clientConfig"].get("caBundle") != bundle for h in cfg["webhooks"]):
                return False
        return True

    try:
        await wait_until(injected, 20, "the CA in every webhook's caBundle")
    finally:
        await c.close()


async def test_served_certificate_verifies_against_the_secrets_ca(operator):
    data = await secret_data(operator)
    job = load_example("pytorchjob.yaml")[0]
    status, out, peer = post(operator, data["ca.crt"], "/validate-kubeflow-org-v1-pytorchjob", review(job))
    assert status == 200 and out["response"] == {"uid": "e2e-uid", "allowed": True}
    assert peer == x509.load_pem_x509_certificate(data["tls.crt"]).public_bytes(Encoding.DER)
    # Another CA does not verify it.
    with pytest.raises(ssl.SSLCertVerificationError):
        post(operator, make_ca(Clock().now()).cert_pem, "/validate-kubeflow-org-v1-pytorchjob", review(job))


async def test_p4_denied_over_https_with_the_originals_message(operator):
    data = await secret_data(operator)
    job = load_example("pytorchjob.yaml")[0]
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    status, out, _ = post(operator, data["ca.crt"], "/validate-kubeflow-org-v1-pytorchjob", review(job, "p4"))
    assert status == 200
    assert out["response"] == {"uid": "p4", "allowed": False, "status": {
        "status": "Failure", "code": 403, "reason": "Forbidden",
        "message": "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"}}


async def test_defaults_as_a_patch_and_bad_bodies(operator):
    data = await secret_data(operator)
    job = load_example("tfjob.yaml")[0]
    status, out, _ = post(operator, data["ca.crt"], "/mutate-kubeflow-org-v1-tfjob", review(job))
    assert status == 200 and out["response"]["allowed"] is True and out["response"]["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(out["response"]["patch"]))
    assert patch[0]["op"] == "add" and patch[0]["path"] == "/spec"
    assert patch[0]["value"]["runPolicy"]["cleanPodPolicy"] == "None"
    for body in (b"", b"{", b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}'):
        status, out, _ = post(operator, data["ca.crt"], "/validate-kubeflow-org-v1-tfjob", body)
        assert status == 400 and out["code"] == 400
    status, _, _ = post(operator, data["ca.crt"], "/nowhere", review(job))
    assert status == 404
    # The operator is still serving after all of that.
    status, out, _ = post(operator, data["ca.crt"], "/validate-kubeflow-org-v1-tfjob", review(job))
    assert status == 200 and out["response"]["allowed"] is True
