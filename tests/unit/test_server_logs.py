"""The log endpoints over HTTP with the real LogProvider: a deleted pod's log and
a job's logs (Phalanx's ``{plural}/{name}/log``), through HttpClient and raw requests."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import aiohttp
import pytest

from phalanx.api.admission import admit
from phalanx.client.http import HttpClient
from phalanx.client.local import LocalClient
from phalanx.node.logs import LogProvider
from phalanx.objects.clock import Clock
from phalanx.objects.errors import BadRequest, NotFound
from phalanx.server.app import make_app, serve
from phalanx.store.store import Store
from tests.unit.test_node_log_records import job_doc, pod_doc, run_pod

pytestmark = pytest.mark.timeout(20)

TOKEN = "t0ken"
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
JOB_LOG = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/pytest/log"


@pytest.fixture
async def api(tmp_path):
    store = Store(None, Clock(), admission=admit)
    local = LocalClient(store)
    runner, url = await serve(make_app(local, TOKEN, log_provider=LogProvider(tmp_path, local, poll_interval=0.01)))
    client = HttpClient(url, TOKEN)
    raw = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        yield SimpleNamespace(url=url, client=client, local=local, home=tmp_path, raw=raw)
    finally:
        await raw.close()
        await client.close()
        await runner.cleanup()
        store.close()


async def get(api, path: str, **params) -> tuple[int, str]:
    async with api.raw.get(api.url + path, params=params) as resp:
        return resp.status, await resp.text()


async def test_deleted_pod_log_is_served_while_its_job_exists(api):
    job = await api.local.create(job_doc("pytest"))
    await run_pod(api.local, api.home, pod_doc("pytest-worker-0", job), T0, {"pytorch": ["a\n", "b\n"]})
    await api.local.delete("Pod", "pytest-worker-0", "default")
    read = api.client.logs
    assert b"".join([c async for c in read("default", "pytest-worker-0")]) == b"b\n"
    assert b"".join([c async for c in read("default", "pytest-worker-0", previous=True)]) == b"a\n"
    assert b"".join([c async for c in read("default", "pytest-worker-0", follow=True)]) == b"b\n"
    with pytest.raises(BadRequest) as e:
        [c async for c in read("default", "pytest-worker-0", container="zz")]
    assert e.value.message == "container zz is not valid for pod pytest-worker-0"
    with pytest.raises(NotFound) as e:
        [c async for c in read("default", "never-there")]
    assert e.value.message == 'pods "never-there" not found'


async def test_job_log_endpoint(api):
    job = await api.local.create(job_doc("pytest"))
    w = await run_pod(api.local, api.home, pod_doc("pytest-worker-0", job), T0, {"pytorch": ["w1\nw2\n"]})
    m = await run_pod(api.local, api.home, pod_doc("pytest-master-0", job), T0 + timedelta(seconds=1),
                      {"pytorch": ["m1\n"]})
    await api.local.delete("Pod", "pytest-worker-0", "default")
    text = b"".join([c async for c in api.client.job_logs("default", "PyTorchJob", "pytest", tail=1)]).decode()
    assert text == (f"==> pytest-master-0/pytorch (instance {m['metadata']['uid'][:8]}, restart 0) <==\nm1\n\n"
                    f"==> pytest-worker-0/pytorch (instance {w['metadata']['uid'][:8]}, restart 0, pod deleted) <==\n"
                    "w2\n")
    status, body = await get(api, JOB_LOG, limitBytes="10")
    assert (status, body) == (200, "==> pytest")
    status, body = await get(api, JOB_LOG, previous="true")
    assert status == 400 and "a job's log already holds every earlier container" in body
    status, body = await get(api, JOB_LOG, container="nope")
    assert status == 400 and "container nope is not valid for any pod of PyTorchJob pytest" in body
    with pytest.raises(NotFound) as e:
        [c async for c in api.client.job_logs("default", "TFJob", "pytest")]
    assert e.value.message == 'tfjobs.kubeflow.org "pytest" not found'
    status, _ = await get(api, "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/pytest/logs")
    assert status == 404
    async with api.raw.post(api.url + JOB_LOG) as resp:
        assert resp.status == 405


async def test_without_a_provider_that_keeps_logs_a_deleted_pod_is_404(tmp_path):
    class Plain:
        async def read(self, namespace, name, container=None, **kw):
            raise AssertionError("must not be asked about a pod that does not exist")

    store = Store(None, Clock(), admission=admit)
    runner, url = await serve(make_app(LocalClient(store), TOKEN, log_provider=Plain()))
    client = HttpClient(url, TOKEN)
    try:
        with pytest.raises(NotFound):
            [c async for c in client.logs("default", "gone")]
        await LocalClient(store).create(job_doc("pytest"))
        with pytest.raises(NotFound) as e:  # no job_logs: the route answers like a missing log
            [c async for c in client.job_logs("default", "PyTorchJob", "pytest")]
        assert "pytest" in e.value.message
    finally:
        await client.close()
        await runner.cleanup()
        store.close()
