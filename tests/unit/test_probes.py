"""The ops endpoints: bind addresses as controller-runtime's and Volcano's flags take them,
/metrics of one registry, /healthz and /readyz printed as controller-runtime's healthz handler,
a busy port leaving its server off, and the embedded API server's /metrics behind its token."""
from __future__ import annotations

import socket

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.runtime.probes import OpsEndpoints, parse_bind_address
from phalanx.server.app import make_app, serve
from phalanx.store import Store

LOOP = ("127.0.0.1", 0)


@pytest.mark.parametrize("value,want", [
    (":8080", ("", 8080)), ("127.0.0.1:8081", ("127.0.0.1", 8081)), ("[::1]:11251", ("::1", 11251)),
    ("0", None), ("", None), ("localhost:0", ("localhost", 0)),
])
def test_bind_addresses(value, want):
    assert parse_bind_address("--metrics-bind-address", value) == want


@pytest.mark.parametrize("value", ["8080", "host:", ":http", ":70000", "::1:8080", "a b:1"])
def test_bad_bind_addresses_name_the_flag(value):
    with pytest.raises(ValueError) as e:
        parse_bind_address("--healthz-address", value)
    assert str(e.value).startswith("--healthz-address: ")


async def get(url: str, headers: dict | None = None) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers) as r:
        return r.status, r.headers.get("Content-Type", ""), await r.text()


async def test_metrics_healthz_and_readyz_before_and_after_sync():
    registry = CollectorRegistry()
    Counter("created_pods_total", "The total number of created pods", registry=registry).inc(3)
    synced = {"informers": False}
    ops = OpsEndpoints(registry, {"informer-sync": lambda: synced["informers"], "other": lambda: True})
    assert await ops.start(LOOP, LOOP) == []
    try:
        m, h = ops.metrics_url, ops.health_url
        status, ctype, text = await get(f"{m}/metrics")
        assert status == 200 and ctype.startswith("text/plain") and "version=0.0.4" in ctype
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        assert fams["created_pods"].samples[0].value == 3
        assert "created_pods_created" not in text  # no _created series (Go's client has none)
        assert (await get(f"{h}/healthz"))[::2] == (200, "ok")
        assert (await get(f"{h}/readyz"))[::2] == (500, "[-]informer-sync failed: reason withheld\n[+]other ok\n"
                                                        "readyz check failed\n")
        assert (await get(f"{h}/readyz/informer-sync"))[0] == 500
        assert (await get(f"{h}/readyz?exclude=informer-sync"))[::2] == (200, "ok")
        synced["informers"] = True
        assert (await get(f"{h}/readyz"))[::2] == (200, "ok")
        assert (await get(f"{h}/readyz?verbose"))[::2] == (200, "[+]informer-sync ok\n[+]other ok\n"
                                                                "readyz check passed\n")
        assert (await get(f"{h}/healthz?verbose"))[2] == "[+]ping ok\nhealthz check passed\n"
        assert (await get(f"{h}/readyz/informer-sync"))[::2] == (200, "ok")
        assert (await get(f"{h}/readyz/missing"))[0] == 404
        assert (await get(f"{h}/metrics"))[0] == 404  # each server serves its own paths
    finally:
        await ops.stop()


async def test_a_check_that_raises_fails_and_a_busy_port_leaves_its_server_off():
    def broken() -> bool:
        raise RuntimeError("boom")

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ops = OpsEndpoints(CollectorRegistry(), {"broken": broken})
        problems = await ops.start(("127.0.0.1", port), LOOP)
        try:
            assert len(problems) == 1 and problems[0].startswith(f"metrics on 127.0.0.1:{port}: ")
            assert ops.metrics_url is None
            assert (await get(f"{ops.health_url}/readyz"))[0] == 500
        finally:
            await ops.stop()
    off = OpsEndpoints(CollectorRegistry(), {})
    assert await off.start(None, None) == [] and (off.metrics_url, off.health_url) == (None, None)


async def test_the_api_servers_metrics_need_its_token_and_count_requests():
    registry = CollectorRegistry()
    client = LocalClient(Store(None, FakeClock()))
    runner, url = await serve(make_app(client, "tok", metrics_registry=registry))
    auth = {"Authorization": "Bearer tok"}
    try:
        assert (await get(f"{url}/metrics"))[0] == 403  # anonymous: no token
        assert (await get(f"{url}/api/v1/namespaces/default/pods", auth))[0] == 200
        assert (await get(f"{url}/api/v1/namespaces/default/pods/nope", auth))[0] == 404
        status, _, text = await get(f"{url}/metrics", auth)
        assert status == 200
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in text_string_to_metric_families(text) for s in f.samples}
        base = {"group": "", "version": "v1", "resource": "pods", "subresource": ""}
        assert samples[("apiserver_request_total", tuple(sorted({**base, "verb": "LIST", "code": "200"}.items())))] == 1
        assert samples[("apiserver_request_total", tuple(sorted({**base, "verb": "GET", "code": "404"}.items())))] == 1
    finally:
        await runner.cleanup()
    runner, url = await serve(make_app(client, "tok"))  # no registry: no /metrics
    try:
        assert (await get(f"{url}/metrics", auth))[0] == 404
    finally:
        await runner.cleanup()
