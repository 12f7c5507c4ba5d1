"""Access (issue 6, item 6), point by point: the API listens on loopback only,
speaks TLS 1.2+, wants the token on every request (logs, watch, openapi and
version included; never from the query string or a cookie: without one the
request is system:anonymous, refused with 403 as golden 62), writes its
credentials 0600 whatever the umask, and names reach a file path only once
validated: ``../`` as a pod, namespace or container name, through the API and
through the CLI, reads nothing. (Pods' argv and environment: tests/e2e/test_access.py.)"""
from __future__ import annotations

import asyncio
import copy
import http.client
import json
import os
import ssl
import stat
import threading
import urllib.parse
import warnings
from pathlib import Path
from typing import Any, Iterator

import pytest
from typer.testing import CliRunner

from phalanx.api.admission import admit
from phalanx.cli.controlplane import Endpoint, write_endpoint
from phalanx.cli.main import app as cli
from phalanx.client.local import LocalClient
from phalanx.node.logs import LogProvider, container_log_path
from phalanx.objects.clock import Clock
from phalanx.server.app import make_app, serve
from phalanx.server.tls import ensure_tls, ssl_context, write_kubeconfig
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(60)

TOKEN = "access-test-token-0123456789"
SECRET = "TOP-SECRET-CONTENT"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default"},
       "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}
JOB = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j1", "namespace": "default"},
       "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
           {"name": "pytorch", "image": "busybox", "command": ["true"]}]}}}}}}


class Served:
    """The real app over a real store and the node's LogProvider (TLS or not), on its own loop thread."""

    def __init__(self, home: Path, tls: bool) -> None:
        self.home = home
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.store = Store(None, Clock(), admission=admit)
        client = LocalClient(self.store)
        self.pod = self.store.create(copy.deepcopy(POD))
        self.store.create(copy.deepcopy(JOB))
        log = container_log_path(home, "default", "p1", self.pod["metadata"]["uid"], "main", 0)
        log.parent.mkdir(parents=True)
        log.write_text("hello from p1\n")
        # What a traversal would reach: files next to and above the pods' directory.
        for p in (home / "secret.log", home / "pods" / "secret.log", home / "pods" / "0.log"):
            p.write_text(SECRET + "\n")
        self.tls = ensure_tls(home / "tls") if tls else None
        application = make_app(client, TOKEN, log_provider=LogProvider(home, client))
        ctx = ssl_context(self.tls) if self.tls else None
        self.runner, self.url = asyncio.run_coroutine_threadsafe(serve(application, ssl_context=ctx),
                                                                 self.loop).result(30)
        parts = urllib.parse.urlsplit(self.url)
        self.host, self.port = parts.hostname, parts.port

    def request(self, method: str, path: str, token: str | None = TOKEN, body: Any = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        if self.tls is not None:
            ctx = ssl.create_default_context(cafile=str(self.tls.ca_cert))
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(self.host, self.port, context=ctx,
                                                                           timeout=10)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        hdrs = dict(headers or {})
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
        self.store.close()


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory) -> Iterator[Served]:
    s = Served(tmp_path_factory.mktemp("tls-home"), tls=True)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def plain_server(tmp_path) -> Iterator[Served]:
    s = Served(tmp_path / "home", tls=False)
    try:
        yield s
    finally:
        s.close()


# ---------------------------------------------------------------- loopback only

@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "192.168.1.10", "example.com", "127.0.0.1.nip.io"])
async def test_serve_refuses_every_non_loopback_address(host):
    with pytest.raises(ValueError, match="only loopback"):
        await serve(make_app(object(), TOKEN), host=host)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_serve_accepts_loopback(host):
    runner, url = await serve(make_app(object(), TOKEN), host=host)
    try:
        assert urllib.parse.urlsplit(url).hostname in ("127.0.0.1", "localhost")
    finally:
        await runner.cleanup()


# ---------------------------------------------------------------- TLS

def test_the_api_speaks_only_tls_1_2_or_later(tls_server):
    assert tls_server.url.startswith("https://127.0.0.1:")
    status, body = tls_server.request("GET", "/version")
    assert status == 200 and json.loads(body)["major"] == "1"
    # Plain HTTP to the TLS port gets no HTTP answer.
    plain = http.client.HTTPConnection(tls_server.host, tls_server.port, timeout=5)
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        plain.request("GET", "/version", headers={"Authorization": f"Bearer {TOKEN}"})
        plain.getresponse().read()
    plain.close()
    # TLS 1.1 is refused.
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(str(tls_server.tls.ca_cert))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            old.minimum_version = ssl.TLSVersion.TLSv1
            old.maximum_version = ssl.TLSVersion.TLSv1_1
        except (ValueError, ssl.SSLError):
            pytest.skip("this OpenSSL cannot even offer TLS 1.1")
    conn = http.client.HTTPSConnection(tls_server.host, tls_server.port, context=old, timeout=5)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        conn.request("GET", "/version")
    conn.close()


# ---------------------------------------------------------------- the token, on every request

ROUTES = [
    ("GET", "/version"), ("GET", "/healthz"), ("GET", "/api"), ("GET", "/apis"), ("GET", "/api/v1"),
    ("GET", "/openapi/v3"), ("GET", "/openapi/v3/apis/kubeflow.org/v1"), ("GET", "/openapi/v2"),
    ("GET", "/api/v1/namespaces/default/pods"), ("GET", "/api/v1/namespaces/default/pods?watch=true"),
    ("GET", "/api/v1/pods?watch=1&timeoutSeconds=1"), ("GET", "/api/v1/namespaces/default/pods/p1"),
    ("GET", "/api/v1/namespaces/default/pods/p1/log"), ("GET", "/api/v1/namespaces/default/pods/p1/log?follow=true"),
    ("GET", "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/j1/log"),
    ("POST", "/api/v1/namespaces/default/pods"), ("PUT", "/api/v1/namespaces/default/pods/p1"),
    ("PATCH", "/api/v1/namespaces/default/pods/p1"), ("DELETE", "/api/v1/namespaces/default/pods/p1"),
    ("POST", "/api/v1/namespaces/default/pods/p1/binding"), ("PUT", "/api/v1/namespaces/default/pods/p1/status"),
    ("GET", "/nope"), ("GET", "/"),
]
UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


@pytest.mark.parametrize("method, path", ROUTES)
def test_every_route_wants_the_token(tls_server, method, path):
    before = tls_server.store.current_rv()
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "intruder"}} if method != "GET" else None
    for token in ("wrong", TOKEN[:-1], TOKEN + "x", "a.b.c"):
        status, reply = tls_server.request(method, path, token=token, body=body)
        assert status == 401 and json.loads(reply) == UNAUTHORIZED, (token, status, reply[:200])
    sep = "&" if "?" in path else "?"
    for token, headers, where in ((None, {}, path), (None, {"Cookie": f"token={TOKEN}"}, path),
                                  (None, {"Authorization": f"Basic {TOKEN}"}, path),
                                  (None, {}, f"{path}{sep}access_token={TOKEN}&token={TOKEN}")):
        status, reply = tls_server.request(method, where, token=token, body=body, headers=headers)
        denied = json.loads(reply)
        assert status == 403 and denied["reason"] == "Forbidden", (headers, where, status, reply[:200])
        assert 'User "system:anonymous" cannot' in denied["message"]
    assert tls_server.store.current_rv() == before  # nothing reached the store
    assert SECRET.encode() not in reply


def test_a_web_page_gets_no_cors_grant(tls_server):
    """A browser may send a request to loopback, but may not add the token or read the answer."""
    origin = {"Origin": "https://evil.example", "Access-Control-Request-Method": "GET",
              "Access-Control-Request-Headers": "authorization"}
    for method in ("OPTIONS", "GET", "POST"):
        conn = http.client.HTTPSConnection(tls_server.host, tls_server.port, timeout=10,
                                           context=ssl.create_default_context(cafile=str(tls_server.tls.ca_cert)))
        try:
            conn.request(method, "/api/v1/namespaces/default/pods", headers=origin)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 403  # system:anonymous
            assert not [h for h in resp.headers if h.lower().startswith("access-control-")]
        finally:
            conn.close()


def test_with_the_token_the_same_routes_answer(tls_server):
    status, body = tls_server.request("GET", "/api/v1/namespaces/default/pods/p1/log")
    assert status == 200 and body == b"hello from p1\n"
    status, _ = tls_server.request("GET", "/openapi/v3")
    assert status == 200


# ---------------------------------------------------------------- credentials on disk

def test_credentials_are_written_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)  # the most permissive a user could have
    try:
        home = tmp_path / "home"
        home.mkdir()
        tls = ensure_tls(home / "tls")
        write_endpoint(home, Endpoint("https://127.0.0.1:1", TOKEN, os.getpid(), str(tls.ca_cert)))
        write_kubeconfig(home / "kubeconfig", "https://127.0.0.1:1", tls.ca_cert, TOKEN)
    finally:
        os.umask(old)

    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    assert mode(home / "api.json") == 0o600 and TOKEN in (home / "api.json").read_text()
    assert mode(home / "kubeconfig") == 0o600 and TOKEN in (home / "kubeconfig").read_text()
    assert mode(tls.ca_key) == 0o600 and mode(tls.server_key) == 0o600
    assert mode(home / "tls") == 0o700
    # Every file holding the token is private; the certificates are public by nature.
    for p in home.rglob("*"):
        if p.is_file() and (TOKEN.encode() in p.read_bytes() or b"PRIVATE KEY" in p.read_bytes()):
            assert mode(p) == 0o600, p


# ---------------------------------------------------------------- names before paths: the API

TRAVERSALS = ["..", "../secret", "..%2Fsecret", "..%2F..%2Fsecret", "%2e%2e", "%2e%2e%2fsecret", "p1%2F..%2F..",
              "secret.log", "..%00", "%00", "p1%2F..%2F..%2Fsecret"]


@pytest.mark.parametrize("name", TRAVERSALS)
def test_traversal_as_pod_or_namespace_name_reads_nothing(tls_server, name):
    for path in (f"/api/v1/namespaces/default/pods/{name}/log",
                 f"/api/v1/namespaces/{name}/pods/p1/log",
                 f"/api/v1/namespaces/default/pods/{name}/log?previous=true",
                 f"/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/{name}/log",
                 f"/apis/kubeflow.org/v1/namespaces/{name}/pytorchjobs/j1/log"):
        status, body = tls_server.request("GET", path)
        assert 400 <= status < 500, (path, status, body[:200])
        assert SECRET.encode() not in body and b"hello" not in body


@pytest.mark.parametrize("container", ["../main", "..", "../../secret.log", "main/../..", "main/0.log", "/etc/passwd",
                                       ".", "main\x00", "MAIN"])
def test_traversal_as_container_name_is_a_400_naming_the_container(tls_server, container):
    q = urllib.parse.quote(container, safe="")
    for path in (f"/api/v1/namespaces/default/pods/p1/log?container={q}",
                 f"/api/v1/namespaces/default/pods/p1/log?container={q}&previous=true",
                 f"/api/v1/namespaces/default/pods/gone/log?container={q}",
                 f"/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/j1/log?container={q}"):
        status, body = tls_server.request("GET", path)
        assert 400 <= status < 500, (path, status, body[:300])
        assert SECRET.encode() not in body
        reply = json.loads(body)
        assert reply["kind"] == "Status"
        if status == 400:
            assert "container" in reply["message"], reply


# ---------------------------------------------------------------- names before paths: the CLI

@pytest.fixture
def cli_home(plain_server, monkeypatch) -> Served:
    """A PHALANX_HOME whose api.json points the CLI at the test server."""
    home = plain_server.home
    write_endpoint(home, Endpoint(plain_server.url, TOKEN, os.getpid(), None))
    monkeypatch.setenv("PHALANX_HOME", str(home))
    return plain_server


@pytest.mark.parametrize("args", [
    ["logs", "../secret"], ["logs", "..", "-n", "default"], ["logs", "p1", "-c", "../../secret.log"],
    ["logs", "p1", "-n", "../x"], ["logs", "pytorchjob/../j1"], ["logs", "pytorchjob/j1", "-c", "../main"],
    ["logs", "p1/../../secret"], ["get", "pod", "../p1"], ["describe", "pod", "../p1"],
    ["delete", "pod", "../p1"], ["get", "pod", "p1", "-n", "../default"],
])
def test_cli_with_traversal_names_fails_cleanly_and_reads_nothing(cli_home, args):
    before = cli_home.store.current_rv()
    r = CliRunner().invoke(cli, args)
    assert r.exit_code != 0, r.output
    assert "Traceback" not in r.output and SECRET not in r.output and "hello from p1" not in r.output
    assert r.output.strip().startswith("error") or "Error" in r.output, r.output
    assert cli_home.store.current_rv() == before


def test_cli_reads_the_log_it_is_allowed_to(cli_home):
    r = CliRunner().invoke(cli, ["logs", "p1"])
    assert r.exit_code == 0 and r.output == "hello from p1\n", r.output
