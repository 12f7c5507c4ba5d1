"""The HTTP API surface kubectl needs beyond CRUD: Tables for list/get/watch,
bookmarks, list options, fieldValidation, DeleteOptions and foreground deletion
of jobs, OpenAPI routes, log timestamps, the access log and HTTPS."""
from __future__ import annotations

import asyncio
import json
import logging
import re
from types import SimpleNamespace
from typing import Any, AsyncIterator

import aiohttp
import pytest

from phalanx.api.admission import admit
from phalanx.client.http import HttpClient
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import ApiError
from phalanx.server.app import make_app, serve
from phalanx.server.openapi import document_hash
from phalanx.server.tls import ensure_tls, ssl_context
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(30)

TOKEN = "kubectl-surface-token"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
JOBS = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
PODS = "/api/v1/namespaces/default/pods"
TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
         "application/json")


def queue(name: str, weight: int = 1) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": weight}}


def job(name: str = "pytest", **run_policy: Any) -> dict:
    replica = {"replicas": 1, "restartPolicy": "OnFailure",
               "template": {"spec": {"containers": [{"name": "pytorch", "image": "busybox",
                                                     "command": ["sleep", "1"]}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"runPolicy": {"backoffLimit": 3, **run_policy}, "pytorchReplicaSpecs": {"Master": replica}}}


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1"]}]}}


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class Logs:
    """A log provider whose log is fixed text."""

    def __init__(self, text: bytes) -> None:
        self.text = text

    async def open(self, namespace, pod, container, previous, follow, tail) -> AsyncIterator[bytes]:
        yield self.text[:3]
        yield self.text[3:]


@pytest.fixture
async def api():
    clock = FakeClock()
    store = Store(None, clock, admission=admit, history_size=50)
    lines = Lines()
    logger = logging.getLogger("test.server.kubectl.access")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(lines)
    app = make_app(LocalClient(store), TOKEN, log_provider=Logs(b"first\nsecond\n"), clock=clock,
                   bookmark_interval=0.05, access_log=logger)
    runner, url = await serve(app)
    session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})
    client = HttpClient(url, TOKEN)
    try:
        yield SimpleNamespace(url=url, store=store, clock=clock, raw=session, client=client, access=lines)
    finally:
        logger.removeHandler(lines)
        await session.close()
        await client.close()
        await runner.cleanup()


async def call(api, method: str, path: str, body: Any = None, content_type: str = "application/json",
               headers: dict | None = None) -> tuple[int, Any, Any]:
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": content_type} if data is not None else {}
    hdrs.update(headers or {})
    async with api.raw.request(method, api.url + path, data=data, headers=hdrs) as resp:
        text = await resp.text()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        return resp.status, parsed, resp.headers


async def watch_lines(api, path: str, params: dict, n: int, headers: dict | None = None) -> list[dict]:
    async with api.raw.get(api.url + path, params=params, headers=headers or {}) as resp:
        assert resp.status == 200
        out = []
        while len(out) < n:
            line = await asyncio.wait_for(resp.content.readline(), 5)
            assert line, f"stream ended after {out}"
            out.append(json.loads(line))
        return out


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------

async def test_list_and_get_answer_a_table_when_kubectl_asks(api):
    await api.client.create(job())
    api.clock.advance(125)
    status, table, headers = await call(api, "GET", JOBS + "?limit=500", headers={"Accept": TABLE})
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "State", "Age"]
    assert table["metadata"]["resourceVersion"] == api.store.current_rv()
    row = table["rows"][0]
    assert row["cells"] == ["pytest", None, "2m5s"]  # no status yet; the age rendered by the server
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "pytest"

    status, one, _ = await call(api, "GET", JOBS + "/pytest?includeObject=Object", headers={"Accept": TABLE})
    assert status == 200 and len(one["rows"]) == 1 and one["rows"][0]["object"]["kind"] == "PyTorchJob"
    _, none, _ = await call(api, "GET", JOBS + "?includeObject=None", headers={"Accept": TABLE})
    assert none["rows"][0]["object"] is None
    status, body, _ = await call(api, "GET", JOBS + "?includeObject=All", headers={"Accept": TABLE})
    assert status == 400 and 'includeObject: Unsupported value: "All"' in body["message"]
    # Plain JSON otherwise (kubectl get -o yaml).
    _, plain, _ = await call(api, "GET", JOBS + "/pytest", headers={"Accept": "application/json"})
    assert plain["kind"] == "PyTorchJob"


async def test_a_table_watch_sends_one_row_tables(api):
    await api.client.create(queue("before"))
    rv = api.store.current_rv()
    task = asyncio.ensure_future(watch_lines(api, QUEUES, {"watch": "true", "resourceVersion": rv}, 2,
                                             headers={"Accept": TABLE}))
    await asyncio.sleep(0.05)
    await api.client.create(queue("q1"))
    patched = await api.client.patch("Queue", "q1", None, {"spec": {"weight": 4}})
    added, modified = await task
    assert added["type"] == "ADDED" and added["object"]["kind"] == "Table"
    assert [c["name"] for c in added["object"]["columnDefinitions"] if not c["priority"]] == ["Name", "PARENT"]
    assert added["object"]["rows"][0]["cells"][:2] == ["q1", "root"]
    assert modified["type"] == "MODIFIED" and modified["object"]["rows"][0]["cells"][:3] == ["q1", "root", "4"]
    assert modified["object"]["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


@pytest.mark.parametrize("flag", ["true", "1", "True", "t"])
async def test_watch_flag_is_go_parse_bool(api, flag):
    await api.client.create(queue("q1"))
    (ev,) = await watch_lines(api, QUEUES, {"watch": flag}, 1)
    assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "q1")


# --------------------------------------------------------------------------
# Bookmarks and list options
# --------------------------------------------------------------------------

async def test_bookmarks_carry_the_newest_resource_version_seen(api):
    await api.client.create(queue("watched"))
    start = api.store.current_rv()
    params = {"watch": "true", "resourceVersion": start, "allowWatchBookmarks": "true",
              "fieldSelector": "metadata.name=watched"}
    task = asyncio.ensure_future(watch_lines(api, QUEUES, params, 1))
    await asyncio.sleep(0.02)
    other = await api.client.create(queue("other"))  # filtered out, but the stream saw its resourceVersion
    (bookmark,) = await task
    assert bookmark == {"type": "BOOKMARK", "object": {
        "kind": "Queue", "apiVersion": "scheduling.volcano.sh/v1beta1",
        "metadata": {"resourceVersion": other["metadata"]["resourceVersion"]}}}


async def test_no_bookmark_for_a_resource_version_the_client_has(api):
    start = api.store.current_rv()
    params = {"watch": "true", "resourceVersion": start, "allowWatchBookmarks": "true", "timeoutSeconds": "1"}
    async with api.raw.get(api.url + QUEUES, params=params) as r:
        task = asyncio.ensure_future(r.read())
        await asyncio.sleep(0.02)
        await api.client.create(queue("q1"))
        lines = (await asyncio.wait_for(task, 5)).decode().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["ADDED"]


async def test_no_bookmark_unless_allowed(api):
    start = api.store.current_rv()
    async with api.raw.get(api.url + QUEUES, params={"watch": "true", "resourceVersion": start,
                                                     "fieldSelector": "metadata.name=x", "timeoutSeconds": "1"}) as r:
        task = asyncio.ensure_future(r.read())
        await asyncio.sleep(0.02)
        await api.client.create(queue("other"))
        assert await asyncio.wait_for(task, 5) == b""


@pytest.mark.parametrize("query, code, words", [
    ("resourceVersionMatch=NotOlderThan", 422, "resourceVersionMatch is forbidden unless resourceVersion is provided"),
    ("resourceVersion=0&resourceVersionMatch=Exact", 422, 'resourceVersionMatch "exact" is forbidden'),
    ("resourceVersion=1&resourceVersionMatch=Latest", 422, 'resourceVersionMatch: Unsupported value: "Latest"'),
    ("resourceVersion=1&resourceVersionMatch=Exact", 410, "too old resource version: 1 (2)"),
    ("resourceVersion=abc", 400, 'resourceVersion: Invalid value: "abc"'),
    ("watch=true&resourceVersion=1&resourceVersionMatch=NotOlderThan", 422, "forbidden for watch"),
])
async def test_list_options_are_validated(api, query, code, words):
    await api.client.create(queue("q1"))
    await api.client.create(queue("q2"))
    status, body, _ = await call(api, "GET", QUEUES + "?" + query)
    assert status == code and words in body["message"], body


async def test_list_with_resource_version_is_served_from_now(api):
    await api.client.create(queue("q1"))
    rv = api.store.current_rv()
    for query in ("resourceVersion=0", f"resourceVersion={rv}&resourceVersionMatch=NotOlderThan",
                  f"resourceVersion={rv}&resourceVersionMatch=Exact", "fieldSelector=metadata.name%3Dq1"):
        status, body, _ = await call(api, "GET", QUEUES + "?" + query)
        assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["q1"], query


# --------------------------------------------------------------------------
# fieldValidation
# --------------------------------------------------------------------------

async def test_strict_create_is_golden_29s_400(api):
    status, body, _ = await call(api, "POST", JOBS + "?fieldManager=kubectl-client-side-apply&fieldValidation=Strict",
                                 job(backoffLimits=3))
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == ('PyTorchJob in version "v1" cannot be handled as a PyTorchJob: strict decoding error: '
                               'unknown field "spec.runPolicy.backoffLimits"')


async def test_warn_and_ignore_drop_unknown_fields_and_report_them(api):
    status, created, headers = await call(api, "POST", JOBS + "?fieldValidation=Warn", job(backoffLimits=3))
    assert status == 201 and "backoffLimits" not in created["spec"]["runPolicy"]
    assert headers.getall("Warning") == ['299 - "unknown field \\"spec.runPolicy.backoffLimits\\""']
    created["spec"]["runPolicy"]["activeDeadline"] = 5
    status, updated, headers = await call(api, "PUT", JOBS + "/pytest?fieldValidation=Ignore", created)
    assert status == 200 and "activeDeadline" not in updated["spec"]["runPolicy"]
    assert headers.getall("Warning") == ['299 - "unknown field \\"spec.runPolicy.activeDeadline\\""']
    status, body, _ = await call(api, "POST", JOBS + "?fieldValidation=strict", job("other"))
    assert status == 400 and "fieldValidation: Unsupported value" in body["message"]


async def test_patch_with_an_unknown_field(api):
    await api.client.create(job())
    patch = {"spec": {"runPolicy": {"backoffLimits": 3}}}
    status, body, _ = await call(api, "PATCH", JOBS + "/pytest?fieldValidation=Strict", patch,
                                 content_type="application/merge-patch+json")
    assert status == 422 and body["reason"] == "Invalid"  # docs/REFERENCE.md golden 36
    assert body["message"].startswith(' "" is invalid: patch: Invalid value: "{\\"apiVersion\\":\\"kubeflow.org/v1\\"')
    assert body["message"].endswith('": strict decoding error: unknown field "spec.runPolicy.backoffLimits"')
    assert body["details"]["causes"][0]["field"] == "patch" and "name" not in body["details"]

    status, patched, headers = await call(api, "PATCH", JOBS + "/pytest?fieldValidation=Warn",
                                          {"spec": {"runPolicy": {"backoffLimits": 3, "backoffLimit": 5}}},
                                          content_type="application/merge-patch+json")
    assert status == 200 and patched["spec"]["runPolicy"]["backoffLimit"] == 5
    assert "backoffLimits" not in patched["spec"]["runPolicy"] and len(headers.getall("Warning")) == 1
    status, patched, _ = await call(api, "PATCH", JOBS + "/pytest?fieldValidation=Ignore",
                                    [{"op": "add", "path": "/spec/runPolicy/extra", "value": 1}],
                                    content_type="application/json-patch+json")
    assert status == 200 and "extra" not in patched["spec"]["runPolicy"]


# --------------------------------------------------------------------------
# Deletion
# --------------------------------------------------------------------------

async def test_a_job_is_deleted_in_the_foreground_even_when_background_is_asked(api):
    await api.client.create(job())
    status, body, _ = await call(api, "DELETE", JOBS + "/pytest", {"propagationPolicy": "Background"})
    assert status == 200 and body["kind"] == "PyTorchJob"  # docs/REFERENCE.md golden 35: the object, still there
    assert body["metadata"]["finalizers"] == ["foregroundDeletion"] and body["metadata"]["deletionTimestamp"]
    assert api.store.get("PyTorchJob", "pytest", "default")["metadata"]["deletionGracePeriodSeconds"] == 0


async def test_orphan_is_honoured_and_options_come_from_the_query_too(api):
    await api.client.create(job())
    status, body, _ = await call(api, "DELETE", JOBS + "/pytest?propagationPolicy=Orphan")
    assert status == 200 and body["metadata"]["finalizers"] == ["orphan"]
    await api.client.create(queue("q1"))
    status, body, _ = await call(api, "DELETE", QUEUES + "/q1?propagationPolicy=Foreground")
    assert body["metadata"]["finalizers"] == ["foregroundDeletion"]


async def test_delete_preconditions(api):
    created = await api.client.create(queue("q1"))
    rv = created["metadata"]["resourceVersion"]
    status, body, _ = await call(api, "DELETE", QUEUES + "/q1", {"preconditions": {"resourceVersion": "99"}})
    assert status == 409 and body["message"] == (
        'Operation cannot be fulfilled on queues.scheduling.volcano.sh "q1": Precondition failed: ResourceVersion '
        f"in precondition: 99, ResourceVersion in object meta: {rv}")
    status, body, _ = await call(api, "DELETE", QUEUES + "/q1", {"preconditions": {"resourceVersion": rv}})
    assert status == 200 and body["status"] == "Success"
    status, body, _ = await call(api, "DELETE", QUEUES + "/q1", {"gracePeriodSeconds": -1})
    assert status == 400


async def test_http_client_passes_the_propagation_policy(api):
    await api.client.create(job())
    marked = await api.client.delete("PyTorchJob", "pytest", "default", propagation_policy="Orphan")
    assert marked["metadata"]["finalizers"] == ["orphan"]


# --------------------------------------------------------------------------
# Version, OpenAPI, logs
# --------------------------------------------------------------------------

async def test_version_is_a_1_32_phalanx_build(api):
    status, version, _ = await call(api, "GET", "/version/")
    assert status == 200 and (version["major"], version["minor"]) == ("1", "32")
    assert re.fullmatch(r"v1\.32\.\d+-phalanx\+\S+", version["gitVersion"])


async def test_openapi_v3_routes(api):
    status, index, headers = await call(api, "GET", "/openapi/v3?timeout=32s")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    url = index["paths"]["apis/kubeflow.org/v1"]["serverRelativeURL"]
    assert url == f"/openapi/v3/apis/kubeflow.org/v1?hash={document_hash('kubeflow.org/v1')}"
    status, doc, headers = await call(api, "GET", url + "&timeout=32s")
    assert status == 200 and headers["Cache-Control"] == "public, immutable"
    assert "org.kubeflow.v1.PyTorchJob" in str(doc["components"]["schemas"].keys())
    async with api.raw.get(api.url + "/openapi/v3/apis/kubeflow.org/v1?hash=stale", allow_redirects=False) as r:
        assert r.status == 301 and r.headers["Location"] == url
    for path in ("/openapi/v3/apis/example.com/v1", "/openapi/v2/more"):
        status, body, _ = await call(api, "GET", path)
        assert status == 404 and body["reason"] == "NotFound"


async def test_log_timestamps_and_since_options(api):
    await api.client.create(pod("p1"))
    await api.client.bind("default", "p1", "n1")
    status, text, _ = await call(api, "GET", PODS + "/p1/log?timestamps=true&sinceSeconds=10")
    stamp = api.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
    assert (status, text) == (200, f"{stamp} first\n{stamp} second\n")
    status, text, _ = await call(api, "GET", PODS + "/p1/log")
    assert text == "first\nsecond\n"
    for query, words in (("sinceTime=yesterday", "sinceTime: Invalid value"),
                         ("sinceSeconds=0", "sinceSeconds: Invalid value: 0"),
                         ("sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", "at most one of"),
                         ("timestamps=perhaps", "timestamps: Invalid value")):
        status, body, _ = await call(api, "GET", PODS + "/p1/log?" + query)
        assert status == 400 and words in body["message"], query


# --------------------------------------------------------------------------
# Access log, HTTPS
# --------------------------------------------------------------------------

async def test_every_request_is_in_the_access_log_streams_included(api):
    await call(api, "GET", "/version", headers={"User-Agent": "kubectl/v1.32.4"})
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(api.url + QUEUES) as resp:
            assert resp.status == 403  # system:anonymous
    async with api.raw.get(api.url + QUEUES, params={"watch": "true"}) as resp:
        assert resp.status == 200
    for _ in range(100):  # the watch is logged once the server sees the client gone
        if len(api.access.lines) >= 3:
            break
        await asyncio.sleep(0.01)
    version, forbidden, watch = api.access.lines[:3]
    assert re.fullmatch(r'\S+Z 127\.0\.0\.1 "GET /version" 200 \d+\.\d+ "kubectl/v1\.32\.4"', version), version
    assert f'"GET {QUEUES}" 403 ' in forbidden
    assert f'"GET {QUEUES}?watch=true" 200 ' in watch


async def test_https_with_our_ca(tmp_path):
    files = ensure_tls(tmp_path / "tls")
    store = Store(None, FakeClock(), admission=admit)
    runner, url = await serve(make_app(LocalClient(store), TOKEN), ssl_context=ssl_context(files))
    try:
        assert url.startswith("https://127.0.0.1:")
        async with HttpClient(url, TOKEN, ca_cert=files.ca_cert) as client:
            await client.create(queue("q1"))
            assert (await client.get("Queue", "q1"))["spec"]["weight"] == 1
        async with HttpClient(url, TOKEN) as untrusting:  # the system CAs do not know ours
            with pytest.raises(ApiError) as e:
                await untrusting.get("Queue", "q1")
            assert e.value.code == 503
    finally:
        await runner.cleanup()
