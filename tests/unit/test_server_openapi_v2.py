"""/openapi/v2: gnostic protobuf for kubectl, JSON otherwise, from the v3 models."""
from __future__ import annotations

import json

import aiohttp
import pytest

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.server import openapi_v2, protobuf
from phalanx.server.app import make_app, serve
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(30)


def _gvk(schema) -> list:
    return [json.loads(e.value.yaml) for e in schema.vendor_extension if e.name == "x-kubernetes-group-version-kind"]


def test_protobuf_document_has_every_kind_and_gvks_only_on_custom_resources():
    doc = protobuf.message_class("openapi.v2.Document").FromString(openapi_v2.openapi_v2_protobuf())
    assert doc.swagger == "2.0"
    defs = {d.name: d.value for d in doc.definitions.additional_properties}
    job = defs["org.kubeflow.v1.PyTorchJob"]
    assert _gvk(job) == [[{"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"}]]
    props = {p.name: p.value for p in job.properties.additional_properties}
    assert props["metadata"]._ref == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in defs
    # Built-in kinds: published, but kubectl keeps its compiled-in patch strategies for them.
    assert "io.k8s.api.core.v1.Pod" in defs and _gvk(defs["io.k8s.api.core.v1.Pod"]) == []
    assert list(defs["io.k8s.api.core.v1.Pod"].type.value) == ["object"]


def test_json_has_no_v3_only_keywords():
    text = openapi_v2.openapi_v2_json().decode()
    assert "#/components/schemas/" not in text and '"anyOf"' not in text
    assert json.loads(text)["definitions"]["sh.volcano.scheduling.v1beta1.Queue"]["type"] == "object"


async def test_http_serves_protobuf_to_kubectl_and_json_to_others():
    runner, url = await serve(make_app(LocalClient(Store(None, FakeClock(), admission=admit)), "t"))
    try:
        async with aiohttp.ClientSession(headers={"Authorization": "Bearer t"}) as s:
            async with s.get(url + "/openapi/v2?timeout=32s", headers={"Accept": openapi_v2.PROTOBUF_MEDIA}) as r:
                assert r.status == 200 and r.headers["Content-Type"] == openapi_v2.PROTOBUF_CONTENT_TYPE
                assert await r.read() == openapi_v2.openapi_v2_protobuf()
            async with s.get(url + "/openapi/v2", headers={"Accept": "application/json"}) as r:
                assert r.status == 200 and (await r.json())["swagger"] == "2.0"
    finally:
        await runner.cleanup()
