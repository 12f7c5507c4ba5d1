"""KubeClient against the API server `phalanx up` serves — the same
app, HTTPS, bearer token and kubeconfig — over a store with admission: CRUD,
status, binding, patches, deletes with options, selectors, watch (410 as Gone,
the Informer relisting on it), errors mapped to phalanx.objects.errors, the three
ways to connect, credentials asked again after a 401 (token file, exec plugin), the
rate limiter and conflict retries."""
from __future__ import annotations

import asyncio
import copy
import os
import sys
from pathlib import Path

import pytest
import yaml

from phalanx.api.admission import admit
from phalanx.client.kube import KubeClient
from phalanx.client.kubeconfig import ConfigError, from_kubeconfig, from_url, resolve
from phalanx.client.local import LocalClient
from phalanx.client.ratelimit import TokenBucket
from phalanx.client.retry import retry_on_conflict
from phalanx.objects.clock import Clock
from phalanx.objects.errors import AlreadyExists, ApiError, BadRequest, Conflict, Forbidden, Gone, Invalid, NotFound
from phalanx.runtime.informer import Informer
from phalanx.server.app import make_app, serve
from phalanx.server.tls import ensure_tls, ssl_context, write_kubeconfig
from phalanx.store.store import Store
from tests.scenarios.conftest import load_example

pytestmark = pytest.mark.timeout(30)

TOKEN = "test-token-0123456789"


class Served:
    def __init__(self, store: Store, url: str, kubeconfig: Path, ca: Path) -> None:
        self.store, self.url, self.kubeconfig, self.ca = store, url, kubeconfig, ca


@pytest.fixture
async def served(tmp_path):
    store = Store(None, Clock(), admission=admit, history_size=50)
    tls = ensure_tls(tmp_path / "tls")
    app = make_app(LocalClient(store), TOKEN, bookmark_interval=0.2)
    runner, url = await serve(app, "127.0.0.1", 0, ssl_context=ssl_context(tls))
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, url, tls.ca_cert, TOKEN)
    try:
        yield Served(store, url, kubeconfig, tls.ca_cert)
    finally:
        await runner.cleanup()
        store.close()


@pytest.fixture
async def kube(served):
    c = KubeClient(from_kubeconfig(served.kubeconfig), qps=0)
    try:
        yield c
    finally:
        await c.close()


def pod(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}


async def test_crud_status_binding_and_delete_options(kube, served):
    created = await kube.create(pod("a"))
    assert created["metadata"]["uid"] and created["spec"]["restartPolicy"] == "Always"  # server defaults
    assert created == served.store.get("Pod", "a", "default")  # exactly what the server stored
    got = await kube.get("Pod", "a", "default")
    assert got == created
    with pytest.raises(AlreadyExists) as e:
        await kube.create(pod("a"))
    assert e.value.message == 'pods "a" already exists'

    got["metadata"]["labels"]["x"] = "y"
    updated = await kube.update(got)
    assert updated["metadata"]["labels"]["x"] == "y"
    stale = copy.deepcopy(got)  # the resourceVersion it carries is now old
    stale["metadata"]["labels"]["x"] = "z"
    with pytest.raises(Conflict) as e:
        await kube.update(stale)
    assert 'Operation cannot be fulfilled on pods "a"' in e.value.message

    updated["status"] = {"phase": "Running"}
    updated["spec"]["containers"][0]["image"] = "ignored-by-status-write"
    st = await kube.update_status(updated)
    assert st["status"]["phase"] == "Running" and st["spec"]["containers"][0]["image"] == "busybox"

    merged = await kube.patch("Pod", "a", "default", {"metadata": {"annotations": {"k": "v"}}})
    assert merged["metadata"]["annotations"] == {"k": "v"}
    jp = await kube.patch("Pod", "a", "default", [{"op": "remove", "path": "/metadata/labels/x"}], "json")
    assert "x" not in jp["metadata"]["labels"]
    sp = await kube.patch("Pod", "a", "default", {"status": {"message": "hi"}}, "merge", subresource="status")
    assert sp["status"]["message"] == "hi"

    await kube.bind("default", "a", "las1")
    bound = await kube.get("Pod", "a", "default")
    assert bound["spec"]["nodeName"] == "las1"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in bound["status"]["conditions"])
    with pytest.raises(Conflict):
        await kube.bind("default", "a", "las2")

    with pytest.raises(Conflict):  # uid precondition
        await kube.delete("Pod", "a", "default", preconditions_uid="not-the-uid")
    graceful = await kube.delete("Pod", "a", "default")  # bound: graceful, the object comes back
    assert graceful is not None and graceful["metadata"]["deletionGracePeriodSeconds"] == 30
    assert await kube.delete("Pod", "a", "default", grace_period_seconds=0,
                             preconditions_uid=created["metadata"]["uid"]) is None
    with pytest.raises(NotFound) as e:
        await kube.get("Pod", "a", "default")
    assert (e.value.message, e.value.resource, e.value.name) == ('pods "a" not found', "pods", "a")


async def test_custom_resources_cluster_scope_and_kinds_without_status_subresource(kube):
    job = load_example("pytorchjob.yaml")[0]
    created = await kube.create(job)
    assert created["spec"]["runPolicy"]["cleanPodPolicy"] == "None"  # defaulted by admission
    created["status"] = {"conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated"}]}
    st = await kube.update_status(created)
    assert st["status"]["conditions"][0]["type"] == "Created"
    assert st["metadata"]["generation"] == 1  # a status write is not a spec change

    q = await kube.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                           "metadata": {"name": "q1"}, "spec": {"weight": 1}})
    assert "namespace" not in q["metadata"]
    assert (await kube.get("Queue", "q1"))["metadata"]["uid"] == q["metadata"]["uid"]
    assert [o["metadata"]["name"] for o in (await kube.list("Queue")).items] == ["q1"]

    pg = await kube.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                            "metadata": {"name": "pg", "namespace": "default"}, "spec": {"minMember": 1}})
    pg["status"] = {"phase": "Inqueue"}
    # PodGroup has no status subresource (as Volcano's CRD): update_status writes the whole object.
    assert (await kube.update_status(pg))["status"]["phase"] == "Inqueue"
    with pytest.raises(NotFound) as e:
        await kube.patch("PodGroup", "pg", "default", {"status": {"phase": "Running"}}, subresource="status")
    assert e.value.message == 'podgroups.scheduling.volcano.sh "pg" not found'


async def test_admission_errors_keep_their_kind_and_words(kube):
    job = load_example("pytorchjob.yaml")[0]
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    with pytest.raises(Forbidden) as e:
        await kube.create(job)
    assert "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1" in e.value.message
    bad = pod("Bad_Name")
    with pytest.raises(Invalid) as e:
        await kube.create(bad)
    assert e.value.code == 422 and e.value.errors and e.value.errors[0].path == "metadata.name"
    typo = pod("typo")
    typo["spec"]["containerz"] = []
    with pytest.raises(BadRequest) as e:
        await kube.create(typo)
    assert 'unknown field "spec.containerz"' in e.value.message
    with pytest.raises(BadRequest):
        await kube.get("Pod", "a")  # a namespaced kind needs a namespace
    with pytest.raises(BadRequest):
        await kube.get("NoSuchKind", "a", "default")


async def test_list_selectors_and_all_namespaces(kube):
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    await kube.create(pod("a", {"app": "a", "tier": "x"}))
    await kube.create(pod("b", {"app": "b", "tier": "y"}))
    other = pod("c", {"app": "c", "tier": "x"})
    other["metadata"]["namespace"] = "other"
    await kube.create(other)

    def names(lst):
        return sorted(o["metadata"]["name"] for o in lst.items)

    every = await kube.list("Pod")
    assert names(every) == ["a", "b", "c"] and int(every.resource_version) > 0
    assert all(o["kind"] == "Pod" and o["apiVersion"] == "v1" for o in every.items)
    assert names(await kube.list("Pod", "default")) == ["a", "b"]
    assert names(await kube.list("Pod", label_selector="tier in (x)")) == ["a", "c"]  # set-based
    assert names(await kube.list("Pod", label_selector={"app": "b"})) == ["b"]
    assert names(await kube.list("Pod", field_selector="metadata.namespace=other")) == ["c"]


async def test_watch_resumes_and_raises_gone_when_too_old(kube):
    await kube.create(pod("first"))  # resourceVersion "0" would mean "any" (initial ADDED events)
    start = (await kube.list("Pod", "default")).resource_version
    seen: list[tuple[str, str]] = []

    async def pump():
        async for ev in kube.watch("Pod", "default", resource_version=start):
            seen.append((ev.type, ev.object["metadata"]["name"]))
            if len(seen) == 3:
                return

    task = asyncio.create_task(pump())
    await asyncio.sleep(0.2)
    await kube.create(pod("w"))
    await kube.patch("Pod", "w", "default", {"metadata": {"labels": {"n": "1"}}})
    await kube.delete("Pod", "w", "default")
    await asyncio.wait_for(task, 10)
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]

    for i in range(60):  # the store keeps 50 events: the start is now out of the history
        await kube.create(pod(f"p{i}"))
    with pytest.raises(Gone):
        async for _ in kube.watch("Pod", "default", resource_version=start):
            pass


async def test_informer_over_kube_client_relists_after_gone(kube, served):
    for i in range(60):  # the store keeps 50 events: resourceVersion 2 is out of the history
        await kube.create(pod(f"p{i}"))
    real_list = kube.list
    lists: list[str] = []

    async def first_list_stale(*args, **kwargs):
        lst = await real_list(*args, **kwargs)
        lists.append(lst.resource_version)
        if len(lists) == 1:
            lst.resource_version = "2"  # as if the list were old: the watch must answer Gone
        return lst

    kube.list = first_list_stale
    inf = Informer(kube, "Pod", "default")
    events: list[tuple[str, str]] = []
    inf.add_handler(lambda t, o, old: events.append((t, o["metadata"]["name"])))
    await inf.start()
    try:
        await inf.wait_synced(10)
        for _ in range(250):
            if len(lists) >= 2 and inf.last_resource_version == lists[1]:
                break
            await asyncio.sleep(0.02)
        assert len(lists) >= 2, "the informer did not relist after Gone"
        assert len(inf) == 60
        await kube.create(pod("after"))
        for _ in range(250):
            if inf.get("default", "after") is not None:
                break
            await asyncio.sleep(0.02)
        assert ("ADDED", "after") in events
        assert sum(1 for t, n in events if n == "p0") == 1  # the relist replays no change
    finally:
        await inf.stop()


async def test_connect_by_url_and_token_and_errors(served, tmp_path):
    c = KubeClient(from_url(served.url, TOKEN, served.ca))
    try:
        await c.create(pod("u"))
        assert (await c.get("Pod", "u", "default"))["metadata"]["name"] == "u"
    finally:
        await c.close()
    bad = KubeClient(from_url(served.url, "wrong-token", served.ca))
    try:
        with pytest.raises(ApiError) as e:
            await bad.get("Pod", "u", "default")
        assert e.value.code == 401
    finally:
        await bad.close()
    untrusted = KubeClient(from_url(served.url, TOKEN))  # the system CAs do not know the local CA
    try:
        with pytest.raises(ApiError) as e:
            await untrusted.get("Pod", "u", "default")
        assert e.value.code == 503
    finally:
        await untrusted.close()
    down = KubeClient(from_url("https://127.0.0.1:1", TOKEN, served.ca))
    try:
        with pytest.raises(ApiError) as e:
            await down.list("Pod")
        assert e.value.code == 503 and "not reachable" in e.value.message
    finally:
        await down.close()


def user_kubeconfig(path: Path, served: Served, user: dict) -> Path:
    """A kubeconfig for the served API with the given ``users[0].user``."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": served.url, "certificate-authority": str(served.ca)}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return path


async def test_a_token_file_is_read_again_after_a_401(served, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("rotated-away\n")
    c = KubeClient(from_kubeconfig(user_kubeconfig(tmp_path / "kc", served, {"tokenFile": str(token_file)})), qps=0)
    try:
        with pytest.raises(ApiError) as e:  # read again after the 401: the same token, no retry
            await c.list("Pod", "default")
        assert e.value.code == 401
        token_file.write_text(TOKEN + "\n")  # the kubelet rotates the projected token
        assert (await c.list("Pod", "default")).items == []  # 401 with the old one, then the new one read
        watch = c.watch("Pod", "default")
        await c.create(pod("after-rotation"))
        ev = await asyncio.wait_for(watch.__anext__(), 5)
        assert ev.object["metadata"]["name"] == "after-rotation"
        await watch.aclose()
    finally:
        await c.close()


async def test_an_exec_plugin_is_run_once_and_again_after_a_401(served, tmp_path):
    runs, token_file = tmp_path / "runs", tmp_path / "token"
    token_file.write_text("expired")
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, pathlib\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')\n"
        f"token = pathlib.Path({str(token_file)!r}).read_text()\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1', 'kind': 'ExecCredential',"
        " 'status': {'token': token}}))\n")
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
                     "args": [str(plugin)], "interactiveMode": "Never"}}
    c = KubeClient(from_kubeconfig(user_kubeconfig(tmp_path / "kc", served, user)), qps=0)
    try:
        with pytest.raises(ApiError) as e:
            await c.get("Pod", "nope", "default")
        assert e.value.code == 401 and runs.read_text() == "xx"  # run, refused, run again: same token
        token_file.write_text(TOKEN)
        await c.create(pod("exec"))
        assert runs.read_text() == "xxx"
        await c.get("Pod", "exec", "default")  # the token is kept: not run again
        assert runs.read_text() == "xxx"
    finally:
        await c.close()


def test_resolve_order(tmp_path, monkeypatch, served):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(ConfigError) as e:
        resolve()
    assert "--kubeconfig" in str(e.value)
    assert resolve(fallbacks=(served.kubeconfig,)).cluster.server == served.url
    monkeypatch.setenv("KUBECONFIG", f"{served.kubeconfig}{os.pathsep}/nonexistent")
    assert resolve().cluster.server == served.url
    assert resolve(server="https://10.0.0.1:6443", token="t").cluster.server == "https://10.0.0.1:6443"
    with pytest.raises(ConfigError):
        resolve(kubeconfig=tmp_path / "missing")
    (tmp_path / "junk").write_text("clusters: 3\n")
    with pytest.raises(ConfigError):
        resolve(kubeconfig=tmp_path / "junk")
    # In a pod: the service account wins over KUBECONFIG.
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token")
    (sa / "namespace").write_text("kubeflow")
    (sa / "ca.crt").write_text("")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr("phalanx.client.kubeconfig.SERVICE_ACCOUNT_DIR", sa)
    cfg = resolve()
    assert cfg.cluster.server == "https://10.96.0.1:443" and cfg.namespace == "kubeflow"
    assert cfg.user.token_file == str(sa / "token")  # re-read when the kubelet rotates it
    assert resolve(in_cluster=False).cluster.server == served.url  # unless told otherwise
    assert resolve(kubeconfig=served.kubeconfig).cluster.server == served.url


def test_token_bucket_reserves_in_order():
    b = TokenBucket(qps=10, burst=2)
    assert [b.reserve(0.0) for _ in range(2)] == [0.0, 0.0]  # the burst
    assert b.reserve(0.0) == pytest.approx(0.1)
    assert b.reserve(0.0) == pytest.approx(0.2)  # queued behind the previous one
    assert b.reserve(1.0) == 0.0  # refilled (capped at the burst)
    assert b.reserve(1.0) == 0.0
    assert b.reserve(1.0) == pytest.approx(0.1)
    unlimited = TokenBucket(qps=0, burst=0)
    assert all(unlimited.reserve(0.0) == 0.0 for _ in range(1000))
    with pytest.raises(ValueError):
        TokenBucket(qps=1, burst=0)


async def test_retry_on_conflict():
    calls = []

    async def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise Conflict("pods", "a")
        return "ok"

    assert await retry_on_conflict(flaky, delay=0) == "ok" and len(calls) == 3

    async def always():
        raise Conflict("pods", "a")

    with pytest.raises(Conflict):
        await retry_on_conflict(always, attempts=2, delay=0)

    async def other():
        calls.append(1)
        raise NotFound("pods", "a")

    calls.clear()
    with pytest.raises(NotFound):
        await retry_on_conflict(other, delay=0)
    assert len(calls) == 1


async def test_rate_limit_applies_to_requests(served):
    c = KubeClient(from_kubeconfig(served.kubeconfig), qps=20, burst=1)
    try:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        for _ in range(5):
            await c.list("Pod", "default")
        assert loop.time() - t0 >= 4 / 20 * 0.9  # 1 burst token, then 20/s
    finally:
        await c.close()
