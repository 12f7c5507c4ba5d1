"""The HTTP API over a real Store + LocalClient on a loopback port, exercised
through HttpClient and raw requests (Status shapes as in docs/REFERENCE.md golden NN)."""
from __future__ import annotations

import asyncio
import json
import os
import stat
from types import SimpleNamespace
from typing import Any, AsyncIterator

import aiohttp
import pytest

from phalanx.api.admission import admit
from phalanx.client.http import HttpClient, error_from_status
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    Unauthorized,
)
from phalanx.server.app import make_app, serve
from phalanx.server.strategic import apply_strategic_merge
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(30)

TOKEN = "s3cret-token"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
JOBS = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
PODS = "/api/v1/namespaces/default/pods"


def queue(name: str, weight: int = 1, labels: dict | None = None) -> dict:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": meta,
            "spec": {"weight": weight}}


def pod(name: str, containers: list[str] = ("main",), namespace: str = "default") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": c, "image": "busybox", "command": ["sleep", "1"],
                                     "env": [{"name": "A", "value": "1"}]} for c in containers]}}


def job(name: str) -> dict:
    replica = {"replicas": 1, "restartPolicy": "OnFailure",
               "template": {"spec": {"containers": [{"name": "pytorch", "image": "busybox",
                                                     "command": ["sleep", "1"]}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": {"Master": replica}}}


class FakeLogs:
    """A log provider with the `open` interface: lines written by the test."""

    def __init__(self) -> None:
        self.queues: dict[tuple[str, str], asyncio.Queue] = {}
        self.calls: list[tuple] = []
        self.closed = 0

    def feed(self, pod: str, container: str, data: bytes | None) -> None:
        self.queues.setdefault((pod, container), asyncio.Queue()).put_nowait(data)

    async def open(self, namespace, pod, container, previous, follow, tail) -> AsyncIterator[bytes]:
        self.calls.append((namespace, pod, container, previous, follow, tail))
        if previous:
            raise BadRequest(f'previous terminated container "{container}" in pod "{pod}" not found')
        q = self.queues.setdefault((pod, container), asyncio.Queue())
        try:
            while True:
                if not follow and q.empty():
                    return
                data = await q.get()
                if data is None:
                    return
                yield data
        finally:
            self.closed += 1


@pytest.fixture
async def api(tmp_path):
    clock = FakeClock()
    store = Store(None, clock, admission=admit, history_size=50)
    local = LocalClient(store)
    logs = FakeLogs()
    app = make_app(local, TOKEN, log_provider=logs)
    runner, url = await serve(app)
    client = HttpClient(url, TOKEN)
    session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        yield SimpleNamespace(url=url, client=client, store=store, local=local, logs=logs, raw=session, clock=clock)
    finally:
        await session.close()
        await client.close()
        await runner.cleanup()


async def raw(api, method: str, path: str, body: Any = None, content_type: str = "application/json",
              headers: dict | None = None) -> tuple[int, Any]:
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    hdrs = {"Content-Type": content_type} if data is not None else {}
    hdrs.update(headers or {})
    async with api.raw.request(method, api.url + path, data=data, headers=hdrs) as resp:
        text = await resp.text()
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text


# --------------------------------------------------------------------------
# CRUD through HttpClient
# --------------------------------------------------------------------------

async def test_crud_round_trip_cluster_scoped_and_namespaced(api):
    c = api.client
    created = await c.create(queue("q1", labels={"team": "a"}))
    assert created["metadata"]["resourceVersion"] and created["spec"]["parent"] == "root"  # admission ran
    got = await c.get("Queue", "q1")
    assert got == created

    p = await c.create(pod("p1"))
    assert p["metadata"]["namespace"] == "default" and p["status"] == {"phase": "Pending"}
    assert [i["metadata"]["name"] for i in (await c.list("Pod", "default")).items] == ["p1"]
    assert (await c.list("Pod")).items[0]["kind"] == "Pod"  # all namespaces

    got["spec"]["weight"] = 5
    updated = await c.update(got)
    assert updated["spec"]["weight"] == 5
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

    merged = await c.patch("Queue", "q1", None, {"metadata": {"labels": {"team": None, "x": "y"}}})
    assert merged["metadata"]["labels"] == {"x": "y"}
    patched = await c.patch("Queue", "q1", None, [{"op": "replace", "path": "/spec/weight", "value": 7}], "json")
    assert patched["spec"]["weight"] == 7

    status = await c.update_status({**patched, "status": {"state": "Open"}})
    assert status["status"] == {"state": "Open"} and status["spec"]["weight"] == 7

    assert await c.delete("Queue", "q1") is None
    with pytest.raises(NotFound) as e:
        await c.get("Queue", "q1")
    assert e.value.message == 'queues.scheduling.volcano.sh "q1" not found'


async def test_list_selectors_pass_through(api):
    await api.client.create(queue("a", labels={"tier": "gold"}))
    await api.client.create(queue("b", labels={"tier": "silver"}))
    names = lambda lst: [i["metadata"]["name"] for i in lst.items]
    assert names(await api.client.list("Queue", label_selector="tier=gold")) == ["a"]
    assert names(await api.client.list("Queue", label_selector={"tier": "silver"})) == ["b"]
    assert names(await api.client.list("Queue", field_selector="metadata.name=b")) == ["b"]
    with pytest.raises(BadRequest):
        await api.client.list("Queue", label_selector="tier in (")


async def test_stale_update_is_409_conflict(api):
    q = await api.client.create(queue("q1"))
    await api.client.patch("Queue", "q1", None, {"spec": {"weight": 2}})
    q["spec"]["weight"] = 3
    with pytest.raises(Conflict) as e:
        await api.client.update(q)
    assert e.value.code == 409
    assert e.value.message == ('Operation cannot be fulfilled on queues.scheduling.volcano.sh "q1": the object has '
                               'been modified; please apply your changes to the latest version and try again')


async def test_create_twice_is_409_already_exists_with_details(api):
    status, body = await raw(api, "POST", JOBS, job("pytest"))
    assert status == 201 and body["metadata"]["name"] == "pytest"
    status, body = await raw(api, "POST", JOBS, job("pytest"))
    assert status == 409
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'pytorchjobs.kubeflow.org "pytest" already exists', "reason": "AlreadyExists",
                    "code": 409, "details": {"name": "pytest", "group": "kubeflow.org", "kind": "pytorchjobs"}}
    with pytest.raises(AlreadyExists):
        await api.client.create(job("pytest"))


async def test_missing_object_is_404_status_like_golden_15(api):
    status, body = await raw(api, "GET", JOBS + "/pytest")
    assert status == 404
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'pytorchjobs.kubeflow.org "pytest" not found', "reason": "NotFound",
                    "details": {"name": "pytest", "group": "kubeflow.org", "kind": "pytorchjobs"}, "code": 404}


async def test_invalid_object_is_422_with_causes_and_client_keeps_them(api):
    status, body = await raw(api, "POST", PODS, pod("Bad_Name"))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["kind"] == "Pod" and body["details"]["name"] == "Bad_Name"
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    assert body["details"]["causes"][0]["reason"] == "FieldValueInvalid"
    with pytest.raises(Invalid) as e:
        await api.client.create(pod("Bad_Name"))
    assert e.value.message == body["message"]
    assert e.value.errors[0].path == "metadata.name"


# --------------------------------------------------------------------------
# Authentication
# --------------------------------------------------------------------------

UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


@pytest.mark.parametrize("header", ["Bearer wrong", "Bearer " + TOKEN + "x", "bearer " + TOKEN[:-1]])
@pytest.mark.parametrize("path", [QUEUES, "/version", "/healthz", "/api", "/nope"])
async def test_a_wrong_token_is_unauthorized(api, header, path):
    async with aiohttp.ClientSession() as s:
        async with s.get(api.url + path, headers={"Authorization": header}) as resp:
            assert resp.status == 401
            assert await resp.json() == UNAUTHORIZED


@pytest.mark.parametrize("header", [None, "Basic " + TOKEN, "Bearer", "Bearer  "])
@pytest.mark.parametrize("path, message", [
    (QUEUES, 'queues.scheduling.volcano.sh is forbidden: User "system:anonymous" cannot list resource "queues" '
             'in API group "scheduling.volcano.sh" at the cluster scope'),
    ("/version", 'forbidden: User "system:anonymous" cannot get path "/version"'),
    ("/healthz", 'forbidden: User "system:anonymous" cannot get path "/healthz"'),
    ("/nope", 'forbidden: User "system:anonymous" cannot get path "/nope"')])
async def test_no_token_is_anonymous_and_forbidden(api, header, path, message):
    """As the kube-apiserver with anonymous auth on (golden 62); Phalanx grants system:anonymous nothing."""
    headers = {"Authorization": header} if header else {}
    async with aiohttp.ClientSession() as s:
        async with s.get(api.url + path, headers=headers) as resp:
            assert resp.status == 403
            assert (await resp.json())["message"] == message


async def test_client_with_wrong_token_gets_unauthorized(api):
    bad = HttpClient(api.url, "wrong")
    try:
        with pytest.raises(Unauthorized):
            await bad.list("Queue")
    finally:
        await bad.close()


def test_empty_token_is_refused():
    with pytest.raises(ValueError):
        make_app(object(), "")


# --------------------------------------------------------------------------
# Watch
# --------------------------------------------------------------------------

async def collect(it: AsyncIterator, n: int, timeout: float = 5.0) -> list:
    out = []

    async def go() -> None:
        async for ev in it:
            out.append(ev)
            if len(out) == n:
                return

    await asyncio.wait_for(go(), timeout)
    return out


async def test_watch_streams_changes_and_resumes(api):
    c = api.client
    await c.create(queue("before"))
    lst = await c.list("Queue")
    watch = c.watch("Queue", resource_version=lst.resource_version)
    task = asyncio.ensure_future(collect(watch, 3))
    await asyncio.sleep(0.05)
    await c.create(queue("q2"))
    await c.patch("Queue", "q2", None, {"spec": {"weight": 4}})
    await c.delete("Queue", "q2")
    events = await task
    await watch.aclose()
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "q2"), ("MODIFIED", "q2"), ("DELETED", "q2")]
    assert events[1].object["spec"]["weight"] == 4

    # resume after the first event: exactly the rest comes again
    resumed = c.watch("Queue", resource_version=events[0].object["metadata"]["resourceVersion"])
    again = await collect(resumed, 2)
    await resumed.aclose()
    assert [e.type for e in again] == ["MODIFIED", "DELETED"]

    # no resourceVersion: the current objects first, as synthetic ADDED events
    fresh = c.watch("Queue")
    first = await collect(fresh, 1)
    await fresh.aclose()
    assert (first[0].type, first[0].object["metadata"]["name"]) == ("ADDED", "before")


async def test_watch_raw_stream_is_ndjson_with_selectors_and_timeout(api):
    await api.client.create(queue("a", labels={"t": "1"}))
    await api.client.create(queue("b", labels={"t": "2"}))
    for flag in ("true", "1", "True"):
        async with api.raw.get(api.url + QUEUES, params={"watch": flag, "labelSelector": "t=2"}) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"] == "application/json"
            line = await asyncio.wait_for(resp.content.readline(), 5)
        ev = json.loads(line)
        assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "b")

    # timeoutSeconds: the server ends the stream by itself
    async with api.raw.get(api.url + QUEUES, params={"watch": "true", "fieldSelector": "metadata.name=a",
                                                     "timeoutSeconds": "1"}) as resp:
        lines = (await asyncio.wait_for(resp.read(), 5)).decode().splitlines()
    assert [json.loads(x)["object"]["metadata"]["name"] for x in lines] == ["a"]


async def test_too_old_watch_gets_410_expired_error_event(api):
    for i in range(60):  # more changes than the history (50) keeps
        await api.client.create(queue(f"q{i}"))
    async with api.raw.get(api.url + QUEUES, params={"watch": "true", "resourceVersion": "1"}) as resp:
        assert resp.status == 200
        lines = (await asyncio.wait_for(resp.read(), 5)).decode().splitlines()
    assert len(lines) == 1
    ev = json.loads(lines[0])
    assert ev["type"] == "ERROR"
    assert ev["object"]["code"] == 410 and ev["object"]["reason"] == "Expired"
    assert ev["object"]["message"].startswith("too old resource version: 1 (")
    with pytest.raises(Gone):
        await collect(api.client.watch("Queue", resource_version="1"), 1)


async def test_watch_bad_parameters_are_400(api):
    for params in ({"watch": "maybe"}, {"watch": "true", "resourceVersion": "x"},
                   {"watch": "true", "labelSelector": "a in ("}, {"watch": "true", "timeoutSeconds": "-1"}):
        status, body = await raw(api, "GET", QUEUES + "?" + "&".join(f"{k}={v}" for k, v in params.items()))
        assert status == 400 and body["reason"] == "BadRequest", params


async def test_watch_ends_when_the_server_shuts_down():
    store = Store(None, FakeClock(), admission=admit)
    app = make_app(LocalClient(store), TOKEN)
    runner, url = await serve(app)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as s:
        async with s.get(url + QUEUES, params={"watch": "true"}) as resp:
            assert resp.status == 200
            loop = asyncio.get_running_loop()
            started = loop.time()
            await asyncio.wait_for(runner.cleanup(), 5)
            assert loop.time() - started < 1.5  # the stream was told to stop, not waited out
            assert await asyncio.wait_for(resp.read(), 5) == b""


# --------------------------------------------------------------------------
# Patch types
# --------------------------------------------------------------------------

async def test_a_custom_resource_must_name_its_kind_and_apiversion_a_built_in_one_need_not(api):
    # kube-apiserver v1.36.3's answers (envtest), word for word: a CR is decoded by its own kind.
    body = b'{"metadata": {"name": "pg"}, "spec": {"minMember": 1}}'
    path = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
    for method, url in (("POST", path), ("PUT", path + "/pg")):
        status, out = await raw(api, method, url, body)
        assert (status, out["reason"], out["message"]) == (400, "BadRequest", (
            "the object provided is unrecognized (must be of type PodGroup): Object 'Kind' is missing in "
            '\'{"metadata": {"name": "pg"}, "spec": {"minMember": 1}}\' ({"metadata": {"name": "pg"}, " ...)'))
    status, out = await raw(api, "POST", path, {"kind": "PodGroup", "metadata": {"name": "pg"}})
    assert (status, out["message"]) == (400, "the API version in the data () does not match the expected API "
                                              "version (scheduling.volcano.sh/v1beta1)")
    status, _ = await raw(api, "POST", JOBS, {"metadata": {"name": "nokind"}, "spec": {}})
    assert status == 400
    assert (await api.client.list("PodGroup", "default")).items == []
    assert (await api.client.list("PyTorchJob", "default")).items == []
    # a built-in kind takes both from the URL
    p = pod("defaulted")
    del p["kind"], p["apiVersion"]
    status, out = await raw(api, "POST", "/api/v1/namespaces/default/pods", p)
    assert status == 201 and (out["kind"], out["apiVersion"]) == ("Pod", "v1")


async def test_strategic_merge_on_custom_resource_is_415_like_golden_31(api):
    await api.client.create(job("pytest"))
    status, body = await raw(api, "PATCH", JOBS + "/pytest", {"metadata": {"labels": {"x": "y"}}},
                             content_type="application/strategic-merge-patch+json")
    assert status == 415
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "the body of the request was in an unknown format - accepted media types include: "
                               "application/json-patch+json, application/merge-patch+json",
                    "reason": "UnsupportedMediaType", "code": 415}


async def test_failed_json_patch_test_is_422_like_golden_33(api):
    await api.client.create(queue("q1"))
    status, body = await raw(api, "PATCH", QUEUES + "/q1",
                             [{"op": "test", "path": "/spec/weight", "value": 3},
                              {"op": "replace", "path": "/spec/weight", "value": 5}],
                             content_type="application/json-patch+json")
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == "the server rejected our request due to an error in our request"
    assert (await api.client.get("Queue", "q1"))["spec"]["weight"] == 1


async def test_strategic_merge_on_pod_merges_lists_by_key_like_golden_57(api):
    await api.client.create(pod("p1", containers=["main", "side"]))
    patch = {"metadata": {"labels": {"example.com/team": None, "example.com/tier": "training"}},
             "spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
                      "containers": [{"name": "main", "image": "busybox:1.37.0-glibc"}]}}
    status, body = await raw(api, "PATCH", PODS + "/p1", patch,
                             content_type="application/strategic-merge-patch+json")
    assert status == 200, body
    assert body["metadata"]["labels"] == {"example.com/tier": "training"}
    containers = body["spec"]["containers"]
    assert [c["name"] for c in containers] == ["side", "main"]
    main = containers[1]
    assert main["image"] == "busybox:1.37.0-glibc" and main["command"] == ["sleep", "1"]  # other fields kept
    assert not any(k.startswith("$") for k in body["spec"])


async def test_merge_patch_on_status_subresource(api):
    await api.client.create(job("j1"))
    out = await api.client.patch("PyTorchJob", "j1", "default",
                                 {"status": {"conditions": [{"type": "Created", "status": "True"}]}},
                                 subresource="status")
    assert out["status"]["conditions"][0]["type"] == "Created"
    # PodGroup has no status subresource: like docs/REFERENCE.md golden 39, it reads as a missing object
    status, body = await raw(api, "PATCH", "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/x/status",
                             {"status": {}}, content_type="application/merge-patch+json")
    assert status == 404 and body["message"] == 'podgroups.scheduling.volcano.sh "x" not found'


def test_strategic_merge_directives():
    current = {"spec": {"containers": [{"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
                                       {"name": "b", "image": "2"}],
                        "volumes": [{"name": "v"}], "tags": ["x", "y"]},
               "metadata": {"finalizers": ["f1"], "labels": {"k": "v"}}}
    patch = {"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]},
                                     {"name": "b", "$patch": "delete"}, {"name": "c", "image": "3"}],
                      "$deleteFromPrimitiveList/tags": ["x"], "volumes": [{"$patch": "replace"}, {"name": "w"}],
                      "$retainKeys": ["containers"]},
             "metadata": {"finalizers": ["f2"], "labels": {"$patch": "replace", "n": "m"}}}
    out = apply_strategic_merge(current, patch)
    assert out["spec"]["containers"] == [
        {"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
        {"name": "c", "image": "3"}]
    assert out["spec"]["tags"] == ["y"]
    assert out["spec"]["volumes"] == [{"name": "w"}]
    assert out["metadata"] == {"finalizers": ["f1", "f2"], "labels": {"n": "m"}}
    assert current["spec"]["containers"][1] == {"name": "b", "image": "2"}  # input untouched
    with pytest.raises(BadRequest):
        apply_strategic_merge(current, {"spec": {"containers": [{"image": "no-name"}]}})
    with pytest.raises(BadRequest):
        apply_strategic_merge(current, {"$patch": "explode"})


# --------------------------------------------------------------------------
# Delete, binding
# --------------------------------------------------------------------------

async def test_delete_returns_status_for_immediate_and_object_for_graceful(api):
    # docs/REFERENCE.md golden 67's shape, on a custom resource deleted at once (jobs are deleted
    # in the foreground: tests/unit/test_server_kubectl.py).
    created = await api.client.create(queue("q1"))
    status, body = await raw(api, "DELETE", QUEUES + "/q1", {"propagationPolicy": "Background"})
    assert status == 200
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": "q1", "group": "scheduling.volcano.sh", "kind": "queues",
                                "uid": created["metadata"]["uid"]}}

    await api.client.create(pod("p1"))
    await api.client.bind("default", "p1", "node-a")
    bound = await api.client.get("Pod", "p1", "default")
    assert bound["spec"]["nodeName"] == "node-a"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in bound["status"]["conditions"])
    with pytest.raises(Conflict):
        await api.client.bind("default", "p1", "node-b")
    graceful = await api.client.delete("Pod", "p1", "default")
    assert graceful is not None and graceful["metadata"]["deletionTimestamp"]
    assert graceful["metadata"]["deletionGracePeriodSeconds"] == 30
    assert await api.client.delete("Pod", "p1", "default", grace_period_seconds=0) is None
    with pytest.raises(NotFound):
        await api.client.get("Pod", "p1", "default")


async def test_delete_preconditions_and_grace_from_query(api):
    await api.client.create(pod("p1"))
    await api.client.bind("default", "p1", "n")
    with pytest.raises(Conflict) as e:
        await api.client.delete("Pod", "p1", "default", preconditions_uid="not-the-uid")
    assert "Precondition failed: UID in precondition: not-the-uid" in e.value.message
    status, _ = await raw(api, "DELETE", PODS + "/p1?gracePeriodSeconds=0")
    assert status == 200
    with pytest.raises(NotFound):
        await api.client.get("Pod", "p1", "default")


async def test_binding_answers_201_status_like_golden_46(api):
    await api.client.create(pod("p1"))
    status, body = await raw(api, "POST", PODS + "/p1/binding",
                             {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"},
                              "target": {"apiVersion": "v1", "kind": "Node", "name": "las1"}})
    assert status == 201
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    status, body = await raw(api, "POST", PODS + "/p1/binding", {"target": {}})
    assert status == 400


# --------------------------------------------------------------------------
# Request limits and bad input: always a 4xx Status, never a 5xx
# --------------------------------------------------------------------------

async def test_body_over_the_limit_is_413():
    store = Store(None, FakeClock(), admission=admit)
    app = make_app(LocalClient(store), TOKEN, max_body_bytes=2048)
    runner, url = await serve(app)
    big = queue("q1")
    big["metadata"]["annotations"] = {"a": "x" * 4096}
    try:
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as s:
            async with s.post(url + QUEUES, json=big) as resp:  # with Content-Length
                assert resp.status == 413
                body = await resp.json()
            assert body["reason"] == "RequestEntityTooLarge" and body["message"].endswith("limit is 2048")

            async def chunks():  # chunked: no Content-Length to check up front
                data = json.dumps(big).encode()
                for i in range(0, len(data), 1000):
                    yield data[i:i + 1000]

            async with s.post(url + QUEUES, data=chunks(), headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 413
            async with s.post(url + QUEUES, json=queue("small")) as resp:
                assert resp.status == 201
    finally:
        await runner.cleanup()


def test_default_body_limit_is_3_mib():
    app = make_app(object(), TOKEN)
    assert app._client_max_size == 3 * 1024 * 1024


@pytest.mark.parametrize("method, path, body, content_type, code", [
    ("POST", QUEUES, b"{not json", "application/json", 400),
    ("POST", QUEUES, b"[1, 2]", "application/json", 400),
    ("POST", QUEUES, b"", "application/json", 400),
    ("POST", QUEUES, b'{"kind": "Queue", "spec": {"weight": NaN}}', "application/json", 400),
    ("POST", QUEUES, b"\xff\xfe", "application/json", 400),
    ("POST", QUEUES, b"[" * 100000 + b"]" * 100000, "application/json", 400),
    ("POST", QUEUES, b"<queue/>", "application/xml", 415),
    ("POST", QUEUES, json.dumps({"kind": "Pod", "metadata": {"name": "x"}}).encode(), "application/json", 400),
    ("POST", PODS, json.dumps(pod("p", namespace="other")).encode(), "application/json", 400),
    ("POST", QUEUES + "?dryRun=Sometimes", json.dumps(queue("q")).encode(), "application/json", 400),
    ("PUT", QUEUES + "/q1", json.dumps(queue("other")).encode(), "application/json", 400),
    ("PATCH", QUEUES + "/q1", b'["not a merge patch"]', "application/merge-patch+json", 400),
    ("PATCH", QUEUES + "/q1", b'{"op": "replace"}', "application/json-patch+json", 400),
    ("PATCH", QUEUES + "/q1", b"{}", "text/plain", 415),
    ("DELETE", QUEUES + "/q1", b'{"gracePeriodSeconds": "soon"}', "application/json", 400),
    ("DELETE", QUEUES + "/q1", b'{"propagationPolicy": "Sideways"}', "application/json", 400),
    ("DELETE", QUEUES + "/q1?gracePeriodSeconds=abc", None, "application/json", 400),
    ("DELETE", QUEUES, None, "application/json", 405),
    ("POST", "/api/v1/pods", json.dumps(pod("p")).encode(), "application/json", 405),
    ("GET", "/api/v1/namespaces/Bad_NS/pods/x", None, "application/json", 404),
    ("GET", PODS + "/../../x", None, "application/json", 404),
    ("GET", PODS + "/UPPER", None, "application/json", 404),
    ("GET", PODS + "/" + "a" * 300, None, "application/json", 404),
    ("GET", "/api/v1/namespaces/default/frobs", None, "application/json", 404),
    ("GET", "/apis/nope.io/v1/things", None, "application/json", 404),
    ("GET", PODS + "/p/exec", None, "application/json", 400),  # no command (exec is served)
    ("GET", "/api/v1/pods/p", None, "application/json", 404),
    ("GET", QUEUES + "?limit=-5", None, "application/json", 400),
    ("GET", "/", None, "application/json", 404),
])
async def test_bad_requests_get_a_4xx_status(api, method, path, body, content_type, code):
    await api.client.create(queue("q1"))
    status, resp = await raw(api, method, path, body, content_type=content_type)
    assert status == code, resp
    assert isinstance(resp, dict) and resp["kind"] == "Status" and resp["status"] == "Failure"
    assert resp["code"] == code and resp["message"]


async def test_yaml_bodies_are_accepted(api):
    status, body = await raw(api, "POST", QUEUES, b"kind: Queue\napiVersion: scheduling.volcano.sh/v1beta1\n"
                                                  b"metadata: {name: yq}\nspec: {weight: 2}\n",
                             content_type="application/yaml")
    assert status == 201 and body["spec"]["weight"] == 2


async def test_dry_run_create_admits_but_does_not_store(api):
    status, body = await raw(api, "POST", JOBS + "?dryRun=All", job("dry"))
    assert status == 201
    assert body["spec"]["runPolicy"]  # defaulted by admission
    with pytest.raises(NotFound):
        await api.client.get("PyTorchJob", "dry", "default")


# --------------------------------------------------------------------------
# Discovery and version
# --------------------------------------------------------------------------

async def test_version_and_discovery(api):
    status, version = await raw(api, "GET", "/version")
    assert status == 200 and (version["major"], version["minor"]) == ("1", "32")
    _, apis = await raw(api, "GET", "/api/")
    assert apis["kind"] == "APIVersions" and apis["versions"] == ["v1"]
    _, groups = await raw(api, "GET", "/apis")
    assert {g["name"] for g in groups["groups"]} == {"kubeflow.org", "scheduling.volcano.sh", "apps",
                                                     "coordination.k8s.io", "admissionregistration.k8s.io",
                                                     "rbac.authorization.k8s.io", "apiextensions.k8s.io",
                                                     "authentication.k8s.io", "authorization.k8s.io",
                                                     "scheduling.k8s.io", "autoscaling"}
    _, group = await raw(api, "GET", "/apis/kubeflow.org")
    assert group["preferredVersion"] == {"groupVersion": "kubeflow.org/v1", "version": "v1"}
    _, core = await raw(api, "GET", "/api/v1/")
    by_name = {r["name"]: r for r in core["resources"]}
    assert {"pods", "pods/status", "pods/log", "pods/binding", "services", "nodes", "events", "namespaces",
            "events"} <= set(by_name)
    assert "events/status" not in by_name
    assert by_name["pods"]["shortNames"] == ["po"] and by_name["pods"]["categories"] == ["all"]
    assert by_name["nodes"]["namespaced"] is False
    _, volcano = await raw(api, "GET", "/apis/scheduling.volcano.sh/v1beta1")
    names = {r["name"]: r for r in volcano["resources"]}
    assert "podgroups/status" not in names and "queues/status" in names
    assert names["queues"]["shortNames"] == ["q", "queue-v1beta1"] and names["queues"]["namespaced"] is False
    status, text = await raw(api, "GET", "/healthz")
    assert (status, text) == (200, "ok")
    status, _ = await raw(api, "GET", "/apis/kubeflow.org/v2")
    assert status == 404


# --------------------------------------------------------------------------
# Logs
# --------------------------------------------------------------------------

async def test_logs_read_and_follow(api):
    await api.client.create(pod("p1"))
    await api.client.bind("default", "p1", "n1")
    api.logs.feed("p1", "main", b"hello\n")
    chunks = [c async for c in api.client.logs("default", "p1", tail=10)]
    assert b"".join(chunks) == b"hello\n"
    assert api.logs.calls[-1] == ("default", "p1", "main", False, False, 10)

    got: list[bytes] = []
    stream = api.client.logs("default", "p1", container="main", follow=True)

    async def follow() -> None:
        async for c in stream:
            got.append(c)

    task = asyncio.ensure_future(follow())
    api.logs.feed("p1", "main", b"one\n")

    async def wait_for(n: int) -> None:
        while len(b"".join(got).splitlines()) < n:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait_for(1), 5)  # arrives while the stream is still open
    assert not task.done()
    api.logs.feed("p1", "main", b"two\n")
    api.logs.feed("p1", "main", None)  # the container stops
    await asyncio.wait_for(task, 5)
    assert b"".join(got) == b"one\ntwo\n"


async def test_log_errors_and_unscheduled_pod(api):
    await api.client.create(pod("two", containers=["a", "b"]))
    await api.client.bind("default", "two", "n1")
    with pytest.raises(BadRequest) as e:
        _ = [c async for c in api.client.logs("default", "two")]
    assert e.value.message == "a container name must be specified for pod two, choose one of: [a b]"
    with pytest.raises(BadRequest) as e:
        _ = [c async for c in api.client.logs("default", "two", container="zz")]
    assert e.value.message == "container zz is not valid for pod two"
    with pytest.raises(BadRequest) as e:  # the provider's own error, before any output
        _ = [c async for c in api.client.logs("default", "two", container="a", previous=True, follow=True)]
    assert "previous terminated container" in e.value.message
    with pytest.raises(NotFound):
        _ = [c async for c in api.client.logs("default", "missing")]
    await api.client.create(pod("pending"))
    async with api.raw.get(api.url + PODS + "/pending/log") as resp:
        assert resp.status == 204 and await resp.read() == b""
    status, _ = await raw(api, "GET", PODS + "/two/log?container=a&tailLines=-1")
    assert status == 400


async def test_log_provider_with_read_and_follow_methods():
    class NodeStyle:
        async def read(self, namespace, name, container=None, *, previous=False, tail_lines=None, limit_bytes=None):
            return f"{name}/{container} previous={previous} tail={tail_lines}\n"

        async def follow(self, namespace, name, container=None, *, tail_lines=None):
            for part in ("a", "b"):
                yield part

    store = Store(None, FakeClock(), admission=admit)
    local = LocalClient(store)
    await local.create(pod("p1"))
    await local.bind("default", "p1", "n")
    runner, url = await serve(make_app(local, TOKEN, log_provider=NodeStyle()))
    client = HttpClient(url, TOKEN)
    try:
        assert b"".join([c async for c in client.logs("default", "p1", previous=True, tail=3)]) == \
            b"p1/main previous=True tail=3\n"
        assert b"".join([c async for c in client.logs("default", "p1", follow=True)]) == b"ab"
    finally:
        await client.close()
        await runner.cleanup()


# --------------------------------------------------------------------------
# Listening
# --------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
async def test_serve_refuses_non_loopback_hosts(host):
    with pytest.raises(ValueError):
        await serve(make_app(object(), TOKEN), host=host)


async def test_unix_socket_is_private_and_usable(tmp_path):
    store = Store(None, FakeClock(), admission=admit)
    sock = tmp_path / "api.sock"
    runner, url = await serve(make_app(LocalClient(store), TOKEN), unix_socket=sock)
    client = HttpClient(url, TOKEN)
    try:
        assert url.startswith("http+unix://")
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        await client.create(queue("via-socket"))
        assert (await client.get("Queue", "via-socket"))["metadata"]["name"] == "via-socket"
    finally:
        await client.close()
        await runner.cleanup()


async def test_unreachable_server_is_an_api_error():
    client = HttpClient("http://127.0.0.1:9", TOKEN)
    try:
        with pytest.raises(ApiError) as e:
            await client.get("Queue", "q")
        assert e.value.code == 503
    finally:
        await client.close()


def test_error_from_status_maps_reasons_and_codes():
    gone = error_from_status({"reason": "Expired", "code": 410, "message": "too old resource version: 1 (5)"}, 200)
    assert isinstance(gone, Gone) and gone.message == "too old resource version: 1 (5)"
    other = error_from_status({"reason": "UnsupportedMediaType", "code": 415, "message": "m"}, 415)
    assert type(other) is ApiError and (other.code, other.reason) == (415, "UnsupportedMediaType")
    bare = error_from_status({"message": "boom"}, 500)
    assert (bare.code, bare.message) == (500, "boom")
    nf = error_from_status({"reason": "NotFound", "code": 404, "message": "x",
                            "details": {"name": "n", "kind": "pods"}}, 404)
    assert isinstance(nf, NotFound) and (nf.resource, nf.name) == ("pods", "n")
    assert isinstance(error_from_status(None, 409), Conflict)


async def test_http_watch_reconnects_from_the_last_resource_version_when_a_stream_ends():
    from aiohttp import web

    asked: list[str | None] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        asked.append(request.query.get("resourceVersion"))
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        if len(asked) == 1:  # synthetic ADDED in name order: rv 9 then rv 5; then the server ends the stream
            for name, rv in (("a", "9"), ("b", "5")):
                obj = {"kind": "Queue", "metadata": {"name": name, "resourceVersion": rv}}
                await resp.write((json.dumps({"type": "ADDED", "object": obj}) + "\n").encode())
        elif len(asked) == 2:
            await resp.write(b'{"type":"BOOKMARK","object":{"kind":"Queue","metadata":{"resourceVersion":"11"}}}\n')
        elif len(asked) == 3:
            obj = {"kind": "Queue", "metadata": {"name": "a", "resourceVersion": "12"}}
            await resp.write((json.dumps({"type": "MODIFIED", "object": obj}) + "\n").encode())
            await resp.write(b'{"type":"ERROR","object":{"kind":"Status","status":"Failure","reason":"Expired",'
                             b'"code":410,"message":"too old resource version: 12 (20)"}}\n')
        return resp

    app = web.Application()
    app.router.add_get(QUEUES, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    client = HttpClient(f"http://127.0.0.1:{port}", TOKEN)
    seen: list[tuple[str, str]] = []
    try:
        with pytest.raises(Gone) as e:
            async for ev in client.watch("Queue"):
                seen.append((ev.type, ev.object["metadata"]["name"]))
        assert e.value.message == "too old resource version: 12 (20)"
    finally:
        await client.close()
        await runner.cleanup()
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]  # bookmarks are not delivered
    assert asked == [None, "9", "11"]  # resumes after the newest version seen, never an older one


async def test_watch_and_log_streams_release_their_source_when_the_client_goes_away(api):
    await api.client.create(pod("p1"))
    await api.client.bind("default", "p1", "n1")
    watchers = api.store._watchers["Queue"]
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as s:
        resp = await s.get(api.url + QUEUES, params={"watch": "true"})
        assert resp.status == 200

        async def registered() -> None:
            while not watchers:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(registered(), 5)
        logs = await s.get(api.url + PODS + "/p1/log", params={"follow": "true"})
        assert logs.status == 200
        resp.close()
        logs.close()

    async def released() -> None:
        while watchers or api.logs.closed < 1:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(released(), 5)
